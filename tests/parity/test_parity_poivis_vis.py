"""Parity of the vis.* tools with the benchmark's dora/tools/vis.py (@7b96988).

Expected values are worked out by hand from the benchmark's documented behaviour: canvas sizes
from its layout constants, the overlay's truncated blend, the echoed arguments and flags of each
observation, the KDE of scipy's documented gaussian_kde. The real Florence post image and mask
from ../shared/realdata are used where they fit.
"""
from __future__ import annotations

import numpy as np
import pytest
from conftest import REALDATA, requires_shared
from PIL import Image
from shapely.geometry import LineString, MultiPoint, Point

from kernel.tools import ToolContext, ToolError, call_tool
from kernel.tools.base import directory_resolver
from kernel.tools.testing import write_geojson, write_png

REAL = REALDATA
FLORENCE = REAL / "xbd-hurricane-florence"
POST = "hurricane-florence_00000018_post_original.png"
MASK = "hurricane-florence_00000018_mask.png"
needs_real = requires_shared(FLORENCE)


@pytest.fixture
def ctx(tmp_path):
    d = tmp_path / "data"
    d.mkdir(exist_ok=True)
    write_png(d / "img.png", np.full((10, 20, 3), 200, np.uint8))
    m = np.zeros((10, 20), np.uint8)
    m[:, :5] = 2
    m[0, 19] = 7
    write_png(d / "mask.png", m)
    write_png(d / "m16.png", np.array([[0, 300], [1, 0]], np.uint16))
    write_geojson(d / "tri.geojson", [{"geometry": Point(0, 0), "properties": {}},
                                      {"geometry": Point(4, 0), "properties": {}},
                                      {"geometry": Point(0, 2), "properties": {}}])
    write_geojson(d / "mixed.geojson", [{"geometry": MultiPoint([(0, 0), (4, 0)]),
                                         "properties": {}},
                                        {"geometry": LineString([(0, 0), (0, 4)]),
                                         "properties": {}}])
    roots = [d] + ([FLORENCE] if FLORENCE.is_dir() else [])
    return ToolContext(work_dir=tmp_path / "work", resolve_path=directory_resolver(*roots))


def run(ctx, tool, **args):
    return call_tool(tool, args, ctx)


def size(ctx, name):
    return Image.open(ctx.work_dir / name).size  # (width, height)


# ---- vis.overlay_mask ---------------------------------------------------------------------
def test_overlay_truncated_blend_and_echo(ctx):
    o = run(ctx, "vis.overlay_mask", image_path="img.png", mask_path="mask.png", alpha=0.3)
    px = np.asarray(Image.open(ctx.work_dir / o["output_path"]))
    # class 2 dark orange (255,140,0): 0.7*200 + 0.3*(255,140,0) = (216.5, 182, 140) → (216,182,140)
    assert tuple(px[0, 0]) == (216, 182, 140)
    # 7 is not in the palette: red; 0.7*200 + 0.3*255 = 216.5 → 216, 140, 140
    assert tuple(px[0, 19]) == (216, 140, 140)
    assert o["classes_present"] == [2, 7] and o["class_labels"] == {}


def test_overlay_16bit_mask_resized_wraps(ctx):
    # a 2x2 mask of another size is cast to uint8 before resizing: 300 → 44
    o = run(ctx, "vis.overlay_mask", image_path="img.png", mask_path="m16.png")
    assert o["classes_present"] == [1, 44]


@needs_real
def test_overlay_real_florence(ctx):
    # the Florence mask holds 0, 3 and 4
    o = run(ctx, "vis.overlay_mask", image_path=POST, mask_path=MASK,
            class_labels={"3": "major"})
    assert o["classes_present"] == [3, 4] and o["class_labels"] == {"3": "major"}
    assert size(ctx, o["output_path"]) == (1024, 1024)


# ---- vis.add_map_elements -----------------------------------------------------------------
@pytest.mark.parametrize("args,canvas", [
    ({}, (20 + 20 + 20, 10 + 20 + 60)),                                   # no title, bar band
    ({"title": "T"}, (60, 10 + 60 + 60)),
    ({"title": "T", "legend_items": [{"label": "a"}]}, (20 + 20 + 220, 130)),
    ({"scale_bar": False}, (60, 10 + 20 + 20)),
])
def test_map_elements_canvas(ctx, args, canvas):
    o = run(ctx, "vis.add_map_elements", image_path="img.png", **args)
    assert size(ctx, o["output_path"]) == canvas


