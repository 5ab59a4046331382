"""The MCP server (``replay.mcp_server``), its session recording (``replay.sessions``) and
``manage.py mcp_serve`` over stdio.

Data: the real xBD hurricane-florence tile (shared/realdata), imported into the test database, and
one T1 task whose gold trajectory is seg.building_damage → ras.count_pixels(classes [2, 3]).

Hand-checked numbers: ``np.unique`` on the real ``hurricane-florence_00000018_mask.png`` gives
value 3 (major-damage) on 26492 px and value 4 (destroyed) on 274 px; the damage tool maps them by
label to its classes 2 (partially damaged) and 3 (totally destroyed), so ras.count_pixels on its
mask counts {"2": 26492, "3": 274}, total 26766.

The stdio test runs ``manage.py mcp_serve`` as a subprocess, which cannot see the test database
(on SQLite, an in-memory database private to this process). The test therefore uses
``django_db(transaction=True)`` (rows committed) and ``conftest.ChildDatabase``: on SQLite a file
copy made with SQLite's online backup API, on PostgreSQL the test database itself; the subprocess
gets it through ``DATABASE_URL``, and the test's data root through ``STUDIO_DATA_ROOT``. The Streamable HTTP test does the same with
``--transport http`` on a free port of 127.0.0.1.
"""
from __future__ import annotations

import json
import os
import runpy
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from conftest import REPO, requires_shared
from django.conf import settings
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from support.florence import FLORENCE, POST, PRE
from support.mcp import GT_COUNTS, make_task, obs_of, run_async, subprocess_env

from kernel.tools.registry import all_tools
from kernel.tools.spec import tool_manifest
from replay.mcp_server import SUBMIT_TOOL, _tool_description, build_server, registry_tools
from replay.sessions import NO_ANSWER_ERROR, SessionRecorder, call_text

pytestmark = requires_shared(FLORENCE)


# ── in-process ───────────────────────────────────────────────────────────────

@pytest.mark.django_db
def test_in_process_lists_every_tool_and_calls_three():
    _, task = make_task()
    server = build_server(task)
    registry = all_tools()
    seen = {}

    async def main():
        async with Client(server) as client:
            listed = (await client.list_tools()).tools
            seen["tools"] = {t.name: t for t in listed}
            seg = await client.call_tool("seg_building_damage", {"pre_image_path": PRE, "post_image_path": POST})
            seen["seg"] = seg
            mask = obs_of(seg)["mask_path"]
            seen["count"] = await client.call_tool("ras_count_pixels", {"mask_path": mask, "classes": [2, 3]})
            # a list argument sent as JSON text, as some models do, is accepted like the benchmark does
            seen["count_text"] = await client.call_tool("ras_count_pixels", {"mask_path": mask, "classes": "[3]"})
            seen["div"] = await client.call_tool("calc_div", {"a": 274, "b": 26766})
            seen["missing"] = await client.call_tool("ras_count_pixels", {"mask_path": "nope.png", "classes": [1]})
            seen["bad_arg"] = await client.call_tool("calc_div", {"a": 1})
            seen["unknown"] = await client.call_tool("seg_nothing", {})

    run_async(main)
    tools = seen["tools"]
    # every registry tool, under its alias; no studio extra without recording
    assert len(tools) == len(registry)
    assert set(tools) == {s.alias for s in registry.values()}
    assert SUBMIT_TOOL not in tools
    for alias in ("seg_building_damage", "ras_count_pixels", "calc_div"):
        assert alias in tools
    schema = tools["ras_count_pixels"].input_schema
    assert sorted(schema["required"]) == ["classes", "mask_path"]
    assert schema["properties"]["classes"]["type"] == "array"
    assert schema == registry["ras.count_pixels"].input_schema()
    assert sorted(tools["seg_building_damage"].input_schema["required"]) == ["post_image_path", "pre_image_path"]
    assert tools["calc_div"].description.startswith(registry["calc.div"].description)

    seg = seen["seg"]
    assert not seg.is_error
    seg_obs = obs_of(seg)
    assert seg_obs["tool"] == "seg.building_damage" and seg.structured_content == seg_obs
    # the artifact is in this session's work dir under settings.STUDIO_ARTIFACT_ROOT/sessions/<id>/
    work = server.binding.work_dir
    assert work.parent == Path(settings.STUDIO_ARTIFACT_ROOT) / "sessions"
    assert (work / seg_obs["mask_path"]).is_file()

    count = obs_of(seen["count"])
    assert not seen["count"].is_error
    assert count["counts"] == GT_COUNTS and count["total"] == 26766
    assert obs_of(seen["count_text"])["counts"] == {"3": 274}
    div = obs_of(seen["div"])
    assert div["tool"] == "calc.div" and div["ratio"] == pytest.approx(274 / 26766)

    # refused calls: MCP error results with the tool's readable message, the server keeps serving
    for key, words in (("missing", ["ras.count_pixels", "nope.png"]), ("bad_arg", ["calc.div", "'b'", "missing"]),
                       ("unknown", ["seg_nothing"])):
        r = seen[key]
        assert r.is_error, key
        text = r.content[0].text
        for w in words:
            assert w in text, (key, text)
    assert "Traceback" not in seen["missing"].content[0].text


