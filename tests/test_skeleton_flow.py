"""The skeleton's path through the API and services on real data (no browser).

Hand-worked values:
- Florence mask (``hurricane-florence_00000018_mask.png``): value 3 (major) on 26,492 px and 4
  (destroyed) on 274 px (np.unique; its SOURCE.md lists the values {0, 3, 4}). In the damage
  tools' convention major → 2 and destroyed → 3, so count_pixels([2, 3]) totals 26,766, and
  vectorising class 3 yields 5 regions — the folder's damage_statistics.csv counts 5 destroyed
  buildings.
- Demo agent run (fixtures/demo_run): T1 predicts 9 destroyed (gold 5: |9−5| = 4 > 1 + 0.2·5 = 2,
  fails) and 26,766 pixels (passes): task score 0.5; T2 predicts 77 and 30,112.5 against gold 60
  and ≈14,223 (both outside 1 + 0.2·g): 0. DORA score = mean(0.5, 0) = 0.25. T1 trajectory:
  same three tools in order (t_any = t_ord = t_em = eff = 1); arguments 2/2, 1/2 (classes
  [2, 3] vs [3]) and 2/2 → par_acc = 2.5/3.
"""
from __future__ import annotations

import json

import pytest
from conftest import needs_demo_data, needs_shared
from django.core.management import call_command

from annotation.models import Task
from evaluation.models import RunRecord
from evaluation.scoring import evaluate_sanity

FLORENCE_PRE = "hurricane-florence_00000018_pre_original.png"
FLORENCE_POST = "hurricane-florence_00000018_post_original.png"


def _task_payload(**over):
    data = {
        "event": "hurricane-florence", "dimension": "t1",
        "question": "How many pixels show partially damaged or destroyed buildings?",
        "input_layers": {},
        "trajectory": [
            {"call": "seg.building_damage", "args": {"pre_image_path": FLORENCE_PRE, "post_image_path": FLORENCE_POST}},
            {"call": "ras.count_pixels", "args": {"mask_path": "<mask_path> from trajectory[0].obs", "classes": [2, 3]}},
        ],
        "answer_spec": [{"name": "damaged_pixels", "eval_type": "scalar_count", "source": "<total> from trajectory[1].obs"}],
    }
    data.update(over)
    return data


@pytest.fixture
def author_client(client, make_user):
    user = make_user("ada", "author")
    client.force_login(user)
    return client


def test_tool_catalogue_is_served(author_client):
    tools = author_client.get("/api/tools/").json()
    names = {t["name"] for t in tools}
    assert {"seg.building_damage", "ras.count_pixels", "vec.buffer", "calc.div"} <= names


def test_create_replay_and_conflict(author_client, florence):
    pre = florence.layers.get(file_name=FLORENCE_PRE)
    post = florence.layers.get(file_name=FLORENCE_POST)
    resp = author_client.post("/api/tasks/", _task_payload(input_layers={"pre_image": pre.pk, "post_image": post.pk}),
                              content_type="application/json")
    assert resp.status_code == 201, resp.content
    task = resp.json()
    assert task["qc"] == [] and task["version"] == 1
    assert task["head"]["input_data"]["post_image"]["image_path"] == FLORENCE_POST

    run = author_client.post(f"/api/tasks/{task['id']}/replays/", {}, content_type="application/json").json()
    assert run["status"] == "succeeded", run
    assert run["final_answer"] == {"damaged_pixels": 26766}
    assert [s["status"] for s in run["steps"]] == ["succeeded", "succeeded"]
    # determinism: a second replay gives the same hash
    again = author_client.post(f"/api/tasks/{task['id']}/replays/", {}, content_type="application/json").json()
    assert again["replay_hash"] == run["replay_hash"] and len(run["replay_hash"]) == 64

    # an edit on the current version makes revision 2; a stale one gets 409 with the head
    edit = _task_payload(question="Damaged pixels?", expected_version=1)
    assert author_client.put(f"/api/tasks/{task['id']}/", edit, content_type="application/json").status_code == 200
    stale = author_client.put(f"/api/tasks/{task['id']}/", _task_payload(question="Mine", expected_version=1),
                              content_type="application/json")
    assert stale.status_code == 409
    assert stale.json()["head"]["question"] == "Damaged pixels?" and stale.json()["version"] == 2
    assert Task.objects.get(pk=task["id"]).revisions.count() == 2


def test_failure_stops_and_skips(author_client, florence):
    bad = _task_payload(trajectory=[
        {"call": "ras.count_pixels", "args": {"mask_path": "no-such-file.tif", "classes": [1]}},
        {"call": "calc.div", "args": {"a": 1, "b": 2}},
    ], answer_spec=[{"name": "x", "eval_type": "scalar_count", "source": "<ratio> from trajectory[1].obs"}])
    task = author_client.post("/api/tasks/", bad, content_type="application/json").json()
    run = author_client.post(f"/api/tasks/{task['id']}/replays/", {}, content_type="application/json").json()
    assert run["status"] == "failed"
    assert [s["status"] for s in run["steps"]] == ["failed", "skipped"]
    assert "no-such-file.tif" in run["error"]


def test_qc_blocks_submission(author_client, florence):
    payload = _task_payload(answer_spec=[{"name": "n", "eval_type": "scalar_kount", "source": "<total> from trajectory[1].obs"}])
    task = author_client.post("/api/tasks/", payload, content_type="application/json").json()
    # the task API returns the submit gate's full suite (one QC everywhere), which also
    # sees the trajectory's files that input_data does not declare
    assert "eval_spec.unknown_type" in [f["check"] for f in task["qc"] if f["severity"] == "error"]
    resp = author_client.post(f"/api/tasks/{task['id']}/submit/")
    assert resp.status_code == 400 and "scalar_kount" in resp.json()["detail"]


