"""Tiles and layer images: real rasters warped to web-mercator COGs in a temporary data root."""
from __future__ import annotations

import io
import json
from pathlib import Path

import morecantile
import numpy as np
import pytest
import rasterio
import rasterio.shutil
from conftest import REALDATA, requires_shared
from PIL import Image
from support.stored import store_file

from annotation import tiles

# Expected reader warnings, which annotation.tiles silences at import (pytest resets filters per test):
# rasterio 1.4 multiplies Affine with `*` (affine 3 deprecates it); pixel-frame PNGs have no geotransform.
pytestmark = [
    pytest.mark.filterwarnings("ignore::PendingDeprecationWarning:rasterio.windows"),
    pytest.mark.filterwarnings("ignore::rasterio.errors.NotGeoreferencedWarning"),
]

JOPLIN = REALDATA / "xview2-deploy-joplin" / "output_chips_post_0_post.tif"  # 1024² RGB, UTM 15N, no nodata
RGB_BYTE = REALDATA / "rasterio-testdata" / "RGB.byte.tif"  # 791×718 RGB, UTM 18N, nodata=0
FLORENCE_POST = REALDATA / "xbd-hurricane-florence" / "hurricane-florence_00000018_post_original.png"
FLORENCE_MASK = REALDATA / "xbd-hurricane-florence" / "hurricane-florence_00000018_mask.png"
WMQ = morecantile.tms.get("WebMercatorQuad")
DAMAGE = {"0": "background", "1": "no-damage", "2": "minor-damage", "3": "major-damage", "4": "destroyed"}


def needs_data(test):
    """Skip ``test`` on a clone without the Joplin chip or rasterio's RGB.byte.tif in ../shared."""
    return requires_shared(JOPLIN)(requires_shared(RGB_BYTE)(test))


def _png(data: bytes) -> Image.Image:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return Image.open(io.BytesIO(data)).convert("RGBA")


def _alpha_range(img: Image.Image) -> tuple[int, int]:
    return img.getchannel("A").getextrema()


@pytest.fixture(scope="session")
def cogs(tmp_path_factory):
    """Web-mercator COGs built once: the Joplin chip, RGB.byte (nodata 0) and a damage mask on the Joplin grid."""
    out = tmp_path_factory.mktemp("cogs")
    rasterio.shutil.copy(JOPLIN, out / "joplin_3857.tif", driver="COG", TILING_SCHEME="GoogleMapsCompatible")
    rasterio.shutil.copy(RGB_BYTE, out / "rgb_3857.tif", driver="COG", TILING_SCHEME="GoogleMapsCompatible")
    with rasterio.open(JOPLIN) as src:
        profile = {"driver": "GTiff", "height": src.height, "width": src.width, "count": 1, "dtype": "uint8",
                   "crs": src.crs, "transform": src.transform}
    classes = np.zeros((profile["height"], profile["width"]), dtype="uint8")
    classes[100:400, 100:400] = 4  # destroyed, north-west
    classes[600:900, 600:900] = 1  # no damage, south-east
    with rasterio.open(out / "mask_utm.tif", "w", **profile) as dst:
        dst.write(classes, 1)
    rasterio.shutil.copy(out / "mask_utm.tif", out / "mask_3857.tif", driver="COG",
                         TILING_SCHEME="GoogleMapsCompatible", RESAMPLING="NEAREST", OVERVIEW_RESAMPLING="NEAREST")
    return out


def _bounds(path: Path) -> list[float]:
    from rasterio.warp import transform_bounds

    with rasterio.open(path) as src:
        return list(transform_bounds(src.crs, "EPSG:4326", *src.bounds))


@pytest.fixture
def make_layer(db, settings, cogs):
    from annotation.models import Event, Layer

    event, _ = Event.objects.get_or_create(slug="joplin-test", defaults={"name": "Joplin test", "disaster_type": "tornado"})

    def make(cog: str, *, kind="raster", source=JOPLIN, **fields):
        store_file(f"layers/{cog}", copy_from=cogs / cog)
        defaults = dict(name=cog, kind=kind, file_name=cog.replace("_3857", ""), path=f"layers/{cog}",
                        tiles_path=f"layers/{cog}", frame="geographic", bounds=_bounds(source), modality="optical")
        defaults.update(fields)
        return Layer.objects.create(event=event, **defaults)

    return make


def _centre_tile(layer, z):
    w, s, e, n = layer.bounds
    return WMQ.tile((w + e) / 2, (s + n) / 2, z)


