"""A maintainer records a layer's GSD/CRS, and a metric task on the pixel-frame
hurricane-florence tile can then be submitted.

The tile (../shared/realdata/xbd-hurricane-florence/SOURCE.md) is 1024 × 1024 px with no
georeferencing, so the import records no GSD. The value recorded here, 0.5 m/px, is the order of
the xBD imagery's resolution (Gupta et al. 2019: Maxar WorldView imagery, GSD under 0.8 m); what
the tests check is the bookkeeping (audit, stale replays, QC, the submit gate), not that number.
The QC rule (annotation/qc/manifest.py): a metric tool on pixel-frame inputs needs the rasters' GSD as
pixel_size_m; without a recorded GSD both forms (with and without a literal pixel_size_m) give
manifest.gsd_missing.
"""
from __future__ import annotations

import os
import re

import pytest
from conftest import REALDATA, needs_shared
from support.joplin import import_joplin
from support.replay import florence_max_polygon_task

from annotation.models import Event, LayerAuditEvent, Task
from annotation.services import imports, review
from annotation.services.tasks import refresh_derived


def _checks(findings):
    return {(f.check, f.location) for f in findings}


@pytest.mark.django_db
@pytest.mark.parametrize("pixel_size_m", [None, 0.5])
def test_without_a_recorded_gsd_both_forms_give_the_same_finding(make_user, pixel_size_m):
    from annotation.services.qc import qc_for_task

    ada = make_user("ada", "author")
    _, _, task = florence_max_polygon_task(ada, pixel_size_m=pixel_size_m)
    found = {c for c, _ in _checks(qc_for_task(task))}
    assert "manifest.gsd_missing" in found and "manifest.crs_missing" not in found, found


@pytest.mark.django_db
def test_maintainer_records_the_gsd_then_the_metric_task_submits(make_user, client):
    from replay.services.layers import input_fingerprint
    from replay.services.runs import start_replay

    ada = make_user("ada", "author")
    mia = make_user("mia", "maintainer")
    event, post, task = florence_max_polygon_task(ada)
    run = start_replay(ada, task)
    run.refresh_from_db()
    assert run.status == "succeeded", run.error
    with pytest.raises(Exception) as exc:
        review.submit(ada, task)
    assert "manifest.gsd_missing" in {f.check for f in exc.value.findings}

    url = f"/api/layers/{post.pk}/georeferencing/"
    client.force_login(ada)
    assert client.post(url, {"gsd_m": 0.5, "reason": "x"}, content_type="application/json").status_code == 403
    client.force_login(mia)
    for body, field in (({"gsd_m": 0.5, "reason": " "}, "reason"), ({"gsd_m": -1, "reason": "r"}, "gsd_m"),
                        ({"gsd_m": 5000, "reason": "r"}, "gsd_m"), ({"crs": "EPSG:999999", "reason": "r"}, "crs"),
                        ({"reason": "r"}, "nothing changes")):
        resp = client.post(url, body, content_type="application/json")
        said = resp.json().get("detail") or " ".join(resp.json())  # a service message, or DRF's {field: [...]}
        assert resp.status_code == 400 and field in said, (body, resp.content)
    assert LayerAuditEvent.objects.count() == 0
    post.refresh_from_db()
    assert post.gsd_m is None

    for layer in (post, event.layers.get(kind="raster", phase="pre")):
        resp = client.post(f"/api/layers/{layer.pk}/georeferencing/",
                           {"gsd_m": 0.5, "reason": "xBD WorldView imagery, GSD under 0.8 m (Gupta et al. 2019)"},
                           content_type="application/json")
        assert resp.status_code == 200, resp.content
        body = resp.json()
        assert body["changes"] == {"gsd_m": {"old": None, "new": 0.5}}
        assert body["stale_tasks"] == [task.question_id] and body["actor"] == "mia"
    # the replay read the old GSD: its fingerprint no longer matches (replay --changed-only reruns it)
    task = Task.objects.select_related("head").get(pk=task.pk)
    assert input_fingerprint(task, task.head, "gt") != run.input_fingerprint
    # a CRS given as PROJ text is stored as its EPSG code
    resp = client.post(url, {"crs": "+proj=utm +zone=17 +datum=WGS84 +units=m +no_defs", "reason": "r"},
                       content_type="application/json")
    assert resp.status_code == 200 and resp.json()["changes"]["crs"]["new"] == "EPSG:32617"

    # r1's manifest still says pixel_size_m null (saved before the GSD was known): stale, an error for
    # this metric task (tests/test_derived_staleness.py); the refresh writes r2 with the layers' values
    run = start_replay(ada, task)
    run.refresh_from_db()
    with pytest.raises(Exception) as exc:
        review.submit(ada, Task.objects.get(pk=task.pk))
    assert "derived.manifest_stale" in {f.check for f in exc.value.findings}
    refresh_derived(ada, Task.objects.get(pk=task.pk), expected_version=1)
    run = start_replay(ada, Task.objects.get(pk=task.pk))
    run.refresh_from_db()
    assert run.status == "succeeded", run.error
    review.submit(ada, Task.objects.get(pk=task.pk))
    assert Task.objects.get(pk=task.pk).status == "submitted"
    assert client.get(url).json()["results"][0]["reason"] == "r"


