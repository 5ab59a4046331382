"""REST API for agent runs, their records and verdicts, judge jobs, the scoring queue,
adjudication and agreement."""
from __future__ import annotations

from django.shortcuts import get_object_or_404
from django.urls import path, reverse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from evaluation import blind
from evaluation import leaderboard as lb
from evaluation.judge.report import judge_report
from evaluation.judge.stepwise import HORIZONS as STEPWISE_HORIZONS
from evaluation.judge.stepwise import POSITIONS as STEPWISE_POSITIONS
from evaluation.judge.stepwise import planner_view
from evaluation.judge.verdict import READINGS, normalize_reading
from evaluation.models import JudgeConfig, JudgeJob, RunImportJob, RunRecord, ScoringItem
from evaluation.selectors.adjudication import adjudication_queue
from evaluation.selectors.judge import judge_configs, judge_jobs, record_judge_calls
from evaluation.selectors.judge_report import judge_report_rows
from evaluation.selectors.leaderboard import compare_runs
from evaluation.selectors.runs import record_detail_qs, record_evidence, run_list, run_records
from evaluation.services.adjudication import adjudicate
from evaluation.services.judge import STORED_READING, select_records, start_judge_job
from evaluation.services.leaderboard import leaderboard_of_set
from evaluation.services.queue import (
    QueueFilter,
    claim_item,
    claim_next,
    note_verdicts_seen,
    release_item,
    save_draft,
    submit_item,
    submit_record_verdict,
)
from evaluation.services.reports import agreement as stored_agreement
from evaluation.services.runs import rerun_run_import, start_rescore
from evaluation.services.stepwise import import_stepwise_predictions, stepwise_cases
from evaluation.services.verdicts import ERROR_CODES
from kernel.errors import InvalidInput
from studio.api_fields import ID_BOUNDS
from studio.api_views import APIView
from studio.pagination import CursorPagination
from studio.permissions import Action, require


class RunOut(serializers.Serializer):
    id = serializers.IntegerField()
    agent = serializers.CharField(source="agent.name")
    name = serializers.CharField()
    scoring_mode = serializers.CharField()
    dora_score = serializers.FloatField(allow_null=True)
    dimensions = serializers.JSONField()
    gold_set = serializers.CharField(help_text="the gold set the run was scored against (evaluation.goldset)")
    gold_set_digest = serializers.CharField(help_text="SHA-256 of the gold set (a published release: its manifest digest)")
    gold_set_at = serializers.DateTimeField(allow_null=True, help_text="when the gold set was fixed")
    release = serializers.CharField(source="release.version", default=None, help_text="the release version, if any")
    rescored_from = serializers.IntegerField(source="rescored_from_id", allow_null=True,
                                             help_text="the run whose predictions this run re-scored")
    created_at = serializers.DateTimeField()


class RecordListOut(serializers.Serializer):
    id = serializers.IntegerField()
    question_id = serializers.CharField()
    dimension = serializers.CharField()
    task_score = serializers.FloatField(allow_null=True)
    in_gold_set = serializers.BooleanField(help_text="counted in the run's scores; false: a robustness variant or "
                                                     "a question outside the gold set")
    t_any = serializers.FloatField(allow_null=True)
    t_ord = serializers.FloatField(allow_null=True)
    t_em = serializers.FloatField(allow_null=True)
    par_acc = serializers.FloatField(allow_null=True)
    eff = serializers.FloatField(allow_null=True)


class RunDetailOut(RunOut):
    records = RecordListOut(many=True, help_text="the run's records, less those you score blind")
    records_blind = serializers.IntegerField(help_text="how many records are left out: you score them blind (their "
                                                       "agent stays hidden until your verdict is final)")


class VerdictOut(serializers.Serializer):
    id = serializers.IntegerField()
    source = serializers.CharField()
    annotator = serializers.CharField(source="annotator.username", default=None)
    judge_name = serializers.CharField()
    status = serializers.CharField()
    is_correct = serializers.BooleanField(allow_null=True)
    grade = serializers.FloatField(allow_null=True)
    errors = serializers.JSONField()
    reasons = serializers.JSONField()
    reasoning = serializers.CharField()
    protocol = serializers.CharField()
    prompt_version = serializers.CharField()
    is_final = serializers.BooleanField(help_text="the adjudicated verdict of the record")
    revision = serializers.IntegerField(help_text="how many times its author saved it")
    sealed_at = serializers.DateTimeField(allow_null=True, help_text="a person's verdict: when they marked it final (null: still revisable, blind)")
    created_at = serializers.DateTimeField()


