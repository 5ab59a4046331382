"""vis.* tools: sizes, hand-computed pixels and statistics, typed errors, and byte-identical
PNGs across two runs in two work dirs."""
import math

import numpy as np
import pytest
from PIL import Image

from replay.tools import ModalityError, ToolInputError, call_tool
from replay.tools.testing import make_ctx, write_geojson, write_png, write_tif
from shapely.geometry import Point, box


def setup_data(tmp_path, work="work"):
    ctx = make_ctx(tmp_path, work=work)
    d = tmp_path / "data"
    if not (d / "img.png").exists():
        write_png(d / "img.png", np.full((20, 30, 3), 100, np.uint8))
        m = np.zeros((20, 30), np.uint8)
        m[0:10, 0:10] = 1
        m[10:20, 20:30] = 3
        m[19, 0] = 255
        write_png(d / "mask.png", m)
        write_png(d / "small_mask.png", np.array([[1, 0], [0, 2]], np.uint8))
        write_tif(d / "u16.tif", (np.arange(600, dtype=np.uint16).reshape(20, 30) * 50))
        write_geojson(d / "pts.geojson", [{"geometry": Point(0, 0), "properties": {}},
                                          {"geometry": Point(1000, 0), "properties": {}}])
    return ctx


def png(ctx, name):
    return np.asarray(Image.open(ctx.work_dir / name))


CALLS = [
    ("vis.overlay_mask", {"image_path": "img.png", "mask_path": "mask.png"}),
    ("vis.add_map_elements", {"image_path": "img.png", "title": "T", "pixel_size_m": 2.0,
                              "legend_items": [{"label": "flood", "color": [0, 0, 255]}],
                              "point_markers": [{"row": 5, "col": 5, "label": "A"}]}),
    ("vis.damage_map", {"base_image_path": "img.png", "overlay_mask_path": "mask.png",
                        "pixel_size_m": 0.5}),
    ("vis.route_map", {"base_image_path": "img.png", "path_pixels": [[1, 1], [1, 20], [15, 20]],
                       "overlay_mask_path": "mask.png"}),
    ("vis.pie_chart", {"data": {"a": 1, "b": 3}}),
    ("vis.bar_chart", {"data": {"a": 1, "b": 3}}),
    ("vis.line_chart", {"data": {"t1": 1, "t2": 3}}),
    ("vis.before_after_panel", {"pre_image_path": "img.png", "post_image_path": "u16.tif"}),
    ("vis.temporal_panel", {"image_paths": ["img.png", "u16.tif", "img.png"], "columns": 2}),
    ("vis.report_page", {"map_image_path": "img.png", "chart_image_path": None,
                         "summary_text": "Flood covers 10 km2.", "key_statistics": {"a": 1.5}}),
    ("vis.heatmap", {"points_path": "pts.geojson", "bandwidth": 10}),
]


@pytest.mark.parametrize("name,args", CALLS, ids=[c[0] for c in CALLS])
def test_png_bytes_identical_across_runs(tmp_path, name, args):
    a = setup_data(tmp_path, "wa")
    b = setup_data(tmp_path, "wb")
    oa = call_tool(name, args, a)
    ob = call_tool(name, args, b)
    assert oa == ob
    key = "heatmap_path" if name == "vis.heatmap" else "output_path"
    ba = (a.work_dir / oa[key]).read_bytes()
    assert ba[:8] == b"\x89PNG\r\n\x1a\n"
    assert ba == (b.work_dir / ob[key]).read_bytes()
    assert b"tIME" not in ba and b"Software" not in ba  # no timestamp, no software tag


def test_overlay_mask_pixels(tmp_path):
    ctx = setup_data(tmp_path)
    obs = call_tool("vis.overlay_mask", {"image_path": "img.png", "mask_path": "mask.png",
                                         "alpha": 0.5, "class_labels": {"1": "flood"}}, ctx)
    out = png(ctx, obs["output_path"])
    assert out.shape == (20, 30, 3)
    # grey 100 blended half with gold (255,215,0): (177.5, 157.5, 50) -> rint (178, 158, 50)
    assert tuple(out[0, 0]) == (178, 158, 50)
    # crimson (220,20,60): (160, 60, 80); 255 is drawn red (255,0,0): (177.5, 50, 50) -> 178
    assert tuple(out[15, 25]) == (160, 60, 80) and tuple(out[19, 0]) == (178, 50, 50)
    assert tuple(out[15, 5]) == (100, 100, 100)  # background untouched
    assert obs["classes_present"] == [1, 3, 255]
    assert obs["class_labels"] == {"1": "flood", "3": "class_3", "255": "class_255"}


