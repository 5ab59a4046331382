"""The bell in a real browser (Debian Chromium through Playwright): a reviewer returns a task with a
reason on its page; its author sees the bell's count on another page, the notification with the
reason on the list, and opens the task from it (the count is then 0 and the task page shows the
reason)."""
from __future__ import annotations

import os

import pytest
from conftest import sign_in

from annotation.models import Event, Task, TaskRevision

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists("/usr/bin/chromium"), reason="Debian chromium is not installed"),
]

REASON = "step 2 must buffer by 20 m, not 200 m"


@pytest.mark.django_db(transaction=True)
def test_a_returned_task_reaches_its_author_through_the_bell(live_server, browser, make_user):
    ada = make_user("ada", "author", password="ada-pass-1")
    make_user("rey", "reviewer", password="rey-pass-1")
    event = Event.objects.create(slug="joplin", name="Joplin")
    task = Task.objects.create(event=event, sample_id="s0", question_id="s0_task0", dimension="t2",
                               status=Task.Status.SUBMITTED, created_by=ada)  # submitted directly: no replay needed here
    head = TaskRevision.objects.create(task=task, number=1, question="How many buildings?", author=ada)
    Task.objects.filter(pk=task.pk).update(head=head, version=1)

    reviewer = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = reviewer.new_page()
    try:
        sign_in(page, live_server.url, "rey", "rey-pass-1")
        page.goto(f"{live_server.url}/tasks/{task.pk}/")
        page.fill("#transition-reason", REASON)
        page.click("#do-return")
        page.wait_for_function("() => document.body.innerText.includes('returned')", timeout=15000)
    finally:
        reviewer.close()
    assert Task.objects.get(pk=task.pk).status == "returned"

    author = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = author.new_page()
    try:
        sign_in(page, live_server.url, "ada", "ada-pass-1")
        page.goto(f"{live_server.url}/releases/")
        bell = page.locator("a.bell")
        assert bell.get_attribute("data-unread") == "1" and bell.locator(".bell-count").inner_text() == "1"
        # the bell is drawn by CSS (a 16 px masked icon), no emoji glyph a font may lack
        icon = page.evaluate("""() => { const i = document.querySelector('a.bell .bell-icon'); const s = getComputedStyle(i);
            return [i.textContent, s.width, s.maskImage.startsWith('url(')]; }""")
        assert icon == ["", "16px", True]
        bell.click()
        page.wait_for_url(f"{live_server.url}/notifications/")
        item = page.locator("#notifications li.unread")
        assert item.count() == 1 and REASON in item.inner_text() and "rey returned s0_task0" in item.inner_text()
        # its buttons read as links on the light page (they were white on white, styled for the dark
        # top bar); the top bar's Log out stays white
        colours = page.evaluate("""() => ['#notifications .open-notification', '#notifications .mark-read', '.topbar .linkbutton']
            .map((q) => getComputedStyle(document.querySelector(q)).color)""")
        assert colours == ["rgb(31, 95, 153)", "rgb(31, 95, 153)", "rgb(255, 255, 255)"]  # --link #1f5f99; #fff
        item.locator("button.open-notification").click()
        page.wait_for_url(f"{live_server.url}/tasks/{task.pk}/")
        assert REASON in page.locator("#returned-banner").inner_text()
        assert page.locator("a.bell").get_attribute("data-unread") == "0"
    finally:
        author.close()