def test_map_elements_flags(ctx):
    markers = [{"row": 1, "col": 1, "label": " A "}, {"pixel_row": 2, "x": 3},
               {"pixel_row": None, "row": 4, "col": 4, "label": "skipped"},
               {"y": 5, "col": 5, "label": None}]
    o = run(ctx, "vis.add_map_elements", image_path="img.png", point_markers=markers,
            pixel_size_m=-1.0, legend_items=[], legend_alpha=0.2)
    # pixel_row present but null → skipped; a null label is drawn as "None"; labels stripped
    assert o["point_marker_labels"] == ["A", "None"] and o["point_marker_count"] == 4
    assert o["has_legend"] is False and o["legend_alpha"] == 0.2
    assert o["scale_bar"] is True  # pixel size given (even -1), although no bar is drawn
    assert o["north_arrow"] is True and o["title"] is None


def test_map_elements_bad_marker_position(ctx):
    with pytest.raises(ToolError):  # float("left") fails in the benchmark
        run(ctx, "vis.add_map_elements", image_path="img.png",
            point_markers=[{"row": "left", "col": 1}])


# ---- vis.damage_map -----------------------------------------------------------------------
def test_damage_map_observation(ctx):
    o = run(ctx, "vis.damage_map", base_image_path="img.png", overlay_mask_path="mask.png",
            class_labels={"2": "minor"}, alpha=0.6)
    assert o["tool"] == "vis.damage_map" and o["layers"] == ["base_image", "overlay_mask"]
    assert (o["has_legend"], o["legend_alpha"], o["scale_bar"]) == (True, 0.6, False)
    assert (o["point_marker_count"], o["point_marker_labels"]) == (0, [])
    # title band 60, bottom 60, legend column 220
    assert size(ctx, o["output_path"]) == (20 + 20 + 220, 10 + 60 + 60)


def test_damage_map_without_classes_or_mask(ctx):
    write_png(ctx.resolve_path("img.png").parent / "zero.png", np.zeros((10, 20), np.uint8))
    o = run(ctx, "vis.damage_map", base_image_path="img.png", overlay_mask_path="zero.png",
            pixel_size_m=0.5)
    # a mask with no class: no legend, yet legend_alpha is the alpha; scale bar drawn
    assert (o["has_legend"], o["legend_alpha"], o["scale_bar"]) == (False, 0.45, True)
    n = run(ctx, "vis.damage_map", base_image_path="img.png", overlay_mask_path=None)
    assert n["layers"] == ["base_image"] and n["legend_alpha"] is None


# ---- vis.route_map ------------------------------------------------------------------------
def test_route_map_points_and_legend(ctx):
    o = run(ctx, "vis.route_map", base_image_path="img.png",
            path_pixels=[[1, 1], [2], [3, 4, 9], [5, 6]], start_point=[], end_point=[9, 9])
    # [2] skipped; [3,4,9] keeps (3,4); empty start → first point; end given
    assert o["path_point_count"] == 3 and o["start_point"] == [1, 1] and o["end_point"] == [9, 9]
    assert o["legend_items"] == ["intact route", "route start", "route end"]
    assert o["has_overlay"] is False and o["point_marker_labels"] == ["Route start", "Route end"]
    # right column 260, no pixel size → bottom 20
    assert size(ctx, o["output_path"]) == (20 + 20 + 260, 10 + 60 + 20)


def test_route_map_overlay_labels_and_pixel_size(ctx):
    o = run(ctx, "vis.route_map", base_image_path="img.png", path_pixels=[],
            overlay_mask_path="mask.png", class_labels={"7": "debris"}, pixel_size_m=2.0,
            title="")
    assert o["legend_items"] == ["class_2", "debris", "intact route", "route start", "route end"]
    assert o["start_point"] is None and o["point_marker_labels"] == [] and o["has_overlay"]
    assert size(ctx, o["output_path"]) == (300, 10 + 20 + 60)  # empty title: 20 px band


def test_route_map_fractional_points_are_refused(ctx):
    with pytest.raises(ToolError):  # List[List[int]] validation refuses 1.5
        run(ctx, "vis.route_map", base_image_path="img.png", path_pixels=[[1.5, 2]])


# ---- charts -------------------------------------------------------------------------------
@pytest.mark.parametrize("tool,kind,canvas", [("vis.pie_chart", "pie", (800, 600)),
                                              ("vis.bar_chart", "bar", (900, 600)),
                                              ("vis.line_chart", "line", (900, 600))])
def test_chart_echoes_data_as_floats(ctx, tool, kind, canvas):
    o = run(ctx, tool, data={"b": 2, "a": "3.5"})
    assert o["statistics"] == {"b": 2.0, "a": 3.5} and list(o["statistics"]) == ["b", "a"]
    assert o["chart_type"] == kind and size(ctx, o["output_path"]) == canvas


