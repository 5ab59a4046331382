"""Imagery in both frames: socal-fire's pixel-frame PNGs drawn on the globe.

The xBD importer fits an affine pixel → lon/lat map from the labels' paired ``xy``/``lng_lat``
vertices (``annotation.importers.xbd.fit_affine``, residual < 1e-5 px for socal-fire_00000031) and
stores it in ``metadata["georeference"]``. The map draws the layer a second time, in the geographic
group, as web-mercator tiles read through that fit. The checks below are worked out from the data:
the damage mask is rasterised from the post label's ``xy`` polygons, all 125 of them
``no-damage`` (class 1), and the lon/lat buildings layer holds the same polygons' ``lng_lat``
rings; so the mask drawn on the globe must be class 1 (green, ``CLASS_COLOURS[1]``) inside the
lon/lat buildings, and transparent (class 0) far from them.
"""
from __future__ import annotations

import io
import json

import morecantile
import pytest
from affine import Affine
from conftest import REALDATA, needs_shared
from PIL import Image
from shapely.geometry import shape

from annotation import tiles
from annotation.services.imports import import_xbd_folder
from frontend.views.events import map_config

WMQ = morecantile.tms.get("WebMercatorQuad")
SOCAL = REALDATA / "xbd-socal-fire"
FLORENCE = REALDATA / "xbd-hurricane-florence"


@pytest.fixture
def data_root(settings, tmp_path):
    settings.STUDIO_DATA_ROOT = tmp_path / "data"
    settings.STUDIO_DATA_ROOT.mkdir(parents=True, exist_ok=True)
    return settings.STUDIO_DATA_ROOT


def _rgba_at(layer, lon: float, lat: float, z: int) -> tuple[int, int, int, int]:
    """The colour the map shows at (lon, lat): the pixel of the zoom-z tile that covers it."""
    t = WMQ.tile(lon, lat, z)
    b = WMQ.xy_bounds(t)
    x, y = WMQ.xy(lon, lat)
    col = min(255, int((x - b.left) / (b.right - b.left) * 256))
    row = min(255, int((b.top - y) / (b.top - b.bottom) * 256))
    img = Image.open(io.BytesIO(tiles.render_tile(layer, t.z, t.x, t.y))).convert("RGBA")
    return img.getpixel((col, row))


def _hex(rgba) -> str:
    r, g, b = rgba[:3]
    return f"#{r:02x}{g:02x}{b:02x}"


@pytest.mark.django_db
def test_socal_fire_mask_on_the_globe_lies_under_its_lon_lat_buildings(data_root, client, make_user):
    event = import_xbd_folder(needs_shared(SOCAL)).event
    layers = {la.file_name: la for la in event.layers.all()}
    mask = layers["socal-fire_00000031_damage_mask.tif"]
    post = layers["socal-fire_00000031_post_disaster.png"]
    assert mask.frame == "pixel" and tiles.display_georeference(mask)[0] == "EPSG:4326"

    specs = {s["id"]: s for s in map_config(event.layers.all())["layers"]}
    # every raster and mask twice (pixel group, geographic group); vectors once
    twins = sorted(k for k in specs if isinstance(k, str))
    assert twins == sorted(f"{la.id}:geo" for la in layers.values() if la.kind in ("raster", "mask"))
    geo = specs[f"{mask.id}:geo"]
    assert geo["group"] == "geographic" and geo["frame"] == "geographic" and "tiles" in geo
    assert geo["valueUrl"].endswith("?frame=geographic")
    # the default view of the geographic group: the post image and the GT mask, like the pixel group
    assert specs[f"{post.id}:geo"]["visible"] and geo["visible"]
    assert not specs[f"{layers['socal-fire_00000031_pre_disaster.png'].id}:geo"]["visible"]

    fc = json.loads((data_root / layers["socal-fire_00000031_post_disaster_buildings_lnglat.geojson"].path).read_text())
    points = [shape(f["geometry"]).representative_point() for f in fc["features"]][:25]
    maxzoom = tiles.tile_zoom_range(mask)[1]
    green = tiles.CLASS_COLOURS[1]
    inside = [_hex(_rgba_at(mask, p.x, p.y, maxzoom)) for p in points]
    assert inside.count(green) >= 23, inside  # a point on a ring's very edge may fall on the next pixel
    # the image's own corner (column 2, row 2 under the fit) has no building: class 0, transparent
    lon, lat = Affine(*mask.metadata["georeference"]["transform"]) @ (2.5, 2.5)
    assert _rgba_at(mask, lon, lat, maxzoom)[3] == 0
    # the post image is opaque where the mask is
    assert _rgba_at(post, points[0].x, points[0].y, maxzoom)[3] == 255

    # the endpoints: a twin's tile and click-to-identify in lon/lat
    client.force_login(make_user("viewer", "author"))
    t = WMQ.tile(points[0].x, points[0].y, maxzoom)
    resp = client.get(f"/tiles/{mask.id}/{t.z}/{t.x}/{t.y}.png")
    assert resp.status_code == 200 and resp["Content-Type"] == "image/png"
    hits = [client.get(f"/layers/{mask.id}/value", {"x": p.x, "y": p.y, "frame": "geographic"}).json() for p in points]
    assert sum(h["values"] == [1] and h["label"] == "no-damage" for h in hits) >= 23, hits
    # the same point without frame=geographic is a column/row: (-118.8, 34.1) lies outside the image
    assert client.get(f"/layers/{mask.id}/value", {"x": points[0].x, "y": points[0].y}).json()["values"] is None


