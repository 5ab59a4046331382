"""Agent run pages: list, run (scores per dimension and per task), record (field scores, step
match table, trajectories side by side, verdicts and the human verdict form)."""
from __future__ import annotations

from django.shortcuts import get_object_or_404, render
from django.urls import NoReverseMatch, reverse

from evaluation import selectors
from frontend.views_events import map_config
from replay.services import latest_successful_replay
from studio.permissions import can

METRICS = ("t_any", "t_ord", "t_em", "par_acc", "eff")
#: Every metric abbreviation with its meaning (DORA's evaluator; dora/evaluation.py), shown in place.
METRIC_LABELS = {
    "t_any": ("T-ANY", "tool recall in any order: share of the gold tools the agent called"),
    "t_ord": ("T-ORD", "tools in order: longest common subsequence of the tool sequences / gold steps"),
    "t_em": ("T-EM", "exact match: length of the common prefix of the tool sequences / gold steps"),
    "par_acc": ("ParAcc", "argument accuracy: matching arguments of the gold and predicted step at the same position, "
                          "averaged over gold steps"),
    "eff": ("EFF", "efficiency: gold steps / max(predicted steps, gold steps)"),
}


def run_list_page(request):
    return render(request, "frontend/run_list.html", {"runs": selectors.run_list()})


def run_detail_page(request, pk: int):
    run = get_object_or_404(selectors.run_list(), pk=pk)
    dims = [{"dim": d, **v} for d, v in sorted((run.dimensions or {}).items())]
    can_judge = can(request.user, "judge.run") and _url("run-judge", run.pk) is not None
    return render(request, "frontend/run_detail.html", {
        "run": run, "dims": dims, "records": selectors.run_records(run), "metrics": METRICS,
        "can_judge": can_judge, "judge_url": _url("run-judge", run.pk), "enqueue_url": _url("scoring-enqueue"),
        "can_queue": can(request.user, "queue.manage") and _url("scoring-enqueue") is not None,
        "judge_configs": list(selectors.judge_configs().filter(paused=False)) if can_judge else [],
    })


def record_detail_page(request, pk: int):
    """A record with its answer field by field, the trajectories aligned by tool, the person's
    own verdict form and — blind scoring — the other verdicts once that verdict is final."""
    from frontend.views_scoring import evidence, verdict_form_context

    record = get_object_or_404(selectors.record_detail_qs().prefetch_related("adjudications"), pk=pk)
    replay = latest_successful_replay(record.task) if record.task_id else None
    shown, hidden = selectors.visible_verdicts(request.user, record)
    own = selectors.own_verdict(request.user, record)
    split = selectors.record_verdicts(record, [v for v in shown if own is None or v.pk != own.pk])
    return render(request, "frontend/record_detail.html", {
        "record": record, "run": record.run, "ev": evidence(record), "verdicts": split["people"] + split["judges"],
        "code_verdicts": split["code"], "hidden": hidden,
        "vf": verdict_form_context(request.user, record, "record"),
        "adjudicate_url": _url("adjudication-record", record.pk) if can(request.user, "verdict.adjudicate") else None,
        "metrics": [{"label": METRIC_LABELS[m][0], "help": METRIC_LABELS[m][1], "value": getattr(record, m)} for m in METRICS],
        "gold_replay_id": replay.pk if replay else None,
        "map_config": map_config(record.task.event.layers.all()) if replay else None,
    })


def _url(name: str, *args) -> str | None:
    """The URL of a page of the scoring area, or None while it is not routed."""
    try:
        return reverse(name, args=args)
    except NoReverseMatch:
        return None
