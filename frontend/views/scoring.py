"""Pages of human scoring (queue, keyboard-first form), adjudication, the agreement dashboard and
the judge (configurations, jobs, starting a job from a run). Thin: forms check input, services
change state, selectors read."""
from __future__ import annotations

import json
import secrets
from urllib.parse import urlencode

from django import forms
from django.conf import settings
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_http_methods, require_POST

from evaluation import blind
from evaluation.api import AdjudicationIn, JudgeJobIn
from evaluation.disagreement import DisagreementRules
from evaluation.judge.fit import DEFAULT_CONTEXT_TOKENS, DEFAULT_MAX_TOKENS
from evaluation.judge.verdict import DEFAULT_READING, E_CODES, E_DEFINITIONS, READINGS
from evaluation.leaderboard import figure_png, plot_text
from evaluation.models import AgentRun, JudgeConfig, JudgeJob, RunRecord
from evaluation.selectors import adjudication as adjudication_reads
from evaluation.selectors import judge as judge_reads  # its names are also this module's views
from evaluation.selectors.adjudication import (
    adjudication_record_qs,
    considered,
    recent_adjudications,
    record_disagreements,
)
from evaluation.selectors.queue import (
    my_queue_verdicts,
    queue_overview,
    records_scored_by,
    scorer_accuracy,
    scorer_progress,
    scoring_item_qs,
)
from evaluation.selectors.runs import record_evidence
from evaluation.services.adjudication import adjudicate, scored_by
from evaluation.services.judge import (
    JudgePaused,
    key_variable_unset,
    rerun_job,
    resume_config,
    save_judge_config,
    select_records,
    start_judge_job,
    try_judge_config,
)
from evaluation.services.queue import (
    QueueError,
    QueueFilter,
    add_gold_check,
    claim_item,
    claim_next,
    enqueue_run,
    note_verdicts_seen,
    verdicts_per_record,
)
from evaluation.services.reports import agreement as stored_agreement
from evaluation.services.verdicts import GRADES
from kernel.taxonomy import plan_is_correct
from studio.permissions import Action, can, require

GRADE_KEYS = ("q", "w", "e", "r", "t", "y")  # 0.0 … 1.0, the row under the flag keys 1–6


def error_defs() -> list[dict]:
    """E1–E6 for the forms: ``[{code, name, definition, tooltip, key}]``."""
    return [{"code": c, "name": E_DEFINITIONS[c].name, "definition": E_DEFINITIONS[c].definition,
             "tooltip": E_DEFINITIONS[c].tooltip(), "key": str(i)} for i, c in enumerate(E_CODES, start=1)]


def grade_choices() -> list[dict]:
    return [{"value": g, "label": f"{g:.1f}", "key": k} for g, k in zip(GRADES, GRADE_KEYS)]


def form_token() -> str:
    """A one-time token for a verdict form (``Verdict.idempotency_key``)."""
    return secrets.token_urlsafe(24)