@pytest.mark.django_db
def test_a_pixel_layer_without_a_fit_stays_in_its_frame(data_root, client, make_user):
    """hurricane-florence's folder has no label JSON, so no fit: no twin, no tiles (400)."""
    event = import_xbd_folder(needs_shared(FLORENCE)).event
    post = event.layers.get(file_name="hurricane-florence_00000018_post_original.png")
    assert tiles.display_georeference(post) is None and not tiles.has_tiles(post)
    assert all(not isinstance(s["id"], str) for s in map_config(event.layers.all())["layers"])
    client.force_login(make_user("viewer", "author"))
    assert client.get(f"/tiles/{post.id}/15/0/0.png").status_code == 400
    with pytest.raises(ValueError):
        tiles.render_tile(post, 0, 0, 0)


@pytest.mark.django_db
def test_replay_mask_png_and_legend_use_the_tools_classes_and_the_remap(data_root, client, make_user):
    """seg.building_damage's GT replay on the florence mask remaps xBD 2 minor- and 3 major-damage
    to 2 partially damaged and 4 destroyed to 3 (replay/tools/perception.py); the PNG the map
    draws has exactly those pixel counts (the mask's class_counts) in the legend's colours."""
    import collections

    from support.replay import florence_max_polygon_task

    from replay.services.runs import start_replay

    ada = make_user("ada", "author")
    event, _post, task = florence_max_polygon_task(ada)
    counts = event.layers.get(kind="mask").class_counts
    run = start_replay(ada, task)
    run.refresh_from_db()
    assert run.status == "succeeded", run.error
    client.force_login(ada)
    mask = next(s for s in client.get(f"/replays/{run.pk}/overlays/").json()["overlays"] if s["kind"] == "mask")
    rows = {r["value"]: r for r in mask["legend"]}
    assert {v: (r["label"], r["from"]) for v, r in rows.items()} == {
        0: ("background", ["0 background", "5 un-classified"]),
        1: ("intact", ["1 no-damage"]),
        2: ("partially damaged", ["2 minor-damage", "3 major-damage"]),
        3: ("totally destroyed", ["4 destroyed"]),
    }
    assert (rows[1]["colour"], rows[2]["colour"], rows[3]["colour"]) == \
        (tiles.CLASS_COLOURS[1], tiles.CLASS_COLOURS[3], tiles.CLASS_COLOURS[4])
    png = Image.open(io.BytesIO(client.get(mask["image"]).content)).convert("RGBA")
    seen = collections.Counter(_hex(px) for px in png.getdata() if px[3])
    expected = {tiles.CLASS_COLOURS[1]: counts.get("1", 0), tiles.CLASS_COLOURS[3]: counts.get("2", 0) + counts.get("3", 0),
                tiles.CLASS_COLOURS[4]: counts.get("4", 0)}
    assert seen == {c: n for c, n in expected.items() if n}, (seen, counts)