@needs_data
@pytest.mark.django_db
def test_tile_inside_the_raster_has_opaque_pixels(make_layer):
    layer = make_layer("joplin_3857.tif", phase="post")
    minzoom, maxzoom = tiles.tile_zoom_range(layer)
    assert 10 <= minzoom <= maxzoom <= 20
    t = _centre_tile(layer, maxzoom)
    img = _png(tiles.render_tile(layer, t.z, t.x, t.y))
    assert img.size == (256, 256)
    assert _alpha_range(img) == (255, 255)  # wholly inside: every pixel opaque
    rgb = np.asarray(img)[..., :3]
    assert rgb.std() > 5  # real imagery, not a flat fill


@needs_data
@pytest.mark.django_db
def test_tile_outside_the_raster_is_transparent(make_layer):
    layer = make_layer("joplin_3857.tif")
    maxzoom = tiles.tile_zoom_range(layer)[1]
    t = WMQ.tile(10.0, 50.0, maxzoom)  # Europe, far from Missouri
    img = _png(tiles.render_tile(layer, t.z, t.x, t.y))
    assert img.size == (256, 256) and _alpha_range(img) == (0, 0)
    # out of the tile matrix altogether
    assert _alpha_range(_png(tiles.render_tile(layer, 3, 99, 99))) == (0, 0)


@needs_data
@pytest.mark.django_db
def test_zoom_far_below_the_source_is_refused_with_a_transparent_tile(make_layer, monkeypatch):
    layer = make_layer("joplin_3857.tif")
    minzoom = tiles.tile_zoom_range(layer)[0]
    z = minzoom - tiles.MIN_ZOOM_SLACK - 1
    t = _centre_tile(layer, z)

    def no_read(*a, **k):  # refused before any pixel is read
        raise AssertionError("read a tile below the served zooms")

    monkeypatch.setattr("rio_tiler.io.Reader.tile", no_read)
    assert _alpha_range(_png(tiles.render_tile(layer, t.z, t.x, t.y))) == (0, 0)
    assert tiles.min_served_zoom(layer) == z + 1


@needs_data
@pytest.mark.django_db
def test_declared_nodata_is_transparent_and_black_stays_when_undeclared(make_layer):
    # RGB.byte declares nodata=0: its black collar becomes transparent at the edge of the footprint.
    rgb = make_layer("rgb_3857.tif", source=RGB_BYTE)
    maxzoom = tiles.tile_zoom_range(rgb)[1]
    w, s, e, n = rgb.bounds
    t = WMQ.tile(w + (e - w) * 0.02, n - (n - s) * 0.02, maxzoom)  # north-west corner: outside the rotated footprint
    lo, hi = _alpha_range(_png(tiles.render_tile(rgb, t.z, t.x, t.y)))
    assert lo == 0  # some nodata pixels hidden
    # The Joplin chip declares no nodata: its tiles are fully opaque, dark pixels included.
    joplin = make_layer("joplin_3857.tif")
    t = _centre_tile(joplin, tiles.tile_zoom_range(joplin)[1])
    assert _alpha_range(_png(tiles.render_tile(joplin, t.z, t.x, t.y))) == (255, 255)


@needs_data
@pytest.mark.django_db
def test_mask_tiles_use_the_class_colours(make_layer):
    mask = make_layer("mask_3857.tif", kind="mask", class_map=DAMAGE, modality="")
    minzoom, maxzoom = tiles.tile_zoom_range(mask)
    w, s, e, n = mask.bounds
    # a point inside the "destroyed" square (rows/cols 100–400 of 1024)
    lon, lat = w + (e - w) * 0.25, n - (n - s) * 0.25
    t = WMQ.tile(lon, lat, maxzoom)
    img = np.asarray(_png(tiles.render_tile(mask, t.z, t.x, t.y)))
    destroyed = tuple(int(tiles.CLASS_COLOURS[4][i:i + 2], 16) for i in (1, 3, 5))
    opaque = img[img[..., 3] == 255][:, :3]
    assert len(opaque) > 0
    assert (opaque == destroyed).all(axis=1).mean() > 0.9
    # a tile with background only: transparent (class 0 is transparent)
    lon, lat = w + (e - w) * 0.75, n - (n - s) * 0.05  # rows < 310, cols > 510: background only
    t = WMQ.tile(lon, lat, maxzoom)
    assert _alpha_range(_png(tiles.render_tile(mask, t.z, t.x, t.y)))[1] == 0