@pytest.mark.parametrize("tool", ["vis.pie_chart", "vis.bar_chart", "vis.line_chart"])
def test_chart_empty_data(ctx, tool):
    assert run(ctx, tool, data={})["statistics"] == {}


@pytest.mark.parametrize("tool", ["vis.pie_chart", "vis.line_chart"])
def test_chart_negative_data_drawn(ctx, tool):
    assert run(ctx, tool, data={"x": -4, "y": 0}, title="T")["title"] == "T"


def test_bar_chart_negative_value_fails(ctx):
    # a negative bar's top lies below the axis: PIL's rectangle refuses y1 < y0, in the
    # benchmark as here
    with pytest.raises(ToolError):
        run(ctx, "vis.bar_chart", data={"x": -4, "y": 2})


@pytest.mark.parametrize("tool", ["vis.pie_chart", "vis.bar_chart", "vis.line_chart"])
def test_chart_non_numeric_refused(ctx, tool):
    with pytest.raises(ToolError):  # Dict[str, float] validation
        run(ctx, tool, data={"x": "many"})


# ---- panels and report --------------------------------------------------------------------
def test_before_after_panel(ctx):
    o = run(ctx, "vis.before_after_panel", pre_image_path="img.png", post_image_path="img.png",
            title="Flood")
    assert o == {"tool": "vis.before_after_panel", "output_path": o["output_path"],
                 "title": "Flood"}
    assert size(ctx, o["output_path"]) == (1460, 620)


@needs_real
def test_before_after_panel_real(ctx):
    o = run(ctx, "vis.before_after_panel", pre_image_path=POST.replace("post", "pre"),
            post_image_path=POST)
    assert o["title"] == "Before / After Comparison"


@pytest.mark.parametrize("n,columns,labels,canvas,out_labels", [
    (3, 2, None, (2 * 420 + 60, 2 * 320 + 120 + 60), ["t1", "t2", "t3"]),
    (1, 0, ["a", "b"], (460, 460), ["a", "b"]),          # columns 0 → 1; labels echoed
    (2, 3, [], (3 * 420 + 80, 320 + 80 + 60), ["t1", "t2"]),  # empty labels → default
    (0, 2, None, (900, 100), []),                        # no images: title-only canvas
])
def test_temporal_panel(ctx, n, columns, labels, canvas, out_labels):
    o = run(ctx, "vis.temporal_panel", image_paths=["img.png"] * n, labels=labels,
            columns=columns)
    assert o["labels"] == out_labels and size(ctx, o["output_path"]) == canvas


def test_report_page_components(ctx):
    o = run(ctx, "vis.report_page", map_image_path="missing.png", chart_image_path="",
            summary_text="", key_statistics={})
    assert o["components"] == {"map": True, "chart": False, "summary_text": False,
                               "key_statistics": False}
    o = run(ctx, "vis.report_page", map_image_path="img.png", chart_image_path="img.png",
            summary_text="word " * 40, key_statistics={f"k{i}": i for i in range(20)})
    assert all(o["components"].values()) and size(ctx, o["output_path"]) == (1400, 1000)
    assert o["title"] == "Disaster Situation Report"


# ---- vis.heatmap --------------------------------------------------------------------------
def _scipy_kde_stats(pts, bw=None):
    """Scott's factor n^(-1/6) (2-D) times the sample covariance, mean of n Gaussians, on
    np.mgrid[xmin:xmax:200j, ymin:ymax:200j] (scipy's documented gaussian_kde)."""
    import math

    pts = np.asarray(pts, float)
    f = len(pts) ** (-1 / 6) if bw is None else bw
    cov = np.cov(pts.T) * f * f
    inv, det = np.linalg.inv(cov), np.linalg.det(cov)
    (x0, y0), (x1, y1) = pts.min(0), pts.max(0)
    gx, gy = np.mgrid[x0:x1:200j, y0:y1:200j]
    d = np.stack([gx.ravel(), gy.ravel()], 1)[:, None] - pts[None]
    z = np.exp(-np.einsum("gni,ij,gnj->gn", d, inv, d) / 2).mean(1) / (2 * math.pi * math.sqrt(det))
    return z.max(), z.mean()


