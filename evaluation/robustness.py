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

Tool names are compared after the evaluator's normalisation (``normalize_tool_name``: model
aliases such as ``ras_count_pixels`` and call texts are the same tool).
"""
from __future__ import annotations

import json
import re
from typing import Any, Iterable, Optional

from evaluation.scoring.normalize import normalize_tool_name

__all__ = ["OUTCOMES", "distractor_use", "broken_outcome", "is_refusal_text", "unsolvable_outcome"]

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


def unsolvable_outcome(answer: Any, trajectory: Any = None) -> Optional[str]:
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


def broken_outcome(trajectory: Any, broken: dict, answer_ok: Optional[bool] = None,
                   answer: Any = None) -> Optional[str]:
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
