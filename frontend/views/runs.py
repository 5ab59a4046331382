"""Agent run pages: list, run (scores per dimension and per task), record (field scores, step
match table, trajectories side by side, verdicts and the human verdict form)."""
from __future__ import annotations

from django import forms
from django.contrib import messages
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.template.defaultfilters import pluralize
from django.urls import NoReverseMatch, reverse
from django.utils.html import escape
from django.views.decorators.http import require_POST

from evaluation import blind
from evaluation import leaderboard as lb
from evaluation.models import RunImportJob
from evaluation.selectors.judge import judge_configs, record_judge_calls
from evaluation.selectors.robustness import run_robustness
from evaluation.selectors.runs import record_detail_qs, run_import_jobs, run_list, run_records
from evaluation.selectors.verdicts import record_verdicts
from evaluation.services.queue import import_queue_share, note_outcomes_seen, note_verdicts_seen, verdicts_per_record
from evaluation.services.runs import (
    RunImportError,
    RunImportStateError,
    can_rerun,
    is_stale,
    rerun_run_import,
    start_rescore,
    start_run_import,
)
from frontend.views.events import map_config
from frontend.views.scoring import evidence, verdict_form_context
from releases.selectors import release_list
from replay.selectors import latest_successful_replay
from studio.pagination import InvalidCursor, paginate
from studio.permissions import Action, can, require

METRICS = ("t_any", "t_ord", "t_em", "par_acc", "eff")


class RunUploadForm(forms.Form):
    archive = forms.FileField(label="Run folder (zip)", help_text=escape(  # Django renders help_text as HTML
                                  "the benchmark's run layout: <model>_<AP|IF>/<dimension>/benchmark.jsonl"))
    agent = forms.CharField(max_length=200, help_text="the agent (model) the run belongs to")
    release = forms.ChoiceField(choices=[], required=False, label="Gold set",
                                help_text="the gold set the run is scored against (docs/gold-sets.md)")
    protocol = forms.ChoiceField(choices=[("", "from the folder name (<model>_AP / <model>_IF)"), ("AP", "AP: auto-planning"),
                                          ("IF", "IF: instruction-following")], required=False)
    scaffold = forms.CharField(max_length=60, required=False, help_text="ReAct, Plan-then-Execute, Reflexion, ReWOO, …")
    queue_share = forms.FloatField(min_value=0, max_value=1, required=False, label="share queued for human scoring",
                                   help_text="0 to 1 (blank: the studio's setting)")
    queue_n = forms.IntegerField(min_value=1, max_value=20, required=False, label="verdicts per queued record")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # the releases to pick from, newest first, and the studio's current tasks (was a free-text box)
        releases = list(release_list())
        self.fields["release"].choices = [("", "the studio's current tasks (unversioned, dated)")] + [
            (r.version, f"release {r.version} ({r.status}, {r.n_tasks} task{pluralize(r.n_tasks)})") for r in releases]
        # preselected: the newest published release, the gold set a run is usually scored on
        # (the studio's current tasks where none is published)
        self.fields["release"].initial = next((r.version for r in releases if r.status == "published"), "")


def run_list_page(request):
    """Runs newest first; maintainers upload a run folder as a zip here. The upload is checked
    and stored, then imported and scored in the background (never in the request): the page
    lists the import jobs with their progress, result or first error, and re-runs a failed one."""
    form = RunUploadForm(request.POST or None, request.FILES or None,
                         initial={"queue_share": import_queue_share(), "queue_n": verdicts_per_record()})
    status = 200
    if request.method == "POST":
        require(request.user, Action.RUN_IMPORT)
        if form.is_valid():
            job = _start_upload(form, request.user)
            if job is not None:
                return redirect(f"{reverse('run-list')}#import-{job.pk}")
        status = 400
    can_import = can(request.user, Action.RUN_IMPORT)
    return render(request, "frontend/run_list.html", {
        "runs": run_list(), "form": form, "can_import": can_import,
        "imports": [{"job": j, "stale": is_stale(j), "rerun": can_rerun(j)} for j in run_import_jobs()]
        if can_import else [],
    }, status=status)


def _start_upload(form, user):
    d = form.cleaned_data
    upload = d["archive"]
    try:
        return start_run_import(user, upload, d["agent"], filename=upload.name, release=d.get("release") or "",
                                protocol=d.get("protocol") or None, scaffold=d.get("scaffold") or "",
                                queue_share=d.get("queue_share"), queue_n=d.get("queue_n"))
    except RunImportError as exc:
        form.add_error("release" if str(exc).startswith("release:") else None, str(exc))
        return None


@require_POST
def run_import_rerun(request, pk: int):
    """Start a failed import job again (its stored zip and options)."""
    job = get_object_or_404(RunImportJob, pk=pk)
    try:
        rerun_run_import(request.user, job)
    except (RunImportError, RunImportStateError) as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Import {job.pk} ({job.filename}) started again.")
    return redirect(f"{reverse('run-list')}#import-{job.pk}")