@pytest.mark.browser
@pytest.mark.skipif(not os.path.exists("/usr/bin/chromium"), reason="Debian chromium is not installed")
@pytest.mark.django_db(transaction=True)
def test_the_event_page_form_records_the_gsd(live_server, browser, make_user):
    make_user("mia", "maintainer", password="mia-pass-1")
    make_user("ada", "author", password="ada-pass-1")
    imports.import_xbd_folder(needs_shared(REALDATA / "xbd-hurricane-florence"))
    post = Event.objects.get(slug="hurricane-florence").layers.get(kind="raster", phase="post")
    for user, pw in (("ada", "ada-pass-1"), ("mia", "mia-pass-1")):
        ctx = browser.new_context(viewport={"width": 1440, "height": 900})
        p = ctx.new_page()
        errors = []
        p.on("pageerror", lambda e: errors.append(str(e)))  # noqa: B023 (called within this iteration)
        p.goto(f"{live_server.url}/accounts/login/")
        p.fill("input[name=username]", user)
        p.fill("input[name=password]", pw)
        p.click("button[type=submit]")
        p.wait_for_load_state()
        p.goto(f"{live_server.url}/events/hurricane-florence/")
        card = p.locator(f"#layer-{post.pk}")
        assert "No GSD recorded" in card.text_content()
        if user == "ada":  # an author is not offered the form
            assert card.locator(".georef-form").count() == 0
            ctx.close()
            continue
        card.locator("summary").click()
        card.locator("input[name=gsd_m]").fill("0.5")
        card.locator("button[type=submit]").click()
        p.wait_for_timeout(300)
        assert "reason" in card.locator(".georef-error").text_content()  # refused: no reason yet
        card.locator("input[name=reason]").fill("xBD WorldView imagery")
        with p.expect_navigation():
            card.locator("button[type=submit]").click()
        card = p.locator(f"#layer-{post.pk}")
        assert re.search(r"GSD\s*0\.50*\s*m/px", card.text_content()), card.text_content()
        assert "gsd_m — → 0.5" in card.locator(".georef-audit").text_content()
        assert "xBD WorldView imagery" in card.locator(".georef-audit").text_content()
        assert not errors, errors
        ctx.close()


@pytest.mark.django_db
def test_class_remap_of_the_florence_mask_for_seg_building_damage():
    """The replay reads the xBD mask through label names (kernel/tools/perception.py DAMAGE_LABELS):
    no-damage → 1 intact, minor- and major-damage → 2 partially damaged, destroyed → 3."""
    from frontend.views.tasks import class_remaps

    imports.import_xbd_folder(needs_shared(REALDATA / "xbd-hurricane-florence"))
    event = Event.objects.get(slug="hurricane-florence")
    mask = event.layers.get(kind="mask")
    remap = {r["mask"]: r["rows"] for r in class_remaps(event.layers.all())["seg.building_damage"]}[mask.file_name]
    by_label = {label: (cls, name) for _v, label, cls, name in remap}
    assert by_label["no-damage"] == (1, "intact")
    assert by_label["minor-damage"] == by_label["major-damage"] == (2, "partially damaged")
    assert by_label["destroyed"] == (3, "totally destroyed")
    assert "seg.road_damage" not in class_remaps(event.layers.all())  # building labels mean nothing to it


@pytest.mark.browser
@pytest.mark.skipif(not os.path.exists("/usr/bin/chromium"), reason="Debian chromium is not installed")
@pytest.mark.django_db(transaction=True)
def test_editor_marks_the_gt_mask_and_shows_the_remap(live_server, browser, make_user, client):
    from annotation.services.qc import qc_for_task

    ada = make_user("ada", "author", password="ada-pass-1")
    event, _post, task = florence_max_polygon_task(ada)
    mask = event.layers.get(kind="mask")
    ctx = browser.new_context(viewport={"width": 1440, "height": 900})
    p = ctx.new_page()
    errors = []
    p.on("pageerror", lambda e: errors.append(str(e)))
    try:
        p.goto(f"{live_server.url}/accounts/login/")
        p.fill("input[name=username]", "ada")
        p.fill("input[name=password]", "ada-pass-1")
        p.click("button[type=submit]")
        p.wait_for_load_state()
        p.goto(f"{live_server.url}/tasks/{task.pk}/edit/")
        remap = p.locator("#steps > li").nth(0).locator(".class-remap").text_content()
        assert f"GT remap of {mask.file_name}" in remap and "major-damage → 2 partially damaged" in remap
        p.click("#add-input")
        row = p.locator("#manifest .input-row").last
        row.locator(".input-key").fill("mask")
        row.locator(".input-layer").select_option(str(mask.pk))
        assert "ground truth" in row.locator(".input-meta").text_content()
        p.wait_for_function("() => document.querySelector('#qc-box').textContent.includes('manifest.ground_truth_input')", timeout=5000)
        p.keyboard.press("Control+s")
        p.wait_for_function("() => document.querySelector('#save-state').textContent.includes('r2')", timeout=15000)
        assert "manifest.ground_truth_input" in {f.check for f in qc_for_task(Task.objects.get(pk=task.pk))}
        assert not errors, errors
    finally:
        ctx.close()


