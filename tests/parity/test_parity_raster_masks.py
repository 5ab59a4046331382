"""Parity of the mask and raster tools with the benchmark's.

ras.count_pixels, ras.area, ras.threshold, mask.compose_multiclass, ras.vectorize, ras.stats,
ras.sample_point(s), ras.clip, ras.concat, ras.grid_windows, ras.diff. Each expected value is
worked out by hand in a comment from the behaviour of the benchmark's code
(Junjue-Wang/DORA ``dora/tools/analysis.py`` @2b24be70, ``calculate.py`` @7b969887), or, for the
real-data cases, counted independently with Pillow/rasterio + numpy, or taken from the
benchmark's recorded observation in ``../shared/tool-examples`` (said so in the comment).
A benchmark tool that returns its ``status: stub`` failure object is a ToolError here.
"""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
import rasterio
from conftest import SHARED, needs_shared, requires_shared

from kernel.tools import ToolContext, ToolError, call_tool, directory_resolver
from kernel.tools.testing import write_png, write_tif

REALDATA = SHARED / "realdata"
EXAMPLES = SHARED / "tool-examples" / "inputs"

# 4x4 mask; value counts by hand: 0 -> 7, 1 -> 3, 2 -> 2, 3 -> 3, 255 -> 1
M = np.array([[0, 0, 1, 1],
              [0, 2, 2, 1],
              [3, 3, 0, 0],
              [3, 0, 0, 255]], dtype=np.uint8)
# 5x5: class 3 in two 4-connected regions (4 px, 2 px), class 2 one pixel
V = np.array([[3, 3, 0, 0, 0],
              [3, 3, 0, 0, 0],
              [0, 0, 0, 2, 0],
              [0, 0, 0, 0, 0],
              [0, 0, 0, 3, 3]], dtype=np.uint8)


@pytest.fixture
def ctx(tmp_path):
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    write_png(data / "m.png", M)
    write_tif(data / "m.tif", M, res=2.0)
    write_png(data / "v.png", V)
    rgb = np.zeros((2, 2, 3), np.uint8)
    rgb[0, 0] = (255, 0, 0)
    write_png(data / "rgb.png", rgb)
    write_tif(data / "f.tif", np.array([[1, 2, 3], [4, np.nan, 6], [7, 8, -9999]], np.float32),
              nodata=-9999)
    return ToolContext(work_dir=tmp_path / "work",
                       resolve_path=directory_resolver(data, EXAMPLES, REALDATA))


def run(ctx, tool, **args):
    return call_tool(tool, args, ctx)


def band1(ctx, name):
    with rasterio.open(ctx.work_dir / name) as src:
        return src.read(1), src


needs_examples = requires_shared(EXAMPLES)
needs_real = requires_shared(REALDATA)


# ---------------------------------------------------------------- ras.count_pixels
@pytest.mark.parametrize("classes,counts,total", [
    ([1, 3], {"1": 3, "3": 3}, 6),          # counted by hand in M
    ([4, 7], {"4": 0, "7": 0}, 0),          # absent classes count 0 (no refusal)
    ([1, 1], {"1": 3}, 3),                  # a dict: the repeated class appears once
    ([], {}, 0),                            # empty list: nothing counted, no error
    ([0, 255], {"0": 7, "255": 1}, 8),
])
def test_count_pixels_synthetic(ctx, classes, counts, total):
    obs = run(ctx, "ras.count_pixels", mask_path="m.png", classes=classes)
    assert obs == {"tool": "ras.count_pixels", "counts": counts, "total": total,
                   "classes": classes}


def test_count_pixels_counts_every_band(ctx):
    # imread reads the RGB png as 2x2x3 = 12 samples: the red pixel has two zeros, the three
    # black pixels nine: 11 zeros and one 255
    obs = run(ctx, "ras.count_pixels", mask_path="rgb.png", classes=[0, 255])
    assert obs["counts"] == {"0": 11, "255": 1} and obs["total"] == 12


