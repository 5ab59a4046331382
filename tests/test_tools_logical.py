"""calc.*, logi.*, tool.reduce, tool.loop, tool.chart_data."""
import numpy as np
import pytest

from kernel.tools import ToolError, ToolInputError, call_tool
from kernel.tools.testing import make_ctx, write_geojson, write_png

# 4x4 mask; quadrants by hand: TL [[0,0],[0,2]], TR [[1,1],[2,1]], BL [[3,3],[3,0]],
# BR [[0,0],[0,255]] -> class-3 counts per window (row-major) 0, 0, 3, 0
M = np.array([[0, 0, 1, 1],
              [0, 2, 2, 1],
              [3, 3, 0, 0],
              [3, 0, 0, 255]], dtype=np.uint8)


@pytest.fixture
def ctx(tmp_path):
    c = make_ctx(tmp_path)
    write_png(tmp_path / "data" / "m.png", M)
    return c


def test_calc(ctx):
    assert call_tool("calc.div", {"a": 1, "b": 4}, ctx) == {"tool": "calc.div", "ratio": 0.25,
                                                           "a": 1.0, "b": 4.0}
    assert call_tool("calc.div", {"a": 1, "b": 0}, ctx)["ratio"] == 0.0  # benchmark: not an error
    assert call_tool("calc.div", {"a": "3", "b": "2"}, ctx)["ratio"] == 1.5  # numeric strings coerce
    with pytest.raises(ToolInputError) as ei:
        call_tool("calc.div", {"a": "three", "b": 2}, ctx)
    assert ei.value.argument == "a"
    with pytest.raises(ToolInputError):
        call_tool("calc.div", {"a": 1}, ctx)
    assert call_tool("calc.add", {"a": 1, "b": 2}, ctx)["sum"] == 3.0
    assert call_tool("calc.sub", {"a": 1, "b": 2}, ctx)["difference"] == -1.0
    assert call_tool("calc.diff", {"a": 1, "b": 2}, ctx)["diff"] == 1.0
    assert call_tool("calc.mul", {"a": 1.5, "b": 2}, ctx)["product"] == 3.0
    assert call_tool("calc.greater_than", {"a": 2, "b": 1}, ctx)["value"] == 1
    assert call_tool("calc.volume", {"area_m2": 10, "depth_m": 0.5}, ctx)["volume_m3"] == 5.0
    pd = call_tool("calc.point_distance", {"point_a": [0, 0], "point_b": [3, 4],
                                           "pixel_size_m": 0.5}, ctx)
    assert (pd["distance_px"], pd["distance_m"]) == (5.0, 2.5)
    with pytest.raises(ToolInputError):
        call_tool("calc.point_distance", {"point_a": [0], "point_b": [3, 4]}, ctx)
    # (1*1 + 2*3) / (1 + 3) = 1.75 with normalised weights
    assert call_tool("calc.weighted_sum", {"values": [1, 2], "weights": [1, 3],
                                           "normalize": True}, ctx)["score"] == 1.75
    with pytest.raises(ToolInputError):
        call_tool("calc.weighted_sum", {"values": [1, 2], "weights": [1]}, ctx)


def test_truck_trips(ctx):
    # ceil(10 / 3) = 4
    assert call_tool("logi.truck_trips", {"volume_m3": 10, "capacity_m3": 3}, ctx) == {
        "tool": "logi.truck_trips", "trips_required": 4, "volume_m3": 10.0, "capacity_m3": 3.0}
    assert call_tool("logi.truck_trips", {"volume_m3": 9, "capacity_m3": 3},
                     ctx)["trips_required"] == 3
    assert call_tool("logi.truck_trips", {"volume_m3": 9, "capacity_m3": 0},
                     ctx)["trips_required"] == 0
    # benchmark parity: a negative volume is not refused by the benchmark (calculate.py:
    # logi_truck_trips): ceil(-1/3) = ceil(-0.33) = 0, ceil(-30/12) = ceil(-2.5) = -2
    assert call_tool("logi.truck_trips", {"volume_m3": -1, "capacity_m3": 3},
                     ctx)["trips_required"] == 0
    assert call_tool("logi.truck_trips", {"volume_m3": -30, "capacity_m3": 12},
                     ctx)["trips_required"] == -2
    with pytest.raises(ToolInputError):
        call_tool("logi.truck_trips", {"volume_m3": "lots", "capacity_m3": 3}, ctx)


