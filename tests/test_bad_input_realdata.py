"""Every odd real file of rasterio-testdata, rio-tiler-fixtures and antimeridian-geojson either
imports correctly or fails with ``DataImportError(file, field, problem)`` and leaves the database
and the data root as they were. One test id per file.

How the expected values were worked out (nothing here is read back from the importer):

- Raster bounds: the four corners of ``src.bounds`` transformed with pyproj to EPSG:4326 (min/max
  of the corner lon/lats), checked against each SOURCE.md; tolerance 0.01° covers the densified
  edges. N10W110.hgt: the SRTM tile covers 110°W–109°W, 10°N–11°N plus half a 3″ pixel
  (1/2400° = 0.000417°) on each side. cog_uint8_rgb_nodata: 256 px × 0.01° from (0, 0) → 2.56°.
  cog_gcps_ovr: the extent of its 210 GCPs (75.605–78.204°E, 9.226–11.190°N).
- cog_dateline.tif (EPSG:32660): corners 177.9986°E / 178.5138°W, so ``west > east`` (RFC 7946
  §5.2 bbox convention for a box across 180°).
- goes.tif: a geostationary full disk over lon_0 = 75°W whose corners look at space; the Earth's
  limb seen from h = 35,786 km lies 81.3° of arc from the sub-satellite point (acos(6378/42164)),
  so the lon/lat box is about 156°W–6°E and ±75–81°N/S (the 101×101 pixel sample stops a little
  inside the limb).
- Pixel sizes: ``src.res`` (e.g. RGB.byte 300 m, shade 9.5546 m, float_raster_with_nodata 500 m).
- Antimeridian polygons: each ring read by hand. issues-81 jumps from 180 to −180 along the
  meridian itself, so it lies wholly east: 162–180°E, 77–81°N. one-hole is a 20° box 170°E–170°W,
  40–60°N (its hole 175°E–175°W) → two parts, bounds [170, 40, −170, 60] (straight lon/lat
  segments, RFC 7946 §3.1.1). issues-171 is a ring at 80°N all round the globe → the polar cap
  80–90°N. issues-124 crosses 180° once (one jump, point 30) so it wraps the globe and is read as
  the cap over the north pole: lat −29.758364…90. issues-201 touches −180 but never jumps: valid
  as given. both-poles jumps twice (points 1 and 4): cut into 2 parts.
- Refusals: all-nodata.tif and inverted_lat.tif hold only their nodata value (``np.unique`` of
  the whole array: [0] and [−9999]); cog_hirise_mars.tif's ellipsoid has a 3,395,582 m radius
  (its WKT); the S3A footprint folds over itself near the pole (shapely: self-intersection, also
  after the cut at 180°).
"""
from __future__ import annotations

import io

import morecantile
import numpy as np
import pytest
from conftest import REALDATA, requires_shared
from django.core.management import call_command
from django.core.management.base import CommandError

from annotation.importers.errors import DataImportError
from annotation.models import Event, Layer
from annotation.services.imports import import_raster_file, import_vector_file
from annotation.tiles import render_image, render_tile, tile_zoom_range

FOLDERS = ("rasterio-testdata", "rio-tiler-fixtures", "antimeridian-geojson")
TMS = morecantile.tms.get("WebMercatorQuad")
S3A = "S3A_SL_2_LST_20160521T015552_20160521T033651_6059_004_217_____.json"

pytestmark = [
    pytest.mark.django_db,
    requires_shared(REALDATA / "rasterio-testdata"),
]

