"""Logical tools (``tool.*``, ``calc.*``, ``logi.*``): plain Python.

``tool.loop`` follows dora-format.md §b: per-item preparation (``coerce_item``), ``bind``,
``<item.a.b>``, ``<k> from step[N].obs`` and ``<k> from trajectory[N].obs`` substitution, only
the last call's obs kept per iteration. As in the benchmark (``analysis.py:tool_loop``), a
reference that does not resolve is passed on as the literal string, and a failing nested call
leaves the benchmark's stub observation ({tool, status: "stub", note, inputs, error}) as that
call's obs instead of failing the loop — except for the tools the benchmark's loop calls as
unguarded helpers (``UNGUARDED_NESTED``), whose failure ends the whole loop. Called as a tool
(``call_tool``, the benchmark's MCP schema), ``loop_over`` must be a list of objects or
4-element windows; the replay engine alone expands a trajectory reference or a .geojson path
(the benchmark's direct call in gold replay; QC ``tool.loop_over_string``), where one that does
not resolve gives no items (QC ``tool.loop_over_unresolved``). The calls are read as the
benchmark's loop reads them (``loop_plan``): a call it cannot make fails only when an item
reaches it.
"""
from __future__ import annotations

import json
import math
import re
from typing import Any, NamedTuple

from ..references import LOOP_OVER_REF, apply_bind, get_obs_value, loop_over_reference, resolve_value  # noqa: F401
from .base import ToolContext, ToolError, ToolInputError, resolve_or_missing
from .spec import call_tool, get_tool, register

NESTABLE_SERVERS = ("Analysis", "Calculate", "Perception")
LOOP_TOOL = "tool.loop"
#: nested tools that the benchmark's loop resolves to plain helper functions without its error
#: guard (``ras_sample_point``, ``ras_sample_points``, ``mask_compose_multiclass`` in
#: ``dora/tools/analysis.py``): an exception there ends the whole loop. A ToolError marked
#: ``benchmark_stub`` (the helper's own out-of-bounds stub) is still kept as an observation.
UNGUARDED_NESTED = frozenset({"ras.sample_point", "ras.sample_points", "mask.compose_multiclass",
                              "vec.centroid", "vec.filter_by_distance"})
#: nested tools whose benchmark function carries ``_tool_guard`` (``dora/tools/analysis.py``):
#: even a call with unknown or missing arguments gives a stub there. Every other nestable
#: Analysis/Calculate tool raises a TypeError before its own try block on such a call, which
#: ends the loop.
GUARDED_NESTED = frozenset({
    "ras.count_pixels", "ras.stats", "ras.threshold", "ras.diff", "ras.vectorize",
    "vec.connected_components", "vec.intersect", "vec.max_polygon", "vec.pixel_to_world",
    "vec.buffer", "vec.kbuffer", "vec.road_centerline_extraction", "vec.graph_shortest_path",
    "vec.length", "vec.perimeter", "vec.raster_stats", "vec.filter_by_area",
    "vec.filter_by_attribute", "vec.nearest", "vec.clip"})
STUB_NOTE = "Replace this stub with a real model backend."
#: (nested tool, argument) whose value the benchmark's function uses in arithmetic or a
#: comparison without converting it first (``dora/tools/calculate.py``@7b969887 ``ras_area``
#: ``pixel_size_m ** 2``, ``calc_volume`` ``float(area_m2) * depth_m``, ``logi_truck_trips``
#: ``capacity_m3 <= 0``, ``logi_resource_allocation`` ``total_supply - allocated_total``;
#: ``analysis.py``@2b24be70 ``ras_focal_stats`` ``window_size < 1``, ``ras_hillshade``
#: ``dem * z_factor``, ``360 - azimuth``, ``np.deg2rad(altitude)``). The loop calls the function
#: directly, without the MCP schema's coercion, so a string there (an item field "0.5", say)
#: raises TypeError inside the tool's own try block: the call's obs is a stub.
RAW_STRING_FAILS = frozenset({
    ("ras.area", "pixel_size_m"), ("calc.volume", "depth_m"), ("logi.truck_trips", "capacity_m3"),
    ("logi.resource_allocation", "total_supply"), ("ras.focal_stats", "window_size"),
    ("ras.hillshade", "z_factor"), ("ras.hillshade", "azimuth"), ("ras.hillshade", "altitude")})