def verdict_form_context(user, record: RunRecord, mode: str, *, item=None, queue_query: str = "",
                         initial: dict | None = None) -> dict:
    """What ``_verdict_form.html`` needs, the same in the three places it appears.

    ``mode``: ``"queue"`` (a held item; ``initial`` = its autosaved draft), ``"record"`` (the
    record page: loads the person's own verdict, locked once final or adjudicated, and refused to
    a person who already sees the other verdicts without having scored) or ``"adjudicate"``
    (``initial`` = the posted form on a re-render). No grade is preselected unless ``initial``
    (or the own verdict) has one."""
    own = blind.own_verdict(user, record) if mode == "record" else None
    locked = status = ""
    revisions = []
    if own is not None:
        revisions = list(own.revisions.order_by("number"))
        initial = initial or {"errors": own.errors, "reasons": own.reasons, "grade": own.grade, "reasoning": own.reasoning}
        if own.sealed_at:
            locked = (f"Your verdict is final since {own.sealed_at:%Y-%m-%d %H:%M} UTC (revision {own.revision}); "
                      f"the other verdicts are shown, and it no longer changes.")
        elif any(v.is_final for v in record.verdicts.all()):
            locked = "This record was adjudicated; its verdicts no longer change."
        else:
            status = (f"Your verdict, revision {own.revision}, saved {(own.updated_at or own.created_at):%Y-%m-%d %H:%M} UTC: "
                      f"still revisable; the other verdicts stay hidden until you mark it final.")
    elif mode == "record":
        if any(a.reviewer_id == user.pk for a in record.adjudications.all()):
            locked = "You adjudicated this record, so you cannot also score it."
        elif any(v.is_final for v in record.verdicts.all()):
            locked = "This record was adjudicated; it takes no new verdicts."
        elif blind.sees_verdicts(user, record):
            locked = ("You can see the other verdicts of this record, so you cannot score it blind. "
                      "Reviewers settle disagreements on the adjudication page instead.")
        elif not can(user, Action.VERDICT_CREATE):
            locked = "Your role does not give verdicts."
    elif mode == "adjudicate" and scored_by(user, record):
        locked = f"You {scored_by(user, record)} this record, so you cannot adjudicate it; another reviewer must."
    initial = initial or {}
    try:
        g0 = float(initial.get("grade"))
    except (TypeError, ValueError):
        g0 = None
    flags = [{**e, "on": bool((initial.get("errors") or {}).get(e["code"])),
              "reason": (initial.get("reasons") or {}).get(e["code"], "")} for e in error_defs()]
    grades = [{**g, "checked": g0 is not None and abs(g0 - g["value"]) < 1e-9} for g in grade_choices()]
    return {"mode": mode, "record": record.pk, "item": item.pk if item is not None else "", "queue_query": queue_query,
            "token": form_token(), "flags": flags, "grades": grades, "reasoning": initial.get("reasoning", ""),
            "override": bool(initial.get("override")), "override_reason": initial.get("override_reason", ""),
            "rationale": initial.get("rationale", ""), "locked": locked, "status": status, "revisions": revisions}


def evidence(record: RunRecord) -> dict:
    """:func:`evaluation.selectors.runs.record_evidence` for display: MCP text observations parsed back
    to JSON (the map's ``geometries`` come from the selector as they are)."""
    ev = record_evidence(record)
    for r in ev["steps"]:
        r["pred"] = _readable_obs(r["pred"]) if r["pred"] is not None else None
    return ev


def _readable_obs(step):
    """A step whose observation is MCP text content (``[{"type": "text", "text": "{...}"}]``) with
    the text parsed back to JSON where it is JSON, for display; other steps unchanged."""
    if not isinstance(step, dict):
        return step
    obs = step.get("obs")
    if isinstance(obs, list) and obs and all(isinstance(o, dict) and o.get("type") == "text" for o in obs):
        texts = [o.get("text", "") for o in obs]
        parsed = []
        for t in texts:
            try:
                parsed.append(json.loads(t))
            except (TypeError, ValueError):
                parsed.append(t)
        return {**step, "obs": parsed[0] if len(parsed) == 1 else parsed}
    return step


# --------------------------------------------------------------------------------------------
# Scoring queue
# --------------------------------------------------------------------------------------------


class EnqueueForm(forms.Form):
    run = forms.IntegerField(min_value=1)
    n = forms.IntegerField(min_value=1, max_value=20, required=False, help_text="human verdicts per record")


class GoldForm(forms.Form):
    record = forms.IntegerField(min_value=1)


def scoring_home(request):
    """Queues with their counts, the start buttons, and (for managers) scorer accuracy."""

    manage = can(request.user, Action.QUEUE_MANAGE)
    held = list(scoring_item_qs().filter(scorer=request.user, verdict__isnull=True).order_by("id")[:20])
    by_agent = blind.sees_queue_agents(request.user)  # a scorer's queue list names no agent (blind scoring)
    return render(request, "frontend/scoring_home.html", {
        "queues": queue_overview(by_agent=by_agent), "by_agent": by_agent, "held": held, "manage": manage,
        "accuracy": scorer_accuracy() if manage else None, "per_record": verdicts_per_record(),
        "runs": AgentRun.objects.select_related("agent").order_by("-id")[:50] if manage and by_agent else [],
        "can_claim": can(request.user, Action.QUEUE_CLAIM),
    })


def _queue(request) -> QueueFilter:
    """The queue the request's query names, as far as the user may choose it
    (``evaluation.blind.queue_params``: a scorer chooses no queue by agent)."""
    return QueueFilter.from_params(blind.queue_params(request.user, request.GET))


