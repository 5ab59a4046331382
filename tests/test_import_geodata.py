"""import_raster / import_vector / import_osm on the real xview2-deploy-joplin and osm-helsinki files.

Hand-worked constants, and how each was obtained:
- output_dmg_0_pre.tif band 1 counts (0: 849,040, 1: 24,319, 2: 17,196, 3: 12,450, 4: 145,571):
  ``np.unique(src.read(1), return_counts=True)``, the same numbers as its SOURCE.md.
- CRS and pixel sizes: ``rasterio.open(f).crs/.res`` (chips EPSG:32615 0.6 × 0.674 m → GSD
  √(0.6·0.674) ≈ 0.636 m; tile_31500-5137.tif EPSG:4326 6e-6° ≈ 0.67 m N–S, 0.53 m E–W at 37° N).
- Feature counts: SOURCE.md (damage.shp 640, bldg_polys.gpkg 77, joplin.geojson 2,823,
  intersect_polys.shp 3), checked with pyogrio.read_info.
- test.osm.pbf: 331 highway ways (LineStrings) and 27 POIs; counted once with
  ``osmium.FileProcessor(...).with_filter(KeyFilter("highway"))`` and with the POI keys; its
  SOURCE.md names a kindergarten, fuel stations and parking among the POIs.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import rasterio
from conftest import requires_shared
from django.conf import settings as dj_settings
from django.core.management import call_command
from django.core.management.base import CommandError

from annotation.importers.errors import DataImportError
from annotation.models import Event, Layer
from annotation.services.imports import import_osm_file, import_raster_file, import_vector_file

REAL = Path(dj_settings.STUDIO_DEMO_DATA)
JOPLIN = REAL / "xview2-deploy-joplin"
OSM = REAL / "osm-helsinki"

pytestmark = requires_shared(JOPLIN)


@pytest.fixture
def data_root(settings, tmp_path):
    settings.STUDIO_DATA_ROOT = tmp_path / "data"
    settings.STUDIO_DATA_ROOT.mkdir(parents=True, exist_ok=True)
    return settings.STUDIO_DATA_ROOT


def _tree(root: Path) -> dict[str, int]:
    return {p.relative_to(root).as_posix(): p.stat().st_size for p in root.rglob("*")}


@pytest.mark.django_db
def test_import_utm_chip_and_damage_mask(data_root):
    r = import_raster_file(JOPLIN / "output_chips_post_0_post.tif", event_slug="joplin-2011", phase="post")
    post = r.layers[0]
    assert (post.kind, post.modality, post.frame, post.crs) == ("raster", "optical", "geographic", "EPSG:32615")
    assert (post.width, post.height, post.band_count) == (1024, 1024, 3)
    assert post.gsd_m == pytest.approx(0.636, abs=0.002)
    w, s, e, n = post.bounds
    assert w == pytest.approx(-94.49985, abs=1e-4) and n == pytest.approx(37.07520, abs=1e-4)
    with rasterio.open(data_root / post.tiles_path) as t:
        assert t.crs.to_epsg() == 3857 and t.count == 4  # RGB + alpha outside the data
    with rasterio.open(data_root / post.path) as src:
        assert src.crs.to_epsg() == 32615

    r = import_raster_file(JOPLIN / "output_dmg_0_pre.tif", event_slug="joplin-2011", kind="mask",
                           annotates="output_chips_post_0_post.tif")
    mask = r.layers[0]
    assert mask.kind == "mask" and mask.band_count == 1 and mask.modality == "damage"
    assert mask.class_counts == {"0": 849040, "1": 24319, "2": 17196, "3": 12450, "4": 145571, "5": 0}
    assert mask.annotates_id == post.pk


@pytest.mark.django_db
def test_import_geographic_tile_gsd_in_metres(data_root):
    layer = import_raster_file(JOPLIN / "tile_31500-5137.tif", event_slug="joplin-2011", gsd=None).layers[0]
    assert layer.crs == "EPSG:4326"
    assert 0.5 < layer.gsd_m < 0.7  # 6e-6 degrees at 37° N, not 6e-6 "metres"
    layer = import_raster_file(JOPLIN / "tile_1361-10160.tif", event_slug="joplin-2011", gsd=0.6).layers[0]
    assert (layer.crs, layer.gsd_m) == ("EPSG:26915", 0.6)


@pytest.mark.django_db
def test_import_vectors_reprojected_to_4326(data_root):
    dmg = import_vector_file(JOPLIN / "damage.shp", event_slug="joplin-2011").layers[0]
    assert (dmg.file_name, dmg.feature_count, dmg.crs) == ("damage.geojson", 640, "EPSG:4326")
    assert dmg.metadata["source_crs"] == "EPSG:32615"
    fc = json.loads((data_root / dmg.path).read_text())
    # geographic layers name their CRS, since the tools read a GeoJSON without one as pixel space
    assert fc["crs"]["properties"]["name"] == "urn:ogc:def:crs:OGC:1.3:CRS84"
    x, y = fc["features"][0]["geometry"]["coordinates"][0][0]
    assert -94.52 < x < -94.48 and 37.05 < y < 37.09
    assert sorted({f["properties"]["dmg"] for f in fc["features"]}) == [1, 2, 3, 4]
    # the shapefile's sidecars are kept with it
    originals = sorted(p.name for p in (data_root / "events/joplin-2011/original").iterdir())
    assert {"damage.shp", "damage.shx", "damage.dbf", "damage.prj", "damage.cpg"} <= set(originals)

    gpkg = import_vector_file(JOPLIN / "bldg_polys.gpkg", event_slug="joplin-2011").layers[0]
    assert (gpkg.file_name, gpkg.feature_count, gpkg.modality) == ("bldg_polys.geojson", 77, "buildings")
    gj = import_vector_file(JOPLIN / "joplin.geojson", event_slug="joplin-2011").layers[0]
    assert (gj.file_name, gj.feature_count) == ("joplin.geojson", 2823)
    aoi = import_vector_file(JOPLIN / "intersect_polys.shp", event_slug="joplin-2011").layers[0]
    assert aoi.feature_count == 3
    assert Layer.objects.filter(event__slug="joplin-2011").count() == 4


@pytest.mark.django_db
def test_import_osm_test_pbf(data_root):
    r = import_osm_file(OSM / "test.osm.pbf", event_slug="kouvola")
    layers = {l.file_name: l for l in r.layers}
    roads, pois = layers["test_roads.geojson"], layers["test_pois.geojson"]
    assert (roads.feature_count, pois.feature_count) == (331, 27)
    assert roads.crs == pois.crs == "EPSG:4326"
    fc = json.loads((data_root / roads.path).read_text())
    props = fc["features"][0]["properties"]
    assert {"osmid", "highway", "name"} <= set(props)
    assert {f["geometry"]["type"] for f in fc["features"]} == {"LineString"}
    w, s, e, n = roads.bounds
    assert 26.9 < w < e < 27.0 and 60.5 < s < n < 60.56
    pfc = json.loads((data_root / pois.path).read_text())
    cats = {f["properties"]["category"] for f in pfc["features"]}
    assert {"kindergarten", "fuel", "parking"} <= cats


@pytest.mark.django_db
def test_json_summary_shape(data_root, capsys):
    call_command("import_raster", str(JOPLIN / "test_area_single_poly.tif"), "--event", "joplin-2011",
                 "--modality", "aerial", "--phase", "post", "--json")
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"event", "event_created", "disaster_type", "layers", "skipped_files"}
    assert out["event"] == "joplin-2011" and out["event_created"] is True
    (layer,) = out["layers"]
    assert {"file_name", "kind", "modality", "phase", "frame", "crs", "gsd_m", "width", "height",
            "band_count", "path", "tiles_path", "status"} <= set(layer)
    assert (layer["kind"], layer["modality"], layer["crs"], layer["width"], layer["height"]) == (
        "raster", "aerial", "EPSG:4326", 70, 61)
    assert layer["status"] == "created"

    call_command("import_vector", str(JOPLIN / "intersect_polys.shp"), "--event", "joplin-2011", "--json")
    out = json.loads(capsys.readouterr().out)
    assert out["event_created"] is False and out["layers"][0]["feature_count"] == 3
    assert "width" not in out["layers"][0]

    call_command("import_osm", str(OSM / "test.osm.pbf"), "--event", "joplin-2011", "--json")
    out = json.loads(capsys.readouterr().out)
    assert [(l["file_name"], l["feature_count"]) for l in out["layers"]] == [
        ("test_roads.geojson", 331), ("test_pois.geojson", 27)]

    call_command("import_raster", str(JOPLIN / "output_dmg_0_pre.tif"), "--event", "joplin-2011",
                 "--kind", "mask", "--class-map", '{"0": "background", "1": "no-damage", "2": "minor-damage", '
                 '"3": "major-damage", "4": "destroyed"}', "--json")
    (mask,) = json.loads(capsys.readouterr().out)["layers"]
    assert mask["class_counts"] == {"0": 849040, "1": 24319, "2": 17196, "3": 12450, "4": 145571}
    assert mask["annotates"] is None


@pytest.mark.django_db
def test_failed_raster_and_vector_imports_leave_nothing(data_root, tmp_path):
    import_vector_file(JOPLIN / "intersect_polys.shp", event_slug="joplin-2011")
    before = (_tree(data_root), sorted(Layer.objects.values_list("file_name", "sha256")), Event.objects.count())

    corrupt = tmp_path / "corrupt.tif"
    corrupt.write_bytes(b"II*\x00" + b"\x00garbage" * 100)
    with pytest.raises(DataImportError, match="corrupt.tif: raster:"):
        import_raster_file(corrupt, event_slug="joplin-2011")
    bad_json = tmp_path / "broken.geojson"
    bad_json.write_text('{"type": "FeatureCollection", "features": [')
    with pytest.raises(DataImportError, match="broken.geojson"):
        import_vector_file(bad_json, event_slug="new-event")
    # fails inside the transaction, after the files were built: rows and files roll back
    with pytest.raises(DataImportError, match="annotates: no layer 'missing.tif'"):
        import_raster_file(JOPLIN / "output_dmg_0_pre.tif", event_slug="joplin-2011", kind="mask",
                           annotates="missing.tif")
    with pytest.raises(CommandError, match="not a slug"):
        call_command("import_osm", str(OSM / "test.osm.pbf"), "--event", "Not A Slug")
    bad_pbf = tmp_path / "x.osm.pbf"
    bad_pbf.write_bytes(b"not a pbf")
    with pytest.raises(DataImportError, match="x.osm.pbf: pbf:"):
        import_osm_file(bad_pbf, event_slug="joplin-2011")
    after = (_tree(data_root), sorted(Layer.objects.values_list("file_name", "sha256")), Event.objects.count())
    assert after == before


@pytest.mark.django_db
def test_changed_file_updates_in_place(data_root, tmp_path):
    src = tmp_path / "aoi.geojson"
    src.write_text(json.dumps({"type": "FeatureCollection", "features": [
        {"type": "Feature", "properties": {"name": "a"}, "geometry": {"type": "Point", "coordinates": [24.9, 60.2]}}]}))
    first = import_vector_file(src, event_slug="helsinki").layers[0]
    src.write_text(json.dumps({"type": "FeatureCollection", "features": [
        {"type": "Feature", "properties": {"name": n}, "geometry": {"type": "Point", "coordinates": [24.9, 60.2]}}
        for n in "ab"]}))
    r = import_vector_file(src, event_slug="helsinki")
    assert r.status == {"aoi.geojson": "new version"}
    assert r.layers[0].pk == first.pk and r.layers[0].feature_count == 2
    assert Layer.objects.count() == 1
    assert len(json.loads((data_root / first.path).read_text())["features"]) == 2


@pytest.mark.django_db
def test_import_vector_with_a_timestamp_column(data_root):
    """houston_flooded_roads.geojson has a `timestamp` column (datetime, mostly empty): dates are
    written as ISO text and missing ones as null. 2,605 features (counted with json.load)."""
    roads = import_vector_file(REAL / "houston-harvey-flooded-roads" / "houston_flooded_roads.geojson",
                               event_slug="houston-harvey").layers[0]
    assert roads.feature_count == 2605
    fc = json.loads((data_root / roads.path).read_text())
    stamps = {f["properties"]["timestamp"] for f in fc["features"]}
    assert None in stamps
    assert all(s is None or (isinstance(s, str) and s[:2] == "20") for s in stamps)