class FieldEvidenceOut(serializers.Serializer):
    field = serializers.CharField(help_text="the answer field (a point pair: <base>__point_geo or __point_px)")
    fields = serializers.ListField(child=serializers.CharField(), required=False,
                                   help_text="a point pair: the two answer fields scored as one unit")
    kind = serializers.CharField(help_text="field, point (a pair scored as one) or ignored (typed ignore: not scored)")
    type = serializers.CharField(help_text="the eval_spec type")
    tolerance = serializers.CharField(help_text="the pass rule in words, e.g. |pred − gold| ≤ 1 + 0.2·|gold|")
    gold = serializers.JSONField(help_text="the gold value")
    pred = serializers.JSONField(help_text="the predicted value as the evaluator parses the answer")
    score = serializers.FloatField(allow_null=True, help_text="the stored score from import (null: not scored)")
    passed = serializers.BooleanField(allow_null=True, help_text="score ≥ 1 − 1e-9 (null: not scored)")
    why = serializers.CharField(help_text="the operator's comparison, e.g. |9 − 5| = 4 > 1 + 0.2·|5| = 2")
    recomputed = serializers.FloatField(required=False, allow_null=True,
                                        help_text="today's score where it differs from the stored one (files moved?)")


class GeometryOut(serializers.Serializer):
    field = serializers.CharField()
    type = serializers.CharField()
    frame = serializers.CharField(help_text="geographic (lon/lat, EPSG:4326) or pixel (x = column, y = row)")
    gold = serializers.JSONField(allow_null=True, help_text="GeoJSON Feature of the gold geometry")
    pred = serializers.JSONField(allow_null=True, help_text="GeoJSON Feature of the predicted geometry")
    notes = serializers.ListField(child=serializers.CharField())


class EvidenceOut(serializers.Serializer):
    """What the record page shows, field by field (:func:`evaluation.selectors.runs.record_evidence`)."""

    question = serializers.CharField(allow_blank=True)
    has_gold_answer = serializers.BooleanField(help_text="false: the gold answer is not known here")
    parsed_ok = serializers.BooleanField(help_text="false: the evaluator finds no JSON object in the answer")
    raw = serializers.CharField(allow_null=True, help_text="the answer's text as the agent gave it (null: not text)")
    parsed = serializers.JSONField(help_text="the answer as the evaluator parses it")
    gsd_m = serializers.FloatField(allow_null=True)
    fields = FieldEvidenceOut(many=True)
    steps = serializers.JSONField(help_text="the two trajectories aligned by tool (LCS): "
                                            "[{kind: match|skipped|inserted, gold, pred, gold_raw_index, pred_raw_index, args}]")
    geometries = GeometryOut(many=True, help_text="gold and predicted geometry of polygon and point fields")


class JudgeCallOut(serializers.Serializer):
    id = serializers.IntegerField()
    config = serializers.CharField(source="config.name")
    config_version = serializers.IntegerField(help_text="the configuration's version when the call was made")
    model = serializers.CharField(source="config.model")
    protocol = serializers.CharField()
    prompt_version = serializers.CharField()
    status = serializers.CharField(help_text="ok (read as a verdict), failed (no answer could be read) or error (no answer)")
    raw_texts = serializers.ListField(child=serializers.CharField(allow_blank=True, trim_whitespace=False),
                                      help_text="every answer the judge gave, first one first (re-asks after it), "
                                                "unreadable ones included")
    error = serializers.CharField(help_text="why the last answer could not be read, or why no answer came")
    tokens_in = serializers.IntegerField()
    tokens_out = serializers.IntegerField()
    latency_s = serializers.FloatField()
    trimmed = serializers.JSONField(help_text="what was cut from the prompt to fit the context ({}: nothing)")
    created_at = serializers.DateTimeField()