def test_scorer_cannot_author(client, make_user, florence):
    client.force_login(make_user("sam", "scorer"))
    assert client.post("/api/tasks/", _task_payload(), content_type="application/json").status_code == 403


def test_anonymous_api_and_pages_are_refused(client):
    assert client.get("/api/tasks/").status_code in (401, 403)
    assert client.get("/tasks/").status_code == 302


@pytest.mark.django_db
def test_demo_tasks_export_and_agent_run(tmp_path, client, make_user):
    """The demo command end to end, then the export in the benchmark's layout scores 1.0 against
    itself, and the example agent run scores as worked out in the module docstring."""
    needs_demo_data()
    call_command("demo", "--skip-osm", stdout=open(tmp_path / "demo.log", "w"))
    out = tmp_path / "release"
    call_command("export_tasks", "--out", str(out), stdout=open(tmp_path / "export.log", "w"))
    t1 = json.loads((out / "tasks" / "t1_perception_and_assessment.json").read_text())
    gold = t1[0]["tasks"][0]
    assert gold["final_answer"] == {"destroyed_building_count": 5, "damaged_pixels": 26766}
    assert gold["eval_spec"] == {"destroyed_building_count": "scalar_count", "damaged_pixels": "scalar_count"}
    assert [s["call"] for s in gold["trajectory"]] == ["seg.building_damage", "ras.vectorize", "ras.count_pixels"]
    sanity = evaluate_sanity(out / "tasks")
    assert sanity["dora_score"] == 1.0
    # the benchmark's layout: every input file a sample names is shipped under images/
    from kernel.inputs import data_paths

    named = {p for f in (out / "tasks").glob("t*.json") for s in json.loads(f.read_text())
             for p in data_paths(s.get("input_data") or {})}
    assert named and all((out / "images" / p).is_file() for p in named), sorted(named)

    rec = RunRecord.objects.get(question_id="hurricane-florence_demo01_task0")
    assert rec.run.dora_score == 0.25
    assert rec.task_score == 0.5 and rec.field_scores == {"destroyed_building_count": 0.0, "damaged_pixels": 1.0}
    assert (rec.t_any, rec.t_ord, rec.t_em, rec.eff) == (1.0, 1.0, 1.0, 1.0)
    assert rec.par_acc == pytest.approx(2.5 / 3, abs=1e-6)
    assert RunRecord.objects.get(question_id="joplin-tornado_demo01_task0").task_score == 0.0

    # a scorer's verdict: correctness follows the flags; overriding it needs a reason
    client.force_login(make_user("sam", "scorer"))
    url = f"/api/records/{rec.pk}/verdicts/"
    flags = {"E1": False, "E2": False, "E3": False, "E4": False, "E5": True, "E6": False}
    v = client.post(url, {"errors": flags, "grade": 0.6, "reasons": {"E5": "step 1 vectorises [2, 3]"}},
                    content_type="application/json")
    assert v.status_code == 201 and v.json()["is_correct"] is False
    bad = client.post(url, {"errors": flags, "grade": 0.6, "is_correct": True}, content_type="application/json")
    assert bad.status_code == 400
    assert client.post(url, {"errors": flags, "grade": 0.5}, content_type="application/json").status_code == 400
    page = client.get(f"/records/{rec.pk}/")
    # the record page loads the verdict just given into the form, the per-flag note included
    # (it used to hide the notes the adjudication page shows)
    assert page.status_code == 200 and b'name="reason-E5" value="step 1 vectorises [2, 3]"' in page.content
    assert b"E5" in page.content


@pytest.mark.django_db
def test_import_runs_against_a_task_folder_matches_the_official_evaluator(tmp_path, make_user, client):
    """A run scored against benchmark-format task files stores the official evaluator's numbers
    (../shared/scoring-examples/expected/agent_a.eval.json) and its pages render."""
    from conftest import SCORING_EXAMPLES

    user = make_user("max", "maintainer")
    call_command("import_runs", str(needs_shared(SCORING_EXAMPLES / "runs" / "agent_a")), "--agent", "agent_a",
                 "--tasks-dir", str(needs_shared(SCORING_EXAMPLES / "tasks")), "--as-user", "max", stdout=open(tmp_path / "o", "w"))
    expected = json.loads(needs_shared(SCORING_EXAMPLES / "expected" / "agent_a.eval.json").read_text())
    from evaluation.models import AgentRun

    run = AgentRun.objects.get(agent__name="agent_a")
    assert run.dora_score == expected["dora_score"]
    for _dim, block in expected["full"].items():
        for t in block["tasks"]:
            rec = RunRecord.objects.get(run=run, question_id=f"{t['sample_id']}_task{t['task_idx']}")
            assert rec.task_score == t["task_score"] and rec.field_scores == t["field_scores"]
            assert (rec.t_any, rec.t_ord, rec.t_em, rec.par_acc, rec.eff) == (t["t_any"], t["t_ord"], t["t_em"], t["par_acc"], t["eff"])
    client.force_login(user)
    assert client.get(f"/runs/{run.pk}/").status_code == 200
    assert client.get(f"/records/{rec.pk}/").status_code == 200
    assert client.get("/leaderboard/").status_code == 200
