"""xBD importers and the import_xbd service/command, on the real folders in shared/realdata.

Hand-worked constants, and how each was obtained:
- Pixel counts of the real masks: ``np.unique(rasterio.open(f).read(1), return_counts=True)``
  run once on the source PNGs (hurricane-florence _mask.png, guatemala _mask.png, joplin _b1.png,
  socal-fire _post_disaster_target.png); florence's and guatemala's agree with their SOURCE.md
  (values {0,3,4} and {0,1}).
- Building counts per subtype: counting ``features.xy[*].properties.subtype`` in the label JSONs;
  they agree with the SOURCE.md files (socal 125 no-damage, santa-rosa 16: 18 destroyed + 4
  no-damage, joplin 50: 11 destroyed, 3 major, 1 un-classified).
- Rasterised masks: compared with the sum of the shapely areas of the xy polygons per class
  (socal 200,607 px² no-damage; santa-rosa 16: 20,875 destroyed, 18,202 no-damage; joplin 50:
  50,995 destroyed, 18,170 major, 2,285 un-classified): a centre-in-polygon rasterisation must
  land within 1 % of the area.
- Affine fit: least squares over every vertex pair; the lng_lat in xBD labels are an affine image
  of the xy (SOURCE.md of santa-rosa: ≤ 0.015 px), so the residual is far below one pixel. The
  fitted GSD (0.4578 m for socal-fire, measured in the local UTM zone 11N) is the tile's real
  pixel spacing; the label's ``metadata.gsd`` (2.5700748) is the sensor's multispectral GSD and
  ``pan_resolution`` (0.6438) its panchromatic one, so the fit is checked against pan_resolution
  (same order, the tile is resampled finer) and the metadata value is kept in the layer metadata.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import rasterio
from conftest import requires_shared
from django.conf import settings as dj_settings
from django.core.management import call_command
from django.core.management.base import CommandError

from annotation.importers import xbd
from annotation.importers.errors import DataImportError
from annotation.models import Event, Layer
from annotation.services.imports import import_xbd_folder

REAL = Path(dj_settings.STUDIO_DEMO_DATA)
SOCAL = REAL / "xbd-socal-fire"
FLORENCE = REAL / "xbd-hurricane-florence"
GUATEMALA = REAL / "xbd-guatemala-volcano"
SANTA_ROSA = REAL / "xbd-santa-rosa-labels"
JOPLIN = REAL / "xbd-joplin-tornado-labels"

pytestmark = [
    requires_shared(SOCAL),
    pytest.mark.filterwarnings("ignore::rasterio.errors.NotGeoreferencedWarning"),
]


@pytest.fixture
def data_root(settings, tmp_path):
    settings.STUDIO_DATA_ROOT = tmp_path / "data"
    settings.STUDIO_DATA_ROOT.mkdir(parents=True, exist_ok=True)
    return settings.STUDIO_DATA_ROOT


def _tree(root: Path) -> dict[str, int]:
    return {p.relative_to(root).as_posix(): p.stat().st_size for p in root.rglob("*")}


# ------------------------------------------------------------------ pure importers


def test_parse_label_counts_subtypes():
    post = xbd.parse_label(SOCAL / "socal-fire_00000031_post_disaster.json")
    assert len(post.buildings) == 125
    assert {b.subtype for b in post.buildings} == {"no-damage"}
    assert all(b.xy is not None and b.lng_lat is not None for b in post.buildings)
    pre = xbd.parse_label(SOCAL / "socal-fire_00000031_pre_disaster.json")
    assert len(pre.buildings) == 125 and {b.subtype for b in pre.buildings} == {None}
    joplin = xbd.parse_label(JOPLIN / "joplin-tornado_00000050_post_disaster.json")
    counts = {}
    for b in joplin.buildings:
        counts[b.subtype] = counts.get(b.subtype, 0) + 1
    assert counts == {"destroyed": 11, "major-damage": 3, "un-classified": 1}


def test_affine_fit_residual_and_gsd():
    label = xbd.parse_label(SOCAL / "socal-fire_00000031_post_disaster.json")
    fit = xbd.fit_affine(label)
    assert fit is not None and fit.n_points > 1000
    assert fit.rms_px < 1.0 and fit.max_px < 1.0  # measured: ~3e-6 px
    assert fit.gsd_m == pytest.approx(0.4578, abs=0.002)
    # same order as the panchromatic resolution (0.644 m), far from the multispectral gsd (2.57 m)
    assert 0.5 * label.metadata["pan_resolution"] < fit.gsd_m < 1.5 * label.metadata["pan_resolution"]
    assert label.metadata["gsd"] == pytest.approx(2.5700748)
    # the fit sends pixel (0, 0) near Malibu
    lon, lat = fit.to_lnglat(0.0, 0.0)
    assert -119.0 < lon < -118.7 and 34.0 < lat < 34.2
    assert fit.utm_crs == "EPSG:32611"


def test_affine_fit_none_without_buildings(tmp_path):
    p = tmp_path / "empty-fire_00000001_post_disaster.json"
    p.write_text(json.dumps({"features": {"xy": [], "lng_lat": []}, "metadata": {"width": 1024, "height": 1024}}))
    label = xbd.parse_label(p)
    assert label.buildings == [] and xbd.fit_affine(label) is None
    mask = xbd.rasterize_damage(label)
    assert mask.shape == (1024, 1024) and int(mask.sum()) == 0


def test_rasterize_matches_polygon_areas():
    label = xbd.parse_label(SANTA_ROSA / "santa-rosa-wildfire_00000016_post_disaster.json")
    mask = xbd.rasterize_damage(label)
    assert mask.dtype == np.uint8 and mask.shape == (1024, 1024)
    assert int((mask == 4).sum()) == pytest.approx(20875, rel=0.01)
    assert int((mask == 1).sum()) == pytest.approx(18202, rel=0.01)
    assert set(np.unique(mask).tolist()) == {0, 1, 4}


def test_parse_label_errors_name_file_and_field(tmp_path):
    p = tmp_path / "bad-fire_00000001_post_disaster.json"
    p.write_text(json.dumps({"features": {"xy": [{"properties": {"subtype": "on-fire", "uid": "u1"},
                                                  "wkt": "POLYGON ((0 0, 1 0, 1 1, 0 0))"}]}}))
    with pytest.raises(DataImportError) as exc:
        xbd.parse_label(p)
    assert exc.value.file == p.name and "subtype" in exc.value.field and "on-fire" in str(exc.value)
    p.write_text("{not json")
    with pytest.raises(DataImportError, match=r"bad-fire_00000001_post_disaster.json: json:"):
        xbd.parse_label(p)


def test_disaster_type_from_names():
    from annotation.importers.common import disaster_type_for

    assert disaster_type_for("socal-fire") == "wildfire"
    assert disaster_type_for("hurricane-florence") == "hurricane"
    assert disaster_type_for("guatemala-volcano") == "volcano"
    assert disaster_type_for("santa-rosa-wildfire") == "wildfire"
    assert disaster_type_for("joplin-tornado") == "tornado"
    assert disaster_type_for("some-place", "flooding") == "flood"


# ------------------------------------------------------------------ services on the real folders


@pytest.mark.django_db
def test_import_socal_fire(data_root):
    result = import_xbd_folder(SOCAL)
    event = result.event
    assert event.slug == "socal-fire" and event.disaster_type == "wildfire"
    layers = {l.file_name: l for l in event.layers.all()}
    assert len(layers) == 9
    post = layers["socal-fire_00000031_post_disaster.png"]
    assert (post.kind, post.modality, post.phase, post.frame, post.crs) == ("raster", "optical", "post", "pixel", "")
    assert (post.width, post.height, post.band_count, post.bands) == (1024, 1024, 3, ["R", "G", "B"])
    assert post.gsd_m == pytest.approx(0.4578, abs=0.002)
    assert post.metadata["georeference"]["residual_max_px"] < 1.0
    assert post.metadata["label"]["gsd"] == pytest.approx(2.5700748)
    assert post.tiles_path == post.path  # pixel frame: one plain COG
    with rasterio.open(data_root / post.path) as src:
        assert src.crs is None and src.driver == "GTiff" and src.count == 3

    mask = layers["socal-fire_00000031_damage_mask.tif"]
    assert mask.kind == "mask" and mask.annotates_id == post.pk
    assert post.gt_masks.get() == mask  # the replay engine's lookup finds exactly one
    assert mask.class_map["4"] == "destroyed" and mask.class_map["5"] == "un-classified"
    assert mask.class_counts["1"] == pytest.approx(200607, rel=0.01)  # area of the 125 polygons
    assert mask.class_counts["0"] + mask.class_counts["1"] == 1024 * 1024
    assert all(mask.class_counts[k] == 0 for k in "2345")

    target = layers["socal-fire_00000031_post_disaster_target.png"]
    assert target.class_counts == {"0": 837925, "1": 210651, "2": 0, "3": 0, "4": 0, "5": 0}
    assert target.annotates_id is None

    fp = layers["socal-fire_00000031_post_disaster_buildings.geojson"]
    ll = layers["socal-fire_00000031_post_disaster_buildings_lnglat.geojson"]
    assert (fp.kind, fp.frame, fp.feature_count) == ("vector", "pixel", 125)
    assert (ll.frame, ll.crs, ll.feature_count) == ("geographic", "EPSG:4326", 125)
    fc = json.loads((data_root / fp.path).read_text())
    assert {f["properties"]["subtype"] for f in fc["features"]} == {"no-damage"}
    assert all(f["properties"]["uid"] for f in fc["features"])
    west, south, east, north = ll.bounds
    assert -118.85 < west < east < -118.82 and 34.12 < south < north < 34.14
    # originals are kept unchanged for the release export
    assert (data_root / "events/socal-fire/original/socal-fire_00000031_post_disaster.png").read_bytes() == \
        (SOCAL / "socal-fire_00000031_post_disaster.png").read_bytes()
    assert not (data_root / "tmp").exists()


@pytest.mark.django_db
def test_import_florence_auto_detects_class_mask(data_root):
    result = import_xbd_folder(FLORENCE)
    assert result.event.slug == "hurricane-florence" and result.event.disaster_type == "hurricane"
    layers = {l.file_name: l for l in result.layers}
    assert set(layers) == {
        "hurricane-florence_00000018_pre_original.png", "hurricane-florence_00000018_post_original.png",
        "hurricane-florence_00000018_mask.png", "hurricane-florence_00000018_bounding_boxes.geojson",
    }
    mask = layers["hurricane-florence_00000018_mask.png"]
    assert mask.annotates.file_name == "hurricane-florence_00000018_post_original.png"
    assert mask.class_counts == {"0": 1021810, "1": 0, "2": 0, "3": 26492, "4": 274, "5": 0}
    assert mask.metadata["building_counts"]["major-damage"] == 42
    assert layers["hurricane-florence_00000018_bounding_boxes.geojson"].feature_count == 47
    assert "hurricane-florence_00000018_mask_color.png" in result.skipped_files
    assert mask.gsd_m is None  # no labels, no --gsd


@pytest.mark.django_db
def test_import_guatemala_with_explicit_mask_and_class_map(data_root, tmp_path, capsys):
    cmap = tmp_path / "classes.json"
    cmap.write_text(json.dumps({"0": "background", "1": "no-damage", "2": "minor-damage", "3": "major-damage",
                                "4": "destroyed"}))
    call_command("import_xbd", str(GUATEMALA), "--event", "fuego-2018", "--mask",
                 str(GUATEMALA / "guatemala-volcano_00000000_mask.png"), "--class-map", str(cmap),
                 "--gsd", "0.5", "--json")
    out = json.loads(capsys.readouterr().out)
    assert out["event"] == "fuego-2018" and out["disaster_type"] == "volcano"
    masks = [l for l in out["layers"] if l["kind"] == "mask"]
    assert len(masks) == 1 and len(out["layers"]) == 4
    assert masks[0]["class_counts"] == {"0": 1032738, "1": 15838, "2": 0, "3": 0, "4": 0}
    assert masks[0]["annotates"] == "guatemala-volcano_00000000_post_original.png"
    assert masks[0]["gsd_m"] == 0.5
    assert {l["file_name"]: l["feature_count"] for l in out["layers"] if l["kind"] == "vector"} == {
        "guatemala-volcano_00000000_bounding_boxes.geojson": 10}


@pytest.mark.django_db
def test_import_santa_rosa_labels_only(data_root):
    result = import_xbd_folder(SANTA_ROSA)
    assert result.event.slug == "santa-rosa-wildfire" and result.event.disaster_type == "wildfire"
    layers = {l.file_name: l for l in result.layers}
    assert len(layers) == 9  # 3 tiles × (mask + pixel footprints + lon/lat footprints)
    assert not any(l.kind == "raster" for l in layers.values())
    m16 = layers["santa-rosa-wildfire_00000016_damage_mask.tif"]
    assert m16.annotates_id is None and (m16.width, m16.height) == (1024, 1024)
    assert m16.class_counts["4"] == pytest.approx(20875, rel=0.01)
    assert layers["santa-rosa-wildfire_00000025_post_disaster_buildings.geojson"].feature_count == 18
    assert layers["santa-rosa-wildfire_00000013_post_disaster_buildings_lnglat.geojson"].feature_count == 6
    assert m16.gsd_m == pytest.approx(0.4478, abs=0.002)
    assert m16.metadata["gsd_source"] == "affine_fit"


@pytest.mark.django_db
def test_import_joplin_labels_and_b1_mask(data_root):
    result = import_xbd_folder(JOPLIN)
    assert result.event.slug == "joplin-tornado" and result.event.disaster_type == "tornado"
    layers = {l.file_name: l for l in result.layers}
    assert len(layers) == 6
    b1 = layers["joplin-tornado_00000050_post_disaster_b1.png"]
    assert b1.class_counts == {"0": 979266, "1": 0, "2": 0, "3": 17673, "4": 49471, "5": 2166}
    gt = layers["joplin-tornado_00000050_damage_mask.tif"]
    assert gt.class_counts["4"] == pytest.approx(50995, rel=0.01)
    assert gt.class_counts["3"] == pytest.approx(18170, rel=0.01)
    assert gt.class_counts["5"] == pytest.approx(2285, rel=0.1)
    assert "test_tile_0.png" in result.skipped_files


@pytest.mark.django_db
def test_reimport_is_idempotent(data_root):
    first = import_xbd_folder(JOPLIN)
    tree = _tree(data_root)
    again = import_xbd_folder(JOPLIN)
    assert set(again.status.values()) == {"unchanged"}
    assert Event.objects.count() == 1 and Layer.objects.count() == len(first.layers)
    assert _tree(data_root) == tree


@pytest.mark.django_db
def test_failed_import_leaves_nothing_behind(data_root, tmp_path):
    import_xbd_folder(JOPLIN)
    before_db = sorted(Layer.objects.values_list("file_name", "sha256"))
    before_tree = _tree(data_root)
    bad = tmp_path / "bad"
    bad.mkdir()
    shutil.copy(JOPLIN / "joplin-tornado_00000050_post_disaster.json", bad)
    # a mask with a value (7) the class map does not know: fails while building the layer files
    with rasterio.open(bad / "joplin-tornado_00000050_mask.png", "w", driver="PNG", width=1024, height=1024,
                       count=1, dtype="uint8") as dst:
        dst.write(np.full((1, 1024, 1024), 7, dtype=np.uint8))
    with pytest.raises(DataImportError, match=r"joplin-tornado_00000050_mask.png: pixel values: values \[7\]"):
        import_xbd_folder(bad, event_slug="joplin-tornado",
                          mask=bad / "joplin-tornado_00000050_mask.png")
    # a corrupt label JSON
    (bad / "joplin-tornado_00000050_post_disaster.json").write_text('{"features": {"xy": [{"wkt": "POLYGON ((0 0,"}]}}')
    with pytest.raises(DataImportError, match="features.xy\\[0\\].wkt: invalid WKT"):
        import_xbd_folder(bad, event_slug="joplin-tornado")
    with pytest.raises(CommandError, match="invalid WKT"):
        call_command("import_xbd", str(bad), "--event", "other-event")
    assert sorted(Layer.objects.values_list("file_name", "sha256")) == before_db
    assert Event.objects.count() == 1
    assert _tree(data_root) == before_tree
