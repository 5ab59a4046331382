"""Derived values a revision stores are checked against their sources: a layer's GSD/CRS recorded
after a task was saved makes its manifest stale (QC error for a metric answer, warning otherwise),
the task page refreshes it in one click, and publishing a release refuses a stale pinned task
until it is refreshed and re-pinned, or a maintainer acknowledges it.

The comparison rules are those of ``annotation.qc.derived._same_derived`` (GSD equal within 5 %, the
tolerance of ``manifest.gsd_mismatch``; a stored null differs from a recorded GSD; a stored pixel
frame differs from a recorded CRS; authority codes compare case-blind; the layer having no value says nothing). The expected values below are worked
out by hand from those rules and from the layers' values the test records. The real-data task is the
hurricane-florence metric task of ``tests/test_layer_georeferencing.py`` (pixel-frame tiles imported
without a GSD; 0.5 m/px recorded by a maintainer, as in the expert's report).
"""
from __future__ import annotations

import io
import json
import os

import pytest
from conftest import sign_in
from django.core.management import call_command
from support.replay import florence_max_polygon_task

from annotation import qc
from annotation.models import QcAcknowledgement, Task
from annotation.services.layers import set_layer_georeferencing
from annotation.services.tasks import StaleVersionError, TaskLockedError, refresh_derived

REASON = "xBD WorldView imagery, GSD under 0.8 m (Gupta et al. 2019)"


# ---- pure rules (annotation.qc.derived) ----------------------------------------------------------------
def _manifest(**values):
    return {"input_data.post_image": {"file_name": "post.tif", "values": values}}


@pytest.mark.parametrize("stored, current, stale", [
    ({"pixel_size_m": None}, {"pixel_size_m": 0.5}, True),         # the expert's case: null, then 0.5 recorded
    ({"pixel_size_m": 0.3}, {"pixel_size_m": 0.5}, True),
    ({"pixel_size_m": 0.3}, {"pixel_size_m": 0.2986}, False),      # 0.47 % apart: a file's rounding
    ({"pixel_size_m": 0.5}, {"pixel_size_m": 0.55}, True),         # 9.1 % apart (of the layer's 0.55)
    ({"pixel_size_m": 5}, {"pixel_size_m": 0.5}, True),            # a unit slip
    ({"pixel_size_m": 0.5}, {"pixel_size_m": None}, False),        # the layer says nothing
    ({}, {"pixel_size_m": 0.5}, False),                            # the entry does not state a GSD
    ({"spatial_coordinate_system": "pixel"}, {"spatial_coordinate_system": "EPSG:32617"}, True),
    ({"spatial_coordinate_system": "epsg:32617"}, {"spatial_coordinate_system": "EPSG:32617"}, False),
    ({"spatial_coordinate_system": "EPSG:4326"}, {"spatial_coordinate_system": "EPSG:32617"}, True),
    ({"spatial_coordinate_system": "WGS84"}, {"spatial_coordinate_system": "EPSG:4326"}, False),  # not compared
    ({"spatial_coordinate_system": "EPSG:32617"}, {"spatial_coordinate_system": "pixel"}, False),
])
def test_stale_manifest_values_follow_the_documented_comparison(stored, current, stale):
    input_data = {"post_image": {"image_path": "post.tif", **stored}}
    found = qc.stale_manifest_values(input_data, _manifest(**current))
    assert bool(found) is stale, found
    if stale:
        (field,) = current
        assert found == [{"location": "input_data.post_image", "field": field, "file_name": "post.tif",
                          "stored": stored[field], "current": current[field]}]


def _content(trajectory, answer_spec):
    return {"question": "q", "input_data": {"post_image": {"image_path": "post.tif", "pixel_size_m": None}},
            "trajectory": trajectory, "answer_spec": answer_spec}


