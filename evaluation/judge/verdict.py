"""The normalised judge verdict (plan correctness, grade, E1-E6 flags) and its parser.

Pure Python: no Django imports.  A verdict can come from an LLM judge (two reference dialects
plus the studio's own), from a person, or from the rule-based checker; all normalise to
:class:`Verdict`.

Dialects accepted by :func:`parse_verdict`:

* ``error_list``: ``{"is_correct": bool, "grade": float, "error_list": [E1..E6 as 0/1],
  "reasoning": str}`` (the holistic judge of the planning benchmark);
* ``flat``: ``{"E1_GOAL_MISALIGNMENT": bool, "E2_PREMATURE_CONCLUSION": bool,
  "E3_CONSTRAINT_VIOLATION": bool, "E4_LOGIC_ERROR": bool, "E5_TOOL_USE_ERROR": bool,
  "E6_HALLUCINATION_ERROR": bool, "score": float, "reasoning": str, "is_correct": "YES"|"NO"}``
  (the step-wise judge); other ``E<k>_...`` spellings seen in that code base
  (``E1_GOAL_UNDERSTANDING``, ``E2_TASK_COMPLETENESS``, ``E4_LOGICAL_DEFECT``) and bare ``E<k>``
  keys are accepted too;
* ``studio``: ``{"is_correct": bool, "grade": float, "errors": {"E1": {"present": bool,
  "reason": str}, ...}, "reasoning": str}`` (what the studio's own prompts ask for; see
  :data:`VERDICT_JSON_SCHEMA`).
* ``tool_broken``: ``{"category": 1-5, "category_name": str, "is_correct": bool, "reason": str}``
  (the five-class tool-broken judge; correct iff Replacement or Alternative);
* a JSON **list** of flag verdicts, one per predicted step (step-wise with k = 2 or 3): flags OR-ed,
  the minimum grade, as the benchmark's next-3 evaluator aggregates them.

Every verdict carries its **setting** (:data:`SETTINGS`, the planning benchmark's five) and
**regime** (holistic or step-wise).  How correctness is derived depends on the setting: from the
flags (holistic, step-wise, tool-extraneous), from the outcome class (tool-broken), or from the
judge's pass/fail (unsolvable: pass iff the agent refuses, asks, or explains why the task cannot be
done, whatever the flags).  The judge's own ``is_correct`` is kept beside it
(``model_is_correct``), since the benchmark's holistic correctness rate takes the judge's value.
Known differences from the benchmark's own parsing: :data:`KNOWN_DIFFERENCES`.

That is the **studio** reading (the default).  ``parse_verdict(..., reading="apb")``
(:func:`parse_verdict_apb`) is the other: the planning benchmark's own parse results, its defects
included (each entry of :data:`KNOWN_DIFFERENCES` says how), so that figures can be set beside the
paper's; every :class:`Verdict` names the reading that produced it.
"""
from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from kernel.taxonomy import E_CODES, E_NAMES, MAJOR_CODES, MINOR_CODES, plan_is_correct  # noqa: E402

from .options import DEFAULT_READING, READINGS  # noqa: E402, F401 — the two readings (see .options)

GRADES: tuple[float, ...] = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)

#: Flat keys of the step-wise dialect, by code.
FLAT_KEYS: dict[str, str] = {
    "E1": "E1_GOAL_MISALIGNMENT",
    "E2": "E2_PREMATURE_CONCLUSION",
    "E3": "E3_CONSTRAINT_VIOLATION",
    "E4": "E4_LOGIC_ERROR",
    "E5": "E5_TOOL_USE_ERROR",
    "E6": "E6_HALLUCINATION_ERROR",
}


#: The planning benchmark's five evaluation settings (paper section 3.1; its splits
#: holistic_planning, step_wise_planning, *_tool_extraneous, step_wise_tool_broken,
#: holistic_unsolvable).
SETTINGS: tuple[str, ...] = ("holistic", "step-wise", "tool-extraneous", "tool-broken", "unsolvable")
REGIMES: tuple[str, ...] = ("holistic", "step-wise")
#: The regime a setting is judged in when the caller does not say (tool-extraneous exists in
#: both regimes; it defaults to holistic unless the answer's dialect only occurs step-wise).
DEFAULT_REGIME: dict[str, str | None] = {
    "holistic": "holistic", "step-wise": "step-wise", "tool-extraneous": None,
    "tool-broken": "step-wise", "unsolvable": "holistic",
}
_SETTING_ALIASES = {
    "holistic": "holistic", "holistic-planning": "holistic",
    "step-wise": "step-wise", "stepwise": "step-wise", "step-wise-planning": "step-wise",
    "tool-extraneous": "tool-extraneous", "extraneous": "tool-extraneous", "tool-redundancy": "tool-extraneous",
    "tool-broken": "tool-broken", "broken": "tool-broken",
    "unsolvable": "unsolvable",
}
#: E2 reads differently by regime (paper, Table 2): task incompleteness for a whole plan,
#: premature conclusion for the next steps.
E2_SUBTYPES: dict[str, str] = {"holistic": "E2-H", "step-wise": "E2-S"}  # names: kernel.taxonomy.E2_SUBTYPE_NAMES
#: Tool-broken outcome classes (benchmark's five-class judge; paper appendix C.5):
#: 1 Replacement and 2 Alternative are correct, 3 Retry, 4 Refusal and 5 Other are not.
TOOL_BROKEN_OUTCOMES: dict[int, str] = {1: "replacement", 2: "alternative", 3: "retry", 4: "refusal", 5: "other"}
TOOL_BROKEN_CORRECT = frozenset({"replacement", "alternative"})
_OUTCOME_ALIASES = {
    "replacement": "replacement", "replace": "replacement", "alternative": "alternative", "alter": "alternative",
    "retry": "retry", "refusal": "refusal", "refuse": "refusal", "other": "other",
}
#: Unsolvability types (paper appendix B.4.3 / B.6.3), with the studio's wording for imagery.
UNSOLVABLE_TYPES: dict[str, str] = {
    "contradictory_constraints": "conflicting constraints",
    "information_missing": "missing information",
    "tool_removal": "missing tool",
    "visual_information_inaccessible": "missing imagery",
}

#: The benchmark code path an ``apb`` reading went through (``Verdict.apb_path``), at 6d0ff248:
APB_PATHS: dict[str, str] = {
    "runner": "evaluation/apb_eval/runner.py (parse_json_object, then score)",
    "next1": "legacy_reference/step_wise/online_planning/src/evaluators/next1_evaluator.py "
             "(_parse_evaluation and evaluate_prediction; also tool_redundancy_evaluator, which inherits it)",
    "next2": "legacy_reference/.../evaluators/next2_evaluator.py (_parse_evaluation_next2)",
    "next3": "legacy_reference/.../evaluators/next3_evaluator.py (_parse_evaluation_next3)",
    "tool_broken": "legacy_reference/.../evaluators/tool_broken_evaluator.py (evaluate_prediction)",
}

