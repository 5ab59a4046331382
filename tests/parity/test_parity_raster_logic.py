"""Parity of calc.*, logi.*, tool.reduce, tool.loop, tool.chart_data and report.extract_evidence
with the benchmark's tools, and the integrity of the family's quirks list.

Expected values are worked out by hand in comments from the benchmark's code
(``dora/tools/calculate.py`` and ``model.py`` @7b969887, ``analysis.py`` @2b24be70) or taken
from its recorded observations in ``../shared/tool-examples`` (said so in the comment).
"""
from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
from conftest import SHARED, requires_shared

from kernel.tools import ToolContext, ToolError, call_tool, directory_resolver
from kernel.tools.testing import write_png

EXAMPLES = SHARED / "tool-examples" / "inputs"
REPO = Path(__file__).resolve().parents[2]
needs_examples = requires_shared(EXAMPLES)

M = np.array([[0, 0, 1, 1],
              [0, 2, 2, 1],
              [3, 3, 0, 0],
              [3, 0, 0, 255]], dtype=np.uint8)


@pytest.fixture
def ctx(tmp_path):
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    write_png(data / "m.png", M)
    # 10x10 evidence mask: class 1 rows 0-1 x cols 0-2 (6 px), class 3 rows 6-9 x cols 7-9
    # (12 px) and (9, 0)
    e = np.zeros((10, 10), np.uint8)
    e[0:2, 0:3] = 1
    e[6:10, 7:10] = 3
    e[9, 0] = 3
    write_png(data / "dmg_mask.png", e)
    for t, n in (("t1", 2), ("t2", 5), ("t3", 3), ("t4", 4)):
        f = np.zeros((4, 4), np.uint8)
        f.ravel()[:n] = 255
        write_png(data / f"flood_{t}.png", f)
    # a 10x10 mask whose only pixel is (4, 4): centroid row 4 < 10/2 -> north, col 4 -> west
    c = np.zeros((10, 10), np.uint8)
    c[4:6, 4:6] = 1  # centroid (4.5, 4.5): 4.5 < 5 -> northwest
    write_png(data / "centre_mask.png", c)
    return ToolContext(work_dir=tmp_path / "work", resolve_path=directory_resolver(data, EXAMPLES))


def run(ctx, tool, **args):
    return call_tool(tool, args, ctx)


# ---------------------------------------------------------------- calc.*
@pytest.mark.parametrize("tool,a,b,key,value", [
    ("calc.add", 2, 3.5, "sum", 5.5),
    ("calc.add", "3", "0.25", "sum", 3.25),     # numeric strings are coerced (tool-examples)
    ("calc.sub", 2, 5, "difference", -3.0),
    ("calc.diff", 2, 5, "diff", 3.0),            # |2 - 5|
    ("calc.mul", -1, 4, "product", -4.0),
    ("calc.div", 1, 4, "ratio", 0.25),
    ("calc.div", 7, 0, "ratio", 0.0),            # zero denominator: 0.0, not an error
    ("calc.greater_than", 3, 3, "value", 0),     # not strictly greater
    ("calc.greater_than", 3.5, 3, "result", True),
])
def test_calc_binary(ctx, tool, a, b, key, value):
    obs = run(ctx, tool, a=a, b=b)
    assert obs[key] == value and obs["a"] == float(a) and obs["b"] == float(b)


def test_calc_volume_and_point_distance(ctx):
    assert run(ctx, "calc.volume", area_m2=12.5, depth_m=-2)["volume_m3"] == -25.0
    d = run(ctx, "calc.point_distance", point_a=[10, 20], point_b=[13, 24], pixel_size_m=0.5)
    assert (d["distance_px"], d["distance_m"]) == (5.0, 2.5)  # 3-4-5 triangle
    assert run(ctx, "calc.point_distance", point_a=[0, 0], point_b=[1, 1])["distance_m"] == \
        pytest.approx(math.sqrt(2))  # default pixel size 1.0
    with pytest.raises(ToolError):
        run(ctx, "calc.point_distance", point_a=[0, 0, 0], point_b=[1, 1])


