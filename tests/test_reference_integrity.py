"""Reference integrity in the services and the API, and one QC everywhere.

The task is the Joplin T2 of tests/test_review_workflow.py (filter → buffer → intersect, answer
bound to ``<intersecting_a_count> from trajectory[2].obs``). Each broken variant below is what an
editor that edits references as strings produced in the authoring walk-through; the expected locations
are worked out by hand from the trajectory.
"""
from __future__ import annotations

import copy
import io
import json

import pytest
from django.core.management import call_command
from support.joplin import T2_ANSWER, T2_TRAJECTORY, t2_payload

from annotation.models import Task, TaskRevision
from annotation.services import tasks as task_services


@pytest.fixture
def joplin(joplin_once):
    """The Joplin vectors, imported once for this module (support.joplin.joplin_once)."""
    return joplin_once


def _content(event, trajectory=None, answer=None):
    p = t2_payload(event)
    return {"question": p["question"], "task_category": "spatial_relation", "task_category_code": "T2",
            "input_data": task_services.build_input_data(event, p["input_layers"]),
            "trajectory": trajectory if trajectory is not None else copy.deepcopy(T2_TRAJECTORY),
            "answer_spec": answer if answer is not None else copy.deepcopy(T2_ANSWER)}


def test_delete_then_stale_index_is_refused_with_its_location(joplin, make_user):
    """Step 1 (vec.buffer) deleted while the intersect still reads trajectory[1]: after the
    deletion trajectory[1] is the intersect itself, a reference to the same step (order)."""
    ada = make_user("ada", "author")
    task = task_services.create_task(ada, joplin, dimension="t2", content=_content(joplin))
    broken = copy.deepcopy(T2_TRAJECTORY)
    del broken[1]  # [filter, intersect(vector_b_path=<buffer_path> from trajectory[1].obs)]
    with pytest.raises(task_services.BrokenReferenceError) as exc:
        task_services.save_revision(ada, task, expected_version=1, content={"trajectory": broken})
    locations = {f.location for f in exc.value.findings}
    # the intersect (now step 1) reads step 1 (itself); the answer reads step 2, which no longer exists
    assert locations == {"trajectory[1].args.vector_b_path", "answer_spec[0].source"}, locations
    task.refresh_from_db()
    assert task.version == 1 and TaskRevision.objects.filter(task=task).count() == 1  # nothing written


def test_reference_to_a_deleted_step_is_refused(joplin, make_user):
    """The editor writes ``trajectory[deleted]`` for a reference whose step was removed."""
    ada = make_user("ada", "author")
    answer = copy.deepcopy(T2_ANSWER)
    answer[0]["source"] = "<intersecting_a_count> from trajectory[deleted].obs"
    with pytest.raises(task_services.BrokenReferenceError) as exc:
        task_services.create_task(ada, joplin, dimension="t2", content=_content(joplin, answer=answer))
    assert [(f.check, f.location) for f in exc.value.findings] == [("references.malformed", "answer_spec[0].source")]
    assert Task.objects.count() == 0


def test_changed_tool_without_the_key_is_refused(joplin, make_user, client):
    """Step 2 changed from vec.intersect to vec.buffer: buffer returns no intersecting_a_count."""
    ada = make_user("ada", "author")
    client.force_login(ada)
    tid = client.post("/api/tasks/", t2_payload(joplin), content_type="application/json").json()["id"]
    traj = copy.deepcopy(T2_TRAJECTORY)
    traj[2] = {"call": "vec.buffer", "args": {"vector_path": "<buffer_path> from trajectory[1].obs", "meter": 5}}
    resp = client.put(f"/api/tasks/{tid}/", {**t2_payload(joplin, trajectory=traj), "expected_version": 1},
                      content_type="application/json")
    assert resp.status_code == 400
    body = resp.json()
    assert [(f["check"], f["location"]) for f in body["qc"]] == [("references.key", "answer_spec[0].source")]
    assert "answer_spec[0].source" in body["detail"]
    assert Task.objects.get(pk=tid).version == 1


def test_the_good_task_saves(joplin, make_user):
    ada = make_user("ada", "author")
    task = task_services.create_task(ada, joplin, dimension="t2", content=_content(joplin))
    rev = task_services.save_revision(ada, task, expected_version=1, content={"question": "Count them."})
    assert rev.number == 2


