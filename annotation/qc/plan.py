"""The task analysis that QC's checks share: what the gold plan reads and produces.

:class:`Analysis` holds one task's content and layers, and what the walk of its trajectory
(``annotation.qc.steps.check_steps``) learns of each step: the tool, the layers upstream of its
output (:class:`Output`), the steps referred to, the literal files, every (nested) tool call with
its :class:`Scope`. The check modules read it; none of them holds state of its own.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from kernel.inputs import input_entries
from kernel.references import parse_reference
from kernel.steps import step_args, step_call_raw

from .layers import MASK_KEYS, as_number, basename, class_set, georeferenced, is_file_string, layers_from_input_data
from .registry import Finding, finding
from .tool_info import ToolInfo

__all__ = ["Output", "Scope", "Analysis", "call_of", "args_of", "loop_returns_list", "walk_strings"]


@dataclass
class Output:
    """What a step (or a loop call) produces, as far as QC can tell."""
    info: ToolInfo | None
    args: dict
    sources: frozenset = frozenset()  # layer file names upstream
    px: bool = False  # a literal pixel_size_m upstream
    mask_classes: frozenset | None = None
    list_obs: bool = False  # a return_all tool.loop: only 'results'


@dataclass
class Scope:
    """Where a call sits: its top-level step ``at`` and, inside a ``tool.loop``, the loop's calls so
    far, this call's index and the layers its items come from."""
    at: int  # top-level index of the step (references must point before it)
    calls: list | None = None  # loop call outs so far (inside a loop)
    call_index: int | None = None
    item_sources: frozenset = frozenset()

    @property
    def in_loop(self) -> bool:
        """Whether the call is one of a ``tool.loop``'s calls."""
        return self.calls is not None


def call_of(step: dict) -> Any:
    """The step's tool call as written (``kernel.steps.step_call_raw``)."""
    return step_call_raw(step)


def loop_returns_list(args: Any) -> bool:
    """Whether a ``tool.loop`` with these args returns a bare list (``return_all``, true unless
    given false), whose only reference key is ``results``."""
    return not isinstance(args, dict) or args.get("return_all", True) is not False


def args_of(step: dict) -> Any:
    """The step's arguments as written (``kernel.steps.step_args``; ``{}`` when absent)."""
    return step_args(step, {})


def walk_strings(value: Any, path: tuple):
    """``(path, text)`` of every string inside ``value`` (nested dicts and lists), depth first."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from walk_strings(v, path + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from walk_strings(v, path + (i,))
    elif isinstance(value, str):
        yield path, value


class Analysis:
    """One task as QC reads it: its content, its layers (``input_data`` merged with the event's),
    what each step produces (``outs``, filled by ``annotation.qc.steps.check_steps``), which steps
    are referred to, the literal files and every (nested) tool call; and the findings so far.
    Check modules read it and ``add`` findings to it."""

    def __init__(self, content: dict, layers: dict | None):
        self.content = content if isinstance(content, dict) else {}
        self.explicit_layers = layers is not None
        self._explicit = set(layers or {})
        self.input_layers = layers_from_input_data(self.content.get("input_data") or {}, self.content.get("classes"))
        merged = {}
        for fn, info in self.input_layers.items():
            merged[fn] = dict(info)
        if layers is not None:
            for fn, info in layers.items():
                base = merged.get(fn, {})
                # the event's layer is the authority; input_data gives the phase when it lacks one
                merged[fn] = {**base, **{k: v for k, v in info.items() if v not in (None, "", [], {})}}
                if not merged[fn].get("phase") and base.get("phase"):
                    merged[fn]["phase"] = base["phase"]
        self.layers = merged
        self.findings: list[Finding] = []
        self.steps = self.content.get("trajectory") or []
        self.outs: list[Output | None] = []
        self.refs_to: dict[int, list[str]] = {}  # step index → locations referring to it
        self.files: list[tuple[str, str]] = []  # (location, literal file string) in step args
        self.tool_calls: list[tuple[str, ToolInfo, dict, Scope]] = []  # every (nested) call, for later checks
        self.last_loop_sources: frozenset = frozenset()  # the layers the last tool.loop read (its output's sources)

    def add(self, check: str, message: str, location: str):
        """Record a finding of the declared check ``check`` (``annotation.qc.registry.finding``)."""
        self.findings.append(finding(check, message, location))

    # ---- layers / values ------------------------------------------------------------------
    def layer(self, value: Any) -> dict | None:
        """The layer a literal file ``value`` names (by file name), or None."""
        if not is_file_string(value):
            return None
        return self.layers.get(basename(value))

    def describe(self, value: Any, scope: Scope) -> Output:
        """Sources/px/mask classes of an argument value."""
        if isinstance(value, (list, tuple)):
            outs = [self.describe(v, scope) for v in value]
            return Output(None, {}, frozenset().union(*(o.sources for o in outs)) if outs else frozenset(),
                          any(o.px for o in outs))
        if isinstance(value, dict):
            return self.describe(list(value.values()), scope)
        ref = parse_reference(value)
        if ref is not None:
            src = None
            if ref.kind == "trajectory" and ref.index < min(scope.at, len(self.outs)):
                src = self.outs[ref.index]
            elif ref.kind == "step" and scope.in_loop and ref.index < len(scope.calls):
                src = scope.calls[ref.index]
            elif ref.kind == "item":
                return Output(None, {}, scope.item_sources)
            if src is None:
                return Output(None, {})
            return Output(src.info, {}, src.sources, src.px, src.mask_classes if ref.key in MASK_KEYS else None)
        if is_file_string(value):
            fn = basename(value)
            layer = self.layers.get(fn)
            return Output(None, {}, frozenset({fn}), False, class_set(layer.get("class_map")) if layer else None)
        return Output(None, {})

    # ---- eval spec ------------------------------------------------------------------------
    def answer_fields(self) -> list:
        """The answer_spec fields (a non-string type or name written as its JSON text); [] without a list."""
        spec = self.content.get("answer_spec")
        if not isinstance(spec, list):
            return []
        out = []
        for f in spec:
            if isinstance(f, dict) and not isinstance(f.get("eval_type"), (str, type(None))):
                f = {**f, "eval_type": json.dumps(f["eval_type"], default=str)}  # unknown type, hashable
            if isinstance(f, dict) and not isinstance(f.get("name", ""), str):
                f = {**f, "name": json.dumps(f["name"], default=str)}
            out.append(f)
        return out

    # ---- hygiene --------------------------------------------------------------------------
    def used_files(self) -> set[str]:
        """The file names the steps use literally (collected by the walk of the steps)."""
        return {basename(v) for _, v in self.files}

    # ---- scene ---------------------------------------------------------------------------
    def scene(self) -> dict:
        """Extent of the task's rasters: max width/height (px), area (m²), diagonal (m), bounds."""
        w = h = 0
        area = diag = None
        bounds = []
        for _, path, _ in input_entries(self.content.get("input_data") or {}):
            layer = self.layers.get(basename(path))
            if not layer:
                continue
            if layer.get("bounds") and georeferenced(layer) is not False:
                bounds.append(layer["bounds"])
            if layer.get("kind") == "vector":
                continue
            lw, lh, g = as_number(layer.get("width")), as_number(layer.get("height")), as_number(layer.get("gsd_m"))
            if lw and lh:
                w, h = max(w, int(lw)), max(h, int(lh))
                if g:
                    area = max(area or 0.0, lw * lh * g * g)
                    diag = max(diag or 0.0, math.hypot(lw, lh) * g)
        return {"width": w or None, "height": h or None, "area_m2": area, "diagonal_m": diag, "bounds": bounds}