def test_class_colours_follow_labels_then_index():
    from types import SimpleNamespace

    layer = SimpleNamespace(class_map={"0": "background", "1": "destroyed", "7": "something"}, class_counts={"9": 3})
    colours = tiles.class_colours(layer)
    assert colours[0] is None
    assert colours[1] == tiles.CLASS_COLOURS[4]  # by label, whatever the index
    assert colours[7] == tiles.CLASS_COLOURS[7]
    assert 9 in colours  # counted but unlabelled classes still get a colour
    rows = tiles.legend(layer)
    assert [r["label"] for r in rows] == ["background", "destroyed", "something", "class 9"]


@requires_shared(FLORENCE_POST)
@pytest.mark.django_db
def test_pixel_frame_image_and_mask(settings):
    from annotation.models import Event, Layer

    store_file("post.png", copy_from=FLORENCE_POST)
    store_file("mask.png", copy_from=FLORENCE_MASK)
    event = Event.objects.create(slug="florence", name="Florence")
    img_layer = Layer.objects.create(event=event, name="post", kind="raster", frame="pixel", file_name="post.png",
                                     path="post.png", width=1024, height=1024, phase="post")
    mask_layer = Layer.objects.create(event=event, name="gt", kind="mask", frame="pixel", file_name="mask.png",
                                      path="mask.png", width=1024, height=1024, class_map=DAMAGE, annotates=img_layer)
    img = _png(tiles.render_image(img_layer))
    assert img.size == (1024, 1024) and _alpha_range(img) == (255, 255)
    mask = np.asarray(_png(tiles.render_image(mask_layer)))
    opaque = mask[mask[..., 3] == 255][:, :3]
    colours = {tuple(c) for c in opaque.tolist()}
    expected = {tuple(int(tiles.CLASS_COLOURS[k][i:i + 2], 16) for i in (1, 3, 5)) for k in (3, 4)}
    assert colours == expected  # the mask holds classes {0, 3, 4}: 0 transparent
    small = _png(tiles.render_image(img_layer, max_size=256))
    assert small.size == (256, 256)
    with pytest.raises(ValueError):
        tiles.render_tile(img_layer, 0, 0, 0)


@pytest.mark.django_db
def test_layer_file_is_confined_to_the_data_root(settings, tmp_path):
    from annotation.models import Event, Layer

    outside = tmp_path / "outside.tif"
    outside.write_bytes(b"x")
    event = Event.objects.create(slug="e", name="e")
    layer = Layer.objects.create(event=event, name="x", kind="raster", file_name="x.tif", path="../outside.tif",
                                 tiles_path="../outside.tif")
    with pytest.raises(tiles.LayerFileError):
        tiles.layer_file(layer)


# --- the HTTP endpoints ---------------------------------------------------------------------------


@pytest.fixture
def client_in(client, django_user_model):
    user = django_user_model.objects.create_user("viewer", password="pw")
    client.force_login(user)
    return client


@needs_data
@pytest.mark.django_db
def test_tile_endpoint(make_layer, client_in):
    layer = make_layer("joplin_3857.tif")
    t = _centre_tile(layer, tiles.tile_zoom_range(layer)[1])
    r = client_in.get(f"/tiles/{layer.id}/{t.z}/{t.x}/{t.y}.png")
    assert r.status_code == 200 and r["Content-Type"] == "image/png"
    img = _png(r.content)
    assert _alpha_range(img)[1] == 255
    far = WMQ.tile(10.0, 50.0, t.z)
    r = client_in.get(f"/tiles/{layer.id}/{far.z}/{far.x}/{far.y}.png")
    assert r.status_code == 200 and _alpha_range(_png(r.content)) == (0, 0)
    assert client_in.get(f"/tiles/{layer.id + 999}/1/0/0.png").status_code == 404


@needs_data
@pytest.mark.django_db
def test_endpoints_need_login(make_layer, client):
    layer = make_layer("joplin_3857.tif")
    for url in (f"/tiles/{layer.id}/1/0/0.png", f"/layers/{layer.id}/image.png", f"/layers/{layer.id}/geojson"):
        r = client.get(url)
        assert r.status_code == 302 and r["Location"].startswith("/accounts/login/"), url