def test_heatmap_points(ctx):
    o = run(ctx, "vis.heatmap", points_path="tri.geojson")
    kmax, kmean = _scipy_kde_stats([(0, 0), (4, 0), (0, 2)])
    assert o["stats"]["kde_max"] == pytest.approx(kmax, rel=1e-9)
    assert o["stats"]["kde_mean"] == pytest.approx(kmean, rel=1e-9)
    assert o["stats"]["extent"] == [0.0, 0.0, 4.0, 2.0] and o["point_count"] == 3
    assert set(o) == {"tool", "heatmap_path", "point_count", "stats"}


def test_heatmap_multipoint_and_line_centroid(ctx):
    # a multipoint gives each point, a line its centroid (0, 2): (0,0), (4,0), (0,2)
    o = run(ctx, "vis.heatmap", points_path="mixed.geojson", bandwidth=0.8,
            base_image_path="not-there.png")
    assert o["point_count"] == 3
    assert o["stats"]["kde_max"] == pytest.approx(
        _scipy_kde_stats([(0, 0), (4, 0), (0, 2)], 0.8)[0], rel=1e-9)


def test_heatmap_degenerate_extent_and_failures(ctx):
    d = ctx.resolve_path("img.png").parent
    write_geojson(d / "same.geojson", [{"geometry": Point(3, 3), "properties": {}}] * 3)
    with pytest.raises(ToolError):  # identical points: singular covariance in gaussian_kde
        run(ctx, "vis.heatmap", points_path="same.geojson")
    write_geojson(d / "none.geojson", [])
    with pytest.raises(ToolError):  # "vis.heatmap: empty input"
        run(ctx, "vis.heatmap", points_path="none.geojson")


@needs_real
def test_damage_map_real_florence_legend_of_present_classes(ctx):
    o = run(ctx, "vis.damage_map", base_image_path=POST, overlay_mask_path=MASK,
            pixel_size_m=0.5, title="Florence")
    # values 3 and 4 present → a legend; 1024 + 20 + 220 wide, 1024 + 60 + 60 high
    assert o["has_legend"] and size(ctx, o["output_path"]) == (1264, 1144)
    assert o["title"] == "Florence" and o["scale_bar"] is True


def test_before_after_panel_of_different_sizes(ctx):
    d = ctx.resolve_path("img.png").parent
    write_png(d / "tall.png", np.zeros((40, 5, 3), np.uint8))
    o = run(ctx, "vis.before_after_panel", pre_image_path="tall.png", post_image_path="img.png")
    px = np.asarray(Image.open(ctx.work_dir / o["output_path"]))
    # tall 40x5 fitted into 700x500: scale 12.5 → 62 x 500 px, centred: black at the panel
    # centre (20 + 350, 80 + 250), white padding at the panel's left edge
    assert tuple(px[330, 370]) == (0, 0, 0) and tuple(px[330, 25]) == (255, 255, 255)


def test_report_page_null_images_and_title(ctx):
    o = run(ctx, "vis.report_page", map_image_path=None, chart_image_path=None,
            title="Situation", summary_text="ok")
    assert o["title"] == "Situation" and o["components"] == {
        "map": False, "chart": False, "summary_text": True, "key_statistics": False}


def test_report_page_unreadable_image_fails(ctx):
    d = ctx.resolve_path("img.png").parent
    (d / "broken.png").write_bytes(b"not a png")
    with pytest.raises(ToolError):  # the file exists, so the benchmark opens it and fails
        run(ctx, "vis.report_page", map_image_path="broken.png", chart_image_path=None)


def test_route_map_two_number_route_colour_fails(ctx):
    # the legend always draws the "intact route" box in route_color; Pillow (12.2 in the
    # benchmark's requirements) refuses a 2-tuple colour, so the call fails even with no route
    with pytest.raises(ToolError):
        run(ctx, "vis.route_map", base_image_path="img.png", path_pixels=[], route_color=[1, 2])


@pytest.mark.parametrize("alpha", [None, 0.5])
def test_map_elements_named_legend_colour_fails(ctx, alpha):
    # tuple("red") is ('r', 'e', 'd'): int('r') (no alpha) or a float array of it (alpha) fails
    with pytest.raises(ToolError):
        run(ctx, "vis.add_map_elements", image_path="img.png", legend_alpha=alpha,
            legend_items=[{"label": "a", "color": "red"}])


def test_heatmap_collinear_points_fail(ctx):
    # three points on one line: their covariance is singular, scipy's gaussian_kde raises
    # (documented: "data appears to lie in a lower-dimensional subspace"), the benchmark stubs
    d = ctx.resolve_path("img.png").parent
    write_geojson(d / "line3.geojson", [{"geometry": Point(i, i), "properties": {}}
                                        for i in range(3)])
    with pytest.raises(ToolError):
        run(ctx, "vis.heatmap", points_path="line3.geojson")