@pytest.mark.parametrize("values,weights,normalize,score", [
    ([1, 2], [1, 3], False, 7.0),       # 1 + 6
    ([1, 2], [1, 3], True, 1.75),       # (1 + 6) / 4
    ([1, 2], [1, -1], True, -1.0),      # weights sum to 0: not normalised
    ([], [], False, 0.0),
])
def test_calc_weighted_sum(ctx, values, weights, normalize, score):
    obs = run(ctx, "calc.weighted_sum", values=values, weights=weights, normalize=normalize)
    assert obs["score"] == score and obs["normalized"] is normalize


def test_calc_weighted_sum_mismatch(ctx):
    with pytest.raises(ToolError):
        run(ctx, "calc.weighted_sum", values=[1, 2], weights=[1])


# ---------------------------------------------------------------- logi.*
@pytest.mark.parametrize("volume,capacity,trips", [
    (10, 3, 4),       # ceil(3.33)
    (9, 3, 3),
    (36, 0, 0),       # capacity <= 0: 0 trips (tool-examples truck_trips_zero_capacity)
    (5, -2, 0),
    (-10, 12, 0),     # ceil(-0.83) = 0 (tool-examples truck_trips_negative_volume)
    (-30, 12, -2),    # ceil(-2.5) = -2
])
def test_truck_trips(ctx, volume, capacity, trips):
    obs = run(ctx, "logi.truck_trips", volume_m3=volume, capacity_m3=capacity)
    assert obs == {"tool": "logi.truck_trips", "trips_required": trips,
                   "volume_m3": float(volume), "capacity_m3": float(capacity)}


def test_priority_score(ctx):
    items = [{"id": "a", "x": 1, "y": 5}, {"id": "b", "x": 3, "y": 0},
             {"id": "c", "x": "n/a", "y": 2}, {"id": "d"}]
    obs = run(ctx, "logi.priority_score", items=items, criteria={"x": 2, "y": 0.5})
    # a 2 + 2.5 = 4.5; b 6; c: x skipped, 1.0; d: missing fields 0
    assert [(i["id"], i["priority_score"]) for i in obs["ranked"]] == \
        [("b", 6.0), ("a", 4.5), ("c", 1.0), ("d", 0.0)]
    assert run(ctx, "logi.priority_score", items=items, criteria={"x": 2},
               top_k=2)["count"] == 2
    # top_k -1 slices off the last item, as Python's [: -1]
    assert run(ctx, "logi.priority_score", items=items, criteria={"x": 2},
               top_k=-1)["count"] == 3


@pytest.mark.parametrize("demands,supply,minimum,allocated,unallocated", [
    # tool-examples resource_allocation: shares 50/100, 30/100, 20/100 of 60 = 30, 18 -> cap 10, 12
    ([{"id": "A", "need": 50}, {"id": "B", "need": 30, "cap": 10}, {"id": "C", "need": 20}],
     60, 0.0, [30.0, 10.0, 12.0], 8.0),
    # 1 each first, then 18 shared 29:9 of the need above the minimum; B capped at 3
    ([{"id": 1, "need": 30}, {"id": 2, "need": 10, "cap": 3}], 20, 1.0,
     [1 + 18 * 29 / 38, 3.0], 20 - (1 + 18 * 29 / 38) - 3.0),
    ([{"id": 1, "need": 5}], 0, 2.0, [0.0], 0.0),   # nothing to give
])
def test_resource_allocation(ctx, demands, supply, minimum, allocated, unallocated):
    obs = run(ctx, "logi.resource_allocation", demands=demands, total_supply=supply,
              min_per_site=minimum)
    assert [a["allocated"] for a in obs["allocations"]] == pytest.approx(allocated)
    assert obs["unallocated"] == pytest.approx(unallocated)
    assert obs["allocated_total"] == pytest.approx(sum(allocated))