@pytest.mark.django_db
def test_missing_file_is_404_and_wrong_kind_is_400(settings, client_in):
    from annotation.models import Event, Layer

    event = Event.objects.create(slug="e", name="e")
    gone = Layer.objects.create(event=event, name="gone", kind="raster", file_name="gone.tif", path="gone.tif",
                                tiles_path="gone_3857.tif")
    vec = Layer.objects.create(event=event, name="v", kind="vector", file_name="v.geojson", path="v.geojson")
    assert client_in.get(f"/tiles/{gone.id}/1/0/0.png").status_code == 404
    assert client_in.get(f"/layers/{gone.id}/image.png").status_code == 404
    assert client_in.get(f"/tiles/{vec.id}/1/0/0.png").status_code == 400
    assert client_in.get(f"/layers/{vec.id}/image.png").status_code == 400
    assert client_in.get(f"/layers/{gone.id}/geojson").status_code == 400


@pytest.mark.django_db
def test_geojson_endpoint_serves_the_stored_file_inside_the_root(settings, client_in, tmp_path):
    from annotation.models import Event, Layer

    root = Path(settings.STUDIO_DATA_ROOT)
    fc = {"type": "FeatureCollection", "features": [
        {"type": "Feature", "properties": {"name": "Station 1"}, "geometry": {"type": "Point", "coordinates": [-95.3, 29.7]}}]}
    (root / "vectors").mkdir()
    (root / "vectors" / "stations.geojson").write_text(json.dumps(fc))
    (tmp_path / "secret.geojson").write_text("{}")
    event = Event.objects.create(slug="houston", name="Houston")
    ok = Layer.objects.create(event=event, name="stations", kind="vector", file_name="stations.geojson",
                              path="vectors/stations.geojson", feature_count=1)
    via_meta = Layer.objects.create(event=event, name="m", kind="vector", file_name="m.shp", path="vectors/m.shp",
                                    metadata={"geojson_path": "vectors/stations.geojson"})
    escape = Layer.objects.create(event=event, name="x", kind="vector", file_name="x.geojson", path="../secret.geojson")
    r = client_in.get(f"/layers/{ok.id}/geojson")
    assert r.status_code == 200 and r["Content-Type"] == "application/geo+json"
    assert json.loads(b"".join(r.streaming_content)) == fc
    r = client_in.get(f"/layers/{via_meta.id}/geojson")
    assert r.status_code == 200 and json.loads(b"".join(r.streaming_content)) == fc
    assert client_in.get(f"/layers/{escape.id}/geojson").status_code == 404


@requires_shared(FLORENCE_POST)
@pytest.mark.django_db
def test_image_endpoint(settings, client_in):
    from annotation.models import Event, Layer

    store_file("mask.png", copy_from=FLORENCE_MASK)
    event = Event.objects.create(slug="florence", name="Florence")
    mask = Layer.objects.create(event=event, name="gt", kind="mask", frame="pixel", file_name="mask.png",
                                path="mask.png", width=1024, height=1024, class_map=DAMAGE)
    r = client_in.get(f"/layers/{mask.id}/image.png")
    assert r.status_code == 200 and r["Content-Type"] == "image/png"
    assert _png(r.content).size == (1024, 1024)


# ---- the tile cache, ETag and revalidation -----------------------------------------------------

def test_tile_cache_is_an_lru_bounded_by_bytes():
    # Hand-worked: a 10-byte bound holds "a" (4 B) and "b" (4 B); reading "a" makes "b" the least
    # recently used, so adding "c" (4 B, total 12 > 10) evicts "b" only; a 11-byte item is never kept.
    cache = tiles.TileCache(10)
    cache.put("a", b"aaaa")
    cache.put("b", b"bbbb")
    assert cache.get("a") == b"aaaa"
    cache.put("c", b"cccc")
    assert cache.get("b") is None and cache.get("a") == b"aaaa" and cache.get("c") == b"cccc"
    assert cache.size_bytes == 8 and len(cache) == 2
    cache.put("big", b"x" * 11)
    assert cache.get("big") is None and cache.size_bytes == 8
    assert tiles.TileCache(0).max_bytes == 0


