"""Versioned judge prompt templates and their rendering from plain data.

Templates live in ``evaluation/judge/prompts/<kind>_v<N>.md`` (or ``.txt``).  A template's
version string is its file stem (``holistic_v1``); it never changes once released: edit by
adding ``holistic_v2.md``.  :func:`prompt_fingerprint` hashes the template text together with
the E1-E6 definitions it embeds, for cache keys that must notice any change.

Placeholders are ``{{name}}``; every placeholder must be supplied and every supplied value is
inserted verbatim (inserted text is never re-scanned for placeholders).
"""
from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from kernel.taxonomy import E2_SUBTYPE_NAMES

from .verdict import (
    DEFAULT_REGIME,
    E2_SUBTYPES,
    E_CODES,
    E_DEFINITIONS,
    GRADES,
    HOLISTIC_RUBRIC,
    STEPWISE_RUBRIC,
    UNSOLVABLE_TYPES,
    normalize_regime,
    normalize_setting,
)

PROMPTS_DIR = Path(__file__).resolve().parent / "prompts"
DEFAULT_HOLISTIC_VERSION = "holistic_v2"
DEFAULT_HOLISTIC_BLIND_VERSION = "holistic_blind_v2"
#: The benchmark's step-wise protocol (gold prefix); ``stepwise_v1`` stays the studio's own-cut prompt.
DEFAULT_STEPWISE_GOLD_VERSION = "stepwise_v2"
DEFAULT_STEPWISE_BLIND_VERSION = "stepwise_blind_v1"
DEFAULT_EXTRANEOUS_VERSIONS = {"holistic": "tool_extraneous_v1", "step-wise": "tool_extraneous_stepwise_v1"}
DEFAULT_TOOL_BROKEN_VERSION = "tool_broken_v1"
DEFAULT_UNSOLVABLE_VERSION = "unsolvable_v1"
#: Templates written before E2 was named by regime: they keep the old definitions block (and
#: fingerprint) so that their text never changes.
_LEGACY_LABEL_VERSIONS = frozenset({"holistic_v1", "holistic_blind_v1", "stepwise_v1"})

#: What the unsolvable judge is told about each type (paper appendix B.4.3, in this domain).
UNSOLVABLE_DESCRIPTIONS: dict[str, str] = {
    "contradictory_constraints": "the query or the system prompt sets constraints that cannot all hold at once.",
    "information_missing": "information the task needs (a place, a date, a threshold, a scene) was removed from the query.",
    "tool_removal": "a tool that every solution needs was removed from the tool list.",
    "visual_information_inaccessible": "the imagery the task needs (the scene, a phase, a band) is not available to the agent.",
}

_VERSION_RE = re.compile(r"^(?P<kind>[a-z][a-z0-9_]*?)_v(?P<n>\d+)$")
_PLACEHOLDER_RE = re.compile(r"\{\{\s*([a-z_][a-z0-9_]*)\s*\}\}")
_COMMENT_RE = re.compile(r"<!--.*?-->\n?", re.DOTALL)

DEFAULT_MAX_OBS_CHARS = 1500
DEFAULT_MAX_ANSWER_CHARS = 6000


class PromptTemplateError(ValueError):
    pass


@dataclass(frozen=True)
class PromptTemplate:
    version: str  # file stem, e.g. "holistic_v1"
    kind: str  # e.g. "holistic"
    number: int
    text: str  # template text with the leading comment removed
    path: Path

    @property
    def placeholders(self) -> set[str]:
        return set(_PLACEHOLDER_RE.findall(self.text))

    def render(self, values: Mapping[str, str]) -> str:
        missing = self.placeholders - set(values)
        if missing:
            raise PromptTemplateError(f"{self.version}: missing values for {sorted(missing)}")

        def sub(m: re.Match[str]) -> str:
            return str(values[m.group(1)])

        return _PLACEHOLDER_RE.sub(sub, self.text)


