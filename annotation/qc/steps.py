"""Tool checks, and the walk of the gold trajectory that fills the analysis.

``check_steps(a)`` walks every step (and every call of a ``tool.loop``) in order: it resolves the
tool, checks its name and arguments (``tools.*``; a step that is not ``{call, args}`` is
``structure.step``), then its references (``annotation.qc.references``) and class indices
(``annotation.qc.manifest.check_classes``), and records what the call produces
(``a.outs``), its literal files (``a.files``) and the call itself (``a.tool_calls``) for the
checks that run after the walk.
"""
from __future__ import annotations

import difflib
import json

from kernel.references import find_all_references, format_path

from .layers import as_number, is_file_string, mask_classes_of
from .manifest import check_classes
from .plan import Analysis, Output, Scope, args_of, call_of, loop_returns_list, walk_strings
from .references import check_references
from .registry import declare
from .tool_info import LOOP_TOOL, ToolInfo, clean_call, known_tool_names, resolve_tool

__all__ = ["CHECKS", "NON_NESTABLE_SERVERS", "check_steps", "output_of", "check_call", "check_values", "check_loop"]

#: the checks of this concern: id → (severity, meaning)
CHECKS: dict[str, tuple[str, str]] = declare("steps", {
    "tools.exists": ("error", "the tool is in neither the registry nor the catalogue"),
    "tools.not_implemented": ("warning", "the tool is in the benchmark's catalogue but the studio cannot replay it"),
    "tools.alias": ("warning", "the tool is named by an alias; write the code's dotted name"),
    "tools.required_argument": ("error", "a required argument is missing"),
    "tools.unknown_argument": ("error", "an argument is not a parameter of the tool"),
    "tools.invalid_value": ("error", "a literal argument value fails the tool's input schema"),
    "tools.loop_nesting": ("error", "a POI/Vis/Model tool is nested in tool.loop (the benchmark cannot)"),
})

#: servers whose tools ``tool.loop`` cannot call (catalogue, tool.loop semantics)
NON_NESTABLE_SERVERS = ("POI", "Vis", "Model")


def check_steps(a: Analysis):
    """Walk the trajectory in order (see the module docstring): ``structure.step`` for a step that is
    not ``{call, args}``, else :func:`check_call`; appends each step's :class:`Output` (None for a
    malformed step) to ``a.outs``."""
    for i, step in enumerate(a.steps):
        loc = f"trajectory[{i}]"
        if not isinstance(step, dict) or not isinstance(call_of(step), str) or not call_of(step).strip():
            a.add("structure.step", f"Step {i} has no tool name: write it as {{\"call\": \"<tool>\", \"args\": {{...}}}}.", loc)
            a.outs.append(None)
            continue
        args = args_of(step)
        if args is None:
            args = {}
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except ValueError:
                pass
        if not isinstance(args, dict):
            a.add("structure.step", f"Step {i}: args must be an object of argument → value.", f"{loc}.args")
            a.outs.append(None)
            continue
        scope = Scope(at=i)
        info = check_call(a, call_of(step), args, loc, scope, nested=False)
        a.outs.append(output_of(a, info, args, scope, loc))


def output_of(a: Analysis, info: ToolInfo | None, args: dict, scope: Scope, loc: str) -> Output:
    """What a call produces: the layers upstream of it, whether a literal pixel_size_m is upstream, the class
    values of the mask it writes, whether it is a return_all loop's bare list."""
    skip = ("calls",) if info is not None and info.name == LOOP_TOOL else ()
    desc = a.describe({k: v for k, v in args.items() if k not in skip}, scope)
    px = desc.px or as_number(args.get("pixel_size_m")) is not None
    out = Output(info, args, desc.sources, px)
    if info is None:
        return out
    if info.name == LOOP_TOOL:
        out.list_obs = loop_returns_list(args)
        out.sources = out.sources | a.last_loop_sources
    else:
        out.mask_classes = mask_classes_of(info.name, args, lambda v: a.describe(v, scope).mask_classes)
    return out


