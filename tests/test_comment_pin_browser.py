"""A comment's map pin lands where the reviewer clicks, on a building box or a step's polygon too
(a feature's popup used to stop the click: the hint stayed "click the map to place the pin…").
Debian Chromium through Playwright, on the Joplin footprints (tests/test_review_workflow.py)."""
from __future__ import annotations

import os

import pytest
from conftest import sign_in
from support.joplin import import_joplin, t2_payload

from annotation.models import TaskComment as Comment

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists("/usr/bin/chromium"), reason="Debian chromium is not installed"),
    pytest.mark.django_db(transaction=True),
]

# the centre of the first footprint path drawn on the task page's map, and what the click reaches
CLICK_A_BUILDING = """() => {
  const path = [...document.querySelectorAll('#replay-map path.leaflet-interactive')]
    .find(p => { const r = p.getBoundingClientRect(); return r.width > 6 && r.height > 6; });
  if (!path) return null;
  const r = path.getBoundingClientRect();
  const x = r.left + r.width / 2, y = r.top + r.height / 2;
  const hit = document.elementFromPoint(x, y);
  return {x, y, onFeature: !!hit && hit.classList.contains('leaflet-interactive')};
}"""


def test_a_pin_lands_on_a_building(live_server, browser, make_user, client):
    ada = make_user("ada", "author", password="ada-pass-1")
    event = import_joplin(raster=False)
    client.force_login(ada)
    resp = client.post("/api/tasks/", t2_payload(event), content_type="application/json")
    assert resp.status_code == 201, resp.content
    tid = resp.json()["id"]
    ctx = browser.new_context(viewport={"width": 1440, "height": 900})
    page = ctx.new_page()
    try:
        sign_in(page, live_server.url, "ada", "ada-pass-1")
        page.goto(f"{live_server.url}/tasks/{tid}/")
        page.wait_for_function("() => document.querySelectorAll('#replay-map path.leaflet-interactive').length > 0",
                               timeout=20000)
        page.select_option("#comment-pin", "map")
        assert page.locator("#comment-location").text_content() == "click the map to place the pin…"
        page.locator("#replay-map").scroll_into_view_if_needed()
        spot = page.evaluate(CLICK_A_BUILDING)
        assert spot and spot["onFeature"], spot  # the click reaches a building, not bare map
        page.mouse.click(spot["x"], spot["y"])
        where = page.locator("#comment-location").text_content()
        assert where.startswith("geographic x=-94.") and ", y=37." in where, where  # Joplin, Missouri
        assert page.locator("#replay-map .leaflet-popup").count() == 0  # no identify popup instead
        page.fill("#comment-body", "This building's damage class looks wrong.")
        page.click("#comment-send")
        page.wait_for_load_state("load")
        for _ in range(50):
            if Comment.objects.filter(task_id=tid).exists():
                break
            page.wait_for_timeout(100)
        loc = Comment.objects.get(task_id=tid).location
        assert loc["frame"] == "geographic" and -95 < loc["x"] < -94 and 37 < loc["y"] < 38, loc
        # with no pin being placed, a click on the building opens its popup as before
        page.wait_for_function("() => document.querySelectorAll('#replay-map path.leaflet-interactive').length > 0")
        page.locator("#replay-map").scroll_into_view_if_needed()
        spot = page.evaluate(CLICK_A_BUILDING)
        page.mouse.click(spot["x"], spot["y"])
        page.wait_for_selector("#replay-map .leaflet-popup")
    finally:
        ctx.close()


IDENTIFY_ORDER = """() => [...document.querySelectorAll('#event-map .studio-identify > *')].map(x =>
  x.classList.contains('studio-identify-feature') ? 'feature ' + x.querySelector('.studio-popup-title').textContent
  : x.classList.contains('studio-identify-raster') ? 'raster ' + x.querySelector('b').textContent : 'other')"""


def test_identify_reads_every_layer_under_the_click_top_first(live_server, browser, make_user):
    """A click on a building gives one readout: the vector layers' features there (drawn on top),
    then the raster's value, not the clicked vector alone."""
    make_user("ada", "author", password="ada-pass-1")
    event = import_joplin(raster=True)
    ctx = browser.new_context(viewport={"width": 1440, "height": 900})
    page = ctx.new_page()
    try:
        sign_in(page, live_server.url, "ada", "ada-pass-1")
        page.goto(f"{live_server.url}/events/{event.slug}/")
        page.wait_for_function("() => document.querySelectorAll('#event-map path.leaflet-interactive').length > 0",
                               timeout=20000)
        page.locator("#event-map").scroll_into_view_if_needed()
        spot = page.evaluate(CLICK_A_BUILDING.replace("#replay-map", "#event-map"))
        assert spot and spot["onFeature"], spot
        page.mouse.click(spot["x"], spot["y"])
        page.wait_for_selector("#event-map .studio-identify .studio-identify-raster", timeout=10000)
        order = page.evaluate(IDENTIFY_ORDER)
        kinds = [x.split(" ")[0] for x in order]
        assert "feature" in kinds and "raster" in kinds and "other" not in kinds, order
        assert kinds == sorted(kinds), order  # every vector feature above every raster value
    finally:
        ctx.close()


