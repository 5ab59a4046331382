"""The tool set a robustness variant's agent is served (issue 21, item 2; ``manage.py mcp_serve``).

A variant task (``annotation.models.TaskVariant``, made by ``annotation.variants``) keeps its tool
set in ``TaskVariant.tools`` = ``{removed: [dotted names], distractors: [{name, description,
params, server, mirrors}], broken: {step, tool, error, alternative, ...} | None}``. Given the
registry's tools, :func:`published_tools` returns what an MCP server of the task lists and how each
listed tool answers:

* a plain task (no variant row): every registry tool, answered by the registry (``call_tool``);
* ``removed`` tools (unsolvable, ``tool_removal``) are not listed; a call by name is refused as
  an unknown tool by the MCP server, as for any name it does not list;
* each distractor (extraneous) is listed right after the tool it mirrors, under its own name,
  with its own description and the mirrored tool's parameters (the same JSON schema, retitled),
  and answers ``annotation.variants.inert_observation(distractor)`` to any arguments, without
  running anything;
* the broken tool (broken) stays listed as it is and fails on EVERY call, not only the first:
  a broken tool stays broken, so calling it again (the benchmark's Retry, seed 001 Appendix
  C.4, not a recovery) gets the same error. "Its step" is therefore the first call of it, which
  is also where ``evaluation.robustness.broken_outcome`` places the failure. The failure is an
  error result whose observation is ``annotation.variants.broken_observation(tool, error)``;
* the alternative is listed right after the broken tool, under its own name, with the broken
  tool's description and schema, and computes what the broken tool computes (the registry's
  call of the original, same arguments, same work dir); its observation's ``tool`` key names
  the alternative.

``tool.loop`` calls nest other tools by name; within a variant a nested call of a removed tool
is refused as unknown, one of the broken tool fails with its error, and one of the alternative
runs the original (so the loop cannot be used to step around the variant's tool set).

The gold replay (``kernel.engine``) runs a variant's plan over the registry's tools, never this
listing, with two variant rules in ``replay.services.runs.execute_replay``: an unsolvable variant's plan
stops at the step that needs what the variant took away (``annotation.variants.unsolvable_block``),
and a broken variant's broken step is run again with the alternative listed here
(``replay.services.runs.alternative_check``) so that QC can say whether it computes the same observation.
"""
from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from pydantic import create_model

from annotation import variants as variant_specs
from annotation.models import TaskVariant
from kernel.tools.base import ToolContext, ToolError, UnknownToolError
from kernel.tools.spec import ListedTool, ToolSpec, call_tool, model_alias

__all__ = ["PublishedTool", "BrokenToolError", "published_tools", "published_tools_for", "variant_tool_set"]

#: tools whose arguments nest other tool calls (``calls: [{call|tool, args}]``)
NESTING_TOOLS = ("tool.loop",)

Call = Callable[[dict, ToolContext], Any]


@dataclass(frozen=True)
class PublishedTool:
    """One listed tool: ``spec`` (name, alias, description, server, input schema as listed: a
    ``ToolSpec``, or the ``kernel.tools.spec.ListedTool`` of a listing from the manifest) and
    ``call(args, ctx) -> observation`` (raises ``ToolError`` for a refused call; None: the
    registry's ``call_tool`` of the spec's name); ``role`` is ``tool`` (a registry tool as it is),
    ``distractor``, ``broken`` or ``alternative``."""

    spec: ToolSpec | ListedTool
    call: Call | None
    role: str = "tool"


class BrokenToolError(ToolError):
    """The broken tool's failure. ``observation`` is ``broken_observation(tool, error)``; the
    message is the configured error as written."""

    def __init__(self, tool: str, error: str):
        super().__init__(error)
        self.observation = variant_specs.broken_observation(tool, error)


def variant_tool_set(task) -> dict | None:
    """The ``TaskVariant.tools`` of ``task`` (an ``annotation.models.Task``), or None for a plain task."""
    row = TaskVariant.objects.filter(task_id=task.pk).only("tools").first()
    return dict(row.tools or {}) if row is not None else None


def published_tools(task, specs: Iterable[ToolSpec]) -> list[PublishedTool]:
    """What an MCP server of ``task`` lists, from ``specs`` (the registry's tools, in listing
    order): see the module docstring. Reads the task's variant row once (one query)."""
    return published_tools_for(variant_tool_set(task), specs)