@require_http_methods(["GET", "HEAD", "POST"])
def scoring_next(request):
    """POST: claim the next item of the queue given by the query (release, agent, dimension) and
    open it. GET only shows the button that posts: claiming changes state, so a link, a prefetch or
    a cross-site GET never claims (the CSRF token guards the POST)."""

    queue = _queue(request)
    if request.method != "POST":
        return render(request, "frontend/scoring_next.html", {
            "queue": queue, "queue_query": urlencode(queue.as_params()), "can_claim": can(request.user, Action.QUEUE_CLAIM)})
    item = claim_next(request.user, queue)
    if item is None:
        url = reverse("scoring-done")
        params = queue.as_params()
        return redirect(f"{url}?{urlencode(params)}" if params else url)
    url = reverse("scoring-item", args=[item.pk])
    params = queue.as_params()
    return redirect(f"{url}?{urlencode(params)}" if params else url)


def scoring_item(request, pk: int):
    """The keyboard-first scoring form of a held item (blind: no other verdict is shown)."""

    require(request.user, Action.QUEUE_CLAIM)
    item = get_object_or_404(scoring_item_qs(), pk=pk)
    if item.scorer_id != request.user.pk or item.verdict_id:
        messages.warning(request, "That item is not yours to score (submitted, or claimed by someone else).")
        return redirect("scoring-home")
    try:
        claim_item(request.user, item)  # renews the lease; refused once the holder saw the record's other verdicts
    except QueueError as exc:
        messages.warning(request, str(exc))
        return redirect("scoring-home")
    record = item.record
    queue = _queue(request)
    progress = scorer_progress(request.user, queue)
    return render(request, "frontend/scoring_item.html", {
        "item": item, "record": record, "run": record.run, "queue": queue, "ev": evidence(record), "progress": progress,
        "vf": verdict_form_context(request.user, record, "queue", item=item, queue_query=urlencode(queue.as_params()),
                                   initial=item.draft or None),
    })


def scoring_done(request):
    """The end of a queue: what you scored in it (each verdict one click from its record page,
    where a revisable one can still change), and what is left for others."""
    require(request.user, Action.QUEUE_CLAIM)
    queue = _queue(request)
    items = my_queue_verdicts(request.user, queue)
    hide = blind.blind_record_ids(request.user, [it.record_id for it in items])
    for it in items:  # the agent of a verdict still revisable stays hidden (blind scoring)
        it.agent = None if it.record_id in hide else it.record.run.agent.name
    return render(request, "frontend/scoring_done.html", {
        "queue": queue, "items": items,
        "progress": scorer_progress(request.user, queue),
    })


@require_POST
def scoring_enqueue(request):
    form = EnqueueForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"enqueue: {form.errors.as_text()}")
        return redirect("scoring-home")
    run = get_object_or_404(AgentRun, pk=form.cleaned_data["run"])
    try:
        n = enqueue_run(request.user, run, form.cleaned_data.get("n"))
    except ValueError as exc:
        messages.error(request, str(exc))
        return redirect("scoring-home")
    messages.success(request, f"Queued run {run.pk} ({run.agent.name}): {n} new scoring slots.")
    nxt = request.POST.get("next") or ""
    if nxt and url_has_allowed_host_and_scheme(nxt, allowed_hosts={request.get_host()}):
        return redirect(nxt)
    return redirect("scoring-home")


@require_POST
def scoring_gold(request):
    form = GoldForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"gold check: {form.errors.as_text()}")
        return redirect("scoring-home")
    record = get_object_or_404(RunRecord, pk=form.cleaned_data["record"])
    try:
        n = add_gold_check(request.user, record)
    except ValueError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"{record.question_id} is now a silent gold check ({n} slots).")
    return redirect("scoring-home")


# --------------------------------------------------------------------------------------------
# Adjudication
# --------------------------------------------------------------------------------------------


#: candidate records a page of the adjudication queue looks at (``?after=<record id>`` pages on)
ADJUDICATION_PAGE_SIZE = 100


