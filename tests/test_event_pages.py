"""Event list and event map pages: login, every layer listed, legends, map config, offline assets."""
from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import pytest
import rasterio
import rasterio.shutil
from conftest import REALDATA, needs_shared
from support.stored import remove_file, store_file

REPO = Path(__file__).resolve().parents[1]
# Expected reader warnings, which annotation.tiles silences at import (pytest resets filters per test):
# rasterio 1.4 multiplies Affine with `*` (affine 3 deprecates it); pixel-frame PNGs have no geotransform.
pytestmark = [
    pytest.mark.filterwarnings("ignore::PendingDeprecationWarning:rasterio.windows"),
    pytest.mark.filterwarnings("ignore::rasterio.errors.NotGeoreferencedWarning"),
]

JOPLIN = REALDATA / "xview2-deploy-joplin" / "output_chips_post_0_post.tif"
FLORENCE = REALDATA / "xbd-hurricane-florence"
STATIC = REPO / "frontend" / "static"
DAMAGE = {"0": "background", "1": "no-damage", "2": "minor-damage", "3": "major-damage", "4": "destroyed"}


@pytest.fixture(scope="session")
def joplin_cog(tmp_path_factory):
    out = tmp_path_factory.mktemp("pages") / "joplin_3857.tif"
    rasterio.shutil.copy(needs_shared(JOPLIN), out, driver="COG", TILING_SCHEME="GoogleMapsCompatible")
    return out


@pytest.fixture
def event(db, settings, joplin_cog):
    """An event with a geographic raster, a pixel-frame pre/post pair with a GT mask, and vectors."""
    from rasterio.warp import transform_bounds

    from annotation.models import Event, Layer

    # a key of its own per test: GDAL remembers what it read of an object (and, with a bucket, that it
    # exists) for its process's life, and every test of the session shares the process and the bucket
    joplin = store_file(f"joplin-{uuid.uuid4().hex[:8]}/joplin_3857.tif", copy_from=joplin_cog)
    joplin = joplin.relative_to(settings.STUDIO_DATA_ROOT).as_posix()
    for name in ("pre_original.png", "post_original.png", "mask.png"):
        store_file(name, copy_from=needs_shared(FLORENCE / f"hurricane-florence_00000018_{name}"))
    store_file("roads.geojson", data=json.dumps({"type": "FeatureCollection", "features": [
        {"type": "Feature", "properties": {"name": "Main St", "highway": "primary"},
         "geometry": {"type": "LineString", "coordinates": [[-94.499, 37.07], [-94.493, 37.074]]}}]}).encode())
    store_file("buildings.geojson", data=json.dumps({"type": "FeatureCollection", "features": [
        {"type": "Feature", "properties": {"subtype": "destroyed", "uid": "b1"},
         "geometry": {"type": "Polygon", "coordinates": [[[10, 10], [60, 10], [60, 60], [10, 60], [10, 10]]]}}]}).encode())
    with rasterio.open(needs_shared(JOPLIN)) as src:
        bounds = list(transform_bounds(src.crs, "EPSG:4326", *src.bounds))
    ev = Event.objects.create(slug="florence-joplin", name="Florence & Joplin sample", disaster_type="flood",
                              source="xBD / xView2 samples")
    Layer.objects.create(event=ev, name="Joplin post", kind="raster", phase="post", modality="optical",
                         file_name="joplin_post.tif", path=joplin, tiles_path=joplin,
                         frame="geographic", crs="EPSG:32615", gsd_m=0.6, width=1024, height=1024, bounds=bounds)
    Layer.objects.create(event=ev, name="Roads", kind="vector", file_name="roads.geojson", path="roads.geojson",
                         frame="geographic", feature_count=1, bounds=bounds)
    Layer.objects.create(event=ev, name="Florence pre", kind="raster", phase="pre", frame="pixel",
                         file_name="florence_pre.png", path="pre_original.png", width=1024, height=1024)
    post = Layer.objects.create(event=ev, name="Florence post", kind="raster", phase="post", frame="pixel",
                                file_name="florence_post.png", path="post_original.png", width=1024, height=1024)
    Layer.objects.create(event=ev, name="Florence GT damage", kind="mask", frame="pixel", file_name="florence_mask.png",
                         path="mask.png", width=1024, height=1024, class_map=DAMAGE,
                         class_counts={"0": 1000000, "3": 40000, "4": 8576}, annotates=post)
    Layer.objects.create(event=ev, name="Florence buildings", kind="vector", frame="pixel",
                         file_name="florence_buildings.geojson", path="buildings.geojson", feature_count=1, annotates=post)
    Layer.objects.create(event=ev, name="Florence pre buildings", kind="vector", frame="pixel", phase="pre",
                         file_name="florence_pre_buildings.geojson", path="buildings.geojson", feature_count=1,
                         metadata={"image": "florence_pre.png"})
    Layer.objects.create(event=ev, name="Florence reference target", kind="mask", frame="pixel", phase="post",
                         file_name="florence_target.png", path="mask.png", width=1024, height=1024,
                         class_map=DAMAGE, metadata={"role": "reference"})
    return ev


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user("ana", password="pw-test-123")