def _key(name: Any) -> str:
    """A tool name compared in any spelling: the call text's name as its model alias
    (``ras.count_pixels``, ``ras_count_pixels`` and ``ras_count_pixels(mask_path)`` are one tool)."""
    return model_alias(str(name or "").split("(")[0].strip())


def _registry_call(name: str) -> Call:
    def call(args: dict, ctx: ToolContext) -> Any:
        return call_tool(name, args, ctx)
    return call


def _renamed(spec: ToolSpec, name: str, description: str) -> ToolSpec:
    """``spec`` listed as ``name``: same server, parameters and input model fields; the JSON
    schema's title follows the new alias (``<alias>_input``, as the registry titles its own)."""
    alias = model_alias(name)
    model = create_model(f"{alias}_input", __base__=spec.input_model)
    return dataclasses.replace(spec, name=name, alias=alias, description=description, model=model)


def _inert(distractor: dict) -> Call:
    observation = variant_specs.inert_observation(distractor)

    def call(args: dict, ctx: ToolContext) -> Any:
        return copy.deepcopy(observation)
    return call


def _broken(tool: str, error: str) -> Call:
    def call(args: dict, ctx: ToolContext) -> Any:
        raise BrokenToolError(tool, error)
    return call


def _alternative(original: str, alternative: str) -> Call:
    def call(args: dict, ctx: ToolContext) -> Any:
        obs = call_tool(original, args, ctx)
        if isinstance(obs, dict) and obs.get("tool") == original:
            obs = {**obs, "tool": alternative}
        return obs
    return call


def _guard_nested(inner: Call, removed: set[str], broken: dict | None) -> Call:
    """A nesting tool's call that applies the variant's tool set to the calls it nests."""
    tool = _key(broken.get("tool")) if broken else ""
    alternative = _key(broken.get("alternative")) if broken else ""

    def call(args: dict, ctx: ToolContext) -> Any:
        calls = args.get("calls") if isinstance(args, dict) else None
        if not isinstance(calls, list):
            return inner(args, ctx)
        rewritten = []
        for step in calls:
            if not isinstance(step, dict):
                rewritten.append(step)
                continue
            key = "call" if "call" in step else "tool"
            name = _key(step.get(key) or "")
            if name in removed:
                raise UnknownToolError(f"unknown tool {step.get(key)!r} in calls (not a tool of this task)",
                                       tool="tool.loop", expected="a listed tool")
            if tool and name == tool:
                raise BrokenToolError(broken["tool"], broken.get("error") or f"{broken['tool']} failed")
            if alternative and name == alternative:
                step = {**step, key: broken["tool"]}
            rewritten.append(step)
        return inner({**args, "calls": rewritten}, ctx)
    return call


def published_tools_for(tool_set: dict | None, specs: Iterable[ToolSpec]) -> list[PublishedTool]:
    """The listing for a variant's ``tool_set`` (``TaskVariant.tools``; None: a plain task) over
    ``specs``. Distractors follow the tool they mirror, the alternative follows the broken tool;
    a distractor or broken tool whose mirrored tool is not in ``specs`` is skipped (it has no
    schema to publish). Pure: no database."""
    specs = list(specs)
    if not tool_set:
        return [PublishedTool(spec, _registry_call(spec.name)) for spec in specs]
    removed = {_key(n) for n in tool_set.get("removed") or []}
    broken = tool_set.get("broken") or None
    distractors: dict[str, list[dict]] = {}
    for d in tool_set.get("distractors") or []:
        if isinstance(d, dict) and d.get("name") and d.get("mirrors"):
            distractors.setdefault(d["mirrors"], []).append(d)
    out: list[PublishedTool] = []
    for spec in specs:
        if _key(spec.name) in removed:
            continue
        if broken and _key(spec.name) == _key(broken.get("tool")):  # the plan may name it by its alias
            out.append(PublishedTool(spec, _broken(spec.name, broken.get("error") or f"{spec.name} failed"), "broken"))
            alt = broken.get("alternative")
            if alt:
                description = broken.get("alternative_description") or spec.description
                out.append(PublishedTool(_renamed(spec, alt, description), _alternative(spec.name, alt), "alternative"))
        elif spec.name in NESTING_TOOLS and (removed or broken):
            out.append(PublishedTool(spec, _guard_nested(_registry_call(spec.name), removed, broken)))
        else:
            out.append(PublishedTool(spec, _registry_call(spec.name)))
        for d in distractors.get(spec.name, []):
            out.append(PublishedTool(_renamed(spec, d["name"], d.get("description") or spec.description),
                                     _inert(d), "distractor"))
    return out