def available_versions(kind: str | None = None) -> list[str]:
    """Template versions on disk (optionally of one kind), oldest first within a kind."""
    out = []
    for p in PROMPTS_DIR.iterdir():
        if p.suffix not in (".md", ".txt"):
            continue
        m = _VERSION_RE.match(p.stem)
        if m and (kind is None or m.group("kind") == kind):
            out.append((m.group("kind"), int(m.group("n")), p.stem))
    return [v for _, _, v in sorted(out)]


def latest_version(kind: str) -> str:
    versions = available_versions(kind)
    if not versions:
        raise PromptTemplateError(f"no prompt template of kind {kind!r} in {PROMPTS_DIR}")
    return versions[-1]


@lru_cache(maxsize=32)
def load_template(version: str) -> PromptTemplate:
    """Load ``prompts/<version>.md`` (or ``.txt``)."""
    m = _VERSION_RE.match(version or "")
    if not m:
        raise PromptTemplateError(f"bad prompt version {version!r} (expected <kind>_v<N>)")
    for suffix in (".md", ".txt"):
        path = PROMPTS_DIR / f"{version}{suffix}"
        if path.is_file():
            text = _COMMENT_RE.sub("", path.read_text(encoding="utf-8"), count=1).lstrip("\n")
            return PromptTemplate(version, m.group("kind"), int(m.group("n")), text, path)
    raise PromptTemplateError(f"no prompt template {version!r} in {PROMPTS_DIR}")


def prompt_fingerprint(version: str) -> str:
    """sha256 of the template text plus the embedded definitions and rubrics (hex, 16 chars).

    Templates before E2 was named by regime (:data:`_LEGACY_LABEL_VERSIONS`) hash what they
    embedded then, so their cache keys are unchanged; later ones hash both regimes' blocks and
    the unsolvability descriptions.
    """
    t = load_template(version)
    h = hashlib.sha256()
    h.update(t.text.encode("utf-8"))
    if version in _LEGACY_LABEL_VERSIONS:
        h.update(render_error_definitions().encode("utf-8"))
    else:
        for regime in ("holistic", "stepwise"):
            h.update(render_error_definitions(regime, labels="regime").encode("utf-8"))
        h.update(json.dumps(UNSOLVABLE_DESCRIPTIONS, sort_keys=True).encode("utf-8"))
    h.update(render_grade_rubric("holistic").encode("utf-8"))
    h.update(render_grade_rubric("stepwise").encode("utf-8"))
    return h.hexdigest()[:16]


# --------------------------------------------------------------------------------------------
# Blocks
# --------------------------------------------------------------------------------------------


def render_error_definitions(protocol: str = "holistic", labels: str = "flat") -> str:
    """The E1-E6 block of a prompt.  ``labels="flat"`` (templates of :data:`_LEGACY_LABEL_VERSIONS`)
    names each code with its flat key of the old step-wise dialect, E2 as
    ``E2_PREMATURE_CONCLUSION`` in every regime; ``labels="regime"`` names E2 by the regime
    (E2-H task incompleteness, E2-S premature conclusion; paper Table 2) and shows no flat key."""
    lines = []
    regime = "holistic" if protocol == "holistic" else "step-wise"
    for code in E_CODES:
        d = E_DEFINITIONS[code]
        specific = d.holistic if protocol == "holistic" else d.stepwise
        if labels == "regime":
            if code == "E2":
                sub = E2_SUBTYPES[regime]
                head = f"**E2 {E2_SUBTYPE_NAMES[sub].capitalize()}** ({sub})"
            else:
                head = f"**{code} {d.name}**"
            line = f"- {head}: {d.definition} {specific}"
        else:
            line = f"- **{code} {d.name}** (`{d.flat_key}`): {d.definition} {specific}"
        if d.not_an_error:
            line += f" Not an error: {d.not_an_error}"
        if d.domain_cases:
            line += " Typical cases here: " + "; ".join(d.domain_cases) + "."
        lines.append(line)
    return "\n".join(lines)


def render_grade_rubric(protocol: str = "holistic") -> str:
    rubric = HOLISTIC_RUBRIC if protocol == "holistic" else STEPWISE_RUBRIC
    return "\n".join(f"- **{g:.1f}**: {rubric[g]}" for g in sorted(GRADES, reverse=True))