# ---------------------------------------------------------------- tool.reduce
LOOPED = [{"item": {"row_idx": 0, "col_idx": 1}, "last_obs": {"area_m2": 2, "hit": False}},
          {"item": {"row_idx": 1, "col_idx": 0, "region": "r"}, "last_obs": {"area_m2": 5,
                                                                            "hit": True}},
          {"item": {}, "last_obs": {"area_m2": "n/a", "hit": True}}]


@pytest.mark.parametrize("field,mode,expected", [
    ("last_obs.area_m2", "max", {"best_value": 5.0, "best_index": 1, "row_idx": 1, "col_idx": 0,
                                 "region": "r"}),
    ("last_obs.area_m2", "min", {"best_value": 2.0, "best_index": 0}),
    ("last_obs.area_m2", "mean", {"mean_value": 3.5}),          # "n/a" skipped
    ("last_obs.area_m2", "median", {"best_value": 5.0}),         # unknown mode = max
    ("last_obs.hit", "max", {"best_value": 1.0, "best_index": 1}),  # true = 1.0, first wins
    ("last_obs.hit", "mean", {"mean_value": 2 / 3}),
    ("last_obs.hit", "min", {"best_value": 0.0, "best_index": 0}),
    ("nope", "max", {"best_value": None, "best_index": None, "best_item": None,
                     "mean_value": None}),
])
def test_reduce(ctx, field, mode, expected):
    obs = run(ctx, "tool.reduce", values=LOOPED, field=field, mode=mode)
    for k, v in expected.items():
        assert obs[k] == (pytest.approx(v) if isinstance(v, float) else v), k


def test_reduce_rejects_non_objects(ctx):
    with pytest.raises(ToolError):  # the benchmark's schema is list[dict]
        run(ctx, "tool.reduce", values=[1, 2], field="x")


# ---------------------------------------------------------------- tool.loop
def test_loop_over_grid_windows(ctx):
    windows = run(ctx, "ras.grid_windows", image_path="m.png", n=2)["windows"]
    calls = [{"call": "ras.clip", "args": {"image_path": "m.png", "x1": "<item.x1>",
                                           "x2": "<item.x2>", "y1": "<item.y1>", "y2": "<item.y2>"}},
             {"call": "ras.count_pixels", "args": {"mask_path": "<output_path> from step[0].obs",
                                                   "classes": [3]}}]
    res = run(ctx, "tool.loop", calls=calls, loop_over=windows, grid_n=2)
    # class 3 lies in the bottom-left window only (3 px)
    assert [r["last_obs"]["total"] for r in res] == [0, 0, 3, 0]
    assert res[2]["item"] == {"x1": 2, "x2": 4, "y1": 0, "y2": 2, "row_idx": 1, "col_idx": 0}
    assert run(ctx, "tool.loop", calls=calls, loop_over=windows, return_all=False) == \
        {"tool": "tool.loop", "iteration_count": 4, "results": []}


def test_loop_bind_from_items(ctx):
    # tool-examples loop_bind_calc_mul: bind copies a and b from each item
    res = run(ctx, "tool.loop", calls=[{"tool": "calc.mul", "args": {"a": 0, "b": 0}}],
              loop_over=[{"a": 2, "b": 3.5}, {"a": -1, "b": 4}, {"a": 0.1, "b": 0.2}],
              bind={"a": "a", "b": "b"})
    assert [r["last_obs"]["product"] for r in res] == pytest.approx([7.0, -4.0, 0.02])


def test_loop_bind_only_for_present_args_and_trajectory_refs(ctx):
    traj = [{"call": "x", "obs": {"k": 10}}]
    res = run(ctx, "tool.loop", calls=[{"call": "calc.add", "args": {"a": 1, "b": 2}}],
              loop_over=[{"z": 5}], bind={"a": "<k> from trajectory[0].obs", "c": "z"},
              trajectory=traj)
    assert res[0]["last_obs"]["sum"] == 12.0  # a = 10 from the trajectory; c is not an arg


