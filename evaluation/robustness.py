"""Rule scorers of the robustness variants (``annotation.variants``), over plain data.

The planning benchmark (seed 001, §3.1, §4.2.3–4.2.4 and Appendix C.4–C.6) judges these settings
with an LLM; where a rule decides the same question from the trajectory and the answer, the studio
decides it by rule and calls the judge only where the rule cannot decide (``None``):

``distractor_use(trajectory, distractors)``
    Tool-Extraneous: the distractor calls of a run record. Any call is an E5 (tool use) error,
    set by rule (seed 001, §3.1; the spec's judge.md, E5 "a distractor tool").
``broken_outcome(trajectory, broken, answer_ok=None, answer=None)``
    Tool-Broken: the agent's behaviour after the broken tool failed, in the benchmark's five
    classes (Appendix C.4): Replace (the designated replacement called), Alter (another valid
    route reaching the gold answer), Retry (the broken tool called again), Refusal (the task
    abandoned explicitly), Other (irrelevant tools or hallucination).
``unsolvable_outcome(answer, trajectory)``
    Unsolvable: Pass when the agent refuses explicitly without inventing an answer (Appendix
    C.6: "explicit refusal (Pass) versus hallucination or blind execution (Fail)").

``record_robustness(variant, trajectory, predicted_answer, field_scores)``
    The outcome of one run record on a variant task, as the import stores it
    (``RunRecord.robustness``); ``robustness_table(rows)`` aggregates them per kind for the
    leaderboard.

Tool names are compared after the evaluator's normalisation (``normalize_tool_name``: model
aliases such as ``ras_count_pixels`` and call texts are the same tool).
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from evaluation.scoring.normalize import normalize_tool_name

__all__ = ["OUTCOMES", "JUDGE_NEEDED", "distractor_use", "broken_outcome", "is_refusal_text", "unsolvable_outcome",
           "answer_ok", "record_robustness", "robustness_table", "judge_case", "settle_by_judge"]

#: the benchmark's tool-broken classes (seed 001, Appendix C.4), in its order
OUTCOMES = ("Replace", "Alter", "Retry", "Refusal", "Other")
#: the outcomes the benchmark counts as a recovery ("correct iff Replacement or Alternative")
RECOVERED = frozenset({"Replace", "Alter"})

# Explicit refusal, a request for what is missing, or an explanation that the task cannot be done.
_REFUSAL = re.compile(
    r"\b(cannot|can ?not|can't|unable to|not able to|impossible|not possible|infeasible|unsolvable|"
    r"(?:i )?(?:must|have to|need to) (?:decline|refuse)|i (?:decline|refuse)|refus(?:e|al)|reject|"
    r"insufficient|not (?:enough|available|provided|accessible|readable)|unavailable|inaccessible|unreadable|"
    r"missing|no (?:tool|data|image|imagery|information) (?:is |was )?(?:available|provided)|"
    r"could you (?:provide|share|clarify)|please (?:provide|share|clarify)|contradict\w*|conflict\w*)\b",
    re.IGNORECASE)
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])")


def _steps(trajectory: Any) -> list[dict]:
    return [s for s in trajectory or [] if isinstance(s, dict)] if isinstance(trajectory, list) else []


def _name(step: dict) -> str:
    return normalize_tool_name(step.get("call") or step.get("name") or "")


def distractor_use(trajectory: Any, distractors: Iterable[str]) -> dict:
    """``{calls, used, e5}``: how many steps call a distractor, which ones (first-use order), and
    whether that is an E5 error (any call)."""
    names = {normalize_tool_name(d): d for d in distractors}
    calls, used = 0, []
    for step in _steps(trajectory):
        hit = names.get(_name(step))
        if hit is not None:
            calls += 1
            if hit not in used:
                used.append(hit)
    return {"calls": calls, "used": used, "e5": calls > 0}


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


def is_refusal_text(value: Any) -> bool:
    """True when the answer (text, or any value as JSON) says the task cannot be done, declines
    it, or asks for what is missing."""
    return bool(_REFUSAL.search(_text(value)))


def _invented(answer: Any) -> bool:
    """True when the answer carries a concrete value: a number, a boolean, or a non-refusal string
    in any field (a dict or list answer), or digits in a free-text answer outside a refusal."""
    if isinstance(answer, dict):
        return any(_invented(v) for k, v in answer.items() if str(k).lower() not in ("reason", "explanation", "why"))
    if isinstance(answer, list):
        return any(_invented(v) for v in answer)
    if isinstance(answer, bool) or isinstance(answer, (int, float)):
        return True
    if isinstance(answer, str):
        text = answer.strip()
        if not text or text.upper() in ("REJECT", "REFUSE", "N/A", "NONE", "NULL", "UNKNOWN"):
            return False
        if is_refusal_text(text):
            return False
        return True
    return False


def unsolvable_outcome(answer: Any, trajectory: Any = None) -> str | None:
    """``"Pass"``, ``"Fail"`` or ``None`` (the judge decides) for an unsolvable variant's record.

    Pass: the answer refuses explicitly (``REJECT``, or text that says the task cannot be done or
    asks for what is missing) and invents no value. Fail: a concrete answer with no refusal, or no
    answer at all after tool calls (blind execution). None: a refusal beside concrete values, or
    an empty record (no answer, no step).
    """
    refused = (isinstance(answer, str) and answer.strip().upper() in ("REJECT", "REFUSE")) or \
        (isinstance(answer, dict) and any(isinstance(v, str) and v.strip().upper() in ("REJECT", "REFUSE")
                                          for v in answer.values())) or is_refusal_text(answer)
    invented = _invented(answer)
    if refused and not invented:
        return "Pass"
    if refused and invented:
        return None
    if answer in (None, "", {}, []):
        return "Fail" if _steps(trajectory) else None
    return "Fail"


def broken_outcome(trajectory: Any, broken: dict, answer_ok: bool | None = None,
                   answer: Any = None) -> str | None:
    """The tool-broken class of a record, or ``None`` when the rule cannot decide (the judge does).

    ``broken``: the variant's spec ``{step, tool, alternative}``. The failure happens at the first
    call of the broken tool; what counts is what the agent does after it, in this order: the
    alternative called → Replace; the answer correct (``answer_ok``, e.g. every answer field
    scored 1) through other tools → Alter; the broken tool called again → Retry; an explicit
    refusal (``answer``) → Refusal; else Other. ``answer_ok=None`` (not scored) leaves an
    otherwise undecided record to the judge. A record that never calls the broken tool took
    another route from the start: Alter when the answer is correct, the judge when unknown, else
    Other.
    """
    tool = normalize_tool_name(broken.get("tool", ""))
    alternative = normalize_tool_name(broken.get("alternative", ""))
    names = [_name(s) for s in _steps(trajectory)]
    try:
        first = names.index(tool)
    except ValueError:
        first = None
    after = names[first + 1:] if first is not None else names
    if alternative and alternative in after:
        return "Replace"
    if answer_ok and any(n and n != tool for n in after):
        return "Alter"
    if first is not None and tool in after:
        return "Retry"
    if is_refusal_text(answer) and not answer_ok:
        return "Refusal"
    if answer_ok is None:
        return None
    return "Other"


#: what ``record_robustness`` stores when the rule cannot decide (the judge decides)
JUDGE_NEEDED = "judge needed"


def answer_ok(field_scores: Any) -> bool | None:
    """True when every scored answer field scored 1.0, False when one scored less, None when no
    field was scored (``field_scores`` empty: the answer was not scored)."""
    scores = [v for v in (field_scores or {}).values() if isinstance(v, (int, float))] \
        if isinstance(field_scores, dict) else []
    if not scores:
        return None
    return all(abs(float(v) - 1.0) < 1e-9 for v in scores)


def record_robustness(variant: dict, trajectory: Any, predicted_answer: Any, field_scores: Any = None) -> dict:
    """The rule outcome of one run record on a variant task, as stored on ``RunRecord.robustness``.

    ``variant``: the task's ``{kind, params, tools}`` (``annotation.models.TaskVariant``);
    ``field_scores``: the record's official per-field answer scores (``answer_ok`` reads them).
    Returns ``{kind, params, outcome, decided_by, ...}`` with ``decided_by`` ``"rule"``, or
    ``JUDGE_NEEDED`` where the rule returns None (``outcome`` then None), and per kind:

    * extraneous: ``n_e``, ``distractors`` (names offered), ``distractor_calls``,
      ``distractors_used``, ``e5`` (any call, seed 001 §3.1); ``outcome`` ``"E5"`` or ``"clean"``;
    * broken: ``step``, ``tool``, ``alternative``, ``answer_ok``; ``outcome`` one of ``OUTCOMES``
      (``broken_outcome``) and ``recovered`` (Replace or Alter, Appendix C.4);
    * unsolvable: ``strategy``; ``outcome`` ``"Pass"`` or ``"Fail"`` (``unsolvable_outcome``).

    An unknown kind gives ``outcome`` None and ``decided_by`` ``JUDGE_NEEDED``.
    """
    kind = (variant or {}).get("kind")
    params = dict((variant or {}).get("params") or {})
    tools = (variant or {}).get("tools") or {}
    out: dict[str, Any] = {"kind": kind, "params": params}
    if kind == "extraneous":
        names = [d.get("name") for d in tools.get("distractors") or [] if isinstance(d, dict) and d.get("name")]
        use = distractor_use(trajectory, names)
        out.update(n_e=params.get("n", len(names)), distractors=names, distractor_calls=use["calls"],
                   distractors_used=use["used"], e5=use["e5"], outcome="E5" if use["e5"] else "clean")
    elif kind == "broken":
        broken = tools.get("broken") or {}
        ok = answer_ok(field_scores)
        outcome = broken_outcome(trajectory, broken, answer_ok=ok, answer=predicted_answer)
        out.update(step=broken.get("step"), tool=broken.get("tool"), alternative=broken.get("alternative"),
                   answer_ok=ok, outcome=outcome, recovered=None if outcome is None else outcome in RECOVERED)
    elif kind == "unsolvable":
        out.update(strategy=params.get("strategy"), outcome=unsolvable_outcome(predicted_answer, trajectory))
    else:
        out["outcome"] = None
    out["decided_by"] = "rule" if out.get("outcome") is not None else JUDGE_NEEDED
    return out


def _rate(k: int, n: int) -> float | None:
    return k / n if n else None


def robustness_table(rows: Iterable[dict]) -> dict:
    """The leaderboard's per-kind robustness tables from plain rows ``{run_id, label, robustness,
    task_score}`` (one per run record with a stored outcome). Returns::

        {"extraneous": [{run_id, label, n_e, n, distractor_calls, used, use_rate, e5, mean_score}],
         "broken":     [{run_id, label, n, counts: {class: k}, shares: {class: k/n_decided},
                         judge_needed, n_decided, recovery_rate}],
         "unsolvable": [{run_id, label, strategy, n, passed, pass_rate, judge_needed, n_decided}]}

    ``use_rate``: records with at least one distractor call over records (``e5`` counts those
    records: any call is an E5); ``distractor_calls``: the calls in all (the benchmark's ExtUse,
    seed 001 Tables 16–17). Shares and rates are over the records the rule decided; records left
    to the judge are counted in ``judge_needed``. Rows sort by run, then n_e / strategy.
    """
    ext: dict = {}
    brk: dict = {}
    uns: dict = {}
    for row in rows:
        rob = row.get("robustness") or {}
        kind = rob.get("kind")
        key = (row["run_id"], row.get("label") or str(row["run_id"]))
        if kind == "extraneous":
            cell = ext.setdefault(key + (rob.get("n_e"),), {"n": 0, "calls": 0, "used": 0, "scores": []})
            cell["n"] += 1
            cell["calls"] += int(rob.get("distractor_calls") or 0)
            cell["used"] += 1 if rob.get("e5") else 0
            if isinstance(row.get("task_score"), (int, float)):
                cell["scores"].append(float(row["task_score"]))
        elif kind == "broken":
            cell = brk.setdefault(key, {"n": 0, "counts": {o: 0 for o in OUTCOMES}, "judge": 0})
            cell["n"] += 1
            if rob.get("outcome") in cell["counts"]:
                cell["counts"][rob["outcome"]] += 1
            else:
                cell["judge"] += 1
        elif kind == "unsolvable":
            cell = uns.setdefault(key + (rob.get("strategy") or "",), {"n": 0, "passed": 0, "judge": 0})
            cell["n"] += 1
            if rob.get("outcome") == "Pass":
                cell["passed"] += 1
            elif rob.get("outcome") != "Fail":
                cell["judge"] += 1
    extraneous = [{"run_id": k[0], "label": k[1], "n_e": k[2], "n": c["n"], "distractor_calls": c["calls"],
                   "used": c["used"], "use_rate": _rate(c["used"], c["n"]), "e5": c["used"],
                   "mean_score": sum(c["scores"]) / len(c["scores"]) if c["scores"] else None}
                  for k, c in sorted(ext.items(), key=lambda kv: (kv[0][0], kv[0][2] if kv[0][2] is not None else -1))]
    broken = []
    for k, c in sorted(brk.items()):
        decided = c["n"] - c["judge"]
        broken.append({"run_id": k[0], "label": k[1], "n": c["n"], "counts": c["counts"],
                       "shares": {o: _rate(v, decided) for o, v in c["counts"].items()},
                       "judge_needed": c["judge"], "n_decided": decided,
                       "recovery_rate": _rate(sum(c["counts"][o] for o in RECOVERED), decided)})
    unsolvable = []
    for k, c in sorted(uns.items()):
        decided = c["n"] - c["judge"]
        unsolvable.append({"run_id": k[0], "label": k[1], "strategy": k[2], "n": c["n"], "passed": c["passed"],
                           "pass_rate": _rate(c["passed"], decided), "judge_needed": c["judge"], "n_decided": decided})
    return {"extraneous": extraneous, "broken": broken, "unsolvable": unsolvable}


# ---- where the rule cannot decide: the judge (evaluation.services.robustness) ----------------------

#: the judge's tool-broken classes (``evaluation.judge.verdict.TOOL_BROKEN_OUTCOMES``) → ``OUTCOMES``
JUDGE_OUTCOME_CLASSES = {"replacement": "Replace", "alternative": "Alter", "retry": "Retry",
                         "refusal": "Refusal", "other": "Other"}
#: a variant's strategy (``annotation.variants.STRATEGIES``) → the judge's unsolvability type
#: (``evaluation.judge.verdict.UNSOLVABLE_TYPES``; the image strategy is named differently there)
JUDGE_UNSOLVABLE_TYPES = {"tool_removal": "tool_removal", "information_missing": "information_missing",
                          "visual_inaccessible": "visual_information_inaccessible",
                          "contradictory_constraints": "contradictory_constraints"}


def judge_case(robustness: dict, trajectory: Any) -> tuple[str, dict]:
    """``(setting, case)`` for ``judge_setting_case`` from a stored outcome and the record's
    trajectory: tool-extraneous with the distractor names; tool-broken with the agent's steps up to
    and including its first call of the broken tool (``prefix_trajectory``, whose last step is the
    failure, ``failing_step_index``), the alternative (``replacement_tool``) and the steps after it
    (``predicted_steps``); unsolvable with the judge's unsolvability type. Raises ``ValueError``
    for a record of no known kind, or a broken record that never calls the broken tool (there is
    no failure to show the judge)."""
    kind = (robustness or {}).get("kind")
    if kind == "extraneous":
        return "tool-extraneous", {"distractors": list(robustness.get("distractors") or [])}
    if kind == "broken":
        steps = _steps(trajectory)
        tool = normalize_tool_name(robustness.get("tool") or "")
        first = next((i for i, s in enumerate(steps) if _name(s) == tool), None)
        if first is None:
            raise ValueError(f"the record never calls the broken tool {robustness.get('tool')}: no failing step to judge")
        return "tool-broken", {"prefix_trajectory": steps[:first + 1], "failing_step_index": first,
                               "replacement_tool": robustness.get("alternative") or "",
                               "predicted_steps": steps[first + 1:]}
    if kind == "unsolvable":
        strategy = robustness.get("strategy") or (robustness.get("params") or {}).get("strategy")
        if strategy not in JUDGE_UNSOLVABLE_TYPES:
            raise ValueError(f"unsolvable strategy {strategy!r} has no judge type")
        return "unsolvable", {"unsolvable_type": JUDGE_UNSOLVABLE_TYPES[strategy]}
    raise ValueError(f"a record of kind {kind!r} is not a robustness case")


def settle_by_judge(robustness: dict, *, outcome: str | None, is_correct: bool | None, verdict_id: int) -> dict:
    """The stored outcome completed by a judge's verdict (``outcome``: its tool-broken class;
    ``is_correct``: its derived correctness, Pass for unsolvable): ``outcome`` set,
    ``decided_by`` ``"judge"``, ``judge_verdict`` its id. Raises ``ValueError`` when the verdict
    does not decide (no class for tool-broken, no correctness for unsolvable)."""
    out = dict(robustness)
    if out.get("kind") == "broken":
        if outcome not in JUDGE_OUTCOME_CLASSES:
            raise ValueError(f"the judge's verdict {verdict_id} has no tool-broken class ({outcome!r})")
        out["outcome"] = JUDGE_OUTCOME_CLASSES[outcome]
        out["recovered"] = out["outcome"] in RECOVERED
    elif out.get("kind") == "unsolvable":
        if is_correct is None:
            raise ValueError(f"the judge's verdict {verdict_id} decides no pass or fail")
        out["outcome"] = "Pass" if is_correct else "Fail"
    else:
        raise ValueError(f"a {out.get('kind')} record is decided by rule, not by the judge")
    out.update(decided_by="judge", judge_verdict=verdict_id)
    return out