@needs_data
@pytest.mark.django_db
def test_a_tile_is_rendered_once_and_revalidated_with_304(make_layer, client_in, monkeypatch, settings):
    settings.STUDIO_TILE_CACHE_BYTES = 8 * 2**20
    tiles.tile_cache().clear()
    layer = make_layer("joplin_3857.tif")
    t = _centre_tile(layer, tiles.tile_zoom_range(layer)[1])
    renders = []
    real = tiles.render_tile
    monkeypatch.setattr(tiles, "render_tile", lambda *a: renders.append(a[1:]) or real(*a))
    url = f"/tiles/{layer.id}/{t.z}/{t.x}/{t.y}.png"
    first = client_in.get(url)
    second = client_in.get(url)
    assert first.status_code == second.status_code == 200 and first.content == second.content
    assert renders == [(t.z, t.x, t.y)]  # the second request came from the cache
    etag = first["ETag"]
    assert etag.startswith('"') and etag.endswith(f'-{t.z}-{t.x}-{t.y}"') and etag == second["ETag"]
    assert "max-age=" in first["Cache-Control"]
    revalidated = client_in.get(url, HTTP_IF_NONE_MATCH=etag)
    assert revalidated.status_code == 304 and revalidated.content == b"" and revalidated["ETag"] == etag
    assert client_in.get(url, HTTP_IF_NONE_MATCH='"something-else"').status_code == 200
    assert len(renders) == 1
    # drawing the layer differently is another tile: a new ETag, a new render
    layer.metadata = {"rescale": [[0, 128], [0, 128], [0, 128]]}
    layer.save(update_fields=["metadata"])
    restyled = client_in.get(url, HTTP_IF_NONE_MATCH=etag)
    assert restyled.status_code == 200 and restyled["ETag"] != etag and len(renders) == 2


@needs_data
@pytest.mark.django_db
def test_tile_cache_can_be_turned_off(make_layer, settings):
    settings.STUDIO_TILE_CACHE_BYTES = 0
    layer = make_layer("joplin_3857.tif")
    t = _centre_tile(layer, tiles.tile_zoom_range(layer)[1])
    assert tiles.cached_tile(layer, t.z, t.x, t.y) == tiles.render_tile(layer, t.z, t.x, t.y)
    assert len(tiles.tile_cache()) == 0


def _constant_tif(path: Path, value: int) -> Path:
    from rasterio.transform import from_origin

    profile = {"driver": "GTiff", "height": 8, "width": 8, "count": 1, "dtype": "uint8", "crs": "EPSG:3857",
               "transform": from_origin(0, 80, 10, 10)}
    with rasterio.open(path, "w", **profile) as dst:
        dst.write(np.full((8, 8), value, dtype="uint8"), 1)
    return path


def test_kept_datasets_are_per_thread_and_reopened_when_the_file_is_replaced(tmp_path):
    """A tile file is opened once per thread; a file replaced at the same path (new inode) is read
    afresh: the values are the constants written (10, then 200)."""
    import os
    import threading

    path = _constant_tif(tmp_path / "a.tif", 10)
    first = tiles._kept_dataset(path)
    assert tiles._kept_dataset(path) is first and int(first.read(1)[0, 0]) == 10
    other = []
    worker = threading.Thread(target=lambda: other.append(tiles._kept_dataset(path)))
    worker.start()
    worker.join()
    assert other[0] is not first  # rasterio datasets are not thread-safe: one per thread
    os.replace(_constant_tif(tmp_path / "b.tif", 200), path)
    again = tiles._kept_dataset(path)
    assert again is not first and int(again.read(1)[0, 0]) == 200


def test_kept_datasets_are_bounded_per_thread(tmp_path):
    """Opening one file more than ``DATASETS_PER_THREAD`` closes the least recently used one."""
    import threading

    paths = [_constant_tif(tmp_path / f"{i}.tif", i) for i in range(tiles.DATASETS_PER_THREAD + 1)]
    seen = []

    def run():  # a fresh thread: nothing kept yet
        seen.extend(tiles._kept_dataset(p) for p in paths)

    worker = threading.Thread(target=run)
    worker.start()
    worker.join()
    assert seen[0].closed and not any(ds.closed for ds in seen[1:])


@needs_data
@pytest.mark.django_db
def test_tile_bytes_are_rio_tilers_with_the_file_opened_per_tile(make_layer):
    """The kept-open dataset changes no byte: every tile of zooms maxzoom-1 and maxzoom that touches
    the raster's centre row is rio-tiler's own ``Reader(file).tile(x, y, z).render(img_format="PNG")``
    (a fresh open per tile, as before)."""
    from rio_tiler.io import Reader

    layer = make_layer("joplin_3857.tif")
    path = tiles.layer_file(layer)
    maxzoom = tiles.tile_zoom_range(layer)[1]
    w, s, e, n = layer.bounds
    for z in (maxzoom - 1, maxzoom):
        for t in WMQ.tiles(w, (s + n) / 2, e, (s + n) / 2, zooms=[z]):
            with Reader(str(path)) as src:
                expected = src.tile(t.x, t.y, t.z).render(img_format="PNG")
            assert tiles.render_tile(layer, t.z, t.x, t.y) == expected, t