def test_the_tool_list_from_the_manifest_cache_is_the_registrys(tmp_path):
    # the server lists a plain task's tools from kernel.tools.spec.tool_manifest, not from the
    # registry: the first call writes the cache, the second reads it; both must carry exactly
    # what the registry's ToolSpecs give (names, order, descriptions, JSON schemas)
    written = tool_manifest(tmp_path)
    files = list(tmp_path.glob("tool-manifest-*.json"))
    assert len(files) == 1 and len(files[0].stem) == len("tool-manifest-") + 64  # a SHA-256 key
    read = tool_manifest(tmp_path)
    specs = list(all_tools().values())
    for listing in (written, read):
        assert [t.name for t in listing] == [s.name for s in specs]  # registration order
        for t, s in zip(listing, specs):
            assert (t.alias, t.server, t.module, t.version, t.description, list(t.result_keys)) == \
                   (s.alias, s.server, s.module, s.version, s.description, s.result_keys), s.name
            assert json.dumps(t.input_schema()) == json.dumps(s.input_schema()), s.name  # key order too
            assert [p.as_dict() for p in t.params] == [p.as_dict() for p in s.params], s.name
    # a second cache directory gets the same file: the key is the sources', not the process's
    assert [f.name for f in (tmp_path / "again").glob("*")] == [] and tool_manifest(tmp_path / "again")
    assert [f.name for f in (tmp_path / "again").glob("tool-manifest-*.json")] == [files[0].name]


def test_a_listing_read_from_the_manifest_cache_is_kept_until_the_file_or_the_sources_change(tmp_path, monkeypatch):
    from kernel.tools import spec as spec_module

    tool_manifest(tmp_path)  # writes the file
    read = tool_manifest(tmp_path)  # reads it
    again = tool_manifest(tmp_path)  # kept: the same entries, in a list of its own
    assert again == read and again is not read and all(a is b for a, b in zip(again, read))
    # the file changes (another writer, an edit): read afresh, the change listed
    path = next(tmp_path.glob("tool-manifest-*.json"))
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc["tools"][0]["description"] = "changed on disk"
    path.write_text(json.dumps(doc), encoding="utf-8")
    changed = tool_manifest(tmp_path)
    assert changed[0].description == "changed on disk" and changed[1:] == read[1:]
    # the sources change (their stat differs): the kept listing is not given, the file is read again
    kept = tool_manifest(tmp_path)
    assert kept[0] is changed[0]
    monkeypatch.setattr(spec_module, "_sources_stat", lambda: (("edited.py", 1, 1),))
    fresh = tool_manifest(tmp_path)
    assert fresh == changed and fresh[0] is not changed[0]


