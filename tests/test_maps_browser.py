"""The maps and the metric task in a real browser (Debian Chromium, Playwright, 1440×900).

* socal-fire's imagery is drawn in the geographic frame too (its PNGs placed by the importer's
  affine fit, tests/test_map_frames.py), not only its lon/lat vectors;
* hurricane-florence's building boxes (47 in ``_bounding_boxes.csv``: 42 major-damage, 5
  destroyed) are outlines of their own colour (``annotation.tiles.BUILDING_BOX_COLOUR``), not the
  major-damage orange of the mask under them;
* a replay's mask output has a legend with the tool's classes and the GT remap behind them
  (seg.building_damage on the xBD mask: 1 intact ← 1 no-damage, 2 partially damaged ← 2
  minor-damage and 3 major-damage, 3 totally destroyed ← 4 destroyed; replay/tools/perception.py),
  and the GT mask's own legend says the same from its side (3 major-damage → 2 partially damaged);
* on the task page the map sits beside the comment box, and on every page a plain wheel over a map
  scrolls the page (with a hint) while Ctrl + wheel zooms;
* a metric task on the pixel-frame hurricane-florence tile is submitted once a maintainer has
  recorded the rasters' GSD on the event page.
"""
from __future__ import annotations

import os
import re

import pytest
from conftest import REALDATA, needs_shared
from support.browser import open_signed_in
from support.replay import florence_max_polygon_task

from annotation import tiles
from annotation.models import Event, Task
from annotation.services import imports
from replay.services.runs import start_replay

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists("/usr/bin/chromium"), reason="Debian chromium is not installed"),
]


def _login(browser, live_server, username, password):
    return open_signed_in(browser, live_server, username, password, viewport=(1440, 900))


def _boxes(p, *selectors):
    """The page-space boxes ({x, y, width, height}, CSS px) of the first element of each selector, read
    in one script run, so from one layout: separate reads can straddle a reflow while the page loads."""
    return p.evaluate("""sels => sels.map(sel => {
        const r = document.querySelector(sel).getBoundingClientRect();
        return {x: r.x + window.scrollX, y: r.y + window.scrollY, width: r.width, height: r.height};
    })""", list(selectors))


def _proxy(page, root):
    """Leaflet's zoom proxy transform: it changes exactly when the map zooms."""
    return page.evaluate(f"() => (document.querySelector('{root} .leaflet-proxy') || {{style: {{}}}}).style.transform || ''")


@pytest.mark.django_db(transaction=True)
def test_socal_fire_geographic_view_draws_its_imagery(live_server, browser, make_user):
    make_user("ada", "author", password="ada-pass-1")
    event = imports.import_xbd_folder(needs_shared(REALDATA / "xbd-socal-fire")).event
    post = event.layers.get(file_name="socal-fire_00000031_post_disaster.png")
    mask = event.layers.get(file_name="socal-fire_00000031_damage_mask.tif")
    ctx, p = _login(browser, live_server, "ada", "ada-pass-1")
    errors = []
    p.on("pageerror", lambda e: errors.append(str(e)))
    try:
        p.goto(f"{live_server.url}/events/socal-fire/")
        # the geographic group is shown first: the post image's and the GT mask's tiles load there
        for layer in (post, mask):
            p.wait_for_function(
                f"() => [...document.querySelectorAll('#event-map img.leaflet-tile-loaded')]"
                f".some(i => i.src.includes('/tiles/{layer.pk}/') && i.naturalWidth === 256)", timeout=20000)
        assert p.locator("#event-map .studio-layer-name", has_text=post.name).count() >= 1
        # the lon/lat buildings are still drawn over them
        assert p.locator("#event-map path.leaflet-interactive").count() >= 125
        # the pixel frame keeps the whole image
        p.select_option("#event-map .studio-toolbar select", label="Image socal-fire_00000031 (pixels)")
        p.wait_for_function(f"() => [...document.querySelectorAll('#event-map img.leaflet-image-layer')]"
                            f".some(i => i.src.includes('/layers/{post.pk}/image.png') && i.complete && i.naturalWidth === 1024)",
                            timeout=20000)
        assert not errors, errors
    finally:
        ctx.close()


