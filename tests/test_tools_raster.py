"""Raster tools on tiny hand-made rasters; expected values worked out by hand in comments."""
import json

import numpy as np
import pytest
import rasterio

from kernel.tools import ToolInputError, call_tool
from kernel.tools._io import read_mask_tags
from kernel.tools.testing import make_ctx, write_png, write_tif

# 4x4 mask; value counts by hand: 0 -> 7, 1 -> 3, 2 -> 2, 3 -> 3, 255 -> 1 (sum 16)
M = np.array([[0, 0, 1, 1],
              [0, 2, 2, 1],
              [3, 3, 0, 0],
              [3, 0, 0, 255]], dtype=np.uint8)


@pytest.fixture
def ctx(tmp_path):
    c = make_ctx(tmp_path)
    write_png(tmp_path / "data" / "m.png", M)
    return c


def read(ctx, name):
    with rasterio.open(ctx.work_dir / name) as src:
        return src.read(1), src.crs, src.nodata


# ---------------------------------------------------------------- ras.count_pixels
def test_count_pixels(ctx):
    obs = call_tool("ras.count_pixels", {"mask_path": "m.png", "classes": [1, 3]}, ctx)
    assert obs == {"tool": "ras.count_pixels", "counts": {"1": 3, "3": 3}, "total": 6,
                   "classes": [1, 3]}


def test_count_pixels_absent_class(ctx):
    # benchmark parity: the benchmark counts an absent class as 0 (analysis.py:ras_count_pixels); it
    # used to raise ClassIndexError. Classes 4 and 7 are not in M -> 0; total = 3 + 0 + 0.
    obs = call_tool("ras.count_pixels", {"mask_path": "m.png", "classes": [1, 4, 7]}, ctx)
    assert obs["counts"] == {"1": 3, "4": 0, "7": 0} and obs["total"] == 3


def test_count_pixels_errors(ctx, tmp_path):
    # benchmark parity: a missing mask is the benchmark's empty result (_tool_guard on
    # FileNotFoundError), not an error; a path outside the data roots still is one
    obs = call_tool("ras.count_pixels", {"mask_path": "nope.png", "classes": [1]}, ctx)
    assert obs["count"] == 0 and "counts" not in obs and obs["mask_path"] == "nope.png"
    with pytest.raises(ToolInputError) as ei:
        call_tool("ras.count_pixels", {"mask_path": "/etc/passwd", "classes": [1]}, ctx)
    assert ei.value.argument == "mask_path"
    # benchmark parity: an empty class list and an RGB image are not refused by the benchmark: {} / 0,
    # and every band is compared (imread reads H x W x 3): 4 pixels x 3 bands = 12 samples,
    # of which the red pixel's two zero bands and the 3 black pixels' 9 -> 11 zeros, 1 x 255
    assert call_tool("ras.count_pixels", {"mask_path": "m.png", "classes": []},
                     ctx)["counts"] == {}
    rgb = np.zeros((2, 2, 3), dtype=np.uint8)
    rgb[0, 0] = (255, 0, 0)
    write_png(tmp_path / "data" / "rgb.png", rgb)
    obs = call_tool("ras.count_pixels", {"mask_path": "rgb.png", "classes": [0, 255]}, ctx)
    assert obs["counts"] == {"0": 11, "255": 1}


# ---------------------------------------------------------------- ras.area
def test_area(ctx, tmp_path):
    # class 3: 3 px * 0.5^2 = 0.75 m2; all non-zero: 16 - 7 = 9 px * 0.25 = 2.25 m2
    obs = call_tool("ras.area", {"mask_path": "m.png", "pixel_size_m": 0.5, "classes": [3]}, ctx)
    assert obs == {"tool": "ras.area", "area_m2": 0.75, "pixel_count": 3, "pixel_size_m": 0.5}
    obs = call_tool("ras.area", {"mask_path": "m.png", "pixel_size_m": 0.5}, ctx)
    assert (obs["pixel_count"], obs["area_m2"]) == (9, 2.25)
    # benchmark parity: the georeferencing is never read (calculate.py:ras_area): a 2 m GeoTIFF with
    # pixel_size_m 0.5 still gives 9 px * 0.25 = 2.25 m2
    write_tif(tmp_path / "data" / "m.tif", M, res=2.0)
    obs = call_tool("ras.area", {"mask_path": "m.tif", "pixel_size_m": 0.5}, ctx)
    assert (obs["pixel_count"], obs["area_m2"], obs["pixel_size_m"]) == (9, 2.25, 0.5)