def test_overlay_mask_resizes_and_errors(tmp_path):
    ctx = setup_data(tmp_path)
    obs = call_tool("vis.overlay_mask", {"image_path": "img.png", "mask_path": "small_mask.png",
                                         "alpha": 1.0}, ctx)
    out = png(ctx, obs["output_path"])
    # 2x2 mask nearest-resized to 20x30: top-left quarter class 1 (gold), bottom-right class 2
    assert tuple(out[0, 0]) == (255, 215, 0) and tuple(out[19, 29]) == (255, 165, 0)
    assert tuple(out[0, 29]) == (100, 100, 100)
    with pytest.raises(ToolInputError) as ei:
        call_tool("vis.overlay_mask", {"image_path": "img.png", "mask_path": "mask.png",
                                       "alpha": 1.5}, ctx)
    assert ei.value.argument == "alpha"
    with pytest.raises(ToolInputError) as ei:
        call_tool("vis.overlay_mask", {"image_path": "img.png", "mask_path": "gone.png"}, ctx)
    assert ei.value.argument == "mask_path"
    rgb = np.zeros((4, 4, 3), np.uint8)
    rgb[..., 0] = 9
    write_png(tmp_path / "data" / "rgbmask.png", rgb)
    with pytest.raises(ModalityError):
        call_tool("vis.overlay_mask", {"image_path": "img.png", "mask_path": "rgbmask.png"}, ctx)


def test_map_elements_and_damage_map(tmp_path):
    ctx = setup_data(tmp_path)
    obs = call_tool("vis.add_map_elements", {
        "image_path": "img.png", "title": "Flood", "pixel_size_m": 2.0,
        "legend_items": [{"label": "water", "color": [0, 0, 255]}], "legend_alpha": 0.5,
        "point_markers": [{"pixel_row": 3, "pixel_col": 4, "label": "Shelter"},
                          {"y": 10, "x": 10}]}, ctx)
    assert png(ctx, obs["output_path"]).shape[:2] == (800, 1000)
    assert obs["has_legend"] and obs["legend_alpha"] == 0.5 and obs["scale_bar"]
    assert obs["point_marker_count"] == 2 and obs["point_marker_labels"] == ["Shelter"]
    obs = call_tool("vis.add_map_elements", {"image_path": "img.png"}, ctx)
    assert obs["scale_bar"] is False and obs["has_legend"] is False  # no pixel size, no legend
    with pytest.raises(ToolInputError) as ei:
        call_tool("vis.add_map_elements", {"image_path": "img.png",
                                           "point_markers": [{"label": "x"}]}, ctx)
    assert ei.value.argument == "point_markers"
    with pytest.raises(ToolInputError) as ei:
        call_tool("vis.add_map_elements", {"image_path": "img.png",
                                           "legend_items": [{"label": "a", "color": [1, 2]}]},
                  ctx)
    assert ei.value.argument == "legend_items"
    dm = call_tool("vis.damage_map", {"base_image_path": "img.png",
                                      "overlay_mask_path": "mask.png", "pixel_size_m": 0.5,
                                      "class_labels": {"3": "destroyed"}}, ctx)
    assert dm["layers"] == ["base_image", "damage_overlay", "legend", "north_arrow", "scale_bar"]
    assert dm["has_legend"] and dm["title"] == "Damage Assessment Map"
    plain = call_tool("vis.damage_map", {"base_image_path": "img.png",
                                         "overlay_mask_path": None}, ctx)
    assert plain["layers"] == ["base_image", "north_arrow"] and not plain["has_legend"]