@pytest.fixture
def client_in(client, user):
    client.force_login(user)
    return client


def _config(response) -> dict:
    html = response.content.decode()
    m = re.search(r'<script id="event-map-config" type="application/json">(.*?)</script>', html, re.S)
    assert m, "map config missing"
    return json.loads(m.group(1))


# --- access ---------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_pages_need_login(client, event):
    for url in ("/", f"/events/{event.slug}/"):
        r = client.get(url)
        assert r.status_code == 302 and r["Location"].startswith("/accounts/login/?next="), url


@pytest.mark.django_db
def test_login_page_and_sign_in(client, user):
    r = client.get("/accounts/login/")
    assert r.status_code == 200
    html = r.content.decode()
    assert 'name="csrfmiddlewaretoken"' in html and 'name="username"' in html and 'type="password"' in html
    assert "Log out" not in html  # no user menu for anonymous visitors
    r = client.post("/accounts/login/", {"username": "ana", "password": "wrong"})
    assert r.status_code == 200 and "form-errors" in r.content.decode()
    r = client.post("/accounts/login/", {"username": "ana", "password": "pw-test-123", "next": "/"})
    assert r.status_code == 302 and r["Location"] == "/"


@pytest.mark.django_db
def test_base_layout_has_nav_user_and_logout_form(client_in, event):
    html = client_in.get("/").content.decode()
    for href in ('href="/"', 'href="/tasks/"', 'href="/runs/"', 'href="/api/docs/"'):
        assert href in html
    assert "ana" in html
    form = re.search(r'<form method="post" action="/accounts/logout/".*?</form>', html, re.S)
    assert form and "csrfmiddlewaretoken" in form.group(0)


# --- event list and detail ------------------------------------------------------------------------


@pytest.mark.django_db
def test_event_list(client_in, event):
    from annotation.models import Event

    Event.objects.create(slug="empty-event", name="Empty event")
    r = client_in.get("/")
    assert r.status_code == 200
    html = r.content.decode()
    assert f'href="/events/{event.slug}/"' in html and "Florence &amp; Joplin sample" in html
    assert 'href="/events/empty-event/"' in html
    row = re.search(r"<tr>\s*<td><a href=\"/events/florence-joplin/\".*?</tr>", html, re.S).group(0)
    assert [int(n) for n in re.findall(r'<td class="num">(\d+)</td>', row)] == [8, 3, 2, 3]


@pytest.mark.django_db
def test_event_list_empty(client_in):
    r = client_in.get("/")
    assert r.status_code == 200 and "No events yet" in r.content.decode()


@pytest.mark.django_db
def test_event_page_lists_every_layer(client_in, event, django_assert_max_num_queries):
    with django_assert_max_num_queries(7):  # 6, and the notification bell's one COUNT (every page)
        r = client_in.get(f"/events/{event.slug}/")
    assert r.status_code == 200
    html = r.content.decode()
    for layer in event.layers.all():
        assert f'id="layer-{layer.id}"' in html
        assert layer.name.replace("&", "&amp;") in html and layer.file_name in html
    config = _config(r)
    assert sorted(s["id"] for s in config["layers"]) == sorted(event.layers.values_list("id", flat=True))


@pytest.mark.django_db
def test_event_page_legend_lists_the_class_map(client_in, event):
    from annotation import tiles

    html = client_in.get(f"/events/{event.slug}/").content.decode()
    legend = re.search(r'<table class="legend-table".*?</table>', html, re.S)
    assert legend, "no legend"
    rows = re.findall(r'<td class="mono">(\d+)</td>\s*<td>([^<]+)</td>', legend.group(0))
    assert rows == [(k, v) for k, v in DAMAGE.items()]
    assert f"background: {tiles.CLASS_COLOURS[4]}" in legend.group(0)  # destroyed in purple (kernel.palette)
    assert "8576" in legend.group(0)  # pixel counts