def _canon(findings):
    return sorted((f["check"], f["severity"], f["location"], f["message"]) for f in findings)


def test_task_page_editor_api_and_manage_qc_show_the_same_findings(joplin, make_user, client):
    """One QC: the task page, ``POST /api/qc/`` (the editor's live QC), the task API's ``qc`` and
    ``manage.py qc --task`` list the same findings for the same revision. The revision has an unused
    step (a warning) hand-built so that
    the list is not empty: step 3 (vec.length of the buffer) is used by nothing → hygiene.unused_step."""
    ada = make_user("ada", "author")
    client.force_login(ada)
    traj = copy.deepcopy(T2_TRAJECTORY) + [{"call": "vec.length", "args": {"vector_path": "<buffer_path> from trajectory[1].obs"}}]
    resp = client.post("/api/tasks/", t2_payload(joplin, trajectory=traj), content_type="application/json")
    assert resp.status_code == 201, resp.content
    tid, qid = resp.json()["id"], resp.json()["question_id"]
    page = client.get(f"/tasks/{tid}/")
    on_page = [f.as_dict() for f in page.context["qc"]]
    assert ("hygiene.unused_step", "trajectory[3]") in {(f["check"], f["location"]) for f in on_page}
    editor = client.post("/api/qc/", {"task": tid}, content_type="application/json").json()
    assert editor["version"] == 1
    api = client.get(f"/api/tasks/{tid}/").json()["qc"]
    out = io.StringIO()
    try:
        call_command("qc", "--task", qid, "--json", stdout=out)
    except SystemExit:  # exits 1 when a finding is an error
        pass
    cli = json.loads(out.getvalue())["tasks"][0]["findings"]
    assert _canon(on_page) == _canon(editor["findings"]) == _canon(api) == _canon(cli)
    # unsaved content with the unused step removed: the warning goes, as it will after the save
    unsaved = client.post("/api/qc/", {"task": tid, "content": t2_payload(joplin)}, content_type="application/json").json()
    assert unsaved["version"] is None
    assert "hygiene.unused_step" not in {f["check"] for f in unsaved["findings"]}


def test_qc_api_takes_the_fields_a_task_edit_leaves_out_from_the_head(joplin, make_user, client):
    """``POST /api/qc/`` with a task and partial content checks the head with those fields changed,
    as a save merges them (``annotation.services.qc.qc_for_content``): a question alone keeps the
    head's trajectory and answer, so the findings equal the head's (nothing about an empty
    trajectory or eval_spec), where a missing trajectory used to be read as ``[]``."""
    ada = make_user("ada", "author")
    client.force_login(ada)
    resp = client.post("/api/tasks/", t2_payload(joplin), content_type="application/json")
    assert resp.status_code == 201, resp.content
    tid = resp.json()["id"]
    head = client.post("/api/qc/", {"task": tid}, content_type="application/json").json()["findings"]
    partial = client.post("/api/qc/", {"task": tid, "content": {"question": t2_payload(joplin)["question"]}},
                          content_type="application/json").json()["findings"]
    assert _canon(partial) == _canon(head)
    assert not {"structure.trajectory", "eval_spec.empty"} & {f["check"] for f in partial}
    # the field given is the one checked: an empty question is reported on top of the head's findings
    blank = client.post("/api/qc/", {"task": tid, "content": {"question": ""}}, content_type="application/json").json()
    assert {f["check"] for f in blank["findings"]} - {f["check"] for f in head} == {"structure.question"}


def test_qc_api_names_bad_input(joplin, make_user, client):
    client.force_login(make_user("ada", "author"))
    assert client.post("/api/qc/", {}, content_type="application/json").status_code == 400
    resp = client.post("/api/qc/", {"event": joplin.slug, "content": {"question": "x", "trajectory": "vec.buffer"}},
                       content_type="application/json")
    assert resp.status_code == 400 and "trajectory" in resp.json()["content"]
    # unfinished content is checked, not refused: QC names what is missing
    resp = client.post("/api/qc/", {"event": joplin.slug, "content": {"question": ""}}, content_type="application/json")
    checks = {f["check"] for f in resp.json()["findings"]}
    assert resp.status_code == 200 and {"structure.question", "structure.trajectory", "eval_spec.empty"} <= checks
