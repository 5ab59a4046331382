"""Binding blank answers: a field whose gold is null or missing gets a proposed
source from the trajectory, shown by ``import_tasks --json``, the task API and the editor, and
bound only when a person accepts it.

Expected proposal, worked out from the catalogue (../shared/spec/dora-tools.json): ``ras.vectorize``
returns ``count:int (number of polygons)`` first among its int keys, and ``scalar_count`` takes an
int, so the field ``building_polygons`` is proposed ``<count> from trajectory[1].obs``
(the issue's own example); ``seg.building_damage`` has no int result.
"""
from __future__ import annotations

import json
import os
from io import StringIO

import pytest
from conftest import SHARED, requires_shared
from django.core.management import call_command

from annotation.models import Event, Task
from kernel.catalogue import CATALOGUE_NAME, catalogue_path
from kernel.taskfile import dumps

#: the tool catalogue (dora-tools.json: ../shared/spec, or where kernel.catalogue finds it)
pytestmark = requires_shared(catalogue_path() or SHARED / "spec" / CATALOGUE_NAME)

SOURCE = "<count> from trajectory[1].obs"


def _draft_file(tmp_path):
    sample = {"sample_id": "draft_01", "disaster_type": "flood", "input_data": {}, "tasks": [{
        "task_category": "perception_and_assessment", "task_category_code": "T1",
        "question": "How many damaged building polygons are there?",
        "tools": ["seg.building_damage", "ras.vectorize"],
        "trajectory": [
            {"call": "seg.building_damage", "args": {"pre_image_path": "pre.png", "post_image_path": "post.png"}},
            {"call": "ras.vectorize", "args": {"mask_path": "<mask_path> from trajectory[0].obs", "classes": [2, 3]}}],
        "final_answer": {"building_polygons": None}, "eval_spec": {"building_polygons": "scalar_count"}}]}
    p = tmp_path / "t1_perception_and_assessment.json"
    p.write_text(dumps([sample]), encoding="utf-8")
    return p


@pytest.fixture
def imported(db, tmp_path, make_user):
    user = make_user("ada", "author")
    Event.objects.create(slug="bench", name="bench")
    out = StringIO()
    call_command("import_tasks", str(_draft_file(tmp_path)), "--event", "bench", "--as-user", "ada", "--json", stdout=out)
    return user, json.loads(out.getvalue())


def test_import_tasks_json_shows_the_proposal_and_binds_nothing(imported):
    _, rows = imported
    (row,) = rows
    assert row["status"] == "created"
    (p,) = row["proposals"]
    assert (p["field"], p["source"], p["tool"], p["key"], p["type"]) == ("building_polygons", SOURCE, "ras.vectorize", "count", "int")
    head = Task.objects.get(question_id="draft_01_task0").head
    assert head.answer_spec == [{"name": "building_polygons", "eval_type": "scalar_count", "source": None}]  # not bound


def test_api_shows_and_accepts_the_proposal(imported, client):
    user, _ = imported
    task = Task.objects.get(question_id="draft_01_task0")
    client.force_login(user)
    body = client.get(f"/api/tasks/{task.pk}/").json()
    assert [p["source"] for p in body["answer_proposals"]] == [SOURCE]
    url = f"/api/tasks/{task.pk}/answer-proposals/accept/"
    stale = client.post(url, {"field": "building_polygons", "expected_version": 0}, content_type="application/json")
    assert stale.status_code == 409
    bad = client.post(url, {"field": "nope", "expected_version": 1}, content_type="application/json")
    assert bad.status_code == 400 and bad.json()["detail"] == "answer_spec.nope: no such answer field"
    ok = client.post(url, {"field": "building_polygons", "expected_version": 1}, content_type="application/json")
    assert ok.status_code == 200, ok.content
    assert ok.json()["version"] == 2 and ok.json()["answer_proposals"] == []
    task.refresh_from_db()
    assert task.head.answer_spec[0]["source"] == SOURCE
    assert json.loads(task.head.source)["task"]["question"].startswith("How many")  # the file's task is carried on
    again = client.post(url, {"field": "building_polygons", "expected_version": 2}, content_type="application/json")
    assert again.status_code == 400 and "its source is not blank" in again.json()["detail"]


def test_someone_who_may_not_edit_cannot_accept(imported, client, make_user):
    task = Task.objects.get(question_id="draft_01_task0")
    client.force_login(make_user("rey", "reviewer"))
    resp = client.post(f"/api/tasks/{task.pk}/answer-proposals/accept/", {"field": "building_polygons", "expected_version": 1},
                       content_type="application/json")
    assert resp.status_code == 403
    assert Task.objects.get(pk=task.pk).version == 1


def test_editor_shows_the_block(imported, client):
    user, _ = imported
    task = Task.objects.get(question_id="draft_01_task0")
    client.force_login(user)
    html = client.get(f"/tasks/{task.pk}/edit/").content.decode()
    assert 'id="answer-proposals"' in html and "proposed source: <code>&lt;count&gt; from trajectory[1].obs</code>" in html
    assert 'class="accept-proposal" data-field="building_polygons"' in html


@pytest.mark.browser
@pytest.mark.skipif(not os.path.exists("/usr/bin/chromium"), reason="Debian chromium is not installed")
@pytest.mark.django_db(transaction=True)
def test_accept_in_a_real_browser(live_server, browser, make_user, tmp_path):
    make_user("ada", "author", password="ada-pass-1")
    Event.objects.create(slug="bench", name="bench")
    call_command("import_tasks", str(_draft_file(tmp_path)), "--event", "bench", "--as-user", "ada", stdout=StringIO())
    task = Task.objects.get(question_id="draft_01_task0")
    ctx = browser.new_context()
    page = ctx.new_page()
    try:
        page.goto(f"{live_server.url}/accounts/login/")
        page.fill("input[name=username]", "ada")
        page.fill("input[name=password]", "ada-pass-1")
        page.click("button[type=submit]")
        page.wait_for_load_state()
        page.goto(f"{live_server.url}/tasks/{task.pk}/edit/")
        page.click('#answer-proposals button.accept-proposal[data-field="building_polygons"]')
        page.wait_for_function("() => !document.querySelector('#answer-proposals')", timeout=15000)
        task.refresh_from_db()
        assert task.version == 2 and task.head.answer_spec[0]["source"] == SOURCE
    finally:
        ctx.close()
