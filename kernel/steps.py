"""A trajectory or plan step's tool and arguments, as the benchmark reads them.

Source (dora-format.md §(a), §(b)): a step names its tool in ``call`` or ``name`` (``call`` wins)
and its parameters in ``args`` or ``inputs`` (``args`` wins); ``call`` may carry an argument list
in parentheses, ignored from the first ``(`` on; a ``tool.loop`` step's nested calls are
``args.calls``, each naming its tool in ``call``, ``tool`` or ``name`` (``tool_loop`` in
dora/tools/analysis.py reads all three). A ``tool`` key on a top-level step is *not* a tool name
(the benchmark's loader and evaluator ignore it).

Arguments are returned as written: the benchmark scores steps whose ``args`` is a list or a
string too, so nothing here turns them into ``{}``.
"""
from __future__ import annotations

from typing import Any

_MISSING = object()


def step_call_raw(step: Any) -> Any:
    """The step's ``call`` (else ``name``) exactly as written; None when absent or not a dict."""
    if not isinstance(step, dict):
        return None
    return step.get("call", step.get("name"))


def tool_name(call: Any) -> str:
    """``"seg.flood(pre, post)"`` → ``"seg.flood"``; a non-string → ``""``."""
    return call.split("(", 1)[0].strip() if isinstance(call, str) else ""


def step_call(step: Any) -> str:
    """The tool name of a top-level step (``call`` or ``name``, text from ``(`` on dropped)."""
    return tool_name(step_call_raw(step))


def args_key(step: Any) -> str | None:
    """Which key holds the step's arguments: ``"args"``, ``"inputs"`` or None."""
    if not isinstance(step, dict):
        return None
    return "args" if "args" in step else ("inputs" if "inputs" in step else None)


def step_args(step: Any, default: Any = None) -> Any:
    """The step's arguments as written (``args``, else ``inputs``): a dict, a list, a string…;
    ``default`` when the step has neither."""
    key = args_key(step)
    return step[key] if key else default


def nested_calls(step: Any) -> list:
    """A loop step's nested calls (``args.calls`` when it is a list), else ``[]``."""
    args = step_args(step)
    calls = args.get("calls") if isinstance(args, dict) else None
    return calls if isinstance(calls, list) else []


def nested_call_name(call: Any) -> str:
    """The tool name of a nested loop call (``call``, ``tool`` or ``name``)."""
    if not isinstance(call, dict):
        return ""
    return tool_name(call.get("call") or call.get("tool") or call.get("name"))