@needs_examples
def test_count_pixels_real_xbd_mask(ctx):
    from PIL import Image

    arr = np.array(Image.open(EXAMPLES / "sr16_xbd_mask.png"))
    want = {str(c): int((arr == c).sum()) for c in (1, 2, 3, 4)}
    obs = run(ctx, "ras.count_pixels", mask_path="sr16_xbd_mask.png", classes=[1, 2, 3, 4])
    assert obs["counts"] == want
    # the benchmark's recorded observation (tool-examples count_pixels_absent_class)
    assert obs["counts"] == {"1": 18176, "2": 0, "3": 0, "4": 20904} and obs["total"] == 39080


@needs_real
def test_count_pixels_real_multiband_geotiff(ctx):
    path = REALDATA / "xview2-deploy-joplin" / "output_dmg_0_pre.tif"
    needs_shared(path)
    with rasterio.open(path) as src:
        want = int((src.read() == 4).sum())  # every band, as imread's H x W x 3 array
    obs = run(ctx, "ras.count_pixels", mask_path="xview2-deploy-joplin/output_dmg_0_pre.tif",
              classes=[4])
    # the benchmark's observation (tool-examples count_pixels_multiband): 145571
    assert obs["counts"] == {"4": want} == {"4": 145571}


# ---------------------------------------------------------------- ras.area
@pytest.mark.parametrize("mask,px,classes,pixels,area", [
    ("m.png", 0.5, [3], 3, 0.75),     # 3 px * 0.25
    ("m.png", 0.5, None, 9, 2.25),    # all non-zero: 16 - 7 = 9
    ("m.png", 0.5, [], 9, 2.25),      # empty list = all non-zero
    ("m.png", 1.0, [9], 0, 0.0),      # absent class: 0, not an error
    ("m.png", -2.0, None, 9, 36.0),   # negative size squared: 9 * 4
    ("m.tif", 0.5, None, 9, 2.25),    # the 2 m transform is ignored: 9 * 0.25
    ("rgb.png", 3.0, None, 1, 9.0),   # one sample > 0 over 3 bands * 9 m2
])
def test_area_synthetic(ctx, mask, px, classes, pixels, area):
    obs = run(ctx, "ras.area", mask_path=mask, pixel_size_m=px, classes=classes)
    assert obs == {"tool": "ras.area", "area_m2": area, "pixel_count": pixels,
                   "pixel_size_m": px}


def test_area_requires_a_pixel_size(ctx):
    # the benchmark's pixel_size_m is a required float: null is a validation error there
    with pytest.raises(ToolError):
        run(ctx, "ras.area", mask_path="m.png", pixel_size_m=None)


@needs_examples
def test_area_real_joplin(ctx):
    obs = run(ctx, "ras.area", mask_path="joplin_dmg_b1.tif", pixel_size_m=0.6, classes=[4])
    # tool-examples area_geotiff_destroyed: 145571 px * 0.36 m2 = 52405.56 m2
    assert obs["pixel_count"] == 145571
    assert obs["area_m2"] == pytest.approx(145571 * 0.36, rel=1e-12)


# ---------------------------------------------------------------- ras.threshold
@pytest.mark.parametrize("args,selected,values", [
    ({"threshold": 4}, 4, {0: 5, 255: 4}),                    # 4, 6, 7, 8; NaN/nodata never
    ({"threshold": 2, "op": "<", "true_value": 1}, 1, {0: 8, 1: 1}),   # only the 1
    ({"threshold": 6, "op": "==", "true_value": 300}, 1, {0: 8, 44: 1}),  # 300 -> uint8 44
    ({"threshold": 0, "op": ">", "true_value": 0}, 7, {0: 9}),  # true == false is allowed
    ({"threshold": 7, "op": "<=", "true_value": -1}, 6, {0: 3, 255: 6}),  # -1 -> 255
])
def test_threshold_synthetic(ctx, args, selected, values):
    obs = run(ctx, "ras.threshold", image_path="f.tif", **args)
    assert obs["selected_pixels"] == selected and obs["threshold"] == float(args["threshold"])
    arr, src = band1(ctx, obs["mask_path"])
    u, c = np.unique(arr, return_counts=True)
    assert dict(zip(u.tolist(), c.tolist())) == values
    assert src.nodata == 0 and src.crs.to_epsg() == 32615


@pytest.mark.parametrize("args", [
    {"threshold": 1, "op": "!="},        # unknown operator
    {"threshold": 1, "band": 2},         # band out of range
    {"threshold": 1, "false_value": 300},  # cannot be the uint8 nodata
])
def test_threshold_errors(ctx, args):
    with pytest.raises(ToolError):
        run(ctx, "ras.threshold", image_path="m.png", **args)