def test_nice_scale_length():
    from replay.tools.vis import _nice_length

    # a fifth of 30 px * 2 m = 12 m -> 10 m; 1234 -> 1000; 0.7 -> 0.5
    assert (_nice_length(12), _nice_length(1234), _nice_length(0.7)) == (10.0, 1000.0, 0.5)


def test_route_map(tmp_path):
    ctx = setup_data(tmp_path)
    obs = call_tool("vis.route_map", {"base_image_path": "img.png",
                                      "path_pixels": [[1, 1], [1, 20], [15, 20]],
                                      "overlay_mask_path": "mask.png"}, ctx)
    assert obs["path_point_count"] == 3
    assert obs["start_point"] == [1, 1] and obs["end_point"] == [15, 20]  # first / last pixel
    assert obs["point_marker_labels"] == ["Start", "End"] and obs["has_overlay"]
    assert obs["legend_items"] == ["Route", "class_1", "class_3", "class_255", "Start", "End"]
    empty = call_tool("vis.route_map", {"base_image_path": "img.png", "path_pixels": []}, ctx)
    assert empty["path_point_count"] == 0 and empty["start_point"] is None
    with pytest.raises(ToolInputError) as ei:
        call_tool("vis.route_map", {"base_image_path": "img.png", "path_pixels": [[1, 2, 3]]},
                  ctx)
    assert ei.value.argument == "path_pixels"
    with pytest.raises(ToolInputError) as ei:
        call_tool("vis.route_map", {"base_image_path": "img.png", "path_pixels": [[1, 1]],
                                    "route_color": [300, 0, 0]}, ctx)
    assert ei.value.argument == "route_color"


def test_charts_statistics_and_sizes(tmp_path):
    ctx = setup_data(tmp_path)
    pie = call_tool("vis.pie_chart", {"data": {"destroyed": 10, "minor": 30}}, ctx)
    assert png(ctx, pie["output_path"]).shape[:2] == (600, 800)
    # 10/40 = 25 %, 30/40 = 75 %
    assert pie["statistics"]["percentages"] == {"destroyed": 25.0, "minor": 75.0}
    assert pie["statistics"]["total"] == 40.0 and pie["statistics"]["max_label"] == "minor"
    assert pie["chart_type"] == "pie" and pie["title"] == "Pie Chart"
    bar = call_tool("vis.bar_chart", {"data": {"a" * 20: 2, "b": 4, "c": 3}, "title": "X"},
                    ctx)
    assert png(ctx, bar["output_path"]).shape[:2] == (600, 900)
    assert bar["statistics"]["mean"] == 3.0 and bar["statistics"]["min_label"] == "a" * 20
    line = call_tool("vis.line_chart", {"data": {"t1": 4, "t2": 8, "t3": 6}}, ctx)
    assert png(ctx, line["output_path"]).shape[:2] == (600, 900)
    # first 4, last 6: change +2, +50 %
    st = line["statistics"]
    assert (st["first"], st["last"], st["change"], st["change_pct"]) == (4.0, 6.0, 2.0, 50.0)
    with pytest.raises(ToolInputError) as ei:
        call_tool("vis.pie_chart", {"data": {"a": -1, "b": 2}}, ctx)
    assert ei.value.argument == "data"
    with pytest.raises(ToolInputError):
        call_tool("vis.pie_chart", {"data": {"a": 0}}, ctx)
    with pytest.raises(ToolInputError):
        call_tool("vis.bar_chart", {"data": {}}, ctx)
    with pytest.raises(ToolInputError):
        call_tool("vis.line_chart", {"data": {"a": "many"}}, ctx)