# file → expected outcome. ok: the Layer fields asserted; error: (field, problem fragment).
CASES: dict[str, dict] = {
    # ---- rasterio-testdata
    "rasterio-testdata/RGB.byte.tif": {"ok": dict(
        crs="EPSG:32618", frame="geographic", size=(791, 718, 3), dtype="uint8", modality="optical",
        bounds=[-78.9586, 23.565, -76.5749, 25.5509], gsd=300.04)},
    "rasterio-testdata/RGBA.uint16.tif": {"ok": dict(  # BGRA: colour interpretation blue, green, red, alpha
        crs="EPSG:32612", frame="geographic", size=(634, 411, 4), dtype="uint16", modality="optical",
        bounds=[-108.3848, 36.8165, -108.3748, 36.8218], gsd=1.3797, rgb_bands=[3, 2, 1])},
    "rasterio-testdata/shade.tif": {"ok": dict(
        crs="EPSG:3857", frame="geographic", size=(1024, 1024, 1), dtype="uint8",
        bounds=[-106.5234, 39.5718, -106.4355, 39.6395], gsd=9.5546)},
    "rasterio-testdata/N10W110.hgt.zip": {"ok": dict(
        crs="EPSG:4326", frame="geographic", size=(1201, 1201, 1), dtype="int16",
        bounds=[-110.000417, 9.999583, -108.999583, 11.000417], nodata=-32768)},
    "rasterio-testdata/float_raster_with_nodata.tif": {"ok": dict(  # non-EPSG authority
        crs="IGNF:ETRS89LAEA", frame="geographic", size=(13, 12, 1), dtype="float32",
        bounds=[38.074, 49.3922, 38.1888, 49.4637], gsd=500.0)},
    "rasterio-testdata/test_esri_wkt.tif": {"ok": dict(  # CRS only as ESRI WKT
        crs="ESRI:102039", frame="geographic", size=(2, 2, 1), dtype="uint16",
        bounds=[-96.1768, 44.3065, -96.1765, 44.3067], gsd=10.0)},
    "rasterio-testdata/goes.tif": {"ok": dict(  # geostationary, custom PROJCS, corners in space
        crs="+proj=geos +lon_0=-75 +h=35786023", frame="geographic", size=(542, 542, 3), dtype="uint8",
        goes=True, gsd=20054.96)},
    "rasterio-testdata/rotated.tif": {"ok": dict(  # rotation terms but no CRS: pixel frame
        crs="", frame="pixel", size=(10, 15, 1), dtype="uint8", bounds=[0, 0, 10, 15])},
    "rasterio-testdata/float_nan.tif": {"ok": dict(  # NaN nodata, no CRS: pixel frame
        crs="", frame="pixel", size=(3, 2, 1), dtype="float32", bounds=[0, 0, 3, 2])},
    "rasterio-testdata/all-nodata.tif": {"error": ("pixels", "every pixel is nodata (the nodata value 0)")},
    "rasterio-testdata/issue1446.geojson": {"vector": dict(
        features=7, types=["LineString"], bounds=[-9.151446, 2.171076, -9.144164, 2.175877], split=0)},
    # ---- rio-tiler-fixtures
    "rio-tiler-fixtures/cog_dateline.tif": {"ok": dict(
        crs="EPSG:32660", frame="geographic", size=(2325, 2355, 1), dtype="uint16",
        bounds=[177.9986, 50.5819, -178.5138, 52.7737], gsd=100.01, antimeridian=True)},
    "rio-tiler-fixtures/cog_fullearth.tif": {"ok": dict(
        crs="EPSG:4326", frame="geographic", size=(432, 216, 1), dtype="float64", bounds=[-180, -90, 180, 90])},
    "rio-tiler-fixtures/cog_gcps_ovr.tif": {"ok": dict(  # GCP-only georeferencing
        crs="EPSG:4326", frame="geographic", size=(1280, 837, 1), dtype="uint8",
        bounds=[75.6052, 9.2258, 78.2039, 11.1904], georeferencing="gcps")},
    "rio-tiler-fixtures/cog_uint8_rgb_nodata.tif": {"ok": dict(
        crs="EPSG:4326", frame="geographic", size=(256, 256, 3), dtype="uint8", modality="optical",
        bounds=[0, -2.56, 2.56, 0], nodata=0)},
    "rio-tiler-fixtures/cog_hirise_mars.tif": {"error": ("crs", "'Equirectangular MARS' is not an Earth CRS")},
    "rio-tiler-fixtures/inverted_lat.tif": {"error": ("pixels", "every pixel is nodata (the nodata value -9999)")},
    # ---- antimeridian-geojson
    f"antimeridian-geojson/{S3A}": {"error": (
        "feature 0", "invalid MultiPolygon even after cutting it at the antimeridian: Self-intersection")},
    "antimeridian-geojson/both-poles.json": {"vector": dict(
        features=1, types=["MultiPolygon"], parts=2, split=1, south=-85.0, north=85.0)},
    "antimeridian-geojson/issues-124.json": {"vector": dict(
        features=1, types=["Polygon"], bounds=[-180, -29.758364, 180, 90], split=1)},
    "antimeridian-geojson/issues-171.json": {"vector": dict(
        features=1, types=["Polygon"], bounds=[-180, 80, 180, 90], split=1)},
    "antimeridian-geojson/issues-201.json": {"vector": dict(
        features=1, types=["Polygon"], bounds=[-180, 62.085587, -178.907021, 62.78458], split=0)},
    "antimeridian-geojson/issues-81.json": {"vector": dict(
        features=1, types=["Polygon"], bounds=[162, 77, 180, 81], split=1)},
    "antimeridian-geojson/one-hole.json": {"vector": dict(
        features=1, types=["MultiPolygon"], parts=2, bounds=[170, 40, -170, 60], split=1)},
}


