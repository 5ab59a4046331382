"""Agent run pages: list, run (scores per dimension and per task), record (field scores, step
match table, trajectories side by side, verdicts and the human verdict form)."""
from __future__ import annotations

from django.shortcuts import get_object_or_404, render

from evaluation import selectors
from evaluation.judge.verdict import E_DEFINITIONS
from evaluation.services import GRADES
from replay.services import latest_successful_replay

METRICS = ("t_any", "t_ord", "t_em", "par_acc", "eff")


def run_list_page(request):
    return render(request, "frontend/run_list.html", {"runs": selectors.run_list()})


def run_detail_page(request, pk: int):
    run = get_object_or_404(selectors.run_list(), pk=pk)
    dims = [{"dim": d, **v} for d, v in sorted((run.dimensions or {}).items())]
    return render(request, "frontend/run_detail.html", {
        "run": run, "dims": dims, "records": selectors.run_records(run), "metrics": METRICS,
    })


def record_detail_page(request, pk: int):
    record = get_object_or_404(selectors.record_detail_qs(), pk=pk)
    gold = None
    if record.task_id:
        replay = latest_successful_replay(record.task)
        gold = replay.filled_trajectory if replay else None
    return render(request, "frontend/record_detail.html", {
        "record": record, "run": record.run, "gold": gold, "verdicts": record.verdicts.all(),
        "error_defs": _error_defs(), "grades": GRADES, "metrics": [(m, getattr(record, m)) for m in METRICS],
    })


def _error_defs() -> list[dict]:
    """E1–E6 as ``[{code, name, definition}]`` for tooltips."""
    out = []
    for code, d in E_DEFINITIONS.items():
        if isinstance(d, dict):
            out.append({"code": code, "name": d.get("name", ""), "definition": d.get("definition", "")})
        else:
            out.append({"code": code, "name": getattr(d, "name", ""), "definition": getattr(d, "definition", str(d))})
    return out
