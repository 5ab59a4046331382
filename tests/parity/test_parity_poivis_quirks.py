"""The poi.*/vis.* section of the quirks list: every entry names a registered tool, the benchmark
file and function it follows at a commit, and a QC check that exists; docs/tool-parity.md has a
row for each; every poi/vis QC check id is named by a quirk or guards a former refusal."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from annotation import qc
from annotation.qc.tool_parity import POI_AND_VIS_CHECKS
from kernel.tools.quirks import _POI_AND_VIS, QUIRKS
from kernel.tools.registry import all_tools

DOC = Path(__file__).resolve().parents[2] / "docs" / "tool-parity.md"
REFERENCE = re.compile(r"^dora/tools/(poi|vis)\.py:[A-Za-z_][A-Za-z0-9_]*@[0-9a-f]{40}$")


@pytest.mark.parametrize("quirk", _POI_AND_VIS, ids=lambda q: q.tool)
def test_quirk_entry_is_complete(quirk):
    assert quirk in QUIRKS
    assert quirk.tool in all_tools()
    assert REFERENCE.match(quirk.reference), quirk.reference
    assert quirk.behaviour and quirk.instead
    assert quirk.qc_check is None or quirk.qc_check in qc.CHECKS


def test_docs_table_has_a_row_per_quirk():
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## poi.*, vis.*", 1)[1]
    rows = [ln for ln in section.splitlines() if ln.startswith("| `")]
    assert len(rows) == len(_POI_AND_VIS)
    for row, quirk in zip(rows, _POI_AND_VIS):
        assert row.startswith(f"| `{quirk.tool}` |") and quirk.reference.split("@")[0] in row


def test_poi_vis_checks_are_registered_with_a_severity():
    for check, (severity, meaning) in POI_AND_VIS_CHECKS.items():
        assert qc.CHECKS[check] == (severity, meaning) and severity in ("error", "warning")
        assert check.split(".")[0] in ("poi", "vis")


def test_report_wrap_follows_the_benchmark_rule():
    from kernel.tools.vis import _wrap

    # greedy at 7 characters: "one two" (7) fits, "three" starts a line; a first word longer
    # than the width closes the (empty) current line first
    assert _wrap("one two three", 7) == ["one two", "three"]
    assert _wrap("abcdefghij k", 5) == ["", "abcdefghij", "k"]


# ---- the QC checks flag the meaningless inputs and leave the sound ones alone -------------
def _vis_findings(call, args, input_data=None):
    """Check ids of one task whose only step is ``call(args)`` (answer: its output_path)."""
    content = {"question": "Make the map.", "input_data": input_data or {
        "post": {"image_path": "post.png", "modality": "optical", "pixel_size_m": 0.5,
                 "spatial_coordinate_system": "EPSG:32617"}},
        "trajectory": [{"call": call, "args": args}],
        "answer_spec": [{"name": "map", "eval_type": "exact_match",
                         "source": "<output_path> from trajectory[0].obs"}]}
    return {f.check for f in qc.check_task(content) if f.check.startswith(("vis.", "poi."))}


@pytest.mark.parametrize("args,found", [
    ({"image_path": "post.png", "mask_path": "post.png", "alpha": 0.45}, set()),
    ({"image_path": "post.png", "mask_path": "post.png", "alpha": -0.1}, {"vis.alpha_range"}),
    ({"image_path": "post.png", "mask_path": "post.png", "alpha": 1}, set()),  # 1 is in range
])
def test_alpha_range_boundaries(args, found):
    assert _vis_findings("vis.overlay_mask", args) == found


@pytest.mark.parametrize("data,found", [({"a": 1, "b": 0}, set()), ({"a": 0, "b": 0}, {"vis.chart_data"}),
                                        ({}, {"vis.chart_data"})])
def test_pie_chart_data(data, found):
    assert _vis_findings("vis.pie_chart", {"data": data}) == found


def test_bar_chart_with_negative_values_is_not_a_pie_problem():
    assert _vis_findings("vis.bar_chart", {"data": {"change": -3, "b": 2}}) == set()


@pytest.mark.parametrize("crs,found", [("EPSG:4326", set()), ("OGC:CRS84", set()),
                                       ("EPSG:32615", {"poi.layer_not_lonlat"}), (None, set())])
def test_poi_layer_crs(crs, found):
    inp = {"pois": {"path": "pois.geojson", "modality": "vector",
                    **({"spatial_coordinate_system": crs} if crs else {})},
           "post": {"image_path": "post.png", "modality": "optical",
                    "spatial_coordinate_system": "EPSG:32615"}}
    content = {"question": "Where are the shelters?", "input_data": inp,
               "trajectory": [{"call": "poi.world_to_pixel",
                               "args": {"geojson_path": "pois.geojson", "raster_path": "post.png"}}],
               "answer_spec": [{"name": "n", "eval_type": "scalar_count",
                                "source": "<valid_points> from trajectory[0].obs"}]}
    assert {f.check for f in qc.check_task(content) if f.check.startswith("poi.")} == found


def test_markers_with_any_position_key_are_fine():
    markers = [{"row": 1, "col": 2}, {"pixel_row": 1, "pixel_col": 2}, {"y": 1, "x": 2}]
    assert _vis_findings("vis.add_map_elements", {"image_path": "post.png",
                                                  "point_markers": markers}) == set()
    assert _vis_findings("vis.add_map_elements", {"image_path": "post.png",
                                                  "point_markers": [{"row": 1}]}) == {
        "vis.marker_without_position"}