def test_priority_and_allocation(ctx):
    ps = call_tool("logi.priority_score", {"items": [{"id": "a", "x": 1, "y": 5},
                                                     {"id": "b", "x": 3, "y": 0}],
                                           "criteria": {"x": 2, "y": 0.5}}, ctx)
    # a: 2 + 2.5 = 4.5; b: 6 + 0 = 6
    assert [i["id"] for i in ps["ranked"]] == ["b", "a"] and ps["ranked"][1]["priority_score"] == 4.5
    ra = call_tool("logi.resource_allocation", {"demands": [{"id": 1, "need": 30},
                                                            {"id": 2, "need": 10, "cap": 3}],
                                                "total_supply": 20, "min_per_site": 1}, ctx)
    # 1 each, 18 left shared 29:9 of need above minimum -> site 2 capped at 3 total
    allocated = [a["allocated"] for a in ra["allocations"]]
    assert allocated[1] == 3.0 and allocated[0] == pytest.approx(1 + 18 * 29 / 38)
    assert ra["unallocated"] == pytest.approx(20 - sum(allocated))


def test_reduce(ctx):
    vals = [{"item": {"row_idx": 0, "col_idx": 1}, "last_obs": {"area_m2": 2}},
            {"item": {"row_idx": 1, "col_idx": 0, "region": "r"}, "last_obs": {"area_m2": 5}},
            {"item": {}, "last_obs": {"area_m2": "n/a"}}]
    r = call_tool("tool.reduce", {"values": vals, "field": "last_obs.area_m2"}, ctx)
    assert (r["best_value"], r["best_index"], r["row_idx"], r["col_idx"], r["region"]) == \
        (5.0, 1, 1, 0, "r")
    assert call_tool("tool.reduce", {"values": vals, "field": "last_obs.area_m2", "mode": "min"},
                     ctx)["best_index"] == 0
    assert call_tool("tool.reduce", {"values": vals, "field": "last_obs.area_m2", "mode": "mean"},
                     ctx)["mean_value"] == 3.5
    assert call_tool("tool.reduce", {"values": vals, "field": "nope"}, ctx)["best_value"] is None


def test_loop_over_grid_windows(ctx):
    windows = call_tool("ras.grid_windows", {"image_path": "m.png", "n": 2}, ctx)["windows"]
    calls = [{"call": "ras.clip", "args": {"image_path": "m.png", "x1": "<item.x1>",
                                           "x2": "<item.x2>", "y1": "<item.y1>", "y2": "<item.y2>"}},
             {"call": "ras_count_pixels", "args": {"mask_path": "<output_path> from step[0].obs",
                                                   "classes": [3]}}]
    res = call_tool("tool.loop", {"calls": calls, "loop_over": windows, "grid_n": 2}, ctx)
    assert isinstance(res, list) and len(res) == 4
    assert [r["last_obs"]["total"] for r in res] == [0, 0, 3, 0]
    assert res[2]["item"] == {"x1": 2, "x2": 4, "y1": 0, "y2": 2, "row_idx": 1, "col_idx": 0}
    best = call_tool("tool.reduce", {"values": res, "field": "last_obs.total"}, ctx)
    assert (best["best_index"], best["row_idx"], best["col_idx"]) == (2, 1, 0)
    summary = call_tool("tool.loop", {"calls": calls, "loop_over": windows, "return_all": False},
                        ctx)
    assert summary == {"tool": "tool.loop", "iteration_count": 4, "results": []}


def test_loop_unresolved_bind_stays_literal(ctx):
    # benchmark parity: an unresolved bind reference stays the literal string (analysis.py:tool_loop);
    # ras.stats then cannot open it and the benchmark keeps its stub object as the obs
    traj = [{"call": "x", "obs": {"other": 1}}]
    calls = [{"call": "ras.stats", "args": {"image_path": "placeholder"}}]
    res = call_tool("tool.loop", {"calls": calls, "loop_over": [{"a": 1}],
                                  "bind": {"image_path": "<mask> from trajectory[0].obs"},
                                  "trajectory": traj}, ctx)
    last = res[0]["last_obs"]
    assert last["status"] == "stub" and last["tool"] == "ras.stats"
    assert last["inputs"]["image_path"] == "<mask> from trajectory[0].obs"


