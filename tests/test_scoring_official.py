"""The scorer against the official DORA evaluator's own outputs (shared/scoring-examples).

Pure tests: no database. The examples folder is found next to the repository, or through
STUDIO_SCORING_EXAMPLES.
"""
from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest
from conftest import SCORING_EXAMPLES, requires_shared
from django.core.management import call_command

from evaluation.scoring import (
    evaluate_run_dir,
    evaluate_samples,
    evaluate_sanity,
    load_run_records,
    load_task_files,
    score_task,
)
from evaluation.scoring.loaders import TASKS
from evaluation.scoring.trajectory import flatten_trajectory

EXAMPLES = Path(os.environ.get(
    "STUDIO_SCORING_EXAMPLES", SCORING_EXAMPLES))
TASKS_DIR = EXAMPLES / "tasks"
AGENTS = ("agent_a", "agent_b")
OFFICIAL_KEYS = ["summary_table", "dora_score", "dimensions", "full"]

pytestmark = requires_shared(EXAMPLES / "expected")


def _expected(agent):
    return json.loads((EXAMPLES / "expected" / f"{agent}.eval.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("agent", AGENTS)
def test_command_reproduces_official_eval_json_and_txt(agent, tmp_path):
    out = tmp_path / f"{agent}.eval.json"
    call_command("evaluate_runs", "--run", str(EXAMPLES / "runs" / agent), "--tasks-dir", str(TASKS_DIR),
                 "--output", str(out), stdout=open(os.devnull, "w"))
    got = json.loads(out.read_text(encoding="utf-8"))
    # the official keys, in the official order, then the one documented extra key
    assert list(got) == OFFICIAL_KEYS + ["mode"]
    assert got.pop("mode") == "dora"
    assert got == _expected(agent)
    # byte-for-byte: the document without "mode" serialises exactly like the official file
    official_text = (EXAMPLES / "expected" / f"{agent}.eval.json").read_text(encoding="utf-8")
    assert json.dumps(got, ensure_ascii=False, indent=2) == official_text
    assert out.with_suffix(".txt").read_text(encoding="utf-8") == \
        (EXAMPLES / "expected" / f"{agent}.eval.txt").read_text(encoding="utf-8")


@pytest.mark.parametrize("agent", AGENTS)
def test_every_number_matches(agent):
    got = evaluate_run_dir(EXAMPLES / "runs" / agent, TASKS_DIR)
    exp = _expected(agent)
    assert got["dora_score"] == exp["dora_score"]
    assert got["summary_table"] == exp["summary_table"]
    for dim, block in exp["full"].items():
        assert got["dimensions"][dim] == exp["dimensions"][dim], dim
        for g, e in zip(got["full"][dim]["tasks"], block["tasks"], strict=True):
            assert g == e, (dim, e["sample_id"], e["task_idx"])


def test_per_task_rows():
    gold = load_task_files(TASKS_DIR)
    rows = [json.loads(line) for line in (EXAMPLES / "expected" / "per_task.jsonl").read_text().splitlines() if line]
    assert len(rows) == 24
    records = {a: load_run_records(EXAMPLES / "runs" / a) for a in AGENTS}
    for row in rows:
        sid, _, idx = row["question_id"].rpartition("_task")
        sample = next(s for s in gold[row["dim"]] if s["sample_id"] == sid)
        recs = [r for r in records[row["agent"]][row["dim"]] if r["question_id"] == row["question_id"]]
        assert len(recs) == len(row["run_records_with_this_question_id"])
        record = recs[-1] if recs else None
        result = score_task(sample["tasks"][int(idx)], sample, record)
        assert result["mode"] == "dora"
        assert {k: result[k] for k in row["expected"]} == row["expected"], (row["agent"], row["question_id"])
        assert len(result["step_matches"]) == len(flatten_trajectory(sample["tasks"][int(idx)]["trajectory"]))


def test_evaluate_samples_equals_run_dir():
    gold = load_task_files(TASKS_DIR)
    for agent in AGENTS:
        records = load_run_records(EXAMPLES / "runs" / agent)
        in_memory = evaluate_samples(copy.deepcopy(gold), records, TASKS_DIR / "gold_polygons")
        assert in_memory == evaluate_run_dir(EXAMPLES / "runs" / agent, TASKS_DIR)


def test_step_matches_only_on_request():
    plain = evaluate_run_dir(EXAMPLES / "runs" / "agent_a", TASKS_DIR)
    assert all("step_matches" not in t for b in plain["full"].values() for t in b["tasks"])
    rich = evaluate_run_dir(EXAMPLES / "runs" / "agent_a", TASKS_DIR, include_step_matches=True)
    t3 = rich["full"]["t3"]["tasks"]
    s11 = next(t for t in t3 if t["sample_id"] == "t3_s11")
    # gold: sortie_plan, check_fuel, sortie_plan, check_fuel, summarize; the agent skipped the repeat
    assert [r["name_ok"] for r in s11["step_matches"]] == [True, True, False, False, False]
    assert s11["step_matches"][3]["pred_index"] is None
    assert s11["step_matches"][3]["args"][0]["why"] == "no predicted step at this position"


def _all_numbers(doc):
    for block in doc["full"].values():
        for t in block["tasks"]:
            yield t["task_score"]
            yield from t["field_scores"].values()
            yield from (t[m] for m in ("t_any", "t_ord", "t_em", "par_acc", "eff"))
    yield doc["dora_score"]


@pytest.mark.parametrize("mode", ["dora", "paper"])
def test_sanity_is_one_everywhere(mode, tmp_path):
    out = tmp_path / "eval_sanity.json"
    call_command("evaluate_runs", "--sanity", "--tasks-dir", str(TASKS_DIR), "--output", str(out),
                 "--mode", mode, stdout=open(os.devnull, "w"))
    doc = json.loads(out.read_text())
    assert doc["mode"] == mode
    assert set(_all_numbers(doc)) == {1.0}
    assert doc == {**evaluate_sanity(TASKS_DIR, mode=mode)}


def test_missing_dimension_is_skipped(tmp_path):
    run = tmp_path / "run"
    (run / TASKS["t1"]).mkdir(parents=True)
    src = EXAMPLES / "runs" / "agent_b" / TASKS["t1"] / "benchmark.jsonl"
    (run / TASKS["t1"] / "benchmark.jsonl").write_text(src.read_text())
    log = []
    doc = evaluate_run_dir(run, TASKS_DIR, log=log)
    assert list(doc["dimensions"]) == ["t1"]
    assert doc["dora_score"] == doc["dimensions"]["t1"]["dim_score"] == _expected("agent_b")["dimensions"]["t1"]["dim_score"]
    assert sum("WARNING" in line for line in log) == 4


def test_duplicate_records_keep_earlier_parts(tmp_path):
    # the evaluator overwrites a task with each record, but only with what the record carries
    run = tmp_path / "run"
    for _dim, name in TASKS.items():
        (run / name).mkdir(parents=True)
        (run / name / "benchmark.jsonl").write_text(
            (EXAMPLES / "runs" / "agent_a" / name / "benchmark.jsonl").read_text())
    path = run / TASKS["t3"] / "benchmark.jsonl"
    with path.open("a") as fh:
        fh.write(json.dumps({"question_id": "t3_s11_task0", "predicted_answer": None, "trajectory": []}) + "\n")
        fh.write(json.dumps({"question_id": "t3_s09_task1", "predicted_answer": "no json here"}) + "\n")
    doc = evaluate_run_dir(run, TASKS_DIR)
    tasks = {(t["sample_id"], t["task_idx"]): t for t in doc["full"]["t3"]["tasks"]}
    base = {(t["sample_id"], t["task_idx"]): t for t in _expected("agent_a")["full"]["t3"]["tasks"]}
    assert tasks[("t3_s11", 0)] == base[("t3_s11", 0)]          # null answer, empty trajectory: nothing replaced
    assert tasks[("t3_s09", 1)]["field_scores"] == {"teams_required": 0.0, "boats_required": 0.0}  # {"_raw": ...}


def test_paper_mode_command_marks_its_output(tmp_path):
    out = tmp_path / "paper.json"
    call_command("evaluate_runs", "--run", str(EXAMPLES / "runs" / "agent_b"), "--tasks-dir", str(TASKS_DIR),
                 "--output", str(out), "--mode", "paper", stdout=open(os.devnull, "w"))
    doc = json.loads(out.read_text())
    assert doc["mode"] == "paper"
    assert doc["summary_table"].splitlines()[-1].startswith("  Mode: paper")
    assert out.with_suffix(".txt").read_text().rstrip("\n").endswith(doc["summary_table"].splitlines()[-1])
    # agent_b answers blocked_roads_pct "18%" for 18 (passes) and flooded_road_share "42 %" for 0.42:
    # no fraction/percent rescaling in the paper's scalar rule, so the latter fails there
    t2 = {(t["sample_id"], t["task_idx"]): t for t in doc["full"]["t2"]["tasks"]}
    assert t2[("t2_s07", 0)]["field_scores"] == {"flooded_road_share": 0.0, "blocked_roads_pct": 1.0}
    assert doc["dora_score"] != _expected("agent_b")["dora_score"]