@pytest.mark.browser
@pytest.mark.skipif(not os.path.exists("/usr/bin/chromium"), reason="Debian chromium is not installed")
@pytest.mark.django_db(transaction=True)
def test_maps_have_a_pixel_scale_a_cursor_readout_and_modifier_wheel_zoom(live_server, browser, make_user):
    """With the GSD recorded, the pixel-frame map gets a metric scale bar (pixels × 0.5 m); the
    cursor readout names column and row; in the editor the wheel zooms only with Ctrl."""
    from annotation.services.layers import set_layer_georeferencing

    ada = make_user("ada", "author", password="ada-pass-1")
    mia = make_user("mia", "maintainer")
    event, post, task = florence_max_polygon_task(ada)
    for layer in event.layers.filter(kind__in=["raster", "mask"]):
        set_layer_georeferencing(mia, layer, gsd_m=0.5, reason="xBD WorldView imagery")
    ctx = browser.new_context(viewport={"width": 1440, "height": 900})
    p = ctx.new_page()
    errors = []
    p.on("pageerror", lambda e: errors.append(str(e)))
    try:
        p.goto(f"{live_server.url}/accounts/login/")
        p.fill("input[name=username]", "ada")
        p.fill("input[name=password]", "ada-pass-1")
        p.click("button[type=submit]")
        p.wait_for_load_state()
        p.goto(f"{live_server.url}/events/hurricane-florence/")
        scale = p.locator("#event-map .leaflet-control-scale-line").first
        scale.wait_for(timeout=10000)
        assert re.fullmatch(r"\d+ (m|km)", scale.text_content().strip()), scale.text_content()
        box = p.locator("#event-map .leaflet-container").first.bounding_box()
        p.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        readout = p.locator("#event-map .studio-cursor").first.text_content()
        assert re.match(r"col \d+ · row \d+ px · [\d.]+, [\d.]+ m", readout), readout
        # click-to-identify: the visible rasters' values at the clicked pixel
        p.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        ident = p.locator("#event-map .studio-identify").first
        ident.wait_for(timeout=10000)
        assert re.search(r"col \d+, row \d+", ident.text_content()), ident.text_content()
        # the editor: a plain wheel scrolls the page, Ctrl + wheel zooms the map
        p.goto(f"{live_server.url}/tasks/{task.pk}/edit/")
        p.wait_for_selector("#editor-map .leaflet-container")
        box = p.locator("#editor-map .leaflet-container").first.bounding_box()
        p.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        before = p.evaluate("() => document.querySelector('#editor-map .leaflet-proxy') ? document.querySelector('#editor-map .leaflet-proxy').style.transform : ''")
        p.mouse.wheel(0, -300)
        p.wait_for_timeout(400)
        assert p.evaluate("() => document.querySelector('#editor-map .leaflet-proxy') ? document.querySelector('#editor-map .leaflet-proxy').style.transform : ''") == before
        assert p.locator("#editor-map .studio-wheel-hint.shown").count() == 1
        p.keyboard.down("Control")
        p.mouse.wheel(0, -300)
        p.keyboard.up("Control")
        p.wait_for_timeout(600)
        assert p.evaluate("() => document.querySelector('#editor-map .leaflet-proxy').style.transform") != before
        assert not errors, errors
    finally:
        ctx.close()


