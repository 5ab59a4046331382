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
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from kernel.taxonomy import E_CODES, MAJOR_CODES, MINOR_CODES, plan_is_correct  # noqa: E402

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
        name="Goal understanding",
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
        name="Task incompleteness / premature conclusion",
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
        name="Constraint violation",
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
        name="Logic error",
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
        name="Tool use error",
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
        name="Hallucination",
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

    is_correct: bool
    grade: float
    errors: dict[str, bool]
    reasons: dict[str, str] = Field(default_factory=dict)
    reasoning: str = ""
    contradictions: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    model_is_correct: bool | None = None  # what the source itself said, when it said it
    dialect: str = "studio"  # error_list | flat | studio | rules | human

    @model_validator(mode="before")
    @classmethod
    def _derive_is_correct(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            data = dict(data)
            errors = data.get("errors") or {}
            if isinstance(errors, Mapping) and "is_correct" not in data:
                data["is_correct"] = plan_is_correct(errors)
        return data

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
    def _check_grade(cls, value: Any) -> float:
        x = _to_float(value)
        if x is None:
            raise ValueError(f"grade {value!r} is not a number")
        for g in GRADES:
            if abs(g - x) < 1e-9:
                return g
        raise ValueError(f"grade {value!r} is not one of {GRADES}")

    @model_validator(mode="after")
    def _check_consistency(self) -> "Verdict":
        derived = plan_is_correct(self.errors)
        if self.is_correct != derived:
            raise ValueError(
                "is_correct must be true exactly when no error flag is set "
                f"(is_correct={self.is_correct}, flags={self.flags})"
            )
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

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump()

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Verdict":
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
    ) -> "Verdict":
        """Build a verdict from flags and a grade, recording any contradiction.

        The grade is snapped to the scale when ``snap`` (with a note when it moved); a source
        ``is_correct`` that contradicts the flags is recorded, never applied.
        """
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
        derived = not flags
        if model_is_correct is not None and model_is_correct != derived:
            contradictions.append(
                f"is_correct: source said {str(model_is_correct).lower()} but flags are "
                f"{', '.join(sorted(flags)) or 'none'}; kept the flags, is_correct={str(derived).lower()}"
            )
        if flags and g == 1.0:
            contradictions.append(f"grade: 1.0 with flags {', '.join(sorted(flags))} set")
        elif not flags and g < 1.0:
            contradictions.append(f"grade: {g} with no flag set")
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


def _balanced_objects(text: str) -> Iterable[str]:
    """Yield every balanced ``{...}`` span in order of its opening brace (string-aware)."""
    n = len(text)
    start = text.find("{")
    tried = 0
    while start != -1 and tried < 200:
        tried += 1
        depth = 0
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
            elif ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    yield text[start : i + 1]
                    break
        start = text.find("{", start + 1)


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


def _looks_like_verdict(obj: Mapping[str, Any]) -> bool:
    keys = {str(k).strip().lower() for k in obj}
    if keys & {"error_list", "errors", "grade", "score", "is_correct"}:
        return True
    return any(_ECODE_KEY_RE.match(str(k)) for k in obj)


def extract_json_object(text: str) -> dict[str, Any]:
    """Find the verdict JSON object in a model answer.

    Tries, in order: the whole text, the contents of each code fence, then every balanced
    ``{...}`` span; the first dict that looks like a verdict wins, else the first dict.
    Raises :class:`VerdictParseError` when nothing parses.
    """
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

    def consider(c: str) -> dict[str, Any] | None:
        nonlocal first_dict
        if c in seen or not c:
            return None
        seen.add(c)
        try:
            obj = _loads_lenient(c)
        except (json.JSONDecodeError, ValueError, RecursionError):
            return None
        if isinstance(obj, dict):
            if _looks_like_verdict(obj):
                return obj
            if first_dict is None:
                first_dict = obj
        return None

    for c in candidates:
        found = consider(c)
        if found is not None:
            return found
    for c in list(candidates):
        for span in _balanced_objects(c):
            found = consider(span)
            if found is not None:
                return found
    if first_dict is not None:
        return first_dict
    raise VerdictParseError("no JSON object found in the answer", raw)


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


