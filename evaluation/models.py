"""Agent runs, their per-question records with scores, and verdicts (human, judge, code)."""
from __future__ import annotations

from django.conf import settings
from django.db import models

from evaluation.judge.fit import DEFAULT_CONTEXT_TOKENS, DEFAULT_MAX_TOKENS


class Agent(models.Model):
    name = models.CharField(max_length=200, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class AgentRun(models.Model):
    """An imported run folder (per-dimension benchmark.jsonl files) of one agent, scored in one mode."""

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="runs")
    name = models.CharField(max_length=200)
    source_dir = models.CharField(max_length=500, blank=True)
    gold_dir = models.CharField(max_length=500, blank=True,
                                help_text="the tasks folder (benchmark layout, with gold_polygons/) the run was scored "
                                          "against (import_runs --tasks-dir); blank: a release or the studio's tasks")
    scoring_mode = models.CharField(max_length=10, default="dora")
    tau_r = models.FloatField(default=0.2)
    tau_a = models.FloatField(default=1.0)
    dora_score = models.FloatField(null=True, blank=True)
    dimensions = models.JSONField(default=dict, blank=True, help_text="per dimension: dim_score and metrics")
    release = models.ForeignKey("releases.Release", null=True, blank=True, on_delete=models.PROTECT, related_name="runs",
                                help_text="the release version the run was scored on (null: the studio's current tasks)")
    gold_set = models.CharField(max_length=200, blank=True,
                                help_text="the gold set the run was scored against, by name (evaluation.goldset): "
                                          "'release 1.0.0', 'studio tasks (unversioned) <UTC date>' or 'folder <path>'; "
                                          "blank: a run scored before gold sets were named")
    gold_set_digest = models.CharField(max_length=64, blank=True,
                                       help_text="SHA-256 of the gold set (a published release: its manifest_sha256)")
    gold_set_at = models.DateTimeField(null=True, blank=True,
                                       help_text="when the gold set was fixed (a release's publication, the moment the "
                                                 "studio's tasks were read); null: a folder or not known")
    unanswered = models.JSONField(default=list, blank=True,
                                  help_text="the gold set's benchmark tasks the run has no record of, as the evaluator "
                                            "scored them: [{question_id, dimension, task_score, t_any, t_ord, t_em, "
                                            "par_acc, eff}] (evaluation.goldset)")
    rescored_from = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="rescorings",
                                      help_text="the run whose predictions this run re-scored against another gold set "
                                                "(evaluation.services.rescore_run); null: imported")
    protocol = models.CharField(max_length=4, blank=True,
                                help_text="AP (auto-planning) or IF (instruction-following); blank: not known")
    scaffold = models.CharField(max_length=60, blank=True, help_text="ReAct, Plan-then-Execute, Reflexion, ReWOO, ...")
    PERCEPTION_MODES = [("model", "model (the benchmark's networks)"), ("gt", "oracle perception (GT masks)"),
                        ("classical", "classical baselines"), ("unknown", "not known")]
    perception_mode = models.CharField(
        max_length=10, choices=PERCEPTION_MODES, default="unknown",
        help_text="how the agent's seg.* calls were answered: model (the benchmark's protocol), gt (oracle "
                  "perception: never ranked with the benchmark's protocol), classical, or unknown (an imported "
                  "run that does not say)")
    # accounting of a run the studio ran itself (an experiment's repeat: experiments.services.score_experiment
    # stores it through evaluation.services.runs.record_run_accounting); null: an imported run, not known
    prompt_tokens = models.BigIntegerField(null=True, blank=True,
                                           help_text="prompt tokens of the run's model answers (cache hits included); "
                                                     "null: not known (an imported run)")
    completion_tokens = models.BigIntegerField(null=True, blank=True,
                                               help_text="completion tokens of the run's model answers; null: not known")
    cost = models.FloatField(null=True, blank=True,
                             help_text="cost of the run's requests sent, in the configuration's price currency; null: "
                                       "not known, or no price set on the configuration")
    seconds = models.FloatField(null=True, blank=True,
                                help_text="wall-clock seconds of the run's questions (model and tools); null: not known")
    imported_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]