def test_loop_nested_failure_is_a_stub(ctx):
    # the unresolved <item.path> is passed on literally; ras.stats cannot open it and the
    # benchmark keeps its stub object
    res = run(ctx, "tool.loop", calls=[{"call": "ras.stats", "args": {"image_path": "<item.path>"}}],
              loop_over=[{"path": "m.png"}, {"other": 1}])
    assert res[0]["last_obs"]["mean"] == 271 / 16  # sum of M / 16 px
    stub = res[1]["last_obs"]
    assert stub["status"] == "stub" and stub["inputs"]["image_path"] == "<item.path>"


def test_loop_nested_missing_mask_is_the_empty_result(ctx):
    # ras.count_pixels on a missing file: the guard's empty result, not a stub
    res = run(ctx, "tool.loop", calls=[{"call": "ras.count_pixels",
                                        "args": {"mask_path": "<item.path>", "classes": [1]}}],
              loop_over=[{"path": "m.png"}, {"other": 1}])
    assert res[0]["last_obs"]["counts"] == {"1": 3}
    assert res[1]["last_obs"]["count"] == 0 and "status" not in res[1]["last_obs"]


@pytest.mark.parametrize("call,item_value", [
    # calculate.py: ras_area computes pixel_size_m ** 2 -> TypeError for "0.5", inside its try
    ({"call": "ras.area", "args": {"mask_path": "m.png", "pixel_size_m": "<item.v>"}}, "0.5"),
    # calc_volume: float(area_m2) * depth_m
    ({"call": "calc.volume", "args": {"area_m2": 10, "depth_m": "<item.v>"}}, "2"),
    # logi_truck_trips: capacity_m3 <= 0
    ({"call": "logi.truck_trips", "args": {"volume_m3": 30, "capacity_m3": "<item.v>"}}, "10"),
])
def test_loop_nested_string_number_is_a_stub_where_the_benchmark_computes_with_it(
        ctx, call, item_value):
    # the benchmark's loop calls the function directly: no schema coerces the item's string,
    # so this iteration's obs is the stub; the numeric item works as a direct call
    res = run(ctx, "tool.loop", calls=[call], loop_over=[{"v": 1}, {"v": item_value}])
    assert "status" not in res[0]["last_obs"]
    assert res[1]["last_obs"]["status"] == "stub"


def test_loop_nested_string_converted_by_the_benchmark_works(ctx):
    # calc_add converts with float(): "1" + "2" = 3.0 also in a direct call
    res = run(ctx, "tool.loop", calls=[{"call": "calc.add", "args": {"a": "<item.a>", "b": "2"}}],
              loop_over=[{"a": "1"}])
    assert res[0]["last_obs"]["sum"] == 3.0


@pytest.mark.parametrize("row", ["1", 1.0])
def test_loop_sample_point_with_a_non_integer_index_ends_the_loop(ctx, row):
    # the unguarded ras_sample_point helper: "1" < 0 raises TypeError, values[b, 1.0, 2] raises
    # IndexError; tool_loop's outer except turns the whole loop into its stub
    with pytest.raises(ToolError):
        run(ctx, "tool.loop", calls=[{"call": "ras.sample_point",
                                      "args": {"image_path": "m.png", "row": "<item.r>", "col": 2}}],
            loop_over=[{"r": row}])


def test_loop_unguarded_helper_failure_ends_the_loop(ctx):
    with pytest.raises(ToolError):
        run(ctx, "tool.loop", calls=[{"call": "mask.compose_multiclass",
                                      "args": {"mask_paths": ["m.png"], "class_values": [1, 2]}}],
            loop_over=[{}])