@pytest.mark.django_db
def test_event_map_config(client_in, event):
    config = _config(client_in.get(f"/events/{event.slug}/"))
    by_name = {s["name"]: s for s in config["layers"]}
    geo = by_name["Joplin post"]
    assert geo["frame"] == "geographic" and geo["tiles"] == f"/tiles/{geo['id']}/{{z}}/{{x}}/{{y}}.png"
    assert 0 <= geo["minZoom"] < geo["maxNativeZoom"] < geo["maxZoom"] and len(geo["bounds"]) == 4
    assert geo["visible"] is True
    post, pre = by_name["Florence post"], by_name["Florence pre"]
    assert post["image"] == f"/layers/{post['id']}/image.png" and post["bounds"] == [0, 0, 1024, 1024]
    assert post["visible"] is True and pre["visible"] is False  # one raster per frame, the latest phase
    mask = by_name["Florence GT damage"]
    assert mask["phase"] == "post"  # inherited from the image it annotates
    assert [row["label"] for row in mask["legend"]] == list(DAMAGE.values())
    assert mask["legend"][0]["colour"] is None  # background transparent
    roads = by_name["Roads"]
    assert roads["geojson"] == f"/layers/{roads['id']}/geojson" and "tiles" not in roads
    buildings = by_name["Florence buildings"]
    assert buildings["frame"] == "pixel" and buildings["bounds"] == [0, 0, 1024, 1024]  # from the annotated image
    assert buildings["visible"] is True and buildings["phase"] == "post"
    pre_buildings = by_name["Florence pre buildings"]
    assert pre_buildings["bounds"] == [0, 0, 1024, 1024]  # size of metadata.image
    assert pre_buildings["visible"] is False  # another phase than the raster shown
    assert by_name["Florence reference target"]["visible"] is False  # only the GT mask by default
    assert {s["group"] for s in config["layers"]} == {"geographic", "pixel"}


@pytest.mark.django_db
def test_pixel_layers_are_grouped_by_tile(client_in, event):
    from annotation.models import Layer

    other = Layer.objects.create(event=event, name="Other tile", kind="raster", frame="pixel", phase="post",
                                 file_name="other.png", path="post_original.png", width=1024, height=1024,
                                 metadata={"tile": "00000099"})
    vec = Layer.objects.create(event=event, name="Other tile buildings", kind="vector", frame="pixel", phase="post",
                               file_name="other_buildings.geojson", path="buildings.geojson",
                               metadata={"image": "other.png"})
    config = _config(client_in.get(f"/events/{event.slug}/"))
    by_id = {s["id"]: s for s in config["layers"]}
    assert by_id[other.id]["group"] == by_id[vec.id]["group"] == "pixel:00000099"
    assert "00000099" in by_id[other.id]["groupLabel"]
    assert by_id[other.id]["visible"] and by_id[vec.id]["visible"]  # its own group has its own defaults


@pytest.mark.django_db
def test_event_page_survives_a_missing_file(client_in, event, settings):
    from annotation.models import Layer

    remove_file(Layer.objects.get(event=event, name="Joplin post").path)
    r = client_in.get(f"/events/{event.slug}/")
    assert r.status_code == 200
    geo = next(s for s in _config(r)["layers"] if s["name"] == "Joplin post")
    assert geo["error"] and "tiles" not in geo


@pytest.mark.django_db
def test_unknown_event_is_404(client_in):
    assert client_in.get("/events/nope/").status_code == 404


# --- offline assets -------------------------------------------------------------------------------


def test_vendored_assets_are_present_with_licences():
    from django.contrib.staticfiles import finders

    for rel in ("vendor/leaflet-geoman/leaflet-geoman.min.js", "vendor/leaflet-geoman/leaflet-geoman.css",
                "vendor/leaflet-geoman/LICENSE", "studio/map.js", "studio/studio.css"):
        assert (STATIC / rel).is_file() and (STATIC / rel).stat().st_size > 0, rel
    # Leaflet itself is django-leaflet's bundled copy (no second vendored copy)
    assert not (STATIC / "vendor/leaflet").exists()
    for rel in ("leaflet/leaflet.js", "leaflet/leaflet-src.js", "leaflet/leaflet.css", "leaflet/images/layers.png",
                "leaflet/images/marker-icon.png"):
        assert finders.find(rel), rel
    assert "Leaflet 1.9" in open(finders.find("leaflet/leaflet.js"), encoding="utf-8").read()[:200]


