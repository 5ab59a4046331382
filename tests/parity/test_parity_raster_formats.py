"""Parity: input formats that cannot hold a float32 result, and non-finite numbers in
observations.

Expected values are worked out by hand from the benchmark's documented behaviour
(Junjue-Wang/DORA ``dora/tools/analysis.py`` @2b24be70 ``ras_slope`` / ``ras_focal_stats`` /
``ras_stats`` / ``tool_reduce``, ``calculate.py`` @7b969887 ``calc_*``): both write their float32
output with the input's own rasterio profile, driver included, and PNG/JPEG/GIF/BMP drivers refuse
float32 (GDAL: "PNG driver doesn't support data type Float32"); the tool servers answer with
``json.dumps``, which writes NaN / Infinity as tokens that the harness's ``json.loads`` reads back
as floats.
"""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
import rasterio

from kernel.taskfile import from_storage, to_storage
from kernel.tools import ToolContext, ToolError, call_tool, directory_resolver
from kernel.tools.testing import write_png, write_tif
from replay.mcp_server import _text

#: z = col: 1 unit per pixel eastwards, constant along the rows
RAMP = np.array([[0, 1, 2], [0, 1, 2]], dtype=np.uint8)


@pytest.fixture
def ctx(tmp_path):
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    write_png(data / "ramp.png", RAMP)
    write_tif(data / "ramp.tif", RAMP.astype(np.float32))
    f = np.array([[1.0, np.nan], [3.0, 5.0]], dtype=np.float32)
    write_tif(data / "nan_nodata.tif", f, nodata=float("nan"))
    return ToolContext(work_dir=tmp_path / "work", resolve_path=directory_resolver(data))


def run(ctx, tool, **args):
    return call_tool(tool, args, ctx)


def test_slope_of_a_png_dem_reports_a_path_that_names_no_file(ctx):
    obs = run(ctx, "ras.slope", dem_path="ramp.png")
    # np.gradient of the ramp: dz/dcol = 1 everywhere (central (2-0)/2, one-sided 1-0 and 2-1),
    # dz/drow = 0; no CRS, so the pixel size is 1: atan(1) = 45 degrees at every pixel
    assert obs["stats"] == {"min": pytest.approx(45.0), "max": pytest.approx(45.0),
                            "mean": pytest.approx(45.0)}
    # the benchmark's float32 write in the PNG's driver fails; its fallback np.save()s the array
    # as <slope_path>.npy, and slope_path itself names no file
    assert not (ctx.work_dir / obs["slope_path"]).exists()
    saved = np.load(ctx.work_dir / (obs["slope_path"] + ".npy"))
    assert saved.dtype == np.float32 and saved.shape == (2, 3)
    assert np.allclose(saved, 45.0)


def test_slope_of_the_same_ramp_as_geotiff_writes_it(ctx):
    obs = run(ctx, "ras.slope", dem_path="ramp.tif")
    assert obs["stats"]["mean"] == pytest.approx(45.0)  # the same ramp, 1 m pixels
    assert (ctx.work_dir / obs["slope_path"]).is_file()


def test_focal_stats_of_a_png_fails(ctx):
    # the benchmark returns its stub (an error): the PNG driver cannot store the float32 result
    with pytest.raises(ToolError, match="Float32"):
        run(ctx, "ras.focal_stats", raster_path="ramp.png", statistic="mean", window_size=3)
    # the same values in a GeoTIFF work. 3x3 mean with scipy's nearest border (edge repeated):
    # a centre-column window holds columns 0, 1, 2 -> (0+1+2)/3 = 1; at column 0 the window
    # holds columns 0, 0, 1 -> 1/3; at column 2 it holds 1, 2, 2 -> 5/3 (all rows alike)
    obs = run(ctx, "ras.focal_stats", raster_path="ramp.tif", statistic="mean", window_size=3)
    assert obs["shape"] == [2, 3]
    with rasterio.open(ctx.work_dir / obs["output_path"]) as src:
        out = src.read(1)
    assert np.allclose(out, [[1 / 3, 1, 5 / 3], [1 / 3, 1, 5 / 3]], rtol=1e-6)


def test_stats_echoes_a_nan_nodata_as_nan(ctx):
    obs = run(ctx, "ras.stats", image_path="nan_nodata.tif")
    # float(src.nodata) is NaN; valid pixels 1, 3, 5 (NaN is never valid): mean 3, std sqrt(8/3)
    assert math.isnan(obs["nodata"])
    assert (obs["min"], obs["max"], obs["valid_pixels"]) == (1.0, 5.0, 3)
    assert obs["mean"] == pytest.approx(3.0) and obs["std"] == pytest.approx(math.sqrt(8 / 3))
    # the MCP text is what the benchmark's server writes: a bare NaN token
    assert '"nodata": NaN' in _text(obs)