@pytest.mark.django_db
def test_the_served_tool_list_is_the_registrys_byte_for_byte():
    # what build_server lists (from the manifest) against what the registry's specs give, as an
    # MCP client reads it: name, title, description, input schema and the dora meta, in order
    _, task = make_task()
    server = build_server(task)
    seen = {}

    async def main():
        async with Client(server) as client:
            seen["tools"] = (await client.list_tools()).tools

    run_async(main)
    listed = [t.model_dump(mode="json", by_alias=True) for t in seen["tools"]]
    want = [{"name": s.alias, "title": s.name, "description": _tool_description(s), "inputSchema": s.input_schema(),
             "_meta": {"dora": {"name": s.name, "server": s.server, "module": s.module, "version": s.version,
                                "result_keys": list(s.result_keys)}}} for s in registry_tools()]
    assert len(listed) == len(want) == 108
    for got, exp in zip(listed, want):
        # the client's Tool model puts "type" first in the schema it parsed; the key order of the
        # schema itself is checked in the manifest test above
        assert json.dumps({k: got.get(k) for k in exp}, sort_keys=True) == json.dumps(exp, sort_keys=True), exp["name"]


# ── recording → run folder → import and score ───────────────────────────────

@pytest.mark.django_db
def test_recorded_session_imports_as_an_agent_run_and_scores(tmp_path):
    from evaluation.services.runs import import_run_dir
    from replay.services.runs import start_replay

    user, task = make_task()
    replay = start_replay(user, task)  # the gold: a succeeded replay of the head revision
    assert replay.status == "succeeded", replay.error
    assert replay.final_answer == {"damaged_pixels": 26766, "pixels_by_class": GT_COUNTS}

    run_dir = tmp_path / "run"
    recorder = SessionRecorder.for_task(run_dir, task, agent="live-agent")
    server = build_server(task, recorder=recorder)
    out = {}

    async def main():
        async with Client(server) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            out["n_tools"] = len(names)
            out["has_submit"] = SUBMIT_TOOL in names
            seg = await client.call_tool("seg_building_damage", {"pre_image_path": PRE, "post_image_path": POST})
            mask = obs_of(seg)["mask_path"]
            out["refused"] = await client.call_tool("ras_count_pixels", {"mask_path": "nope.png", "classes": [2]})
            await client.call_tool("ras_count_pixels", {"mask_path": mask, "classes": [2, 3]})
            out["submit"] = await client.call_tool(SUBMIT_TOOL, {"answer": {
                "damaged_pixels": 20000, "pixels_by_class": {"2": 26492, "3": 400}}})

    run_async(main)
    assert out["has_submit"] and out["n_tools"] == len(all_tools()) + 1
    assert out["refused"].is_error and not out["submit"].is_error

    lines = (run_dir / "t1_perception_and_assessment" / "benchmark.jsonl").read_text().splitlines()
    assert len(lines) == 1
    rec = json.loads(lines[0])
    assert rec["question_id"] == task.question_id == "florence_mcp01_task0"
    assert rec["task_scoped_question_id"] == "perception_and_assessment::florence_mcp01_task0"
    assert rec["sample_id"] == "florence_mcp01" and rec["error"] is None
    assert rec["studio_session"]["agent"] == "live-agent"
    traj = rec["trajectory"]
    assert [s["call"] for s in traj] == ["seg_building_damage(pre_image_path, post_image_path)",
                                         "ras_count_pixels(mask_path, classes)",
                                         "ras_count_pixels(mask_path, classes)"]
    assert traj[0]["args"] == {"pre_image_path": PRE, "post_image_path": POST}
    assert traj[0]["obs"]["tool"] == "seg.building_damage"
    assert set(traj[1]["obs"]) == {"error"} and "nope.png" in traj[1]["obs"]["error"]
    assert traj[2]["obs"]["counts"] == GT_COUNTS
    assert rec["predicted_answer"] == {"damaged_pixels": 20000, "pixels_by_class": {"2": 26492, "3": 400}}

    run = import_run_dir(user, run_dir, "live-agent")
    r = run.records.get()
    assert r.task_id == task.pk and r.dimension == "t1"
    # answer: damaged_pixels 20000 vs 26766: |Δ| = 6766 > 1 + 0.2·26766 = 5354.2 → 0;
    # pixels_by_class: "2" exact → 1, "3" 400 vs 274: |Δ| = 126 > 1 + 0.2·274 = 55.8 → 0; mean 0.5.
    # task score = (0 + 0.5) / 2 = 0.25.
    assert r.task_score == pytest.approx(0.25)
    assert r.field_scores == {"damaged_pixels": 0.0, "pixels_by_class": 0.5}
    # G = [seg.building_damage, ras.count_pixels], P = [seg.building_damage, ras.count_pixels, ras.count_pixels]
    # T-Any = |{seg, ras} ∩ P| / 2 = 1; T-Ord = LCS 2 / 2 = 1; T-EM = common prefix 2 / 2 = 1;
    # Eff = |G| / max(|P|, |G|) = 2/3; ParAcc (positional): step 0 both file names equal → 1;
    # step 1 is the refused call: mask_path "nope.png" matches the gold's symbolic
    # "<mask_path> from trajectory[0].obs" (any non-null value does), classes [2] ≠ [2, 3] → 1/2;
    # (1 + 1/2) / 2 = 0.75.
    assert (r.t_any, r.t_ord, r.t_em) == (pytest.approx(1.0), pytest.approx(1.0), pytest.approx(1.0))
    assert r.eff == pytest.approx(2 / 3, abs=1e-6)
    assert r.par_acc == pytest.approx(0.75)
    assert [m["score"] for m in r.step_matches] == [1.0, 0.5]


