"""manage.py import_tasks, replay (--task / --all / --changed-only) and gold_baseline.

Hand-worked values: the Florence tile as in test_replay_services (damaged area 6,691.5 m²);
the loop task multiplies items 1, 2, 3 by 10 and reduces to the largest product, 30.
"""
from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from support.florence import POST, PRE

from annotation.models import Task
from evaluation.models import AgentRun


@pytest.fixture
def florence(florence_with_root):
    """The Florence event; the management commands run as the superuser root
    (:func:`support.florence.florence_with_root`)."""
    return florence_with_root


def task_file(tmp_path, *, pre=f"florence/{PRE}", extra_task=None):
    sample = {
        "sample_id": "flo_0001", "disaster_type": "flood",
        "input_data": {"pre_image": {"image_path": pre, "pixel_size_m": 0.5},
                       "post_image": {"image_path": POST, "pixel_size_m": 0.5}},
        "tasks": [
            {"task_category": "perception_and_assessment", "task_category_code": "T1",
             "question": "What area do damaged buildings cover?",
             "tools": ["seg.building_damage", "ras.area"],
             "trajectory": [
                 {"call": "seg_building_damage(pre_image_path, post_image_path)",
                  "args": {"pre_image_path": PRE, "post_image_path": POST},
                  "obs": {"tool": "seg.building_damage", "mask_path": "m.png"}},
                 {"call": "ras.area", "args": {"mask_path": "<mask_path> from trajectory[0].obs",
                                               "pixel_size_m": 0.5, "classes": [2, 3]},
                  "obs": {"tool": "ras.area", "area_m2": 6691.5, "pixel_count": 26766, "pixel_size_m": 0.5}}],
             "final_answer": {"damaged_area_m2": 6691.5, "unit": "m2"},
             "eval_spec": {"damaged_area_m2": "scalar_continuous", "unit": "exact_match"},
             "answer_format": {"damaged_area_m2": "square metres"}},
            {"task_category": "perception_and_assessment", "task_category_code": "T1",
             "question": "Largest product?", "tools": [],
             # stored form: the wrapper, its 3 expanded calls, then a reduce that points at the
             # wrapper's stored index (1)
             "trajectory": [
                 # complete observations as the benchmark's tools return them (calc.add echoes a and
                 # b as floats; a loop item's last_obs is the nested call's whole observation; reduce
                 # gives best_item and mode): `replay --task` compares them
                 {"call": "calc.add", "args": {"a": 0, "b": 10}, "obs": {"tool": "calc.add", "sum": 10.0, "a": 0.0, "b": 10.0}},
                 {"call": "tool.loop", "args": {"loop_over": [1, 2, 3], "calls": [
                     {"call": "calc.mul", "args": {"a": "<item.value>", "b": "<sum> from trajectory[0].obs"}}]},
                  "obs": [{"item": {"value": v}, "last_obs": {"tool": "calc.mul", "product": 10.0 * v, "a": float(v), "b": 10.0}}
                          for v in (1, 2, 3)]},
                 *[{"call": "calc.mul", "args": {"a": v, "b": 10.0}, "obs": {"product": 10.0 * v}} for v in (1, 2, 3)],
                 {"call": "tool.reduce", "args": {"values": "<results> from trajectory[1].obs",
                                                  "field": "last_obs.product"},
                  "obs": {"tool": "tool.reduce", "best_value": 30.0, "best_index": 2, "mode": "max",
                          "best_item": {"item": {"value": 3},
                                        "last_obs": {"tool": "calc.mul", "product": 30.0, "a": 3.0, "b": 10.0}}}},
                 {"call": "calc.add", "args": {"a": "<best_value> from trajectory[5].obs", "b": 0},
                  "obs": {"tool": "calc.add", "sum": 30.0, "a": 30.0, "b": 0.0}}],
             "final_answer": {"best": 30.0},
             "eval_spec": {"best": "scalar_continuous"}},
        ] + ([extra_task] if extra_task else []),
    }
    p = tmp_path / "t1_perception_and_assessment.json"
    p.write_text(json.dumps([sample]), encoding="utf-8")
    return p