def _is_vector(rel: str) -> bool:
    return rel.endswith((".json", ".geojson"))


def _snapshot(root):
    files = sorted((p.relative_to(root).as_posix(), p.stat().st_size) for p in root.rglob("*"))
    return files, Event.objects.count(), Layer.objects.count()


def _opaque_pixels(png: bytes) -> int:
    from PIL import Image

    img = Image.open(io.BytesIO(png)).convert("RGBA")
    return int((np.asarray(img)[..., 3] > 0).sum())


def test_every_file_of_the_three_folders_has_a_case():
    on_disk = {f"{d}/{p.name}" for d in FOLDERS for p in (REALDATA / d).iterdir()
               if p.is_file() and p.name not in ("SOURCE.md", "README.rst")}
    assert on_disk == set(CASES)


@pytest.mark.parametrize("rel", sorted(CASES), ids=[r.split("/")[-1] for r in sorted(CASES)])
def test_real_odd_file(rel, settings):
    root = settings.STUDIO_DATA_ROOT
    # an existing event with a layer, so that "unchanged" is more than an empty folder
    import_raster_file(REALDATA / "rio-tiler-fixtures" / "cog_uint8_rgb_nodata.tif", event_slug="odd")
    before = _snapshot(root)
    path = REALDATA / rel
    expected = CASES[rel]
    do_import = import_vector_file if _is_vector(rel) else import_raster_file

    if "error" in expected:
        field, problem = expected["error"]
        with pytest.raises(DataImportError) as exc:
            do_import(path, event_slug="odd")
        assert exc.value.file == path.name
        assert exc.value.field == field
        assert problem in exc.value.problem
        assert str(exc.value).startswith(f"{path.name}: {field}: ")
        assert _snapshot(root) == before
        return

    layer = do_import(path, event_slug="odd").layers[0]
    if "vector" in expected:
        _check_vector(layer, expected["vector"], root)
    else:
        _check_raster(layer, expected["ok"], root)