def test_recorder_keeps_other_records_and_marks_a_session_without_answer(tmp_path):
    meta = {"question_id": "s1_task0", "sample_id": "s1", "dimension": "t2", "question": "q?"}
    a = SessionRecorder(tmp_path, meta, agent="a")
    b = SessionRecorder(tmp_path, {**meta, "question_id": "s2_task0", "sample_id": "s2"})
    a.record_call("vec_buffer", {"vector_path": "x.geojson", "meter": 5}, {"tool": "vec.buffer", "buffer_path": "b.geojson"})
    b.record_call("calc_div", {"a": 1, "b": 0}, error="calc.div: boom")
    a.close()
    b.finish({"x": 1})
    path = tmp_path / "t2_spatial_relation_analysis" / "benchmark.jsonl"
    recs = {r["question_id"]: r for r in map(json.loads, path.read_text().splitlines())}
    assert set(recs) == {"s1_task0", "s2_task0"}
    assert recs["s1_task0"]["error"] == NO_ANSWER_ERROR and recs["s1_task0"]["predicted_answer"] is None
    assert recs["s1_task0"]["task_category"] == "spatial_relation_analysis"
    assert recs["s1_task0"]["trajectory"] == [{"call": "vec_buffer(vector_path, meter)",
                                               "args": {"vector_path": "x.geojson", "meter": 5},
                                               "obs": {"tool": "vec.buffer", "buffer_path": "b.geojson"}}]
    assert recs["s2_task0"]["trajectory"][0]["obs"] == {"error": "calc.div: boom"}
    assert recs["s2_task0"]["predicted_answer"] == {"x": 1} and recs["s2_task0"]["error"] is None
    assert call_text("seg_flood", {}) == "seg_flood()"


# ── stdio subprocess ─────────────────────────────────────────────────────────


@pytest.mark.django_db(transaction=True)
def test_mcp_serve_over_stdio(tmp_path):
    _, task = make_task()
    env = subprocess_env(tmp_path)
    run_dir = tmp_path / "run"
    params = StdioServerParameters(
        command=sys.executable, cwd=str(REPO), env=env,
        args=[str(REPO / "manage.py"), "mcp_serve", "--task", task.question_id, "--record", str(run_dir),
              "--agent", "stdio-agent", "--perception", "gt"],
    )
    out = {}

    async def main():
        with anyio.fail_after(60):
            async with Client(params) as client:
                out["tools"] = {t.name: t for t in (await client.list_tools()).tools}
                out["seg"] = await client.call_tool("seg_building_damage",
                                                    {"pre_image_path": PRE, "post_image_path": "/elsewhere/" + POST})

    run_async(main)
    assert len(out["tools"]) == len(all_tools()) + 1 and SUBMIT_TOOL in out["tools"]
    assert "ras_count_pixels" in out["tools"]
    seg = out["seg"]
    assert not seg.is_error, seg.content[0].text
    obs = obs_of(seg)
    assert obs["tool"] == "seg.building_damage"
    sessions = Path(settings.STUDIO_ARTIFACT_ROOT) / "sessions"
    assert any((p / obs["mask_path"]).is_file() for p in sessions.iterdir())
    rec = json.loads((run_dir / "t1_perception_and_assessment" / "benchmark.jsonl").read_text())
    assert [s["call"] for s in rec["trajectory"]] == ["seg_building_damage(pre_image_path, post_image_path)"]
    assert rec["trajectory"][0]["args"]["post_image_path"] == "/elsewhere/" + POST  # as sent
    # the client closed the session without studio_submit_answer
    assert rec["error"] == NO_ANSWER_ERROR and rec["studio_session"]["agent"] == "stdio-agent"
    assert rec["studio_session"]["perception_mode"] == "gt"


