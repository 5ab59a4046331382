"""Deterministic rule-based checks over plain trajectories (no model, no Django).

Flags what can be decided mechanically:

* **E6** a called tool (top level, or nested in ``tool.loop``'s ``calls`` after stripping a
  leading ``functions.``) that is not in the catalogue (names normalised as the benchmark's
  evaluator does: cut at the first ``(``, trim, and when the name has no ``.`` the first ``_``
  becomes ``.``; after that the match is exact, case included);
* **E5** a required argument that is missing (or null), arguments that are not an object, or a
  POI / Vis / Model tool nested in ``tool.loop`` (the loop cannot run those);
* **E4** a symbolic reference ``<key> from trajectory[N].obs`` to the same, a later or a
  non-existent step (and ``<key> from step[N].obs`` inside ``tool.loop`` calls to the same or a
  later call of that loop);
* **E2** stopping before tools the gold trajectory needs: gold tool set not covered by the
  prediction (loop wrappers ignored, loop bodies counted).

The result is a :class:`RuleVerdict`: a :class:`~evaluation.judge.verdict.Verdict` (grade from the
step-wise rubric) plus the individual findings.  It is a screening aid: a valid alternative route
that avoids a gold tool is flagged E2 here and left for a judge or a person to clear.
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, Field

from .verdict import E_CODES, Verdict, grade_from_flags

WRAPPER_TOOLS = frozenset({"tool.loop", "tool.reduce"})
#: Servers whose tools ``tool.loop`` cannot nest (it resolves analysis, calculate, perception only).
NOT_NESTABLE_PREFIXES = frozenset({"poi", "vis", "report", "model"})
TRAJ_REF_RE = re.compile(r"^\s*<\s*([^<>]+?)\s*>\s+from\s+trajectory\s*\[\s*(-?\d+)\s*\]\s*\.\s*obs\s*$", re.IGNORECASE)
STEP_REF_RE = re.compile(r"^\s*<\s*([^<>]+?)\s*>\s+from\s+step\s*\[\s*(-?\d+)\s*\]\s*\.\s*obs\s*$", re.IGNORECASE)
_MAX_REASON_CHARS = 600


def normalize_tool_name(name: Any) -> str:
    """``seg_flood(pre_image_path, post_image_path)`` -> ``seg.flood``; dotted names unchanged."""
    s = "" if name is None else str(name)
    s = s.split("(", 1)[0].strip()
    if s and "." not in s and "_" in s:
        s = s.replace("_", ".", 1)
    return s


def _nested_name(name: Any) -> str:
    """Name of a call nested in ``tool.loop``: a leading ``functions.`` is stripped, as the loop does."""
    s = "" if name is None else str(name).strip()
    if s.lower().startswith("functions."):
        s = s[len("functions."):]
    return normalize_tool_name(s)


def tool_specs_from_catalogue(entries: Iterable[Any]) -> dict[str, frozenset[str]]:
    """Name -> required parameter names, from catalogue entries (``dora-tools.json`` style
    ``{name, params:[{name, required}]}``), OpenAI function tools or MCP tools, or bare names."""
    out: dict[str, frozenset[str]] = {}
    for e in entries or []:
        if isinstance(e, str):
            out[normalize_tool_name(e)] = frozenset()
            continue
        if not isinstance(e, Mapping):
            continue
        fn = e.get("function") if isinstance(e.get("function"), Mapping) else None
        name = (fn or e).get("name")
        if not name:
            continue
        required: set[str] = set()
        if isinstance(e.get("params"), list):
            required = {str(p["name"]) for p in e["params"] if isinstance(p, Mapping) and p.get("required") and p.get("name")}
        else:
            schema = (fn or {}).get("parameters") or e.get("parameters") or e.get("inputSchema") or e.get("input_schema")
            if isinstance(schema, Mapping):
                required = {str(r) for r in schema.get("required") or []}
        out[normalize_tool_name(name)] = frozenset(required)
    return out


class RuleFinding(BaseModel):
    code: str
    step: int | None = None  # index in the predicted trajectory (0-based, raw position)
    call: int | None = None  # index inside a tool.loop's calls, when the finding is there
    tool: str | None = None
    message: str


class RuleVerdict(Verdict):
    findings: list[RuleFinding] = Field(default_factory=list)
    predicted_tools: list[str] = Field(default_factory=list)
    gold_tools: list[str] = Field(default_factory=list)
    missing_gold_tools: list[str] = Field(default_factory=list)


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


def _step_call(step: Mapping[str, Any]) -> str:
    fn = step.get("function") if isinstance(step.get("function"), Mapping) else None
    return str(step.get("call") or step.get("name") or step.get("tool") or (fn or {}).get("name") or "").strip()


_MISSING = object()


def _step_args(step: Mapping[str, Any]) -> Any:
    fn = step.get("function") if isinstance(step.get("function"), Mapping) else None
    for key in ("args", "inputs", "arguments"):
        if key in step:
            return step[key]
    if fn is not None and "arguments" in fn:
        return fn["arguments"]
    return _MISSING


def _as_args(value: Any) -> tuple[dict[str, Any] | None, bool]:
    """(args dict or None, ok).  JSON-encoded objects are decoded; absent args are {}."""
    if value is _MISSING or value is None:
        return {}, True
    if isinstance(value, Mapping):
        return dict(value), True
    if isinstance(value, str):
        if not value.strip():
            return {}, True
        try:
            decoded = json.loads(value)
        except json.JSONDecodeError:
            return None, False
        if isinstance(decoded, Mapping):
            return dict(decoded), True
    return None, False


def _loop_calls(args: Mapping[str, Any]) -> list[Any]:
    calls = args.get("calls")
    if isinstance(calls, str):
        try:
            calls = json.loads(calls)
        except json.JSONDecodeError:
            return []
    return list(calls) if isinstance(calls, list) else []


def _strings(value: Any, path: str = "") -> Iterable[tuple[str, str]]:
    """Every string inside a nested value, with a dotted path (loop ``calls`` excluded)."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, Mapping):
        for k, v in value.items():
            yield from _strings(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _strings(v, f"{path}[{i}]")


def tool_sequence(steps: Sequence[Any] | None) -> list[str]:
    """Normalised tool names in call order: wrappers dropped, loop bodies included."""
    out: list[str] = []
    for step in steps or []:
        if not isinstance(step, Mapping):
            continue
        name = normalize_tool_name(_step_call(step))
        if not name:
            continue
        if name == "tool.loop":
            args, ok = _as_args(_step_args(step))
            for inner in _loop_calls(args or {}) if ok else []:
                if isinstance(inner, Mapping):
                    iname = _nested_name(_step_call(inner))
                    if iname and iname not in WRAPPER_TOOLS:
                        out.append(iname)
        if name in WRAPPER_TOOLS:
            continue
        out.append(name)
    return out


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_REASON_CHARS else text[: _MAX_REASON_CHARS - 1] + "…"


# --------------------------------------------------------------------------------------------
# the checker
# --------------------------------------------------------------------------------------------


def check_trajectory(
    predicted: Sequence[Any] | None,
    gold: Sequence[Any] | None = None,
    tools: Mapping[str, Iterable[str]] | Iterable[str] | None = None,
    *,
    required_params: Mapping[str, Iterable[str]] | None = None,
    check_coverage: bool = True,
) -> RuleVerdict:
    """Check a predicted trajectory ``[{call, args, obs}, ...]``.

    ``tools``: the known tools, either a mapping name -> required parameter names or an
    iterable of names (then ``required_params`` may supply the requirements).  Names may be
    dotted or aliases.  Without ``tools`` the E6/E5 checks are skipped; without ``gold`` (or
    with ``check_coverage=False``) the E2 check is skipped.
    """
    known: dict[str, frozenset[str]] | None = None
    if tools is not None:
        if isinstance(tools, Mapping):
            known = {normalize_tool_name(k): frozenset(v or ()) for k, v in tools.items()}
        else:
            known = {normalize_tool_name(k): frozenset() for k in tools}
        for k, v in (required_params or {}).items():
            known[normalize_tool_name(k)] = frozenset(v or ())

    steps = list(predicted or [])
    findings: list[RuleFinding] = []

    def check_refs(value: Any, i: int, tool: str, call_idx: int | None = None) -> None:
        for path, s in _strings(value):
            m = TRAJ_REF_RE.match(s)
            if m:
                key, n = m.group(1), int(m.group(2))
                where = f"step {i}" + (f" call {call_idx}" if call_idx is not None else "")
                if n < 0 or n >= len(steps):
                    findings.append(RuleFinding(code="E4", step=i, call=call_idx, tool=tool, message=(
                        f"{where} ({tool}) argument {path} refers to '<{key}> from trajectory[{n}].obs' "
                        f"but the trajectory has no step {n}")))
                elif n >= i:
                    findings.append(RuleFinding(code="E4", step=i, call=call_idx, tool=tool, message=(
                        f"{where} ({tool}) argument {path} uses '<{key}> from trajectory[{n}].obs', "
                        f"{'its own' if n == i else 'a later'} step's output, before it exists")))
                continue
            if call_idx is not None:
                m = STEP_REF_RE.match(s)
                if m:
                    key, n = m.group(1), int(m.group(2))
                    if n < 0 or n >= call_idx:
                        findings.append(RuleFinding(code="E4", step=i, call=call_idx, tool=tool, message=(
                            f"step {i} call {call_idx} ({tool}) argument {path} uses '<{key}> from step[{n}].obs' "
                            f"but only calls 0..{call_idx - 1} of this loop iteration have run")))

    for i, step in enumerate(steps):
        if not isinstance(step, Mapping):
            continue
        raw_name = _step_call(step)
        name = normalize_tool_name(raw_name)
        if not name:
            continue
        args, ok = _as_args(_step_args(step))
        if known is not None:
            if name not in known:
                findings.append(RuleFinding(code="E6", step=i, tool=name, message=(
                    f"step {i} calls '{raw_name}', which is not an available tool"
                    + (f" (read as '{name}')" if name != raw_name else ""))))
            else:
                if not ok:
                    findings.append(RuleFinding(code="E5", step=i, tool=name, message=(
                        f"step {i} ({name}) arguments are not a JSON object")))
                else:
                    missing = sorted(p for p in known[name] if args.get(p) is None)
                    for p in missing:
                        findings.append(RuleFinding(code="E5", step=i, tool=name, message=(
                            f"step {i} ({name}) is missing the required argument '{p}'")))
        if not ok:
            continue
        body = {k: v for k, v in args.items() if not (name == "tool.loop" and k == "calls")}
        check_refs(body, i, name)
        if name == "tool.loop":
            for j, inner in enumerate(_loop_calls(args)):
                if not isinstance(inner, Mapping):
                    continue
                iraw = _step_call(inner)
                iname = _nested_name(iraw)
                if known is not None and iname and iname not in known:
                    findings.append(RuleFinding(code="E6", step=i, call=j, tool=iname, message=(
                        f"step {i} (tool.loop) call {j} uses '{iraw}', which is not an available tool")))
                elif iname.split(".", 1)[0] in NOT_NESTABLE_PREFIXES:
                    findings.append(RuleFinding(code="E5", step=i, call=j, tool=iname, message=(
                        f"step {i} (tool.loop) call {j} nests '{iname}', but POI, Vis and Model tools "
                        "cannot run inside tool.loop")))
                iargs, iok = _as_args(_step_args(inner))
                if iok:
                    check_refs(iargs, i, iname or "?", j)

    pred_tools = tool_sequence(steps)
    gold_tools = tool_sequence(gold) if gold is not None else []
    missing_gold: list[str] = []
    if gold is not None and check_coverage:
        have = set(pred_tools)
        seen: set[str] = set()
        for t in gold_tools:
            if t not in have and t not in seen:
                missing_gold.append(t)
                seen.add(t)
        if missing_gold:
            findings.append(RuleFinding(code="E2", message=(
                "the trajectory stops without tools the reference needs: " + ", ".join(missing_gold)
                + ("" if pred_tools else " (no tool was called)"))))

    counts: dict[str, int] = {}
    reasons_l: dict[str, list[str]] = {}
    for f in findings:
        counts[f.code] = counts.get(f.code, 0) + 1
        reasons_l.setdefault(f.code, []).append(f.message)
    flags = {c for c in E_CODES if counts.get(c)}
    grade = grade_from_flags(flags, counts)
    reasons = {c: _clip("; ".join(msgs)) for c, msgs in reasons_l.items()}
    if findings:
        summary = ", ".join(f"{counts[c]}x{c}" for c in E_CODES if counts.get(c))
        reasoning = f"Rule-based check: {len(findings)} finding(s) ({summary}); grade from the step-wise rubric."
    else:
        reasoning = "Rule-based check: no finding (tool names, required arguments, references"
        reasoning += ", gold tool coverage)." if gold is not None and check_coverage else ")."
    base = Verdict.build(flags, grade, reasons=reasons, reasoning=reasoning, dialect="rules")
    return RuleVerdict(
        **base.model_dump(),
        findings=findings,
        predicted_tools=pred_tools,
        gold_tools=gold_tools,
        missing_gold_tools=missing_gold,
    )
