"""Fill-the-blank in bulk: a task file authored the benchmark's way (observations ``{}``, ``null``
or missing, answers ``null``) goes ``import_tasks --accept-proposals`` → ``replay --all --event``
→ ``export_tasks`` and comes out with every observation and answer filled, exit codes 0.

The authored file holds three tasks of three dimensions on the Florence tile (real data,
``../shared/realdata/xbd-hurricane-florence``). The expected values are worked out by hand or
taken from the benchmark's documented behaviour:

* T1 ``damaged_area_m2``: ``ras.area`` of the GT damage mask, classes 2 and 3 at 0.5 m/px:
  26,766 pixels × 0.25 m² = 6,691.5 m² (the value ``test_replay_import`` works out);
  proposed ``<area_m2> from trajectory[1].obs`` (the only float key sharing words with the name).
* T2 ``window_count``: ``ras.grid_windows`` with n=3 on the 1024×1024 mask gives 9 windows
  (``../shared/tool-examples/cases.jsonl`` ``grid_windows_florence_3``, the benchmark's own
  output); proposed ``<count> from trajectory[0].obs`` (the int key sharing "count").
* T4 ``total_product``: ``calc.add(2, 3)`` = 5.0, then ``calc.mul(5.0, 4)`` = 20.0 (the
  benchmark's calc tools return floats); proposed ``<product> from trajectory[1].obs``.

The filled observations are also compared with a replay of the same tasks whose file gives the
observations (the benchmark's, as the tools computed them): the diff against them is all ``same``.
"""
from __future__ import annotations

import json

import pytest
from support.florence import MASK, POST, PRE
from support.replay import TOOL_CASES, run_cmd

from annotation.models import Task
from kernel.golddiff import step_diff

MISSING = object()  # a step written without an "obs" key


@pytest.fixture
def florence(florence_with_root):
    """The Florence event; the management commands run as the superuser root
    (:func:`support.florence.florence_with_root`)."""
    return florence_with_root


def _step(call, args, obs):
    step = {"call": call, "args": args}
    if obs is not MISSING:
        step["obs"] = obs
    return step


def authored_file(path, *, blanks=({}, None, MISSING, {}, None), answer=None, extra_field=False):
    """The benchmark layout: one sample per task, each task's observations blank (the five steps
    take ``blanks`` in order) and its answers ``answer`` (null: authored, not yet replayed)."""
    b = list(blanks)
    t1 = {"task_category": "perception_and_assessment", "task_category_code": "T1",
          "question": "What area do damaged buildings cover, in square metres?",
          "tools": ["seg.building_damage", "ras.area"],
          "trajectory": [
              _step("seg.building_damage", {"pre_image_path": PRE, "post_image_path": POST}, b[0]),
              _step("ras.area", {"mask_path": "<mask_path> from trajectory[0].obs", "pixel_size_m": 0.5,
                                 "classes": [2, 3]}, b[1])],
          "final_answer": {"damaged_area_m2": answer}, "eval_spec": {"damaged_area_m2": "scalar_continuous"}}
    if extra_field:  # a set field no step result fits (no step returns a list): reported, never guessed
        t1["final_answer"]["zones"] = None
        t1["eval_spec"]["zones"] = "set_f1"
    t2 = {"task_category": "spatial_relation_analysis", "task_category_code": "T2",
          "question": "Into how many analysis windows does a 3x3 grid cut the tile?",
          "tools": ["ras.grid_windows"],
          "trajectory": [_step("ras.grid_windows", {"image_path": MASK, "n": 3}, b[2])],
          "final_answer": {"window_count": answer}, "eval_spec": {"window_count": "scalar_count"}}
    t4 = {"task_category": "multi_temporal_reasoning", "task_category_code": "T4",
          "question": "Two teams of 2 and 3 each make 4 trips: how many trips in total?",
          "tools": ["calc.add", "calc.mul"],
          "trajectory": [_step("calc.add", {"a": 2, "b": 3}, b[3]),
                         _step("calc.mul", {"a": "<sum> from trajectory[0].obs", "b": 4}, b[4])],
          "final_answer": {"total_product": answer}, "eval_spec": {"total_product": "scalar_numeric"}}
    inputs = {"pre_image": {"image_path": PRE, "pixel_size_m": 0.5},
              "post_image": {"image_path": POST, "pixel_size_m": 0.5},
              "damage_mask": {"image_path": MASK}}
    samples = [{"sample_id": f"auth_{i}", "disaster_type": "hurricane", "input_data": inputs, "tasks": [t]}
               for i, t in enumerate((t1, t2, t4))]
    path.write_text(json.dumps(samples, indent=1), encoding="utf-8")
    return path


