"""Reads of experiments for pages and the API: the list, one experiment, its accounting."""
from __future__ import annotations

from collections import defaultdict

from django.db.models import QuerySet

from evaluation.models import RunRecord
from experiments.models import Experiment, ExperimentQuestion

#: a question is *solved* by a repeat when that repeat's record scored full marks (task score 1)
SOLVED_SCORE = 1.0


def experiment_list() -> QuerySet:
    """Experiments, newest first, with their configuration, release and runs (three queries a page)."""
    return Experiment.objects.select_related("config", "release").prefetch_related("runs").order_by("-id")


def experiment(pk: int) -> Experiment:
    """One experiment as :func:`experiment_list` reads it (``Experiment.DoesNotExist`` when none)."""
    return experiment_list().get(pk=pk)


def _round(x: float) -> float:
    return round(float(x or 0.0), 6)


_ACCOUNTED = ("prompt_tokens", "completion_tokens", "cost", "seconds", "model_calls", "cached_calls")


def _sums(items) -> dict:
    """Sums of question rows (dicts with :data:`_ACCOUNTED`): tokens and calls as integers, cost
    and seconds rounded to 6 decimals."""
    return {"prompt_tokens": sum(i["prompt_tokens"] for i in items),
            "completion_tokens": sum(i["completion_tokens"] for i in items),
            "cost": _round(sum(i["cost"] for i in items)), "seconds": _round(sum(i["seconds"] for i in items)),
            "model_calls": sum(i["model_calls"] for i in items), "cached_calls": sum(i["cached_calls"] for i in items)}


def has_price(config) -> bool:
    """Whether a configuration sets a price (per million prompt or completion tokens above 0):
    without one its cost is not known (shown blank, never 0), and the score-against-cost plot
    falls back to tokens."""
    return bool(config.price_prompt_per_m or config.price_completion_per_m)


def repeat_sums(exp: Experiment, repeat: int) -> dict:
    """The accounting of one repeat (= one run) of ``exp``, over its questions (one query):
    ``{prompt_tokens, completion_tokens, cost, seconds, model_calls, cached_calls}`` as in
    :func:`accounting`'s ``by_repeat``; ``cost`` None when the configuration sets no price."""
    out = _sums(list(exp.questions.filter(repeat=repeat).values(*_ACCOUNTED)))
    if not has_price(exp.config):
        out["cost"] = None
    return out


def accounting(exp: Experiment) -> dict:
    """Tokens, seconds and cost of ``exp``: ``{"questions": n, "by_repeat": [...], "by_task": [...],
    "total": {...}}``. Per repeat (one run): prompt and completion tokens, cost, model calls (and
    how many the cache answered), seconds, and the run's DORA score once scored. Per task (question
    id, over repeats): the same sums, the repeats that finished and, once scored, the mean task
    score and the repeats that solved it (task score 1). Tokens count every answer the question
    used (cache hits too); cost counts requests sent only (a cache hit costs nothing)."""
    rows = list(exp.questions.values("repeat", "question_id", "dimension", "status", "prompt_tokens",
                                     "completion_tokens", "cost", "seconds", "model_calls", "cached_calls"))
    runs = {r.pk: r for r in exp.runs.all()}
    run_of_repeat = {}
    for run in runs.values():
        tail = run.name.rsplit("-r", 1)[-1].split("_", 1)[0]
        if tail.isdigit():
            run_of_repeat[int(tail)] = run
    scores = defaultdict(dict)  # question id → {repeat: task score}
    repeat_of_run = {run.pk: rep for rep, run in run_of_repeat.items()}
    for rec in RunRecord.objects.filter(run_id__in=list(runs)).values("run_id", "question_id", "task_score"):
        scores[rec["question_id"]][repeat_of_run.get(rec["run_id"])] = rec["task_score"]

    sums = _sums

    by_repeat = []
    for rep in range(1, exp.repeats + 1):
        items = [r for r in rows if r["repeat"] == rep]
        run = run_of_repeat.get(rep)
        by_repeat.append({"repeat": rep, "run": run.pk if run else None,
                          "dora_score": run.dora_score if run else None, **sums(items)})
    by_task = []
    for qid in dict.fromkeys(r["question_id"] for r in rows):
        items = [r for r in rows if r["question_id"] == qid]
        got = [s for s in scores.get(qid, {}).values() if s is not None]
        by_task.append({"question_id": qid, "dimension": items[0]["dimension"],
                        "finished": sum(1 for i in items if i["status"] in (ExperimentQuestion.Status.DONE,
                                                                             ExperimentQuestion.Status.ERROR)),
                        "repeats": len(items), "mean_task_score": _round(sum(got) / len(got)) if got else None,
                        "solved": sum(1 for s in got if s >= SOLVED_SCORE) if got else None, **sums(items)})
    return {"questions": len(rows), "by_repeat": by_repeat, "by_task": by_task, "total": sums(rows)}