def test_loop_bind_and_features(ctx, tmp_path):
    import json

    from shapely.geometry import Point

    from kernel.tools.logical import _loop_items

    write_geojson(tmp_path / "data" / "pts.geojson",
                  [{"geometry": Point(0, 0), "properties": {"pixel_row": 2, "pixel_col": 0}},
                   {"geometry": Point(0, 0), "properties": {"pixel_row": 0, "pixel_col": 3}}])
    traj = [{"call": "poi.world_to_pixel", "obs": {"geojson_path": "pts.geojson",
                                                   "raster": "m.png"}}]
    calls = [{"call": "ras.sample_point", "args": {"image_path": "placeholder",
                                                   "row": "<item.properties.pixel_row>",
                                                   "col": "<item.properties.pixel_col>"}}]
    # gold replay (the benchmark's direct call) expands a reference to the layer's features
    ref = "<geojson_path> from trajectory[0].obs"
    items = _loop_items(ctx, ref, traj, "tool.loop")
    assert [f["properties"]["pixel_row"] for f in items] == [2, 0]
    feats = json.loads((tmp_path / "data" / "pts.geojson").read_text())["features"]
    res = call_tool("tool.loop", {"calls": calls, "loop_over": feats,
                                  "bind": {"image_path": "<raster> from trajectory[0].obs"},
                                  "trajectory": traj}, ctx)
    # M[2,0] = 3, M[0,3] = 1
    assert [r["last_obs"]["pixel_values"]["1"] for r in res] == [3, 1]
    assert res[0]["item"]["properties"]["pixel_row"] == 2
    # benchmark parity: called as a tool, a string loop_over is refused as the benchmark's list-typed
    # MCP schema refuses it
    with pytest.raises(ToolInputError) as ei:
        call_tool("tool.loop", {"calls": calls, "loop_over": ref, "trajectory": traj}, ctx)
    assert ei.value.argument == "loop_over"


def test_loop_errors(ctx):
    # benchmark parity: a failing nested call leaves the benchmark's stub object, the loop goes on
    res = call_tool("tool.loop", {"calls": [{"call": "calc.add",
                                             "args": {"a": "<item.zz>", "b": 1}}],
                                  "loop_over": [{"x": 1}, {"zz": 2}]}, ctx)
    assert res[0]["last_obs"]["status"] == "stub" and res[0]["last_obs"]["inputs"]["a"] == "<item.zz>"
    assert res[1]["last_obs"]["sum"] == 3.0
    # ... except for the helpers the benchmark calls unguarded: ras.sample_point on a missing
    # image ends the whole loop, naming the iteration and the call
    with pytest.raises(ToolError) as ei:
        call_tool("tool.loop", {"calls": [{"call": "ras.sample_point",
                                           "args": {"image_path": "nope.png", "row": 0, "col": 0}}],
                                "loop_over": [{"x": 1}]}, ctx)
    assert "iteration 0, call 0" in str(ei.value)
    # its out-of-bounds answer is the helper's own stub: kept
    res = call_tool("tool.loop", {"calls": [{"call": "ras.sample_point",
                                             "args": {"image_path": "m.png", "row": 9, "col": 0}}],
                                  "loop_over": [{"x": 1}]}, ctx)
    assert res[0]["last_obs"]["status"] == "stub"
    with pytest.raises(ToolInputError) as ei:
        call_tool("tool.loop", {"calls": [{"call": "ras.nothing", "args": {}}], "loop_over": [{}]},
                  ctx)
    assert "tool not found" in str(ei.value)
    with pytest.raises(ToolInputError):
        call_tool("tool.loop", {"calls": [{"call": "calc.add", "args": {"a": 1, "b": 1}}],
                                "loop_over": "<x> from trajectory[3].obs"}, ctx)
    # scalars are refused by the schema; a JSON list text of windows is parsed
    with pytest.raises(ToolInputError):
        call_tool("tool.loop", {"calls": [{"call": "calc.add", "args": {"a": 1, "b": 1}}],
                                "loop_over": [1, 2]}, ctx)
    res = call_tool("tool.loop", {"calls": [{"call": "calc.add",
                                             "args": {"a": "<item.x2>", "b": 1}}],
                                  "loop_over": "[[0, 4, 0, 4]]"}, ctx)
    assert [r["last_obs"]["sum"] for r in res] == [5.0]


def test_chart_data(ctx):
    vals = [{"item": {"row_idx": 0, "col_idx": 1}, "last_obs": {"a": 2.345}},
            {"item": {"row_idx": 1, "col_idx": 0}, "last_obs": {"a": 5}},
            {"item": {}, "last_obs": {}}]
    cd = call_tool("tool.chart_data", {"values": vals, "value_field": "last_obs.a",
                                       "label_template": "r{item.row_idx}c{item.col_idx}",
                                       "sort_by": "last_obs.a", "round_digits": 1}, ctx)
    assert cd["data"] == {"r1c0": 5.0, "r0c1": 2.3} and cd["source_count"] == 3
    cd = call_tool("tool.chart_data", {"values": {"x": 1, "y": 1}, "value_field": "v"}, ctx)
    assert list(cd["data"]) == ["x", "y"]