def _check_vector(layer, exp, root):
    import json

    from shapely.geometry import shape

    assert (layer.kind, layer.frame, layer.crs) == ("vector", "geographic", "EPSG:4326")
    assert layer.feature_count == exp["features"]
    assert layer.metadata["geometry_types"] == exp["types"]
    assert layer.metadata.get("antimeridian_split", 0) == exp["split"]
    if "bounds" in exp:
        assert layer.bounds == pytest.approx(exp["bounds"], abs=1e-5)
    else:
        assert (layer.bounds[1], layer.bounds[3]) == pytest.approx((exp["south"], exp["north"]), abs=0.1)
    fc = json.loads((root / layer.path).read_text())
    geoms = [shape(f["geometry"]) for f in fc["features"]]
    assert all(g.is_valid for g in geoms)  # cut at 180°: valid in planar lon/lat
    assert all(-180 <= g.bounds[0] and g.bounds[2] <= 180 for g in geoms)
    if "parts" in exp:
        assert len(geoms[0].geoms) == exp["parts"]


def _check_raster(layer, exp, root):
    assert (layer.kind, layer.frame) == ("raster", exp["frame"])
    assert layer.crs.startswith(exp["crs"]) if exp["crs"] else layer.crs == ""
    assert len(layer.crs) <= 500  # Layer.crs max_length (PostgreSQL enforces it)
    assert (layer.width, layer.height, layer.band_count) == exp["size"]
    assert layer.dtype == exp["dtype"]
    if "modality" in exp:
        assert layer.modality == exp["modality"]
    if "bounds" in exp:
        assert layer.bounds == pytest.approx(exp["bounds"], abs=0.01)
    if exp.get("goes"):
        w, s, e, n = layer.bounds
        assert -157 < w < -150 and 0 < e < 7 and -81.3 < s < -70 and 70 < n < 81.3
    if "gsd" in exp:
        assert layer.gsd_m == pytest.approx(exp["gsd"], rel=1e-3)
    if "nodata" in exp:
        assert layer.metadata["nodata"] == exp["nodata"]
    if "georeferencing" in exp:
        assert layer.metadata["georeferencing"] == exp["georeferencing"]
    assert layer.metadata.get("rgb_bands") == exp.get("rgb_bands")
    assert layer.metadata.get("crosses_antimeridian", False) == exp.get("antimeridian", False)
    if not exp["crs"].startswith("EPSG") and exp["crs"]:
        assert "crs_wkt" in layer.metadata  # the full definition is kept

    if layer.frame == "pixel":
        png = render_image(layer)
        from PIL import Image

        assert Image.open(io.BytesIO(png)).size == exp["size"][:2]
        return
    # a tile inside the bounds renders, with visible pixels, at the source's native zoom
    if exp.get("antimeridian"):
        # both sides of 180°, at zoom 8 (about 600 m pixels): rio-tiler reads the stored UTM COG
        for lon in (179.0, -179.0):
            t = TMS.tile(lon, 51.5, 8)
            assert _opaque_pixels(render_tile(layer, t.z, t.x, t.y)) > 10_000
        return
    _, maxzoom = tile_zoom_range(layer)
    w, s, e, n = layer.bounds
    lon, lat = (w + e) / 2, max(min((s + n) / 2, 85.0), -85.0)
    if exp["size"][:2] == (634, 411):  # RGBA.uint16: alpha is 0 except a small patch; use coarser zoom
        maxzoom = 14
    t = TMS.tile(lon, lat, maxzoom)
    png = render_tile(layer, t.z, t.x, t.y)
    assert png.startswith(b"\x89PNG")
    assert _opaque_pixels(png) > 0


def test_command_reports_the_file_field_and_problem(settings):
    root = settings.STUDIO_DATA_ROOT
    before = _snapshot(root)
    mars = REALDATA / "rio-tiler-fixtures" / "cog_hirise_mars.tif"
    with pytest.raises(CommandError, match=r"^cog_hirise_mars.tif: crs: 'Equirectangular MARS' is not an Earth"):
        call_command("import_raster", str(mars), "--event", "mars")
    s3a = REALDATA / "antimeridian-geojson" / S3A
    with pytest.raises(CommandError, match=rf"^{S3A}: feature 0: invalid MultiPolygon"):
        call_command("import_vector", str(s3a), "--event", "s3")
    assert _snapshot(root) == before