@pytest.mark.parametrize("tool,args,key,expected", [
    ("calc.add", {"a": "nan", "b": 1}, "sum", "nan"),            # float("nan") + 1
    ("calc.mul", {"a": 1e308, "b": 10}, "product", "inf"),       # overflows to inf
    ("calc.sub", {"a": "-inf", "b": 1}, "difference", "-inf"),
    ("calc.volume", {"area_m2": 1e308, "depth_m": 1e308}, "volume_m3", "inf"),
])
def test_calc_keeps_non_finite_results(tool, args, key, expected, tmp_path):
    obs = call_tool(tool, args, ToolContext(work_dir=tmp_path))
    value = obs[key]
    assert isinstance(value, float)
    assert (math.isnan(value) if expected == "nan" else value == float(expected))


def test_reduce_keeps_a_nan_best_value(tmp_path):
    # Python's max() keeps the first item when the later one does not compare greater:
    # 3.0 > NaN is False, so the NaN item (index 0) wins, as in the benchmark's tool_reduce
    obs = call_tool("tool.reduce", {"values": [{"a": float("nan")}, {"a": 3}], "field": "a"},
                    ToolContext(work_dir=tmp_path))
    assert math.isnan(obs["best_value"]) and obs["best_index"] == 0


def test_non_finite_observations_are_tagged_for_storage(ctx):
    obs = run(ctx, "ras.stats", image_path="nan_nodata.tif")
    stored = to_storage(obs)
    json.dumps(stored, allow_nan=False)  # what a JSON column accepts
    assert stored["nodata"] == {"$float": "NaN"}
    assert math.isnan(from_storage(stored)["nodata"])


@pytest.fixture
def ycbcr(tmp_path):
    """A 3-band uint8 GeoTIFF stored JPEG-compressed with the YCbCr photometric (as
    rasterio-testdata/goes.tif is)."""
    path = tmp_path / "data" / "rgb_jpeg.tif"
    path.parent.mkdir(exist_ok=True)
    rgb = np.zeros((3, 32, 32), np.uint8)
    rgb[:, 8:24, 8:24] = 200
    from rasterio.transform import from_origin

    with rasterio.open(path, "w", driver="GTiff", width=32, height=32, count=3, dtype="uint8",
                       crs="EPSG:32615", transform=from_origin(500000, 3300000, 1, 1),
                       compress="jpeg", photometric="ycbcr", tiled=True, blockxsize=16,
                       blockysize=16) as dst:
        dst.write(rgb)
    return path


@pytest.mark.parametrize("tool,args", [
    ("ras.threshold", {"image_path": "rgb_jpeg.tif", "threshold": 100}),
    ("ras.clip", {"image_path": "rgb_jpeg.tif", "x1": 0, "x2": 8, "y1": 0, "y2": 8}),
    ("ras.diff", {"image_a_path": "rgb_jpeg.tif", "image_b_path": "rgb_jpeg.tif"}),
    ("mask.compose_multiclass", {"mask_paths": ["rgb_jpeg.tif"], "class_values": [1]}),
    ("ras.focal_stats", {"raster_path": "rgb_jpeg.tif"}),
])
def test_a_ycbcr_source_profile_fails_where_the_benchmark_copies_it(ctx, ycbcr, tool, args):
    # the benchmark writes these outputs with the input's profile, photometric=YCbCr included,
    # which GDAL refuses without JPEG compression or for one band: its call returns a stub
    with pytest.raises(ToolError, match="YCBCR"):
        run(ctx, tool, **args)


def test_ycbcr_terrain_outputs_take_the_benchmark_fallbacks(ctx, ycbcr):
    slope = run(ctx, "ras.slope", dem_path="rgb_jpeg.tif")
    assert not (ctx.work_dir / slope["slope_path"]).exists()  # saved as .npy only
    assert (ctx.work_dir / (slope["slope_path"] + ".npy")).is_file()
    shade = run(ctx, "ras.hillshade", dem_path="rgb_jpeg.tif")
    with rasterio.open(ctx.work_dir / shade["hillshade_path"]) as src:  # Pillow's plain TIFF
        assert src.crs is None and src.count == 1 and src.dtypes[0] == "uint8"
    # ras.stats and ras.sample_point write nothing and answer as for any GeoTIFF
    assert run(ctx, "ras.stats", image_path="rgb_jpeg.tif")["valid_pixels"] == 32 * 32


def test_resample_re_encodes_a_jpeg_source_as_jpeg(ctx, ycbcr):
    # the benchmark's ras.resample writes with src.profile.copy(): the JPEG/YCbCr options stay,
    # so its output is lossy-re-encoded the same way (same GDAL encoder, same values)
    obs = run(ctx, "ras.resample", raster_path="rgb_jpeg.tif", target_pixel_size_m=2.0)
    assert obs["shape"] == [16, 16]  # floor(32 * 1/2)
    with rasterio.open(ctx.work_dir / obs["output_path"]) as src:
        assert src.compression.name == "jpeg" and src.photometric.name == "ycbcr"
        assert src.count == 3 and src.crs.to_epsg() == 32615