class RecordOut(RecordListOut):
    run = serializers.IntegerField(source="run_id", allow_null=True,
                                   help_text="the record's run (null while you score the record blind: its run names the agent)")
    agent = serializers.CharField(allow_null=True, help_text="the agent (model) that produced the record "
                                                             "(null while you score the record blind)")
    sample_id = serializers.CharField()
    predicted_answer = serializers.JSONField()
    trajectory = serializers.JSONField()
    error = serializers.CharField(help_text="the run's stored error for this question (the agent crashed or gave up); "
                                            "empty when it answered")
    elapsed_s = serializers.FloatField(allow_null=True, help_text="seconds the agent took (the record's elapsed_time)")
    field_scores = serializers.JSONField()
    step_matches = serializers.JSONField()
    verdicts = VerdictOut(many=True, help_text="blind scoring: only the caller's own verdict until they mark it final "
                                               "(without one: all for reviewers and maintainers, none for scorers)")
    verdicts_hidden = serializers.IntegerField(help_text="how many verdicts the blind rule hides")
    judge_calls = JudgeCallOut(many=True, required=False,
                               help_text="the judge's calls with their raw answers (empty while you score the record blind)")
    evidence = EvidenceOut(help_text="the answer field by field and the steps aligned, as the record page shows them")


class VerdictIn(serializers.Serializer):
    errors = serializers.DictField(child=serializers.BooleanField(), help_text="{E1..E6: bool}")
    reasons = serializers.DictField(child=serializers.CharField(allow_blank=True), required=False, default=dict)
    grade = serializers.FloatField(min_value=0, max_value=1)
    reasoning = serializers.CharField(required=False, allow_blank=True, default="")
    is_correct = serializers.BooleanField(required=False, allow_null=True, default=None)
    override_reason = serializers.CharField(required=False, allow_blank=True, default="")
    idempotency_key = serializers.CharField(required=False, allow_blank=True, allow_null=True, default=None, max_length=80,
                                            help_text="the form's one-time token: a resubmission creates nothing")

    def validate_errors(self, value):
        unknown = set(value) - set(ERROR_CODES)
        if unknown:
            raise serializers.ValidationError(f"unknown flag(s): {', '.join(sorted(unknown))}")
        return value


class PersonVerdictIn(VerdictIn):
    final = serializers.BooleanField(required=False, default=True,
                                     help_text="mark the verdict final: the record's other verdicts become visible to you "
                                               "and it can no longer change (false: a revisable, still blind verdict)")


class RunListView(APIView):
    """Agent runs, newest first, a page at a time."""

    pagination_class = CursorPagination

    @extend_schema(responses=RunOut(many=True))
    def get(self, request):
        return self.paginated(run_list(), RunOut)


class RunDetailView(APIView):
    @extend_schema(responses=RunDetailOut)
    def get(self, request, pk: int):
        run = get_object_or_404(run_list(), pk=pk)
        data = RunOut(run).data
        records = list(run_records(run))
        hide = blind.blind_record_ids(request.user, [r.pk for r in records])  # blind scoring: not listed with the agent
        data["records"] = RecordListOut([r for r in records if r.pk not in hide], many=True).data
        data["records_blind"] = len(hide)
        return Response(data)


class RecordDetailView(APIView):
    @extend_schema(responses=RecordOut)
    def get(self, request, pk: int):
        record = get_object_or_404(record_detail_qs(), pk=pk)
        shown, hidden = blind.visible_verdicts(request.user, record)
        note_verdicts_seen(request.user, record, "record API", shown)  # blind until final: no blind claim after this
        record.verdicts_hidden = hidden
        record.evidence = record_evidence(record)
        record.agent = blind.agent_name(request.user, record)
        data = RecordOut(record).data
        if record.agent is None:
            data["run"] = None
        data["verdicts"] = VerdictOut(sorted(shown, key=lambda v: -v.pk), many=True).data
        data["verdicts_hidden"] = hidden
        data["judge_calls"] = JudgeCallOut(record_judge_calls(record) if blind.sees_verdicts(
            request.user, record) else [], many=True).data
        return Response(data)