@needs_examples
def test_threshold_real_dem_with_nodata(ctx):
    with rasterio.open(EXAMPLES / "dem_hill_utm_nodata.tif") as src:
        z = src.read(1)
        want = int(((z != src.nodata) & np.isfinite(z) & (z > 250)).sum())
    obs = run(ctx, "ras.threshold", image_path="dem_hill_utm_nodata.tif", threshold=250, op=">")
    # the benchmark's observation (tool-examples threshold_dem_nodata_gt): 3783
    assert obs["selected_pixels"] == want == 3783


# ---------------------------------------------------------------- mask.compose_multiclass
def test_compose_later_mask_wins(ctx, tmp_path):
    a = np.zeros((3, 3), np.uint8)
    a[0, 0] = a[0, 1] = 255
    b = np.zeros((3, 3), np.uint8)
    b[0, 1] = b[2, 2] = 1
    write_png(tmp_path / "data" / "a.png", a)
    write_png(tmp_path / "data" / "b.png", b)
    obs = run(ctx, "mask.compose_multiclass", mask_paths=["a.png", "b.png"], class_values=[3, 7])
    arr, src = band1(ctx, obs["mask_path"])
    assert arr.tolist() == [[3, 7, 0], [0, 0, 0], [0, 0, 7]] and src.nodata == 0
    assert obs["classes"] == {"0": "background", "3": "building_total_damage", "7": "tree_fallen"}


def test_compose_non_binary_mask_takes_every_positive_value(ctx):
    # M has 1, 2, 3, 255 (9 px > 0): all become class 5
    obs = run(ctx, "mask.compose_multiclass", mask_paths=["m.png"], class_values=[5])
    arr, _ = band1(ctx, obs["mask_path"])
    assert int((arr == 5).sum()) == 9 and obs["classes"] == {"0": "background",
                                                             "5": "road_no_damage"}


def test_compose_multiband_reads_band_1(ctx):
    # band 1 (red) of rgb.png is > 0 at (0, 0) only
    obs = run(ctx, "mask.compose_multiclass", mask_paths=["rgb.png"], class_values=[255])
    arr, _ = band1(ctx, obs["mask_path"])
    assert arr.tolist() == [[255, 0], [0, 0]] and obs["classes"]["255"] == "ignore"


def test_compose_labels_of_unknown_and_zero_classes(ctx):
    # class 20 has no RescueNet label -> class_20; class 0 keeps "background"
    obs = run(ctx, "mask.compose_multiclass", mask_paths=["m.png", "m.png"], class_values=[0, 20])
    assert obs["classes"] == {"0": "background", "20": "class_20"}
    assert obs["class_values"] == [0, 20]


@pytest.mark.parametrize("paths,values", [
    (["m.png"], [1, 2]),          # length mismatch
    ([], []),                     # nothing to compose
    (["m.png"], [300]),           # numpy refuses 300 in a uint8 array
    (["m.png", "v.png"], [1, 2]),  # 4x4 and 5x5
])
def test_compose_errors(ctx, paths, values):
    with pytest.raises(ToolError):
        run(ctx, "mask.compose_multiclass", mask_paths=paths, class_values=values)


# ---------------------------------------------------------------- ras.vectorize
@pytest.mark.parametrize("classes,px,count,pixels,area", [
    ([3], 0.5, 2, 6, 1.5),       # 4 px + 2 px, * 0.25 m2
    ([2, 3], None, 3, 7, 0.0),   # no pixel size: every polygon's area_m2 is 0 -> 0.0
    ([9], 0.5, 0, 0, None),      # absent class: 0 polygons, null area
    ([], None, 0, 0, None),      # empty class list: nothing selected
    ([2], 2.0, 1, 1, 4.0),       # one pixel * 4 m2
])
def test_vectorize_pixel_space(ctx, classes, px, count, pixels, area):
    # px None: the argument is left out (an explicit null is refused, as by the benchmark's schema)
    extra = {} if px is None else {"pixel_size_m": px}
    obs = run(ctx, "ras.vectorize", mask_path="v.png", classes=classes, **extra)
    assert (obs["count"], obs["total_pixels"], obs["total_area_m2"]) == (count, pixels, area)
    doc = json.loads((ctx.work_dir / obs["vector_path"]).read_text())
    assert "crs" not in doc and len(doc["features"]) == count