class RunRecord(models.Model):
    """One question of an agent run: the prediction and its scores."""

    run = models.ForeignKey(AgentRun, on_delete=models.CASCADE, related_name="records")
    task = models.ForeignKey("annotation.Task", null=True, blank=True, on_delete=models.SET_NULL, related_name="run_records")
    question_id = models.CharField(max_length=240)
    sample_id = models.CharField(max_length=200)
    task_index = models.IntegerField(default=0)
    dimension = models.CharField(max_length=2)
    predicted_answer = models.JSONField(null=True, blank=True)
    trajectory = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True)
    task_score = models.FloatField(null=True, blank=True)
    field_scores = models.JSONField(default=dict, blank=True)
    n_scored_fields = models.IntegerField(default=0)
    t_any = models.FloatField(null=True, blank=True)
    t_ord = models.FloatField(null=True, blank=True)
    t_em = models.FloatField(null=True, blank=True)
    par_acc = models.FloatField(null=True, blank=True)
    eff = models.FloatField(null=True, blank=True)
    step_matches = models.JSONField(default=list, blank=True)
    elapsed_s = models.FloatField(null=True, blank=True, help_text="the record's elapsed_time: seconds the agent took")
    gold = models.JSONField(default=dict, blank=True,
                            help_text="the gold task at import: {question, tools, trajectory, final_answer} (for judges)")
    in_gold_set = models.BooleanField(default=True,
                                      help_text="a benchmark task of the run's gold set, counted in its DORA score and "
                                                "per-dimension tables (evaluation.goldset); False: a robustness variant "
                                                "(its own table) or a question outside the set")
    robustness = models.JSONField(default=dict, blank=True,
                                  help_text="a variant task's rule outcome at import (evaluation.robustness."
                                            "record_robustness): {kind, params, outcome, decided_by, ...}; {} otherwise")
    # computed by the database from ``robustness`` (never written): whether the record has a stored
    # outcome, so that the leaderboard's robustness section reads those records through the partial
    # index below instead of testing the JSON of every record (a parameter-free WHERE term: SQLite
    # uses a partial index only when the query's term matches its condition literally)
    has_robustness = models.GeneratedField(
        expression=models.ExpressionWrapper(models.Q(robustness__has_key="kind"), output_field=models.BooleanField()),
        output_field=models.BooleanField(), db_persist=True)

    class Meta:
        ordering = ["run_id", "dimension", "question_id"]
        constraints = [models.UniqueConstraint(fields=["run", "question_id"], name="unique_record_per_run")]
        indexes = [models.Index(fields=["run", "question_id"], condition=models.Q(has_robustness=True),
                                name="runrecord_robustness_idx"),
                   # the records in their listing order: exports and the run page read them in it
                   # without sorting the whole table first (bench/lists.py: the CSV's first byte)
                   models.Index(fields=["run", "dimension", "question_id"], name="runrecord_order_idx")]