class RecordVerdictView(APIView):
    @extend_schema(request=PersonVerdictIn, responses={201: VerdictOut, 200: VerdictOut, 409: None})
    def post(self, request, pk: int):
        """Give (201) or revise (200) your verdict of the record; 409 once it is final or adjudicated."""
        record = get_object_or_404(RunRecord, pk=pk)
        data = PersonVerdictIn(data=request.data)
        data.is_valid(raise_exception=True)
        fields = dict(data.validated_data)
        seal = fields.pop("final")
        verdict = submit_record_verdict(request.user, record, seal=seal, **fields)
        return Response(VerdictOut(verdict).data, status=201 if verdict.revision == 1 else 200)


class JudgeConfigOut(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    base_url = serializers.CharField()
    model = serializers.CharField()
    json_mode = serializers.CharField()
    api_key_env = serializers.CharField(help_text="the name of the variable holding the key (never the key)")
    temperature = serializers.FloatField()
    max_concurrency = serializers.IntegerField()
    max_tokens = serializers.IntegerField(help_text="cap on each answer, sent as max_tokens")
    context_tokens = serializers.IntegerField(help_text="the endpoint's context size; prompts are trimmed to fit (0: not checked)")
    version = serializers.IntegerField(help_text="bumped when what the judge is sent changes; verdicts are named "
                                                 "'<name> v<version>@<prompt version>'")
    paused = serializers.BooleanField()
    paused_reason = serializers.CharField()


class JudgeJobOut(serializers.Serializer):
    id = serializers.IntegerField()
    config = serializers.CharField(source="config.name")
    protocol = serializers.CharField()
    cuts = serializers.JSONField()
    horizons = serializers.JSONField()
    status = serializers.CharField()
    total = serializers.IntegerField()
    done = serializers.IntegerField()
    n_ok = serializers.IntegerField()
    n_failed = serializers.IntegerField()
    n_cached = serializers.IntegerField()
    errors = serializers.JSONField()
    reading = serializers.SerializerMethodField(
        help_text="the reading its stored verdicts (n_ok, n_failed) were made under; ?reading=apb on "
                  "/api/judge/report/ re-reads the stored answers, no new call")

    def get_reading(self, obj) -> str:
        return STORED_READING
    cost_usd = serializers.FloatField()
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)


class JudgeJobIn(serializers.Serializer):
    config = serializers.CharField(help_text="judge configuration name")
    run = serializers.IntegerField(required=False, allow_null=True, default=None, **ID_BOUNDS)
    release = serializers.CharField(required=False, allow_blank=True, default="")
    agent = serializers.CharField(required=False, allow_blank=True, default="")
    dimension = serializers.CharField(required=False, allow_blank=True, default="")
    protocol = serializers.ChoiceField(choices=["holistic", "stepwise"], default="holistic")
    cuts = serializers.ListField(child=serializers.ChoiceField(choices=["early", "middle", "late"]), required=False,
                                 default=["early", "middle", "late"])
    horizons = serializers.ListField(child=serializers.IntegerField(min_value=1, max_value=3), required=False, default=[1])
    sample = serializers.IntegerField(required=False, allow_null=True, min_value=1, default=None)
    blind = serializers.BooleanField(required=False, default=False)

    def validate(self, data):
        if not data.get("run") and not data.get("release"):
            raise serializers.ValidationError("give run or release")
        return data


class JudgeConfigListView(APIView):
    pagination_class = CursorPagination
    cursor_key = "name"

    @extend_schema(responses=JudgeConfigOut(many=True))
    def get(self, request):
        return self.paginated(judge_configs(), JudgeConfigOut)


class JudgeJobListView(APIView):
    pagination_class = CursorPagination

    @extend_schema(responses=JudgeJobOut(many=True))
    def get(self, request):
        return self.paginated(judge_jobs(limit=None), JudgeJobOut)

    @extend_schema(request=JudgeJobIn, responses={201: JudgeJobOut})
    def post(self, request):
        data = JudgeJobIn(data=request.data)
        data.is_valid(raise_exception=True)
        d = data.validated_data
        require(request.user, Action.JUDGE_RUN)
        config = get_object_or_404(JudgeConfig, name=d["config"])
        ids = select_records(run_id=d["run"], release=d["release"] or None, agent=d["agent"] or None,
                             dimension=d["dimension"] or None, sample=d["sample"])
        job = start_judge_job(request.user, config, ids, protocol=d["protocol"], cuts=d["cuts"],
                              horizons=d["horizons"], blind=d["blind"])
        job.refresh_from_db()
        return Response(JudgeJobOut(job).data, status=201)