def _tool_name(tool: Mapping[str, Any]) -> str:
    if isinstance(tool.get("function"), Mapping):
        return str(tool["function"].get("name", "?"))
    return str(tool.get("name") or tool.get("tool_name") or tool.get("alias") or "?")


def _tool_params(tool: Mapping[str, Any]) -> list[tuple[str, str, bool]]:
    """(name, type, required) from a catalogue entry, an OpenAI function or an MCP tool."""
    if isinstance(tool.get("params"), list):
        out = []
        for p in tool["params"]:
            if isinstance(p, Mapping) and p.get("name"):
                out.append((str(p["name"]), str(p.get("type") or ""), bool(p.get("required"))))
        return out
    schema = None
    if isinstance(tool.get("function"), Mapping):
        schema = tool["function"].get("parameters")
    schema = schema or tool.get("parameters") or tool.get("inputSchema") or tool.get("input_schema")
    if isinstance(schema, Mapping) and isinstance(schema.get("properties"), Mapping):
        req = set(schema.get("required") or [])
        out = []
        for name, spec in schema["properties"].items():
            typ = spec.get("type", "") if isinstance(spec, Mapping) else ""
            if isinstance(typ, list):
                typ = "|".join(map(str, typ))
            out.append((str(name), str(typ), name in req))
        return out
    return []


def _tool_description(tool: Mapping[str, Any]) -> str:
    if isinstance(tool.get("function"), Mapping):
        return str(tool["function"].get("description") or "")
    return str(tool.get("description") or tool.get("semantics") or "")


def render_tools(tools: Iterable[Any], *, max_description_chars: int = 400) -> str:
    """One line per tool: ``- name(param: type, optional?: type) - description``."""
    lines = []
    for tool in tools or []:
        if isinstance(tool, str):
            lines.append(f"- {tool}")
            continue
        if not isinstance(tool, Mapping):
            lines.append(f"- {tool}")
            continue
        params = ", ".join(
            f"{n}{'' if req else '?'}{': ' + t if t else ''}" for n, t, req in _tool_params(tool)
        )
        desc = " ".join(_tool_description(tool).split())
        if len(desc) > max_description_chars:
            desc = desc[: max_description_chars - 1] + "…"
        lines.append(f"- {_tool_name(tool)}({params})" + (f" - {desc}" if desc else ""))
    return "\n".join(lines) if lines else "(no tool list given)"


def _clip(text: str, limit: int) -> str:
    if limit and len(text) > limit:
        return text[:limit] + f" …[truncated, {len(text) - limit} more characters]"
    return text