#: Where the studio deliberately reads an answer differently from the benchmark's code
#: (``evaluation/apb_eval/runner.py`` and ``legacy_reference/step_wise/online_planning/src``
#: at 6d0ff248), and what the ``apb`` reading does instead: each entry's ``apb`` says how that
#: reading reproduces the benchmark (line numbers at 6d0ff248) and why.  The one list of the
#: judge's deliberate quirks (``docs/judge-settings.md`` shows the same).
KNOWN_DIFFERENCES: tuple[dict[str, str], ...] = (
    {"id": "greedy-regex", "benchmark": "runner.parse_json_object falls back to the greedy regex "
     "\\{.*\\}, which spans from the first '{' to the last '}' and fails to parse when the answer "
     "holds two objects (an example and the verdict, or two drafts)",
     "studio": "tries every balanced {...} span in order and takes the first that looks like a verdict",
     "apb": "reproduced (runner.py 23-38): a fence is stripped only at the very start and end, then "
     "json.loads, then the greedy span; a failure there is a failed judgement (the benchmark's judge "
     "stage raises and writes no judgement)"},
    {"id": "bool-of-string", "benchmark": "bool(judgement['is_correct']) in runner.score and "
     "tool_broken_evaluator, and the truthiness of flat E* values, read the string \"false\" (or \"NO\") as true",
     "studio": "reads true/false, yes/no, 0/1 and pass/fail strings by their meaning",
     "apb": "reproduced: correctness is bool() of the value (runner.py 186-187), a flat flag is set "
     "when its value is truthy (next1_evaluator.py 776-788), so \"false\" and \"NO\" count as true"},
    {"id": "exact-case-keys", "benchmark": "the step-wise evaluators read only the exact keys "
     "E1_GOAL_MISALIGNMENT ... E6_HALLUCINATION_ERROR, so e4_logic_error or E4 is silently false",
     "studio": "matches E1..E6 keys case-insensitively, with any suffix",
     "apb": "reproduced: only the six exact FLAT_KEYS set a flag in the step-wise evaluators "
     "(next1_evaluator.py 720-726, 776-785)"},
    {"id": "missing-free-text", "benchmark": "eval_data['reasoning'] raises KeyError and the whole "
     "answer is dropped when the free-text field is missing (the step-wise evaluators)",
     "studio": "keeps the verdict with empty reasoning",
     "apb": "reproduced: a single step-wise object without 'score' or 'reasoning' is a failed "
     "judgement (next1_evaluator.py 718 and 728; next2 689/699; next3 748/758); a next-3 list needs neither"},
    {"id": "missing-grade-in-list", "benchmark": "a list item without 'score' counts as score 0.0 in "
     "the next-3 aggregation", "studio": "refuses the answer (a re-ask follows) instead of inventing a grade",
     "apb": "reproduced: the list's score is the minimum of 1.0 and each item's score, a missing one "
     "0.0 (next3_evaluator.py 840-842); a score that cannot be compared (a string, null) drops the "
     "answer; non-object items are skipped (831); an empty list is dropped (804); next1 and next2 "
     "drop any list (next1 has no list branch; next2_evaluator.py 744)"},
    {"id": "tool-broken-category", "benchmark": "a missing or out-of-range category becomes 5 (Other); "
     "a category given as a name ('Replacement') crashes int() and the answer is dropped",
     "studio": "reads a number, a numeric string or a class name; refuses a missing or out-of-range one",
     "apb": "reproduced: category is int() of the value, 5 when missing (tool_broken_evaluator.py 325), "
     "so 1.9 is 1, true is 1, a name, '1.0' or null drop the answer; outside 1-5 it is 5 (340-341); "
     "category_name and the judge's is_correct are ignored; correct iff 1 or 2, grade 1.0 or 0.0 (345-348, 378); "
     "a reason that is null, a number or an object drops the answer (359 logs reason[:200], which raises)"},
    {"id": "error-list-counts", "benchmark": "error_list entries are 'six integers'; a count of 2 "
     "counts as present", "studio": "the same (non-zero is present), and the counts are kept",
     "apb": "no benchmark code reads error_list (runner.score reads is_correct and grade only), so "
     "there is no defect to reproduce: the apb reading reads six entries as the prompt means them "
     "(non-zero is present) and reads no flags from anything else, never refusing the answer for it"},
    {"id": "is-correct-beside-flags", "benchmark": "runner.score averages the judge's own is_correct "
     "whatever its error_list says; the legacy step-wise evaluators overwrite it with 'no flag set' "
     "(next1_evaluator.py 788, next2 761, next3 862/884)",
     "studio": "correctness is 'no flag set' in every setting but tool-broken (the class) and "
     "unsolvable (the pass); the judge's own value is kept apart (model_is_correct)",
     "apb": "reproduced per path: the runner path counts bool(is_correct), uncounted when the key is "
     "absent (runner.py 186); the legacy step-wise path counts 'no flag set'"},
    {"id": "bare-pass-fail", "benchmark": "runner.score reads only is_correct, so an unsolvable answer "
     "that says {'verdict': 'PASS'} (or result/pass) without is_correct is not counted in the accuracy",
     "studio": "reads verdict/result/pass as PASS/FAIL for unsolvable",
     "apb": "reproduced: such an answer is read (the record counts in n) with correctness and grade "
     "uncounted (None)"},
    {"id": "grade-as-given", "benchmark": "runner.score averages judgement['grade'] when it is an int "
     "or float (runner.py 188-189): True counts as 1.0, 0.7 or 8 as themselves, a string '0.8' is not counted",
     "studio": "snaps a grade to the 0.2 scale, reads numeric strings, refuses one outside [0, 1]",
     "apb": "reproduced: the grade is the value as the runner averages it, or uncounted (None); the "
     "legacy paths keep score as given when it is a number"},
    {"id": "non-object-answer", "benchmark": "runner.parse_json_object wraps a JSON answer that is not an "
     "object as {'value': ...} (runner.py 38), which then has neither is_correct nor grade",
     "studio": "refuses it (a re-ask follows)",
     "apb": "reproduced: read, with correctness and grade uncounted"},
    {"id": "non-finite-grade", "benchmark": "json.loads accepts NaN and Infinity, so a grade of NaN makes "
     "runner.score's average NaN (runner.py 188-194) and an integer beyond the float range crashes score() "
     "in float(); a step-wise score of Infinity breaks calculate_statistics' mean the same way",
     "studio": "refuses the grade (outside [0, 1])",
     "apb": "not reproduced, the apb reading's one departure: the grade is left uncounted (None), with a note, "
     "since a NaN figure can neither be published nor compared; correctness is read as the benchmark reads it"},
    {"id": "json-repair", "benchmark": "the legacy evaluators repair broken JSON with the json_repair package",
     "studio": "second chance for Python literals and trailing commas",
     "apb": "approximated: json_repair is not a dependency; the apb reading uses the studio's second "
     "chance where the legacy evaluators call json_repair (an answer json_repair would mend otherwise "
     "is a failed judgement here)"},
)


def normalize_reading(reading: Any) -> str:
    """``studio`` or ``apb`` (:data:`READINGS`) from a spelling; None is the default (studio).

    Raises ``ValueError`` naming the allowed values.
    """
    key = DEFAULT_READING if reading is None else str(reading).strip().lower()
    if key not in READINGS:
        raise ValueError(f"reading {reading!r} is not one of {', '.join(READINGS)}")
    return key


def normalize_setting(setting: str) -> str:
    """One of :data:`SETTINGS` from a spelling such as ``step_wise`` or ``tool-broken``.

    Raises ``ValueError`` naming the allowed values.
    """
    key = str(setting or "").strip().lower().replace("_", "-").replace(" ", "-")
    if key in _SETTING_ALIASES:
        return _SETTING_ALIASES[key]
    raise ValueError(f"setting {setting!r} is not one of {', '.join(SETTINGS)}")


def normalize_regime(regime: str) -> str:
    key = str(regime or "").strip().lower().replace("_", "-")
    key = {"stepwise": "step-wise"}.get(key, key)
    if key not in REGIMES:
        raise ValueError(f"regime {regime!r} is not one of {', '.join(REGIMES)}")
    return key


#: Protocol labels of judgements in the robustness settings (``Verdict.protocol``, at most 20
#: characters); holistic and step-wise judgements keep their own labels (``holistic``,
#: ``stepwise-gold-…``, ``stepwise-<cut>-<n>``).
SETTING_PROTOCOLS: dict[str, tuple[str, str]] = {
    "tool-extraneous-h": ("tool-extraneous", "holistic"),
    "tool-extraneous-s": ("tool-extraneous", "step-wise"),
    "tool-broken": ("tool-broken", "step-wise"),
    "unsolvable": ("unsolvable", "holistic"),
}


def protocol_setting(protocol: str | None) -> tuple[str, str]:
    """``(setting, regime)`` of a stored protocol label: a :data:`SETTING_PROTOCOLS` label,
    ``holistic`` (or empty), else a step-wise label."""
    label = protocol or "holistic"
    if label in SETTING_PROTOCOLS:
        return SETTING_PROTOCOLS[label]
    return ("holistic", "holistic") if label == "holistic" else ("step-wise", "step-wise")


def setting_protocol(setting: str, regime: str | None = None) -> str:
    """The protocol label of a robustness-setting judgement (inverse of :func:`protocol_setting`)."""
    setting = normalize_setting(setting)
    regime = normalize_regime(regime or DEFAULT_REGIME[setting] or "holistic")
    for label, pair in SETTING_PROTOCOLS.items():
        if pair == (setting, regime):
            return label
    raise ValueError(f"{setting} has no protocol label in the {regime} regime")


def normalize_outcome(outcome: Any) -> str:
    """A tool-broken class name from a spelling (``Replace``, ``alternative``); ``ValueError`` else."""
    key = str(outcome or "").strip().lower()
    if key not in _OUTCOME_ALIASES:
        raise ValueError(f"outcome {outcome!r} is not one of {', '.join(TOOL_BROKEN_OUTCOMES.values())}")
    return _OUTCOME_ALIASES[key]


def is_correct_rule(setting: str) -> str:
    """How correctness is derived in a setting: ``flags``, ``outcome`` or ``pass``."""
    return {"tool-broken": "outcome", "unsolvable": "pass"}.get(normalize_setting(setting), "flags")


# --------------------------------------------------------------------------------------------
# Definitions (tooltips and prompts share this text)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ErrorDefinition:
    code: str
    name: str  # short display name
    flat_key: str  # key in the flat (step-wise) dialect
    definition: str  # one-paragraph definition, protocol independent
    holistic: str  # how it reads for a whole plan
    stepwise: str  # how it reads for the next 1-3 steps
    not_an_error: str  # what must not be flagged
    domain_cases: tuple[str, ...] = field(default=())  # disaster-response examples
    protocol_specific: bool = False  # the tooltip names both protocol readings (E2)

    def tooltip(self) -> str:
        """Short text for a UI tooltip: name, definition and the domain cases."""
        text = f"{self.code} {self.name}: {self.definition}"
        if self.protocol_specific:
            text += f" Holistic: {self.holistic} Step-wise: {self.stepwise}"
        if self.not_an_error:
            text += f" Not an error: {self.not_an_error}"
        if self.domain_cases:
            text += " Typical here: " + "; ".join(self.domain_cases) + "."
        return text

    def as_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "name": self.name,
            "flat_key": self.flat_key,
            "definition": self.definition,
            "holistic": self.holistic,
            "stepwise": self.stepwise,
            "not_an_error": self.not_an_error,
            "domain_cases": list(self.domain_cases),
            "protocol_specific": self.protocol_specific,
            "tooltip": self.tooltip(),
        }