def adjudication_queue(request):
    """Records whose verdicts disagree, oldest first, a page at a time (:data:`ADJUDICATION_PAGE_SIZE`
    candidates; ``evaluation.selectors.adjudication.adjudication_page``); the newest adjudications."""
    require(request.user, Action.VERDICT_ADJUDICATE)
    mine = records_scored_by(request.user)
    try:
        after = max(0, int(request.GET.get("after") or 0))
    except ValueError:
        after = 0
    queue, next_after = adjudication_reads.adjudication_page(ADJUDICATION_PAGE_SIZE, after)
    hide = blind.blind_record_ids(request.user, [x["record"].pk for x in queue])  # records you still score blind
    items = [{**x, "mine": x["record"].pk in mine} for x in queue if x["record"].pk not in hide]
    recent = list(recent_adjudications())
    hide = blind.blind_record_ids(request.user, [a.record_id for a in recent])
    return render(request, "frontend/adjudication_queue.html", {
        "items": items, "recent": [a for a in recent if a.record_id not in hide], "after": after,
        "next_after": next_after})


def _verdict_columns(record) -> list[dict]:
    """Every verdict of the record for the comparison table, considered ones first."""

    rules = DisagreementRules.from_settings()
    pool = considered(record.verdicts.all(), rules)
    ids = {v.pk for v in pool}
    others = [v for v in record.verdicts.all() if v.pk not in ids]
    cols = []
    for v in pool + others:
        who = v.annotator.username if v.annotator_id and v.annotator else v.judge_name or v.source
        cols.append({"v": v, "who": who, "considered": v.pk in ids,
                     "flags": [{"code": c, "on": bool((v.errors or {}).get(c)), "reason": (v.reasons or {}).get(c, "")}
                               for c in E_CODES]})
    return cols


def adjudication_record(request, pk: int):
    """All verdicts with reasons, the trajectories aligned, and the final-verdict form."""

    require(request.user, Action.VERDICT_ADJUDICATE)
    record = get_object_or_404(adjudication_record_qs(), pk=pk)
    if not blind.sees_verdicts(request.user, record):
        raise PermissionDenied(f"You score {record.question_id} blind (a verdict not yet final, or a queue slot you "
                               f"hold): its other verdicts stay hidden from you, so another reviewer adjudicates it.")
    note_verdicts_seen(request.user, record, "adjudication page")  # it shows every verdict: no blind claim after this
    error = None
    posted = None
    if request.method == "POST":
        p = request.POST
        posted = {
            "errors": {c: p.get(c) == "on" for c in E_CODES},
            "reasons": {c: p.get(f"reason-{c}", "") for c in E_CODES},
            "grade": p.get("grade"), "reasoning": p.get("reasoning", ""), "rationale": p.get("rationale", ""),
            "override": p.get("override") == "on", "override_reason": p.get("override_reason", ""),
        }
        # the form, read by the API's input serializer (POST /api/records/<id>/adjudication/)
        data = AdjudicationIn(data={
            "errors": posted["errors"], "reasons": posted["reasons"], "grade": posted["grade"],
            "reasoning": posted["reasoning"], "rationale": posted["rationale"],
            "is_correct": (not plan_is_correct(posted["errors"])) if posted["override"] else None,
            "override_reason": posted["override_reason"], "idempotency_key": p.get("token") or None})
        if not data.is_valid():
            error = "; ".join(f"{k}: {' '.join(map(str, v))}" for k, v in data.errors.items())
        if error is None:
            try:
                adjudicate(request.user, record, **data.validated_data)
            except (ValueError, PermissionDenied) as exc:
                error = str(exc)
            else:
                messages.success(request, f"Final verdict of {record.question_id} recorded.")
                nxt = [x for x in adjudication_reads.adjudication_queue(limit=50) if x["record"].pk != record.pk]
                return redirect("adjudication-record", nxt[0]["record"].pk) if nxt else redirect("adjudication-queue")
        record = get_object_or_404(adjudication_record_qs(), pk=pk)
    columns = _verdict_columns(record)
    verdict_data = [{"id": c["v"].pk, "grade": c["v"].grade, "errors": c["v"].errors or {}, "reasons": c["v"].reasons or {},
                     "is_correct": c["v"].is_correct} for c in columns if c["v"].status == "ok"]
    return render(request, "frontend/adjudication_record.html", {
        "record": record, "run": record.run, "columns": columns, "verdict_data": verdict_data, "ev": evidence(record),
        "pairs": record_disagreements(record), "error_defs": error_defs(), "error": error,
        "vf": verdict_form_context(request.user, record, "adjudicate", initial=posted),
        "adjudications": record.adjudications.select_related("reviewer", "final_verdict").order_by("-id"),
    }, status=400 if error else 200)