class JudgeJobDetailView(APIView):
    @extend_schema(responses=JudgeJobOut)
    def get(self, request, pk: int):
        return Response(JudgeJobOut(get_object_or_404(JudgeJob.objects.select_related("config"), pk=pk)).data)


# ---------------------------------------------------------------------------------------------
# Scoring queue
# ---------------------------------------------------------------------------------------------


class QueueIn(serializers.Serializer):
    item = serializers.IntegerField(required=False, allow_null=True, default=None, **ID_BOUNDS,
                                    help_text="claim this item (a direct claim) instead of the next of the queue")
    release = serializers.CharField(required=False, allow_blank=True, default="")
    agent = serializers.CharField(required=False, allow_blank=True, default="",
                                  help_text="queue managers only; ignored for a scorer (blind scoring: no queue by agent)")
    dimension = serializers.CharField(required=False, allow_blank=True, default="")


class ScoringItemOut(serializers.Serializer):
    id = serializers.IntegerField()
    record = serializers.IntegerField(source="record_id")
    slot = serializers.IntegerField()
    lease_expires_at = serializers.DateTimeField(allow_null=True)
    draft = serializers.JSONField(allow_null=True)
    url = serializers.SerializerMethodField()

    def get_url(self, obj) -> str:
        return reverse("scoring-item", args=[obj.pk])


class ScoringSubmitIn(PersonVerdictIn):
    pass


class ScoringSubmitOut(serializers.Serializer):
    verdict = VerdictOut()
    next_url = serializers.CharField(help_text="where the next item of the same queue opens")


class ScoringDraftIn(serializers.Serializer):
    draft = serializers.DictField(help_text="the form state as the page keeps it")


class ScoringClaimView(APIView):
    @extend_schema(request=QueueIn, responses={200: ScoringItemOut, 204: None, 409: None})
    def post(self, request):
        """Claim the next item of the queue (204: none left), or the given ``item`` (409 with the
        reason when refused: submitted, held by another, or you saw the record's other verdicts)."""
        data = QueueIn(data=request.data)
        data.is_valid(raise_exception=True)
        if data.validated_data.get("item") is not None:
            item = get_object_or_404(ScoringItem, pk=data.validated_data["item"])
            return Response(ScoringItemOut(claim_item(request.user, item)).data)
        item = claim_next(request.user, QueueFilter.from_params(blind.queue_params(request.user, data.validated_data)))
        if item is None:
            return Response(status=204)
        return Response(ScoringItemOut(item).data)


class ScoringDraftView(APIView):
    @extend_schema(request=ScoringDraftIn, responses={200: ScoringItemOut})
    def put(self, request, pk: int):
        data = ScoringDraftIn(data=request.data)
        data.is_valid(raise_exception=True)
        item = save_draft(request.user, get_object_or_404(ScoringItem, pk=pk), data.validated_data["draft"])
        return Response(ScoringItemOut(item).data)


class ScoringSubmitView(APIView):
    @extend_schema(request=ScoringSubmitIn, responses={201: ScoringSubmitOut})
    def post(self, request, pk: int):
        item = get_object_or_404(ScoringItem, pk=pk)
        data = ScoringSubmitIn(data=request.data)
        data.is_valid(raise_exception=True)
        fields = dict(data.validated_data)
        seal = fields.pop("final")
        verdict = submit_item(request.user, item, seal=seal, **fields)
        nxt = reverse("scoring-next")
        params = request.query_params.urlencode()
        return Response({"verdict": VerdictOut(verdict).data, "next_url": f"{nxt}?{params}" if params else nxt},
                        status=201)


class ScoringReleaseView(APIView):
    @extend_schema(request=None, responses={204: None})
    def post(self, request, pk: int):
        release_item(request.user, get_object_or_404(ScoringItem, pk=pk))
        return Response(status=204)