E_DEFINITIONS: dict[str, ErrorDefinition] = {
    "E1": ErrorDefinition(
        code="E1",
        name=E_NAMES["E1"],
        flat_key=FLAT_KEYS["E1"],
        definition=(
            "The agent solves a different problem than the one asked, or writes the answer in "
            "(hard-codes a value) instead of computing it with the tools."
        ),
        holistic="The plan misreads the core intent of the query.",
        stepwise="The next step deviates from or contradicts the current goal given the query and the steps so far.",
        not_an_error="a different but valid route to the same answer.",
        domain_cases=(
            "running a landslide model (seg.landslide_ms, seg.landslide_bitemporal) on a hurricane scene (also E5)",
            "counting damaged buildings when the query asks for the damaged area",
            "typing a count into the answer that no tool produced",
        ),
    ),
    "E2": ErrorDefinition(
        code="E2",
        name=E_NAMES["E2"],
        flat_key=FLAT_KEYS["E2"],
        definition="A required part of the task is left undone.",
        protocol_specific=True,
        holistic="Fails to plan for every required sub-task of a multi-part query (task incompleteness).",
        stepwise="Tries to conclude or output results when necessary tool calls are still missing (premature conclusion).",
        not_an_error="skipping a tool the reference uses when the answer is still fully derived another way.",
        domain_cases=(
            "answering the flooded-road length without ever running the road-damage or flood tool",
            "reporting one phase of a multi-temporal question and stopping",
        ),
    ),
    "E3": ErrorDefinition(
        code="E3",
        name=E_NAMES["E3"],
        flat_key=FLAT_KEYS["E3"],
        definition=(
            "Breaks an explicit constraint of the query or the system prompt: scope (area, time, "
            "phase), data source, method, or the required output format."
        ),
        holistic="The plan violates an explicit constraint from the query or system prompt.",
        stepwise="The step violates a constraint from the query, the previous steps, or the required output format.",
        not_an_error="choices the query leaves open.",
        domain_cases=(
            "using the post-event optical image when the query says to use SAR only",
            "answering in hectares when the answer format asks for square kilometres",
            "analysing the whole scene when the query restricts it to sector 3",
        ),
    ),
    "E4": ErrorDefinition(
        code="E4",
        name=E_NAMES["E4"],
        flat_key=FLAT_KEYS["E4"],
        definition=(
            "Invalid dependencies or ordering: uses data not yet produced, wrong order, a missing "
            "prerequisite step, ignoring available results, or circular reasoning."
        ),
        holistic="Steps lack key premises, depend on later results, are circular, or make the query unsolvable.",
        stepwise="The step needs data not yet obtained, ignores data already available, or follows an illogical flow.",
        not_an_error="an inefficient but valid order.",
        domain_cases=(
            "a downstream tool linked to the wrong upstream mask (e.g. the water mask instead of the damage mask)",
            "stale class indices after a class-recoding step such as ras.compose_classes or ras.threshold (also E5)",
            "a '<mask_path> from trajectory[N].obs' reference to a step that has not run yet",
        ),
    ),
    "E5": ErrorDefinition(
        code="E5",
        name=E_NAMES["E5"],
        flat_key=FLAT_KEYS["E5"],
        definition=(
            "Wrong tool for the purpose, argument types or values that break the tool's schema, a "
            "missing required argument, or use of a distractor tool."
        ),
        holistic="The plan misunderstands a tool's function or the data type it requires.",
        stepwise="The step misuses a tool or passes parameters that violate its specification.",
        not_an_error="different argument values that the tool's schema allows and that still answer the query.",
        domain_cases=(
            "SAR imagery given to an optical-only tool",
            "a wrong GSD (pixel_size_m) passed to an area or distance tool",
            "stale class indices after a class-recoding step such as ras.compose_classes or ras.threshold (also E4)",
            "a landslide model (seg.landslide_*) run on a hurricane scene (also E1)",
        ),
    ),
    "E6": ErrorDefinition(
        code="E6",
        name=E_NAMES["E6"],
        flat_key=FLAT_KEYS["E6"],
        definition=(
            "Calls a tool that does not exist (names must match the catalogue exactly), uses data "
            "that was never produced, or assumes facts before they could be known."
        ),
        holistic="Calls a non-existent tool, states facts contrary to the context, or uses results not yet available.",
        stepwise="The step calls a non-existent tool or references non-existent data.",
        not_an_error="the model-facing alias of a real tool (seg_flood for seg.flood), which is the same tool.",
        domain_cases=(
            "calling seg.flood_depth when the catalogue has no such tool",
            "quoting a building count or file path that no observation contains",
        ),
    ),
}

#: Holistic grade rubric (what the grade means for a whole plan).
HOLISTIC_RUBRIC: dict[float, str] = {
    1.0: "Correct: no error flag; the plan is logically sound and solves the query (valid alternative routes included).",
    0.8: "Very good: about 90 % right, follows the reference logic with one minor, non-critical flaw.",
    0.6: "Mostly correct: the main flow is right but one key part is missing or flawed.",
    0.4: "Partially correct: some steps are right but the sequence is broken.",
    0.2: "Mostly incorrect: at most one trivial step right; the core logic fails.",
    0.0: "Failed: no logical merit; complete hallucination or goal misunderstanding.",
}

#: Step-wise grade rubric (deterministic from the flags; see :func:`grade_from_flags`).
STEPWISE_RUBRIC: dict[float, str] = {
    1.0: "No error.",
    0.8: "One trivial E5 that does not affect correctness.",
    0.6: "One E4 or E5.",
    0.4: "Two or more E4/E5, or one E2.",
    0.2: "Any E1, E3 or E6 (a major error), or several moderate errors.",
    0.0: "Several major errors or a total breakdown.",
}


def grade_from_flags(
    errors: Mapping[str, bool] | Iterable[str],
    counts: Mapping[str, int] | None = None,
    *,
    trivial_e5: bool = False,
) -> float:
    """Step-wise rubric grade from the flags (and optionally the number of findings per code).

    ``counts`` lets a caller with several findings of one code (two missing arguments) count
    them as "two or more E4/E5".  ``trivial_e5`` marks a lone E5 as trivial (0.8).
    """
    flags = _flag_set(errors)
    if not flags:
        return 1.0
    n = {c: max(1, int((counts or {}).get(c, 1))) for c in flags}
    major = sum(n[c] for c in flags if c in MAJOR_CODES)
    minor = sum(n[c] for c in flags if c in MINOR_CODES)
    moderate = n.get("E2", 0)
    if major >= 2:
        return 0.0
    if major == 1 or moderate >= 2:
        return 0.2
    if moderate == 1 or minor >= 2:
        return 0.4
    if flags == {"E5"} and trivial_e5:
        return 0.8
    return 0.6


def _flag_set(errors: Mapping[str, bool] | Iterable[str]) -> set[str]:
    if isinstance(errors, Mapping):
        return {c for c in E_CODES if errors.get(c)}
    return {c for c in errors if c in E_CODES}


# --------------------------------------------------------------------------------------------
# JSON schema for the studio dialect (used with response_format json_schema)
# --------------------------------------------------------------------------------------------


def _error_entry_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "present": {"type": "boolean"},
            "reason": {"type": "string"},
        },
        "required": ["present", "reason"],
        "additionalProperties": False,
    }


VERDICT_JSON_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "errors": {
            "type": "object",
            "properties": {code: _error_entry_schema() for code in E_CODES},
            "required": list(E_CODES),
            "additionalProperties": False,
        },
        "grade": {"type": "number", "enum": list(GRADES)},
        "is_correct": {"type": "boolean"},
        "reasoning": {"type": "string"},
    },
    "required": ["errors", "grade", "is_correct", "reasoning"],
    "additionalProperties": False,
}


# --------------------------------------------------------------------------------------------
# The record
# --------------------------------------------------------------------------------------------


class VerdictParseError(ValueError):
    """A judge answer that cannot be read as a verdict.  ``raw_text`` keeps the answer."""

    def __init__(self, reason: str, raw_text: str = ""):
        self.reason = reason
        self.raw_text = raw_text
        super().__init__(reason)

    def __str__(self) -> str:  # keep the message short; the raw text is on the attribute
        return self.reason


def snap_grade(value: Any) -> float:
    """Return the nearest allowed grade for a value in [0, 1]; raise ``ValueError`` otherwise.

    Accepts numbers and numeric strings ("0.8", "80%").  Exact ties go to the lower grade.
    """
    x = _to_float(value)
    if x is None:
        raise ValueError(f"grade {value!r} is not a number")
    if math.isnan(x) or x < -1e-6 or x > 1 + 1e-6:
        raise ValueError(f"grade {value!r} is outside [0, 1]")
    return min(GRADES, key=lambda g: (round(abs(g - x), 9), g))