# --------------------------------------------------------------------------------------------
# Agreement dashboard
# --------------------------------------------------------------------------------------------


def _report(request):
    """The agreement report under ``?tie_break=`` and ``?reading=studio|apb`` (an unknown value is
    the default); apb re-reads the judges' stored raw answers, no judge call."""
    tie = request.GET.get("tie_break", "exclude")
    if tie not in ("exclude", "incorrect"):
        tie = "exclude"
    reading = request.GET.get("reading") if request.GET.get("reading") in READINGS else DEFAULT_READING
    return stored_agreement(tie_break=tie, reading=reading), tie


def agreement_page(request):
    """Judges and the code checker against the human reference; human–human ceiling; bias;
    breakdowns per dimension, protocol and judge model + prompt version."""
    require(request.user, Action.AGREEMENT_VIEW)
    report, tie = _report(request)
    breakdowns = []
    for key, groups in (report.get("breakdowns") or {}).items():
        for g in groups if isinstance(groups, list) else []:
            breakdowns.append({"by": key, "group": g.get("group") or g.get("key") or {}, "rows": g.get("vs_reference", [])})
    return render(request, "frontend/agreement.html", {
        "report": report, "tie": tie, "codes": E_CODES, "breakdowns": breakdowns,
        "has_data": bool(report.get("vs_reference")),
    })


PLOTS = ("correctness", "flags", "grade")


def agreement_plot(request, name: str):
    """PNG plots of the dashboard (matplotlib, Agg): ``correctness`` (agreement and κ per rater),
    ``flags`` (F1 per flag and rater), ``grade`` (MAE and within-0.2 per rater)."""
    require(request.user, Action.AGREEMENT_VIEW)
    if name not in PLOTS:
        raise Http404("no such plot")
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    report, _ = _report(request)
    rows = [r for r in report.get("vs_reference", []) if r.get("n")]
    fig = Figure(figsize=(8, 3.6), dpi=100)
    ax = fig.add_subplot(1, 1, 1)
    labels = [plot_text(r["rater"]) for r in rows]
    xs = list(range(len(rows)))

    def val(x):
        return float("nan") if x is None else float(x)  # no data is no bar, never a bar of 0

    def mark(xs, values):
        """"no data" written where a value is missing; a short stroke where it is 0."""
        for x, v in zip(xs, values):
            if v is None:
                ax.text(x, 0.02, "no data", rotation=90, ha="center", va="bottom", fontsize=6, color="0.45")
            elif v == 0:
                ax.plot([x - 0.05, x + 0.05], [0.005, 0.005], color="black", linewidth=2)

    if not rows:
        ax.text(0.5, 0.5, "no verdicts to compare yet", ha="center", va="center")
        ax.set_axis_off()
    elif name == "correctness":
        w = 0.38
        ax.bar([x - w / 2 for x in xs], [val(r["correctness"]["agreement"]) for r in rows], w, label="agreement")
        ax.bar([x + w / 2 for x in xs], [val(r["correctness"]["kappa"]) for r in rows], w, label="Cohen's κ")
        mark([x - w / 2 for x in xs], [r["correctness"]["agreement"] for r in rows])
        mark([x + w / 2 for x in xs], [r["correctness"]["kappa"] for r in rows])
        kappas = [r["correctness"]["kappa"] for r in rows if r["correctness"]["kappa"] is not None]
        ax.set_ylim(min([0.0, *kappas]), 1.0)
        ax.set_title("Plan correctness vs the human reference")
    elif name == "flags":
        w = 0.8 / max(1, len(rows))
        for i, r in enumerate(rows):
            fx = [j + i * w - 0.4 + w / 2 for j in range(len(E_CODES))]
            ax.bar(fx, [val(r["flags"][c]["f1"]) for c in E_CODES], w, label=plot_text(r["rater"]))
            mark(fx, [r["flags"][c]["f1"] for c in E_CODES])
        ax.set_xticks(range(len(E_CODES)), E_CODES)
        ax.set_ylim(0, 1.0)
        ax.set_title("Per-flag F1 vs the human reference")
    else:
        w = 0.38
        ax.bar([x - w / 2 for x in xs], [val(r["grade"]["mae"]) for r in rows], w, label="grade MAE")
        ax.bar([x + w / 2 for x in xs], [val(r["grade"]["within_0_2"]) for r in rows], w, label="within 0.2")
        mark([x - w / 2 for x in xs], [r["grade"]["mae"] for r in rows])
        mark([x + w / 2 for x in xs], [r["grade"]["within_0_2"] for r in rows])
        ax.set_ylim(0, 1.0)
        ax.set_title("Grade vs the human reference")
    if rows:
        if name != "flags":
            ax.set_xticks(xs, labels, rotation=15, ha="right", fontsize=8)
        ax.legend(fontsize=8)
        ax.grid(axis="y", alpha=0.3)
    resp = HttpResponse(figure_png(fig), content_type="image/png")
    resp["Cache-Control"] = "no-store"
    return resp


