"""Importer edge cases the real odd files do not reach (their examples are all-nodata or refused):
a south-up raster with data, list-valued (STAC) properties, 3D points, an empty geometry list,
a non-raster file. Inputs are written in ``tmp_path``; expected values worked out by hand."""
from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from affine import Affine
from conftest import REALDATA, needs_shared

from annotation.importers.errors import DataImportError
from annotation.models import Event, Layer
from annotation.services.imports import import_raster_file, import_vector_file

pytestmark = pytest.mark.django_db


def test_south_up_raster_has_ordered_bounds_and_renders(tmp_path):
    import morecantile
    import rasterio
    from rasterio.errors import NotGeoreferencedWarning

    from annotation.tiles import render_tile

    path = tmp_path / "south_up.tif"
    data = np.arange(100, dtype="uint8").reshape(10, 10) + 1
    # row 0 at 40°N, rows going north by 0.1°: covers 10–11°E, 40–41°N
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NotGeoreferencedWarning)
        with rasterio.open(path, "w", driver="GTiff", width=10, height=10, count=1, dtype="uint8",
                           crs="EPSG:4326", transform=Affine(0.1, 0, 10.0, 0, 0.1, 40.0)) as dst:
            dst.write(data, 1)
    layer = import_raster_file(path, event_slug="south-up").layers[0]
    assert layer.bounds == pytest.approx([10.0, 40.0, 11.0, 41.0])
    t = morecantile.tms.get("WebMercatorQuad").tile(10.5, 40.5, 8)
    assert render_tile(layer, t.z, t.x, t.y).startswith(b"\x89PNG")


def test_list_valued_properties_are_written_as_json_lists(tmp_path):
    """The S3A STAC item's properties (``instruments: ["SLSTR"]``, ``s3:shape: [1500, 35370]``)
    with a small valid footprint instead of its self-intersecting one."""
    src = needs_shared(REALDATA / "antimeridian-geojson" / "S3A_SL_2_LST_20160521T015552_20160521T033651_6059_004_217_____.json")
    needs_shared(src)
    item = json.loads(src.read_text())
    item["geometry"] = {"type": "Polygon", "coordinates": [[[10, 10], [11, 10], [11, 11], [10, 11], [10, 10]]]}
    path = tmp_path / "s3a_small.json"
    path.write_text(json.dumps(item))
    layer = import_vector_file(path, event_slug="s3a").layers[0]
    from django.conf import settings

    props = json.loads((settings.STUDIO_DATA_ROOT / layer.path).read_text())["features"][0]["properties"]
    assert props["instruments"] == ["SLSTR"]
    assert props["s3:shape"] == [1500, 35370]
    assert props["s3:gsd"] == {"S1-S6": 500, "S7-S9 and F1-F2": 1000}
    assert props["providers"][0]["roles"] == ["producer", "processor", "licensor"]


def test_3d_points_import_with_their_heights(tmp_path):
    fc = {"type": "FeatureCollection", "features": [
        {"type": "Feature", "properties": {"name": "mast"}, "geometry": {"type": "Point", "coordinates": [24.9, 60.2, 35.5]}},
        {"type": "Feature", "properties": {"name": "hill"}, "geometry": {"type": "Point", "coordinates": [25.0, 60.1, 80.0]}},
    ]}
    path = tmp_path / "masts.geojson"
    path.write_text(json.dumps(fc))
    layer = import_vector_file(path, event_slug="helsinki").layers[0]
    assert (layer.feature_count, layer.metadata["geometry_types"]) == (2, ["Point"])
    assert layer.bounds == pytest.approx([24.9, 60.1, 25.0, 60.2])
    from django.conf import settings

    stored = json.loads((settings.STUDIO_DATA_ROOT / layer.path).read_text())
    assert [f["geometry"]["coordinates"] for f in stored["features"]] == [[24.9, 60.2, 35.5], [25.0, 60.1, 80.0]]


def test_invalid_bowtie_is_refused_naming_the_feature(tmp_path, settings):
    fc = {"type": "FeatureCollection", "features": [
        {"type": "Feature", "properties": {}, "geometry": {"type": "Polygon", "coordinates": [
            [[0, 0], [1, 0], [1, 1], [0, 1], [0, 0]]]}},
        {"type": "Feature", "properties": {}, "geometry": {"type": "Polygon", "coordinates": [
            [[0, 0], [1, 1], [1, 0], [0, 1], [0, 0]]]}},  # a bow tie: crosses itself at (0.5, 0.5)
    ]}
    path = tmp_path / "bowtie.geojson"
    path.write_text(json.dumps(fc))
    with pytest.raises(DataImportError) as exc:
        import_vector_file(path, event_slug="bowtie")
    assert (exc.value.file, exc.value.field) == ("bowtie.geojson", "feature 1")
    assert "Self-intersection[0.5 0.5]" in exc.value.problem
    assert Event.objects.count() == 0 and Layer.objects.count() == 0
    assert not any(settings.STUDIO_DATA_ROOT.rglob("*"))


@pytest.mark.parametrize("name, content, field", [
    ("notes.tif", b"plain text, not a TIFF", "raster"),
    ("empty.tif", b"", "raster"),
], ids=["text-as-tif", "empty-file"])
def test_non_raster_files_are_refused(tmp_path, name, content, field):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(DataImportError) as exc:
        import_raster_file(path, event_slug="x")
    assert (exc.value.file, exc.value.field) == (name, field)