class Verdict(models.Model):
    """A judgement of one run record with the E1–E6 taxonomy, by a person, a judge model or the rule checker."""

    class Source(models.TextChoices):
        HUMAN = "human"
        JUDGE = "judge"
        CODE = "code"

    record = models.ForeignKey(RunRecord, on_delete=models.CASCADE, related_name="verdicts")
    source = models.CharField(max_length=6, choices=Source.choices)
    annotator = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    judge_name = models.CharField(max_length=200, blank=True, help_text="judge model + prompt version")
    status = models.CharField(max_length=10, default="ok", help_text="ok, or failed (raw text kept)")
    is_correct = models.BooleanField(null=True)
    grade = models.FloatField(null=True, blank=True)
    errors = models.JSONField(default=dict, blank=True, help_text='{"E1": bool, ..., "E6": bool}')
    reasons = models.JSONField(default=dict, blank=True, help_text='{"E4": "step 3 uses ..."}')
    reasoning = models.TextField(blank=True)
    prompt = models.TextField(blank=True)
    raw = models.TextField(blank=True)
    protocol = models.CharField(max_length=40, blank=True, help_text="holistic, stepwise-early-1, stepwise-gold-middle-1, tool-broken, ...")
    prompt_version = models.CharField(max_length=60, blank=True)
    setting = models.CharField(max_length=20, default="holistic", help_text="holistic, step-wise, tool-extraneous, tool-broken, unsolvable")
    regime = models.CharField(max_length=10, default="holistic", help_text="holistic or step-wise")
    judge_is_correct = models.BooleanField(null=True, help_text="the judge's own is_correct (is_correct is derived by the setting's rule)")
    outcome = models.CharField(max_length=12, blank=True, help_text="tool-broken class: replacement, alternative, retry, refusal, other")
    details = models.JSONField(default=dict, blank=True, help_text="e2_subtype, n_steps, step_grades, error_counts, distractors_used, unsolvable_type")
    is_final = models.BooleanField(default=False, help_text="the adjudicated final verdict of the record")
    idempotency_key = models.CharField(max_length=80, null=True, blank=True, unique=True)
    revision = models.IntegerField(default=1, help_text="how many times the person saved this verdict")
    sealed_at = models.DateTimeField(null=True, blank=True,
                                     help_text="a person's verdict marked final by them: from then on the other "
                                               "verdicts of the record are visible to them and it cannot change")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        constraints = [models.UniqueConstraint(
            fields=["record", "annotator"], condition=models.Q(source="human", is_final=False),
            name="one_human_verdict_per_person_record")]