# --------------------------------------------------------------------------------------------
# Judge configurations and jobs
# --------------------------------------------------------------------------------------------


class JudgeConfigForm(forms.Form):
    name = forms.CharField(max_length=100)
    base_url = forms.CharField(max_length=500, required=False, help_text="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8080/v1")
    model = forms.CharField(max_length=200)
    json_mode = forms.ChoiceField(
        choices=[("json_object", "json_object (OpenAI JSON mode)"),
                 ("json_schema", "json_schema (OpenAI structured output; llama.cpp answers 500)"),
                 ("json_object_schema", "json_object + schema (llama.cpp / llama-cpp-python server)"),
                 ("none", "none (no response_format)")],
        label="JSON mode", help_text="how the answer is asked to be JSON; 'Test this configuration' tells whether the server accepts it")
    api_key_env = forms.CharField(max_length=100, required=False, label="API key variable",
                                  help_text="the NAME of the environment variable holding the key (the key is never stored)")
    temperature = forms.FloatField(initial=0.0, min_value=0, max_value=2)
    max_concurrency = forms.IntegerField(initial=2, min_value=1, max_value=32)
    cost_per_1k_in = forms.FloatField(initial=0.0, min_value=0, label="$ per 1k input tokens")
    cost_per_1k_out = forms.FloatField(initial=0.0, min_value=0, label="$ per 1k output tokens")
    max_tokens = forms.IntegerField(initial=DEFAULT_MAX_TOKENS, min_value=16, max_value=32768, label="max tokens", required=False,
                                    help_text="cap on each answer, sent as max_tokens (a verdict needs 150–400)")
    context_tokens = forms.IntegerField(initial=DEFAULT_CONTEXT_TOKENS, min_value=0, label="context size (tokens)", required=False,
                                        help_text="the endpoint's context window; long observations are trimmed so that "
                                                  "the prompt, the answer and a re-ask fit (0: not checked)")

    def clean_max_tokens(self):  # left empty: the default, as a form posted before the field existed
        v = self.cleaned_data.get("max_tokens")
        return DEFAULT_MAX_TOKENS if v is None else v

    def clean_context_tokens(self):
        v = self.cleaned_data.get("context_tokens")
        return DEFAULT_CONTEXT_TOKENS if v is None else v

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # say at the form what the server allows, so that its example is not refused on save
        hosts = ", ".join(settings.STUDIO_JUDGE_ALLOWED_HOSTS) or "none"
        self.fields["base_url"].help_text = (
            f"OpenAI-compatible endpoint. Hosts this server allows: {hosts} (STUDIO_JUDGE_ALLOWED_HOSTS; "
            f"add 127.0.0.1 there for a local server such as http://127.0.0.1:8080/v1). Empty: api.openai.com")
        variables = ", ".join(settings.STUDIO_JUDGE_KEY_VARIABLES) or "none"
        self.fields["api_key_env"].help_text = (
            f"the NAME of the environment variable holding the key (the key is never stored); "
            f"allowed: {variables} (STUDIO_JUDGE_KEY_VARIABLES). Empty: no key")