EXPECTED = {"auth_0_task0": {"damaged_area_m2": 6691.5}, "auth_1_task0": {"window_count": 9},
            "auth_2_task0": {"total_product": 20.0}}
SOURCES = {"auth_0_task0": ("damaged_area_m2", "<area_m2> from trajectory[1].obs"),
           "auth_1_task0": ("window_count", "<count> from trajectory[0].obs"),
           "auth_2_task0": ("total_product", "<product> from trajectory[1].obs")}


def test_an_authored_file_goes_import_replay_export_filled(florence, tmp_path):
    path = authored_file(tmp_path / "authored.json")
    text, code = run_cmd("import_tasks", str(path), "--event", florence.slug, "--accept-proposals", "--json")
    rows = {r["question_id"]: r for r in json.loads(text)}
    assert code == 0 and set(rows) == set(EXPECTED)
    for qid, (field, source) in SOURCES.items():
        (p,) = rows[qid]["proposals"]
        assert (p["field"], p["source"], p["bound"]) == (field, source, True)
        head = Task.objects.get(question_id=qid).head
        assert [f["source"] for f in head.answer_spec] == [source]
    assert {Task.objects.get(question_id=q).dimension for q in EXPECTED} == {"t1", "t2", "t4"}

    text, code = run_cmd("replay", "--all", "--event", florence.slug, "--json")
    summary = json.loads(text)
    assert code == 0, summary
    assert summary["succeeded"] == 3 and summary["failed"] == [] and summary["pending_acceptance"] == []
    # all five blank observations ({} ×2, null ×2, missing ×1) were filled, none "changed"
    assert summary["filled_observations"] == 5 and summary["recorded_changed"] == []

    # one task again with --task: the diff says filled, exit 0
    text, code = run_cmd("replay", "--task", "auth_0_task0", "--json")
    out = json.loads(text)
    assert code == 0 and out["final_answer"] == EXPECTED["auth_0_task0"]
    assert [r["state"] for r in out["recorded_diff"]["steps"]] == ["filled", "filled"]
    assert out["recorded_diff"]["changed"] is False and out["recorded_diff"]["filled"] == 2
    area = out["recorded_diff"]["steps"][1]["changes"]
    assert {"path": "area_m2", "before": None, "after": 6691.5} in area

    text, code = run_cmd("export_tasks", "--out", str(tmp_path / "out"), "--event", florence.slug)
    assert code == 0
    files = sorted(p.name for p in (tmp_path / "out" / "tasks").glob("t*.json"))
    assert files == ["t1_perception_and_assessment.json", "t2_spatial_relation_analysis.json",
                     "t4_multi_temporal_reasoning.json"]
    exported = {}
    for name in files:
        for sample in json.loads((tmp_path / "out" / "tasks" / name).read_text(encoding="utf-8")):
            for ti, task in enumerate(sample["tasks"]):
                exported[f"{sample['sample_id']}_task{ti}"] = task
    assert set(exported) == set(EXPECTED)
    for qid, answer in EXPECTED.items():
        task = exported[qid]
        assert task["final_answer"] == answer, qid
        assert all(isinstance(s.get("obs"), (dict, list)) and s["obs"] for s in task["trajectory"]), qid
    t2 = exported["auth_1_task0"]["trajectory"][0]["obs"]
    cases = {c["id"]: c for c in map(json.loads, TOOL_CASES.read_text(encoding="utf-8").splitlines())}
    assert t2 == cases["grid_windows_florence_3"]["expected"]  # the benchmark's own output, every key
    t4 = exported["auth_2_task0"]["trajectory"]
    assert (t4[0]["obs"]["sum"], t4[1]["obs"]["product"]) == (5.0, 20.0)
    assert exported["auth_0_task0"]["trajectory"][1]["obs"]["pixel_count"] == 26766

    # the filled observations equal a replay of a file that gives them: import the export as a
    # file of recorded observations (other sample ids are not needed: --against reads by id)
    for name in files:
        text, code = run_cmd("import_tasks", str(tmp_path / "out" / "tasks" / name), "--event", florence.slug,
                             "--json")
        assert code == 0 and all(p == [] for p in (r["proposals"] for r in json.loads(text)))
    text, code = run_cmd("replay", "--all", "--event", florence.slug, "--json")
    summary = json.loads(text)
    assert code == 0 and summary["filled_observations"] == 0 and summary["recorded_changed"] == []


