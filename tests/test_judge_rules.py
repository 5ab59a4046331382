"""Rule-based checker on hand-made trajectories."""
from __future__ import annotations

import json

from conftest import needs_shared

from evaluation.judge import check_trajectory, normalize_tool_name, tool_specs_from_catalogue
from evaluation.judge.rules import RuleVerdict, tool_sequence

TOOLS = {
    "seg.flood": {"pre_image_path", "post_image_path"},
    "ras.area": {"mask_path"},
    "ras.threshold": {"image_path", "threshold"},
    "vec.road_centerline_extraction": {"mask_path"},
    "poi.filter_by_damage": {"poi_path", "damage_mask_path"},
    "tool.loop": {"calls", "loop_over"},
    "tool.reduce": {"values", "field"},
    "ras.clip": {"image_path"},
}
GOLD = [
    {"call": "seg.flood", "args": {"pre_image_path": "pre.tif", "post_image_path": "post.tif"}, "obs": {"mask_path": "flood.tif"}},
    {"call": "ras.area", "args": {"mask_path": "<mask_path> from trajectory[0].obs"}, "obs": {"area_m2": 10.0}},
]


def test_normalize_tool_name():
    assert normalize_tool_name("seg_flood(pre_image_path, post_image_path)") == "seg.flood"
    assert normalize_tool_name(" seg_building_damage ") == "seg.building_damage"
    assert normalize_tool_name("vec.road_centerline_extraction") == "vec.road_centerline_extraction"
    assert normalize_tool_name("ras.area(mask_path)") == "ras.area"
    assert normalize_tool_name("") == "" and normalize_tool_name(None) == ""


def test_clean_trajectory_passes():
    pred = [
        {"call": "seg_flood(pre_image_path, post_image_path)", "args": {"pre_image_path": "/a/pre.tif", "post_image_path": "/a/post.tif"}, "obs": {"mask_path": "/t/m.tif"}},
        {"call": "ras_area(mask_path)", "args": {"mask_path": "/t/m.tif"}, "obs": {"area_m2": 9.5}},
    ]
    v = check_trajectory(pred, GOLD, TOOLS)
    assert isinstance(v, RuleVerdict)
    assert v.is_correct and v.grade == 1.0 and v.flags == [] and v.findings == []
    assert v.dialect == "rules" and v.predicted_tools == ["seg.flood", "ras.area"] and v.missing_gold_tools == []
    assert check_trajectory(GOLD, GOLD, TOOLS).is_correct  # gold against itself


def test_unknown_tool_is_e6():
    pred = [
        {"call": "seg_flood_depth", "args": {"image": "x"}},  # no such tool
        {"call": "Seg.flood", "args": {"pre_image_path": "a", "post_image_path": "b"}},  # case differs: not exact
    ]
    v = check_trajectory(pred, None, TOOLS)
    assert v.flags == ["E6"] and not v.is_correct
    assert [f.step for f in v.findings] == [0, 1]
    assert "seg_flood_depth" in v.reasons["E6"] and "seg.flood_depth" in v.reasons["E6"]
    assert v.grade == 0.0  # two major errors


def test_missing_required_argument_is_e5():
    pred = [
        {"call": "seg.flood", "args": {"pre_image_path": "a"}},
        {"call": "ras.area", "args": json.dumps({"mask_path": None})},  # JSON-encoded, null value
        {"call": "ras.threshold", "args": "not json"},
    ]
    v = check_trajectory(pred, None, TOOLS)
    assert v.flags == ["E5"]
    msgs = [f.message for f in v.findings]
    assert any("'post_image_path'" in m and "step 0" in m for m in msgs)
    assert any("'mask_path'" in m and "step 1" in m for m in msgs)
    assert any("not a JSON object" in m for m in msgs)
    assert v.grade == 0.4  # two or more E5