def test_vectorize_georeferenced_uses_crs_units(ctx, tmp_path):
    write_tif(tmp_path / "data" / "v.tif", V, res=2.0)
    obs = run(ctx, "ras.vectorize", mask_path="v.tif", classes=[3], pixel_size_m=0.1)
    # UTM 2 m pixels: 4 px -> 16 m2, 2 px -> 8 m2; the given pixel size is not used
    assert (obs["count"], obs["total_pixels"], obs["total_area_m2"]) == (2, 6, 24.0)


def test_vectorize_geographic_mask_gives_square_degrees(ctx, tmp_path):
    write_tif(tmp_path / "data" / "ll.tif", V, crs="EPSG:4326", origin=(-80.0, 35.0), res=0.001)
    obs = run(ctx, "ras.vectorize", mask_path="ll.tif", classes=[3])
    # quirk: 4 px = 4e-6 deg2 rounds to 0.0; pixel_count = area / |a*e| = 4 and 2
    assert (obs["count"], obs["total_pixels"], obs["total_area_m2"]) == (2, 6, 0.0)


def test_vectorize_diagonal_pixels_are_two_polygons(ctx, tmp_path):
    write_png(tmp_path / "data" / "d.png", np.array([[1, 0], [0, 1]], np.uint8))
    obs = run(ctx, "ras.vectorize", mask_path="d.png", classes=[1], pixel_size_m=1.0)
    assert (obs["count"], obs["total_pixels"], obs["total_area_m2"]) == (2, 2, 2.0)  # 4-connected


@needs_examples
def test_vectorize_real_empty_mask(ctx):
    # tool-examples vectorize_empty: {count: 0, total_pixels: 0, total_area_m2: null}
    obs = run(ctx, "ras.vectorize", mask_path="empty_mask.png", classes=[1])
    assert (obs["count"], obs["total_pixels"], obs["total_area_m2"]) == (0, 0, None)


# ---------------------------------------------------------------- ras.stats
def test_stats_nodata_and_nan(ctx):
    obs = run(ctx, "ras.stats", image_path="f.tif")
    # valid: 1, 2, 3, 4, 6, 7, 8 (NaN and -9999 out): mean 31/7, population std by hand
    vals = [1, 2, 3, 4, 6, 7, 8]
    mean = sum(vals) / 7
    std = math.sqrt(sum((v - mean) ** 2 for v in vals) / 7)
    assert (obs["min"], obs["max"], obs["valid_pixels"], obs["nodata"]) == (1.0, 8.0, 7, -9999.0)
    assert obs["mean"] == pytest.approx(mean, rel=1e-6) and obs["std"] == pytest.approx(std, rel=1e-6)


def test_stats_without_ignoring_nodata(ctx):
    obs = run(ctx, "ras.stats", image_path="f.tif", ignore_nodata=False)
    assert (obs["min"], obs["valid_pixels"]) == (-9999.0, 8)  # NaN is still skipped


def test_stats_all_nodata_gives_nulls(ctx, tmp_path):
    write_tif(tmp_path / "data" / "nd.tif", np.full((2, 2), -1, np.float32), nodata=-1)
    obs = run(ctx, "ras.stats", image_path="nd.tif")
    assert (obs["min"], obs["max"], obs["mean"], obs["std"], obs["valid_pixels"]) == \
        (None, None, None, None, 0)


def test_stats_integer_mask_and_band_error(ctx):
    obs = run(ctx, "ras.stats", image_path="m.png")
    # sum of M = 3 + 4 + 9 + 255 = 271 over 16 px
    assert obs["mean"] == 271 / 16 and obs["nodata"] is None
    with pytest.raises(ToolError):
        run(ctx, "ras.stats", image_path="m.png", band=3)