@pytest.mark.django_db(transaction=True)
def test_building_boxes_have_their_own_colour_and_wheel_needs_a_modifier(live_server, browser, make_user):
    make_user("ada", "author", password="ada-pass-1")
    event = imports.import_xbd_folder(needs_shared(REALDATA / "xbd-hurricane-florence")).event
    boxes = event.layers.get(kind="vector")
    ctx, p = _login(browser, live_server, "ada", "ada-pass-1")
    try:
        p.goto(f"{live_server.url}/events/hurricane-florence/")
        p.wait_for_function("() => document.querySelectorAll('#event-map path.leaflet-interactive').length >= 47", timeout=20000)
        styles = p.evaluate("() => [...document.querySelectorAll('#event-map path.leaflet-interactive')]"
                            ".map(x => [x.getAttribute('stroke'), x.getAttribute('fill-opacity')])")
        assert len(styles) == 47 and {tuple(s) for s in styles} == {(tiles.BUILDING_BOX_COLOUR, "0")}, styles
        assert tiles.BUILDING_BOX_COLOUR not in set(tiles.CLASS_COLOURS.values())
        legend = p.locator("#event-map .studio-legend").text_content()
        assert boxes.name in legend and "building box" in legend

        # a plain wheel over the event map scrolls the page and shows the hint; Ctrl + wheel zooms
        box = p.locator("#event-map .leaflet-container").first.bounding_box()
        p.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        before, scrolled = _proxy(p, "#event-map"), p.evaluate("() => window.scrollY")
        p.mouse.wheel(0, 300)
        p.wait_for_timeout(400)
        assert _proxy(p, "#event-map") == before
        assert p.evaluate("() => window.scrollY") > scrolled
        assert p.locator("#event-map .studio-wheel-hint.shown").count() == 1
        assert "wheel zooms the map" in p.locator("#event-map .studio-wheel-hint").first.text_content()
        box = p.locator("#event-map .leaflet-container").first.bounding_box()
        p.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        p.keyboard.down("Control")
        p.mouse.wheel(0, -300)
        p.keyboard.up("Control")
        p.wait_for_timeout(600)
        assert _proxy(p, "#event-map") != before
    finally:
        ctx.close()


@pytest.mark.django_db(transaction=True)
def test_task_page_map_beside_comments_with_the_replay_mask_legend(live_server, browser, make_user):
    ada = make_user("ada", "author", password="ada-pass-1")
    _event, _post, task = florence_max_polygon_task(ada)
    run = start_replay(ada, task)
    run.refresh_from_db()
    assert run.status == "succeeded", run.error
    ctx, p = _login(browser, live_server, "ada", "ada-pass-1")
    errors = []
    p.on("pageerror", lambda e: errors.append(str(e)))
    try:
        p.goto(f"{live_server.url}/tasks/{task.pk}/")
        p.wait_for_selector("#replay-map .leaflet-container")
        # both boxes from one layout: the replay's steps and answer above them fill in while the page
        # loads, so two separate reads can straddle a reflow and see the rows hundreds of pixels apart
        comments, mapbox = _boxes(p, "#comments", "#replay-map")
        # side by side: the map right of the comment box, their rows overlapping
        assert comments["x"] + comments["width"] <= mapbox["x"]
        assert mapbox["y"] < comments["y"] + comments["height"] and comments["y"] < mapbox["y"] + mapbox["height"]

        # the replay's step 0 mask is on the map with its classes and the remap from the xBD mask
        p.wait_for_function("() => document.querySelector('#replay-map .studio-legend') && "
                            "document.querySelector('#replay-map .studio-legend').textContent.includes('partially damaged')",
                            timeout=20000)
        legend = p.locator("#replay-map .studio-legend").text_content()
        assert "1 · intact  ← GT 1 no-damage" in legend, legend
        assert "2 · partially damaged  ← GT 2 minor-damage, 3 major-damage" in legend, legend
        assert "3 · totally destroyed  ← GT 4 destroyed" in legend, legend
        assert "0 · background  ← GT 0 background, 5 un-classified" in legend, legend
        assert "seg.building_damage reads hurricane-florence_00000018_mask.png through a class remap" in legend
        # the review map is small: its layer panel starts folded, covering a corner only; one click unfolds it
        shown, folded = _boxes(p, "#replay-map .leaflet-container", "#replay-map .studio-panel")
        assert "collapsed" in p.locator("#replay-map .studio-panel").get_attribute("class")
        assert folded["width"] * folded["height"] < 0.05 * shown["width"] * shown["height"], (folded, shown)
        p.locator("#replay-map .studio-panel-toggle").click()
        # the legend can be read: the panel scrolls within the map instead of running past its edge
        panel, shown = _boxes(p, "#replay-map .studio-panel", "#replay-map .leaflet-container")
        assert panel["y"] + panel["height"] <= shown["y"] + shown["height"], (panel, shown)
        p.locator("#replay-map .studio-legend-note").scroll_into_view_if_needed()
        assert p.locator("#replay-map .studio-legend-note").is_visible()
        # and the event's GT mask (xBD 0–5) says how the task's seg.building_damage reads each class
        assert "3 · major-damage  → seg.building_damage 2 partially damaged" in legend, legend
        assert "4 · destroyed  → seg.building_damage 3 totally destroyed" in legend, legend

        # the task page's map scrolls the page on a plain wheel too
        p.locator("#replay-map").scroll_into_view_if_needed()
        box = p.locator("#replay-map .leaflet-container").first.bounding_box()
        p.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        before = _proxy(p, "#replay-map")
        p.mouse.wheel(0, -200)
        p.wait_for_timeout(400)
        assert _proxy(p, "#replay-map") == before
        assert p.locator("#replay-map .studio-wheel-hint.shown").count() == 1
        assert not errors, errors
    finally:
        ctx.close()