# ---------------------------------------------------------------------------------------------
# Adjudication and agreement
# ---------------------------------------------------------------------------------------------


class AdjudicationIn(VerdictIn):
    rationale = serializers.CharField(required=False, allow_blank=True, default="")


class AdjudicationOut(serializers.Serializer):
    id = serializers.IntegerField()
    record = serializers.IntegerField(source="record_id")
    reviewer = serializers.CharField(source="reviewer.username", default=None)
    final_verdict = VerdictOut()
    rationale = serializers.CharField()
    overrides_all = serializers.BooleanField()
    considered = serializers.SerializerMethodField()

    def get_considered(self, obj) -> list[int]:
        return sorted(v.pk for v in obj.considered.all())


class AdjudicationQueueOut(serializers.Serializer):
    record = serializers.IntegerField(source="record.pk")
    question_id = serializers.CharField(source="record.question_id")
    agent = serializers.CharField(source="record.run.agent.name")
    reasons = serializers.ListField(child=serializers.CharField())
    n_verdicts = serializers.SerializerMethodField()

    def get_n_verdicts(self, obj) -> int:
        return len(obj["verdicts"])


class AdjudicationQueueView(APIView):
    @extend_schema(responses=AdjudicationQueueOut(many=True))
    def get(self, request):
        require(request.user, Action.VERDICT_ADJUDICATE)
        items = adjudication_queue()
        hide = blind.blind_record_ids(request.user, [x["record"].pk for x in items])
        return Response(AdjudicationQueueOut([x for x in items if x["record"].pk not in hide], many=True).data)


class AdjudicateView(APIView):
    @extend_schema(request=AdjudicationIn, responses={201: AdjudicationOut})
    def post(self, request, pk: int):
        record = get_object_or_404(RunRecord, pk=pk)
        data = AdjudicationIn(data=request.data)
        data.is_valid(raise_exception=True)
        adj = adjudicate(request.user, record, **data.validated_data)
        return Response(AdjudicationOut(adj).data, status=201)


def _reading_param(request) -> str:
    """``?reading=`` of a judge figure: ``studio`` (default) or ``apb``; 400 otherwise."""
    try:
        return normalize_reading(request.query_params.get("reading"))
    except ValueError as exc:
        raise InvalidInput(f"reading: {exc}", field="reading") from None


class AgreementView(APIView):
    @extend_schema(parameters=[OpenApiParameter("tie_break", str, enum=["exclude", "incorrect"]),
                               OpenApiParameter("reading", str, enum=list(READINGS))],
                   responses={200: dict})
    def get(self, request):
        require(request.user, Action.AGREEMENT_VIEW)
        tie = request.query_params.get("tie_break", "exclude")
        if tie not in ("exclude", "incorrect"):
            raise InvalidInput("tie_break: exclude or incorrect")
        reading = _reading_param(request)
        return Response(stored_agreement(tie_break=tie, reading=reading))


class StepwiseCasesQuery(serializers.Serializer):
    positions = serializers.ListField(child=serializers.ChoiceField(choices=list(STEPWISE_POSITIONS)),
                                      required=False, default=["middle"])
    horizons = serializers.ListField(child=serializers.ChoiceField(choices=list(STEPWISE_HORIZONS)),
                                     required=False, default=[1])


class StepwisePredictionsIn(StepwiseCasesQuery):
    planner = serializers.CharField(max_length=200)
    predictions = serializers.CharField(help_text="JSON lines: {case_id, predicted_steps}", trim_whitespace=False)
    name = serializers.CharField(max_length=200, required=False)


class StepwiseCasesView(APIView):
    """The benchmark's step-wise cases of a run's gold trajectories, as the planner sees them
    (never the expected steps), and the questions too short for a case."""

    @extend_schema(parameters=[OpenApiParameter("positions", str, many=True), OpenApiParameter("horizons", int, many=True)],
                   responses={200: dict})
    def get(self, request, pk: int):
        run = get_object_or_404(run_list(), pk=pk)
        q = StepwiseCasesQuery(data={"positions": request.query_params.getlist("positions") or ["middle"],
                                     "horizons": request.query_params.getlist("horizons") or [1]})
        q.is_valid(raise_exception=True)
        cases, skipped = stepwise_cases(run, q.validated_data["positions"], q.validated_data["horizons"])
        return Response({"cases": [planner_view(c) for c in cases], "skipped": skipped})


