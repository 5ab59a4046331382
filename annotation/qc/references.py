"""Reference checks: every ``<key> from trajectory[N].obs`` (and ``step[N]``/``<item.…>`` inside a
``tool.loop``) points to an earlier step, names a key that step returns, and fits the argument
or answer type; text written like a reference that the benchmark does not read is
``references.malformed``. The benchmark's reference syntax is ``kernel.references``.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from kernel.references import find_all_references, format_path, parse_reference

from .plan import Analysis, Scope, args_of, call_of, loop_returns_list, walk_strings
from .registry import declare
from .tool_info import LOOP_TOOL, ToolInfo, compatible, param_kinds, resolve_tool, result_kind

__all__ = ["CHECKS", "BROKEN_REFERENCE_CHECKS", "check_references", "check_reference", "check_malformed_references",
           "reference_accepts"]

#: the checks of this concern: id → (severity, meaning)
CHECKS: dict[str, tuple[str, str]] = declare("references", {
    "references.order": ("error", "a reference points to the same or a later step"),
    "references.key": ("error", "a reference names a key the step's result does not have"),
    "references.type": ("error", "a reference's value type does not fit the argument or answer type"),
    "references.loop_scope": ("error", "step[N] or <item.…> used outside a tool.loop's calls"),
    "references.malformed": ("error", "a value written as a reference is not one (e.g. it names a deleted step)"),
})


def check_references(a: Analysis, args: Any, loc: str, scope: Scope, info: ToolInfo | None):
    """Check every reference inside the arguments ``args`` of the call at ``loc`` (see
    :func:`check_reference`); the argument's type is compared only for a whole-argument reference."""
    for path, ref in find_all_references(args):
        where = f"{loc}.args.{format_path(path)}" if path else f"{loc}.args"
        arg_name = next((p for p in path if isinstance(p, str)), None)
        param = info.param(arg_name) if info is not None and arg_name else None
        # a bind value is an item key or a trajectory reference, not an argument value
        wanted = None if (path and path[0] == "bind") else (param_kinds(param.type) if param else None)
        if len(path) > 1 and wanted is not None:
            wanted = None  # an element inside a list/dict argument: the element type is not checked
        check_reference(a, ref, where, scope, wanted, arg_name or "")


def check_reference(a: Analysis, ref, where: str, scope: Scope, wanted: set | None, arg_name: str,
                    answer: bool = False):
    """``references.loop_scope``, ``references.order``, ``references.key`` and ``references.type`` of
    one reference at ``where``; ``wanted`` is the set of value kinds the argument (or, with
    ``answer``, the answer field) takes, None when not checked. A valid trajectory reference marks
    its step as used (``a.refs_to``)."""
    if ref.kind in ("step", "item") and not scope.in_loop:
        form = f"<{ref.key}> from step[{ref.index}].obs" if ref.kind == "step" else f"<item.{ref.key}>"
        fix = "write <key> from trajectory[N].obs" if ref.kind == "step" else "take the value from a step's result"
        a.add("references.loop_scope", f"{where}: '{form}' is only valid inside a tool.loop's calls; {fix}.", where)
        return
    if ref.kind == "item":
        return
    if ref.kind == "step":
        if ref.index >= (scope.call_index or 0):
            a.add("references.order", f"{where}: step[{ref.index}] is not an earlier call of this loop iteration (this is call {scope.call_index}; calls count from 0).", where)
            return
        src = scope.calls[ref.index]
    else:
        if ref.index >= scope.at:
            a.add("references.order", f"{where}: refers to step {ref.index}, which is not an earlier step (this is {'the answer' if answer else f'step {scope.at}'}; steps count from 0).", where)
            return
        src = a.outs[ref.index] if ref.index < len(a.outs) else None
        a.refs_to.setdefault(ref.index, []).append(where)
    if src is None or src.info is None:
        return
    label = f"step {ref.index}" if ref.kind == "trajectory" else f"loop call {ref.index}"
    if src.list_obs:
        keys = frozenset({"results"})
    else:
        keys = src.info.result_keys
    if ref.key not in keys:
        hint = " (a tool.loop with return_all=true returns a bare list: use <results>)" if src.list_obs else ""
        a.add("references.key", f"{where}: {label} ({src.info.name}) returns no key '{ref.key}'{hint}; it returns {', '.join(sorted(keys))}.", where)
        return
    kind = "list" if src.list_obs else result_kind(src.info, ref.key)
    if not compatible(kind, wanted, arg_name):
        what = f"answer type ({'/'.join(sorted(wanted))})" if answer else f"argument '{arg_name}' ({'/'.join(sorted(wanted))})"
        a.add("references.type", f"{where}: '{ref.key}' of {label} ({src.info.name}) is a {kind}, which does not fit the {what}; refer to a key of the right type.", where)


#: a string that starts as a trajectory/step reference ("<key> from trajectory[…") and so was meant as one
_REFERENCE_LIKE = re.compile(r"^\s*<[^<>]*>\s*from\s+(?:trajectory|step)\b", re.IGNORECASE)

#: the reference checks whose error means the gold plan is wired wrong: a revision is not saved with one
#: (annotation.services.tasks.save_revision); references.type stays a QC error that blocks submission only
BROKEN_REFERENCE_CHECKS = ("references.order", "references.key", "references.loop_scope", "references.malformed")


def check_malformed_references(a: Analysis) -> None:
    """``references.malformed``: a step argument or answer source written like a reference
    (``<key> from trajectory[…``) that the benchmark's pattern (``kernel.references``) does not
    read, e.g. ``<count> from trajectory[deleted].obs`` (the editor writes this for a reference to
    a deleted step) or a missing ``.obs``; the runner would pass the text on as a literal."""
    where = [(f"trajectory[{i}].args", args_of(s)) for i, s in enumerate(a.steps) if isinstance(s, dict)]
    where += [(f"answer_spec[{j}].source", f.get("source")) for j, f in enumerate(a.answer_fields()) if isinstance(f, dict)]
    for loc, value in where:
        for path, text in walk_strings(value, ()):
            if _REFERENCE_LIKE.match(text) and parse_reference(text) is None:
                sub = format_path(path)
                at = loc + (sub if sub.startswith("[") else f".{sub}") if path else loc
                a.add("references.malformed", f"{at}: '{text[:80]}' is not a reference the benchmark reads "
                      "(write <key> from trajectory[N].obs with N an earlier step); rebind it to a step's output.", at)


def reference_accepts(steps: list) -> Callable[[int, str], bool]:
    """``accepts(N, key)`` for ``kernel.content.answer_source``: whether the ``references.key``
    check below takes ``<key> from trajectory[N].obs`` of these authored steps — the keys of a
    return_all ``tool.loop`` are ``results`` only, a known tool's are its result keys, an unknown
    tool's are not checked (any key)."""
    def accepts(index: int, key: str) -> bool:
        step = steps[index] if 0 <= index < len(steps) else None
        if not isinstance(step, dict):
            return True
        info, _alias = resolve_tool(str(call_of(step) or ""))
        if info is None:
            return True
        if info.name == LOOP_TOOL and loop_returns_list(args_of(step)):
            return key == "results"
        return key in info.result_keys
    return accepts
