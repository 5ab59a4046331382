"""ras.slope / ras.hillshade / ras.reproject / ras.resample / ras.focal_stats.

Expected values are worked out by hand in the comments from the benchmark's method
(``np.gradient`` central differences with the pixel size in CRS units, ``analysis.py:ras_slope``
/ ``ras_hillshade``; scipy ``mode="nearest"`` windows, ``ras_focal_stats``); the real-data test
checks the slope of the SRTM tile N10W110, degrees used as metres, by hand.
"""
import math
import zipfile

import numpy as np
import pytest
import rasterio
from conftest import REALDATA, requires_shared

from kernel.tools import ToolInputError, call_tool
from kernel.tools.testing import make_ctx, write_png, write_tif

SRTM_ZIP = REALDATA / "rasterio-testdata" / "N10W110.hgt.zip"


@pytest.fixture
def ctx(tmp_path):
    return make_ctx(tmp_path)


def data(ctx):
    return ctx.work_dir.parent / "data"


def read(ctx, name):
    with rasterio.open(ctx.work_dir / name) as src:
        return src.read(1), src


def ramp(ctx, name="ramp.tif", rows=5, cols=6, res=10.0, step=10.0):
    # z = step * col on a 10 m grid (EPSG:32615): rises `step` metres per pixel to the east
    z = np.tile(np.arange(cols, dtype=np.float32) * step, (rows, 1))
    write_tif(data(ctx) / name, z, res=res)
    return z


# ---------------------------------------------------------------- ras.slope
def test_slope_ramp_degrees_and_percent(ctx):
    ramp(ctx)
    obs = call_tool("ras.slope", {"dem_path": "ramp.tif"}, ctx)
    arr, src = read(ctx, obs["slope_path"])
    # the DEM has no nodata, nor has the slope (the benchmark keeps the DEM's profile)
    assert obs["units"] == "degrees" and arr.dtype == np.float32 and src.nodata is None
    # np.gradient: interior (z[c+1] - z[c-1]) / (2*10) = 20/20 = 1, border (z1 - z0)/10 = 1:
    # 45 deg everywhere (the old Horn edge value 26.6 deg is gone)
    assert arr[2, 2] == pytest.approx(45.0, abs=1e-4)
    assert arr[2, 0] == pytest.approx(45.0, abs=1e-4)
    assert obs["stats"]["min"] == pytest.approx(45.0, abs=1e-4)
    pct = call_tool("ras.slope", {"dem_path": "ramp.tif", "units": "percent"}, ctx)
    parr, _ = read(ctx, pct["slope_path"])
    assert parr[2, 2] == pytest.approx(100.0, abs=1e-3)  # 100 * tan(45 deg)


def test_slope_nodata_window(ctx):
    z = np.zeros((5, 5), dtype=np.float32)
    z[2, 2] = -1
    write_tif(data(ctx) / "hole.tif", z, res=1.0, nodata=-1)
    obs = call_tool("ras.slope", {"dem_path": "hole.tif"}, ctx)
    arr, _ = read(ctx, obs["slope_path"])
    # quirk: the nodata value -1 enters the differences like an elevation. Its four
    # neighbours see (0 - (-1))/2 = 0.5 -> atan(0.5) = 26.565 deg; the hole itself (0-0)/2 -> 0
    assert arr[2, 1] == pytest.approx(26.5651, abs=1e-3) and arr[1, 2] == pytest.approx(26.5651, abs=1e-3)
    assert arr[2, 2] == 0 and arr[0, 0] == 0
    # mean over all 25 pixels: 4 * 26.5651 / 25 = 4.2504
    assert obs["stats"]["mean"] == pytest.approx(4 * 26.56505 / 25, rel=1e-5)