def check_call(a: Analysis, raw_call: str, args: dict, loc: str, scope: Scope, nested: bool) -> ToolInfo | None:
    """Check one call (a step, or a call of a ``tool.loop``): ``tools.*`` of its name and arguments,
    its loop's calls, its references, its class indices; records its files and the call. Returns
    its ToolInfo, None for an unknown tool."""
    info, alias = resolve_tool(raw_call)
    label = f"Step {scope.at}" + (f", loop call {scope.call_index}" if nested else "")
    if info is None:
        close = difflib.get_close_matches(clean_call(raw_call), known_tool_names(), n=1, cutoff=0.8)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        a.add("tools.exists", f"{label}: tool '{clean_call(raw_call)}' does not exist in the catalogue{hint}; pick a tool from the list.", loc)
        check_references(a, args, loc, scope, None)
        return None
    if alias:
        a.add("tools.alias", f"{label}: '{alias}' is an alias of '{info.name}'; write '{info.name}' (the benchmark's code name).", loc)
    if not info.registered:
        a.add("tools.not_implemented", f"{label}: '{info.name}' is a benchmark tool the studio's replay does not implement yet; replay will fail at this step.", loc)
    if nested and info.server in NON_NESTABLE_SERVERS:
        a.add("tools.loop_nesting", f"{label}: '{info.name}' ({info.server} server) cannot run inside tool.loop in the benchmark; call it after the loop on its results.", loc)
    for p in info.params:
        if p.required and (p.name not in args or args[p.name] in (None, "")):
            a.add("tools.required_argument", f"{label} ({info.name}): required argument '{p.name}' is missing; give a value or a reference.", f"{loc}.args.{p.name}")
    known = {p.name for p in info.params}
    for arg in args:
        if arg not in known:
            a.add("tools.unknown_argument", f"{label} ({info.name}): argument '{arg}' is not a parameter of this tool (parameters: {', '.join(sorted(known))}).", f"{loc}.args.{arg}")
    check_values(a, info, args, loc, label)
    if info.name == LOOP_TOOL:
        check_loop(a, args, loc, scope)
        check_references(a, {k: v for k, v in args.items() if k != "calls"}, loc, scope, info)
    else:
        check_references(a, args, loc, scope, info)
    check_classes(a, info, args, loc, scope, label)
    for path, value in walk_strings(args, ()):
        if path and path[0] == "calls" and info.name == LOOP_TOOL:
            continue
        if is_file_string(value):
            a.files.append((f"{loc}.args.{format_path(path)}", value))
    a.tool_calls.append((loc, info, args, scope))
    return info


def check_values(a: Analysis, info: ToolInfo, args: dict, loc: str, label: str):
    """``tools.invalid_value``: literal argument values that fail the tool's input schema (pydantic)."""
    spec = info.spec
    if spec is None:
        return
    literal = {}
    for k, v in args.items():
        if k not in spec.input_model.model_fields or find_all_references(v):
            continue
        if k in spec.json_params and isinstance(v, str):
            s = v.strip()
            if s[:1] in "[{" and s[-1:] in "]}":
                try:
                    v = json.loads(s)
                except ValueError:
                    pass
        literal[k] = v
    try:
        spec.input_model.model_validate(literal)
    except Exception as exc:  # pydantic.ValidationError
        errors = getattr(exc, "errors", lambda: [])()
        for err in errors:
            where = err.get("loc") or ()
            if err.get("type") in ("missing", "extra_forbidden") or not where or where[0] not in literal:
                continue
            arg = str(where[0])
            inner = "".join(f"[{x}]" for x in where[1:])
            p = info.param(arg)
            got = repr(err.get("input"))
            got = got if len(got) <= 60 else got[:57] + "..."
            a.add("tools.invalid_value", f"{label} ({info.name}): argument '{arg}{inner}' = {got} is invalid: {err.get('msg')}; expected {p.type if p else 'another value'}.", f"{loc}.args.{arg}")


def check_loop(a: Analysis, args: dict, loc: str, scope: Scope):
    """Check the calls of a ``tool.loop`` in order, each in the loop's scope; keeps the layers they
    read in ``a.last_loop_sources`` (the loop's output's sources)."""
    calls = args.get("calls")
    if isinstance(calls, str):
        try:
            calls = json.loads(calls)
        except ValueError:
            calls = None
    if not isinstance(calls, list):
        a.last_loop_sources = frozenset()
        return
    item_sources = a.describe(args.get("loop_over"), scope).sources
    loop_scope = Scope(at=scope.at, calls=[], call_index=0, item_sources=item_sources)
    sources = set(item_sources)
    for j, call in enumerate(calls):
        cloc = f"{loc}.args.calls[{j}]"
        loop_scope.call_index = j
        name = call.get("call", call.get("tool", call.get("name"))) if isinstance(call, dict) else None
        cargs = (call.get("args", call.get("inputs")) if isinstance(call, dict) else None) or {}
        if not isinstance(name, str) or not name.strip() or not isinstance(cargs, dict):
            a.add("structure.step", f"Step {scope.at}, loop call {j}: write it as {{\"call\": \"<tool>\", \"args\": {{...}}}}.", cloc)
            loop_scope.calls.append(None)
            continue
        info = check_call(a, name, cargs, cloc, loop_scope, nested=True)
        out = output_of(a, info, cargs, loop_scope, cloc)
        sources |= out.sources
        loop_scope.calls.append(out)
    a.last_loop_sources = frozenset(sources)