def test_a_stale_gsd_is_an_error_when_the_answer_is_in_metres_and_a_warning_otherwise():
    derived = {"manifest": _manifest(pixel_size_m=0.5), "gold": None}
    metric = _content([{"call": "vec.max_polygon", "args": {"vector_path": "v.geojson"}}],
                      [{"name": "max_area_m2", "eval_type": "scalar_continuous", "source": "x"}])
    (f,) = qc.check_derived(metric, derived)
    assert (f.check, f.severity, f.location) == ("derived.manifest_stale", "error", "input_data.post_image.pixel_size_m")
    assert "is null in this revision" in f.message and "post.tif now has 0.5" in f.message
    # a count of pixels does not depend on the GSD
    count = _content([{"call": "ras.count_pixels", "args": {"mask_path": "post.tif", "classes": [1]}}],
                     [{"name": "flooded", "eval_type": "scalar_count", "source": "x"}])
    (f,) = qc.check_derived(count, derived)
    assert (f.check, f.severity) == ("derived.manifest_outdated", "warning")
    # nor does a map's scale bar (vis.damage_map takes pixel_size_m, but draws it on a picture)
    count["trajectory"].append({"call": "vis.damage_map", "args": {"image_path": "post.tif", "pixel_size_m": 0.5}})
    assert [f.check for f in qc.check_derived(count, derived)] == ["derived.manifest_outdated"]
    # nor a polygon count: ras.vectorize takes pixel_size_m, but this step passes none, so its
    # count measures nothing (the demo's T1, counting destroyed buildings and damaged pixels)
    vectorize = _content([{"call": "ras.vectorize", "args": {"mask_path": "post.tif", "classes": [3]}}],
                         [{"name": "destroyed_building_count", "eval_type": "scalar_count", "source": "x"}])
    assert [f.check for f in qc.check_derived(vectorize, derived)] == ["derived.manifest_outdated"]
    # passing one (a number or a reference), its areas are in square metres
    vectorize["trajectory"][0]["args"]["pixel_size_m"] = "<pixel_size_m> from trajectory[0].obs"
    assert [f.check for f in qc.check_derived(vectorize, derived)] == ["derived.manifest_stale"]
    # the same count task asked in square metres (format note) depends on it
    count["answer_spec"][0]["answer_format"] = "flooded area in m²"
    assert [f.check for f in qc.check_derived(count, derived)] == ["derived.manifest_stale"]


def test_a_gold_replay_whose_inputs_changed_is_a_warning():
    content = _content([], [])
    assert qc.check_derived(content, {"manifest": {}, "gold": {"run": 7, "stored": "a" * 64, "current": "a" * 64}}) == []
    assert qc.check_derived(content, {"manifest": {}, "gold": {"run": 7, "stored": "", "current": "b" * 64}}) == []
    (f,) = qc.check_derived(content, {"manifest": {}, "gold": {"run": 7, "stored": "a" * 64, "current": "b" * 64}})
    assert (f.check, f.severity, f.location) == ("derived.gold_stale", "warning", "gold")
    assert "gold replay 7" in f.message and "aaaaaaaaaaaa" in f.message and "bbbbbbbbbbbb" in f.message


# ---- the florence task: QC, task page, refresh ---------------------------------------------------------
def _record_gsd(client, maintainer, event, gsd=0.5):
    client.force_login(maintainer)
    for layer in event.layers.filter(kind="raster"):
        resp = client.post(f"/api/layers/{layer.pk}/georeferencing/", {"gsd_m": gsd, "reason": REASON},
                           content_type="application/json")
        assert resp.status_code == 200, resp.content


def _replayed(user, task):
    from replay.services.runs import start_replay

    run = start_replay(user, Task.objects.get(pk=task.pk))
    run.refresh_from_db()
    assert run.status == "succeeded", run.error
    return run


