"""report.extract_evidence and model.summarize: deterministic, values worked out by hand."""
import numpy as np
import pytest

from kernel.tools import ToolInputError, call_tool
from kernel.tools.testing import make_ctx, write_png


@pytest.fixture
def ctx(tmp_path):
    c = make_ctx(tmp_path)
    d = tmp_path / "data"
    # 10x10 mask: class 1 block rows 0-1 x cols 0-2 (6 px), class 3 block rows 6-9 x cols 7-9
    # (12 px) and one isolated class 3 pixel at (9, 0)
    m = np.zeros((10, 10), np.uint8)
    m[0:2, 0:3] = 1
    m[6:10, 7:10] = 3
    m[9, 0] = 3
    write_png(d / "dmg_mask.png", m)
    for t, n in (("t1", 2), ("t2", 5), ("t3", 3)):  # flood grows, then recedes
        f = np.zeros((4, 4), np.uint8)
        f.ravel()[:n] = 255
        write_png(d / f"flood_{t}.png", f)
    write_png(d / "empty_mask.png", np.zeros((4, 4), np.uint8))
    return c


def test_extract_evidence_describes_a_mask(ctx):
    traj = [{"call": "seg.building_damage", "args": {},
             "obs": {"tool": "seg.building_damage", "mask_path": "dmg_mask.png",
                     "classes": {"1": "intact", "3": "destroyed"}}}]
    obs = call_tool("report.extract_evidence", {"trajectory": traj, "pixel_size_m": 0.5}, ctx)
    assert obs["total_evidence_items"] == 1 and obs["errors"] == []
    it = obs["evidence_items"][0]
    # 6 + 12 + 1 = 19 px; 19 * 0.25 = 4.75 m2; 4-connected parts: 3
    assert it["nonzero_pixel_count"] == 19 and it["nonzero_area_m2"] == 4.75
    assert it["connected_components"] == 3 and it["shape"] == [10, 10]
    assert it["bbox"] == {"row_min": 0, "row_max": 9, "col_min": 0, "col_max": 9}
    # centroid: rows (0*3+1*3 + (6+7+8+9)*3 + 9) / 19 = 102/19; cols (0+1+2)*2 + (7+8+9)*4 + 0
    # = 102 / 19 -> 5.37 > 4.5 both: southeast
    assert it["centroid"] == {"row": pytest.approx(102 / 19), "col": pytest.approx(102 / 19)}
    assert it["dominant_region"] == "southeast"
    assert it["class_statistics"] == {"1": {"pixel_count": 6, "label": "intact", "area_m2": 1.5},
                                      "3": {"pixel_count": 13, "label": "destroyed",
                                            "area_m2": 3.25}}
    assert it["source_tool"] == "seg.building_damage" and it["source_key"] == "mask_path"
    assert obs["tool_rollup"] == {"seg.building_damage": {
        "mask_count": 1, "total_nonzero_pixels": 19, "total_nonzero_area_m2": 4.75,
        "dominant_regions": ["southeast"]}}
    assert obs["timeline"] is None and obs["trend"] is None
    # only class 1: the 2x3 block, northwest, 1 component
    obs = call_tool("report.extract_evidence", {"trajectory": traj, "target_classes": [1]}, ctx)
    it = obs["evidence_items"][0]
    assert (it["nonzero_pixel_count"], it["connected_components"], it["dominant_region"]) == \
        (6, 1, "northwest")
    assert it["nonzero_area_m2"] is None  # no pixel size anywhere


def test_extract_evidence_timeline_loop_and_errors(ctx):
    traj = [
        {"call": "seg.flood", "obs": {"tool": "seg.flood",
                                      "mask_paths": {"t1": "flood_t1.png", "t3": "flood_t3.png"}}},
        # a loop result as a step: last_obs is used, the timestamp comes from the item
        {"item": {"timestamp": "t2"}, "last_obs": {"tool": "seg.flood",
                                                   "mask_path": "flood_t2.png"}},
        {"call": "ras.threshold", "obs": {"mask_path": "missing_mask.png"}},
        {"call": "ras.threshold", "obs": {"mask_path": "empty_mask.png"}},
    ]
    obs = call_tool("report.extract_evidence", {"trajectory": traj}, ctx)
    # t1 2 px, t2 5 px, t3 3 px: grows then recedes, peak t2 (model.py: timeline ordered by N)
    assert [(e["timestamp"], e["nonzero_pixel_count"]) for e in obs["timeline"]] == \
        [("t1", 2), ("t2", 5), ("t3", 3)]
    assert obs["peak_timestamp"] == "t2" and obs["trend"] == "expand_then_recede"
    assert obs["total_evidence_items"] == 3  # the empty mask is left out by default
    # the benchmark writes step_index as a string in errors
    assert obs["errors"] == [{"step_index": "2", "source_key": "mask_path",
                              "path": "missing_mask.png", "error": "file_not_found"}]
    assert obs["tool_rollup"]["seg.flood"]["mask_count"] == 3
    obs = call_tool("report.extract_evidence", {"trajectory": traj[3:],
                                                "include_empty_masks": True}, ctx)
    assert obs["total_evidence_items"] == 1
    assert obs["evidence_items"][0]["nonzero_pixel_count"] == 0


