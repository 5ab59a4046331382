"""Reads of experiments for pages and the API: the list, one experiment, its accounting."""
from __future__ import annotations

from collections import defaultdict

from django.db.models import QuerySet

from evaluation.models import RunRecord, ScoringItem, Verdict
from experiments.models import Experiment, ExperimentQuestion
from studio.permissions import Action, can

#: a question is *solved* by a repeat when that repeat's record scored full marks (task score 1)
SOLVED_SCORE = 1.0


def experiment_list() -> QuerySet:
    """Experiments, newest first, with their configuration, release, judge configuration and runs
    (three queries a page)."""
    return Experiment.objects.select_related("config", "release", "judge_config").prefetch_related("runs").order_by("-id")


def blind_experiment_ids(user) -> set[int] | None:
    """The experiments ``user`` must not be shown (``evaluation.blind``: an experiment's page names
    its agent beside its questions, its runs and their task scores): ``None`` for all of them (not
    logged in, or a scorer: ``verdict.create`` without ``verdict.view_all``, blind on every
    record), else the ids of experiments with a run record the user must still score blind (a
    queue slot they hold, a person verdict of theirs neither sealed nor adjudicated). Two queries
    (the roles are cached on the user), read from the user's own slots and verdicts, so the cost
    does not grow with the experiments."""
    if not getattr(user, "is_authenticated", False):
        return None
    if can(user, Action.VERDICT_CREATE) and not can(user, Action.VERDICT_VIEW_ALL):
        return None
    held = ScoringItem.objects.filter(scorer_id=user.pk, verdict__isnull=True).values_list(
        "record__run__experiments", flat=True)
    own = Verdict.objects.filter(annotator_id=user.pk, source=Verdict.Source.HUMAN, is_final=False,
                                 sealed_at__isnull=True).values_list("record__run__experiments", flat=True)
    return {i for i in (*held, *own) if i is not None}


def visible_experiments(user) -> QuerySet:
    """:func:`experiment_list` without the experiments ``user`` is blind on
    (:func:`blind_experiment_ids`): pages and the API show, and 404 for, exactly these."""
    blind = blind_experiment_ids(user)
    if blind is None:
        return experiment_list().none()
    return experiment_list().exclude(pk__in=blind) if blind else experiment_list()


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
    """Tokens, seconds and cost of ``exp``: ``{"questions": n, "running": n, "by_repeat": [...],
    "by_task": [...], "total": {...}}`` (``running``: the questions in flight now, several when the
    configuration's ``max_concurrency`` allows). Per repeat (one run): prompt and completion tokens, cost, model calls (and
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
    running = sum(1 for r in rows if r["status"] == ExperimentQuestion.Status.RUNNING)
    return {"questions": len(rows), "running": running, "by_repeat": by_repeat, "by_task": by_task, "total": sums(rows)}


def _repeat_of_run_name(name: str) -> int | None:
    tail = name.rsplit("-r", 1)[-1].split("_", 1)[0]
    return int(tail) if tail.isdigit() else None


def task_experiments(user, task) -> dict:
    """The experiments that ran ``task`` (pilots and releases), as its task page shows them to
    ``user``: ``{"rows": [...], "hidden": n}``, newest experiment first. A row: ``experiment``
    (id), ``status``, ``agent``, ``config`` (name vN), ``pilot`` (no release), ``repeats`` (M),
    ``scored`` (repeats with a scored record), ``solved`` (N: repeats whose record has task score
    1, :data:`SOLVED_SCORE`, the DORA task score stored on ``RunRecord.task_score`` at import) and
    ``by_repeat``: ``[{repeat, question (the ExperimentQuestion id), status, record (RunRecord id
    or None), task_score, solved}]``.

    Blindness (``evaluation.blind``, as the experiment pages: :func:`blind_experiment_ids`): a
    scorer blind on every record (``verdict.create`` without ``verdict.view_all``) gets no row and
    no query; an experiment with a record ``user`` must still score blind (a queue slot held, a
    verdict not yet final) is left out and counted in ``hidden``. Queries: one without
    experiments, else four (question rows, records, and the user's held slots and open
    verdicts), whatever the number of experiments or repeats."""
    if not getattr(user, "is_authenticated", False) or (
            can(user, Action.VERDICT_CREATE) and not can(user, Action.VERDICT_VIEW_ALL)):
        return {"rows": [], "hidden": 0}
    qrows = list(ExperimentQuestion.objects.filter(task=task).order_by("-experiment_id", "repeat").values(
        "id", "repeat", "status", "experiment_id", "experiment__status", "experiment__agent_name",
        "experiment__repeats", "experiment__release_id", "experiment__config__name", "experiment__config__version"))
    if not qrows:
        return {"rows": [], "hidden": 0}
    exp_ids = sorted({r["experiment_id"] for r in qrows})
    records = {}  # (experiment id, repeat) → record
    for rec in RunRecord.objects.filter(run__experiments__in=exp_ids, question_id=task.question_id).values(
            "id", "task_score", "run__name", "run__experiments"):
        records[(rec["run__experiments"], _repeat_of_run_name(rec["run__name"]))] = rec
    hidden = (blind_experiment_ids(user) or set()) & set(exp_ids)
    out = {}
    for r in qrows:
        eid = r["experiment_id"]
        rec = records.get((eid, r["repeat"]))
        row = out.setdefault(eid, {
            "experiment": eid, "status": r["experiment__status"], "agent": r["experiment__agent_name"],
            "config": f"{r['experiment__config__name']} v{r['experiment__config__version']}",
            "pilot": r["experiment__release_id"] is None, "repeats": r["experiment__repeats"], "scored": 0,
            "solved": 0, "by_repeat": []})
        score = rec["task_score"] if rec else None
        solved = score is not None and score >= SOLVED_SCORE
        row["scored"] += score is not None
        row["solved"] += solved
        row["by_repeat"].append({"repeat": r["repeat"], "question": r["id"], "status": r["status"],
                                 "record": rec["id"] if rec else None, "task_score": score, "solved": solved})
    return {"rows": [row for eid, row in out.items() if eid not in hidden], "hidden": len(hidden)}