class VerdictRevision(models.Model):
    """Each saved state of a person's verdict, the first included (the verdict row holds the newest)."""

    verdict = models.ForeignKey(Verdict, on_delete=models.CASCADE, related_name="revisions")
    number = models.IntegerField()
    is_correct = models.BooleanField(null=True)
    grade = models.FloatField(null=True, blank=True)
    errors = models.JSONField(default=dict, blank=True)
    reasons = models.JSONField(default=dict, blank=True)
    reasoning = models.TextField(blank=True)
    sealed = models.BooleanField(default=False, help_text="this save marked the verdict final")
    idempotency_key = models.CharField(max_length=80, null=True, blank=True, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["verdict_id", "number"]
        constraints = [models.UniqueConstraint(fields=["verdict", "number"], name="one_revision_number_per_verdict")]


class JudgeConfig(models.Model):
    """An LLM judge endpoint. The API key is never stored: ``api_key_env`` names the variable holding it."""

    name = models.CharField(max_length=100, unique=True)
    base_url = models.CharField(max_length=500)
    model = models.CharField(max_length=200)
    json_mode = models.CharField(max_length=20, default="json_object",
                                 help_text="json_schema, json_object, json_object_schema (llama.cpp) or none")
    api_key_env = models.CharField(max_length=100, blank=True, help_text="environment variable with the key")
    temperature = models.FloatField(default=0.0)
    max_concurrency = models.IntegerField(default=2)
    cost_per_1k_in = models.FloatField(default=0.0)
    cost_per_1k_out = models.FloatField(default=0.0)
    max_tokens = models.IntegerField(default=DEFAULT_MAX_TOKENS, help_text="cap on the judge's answer, sent as max_tokens")
    context_tokens = models.IntegerField(
        default=DEFAULT_CONTEXT_TOKENS, help_text="the endpoint's context size in tokens; prompts are trimmed to fit (0: not checked)")
    version = models.IntegerField(default=1, help_text="bumped when a saved change alters what the judge is sent")
    paused = models.BooleanField(default=False)
    paused_reason = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.name


class JudgeCall(models.Model):
    """One judge call, cached by (prompt version, model, parameters, inputs hash)."""

    cache_key = models.CharField(max_length=64, unique=True)
    config = models.ForeignKey(JudgeConfig, on_delete=models.PROTECT, related_name="calls")
    record = models.ForeignKey(RunRecord, on_delete=models.CASCADE, related_name="judge_calls")
    protocol = models.CharField(max_length=40)
    prompt_version = models.CharField(max_length=60)
    prompt = models.TextField()
    status = models.CharField(max_length=10, help_text="ok or failed")
    raw_texts = models.JSONField(default=list)
    error = models.TextField(blank=True)
    tokens_in = models.IntegerField(default=0)
    tokens_out = models.IntegerField(default=0)
    latency_s = models.FloatField(default=0.0)
    cost_usd = models.FloatField(null=True, blank=True)
    config_version = models.IntegerField(default=1, help_text="the configuration's version when the call was made")
    trimmed = models.JSONField(default=dict, blank=True,
                               help_text="what was cut from the prompt to fit the context: max_obs_chars, chars_removed, estimated tokens, budget")
    verdict = models.ForeignKey(Verdict, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)


class JudgeJob(models.Model):
    """A batch of judge calls (one Celery task), with its progress."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"
        PAUSED = "paused"

    config = models.ForeignKey(JudgeConfig, on_delete=models.PROTECT, related_name="jobs")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    protocol = models.CharField(max_length=10, default="holistic", help_text="holistic or stepwise")
    cuts = models.JSONField(default=list, blank=True, help_text='step-wise cut points, e.g. ["early", "middle", "late"]')
    horizons = models.JSONField(default=list, blank=True, help_text="step-wise numbers of next steps, e.g. [1, 2, 3]")
    blind = models.BooleanField(default=False, help_text="judge without the reference trajectory")
    with_code = models.BooleanField(default=True, help_text="also run the rule checker (source=code)")
    record_ids = models.JSONField(default=list)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    total = models.IntegerField(default=0, help_text="judgements planned")
    done = models.IntegerField(default=0)
    n_ok = models.IntegerField(default=0)
    n_failed = models.IntegerField(default=0)
    n_cached = models.IntegerField(default=0)
    errors = models.JSONField(default=list, blank=True, help_text="[{record, protocol, error}]")
    cost_usd = models.FloatField(default=0.0)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True,
                                        help_text="last progress of a running job (a lost worker leaves it behind)")
    worker = models.CharField(max_length=40, blank=True, default="",
                              help_text="<pid>.<host tag> of the process running it (studio.background)")

    class Meta:
        ordering = ["-id"]


class ScoringItem(models.Model):
    """One slot of the human scoring queue: record × slot (N verdicts per record), claimed with a lease."""

    record = models.ForeignKey(RunRecord, on_delete=models.CASCADE, related_name="scoring_items")
    slot = models.IntegerField(default=1)
    scorer = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    claimed_at = models.DateTimeField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    verdict = models.ForeignKey(Verdict, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    is_gold_check = models.BooleanField(default=False, help_text="a silent gold run with a known verdict")
    expected = models.JSONField(null=True, blank=True, help_text="the known verdict of a gold check")
    draft = models.JSONField(null=True, blank=True, help_text="the scorer's autosaved form")

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["record", "slot"], name="one_item_per_record_slot")]


class Adjudication(models.Model):
    """A reviewer's settlement of a disagreement between verdicts of one record."""

    record = models.ForeignKey(RunRecord, on_delete=models.CASCADE, related_name="adjudications")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    final_verdict = models.ForeignKey(Verdict, on_delete=models.PROTECT, related_name="+")
    considered = models.ManyToManyField(Verdict, related_name="adjudications")
    rationale = models.TextField(blank=True)
    overrides_all = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)