def raw_call_failure(tool: str, args: dict) -> str | None:
    """Why the benchmark's direct (unvalidated) call of a nested ``tool`` with ``args`` raises,
    or None. Covers :data:`RAW_STRING_FAILS` and ``ras.sample_point(s)``, whose helpers compare
    ``row``/``col`` with 0 (a string raises TypeError) and index the band array with them (a
    float raises IndexError); ``ras.clip`` compares x1 with x2 and y1 with y2 (a string beside
    a number raises TypeError)."""
    for (t, name) in RAW_STRING_FAILS:
        if t == tool and isinstance(args.get(name), str):
            return (f"TypeError: {name} is the string {args[name]!r}; the benchmark's {tool} "
                    f"computes with it unconverted")
    if tool in ("ras.sample_point", "ras.sample_points"):
        points = [args] if tool == "ras.sample_point" else (
            args.get("points") if isinstance(args.get("points"), list) else [])
        for pt in points:
            if not isinstance(pt, dict):
                continue
            for name in ("row", "col"):
                v = pt.get(name)
                if isinstance(v, str) or (isinstance(v, float) and not isinstance(v, bool)):
                    return (f"{'TypeError' if isinstance(v, str) else 'IndexError'}: {name} "
                            f"{v!r} is not an integer pixel index")
    if tool == "ras.clip":
        for a, b in (("x1", "x2"), ("y1", "y2")):
            va, vb = args.get(a), args.get(b)
            if isinstance(va, str) != isinstance(vb, str):
                return f"TypeError: min({va!r}, {vb!r}) compares a string with a number"
    return None


def stub_observation(tool: str, args: dict, error: str) -> dict:
    """The benchmark's failure object for a nested call (``_stub_result`` in
    ``dora/tools/analysis.py``): {tool, status: "stub", note, inputs: {args…, error}, error}."""
    return {"tool": tool, "status": "stub", "note": STUB_NOTE,
            "inputs": {**args, "error": error}, "error": error}


