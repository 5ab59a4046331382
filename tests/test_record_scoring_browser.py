"""Scoring records in a real browser (Debian Chromium through Playwright), walked as the people who do it:
a scorer deciding a record on its page without reading JSON (answer field by field, steps aligned
by tool, the one verdict form, blind until final), a maintainer refused the adjudication of a
record she scored, a maintainer uploading a run (scored in the background, a failed import styled
failed) and running the judge without waiting for it, polygons and points on the answer maps.

Hand-worked values: agent_a's t3_s09_task1 answers 14.4 teams for a gold 12 (|14.4 − 12| = 2.4 ≤
1 + 0.2·|12| = 3.4: passes); t3_s11_task0 calls 3 of the 5 gold steps (T-ORD 0.6: two skipped).
"""
from __future__ import annotations

import os
import re
import time
import zipfile

import pytest
from conftest import SCORING_EXAMPLES, needs_shared
from support.judging import GOOD, flags

from evaluation.models import AgentRun, JudgeJob, Verdict
from evaluation.services.verdicts import submit_human_verdict

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists("/usr/bin/chromium"), reason="Debian chromium is not installed"),
    pytest.mark.urls("support.judging"),
]


def _page(browser, base, user, password):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{base}/accounts/login/")
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r".*/$"))
    return page, errors


@pytest.mark.django_db(transaction=True)
def test_scorer_decides_a_record_on_its_page_blind_until_final(live_server, browser, make_user, run_a):
    rec = run_a.records.get(question_id="t3_s09_task1")
    skipper = run_a.records.get(question_id="t3_s11_task0")
    submit_human_verdict(make_user("bo", "scorer"), rec, errors=flags("E4"), grade=0.4, reasons={"E4": "bo: teams overcounted"})
    make_user("ana", "scorer", password="ana-pass-1")
    page, errors = _page(browser, live_server.url, "ana", "ana-pass-1")
    try:
        page.goto(f"{live_server.url}/records/{rec.pk}/")
        page.wait_for_selector("#verdict-form[data-ready='1']")
        # 1. gold vs prediction, field by field, with the operator's reason; raw text one click away
        row = page.locator("#answer-fields tr[data-field='teams_required']")
        assert row.locator(".gold-value").inner_text() == "12" and row.locator(".pred-value").inner_text() == "14.4"
        assert "|14.4 − 12| = 2.4 ≤ 1 + 0.2·|12| = 3.4" in row.inner_text() and "scalar_count" in row.inner_text()
        assert not page.is_visible("#answer-raw pre")
        page.click("#answer-raw summary")
        assert '"teams_required": 14.4' in page.inner_text("#answer-raw pre")
        # blind: bo's verdict is hidden, no grade preselected
        assert "1 verdict hidden" in page.inner_text("#verdicts-hidden") and "bo: teams" not in page.content()
        assert page.locator("#verdict-form input[name=grade]:checked").count() == 0
        # 3. keyboard: E2 on, grade 0.2, Shift+Enter saves a revisable verdict; the page loads it back
        page.keyboard.press("2")
        page.keyboard.press("w")
        page.keyboard.press("Shift+Enter")
        page.wait_for_selector("#verdict-status")
        assert "revision 1" in page.inner_text("#verdict-status") and "still revisable" in page.inner_text("#verdict-status")
        assert page.is_checked("#verdict-form input[name=E2]") and page.is_checked("#verdict-form input[name=grade][value='0.2']")
        assert "bo: teams" not in page.content()  # still blind
        # revise (E2 off, grade 1.0) and mark final with Enter: the others appear, the form locks
        page.keyboard.press("2")
        page.keyboard.press("y")
        page.keyboard.press("Enter")
        page.wait_for_selector("#verdict-locked")
        assert "bo: teams overcounted" in page.inner_text("#verdicts")  # per-flag notes shown
        assert page.is_disabled("#verdict-form input[name=E1]")
        v = Verdict.objects.get(record=rec, annotator__username="ana")
        assert (v.revision, v.grade, v.errors["E2"], v.sealed_at is not None) == (2, 1.0, False, True)
        assert [r.grade for r in v.revisions.all()] == [0.2, 1.0]
        page.click("#verdict-revisions summary")
        assert "final" in page.inner_text("#verdict-revisions")
        # 2. steps aligned by tool: the two skipped gold steps are rows of their own
        page.goto(f"{live_server.url}/records/{skipper.pk}/")
        kinds = page.eval_on_selector_all("#aligned-steps tbody tr", "rows => rows.map(r => r.dataset.kind)")
        assert kinds == ["match", "match", "skipped", "skipped", "match"]
        assert page.locator("#aligned-steps tr.step-skipped .badge").first.inner_text() == "skipped by the agent"
        assert "T-ORD" in page.inner_text("#traj-metrics") and "longest common subsequence" in page.inner_text("#traj-metrics")
        assert not errors, errors
    finally:
        page.close()