def parse_verdict(text: str | Mapping[str, Any]) -> Verdict:
    """Parse a judge answer (text or an already-decoded mapping) into a :class:`Verdict`.

    Raises :class:`VerdictParseError` (with ``raw_text``) when no verdict can be read: no JSON
    object, no error information, no grade, a grade outside [0, 1], or an ``error_list`` that
    is not six 0/1 values.  Missing individual flat keys count as false, as in the reference code.
    """
    raw = text if isinstance(text, str) else json.dumps(text, ensure_ascii=False, default=str)
    obj = dict(text) if isinstance(text, Mapping) else extract_json_object(text)
    # Some judges nest the verdict ({"verdict": {...}} / {"evaluation": {...}}).
    for wrapper in ("verdict", "evaluation", "judgement", "judgment", "result"):
        found, inner = _find_key(obj, wrapper)
        if found and isinstance(inner, Mapping) and _looks_like_verdict(inner) and not _looks_like_verdict(
            {k: v for k, v in obj.items() if str(k).lower() != wrapper}
        ):
            obj = dict(inner)
            break
    try:
        return _verdict_from_obj(obj)
    except VerdictParseError as exc:
        exc.raw_text = raw
        raise
    except (ValueError, TypeError) as exc:
        raise VerdictParseError(str(exc), raw) from None


def _verdict_from_obj(obj: Mapping[str, Any]) -> Verdict:
    sources: dict[str, set[str]] = {}
    reasons: dict[str, str] = {}
    notes: list[str] = []

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
            if len(errors) == 6 and all(isinstance(x, (int, bool)) or str(x).strip() in ("0", "1") for x in errors):
                flags = {c for c, v in zip(E_CODES, errors) if _to_bool(v, "errors")}
            else:
                for item in errors:
                    m = _ECODE_VALUE_RE.search(str(item))
                    if not m:
                        raise ValueError(f"errors: cannot read {item!r} as an error code")
                    flags.add(f"E{m.group(1)}")
        else:
            raise ValueError("errors: expected a mapping or a list")
        sources["errors"] = flags

    # reference holistic dialect: error_list of six 0/1
    found, error_list = _find_key(obj, "error_list")
    if found and error_list is not None:
        if isinstance(error_list, str):
            try:
                error_list = json.loads(error_list)
            except json.JSONDecodeError:
                raise ValueError("error_list: not a list") from None
        if not isinstance(error_list, (list, tuple)) or len(error_list) != 6:
            raise ValueError(f"error_list must have six 0/1 values, got {error_list!r}")
        sources["error_list"] = {c for c, v in zip(E_CODES, error_list) if _to_bool(v, f"error_list[{c}]")}

    # reference step-wise dialect: flat E<k>_NAME keys (also bare E<k>)
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

    if not sources:
        raise VerdictParseError("no error flags (errors, error_list or E1..E6 keys) in the answer")

    # separate reasons mapping
    found, rmap = _find_key(obj, "reasons", "error_reasons", "error_details")
    if found and isinstance(rmap, Mapping):
        for k, v in rmap.items():
            m = _ECODE_KEY_RE.match(str(k))
            if m and v not in (None, ""):
                reasons.setdefault(f"E{m.group(1)}", str(v).strip())

    dialect = "studio" if "errors" in sources else ("error_list" if "error_list" in sources else "flat")
    flag_sets = list(sources.values())
    flags = set().union(*flag_sets)
    contradictions_extra: list[str] = []
    if any(s != flags for s in flag_sets):
        desc = "; ".join(f"{name}={','.join(sorted(s)) or 'none'}" for name, s in sources.items())
        contradictions_extra.append(f"flags: the answer's flag fields disagree ({desc}); kept the union")

    found, grade = _find_key(obj, "grade", "score", "plan_grade", "overall_score")
    if not found or grade is None or (isinstance(grade, str) and not grade.strip()):
        raise VerdictParseError("no grade or score in the answer")

    found, ic = _find_key(obj, "is_correct", "correct", "plan_correctness")
    model_is_correct = _to_bool(ic, "is_correct") if found and ic is not None else None

    _, reasoning = _find_key(obj, "reasoning", "reason", "explanation", "rationale", "justification")
    if isinstance(reasoning, (list, tuple)):
        reasoning = "\n".join(str(x) for x in reasoning)
    elif isinstance(reasoning, Mapping):
        reasoning = json.dumps(reasoning, ensure_ascii=False)

    verdict = Verdict.build(
        flags,
        grade,
        reasons={c: r for c, r in reasons.items()},
        reasoning="" if reasoning is None else str(reasoning),
        model_is_correct=model_is_correct,
        dialect=dialect,
        notes=notes,
    )
    if contradictions_extra:
        verdict.contradictions = contradictions_extra + verdict.contradictions
    return verdict