class StepwisePredictionsView(APIView):
    """Import a planner's predictions for a run's step-wise cases as a new run (``run.import``)."""

    @extend_schema(request=StepwisePredictionsIn, responses={201: dict})
    def post(self, request, pk: int):
        run = get_object_or_404(run_list(), pk=pk)
        data = StepwisePredictionsIn(data=request.data)
        data.is_valid(raise_exception=True)
        d = data.validated_data
        require(request.user, Action.RUN_IMPORT)
        new = import_stepwise_predictions(request.user, run, d["planner"], d["predictions"],
                                          positions=d["positions"], horizons=d["horizons"], name=d.get("name"),
                                          source="predictions")
        return Response({"run_id": new.pk, "name": new.name, "records": new.records.count()}, status=201)


class RunImportJobOut(serializers.Serializer):
    id = serializers.IntegerField()
    filename = serializers.CharField()
    agent = serializers.CharField(source="agent_name")
    status = serializers.CharField(help_text="queued, running, done or failed")
    stage = serializers.CharField(help_text="what the job is doing now, in words")
    error = serializers.CharField(help_text="the first error of a failed job (blank otherwise)")
    run = serializers.IntegerField(source="run_id", allow_null=True, help_text="the imported run, once done")
    queued = serializers.JSONField(help_text="{records, slots} queued for human scoring, once done")
    attempts = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)


class RunImportJobView(APIView):
    """A run zip's background import (``run.import``): its progress, result or first error."""

    @extend_schema(responses=RunImportJobOut)
    def get(self, request, pk: int):
        require(request.user, Action.RUN_IMPORT)
        return Response(RunImportJobOut(get_object_or_404(RunImportJob, pk=pk)).data)


class RunImportRerunView(APIView):
    @extend_schema(request=None, responses={200: RunImportJobOut, 409: None})
    def post(self, request, pk: int):
        """Start a failed import again (409 with the reason when it is not failed or its zip is gone)."""
        job = get_object_or_404(RunImportJob, pk=pk)
        return Response(RunImportJobOut(rerun_run_import(request.user, job)).data)


class RunRescoreIn(serializers.Serializer):
    release = serializers.CharField(required=False, allow_blank=True, default="",
                                    help_text="the release version to score against (blank: the studio's current tasks)")


class RunRescoreView(APIView):
    @extend_schema(request=RunRescoreIn, responses={202: RunImportJobOut, 400: None, 403: None})
    def post(self, request, pk: int):
        """Re-score the run's stored predictions against another gold set in the background
        (``run.import``): a new run named by its set, the old one stays. Answers the job (follow
        it at ``/api/run-imports/<id>/``; its ``run`` is the new run once done)."""
        run = get_object_or_404(run_list(), pk=pk)
        data = RunRescoreIn(data=request.data)
        data.is_valid(raise_exception=True)
        job = start_rescore(request.user, run, data.validated_data["release"])
        return Response(RunImportJobOut(job).data, status=202)


class JudgeReportView(APIView):
    """The judge's aggregate report (:func:`evaluation.judge.report.judge_report`) over the stored
    judge and rule-checker verdicts: per setting x split x regime x judge x tested agent."""

    @extend_schema(parameters=[OpenApiParameter("reading", str, enum=list(READINGS))], responses={200: dict})
    def get(self, request):
        """``?reading=studio|apb`` (default studio): apb re-reads the stored raw answers as the planning
        benchmark's code does, without a judge call; the body's ``reading`` names it."""
        require(request.user, Action.AGREEMENT_VIEW)
        reading = _reading_param(request)
        return Response(judge_report(judge_report_rows(reading=reading), reading=reading))