@pytest.mark.browser
@pytest.mark.skipif(not os.path.exists("/usr/bin/chromium"), reason="Debian chromium is not installed")
@pytest.mark.django_db(transaction=True)
def test_damage_vectors_are_class_styled_with_a_legend(live_server, browser, make_user):
    """Joplin's damage polygons carry ``dmg`` 1..4 (SOURCE.md: 107, 51, 83, 399 polygons); each is
    drawn in its class colour (annotation.tiles.CLASS_COLOURS, the mask legend's), not one cyan."""
    from annotation import tiles
    make_user("ada", "author", password="ada-pass-1")
    event = import_joplin(raster=False)
    damage = event.layers.get(file_name="damage.geojson")
    ctx = browser.new_context(viewport={"width": 1440, "height": 900})
    p = ctx.new_page()
    try:
        p.goto(f"{live_server.url}/accounts/login/")
        p.fill("input[name=username]", "ada")
        p.fill("input[name=password]", "ada-pass-1")
        p.click("button[type=submit]")
        p.wait_for_load_state()
        p.goto(f"{live_server.url}/events/{event.slug}/")
        p.wait_for_function("() => document.querySelectorAll('#event-map path.leaflet-interactive').length >= 640", timeout=20000)
        strokes = p.evaluate("() => [...document.querySelectorAll('#event-map path.leaflet-interactive')].map(x => x.getAttribute('stroke'))")
        counts = {c: strokes.count(c) for c in set(strokes)}
        # the footprints (77, no class) keep the default colour; the damage polygons take their class's
        assert counts.get(tiles.CLASS_COLOURS[4]) == 399 and counts.get(tiles.CLASS_COLOURS[1]) == 107, counts
        legend = p.locator("#event-map .studio-legend").text_content()
        assert "4 · destroyed" in legend and damage.name in legend
    finally:
        ctx.close()


@pytest.mark.django_db
def test_layer_value_reads_the_pixel_under_the_cursor(client, make_user):
    """Click-to-identify: the mask value at the centre of the first major-damage box of
    bounding_boxes.csv (988..1008 × 945..961 → col 998, row 953), checked against PIL's read of
    the same PNG; a point off the raster has no value."""
    from PIL import Image

    client.force_login(make_user("ada", "author"))
    imports.import_xbd_folder(needs_shared(REALDATA / "xbd-hurricane-florence"))
    mask = Event.objects.get(slug="hurricane-florence").layers.get(kind="mask")
    expected = Image.open(needs_shared(REALDATA / "xbd-hurricane-florence" / "hurricane-florence_00000018_mask.png")).getpixel((998, 953))
    body = client.get(f"/layers/{mask.pk}/value?x=998.4&y=953.7").json()
    assert (body["col"], body["row"], body["values"]) == (998, 953, [expected])
    assert expected != 0 and body["label"] == mask.class_map[str(expected)]
    assert client.get(f"/layers/{mask.pk}/value?x=2000&y=5").json()["values"] is None
    assert client.get(f"/layers/{mask.pk}/value?x=a").status_code == 400


@pytest.mark.django_db
def test_layer_value_off_a_projected_rasters_domain_is_outside_not_a_crash(client, make_user, tmp_path):
    """Click-to-identify on a raster stored in a projected CRS (a 64 × 64 GeoTIFF in UTM zone 15N,
    EPSG:32615, 0.5 m pixels, made here) at a point that CRS cannot hold: lon 0, lat 0 lies 93° from
    the zone's central meridian, and PROJ refuses it ("Point outside of projection domain"; found by
    the integrity attack on the Joplin chips, also UTM 15N: a 500). Expected: the point is off the
    raster (no column, row or value), as for any point outside it; the raster's own top-left pixel
    still reads back its value (7: every pixel was written so); a point PROJ can hold but far
    off the raster keeps its column and row, with no value, as before."""
    import numpy as np
    import rasterio
    from rasterio.transform import from_origin
    from rasterio.warp import transform as warp_transform

    from annotation.models import Layer

    path = tmp_path / "utm.tif"
    west, north = 363000.0, 4105000.0  # near Joplin, Missouri, in EPSG:32615 metres
    with rasterio.open(path, "w", driver="GTiff", width=64, height=64, count=1, dtype="uint8", crs="EPSG:32615",
                       transform=from_origin(west, north, 0.5, 0.5)) as dst:
        dst.write(np.full((1, 64, 64), 7, dtype="uint8"))
    imports.import_raster_file(path, event_slug="utm-probe", modality="optical")
    layer = Layer.objects.get(event__slug="utm-probe")
    assert layer.frame == "geographic"
    client.force_login(make_user("ada", "author"))
    for q in ("x=0&y=0", "x=1&y=1e-400"):  # refused by PROJ: no column or row either
        r = client.get(f"/layers/{layer.pk}/value?{q}")
        assert r.status_code == 200, (q, r.status_code)
        assert r.json()["values"] is None and r.json()["col"] is None, q
    far = client.get(f"/layers/{layer.pk}/value?x=45&y=-30")  # in the domain, far off the raster
    assert far.status_code == 200 and far.json()["values"] is None
    lon, lat = warp_transform("EPSG:32615", "EPSG:4326", [west + 0.25], [north - 0.25])
    inside = client.get(f"/layers/{layer.pk}/value?x={lon[0]!r}&y={lat[0]!r}").json()
    assert (inside["col"], inside["row"], inside["values"]) == (0, 0, [7])