# ============================================================================================
# tool.loop / tool.reduce
# ============================================================================================
def coerce_item(it: Any, idx: int, grid_n: int | None) -> dict:
    """Prepare one loop item: unwrap an earlier loop's {item, last_obs}; add row_idx/col_idx
    when ``grid_n`` is set; a 4-element list becomes a window {x1, x2, y1, y2}; any other
    scalar becomes {value}."""
    if isinstance(it, dict) and "item" in it and "last_obs" in it:
        it = it["item"]
    if isinstance(it, dict):
        if grid_n and ("row_idx" not in it or "col_idx" not in it):
            it = dict(it)
            it["row_idx"] = int(idx // grid_n)
            it["col_idx"] = int(idx % grid_n)
        return it
    if isinstance(it, (list, tuple)) and len(it) == 4:
        out = {"x1": int(it[0]), "x2": int(it[1]), "y1": int(it[2]), "y2": int(it[3])}
        if grid_n:
            out["row_idx"] = int(idx // grid_n)
            out["col_idx"] = int(idx % grid_n)
        return out
    return {"value": it}


def _features_of_file(ctx: ToolContext, value: str, tool: str) -> list:
    """The items a ``.geojson``/``.json`` file gives ``tool.loop``'s direct call
    (``analysis.py:tool_loop``): a missing file gives no items; an object its ``features``
    (none when absent); a list itself. Errors: a file that is not JSON → ToolInputError."""
    path = resolve_or_missing(ctx, value, tool=tool, argument="loop_over")
    if path is None:
        return []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ToolInputError(f"{path.name} is not valid JSON: {exc}", tool=tool,
                             argument="loop_over") from exc
    if isinstance(data, dict):
        data = data.get("features", [])
    elif not isinstance(data, list):
        return list(value)  # the benchmark keeps the path string and iterates its characters
    return _as_items(data, tool)


def _as_items(value: Any, tool: str) -> list:
    """``list(value or [])`` as the benchmark's loop takes its items: a dict gives its keys, a
    string its characters; anything else that is not iterable → ToolInputError."""
    if not value:
        return []
    if isinstance(value, (list, tuple, str, dict)):
        return list(value)
    raise ToolInputError(f"cannot loop over a {type(value).__name__}", tool=tool,
                         argument="loop_over", expected="a list of items")


def _loop_items(ctx: ToolContext, loop_over: Any, trajectory: list, tool: str) -> list:
    """The items of ``tool.loop``'s direct call (gold replay), as ``analysis.py:tool_loop``
    resolves a string ``loop_over``: a ``<k> from trajectory[N].obs`` reference (:data:`LOOP_OVER_REF`:
    the spaces around ``from`` optional) to an earlier
    step gives that value when it is a list, the features of the ``.geojson``/``.json`` file it
    names (none when the file is missing), else no items (a missing key included); a
    ``.geojson``/``.json`` path gives its features likewise. A reference to a step that does
    not exist, or any other string, is iterated character by character, as the benchmark's
    ``list(loop_over)`` does (QC ``tool.loop_over_string``)."""
    if isinstance(loop_over, str):
        ref = loop_over_reference(loop_over)
        if ref is not None:
            key, index = ref
            if not 0 <= index < len(trajectory):
                return list(loop_over)
            step = trajectory[index]
            obs = step.get("obs") if isinstance(step, dict) else None
            value = get_obs_value(obs, key)
            if isinstance(value, str) and value.endswith((".geojson", ".json")):
                return _features_of_file(ctx, value, tool)
            return list(value) if isinstance(value, list) else []
        if loop_over.endswith((".geojson", ".json")):
            return _features_of_file(ctx, loop_over, tool)
    return _as_items(loop_over, tool)


@register("tool.loop", server="Analysis", module="logical",
          result_keys=["tool", "iteration_count", "results"],
          types_={"loop_over": "list[dict]"},
          notes={"calls": "each step {call|tool: dotted tool name, args: dict}; executed in "
                          "order for every item",
                 "loop_over": "items (windows, GeoJSON features, earlier loop results); also a "
                              "'<k> from trajectory[N].obs' reference or a .geojson path",
                 "bind": "arg_name -> item key or '<k> from trajectory[N].obs'; only applied "
                         "when arg_name already appears in the call's args",
                 "grid_n": "when set, each item gets row_idx = i // grid_n, col_idx = i % grid_n",
                 "return_all": "true: bare list of {item, last_obs}; false: a summary dict",
                 "show_progress": "accepted and ignored",
                 "trajectory": "earlier steps ({obs}) for '<k> from trajectory[N].obs'"})
def tool_loop(ctx: ToolContext, calls: list[dict], loop_over: list[Any] | str,
              bind: dict[str, str] | None = None, grid_n: int | None = None,
              return_all: bool = True, show_progress: bool = True,
              trajectory: list[dict] | None = None) -> list | dict:
    """Run a fixed chain of tool calls once per item and keep the last call's obs.

    Returns (``return_all``) a bare list of {item, last_obs}, else {tool, iteration_count,
    results: []} as the benchmark does. Nested tools must be of the Analysis, Calculate or
    Perception servers (checked when an item reaches the call, ``loop_plan``). ``loop_over``
    must be a list (a JSON list text is parsed) whose items
    are objects or 4-element windows, as the benchmark's MCP schema demands; anything else →
    ToolInputError. A nested failure gives a stub observation (see the module docstring).
    """
    traj = list(trajectory or [])
    plan = loop_plan(calls, grid_n)
    if not isinstance(loop_over, list):
        raise ToolInputError(f"is a {type(loop_over).__name__}, not a list: the benchmark's tool "
                             f"schema rejects it (only gold replay expands a reference or a "
                             f".geojson path)", tool=LOOP_TOOL, argument="loop_over",
                             expected="a list of objects, e.g. the features of a layer")
    for i, it in enumerate(loop_over):
        if not (isinstance(it, dict) or (isinstance(it, (list, tuple)) and len(it) == 4)):
            raise ToolInputError(f"item {i} is {it!r}, not an object or a 4-element window",
                                 tool=LOOP_TOOL, argument="loop_over",
                                 expected="objects or [x1, x2, y1, y2] windows")
    items = list(loop_over)
    ran = run_loop_items(plan, items, bind=bind, grid_n=grid_n, trajectory=traj,
                         call=lambda spec, args: call_tool(spec.name, args, ctx, direct=True))
    return loop_output(ran, return_all)


class LoopCall(NamedTuple):
    """One planned nested call of ``tool.loop``: the tool (None when it cannot be called), the
    call's args, and why it cannot be called (raised when an iteration reaches it)."""
    spec: Any
    args: dict
    problem: str | None = None


def loop_plan(calls: list[dict], grid_n: int | None) -> list[LoopCall]:
    """``tool.loop``'s ``calls`` as ``[LoopCall, ...]`` in call order, read as the benchmark's loop
    reads them (``analysis.py:tool_loop``): the tool name is ``call`` (else ``tool``; a
    ``functions.`` prefix and underscore aliases are accepted), its arguments ``args`` (an
    object; absent = none). A call the benchmark cannot make — no tool name, an unknown tool, a
    tool outside the Analysis, Calculate and Perception servers, args that are not an object
    — fails only when an iteration reaches it (``run_loop_items``): with no items the loop
    returns no results, as there. An empty ``calls`` list gives each item a null last_obs.
    ``grid_n`` is not checked: 0 means none, a negative one gives Python's floor division."""
    plan = []
    for j, call in enumerate(calls or []):
        if not isinstance(call, dict):
            plan.append(LoopCall(None, {}, f"call {j} is not an object"))
            continue
        name = call["call"] if "call" in call else call.get("tool")
        args = call.get("args") or {}
        if not isinstance(name, str) or not name:
            plan.append(LoopCall(None, {}, f"call {j} names no tool ('call' or 'tool')"))
            continue
        try:
            spec = get_tool(name)
        except ToolError:
            plan.append(LoopCall(None, {}, f"tool not found: {name}"))
            continue
        if spec.server not in NESTABLE_SERVERS:
            plan.append(LoopCall(None, {}, f"{spec.name} ({spec.server} server) cannot be nested "
                                           f"in a loop: tool not found by the benchmark's loop"))
            continue
        if not isinstance(args, dict):
            plan.append(LoopCall(None, {}, f"call {j} args are a {type(args).__name__}, not an "
                                           f"object"))
            continue
        plan.append(LoopCall(spec, dict(args)))
    return plan


def run_loop_items(plan: list[LoopCall], items: list, *, bind: dict | None,
                   grid_n: int | None, trajectory: list[dict],
                   call) -> list[tuple[dict, list[dict]]]:
    """Run ``plan`` once per item, in order (dora-format.md §b): prepare the item
    (``coerce_item``), apply ``bind``, substitute ``<item.a.b>``, ``<k> from step[N].obs`` (this
    iteration's earlier calls) and ``<k> from trajectory[N].obs``, then ``call(spec, args) -> obs``.

    Returns ``[(item, [{tool, args, obs}, ...]), ...]``: each prepared item with its calls'
    resolved args and observations. A reference that does not resolve stays the literal string;
    a ``ToolError`` from ``call`` becomes the benchmark's stub observation
    (``stub_observation``), except for ``UNGUARDED_NESTED`` tools, where it raises a
    ``ToolError`` naming the iteration and the call. So does a call with unknown or missing
    arguments to an Analysis/Calculate tool outside ``GUARDED_NESTED`` (the benchmark's Python
    call raises TypeError before that tool's own error handling). The benchmark passes nested
    arguments unconverted: a value its function cannot compute with (``raw_call_failure``: a
    string pixel size, a float pixel index) fails that call the same way."""
    tool = LOOP_TOOL
    out = []
    for idx, raw in enumerate(items):
        item = coerce_item(raw, idx, int(grid_n) if grid_n else None)
        steps: list[dict] = []
        for j, (spec, args, problem) in enumerate(plan):
            if problem:
                raise ToolInputError(f"iteration {idx}, call {j}: {problem}", tool=tool,
                                     argument="calls")
            a = apply_bind(args, bind, item, trajectory)
            a = resolve_value(a, trajectory=trajectory, steps=steps, item=item)
            names = {p.name for p in spec.params}
            unbound = sorted(set(a) - names) + sorted(p.name for p in spec.params
                                                      if p.required and p.name not in a)
            if unbound and spec.name not in GUARDED_NESTED and \
                    spec.server in ("Analysis", "Calculate"):
                raise ToolInputError(f"iteration {idx}, call {j}: {spec.name} cannot be called "
                                     f"with these arguments (unknown or missing: "
                                     f"{', '.join(unbound)})", tool=tool, argument="calls")
            # a direct call takes an explicit None as the default, which the schema refuses
            a = {k: v for k, v in a.items() if not (v is None and k in spec.non_null)} \
                if spec.non_null else a
            raw_failure = raw_call_failure(spec.name, a)
            if raw_failure is not None:
                if spec.name in UNGUARDED_NESTED:
                    raise ToolError(f"iteration {idx}, call {j}: {spec.name}: {raw_failure}",
                                    tool=tool, argument="calls")
                steps.append({"tool": spec.name, "args": a,
                              "obs": stub_observation(spec.name, a, raw_failure)})
                continue
            try:
                obs = call(spec, a)
            except ToolError as exc:
                if spec.name in UNGUARDED_NESTED and not getattr(exc, "benchmark_stub", False):
                    raise ToolError(f"iteration {idx}, call {j}: {exc}", tool=tool,
                                    argument="calls") from exc
                obs = stub_observation(spec.name, a, str(exc))
            steps.append({"tool": spec.name, "args": a, "obs": obs})
        out.append((item, steps))
    return out


def loop_output(ran: list[tuple[dict, list[dict]]], return_all: bool) -> list | dict:
    """``tool.loop``'s observation from ``run_loop_items``' result: a bare list of
    ``{item, last_obs}`` (``return_all``), else ``{tool, iteration_count, results: []}``, as the
    benchmark returns them."""
    if return_all:
        return [{"item": item, "last_obs": steps[-1]["obs"] if steps else None}
                for item, steps in ran]
    return {"tool": LOOP_TOOL, "iteration_count": len(ran), "results": []}


def _get_field(item: Any, path: str) -> Any:
    cur = item
    for key in path.split("."):
        if not isinstance(cur, dict) or key not in cur:
            return None
        cur = cur[key]
    return cur


@register("tool.reduce", server="Analysis", module="logical",
          result_keys=["tool", "mode", "best_value", "best_index", "best_item"],
          notes={"field": "dotted path, e.g. 'last_obs.area_m2'",
                 "mode": "'max' | 'min' | 'mean' (anything else behaves as max)"})
def tool_reduce(ctx: ToolContext, values: list[dict], field: str, mode: str = "max") -> dict:
    """Pick the item whose numeric ``field`` (dotted path) is largest or smallest, or average
    it (``analysis.py:tool_reduce``). Every int or float value counts — booleans too (true = 1.0,
    false = 0.0: quirk, QC ``tool.reduce_boolean``); other items are skipped; the first item
    wins ties. ``mode`` other than min/mean behaves as max. A winner wrapping a loop item
    surfaces its region/row_idx/col_idx. No numeric value → null results (not an error).
    ``values`` must be a list of objects (the benchmark's schema) → else ToolInputError."""
    tool = "tool.reduce"
    if values is None or any(not isinstance(v, dict) for v in values):
        raise ToolInputError("must be a list of objects", tool=tool, argument="values",
                             expected="list[dict], e.g. the results of tool.loop")
    nums = []
    for i, item in enumerate(values):
        v = _get_field(item, field)
        if isinstance(v, (int, float)):
            nums.append((i, float(v)))
    if not nums:
        return {"tool": tool, "mode": mode, "best_value": None, "best_index": None,
                "best_item": None, "mean_value": None}
    if mode == "mean":
        return {"tool": tool, "mode": mode, "mean_value": sum(v for _, v in nums) / len(nums)}
    if mode == "min":
        best_i, best_v = min(nums, key=lambda t: t[1])
    else:
        best_i, best_v = max(nums, key=lambda t: t[1])  # NaN compares false, as in Python
    best_item = values[best_i]
    out = {"tool": tool, "mode": mode, "best_value": best_v, "best_index": best_i,
           "best_item": best_item}
    if isinstance(best_item, dict):
        inner = best_item.get("item", best_item)
        if isinstance(inner, dict):
            for k in ("region", "row_idx", "col_idx"):
                if k in inner:
                    out[k] = inner[k]
    return out


# ============================================================================================
# tool.chart_data
# ============================================================================================
def _render_label(template: str, item: dict) -> str:
    def repl(m):
        v = _get_field(item, m.group(1))
        if v is None:
            return ""
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        return str(v)

    return re.sub(r"\{([\w.]+)\}", repl, template)


def _label(v: Any) -> str | None:
    if v is None:
        return None
    s = str(v).strip()
    return s or None


@register("tool.chart_data", server="Calculate", module="logical",
          result_keys=["tool", "data", "records", "source_count", "kept_count", "value_field",
                       "sort_by", "descending"],
          types_={"values": "list[dict]|dict"})
def tool_chart_data(ctx: ToolContext, values: list[dict] | dict, value_field: str,
                    label_field: str | None = None, fallback_label_field: str | None = None,
                    fallback_label_prefix: str = "", label_template: str | None = None,
                    sort_by: str | None = None, descending: bool = True,
                    top_k: int | None = None, round_digits: int | None = None) -> dict:
    """Ordered label → value mapping for the chart tools from loop results or statistics.

    Label priority: ``label_template`` ({dotted.path} placeholders), ``label_field``,
    prefix + ``fallback_label_field``, the dict key, ``item_<i>``; duplicates get " (2)", ...
    Records without the value are skipped; a non-numeric value → ToolInputError.
    """
    tool = "tool.chart_data"
    if not value_field:
        raise ToolInputError("is required", tool=tool, argument="value_field",
                             expected="a dotted field path, e.g. 'last_obs.area_m2'")
    if isinstance(values, list) and any(not isinstance(v, dict) for v in values):
        raise ToolInputError("must be a list of objects or an object", tool=tool,
                             argument="values", expected="list[dict] | dict")
    if isinstance(values, dict):
        records = []
        for k, v in values.items():
            if isinstance(v, dict):
                r = dict(v)
                r.setdefault("__key__", k)
            else:
                r = {"__key__": k, value_field: v}
            records.append(r)
    else:
        records = [v for v in values if isinstance(v, dict)]
    extracted = []
    for idx, item in enumerate(records):
        raw = _get_field(item, value_field)
        if raw is None:
            continue
        try:
            num = float(raw)
        except (TypeError, ValueError) as exc:
            raise ToolInputError(f"record {idx}: {value_field!r} is {raw!r}, not a number",
                                 tool=tool, argument="value_field") from exc
        label = _render_label(label_template, item).strip() if label_template else None
        if not label and label_field:
            label = _label(_get_field(item, label_field))
        if not label and fallback_label_field:
            fb = _label(_get_field(item, fallback_label_field))
            if fb is not None:
                label = f"{fallback_label_prefix}{fb}"
        if not label and "__key__" in item:
            label = _label(item["__key__"])
        if not label:
            label = f"item_{idx}"
        sort_value: float = idx
        if sort_by:
            try:
                sort_value = float(_get_field(item, sort_by))
            except (TypeError, ValueError):
                sort_value = num
        extracted.append({"label": label, "value": num, "sort_value": sort_value,
                          "source_index": idx})
    if sort_by:
        extracted.sort(key=lambda r: r["sort_value"], reverse=bool(descending))
    if top_k is not None:
        extracted = extracted[: max(int(top_k), 0)]
    data: dict[str, float] = {}
    out_records = []
    seen: dict[str, int] = {}
    for rank, rec in enumerate(extracted, start=1):
        label = rec["label"]
        if label in seen:
            seen[label] += 1
            label = f"{label} ({seen[label]})"
        else:
            seen[label] = 1
        value = round(rec["value"], int(round_digits)) if round_digits is not None else rec["value"]
        data[label] = value
        out_records.append({"rank": rank, "label": label, "value": value,
                            "source_index": rec["source_index"]})
    return {"tool": tool, "data": data, "records": out_records, "source_count": len(records),
            "kept_count": len(out_records), "value_field": value_field, "sort_by": sort_by,
            "descending": bool(descending)}


# ============================================================================================
# calc.*
# ============================================================================================
@register("calc.add", server="Calculate", module="logical", result_keys=["tool", "sum", "a", "b"])
def calc_add(ctx: ToolContext, a: float, b: float) -> dict:
    """a + b."""
    return {"tool": "calc.add", "sum": float(a) + float(b), "a": float(a), "b": float(b)}


@register("calc.sub", server="Calculate", module="logical",
          result_keys=["tool", "difference", "a", "b"])
def calc_sub(ctx: ToolContext, a: float, b: float) -> dict:
    """a − b (signed)."""
    return {"tool": "calc.sub", "difference": float(a) - float(b), "a": float(a), "b": float(b)}


@register("calc.diff", server="Calculate", module="logical",
          result_keys=["tool", "diff", "a", "b"])
def calc_diff(ctx: ToolContext, a: float, b: float) -> dict:
    """|a − b|."""
    return {"tool": "calc.diff", "diff": abs(float(a) - float(b)), "a": float(a), "b": float(b)}


@register("calc.mul", server="Calculate", module="logical",
          result_keys=["tool", "product", "a", "b"])
def calc_mul(ctx: ToolContext, a: float, b: float) -> dict:
    """a × b."""
    return {"tool": "calc.mul", "product": float(a) * float(b), "a": float(a), "b": float(b)}


@register("calc.div", server="Calculate", module="logical",
          result_keys=["tool", "ratio", "a", "b"])
def calc_div(ctx: ToolContext, a: float, b: float) -> dict:
    """a / b. As in the benchmark, b = 0 gives ratio 0.0 (not an error)."""
    ratio = float(a) / float(b) if float(b) != 0 else 0.0
    return {"tool": "calc.div", "ratio": ratio, "a": float(a), "b": float(b)}


@register("calc.greater_than", server="Calculate", module="logical",
          result_keys=["tool", "value", "result", "a", "b"])
def calc_greater_than(ctx: ToolContext, a: float, b: float) -> dict:
    """a > b as ``value`` 1/0 and ``result`` true/false."""
    r = float(a) > float(b)
    return {"tool": "calc.greater_than", "value": int(r), "result": r, "a": float(a),
            "b": float(b)}


@register("calc.volume", server="Calculate", module="logical",
          result_keys=["tool", "volume_m3", "area_m2", "depth_m"])
def calc_volume(ctx: ToolContext, area_m2: float, depth_m: float) -> dict:
    """volume_m3 = area_m2 × depth_m (debris or flood water)."""
    return {"tool": "calc.volume", "volume_m3": float(area_m2) * float(depth_m),
            "area_m2": float(area_m2), "depth_m": float(depth_m)}


@register("calc.point_distance", server="Calculate", module="logical",
          result_keys=["tool", "point_a", "point_b", "pixel_size_m", "distance_px", "distance_m"],
          notes={"point_a": "[row, col]", "point_b": "[row, col]"})
def calc_point_distance(ctx: ToolContext, point_a: list[float], point_b: list[float],
                        pixel_size_m: float = 1.0) -> dict:
    """Euclidean distance of two pixel positions and its metric equivalent
    (distance_px × pixel_size_m). Points not of length 2 → ToolInputError."""
    tool = "calc.point_distance"
    for name, p in (("point_a", point_a), ("point_b", point_b)):
        if len(p) != 2:
            raise ToolInputError(f"has {len(p)} coordinates", tool=tool, argument=name,
                                 expected="[row, col]")
    d = math.hypot(float(point_a[0]) - float(point_b[0]), float(point_a[1]) - float(point_b[1]))
    return {"tool": tool, "point_a": [float(v) for v in point_a],
            "point_b": [float(v) for v in point_b], "pixel_size_m": float(pixel_size_m),
            "distance_px": d, "distance_m": d * float(pixel_size_m)}


@register("calc.weighted_sum", server="Calculate", module="logical",
          result_keys=["tool", "score", "normalized"])
def calc_weighted_sum(ctx: ToolContext, values: list[float], weights: list[float],
                      normalize: bool = False) -> dict:
    """Σ values·weights (numpy ``dot`` in float64, ``calculate.py:calc_weighted_sum``); with
    ``normalize`` the weights are first divided by their sum (when it is not 0). Empty lists
    give 0.0. Length mismatch → ToolInputError."""
    tool = "calc.weighted_sum"
    if len(values) != len(weights):
        raise ToolInputError(f"{len(weights)} weights for {len(values)} values", tool=tool,
                             argument="weights", expected="one weight per value")
    import numpy as np

    w = np.asarray(weights, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    if normalize and w.sum() != 0:
        w = w / w.sum()
    return {"tool": tool, "score": float(np.dot(v, w)), "normalized": bool(normalize)}


# ============================================================================================
# logi.*
# ============================================================================================
@register("logi.truck_trips", server="Calculate", module="logical",
          result_keys=["tool", "trips_required", "volume_m3", "capacity_m3"])
def logi_truck_trips(ctx: ToolContext, volume_m3: float, capacity_m3: float) -> dict:
    """trips_required = ceil(volume_m3 / capacity_m3), as ``calculate.py:logi_truck_trips``:
    a capacity ≤ 0 gives 0 trips, and a negative volume is not refused (−10 m³ / 12 m³ →
    ceil(−0.83) = 0 trips, −30 / 12 → −2; QC ``tool.negative_volume``). An infinite or NaN
    quotient (the benchmark's ``math.ceil`` raises) → ToolInputError."""
    tool = "logi.truck_trips"
    if capacity_m3 <= 0:
        trips = 0
    else:
        q = float(volume_m3) / float(capacity_m3)
        if not math.isfinite(q):
            raise ToolInputError(f"volume / capacity is {q}, which has no whole number of trips",
                                 tool=tool, argument="volume_m3", expected="finite numbers")
        trips = math.ceil(q)
    return {"tool": tool, "trips_required": int(trips), "volume_m3": float(volume_m3),
            "capacity_m3": float(capacity_m3)}


@register("logi.priority_score", server="Calculate", module="logical",
          result_keys=["tool", "ranked", "count"])
def logi_priority_score(ctx: ToolContext, items: list[dict], criteria: dict[str, float],
                        top_k: int | None = None) -> dict:
    """Score = Σ weight × item[field] (missing fields count 0, non-numeric ones are skipped);
    items sorted by score descending (stable), each with ``priority_score``."""
    scored = []
    for it in items:
        score = 0.0
        for fld, weight in criteria.items():
            v = it.get(fld, 0.0)
            try:
                score += float(v) * float(weight)
            except (TypeError, ValueError):
                continue
        e = dict(it)
        e["priority_score"] = float(score)
        scored.append(e)
    scored.sort(key=lambda e: e["priority_score"], reverse=True)
    if top_k is not None:
        scored = scored[: int(top_k)]
    return {"tool": "logi.priority_score", "ranked": scored, "count": len(scored)}


@register("logi.resource_allocation", server="Calculate", module="logical",
          result_keys=["tool", "allocations", "allocated_total", "unallocated"])
def logi_resource_allocation(ctx: ToolContext, demands: list[dict], total_supply: float,
                             min_per_site: float = 0.0) -> dict:
    """Give every site ``min_per_site`` while supply lasts, then share the rest in proportion
    to need above the minimum, capped by each site's ``cap``; leftovers are ``unallocated``."""
    remaining = float(total_supply)
    allocs = []
    for d in demands:
        base = min(float(min_per_site), remaining)
        allocs.append({"id": d.get("id"), "need": float(d.get("need", 0.0)), "allocated": base})
        remaining -= base
    excess = [max(float(d.get("need", 0.0)) - float(min_per_site), 0.0) for d in demands]
    total_need = sum(excess)
    if total_need > 0 and remaining > 0:
        for d, a, ex in zip(demands, allocs, excess):
            extra = min(ex / total_need * remaining, float(d.get("cap", math.inf)) - a["allocated"])
            a["allocated"] += max(extra, 0.0)
    total = sum(a["allocated"] for a in allocs)
    return {"tool": "logi.resource_allocation", "allocations": allocs,
            "allocated_total": float(total),
            "unallocated": float(max(float(total_supply) - total, 0.0))}