@pytest.mark.django_db(transaction=True)
def test_metric_florence_task_submits_after_a_maintainer_records_the_gsd(live_server, browser, make_user):
    """The authoring walk-through: the author's metric question (vec.max_polygon's max_area_m2 with
    pixel_size_m 0.5) is refused at Submit (manifest.gsd_missing); the maintainer records 0.5 m/px
    on both rasters on the event page; the author refreshes the stale manifest, replays and submits."""
    ada = make_user("ada", "author", password="ada-pass-1")
    make_user("mia", "maintainer", password="mia-pass-1")
    event, _post, task = florence_max_polygon_task(ada)
    rasters = list(event.layers.filter(kind="raster").order_by("pk"))

    ctx, p = _login(browser, live_server, "ada", "ada-pass-1")
    try:
        p.goto(f"{live_server.url}/tasks/{task.pk}/")
        p.click("#do-submit")
        p.wait_for_function("() => document.querySelector('#errors').textContent.includes('manifest.gsd_missing')", timeout=15000)
        assert Task.objects.get(pk=task.pk).status == "draft"
    finally:
        ctx.close()

    ctx, p = _login(browser, live_server, "mia", "mia-pass-1")
    try:
        for layer in rasters:
            p.goto(f"{live_server.url}/events/hurricane-florence/")
            card = p.locator(f"#layer-{layer.pk}")
            card.locator("summary").click()
            card.locator("input[name=gsd_m]").fill("0.5")
            card.locator("input[name=reason]").fill("xBD WorldView imagery, GSD under 0.8 m (Gupta et al. 2019)")
            with p.expect_navigation():
                card.locator("button[type=submit]").click()
            assert re.search(r"GSD\s*0\.50*\s*m/px", p.locator(f"#layer-{layer.pk}").text_content())
    finally:
        ctx.close()
    assert all(la.gsd_m == 0.5 for la in Event.objects.get(pk=event.pk).layers.filter(kind="raster"))

    ctx, p = _login(browser, live_server, "ada", "ada-pass-1")
    try:
        p.goto(f"{live_server.url}/tasks/{task.pk}/")
        # r1 still states pixel_size_m null: QC's derived.manifest_stale (an error, the answer is in
        # m²) until the author takes the layers' values in one click (tests/test_derived_staleness.py)
        assert "derived.manifest_stale" in p.locator("body").text_content()
        with p.expect_navigation():
            p.click("#refresh-derived")
        p.click("#replay-button")
        p.wait_for_function("() => document.querySelector('#replay-status').textContent.startsWith('succeeded')", timeout=60000)
        with p.expect_navigation():
            p.click("#do-submit")
        assert p.locator("#task-status").text_content().strip() == "submitted"
        assert Task.objects.get(pk=task.pk).status == "submitted"
    finally:
        ctx.close()
