"""The planning benchmark's step-wise protocol: cases cut from a **gold** trajectory (pure Python).

In the benchmark (``legacy_reference/step_wise/online_planning/src/evaluators/next1_evaluator.py``,
``next2_evaluator.py``, ``next3_evaluator.py`` at 6d0ff248) the planner is shown the question, the
tools and the expert's trajectory prefix tau_1..j-1 with its observations, and predicts the next
k = 1, 2 or 3 steps; the judge compares them with the expert's steps tau_j..j+k-1.  The cut index j
(0-based: the prefix is ``steps[:j]``) is ``int(n * ratio)`` for ratio early 0.25, middle 0.5,
late 0.75 (at least 1), and a case exists only when the k expected steps fit (``j + k <= n``); the
benchmark's next-2 and next-3 evaluators cut at the middle only, ``n // 2``, which is the same
formula for ratio 0.5.

This is a different protocol from the studio's older "agent's own trajectory cut"
(``evaluation.services.judge.cut_index``, protocol label ``stepwise-<cut>-<n>``), which cuts the
agent's run and rounds ``floor(share * n + 0.5)``.  Cases of this protocol carry the label
``stepwise-gold-<position>-<k>`` (:func:`protocol_label`).

Formats:

* a **case** (kept by the studio): ``{case_id, question_id, question, tools, position, horizon,
  cut_index, prefix, expected, remaining}``;
* the **planner export** (JSON lines, one case each, without the expected steps):
  ``{case_id, query, tools, trajectory_prefix, prediction_horizon, instruction}``;
* the **prediction import** (JSON lines): ``{case_id, predicted_steps}``, ``predicted_steps`` a
  list of step objects or the planner's raw text.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kernel.errors import InvalidInput
from kernel.taskfile import JSONNestingError, bounded_loads

POSITIONS: dict[str, float] = {"early": 0.25, "middle": 0.5, "late": 0.75}
HORIZONS: tuple[int, ...] = (1, 2, 3)
PROTOCOL = "stepwise-gold"
PLANNER_INSTRUCTION = (
    "Predict the next {k} step(s) of the trajectory after the given prefix, using only the listed tools. "
    "Return JSON: {{\"predicted_steps\": [{{\"thought\": \"...\", \"call\": \"tool name\", \"args\": {{}}}}]}} "
    "with exactly {k} step(s)."
)


class StepwiseCaseError(InvalidInput):
    """A case that cannot be built, or a prediction file that cannot be read; the message names
    the question or line and the field."""


def cut_index(n_steps: int, position: str, horizon: int = 1) -> int:
    """The benchmark's cut for a gold trajectory of ``n_steps``: ``max(1, int(n * ratio))``.

    Worked: n = 4 -> early 1, middle 2, late 3; n = 5, k = 3 -> middle 2 (steps 2, 3, 4 expected);
    n = 4, k = 3 -> no case (middle 2 + 3 > 4), as next3_evaluator skips it.  Raises
    :class:`StepwiseCaseError` for an unknown position or horizon, or when the k expected steps
    do not fit after the cut.
    """
    if position not in POSITIONS:
        raise StepwiseCaseError(f"position {position!r} is not one of {', '.join(POSITIONS)}")
    if horizon not in HORIZONS:
        raise StepwiseCaseError(f"horizon {horizon!r} is not one of 1, 2, 3")
    j = max(1, int(n_steps * POSITIONS[position]))
    if j + horizon > n_steps:
        raise StepwiseCaseError(
            f"a {n_steps}-step gold trajectory has no {position} case with {horizon} expected step(s)")
    return j


def protocol_label(position: str, horizon: int) -> str:
    """``stepwise-gold-<position>-<k>`` (what a verdict on such a case stores as its protocol)."""
    return f"{PROTOCOL}-{position}-{horizon}"


def parse_protocol_label(label: str) -> tuple[str, int] | None:
    """``(position, k)`` from a :func:`protocol_label`, else None."""
    prefix = PROTOCOL + "-"
    if not (label or "").startswith(prefix):
        return None
    rest = label[len(prefix):].rsplit("-", 1)
    if len(rest) != 2 or rest[0] not in POSITIONS or not rest[1].isdigit() or int(rest[1]) not in HORIZONS:
        return None
    return rest[0], int(rest[1])


def protocol_horizon(protocol: str | None) -> int | None:
    """The step-wise k (1-3) of a stored protocol label: the benchmark's
    (``stepwise-gold-middle-2`` -> 2) or the studio's own cut (``stepwise-early-3`` -> 3); else None."""
    parsed = parse_protocol_label(protocol or "")
    if parsed is not None:
        return parsed[1]
    label = protocol or ""
    if label.startswith("stepwise-") and label[-2:-1] == "-" and label[-1:] in ("1", "2", "3"):
        return int(label[-1])
    return None


def case_id(question_id: str, position: str, horizon: int) -> str:
    return f"{question_id}::{position}::{horizon}"