def test_area_errors(ctx):
    # the benchmark's pixel_size_m is a required float: null and missing are refused
    with pytest.raises(ToolInputError) as ei:
        call_tool("ras.area", {"mask_path": "m.png", "pixel_size_m": None}, ctx)
    assert ei.value.argument == "pixel_size_m"
    with pytest.raises(ToolInputError):
        call_tool("ras.area", {"mask_path": "m.png"}, ctx)
    # benchmark parity: a negative size is squared (9 px * 1 = 9.0) and an absent class is 0, as there
    assert call_tool("ras.area", {"mask_path": "m.png", "pixel_size_m": -1}, ctx)["area_m2"] == 9.0
    assert call_tool("ras.area", {"mask_path": "m.png", "pixel_size_m": 1, "classes": [9]},
                     ctx)["pixel_count"] == 0


# ---------------------------------------------------------------- ras.threshold
def test_threshold(ctx, tmp_path):
    img = np.array([[1, 2, 3], [4, np.nan, 6], [7, 8, -9999]], dtype=np.float32)
    write_tif(tmp_path / "data" / "f.tif", img, nodata=-9999)
    obs = call_tool("ras.threshold", {"image_path": "f.tif", "threshold": 4}, ctx)
    # >= 4 among valid pixels: 4, 6, 7, 8 (NaN and nodata never selected)
    assert obs["selected_pixels"] == 4 and obs["image_path"] == "f.tif"
    out, crs, nodata = read(ctx, obs["mask_path"])
    assert out.tolist() == [[0, 0, 0], [255, 0, 255], [255, 255, 0]]
    assert crs.to_epsg() == 32615 and nodata == 0
    assert read_mask_tags(ctx.work_dir / obs["mask_path"])[0] == {0: "background", 255: "selected"}
    obs2 = call_tool("ras.threshold", {"image_path": "f.tif", "threshold": 2, "op": "<",
                                       "true_value": 1}, ctx)
    assert obs2["selected_pixels"] == 1  # only the 1
    # the binary mask holds {0, 255}: class 1 counts 0 (benchmark parity: no ClassIndexError)
    assert call_tool("ras.count_pixels", {"mask_path": obs["mask_path"], "classes": [255]},
                     ctx)["total"] == 4
    assert call_tool("ras.count_pixels", {"mask_path": obs["mask_path"], "classes": [1]},
                     ctx)["total"] == 0


def test_threshold_errors(ctx):
    with pytest.raises(ToolInputError) as ei:
        call_tool("ras.threshold", {"image_path": "m.png", "threshold": 1, "op": "!="}, ctx)
    assert ei.value.argument == "op"
    with pytest.raises(ToolInputError) as ei:
        call_tool("ras.threshold", {"image_path": "m.png", "threshold": 1, "band": 2}, ctx)
    assert ei.value.argument == "band"
    # benchmark parity: true_value is cast to uint8 as the benchmark does (300 -> 44); a false_value
    # outside 0..255 cannot be the uint8 nodata and fails there too
    obs = call_tool("ras.threshold", {"image_path": "m.png", "threshold": 1, "true_value": 300},
                    ctx)
    assert set(np.unique(read(ctx, obs["mask_path"])[0]).tolist()) == {0, 44}
    with pytest.raises(ToolInputError):
        call_tool("ras.threshold", {"image_path": "m.png", "threshold": 1, "false_value": 300},
                  ctx)


# ---------------------------------------------------------------- mask.compose_multiclass
def test_compose_multiclass(ctx, tmp_path):
    a = np.zeros((3, 3), np.uint8)
    a[0, 0] = a[0, 1] = 255
    b = np.zeros((3, 3), np.uint8)
    b[0, 1] = b[2, 2] = 1
    write_png(tmp_path / "data" / "a.png", a)
    write_png(tmp_path / "data" / "b.png", b)
    obs = call_tool("mask.compose_multiclass", {"mask_paths": ["a.png", "b.png"],
                                                "class_values": [3, 7]}, ctx)
    out, _, nodata = read(ctx, obs["mask_path"])
    # (0,1) is in both: the later mask (7) wins
    assert out.tolist() == [[3, 7, 0], [0, 0, 0], [0, 0, 7]] and nodata == 0
    assert obs["classes"] == {"0": "background", "3": "building_total_damage", "7": "tree_fallen"}
    assert obs["class_values"] == [3, 7] and obs["mask_path"].endswith(".tif")
    # class 7 covers 2 px; class 5 is absent and counts 0 (benchmark parity: no ClassIndexError)
    assert call_tool("ras.count_pixels", {"mask_path": obs["mask_path"], "classes": [7]},
                     ctx)["total"] == 2
    assert call_tool("ras.count_pixels", {"mask_path": obs["mask_path"], "classes": [5]},
                     ctx)["total"] == 0


