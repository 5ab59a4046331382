"""The skeleton's path in a real browser (Debian Chromium through Playwright): log in, open an
event map whose tiles load, author a two-step task, replay it, see the filled answer.

Expected answer: the Florence mask holds value 3 (major damage) on 26,492 pixels and value 4
(destroyed) on 274 (``np.unique`` on hurricane-florence_00000018_mask.png, as its SOURCE.md
lists {0, 3, 4}); ``seg.building_damage`` in GT mode maps major → 2 and destroyed → 3, so
``ras.count_pixels(classes=[2, 3])`` totals 26,492 + 274 = 26,766.
"""
from __future__ import annotations

import os
import re

import pytest
from conftest import REALDATA, needs_shared

from annotation.services.imports import import_raster_file, import_xbd_folder

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists("/usr/bin/chromium"), reason="Debian chromium is not installed"),
]

FLORENCE = REALDATA / "xbd-hurricane-florence"
JOPLIN = REALDATA / "xview2-deploy-joplin"


@pytest.mark.django_db(transaction=True)
def test_login_map_tiles_author_replay(live_server, browser, make_user):
    make_user("ada", "author", password="ada-pass-1")
    import_raster_file(needs_shared(JOPLIN / "output_chips_post_0_post.tif"), event_slug="joplin-tornado", phase="post",
                       modality="optical", disaster_type="tornado")
    import_xbd_folder(needs_shared(FLORENCE))

    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    tiles = []
    page.on("response", lambda r: tiles.append(r) if "/tiles/" in r.url else None)
    try:
        # log in
        page.goto(f"{live_server.url}/tasks/")
        assert "/accounts/login/" in page.url
        page.fill("input[name=username]", "ada")
        page.fill("input[name=password]", "ada-pass-1")
        page.click("button[type=submit]")
        page.wait_for_url(re.compile(r".*/tasks/$"))

        # the event map: tiles load as non-empty PNGs
        page.goto(f"{live_server.url}/events/joplin-tornado/")
        page.wait_for_function("() => document.querySelectorAll('img.leaflet-tile-loaded').length > 0", timeout=20000)
        ok = [r for r in tiles if r.status == 200 and r.header_value("content-type") == "image/png"]
        assert ok, [(r.url, r.status) for r in tiles]
        body = ok[0].body()
        assert body[:8] == b"\x89PNG\r\n\x1a\n" and len(body) > 100

        # author a two-step task: "+ step" opens the tool picker (search, Enter picks)
        page.goto(f"{live_server.url}/tasks/new/?event=hurricane-florence")
        page.fill("#question", "How many pixels show partially damaged or destroyed buildings?")
        page.select_option("#dimension", "t1")
        page.click("#add-step")
        page.fill("#tool-search", "seg.building_damage")
        page.click('#tool-list [data-tool="seg.building_damage"]')
        step0 = page.locator("#steps > li").nth(0)
        step0.locator(".arg[data-name=pre_image_path]").fill("hurricane-florence_00000018_pre_original.png")
        step0.locator(".arg[data-name=post_image_path]").fill("hurricane-florence_00000018_post_original.png")
        page.click("#add-step")
        page.fill("#tool-search", "ras.count_pixels")
        page.keyboard.press("Enter")
        step1 = page.locator("#steps > li").nth(1)
        assert step1.locator(".tool-button").text_content() == "ras.count_pixels"
        step1.locator(".arg[data-name=mask_path]").fill("<mask_path> from trajectory[0].obs")
        step1.locator(".arg[data-name=classes]").fill("[2, 3]")
        row = page.locator("#answers tbody tr").nth(0)
        row.locator(".ans-name").fill("damaged_pixels")
        row.locator(".ans-type").select_option("scalar_count")
        row.locator(".ans-source").fill("<total> from trajectory[1].obs")
        page.click("#save-task")
        page.wait_for_url(re.compile(r".*/tasks/\d+/edit/$"), timeout=15000)
        page.goto(page.url.replace("/edit/", "/"))
        assert page.locator("#qc-clean").count() == 1

        # replay it and see the filled answer
        page.click("#replay-button")
        page.wait_for_function("() => document.querySelector('#replay-status').textContent.startsWith('succeeded')",
                               timeout=30000)
        answer = page.locator("#final-answer").text_content()
        assert '"damaged_pixels": 26766' in answer
        assert page.locator("#replay-steps li.succeeded").count() == 2
        # the GT mask of step 0 is drawn on the map as an overlay
        page.wait_for_function("() => [...document.querySelectorAll('#replay-overlays li')].some(li => li.textContent === 'step 0 · mask_path')",
                               timeout=15000)
        page.wait_for_function("() => document.querySelectorAll('#replay-map img.leaflet-image-layer').length > 0",
                               timeout=15000)
        assert not errors, errors
    finally:
        page.close()
