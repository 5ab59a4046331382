"""replay --task --against FILE: a replay of an imported benchmark task against the observations
the task file recorded.

The task file is made by hand. Its recorded observations are what the benchmark's tools return
on the Florence tile, worked out from their documented behaviour (dora/tools/vis.py at 7b96988):
vis.overlay_mask lists the non-zero values of the mask, ascending, and echoes class_labels ({}
when absent). The damage mask both sides overlay is in the benchmark's 3-class convention
(1 intact, 2 partially damaged, 3 totally destroyed): the Florence GT mask holds the xBD codes
0, 3 (major) and 4 (destroyed), counted once with numpy, which are 2 and 3 there, so [2, 3]; vis.pie_chart
echoes its data with float values; file names are the benchmark's absolute temp paths, which
the diff does not compare. The perception step's recorded observation came from a model
(another mask name, the model's class names), so it differs only by source.
"""
from __future__ import annotations

import json

import pytest
from support.florence import POST, PRE
from support.replay import TMP, benchmark_task_file, run_cmd


@pytest.fixture
def florence(florence_with_root):
    """The Florence event; the management commands run as the superuser root
    (:func:`support.florence.florence_with_root`)."""
    return florence_with_root


def task_file(tmp_path, classes_present=(2, 3)):
    traj = [
        {"call": "seg_building_damage(pre_image_path, post_image_path)",
         "args": {"pre_image_path": PRE, "post_image_path": POST},
         "obs": {"tool": "seg.building_damage", "mask_path": f"{TMP}/building_damage_3b1f.png",
                 "classes": {"1": "no-damage", "2": "minor-damage", "3": "major-damage",
                             "4": "destroyed"}, "model": "dora-damage-v1"}},
        {"call": "vis.overlay_mask",
         "args": {"image_path": POST, "mask_path": "<mask_path> from trajectory[0].obs"},
         "obs": {"tool": "vis.overlay_mask", "output_path": f"{TMP}/overlay_mask_08f7f285.png",
                 "classes_present": list(classes_present), "class_labels": {}}},
        {"call": "vis.pie_chart", "args": {"data": {"major": 3, "destroyed": 4}},
         "obs": {"tool": "vis.pie_chart", "output_path": f"{TMP}/pie_chart_fb90972c.png",
                 "chart_type": "pie", "statistics": {"major": 3.0, "destroyed": 4.0},
                 "title": "Pie Chart"}},
    ]
    sample = {"sample_id": "flo_0002", "disaster_type": "hurricane",
              "input_data": {"pre_image": {"image_path": PRE, "pixel_size_m": 0.5},
                             "post_image": {"image_path": POST, "pixel_size_m": 0.5}},
              "tasks": [{"task_category": "perception_and_assessment", "task_category_code": "T1",
                         "question": "Which damage classes does the overlay show?",
                         "tools": ["seg.building_damage", "vis.overlay_mask", "vis.pie_chart"],
                         "trajectory": traj,
                         "final_answer": {"chart": "pie"}, "eval_spec": {"chart": "exact_match"}}]}
    p = tmp_path / "t1_perception_and_assessment.json"
    p.write_text(json.dumps([sample]), encoding="utf-8")
    return p


def test_replay_against_recorded_observations(florence, tmp_path):
    path = task_file(tmp_path)
    run_cmd("import_tasks", str(path), "--event", florence.slug)
    text, code = run_cmd("replay", "--task", "flo_0002_task0", "--against", str(path), "--json")
    out = json.loads(text)
    assert out["status"] == "succeeded" and code == 0
    diff = out["recorded_diff"]
    states = [(r["call"], r["state"]) for r in diff["steps"]]
    # the perception step differs by source only; the vis steps give the recorded observations
    assert states == [("seg.building_damage", "source"), ("vis.overlay_mask", "same"),
                      ("vis.pie_chart", "same")]
    assert "GT perception" in diff["steps"][0]["note"] and diff["changed"] is False
    # file names are not compared: the recorded absolute paths vs the studio's hashed names
    assert all(not c["path"].endswith("_path") for r in diff["steps"] for c in r["changes"])
    text, code = run_cmd("replay", "--task", "flo_0002_task0", "--against", str(path))
    assert "no gold diff for non-perception steps" in text and code == 0


def test_a_disagreeing_tool_step_is_a_gold_diff(florence, tmp_path):
    # recorded classes_present [2] where the benchmark's overlay lists [2, 3]: a tool
    # disagreement, reported with its path, exit status 2
    good = task_file(tmp_path)
    run_cmd("import_tasks", str(good), "--event", florence.slug)
    bad = tmp_path / "bad"
    bad.mkdir()
    text, code = run_cmd("replay", "--task", "flo_0002_task0", "--against",
                         str(task_file(bad, classes_present=(2,))), "--json")
    diff = json.loads(text)["recorded_diff"]
    row = diff["steps"][1]
    assert row["state"] == "changed" and diff["changed"] is True and code == 2
    assert row["changes"] == [{"path": "classes_present[1]", "before": None, "after": 3}]


