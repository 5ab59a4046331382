"""Parity of tool.loop with the benchmark's loop (dora/tools/analysis.py:tool_loop at
2b24be7033a8f66dea6f557bf9861e927ee5d113), called as a tool (the MCP schema: lists) and as gold
replay calls it (the direct call, which also takes a string loop_over).

Expected values follow the benchmark's documented loop by hand: the calls are read with
``call.get("call", call.get("tool"))`` and ``dict(call.get("args") or {})``; a tool that cannot
be resolved raises only inside the iteration loop, so a loop over no items returns []; each
item keeps the last call's obs (None when there are no calls); ``grid_n`` only counts when
truthy; a string loop_over is a trajectory reference or a .geojson/.json path, whose missing
file, missing key or non-list value gives no items; another string is iterated character by
character (``list(loop_over)``).
"""
import json

import pytest
from shapely.geometry import Point, box

from kernel.engine import run_trajectory
from kernel.tools import ToolError, ToolInputError, call_tool
from kernel.tools.testing import make_ctx, write_geojson

MUL = {"call": "calc.mul", "args": {"a": 2, "b": 3}}


@pytest.fixture
def ctx(tmp_path):
    return make_ctx(tmp_path)


def loop(ctx, **args):
    return call_tool("tool.loop", args, ctx)


def test_empty_calls_give_null_last_obs(ctx):
    assert loop(ctx, calls=[], loop_over=[{"a": 1}, {"a": 2}]) == [
        {"item": {"a": 1}, "last_obs": None}, {"item": {"a": 2}, "last_obs": None}]
    assert loop(ctx, calls=[], loop_over=[]) == []


@pytest.mark.parametrize("call", [
    {"call": "ras.nothing", "args": {}},          # unknown tool
    {"call": "poi.group_by", "args": {}},         # POI server: not found by the loop's lookup
    {"name": "calc.mul", "args": {"a": 1, "b": 1}},  # 'name' is not read: no tool name
    {"call": "calc.mul", "args": '{"a": 1, "b": 1}'},  # dict("...") fails
])
def test_uncallable_nested_call_fails_only_when_reached(ctx, call):
    assert loop(ctx, calls=[call], loop_over=[]) == []
    with pytest.raises(ToolInputError) as ei:
        loop(ctx, calls=[call], loop_over=[{"a": 1}])
    assert "iteration 0, call 0" in str(ei.value)


def test_inputs_key_is_not_read(ctx):
    # {"tool", "inputs"}: the benchmark calls calc_mul() without arguments, a TypeError that
    # ends the loop (calc.mul has no _tool_guard)
    with pytest.raises(ToolError):
        loop(ctx, calls=[{"tool": "calc.mul", "inputs": {"a": 1, "b": 2}}], loop_over=[{}])


def test_grid_n_zero_and_negative(ctx):
    win = [[0, 4, 0, 4], [0, 4, 4, 8], [4, 8, 0, 4]]
    res = loop(ctx, calls=[MUL], loop_over=win, grid_n=0)  # 0 is falsy: no row/col
    assert [("row_idx" in r["item"]) for r in res] == [False, False, False]
    res = loop(ctx, calls=[MUL], loop_over=win, grid_n=-2)
    # Python floor division: 0 // -2 = 0, 1 // -2 = -1, 2 // -2 = -1; 1 % -2 = -1, 2 % -2 = 0
    assert [(r["item"]["row_idx"], r["item"]["col_idx"]) for r in res] == [(0, 0), (-1, -1), (-1, 0)]
    assert res[0]["last_obs"]["product"] == 6.0


def test_centroid_empty_geometry_stub_is_kept(ctx, tmp_path):
    # vec_centroid (an unguarded helper in the loop) returns a stub object for an empty
    # geometry instead of raising: the loop keeps it and goes on
    (tmp_path / "data" / "g.geojson").write_text(json.dumps({"type": "FeatureCollection", "features": [
        {"type": "Feature", "properties": {}, "geometry": None},
        {"type": "Feature", "properties": {}, "geometry": {"type": "Point", "coordinates": [3, 4]}}]}))
    res = loop(ctx, calls=[{"call": "vec.centroid",
                            "args": {"vector_path": "g.geojson", "feature_idx": "<item.i>"}}],
               loop_over=[{"i": 0}, {"i": 1}])
    assert res[0]["last_obs"]["status"] == "stub"
    assert (res[1]["last_obs"]["pixel_row"], res[1]["last_obs"]["pixel_col"]) == (4.0, 3.0)


def test_nested_missing_layer_is_empty(ctx):
    # an unresolved <item.x> passed on literally names no file: an empty layer, not a failure
    res = loop(ctx, calls=[{"call": "vec.centroid", "args": {"vector_path": "<item.x>"}}],
               loop_over=[{}])
    assert res[0]["last_obs"]["centroid_x"] is None


def replay_loop(ctx, loop_over, pre=(), **kw):
    steps = list(pre) + [{"call": "tool.loop", "args": {"calls": [MUL], "loop_over": loop_over, **kw}}]
    res = run_trajectory(steps, ctx)
    assert res.ok, res.error
    return res.steps[-1].obs


