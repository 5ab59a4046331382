"""vis.* tools: sizes, hand-computed pixels and statistics, and byte-identical PNGs across two
runs in two work dirs. The tools follow the benchmark's dora/tools/vis.py: inputs they
used to refuse (alpha outside 0..1, markers without position, negative pie data, mismatched
panel labels, a missing report image, a zero bandwidth) now give the benchmark's observation, and
QC flags them (annotation/qc/tool_parity.py); the tests below say so where an old refusal was."""
import math

import numpy as np
import pytest
from PIL import Image
from shapely.geometry import Point, box

from kernel.tools import ToolError, ToolInputError, call_tool
from kernel.tools.testing import make_ctx, write_geojson, write_png, write_tif


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
        # three points: two points always have a singular covariance, which the benchmark's
        # gaussian_kde refuses
        write_geojson(d / "pts.geojson", [{"geometry": Point(0, 0), "properties": {}},
                                          {"geometry": Point(1000, 0), "properties": {}},
                                          {"geometry": Point(0, 500), "properties": {}}])
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
    ("vis.before_after_panel", {"pre_image_path": "img.png", "post_image_path": "img.png"}),
    ("vis.temporal_panel", {"image_paths": ["img.png", "img.png", "img.png"], "columns": 2}),
    ("vis.report_page", {"map_image_path": "img.png", "chart_image_path": None,
                         "summary_text": "Flood covers 10 km2.", "key_statistics": {"a": 1.5}}),
    ("vis.heatmap", {"points_path": "pts.geojson", "bandwidth": 0.5}),
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
    # grey 100 blended half with gold (255,215,0): (177.5, 157.5, 50) -> truncated (177, 157, 50)
    assert tuple(out[0, 0]) == (177, 157, 50)
    # crimson (220,20,60): (160, 60, 80); 255 is drawn red (255,0,0): (177.5, 50, 50) -> 177
    assert tuple(out[15, 25]) == (160, 60, 80) and tuple(out[19, 0]) == (177, 50, 50)
    assert tuple(out[15, 5]) == (100, 100, 100)  # background untouched
    assert obs["classes_present"] == [1, 3, 255]
    # the benchmark echoes class_labels as given; it used to be filled with class_<v>
    assert obs["class_labels"] == {"1": "flood"}
    assert call_tool("vis.overlay_mask", {"image_path": "img.png", "mask_path": "mask.png"},
                     ctx)["class_labels"] == {}


def test_overlay_mask_resizes_and_former_refusals(tmp_path):
    ctx = setup_data(tmp_path)
    obs = call_tool("vis.overlay_mask", {"image_path": "img.png", "mask_path": "small_mask.png",
                                         "alpha": 1.0}, ctx)
    out = png(ctx, obs["output_path"])
    # 2x2 mask nearest-resized to 20x30: top-left quarter class 1 (gold), bottom-right class 2
    # (the benchmark's dark orange 255,140,0)
    assert tuple(out[0, 0]) == (255, 215, 0) and tuple(out[19, 29]) == (255, 140, 0)
    assert tuple(out[0, 29]) == (100, 100, 100)
    # alpha 1.5 used to be refused; the benchmark blends: 100*(-0.5) + 1.5*255 = 332.5 for red
    # of gold, which uint8 wraps; QC flags it (vis.alpha_range)
    call_tool("vis.overlay_mask", {"image_path": "img.png", "mask_path": "mask.png",
                                   "alpha": 1.5}, ctx)
    with pytest.raises(ToolInputError) as ei:
        call_tool("vis.overlay_mask", {"image_path": "img.png", "mask_path": "gone.png"}, ctx)
    assert ei.value.argument == "mask_path"
    # an RGB mask used to be refused; the benchmark takes its first channel (9 everywhere)
    rgb = np.zeros((4, 4, 3), np.uint8)
    rgb[..., 0] = 9
    write_png(tmp_path / "data" / "rgbmask.png", rgb)
    assert call_tool("vis.overlay_mask", {"image_path": "img.png", "mask_path": "rgbmask.png"},
                     ctx)["classes_present"] == [9]