@needs_real
def test_stats_real_float_raster(ctx):
    path = REALDATA / "rasterio-testdata" / "float_raster_with_nodata.tif"
    with rasterio.open(path) as src:
        z = src.read(1)
        v = z[np.isfinite(z) & (z != src.nodata)]
    obs = run(ctx, "ras.stats", image_path="rasterio-testdata/float_raster_with_nodata.tif")
    assert obs["valid_pixels"] == v.size == 98  # tool-examples stats_float_nodata
    assert obs["mean"] == pytest.approx(float(v.mean()), rel=1e-6)
    assert obs["max"] == 0.25


# ---------------------------------------------------------------- ras.sample_point(s)
@pytest.mark.parametrize("row,col,values", [
    (3, 3, {"1": 255}),
    (2, 0, {"1": 3}),
    (0, 0, {"1": 0}),
])
def test_sample_point_mask(ctx, row, col, values):
    obs = run(ctx, "ras.sample_point", image_path="m.png", row=row, col=col)
    assert obs == {"tool": "ras.sample_point", "row": row, "col": col, "pixel_values": values,
                   "is_inside": True}


def test_sample_point_casts_to_int(ctx, tmp_path):
    write_tif(tmp_path / "data" / "z.tif", np.array([[366.5, -2.7]], np.float32))
    # int() truncates toward zero: 366.5 -> 366, -2.7 -> -2
    assert run(ctx, "ras.sample_point", image_path="z.tif", row=0, col=0)["pixel_values"] == {"1": 366}
    assert run(ctx, "ras.sample_point", image_path="z.tif", row=0, col=1)["pixel_values"] == {"1": -2}


def test_sample_point_every_band_and_errors(ctx):
    assert run(ctx, "ras.sample_point", image_path="rgb.png", row=0, col=0)["pixel_values"] == \
        {"1": 255, "2": 0, "3": 0}
    with pytest.raises(ToolError):  # the benchmark's "Coordinates out of bounds" stub
        run(ctx, "ras.sample_point", image_path="m.png", row=4, col=0)
    with pytest.raises(ToolError):  # int(NaN) raises there
        run(ctx, "ras.sample_point", image_path="f.tif", row=1, col=1)


def test_sample_points_inside_and_outside(ctx):
    obs = run(ctx, "ras.sample_points", image_path="m.png",
              points=[{"row": 2, "col": 0}, {"row": 9, "col": 9}, {"row": -1, "col": 0}])
    assert obs["total_points"] == 3
    assert obs["results"] == [
        {"row": 2, "col": 0, "pixel_values": {"1": 3}, "is_inside": True},
        {"row": 9, "col": 9, "pixel_values": None, "is_inside": False},
        {"row": -1, "col": 0, "pixel_values": None, "is_inside": False}]


@needs_examples
def test_sample_points_real_dem_truncates(ctx):
    with rasterio.open(EXAMPLES / "dem_hill_utm.tif") as src:
        z = src.read(1)
    pts = [{"row": 35, "col": 45}, {"row": 0, "col": 0}, {"row": 79, "col": 79}]
    obs = run(ctx, "ras.sample_points", image_path="dem_hill_utm.tif", points=pts)
    got = [r["pixel_values"]["1"] for r in obs["results"]]
    assert got == [int(z[p["row"], p["col"]]) for p in pts]
    assert got == [366, 200, 286]  # tool-examples sample_points_float_dem


def test_sample_points_missing_row_fails(ctx):
    with pytest.raises(ToolError):
        run(ctx, "ras.sample_points", image_path="m.png", points=[{"col": 1}])


# ---------------------------------------------------------------- ras.clip
def test_clip_georeferenced_clamped(ctx):
    obs = run(ctx, "ras.clip", image_path="m.tif", x1=2, x2=4, y1=0, y2=9)
    arr, src = band1(ctx, obs["output_path"])
    assert arr.tolist() == [[3, 3, 0, 0], [3, 0, 0, 255]] and obs["clamped"] is True
    # 2 m pixels, origin (500000, 3300000) moved down 2 rows: the Affine's 9 numbers
    assert obs["transform"] == [2.0, 0.0, 500000.0, 0.0, -2.0, 3299996.0, 0.0, 0.0, 1.0]
    assert obs["crs"] == "EPSG:32615" and src.crs.to_epsg() == 32615


