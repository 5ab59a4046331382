"""Making a robustness variant in a real browser: the task page's "Make a variant" form opens the
variant made, whose gold replay started when it was made (its page follows that replay, never "No
succeeded replay yet" until a reload), and an unsolvable variant gets no ``alignment.count`` finding
(its gold answer is the refusal, whatever the question asks), in the editor's live QC of an unsaved
edit either.

Expected stop read off the base plan by hand (tests/support/replay.py's VARIANTS): removing the last
tool, vis.pie_chart, stops the gold replay at step 3; the gold answer is REJECT."""
from __future__ import annotations

import os

import pytest
from support.browser import open_signed_in

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists("/usr/bin/chromium"), reason="Debian chromium is not installed"),
]


@pytest.mark.django_db(transaction=True)
def test_an_unsolvable_variant_opens_on_its_running_replay(live_server, browser, approved_florence, people):
    ctx, page = open_signed_in(browser, live_server, "ada", "pw-test-123", viewport=(1280, 800))
    try:
        page.goto(f"{live_server.url}/tasks/{approved_florence.pk}/")
        page.select_option("#variant-kind", "unsolvable")
        page.select_option("#variant-form select[name=strategy]", "tool_removal")
        page.click("#variant-make")
        page.wait_for_url(lambda url: url.rstrip("/") != f"{live_server.url}/tasks/{approved_florence.pk}")
        assert page.inner_text("#variant-of").startswith(f"This task is an unsolvable variant of {approved_florence.question_id}")
        page.wait_for_function("() => /^succeeded/.test(document.querySelector('#replay-status').textContent)", timeout=60000)
        page.wait_for_selector("#variant-stop")
        assert "stops at step 3 (vis.pie_chart)" in page.inner_text("#variant-stop")
        assert "REJECT" in page.inner_text("#final-answer")
        assert "No succeeded replay yet" not in page.inner_text("body")
        assert "alignment.count" not in page.inner_text("body")
        # the editor's live QC of an unsaved edit checks it as the variant too (it said alignment.count)
        page.click("text=Edit")
        page.wait_for_function("() => document.querySelector('#save-state').dataset.state === 'saved'", timeout=15000)
        page.fill("#question", page.input_value("#question") + " Answer in one line.")
        page.wait_for_function("""() => { const b = document.querySelector('#qc-box');
            return b && b.dataset.state === 'done' && b.textContent.includes('unsaved edits'); }""", timeout=15000)
        assert "alignment." not in page.inner_text("#qc-box"), page.inner_text("#qc-box")
        assert not page._errors, page._errors
    finally:
        ctx.close()