@pytest.mark.parametrize("loop_over", ["cells.geojson", "<windows> from trajectory[0].obs",
                                       [1, 2], [[0, 1, 2]]])
def test_loop_schema_refusals(ctx, loop_over):
    # the benchmark's MCP schema: a list of objects (4-element windows are coerced)
    with pytest.raises(ToolError):
        run(ctx, "tool.loop", calls=[{"call": "calc.add", "args": {"a": 1, "b": 1}}],
            loop_over=loop_over, trajectory=[{"obs": {"windows": [[0, 1, 0, 1]]}}])


def test_loop_refuses_non_nestable_tools(ctx):
    with pytest.raises(ToolError):
        run(ctx, "tool.loop", calls=[{"call": "vis.bar_chart", "args": {}}], loop_over=[{}])


# ---------------------------------------------------------------- tool.chart_data
def test_chart_data_template_sort_round(ctx):
    vals = [{"item": {"row_idx": 0, "col_idx": 1}, "last_obs": {"a": 2.345}},
            {"item": {"row_idx": 1, "col_idx": 0}, "last_obs": {"a": 5}},
            {"item": {}, "last_obs": {}}]
    cd = run(ctx, "tool.chart_data", values=vals, value_field="last_obs.a",
             label_template="r{item.row_idx}c{item.col_idx}", sort_by="last_obs.a",
             round_digits=1)
    assert cd["data"] == {"r1c0": 5.0, "r0c1": 2.3} and cd["source_count"] == 3
    assert cd["kept_count"] == 2 and cd["records"][0]["source_index"] == 1


def test_chart_data_dict_duplicates_and_top_k(ctx):
    cd = run(ctx, "tool.chart_data", values={"x": 1, "y": 3}, value_field="v")
    assert list(cd["data"].items()) == [("x", 1.0), ("y", 3.0)]  # input order kept
    cd = run(ctx, "tool.chart_data", values=[{"n": "a", "v": 1}, {"n": "a", "v": 2}],
             value_field="v", label_field="n")
    assert list(cd["data"]) == ["a", "a (2)"]
    assert run(ctx, "tool.chart_data", values={"x": 1}, value_field="v", top_k=0)["data"] == {}


@pytest.mark.parametrize("values,field", [
    ([{"v": "high"}], "v"),     # float("high") fails there
    ([{"v": 1}], ""),           # value_field is required
    ([{"v": 1}, 2], "v"),       # list items must be objects
])
def test_chart_data_errors(ctx, values, field):
    with pytest.raises(ToolError):
        run(ctx, "tool.chart_data", values=values, value_field=field)


# ---------------------------------------------------------------- report.extract_evidence
def test_evidence_describes_a_mask(ctx):
    traj = [{"call": "seg.building_damage",
             "obs": {"tool": "seg.building_damage", "mask_path": "dmg_mask.png",
                     "classes": {"1": "intact", "3": "destroyed"}}}]
    obs = run(ctx, "report.extract_evidence", trajectory=traj, pixel_size_m=0.5)
    it = obs["evidence_items"][0]
    # 6 + 13 = 19 px * 0.25 = 4.75 m2; 3 four-connected parts; centroid 102/19 = 5.37: southeast
    assert set(it) == {"mask_path", "shape", "nonzero_pixel_count", "nonzero_area_m2",
                       "connected_components", "bbox", "centroid", "dominant_region", "classes",
                       "target_classes", "class_statistics", "step_index", "source_tool",
                       "source_key"}
    assert (it["nonzero_pixel_count"], it["nonzero_area_m2"], it["connected_components"]) == \
        (19, 4.75, 3)
    assert it["dominant_region"] == "southeast" and it["classes"] == {"1": "intact",
                                                                      "3": "destroyed"}
    assert it["class_statistics"]["3"] == {"pixel_count": 13, "label": "destroyed",
                                           "area_m2": 3.25}