def test_a_field_without_a_proposal_is_reported_not_guessed(florence, tmp_path):
    path = authored_file(tmp_path / "authored.json", extra_field=True)
    text, code = run_cmd("import_tasks", str(path), "--event", florence.slug, "--accept-proposals")
    assert code == 0
    assert "damaged_area_m2: bound to <area_m2> from trajectory[1].obs (ras.area:" in text
    assert "zones: left blank: no step result fits its name and type; bind it by hand" in text
    assert "3 blank answer field(s) bound to their proposed source, 1 left blank" in text
    head = Task.objects.get(question_id="auth_0_task0").head
    assert [(f["name"], f["source"]) for f in head.answer_spec] == [
        ("damaged_area_m2", "<area_m2> from trajectory[1].obs"), ("zones", None)]


def test_without_the_flag_nothing_is_bound(florence, tmp_path):
    path = authored_file(tmp_path / "authored.json")
    text, code = run_cmd("import_tasks", str(path), "--event", florence.slug, "--json")
    rows = json.loads(text)
    assert code == 0 and all(p["bound"] is False for r in rows for p in r["proposals"])
    assert all(f["source"] is None for t in Task.objects.all() for f in t.head.answer_spec)
    text, _ = run_cmd("import_tasks", str(path), "--event", florence.slug)
    assert "window_count: proposed <count> from trajectory[0].obs (ras.grid_windows:" in text


def test_a_changed_recorded_observation_still_exits_2_beside_filled_ones(florence, tmp_path):
    # step 0 of T4 records calc.add's observation with the wrong sum (6 where 2 + 3 = 5.0): a tool
    # disagreement; step 1 is blank and is filled
    path = authored_file(tmp_path / "authored.json",
                         blanks=({}, None, MISSING, {"tool": "calc.add", "sum": 6.0, "a": 2.0, "b": 3.0}, {}))
    run_cmd("import_tasks", str(path), "--event", florence.slug, "--accept-proposals")
    text, code = run_cmd("replay", "--task", "auth_2_task0", "--json")
    diff = json.loads(text)["recorded_diff"]
    assert code == 2 and diff["changed"] is True
    assert [r["state"] for r in diff["steps"]] == ["changed", "filled"]
    assert diff["steps"][0]["changes"] == [{"path": "sum", "before": 6.0, "after": 5.0}]
    text, code = run_cmd("replay", "--task", "auth_2_task0")
    assert "[0] calc.add: changed" in text and "[1] calc.mul: filled" in text
    assert "1 blank observation(s) filled" in text and code == 2
    summary, code = run_cmd("replay", "--all", "--event", florence.slug, "--json")
    assert code == 2 and json.loads(summary)["recorded_changed"] == ["auth_2_task0"]


def test_the_task_page_and_api_say_filled(florence, tmp_path, client):
    from django.contrib.auth import get_user_model

    run_cmd("import_tasks", str(authored_file(tmp_path / "authored.json")), "--event", florence.slug,
            "--accept-proposals")
    run_cmd("replay", "--task", "auth_2_task0")
    task = Task.objects.get(question_id="auth_2_task0")
    client.force_login(get_user_model().objects.get(username="root"))
    html = client.get(f"/tasks/{task.pk}/replay-diff/").content.decode()
    assert "no gold diff for non-perception steps" in html and "2 blank observations filled" in html
    assert html.count("filled: the file left this observation blank") == 2
    api = client.get(f"/api/tasks/{task.pk}/replay-diff/").json()
    assert [r["state"] for r in api["recorded"]["steps"]] == ["filled", "filled"]
    assert api["recorded"]["changed"] is False and api["recorded"]["filled"] == 2


def test_step_diff_filled_rows_worked_out_by_hand():
    # a blank earlier side ({}, None, no obs) is filled; a recorded one that differs is changed;
    # a recorded one replayed blank is changed; other calls/args are never "filled"
    before = [{"call": "a", "args": {}, "obs": {}}, {"call": "b", "args": {}, "obs": None}, {"call": "c", "args": {}},
              {"call": "d", "args": {}, "obs": {"x": 1}}, {"call": "e", "args": {}, "obs": {"x": 1}},
              {"call": "f", "args": {"n": 1}, "obs": {}}]
    after = [{"call": "a", "args": {}, "obs": {"x": 1, "y": [2]}}, {"call": "b", "args": {}, "obs": {"x": 1}},
             {"call": "c", "args": {}, "obs": [{"k": 3}]}, {"call": "d", "args": {}, "obs": {"x": 2}},
             {"call": "e", "args": {}, "obs": {}}, {"call": "f", "args": {"n": 2}, "obs": {"x": 1}}]
    rows = step_diff(before, after)
    assert [r["state"] for r in rows] == ["filled", "filled", "filled", "changed", "changed", "changed"]
    assert rows[0]["changes"] == [{"path": "x", "before": None, "after": 1}, {"path": "y[0]", "before": None, "after": 2}]
    assert rows[2]["changes"] == [{"path": "[0].k", "before": None, "after": 3}]
    assert rows[5]["changes"][0]["path"] == "(call/args)"