def test_bad_references_are_e4():
    pred = [
        {"call": "seg.flood", "args": {"pre_image_path": "a", "post_image_path": "b"}},
        {"call": "ras.area", "args": {"mask_path": "<mask_path> from trajectory[1].obs"}},  # itself
        {"call": "vec.road_centerline_extraction", "args": {"mask_path": "<mask_path> FROM trajectory[ 7 ].obs"}},  # missing
        {"call": "ras.area", "args": {"mask_path": "<mask_path> from trajectory[0].obs"}},  # fine
        {"call": "ras.clip", "args": {"image_path": "x", "note": "uses <mask_path> from trajectory[9].obs inline"}},  # not a whole-string ref
    ]
    v = check_trajectory(pred, None, TOOLS)
    assert v.flags == ["E4"]
    assert [(f.step, f.code) for f in v.findings] == [(1, "E4"), (2, "E4")]
    assert "its own" in v.findings[0].message and "no step 7" in v.findings[1].message
    later = check_trajectory([{"call": "ras.area", "args": {"mask_path": "<m> from trajectory[1].obs"}}, {"call": "seg.flood", "args": {}}], None, None)
    assert later.flags == ["E4"] and "later" in later.findings[0].message  # no catalogue: only reference checks


def test_stopping_early_is_e2():
    pred = [{"call": "seg_flood", "args": {"pre_image_path": "a", "post_image_path": "b"}, "obs": {"mask_path": "m"}}]
    v = check_trajectory(pred, GOLD, TOOLS)
    assert v.flags == ["E2"] and v.missing_gold_tools == ["ras.area"] and v.grade == 0.4
    assert "ras.area" in v.reasons["E2"]
    empty = check_trajectory([], GOLD, TOOLS)
    assert empty.flags == ["E2"] and "no tool was called" in empty.reasons["E2"]
    assert check_trajectory(pred, GOLD, TOOLS, check_coverage=False).is_correct


def test_loops_wrappers_and_nested_calls():
    gold = [
        {"call": "tool.loop", "args": {"loop_over": "<windows> from trajectory[0].obs", "calls": [{"call": "ras.clip", "args": {}}, {"call": "ras.area", "args": {}}]}},
        {"call": "ras.clip", "args": {"image_path": "x"}},
        {"call": "ras.area", "args": {"mask_path": "y"}},
        {"call": "tool.reduce", "args": {"values": [], "field": "area"}},
    ]
    assert tool_sequence(gold) == ["ras.clip", "ras.area", "ras.clip", "ras.area"]
    pred = [
        {"call": "seg.flood", "args": {"pre_image_path": "a", "post_image_path": "b"}},
        {"call": "tool_loop", "args": {"loop_over": [[0, 1, 0, 1]], "calls": json.dumps([
            {"call": "functions.ras_clip", "args": {"image_path": "<mask_path> from trajectory[0].obs"}},
            {"tool": "ras.area", "args": {"mask_path": "<mask_path> from step[0].obs"}},
            {"call": "ras.areaa", "args": {"mask_path": "<mask_path> from step[2].obs"}},
            {"call": "poi.filter_by_damage", "args": {}},
        ])}},
    ]
    v = check_trajectory(pred, gold, TOOLS)
    codes = sorted((f.code, f.call) for f in v.findings)
    # call 2: unknown tool (E6) and a reference to its own step (E4); call 3: POI tool cannot be nested (E5)
    assert codes == [("E4", 2), ("E5", 3), ("E6", 2)]
    assert v.missing_gold_tools == []  # loop body covers ras.clip and ras.area
    assert v.grade == 0.2


def test_catalogue_specs_from_spec_file():
    from conftest import SHARED

    path = SHARED / "spec" / "dora-tools.json"
    needs_shared(path)
    specs = tool_specs_from_catalogue(json.loads(path.read_text()))
    assert len(specs) == 108 and "seg.flood" in specs
    assert specs["tool.loop"] >= {"calls", "loop_over"}
    assert "band" not in specs["ras.stats"] and "image_path" in specs["ras.stats"]
    openai_style = tool_specs_from_catalogue([{"type": "function", "function": {"name": "ras_area", "parameters": {"required": ["mask_path"]}}}, "seg_flood"])
    assert openai_style == {"ras.area": frozenset({"mask_path"}), "seg.flood": frozenset()}
