"""Keyboard-first scoring in a real browser (Debian Chromium through Playwright): keys toggle flags
and pick the grade, the draft autosaves, Enter submits and the next item of the queue opens."""
from __future__ import annotations

import os
import re

import pytest
from conftest import sign_in

from evaluation.models import ScoringItem, Verdict
from evaluation.services.queue import enqueue_run

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists("/usr/bin/chromium"), reason="Debian chromium is not installed"),
    pytest.mark.urls("support.judging"),
]


def _login(page, base, user, password):
    sign_in(page, base, user, password)


@pytest.mark.django_db(transaction=True)
def test_keyboard_scoring(live_server, browser, make_user, run_a, maintainer):
    enqueue_run(maintainer, run_a, 1)
    make_user("ana", "scorer", password="ana-pass-1")
    t1 = list(run_a.records.filter(dimension="t1").order_by("id"))
    assert len(t1) == 2
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        _login(page, live_server.url, "ana", "ana-pass-1")
        page.goto(f"{live_server.url}/scoring/next/?dimension=t1")
        page.click("#claim-next")  # claiming is a POST (a GET only shows this button)
        page.wait_for_selector("#verdict-form[data-ready='1']")
        assert page.inner_text("#item-title").startswith(t1[0].question_id)
        first_url = page.url

        page.keyboard.press("4")
        assert page.is_checked("input[name=E4]") and page.inner_text("#derived-correct") == "no"
        page.keyboard.press("4")
        assert not page.is_checked("input[name=E4]") and page.inner_text("#derived-correct") == "yes"
        page.keyboard.press("4")
        page.fill("input[name=reason-E4]", "step 2 uses a mask not yet produced")
        page.keyboard.press("Escape")  # leave the text field: keys act on the form again
        page.keyboard.press("r")  # grade 0.6
        assert page.is_checked("input[name=grade][value='0.6']")
        page.wait_for_function("() => document.getElementById('form-state').textContent === 'draft saved'")
        draft = ScoringItem.objects.get(scorer__username="ana", verdict__isnull=True).draft
        assert draft["errors"]["E4"] is True and draft["grade"] == "0.6"

        page.keyboard.press("Enter")  # submit; the next item of the same queue opens
        page.wait_for_url(lambda url: url != first_url and "/scoring/items/" in url)
        page.wait_for_selector("#verdict-form[data-ready='1']")
        assert page.inner_text("#item-title").startswith(t1[1].question_id)
        assert "dimension=t1" in page.url

        v = Verdict.objects.get(record=t1[0], annotator__username="ana")
        assert v.errors == {"E1": False, "E2": False, "E3": False, "E4": True, "E5": False, "E6": False}
        assert v.grade == 0.6 and v.is_correct is False and v.reasons == {"E4": "step 2 uses a mask not yet produced"}
        assert v.idempotency_key

        page.keyboard.press("y")  # grade 1.0, no flag
        page.keyboard.press("Enter")
        page.wait_for_url(re.compile(r".*/scoring/done/\?dimension=t1$"))  # the t1 queue is empty: its summary
        assert "Nothing left for you in the queue of dimension T1" in page.content()
        assert "You scored 2 items here" in page.inner_text("#queue-summary")
        v2 = Verdict.objects.get(record=t1[1], annotator__username="ana")
        assert v2.grade == 1.0 and v2.is_correct is True
        assert Verdict.objects.filter(annotator__username="ana").count() == 2
        assert not errors, errors
    finally:
        page.close()


@pytest.mark.django_db(transaction=True)
def test_a_scorer_sees_no_agent_and_the_count_the_queue_keeps(live_server, browser, make_user, run_a, maintainer):
    """Blind scoring in the browser: the scoring list and the item page name no agent (run_a's agent
    is ``agent_a``), and "N more records wait for you" counts what the queue will hand out. Hand-
    worked: the t1 queue has 2 records, one slot each; ana was shown the other verdicts of the second
    (``VerdictsSeen``), so after the first nothing waits for her — and the queue agrees."""
    from evaluation.models import VerdictsSeen

    enqueue_run(maintainer, run_a, 1)
    ana = make_user("ana", "scorer", password="ana-pass-1")
    t1 = list(run_a.records.filter(dimension="t1").order_by("id"))
    VerdictsSeen.objects.create(user=ana, record=t1[1], via="record page")
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        _login(page, live_server.url, "ana", "ana-pass-1")
        page.goto(f"{live_server.url}/scoring/")
        headers = [h.strip() for h in page.locator("#queues th").all_inner_texts()]
        assert "Agent" not in headers and "agent_a" not in page.inner_text("body")
        page.goto(f"{live_server.url}/scoring/next/?dimension=t1")
        page.click("#claim-next")
        page.wait_for_selector("#verdict-form[data-ready='1']")
        assert page.inner_text("#item-title").startswith(t1[0].question_id)
        assert "agent_a" not in page.inner_text("body")
        assert "0 more records wait for you" in page.inner_text("#queue-progress-detail")
        assert page.inner_text("#queue-progress") == "item 1 of 1"
        page.keyboard.press("y")
        page.keyboard.press("Enter")
        page.wait_for_url(re.compile(r".*/scoring/done/\?dimension=t1$"))
        assert "Nothing left for you" in page.content()
    finally:
        page.close()