class LeaderboardView(APIView):
    """One gold set's leaderboard, the page's official table (``evaluation.services.leaderboard.leaderboard_of_set``):
    runs on other sets are never ranked in it. Aggregates per run only (no record beside its agent)."""

    @extend_schema(parameters=[OpenApiParameter("set", str, description="a set's ranking key, as listed in "
                                                "``sets`` (default: the newest published release with runs)")],
                   responses={200: dict})
    def get(self, request):
        """``{gold_set: {key, label, n_runs, newest_run, published}, sets: [...], dimensions, rows:
        [{run_id, agent, label, mode, avg, dims, ..., gold_set, gold_set_key}]}``; every row names its set."""
        _runs, data = leaderboard_of_set(request.query_params.get("set") or None)
        shown = data["gold_set"] or {}
        rows = [{**row, "gold_set": shown.get("label"), "gold_set_key": shown.get("key")} for row in data["official"]]
        return Response(lb.json_ready({"gold_set": data["gold_set"], "sets": data["sets"],
                                       "dimensions": list(lb.DIMENSIONS), "rows": rows}))


class LeaderboardCompareQuery(serializers.Serializer):
    a = serializers.IntegerField(**ID_BOUNDS, help_text="run A's id")
    b = serializers.IntegerField(**ID_BOUNDS, help_text="run B's id (the difference is B − A)")


class LeaderboardCompareView(APIView):
    """The paired comparison of two runs on one gold set (``?a=&b=``; B − A per dimension and task,
    paired bootstrap interval and sign-flip permutation test: ``evaluation.paired``), as the
    compare page shows it; runs on two sets are refused (400)."""

    @extend_schema(parameters=[LeaderboardCompareQuery], responses={200: dict})
    def get(self, request):
        q = LeaderboardCompareQuery(data=request.query_params)
        q.is_valid(raise_exception=True)
        out = compare_runs(q.validated_data["a"], q.validated_data["b"])
        if "error" in out:
            raise InvalidInput(out["error"])
        return Response(lb.json_ready(out))


urlpatterns = [
    path("runs/", RunListView.as_view(), name="api-runs"),
    path("runs/<int:pk>/", RunDetailView.as_view(), name="api-run"),
    path("runs/<int:pk>/rescore/", RunRescoreView.as_view(), name="api-run-rescore"),
    path("runs/<int:pk>/stepwise-cases/", StepwiseCasesView.as_view(), name="api-run-stepwise-cases"),
    path("runs/<int:pk>/stepwise-predictions/", StepwisePredictionsView.as_view(), name="api-run-stepwise-predictions"),
    path("run-imports/<int:pk>/", RunImportJobView.as_view(), name="api-run-import"),
    path("run-imports/<int:pk>/rerun/", RunImportRerunView.as_view(), name="api-run-import-rerun"),
    path("records/<int:pk>/", RecordDetailView.as_view(), name="api-record"),
    path("records/<int:pk>/verdicts/", RecordVerdictView.as_view(), name="api-record-verdicts"),
    path("records/<int:pk>/adjudication/", AdjudicateView.as_view(), name="api-record-adjudicate"),
    path("judge/configs/", JudgeConfigListView.as_view(), name="api-judge-configs"),
    path("judge/jobs/", JudgeJobListView.as_view(), name="api-judge-jobs"),
    path("judge/jobs/<int:pk>/", JudgeJobDetailView.as_view(), name="api-judge-job"),
    path("judge/report/", JudgeReportView.as_view(), name="api-judge-report"),
    path("scoring/claim/", ScoringClaimView.as_view(), name="api-scoring-claim"),
    path("scoring/items/<int:pk>/draft/", ScoringDraftView.as_view(), name="api-scoring-draft"),
    path("scoring/items/<int:pk>/submit/", ScoringSubmitView.as_view(), name="api-scoring-submit"),
    path("scoring/items/<int:pk>/release/", ScoringReleaseView.as_view(), name="api-scoring-release"),
    path("adjudication/", AdjudicationQueueView.as_view(), name="api-adjudication-queue"),
    path("agreement/", AgreementView.as_view(), name="api-agreement"),
    path("leaderboard/", LeaderboardView.as_view(), name="api-leaderboard"),
    path("leaderboard/compare/", LeaderboardCompareView.as_view(), name="api-leaderboard-compare"),
]