def build_cases(
    sources: Iterable[Mapping[str, Any]],
    positions: Sequence[str] = ("middle",),
    horizons: Sequence[int] = (1,),
) -> tuple[list[dict[str, Any]], list[str]]:
    """Cases from gold tasks ``{question_id, question, tools, trajectory}``; returns
    ``(cases, skipped)``, ``skipped`` naming each (question, position, k) that has no case (too
    short), as the benchmark skips it.  Raises :class:`StepwiseCaseError` for a source without a
    question id or trajectory list, or an unknown position or horizon.
    """
    for p in positions:
        if p not in POSITIONS:
            raise StepwiseCaseError(f"position {p!r} is not one of {', '.join(POSITIONS)}")
    for k in horizons:
        if k not in HORIZONS:
            raise StepwiseCaseError(f"horizon {k!r} is not one of 1, 2, 3")
    cases: list[dict[str, Any]] = []
    skipped: list[str] = []
    seen: set[str] = set()
    for i, src in enumerate(sources):
        qid = str(src.get("question_id") or "").strip()
        if not qid:
            raise StepwiseCaseError(f"source {i}: question_id is missing")
        steps = src.get("trajectory")
        if not isinstance(steps, list):
            raise StepwiseCaseError(f"{qid}: trajectory must be a list of steps")
        for p in positions:
            for k in horizons:
                try:
                    j = cut_index(len(steps), p, k)
                except StepwiseCaseError as exc:
                    skipped.append(f"{qid}: {exc}")
                    continue
                cid = case_id(qid, p, k)
                if cid in seen:
                    raise StepwiseCaseError(f"{qid}: the question id occurs twice")
                seen.add(cid)
                cases.append({
                    "case_id": cid, "question_id": qid, "question": src.get("question") or "",
                    "tools": list(src.get("tools") or []), "position": p, "horizon": k, "cut_index": j,
                    "prefix": steps[:j], "expected": steps[j:j + k], "remaining": steps[j + k:],
                })
    return cases, skipped


def planner_view(case: Mapping[str, Any]) -> dict[str, Any]:
    """What the planner is given for one case (never the expected or remaining steps)."""
    return {"case_id": case["case_id"], "query": case["question"], "tools": case["tools"],
            "trajectory_prefix": case["prefix"], "prediction_horizon": case["horizon"],
            "instruction": PLANNER_INSTRUCTION.format(k=case["horizon"])}


def export_jsonl(cases: Iterable[Mapping[str, Any]]) -> str:
    """The planner export: one :func:`planner_view` per line."""
    return "".join(json.dumps(planner_view(c), ensure_ascii=False, default=str) + "\n" for c in cases)


def parse_predictions(text: str, known: Iterable[str], *, source: str = "predictions") -> dict[str, Any]:
    """Read the prediction import: ``{case_id: predicted_steps}``.

    ``predicted_steps`` may be a list of steps, an object ``{"predicted_steps": [...]}`` (what
    the planner instruction asks for) or raw text; a step must be an object.  Raises
    :class:`StepwiseCaseError` naming ``source``, the line and the field for bad JSON, a missing
    or unknown case id, a case given twice, a missing ``predicted_steps``, or a line nested deeper
    than ``kernel.taskfile.MAX_JSON_DEPTH`` (``bounded_loads``); nothing is returned
    half-read.
    """
    known_ids = set(known)
    out: dict[str, Any] = {}
    for n, line in enumerate((text or "").splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{source}: line {n}"
        try:
            obj = bounded_loads(line)
        except JSONNestingError as exc:
            raise StepwiseCaseError(f"{where}, column {exc.column}: {exc.problem}") from None
        except json.JSONDecodeError as exc:
            raise StepwiseCaseError(f"{where}: not JSON ({exc.msg})") from None
        if not isinstance(obj, dict):
            raise StepwiseCaseError(f"{where}: expected an object")
        cid = obj.get("case_id")
        if not cid:
            raise StepwiseCaseError(f"{where}: case_id is missing")
        if cid not in known_ids:
            raise StepwiseCaseError(f"{where}: case_id {cid!r} is not an exported case")
        if cid in out:
            raise StepwiseCaseError(f"{where}: case_id {cid!r} given twice")
        if "predicted_steps" not in obj:
            raise StepwiseCaseError(f"{where}: predicted_steps is missing")
        pred = obj["predicted_steps"]
        if isinstance(pred, dict) and "predicted_steps" in pred:
            pred = pred["predicted_steps"]
        if isinstance(pred, list):
            bad = [i for i, s in enumerate(pred) if not isinstance(s, dict)]
            if bad:
                raise StepwiseCaseError(f"{where}: predicted_steps[{bad[0]}] is not a step object")
        elif not isinstance(pred, str):
            raise StepwiseCaseError(f"{where}: predicted_steps must be a list of steps or text")
        out[cid] = pred
    return out