def test_evidence_without_class_map_labels_by_value_and_no_area(ctx):
    obs = run(ctx, "report.extract_evidence",
              trajectory=[{"call": "seg.x", "obs": {"mask_path": "dmg_mask.png"}}])
    it = obs["evidence_items"][0]
    assert it["classes"] == {} and it["class_statistics"]["1"] == {"pixel_count": 6, "label": "1"}
    assert it["nonzero_area_m2"] is None and it["source_tool"] == "seg.x"
    assert obs["tool_rollup"]["seg.x"]["total_nonzero_area_m2"] is None


def test_evidence_quadrant_uses_half_the_size(ctx):
    # centroid (4.5, 4.5) of a 10x10 mask: 4.5 < 10/2 -> north and west
    obs = run(ctx, "report.extract_evidence", trajectory=[{"obs": {"mask_path": "centre_mask.png"}}])
    assert obs["evidence_items"][0]["dominant_region"] == "northwest"


def test_evidence_target_classes(ctx):
    obs = run(ctx, "report.extract_evidence",
              trajectory=[{"obs": {"mask_path": "dmg_mask.png"}}], target_classes=[0, 3, 3])
    it = obs["evidence_items"][0]
    # 0 dropped, duplicates merged: only class 3, 13 px, two parts
    assert it["target_classes"] == [3] and it["nonzero_pixel_count"] == 13
    assert it["connected_components"] == 2


def test_evidence_timeline_replaces_and_orders(ctx):
    traj = [{"call": "seg.flood", "obs": {"tool": "seg.flood",
                                          "mask_paths": {"t3": "flood_t3.png", "t1": "flood_t1.png",
                                                         "t10": "flood_t4.png"}}},
            # a later mask of t1 replaces the first in the timeline
            {"call": "seg.flood", "obs": {"tool": "seg.flood", "mask_paths": {"t1": "flood_t2.png"}}}]
    obs = run(ctx, "report.extract_evidence", trajectory=traj)
    # ordered by the number after t: t1 (5 px now), t3 (3), t10 (4): down then up -> peak t1
    assert [(e["timestamp"], e["nonzero_pixel_count"]) for e in obs["timeline"]] == \
        [("t1", 5), ("t3", 3), ("t10", 4)]
    assert obs["peak_timestamp"] == "t1" and obs["trend"] == "mixed"
    assert obs["total_evidence_items"] == 4 and obs["tool_rollup"]["seg.flood"]["mask_count"] == 4


def test_evidence_mask_named_twice_is_described_twice(ctx):
    traj = [{"obs": {"tool": "a", "mask_path": "dmg_mask.png"}},
            {"obs": {"tool": "a", "mask_path": "dmg_mask.png"}}]
    obs = run(ctx, "report.extract_evidence", trajectory=traj)
    assert obs["total_evidence_items"] == 2
    assert obs["tool_rollup"]["a"]["dominant_regions"] == ["southeast", "southeast"]


def test_evidence_errors_and_nested_keys(ctx):
    traj = [{"call": "x", "obs": {"results": [{"mask_path": "nope_mask.png"}],
                                  "output_mask_path": "flood_t1.png",
                                  "mask_paths": ["flood_t2.png"]}}]   # a list is not collected
    obs = run(ctx, "report.extract_evidence", trajectory=traj)
    assert obs["errors"] == [{"step_index": "0", "source_key": "results[0].mask_path",
                              "path": "nope_mask.png", "error": "file_not_found"}]
    assert [it["source_key"] for it in obs["evidence_items"]] == ["output_mask_path"]


def test_evidence_loop_result_steps(ctx):
    traj = [{"item": {"image_path": "post_t2_x.png"}, "last_obs": {"tool": "seg.flood",
                                                                  "mask_path": "flood_t2.png"}},
            {"item": {"timestamp": "t3"}, "last_obs": {"tool": "seg.flood",
                                                       "mask_path": "flood_t3.png"}}]
    obs = run(ctx, "report.extract_evidence", trajectory=traj)
    # timestamps from the items (t2 from the file stem "_t2_", t3 from the field): 5 then 3
    assert [(e["timestamp"], e["nonzero_pixel_count"]) for e in obs["timeline"]] == \
        [("t2", 5), ("t3", 3)]
    assert obs["trend"] == "shrinking_or_non_increasing"