def test_gold_replay_string_loop_over(ctx, tmp_path):
    write_geojson(tmp_path / "data" / "sq.geojson",
                  [{"geometry": box(0, 0, 1, 1), "properties": {"g": "a"}},
                   {"geometry": Point(5, 5), "properties": {"g": "b"}}])
    pre = [{"call": "vec.filter_by_attribute",
            "args": {"vector_path": "sq.geojson", "attribute_name": "g", "allowed_values": ["a", "b"]}}]
    # a reference to a layer path: its features
    obs = replay_loop(ctx, "<vector_path> from trajectory[0].obs", pre)
    assert [r["item"]["properties"]["g"] for r in obs] == ["a", "b"]
    # a key the step does not have, a value that is not a list: no items (not an error)
    assert replay_loop(ctx, "<nokey> from trajectory[0].obs", pre) == []
    assert replay_loop(ctx, "<total_input> from trajectory[0].obs", pre) == []
    # a list value: its elements, each scalar wrapped as {value}
    obs = replay_loop(ctx, "<allowed_values> from trajectory[0].obs", pre)
    assert [r["item"] for r in obs] == [{"value": "a"}, {"value": "b"}]
    # a .geojson path that names no file: no items; return_all false: the summary
    assert replay_loop(ctx, "nope.geojson") == []
    assert replay_loop(ctx, "nope.geojson", return_all=False) == {
        "tool": "tool.loop", "iteration_count": 0, "results": []}
    # any other string: list("ab") = ["a", "b"]
    assert [r["item"] for r in replay_loop(ctx, "ab")] == [{"value": "a"}, {"value": "b"}]
    # the benchmark's tool_loop reads the reference with optional spaces around "from"
    # (analysis.py:tool_loop, its own ``\s*`` pattern): "<k>from trajectory[0].obs" is the same
    # reference, so the same two features, not the characters of the string
    obs = replay_loop(ctx, "<vector_path>from trajectory[0].obs", pre)
    assert [r["item"]["properties"]["g"] for r in obs] == ["a", "b"]
    obs = replay_loop(ctx, "<allowed_values>fromtrajectory[0].obs", pre)
    assert [r["item"] for r in obs] == [{"value": "a"}, {"value": "b"}]


@pytest.mark.parametrize("loop_over,expected", [
    ("<total_input> from trajectory[0].obs", {"tool.loop_over_unresolved"}),  # an int
    ("<note> from trajectory[0].obs", {"tool.loop_over_unresolved"}),     # null
    ("<vector_path> from trajectory[0].obs", set()),                      # a layer path
    ("<allowed_values> from trajectory[0].obs", set()),                   # a list
    ("<total_input>from trajectory[0].obs", {"tool.loop_over_unresolved"}),  # no space: the same reference
    ("<allowed_values>from trajectory[0].obs", set()),                    # ... to a list: no finding
])
def test_qc_loop_over_that_gives_no_items(loop_over, expected):
    """QC tool.loop_over_unresolved: gold replay now loops over nothing where the benchmark does,
    so the author learns that the gold of this loop is an empty list."""
    from annotation import qc

    steps = [{"call": "vec.filter_by_attribute",
              "args": {"vector_path": "a.geojson", "attribute_name": "g", "allowed_values": ["a"]},
              "obs": {"tool": "vec.filter_by_attribute", "vector_path": "f.geojson", "total_input": 2,
                      "allowed_values": ["a"], "note": None}},
             {"call": "tool.loop", "args": {"loop_over": loop_over, "calls": [MUL]}, "obs": []}]
    content = {"question": "How many?", "trajectory": steps,
               "input_data": {"a": {"image_path": "a.geojson", "modality": "vector",
                                    "spatial_coordinate_system": "pixel"}},
               "answer_spec": [{"name": "n", "eval_type": "scalar_count",
                                "source": "<total_input> from trajectory[0].obs"}]}
    found = {(f.check, f.location) for f in qc.check_task(content) if f.check.startswith("tool.loop")}
    assert {c for c, _ in found} == expected
    assert all(loc == "trajectory[1].args.loop_over" for _, loc in found)


def test_nested_calls_keep_int_arguments(ctx, tmp_path):
    """A call nested in the benchmark's loop is a direct Python call: no schema turns an int given
    for a float parameter into a float, so vec.buffer echoes distance_input_m 10 (an int), where
    the same call through the tool schema echoes 10.0."""
    write_geojson(tmp_path / "data" / "p.geojson", [{"geometry": Point(0, 0), "properties": {}}])
    call = {"call": "vec.buffer", "args": {"vector_path": "p.geojson", "meter": "<item.m>"}}
    res = loop(ctx, calls=[call], loop_over=[{"m": 10}, {"m": 2.5}])
    got = [r["last_obs"]["distance_input_m"] for r in res]
    assert got == [10, 2.5] and type(got[0]) is int
    top = call_tool("vec.buffer", {"vector_path": "p.geojson", "meter": 10}, ctx)
    assert type(top["distance_input_m"]) is float
    # gold replay does the same through the engine
    obs = run_trajectory([{"call": "tool.loop", "args": {"calls": [call], "loop_over": [{"m": 10}]}}],
                         ctx).steps[0].obs
    assert type(obs[0]["last_obs"]["distance_input_m"]) is int