def _luminance(rgb: tuple[int, int, int]) -> float:
    """WCAG 2 relative luminance of an sRGB colour (0 black … 1 white)."""
    def lin(c: int) -> float:
        c = c / 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4
    r, g, b = (lin(c) for c in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def _contrast(a: tuple[int, int, int], b: tuple[int, int, int]) -> float:
    """WCAG 2 contrast ratio of two colours (1 … 21)."""
    hi, lo = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def _rgb(hex_colour: str) -> tuple[int, int, int]:
    h = hex_colour.lstrip("#")
    return tuple(int(h[i:i + 2], 16) for i in (0, 2, 4))


def test_contrast_ratio_worked_by_hand():
    """The helper below reproduces WCAG's published extremes and the case that hid pins: the old
    amber ring (#ffb300, luminance 0.535) on the no-damage yellow (255, 215, 0; luminance 0.699) is
    (0.699 + 0.05) / (0.535 + 0.05) = 1.28, under the 3:1 that WCAG 1.4.11 asks of a graphic."""
    assert _contrast((0, 0, 0), (255, 255, 255)) == pytest.approx(21.0)
    assert _contrast((0, 0, 0), (0, 0, 0)) == pytest.approx(1.0)
    assert _contrast(_rgb("#ffb300"), (255, 215, 0)) == pytest.approx(1.28, abs=0.01)


def test_a_pin_stands_out_on_every_damage_class_colour(live_server, browser, make_user, client):
    """A reviewer's pin on a building must be seen whatever the building's damage class: its ring
    or its fill contrasts at least 3:1 (WCAG 1.4.11, non-text) with every class colour of the
    benchmark's damage palette (kernel.palette.BENCHMARK_RGB: no-damage yellow, minor orange, major
    red, destroyed purple, un-classified blue) and with the building it was dropped on. The amber
    pin of before reached 1.28 on a no-damage building (yellow): seen in the walk, invisible."""
    from kernel.palette import BENCHMARK_RGB

    ada = make_user("ada", "author", password="ada-pass-1")
    event = import_joplin(raster=False)
    client.force_login(ada)
    resp = client.post("/api/tasks/", t2_payload(event), content_type="application/json")
    assert resp.status_code == 201, resp.content
    tid = resp.json()["id"]
    ctx = browser.new_context(viewport={"width": 1440, "height": 900})
    page = ctx.new_page()
    try:
        sign_in(page, live_server.url, "ada", "ada-pass-1")
        page.goto(f"{live_server.url}/tasks/{tid}/")
        page.wait_for_function("() => document.querySelectorAll('#replay-map path.leaflet-interactive').length > 0",
                               timeout=20000)
        page.select_option("#comment-pin", "map")
        page.locator("#replay-map").scroll_into_view_if_needed()
        spot = page.evaluate(CLICK_A_BUILDING)
        building_fill = page.evaluate("""([x, y]) => { const p = document.elementFromPoint(x, y);
            return p.getAttribute('fill') || getComputedStyle(p).fill; }""", [spot["x"], spot["y"]])
        page.mouse.click(spot["x"], spot["y"])
        pin = page.locator("#replay-map path.studio-comment-pin")
        pin.wait_for(timeout=5000)
        ring, fill = _rgb(pin.get_attribute("stroke")), _rgb(pin.get_attribute("fill"))
        colours = {f"class {k}": v for k, v in BENCHMARK_RGB.items() if k <= 5}
        if building_fill and building_fill.startswith("#"):
            colours["the building under the pin"] = _rgb(building_fill)
        weak = {name: round(max(_contrast(ring, c), _contrast(fill, c)), 2) for name, c in colours.items()
                if max(_contrast(ring, c), _contrast(fill, c)) < 3}
        assert weak == {}, (ring, fill, weak)
        # the pin sent with the comment is drawn with the same style once the page reloads
        page.fill("#comment-body", "Pinned on this building.")
        page.click("#comment-send")
        page.wait_for_load_state("load")
        page.locator("#replay-map path.studio-comment-pin").first.wait_for(timeout=15000)
        again = page.locator("#replay-map path.studio-comment-pin").first
        assert (_rgb(again.get_attribute("stroke")), _rgb(again.get_attribute("fill"))) == (ring, fill)
    finally:
        ctx.close()