@pytest.mark.django_db
def test_pages_load_nothing_from_the_network(client_in, event):
    from django.contrib.staticfiles import finders

    for url in ("/", f"/events/{event.slug}/", "/accounts/login/"):
        html = client_in.get(url).content.decode()
        refs = re.findall(r'<(?:script|link|img)[^>]+(?:src|href)="([^"]+)"', html)
        for ref in refs:
            assert not re.match(r"^(https?:)?//", ref), (url, ref)
            if ref.startswith("/static/"):
                assert finders.find(ref[len("/static/"):]), ref
    css = (STATIC / "studio/studio.css").read_text() + (STATIC / "studio/map.js").read_text()
    assert not re.search(r"url\((['\"]?)(https?:)?//", css) and "https://" not in css


# --- in the browser -------------------------------------------------------------------------------


def _chromium() -> bool:
    import os

    return Path(os.environ.get("STUDIO_CHROMIUM", "/usr/bin/chromium")).exists()


@pytest.mark.browser
@pytest.mark.skipif(not _chromium(), reason="Debian chromium not installed")
@pytest.mark.django_db(transaction=True)
def test_event_map_in_the_browser(live_server, browser, event, user):
    from django.conf import settings as dj_settings
    from django.test import Client

    c = Client()
    c.force_login(user)
    cookie = c.cookies[dj_settings.SESSION_COOKIE_NAME].value
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    context.add_cookies([{"name": dj_settings.SESSION_COOKIE_NAME, "value": cookie, "url": live_server.url}])
    page = context.new_page()
    errors, external = [], []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("request", lambda req: external.append(req.url) if not req.url.startswith(live_server.url) else None)
    try:
        page.goto(f"{live_server.url}/events/{event.slug}/")
        # geographic frame first: Joplin tiles load
        page.wait_for_function(
            "() => Array.from(document.querySelectorAll('img.leaflet-tile-loaded')).length > 0", timeout=15000)
        assert page.locator(".studio-layer-row").count() == 2  # Joplin raster + roads
        assert page.locator(".studio-toolbar select >> nth=0 >> option").count() == 2  # geographic, pixel
        # the pixel frame: pre/post pair, mask legend, swipe and side-by-side
        page.select_option(".studio-toolbar select >> nth=0", "pixel")
        page.wait_for_function("() => document.querySelectorAll('img.leaflet-image-layer').length >= 2", timeout=15000)
        assert page.locator(".studio-legend-item").count() == len(DAMAGE)
        page.select_option(".studio-toolbar select >> nth=1", "swipe")
        page.wait_for_selector(".studio-swipe-range")
        clip = page.evaluate("() => document.querySelector('.leaflet-studioSwipe-pane').style.clip")
        assert clip.startswith("rect(")
        page.select_option(".studio-toolbar select >> nth=1", "side")
        page.wait_for_function("() => document.querySelectorAll('.studio-map.leaflet-container').length === 2")
        # vector popups show attributes
        page.select_option(".studio-toolbar select >> nth=1", "single")
        page.locator("path.leaflet-interactive").first.click(force=True)
        page.wait_for_selector(".studio-popup")
        assert "destroyed" in page.locator(".studio-popup").inner_text()
        # other pages add overlays (replay outputs): an image and a GeoJSON, in the current frame
        mask_id = next(la.id for la in event.layers.all() if la.kind == "mask")
        page.evaluate(
            "(id) => { studioViewer.addOverlay({name: 'replay mask', kind: 'mask', image: '/layers/' + id + '/image.png',"
            " width: 1024, height: 1024, legend: [{value: 4, label: 'destroyed', colour: '#800080'}]});"
            " studioViewer.addOverlay({name: 'replay boxes', data: {type: 'FeatureCollection', features: [{type: 'Feature',"
            " properties: {score: 0.9}, geometry: {type: 'Point', coordinates: [500, 500]}}]}}); }", mask_id)
        page.wait_for_function("() => Array.from(document.querySelectorAll('.studio-layer-name'))"
                               ".some(n => n.textContent === 'replay boxes')")
        assert page.locator(".studio-kind-overlay").count() == 1  # the GeoJSON overlay (the image one is a mask)
        assert page.locator("path.leaflet-interactive").count() >= 2
    finally:
        context.close()
    assert not errors, errors
    assert not external, external