def test_trend_labels():
    from kernel.tools.summarize import _trend

    # model.py's rule: monotone first; otherwise a peak strictly inside -> expand_then_recede
    assert _trend([1], 0) == "single_timestamp"
    assert _trend([1, 1, 2], 2) == "expanding_or_non_decreasing"
    assert _trend([3, 2, 2], 0) == "shrinking_or_non_increasing"
    assert _trend([1, 3, 2], 1) == "expand_then_recede"
    assert _trend([3, 1, 2], 0) == "mixed"
    assert _trend([1, 3, 1, 2], 1) == "expand_then_recede"  # not monotone around the peak


def test_extract_evidence_timestamp_only_from_keys_and_validates(ctx):
    # benchmark parity: the benchmark takes timestamps from source keys (mask_paths.t3) or a loop
    # item, never from a step's file name: no timeline here
    obs = call_tool("report.extract_evidence",
                    {"trajectory": [{"obs": {"output_mask_path": "flood_t3.png"}}]}, ctx)
    assert obs["timeline"] is None and obs["trend"] is None and obs["total_evidence_items"] == 1
    with pytest.raises(ToolInputError) as ei:
        call_tool("report.extract_evidence", {"trajectory": "not a list"}, ctx)
    assert ei.value.argument == "trajectory"


TRAJ = [
    {"call": "seg.building_damage", "obs": {"tool": "seg.building_damage",
                                            "mask_path": "dmg_mask.png"}},
    {"call": "ras.count_pixels", "obs": {"tool": "ras.count_pixels",
                                         "counts": {"3": 13}, "total": 13, "classes": [3]}},
    {"call": "ras.area", "obs": {"tool": "ras.area", "area_m2": 3.25, "pixel_count": 13,
                                 "pixel_size_m": 0.5}},
    {"call": "vec.graph_shortest_path", "obs": {"tool": "vec.graph_shortest_path",
                                                "distance_m": 120.5, "distance_px": 241.0,
                                                "snap_failed": False}},
]


def test_summarize_template(ctx):
    obs = call_tool("model.summarize", {"task_question": "How much is destroyed?",
                                        "trajectory": TRAJ,
                                        "image_paths": ["dmg_mask.png", "absent.png"],
                                        "final_answer_template": {"area_m2": "float",
                                                                  "Total": "int",
                                                                  "road_km": "float"}}, ctx)
    assert obs["model"] == "template" and obs["requested_model"] == "gemini-3-flash-preview"
    assert obs["status"] == "template" and obs["confidence"] == "medium"
    # every finite numeric field; booleans (snap_failed) and list fields (classes) are left out
    assert obs["statistics"] == {"counts.3": 13, "total": 13, "area_m2": 3.25, "pixel_count": 13,
                                 "pixel_size_m": 0.5, "distance_m": 120.5, "distance_px": 241.0}
    assert obs["final_answer"] == {"area_m2": 3.25, "Total": 13, "road_km": None}
    assert obs["image_input_count"] == 1  # the absent image is dropped
    assert obs["image_observations"] == [{"image": "dmg_mask.png", "width": 10, "height": 10,
                                          "bands": 1, "georeferenced": False}]
    assert obs["key_findings"][0] == "Step 1 (ras.count_pixels): counts.3 = 13, total = 13."
    assert obs["summary"].startswith("Question: How much is destroyed? The analysis ran 4 tool")
    assert any("intact route" in r for r in obs["recommendations"])
    again = call_tool("model.summarize", {"task_question": "How much is destroyed?",
                                          "trajectory": TRAJ,
                                          "image_paths": ["dmg_mask.png", "absent.png"],
                                          "final_answer_template": {"area_m2": "float",
                                                                    "Total": "int",
                                                                    "road_km": "float"}}, ctx)
    assert again == obs  # deterministic


def test_summarize_empty_and_failed_steps(ctx):
    obs = call_tool("model.summarize", {"task_question": "q", "trajectory": [],
                                        "model": "gpt-4o"}, ctx)
    assert obs["confidence"] == "low" and obs["statistics"] == {}
    assert obs["requested_model"] == "gpt-4o" and obs["model"] == "template"
    assert "No step reported a numeric result." in obs["summary"]
    obs = call_tool("model.summarize", {"task_question": "q", "trajectory": [
        {"call": "vec.graph_shortest_path", "obs": {"distance_m": None, "snap_failed": True}},
        {"call": "seg.flood", "obs": {"status": "stub", "error": "x", "area": 3}}]}, ctx)
    assert obs["failed_steps"] == 1 and obs["confidence"] == "low"
    assert any("No intact route" in r for r in obs["recommendations"])
    with pytest.raises(ToolInputError) as ei:
        call_tool("model.summarize", {"trajectory": []}, ctx)
    assert ei.value.argument == "task_question"
