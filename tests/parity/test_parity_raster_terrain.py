"""Parity of ras.slope, ras.hillshade, ras.reproject, ras.resample, ras.focal_stats with the
benchmark's tools (``dora/tools/analysis.py`` @2b24be70).

The benchmark's terrain tools take ``np.gradient`` (second-order central differences inside,
one-sided on the border) of the float32 DEM with the pixel size |a|, |e| in CRS units; values
below are worked out by hand from that. The real-DEM cases compare with the benchmark's
recorded observations in ``../shared/tool-examples`` (said so in the comment).
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import rasterio
from conftest import SHARED, requires_shared

from kernel.tools import ToolContext, ToolError, call_tool, directory_resolver
from kernel.tools.testing import write_png, write_tif

EXAMPLES = SHARED / "tool-examples" / "inputs"
needs_examples = requires_shared(EXAMPLES)

#: 3x3 values for the focal statistics
F = np.array([[1, 2, 3], [4, 5, 6], [7, 8, 9]], dtype=np.float32)


@pytest.fixture
def ctx(tmp_path):
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    # z = 10 * col on a 10 m grid: 1 m per m eastwards everywhere (also on the border)
    write_tif(data / "ramp.tif", np.tile(np.arange(6, dtype=np.float32) * 10, (5, 1)), res=10.0)
    write_tif(data / "flat.tif", np.full((4, 4), 100, dtype=np.int16), res=5.0)
    write_tif(data / "f.tif", F)
    return ToolContext(work_dir=tmp_path / "work", resolve_path=directory_resolver(data, EXAMPLES))


def run(ctx, tool, **args):
    return call_tool(tool, args, ctx)


def band1(ctx, name):
    with rasterio.open(ctx.work_dir / name) as src:
        return src.read(1), src


# ---------------------------------------------------------------- ras.slope
@pytest.mark.parametrize("units,value", [
    ("degrees", 45.0),     # atan(1)
    ("percent", 100.0),    # 100 * tan(45 deg)
    ("radians", 45.0),     # any other unit means degrees (echoed as given)
])
def test_slope_ramp(ctx, units, value):
    obs = run(ctx, "ras.slope", dem_path="ramp.tif", units=units)
    assert obs["units"] == units
    for k in ("min", "max", "mean"):
        assert obs["stats"][k] == pytest.approx(value, rel=1e-5)
    arr, src = band1(ctx, obs["slope_path"])
    assert arr.dtype == np.float32 and src.nodata is None and src.crs.to_epsg() == 32615


def test_slope_quadratic_border_one_sided(ctx, tmp_path):
    # z = col^2 on 1 m pixels: interior (z[c+1]-z[c-1])/2 = 2c, border (1-0)/1 = 1 and
    # (16-9)/1 = 7 on a 5-column row
    write_tif(tmp_path / "data" / "q.tif", np.tile(np.arange(5, dtype=np.float32) ** 2, (3, 1)))
    arr, _ = band1(ctx, run(ctx, "ras.slope", dem_path="q.tif", units="percent")["slope_path"])
    assert arr[1].tolist() == pytest.approx([100.0, 200.0, 400.0, 600.0, 700.0], rel=1e-5)


def test_slope_nodata_enters_the_differences(ctx, tmp_path):
    z = np.zeros((5, 5), np.float32)
    z[2, 2] = -1
    write_tif(tmp_path / "data" / "hole.tif", z, nodata=-1)
    obs = run(ctx, "ras.slope", dem_path="hole.tif")
    # four neighbours see |0 - (-1)| / 2 = 0.5 -> 26.565 deg; mean 4 * 26.565 / 25
    assert obs["stats"]["max"] == pytest.approx(math.degrees(math.atan(0.5)), rel=1e-5)
    assert obs["stats"]["mean"] == pytest.approx(4 * math.degrees(math.atan(0.5)) / 25, rel=1e-5)


def test_slope_geographic_dem_uses_degrees_as_metres(ctx, tmp_path):
    # 1 m rise per column on 0.001-degree pixels: 1 / 0.001 = 1000 -> atan(1000) = 89.9427 deg
    z = np.tile(np.arange(4, dtype=np.float32), (3, 1))
    write_tif(tmp_path / "data" / "ll.tif", z, crs="EPSG:4326", origin=(-80.0, 35.0), res=0.001)
    obs = run(ctx, "ras.slope", dem_path="ll.tif")
    assert obs["stats"]["min"] == pytest.approx(math.degrees(math.atan(1000.0)), rel=1e-6)


def test_slope_without_crs_and_errors(ctx, tmp_path):
    write_png(tmp_path / "data" / "p.png", np.array([[0, 1, 2], [0, 1, 2]], np.uint8))
    # no CRS: 1 unit per pixel, slope atan(1) = 45 deg
    assert run(ctx, "ras.slope", dem_path="p.png")["stats"]["max"] == pytest.approx(45.0, rel=1e-5)
    write_tif(tmp_path / "data" / "row.tif", np.zeros((1, 4), np.float32))
    with pytest.raises(ToolError):  # np.gradient needs two samples along each axis
        run(ctx, "ras.slope", dem_path="row.tif")
    with pytest.raises(ToolError):
        run(ctx, "ras.slope", dem_path="missing.tif")


@needs_examples
def test_slope_real_dem(ctx):
    obs = run(ctx, "ras.slope", dem_path="dem_hill_utm.tif")
    # tool-examples slope_degrees (the benchmark's observation)
    assert obs["stats"]["min"] == pytest.approx(0.15599052608013153, rel=1e-6)
    assert obs["stats"]["max"] == pytest.approx(34.6125373840332, rel=1e-6)
    assert obs["stats"]["mean"] == pytest.approx(11.631974220275879, rel=1e-6)


# ---------------------------------------------------------------- ras.hillshade
@pytest.mark.parametrize("dem,args,value", [
    ("flat.tif", {}, 180),                       # 255 * sin(45) = 180.3 -> 180
    ("flat.tif", {"altitude": 30}, 127),         # 255 * sin(30) = 127.5 -> 127
    ("flat.tif", {"altitude": 120}, 220),        # not bounded: 255 * sin(120) = 220.8
    # ramp: slope 45, aspect atan2(-1, 0) = -90; A = 135: 255*(0.5 + 0.5*cos 225) = 37.3
    ("ramp.tif", {}, 37),
    ("ramp.tif", {"azimuth": 90}, 127),          # A = 360: cos(450) = 0 -> 127.5 -> 127
    ("ramp.tif", {"azimuth": 270}, 127),         # A = 180: cos(270) = 0 -> 127
    # A = 360 - 0 + 90 = 450 = 90 deg: cos(90 - (-90)) = -1 -> 255 * (0.5 - 0.5) = 0
    ("ramp.tif", {"azimuth": 0}, 0),
    # z_factor 2: slope atan 2; 255*(0.7071*0.4472 - 0.7071*0.8944*0.7071) < 0 -> 0
    ("ramp.tif", {"z_factor": 2}, 0),
])
def test_hillshade_values(ctx, dem, args, value):
    obs = run(ctx, "ras.hillshade", dem_path=dem, **args)
    arr, _ = band1(ctx, obs["hillshade_path"])
    assert arr.dtype == np.uint8 and int(arr[2, 2]) == value


def test_hillshade_azimuth_180_lights_the_ramp(ctx):
    # A = 270 deg: cos(270 + 90) = 1 -> 255 * (0.5 + 0.5) = 255 (the east-rising ramp lit
    # fully by a "south" sun: the benchmark's direction quirk)
    arr, _ = band1(ctx, run(ctx, "ras.hillshade", dem_path="ramp.tif", azimuth=180)["hillshade_path"])
    assert int(arr[2, 2]) in (254, 255)


def test_hillshade_shape_and_stats(ctx):
    obs = run(ctx, "ras.hillshade", dem_path="flat.tif")
    assert obs["shape"] == [4, 4] and obs["stats"] == {"min": 180, "max": 180, "mean": 180.0}
    with pytest.raises(ToolError):
        run(ctx, "ras.hillshade", dem_path="flat.tif", azimuth="north")


@needs_examples
def test_hillshade_real_dem_low_sun(ctx):
    obs = run(ctx, "ras.hillshade", dem_path="dem_hill_utm.tif", azimuth=45, altitude=30,
              z_factor=2)
    # tool-examples hillshade_low_sun (the benchmark's observation)
    assert obs["stats"] == {"min": 0, "max": 249, "mean": pytest.approx(104.85359375, rel=1e-9)}
    assert obs["shape"] == [80, 80]


# ---------------------------------------------------------------- ras.reproject
def test_reproject_same_crs_keeps_values_and_no_nodata(ctx, tmp_path):
    a = (np.arange(16, dtype=np.uint8).reshape(4, 4) + 1)
    write_tif(tmp_path / "data" / "u.tif", a, res=10.0)
    obs = run(ctx, "ras.reproject", raster_path="u.tif", dst_crs="EPSG:32615", resampling="nearest")
    arr, src = band1(ctx, obs["output_path"])
    assert obs["shape"] == [4, 4] and (arr == a).all()
    assert src.nodata is None  # the source had none: 0 is not marked as nodata


def test_reproject_echoes_dst_crs_and_unknown_resampling(ctx, tmp_path):
    write_tif(tmp_path / "data" / "u.tif", np.ones((4, 4), np.uint8), res=10.0)
    obs = run(ctx, "ras.reproject", raster_path="u.tif", dst_crs="epsg:4326", resampling="lanczos")
    assert obs["dst_crs"] == "epsg:4326" and obs["src_crs"] == "EPSG:32615"
    _, src = band1(ctx, obs["output_path"])
    assert src.crs.to_epsg() == 4326 and src.dtypes[0] == "uint8"


def test_reproject_keeps_source_nodata(ctx, tmp_path):
    write_tif(tmp_path / "data" / "n.tif", np.full((4, 4), 7, np.int16), res=10.0, nodata=-5)
    _, src = band1(ctx, run(ctx, "ras.reproject", raster_path="n.tif",
                            dst_crs="EPSG:4326")["output_path"])
    assert src.nodata == -5


@pytest.mark.parametrize("raster,crs", [("p.png", "EPSG:4326"), ("u.tif", "EPSG:999999")])
def test_reproject_errors(ctx, tmp_path, raster, crs):
    write_png(tmp_path / "data" / "p.png", np.zeros((2, 2), np.uint8))
    write_tif(tmp_path / "data" / "u.tif", np.zeros((2, 2), np.uint8))
    with pytest.raises(ToolError):
        run(ctx, "ras.reproject", raster_path=raster, dst_crs=crs)


# ---------------------------------------------------------------- ras.resample
@pytest.mark.parametrize("shape,res,target,out_shape", [
    ((2, 2), 2.0, 1.0, [4, 4]),      # scale 2
    ((10, 6), 1.0, 4.0, [2, 1]),     # floor(10/4) = 2, floor(6/4) = 1 (not rounded)
    ((10, 10), 1.0, 3.0, [3, 3]),    # floor(3.33)
    ((10, 6), 1.0, 100.0, [1, 1]),   # never below one pixel
    ((9, 9), 1.0, 0.5, [18, 18]),
])
def test_resample_shapes(ctx, tmp_path, shape, res, target, out_shape):
    write_tif(tmp_path / "data" / "z.tif", np.ones(shape, np.float32), res=res)
    obs = run(ctx, "ras.resample", raster_path="z.tif", target_pixel_size_m=target)
    assert obs["shape"] == out_shape
    assert obs["src_pixel_size_m"] == res and obs["dst_pixel_size_m"] == target  # echoed


def test_resample_transform_follows_the_floor(ctx, tmp_path):
    write_tif(tmp_path / "data" / "z.tif", np.ones((10, 10), np.float32), res=1.0)
    obs = run(ctx, "ras.resample", raster_path="z.tif", target_pixel_size_m=3.0)
    _, src = band1(ctx, obs["output_path"])
    # 10 px on 3 output px: 10/3 m per pixel, not the 3.0 echoed
    assert src.transform.a == pytest.approx(10 / 3) and src.transform.c == 500000.0


def test_resample_nearest_upsample_values(ctx, tmp_path):
    a = np.array([[1, 2], [3, 4]], np.uint8)
    write_tif(tmp_path / "data" / "c.tif", a, res=2.0)
    arr, _ = band1(ctx, run(ctx, "ras.resample", raster_path="c.tif", target_pixel_size_m=1.0,
                            resampling="nearest")["output_path"])
    assert (arr == np.kron(a, np.ones((2, 2), np.uint8))).all()


def test_resample_errors(ctx):
    for target in (0, -1):
        with pytest.raises(ToolError):
            run(ctx, "ras.resample", raster_path="ramp.tif", target_pixel_size_m=target)


# ---------------------------------------------------------------- ras.focal_stats
# scipy's "nearest" border: the (0,0) window is [1,1,2 / 1,1,2 / 4,4,5]: sum 21, mean 21/9,
# min 1, max 5, population std sqrt(69/9 - (21/9)^2); the centre window is 1..9
@pytest.mark.parametrize("stat,centre,corner", [
    ("mean", 5.0, 21 / 9),
    ("sum", 45.0, 21.0),
    ("min", 1.0, 1.0),
    ("max", 9.0, 5.0),
    ("std", math.sqrt(60 / 9), math.sqrt(69 / 9 - (21 / 9) ** 2)),
    ("MAX", 9.0, 5.0),      # lower-cased
])
def test_focal_stats_values(ctx, stat, centre, corner):
    obs = run(ctx, "ras.focal_stats", raster_path="f.tif", statistic=stat, window_size=3)
    assert obs["statistic"] == stat.lower() and obs["window_size"] == 3 and obs["shape"] == [3, 3]
    arr, _ = band1(ctx, obs["output_path"])
    assert arr[1, 1] == pytest.approx(centre, rel=1e-5)
    assert arr[0, 0] == pytest.approx(corner, rel=1e-5)


@pytest.mark.parametrize("stat,corner", [
    ("mean", 2.0),                                   # 16 over the 8 valid cells
    ("min", 0.0),                                    # the nodata cell counts as 0
    ("max", 4.0),
    ("sum", 16.0),
])
def test_focal_stats_with_nodata(ctx, stat, corner):
    obs = run(ctx, "ras.focal_stats", raster_path="f.tif", statistic=stat, window_size=3, nodata=5)
    arr, src = band1(ctx, obs["output_path"])
    # the (0,0) window with 5 as nodata: [1,1,2 / 1,1,2 / 4,4,-]
    assert arr[1, 1] == 5 and src.nodata == 5
    assert arr[0, 0] == pytest.approx(corner, rel=1e-5)


def test_focal_stats_even_window_and_errors(ctx):
    obs = run(ctx, "ras.focal_stats", raster_path="f.tif", window_size=2)
    assert obs["window_size"] == 3
    with pytest.raises(ToolError):
        run(ctx, "ras.focal_stats", raster_path="f.tif", statistic="median")
    with pytest.raises(ToolError):
        run(ctx, "ras.focal_stats", raster_path="f.tif", window_size=0)


def test_hillshade_nodata_outside_uint8_drops_georeferencing(ctx, tmp_path):
    # the benchmark's rasterio write refuses nodata -9999 for uint8 and falls back to Pillow:
    # the hillshade file then has neither CRS nor nodata
    write_tif(tmp_path / "data" / "nd.tif", np.full((3, 3), 5, np.float32), nodata=-9999)
    arr, src = band1(ctx, run(ctx, "ras.hillshade", dem_path="nd.tif")["hillshade_path"])
    assert src.crs is None and src.nodata is None and (arr == 180).all()