def test_resample_of_a_lossless_source_keeps_the_studio_profile(ctx):
    obs = run(ctx, "ras.resample", raster_path="ramp.tif", target_pixel_size_m=0.5)
    with rasterio.open(ctx.work_dir / obs["output_path"]) as src:
        assert src.compression is None or src.compression.name != "jpeg"


def test_count_pixels_decodes_a_jpeg_tiff_as_imread_does(ctx, tmp_path):
    # the benchmark's skimage.io.imread reads a JPEG TIFF through tifffile + imagecodecs
    # (libjpeg); Pillow's libjpeg decode gives the same samples (checked against imagecodecs
    # 2026.3.6, the benchmark's pin), GDAL's decode differs for most samples of a noisy image.
    # Expected: the counts over all three bands of Pillow's decode, which GDAL's do not match.
    from PIL import Image
    from rasterio.transform import from_origin

    path = tmp_path / "data" / "noisy_jpeg.tif"
    rgb = np.random.default_rng(3).integers(0, 256, (3, 64, 64)).astype(np.uint8)
    with rasterio.open(path, "w", driver="GTiff", width=64, height=64, count=3, dtype="uint8",
                       crs="EPSG:32615", transform=from_origin(0, 0, 1, 1), compress="jpeg",
                       photometric="ycbcr", tiled=True, blockxsize=16, blockysize=16) as dst:
        dst.write(rgb)
    with Image.open(path) as im:
        libjpeg = np.asarray(im)
    with rasterio.open(path) as src:
        gdal = src.read()
    classes = [0, 100, 128, 255]
    want = {str(v): int((libjpeg == v).sum()) for v in classes}
    assert want != {str(v): int((gdal == v).sum()) for v in classes}  # the decoders differ here
    obs = run(ctx, "ras.count_pixels", mask_path="noisy_jpeg.tif", classes=classes)
    assert obs["counts"] == want and obs["total"] == sum(want.values())


@pytest.mark.parametrize("crs,member", [
    ("EPSG:32615", "urn:ogc:def:crs:EPSG::32615"),
    # a geostationary CRS has no authority code: GDAL's GeoJSON driver (the benchmark's
    # _save_gdf through pyogrio) writes no crs member, so the polygons read back as pixel space
    ("+proj=geos +lon_0=-75 +h=35786023 +x_0=0 +y_0=0 +ellps=GRS80 +units=m +no_defs +sweep=x",
     None),
])
def test_vectorize_writes_a_crs_member_only_for_a_named_crs(ctx, tmp_path, crs, member):
    from rasterio.transform import from_origin

    m = np.zeros((6, 6), np.uint8)
    m[1:3, 1:4] = 1
    path = tmp_path / "data" / "crs_mask.tif"
    with rasterio.open(path, "w", driver="GTiff", width=6, height=6, count=1, dtype="uint8",
                       crs=crs, transform=from_origin(1000, 2000, 2, 2)) as dst:
        dst.write(m, 1)
    obs = run(ctx, "ras.vectorize", mask_path="crs_mask.tif", classes=[1])
    # one 3x2-pixel polygon of 2 m pixels: 24 m2 in CRS units, 6 pixels
    assert (obs["count"], obs["total_pixels"], obs["total_area_m2"]) == (1, 6, 24.0)
    doc = json.loads((ctx.work_dir / obs["vector_path"]).read_text(encoding="utf-8"))
    assert (doc.get("crs") or {}).get("properties", {}).get("name") == member


def test_vectorize_refuses_an_explicit_null_pixel_size_but_not_in_a_loop(ctx):
    # analysis.py declares pixel_size_m: float = None: the MCP schema validation refuses null
    # (the benchmark's answer is a validation error), leaving it out means None
    with pytest.raises(ToolError, match="null"):
        run(ctx, "ras.vectorize", mask_path="ramp.png", classes=[1], pixel_size_m=None)
    # ramp.png holds class 1 in its middle column: one 1x2-pixel polygon
    assert run(ctx, "ras.vectorize", mask_path="ramp.png", classes=[1])["count"] == 1
    # tool.loop calls ras_vectorize directly: None is the default there
    res = run(ctx, "tool.loop", calls=[{"call": "ras.vectorize", "args": {
        "mask_path": "ramp.png", "classes": [1], "pixel_size_m": None}}], loop_over=[{}])
    assert res[0]["last_obs"]["count"] == 1 and res[0]["last_obs"]["total_pixels"] == 2