def test_evidence_single_timestamp_and_empty_masks(ctx):
    traj = [{"obs": {"mask_paths": {"t1": "flood_t1.png"}}},
            {"obs": {"mask_path": "centre_mask.png"}}]
    obs = run(ctx, "report.extract_evidence", trajectory=traj)
    assert obs["trend"] == "single_timestamp" and obs["peak_timestamp"] == "t1"
    assert obs["evidence_items"][0]["source_tool"] == "step_0"  # no call, no tool: step_<i>


@needs_examples
def test_evidence_real_florence_timeline(ctx):
    traj = [{"call": "seg.lava", "obs": {"tool": "seg.lava", "mask_paths": {
        "t1": "florence_destroyed_bin.png", "t2": "florence_major_bin.png",
        "t3": "florence_destroyed_bin.png"}}}]
    obs = run(ctx, "report.extract_evidence", trajectory=traj)
    first = obs["evidence_items"][0]
    # tool-examples evidence_timeline (the benchmark's observation)
    assert first["nonzero_pixel_count"] == 274 and first["connected_components"] == 5
    assert first["class_statistics"] == {"255": {"pixel_count": 274, "label": "255"}}
    assert first["dominant_region"] == "southeast" and obs["total_evidence_items"] == 3


# ---------------------------------------------------------------- the quirks list
def test_quirks_of_the_family_are_documented_and_guarded():
    from annotation import qc
    from kernel.tools.quirks import _RASTER_AND_LOGIC
    from kernel.tools.registry import all_tools

    doc = (REPO / "docs" / "tool-parity.md").read_text(encoding="utf-8")
    tools = all_tools()
    assert len(_RASTER_AND_LOGIC) >= 20
    for q in _RASTER_AND_LOGIC:
        assert q.tool in tools and q.tool.split(".")[0] in ("ras", "mask", "calc", "logi",
                                                            "tool", "report")
        assert re.fullmatch(r"dora/tools/\w+\.py:\w+@[0-9a-f]{8}", q.reference), q.reference
        assert q.qc_check is None or q.qc_check in qc.CHECKS, q.qc_check
        assert f"`{q.tool}`" in doc and q.reference in doc
    # every QC check of the family guards a listed quirk
    from annotation.qc.tool_parity import RASTER_AND_LOGIC_CHECKS

    assert set(RASTER_AND_LOGIC_CHECKS) <= {q.qc_check for q in _RASTER_AND_LOGIC}


def test_loop_argument_binding_errors(ctx):
    # calc.add has no _tool_guard: calc_add(a=1, b=2, c=3) raises TypeError in the benchmark's
    # loop before the tool's try block, so the loop fails
    with pytest.raises(ToolError) as ei:
        run(ctx, "tool.loop", calls=[{"call": "calc.add", "args": {"a": 1, "b": 2, "c": 3}}],
            loop_over=[{}])
    assert "iteration 0, call 0" in str(ei.value) and "c" in str(ei.value)
    with pytest.raises(ToolError):  # a missing required argument: the same TypeError
        run(ctx, "tool.loop", calls=[{"call": "calc.add", "args": {"a": 1}}], loop_over=[{}])
    # ras.count_pixels is guarded: the same mistake leaves a stub and the loop goes on
    res = run(ctx, "tool.loop", calls=[{"call": "ras.count_pixels",
                                        "args": {"mask_path": "m.png", "classes": [1], "x": 1}}],
              loop_over=[{}, {}])
    assert [r["last_obs"]["status"] for r in res] == ["stub", "stub"]
