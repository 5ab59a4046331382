"""Agent run pages: list, run (scores per dimension and per task), record (field scores, step
match table, trajectories side by side, verdicts and the human verdict form)."""
from __future__ import annotations

from django.shortcuts import get_object_or_404, render
from django.urls import NoReverseMatch, reverse

from evaluation import selectors
from evaluation.selectors_robustness import run_robustness
from evaluation.judge.verdict import E_DEFINITIONS
from evaluation.services import GRADES
from frontend.views_events import map_config
from replay.services import latest_successful_replay
from studio.permissions import can

METRICS = ("t_any", "t_ord", "t_em", "par_acc", "eff")


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
        "robustness": list(run_robustness(run)),
    })


def record_detail_page(request, pk: int):
    record = get_object_or_404(selectors.record_detail_qs(), pk=pk)
    gold = None
    replay = None
    if record.task_id:
        replay = latest_successful_replay(record.task)
        gold = replay.filled_trajectory if replay else None
    if not gold:
        gold = (record.gold or {}).get("trajectory")
    import secrets

    visible = selectors.verdicts_visible(request.user, record)
    split = selectors.record_verdicts(record) if visible else {"people": [], "judges": [], "code": []}
    return render(request, "frontend/record_detail.html", {
        "record": record, "run": record.run, "gold": gold, "verdicts": split["people"] + split["judges"],
        "code_verdicts": split["code"], "hidden": 0 if visible else len(record.verdicts.all()),
        "token": secrets.token_urlsafe(24),
        "adjudicate_url": _url("adjudication-record", record.pk) if can(request.user, "verdict.adjudicate") else None,
        "error_defs": _error_defs(), "grades": GRADES, "metrics": [(m, getattr(record, m)) for m in METRICS],
        "gold_replay_id": replay.pk if replay else None,
        "map_config": map_config(record.task.event.layers.all()) if replay else None,
    })


def _url(name: str, *args) -> str | None:
    """The URL of a page of the scoring area, or None while it is not routed."""
    try:
        return reverse(name, args=args)
    except NoReverseMatch:
        return None


def _error_defs() -> list[dict]:
    """E1–E6 as ``[{code, name, definition}]`` for tooltips (definition: the full tooltip text)."""
    return [{"code": code, "name": d.name, "definition": d.tooltip()} for code, d in E_DEFINITIONS.items()]