@pytest.mark.django_db(transaction=True)
def test_mcp_serve_starts_without_the_tools_numpy_celery_or_the_upper_apps(tmp_path):
    # the harness starts a server per tool call: up to its tool list, a server loads no tool module
    # (nor numpy), no Celery app and no app above releases (STUDIO_APP_SET=tool-server, set by
    # manage.py); run to the end of a stdio session whose client sends nothing (stdin at EOF). The
    # first start in a fresh STUDIO_VAR_DIR writes the tool manifest's cache from the registry
    # (so it loads the tools); the second reads it
    _, task = make_task()
    env = {**os.environ, **subprocess_env(tmp_path)}
    probe = ("import runpy, sys; sys.argv = ['manage.py', 'mcp_serve', '--task', sys.argv[1]]\n"
             "runpy.run_path('manage.py', run_name='__main__')\n"
             "import gc\nfrom django.conf import settings\n"
             "print(settings.APP_SET, gc.get_freeze_count() > 0, sorted(m for m in ('numpy', 'celery', 'studio.celery', 'kernel.tools.registry',"
             " 'kernel.tools.raster', 'torch', 'rasterio', 'evaluation.models', 'experiments.models') if m in sys.modules))\n")
    lines = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", probe, task.question_id], cwd=REPO, capture_output=True,
                              text=True, timeout=120, env=env, stdin=subprocess.DEVNULL)
        assert done.returncode == 0, done.stderr
        lines.append(done.stdout.strip().splitlines()[-1])
    # ... and Django's start is frozen for the cyclic GC (mcp_serve's handle: gc.freeze)
    assert lines == ["tool-server True ['kernel.tools.raster', 'kernel.tools.registry', 'numpy']",
                     "tool-server True []"]
    assert len(list((Path(env["STUDIO_VAR_DIR"]) / "cache").glob("tool-manifest-*.json"))) == 1
    assert f"108 tools for {task.question_id} on stdio" in done.stderr