@pytest.mark.django_db
def test_a_gsd_recorded_after_the_save_makes_qc_report_the_stale_manifest(make_user, client):
    ada, mia = make_user("ada", "author"), make_user("mia", "maintainer")
    event, post, task = florence_max_polygon_task(ada)
    run = _replayed(ada, task)
    assert task.head.input_data["post_image"]["pixel_size_m"] is None  # saved before any GSD was known
    _record_gsd(client, mia, event)

    # the API (the one QC suite: POST /api/qc/ on a saved task)
    findings = client.post("/api/qc/", {"task": task.pk}, content_type="application/json").json()["findings"]
    stale = {f["location"]: f for f in findings if f["check"].startswith("derived.")}
    assert set(stale) == {"input_data.pre_image.pixel_size_m", "input_data.post_image.pixel_size_m", "gold"}
    post_f = stale["input_data.post_image.pixel_size_m"]
    assert post_f["check"] == "derived.manifest_stale" and post_f["severity"] == "error"  # max_area_m2: metres
    assert f"is null in this revision but its layer {post.file_name} now has 0.5" in post_f["message"]
    assert stale["gold"]["check"] == "derived.gold_stale" and f"gold replay {run.pk}" in stale["gold"]["message"]

    # manage.py qc: the same findings, exit status 1 (an error)
    out = io.StringIO()
    with pytest.raises(SystemExit) as exit_:
        call_command("qc", "--task", task.question_id, "--json", stdout=out)
    assert exit_.value.code == 1
    report = json.loads(out.getvalue())
    assert {(f["check"], f["location"]) for f in report["tasks"][0]["findings"] if f["check"].startswith("derived.")} \
        == {(f["check"], loc) for loc, f in stale.items()}

    # the task page shows it and offers the refresh (not "the checks pass")
    client.force_login(ada)
    html = client.get(f"/tasks/{task.pk}/").content.decode()
    assert "derived.manifest_stale" in html and 'id="refresh-derived"' in html and "No finding" not in html


@pytest.mark.django_db
def test_the_refresh_button_writes_the_layers_values_and_clears_the_finding(make_user, client):
    ada, mia, bob = make_user("ada", "author"), make_user("mia", "maintainer"), make_user("bob", "author")
    event, post, task = florence_max_polygon_task(ada)
    _replayed(ada, task)
    _record_gsd(client, mia, event)
    set_layer_georeferencing(mia, post, crs="EPSG:32617", reason="r")

    client.force_login(bob)  # not his task: task.edit is "own" for authors
    assert client.post(f"/api/tasks/{task.pk}/refresh-derived/", {"expected_version": 1},
                       content_type="application/json").status_code == 403
    client.force_login(ada)
    resp = client.post(f"/api/tasks/{task.pk}/refresh-derived/", {"expected_version": 0},
                       content_type="application/json")
    assert resp.status_code == 409 and resp.json()["version"] == 1
    # the page's button: a form posting the version it showed
    resp = client.post(f"/tasks/{task.pk}/refresh-derived/", {"expected_version": 1})
    assert resp.status_code == 302 and resp["Location"] == f"/tasks/{task.pk}/"
    task = Task.objects.select_related("head").get(pk=task.pk)
    assert task.version == 2 and task.head.author == ada
    assert task.head.input_data["post_image"]["pixel_size_m"] == 0.5
    assert task.head.input_data["pre_image"]["pixel_size_m"] == 0.5
    assert task.head.input_data["post_image"]["spatial_coordinate_system"] == "EPSG:32617"
    assert task.head.input_data["pre_image"]["spatial_coordinate_system"] == "pixel"  # its layer has no CRS
    assert "input_data.post_image.pixel_size_m: null → 0.5" in task.head.message
    assert task.head.trajectory == task.revisions.get(number=1).trajectory  # nothing else changed
    # the derived findings are gone; the old gold is not the new revision's: replay (the normal flow)
    findings = client.post("/api/qc/", {"task": task.pk}, content_type="application/json").json()["findings"]
    assert not [f for f in findings if f["check"].startswith("derived.")], findings
    html = client.get(f"/tasks/{task.pk}/").content.decode()
    assert 'id="refresh-derived"' not in html and "r2 saved: refreshed derived values" in html
    # nothing stale any more: 400 naming the field
    resp = client.post(f"/api/tasks/{task.pk}/refresh-derived/", {"expected_version": 2},
                       content_type="application/json")
    assert resp.status_code == 400 and resp.json()["detail"].startswith("input_data: no derived value is stale")