@pytest.mark.django_db(transaction=True)
def test_no_self_adjudication_in_the_browser(live_server, browser, make_user, run_a):
    rec = run_a.records.get(question_id="t3_s09_task1")
    mia = make_user("maxine", "maintainer", "scorer", password="max-pass-1")
    submit_human_verdict(mia, rec, errors=flags(), grade=1.0)
    submit_human_verdict(make_user("bo", "scorer"), rec, errors=flags("E4"), grade=0.4)
    make_user("rita", "reviewer", password="rita-pass-1")
    page, errors = _page(browser, live_server.url, "maxine", "max-pass-1")
    try:
        page.goto(f"{live_server.url}/adjudication/")
        assert "you scored it: another reviewer adjudicates it" in page.inner_text("#adjudication-queue")
        page.goto(f"{live_server.url}/adjudication/records/{rec.pk}/")
        assert "you cannot adjudicate it; another reviewer must" in page.inner_text("#verdict-locked")
        assert page.locator("#adjudicate-submit").count() == 0
    finally:
        page.close()
    page, errors = _page(browser, live_server.url, "rita", "rita-pass-1")
    try:  # another reviewer adjudicates with the same keyboard-first form
        page.goto(f"{live_server.url}/adjudication/records/{rec.pk}/")
        page.wait_for_selector("#verdict-form[data-ready='1']")
        page.keyboard.press("4")
        page.keyboard.press("e")  # 0.4
        page.keyboard.press("Enter")
        page.wait_for_url(re.compile(r".*/adjudication/$"))
        final = Verdict.objects.get(record=rec, is_final=True)
        assert final.annotator.username == "rita" and final.errors["E4"] and final.grade == 0.4
        assert not errors, errors
    finally:
        page.close()


@pytest.mark.django_db(transaction=True)
def test_upload_a_run_then_judge_it_in_the_background(live_server, browser, make_user, tmp_path, judge_config,
                                                      judge_server, settings, monkeypatch):
    from evaluation.services import runs as services

    settings.STUDIO_JUDGE_RUNNER = "thread"  # the embedded default
    real = services.import_run_dir  # the example run's gold is the example task folder
    monkeypatch.setattr(services, "import_run_dir", lambda *a, **kw: real(*a, tasks_dir=needs_shared(SCORING_EXAMPLES / "tasks"), **kw))
    zpath = tmp_path / "agent-x_AP.zip"
    with zipfile.ZipFile(zpath, "w") as zf:
        src = needs_shared(SCORING_EXAMPLES / "runs" / "agent_a")
        for f in src.rglob("*"):
            if f.is_file():
                zf.write(f, f"agent-x_AP/{f.relative_to(src)}")
    make_user("max", "maintainer", password="max-pass-1")
    page, errors = _page(browser, live_server.url, "max", "max-pass-1")
    try:
        page.goto(f"{live_server.url}/runs/")
        page.set_input_files("#run-upload-form input[name=archive]", str(zpath))
        page.fill("#run-upload-form input[name=agent]", "agent-x")
        page.fill("#run-upload-form input[name=queue_share]", "0.5")
        page.click("#run-upload-form button[type=submit]")
        # 4. the request only stores the zip: the runs page follows the background import to its end
        page.wait_for_selector("#run-imports tr.import-job")
        try:  # a failed or stale (unfollowed) job is shown as the page has it
            page.wait_for_selector("#run-imports tr.import-job:is([data-status='done'], [data-status='failed'])",
                                   timeout=30000)
        except Exception:
            raise AssertionError(page.inner_html("#run-imports")) from None
        assert page.locator("#run-imports tr.import-job[data-status='done']").count() == 1, page.inner_html("#run-imports")
        run = AgentRun.objects.get()
        assert run.protocol == "AP" and run.records.count() == 12
        row = page.inner_text("#run-imports tr.import-job[data-status='done']")
        assert "done: 12 records scored" in row and "6 records queued for human scoring" in row
        assert page.locator("#run-imports .progress.done").count() == 1
        page.click(f"#run-imports a[href='/runs/{run.pk}/']")
        page.wait_for_url(re.compile(r".*/runs/\d+/$"))
        # 6. start the judge: the page comes back at once, then follows the job to its end
        for _ in range(2):
            judge_server.reply(GOOD)
        page.fill("#judge-run-form input[name=sample]", "2")
        t0 = time.monotonic()
        page.click("#judge-run-form button[type=submit]")
        page.wait_for_url(re.compile(r".*/judge/jobs/\d+/$"))
        assert time.monotonic() - t0 < 10
        page.wait_for_function("() => document.getElementById('job-status').textContent === 'done'", timeout=20000)
        assert "2</span>/2" in page.inner_html("#job")
        assert JudgeJob.objects.get().status == "done"
        assert not errors, errors
    finally:
        page.close()