def test_import_release_accept_proposals_then_replay_all_fills_the_gold(florence, tmp_path):
    # the same authored tasks as a release folder (tasks/t*.json; the layers are the event's own,
    # so no images/): --accept-proposals binds, --no-release leaves the gold replayable
    tasks = json.loads(authored_file(tmp_path / "authored.json").read_text(encoding="utf-8"))
    (tmp_path / "bench" / "tasks").mkdir(parents=True)
    for sample, name in zip(tasks, ("t1_perception_and_assessment", "t2_spatial_relation_analysis",
                                    "t4_multi_temporal_reasoning")):
        (tmp_path / "bench" / "tasks" / f"{name}.json").write_text(json.dumps([sample]), encoding="utf-8")
    text, code = run_cmd("import_release", str(tmp_path / "bench"), "--event", florence.slug, "--no-release",
                         "--accept-proposals", "--json")
    report = json.loads(text)
    assert code == 0 and sorted(report["created"]) == sorted(EXPECTED)
    for qid, (field, source) in SOURCES.items():
        assert [(p["field"], p["source"], p["bound"]) for p in report["proposals"][qid]] == [(field, source, True)]
        assert [f["source"] for f in Task.objects.get(question_id=qid).head.answer_spec] == [source]
    text, code = run_cmd("replay", "--all", "--event", florence.slug, "--json")
    summary = json.loads(text)
    assert code == 0 and summary["succeeded"] == 3 and summary["pending_acceptance"] == [], summary
    text, code = run_cmd("export_tasks", "--out", str(tmp_path / "out"), "--event", florence.slug)
    assert code == 0
    for name in sorted((tmp_path / "out" / "tasks").glob("t*.json")):
        for sample in json.loads(name.read_text(encoding="utf-8")):
            task = sample["tasks"][0]
            assert task["final_answer"] == EXPECTED[f"{sample['sample_id']}_task0"]
            assert all(s.get("obs") for s in task["trajectory"])


def test_import_release_without_the_flag_binds_nothing_and_keeps_the_file_gold(florence, tmp_path):
    tasks = json.loads(authored_file(tmp_path / "authored.json").read_text(encoding="utf-8"))
    (tmp_path / "bench" / "tasks").mkdir(parents=True)
    (tmp_path / "bench" / "tasks" / "t1_perception_and_assessment.json").write_text(json.dumps(tasks[:1]))
    text, code = run_cmd("import_release", str(tmp_path / "bench"), "--event", florence.slug, "--no-release")
    assert code == 0 and "damaged_area_m2: proposed <area_m2> from trajectory[1].obs" in text
    task = Task.objects.get(question_id="auth_0_task0")
    assert task.head.answer_spec[0]["source"] is None
    from replay.models import ReplayRun
    gold = ReplayRun.objects.get(task=task)
    assert gold.mode == "import" and gold.accepted_by is not None  # a person's import stands as gold


def test_accept_proposals_rule_worked_out_by_hand():
    from kernel.content import NO_PROPOSAL, accept_proposals

    spec = [{"name": "n", "eval_type": "scalar_count", "source": None},
            {"name": "kept", "eval_type": "exact_match", "source": "m2"},
            {"name": "z", "eval_type": "set_f1", "source": None},
            {"name": "x", "eval_type": "scalar_numeric", "source": None}]
    proposals = [{"field": "n", "source": "<count> from trajectory[1].obs", "step": 1, "key": "count"},
                 {"field": "z", "source": None},
                 {"field": "x", "source": "<odd> from trajectory[0].obs", "step": 0, "key": "odd"}]
    new, rows = accept_proposals(spec, proposals, accepts=lambda i, k: k != "odd")
    assert [f["source"] for f in new] == ["<count> from trajectory[1].obs", "m2", None, None]
    assert [(r["field"], r["bound"]) for r in rows] == [("n", True), ("z", False), ("x", False)]
    assert rows[1]["why_not"] == NO_PROPOSAL and "does not take <odd> of step 0" in rows[2]["why_not"]
    assert spec[0]["source"] is None  # the input is not changed
    one, (row,) = accept_proposals(spec, proposals, fields=["n"])  # the editor's one field
    assert row["bound"] and [f["source"] for f in one][2:] == [None, None]