def test_map_elements_and_damage_map(tmp_path):
    ctx = setup_data(tmp_path)
    obs = call_tool("vis.add_map_elements", {
        "image_path": "img.png", "title": "Flood", "pixel_size_m": 2.0,
        "legend_items": [{"label": "water", "color": [0, 0, 255]}], "legend_alpha": 0.5,
        "point_markers": [{"pixel_row": 3, "pixel_col": 4, "label": "Shelter"},
                          {"y": 10, "x": 10}]}, ctx)
    # canvas: 30 + 20 + 220 (legend column) wide, 20 + 60 (title) + 60 (scale band) high
    assert png(ctx, obs["output_path"]).shape[:2] == (140, 270)
    assert obs["has_legend"] and obs["legend_alpha"] == 0.5 and obs["scale_bar"]
    assert obs["point_marker_count"] == 2 and obs["point_marker_labels"] == ["Shelter"]
    obs = call_tool("vis.add_map_elements", {"image_path": "img.png"}, ctx)
    assert obs["scale_bar"] is False and obs["has_legend"] is False  # no pixel size, no legend
    assert png(ctx, obs["output_path"]).shape[:2] == (20 + 20 + 60, 30 + 40)
    # a marker without position used to be refused: skipped, but counted (benchmark)
    obs = call_tool("vis.add_map_elements", {"image_path": "img.png",
                                             "point_markers": [{"label": "x"}]}, ctx)
    assert obs["point_marker_count"] == 1 and obs["point_marker_labels"] == []
    # pixel size 0 used to be refused: no bar drawn, scale_bar still true (benchmark)
    assert call_tool("vis.add_map_elements", {"image_path": "img.png", "pixel_size_m": 0},
                     ctx)["scale_bar"] is True
    dm = call_tool("vis.damage_map", {"base_image_path": "img.png",
                                      "overlay_mask_path": "mask.png", "pixel_size_m": 0.5,
                                      "class_labels": {"3": "destroyed"}}, ctx)
    assert dm["layers"] == ["base_image", "overlay_mask"]
    assert dm["has_legend"] and dm["title"] == "Damage Assessment Map"
    assert dm["legend_alpha"] == 0.45 and dm["scale_bar"] is True
    plain = call_tool("vis.damage_map", {"base_image_path": "img.png",
                                         "overlay_mask_path": None}, ctx)
    assert plain["layers"] == ["base_image"] and not plain["has_legend"]
    assert plain["legend_alpha"] is None and plain["scale_bar"] is False


def test_route_map(tmp_path):
    ctx = setup_data(tmp_path)
    obs = call_tool("vis.route_map", {"base_image_path": "img.png",
                                      "path_pixels": [[1, 1], [1, 20], [15, 20]],
                                      "overlay_mask_path": "mask.png"}, ctx)
    assert obs["path_point_count"] == 3
    assert obs["start_point"] == [1, 1] and obs["end_point"] == [15, 20]  # first / last pixel
    assert obs["point_marker_labels"] == ["Route start", "Route end"] and obs["has_overlay"]
    assert obs["legend_items"] == ["class_1", "class_3", "class_255", "intact route",
                                   "route start", "route end"]
    empty = call_tool("vis.route_map", {"base_image_path": "img.png", "path_pixels": []}, ctx)
    assert empty["path_point_count"] == 0 and empty["start_point"] is None
    assert empty["legend_items"] == ["intact route", "route start", "route end"]
    # a 3-number point used to be refused: the benchmark keeps its first two numbers
    assert call_tool("vis.route_map", {"base_image_path": "img.png", "path_pixels": [[1, 2, 3]]},
                     ctx)["start_point"] == [1, 2]


def test_charts_statistics_and_sizes(tmp_path):
    ctx = setup_data(tmp_path)
    pie = call_tool("vis.pie_chart", {"data": {"destroyed": 10, "minor": 30}}, ctx)
    assert png(ctx, pie["output_path"]).shape[:2] == (600, 800)
    # the benchmark's statistics are its data argument, values as floats
    assert pie["statistics"] == {"destroyed": 10.0, "minor": 30.0}
    assert pie["chart_type"] == "pie" and pie["title"] == "Pie Chart"
    bar = call_tool("vis.bar_chart", {"data": {"a" * 20: 2, "b": 4, "c": 3}, "title": "X"},
                    ctx)
    assert png(ctx, bar["output_path"]).shape[:2] == (600, 900)
    assert bar["statistics"] == {"a" * 20: 2.0, "b": 4.0, "c": 3.0} and bar["title"] == "X"
    line = call_tool("vis.line_chart", {"data": {"t1": 4, "t2": 8, "t3": 6}}, ctx)
    assert png(ctx, line["output_path"]).shape[:2] == (600, 900)
    assert list(line["statistics"]) == ["t1", "t2", "t3"] and line["chart_type"] == "line"
    # negative, zero and empty data used to be refused; the benchmark draws them (QC
    # vis.chart_data flags them)
    assert call_tool("vis.pie_chart", {"data": {"a": -1, "b": 2}}, ctx)["statistics"] == {
        "a": -1.0, "b": 2.0}
    assert call_tool("vis.bar_chart", {"data": {}}, ctx)["statistics"] == {}
    with pytest.raises(ToolInputError):  # not a number: the benchmark's argument validation
        call_tool("vis.line_chart", {"data": {"a": "many"}}, ctx)


