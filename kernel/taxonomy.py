"""The E1–E6 plan-error taxonomy of the agent-planning benchmark (Mikivishy/AgentPlanningBenchmark;
../shared/spec/judge.md) and its one rule: a plan is correct exactly when no flag is set."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

E_CODES: tuple[str, ...] = ("E1", "E2", "E3", "E4", "E5", "E6")
#: The one place the studio names E1–E6 (the judge's prompts, forms and pages take them from here):
#: ../shared/spec/judge.md's table, which is the planning benchmark paper's section 3 list ("E1: Goal
#: Understanding Error", "E2: Premature Conclusion / Task Incompleteness", "E3: Constraint
#: Violation", "E4: Logic Error", "E5: Tool Use Error", "E6: Hallucination") in sentence case, E1
#: without the trailing "Error" and E2's holistic reading first. Released judge prompt templates
#: embed these names (their fingerprints hash them), so the wording never changes.
E_NAMES: dict[str, str] = {
    "E1": "Goal understanding", "E2": "Task incompleteness / premature conclusion",
    "E3": "Constraint violation", "E4": "Logic error", "E5": "Tool use error", "E6": "Hallucination",
}
#: E2 by regime (the paper's appendix: "Error Taxonomy (Holistic) ... E2: Task Incompleteness",
#: "Error Taxonomy (Step-wise) ... E2: Premature Conclusion"), lower case for use inside a sentence.
E2_SUBTYPE_NAMES: dict[str, str] = {"E2-H": "task incompleteness", "E2-S": "premature conclusion"}
#: the grading rubric's major and moderate codes (judge.md: any E1, E3 or E6 caps the grade at 0.2)
MAJOR_CODES = frozenset({"E1", "E3", "E6"})
MINOR_CODES = frozenset({"E4", "E5"})


def plan_is_correct(flags: Mapping[str, Any] | None) -> bool:
    """True exactly when none of E1–E6 is set in ``flags`` (``{code: truthy}``; other keys ignored)."""
    flags = flags or {}
    return not any(bool(flags.get(code)) for code in E_CODES)