@pytest.mark.django_db
def test_a_layer_added_to_the_event_does_not_make_the_gold_stale_a_changed_one_does(make_user):
    from annotation.models import Layer
    from annotation.services.qc import qc_for_task

    ada, mia = make_user("ada", "author"), make_user("mia", "maintainer")
    event, post, task = florence_max_polygon_task(ada)
    _replayed(ada, task)
    # a variant's or another image's file: the replay's fingerprint covered the event's layers then
    Layer.objects.create(event=event, name="roads", kind="vector", file_name="roads.geojson",
                         path="events/hurricane-florence/roads.geojson")
    assert not [f for f in qc_for_task(Task.objects.get(pk=task.pk)) if f.check.startswith("derived.")]
    set_layer_georeferencing(mia, post, crs="EPSG:32617", reason="r")
    found = {(f.check, f.location) for f in qc_for_task(Task.objects.get(pk=task.pk)) if f.check.startswith("derived.")}
    assert found == {("derived.gold_stale", "gold"),
                     ("derived.manifest_stale", "input_data.post_image.spatial_coordinate_system")}


# ---- releases --------------------------------------------------------------------------------------
def _released_draft(client, ada, mia):
    from releases.services import lifecycle

    event, post, task = florence_max_polygon_task(ada)
    _replayed(ada, task)
    Task.objects.filter(pk=task.pk).update(status=Task.Status.APPROVED)  # review itself: tests/test_review*.py
    release = lifecycle.create_release(mia, "1.0.0", "first", tasks=Task.objects.filter(pk=task.pk))
    _record_gsd(client, mia, event)
    return event, task, release


@pytest.mark.django_db
def test_publishing_refuses_a_stale_task_until_a_maintainer_acknowledges_it(make_user, client):
    ada, mia, rex = make_user("ada", "author"), make_user("mia", "maintainer"), make_user("rex", "reviewer")
    _event, task, release = _released_draft(client, ada, mia)

    resp = client.post("/api/releases/1.0.0/publish/", {}, content_type="application/json")
    assert resp.status_code == 409, resp.content
    body = resp.json()
    assert task.question_id in body["detail"] and "input_data.post_image.pixel_size_m" in body["detail"]
    assert {(s["task"], s["field"], s["check"]) for s in body["stale"]} == {
        (task.question_id, "input_data.pre_image.pixel_size_m", "derived.manifest_stale"),
        (task.question_id, "input_data.post_image.pixel_size_m", "derived.manifest_stale"),
        (task.question_id, "gold", "derived.gold_stale")}
    assert Task.objects.get(pk=task.pk).status == Task.Status.APPROVED  # nothing published

    # a reviewer may prepare releases but not acknowledge; a reason is needed
    client.force_login(rex)
    url = "/api/releases/1.0.0/stale/acknowledge/"
    assert client.post(url, {"task": task.question_id, "reason": "r"}, content_type="application/json").status_code == 403
    client.force_login(mia)
    resp = client.post(url, {"task": "nope_task0", "reason": "r"}, content_type="application/json")
    assert resp.status_code == 400 and "not pinned" in resp.json()["detail"]
    resp = client.post(url, {"task": task.question_id, "reason": "step 2 passes 0.5 literally; the gold holds"},
                       content_type="application/json")
    assert resp.status_code == 200, resp.content
    acks = QcAcknowledgement.objects.filter(task=task)
    assert acks.count() == 3 and {a.user for a in acks} == {mia} and {a.revision_number for a in acks} == {1}
    assert all(s["acknowledgement"]["user"] == "mia" for s in resp.json()["stale"])

    html = client.get("/releases/1.0.0/").content.decode()
    assert 'id="release-stale"' in html and "step 2 passes 0.5 literally; the gold holds" in html and "by mia" in html
    resp = client.post("/api/releases/1.0.0/publish/", {}, content_type="application/json")
    assert resp.status_code == 200, resp.content
    assert Task.objects.get(pk=task.pk).status == Task.Status.RELEASED
    # the published release's page still shows what went out acknowledged
    html = client.get("/releases/1.0.0/").content.decode()
    assert "step 2 passes 0.5 literally; the gold holds" in html and "input_data.post_image.pixel_size_m" in html
    # released: the refresh is refused like every other write
    with pytest.raises(TaskLockedError):
        refresh_derived(mia, Task.objects.get(pk=task.pk), expected_version=1)