def test_mcp_serve_help_is_printed_without_starting_django():
    # manage.py prints the command's help before Django starts (as evaluate_runs does): the app
    # registry is never populated and no model module is imported; the text is Django's own
    # (the same parser: the harness's --temp_dir spelling and the perception modes are listed)
    probe = ("import runpy, sys; sys.argv = ['manage.py', 'mcp_serve', '--help']\ntry:\n"
             "    runpy.run_path('manage.py', run_name='__main__')\nexcept SystemExit as e:\n    assert e.code == 0, e.code\n"
             "from django.apps import apps\n"
             "print(apps.ready, sorted(m for m in ('annotation.models', 'django.db.models', 'mcp') if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=60,
                          env={k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"})
    assert done.returncode == 0, done.stderr
    assert "--run-dir DIR, --temp_dir DIR" in done.stdout and "{model,gt,classical}" in done.stdout
    assert done.stdout.strip().splitlines()[-1] == "False []"


@pytest.mark.parametrize("command", sorted(set(runpy.run_path(str(REPO / "manage.py"), run_name="manage")
                                                ["HELP_WITHOUT_DJANGO"]) - {"mcp_serve"}))
def test_the_other_commands_listed_in_manage_py_print_their_help_without_starting_django(command):
    # every command manage.py lists in HELP_WITHOUT_DJANGO: exit 0, Django's usage line, apps not populated
    probe = (f"import runpy, sys; sys.argv = ['manage.py', {command!r}, '--help']\ntry:\n"
             "    runpy.run_path('manage.py', run_name='__main__')\nexcept SystemExit as e:\n    assert e.code == 0, e.code\n"
             "from django.apps import apps\nprint(apps.ready)\n")
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=60,
                          env={k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: manage.py {command} ") and done.stdout.strip().splitlines()[-1] == "False"


def test_manage_py_prints_the_help_of_every_project_command_without_starting_django():
    # every command module of the project's apps (*/management/commands/*.py, not the package's
    # __init__ nor a _private helper) is in HELP_WITHOUT_DJANGO under its own name and dotted path,
    # but evaluate_runs, which manage.py runs before Django starts for any arguments (manage.py)
    listed = runpy.run_path(str(REPO / "manage.py"), run_name="manage")["HELP_WITHOUT_DJANGO"]
    found = {f.stem: ".".join(f.relative_to(REPO).with_suffix("").parts)
             for f in REPO.glob("*/management/commands/*.py") if not f.stem.startswith("_")}
    assert found.pop("evaluate_runs") == "evaluation.management.commands.evaluate_runs"
    assert listed == found


@pytest.mark.django_db(transaction=True)
def test_mcp_serve_over_streamable_http_on_loopback(tmp_path):
    _, task = make_task()
    env = {**os.environ, **subprocess_env(tmp_path)}
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    run_dir = tmp_path / "run"
    log = open(tmp_path / "serve.log", "w+")
    proc = subprocess.Popen(
        [sys.executable, str(REPO / "manage.py"), "mcp_serve", "--task", task.question_id, "--transport", "http",
         "--port", str(port), "--record", str(run_dir)],
        cwd=str(REPO), env=env, stdout=log, stderr=subprocess.STDOUT)
    out = {}
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, (tmp_path / "serve.log").read_text()
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "server did not listen within 30 s"
                time.sleep(0.1)

        async def main():
            with anyio.fail_after(30):
                async with Client(f"http://127.0.0.1:{port}/mcp") as client:
                    out["n"] = len((await client.list_tools()).tools)
                    out["div"] = await client.call_tool("calc_div", {"a": 3, "b": 4})

        run_async(main)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
    assert out["n"] == len(all_tools()) + 1
    assert obs_of(out["div"])["ratio"] == 0.75
    assert f"http://127.0.0.1:{port}/mcp" in (tmp_path / "serve.log").read_text()
    rec = json.loads((run_dir / "t1_perception_and_assessment" / "benchmark.jsonl").read_text())
    assert rec["trajectory"] == [{"call": "calc_div(a, b)", "args": {"a": 3, "b": 4},
                                  "obs": {"tool": "calc.div", "ratio": 0.75, "a": 3.0, "b": 4.0}}]
    assert rec["error"] == NO_ANSWER_ERROR  # written when the server shut down
    # no --perception: the benchmark's protocol (model), stub answers without checkpoints
    assert rec["studio_session"]["perception_mode"] == "model"
    assert "perception model" in (tmp_path / "serve.log").read_text()


@pytest.mark.django_db
def test_model_perception_without_checkpoints_answers_the_benchmarks_stub(tmp_path, settings):
    """dora-format.md §e: without a checkpoint every seg.* tool returns
    ``{tool, status: "stub", note: "Replace this stub with a real model backend.", inputs, error}``,
    a normal observation (the agent sees no mask), and the recorded step keeps it."""
    settings.STUDIO_CHECKPOINT_DIR = ""
    _, task = make_task()
    recorder = SessionRecorder.for_task(tmp_path / "run", task, agent="a", perception_mode="model")
    server = build_server(task, recorder=recorder, perception_mode="model")
    seen = {}

    async def main():
        async with Client(server) as client:
            seen["seg"] = await client.call_tool("seg_building_damage",
                                                 {"pre_image_path": PRE, "post_image_path": POST})

    run_async(main)
    seg = seen["seg"]
    assert not seg.is_error
    obs = obs_of(seg)
    assert obs["status"] == "stub" and obs["tool"] == "seg.building_damage"
    assert obs["note"] == "Replace this stub with a real model backend."
    assert obs["inputs"] == {"pre_image_path": PRE, "post_image_path": POST}
    assert "seg_building_damage.safetensors" in obs["error"] and "mask_path" not in obs
    rec = json.loads((tmp_path / "run" / "t1_perception_and_assessment" / "benchmark.jsonl").read_text())
    assert rec["trajectory"][0]["obs"]["status"] == "stub"
    assert rec["studio_session"]["perception_mode"] == "model"