def test_compose_multiclass_errors(ctx, tmp_path):
    write_png(tmp_path / "data" / "a.png", np.array([[0, 255]], np.uint8))
    write_png(tmp_path / "data" / "big.png", np.zeros((2, 2), np.uint8))
    with pytest.raises(ToolInputError):
        call_tool("mask.compose_multiclass", {"mask_paths": ["a.png"], "class_values": [1, 2]}, ctx)
    with pytest.raises(ToolInputError):
        call_tool("mask.compose_multiclass", {"mask_paths": [], "class_values": []}, ctx)
    # benchmark parity: M holds 1, 2, 3, 255 (not binary); the benchmark takes every value > 0: 9 px
    obs = call_tool("mask.compose_multiclass", {"mask_paths": ["m.png"], "class_values": [1]}, ctx)
    assert int((read(ctx, obs["mask_path"])[0] == 1).sum()) == 9
    with pytest.raises(ToolInputError):
        call_tool("mask.compose_multiclass", {"mask_paths": ["a.png", "big.png"],
                                              "class_values": [1, 2]}, ctx)


# ---------------------------------------------------------------- ras.vectorize
V = np.array([[3, 3, 0, 0, 0],
              [3, 3, 0, 0, 0],
              [0, 0, 0, 2, 0],
              [0, 0, 0, 0, 0],
              [0, 0, 0, 3, 3]], dtype=np.uint8)


def test_vectorize_pixel_space(ctx, tmp_path):
    write_png(tmp_path / "data" / "v.png", V)
    obs = call_tool("ras.vectorize", {"mask_path": "v.png", "classes": [3], "pixel_size_m": 0.5},
                    ctx)
    # two class-3 regions: 4 px and 2 px -> 6 px * 0.25 m2 = 1.5 m2
    assert obs["count"] == 2 and obs["total_pixels"] == 6 and obs["total_area_m2"] == 1.5
    doc = json.loads((ctx.work_dir / obs["vector_path"]).read_text())
    assert "crs" not in doc
    props = sorted((f["properties"]["pixel_count"], f["properties"]["area_m2"],
                    f["properties"]["class"]) for f in doc["features"])
    assert props == [(2, 0.5, 3), (4, 1.0, 3)]
    from shapely.geometry import shape
    bounds = sorted(shape(f["geometry"]).bounds for f in doc["features"])
    assert bounds == [(0.0, 0.0, 2.0, 2.0), (3.0, 4.0, 5.0, 5.0)]  # x = col, y = row
    # benchmark parity: without a pixel size the benchmark stores area_m2 0 per polygon, so the total
    # is 0.0, not null (analysis.py:_vectorize_mask_to_gdf)
    obs = call_tool("ras.vectorize", {"mask_path": "v.png", "classes": [2, 3]}, ctx)
    assert obs["count"] == 3 and obs["total_pixels"] == 7 and obs["total_area_m2"] == 0.0


def test_vectorize_georeferenced(ctx, tmp_path):
    write_tif(tmp_path / "data" / "v.tif", V, res=2.0)
    obs = call_tool("ras.vectorize", {"mask_path": "v.tif", "classes": [3]}, ctx)
    # 2 m pixels: 4 px -> 16 m2, 2 px -> 8 m2
    assert obs["count"] == 2 and obs["total_pixels"] == 6 and obs["total_area_m2"] == 24.0
    doc = json.loads((ctx.work_dir / obs["vector_path"]).read_text())
    assert doc["crs"]["properties"]["name"].endswith("32615")