@pytest.mark.django_db(transaction=True)
def test_point_answers_show_both_geometries_on_the_map(live_server, browser, make_user, run_a):
    from evaluation.models import RunRecord

    # a point pair scored as one unit: gold (35.0, -77.0), predicted (35.001, -77.0): 111.2 m apart
    # on the evaluator's sphere (R = 6 371 000 m; 0.001° of latitude), more than 20 m without GSD
    rec = RunRecord.objects.create(
        run=run_a, question_id="pt_s01_task0", sample_id="pt_s01", dimension="t2",
        predicted_answer={"site_lat": 35.001, "site_lon": -77.0}, field_scores={"site__point_geo": 0.0},
        gold={"question": "Where is the shelter?", "final_answer": {"site_lat": 35.0, "site_lon": -77.0},
              "eval_spec": {"site_lat": "point_haversine", "site_lon": "point_haversine"}})
    make_user("ana", "scorer", password="ana-pass-1")
    page, errors = _page(browser, live_server.url, "ana", "ana-pass-1")
    try:
        page.goto(f"{live_server.url}/records/{rec.pk}/")
        amap = ".answer-map[data-field='site__point_geo']"
        page.wait_for_selector(f"{amap}[data-ready='2']")  # two markers: gold and predicted
        assert page.locator(f"{amap} path.answer-gold").count() == 1
        assert page.locator(f"{amap} path.answer-pred").count() == 1
        row = page.inner_text("#answer-fields tr[data-field='site__point_geo']")
        assert "111.195 m > 20 m" in row and "site_lat + site_lon" in row
        assert not errors, errors
    finally:
        page.close()


@pytest.mark.django_db(transaction=True)
def test_polygon_answers_show_gold_and_predicted_on_every_answer_page(live_server, browser, make_user, run_a, tmp_path):
    """A ``polygon_iou`` answer: the gold file (with its dora_grid, EPSG:32633) and the agent's
    predicted file (pixel columns 12..32, 1 m east of the gold's 10..30) drawn as two polygons on
    the record page, the scoring queue item and the adjudication page."""
    import json

    from evaluation.models import AgentRun, RunRecord
    from evaluation.services.queue import enqueue_records

    grid = {"transform": [0.5, 0, 500000, 0, -0.5, 4000000], "crs": "EPSG:32633"}
    sq = lambda c0, c1: [[[c0, 10], [c1, 10], [c1, 30], [c0, 30], [c0, 10]]]  # noqa: E731
    world = [[[0.5 * c + 500000, -0.5 * r + 4000000] for c, r in sq(10, 30)[0]]]
    run_dir = tmp_path / "poly_run"
    (run_dir / "gold_polygons").mkdir(parents=True)
    (run_dir / "t1" / "out").mkdir(parents=True)
    fc = lambda g, **kw: {"type": "FeatureCollection", "features": [{"type": "Feature", "properties": {}, "geometry": g}], **kw}  # noqa: E731
    (run_dir / "gold_polygons" / "flood.geojson").write_text(json.dumps(fc(
        {"type": "Polygon", "coordinates": world}, crs={"type": "name", "properties": {"name": "EPSG:32633"}}, dora_grid=grid)))
    (run_dir / "t1" / "out" / "pred.geojson").write_text(json.dumps(fc({"type": "Polygon", "coordinates": sq(12, 32)})))
    run = AgentRun.objects.create(agent=run_a.agent, name="poly_run", source_dir=str(run_dir))
    rec = RunRecord.objects.create(
        run=run, question_id="pg_s01_task0", sample_id="pg_s01", dimension="t1",
        predicted_answer={"flood_extent": "/agent/outputs/poly_run/t1/out/pred.geojson"}, field_scores={"flood_extent": 1.0},
        gold={"question": "Outline the flood.", "final_answer": {"flood_extent": "gold_polygons/flood.geojson"},
              "eval_spec": {"flood_extent": "polygon_iou"}})
    enqueue_records(make_user("max", "maintainer"), [rec], n=1)
    make_user("ana", "scorer", password="ana-pass-1")
    make_user("rita", "reviewer", password="rita-pass-1")
    amap = ".answer-map[data-field='flood_extent']"

    def both_drawn(page):
        page.wait_for_selector(f"{amap}[data-ready='2']")
        assert page.locator(f"{amap} path.answer-gold").count() == 1
        assert page.locator(f"{amap} path.answer-pred").count() == 1
        cap = page.inner_text("figure.answer-geometry[data-field='flood_extent'] figcaption")
        assert "gold" in cap and "predicted" in cap and "(none)" not in cap

    page, errors = _page(browser, live_server.url, "ana", "ana-pass-1")
    try:
        page.goto(f"{live_server.url}/scoring/next/")
        page.click("#claim-next")
        page.wait_for_url(re.compile(r".*/scoring/items/\d+/.*"))
        both_drawn(page)  # the queue item
        page.goto(f"{live_server.url}/records/{rec.pk}/")
        both_drawn(page)  # the record page
        assert "IoU 0.8182 vs gate 0.5" in page.inner_text("#answer-fields tr[data-field='flood_extent']")  # 90 / 110
        assert not errors, errors
    finally:
        page.close()
    page, errors = _page(browser, live_server.url, "rita", "rita-pass-1")
    try:
        page.goto(f"{live_server.url}/adjudication/records/{rec.pk}/")
        both_drawn(page)  # the adjudication page
        assert not errors, errors
    finally:
        page.close()


