"""The review workflow, revisions, drafts and comments, through the API and services, on real data.

The task is DORA-style T2 on the Joplin tornado chips (../shared/realdata/xview2-deploy-joplin):
keep the damage polygons with ``dmg`` = 4 (destroyed), buffer them by 20 m, intersect the building
footprints with the buffers. Hand check with geopandas, independent of the studio's tools:
``damage.shp`` (EPSG:32615) has 399 polygons with dmg 4; ``bldg_polys.gpkg`` has 77 footprints
(EPSG:4326). Reprojected to EPSG:32615, ``bldg.intersects(unary_union(destroyed.buffer(20))).sum()``
is 60, so ``intersecting_a_count`` (footprints touching a buffer) = 60.
"""
from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied
from support.joplin import (
    T2_ANSWER,
    T2_QUESTION,
    T2_TRAJECTORY,
    import_joplin,
    t2_payload,
)
from support.joplin import (
    create_t2 as _create,
)
from support.joplin import (
    post_json as _post,
)

from annotation.models import AuditEvent, Task, TaskDraft
from annotation.services import review
from annotation.services import tasks as task_services


@pytest.fixture
def joplin(joplin_once):
    """The Joplin vectors, imported once for this module (support.joplin.joplin_once)."""
    return joplin_once


@pytest.fixture
def joplin_with_raster(joplin_once):
    """The module's Joplin event with the post chip imported too (the vectors again: unchanged)."""
    return import_joplin()


def _as(client, user):
    client.force_login(user)
    return client


def test_full_review_cycle_on_joplin(client, joplin, people):
    _as(client, people["ada"])
    task = _create(client, joplin)
    tid = task["id"]
    assert task["qc"] == [] and task["actions"] == ["submit"] and task["can_edit"] is True
    assert task["head"]["input_data"]["damage_data"] == {"path": "damage.geojson"}

    # submitting needs a replay of the head revision
    resp = _post(client, f"/api/tasks/{tid}/transitions/", {"action": "submit"})
    assert resp.status_code == 400 and "replay" in resp.json()["detail"]
    run = _post(client, f"/api/tasks/{tid}/replays/").json()
    assert run["status"] == "succeeded", run
    assert run["final_answer"] == {"intersecting_a_count": 60}  # see the module docstring
    resp = _post(client, f"/api/tasks/{tid}/transitions/", {"action": "submit"})
    assert resp.status_code == 200 and resp.json()["status"] == "submitted"
    # content is locked while a reviewer has it
    put = client.put(f"/api/tasks/{tid}/", {**t2_payload(joplin), "expected_version": 1}, content_type="application/json")
    assert put.status_code == 423 and put.json()["locked"] is True

    # the reviewer takes it, comments on step 1, returns it with a reason
    _as(client, people["rey"])
    assert _post(client, f"/api/tasks/{tid}/transitions/", {"action": "start_review"}).json()["status"] == "in_review"
    c = _post(client, f"/api/tasks/{tid}/comments/", {"body": "Use 25 m: the evacuation rule says 25.", "step_index": 1})
    assert c.status_code == 201 and c.json()["step_index"] == 1 and c.json()["revision_number"] == 1
    no_reason = _post(client, f"/api/tasks/{tid}/transitions/", {"action": "return", "reason": "  "})
    assert no_reason.status_code == 400 and "reason" in no_reason.json()["detail"]
    assert _post(client, f"/api/tasks/{tid}/transitions/",
                 {"action": "return", "reason": "Buffer distance, see step 1"}).json()["status"] == "returned"

    # the author sees the open comment, fixes the step, resolves, replays and resubmits
    _as(client, people["ada"])
    threads = client.get(f"/api/tasks/{tid}/comments/").json()["results"]
    assert [(t["step_index"], t["resolved"], t["author"]) for t in threads] == [(1, False, "rey")]
    reply = _post(client, f"/api/tasks/{tid}/comments/", {"body": "Done.", "parent": threads[0]["id"]})
    assert reply.status_code == 201 and reply.json()["parent"] == threads[0]["id"] and reply.json()["step_index"] == 1
    fixed = [dict(s) for s in T2_TRAJECTORY]
    fixed[1] = {"call": "vec.buffer", "args": {"vector_path": "<vector_path> from trajectory[0].obs", "meter": 25}}
    put = client.put(f"/api/tasks/{tid}/", {**t2_payload(joplin, trajectory=fixed), "expected_version": 1,
                                            "message": "buffer 25 m"}, content_type="application/json")
    assert put.status_code == 200 and put.json()["version"] == 2
    assert _post(client, f"/api/comments/{threads[0]['id']}/resolve/").json()["resolved"] is True
    assert _post(client, f"/api/tasks/{tid}/replays/").json()["status"] == "succeeded"
    assert _post(client, f"/api/tasks/{tid}/transitions/", {"action": "submit"}).json()["status"] == "submitted"

    # the author may not review or approve; the reviewer approves; the maintainer releases
    assert _post(client, f"/api/tasks/{tid}/transitions/", {"action": "start_review"}).status_code == 403
    _as(client, people["rey"])
    _post(client, f"/api/tasks/{tid}/transitions/", {"action": "start_review"})
    approved = _post(client, f"/api/tasks/{tid}/transitions/", {"action": "approve"}).json()
    assert approved["status"] == "approved" and approved["actions"] == ["return"]
    _as(client, people["max"])
    assert _post(client, f"/api/tasks/{tid}/transitions/", {"action": "release"}).json()["status"] == "released"
    put = client.put(f"/api/tasks/{tid}/", {**t2_payload(joplin), "expected_version": 2}, content_type="application/json")
    assert put.status_code == 423 and "released" in put.json()["detail"]

    audit = client.get(f"/api/tasks/{tid}/audit/").json()["results"]
    assert [(a["action"], a["actor"], a["revision_number"]) for a in audit] == [
        ("submit", "ada", 1), ("start_review", "rey", 1), ("return", "rey", 1), ("submit", "ada", 2),
        ("start_review", "rey", 2), ("approve", "rey", 2), ("release", "max", 2)]
    assert audit[2]["reason"] == "Buffer distance, see step 1"
    assert [(a["from_status"], a["to_status"]) for a in audit][:3] == [
        ("draft", "submitted"), ("submitted", "in_review"), ("in_review", "returned")]