# ---- the observations kept on an imported revision (no --against) ---------------------------------
#
# A benchmark-layout task file whose recorded observations are the benchmark's own: steps 1-3 are
# calls of ../shared/tool-examples/cases.jsonl on the Florence tile (ras.grid_windows on its mask,
# vis.add_map_elements on its post image, vis.pie_chart), each with the observation the benchmark's
# tool servers returned (cases.jsonl "expected", dora/tools/calculate.py and vis.py at 7b96988).
# Step 0 is the perception step, whose observation a model gave (hand-written: another mask name,
# the model's class names), so it differs only by the GT/model source. The file is
# support.replay.benchmark_task_file.


def test_replay_of_an_imported_task_diffs_against_its_own_recorded_observations(florence, tmp_path):
    run_cmd("import_tasks", str(benchmark_task_file(tmp_path)), "--event", florence.slug)
    text, code = run_cmd("replay", "--task", "flo_0003_task0", "--json")
    out = json.loads(text)
    assert out["status"] == "succeeded", out["error"]
    diff = out["recorded_diff"]
    # no --against: the file the task was imported from, kept on the revision
    assert diff["against"] == "t1_perception_and_assessment.json"
    assert [(r["call"], r["state"]) for r in diff["steps"]] == [
        ("seg.building_damage", "source"), ("ras.grid_windows", "same"),
        ("vis.add_map_elements", "same"), ("vis.pie_chart", "same")]
    assert "GT perception" in diff["steps"][0]["note"] and diff["changed"] is False and code == 0
    text, code = run_cmd("replay", "--task", "flo_0003_task0")
    assert "against the observations recorded in t1_perception_and_assessment.json" in text
    assert "no gold diff for non-perception steps" in text and code == 0


def test_a_recorded_tool_observation_the_replay_does_not_give_exits_2(florence, tmp_path):
    # the file records 8 windows where the benchmark's ras.grid_windows gives 9 for n=3 (cases.jsonl)
    def edit(traj):
        traj[1]["obs"]["count"] = 8
    run_cmd("import_tasks", str(benchmark_task_file(tmp_path, edit)), "--event", florence.slug)
    text, code = run_cmd("replay", "--task", "flo_0003_task0", "--json")
    diff = json.loads(text)["recorded_diff"]
    assert code == 2 and diff["changed"] is True
    assert diff["steps"][1]["state"] == "changed"
    assert diff["steps"][1]["changes"] == [{"path": "count", "before": 8, "after": 9}]
    assert [r["state"] for r in diff["steps"][2:]] == ["same", "same"]


def test_an_edited_plan_is_not_compared_with_the_imported_observations(florence, tmp_path):
    from django.contrib.auth import get_user_model

    from annotation.models import Task
    from annotation.services.tasks import save_revision

    run_cmd("import_tasks", str(benchmark_task_file(tmp_path)), "--event", florence.slug)
    task = Task.objects.get(question_id="flo_0003_task0")
    traj = [dict(s) for s in task.head.trajectory]
    traj[3] = {**traj[3], "args": {"data": {"intact": 11, "damaged": 5}}}
    save_revision(get_user_model().objects.get(username="root"), task, expected_version=task.version,
                  content={"trajectory": traj}, message="edited the chart")
    text, code = run_cmd("replay", "--task", "flo_0003_task0", "--json")
    out = json.loads(text)
    # the file's observations belong to the imported plan, not this one: nothing to diff against
    assert out["status"] == "succeeded" and "recorded_diff" not in out and code == 0


def test_task_page_replay_panel_shows_the_recorded_diff(florence, tmp_path, client):
    from django.contrib.auth import get_user_model

    from annotation.models import Task

    run_cmd("import_tasks", str(benchmark_task_file(tmp_path)), "--event", florence.slug)
    run_cmd("replay", "--task", "flo_0003_task0")
    task = Task.objects.get(question_id="flo_0003_task0")
    client.force_login(get_user_model().objects.get(username="root"))
    html = client.get(f"/tasks/{task.pk}/replay-diff/").content.decode()
    assert "Against the observations recorded in t1_perception_and_assessment.json" in html
    assert "no gold diff for non-perception steps" in html
    assert "perception source: the studio replayed this step with GT perception" in html
    api = client.get(f"/api/tasks/{task.pk}/replay-diff/").json()
    assert [r["state"] for r in api["recorded"]["steps"]] == ["source", "same", "same", "same"]
