"""An adjudication in a real browser: the reviewer sees both verdicts with their reasons and the
trajectories, is refused when overriding everyone without a rationale, then starts from one
scorer's verdict and records it as final."""
from __future__ import annotations

import os
import re

import pytest
from conftest import sign_in
from support.judging import flags

from evaluation.models import Adjudication, Verdict
from evaluation.services.verdicts import submit_human_verdict

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists("/usr/bin/chromium"), reason="Debian chromium is not installed"),
    pytest.mark.urls("support.judging"),
]


def _disagreement(make_user, run_a):
    """Scorers ana (E4) and bo (E5) disagree on t1_s05_task0, both at grade 0.6; reviewer rita
    (password rita-pass-1) adjudicates. Returns (record, bo's verdict)."""
    ana, bo = make_user("ana", "scorer"), make_user("bo", "scorer")
    make_user("rita", "reviewer", password="rita-pass-1")
    rec = run_a.records.get(question_id="t1_s05_task0")
    submit_human_verdict(ana, rec, errors=flags("E4"), grade=0.6, reasons={"E4": "step 2 reads a later mask"})
    return rec, submit_human_verdict(bo, rec, errors=flags("E5"), grade=0.6, reasons={"E5": "wrong GSD"})


@pytest.mark.django_db(transaction=True)
def test_adjudication(live_server, browser, make_user, run_a):
    rec, bo_v = _disagreement(make_user, run_a)
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        sign_in(page, live_server.url, "rita", "rita-pass-1")
        page.goto(f"{live_server.url}/adjudication/")
        page.click(f"text={rec.question_id}")
        page.wait_for_selector("#verdict-grid")
        grid = page.inner_text("#verdict-grid")
        assert "step 2 reads a later mask" in grid and "wrong GSD" in grid
        assert "flags: E4 vs E5" in page.inner_text("#disagreements")
        assert "perception.classify_damage" in page.inner_text("#aligned-steps")

        # overriding both (E6) without a rationale is refused
        page.check("#verdict-form input[name=E6]")
        page.check("#verdict-form input[name=grade][value='0.2']")
        page.click("#adjudicate-submit")
        page.wait_for_selector("#adj-error")
        assert "rationale" in page.inner_text("#adj-error")
        assert page.is_checked("#verdict-form input[name=E6]")  # the form kept the input
        assert not Adjudication.objects.exists()

        # start from bo's verdict: its flags, reasons and grade fill the form; no rationale needed
        page.click(f"button.use-verdict[data-verdict='{bo_v.pk}']")
        assert page.is_checked("#verdict-form input[name=E5]")
        assert not page.is_checked("#verdict-form input[name=E6]")
        assert page.input_value("#verdict-form input[name=reason-E5]") == "wrong GSD"
        assert page.is_checked("#verdict-form input[name=grade][value='0.6']")
        page.click("#adjudicate-submit")
        page.wait_for_url(re.compile(r".*/adjudication/$"))  # the queue is empty now
        assert "Final verdict of t1_s05_task0 recorded" in page.content()

        adj = Adjudication.objects.get()
        assert not adj.overrides_all and adj.reviewer.username == "rita"
        final = Verdict.objects.get(record=rec, is_final=True)
        assert final.errors["E5"] and not final.errors["E4"] and final.grade == 0.6 and final.reasons == {"E5": "wrong GSD"}
        assert not errors, errors
    finally:
        page.close()


@pytest.mark.django_db(transaction=True)
def test_the_verdict_form_keeps_what_was_ticked_before_its_script_ran(live_server, browser, make_user, run_a):
    """A reviewer on a slow link ticks E6 and a grade while the page's module script is still on its
    way: the script, once it runs, must not reset the form to the state the server rendered (it
    used to restore an empty draft over the ticked boxes, and the form then posted without E6)."""
    rec, _ = _disagreement(make_user, run_a)
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    held = []
    try:
        sign_in(page, live_server.url, "rita", "rita-pass-1")
        page.route("**/studio/verdict_form.js*", lambda route: held.append(route))  # held until released
        page.goto(f"{live_server.url}/adjudication/records/{rec.pk}/", wait_until="commit")
        page.wait_for_selector("#verdict-form input[name=E6]", state="attached")
        for _ in range(100):
            if held:
                break
            page.wait_for_timeout(50)
        assert held, "the page never asked for verdict_form.js"
        assert page.get_attribute("#verdict-form", "data-ready") is None  # the script has not run yet
        assert page.is_disabled("button.use-verdict >> nth=0")  # it would do nothing before the script runs
        page.check("#verdict-form input[name=E6]")
        page.check("#verdict-form input[name=grade][value='0.2']")
        page.fill("#verdict-form textarea[name=rationale]", "both missed the flooded bridge")
        held[0].continue_()
        page.wait_for_selector("#verdict-form[data-ready='1']", state="attached")
        assert page.is_checked("#verdict-form input[name=E6]")
        assert page.is_checked("#verdict-form input[name=grade][value='0.2']")
        assert page.input_value("#verdict-form textarea[name=rationale]") == "both missed the flooded bridge"
        # and the script's view of the form agrees: the E6 row is marked on, its reason field enabled
        assert "on" in page.get_attribute(".flag-row[data-code='E6']", "class").split()
        assert page.is_enabled("#verdict-form input[name=reason-E6]")
        page.wait_for_selector("button.use-verdict:not([disabled])")  # scoring_adjudication.js gave it its click
    finally:
        page.unroute("**/studio/verdict_form.js*")
        page.close()