def test_nobody_approves_their_own_task(joplin, people):
    ann = people["ann"]
    task = task_services.create_task(ann, joplin, dimension="t2", content={"question": "q", "trajectory": []})
    Task.objects.filter(pk=task.pk).update(status=Task.Status.SUBMITTED)
    task.refresh_from_db()
    with pytest.raises(PermissionDenied):
        review.start_review(ann, task)
    Task.objects.filter(pk=task.pk).update(status=Task.Status.IN_REVIEW)
    task.refresh_from_db()
    with pytest.raises(PermissionDenied):
        review.approve(ann, task)
    assert [t.name for t in review.available_transitions(ann, task)] == ["withdraw"]
    # another reviewer may; an author without the reviewer role may not
    with pytest.raises(PermissionDenied):
        review.approve(people["bob"], task)
    assert review.approve(people["rey"], task).status == "approved"
    assert AuditEvent.objects.filter(task=task).count() == 1  # refused attempts leave no event


def test_wrong_status_and_unknown_action(joplin, people):
    task = task_services.create_task(people["ada"], joplin, dimension="t2", content={"question": "q", "trajectory": []})
    with pytest.raises(review.TransitionError, match="only from in_review"):
        review.approve(people["rey"], task)
    with pytest.raises(review.TransitionError, match="not one of"):
        review.transition(people["rey"], task, "publish")


def test_withdraw_unlocks_editing(joplin, people):
    ada = people["ada"]
    task = task_services.create_task(ada, joplin, dimension="t2", content={"question": "q", "trajectory": []})
    Task.objects.filter(pk=task.pk).update(status=Task.Status.SUBMITTED)
    task.refresh_from_db()
    with pytest.raises(task_services.TaskLockedError):
        task_services.save_revision(ada, task, expected_version=1, content={"question": "q2"})
    with pytest.raises(PermissionDenied):
        review.withdraw(people["bob"], task)  # not bob's task
    review.withdraw(ada, task)
    assert task_services.save_revision(ada, task, expected_version=1, content={"question": "q2"}).number == 2