def test_vectorize_diagonal_is_two_regions_and_errors(ctx, tmp_path):
    write_png(tmp_path / "data" / "d.png", np.array([[1, 0], [0, 1]], np.uint8))
    assert call_tool("ras.vectorize", {"mask_path": "d.png", "classes": [1]}, ctx)["count"] == 2
    # benchmark parity: an absent class gives 0 polygons and a null total area, as the benchmark does
    obs = call_tool("ras.vectorize", {"mask_path": "d.png", "classes": [255]}, ctx)
    assert (obs["count"], obs["total_pixels"], obs["total_area_m2"]) == (0, 0, None)
    # a missing mask: the benchmark's explicit "zero features" answer, not an error
    obs = call_tool("ras.vectorize", {"mask_path": "missing.png", "classes": [1]}, ctx)
    assert (obs["vector_path"], obs["count"], obs["total_area_m2"]) == (None, 0, None)


# ---------------------------------------------------------------- other raster tools
def test_stats(ctx, tmp_path):
    write_tif(tmp_path / "data" / "s.tif", np.array([[1, 2], [3, -1]], np.float32), nodata=-1)
    obs = call_tool("ras.stats", {"image_path": "s.tif"}, ctx)
    # valid 1, 2, 3: mean 2, population std sqrt(2/3)
    assert (obs["min"], obs["max"], obs["mean"], obs["valid_pixels"]) == (1.0, 3.0, 2.0, 3)
    assert obs["std"] == pytest.approx((2 / 3) ** 0.5)
    assert call_tool("ras.stats", {"image_path": "s.tif", "ignore_nodata": False},
                     ctx)["valid_pixels"] == 4


def test_clip_grid_sample(ctx, tmp_path):
    write_tif(tmp_path / "data" / "m.tif", M, res=2.0)
    obs = call_tool("ras.clip", {"image_path": "m.tif", "x1": 2, "x2": 4, "y1": 0, "y2": 9}, ctx)
    out, crs, _ = read(ctx, obs["output_path"])
    assert out.tolist() == [[3, 3, 0, 0], [3, 0, 0, 255]] and obs["clamped"] is True
    assert obs["window"] == {"x1": 2, "x2": 4, "y1": 0, "y2": 4} and obs["out_shape"] == [2, 4]
    # origin moves down two 2 m rows: y = 3300000 - 4
    assert obs["transform"][5] == 3300000.0 - 4.0 and crs.to_epsg() == 32615
    with pytest.raises(ToolInputError):
        call_tool("ras.clip", {"image_path": "m.tif", "x1": 10, "x2": 12, "y1": 0, "y2": 1}, ctx)
    g = call_tool("ras.grid_windows", {"image_path": "m.png", "n": 2}, ctx)
    assert g["windows"] == [[0, 2, 0, 2], [0, 2, 2, 4], [2, 4, 0, 2], [2, 4, 2, 4]]
    with pytest.raises(ToolInputError):
        call_tool("ras.grid_windows", {"image_path": "m.png", "n": 5}, ctx)
    p = call_tool("ras.sample_point", {"image_path": "m.png", "row": 3, "col": 3}, ctx)
    assert p["pixel_values"] == {"1": 255}
    with pytest.raises(ToolInputError):
        call_tool("ras.sample_point", {"image_path": "m.png", "row": 4, "col": 0}, ctx)
    ps = call_tool("ras.sample_points", {"image_path": "m.png",
                                         "points": [{"row": 2, "col": 0}, {"row": 9, "col": 9}]}, ctx)
    assert [r["is_inside"] for r in ps["results"]] == [True, False]
    assert ps["results"][0]["pixel_values"] == {"1": 3}


def test_diff_and_concat(ctx, tmp_path):
    write_tif(tmp_path / "data" / "a.tif", np.array([[5, 7]], np.float32))
    write_tif(tmp_path / "data" / "b.tif", np.array([[2, 10]], np.float32))
    d = call_tool("ras.diff", {"image_a_path": "a.tif", "image_b_path": "b.tif"}, ctx)
    assert (d["min"], d["max"], d["mean"], d["valid_pixels"]) == (-3.0, 3.0, 0.0, 2)
    c = call_tool("ras.concat", {"image_path_list": ["a.tif", "b.tif"]}, ctx)
    assert c["bands"] == 2 and c["band_map"][1]["out_start_band"] == 2
    write_tif(tmp_path / "data" / "c.tif", np.zeros((2, 2), np.float32))
    with pytest.raises(ToolInputError):
        call_tool("ras.diff", {"image_a_path": "a.tif", "image_b_path": "c.tif"}, ctx)
