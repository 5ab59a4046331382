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
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from .verdict import E_CODES, E_DEFINITIONS, GRADES, HOLISTIC_RUBRIC, STEPWISE_RUBRIC

PROMPTS_DIR = Path(__file__).resolve().parent / "prompts"
DEFAULT_HOLISTIC_VERSION = "holistic_v1"
DEFAULT_HOLISTIC_BLIND_VERSION = "holistic_blind_v1"

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
    """sha256 of the template text plus the embedded definitions and rubrics (hex, 16 chars)."""
    t = load_template(version)
    h = hashlib.sha256()
    h.update(t.text.encode("utf-8"))
    h.update(render_error_definitions().encode("utf-8"))
    h.update(render_grade_rubric("holistic").encode("utf-8"))
    h.update(render_grade_rubric("stepwise").encode("utf-8"))
    return h.hexdigest()[:16]


# --------------------------------------------------------------------------------------------
# Blocks
# --------------------------------------------------------------------------------------------


def render_error_definitions(protocol: str = "holistic") -> str:
    lines = []
    for code in E_CODES:
        d = E_DEFINITIONS[code]
        specific = d.holistic if protocol == "holistic" else d.stepwise
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
        "error_definitions": render_error_definitions("holistic"),
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
    version: str = DEFAULT_STEPWISE_VERSION,
    constraints: str | None = None,
    max_obs_chars: int = DEFAULT_MAX_OBS_CHARS,
) -> tuple[str, str]:
    """Render the step-wise judge prompt; return ``(prompt_text, prompt_version)``.

    ``prefix_trajectory``: steps 0..k-1 with observations; ``reference_steps``: the gold steps
    k..k+h-1; ``predicted_steps``: the agent's h steps (a list of steps, or raw text).
    Predicted and reference steps are numbered from k.
    """
    template = load_template(version)
    prefix = list(prefix_trajectory or [])
    k = len(prefix)
    horizon = len(reference_steps or []) or (len(predicted_steps) if isinstance(predicted_steps, (list, tuple)) else 1)
    if isinstance(predicted_steps, (list, tuple)):
        predicted = render_trajectory(predicted_steps, max_obs_chars=max_obs_chars, include_obs=False, start_index=k)
    else:
        predicted = render_answer(predicted_steps)
    values = {
        "error_definitions": render_error_definitions("stepwise"),
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