def run_cmd(*args):
    out = StringIO()
    call_command(*args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_import_then_replay(florence, tmp_path):
    rows = json.loads(run_cmd("import_tasks", str(task_file(tmp_path)), "--event", florence.slug, "--json"))
    # no blank answer field: nothing to propose
    assert rows == [{"question_id": "flo_0001_task0", "status": "created", "proposals": []},
                    {"question_id": "flo_0001_task1", "status": "created", "proposals": []}]
    t0 = Task.objects.get(question_id="flo_0001_task0")
    rev = t0.head
    # matched to the layer by file name, kept as written (the export writes the file's path back)
    assert t0.dimension == "t1" and rev.input_data["pre_image"]["image_path"] == f"florence/{PRE}"
    assert rev.trajectory[0] == {"call": "seg.building_damage", "args": {"pre_image_path": PRE, "post_image_path": POST}}
    # the value is held by exactly one obs key -> a reference; a value no obs holds -> a literal
    assert rev.answer_spec == [
        {"name": "damaged_area_m2", "eval_type": "scalar_continuous",
         "source": "<area_m2> from trajectory[1].obs", "answer_format": "square metres"},
        {"name": "unit", "eval_type": "exact_match", "source": "m2"}]
    t1 = Task.objects.get(question_id="flo_0001_task1").head
    # expansions dropped, references renumbered to authored indices (reduce is step 2 now)
    assert [s["call"] for s in t1.trajectory] == ["calc.add", "tool.loop", "tool.reduce", "calc.add"]
    assert t1.trajectory[3]["args"]["a"] == "<best_value> from trajectory[2].obs"
    # 30.0 is held by step 2 (best_value) and step 3 (sum, a): ambiguous, so the literal is kept
    assert t1.answer_spec[0]["source"] == 30.0

    out = json.loads(run_cmd("replay", "--task", "flo_0001_task0", "--json"))
    assert out["status"] == "succeeded" and out["final_answer"] == {"damaged_area_m2": 6691.5, "unit": "m2"}
    assert [s["call"] for s in out["trajectory"]] == ["seg.building_damage", "ras.area"]
    loop = json.loads(run_cmd("replay", "--task", "flo_0001_task1", "--json"))
    assert loop["final_answer"] == {"best": 30.0}
    # stored form again: wrapper + 3 expanded calls; the reduce reference points at the wrapper
    assert [s["call"] for s in loop["trajectory"]] == ["calc.add", "tool.loop"] + ["calc.mul"] * 3 + [
        "tool.reduce", "calc.add"]
    assert loop["trajectory"][6]["args"]["a"] == "<best_value> from trajectory[5].obs"

    # re-import unchanged, replay --all --changed-only skips what was replayed with the same inputs
    rows = json.loads(run_cmd("import_tasks", str(task_file(tmp_path)), "--event", florence.slug, "--json"))
    assert {r["status"] for r in rows} == {"unchanged"}
    summary = json.loads(run_cmd("replay", "--all", "--event", florence.slug, "--changed-only", "--json"))
    assert summary["replayed"] == 0 and summary["skipped_unchanged"] == 2
    summary = json.loads(run_cmd("replay", "--all", "--event", florence.slug, "--json"))
    assert summary["replayed"] == 2 and summary["tool_calls"] == 0 and summary["cache_hits"] == 2 + 6  # 2 (seg, area) + 6 (add, 3 mul, reduce, add)


def test_answer_source_is_literal_when_ambiguous():
    from kernel.content import answer_source

    traj = [{"obs": {"sum": 30.0, "a": 30.0}}, {"obs": {"best_value": 30}}]
    assert answer_source(30, traj) == 30  # three keys hold it: ambiguous -> literal
    assert answer_source(30.0, traj[1:]) == "<best_value> from trajectory[0].obs"
    assert answer_source(None, traj) is None


def test_import_errors_name_file_sample_and_field(florence, tmp_path):
    # what the benchmark's loader refuses (t["task_category"] in load_questions) comes first, alone
    bad = task_file(tmp_path, extra_task={"task_category_code": "T1", "question": "?", "trajectory": [],
                                          "final_answer": {"x": 1}, "eval_spec": {}})
    with pytest.raises(CommandError, match=r"^t1_perception_and_assessment.json: sample flo_0001: task 2: "
                                           r"task_category: missing \(the benchmark's loader requires it\)$"):
        run_cmd("import_tasks", str(bad), "--event", florence.slug)
    # then every studio problem at once: a path that names no layer of the event
    bad = task_file(tmp_path, pre="florence/nope_pre.png", extra_task={
        "task_category": "perception_and_assessment", "task_category_code": "T1", "question": "?",
        "trajectory": [], "final_answer": {"x": 1}, "eval_spec": {}})
    with pytest.raises(CommandError) as ei:
        run_cmd("import_tasks", str(bad), "--event", florence.slug)
    msg = str(ei.value)
    assert ("t1_perception_and_assessment.json: sample 'flo_0001': input_data.pre_image.image_path: "
            "'florence/nope_pre.png' names no layer of event 'hurricane-florence'") in msg
    assert Task.objects.count() == 0  # nothing written
    (tmp_path / "x.json").write_text("{}", encoding="utf-8")
    with pytest.raises(CommandError, match="x.json: the file must hold a JSON list of samples, not dict"):
        run_cmd("import_tasks", str(tmp_path / "x.json"), "--event", florence.slug)
    with pytest.raises(CommandError, match="no event 'atlantis'"):
        run_cmd("import_tasks", str(bad), "--event", "atlantis")


def test_gold_baseline_writes_and_scores_a_run(florence, tmp_path, settings):
    run_cmd("import_tasks", str(task_file(tmp_path)), "--event", florence.slug)
    run_cmd("replay", "--all", "--event", florence.slug)
    settings.STUDIO_CHECKPOINT_DIR = ""
    summary = json.loads(run_cmd("gold_baseline", "--agent", "gold-model", "--out", str(tmp_path / "runs"), "--json"))
    # model perception without checkpoints: the seg task fails (as an agent's would), the loop
    # task needs no perception and reproduces its gold
    assert summary["records"] == 2 and summary["failed"] == ["flo_0001_task0"]
    jsonl = tmp_path / "runs" / "gold-model_GT" / "t1_perception_and_assessment" / "benchmark.jsonl"
    recs = {r["question_id"]: r for r in map(json.loads, jsonl.read_text().splitlines())}
    assert recs["flo_0001_task1"]["predicted_answer"] == {"best": 30.0}
    assert recs["flo_0001_task1"]["trajectory"][1]["call"].startswith("tool_loop(")
    assert "checkpoint" in recs["flo_0001_task0"]["error"].lower()
    run = AgentRun.objects.get(pk=summary["agent_run"])
    # T1: task0 scores 0 (error), task1 scores 1 -> 0.5
    assert run.agent.name == "gold-model" and run.dimensions["t1"]["dim_score"] == pytest.approx(0.5)
    assert summary["perception_mode"] == "model" and run.perception_mode == "model"
    # model runs never become the gold
    from replay.models import ReplayRun
    assert not ReplayRun.objects.filter(mode="model", gold_accepted=True).exists()


def test_resume_stuck_command_and_progress_bar(db):
    from replay.management.commands.replay import progress_bar

    assert json.loads(run_cmd("replay", "--resume-stuck", "--timeout", "60", "--json")) == {"requeued": []}
    assert progress_bar(1, 4, "q", width=8) == "[##......] 1/4  q"
    with pytest.raises(CommandError, match="no task with question id 'nope_task0'"):
        run_cmd("replay", "--task", "nope_task0")