def test_panels_and_report_page(tmp_path):
    ctx = setup_data(tmp_path)
    ba = call_tool("vis.before_after_panel", {"pre_image_path": "img.png",
                                              "post_image_path": "img.png"}, ctx)
    # 2 * 700 + 60 by 500 + 120
    assert png(ctx, ba["output_path"]).shape[:2] == (620, 1460)
    tp = call_tool("vis.temporal_panel", {"image_paths": ["img.png", "img.png", "img.png"]}, ctx)
    # 3 images, 2 columns -> 2 rows: 2*420 + 3*20 wide, 2*320 + 3*40 + 60 high
    assert tp["labels"] == ["t1", "t2", "t3"]
    assert png(ctx, tp["output_path"]).shape[:2] == (820, 900)
    # mismatched labels and columns 0 used to be refused; the benchmark cuts and uses 1 column
    assert call_tool("vis.temporal_panel", {"image_paths": ["img.png"], "labels": ["a", "b"]},
                     ctx)["labels"] == ["a", "b"]
    one = call_tool("vis.temporal_panel", {"image_paths": ["img.png"], "columns": 0}, ctx)
    assert png(ctx, one["output_path"]).shape[:2] == (320 + 80 + 60, 420 + 40)
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
    # a missing file used to be refused; the benchmark skips it and still reports map: true
    assert call_tool("vis.report_page", {"map_image_path": "nope.png", "chart_image_path": None},
                     ctx)["components"]["map"] is True
    with pytest.raises(ToolInputError) as ei:
        call_tool("vis.report_page", {"chart_image_path": None}, ctx)  # required even if null
    assert ei.value.argument == "map_image_path"


def _kde_on_grid(pts, factor=None):
    """gaussian_kde's documented density worked out with numpy: covariance = sample covariance
    × factor² (Scott's factor n^(-1/6) in 2-D), the mean of the n Gaussians, on the 200 × 200
    grid np.mgrid[xmin:xmax:200j, ymin:ymax:200j]."""
    pts = np.asarray(pts, float)
    n = len(pts)
    f = n ** (-1 / 6) if factor is None else factor
    cov = np.cov(pts.T) * f * f
    inv = np.linalg.inv(cov)
    norm = 1 / (2 * math.pi * math.sqrt(np.linalg.det(cov)))
    gx, gy = np.mgrid[pts[:, 0].min():pts[:, 0].max():200j, pts[:, 1].min():pts[:, 1].max():200j]
    d = np.stack([gx.ravel(), gy.ravel()], 1)[:, None, :] - pts[None, :, :]
    q = np.einsum("gni,ij,gnj->gn", d, inv, d)
    z = (norm * np.exp(-q / 2)).mean(1)
    return z.max(), z.mean()


def test_heatmap_density(tmp_path):
    ctx = setup_data(tmp_path)
    obs = call_tool("vis.heatmap", {"points_path": "pts.geojson"}, ctx)
    assert obs["point_count"] == 3
    kmax, kmean = _kde_on_grid([(0, 0), (1000, 0), (0, 500)])
    assert obs["stats"]["kde_max"] == pytest.approx(kmax, rel=1e-9)
    assert obs["stats"]["kde_mean"] == pytest.approx(kmean, rel=1e-9)
    assert obs["stats"]["extent"] == [0.0, 0.0, 1000.0, 500.0]  # the points' bounds
    # a bandwidth is a factor on the covariance (0.5 here), not a distance
    obs = call_tool("vis.heatmap", {"points_path": "pts.geojson", "bandwidth": 0.5}, ctx)
    assert obs["stats"]["kde_max"] == pytest.approx(_kde_on_grid([(0, 0), (1000, 0), (0, 500)],
                                                                 0.5)[0], rel=1e-9)
    # polygon centroids count as points; the base image only decorates
    write_geojson(tmp_path / "data" / "pp.geojson", [{"geometry": Point(5, 5), "properties": {}},
                                                     {"geometry": box(10, 10, 12, 12),
                                                      "properties": {}},
                                                     {"geometry": Point(5, 20), "properties": {}}])
    obs = call_tool("vis.heatmap", {"points_path": "pp.geojson", "base_image_path": "img.png",
                                    "colormap": "viridis"}, ctx)
    assert obs["stats"]["extent"] == [5.0, 5.0, 11.0, 20.0] and obs["point_count"] == 3
    with pytest.raises(ToolInputError) as ei:
        call_tool("vis.heatmap", {"points_path": "pts.geojson", "colormap": "nope"}, ctx)
    assert ei.value.argument == "colormap"
    write_geojson(tmp_path / "data" / "one.geojson", [{"geometry": Point(1, 1),
                                                       "properties": {}}])
    with pytest.raises(ToolInputError) as ei:
        call_tool("vis.heatmap", {"points_path": "one.geojson"}, ctx)
    assert ei.value.argument == "points_path"
    # two points: a singular covariance, which the benchmark's gaussian_kde refuses
    write_geojson(tmp_path / "data" / "two.geojson", [{"geometry": Point(1, 1), "properties": {}},
                                                      {"geometry": Point(5, 1), "properties": {}}])
    with pytest.raises(ToolError):
        call_tool("vis.heatmap", {"points_path": "two.geojson"}, ctx)