def test_slope_errors(ctx):
    ramp(ctx)
    write_png(data(ctx) / "flat.png", np.zeros((3, 3), np.uint8))
    # benchmark parity: other units mean degrees and are echoed; a DEM without CRS has 1 unit per pixel
    obs = call_tool("ras.slope", {"dem_path": "ramp.tif", "units": "radians"}, ctx)
    assert obs["units"] == "radians" and obs["stats"]["max"] == pytest.approx(45.0, abs=1e-4)
    assert call_tool("ras.slope", {"dem_path": "flat.png"}, ctx)["stats"]["max"] == 0.0
    with pytest.raises(ToolInputError) as ei:
        call_tool("ras.slope", {"dem_path": "missing.tif"}, ctx)
    assert ei.value.argument == "dem_path"
    with pytest.raises(ToolInputError) as ei:
        call_tool("ras.slope", {"dem_path": "ramp.tif", "out_path": "/tmp/x.tif"}, ctx)
    assert ei.value.argument == "out_path"
    obs = call_tool("ras.slope", {"dem_path": "ramp.tif", "out_path": "slope.tif"}, ctx)
    assert obs["slope_path"] == "slope.tif" and (ctx.work_dir / "slope.tif").is_file()


@requires_shared(SRTM_ZIP)
def test_slope_real_srtm_degrees_as_metres(ctx):
    with zipfile.ZipFile(SRTM_ZIP) as zf:
        zf.extract("N10W110.hgt", data(ctx))
    with rasterio.open(f"zip://{SRTM_ZIP}!N10W110.hgt") as src:
        dem = src.read(1).astype(np.float64)
        t = src.transform
    obs = call_tool("ras.slope", {"dem_path": "N10W110.hgt"}, ctx)
    arr, out = read(ctx, obs["slope_path"])
    assert out.crs.to_epsg() == 4326 and arr.shape == dem.shape
    # quirk: the benchmark divides by the pixel size in degrees (1/1200), as if it
    # were metres. Central differences by hand at interior pixels where the terrain is not flat
    rows, cols = np.nonzero(dem[1:-1, 1:-1] != 0)
    picks = list(zip(rows[::max(1, len(rows) // 5)] + 1, cols[::max(1, len(cols) // 5)] + 1))[:5]
    assert picks
    for r, c in picks:
        dzdx = (dem[r, c + 1] - dem[r, c - 1]) / (2 * abs(t.a))
        dzdy = (dem[r + 1, c] - dem[r - 1, c]) / (2 * abs(t.e))
        expected = math.degrees(math.atan(math.hypot(dzdx, dzdy)))
        assert arr[r, c] == pytest.approx(expected, rel=1e-4, abs=1e-4), (r, c)


# ---------------------------------------------------------------- ras.hillshade
def test_hillshade_flat_and_ramp(ctx):
    write_tif(data(ctx) / "flat.tif", np.full((4, 4), 100, dtype=np.int16), res=5.0)
    obs = call_tool("ras.hillshade", {"dem_path": "flat.tif"}, ctx)
    arr, src = read(ctx, obs["hillshade_path"])
    # flat: 255 * sin(altitude 45 deg) = 180.31 -> truncated 180
    assert arr.dtype == np.uint8 and (arr == 180).all()
    assert obs["shape"] == [4, 4] and obs["stats"] == {"min": 180, "max": 180, "mean": 180.0}
    ramp(ctx)  # d/dcol = 1, d/drow = 0: slope 45 deg, aspect = atan2(-1, 0) = -90 deg
    obs = call_tool("ras.hillshade", {"dem_path": "ramp.tif"}, ctx)
    arr, _ = read(ctx, obs["hillshade_path"])
    # benchmark formula: A = 360 - 315 + 90 = 135 deg;
    # 255 * (sin45 cos45 + cos45 sin45 cos(135 - (-90))) = 255 * (0.5 - 0.5 * 0.70711) = 37.34 -> 37
    assert arr[2, 2] == 37
    # azimuth 90: A = 360 deg, cos(360 + 90) = 0 -> 255 * 0.5 = 127.5 -> 127
    obs = call_tool("ras.hillshade", {"dem_path": "ramp.tif", "azimuth": 90}, ctx)
    arr, _ = read(ctx, obs["hillshade_path"])
    assert arr[2, 2] == 127


def test_hillshade_errors(ctx):
    ramp(ctx)
    write_tif(data(ctx) / "flat.tif", np.full((4, 4), 100, dtype=np.int16), res=5.0)
    # benchmark parity: the benchmark does not bound the altitude: flat, 120 deg -> 255 * sin(120) = 220.8
    obs = call_tool("ras.hillshade", {"dem_path": "flat.tif", "altitude": 120}, ctx)
    assert obs["stats"]["max"] == 220
    with pytest.raises(ToolInputError):
        call_tool("ras.hillshade", {"dem_path": "ramp.tif", "azimuth": "north"}, ctx)


# ---------------------------------------------------------------- ras.reproject
def test_reproject_identity_and_to_wgs84(ctx):
    from pyproj import Transformer

    a = np.arange(16, dtype=np.uint8).reshape(4, 4) + 1
    write_tif(data(ctx) / "u.tif", a, res=10.0)
    same = call_tool("ras.reproject", {"raster_path": "u.tif", "dst_crs": "EPSG:32615",
                                       "resampling": "nearest"}, ctx)
    arr, _ = read(ctx, same["output_path"])
    # same CRS: GDAL keeps the 4x4 grid, nearest copies the values
    assert same["shape"] == [4, 4] and (arr == a).all()
    obs = call_tool("ras.reproject", {"raster_path": "u.tif", "dst_crs": "EPSG:4326",
                                      "resampling": "nearest"}, ctx)
    assert obs["src_crs"] == "EPSG:32615" and obs["dst_crs"] == "EPSG:4326"
    arr, src = read(ctx, obs["output_path"])
    # the centre of source pixel (1, 2) is x = 500000 + 25, y = 3300000 - 15; nearest resampling
    # puts its value a[1, 2] = 7 at that lon/lat
    lon, lat = Transformer.from_crs(32615, 4326, always_xy=True).transform(500025.0, 3299985.0)
    r, c = src.index(lon, lat)
    assert arr[r, c] == a[1, 2] == 7


def test_reproject_errors(ctx):
    write_png(data(ctx) / "p.png", np.zeros((2, 2), np.uint8))
    write_tif(data(ctx) / "u.tif", np.zeros((2, 2), np.uint8))
    with pytest.raises(ToolInputError) as ei:
        call_tool("ras.reproject", {"raster_path": "p.png", "dst_crs": "EPSG:4326"}, ctx)
    assert ei.value.argument == "raster_path"
    with pytest.raises(ToolInputError) as ei:
        call_tool("ras.reproject", {"raster_path": "u.tif", "dst_crs": "EPSG:999999"}, ctx)
    assert ei.value.argument == "dst_crs"
    # benchmark parity: an unknown resampling means bilinear in the benchmark, not an error
    obs = call_tool("ras.reproject", {"raster_path": "u.tif", "dst_crs": "EPSG:4326",
                                      "resampling": "lanczos"}, ctx)
    assert obs["dst_crs"] == "EPSG:4326"


# ---------------------------------------------------------------- ras.resample
def test_resample_upsample_nearest(ctx):
    a = np.array([[1, 2], [3, 4]], dtype=np.uint8)
    write_tif(data(ctx) / "c.tif", a, res=2.0)
    obs = call_tool("ras.resample", {"raster_path": "c.tif", "target_pixel_size_m": 1.0,
                                     "resampling": "nearest"}, ctx)
    arr, src = read(ctx, obs["output_path"])
    # 2 m -> 1 m: 2x2 becomes 4x4, each source pixel a 2x2 block
    assert obs["shape"] == [4, 4] and obs["src_pixel_size_m"] == 2.0
    assert obs["dst_pixel_size_m"] == 1.0
    assert (arr == np.kron(a, np.ones((2, 2), np.uint8))).all()
    assert src.transform.a == 1.0 and src.transform.c == 500000.0  # same origin


def test_resample_downsample_shape_and_errors(ctx):
    write_tif(data(ctx) / "z.tif", np.ones((10, 6), np.float32), res=1.0)
    obs = call_tool("ras.resample", {"raster_path": "z.tif", "target_pixel_size_m": 4.0}, ctx)
    # benchmark: scale 1/4, floor(10 * 0.25) = 2 rows, floor(6 * 0.25) = 1 column
    assert obs["shape"] == [2, 1]
    arr, _ = read(ctx, obs["output_path"])
    assert np.allclose(arr, 1.0)  # a constant stays constant
    with pytest.raises(ToolInputError) as ei:
        call_tool("ras.resample", {"raster_path": "z.tif", "target_pixel_size_m": 0}, ctx)
    assert ei.value.argument == "target_pixel_size_m"
    # max(1, floor(10 / 100)) = 1: never less than one pixel, never an error
    assert call_tool("ras.resample", {"raster_path": "z.tif", "target_pixel_size_m": 100},
                     ctx)["shape"] == [1, 1]
    # an unknown resampling means bilinear
    assert call_tool("ras.resample", {"raster_path": "z.tif", "target_pixel_size_m": 2,
                                      "resampling": "mode"}, ctx)["shape"] == [5, 3]


# ---------------------------------------------------------------- ras.focal_stats
F = np.array([[1, 2, 3],
              [4, 5, 6],
              [7, 8, 9]], dtype=np.float32)


# corner (0,0) with scipy's "nearest" border (benchmark parity: the benchmark's windows): the window is
# [1,1,2 / 1,1,2 / 4,4,5]: sum 21, mean 21/9, min 1, max 5,
# population std sqrt(69/9 - (21/9)^2) = sqrt(2.2222) = 1.4907
@pytest.mark.parametrize("stat,centre,corner", [
    ("mean", 5.0, 21 / 9),      # centre: 45/9
    ("sum", 45.0, 21.0),
    ("min", 1.0, 1.0),
    ("max", 9.0, 5.0),
    # centre: population std of 1..9 = sqrt(60/9) = 2.5820
    ("std", math.sqrt(60 / 9), math.sqrt(69 / 9 - (21 / 9) ** 2)),
])
def test_focal_stats_3x3(ctx, stat, centre, corner):
    write_tif(data(ctx) / "f.tif", F)
    obs = call_tool("ras.focal_stats", {"raster_path": "f.tif", "statistic": stat,
                                        "window_size": 2}, ctx)  # 2 is bumped to 3
    assert obs["window_size"] == 3 and obs["shape"] == [3, 3]
    arr, _ = read(ctx, obs["output_path"])
    assert arr.dtype == np.float32
    assert arr[1, 1] == pytest.approx(centre, rel=1e-5)
    assert arr[0, 0] == pytest.approx(corner, rel=1e-5)


def test_focal_stats_nodata(ctx):
    write_tif(data(ctx) / "f.tif", F)
    obs = call_tool("ras.focal_stats", {"raster_path": "f.tif", "statistic": "mean",
                                        "window_size": 3, "nodata": 5}, ctx)
    arr, src = read(ctx, obs["output_path"])
    # 5 is nodata: it stays nodata and counts neither value nor pixel; (0,0) with the nearest
    # border: [1,1,2 / 1,1,2 / 4,4,-] -> 16 / 8 valid = 2.0
    assert arr[1, 1] == 5 and src.nodata == 5
    assert arr[0, 0] == pytest.approx(2.0, rel=1e-5)


def test_focal_stats_errors(ctx):
    write_tif(data(ctx) / "f.tif", F)
    with pytest.raises(ToolInputError) as ei:
        call_tool("ras.focal_stats", {"raster_path": "f.tif", "statistic": "median"}, ctx)
    assert ei.value.argument == "statistic"
    with pytest.raises(ToolInputError) as ei:
        call_tool("ras.focal_stats", {"raster_path": "f.tif", "window_size": 0}, ctx)
    assert ei.value.argument == "window_size"