@require_POST
def run_rescore(request, pk: int):
    """Re-score the run's stored predictions against another gold set (form field ``release``:
    a version, blank for the studio's current tasks) in the background; the job is followed on
    the runs page like an upload."""
    run = get_object_or_404(run_list(), pk=pk)
    try:
        job = start_rescore(request.user, run, request.POST.get("release", ""))
    except RunImportError as exc:
        messages.error(request, str(exc))
        return redirect("run-detail", pk=run.pk)
    messages.success(request, f"Re-scoring run {run.pk} on {job.options.get('release') or 'the studio tasks'}: "
                              f"import {job.pk} below.")
    return redirect(f"{reverse('run-list')}#import-{job.pk}")


#: records a page of a run's page lists (``?cursor=``, in question id order)
RECORD_PAGE_SIZE = 100


def run_detail_page(request, pk: int):
    """A run: its scores by dimension, its robustness outcomes, and its records
    (:data:`RECORD_PAGE_SIZE` a page, in question id order), those the viewer scores blind left
    out and counted (``evaluation.blind.blind_filter``)."""
    run = get_object_or_404(run_list(), pk=pk)
    dims = [{"dim": d, **v} for d, v in sorted((run.dimensions or {}).items())]
    can_judge = can(request.user, Action.JUDGE_RUN) and _url("run-judge", run.pk) is not None
    # blind scoring (evaluation.blind): the records the viewer must still score blind are not listed
    # with their agent here, nor their robustness outcome; a judge outcome shown counts as seen
    hidden = blind.blind_filter(request.user)
    try:
        records = paginate(request.GET, run_records(run).exclude(hidden), key="question_id",
                           page_size=RECORD_PAGE_SIZE)
    except InvalidCursor as exc:
        raise Http404(str(exc)) from None
    robustness = list(run_robustness(run).exclude(hidden))
    note_outcomes_seen(request.user, [r for r in robustness if r.robustness.get("decided_by") == "judge"], "run page")
    return render(request, "frontend/run_detail.html", {
        "run": run, "dims": dims, "records": records, "n_blind": run_records(run).filter(hidden).count(),
        "metrics": METRICS,
        "metric_help": [(lb.METRIC_LABELS[m], lb.METRIC_HELP[m]) for m in METRICS],
        "can_judge": can_judge, "judge_url": _url("run-judge", run.pk), "enqueue_url": _url("scoring-enqueue"),
        "can_queue": can(request.user, Action.QUEUE_MANAGE) and _url("scoring-enqueue") is not None,
        "judge_configs": list(judge_configs().filter(paused=False)) if can_judge else [],
        "robustness": robustness,
        "rescore_releases": list(release_list().values_list("version", flat=True))
        if can(request.user, Action.RUN_IMPORT) and run.scoring_mode != "stepwise" else None,
    })


def record_detail_page(request, pk: int):
    """A record with its answer field by field, the trajectories aligned by tool, the person's
    own verdict form and — blind scoring — the other verdicts once that verdict is final."""
    record = get_object_or_404(record_detail_qs().prefetch_related("adjudications"), pk=pk)
    replay = latest_successful_replay(record.task) if record.task_id else None
    shown, hidden = blind.visible_verdicts(request.user, record)
    rob = blind.robustness_for(request.user, record)
    # blind until final: no blind claim after this (a judge's robustness outcome shown counts too)
    note_verdicts_seen(request.user, record, "record page", None if rob and rob.get("decided_by") == "judge" else shown)
    own = blind.own_verdict(request.user, record)
    split = record_verdicts(record, [v for v in shown if own is None or v.pk != own.pk])
    return render(request, "frontend/record_detail.html", {
        "record": record, "run": record.run, "agent": blind.agent_name(request.user, record), "rob": rob,
        "ev": evidence(record), "verdicts": split["people"] + split["judges"],
        "code_verdicts": split["code"], "hidden": hidden,
        "judge_calls": record_judge_calls(record) if blind.sees_verdicts(request.user, record) else [],
        "vf": verdict_form_context(request.user, record, "record"),
        "adjudicate_url": _url("adjudication-record", record.pk)
        if can(request.user, Action.VERDICT_ADJUDICATE) and not hidden and blind.sees_verdicts(request.user, record) else None,
        "metrics": [{"label": lb.METRIC_LABELS[m], "help": lb.METRIC_HELP[m], "value": getattr(record, m)} for m in METRICS],
        "gold_replay_id": replay.pk if replay else None,
        "map_config": map_config(record.task.event.layers.all()) if replay else None,
    })


def _url(name: str, *args) -> str | None:
    """The URL of a page of the scoring area, or None while it is not routed."""
    try:
        return reverse(name, args=args)
    except NoReverseMatch:
        return None