def _to_float(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        s = value.strip()
        pct = s.endswith("%")
        if pct:
            s = s[:-1].strip()
        try:
            x = float(s)
        except ValueError:
            return None
        return x / 100.0 if pct else x
    return None


class Verdict(BaseModel):
    """One judgement: plan correctness, grade, E1-E6 flags with reasons, free-text reasoning.

    ``is_correct`` is true exactly when no flag is set (enforced).  ``contradictions`` lists
    places where the source contradicted itself (its own is_correct against its flags, its
    grade against its flags); the flags are kept as given and nothing is overwritten except
    ``is_correct``, which always follows the flags.
    """

    model_config = ConfigDict(frozen=False, extra="forbid")

    is_correct: bool | None  # None only in the apb reading: the benchmark does not count the record
    grade: float | None  # None only in the apb reading: the benchmark averages no grade for it
    errors: dict[str, bool]
    reasons: dict[str, str] = Field(default_factory=dict)
    reasoning: str = ""
    contradictions: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    model_is_correct: bool | None = None  # what the source itself said, when it said it
    dialect: str = "studio"  # error_list | flat | studio | tool_broken | pass_fail | rules | human
    setting: str = "holistic"  # one of SETTINGS
    regime: str = "holistic"  # holistic | step-wise
    outcome: str | None = None  # tool-broken class (TOOL_BROKEN_OUTCOMES), else None
    e2_subtype: str | None = None  # E2-H | E2-S when E2 is set (follows the regime)
    error_counts: dict[str, int] = Field(default_factory=dict)  # error_list counts above 1
    n_steps: int = 1  # predicted steps judged (a multi-step list gives 2 or 3)
    step_grades: list[float] = Field(default_factory=list)  # per step, for a multi-step list
    distractors_used: list[str] | None = None  # tool-extraneous: distractor calls (one per call)
    reading: str = "studio"  # which reading produced it: studio | apb (READINGS)
    apb_path: str | None = None  # apb reading: the benchmark code path that read it (APB_PATHS)

    @model_validator(mode="before")
    @classmethod
    def _derive_is_correct(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            data = dict(data)
            errors = data.get("errors") or {}
            if isinstance(errors, Mapping) and "is_correct" not in data:
                setting = normalize_setting(data.get("setting") or "holistic")
                if setting == "tool-broken" and data.get("outcome"):
                    data["is_correct"] = data["outcome"] in TOOL_BROKEN_CORRECT
                elif setting != "unsolvable":
                    data["is_correct"] = plan_is_correct(errors)
        return data

    @field_validator("setting", mode="before")
    @classmethod
    def _norm_setting(cls, value: Any) -> str:
        return normalize_setting(value if value is not None else "holistic")

    @field_validator("regime", mode="before")
    @classmethod
    def _norm_regime(cls, value: Any) -> str:
        return normalize_regime(value if value is not None else "holistic")

    @field_validator("outcome", mode="before")
    @classmethod
    def _norm_outcome(cls, value: Any) -> str | None:
        if value is None or value == "":
            return None
        key = str(value).strip().lower()
        if key not in _OUTCOME_ALIASES:
            raise ValueError(f"outcome {value!r} is not one of {', '.join(TOOL_BROKEN_OUTCOMES.values())}")
        return _OUTCOME_ALIASES[key]

    @field_validator("errors", mode="before")
    @classmethod
    def _norm_errors(cls, value: Any) -> dict[str, bool]:
        if isinstance(value, Mapping):
            unknown = [k for k in value if k not in E_CODES]
            if unknown:
                raise ValueError(f"unknown error codes {unknown}")
            return {c: bool(value.get(c, False)) for c in E_CODES}
        if isinstance(value, (list, tuple, set, frozenset)):
            codes = set(value)
            unknown = [k for k in codes if k not in E_CODES]
            if unknown:
                raise ValueError(f"unknown error codes {unknown}")
            return {c: c in codes for c in E_CODES}
        raise ValueError("errors must be a mapping of E1..E6 to booleans")

    @field_validator("reasons", mode="before")
    @classmethod
    def _norm_reasons(cls, value: Any) -> dict[str, str]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise ValueError("reasons must be a mapping")
        out = {}
        for k, v in value.items():
            if k not in E_CODES:
                raise ValueError(f"unknown error code {k!r} in reasons")
            if v is None:
                continue
            text = str(v).strip()
            if text:
                out[k] = text
        return {c: out[c] for c in E_CODES if c in out}

    @field_validator("grade", mode="before")
    @classmethod
    def _check_grade(cls, value: Any) -> float | None:
        if value is None:
            return None  # allowed in the apb reading only (checked below)
        x = _to_float(value)
        if x is None:
            raise ValueError(f"grade {value!r} is not a number")
        for g in GRADES:
            if abs(g - x) < 1e-9:
                return g
        return x  # off the scale: allowed in the apb reading only (checked below)

    @field_validator("reading", mode="before")
    @classmethod
    def _norm_reading(cls, value: Any) -> str:
        return normalize_reading(value)

    @model_validator(mode="after")
    def _check_consistency(self) -> Verdict:
        if self.reading == "apb":
            # The benchmark's own parse result, as its code counts it (APB_* quirks in
            # KNOWN_DIFFERENCES): correctness and grade may be uncounted (None), off the scale,
            # or disagree with the flags; only the vocabulary is checked.
            if self.outcome is not None and self.setting != "tool-broken":
                raise ValueError(f"an outcome class belongs to the tool-broken setting, not {self.setting}")
            self.e2_subtype = E2_SUBTYPES[self.regime] if self.errors.get("E2") else None
            return self
        if self.is_correct is None:
            raise ValueError("is_correct: true or false in the studio reading")
        if self.grade is None or self.grade not in GRADES:
            raise ValueError(f"grade {self.grade!r} is not one of {GRADES}")
        if self.outcome is not None and self.setting != "tool-broken":
            raise ValueError(f"an outcome class belongs to the tool-broken setting, not {self.setting}")
        if self.setting == "tool-broken" and self.outcome is not None:
            derived = self.outcome in TOOL_BROKEN_CORRECT
            if self.is_correct != derived:
                raise ValueError(
                    "tool-broken: is_correct must be true exactly for replacement or alternative "
                    f"(is_correct={self.is_correct}, outcome={self.outcome})"
                )
        elif self.setting != "unsolvable":
            derived = plan_is_correct(self.errors)
            if self.is_correct != derived:
                raise ValueError(
                    "is_correct must be true exactly when no error flag is set "
                    f"(is_correct={self.is_correct}, flags={self.flags})"
                )
        self.e2_subtype = E2_SUBTYPES[self.regime] if self.errors.get("E2") else None
        return self

    # -- convenience -----------------------------------------------------------------------

    @property
    def flags(self) -> list[str]:
        return [c for c in E_CODES if self.errors.get(c)]

    @property
    def error_list(self) -> list[int]:
        return [1 if self.errors.get(c) else 0 for c in E_CODES]

    @property
    def has_contradiction(self) -> bool:
        return bool(self.contradictions)

    @property
    def judge_is_correct(self) -> bool | None:
        """The judge's (or source's) own is_correct, as the benchmark's correctness rate reads it."""
        return self.model_is_correct

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Verdict:
        return cls.model_validate(dict(data))

    def to_reference(self, dialect: str = "error_list") -> dict[str, Any]:
        """Export in one of the reference code's dialects (``error_list`` or ``flat``)."""
        if dialect == "error_list":
            return {
                "is_correct": self.is_correct,
                "grade": self.grade,
                "error_list": self.error_list,
                "reasoning": self.reasoning,
            }
        if dialect == "flat":
            out: dict[str, Any] = {FLAT_KEYS[c]: self.errors[c] for c in E_CODES}
            out.update(score=self.grade, reasoning=self.reasoning, is_correct="YES" if self.is_correct else "NO")
            return out
        if dialect == "tool_broken":
            if self.outcome is None:
                raise ValueError("tool_broken dialect: this verdict has no outcome class")
            code = {v: k for k, v in TOOL_BROKEN_OUTCOMES.items()}[self.outcome]
            return {"category": code, "category_name": self.outcome, "is_correct": self.is_correct,
                    "reason": self.reasoning}
        raise ValueError(f"unknown dialect {dialect!r}")

    @classmethod
    def build(
        cls,
        errors: Mapping[str, bool] | Iterable[str],
        grade: Any,
        *,
        reasons: Mapping[str, str] | None = None,
        reasoning: str = "",
        model_is_correct: bool | None = None,
        dialect: str = "studio",
        notes: Iterable[str] = (),
        snap: bool = True,
        setting: str = "holistic",
        regime: str | None = None,
        outcome: str | None = None,
        passed: bool | None = None,
        error_counts: Mapping[str, int] | None = None,
        distractors_used: Sequence[str] | None = None,
    ) -> Verdict:
        """Build a verdict from flags and a grade, recording any contradiction.

        ``setting`` (one of :data:`SETTINGS`) decides how correctness is derived (see
        :func:`is_correct_rule`): from the flags; for tool-broken from ``outcome`` when given
        (else the flags); for unsolvable from ``passed`` (the judge's pass/fail; required).
        ``regime`` defaults to the setting's (:data:`DEFAULT_REGIME`; holistic for tool-extraneous).
        The grade is snapped to the scale when ``snap`` (with a note when it moved); a source
        ``is_correct`` that contradicts the derived correctness is recorded, never applied.
        Raises ``ValueError`` for an unsolvable verdict without ``passed``.
        """
        setting = normalize_setting(setting)
        regime = normalize_regime(regime or DEFAULT_REGIME[setting] or "holistic")
        flags = _flag_set(errors)
        err = {c: c in flags for c in E_CODES}
        notes_l = list(notes)
        contradictions: list[str] = []
        if snap:
            g = snap_grade(grade)
            x = _to_float(grade)
            if x is not None and abs(g - x) > 1e-9:
                notes_l.append(f"grade {grade!r} snapped to {g}")
        else:
            g = grade
        if outcome is not None:
            outcome = _OUTCOME_ALIASES.get(str(outcome).strip().lower(), outcome)
        if setting == "unsolvable":
            if passed is None:
                raise ValueError("unsolvable: the answer says neither pass nor fail")
            derived, basis = bool(passed), "pass/fail"
        elif setting == "tool-broken" and outcome is not None:
            derived, basis = outcome in TOOL_BROKEN_CORRECT, f"outcome {outcome}"
        else:
            derived, basis = not flags, f"flags {', '.join(sorted(flags)) or 'none'}"
        if model_is_correct is not None and model_is_correct != derived:
            contradictions.append(
                f"is_correct: source said {str(model_is_correct).lower()} but {basis}; "
                f"kept the {basis.split(' ')[0]}, is_correct={str(derived).lower()}"
            )
        if setting == "unsolvable":
            if derived and flags:
                contradictions.append(f"flags: PASS with flags {', '.join(sorted(flags))} set")
        elif setting == "tool-broken" and outcome is not None:
            pass  # the five-class judge gives no grade of its own; it is 1.0 or 0.0 by class
        elif flags and g == 1.0:
            contradictions.append(f"grade: 1.0 with flags {', '.join(sorted(flags))} set")
        elif not flags and g < 1.0:
            contradictions.append(f"grade: {g} with no flag set")
        counts = {c: int(n) for c, n in (error_counts or {}).items() if c in flags and int(n) > 1}
        return cls(
            is_correct=derived,
            grade=g,
            errors=err,
            reasons=dict(reasons or {}),
            reasoning=reasoning or "",
            contradictions=contradictions,
            notes=notes_l,
            model_is_correct=model_is_correct,
            dialect=dialect,
            setting=setting,
            regime=regime,
            outcome=outcome if setting == "tool-broken" else None,
            error_counts=counts,
            distractors_used=list(distractors_used) if distractors_used is not None else None,
        )


# --------------------------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------------------------

_FENCE_RE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n?(.*?)```", re.DOTALL)
_THINK_RE = re.compile(r"<think(?:ing)?>.*?</think(?:ing)?>", re.DOTALL | re.IGNORECASE)
_ECODE_KEY_RE = re.compile(r"^\s*E\s*([1-6])(?:[\s_:-].*)?$", re.IGNORECASE)
_ECODE_VALUE_RE = re.compile(r"\bE\s*([1-6])\b", re.IGNORECASE)

_TRUE_STR = {"true", "yes", "y", "1", "correct", "pass", "t"}
_FALSE_STR = {"false", "no", "n", "0", "incorrect", "fail", "f", "", "none", "null"}


def _to_bool(value: Any, what: str) -> bool:
    if isinstance(value, bool):
        return value
    if value is None:
        return False
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value in (0, 1):
            return bool(value)
        raise ValueError(f"{what}: {value!r} is not 0/1")
    if isinstance(value, str):
        s = value.strip().lower()
        if s in _TRUE_STR:
            return True
        if s in _FALSE_STR:
            return False
    raise ValueError(f"{what}: cannot read {value!r} as true/false")


def _balanced_spans(text: str, openers: str = "{") -> Iterable[str]:
    """Yield every balanced ``{...}`` (and, with ``openers="{["``, ``[...]``) span in order of its
    opening bracket (string-aware; brackets inside JSON strings are ignored)."""
    n = len(text)
    closer = {"{": "}", "[": "]"}
    positions = sorted(i for i, ch in enumerate(text) if ch in openers)[:400]
    for start in positions:
        stack: list[str] = []
        in_str = False
        esc = False
        for i in range(start, n):
            ch = text[i]
            if in_str:
                if esc:
                    esc = False
                elif ch == "\\":
                    esc = True
                elif ch == '"':
                    in_str = False
                continue
            if ch == '"':
                in_str = True
            elif ch in "{[":
                stack.append(closer[ch])
            elif ch in "}]":
                if not stack or stack[-1] != ch:
                    break  # unbalanced: not a span
                stack.pop()
                if not stack:
                    yield text[start : i + 1]
                    break


def _balanced_objects(text: str) -> Iterable[str]:
    """Yield every balanced ``{...}`` span in order of its opening brace (string-aware)."""
    return _balanced_spans(text, "{")


_PY_LITERALS = re.compile(r'("(?:[^"\\]|\\.)*")|\b(True|False|None)\b')
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")


def _loads_lenient(candidate: str) -> Any:
    try:
        return json.loads(candidate)
    except json.JSONDecodeError:
        pass
    # second chance: Python literals and trailing commas (common in small local models)
    fixed = _PY_LITERALS.sub(
        lambda m: m.group(1) if m.group(1) else {"True": "true", "False": "false", "None": "null"}[m.group(2)],
        candidate,
    )
    fixed = _TRAILING_COMMA.sub(r"\1", fixed)
    return json.loads(fixed)


_PASS_FAIL = {"pass": True, "passed": True, "fail": False, "failed": False}
_LIST_WRAPPERS = ("steps", "step_evaluations", "evaluations", "per_step", "step_verdicts")


def _looks_like_verdict(obj: Any) -> bool:
    if not isinstance(obj, Mapping):
        return False
    keys = {str(k).strip().lower() for k in obj}
    if keys & {"error_list", "errors", "grade", "score", "is_correct", "category"}:
        return True
    for k in ("verdict", "result", "pass", "passed"):
        found, v = _find_key(obj, k)
        if found and (isinstance(v, bool) or str(v).strip().lower() in _PASS_FAIL):
            return True
    return any(_ECODE_KEY_RE.match(str(k)) for k in obj)


def _looks_like_verdict_list(obj: Any) -> bool:
    return isinstance(obj, list) and bool(obj) and all(_looks_like_verdict(x) for x in obj)


def _extract(text: Any, allow_list: bool) -> dict[str, Any] | list[dict[str, Any]]:
    if text is None:
        raise VerdictParseError("empty answer", "")
    raw = str(text)
    cleaned = _THINK_RE.sub("", raw).strip()
    if not cleaned:
        raise VerdictParseError("empty answer", raw)
    candidates: list[str] = [cleaned]
    candidates += [m.group(2).strip() for m in _FENCE_RE.finditer(cleaned)]
    first_dict: dict[str, Any] | None = None
    seen: set[str] = set()

    def consider(c: str) -> Any:
        nonlocal first_dict
        if c in seen or not c:
            return None
        seen.add(c)
        try:
            obj = _loads_lenient(c)
        except (json.JSONDecodeError, ValueError, RecursionError):
            return None
        if isinstance(obj, dict):
            if _looks_like_verdict(obj) or (allow_list and _wrapped_list(obj) is not None):
                return obj
            if first_dict is None:
                first_dict = obj
        elif allow_list and _looks_like_verdict_list(obj):
            return obj
        return None

    for c in candidates:
        found = consider(c)
        if found is not None:
            return found
    for c in list(candidates):
        for span in _balanced_spans(c, "{[" if allow_list else "{"):
            found = consider(span)
            if found is not None:
                return found
    if first_dict is not None:
        return first_dict
    raise VerdictParseError("no JSON object found in the answer", raw)


def extract_json_object(text: str) -> dict[str, Any]:
    """Find the verdict JSON object in a model answer.

    Tries, in order: the whole text, the contents of each code fence, then every balanced
    ``{...}`` span; the first dict that looks like a verdict wins, else the first dict.
    Raises :class:`VerdictParseError` when nothing parses.
    """
    found = _extract(text, allow_list=False)
    assert isinstance(found, dict)
    return found


def extract_verdict_json(text: str) -> dict[str, Any] | list[dict[str, Any]]:
    """Like :func:`extract_json_object`, but a JSON list of verdict objects (one per predicted
    step) is returned as a list; brackets are scanned in order of opening, so a list wins over
    the objects inside it and an object over the ``error_list`` inside it."""
    return _extract(text, allow_list=True)


def _wrapped_list(obj: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """``{"steps": [verdict, verdict]}`` without flags of its own -> the list, else None."""
    for name in _LIST_WRAPPERS:
        found, inner = _find_key(obj, name)
        if found and _looks_like_verdict_list(inner):
            rest = {k: v for k, v in obj.items() if str(k).strip().lower() != name}
            has_own = any(_ECODE_KEY_RE.match(str(k)) for k in rest) or _find_key(rest, "error_list", "errors")[0]
            if not has_own:
                return list(inner)
    return None


def _find_key(obj: Mapping[str, Any], *names: str) -> tuple[bool, Any]:
    lowered = {str(k).strip().lower(): k for k in obj}
    for name in names:
        k = lowered.get(name)
        if k is not None:
            return True, obj[k]
    return False, None


def _entry_flag_reason(code: str, entry: Any) -> tuple[bool, str]:
    """One entry of an ``errors`` mapping: a bool-ish, or {present/flag/value, reason}."""
    if isinstance(entry, Mapping):
        found, v = _find_key(entry, "present", "flag", "value", "error", "is_error", "detected", "set")
        if not found:
            raise ValueError(f"errors.{code}: no 'present' field")
        _, r = _find_key(entry, "reason", "explanation", "evidence", "why", "detail")
        return _to_bool(v, f"errors.{code}.present"), "" if r is None else str(r)
    return _to_bool(entry, f"errors.{code}"), ""


def _error_count(value: Any, what: str) -> int:
    """One ``error_list`` entry: the benchmark asks for "six integers"; 0 is absent, any positive
    count present.  Booleans and numeric strings are read too; negatives and fractions are not."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, str):
        s = value.strip().lower()
        if s in _TRUE_STR - {"1"}:
            return 1
        if s in _FALSE_STR - {"0"}:
            return 0
        try:
            value = float(s)
        except ValueError:
            raise ValueError(f"{what}: cannot read {value!r} as a count") from None
    if isinstance(value, (int, float)) and not (isinstance(value, float) and math.isnan(value)):
        if value < 0 or abs(value - round(value)) > 1e-9:
            raise ValueError(f"{what}: {value!r} is not a non-negative integer")
        return int(round(value))
    raise ValueError(f"{what}: cannot read {value!r} as a count")


def distractor_calls(predicted_steps: Any, distractors: Iterable[Any]) -> list[str]:
    """Distractor tools among the predicted calls, one entry per call, in call order.

    ``predicted_steps``: a list of steps (``call``/``name``/``tool``/``action`` keys, or OpenAI
    ``tool_calls``) or a studio trajectory; ``distractors``: names of the injected tools.  Names
    are compared after :func:`evaluation.judge.rules.normalize_tool_name`-style folding
    (``seg_flood`` = ``seg.flood``), exactly otherwise, as the benchmark's rule-based
    ``used_redundant_tools`` check compares them (tool_redundancy_evaluator).  The count of the
    returned list is the paper's "ExtUse".
    """
    def fold(name: Any) -> str:
        n = "" if name is None else str(name).split("(", 1)[0].strip()
        return n.replace("_", ".", 1) if n and "." not in n and "_" in n else n

    wanted = {fold(d) for d in distractors or [] if str(d or "").strip()}
    out: list[str] = []
    if not wanted:
        return out

    def visit(step: Any) -> None:
        if isinstance(step, (list, tuple)):
            for x in step:
                visit(x)
            return
        if not isinstance(step, Mapping):
            return
        calls = step.get("tool_calls")
        if isinstance(calls, list):
            for tc in calls:
                if isinstance(tc, Mapping):
                    fn = tc.get("function")
                    name = fn.get("name") if isinstance(fn, Mapping) else tc.get("name")
                    if fold(name) in wanted:
                        out.append(fold(name))
            return
        for key in ("call", "name", "tool", "tool_name", "action"):
            if step.get(key):
                if fold(step[key]) in wanted:
                    out.append(fold(step[key]))
                return

    visit(predicted_steps)
    return out


def parse_verdict(
    text: str | Mapping[str, Any] | Sequence[Mapping[str, Any]],
    setting: str = "holistic",
    *,
    regime: str | None = None,
    distractors_used: Sequence[str] | None = None,
    reading: str = DEFAULT_READING,
    horizon: int | None = None,
) -> Verdict:
    """Parse a judge answer (text, a decoded mapping, or a decoded list) into a :class:`Verdict`.

    ``reading``: ``studio`` (the default, described below) or ``apb``, the planning benchmark's
    own parse result (:func:`parse_verdict_apb`; ``horizon``, the step-wise k of the case, picks
    its next-1/2/3 evaluator there and is ignored here).

    ``setting``: one of :data:`SETTINGS` (``holistic``, ``step-wise``, ``tool-extraneous``,
    ``tool-broken``, ``unsolvable``); ``regime``: ``holistic`` or ``step-wise`` (default: the
    setting's, see :data:`DEFAULT_REGIME`; tool-extraneous is read as step-wise when the answer
    is flat or a list, the step-wise code's dialects, else holistic); ``distractors_used``: for
    tool-extraneous, the distractor calls found in the prediction (:func:`distractor_calls`).

    Dialects per setting (what the benchmark's code emits there):

    * holistic / unsolvable / tool-extraneous: ``error_list`` (six integers, non-zero = present)
      with ``grade`` and ``is_correct``; also the flat and studio dialects;
    * step-wise / tool-extraneous step-wise: flat ``E<k>_...`` keys with ``score`` and
      ``is_correct`` YES/NO, or ``error_list``; a **list** of such objects for k = 2 or 3
      predicted steps (flags OR-ed, minimum grade, the judge's is_correct AND-ed);
    * tool-broken: the five-class object (``category`` 1-5 or its name; correct iff replacement
      or alternative; grade 1.0 or 0.0) or, from the apb_eval judge, the ``error_list`` object;
    * unsolvable: correctness is the judge's pass/fail (``is_correct``, or ``verdict`` /
      ``result`` / ``pass`` as PASS/FAIL), independent of the flags; a missing grade then
      follows the pass (1.0) or fail (0.0), with a note.

    Raises :class:`VerdictParseError` (with ``raw_text``) when no verdict can be read: no JSON, no
    error information, no grade, a grade outside [0, 1], an ``error_list`` that is not six
    non-negative integers, a tool-broken answer without a readable category, an unsolvable answer
    without pass/fail, or a list where the regime is holistic.  Missing individual flat keys
    count as false, as in the benchmark's code.  ``ValueError`` for an unknown setting or regime.
    """
    setting = normalize_setting(setting)
    if regime is not None:
        regime = normalize_regime(regime)
    if normalize_reading(reading) == "apb":
        return parse_verdict_apb(text, setting, regime=regime, distractors_used=distractors_used, horizon=horizon)
    if isinstance(text, str) or text is None:
        raw = "" if text is None else text
        obj: Any = extract_verdict_json(text)  # type: ignore[arg-type]
    else:
        raw = json.dumps(text, ensure_ascii=False, default=str)
        if not isinstance(text, (Mapping, list, tuple)):  # a bare number or boolean is no verdict
            raise VerdictParseError(f"not a verdict: a {type(text).__name__}, not an object or a list", raw)
        obj = dict(text) if isinstance(text, Mapping) else list(text)
    try:
        if isinstance(obj, Mapping):
            obj = _unwrap(obj)
        if isinstance(obj, list):
            return _verdict_from_list(obj, setting, regime, distractors_used)
        return _verdict_from_obj(obj, setting, regime, distractors_used)
    except VerdictParseError as exc:
        exc.raw_text = raw
        raise
    except (ValueError, TypeError) as exc:
        raise VerdictParseError(str(exc), raw) from None


def _unwrap(obj: Mapping[str, Any]) -> Mapping[str, Any] | list[dict[str, Any]]:
    # Some judges nest the verdict ({"verdict": {...}} / {"evaluation": {...}}) or the per-step list.
    listed = _wrapped_list(obj)
    if listed is not None:
        return listed
    for wrapper in ("verdict", "evaluation", "judgement", "judgment", "result"):
        found, inner = _find_key(obj, wrapper)
        if found and isinstance(inner, Mapping) and _looks_like_verdict(inner) and not _looks_like_verdict(
            {k: v for k, v in obj.items() if str(k).lower() != wrapper}
        ):
            return dict(inner)
    return obj


def _verdict_from_list(items: list[Any], setting: str, regime: str | None,
                       distractors_used: Sequence[str] | None) -> Verdict:
    """Per-step verdicts of one k-step prediction -> one verdict (benchmark next-3 aggregation:
    flags OR-ed, minimum score, reasoning joined as ``[Step i] ...``)."""
    if regime is None:
        regime = DEFAULT_REGIME[setting] or "step-wise"
    if regime != "step-wise":
        raise VerdictParseError(f"{setting}: a list of verdicts belongs to step-wise judging, not {regime}")
    if setting in ("unsolvable",):
        raise VerdictParseError("unsolvable: expected one verdict object, got a list")
    parts: list[Verdict] = []
    for i, item in enumerate(items, start=1):
        if not isinstance(item, Mapping):
            raise VerdictParseError(f"step {i}: not a JSON object")
        if _find_key(item, "category")[0]:
            raise VerdictParseError("tool-broken: expected one classification object, got a list")
        try:
            parts.append(_verdict_from_obj(item, setting, regime, None))
        except VerdictParseError as exc:
            raise VerdictParseError(f"step {i}: {exc.reason}") from None
        except (ValueError, TypeError) as exc:
            raise VerdictParseError(f"step {i}: {exc}") from None
    flags = set().union(*(set(p.flags) for p in parts))
    grade = min(p.grade for p in parts)
    reasons: dict[str, str] = {}
    for i, p in enumerate(parts, start=1):
        for c, r in p.reasons.items():
            reasons[c] = (reasons[c] + " " if c in reasons else "") + f"[step {i}] {r}"
    reasoning = "\n".join(f"[Step {i}] {p.reasoning}" for i, p in enumerate(parts, start=1) if p.reasoning)
    given = [p.model_is_correct for p in parts if p.model_is_correct is not None]
    counts: dict[str, int] = {}
    for p in parts:
        for c, n in p.error_counts.items():
            counts[c] = max(counts.get(c, 0), n)
    notes = [f"step {i}: {n}" for i, p in enumerate(parts, start=1) for n in p.notes]
    notes.append(f"{len(parts)} per-step verdicts combined: flags OR-ed, minimum grade")
    v = Verdict.build(flags, grade, reasons=reasons, reasoning=reasoning,
                      model_is_correct=all(given) if given else None, dialect=parts[0].dialect, notes=notes,
                      setting=setting, regime=regime, error_counts=counts, distractors_used=distractors_used)
    v.contradictions = [f"step {i}: {c}" for i, p in enumerate(parts, start=1) for c in p.contradictions
                        if not c.startswith("is_correct")] + v.contradictions
    v.n_steps = len(parts)
    v.step_grades = [p.grade for p in parts]
    return v


def _read_outcome(obj: Mapping[str, Any]) -> str:
    """The tool-broken class from ``category`` (1-5, "1", or a name) or ``category_name``."""
    found, cat = _find_key(obj, "category")
    _, name = _find_key(obj, "category_name")
    if found and cat is not None and str(cat).strip() != "":
        if isinstance(cat, bool):
            raise ValueError(f"category: {cat!r} is not a class")
        key = str(cat).strip().lower()
        if key in _OUTCOME_ALIASES:
            return _OUTCOME_ALIASES[key]
        try:
            number = float(key)
        except ValueError:
            raise ValueError(f"category: {cat!r} is neither 1-5 nor a class name") from None
        if number != int(number) or int(number) not in TOOL_BROKEN_OUTCOMES:
            raise ValueError(f"category: {cat!r} is not one of 1-5")
        outcome = TOOL_BROKEN_OUTCOMES[int(number)]
        if name is not None and str(name).strip().lower() in _OUTCOME_ALIASES \
                and _OUTCOME_ALIASES[str(name).strip().lower()] != outcome:
            raise ValueError(f"category {cat!r} ({outcome}) disagrees with category_name {name!r}")
        return outcome
    if name is not None and str(name).strip().lower() in _OUTCOME_ALIASES:
        return _OUTCOME_ALIASES[str(name).strip().lower()]
    raise VerdictParseError("tool-broken: no category (1-5) in the answer")


def _read_pass(obj: Mapping[str, Any]) -> bool | None:
    for key in ("is_correct", "correct", "pass", "passed", "verdict", "result", "status"):
        found, v = _find_key(obj, key)
        if not found or v is None or isinstance(v, Mapping):
            continue
        s = str(v).strip().lower()
        if key in ("verdict", "result", "status"):
            if isinstance(v, bool):
                return v
            if s in _PASS_FAIL:
                return _PASS_FAIL[s]
            continue
        return _to_bool(v, key)
    return None


def _reasoning_of(obj: Mapping[str, Any]) -> str:
    _, reasoning = _find_key(obj, "reasoning", "reason", "explanation", "rationale", "justification")
    if isinstance(reasoning, (list, tuple)):
        reasoning = "\n".join(str(x) for x in reasoning)
    elif isinstance(reasoning, Mapping):
        reasoning = json.dumps(reasoning, ensure_ascii=False)
    return "" if reasoning is None else str(reasoning)


def _verdict_from_obj(obj: Mapping[str, Any], setting: str = "holistic", regime: str | None = None,
                      distractors_used: Sequence[str] | None = None) -> Verdict:
    if setting == "tool-broken" and (_find_key(obj, "category")[0] or _find_key(obj, "category_name")[0]):
        outcome = _read_outcome(obj)
        found, ic = _find_key(obj, "is_correct")
        model_ic = _to_bool(ic, "is_correct") if found and ic is not None else None
        correct = outcome in TOOL_BROKEN_CORRECT
        return Verdict.build(set(), 1.0 if correct else 0.0, reasoning=_reasoning_of(obj), model_is_correct=model_ic,
                             dialect="tool_broken", setting=setting, regime=regime or "step-wise", outcome=outcome)

    sources: dict[str, set[str]] = {}
    reasons: dict[str, str] = {}
    notes: list[str] = []
    counts: dict[str, int] = {}

    # studio dialect: errors mapping (or a list of codes)
    found, errors = _find_key(obj, "errors", "error_flags", "error_types")
    if found and errors is not None:
        flags: set[str] = set()
        if isinstance(errors, Mapping):
            for k, entry in errors.items():
                m = _ECODE_KEY_RE.match(str(k))
                if not m:
                    notes.append(f"ignored unknown error key {k!r}")
                    continue
                code = f"E{m.group(1)}"
                flag, reason = _entry_flag_reason(code, entry)
                if flag:
                    flags.add(code)
                if reason.strip():
                    reasons[code] = reason.strip()
        elif isinstance(errors, (list, tuple)):
            if len(errors) == 6 and all(isinstance(x, (int, bool)) or str(x).strip().isdigit() for x in errors):
                flags = {c for c, v in zip(E_CODES, errors) if _error_count(v, f"errors[{c}]")}
            else:
                for item in errors:
                    m = _ECODE_VALUE_RE.search(str(item))
                    if not m:
                        raise ValueError(f"errors: cannot read {item!r} as an error code")
                    flags.add(f"E{m.group(1)}")
        else:
            raise ValueError("errors: expected a mapping or a list")
        sources["errors"] = flags

    # the benchmark's apb_eval dialect: error_list of six integers (non-zero = present)
    found, error_list = _find_key(obj, "error_list")
    if found and error_list is not None:
        if isinstance(error_list, str):
            try:
                error_list = json.loads(error_list)
            except json.JSONDecodeError:
                raise ValueError("error_list: not a list") from None
        if not isinstance(error_list, (list, tuple)) or len(error_list) != 6:
            raise ValueError(f"error_list must have six integers [E1..E6], got {error_list!r}")
        present: set[str] = set()
        for c, v in zip(E_CODES, error_list):
            n = _error_count(v, f"error_list[{c}]")
            if n:
                present.add(c)
                counts[c] = n
        sources["error_list"] = present

    # the step-wise dialect: flat E<k>_NAME keys (also bare E<k>)
    flat: set[str] = set()
    flat_seen = False
    for k, v in obj.items():
        m = _ECODE_KEY_RE.match(str(k))
        if not m:
            continue
        code = f"E{m.group(1)}"
        key_l = str(k).lower()
        if "reason" in key_l or "explanation" in key_l:
            if v:
                reasons.setdefault(code, str(v).strip())
            continue
        flat_seen = True
        if isinstance(v, Mapping):
            flag, reason = _entry_flag_reason(code, v)
            if reason.strip():
                reasons.setdefault(code, reason.strip())
        else:
            flag = _to_bool(v, str(k))
        if flag:
            flat.add(code)
    if flat_seen:
        sources["flat"] = flat

    passed = _read_pass(obj) if setting == "unsolvable" else None
    if not sources and not (setting == "unsolvable" and passed is not None):
        if setting == "tool-broken":
            raise VerdictParseError("tool-broken: no category (1-5) and no error flags in the answer")
        raise VerdictParseError("no error flags (errors, error_list or E1..E6 keys) in the answer")

    # separate reasons mapping
    found, rmap = _find_key(obj, "reasons", "error_reasons", "error_details")
    if found and isinstance(rmap, Mapping):
        for k, v in rmap.items():
            m = _ECODE_KEY_RE.match(str(k))
            if m and v not in (None, ""):
                reasons.setdefault(f"E{m.group(1)}", str(v).strip())

    if "errors" in sources:
        dialect = "studio"
    elif "error_list" in sources:
        dialect = "error_list"
    elif "flat" in sources:
        dialect = "flat"
    else:
        dialect = "pass_fail"
    flag_sets = list(sources.values())
    flags = set().union(*flag_sets) if flag_sets else set()
    contradictions_extra: list[str] = []
    if any(s != flags for s in flag_sets):
        desc = "; ".join(f"{name}={','.join(sorted(s)) or 'none'}" for name, s in sources.items())
        contradictions_extra.append(f"flags: the answer's flag fields disagree ({desc}); kept the union")

    found, grade = _find_key(obj, "grade", "score", "plan_grade", "overall_score")
    if not found or grade is None or (isinstance(grade, str) and not grade.strip()):
        if setting == "unsolvable" and passed is not None:
            grade = 1.0 if passed else 0.0
            notes.append(f"no grade in the answer; {grade} from the {'pass' if passed else 'fail'}")
        else:
            raise VerdictParseError("no grade or score in the answer")

    if setting == "unsolvable":
        model_is_correct = passed
    else:
        found, ic = _find_key(obj, "is_correct", "correct", "plan_correctness")
        model_is_correct = _to_bool(ic, "is_correct") if found and ic is not None else None

    if regime is None:
        regime = DEFAULT_REGIME[setting] or ("step-wise" if dialect == "flat" else "holistic")
        if DEFAULT_REGIME[setting] is None:
            notes.append(f"regime {regime} inferred from the {dialect} dialect")

    verdict = Verdict.build(
        flags,
        grade,
        reasons={c: r for c, r in reasons.items()},
        reasoning=_reasoning_of(obj),
        model_is_correct=model_is_correct,
        dialect=dialect,
        notes=notes,
        setting=setting,
        regime=regime,
        passed=passed,
        error_counts=counts,
        distractors_used=distractors_used,
    )
    if contradictions_extra:
        verdict.contradictions = contradictions_extra + verdict.contradictions
    return verdict


# --------------------------------------------------------------------------------------------
# The apb reading: the planning benchmark's own parse results (KNOWN_DIFFERENCES, "apb")
# --------------------------------------------------------------------------------------------

_GREEDY_OBJECT_RE = re.compile(r"\{.*\}", re.DOTALL)


def _apb_runner_object(text: str) -> dict[str, Any]:
    """What ``runner.parse_json_object`` (runner.py 23-38) returns for an answer: a fence removed
    only at the very start (```json or ```) and end, ``json.loads``, else the greedy first-``{``-to-
    last-``}`` span; a JSON value that is not an object comes back as ``{"value": value}``.
    Raises :class:`VerdictParseError` where the runner raises."""
    cleaned = text.strip()
    for fence in ("```json", "```"):
        if cleaned.startswith(fence):
            cleaned = cleaned[len(fence):].strip()
            break
    if cleaned.endswith("```"):
        cleaned = cleaned[:-3].strip()
    try:
        value = json.loads(cleaned)
    except json.JSONDecodeError:
        match = _GREEDY_OBJECT_RE.search(cleaned)
        if not match:
            raise VerdictParseError("apb runner: not JSON and no {...} span (parse_json_object raises)", text) from None
        try:
            value = json.loads(match.group(0))
        except json.JSONDecodeError as exc:
            raise VerdictParseError(f"apb runner: the greedy {{...}} span is not JSON ({exc.msg})", text) from None
    return value if isinstance(value, dict) else {"value": value}


def _apb_legacy_value(text: str) -> Any:
    """What the legacy evaluators decode (next1_evaluator.py 744-770, the same in next2/next3 and
    tool_broken_evaluator.py 299-322): the text after the first ```json (or the first ```) up to the
    next fence, else the whole text stripped; ``json.loads``, then their JSON repair (approximated,
    see ``json-repair`` in :data:`KNOWN_DIFFERENCES`).  Raises :class:`VerdictParseError` where they
    give up (the sample is dropped)."""
    if "```json" in text:
        body = text.split("```json")[1].split("```")[0].strip()
    elif "```" in text:
        body = text.split("```")[1].split("```")[0].strip()
    else:
        body = text.strip()
    try:
        return json.loads(body)
    except json.JSONDecodeError:
        pass
    try:
        return _loads_lenient(body)
    except (json.JSONDecodeError, ValueError, RecursionError):
        raise VerdictParseError("apb legacy evaluator: not JSON, not repairable (the sample is dropped)", text) from None


def _apb_flat_flags(obj: Mapping[str, Any]) -> set[str]:
    """The step-wise evaluators' flags: the six exact keys, set when truthy (next1_evaluator.py 776-785)."""
    return {c for c, key in FLAT_KEYS.items() if obj.get(key, False)}


def _apb_number(value: Any) -> float | None:
    """A grade as the benchmark averages it (runner.py 188: ``isinstance(grade, (int, float))``, a
    bool included), or None; a non-finite one is None too (``non-finite-grade`` in
    :data:`KNOWN_DIFFERENCES`, the apb reading's one departure)."""
    if not isinstance(value, (int, float)):
        return None
    try:
        x = float(value)
    except OverflowError:
        return None
    return x if math.isfinite(x) else None


def _apb_text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def _apb_path(setting: str, regime: str | None, text: str, horizon: int | None) -> tuple[str, Any]:
    """Which benchmark code reads this answer, and the value it decoded (or None).

    The benchmark reads a setting with the code that asked for the answer's dialect: an answer
    holding ``error_list`` (what every apb_eval judge prompt asks for) goes through the runner; in
    tool-broken any other answer through the legacy five-class evaluator; in the step-wise regime
    (step-wise, and tool-extraneous step-wise) through the legacy next-k evaluator of the case's
    horizon (next-3 when unknown: the only one that reads a list); everything else through the runner.
    """
    runner_obj: dict[str, Any] | None
    try:
        runner_obj = _apb_runner_object(text)
    except VerdictParseError:
        runner_obj = None
    if runner_obj is not None and "error_list" in runner_obj and "category" not in runner_obj:
        return "runner", runner_obj
    if setting == "tool-broken":
        return "tool_broken", None
    stepwise = setting == "step-wise" or regime == "step-wise"
    if setting == "tool-extraneous" and regime is None:  # the regime follows the dialect
        try:
            decoded = _apb_legacy_value(text)
        except VerdictParseError:
            decoded = None
        stepwise = isinstance(decoded, list) or (
            isinstance(decoded, Mapping) and any(k in decoded for k in FLAT_KEYS.values()))
    if stepwise:
        if setting == "tool-extraneous" or horizon == 1:
            return "next1", None  # tool_redundancy_evaluator inherits next1's parse
        return ("next2" if horizon == 2 else "next3"), None
    if runner_obj is None:
        _apb_runner_object(text)  # raises the runner's error
    return "runner", runner_obj


def parse_verdict_apb(
    text: str | Mapping[str, Any] | Sequence[Any] | None,
    setting: str = "holistic",
    *,
    regime: str | None = None,
    distractors_used: Sequence[str] | None = None,
    horizon: int | None = None,
) -> Verdict:
    """The planning benchmark's own parse result of a judge answer, as a :class:`Verdict` with
    ``reading="apb"`` and ``apb_path`` naming the code that read it (:data:`APB_PATHS`).

    In this reading ``is_correct`` is the correctness the benchmark counts, ``None`` where it
    counts none; ``model_is_correct`` is the same value; ``grade`` is the value it averages
    (unsnapped; ``None`` where it averages none); the flags are those that code reads.  Each
    deviation from the studio's reading is an entry of :data:`KNOWN_DIFFERENCES` (its ``apb``).

    * runner (runner.py): correctness ``bool(is_correct)`` when the key is present, else
      uncounted; grade when an int/float (a bool included); flags from a six-entry
      ``error_list``, non-zero present (no benchmark code reads them);
    * next1 / next2 / next3 (the legacy step-wise evaluators): flags are the six exact
      ``FLAT_KEYS`` when truthy, correctness is "no flag set" (the judge's own value overwritten),
      ``score`` and ``reasoning`` required in an object; next-3 aggregates a list (flags OR-ed,
      minimum score with a missing one 0.0), next-1/2 drop one;
    * tool_broken: ``int(category)`` (5 when missing, 5 outside 1-5), correct iff 1 or 2, grade
      1.0/0.0, no flags.

    ``horizon``: the case's k (1-3) where known (picks the next-k evaluator).  Raises
    :class:`VerdictParseError` where the benchmark drops the answer or its judge stage raises.
    """
    setting = normalize_setting(setting)
    if regime is not None:
        regime = normalize_regime(regime)
    if text is None or isinstance(text, str):
        raw = text or ""
    else:
        raw = json.dumps(text, ensure_ascii=False, default=str)
    path, runner_obj = _apb_path(setting, regime, raw, horizon)
    if path != "runner" and regime is None:
        regime = "step-wise"
    regime = regime or DEFAULT_REGIME[setting] or "holistic"
    common = dict(reading="apb", apb_path=path, setting=setting, regime=regime,
                  distractors_used=list(distractors_used) if distractors_used is not None else None)

    if path == "runner":
        obj = runner_obj or {}
        correct = bool(obj["is_correct"]) if "is_correct" in obj else None
        grade = _apb_number(obj.get("grade"))
        elist = obj.get("error_list")
        notes = [f"apb: {APB_PATHS['runner']}"]
        try:  # no benchmark code reads error_list: the prompt's meaning (non-zero = present)
            flags = {c for c, v in zip(E_CODES, elist) if _error_count(v, f"error_list[{c}]")} \
                if isinstance(elist, list) and len(elist) == 6 else set()
        except ValueError:
            flags = set()
        if elist is not None and not flags and not (isinstance(elist, list) and len(elist) == 6):
            notes.append("apb: error_list is not six entries; no flags read (runner.score reads none either)")
        if correct is None:
            notes.append("apb: no is_correct, so runner.score counts no correctness for it")
        if grade is None:
            notes.append("apb: no finite int/float grade, so no grade is averaged for it "
                         "(non-finite: see non-finite-grade)")
        return Verdict(is_correct=correct, grade=grade, errors=flags, reasoning=_apb_text(obj.get("reasoning")),
                       model_is_correct=correct, dialect="error_list" if isinstance(elist, list) else "runner",
                       notes=notes, **common)

    data = _apb_legacy_value(raw)
    if path == "tool_broken":
        if not isinstance(data, Mapping):
            raise VerdictParseError("apb tool-broken: not a JSON object (eval_json.get raises; dropped)", raw)
        try:
            category = int(data.get("category", 5))
        except (TypeError, ValueError, OverflowError) as exc:
            raise VerdictParseError(f"apb tool-broken: int(category) fails ({exc}); dropped", raw) from None
        if category not in TOOL_BROKEN_OUTCOMES:
            category = 5
        reason = data.get("reason", "No reason provided")
        if not isinstance(reason, (str, list, tuple)):
            raise VerdictParseError(f"apb tool-broken: reason {type(reason).__name__} cannot be sliced for the "
                                    "evaluator's log line (reason[:200] raises; dropped)", raw)
        correct = category in (1, 2)
        return Verdict(is_correct=correct, grade=1.0 if correct else 0.0, errors=set(),
                       reasoning=_apb_text(reason), model_is_correct=correct,
                       dialect="tool_broken", outcome=TOOL_BROKEN_OUTCOMES[category],
                       notes=[f"apb: {APB_PATHS['tool_broken']}"], **common)

    notes = [f"apb: {APB_PATHS[path]}"]
    if isinstance(data, list):
        if path != "next3":
            raise VerdictParseError(f"apb {path}: a list of verdicts is dropped by this evaluator", raw)
        if not data:
            raise VerdictParseError("apb next3: an empty list is dropped", raw)
        flags: set[str] = set()
        score: Any = 1.0
        parts: list[str] = []
        grades: list[float] = []
        for i, item in enumerate(data, start=1):
            if not isinstance(item, Mapping):
                continue
            flags |= _apb_flat_flags(item)
            item_score = item.get("score", 0.0)
            try:
                if item_score < score:
                    score = item_score
            except TypeError:
                raise VerdictParseError(f"apb next3: step {i}'s score {item_score!r} cannot be compared; "
                                        "dropped", raw) from None
            if _apb_number(item_score) is not None:
                grades.append(float(item_score))
            if item.get("reasoning", ""):
                parts.append(f"[Step {i}] {item.get('reasoning')}")
        correct = not flags
        v = Verdict(is_correct=correct, grade=_apb_number(score), errors=flags, reasoning="\n".join(parts),
                    model_is_correct=correct, dialect="flat", notes=notes, **common)
        v.n_steps = len(data)
        v.step_grades = grades
        return v
    if not isinstance(data, Mapping):
        raise VerdictParseError(f"apb {path}: not a JSON object (dropped)", raw)
    for key in ("score", "reasoning"):
        if key not in data:
            raise VerdictParseError(f"apb {path}: no {key!r} (KeyError; the sample is dropped)", raw)
    flags = _apb_flat_flags(data)
    correct = not flags
    grade = _apb_number(data["score"])
    if grade is None:
        notes.append(f"apb: score {data['score']!r} is not a number (the benchmark's statistics cannot average it)")
    return Verdict(is_correct=correct, grade=grade, errors=flags, reasoning=_apb_text(data["reasoning"]),
                   model_is_correct=correct, dialect="flat", notes=notes, **common)