def test_clip_without_crs_reports_shifted_identity(ctx):
    obs = run(ctx, "ras.clip", image_path="m.png", x1=3, x2=1, y1=1, y2=3)  # bounds reordered
    assert obs["window"] == {"x1": 1, "x2": 3, "y1": 1, "y2": 3} and obs["clamped"] is False
    # identity grid shifted by (col 1, row 1)
    assert obs["transform"] == [1.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0]
    assert obs["crs"] is None and obs["out_shape"] == [2, 2] and obs["dtype"] == "uint8"


@pytest.mark.parametrize("window", [(1, 1, 0, 2), (10, 12, 0, 1), (0, 2, -5, -1)])
def test_clip_empty_or_outside_fails(ctx, window):
    x1, x2, y1, y2 = window
    with pytest.raises(ToolError):
        run(ctx, "ras.clip", image_path="m.png", x1=x1, x2=x2, y1=y1, y2=y2)


@needs_real
def test_clip_real_rgb(ctx):
    obs = run(ctx, "ras.clip", image_path="rasterio-testdata/RGB.byte.tif", x1=100, x2=300,
              y1=200, y2=500)
    with rasterio.open(REALDATA / "rasterio-testdata" / "RGB.byte.tif") as src:
        t = src.transform
    # origin moved 200 columns east and 100 rows south (tool-examples clip_rgb_window)
    assert obs["transform"][2] == pytest.approx(t.c + 200 * t.a)
    assert obs["transform"][5] == pytest.approx(t.f + 100 * t.e)
    assert len(obs["transform"]) == 9 and obs["out_shape"] == [200, 300] and obs["bands"] == 3


# ---------------------------------------------------------------- ras.concat
def test_concat_georeferenced(ctx, tmp_path):
    write_tif(tmp_path / "data" / "a.tif", np.array([[5, 7]], np.float32))
    write_tif(tmp_path / "data" / "b.tif", np.array([[2, 10]], np.uint8))
    obs = run(ctx, "ras.concat", image_path_list=["a.tif", "b.tif"])
    # float32 + uint8 -> float32; 1 + 1 bands
    assert (obs["bands"], obs["dtype"], obs["height"], obs["width"]) == (2, "float32", 1, 2)
    assert obs["band_map"][1] == {"path": "b.tif", "in_bands": 1, "out_start_band": 2,
                                  "out_end_band": 2}
    assert obs["transform"] == [1.0, 0.0, 500000.0, 0.0, -1.0, 3300000.0, 0.0, 0.0, 1.0]


def test_concat_without_crs_reports_identity(ctx):
    obs = run(ctx, "ras.concat", image_path_list=["m.png", "m.png"])
    assert obs["crs"] is None and obs["bands"] == 2
    assert obs["transform"] == [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]


@pytest.mark.parametrize("paths,dim", [
    (["m.png", "v.png"], "bands"),       # 4x4 vs 5x5
    (["m.png", "m.tif"], "bands"),       # identity vs UTM transform
    (["m.png"], "pixels"),               # only bands/channels
    ([], "bands"),
])
def test_concat_errors(ctx, paths, dim):
    with pytest.raises(ToolError):
        run(ctx, "ras.concat", image_path_list=paths, dim=dim)


# ---------------------------------------------------------------- ras.grid_windows
def test_grid_windows_even_and_remainder(ctx, tmp_path):
    assert run(ctx, "ras.grid_windows", image_path="m.png", n=2)["windows"] == \
        [[0, 2, 0, 2], [0, 2, 2, 4], [2, 4, 0, 2], [2, 4, 2, 4]]
    write_png(tmp_path / "data" / "r.png", np.zeros((5, 7), np.uint8))
    obs = run(ctx, "ras.grid_windows", image_path="r.png", n=2)
    # base tile 5//2 = 2 rows, 7//2 = 3 cols; the last row/col takes the remainder
    assert obs["windows"] == [[0, 2, 0, 3], [0, 2, 3, 7], [2, 5, 0, 3], [2, 5, 3, 7]]
    assert (obs["base_tile_px"], obs["image_shape"], obs["count"]) == ([2, 3], [5, 7], 4)


@pytest.mark.parametrize("n", [0, 5])
def test_grid_windows_errors(ctx, n):
    with pytest.raises(ToolError):
        run(ctx, "ras.grid_windows", image_path="m.png", n=n)


