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
