"""The E1–E6 plan-error taxonomy of the agent-planning benchmark (Mikivishy/AgentPlanningBenchmark;
../shared/spec/judge.md) and its one rule: a plan is correct exactly when no flag is set."""
from __future__ import annotations

from typing import Any, Mapping

E_CODES: tuple[str, ...] = ("E1", "E2", "E3", "E4", "E5", "E6")
E_NAMES: dict[str, str] = {
    "E1": "goal misalignment", "E2": "premature conclusion", "E3": "constraint violation",
    "E4": "logic error", "E5": "tool-use error", "E6": "hallucination",
}
#: the grading rubric's major and moderate codes (judge.md: any E1, E3 or E6 caps the grade at 0.2)
MAJOR_CODES = frozenset({"E1", "E3", "E6"})
MINOR_CODES = frozenset({"E4", "E5"})


def plan_is_correct(flags: Mapping[str, Any] | None) -> bool:
    """True exactly when none of E1–E6 is set in ``flags`` (``{code: truthy}``; other keys ignored)."""
    flags = flags or {}
    return not any(bool(flags.get(code)) for code in E_CODES)