@pytest.mark.django_db
def test_a_refreshed_replayed_and_repinned_task_publishes(make_user, client, django_assert_max_num_queries):
    from releases.services import lifecycle

    ada, mia = make_user("ada", "author"), make_user("mia", "maintainer")
    _event, task, release = _released_draft(client, ada, mia)
    with pytest.raises(StaleVersionError):
        refresh_derived(ada, task, expected_version=0)
    refresh_derived(ada, Task.objects.get(pk=task.pk), expected_version=1)  # approved: the refresh keeps the status
    task = Task.objects.get(pk=task.pk)
    assert task.status == Task.Status.APPROVED and task.version == 2
    # the draft still pins r1: still refused, naming the pinned revision
    with pytest.raises(lifecycle.ReleaseStaleError) as exc:
        lifecycle.publish_release(mia, release)
    assert f"{task.question_id} r1 input_data.pre_image.pixel_size_m" in str(exc.value)
    with pytest.raises(lifecycle.ReleaseError, match="no succeeded replay of its head revision"):
        lifecycle.update_release(mia, release, tasks=Task.objects.filter(pk=task.pk))
    _replayed(ada, task)
    lifecycle.update_release(mia, release, tasks=Task.objects.filter(pk=task.pk))
    # the pinned rows (only the fields the check reads), the acknowledgements, the event's layers
    with django_assert_max_num_queries(3):
        assert lifecycle.stale_items(release) == []
    lifecycle.publish_release(mia, release)
    assert Task.objects.get(pk=task.pk).status == Task.Status.RELEASED


@pytest.mark.browser
@pytest.mark.skipif(not os.path.exists("/usr/bin/chromium"), reason="Debian chromium is not installed")
@pytest.mark.django_db(transaction=True)
def test_the_task_page_refresh_button_in_chromium(live_server, browser, make_user):
    ada = make_user("ada", "author", password="ada-pass-1")
    mia = make_user("mia", "maintainer")
    event, post, task = florence_max_polygon_task(ada)
    for layer in event.layers.filter(kind="raster"):
        set_layer_georeferencing(mia, layer, gsd_m=0.5, reason=REASON)
    ctx = browser.new_context(viewport={"width": 1440, "height": 900})
    page = ctx.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    sign_in(page, live_server.url, "ada", "ada-pass-1")
    page.goto(f"{live_server.url}/tasks/{task.pk}/")
    qc_text = page.locator("ul.qc").text_content()
    assert "derived.manifest_stale" in qc_text and "input_data.post_image.pixel_size_m" in qc_text
    with page.expect_navigation():
        page.click("#refresh-derived")
    assert "r2 saved: refreshed derived values" in page.locator(".messages").text_content()
    assert page.locator("#refresh-derived").count() == 0
    assert "derived.manifest" not in (page.locator("section:has(h2:text('Quality control'))").text_content() or "")
    assert Task.objects.get(pk=task.pk).head.input_data["post_image"]["pixel_size_m"] == 0.5
    assert not errors, errors
    ctx.close()