def test_revisions_diff_and_restore(client, joplin, people):
    _as(client, people["ada"])
    tid = _create(client, joplin)["id"]
    # r2: another question, step 1 buffers 30 m, a step inserted before the intersect, a new answer field
    traj = [dict(s) for s in T2_TRAJECTORY]
    traj[1] = {"call": "vec.buffer", "args": {"vector_path": "<vector_path> from trajectory[0].obs", "meter": 30}}
    traj.insert(2, {"call": "vec.convex_hull", "args": {"vector_path": "<buffer_path> from trajectory[1].obs"}})
    traj[3] = {"call": "vec.intersect", "args": {"vector_a_path": "bldg_polys.geojson",
                                                 "vector_b_path": "<buffer_path> from trajectory[1].obs"}}
    # the intersect is step 3 now and the hull returns vertex_count (a save with a
    # reference to the wrong step or an absent key is refused)
    answer = [{**T2_ANSWER[0], "source": "<intersecting_a_count> from trajectory[3].obs"},
              {"name": "buffers", "eval_type": "scalar_count", "source": "<vertex_count> from trajectory[2].obs"}]
    r = client.put(f"/api/tasks/{tid}/", {**t2_payload(joplin, question="Footprints near destroyed ones?",
                                                       trajectory=traj, answer_spec=answer),
                                          "expected_version": 1, "message": "30 m"}, content_type="application/json")
    assert r.status_code == 200, r.content
    revs = client.get(f"/api/tasks/{tid}/revisions/").json()["results"]
    assert [(x["number"], x["author"], x["message"]) for x in revs] == [(2, "ada", "30 m"), (1, "ada", "created")]

    d = client.get(f"/api/tasks/{tid}/diff/?a=1&b=2").json()
    assert d["changed"] is True
    assert d["fields"] == [{"key": "question", "change": "changed", "old": T2_QUESTION,
                            "new": "Footprints near destroyed ones?"}]
    assert [(s["op"], s["old_index"], s["new_index"]) for s in d["steps"]] == [
        ("equal", 0, 0), ("changed", 1, 1), ("added", None, 2), ("equal", 2, 3)]
    assert d["steps"][1]["args"] == [{"key": "meter", "change": "changed", "old": 20, "new": 30}]
    assert [(a["key"], a["change"]) for a in d["answer"]] == [("buffers", "added"), ("intersecting_a_count", "changed")]
    assert d["input_data"] == []
    # reversed order shows the opposite changes
    back = client.get(f"/api/tasks/{tid}/diff/?a=2&b=1").json()
    assert [(s["op"], s["old_index"], s["new_index"]) for s in back["steps"]][2] == ("removed", 2, None)

    # restoring r1 makes r3 with r1's content; a stale restore is refused and writes nothing
    assert _post(client, f"/api/tasks/{tid}/revisions/1/restore/", {"expected_version": 1}).status_code == 409
    res = _post(client, f"/api/tasks/{tid}/revisions/1/restore/", {"expected_version": 2})
    assert res.status_code == 200 and res.json()["version"] == 3
    assert res.json()["head"]["question"] == T2_QUESTION and res.json()["head"]["trajectory"] == T2_TRAJECTORY
    assert client.get(f"/api/tasks/{tid}/diff/?a=1&b=3").json()["changed"] is False
    assert client.get(f"/api/tasks/{tid}/revisions/").json()["results"][0]["message"] == "restored r1"
    assert client.get(f"/api/tasks/{tid}/diff/?a=1&b=9").status_code == 404


def test_stale_save_keeps_both_versions(client, joplin, people):
    _as(client, people["ada"])
    tid = _create(client, joplin)["id"]
    assert client.put(f"/api/tasks/{tid}/", {**t2_payload(joplin, question="Theirs"), "expected_version": 1},
                      content_type="application/json").status_code == 200
    stale = client.put(f"/api/tasks/{tid}/", {**t2_payload(joplin, question="Mine"), "expected_version": 1},
                       content_type="application/json")
    assert stale.status_code == 409
    body = stale.json()
    assert body["version"] == 2 and body["head"]["question"] == "Theirs" and "version 2" in body["detail"]
    assert Task.objects.get(pk=tid).revisions.count() == 2  # "Mine" was not written ...
    # ... and the editor keeps it as a draft while the user compares
    assert client.put(f"/api/tasks/{tid}/draft/", {"base_version": 1, "content": {"question": "Mine"}},
                      content_type="application/json").status_code == 200
    got = client.get(f"/api/tasks/{tid}/draft/").json()
    assert got["base_version"] == 1 and got["content"] == {"question": "Mine"}


