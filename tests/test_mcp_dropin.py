"""The MCP drop-in for the benchmark's tool servers, driven by the benchmark's
own client: ``langchain_mcp_adapters.client.MultiServerMCPClient``, as dora/agent/mcp_tools.py
uses it (one fresh server process per tool call, dotted names renamed to underscore aliases,
JSON text results parsed). The client lives in its own venv (``.venv-mcp-client``, made by
``make mcp-client``, which ``make test`` runs): it needs mcp<2, the studio pins mcp 2.x.
``tests/mcp_client/drive_gold.py`` runs there and spawns ``manage.py mcp_serve`` from the main
venv over stdio.

Data and hand-checked numbers as in test_mcp: the Florence tile's GT mask holds value 3 on
26492 px and value 4 on 274 px, which the damage tool maps to classes 2 and 3, so
ras.count_pixels counts {"2": 26492, "3": 274}, total 26766.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import REPO, SHARED, requires_shared
from support.florence import FLORENCE
from support.mcp import GT_COUNTS, make_task, subprocess_env

from kernel.tools.registry import all_tools
from replay.mcp_server import SUBMIT_TOOL
from replay.sessions import RunDirectory, SessionRecorder

CLIENT_PY = REPO / ".venv-mcp-client" / "bin" / "python"
DRIVER = REPO / "tests" / "mcp_client" / "drive_gold.py"
CATALOGUE = SHARED / "spec" / "dora-tools.json"

pytestmark = [
    requires_shared(FLORENCE),
    requires_shared(CATALOGUE),
    pytest.mark.skipif(not CLIENT_PY.exists() and not os.environ.get("CI"),
                       reason="no .venv-mcp-client: run `make mcp-client` (make test does)"),
]


def drive(tmp_path, task, steps, *, run_dir=None, record=None):
    env = subprocess_env(tmp_path)
    env["PATH"] = os.environ.get("PATH", "")
    args = [str(REPO / "manage.py"), "mcp_serve", "--task", task.question_id, "--dotted-names",
            "--perception", "gt"]
    if run_dir is not None:
        args += ["--temp_dir", str(run_dir)]
    if record is not None:
        args += ["--record", str(record), "--agent", "dora-harness"]
    spec = {"server": {"command": sys.executable, "args": args, "env": env, "cwd": str(REPO)},
            "steps": steps}
    proc = subprocess.run([str(CLIENT_PY), str(DRIVER)], input=json.dumps(spec), text=True,
                          capture_output=True, timeout=400, cwd=str(REPO))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


@pytest.mark.django_db(transaction=True)
def test_gold_trajectory_one_process_per_call(tmp_path):
    from evaluation.services.runs import import_run_dir
    from replay.services.runs import start_replay

    user, task = make_task()
    gold = start_replay(user, task)
    assert gold.status == "succeeded", gold.error
    steps = [dict(s) for s in task.head.trajectory]
    answer = {"damaged_pixels": 26766, "pixels_by_class": GT_COUNTS}
    run_dir, record = tmp_path / "temp", tmp_path / "run"
    out = drive(tmp_path, task,
                steps + [{"call": SUBMIT_TOOL, "args": {"answer": answer}}],
                run_dir=run_dir, record=record)

    # every tool of the benchmark's catalogue (shared/spec/dora-tools.json: its 108 tools with
    # their parameters) loads under its dotted name, aliased as the harness does, with its
    # argument schema: the parameter names, the required ones and the defaults
    catalogue = json.loads(CATALOGUE.read_text(encoding="utf-8"))
    assert len(catalogue) == len(all_tools()) == 108
    assert set(out["tools"]) == {e["alias"] for e in catalogue} | {SUBMIT_TOOL}
    for entry in catalogue:
        listed = out["tools"][entry["alias"]]
        assert listed["name"] == entry["name"]
        props = listed["args_schema"].get("properties", {})
        assert list(props) == [p["name"] for p in entry["params"]], entry["name"]
        assert set(listed["args_schema"].get("required", [])) == {
            p["name"] for p in entry["params"] if p["required"]}, entry["name"]
        for p in entry["params"]:
            if not p["required"] and p["default"] is not None:
                assert props[p["name"]].get("default") == p["default"], (entry["name"], p["name"])

    # one process per call: the count step found the mask the seg step's process wrote, and the
    # observations are the replay's, artifact names included (content-hashed)
    obs = out["observations"]
    assert obs[:2] == [s["obs"] for s in gold.filled_trajectory]
    assert obs[1]["counts"] == GT_COUNTS and obs[1]["total"] == 26766
    assert (run_dir / obs[0]["mask_path"]).is_file()
    assert obs[2]["predicted_answer"] == answer

    # one run record, every process's call in it, answered; it imports as one agent run
    lines = (record / "t1_perception_and_assessment" / "benchmark.jsonl").read_text().splitlines()
    assert len(lines) == 1
    rec = json.loads(lines[0])
    assert [s["call"] for s in rec["trajectory"]] == [
        "seg_building_damage(pre_image_path, post_image_path)", "ras_count_pixels(mask_path, classes)"]
    assert rec["error"] is None and rec["predicted_answer"] == answer
    assert rec["studio_session"]["agent"] == "dora-harness"
    run = import_run_dir(user, record, "dora-harness")
    r = run.records.get()
    # both answer fields equal the gold exactly → 1 each; P = G → T-EM 1
    assert r.task_id == task.pk and r.task_score == pytest.approx(1.0) and r.t_em == pytest.approx(1.0)


@pytest.mark.django_db(transaction=True)
def test_without_a_run_dir_each_process_is_a_new_session(tmp_path):
    # the failure, kept as the control: without --temp_dir the count call's process
    # cannot see the mask written by the seg call's process
    _, task = make_task()
    out = drive(tmp_path, task, [dict(s) for s in task.head.trajectory])
    assert "mask_path" in out["observations"][0]
    assert set(out["observations"][1]) == {"error"}
    assert "neither an output of an earlier step nor a layer" in out["observations"][1]["error"]


def test_run_directory_session_marker_and_shared_session(tmp_path):
    # the benchmark's SessionTempDir: artifacts under <dir>/<id> while <dir>/.session names one
    rd = RunDirectory(tmp_path / "t")
    assert rd.work_dir == tmp_path / "t"
    (tmp_path / "t" / ".session").write_text("q7\n")
    assert rd.work_dir == tmp_path / "t" / "q7"
    a, b = rd.session("q7"), RunDirectory(tmp_path / "t").session("q7")
    assert a == b and rd.session("q8")["session_id"] != a["session_id"]


def test_a_session_marker_naming_a_link_out_of_the_run_folder_is_refused(tmp_path):
    # the attack: <temp_dir>/.session names "q7", and <temp_dir>/q7 is a symbolic link to a folder
    # elsewhere; the work dir (where tools read and write) must not follow it out of --temp_dir
    from kernel.paths import OutsideRoot

    outside = tmp_path / "elsewhere"
    outside.mkdir()
    run = tmp_path / "t"
    rd = RunDirectory(run)
    (run / "q7").symlink_to(outside, target_is_directory=True)
    (run / ".session").write_text("q7\n")
    with pytest.raises(OutsideRoot, match="lies outside the run's folder"):
        _ = rd.work_dir
    # a link that stays inside the run folder is fine, and resolves to its target
    (run / "inner").mkdir()
    (run / "q8").symlink_to(run / "inner", target_is_directory=True)
    (run / ".session").write_text("q8")
    assert rd.work_dir == (run / "inner").resolve()


def test_persistent_recorders_of_two_processes_merge(tmp_path):
    meta = {"question_id": "s_task0", "dimension": "t1"}
    one = SessionRecorder(tmp_path, meta, session_id="S", persistent=True)
    one.record_call("calc_add", {"a": 1, "b": 2}, {"sum": 3.0})
    one.close()  # process 1 ends without an answer
    two = SessionRecorder(tmp_path, meta, session_id="S", persistent=True)
    two.record_call("calc_mul", {"a": 3, "b": 2}, {"product": 6.0})
    two.finish({"x": 6})
    three = SessionRecorder(tmp_path, meta, session_id="S", persistent=True)
    three.close()  # a later process without answer keeps process 2's answer
    rec = json.loads((tmp_path / "t1_perception_and_assessment" / "benchmark.jsonl").read_text())
    assert [s["call"] for s in rec["trajectory"]] == ["calc_add(a, b)", "calc_mul(a, b)"]
    assert rec["predicted_answer"] == {"x": 6} and rec["error"] is None


RECORD_STEPS = """
import sys
from replay.sessions import SessionRecorder
run_dir, worker, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rec = SessionRecorder(run_dir, {"question_id": "s_task0", "dimension": "t1"}, session_id="S",
                      persistent=True)
for k in range(n):
    rec.record_call("calc_add", {"a": worker, "b": k}, {"sum": float(worker + k)})
rec.close()
"""


def test_concurrent_server_processes_lose_no_step(tmp_path):
    # an agent may issue parallel tool calls: one server process each, all recording into the
    # same run record at once; 4 processes x 6 calls must leave 24 steps (the merge runs under
    # the record's file lock)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    procs = [subprocess.Popen([sys.executable, "-c", RECORD_STEPS, str(tmp_path), str(w), "6"],
                              env=env, cwd=str(REPO), stderr=subprocess.PIPE, text=True)
             for w in range(4)]
    for p in procs:
        _out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err[-2000:]
    rec = json.loads((tmp_path / "t1_perception_and_assessment" / "benchmark.jsonl").read_text())
    pairs = sorted((s["args"]["a"], s["args"]["b"]) for s in rec["trajectory"])
    assert pairs == [(w, k) for w in range(4) for k in range(6)]