@needs_real
def test_grid_windows_real_florence(ctx):
    obs = run(ctx, "ras.grid_windows",
              image_path="xbd-hurricane-florence/hurricane-florence_00000018_mask.png", n=3)
    # 1024 // 3 = 341; last tile 682..1024 (tool-examples grid_windows_florence_3)
    assert obs["base_tile_px"] == [341, 341] and obs["windows"][8] == [682, 1024, 682, 1024]


# ---------------------------------------------------------------- ras.diff
def test_diff_values_and_nodata(ctx, tmp_path):
    write_tif(tmp_path / "data" / "a.tif", np.array([[5, 7, -1]], np.float32), nodata=-1)
    write_tif(tmp_path / "data" / "b.tif", np.array([[2, 10, 3]], np.float32))
    obs = run(ctx, "ras.diff", image_a_path="a.tif", image_b_path="b.tif")
    # 5-2 = 3, 7-10 = -3, the third pixel is nodata in A
    assert (obs["min"], obs["max"], obs["mean"], obs["valid_pixels"], obs["nodata"]) == \
        (-3.0, 3.0, 0.0, 2, -9999.0)
    arr, _ = band1(ctx, obs["output_path"])
    assert arr.tolist() == [[3.0, -3.0, -9999.0]]


def test_diff_errors(ctx, tmp_path):
    write_tif(tmp_path / "data" / "c.tif", np.zeros((2, 2), np.float32))
    write_tif(tmp_path / "data" / "d.tif", np.zeros((4, 4), np.float32), crs="EPSG:32616")
    with pytest.raises(ToolError):  # size
        run(ctx, "ras.diff", image_a_path="m.tif", image_b_path="c.tif")
    with pytest.raises(ToolError):  # CRS
        run(ctx, "ras.diff", image_a_path="m.tif", image_b_path="d.tif")
    with pytest.raises(ToolError):  # transform (2 m vs identity grid)
        run(ctx, "ras.diff", image_a_path="m.tif", image_b_path="m.png")


# ---------------------------------------------------------------- missing inputs
def test_missing_mask_gives_the_benchmarks_empty_results(ctx):
    # analysis.py: _tool_guard turns imread's FileNotFoundError into {tool, note, count: 0,
    # inputs...}; ras_vectorize checks the path itself and answers zero features
    obs = run(ctx, "ras.count_pixels", mask_path="absent_mask.png", classes=[1, 2])
    assert obs == {"tool": "ras.count_pixels", "note": obs["note"], "count": 0,
                   "mask_path": "absent_mask.png", "classes": [1, 2]}
    obs = run(ctx, "ras.vectorize", mask_path="absent_mask.png", classes=[1])
    assert (obs["vector_path"], obs["count"], obs["total_pixels"], obs["total_area_m2"]) == \
        (None, 0, 0, None)


@pytest.mark.parametrize("tool,args", [
    ("ras.area", {"mask_path": "absent.png", "pixel_size_m": 1.0}),   # own try/except: a stub
    ("ras.stats", {"image_path": "absent.tif"}),                       # rasterio's IOError
    ("ras.threshold", {"image_path": "absent.tif", "threshold": 1}),
    ("ras.sample_point", {"image_path": "absent.tif", "row": 0, "col": 0}),
])
def test_missing_raster_fails_elsewhere(ctx, tool, args):
    with pytest.raises(ToolError):
        run(ctx, tool, **args)


def test_blank_and_empty_mask_names(ctx):
    # a blank name is a file that does not exist: imread raises FileNotFoundError, so
    # ras.count_pixels' _tool_guard answers the empty result; ras_vectorize's os.path.exists
    # is False for "" as well as for "  "
    obs = run(ctx, "ras.count_pixels", mask_path="   ", classes=[1])
    assert (obs["count"], obs["mask_path"], obs["classes"]) == (0, "   ", [1])
    for name in ("", "  "):
        obs = run(ctx, "ras.vectorize", mask_path=name, classes=[1])
        assert (obs["vector_path"], obs["count"], obs["total_area_m2"]) == (None, 0, None)
    # imread("") reads the working directory ("ImageIO does not support reading folders"):
    # not a FileNotFoundError, so the guard returns its stub, an error
    with pytest.raises(ToolError):
        run(ctx, "ras.count_pixels", mask_path="", classes=[1])