@pytest.mark.django_db(transaction=True)
def test_a_crashed_upload_shows_failed_and_runs_again(live_server, browser, make_user, tmp_path, settings, monkeypatch):
    """The background import crashes once (an error that is not the import's own): the runs page
    shows it failed, in the failed style, with the crash as its first error; "Run again" imports
    the stored zip."""
    from evaluation.services import runs as services

    settings.STUDIO_JUDGE_RUNNER = "thread"  # the embedded default
    real, calls = services.import_run_dir, []

    def flaky(*a, **kw):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("disk vanished")
        return real(*a, tasks_dir=needs_shared(SCORING_EXAMPLES / "tasks"), **kw)

    monkeypatch.setattr(services, "import_run_dir", flaky)
    zpath = tmp_path / "agent-y_IF.zip"
    with zipfile.ZipFile(zpath, "w") as zf:
        src = needs_shared(SCORING_EXAMPLES / "runs" / "agent_a")
        for f in src.rglob("*"):
            if f.is_file():
                zf.write(f, f"agent-y_IF/{f.relative_to(src)}")
    make_user("max", "maintainer", password="max-pass-1")
    page, errors = _page(browser, live_server.url, "max", "max-pass-1")
    try:
        page.goto(f"{live_server.url}/runs/")
        page.set_input_files("#run-upload-form input[name=archive]", str(zpath))
        page.fill("#run-upload-form input[name=agent]", "agent-y")
        page.click("#run-upload-form button[type=submit]")
        page.wait_for_selector("#run-imports tr.import-job[data-status='failed']", timeout=30000)
        row = page.locator("#run-imports tr.import-job[data-status='failed']")
        assert "the job crashed: RuntimeError: disk vanished" in row.locator(".import-error").inner_text()
        assert row.locator(".progress.failed").count() == 1
        # failed reads as failed: the status in the "bad" colour, not the neutral/success one
        colour = row.locator(".import-status").evaluate("e => getComputedStyle(e).color")
        ok_colour = page.evaluate("() => { const s = document.createElement('span'); s.className = 'status-done';"
                                  " document.body.appendChild(s); return getComputedStyle(s).color; }")
        assert colour != ok_colour
        row.locator("button.import-rerun").click()
        page.wait_for_selector("#run-imports tr.import-job[data-status='done']", timeout=30000)
        assert "done: 12 records scored" in page.inner_text("#run-imports tr.import-job[data-status='done']")
        assert AgentRun.objects.get().protocol == "IF"
        assert not errors, errors
    finally:
        page.close()