def _dump(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def render_trajectory(
    steps: Sequence[Any] | None,
    *,
    max_obs_chars: int = DEFAULT_MAX_OBS_CHARS,
    include_obs: bool = True,
    start_index: int = 0,
) -> str:
    """Render ``[{call, args, obs}, ...]`` one block per step, indexed from ``start_index``.

    Observations are clipped to ``max_obs_chars`` (GeoJSON observations can be huge).
    A step may also use ``name``/``tool`` and ``inputs``/``arguments``, as the reference code does.
    """
    if not steps:
        return "(empty: no tool calls)"
    blocks = []
    for i, step in enumerate(steps, start=start_index):
        if not isinstance(step, Mapping):
            blocks.append(f"[{i}] {_clip(_dump(step), max_obs_chars)}")
            continue
        call = step.get("call") or step.get("name") or step.get("tool") or "?"
        args = step.get("args", step.get("inputs", step.get("arguments", {})))
        lines = [f"[{i}] call: {call}", f"    args: {_dump(args if args is not None else {})}"]
        purpose = step.get("purpose") or step.get("reason") or step.get("thought")
        if purpose:
            lines.insert(1, f"    purpose: {' '.join(str(purpose).split())}")
        if include_obs and "obs" in step:
            lines.append(f"    obs: {_clip(_dump(step.get('obs')), max_obs_chars)}")
        blocks.append("\n".join(lines))
    return "\n".join(blocks)


def _labels(version: str) -> str:
    return "flat" if version in _LEGACY_LABEL_VERSIONS else "regime"


def render_answer(answer: Any, *, max_chars: int = DEFAULT_MAX_ANSWER_CHARS) -> str:
    if answer is None or answer == "":
        return "(no final answer)"
    if isinstance(answer, (dict, list)):
        return _clip(json.dumps(answer, ensure_ascii=False, indent=2, default=str), max_chars)
    return _clip(str(answer), max_chars)


# --------------------------------------------------------------------------------------------
# Public renderers
# --------------------------------------------------------------------------------------------


def render_holistic_prompt(
    query: str,
    available_tools: Iterable[Any],
    gold_trajectory: Sequence[Any] | None,
    predicted_trajectory: Sequence[Any] | None,
    predicted_answer: Any,
    *,
    version: str | None = None,
    blind: bool = False,
    constraints: str | None = None,
    max_obs_chars: int = DEFAULT_MAX_OBS_CHARS,
) -> tuple[str, str]:
    """Render the holistic judge prompt; return ``(prompt_text, prompt_version)``.

    ``blind=True`` selects the blind template (no reference trajectory; for the comparison the
    planning benchmark reports).  ``constraints``: explicit constraints from the system prompt
    or task (answer format, scope) the judge should check for E3.
    """
    if version is None:
        version = DEFAULT_HOLISTIC_BLIND_VERSION if blind else DEFAULT_HOLISTIC_VERSION
    template = load_template(version)
    values = {
        "error_definitions": render_error_definitions("holistic", labels=_labels(template.version)),
        "grade_rubric": render_grade_rubric("holistic"),
        "query": (query or "").strip() or "(no query)",
        "constraints_block": (
            f"### Constraints from the system prompt and task\n{constraints.strip()}\n\n" if constraints and constraints.strip() else ""
        ),
        "available_tools": render_tools(available_tools),
        "gold_trajectory": render_trajectory(gold_trajectory, max_obs_chars=max_obs_chars),
        "predicted_trajectory": render_trajectory(predicted_trajectory, max_obs_chars=max_obs_chars),
        "predicted_answer": render_answer(predicted_answer),
    }
    used = template.placeholders  # a blind template simply leaves the reference unused
    return template.render({k: v for k, v in values.items() if k in used}), template.version


DEFAULT_STEPWISE_VERSION = "stepwise_v1"


def render_stepwise_prompt(
    query: str,
    available_tools: Iterable[Any],
    prefix_trajectory: Sequence[Any] | None,
    reference_steps: Sequence[Any] | None,
    predicted_steps: Sequence[Any] | Any,
    *,
    version: str | None = None,
    blind: bool = False,
    constraints: str | None = None,
    max_obs_chars: int = DEFAULT_MAX_OBS_CHARS,
) -> tuple[str, str]:
    """Render the step-wise judge prompt; return ``(prompt_text, prompt_version)``.

    ``prefix_trajectory``: steps 0..k-1 with observations; ``reference_steps``: the gold steps
    k..k+h-1; ``predicted_steps``: the agent's h steps (a list of steps, or raw text).
    Predicted and reference steps are numbered from k.  Default version: ``stepwise_v1`` (the
    studio's own-trajectory cut), or ``stepwise_blind_v1`` when ``blind``; the benchmark's
    gold-prefix protocol passes ``version="stepwise_v2"``.
    """
    if version is None:
        version = DEFAULT_STEPWISE_BLIND_VERSION if blind else DEFAULT_STEPWISE_VERSION
    template = load_template(version)
    prefix = list(prefix_trajectory or [])
    k = len(prefix)
    horizon = len(reference_steps or []) or (len(predicted_steps) if isinstance(predicted_steps, (list, tuple)) else 1)
    if isinstance(predicted_steps, (list, tuple)):
        predicted = render_trajectory(predicted_steps, max_obs_chars=max_obs_chars, include_obs=False, start_index=k)
    else:
        predicted = render_answer(predicted_steps)
    values = {
        "error_definitions": render_error_definitions("stepwise", labels=_labels(template.version)),
        "grade_rubric": render_grade_rubric("stepwise"),
        "query": (query or "").strip() or "(no query)",
        "constraints_block": (
            f"### Constraints from the system prompt and task\n{constraints.strip()}\n\n" if constraints and constraints.strip() else ""
        ),
        "available_tools": render_tools(available_tools),
        "horizon": str(horizon),
        "last_prefix_index": str(k - 1),
        "prefix_trajectory": render_trajectory(prefix, max_obs_chars=max_obs_chars),
        "reference_steps": render_trajectory(reference_steps, max_obs_chars=max_obs_chars, include_obs=False, start_index=k),
        "predicted_steps": predicted,
    }
    used = template.placeholders
    return template.render({kk: v for kk, v in values.items() if kk in used}), template.version


# --------------------------------------------------------------------------------------------
# The robustness settings
# --------------------------------------------------------------------------------------------


def _constraints_block(constraints: str | None) -> str:
    if constraints and constraints.strip():
        return f"### Constraints from the system prompt and task\n{constraints.strip()}\n\n"
    return ""


def render_extraneous_prompt(
    query: str,
    available_tools: Iterable[Any],
    distractors: Iterable[Any],
    *,
    regime: str = "holistic",
    gold_trajectory: Sequence[Any] | None = None,
    predicted_trajectory: Sequence[Any] | None = None,
    predicted_answer: Any = None,
    prefix_trajectory: Sequence[Any] | None = None,
    reference_steps: Sequence[Any] | None = None,
    predicted_steps: Sequence[Any] | Any = None,
    version: str | None = None,
    constraints: str | None = None,
    max_obs_chars: int = DEFAULT_MAX_OBS_CHARS,
) -> tuple[str, str]:
    """Render the tool-extraneous judge prompt; return ``(prompt_text, prompt_version)``.

    ``available_tools``: the padded catalogue the agent saw (distractors included);
    ``distractors``: the injected tools (names or catalogue entries), shown to the judge in their
    own list.  ``regime="holistic"`` judges a whole plan (``gold_trajectory``,
    ``predicted_trajectory``, ``predicted_answer``); ``"step-wise"`` the next steps after the
    expert's prefix (``prefix_trajectory``, ``reference_steps``, ``predicted_steps``).
    Raises ``PromptTemplateError`` for an empty distractor list (the setting needs one).
    """
    regime = normalize_regime(regime)
    distractors = list(distractors or [])
    if not distractors:
        raise PromptTemplateError("tool-extraneous: the distractor list is empty")
    template = load_template(version or DEFAULT_EXTRANEOUS_VERSIONS[regime])
    protocol = "holistic" if regime == "holistic" else "stepwise"
    values = {
        "error_definitions": render_error_definitions(protocol, labels=_labels(template.version)),
        "grade_rubric": render_grade_rubric(protocol),
        "query": (query or "").strip() or "(no query)",
        "constraints_block": _constraints_block(constraints),
        "available_tools": render_tools(available_tools),
        "distractor_tools": render_tools(distractors),
    }
    if regime == "holistic":
        values.update(
            gold_trajectory=render_trajectory(gold_trajectory, max_obs_chars=max_obs_chars),
            predicted_trajectory=render_trajectory(predicted_trajectory, max_obs_chars=max_obs_chars),
            predicted_answer=render_answer(predicted_answer),
        )
    else:
        prefix = list(prefix_trajectory or [])
        k = len(prefix)
        values.update(
            horizon=str(len(reference_steps or []) or 1),
            last_prefix_index=str(k - 1),
            prefix_trajectory=render_trajectory(prefix, max_obs_chars=max_obs_chars),
            reference_steps=render_trajectory(reference_steps, include_obs=False, start_index=k),
            predicted_steps=(render_trajectory(predicted_steps, include_obs=False, start_index=k)
                             if isinstance(predicted_steps, (list, tuple)) else render_answer(predicted_steps)),
        )
    used = template.placeholders
    return template.render({kk: v for kk, v in values.items() if kk in used}), template.version


def render_tool_broken_prompt(
    query: str,
    available_tools: Iterable[Any],
    prefix_trajectory: Sequence[Any],
    failing_step_index: int,
    replacement_tool: Any,
    predicted_steps: Sequence[Any] | Any,
    *,
    version: str | None = None,
    max_obs_chars: int = DEFAULT_MAX_OBS_CHARS,
) -> tuple[str, str]:
    """Render the five-class tool-broken judge prompt; return ``(prompt_text, prompt_version)``.

    ``prefix_trajectory``: the steps the agent saw, the failing call included, its observation
    being the error; ``failing_step_index``: that step's index (0-based, within the prefix);
    ``replacement_tool``: the added tool (a name or a catalogue entry); ``predicted_steps``: the
    agent's next step (a list of steps, or raw text).  Raises ``PromptTemplateError`` when the
    failing index is outside the prefix or the replacement has no name.
    """
    prefix = list(prefix_trajectory or [])
    if not 0 <= int(failing_step_index) < len(prefix):
        raise PromptTemplateError(
            f"tool-broken: failing_step_index {failing_step_index} is outside the prefix of {len(prefix)} steps")
    failing = prefix[int(failing_step_index)]
    if isinstance(failing, Mapping):
        broken = str(failing.get("call") or failing.get("name") or failing.get("tool") or _tool_name(failing))
    else:
        broken = str(failing)
    replacement_name = replacement_tool if isinstance(replacement_tool, str) else _tool_name(replacement_tool)
    if not replacement_name or replacement_name == "?":
        raise PromptTemplateError("tool-broken: the replacement tool has no name")
    template = load_template(version or DEFAULT_TOOL_BROKEN_VERSION)
    k = len(prefix)
    values = {
        "query": (query or "").strip() or "(no query)",
        "available_tools": render_tools(available_tools),
        "replacement_tool": render_tools([replacement_tool]),
        "replacement_tool_name": replacement_name,
        "broken_tool": broken,
        "failing_step_index": str(int(failing_step_index)),
        "failing_step": render_trajectory([failing], max_obs_chars=max_obs_chars, start_index=int(failing_step_index)),
        "prefix_trajectory": render_trajectory(prefix, max_obs_chars=max_obs_chars),
        "predicted_steps": (render_trajectory(predicted_steps, include_obs=False, start_index=k)
                            if isinstance(predicted_steps, (list, tuple)) else render_answer(predicted_steps)),
    }
    used = template.placeholders
    return template.render({kk: v for kk, v in values.items() if kk in used}), template.version


def render_unsolvable_prompt(
    query: str,
    available_tools: Iterable[Any],
    unsolvable_type: str,
    predicted_trajectory: Sequence[Any] | None,
    predicted_answer: Any,
    *,
    detail: str = "",
    version: str | None = None,
    constraints: str | None = None,
    max_obs_chars: int = DEFAULT_MAX_OBS_CHARS,
) -> tuple[str, str]:
    """Render the unsolvable judge prompt; return ``(prompt_text, prompt_version)``.

    ``unsolvable_type``: one of :data:`~evaluation.judge.verdict.UNSOLVABLE_TYPES`; ``detail``:
    what exactly was made impossible (shown to the judge only).  Raises ``PromptTemplateError``
    for an unknown type.
    """
    if unsolvable_type not in UNSOLVABLE_TYPES:
        raise PromptTemplateError(
            f"unsolvable: type {unsolvable_type!r} is not one of {', '.join(UNSOLVABLE_TYPES)}")
    template = load_template(version or DEFAULT_UNSOLVABLE_VERSION)
    values = {
        "error_definitions": render_error_definitions("holistic", labels=_labels(template.version)),
        "unsolvable_type": f"{unsolvable_type} ({UNSOLVABLE_TYPES[unsolvable_type]})",
        "unsolvable_type_description": UNSOLVABLE_DESCRIPTIONS[unsolvable_type],
        "unsolvable_detail": (detail or "").strip(),
        "query": (query or "").strip() or "(no query)",
        "constraints_block": _constraints_block(constraints),
        "available_tools": render_tools(available_tools),
        "predicted_trajectory": render_trajectory(predicted_trajectory, max_obs_chars=max_obs_chars),
        "predicted_answer": render_answer(predicted_answer),
    }
    used = template.placeholders
    return template.render({kk: v for kk, v in values.items() if kk in used}), template.version


def render_prompt(setting: str, case: Mapping[str, Any], *, regime: str | None = None,
                  blind: bool = False, version: str | None = None,
                  max_obs_chars: int = DEFAULT_MAX_OBS_CHARS) -> tuple[str, str]:
    """One entry point for all five settings, fed by a case mapping (what a robustness variant
    provides); returns ``(prompt_text, prompt_version)``.

    Case keys: ``query``, ``tools`` always; holistic regime: ``gold_trajectory``,
    ``predicted_trajectory``, ``predicted_answer``; step-wise regime: ``prefix_trajectory``,
    ``reference_steps``, ``predicted_steps``; tool-extraneous: ``distractors``; tool-broken:
    ``failing_step_index``, ``replacement_tool``; unsolvable: ``unsolvable_type`` (and
    ``unsolvable_detail``); optional ``constraints``.  ``blind`` exists for holistic and
    step-wise.  ``max_obs_chars`` clips each observation (characters; the judge's context fitting
    lowers it).  Raises ``ValueError`` / ``PromptTemplateError`` naming the missing key.
    """
    setting = normalize_setting(setting)
    regime = normalize_regime(regime or DEFAULT_REGIME[setting] or "holistic")

    def need(*keys: str) -> None:
        missing = [k for k in keys if k not in case]
        if missing:
            raise PromptTemplateError(f"{setting}: the case lacks {', '.join(missing)}")

    need("query", "tools")
    if blind and setting not in ("holistic", "step-wise"):
        raise PromptTemplateError(f"{setting}: there is no blind prompt for this setting")
    q, tools, cons = case["query"], case["tools"], case.get("constraints")
    if setting == "tool-broken":
        need("prefix_trajectory", "failing_step_index", "replacement_tool", "predicted_steps")
        return render_tool_broken_prompt(q, tools, case["prefix_trajectory"], case["failing_step_index"],
                                         case["replacement_tool"], case["predicted_steps"], version=version,
                                         max_obs_chars=max_obs_chars)
    if setting == "unsolvable":
        need("unsolvable_type", "predicted_trajectory")
        return render_unsolvable_prompt(q, tools, case["unsolvable_type"], case["predicted_trajectory"],
                                        case.get("predicted_answer"), detail=case.get("unsolvable_detail", ""),
                                        version=version, constraints=cons, max_obs_chars=max_obs_chars)
    if setting == "tool-extraneous":
        need("distractors")
        return render_extraneous_prompt(
            q, tools, case["distractors"], regime=regime, gold_trajectory=case.get("gold_trajectory"),
            predicted_trajectory=case.get("predicted_trajectory"), predicted_answer=case.get("predicted_answer"),
            prefix_trajectory=case.get("prefix_trajectory"), reference_steps=case.get("reference_steps"),
            predicted_steps=case.get("predicted_steps"), version=version, constraints=cons,
            max_obs_chars=max_obs_chars)
    if regime == "holistic":
        need("predicted_trajectory")
        return render_holistic_prompt(q, tools, case.get("gold_trajectory"), case["predicted_trajectory"],
                                      case.get("predicted_answer"), version=version, blind=blind, constraints=cons,
                                      max_obs_chars=max_obs_chars)
    need("prefix_trajectory", "predicted_steps")
    return render_stepwise_prompt(q, tools, case["prefix_trajectory"], case.get("reference_steps"),
                                  case["predicted_steps"], blind=blind, constraints=cons, max_obs_chars=max_obs_chars,
                                  version=version or (DEFAULT_STEPWISE_BLIND_VERSION if blind else DEFAULT_STEPWISE_GOLD_VERSION))