def test_panels_and_report_page(tmp_path):
    ctx = setup_data(tmp_path)
    ba = call_tool("vis.before_after_panel", {"pre_image_path": "img.png",
                                              "post_image_path": "u16.tif"}, ctx)
    assert png(ctx, ba["output_path"]).shape[:2] == (650, 1200)
    tp = call_tool("vis.temporal_panel", {"image_paths": ["img.png", "img.png", "img.png"]}, ctx)
    # 3 images, 2 columns -> 2 rows: 2*500 x (2*420 + 60)
    assert tp["labels"] == ["t1", "t2", "t3"]
    assert png(ctx, tp["output_path"]).shape[:2] == (900, 1000)
    with pytest.raises(ToolInputError) as ei:
        call_tool("vis.temporal_panel", {"image_paths": ["img.png"], "labels": ["a", "b"]}, ctx)
    assert ei.value.argument == "labels"
    with pytest.raises(ToolInputError) as ei:
        call_tool("vis.temporal_panel", {"image_paths": ["img.png"], "columns": 0}, ctx)
    assert ei.value.argument == "columns"
    rp = call_tool("vis.report_page", {"map_image_path": "img.png",
                                       "chart_image_path": ba["output_path"],
                                       "summary_text": "x " * 300,
                                       "key_statistics": {"area_m2": 1234.5678, "n": 3}}, ctx)
    assert png(ctx, rp["output_path"]).shape[:2] == (1000, 1400)
    assert rp["components"] == {"map": True, "chart": True, "summary_text": True,
                                "key_statistics": True}
    rp = call_tool("vis.report_page", {"map_image_path": None, "chart_image_path": None}, ctx)
    assert rp["components"] == {"map": False, "chart": False, "summary_text": False,
                                "key_statistics": False}
    with pytest.raises(ToolInputError) as ei:
        call_tool("vis.report_page", {"map_image_path": "nope.png", "chart_image_path": None},
                  ctx)
    assert ei.value.argument == "map_image_path"
    with pytest.raises(ToolInputError) as ei:
        call_tool("vis.report_page", {"chart_image_path": None}, ctx)  # required even if null
    assert ei.value.argument == "map_image_path"


def test_heatmap_density(tmp_path):
    ctx = setup_data(tmp_path)
    obs = call_tool("vis.heatmap", {"points_path": "pts.geojson", "bandwidth": 10}, ctx)
    assert obs["point_count"] == 2
    # two far-apart points, sigma 10: the peak is 1/(n 2 pi sigma^2) = 1/(2*2*pi*100) = 7.958e-4
    # at a point; the grid (256 nodes over 1060 units in x, step 4.157; round(256*60/1060) = 14
    # nodes over 60 units in y, step 4.615) passes within half a step of it in x and in y, so
    # the grid max lies in [exp(-(2.079^2 + 2.308^2)/200), 1] times the peak
    peak = 1 / (2 * 2 * math.pi * 100)
    low = peak * math.exp(-((1060 / 255 / 2) ** 2 + (60 / 13 / 2) ** 2) / 200)
    assert low <= obs["stats"]["kde_max"] <= peak * (1 + 1e-9)
    # bounds grown by 3 sigma
    assert obs["stats"]["extent"] == [-30.0, -30.0, 1030.0, 30.0]
    # over a base image: pixel-space points in the image grid
    write_geojson(tmp_path / "data" / "pp.geojson", [{"geometry": Point(5, 5), "properties": {}},
                                                     {"geometry": box(10, 10, 12, 12),
                                                      "properties": {}}])
    obs = call_tool("vis.heatmap", {"points_path": "pp.geojson", "base_image_path": "img.png",
                                    "colormap": "viridis"}, ctx)
    assert obs["stats"]["extent"] == [-0.5, -0.5, 29.5, 19.5]
    # Scott: centroids (5,5), (11,11): var x = var y = 9 -> sqrt(9) * 2^(-1/6) = 2.6727
    assert obs["stats"]["bandwidth"] == pytest.approx(3 * 2 ** (-1 / 6))
    with pytest.raises(ToolInputError) as ei:
        call_tool("vis.heatmap", {"points_path": "pts.geojson", "colormap": "nope"}, ctx)
    assert ei.value.argument == "colormap"
    write_geojson(tmp_path / "data" / "one.geojson", [{"geometry": Point(1, 1),
                                                       "properties": {}}])
    with pytest.raises(ToolInputError) as ei:
        call_tool("vis.heatmap", {"points_path": "one.geojson"}, ctx)
    assert ei.value.argument == "points_path"
    with pytest.raises(ToolInputError) as ei:
        call_tool("vis.heatmap", {"points_path": "pts.geojson", "bandwidth": 0}, ctx)
    assert ei.value.argument == "bandwidth"