class RunAggregate(models.Model):
    """The leaderboard's sums of one run (``evaluation.leaderboard.run_aggregate``), written with the
    run's records in the scoring transaction, so the page never reads the records.

    ``gold_revision``: the newest ``TaskRevision`` id when the sums were taken. The breakdowns and
    extras depend on the head revision of each record's task; a task whose head is newer than this
    makes the sums of the runs with records on it stale (they are rebuilt then, see
    ``evaluation.services.leaderboard.refresh_run_aggregates``)."""

    run = models.OneToOneField(AgentRun, on_delete=models.CASCADE, related_name="aggregate")
    gold_revision = models.BigIntegerField(default=0)
    n_records = models.IntegerField(default=0)
    n_no_task = models.IntegerField(default=0, help_text="records without a studio task when the sums were taken")
    newest_record = models.BigIntegerField(default=0, help_text="the run's newest record id when the sums were "
                                                                "taken (0: none, or sums older than this field)")
    sums = models.JSONField(default=dict)
    computed_at = models.DateTimeField(auto_now=True)


class LeaderboardBootstrap(models.Model):
    """Bootstrap intervals of the leaderboard (``evaluation.leaderboard.bootstrap_ci``) for one state
    of the runs and records (``version``), computed in the background (``evaluation.jobs``)."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        DONE = "done"
        FAILED = "failed"

    version = models.CharField(max_length=100)
    n_boot = models.IntegerField()
    seed = models.IntegerField()
    status = models.CharField(max_length=6, choices=Status.choices, default=Status.QUEUED)
    result = models.JSONField(null=True, blank=True, help_text="bootstrap_ci's list, one entry per run")
    error = models.TextField(blank=True)
    requested_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["version", "n_boot", "seed"], name="one_bootstrap_per_state")]


class VerdictsSeen(models.Model):
    """A person was shown other people's verdicts of a record (the record page or API once they
    became visible to them, the adjudication page): from then on they cannot score that record
    blind in the queue (``evaluation.services.queue``)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    record = models.ForeignKey(RunRecord, on_delete=models.CASCADE, related_name="verdicts_seen")
    via = models.CharField(max_length=40, help_text="where they were shown: record page, record API, adjudication page")
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "record"], name="verdicts_seen_once_per_person")]


class RunImportJob(models.Model):
    """A run folder uploaded as a zip, imported and scored in the background (never in the
    request): ``evaluation.services.runs``."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    archive = models.CharField(max_length=500, help_text="the stored zip, under STUDIO_DATA_ROOT/uploads/")
    filename = models.CharField(max_length=255, help_text="the uploaded file's name (the run folder's name when the zip has no top folder)")
    agent_name = models.CharField(max_length=200)
    options = models.JSONField(default=dict, blank=True,
                               help_text="{release, protocol, scaffold, queue_share, queue_n} as given at upload")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    stage = models.CharField(max_length=200, blank=True, help_text="what the job is doing now, in words")
    error = models.TextField(blank=True, help_text="the first error of a failed job")
    run = models.ForeignKey(AgentRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    queued = models.JSONField(default=dict, blank=True, help_text="{records, slots} queued for human scoring")
    attempts = models.IntegerField(default=0)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True,
                                        help_text="written every STUDIO_JOB_HEARTBEAT_S while the job runs (studio.background)")
    worker = models.CharField(max_length=40, blank=True, default="",
                              help_text="<pid>.<host tag> of the process running it (studio.background)")
    folder = models.CharField(max_length=500, blank=True, default="",
                              help_text="the folder the zip is unpacked to, under STUDIO_DATA_ROOT/runs/ (the sweep removes it when the job died)")

    class Meta:
        ordering = ["-id"]


class StoredReport(models.Model):
    """A report computed from its input rows, kept by the SHA-256 of what it was computed from
    (``evaluation.services.reports.stored_report``): a page asked again with the same rows reads it
    instead of computing it again; rows that changed give another key, so a kept report is never
    stale. ``value`` is JSON text (NaN allowed; dicts with non-text keys kept as such)."""

    kind = models.CharField(max_length=40, help_text="which report: agreement, ...")
    key = models.CharField(max_length=64, unique=True, help_text="SHA-256 of the kind, the options and the input rows")
    value = models.TextField()
    seconds = models.FloatField(default=0.0, help_text="how long computing it took")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]