def test_drafts_autosave_and_are_dropped_by_a_save(client, joplin, people):
    _as(client, people["ada"])
    tid = _create(client, joplin)["id"]
    assert client.get(f"/api/tasks/{tid}/draft/").status_code == 204
    client.put(f"/api/tasks/{tid}/draft/", {"base_version": 1, "content": {"question": "half-typed"}},
               content_type="application/json")
    client.put(f"/api/tasks/{tid}/draft/", {"base_version": 1, "content": {"question": "half-typed, more"}},
               content_type="application/json")
    assert TaskDraft.objects.filter(task_id=tid).count() == 1
    # another user's draft is separate, and bob may not even edit ada's task
    _as(client, people["bob"])
    assert client.get(f"/api/tasks/{tid}/draft/").status_code == 204
    assert client.put(f"/api/tasks/{tid}/draft/", {"base_version": 1, "content": {}},
                      content_type="application/json").status_code == 403
    _as(client, people["ada"])
    client.put(f"/api/tasks/{tid}/", {**t2_payload(joplin), "expected_version": 1}, content_type="application/json")
    assert client.get(f"/api/tasks/{tid}/draft/").status_code == 204


def test_comments_pins_threads_and_permissions(client, joplin, people):
    _as(client, people["ada"])
    tid = _create(client, joplin)["id"]
    _as(client, people["rey"])
    bad_step = _post(client, f"/api/tasks/{tid}/comments/", {"body": "x", "step_index": 3})
    assert bad_step.status_code == 400 and "step_index" in bad_step.json()["detail"]
    bad_loc = _post(client, f"/api/tasks/{tid}/comments/", {"body": "x", "location": {"frame": "utm", "x": 1, "y": 2}})
    assert bad_loc.status_code == 400 and "location.frame" in bad_loc.json()["detail"]
    assert _post(client, f"/api/tasks/{tid}/comments/", {"body": " "}).status_code == 400
    pin = _post(client, f"/api/tasks/{tid}/comments/",
                {"body": "This footprint is a garage", "location": {"frame": "geographic", "x": -94.4962, "y": 37.0722}})
    assert pin.json()["location"] == {"frame": "geographic", "x": -94.4962, "y": 37.0722}
    root = pin.json()["id"]
    _post(client, f"/api/tasks/{tid}/comments/", {"body": "answer field too", "answer_field": "intersecting_a_count"})
    # bob is an author but not of this task: he can neither comment nor resolve
    _as(client, people["bob"])
    assert _post(client, f"/api/tasks/{tid}/comments/", {"body": "drive-by"}).status_code == 403
    assert _post(client, f"/api/comments/{root}/resolve/").status_code == 403
    # the task's author resolves; a reply reopens the thread
    _as(client, people["ada"])
    assert _post(client, f"/api/comments/{root}/resolve/").json()["resolved"] is True
    _as(client, people["rey"])
    r = _post(client, f"/api/tasks/{tid}/comments/", {"body": "still wrong", "parent": root})
    threads = client.get(f"/api/tasks/{tid}/comments/").json()["results"]
    assert [(t["id"], t["resolved"], [x["body"] for x in t["replies"]]) for t in threads] == [
        (root, False, ["still wrong"]), (root + 1, False, [])]
    # a reply to a reply joins the first comment's thread
    _post(client, f"/api/tasks/{tid}/comments/", {"body": "deeper", "parent": r.json()["id"]})
    assert [x["body"] for x in client.get(f"/api/tasks/{tid}/comments/").json()["results"][0]["replies"]] == ["still wrong", "deeper"]


def test_temporal_images_nest_in_input_data(joplin_with_raster, people):
    joplin = joplin_with_raster
    layers = {l.file_name: l for l in joplin.layers.all()}
    data = task_services.build_input_data(joplin, {"temporal_images.t1": layers["output_chips_post_0_post.tif"].pk,
                                                   "poi_data": layers["bldg_polys.geojson"].pk},
                                          base={"temporal_images": {"t0": {"image_path": "kept.tif"}}})
    assert sorted(data["temporal_images"]) == ["t0", "t1"]
    assert data["temporal_images"]["t1"]["image_path"] == "output_chips_post_0_post.tif"
    # GSD of the Joplin post chip: 0.6 x 0.674 m pixels (SOURCE.md); the importer stores their geometric mean
    assert data["temporal_images"]["t1"]["pixel_size_m"] == pytest.approx((0.6 * 0.674) ** 0.5, abs=2e-3)
    assert data["poi_data"] == {"path": "bldg_polys.geojson"}
    with pytest.raises(ValueError, match=r"input_data\.temporal_images\.: a key needs a name"):
        task_services.build_input_data(joplin, {"temporal_images.": layers["bldg_polys.geojson"].pk})