def judge_configs(request):
    """List judge configurations; maintainers create them here."""

    manage = can(request.user, Action.JUDGE_CONFIGURE)
    form = JudgeConfigForm(request.POST or None)
    status = 200
    if request.method == "POST":
        require(request.user, Action.JUDGE_CONFIGURE)
        if form.is_valid():
            try:
                cfg = save_judge_config(request.user, **form.cleaned_data)
            except ValueError as exc:
                field, _, msg = str(exc).partition(":")
                form.add_error(field if field in form.fields else None, msg.strip() or str(exc))
            else:
                unset = key_variable_unset(cfg.api_key_env)
                if unset:
                    messages.warning(request, f"Judge configuration {cfg.name} saved, but {unset} in this "
                                              f"server's environment: its judge jobs fail until it is.")
                else:
                    messages.success(request, f"Judge configuration {cfg.name} saved.")
                return redirect("judge-configs")
        status = 400
    return render(request, "frontend/judge_configs.html", {
        "configs": judge_reads.judge_configs(), "form": form, "manage": manage,
    }, status=status)


@require_POST
def judge_config_resume(request, pk: int):
    cfg = get_object_or_404(JudgeConfig, pk=pk)
    resume_config(request.user, cfg)
    messages.success(request, f"Judge configuration {cfg.name} resumed.")
    return redirect("judge-configs")


@require_POST
def judge_config_test(request, pk: int):
    """Send one tiny request with a configuration; report latency, model and whether JSON mode works."""
    cfg = get_object_or_404(JudgeConfig, pk=pk)
    r = try_judge_config(request.user, cfg)
    if r["ok"]:
        json_text = {True: "JSON mode works (the answer parses as a JSON object)",
                     False: "JSON mode does NOT work: the answer is not a JSON object"}[bool(r["json_ok"])]
        (messages.success if r["json_ok"] else messages.warning)(
            request, f"{cfg.name}: answered in {r['latency_s']:.2f} s by model {r['model']} (json_mode {r['json_mode']}); "
                     f"{json_text}. Answer: {r['answer'][:120]}")
    else:
        messages.error(request, f"{cfg.name}: no answer after {r['latency_s']:.2f} s — {r['error']}")
    return redirect("judge-configs")


@require_POST
def run_judge(request, pk: int):
    """Start a judge job over a run's records (maintainers; the button on the run page). The form
    is read by the API's input serializer (``evaluation.api.JudgeJobIn``) and goes to the same
    services as ``POST /api/judge/jobs/``: one parsing of the same operation."""

    require(request.user, Action.JUDGE_RUN)
    run = get_object_or_404(AgentRun, pk=pk)
    post = request.POST.copy()
    post["run"] = str(run.pk)  # the run of the page, whatever the form says
    data = JudgeJobIn(data=post)
    if not data.is_valid():
        messages.error(request, "judge: " + "; ".join(f"{k}: {' '.join(map(str, v))}" for k, v in data.errors.items()))
        return redirect("run-detail", pk)
    d = data.validated_data
    config = JudgeConfig.objects.filter(name=d["config"]).first()
    if config is None:
        messages.error(request, f"config: no judge configuration named {d['config']!r}")
        return redirect("run-detail", pk)
    try:
        ids = select_records(run_id=run.pk, sample=d["sample"])
        job = start_judge_job(request.user, config, ids, protocol=d["protocol"], cuts=d["cuts"],
                              horizons=d["horizons"], blind=d["blind"])
    except (ValueError, JudgePaused) as exc:
        messages.error(request, str(exc))
        return redirect("run-detail", pk)
    return redirect("judge-job", job.pk)


def judge_jobs(request):
    return render(request, "frontend/judge_jobs.html", {"jobs": judge_reads.judge_jobs()})


def judge_job(request, pk: int):
    job = get_object_or_404(JudgeJob.objects.select_related("config", "created_by"), pk=pk)
    return render(request, "frontend/judge_job.html", {"job": job, "can_rerun": can(request.user, Action.JUDGE_RUN)})


@require_POST
def judge_job_rerun(request, pk: int):
    job = get_object_or_404(JudgeJob.objects.select_related("config"), pk=pk)
    try:
        new = rerun_job(request.user, job)
    except (ValueError, JudgePaused) as exc:
        messages.error(request, str(exc))
        return redirect("judge-job", pk)
    return redirect("judge-job", new.pk)
