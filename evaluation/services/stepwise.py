"""The planning benchmark's step-wise protocol in the studio: cases cut from the gold trajectories
of a run's records, exported for a planner, and the planner's predictions imported as an agent run
whose records are the cases (so that they are judged, scored by people, adjudicated and counted in
agreement like any record).  The pure part is :mod:`evaluation.judge.stepwise`.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import transaction

from evaluation.judge.stepwise import (
    StepwiseCaseError,
    build_cases,
    parse_predictions,
    protocol_label,
)
from evaluation.models import Agent, AgentRun, RunRecord
from evaluation.services.judge import record_inputs
from studio.permissions import Action, require

SCORING_MODE = "stepwise"  # AgentRun.scoring_mode of an imported planner run (no DORA score)


def gold_sources(run: AgentRun) -> list[dict[str, Any]]:
    """``{question_id, question, tools, trajectory, record_id, dimension, sample_id}`` per record of
    ``run``, from the gold snapshot each record carries (:func:`evaluation.services.judge.record_inputs`).
    A record of a planner run (already a step-wise case) is not a source."""
    out = []
    for rec in run.records.order_by("question_id"):
        if (rec.gold or {}).get("stepwise"):
            continue
        inputs = record_inputs(rec)
        out.append({"question_id": rec.question_id, "question": inputs["query"], "tools": inputs["gold_tools"],
                    "trajectory": inputs["gold"], "record_id": rec.pk, "dimension": rec.dimension,
                    "sample_id": rec.sample_id, "task_index": rec.task_index, "task_id": rec.task_id})
    return out


def stepwise_cases(run: AgentRun, positions: Sequence[str] = ("middle",),
                   horizons: Sequence[int] = (1,)) -> tuple[list[dict[str, Any]], list[str]]:
    """The cases of ``run``'s gold trajectories (:func:`evaluation.judge.stepwise.build_cases`):
    ``(cases, skipped)``; deterministic, so an import rebuilds the same cases.  Each case also
    carries its source record's id, dimension and sample id."""
    sources = gold_sources(run)
    by_q = {s["question_id"]: s for s in sources}
    cases, skipped = build_cases(sources, positions, horizons)
    for c in cases:
        src = by_q[c["question_id"]]
        c.update(record_id=src["record_id"], dimension=src["dimension"], sample_id=src["sample_id"],
                 task_index=src["task_index"], task_id=src["task_id"])
    return cases, skipped


@transaction.atomic
def import_stepwise_predictions(user, run: AgentRun, planner: str, predictions_text: str, *,
                                positions: Sequence[str] = ("middle",), horizons: Sequence[int] = (1,),
                                name: str | None = None, source: str = "predictions") -> AgentRun:
    """Import a planner's predictions for the cases of ``run`` as a new agent run.

    The agent is ``planner``; each record is one case (``question_id`` = case id) with the
    predicted steps as its trajectory (raw text goes to ``predicted_answer``) and, in
    ``gold["stepwise"]``, the position, horizon, cut index, the gold prefix and the expected steps.
    Every case needs a prediction.  Raises :class:`~evaluation.judge.stepwise.StepwiseCaseError`
    naming the line and field (nothing is written), ``PermissionDenied`` without ``run.import``.
    """
    require(user, Action.RUN_IMPORT)
    planner = (planner or "").strip()
    if not planner:
        raise StepwiseCaseError("planner: the planner's name is missing")
    cases, _ = stepwise_cases(run, positions, horizons)
    if not cases:
        raise StepwiseCaseError(f"run {run.name!r}: no gold trajectory is long enough for a step-wise case")
    preds = parse_predictions(predictions_text, [c["case_id"] for c in cases], source=source)
    too_long = [c["case_id"] for c in cases if len(c["case_id"]) > 240]
    if too_long:
        raise StepwiseCaseError(f"case id {too_long[0]!r} is longer than the 240 characters a record's question_id holds")
    missing = [c["case_id"] for c in cases if c["case_id"] not in preds]
    if missing:
        raise StepwiseCaseError(f"{source}: no prediction for {len(missing)} case(s), first {missing[0]!r}")
    agent, _ = Agent.objects.get_or_create(name=planner)
    new = AgentRun.objects.create(agent=agent, name=(name or f"{planner} step-wise on {run.name}")[:200],
                                  scoring_mode=SCORING_MODE, release=run.release, imported_by=user,
                                  gold_set=run.gold_set, gold_set_digest=run.gold_set_digest,
                                  gold_set_at=run.gold_set_at,  # the cases are cut from the source run's gold
                                  perception_mode=run.perception_mode)
    RunRecord.objects.bulk_create([
        RunRecord(run=new, task_id=c["task_id"], question_id=c["case_id"], sample_id=c["sample_id"],
                  task_index=c["task_index"], dimension=c["dimension"],
                  trajectory=preds[c["case_id"]] if isinstance(preds[c["case_id"]], list) else [],
                  predicted_answer=None if isinstance(preds[c["case_id"]], list) else preds[c["case_id"]],
                  gold={"question": c["question"], "tools": c["tools"],
                        "trajectory": c["prefix"] + c["expected"] + c["remaining"],
                        "stepwise": {"protocol": protocol_label(c["position"], c["horizon"]),
                                     "position": c["position"], "horizon": c["horizon"],
                                     "cut_index": c["cut_index"], "prefix": c["prefix"], "expected": c["expected"],
                                     "source_record_id": c["record_id"]}})
        for c in cases
    ])
    return new
