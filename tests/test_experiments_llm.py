"""Experiments end to end against the REAL model server (``conftest_llm``: llama-cpp-python serving
SmolLM2-135M-Instruct on 127.0.0.1), on a pilot of one real studio task (the xBD hurricane-florence
tile, ``test_mcp.make_task``: its gold is seg.building_damage then ras.count_pixels).

A 135M model plans badly, so these tests assert the pipeline, never the model's skill: the requests
reach the endpoint and the studio's tools, the trajectory and answer are recorded in the harness's
run folder, the folder is scored by ``evaluate_runs`` exactly as by the studio's import, a re-run is
answered by the cache, a worker killed mid-experiment resumes with only its unfinished questions and
the same records, a budget stops cleanly, a 429 storm is ridden out and a read timeout is never
re-sent. The server runs with the chat format and message shape ``docs/experiments.md`` chose by
measurement (``CHAT_FORMAT``).
"""
from __future__ import annotations

import http.server
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import REPO, ChildDatabase, requires_shared
from conftest_llm import start_llm_server
from support.children import child_env
from support.florence import FLORENCE
from support.mcp import make_task

from evaluation.scoring.cli import run as evaluate_runs
from experiments import harness, services
from experiments.models import Experiment, ModelCall
from kernel.taskfile import write_task_file

pytestmark = requires_shared(FLORENCE)

#: llama-cpp-python's chat format the tests serve with (docs/experiments.md, "Measured")
CHAT_FORMAT = "chatml-function-calling"
#: tool answers as user messages: that chat format drops tool messages (docs/experiments.md, "Measured")
TOOL_RESULTS = "user"
#: the server's context: also the bound of a runaway tool-call generation, which that chat format
#: does not stop at max_tokens (measured: 3 700 tokens, until the context was full)
N_CTX = 2048
#: completion tokens per model call: bounds every call to about a second of generation here
MAX_TOKENS = 48
#: recursion limit 6: at most 4 model calls and 3 tool rounds a question (harness.steps_left)
MAX_STEPS = 6
#: recursion limit 2 for the tests of several questions at once: at most 2 model calls and one
#: tool round a question (harness.steps_left), enough to show the pipeline, half the time
MAX_STEPS_AT_ONCE = 2
#: the judge's server context (tests/test_judge_llm_server.py): holds a holistic prompt at the
#: judge's bound of 1 byte a token
JUDGE_N_CTX = 16384


@pytest.fixture(scope="module")
def served():
    with start_llm_server(chat_format=CHAT_FORMAT, n_ctx=N_CTX) as s:
        yield s


@pytest.fixture
def inline(settings):
    settings.STUDIO_JUDGE_RUNNER = "inline"
    settings.STUDIO_EXPERIMENT_BACKOFF_S = 0.05
    settings.STUDIO_JOB_HEARTBEAT_S = 3600  # the run is in this thread: a second writer only meets SQLite's lock


class _started:
    """Run the experiment the block starts (its dispatch, on commit) at the block's end, in this
    thread (the inline runner); hooks the run itself registers (the leaderboard's bootstrap after
    an import) are left unrun: they would close the test's database connection."""

    def __init__(self, capture):
        self.capture = capture(execute=False)

    def __enter__(self):
        self.hooks = self.capture.__enter__()
        return self.hooks

    def __exit__(self, *exc):
        self.capture.__exit__(*exc)
        if exc[0] is None:
            for hook in list(self.hooks):
                hook()


def _pilot(base_url: str, model: str, *, repeats: int = 1, **cfg):
    from replay.services.runs import start_replay

    user, task = make_task()
    assert start_replay(user, task).status == "succeeded"
    config = services.save_config(user, name="smol", base_url=base_url, model=model, protocol="IF",
                                  max_tokens=MAX_TOKENS, max_steps=MAX_STEPS, tool_results=TOOL_RESULTS, **cfg)
    return user, task, config


def _comparable(record: dict) -> dict:
    """A record without what differs between two runs of the same answers (when, how long)."""
    return {k: v for k, v in record.items() if k not in ("timestamp", "elapsed_time")}


def _gold_folder(exp: Experiment, tmp_path: Path) -> Path:
    """The experiment's gold set as task files in the benchmark's layout (what evaluate_runs reads)."""
    gold = services.gold_of(exp)
    folder = tmp_path / "gold_tasks"
    folder.mkdir()
    from kernel.vocabulary import TASK_FILES

    for dim, samples in gold.samples.items():
        if samples:
            (folder / TASK_FILES[dim]).write_text(write_task_file(samples), encoding="utf-8")
    return folder


@pytest.mark.django_db
def test_an_experiment_reaches_the_tools_writes_the_harness_folder_and_scores_like_evaluate_runs(
        served, inline, tmp_path, django_capture_on_commit_callbacks):
    base_url, model = served
    user, task, config = _pilot(base_url, model)
    with _started(django_capture_on_commit_callbacks):
        exp = services.start_experiment(user, config, question_ids=[task.question_id])
    exp.refresh_from_db()
    assert exp.status == "done", (exp.error, exp.stop_reason)
    row = exp.questions.get()
    assert row.status in ("done", "error") and row.record is not None
    print("record:", json.dumps(row.record)[:3000])  # what the model did, for the log

    # every request kept; the first is the harness's IF prompt with only the two gold tools
    calls = list(ModelCall.objects.order_by("id"))
    assert len(calls) == row.model_calls >= 1 and row.cached_calls == 0
    first = calls[0].request["body"]
    (question,) = [q for _, q in services.questions_of(services.gold_of(exp))]
    assert first["messages"] == [{"role": "user", "content": harness.build_prompt(question, "IF")}]
    # IF: only the gold tools, in the servers' order (Analysis before Perception)
    assert [t["function"]["name"] for t in first["tools"]] == ["ras_count_pixels", "seg_building_damage"]
    assert first["max_tokens"] == MAX_TOKENS and first["seed"] == 0 and first["tool_choice"] == "auto"
    # every later request carries the conversation so far: assistant turns with content "" (never
    # null) and the tools' answers as user messages, the format chosen by measurement
    for call in calls[1:]:
        for m in call.request["body"]["messages"][1:]:
            assert m["role"] in ("assistant", "user") and m["content"] is not None
    # accounting: the experiment's tokens are the sum of the requests sent, read from the server's usage
    assert exp.prompt_tokens == sum(c.prompt_tokens for c in calls) == row.prompt_tokens > 0
    assert exp.completion_tokens == sum(c.completion_tokens for c in calls) == row.completion_tokens

    # the run folder in the harness's layout
    folder = services.run_folder(exp, 1)
    assert folder.name == "smollm2-135m-r1_IF"
    lines = (folder / "t1_perception_and_assessment" / "benchmark.jsonl").read_text().splitlines()
    (rec,) = [json.loads(line) for line in lines]
    assert _comparable(rec) == _comparable(row.record) and rec["question_id"] == "florence_mcp01_task0"
    traj_file = folder / "t1_perception_and_assessment" / "trajectories" / \
        "perception_and_assessment__florence_mcp01_task0_trajectory.json"
    assert json.loads(traj_file.read_text())["final_answer"] == rec["predicted_answer"]
    stats = json.loads((folder / "t1_perception_and_assessment" / "run_stats.json").read_text())
    assert stats["total"] == 1
    # every tool call the model made reached the studio's tools: its observation is a tool's answer
    for step in rec["trajectory"]:
        assert step["obs"] is not None

    # scored as an AgentRun against the pilot's gold, identically to evaluate_runs on the same folder
    (run,) = exp.runs.all()
    assert run.protocol == "IF" and run.agent.name == "smollm2-135m (smol v1)"
    # its accounting, for the leaderboard: the question's tokens and seconds; no price set, so no cost
    assert (run.prompt_tokens, run.completion_tokens, run.cost) == (row.prompt_tokens, row.completion_tokens, None)
    assert run.seconds == pytest.approx(row.seconds, abs=1e-6)
    out = evaluate_runs(folder, False, _gold_folder(exp, tmp_path), tmp_path / "eval.json")
    official = json.loads(out.read_text())
    assert run.dora_score == pytest.approx(official["dora_score"], abs=1e-9)
    (scored,) = official["full"]["t1"]["tasks"]
    assert (scored["sample_id"], scored["task_idx"]) == ("florence_mcp01", 0)
    assert run.records.get().task_score == pytest.approx(scored["task_score"], abs=1e-6)  # the file rounds to 6

    # a second experiment of the same configuration is answered by the cache: free and identical.
    # An endpoint error is never cached (resume must be able to ask again): when the question ended
    # in one (the runaway tool-call generation of this server can overflow its context: HTTP 400),
    # the second experiment takes every answer received from the cache and asks the refused request
    # again, which a real server may answer differently; the records then agree up to the error.
    with _started(django_capture_on_commit_callbacks):
        again = services.start_experiment(user, config, question_ids=[task.question_id])
    again.refresh_from_db()
    row2 = again.questions.get()
    assert again.status == "done"
    if not row.error:
        assert again.prompt_tokens == again.completion_tokens == again.cost == 0
        assert row2.cached_calls == row2.model_calls == row.model_calls
        assert _comparable(row2.record) == _comparable(row.record)
        assert ModelCall.objects.count() == len(calls)
    else:
        assert row2.cached_calls == row.model_calls  # every answer received, from the cache
        n = len(row.record["trajectory"])
        assert row2.record["trajectory"][:n] == row.record["trajectory"]
    # its run counts the tokens of every answer its question used, cache hits included: on the
    # leaderboard it is as expensive in tokens as the first, though this experiment sent nothing
    (run2,) = again.runs.all()
    assert (run2.prompt_tokens, run2.completion_tokens) == (row2.prompt_tokens, row2.completion_tokens)
    if not row.error:
        assert (run2.prompt_tokens, run2.completion_tokens) == (row.prompt_tokens, row.completion_tokens)


@pytest.mark.django_db
def test_an_experiment_with_a_judge_is_judged_by_the_same_server_and_queues_its_share_blind(
        served, inline, settings, client, make_user, django_capture_on_commit_callbacks):
    from evaluation.models import JudgeCall, JudgeConfig, JudgeJob, Verdict
    from evaluation.services.judge import run_judge_job
    from evaluation.services.queue import claim_next

    base_url, model = served
    settings.STUDIO_JUDGE_TIMEOUT_S = 600
    user, task, config = _pilot(base_url, model)
    # the judge: the same model served by the same code with the judge's context (this task's holistic
    # prompt is bounded at 7 755 tokens, 1 byte a token: more than the agent server's 2 048, and a
    # judge configuration refuses a prompt that may not fit), as tests/test_judge_llm_server.py
    # serves it; no response_format (llama.cpp's grammar sampling is very slow here), answers capped
    with start_llm_server(n_ctx=JUDGE_N_CTX) as (judge_url, judge_model):
        judge = JudgeConfig.objects.create(name="smol-judge", base_url=judge_url, model=judge_model,
                                           json_mode="none", max_tokens=MAX_TOKENS, context_tokens=JUDGE_N_CTX,
                                           max_concurrency=1)
        with _started(django_capture_on_commit_callbacks):
            exp = services.start_experiment(user, config, question_ids=[task.question_id], judge_config=judge,
                                            human_share=0.5)
        exp.refresh_from_db()
        assert exp.status == "done", (exp.error, exp.stop_reason)
        (run,) = exp.runs.all()
        (record,) = run.records.all()
        # the end queued one judge job over the run's one record (its dispatch, on commit, is left
        # unrun by _started: run here as the inline runner runs it) and half of one record:
        # ceil(0.5) = 1 record, 2 slots (STUDIO_HUMAN_VERDICTS_PER_RECORD)
        assert exp.followup_note == "" and exp.human_queued == {"records": 1, "slots": 2}
        job = JudgeJob.objects.get(pk=exp.judge_job_id)
        assert (job.config_id, job.record_ids, job.total, job.status) == (judge.pk, [record.pk], 1, "queued")
        job = run_judge_job(job.pk)
    assert job.status == JudgeJob.Status.DONE and job.done == 1 and job.errors == [], job.errors
    call = JudgeCall.objects.get(record=record, config=judge)
    assert call.raw_texts and call.tokens_in > 0  # the server answered the judge's prompt
    verdict = Verdict.objects.get(record=record, source="judge")
    assert verdict.judge_name.startswith("smol-judge v1@holistic")
    print("judge:", verdict.status, verdict.grade, call.tokens_in, call.latency_s, call.raw_texts[0][:300])
    # blind: the scorer who claims the queued record is shown no verdict of it (the judge's hidden)
    sam = make_user("sam", "scorer")
    assert claim_next(sam).record_id == record.pk
    client.force_login(sam)
    shown = client.get(f"/api/records/{record.pk}/").json()
    assert shown["verdicts"] == [] and shown["verdicts_hidden"] >= 1 and shown["agent"] is None


class _Storm(http.server.ThreadingHTTPServer):
    """A real local HTTP proxy: answers 429 to the first ``n_429`` requests, then forwards each
    request to the model server; counts what it saw."""

    def __init__(self, target: str, n_429: int):
        self.target, self.left, self.seen, self.lock = target, n_429, [], threading.Lock()
        super().__init__(("127.0.0.1", 0), _StormHandler)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _StormHandler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        with self.server.lock:
            storm = self.server.left > 0
            self.server.left -= 1
            self.server.seen.append(429 if storm else 200)
        if storm:
            self.send_response(429)
            self.send_header("Retry-After", "0")
            self.send_header("Content-Type", "application/json")
            out = b'{"error": {"type": "rate_limit_exceeded", "message": "slow down"}}'
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)
            return
        req = urllib.request.Request(self.server.target + self.path[len("/v1"):], data=body,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=600) as resp:
                out, status = resp.read(), resp.status
        except urllib.error.HTTPError as exc:
            out, status = exc.read(), exc.code
        except OSError:
            return  # the client gave up (its read timeout): nothing to answer
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)
        except OSError:
            pass


@pytest.fixture
def storm(served):
    servers = []

    def make(n_429: int) -> _Storm:
        s = _Storm(served[0], n_429)
        threading.Thread(target=s.serve_forever, daemon=True).start()
        servers.append(s)
        return s

    yield make
    for s in servers:
        s.shutdown()
        s.server_close()


@pytest.mark.django_db
def test_a_429_storm_is_ridden_out_and_a_read_timeout_is_never_re_sent(served, storm, inline,
                                                                      django_capture_on_commit_callbacks):
    proxy = storm(4)
    user, task, config = _pilot(proxy.base_url, served[1])
    with _started(django_capture_on_commit_callbacks):
        exp = services.start_experiment(user, config, question_ids=[task.question_id])
    exp.refresh_from_db()
    assert exp.status == "done"
    first = ModelCall.objects.order_by("id").first()
    assert first.attempts == 5  # four 429s, then the answer (STUDIO_EXPERIMENT_MAX_RETRIES is 6)
    assert proxy.seen[:5] == [429, 429, 429, 429, 200]

    # a request that gets no answer within its read timeout ends the question with that error and
    # is sent once: the server may still be generating, a second request would queue behind it
    slow = storm(0)
    cfg2 = services.save_config(user, name="impatient", base_url=slow.base_url, model=served[1], protocol="IF",
                                max_tokens=MAX_TOKENS, max_steps=MAX_STEPS, seed=7, request_timeout_s=0.05,
                                tool_results=TOOL_RESULTS)
    with _started(django_capture_on_commit_callbacks):
        exp2 = services.start_experiment(user, cfg2, question_ids=[task.question_id])
    exp2.refresh_from_db()
    row = exp2.questions.get()
    assert row.status == "error" and "no answer within 0.05 s (not re-sent" in row.error
    assert slow.seen == [200] and row.record["predicted_answer"].startswith("Error: no answer within")
    # an errored question is re-run on resume (here it errs again the same way)
    with _started(django_capture_on_commit_callbacks):
        services.resume_experiment(user, exp2)
    row.refresh_from_db()
    assert row.attempts == 2 and slow.seen == [200, 200]


@pytest.mark.django_db
def test_a_budget_stops_the_experiment_cleanly_with_a_clear_state(served, inline, django_capture_on_commit_callbacks):
    base_url, model = served
    user, task, config = _pilot(base_url, model, budget_tokens=1, price_prompt_per_m=2.0,
                                price_completion_per_m=8.0)
    with _started(django_capture_on_commit_callbacks):
        exp = services.start_experiment(user, config, question_ids=[task.question_id], repeats=2)
    exp.refresh_from_db()
    call = ModelCall.objects.get()  # the budget (1 token) is spent by the first request; none is sent after it
    assert exp.status == "stopped" and exp.stop_reason == (
        f"budget reached: {call.prompt_tokens + call.completion_tokens} tokens of 1")
    # cost: prompt × 2 + completion × 8 per million tokens, worked out from the server's usage
    assert exp.cost == pytest.approx((call.prompt_tokens * 2.0 + call.completion_tokens * 8.0) / 1e6)
    # the question whose next request was refused is pending again (the first may have finished
    # when the model answered at once); nothing was scored
    statuses = list(exp.questions.order_by("id").values_list("status", flat=True))
    assert statuses in (["pending", "pending"], ["done", "pending"], ["error", "pending"]) and not exp.runs.exists()
    from notifications.models import Notification

    note = Notification.objects.get(user=user, event_type="experiment.stopped")
    assert note.url == f"/experiments/{exp.pk}/" and "budget reached" in note.text
    # resume: answers already received come from the cache (free); the next request is refused again
    with _started(django_capture_on_commit_callbacks):
        services.resume_experiment(user, exp)
    exp.refresh_from_db()
    assert exp.status == "stopped" and ModelCall.objects.count() == 1
    assert exp.questions.filter(cached_calls__gte=1).exists() or statuses[0] != "pending"


def _child_env(tmp_path: Path, db: ChildDatabase) -> dict:
    return {**child_env(db, tmp_path), "STUDIO_JUDGE_ALLOWED_HOSTS": "127.0.0.1",
            "STUDIO_EXPERIMENT_BACKOFF_S": "0.05"}


def _manage(env, *args, timeout=600):
    out = subprocess.run([sys.executable, str(REPO / "manage.py"), "experiment", "--as-user", "ada", *args],
                         cwd=str(REPO), env=env, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, out.stderr[-3000:]
    return out


@pytest.mark.django_db(transaction=True)
def test_a_worker_killed_mid_experiment_resumes_only_its_unfinished_questions_with_the_same_records(served, tmp_path):
    base_url, model = served
    user, task, config = _pilot(base_url, model)
    db = ChildDatabase(tmp_path, "experiments.sqlite3")
    env = _child_env(tmp_path, db)
    worker = subprocess.Popen([sys.executable, str(REPO / "manage.py"), "experiment", "--as-user", "ada", "start",
                               "--config", "smol", "--tasks", task.question_id, "--repeats", "2"],
                              cwd=str(REPO), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              start_new_session=True)
    sql = ("SELECT q.repeat, q.status, q.model_calls FROM experiments_experimentquestion q "
           "ORDER BY q.repeat")
    # generous: with two model servers on this 2-core machine a call generated 0.3 tokens/s (seen once)
    deadline = time.monotonic() + 900
    try:
        while True:  # kill the worker while repeat 2 is in flight, after repeat 1 finished
            rows = db.rows(sql)
            if len(rows) == 2 and rows[0][1] in ("done", "error") and rows[1][1] == "running":
                first_status = rows[0][1]
                break
            assert worker.poll() is None, f"the worker ended before it was killed: {rows}"
            assert time.monotonic() < deadline, rows
            time.sleep(0.05)
    finally:
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()
    (exp_id,) = db.rows("SELECT id FROM experiments_experiment")[0]
    assert db.rows("SELECT status FROM experiments_experiment")[0][0] == "running"  # nothing wrote its end
    sent_before = db.rows("SELECT COUNT(*) FROM experiments_modelcall")[0][0]

    _manage(env, "resume", str(exp_id))  # the sweep sees the dead worker; only repeat 2 runs again
    status = json.loads(_manage(env, "status", str(exp_id)).stdout)
    assert status["status"] == "done" and len(status["runs"]) == 2
    attempts = dict(db.rows("SELECT repeat, attempts FROM experiments_experimentquestion"))
    # resume re-runs what never finished (repeat 2) and what errored: repeat 1 too when its question
    # ended in an error (the small model's tool calls sometimes make the server answer 500)
    assert attempts == {1: 1 if first_status == "done" else 2, 2: 2}, (first_status, attempts)
    # what the killed worker had received is not asked for again: it comes from the cache
    assert db.rows("SELECT cached_calls FROM experiments_experimentquestion WHERE repeat = 2")[0][0] >= sent_before - \
        db.rows("SELECT model_calls FROM experiments_experimentquestion WHERE repeat = 1")[0][0]

    # an uninterrupted run of the same configuration gives the same records where every answer it
    # needs is cached. An endpoint error is never cached (resume must be able to ask again), so a
    # repeat that ended in one asks its refused request again, and a real server may answer it
    # differently (llama.cpp reuses the previous prompt's KV cache: the logits are not bit-identical
    # across server states): there the records agree up to the error.
    _manage(env, "start", "--config", "smol", "--tasks", task.question_id, "--repeats", "2")
    rows = db.rows("SELECT experiment_id, repeat, record, model_calls, cached_calls FROM experiments_experimentquestion")
    records = {(eid, rep): _comparable(json.loads(rec)) for eid, rep, rec, _m, _c in rows}
    received = {(eid, rep): m for eid, rep, _rec, m, _c in rows}  # answers used (a refusal is none)
    cached = {(eid, rep): c for eid, rep, _rec, _m, c in rows}
    other = max(e for e, _ in records)
    assert other != exp_id
    for rep in (1, 2):
        resumed, fresh = records[(exp_id, rep)], records[(other, rep)]
        # every answer the resumed repeat received comes from the cache, and nothing more can
        if resumed["error"] is None:
            assert fresh == resumed, rep
            assert cached[(other, rep)] == received[(other, rep)] == received[(exp_id, rep)], rep
        else:  # the refused request was asked again: refused again, or answered and the agent went on
            assert fresh["trajectory"][:len(resumed["trajectory"])] == resumed["trajectory"], rep
            assert cached[(other, rep)] == received[(exp_id, rep)], rep
    if all(records[(exp_id, rep)]["error"] is None for rep in (1, 2)):
        assert db.rows("SELECT prompt_tokens, cost FROM experiments_experiment WHERE id = %s", other) == [(0, 0.0)]


# ------------------------------------------------------------------ several questions at once


def _tasks(n: int):
    """The Florence T1 task (``florence_mcp01_task0``) and copies under ``florence_mcp02`` … ``mcp0<n>``,
    each replayed (its gold); returns ``(user, [question ids])``."""
    from annotation.services.content import revision_content
    from annotation.services.tasks import create_task
    from replay.services.runs import start_replay

    user, task = make_task()
    tasks = [task] + [create_task(user, task.event, dimension="t1", content=revision_content(task.head),
                                  sample_id=f"florence_mcp{i:02d}") for i in range(2, n + 1)]
    for t in tasks:
        assert start_replay(user, t).status == "succeeded"
    return user, [t.question_id for t in tasks]


def _most_at_once(rows) -> int:
    """The most questions running at the same instant, from the rows' [started_at, finished_at]."""
    edges = sorted([(r.started_at, 1) for r in rows] + [(r.finished_at, -1) for r in rows],
                   key=lambda e: (e[0], e[1]))  # an end before a start at the same instant
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


def _same_answers(first, second) -> None:
    """``second`` (a later experiment of the same requests) used the cache for every answer
    ``first`` received, and has the same records, except where ``first`` ended in an endpoint
    error: an error is never cached, so ``second`` asked that request again and a real server may
    answer it differently (llama.cpp is not bit-deterministic across server states; see the
    killed-worker test): there the records agree up to the error."""
    for a, b in zip(first, second, strict=True):
        assert (a.repeat, a.question_id) == (b.repeat, b.question_id)
        if not a.error:
            assert b.cached_calls == b.model_calls == a.model_calls, a.question_id
            assert _comparable(b.record) == _comparable(a.record), a.question_id
        else:
            assert b.cached_calls == a.model_calls, a.question_id
            assert b.record["trajectory"][:len(a.record["trajectory"])] == a.record["trajectory"], a.question_id


@pytest.mark.django_db(transaction=True)  # the job's threads have their own connections: committed rows
def test_two_questions_run_at_once_and_a_second_experiment_one_at_a_time_answers_from_the_cache(served, settings):
    base_url, model = served
    settings.STUDIO_JUDGE_RUNNER = "inline"  # the job in this thread; its questions in two threads of its own
    settings.STUDIO_EXPERIMENT_BACKOFF_S = 0.05
    user, qids = _tasks(3)
    two = services.save_config(user, name="smol", base_url=base_url, model=model, protocol="IF",
                               max_tokens=MAX_TOKENS, max_steps=MAX_STEPS_AT_ONCE, tool_results=TOOL_RESULTS,
                               max_concurrency=2)
    exp = services.start_experiment(user, two, question_ids=qids)
    exp.refresh_from_db()
    assert exp.status == "done", (exp.error, exp.stop_reason)
    rows = list(exp.questions.order_by("repeat", "id"))
    assert [r.question_id for r in rows] == qids and all(r.status in ("done", "error") for r in rows)
    print("at once:", [(r.question_id, r.started_at.time(), r.finished_at.time(), r.model_calls, r.error[:80])
                       for r in rows])
    # two in flight at once, never three: the first two questions started together, the third when one ended
    assert _most_at_once(rows) == 2
    assert max(rows[0].started_at, rows[1].started_at) < min(rows[0].finished_at, rows[1].finished_at)
    assert rows[2].started_at >= min(rows[0].finished_at, rows[1].finished_at)
    # every answer received was sent once and kept; the experiment's tokens are those requests'
    calls = list(ModelCall.objects.all())
    assert len(calls) == sum(r.model_calls for r in rows) and all(r.cached_calls == 0 for r in rows)
    assert exp.prompt_tokens == sum(c.prompt_tokens for c in calls) > 0
    # scored: one run, one record per question, the folder holding them in question order
    (run,) = exp.runs.all()
    assert sorted(run.records.values_list("question_id", flat=True)) == qids and run.dora_score is not None
    lines = (services.run_folder(exp, 1) / "t1_perception_and_assessment" / "benchmark.jsonl").read_text()
    assert [json.loads(line)["question_id"] for line in lines.splitlines()] == qids

    # the same configuration one question at a time (version 2: max_concurrency is not part of a
    # request, so every request is the same): every answer from the cache, the same records
    one = services.save_config(user, name="smol", base_url=base_url, model=model, protocol="IF",
                               max_tokens=MAX_TOKENS, max_steps=MAX_STEPS_AT_ONCE, tool_results=TOOL_RESULTS,
                               max_concurrency=1)
    again = services.start_experiment(user, one, question_ids=qids)
    again.refresh_from_db()
    assert again.status == "done"
    rows2 = list(again.questions.order_by("repeat", "id"))
    assert _most_at_once(rows2) == 1
    _same_answers(rows, rows2)
    if not any(r.error for r in rows):
        assert (again.prompt_tokens, again.completion_tokens) == (0, 0) and ModelCall.objects.count() == len(calls)


@pytest.mark.django_db(transaction=True)
def test_a_budget_reached_by_one_question_stops_the_others_in_flight(served, settings):
    base_url, model = served
    settings.STUDIO_JUDGE_RUNNER = "inline"
    settings.STUDIO_EXPERIMENT_BACKOFF_S = 0.05
    user, qids = _tasks(2)
    config = services.save_config(user, name="smol", base_url=base_url, model=model, protocol="IF",
                                  max_tokens=MAX_TOKENS, max_steps=MAX_STEPS_AT_ONCE, tool_results=TOOL_RESULTS,
                                  max_concurrency=2, budget_tokens=1)
    exp = services.start_experiment(user, config, question_ids=qids, repeats=2)
    exp.refresh_from_db()
    calls = list(ModelCall.objects.all())
    spent = sum(c.prompt_tokens + c.completion_tokens for c in calls)
    # the first answer spends the 1-token budget; each of the two questions in flight could have
    # sent its first request before any answer came back, none after: at most 2 requests, and the
    # budget overshot by at most the request in flight beside the one that crossed it
    assert exp.status == "stopped" and 1 <= len(calls) <= 2
    assert (exp.prompt_tokens + exp.completion_tokens) == spent
    n = int(re.fullmatch(r"budget reached: (\d+) tokens of 1", exp.stop_reason).group(1))
    assert 0 < n <= spent
    # every question stopped unfinished is pending again (one may have finished when the model
    # answered at once without a tool call), nothing was scored, and every request sent is one of
    # the questions' (a stopped question keeps its counts until it runs again)
    rows = list(exp.questions.order_by("repeat", "id"))
    assert all(r.status == "pending" or r.record is not None for r in rows), [(r.status, r.error) for r in rows]
    assert sum(1 for r in rows if r.status == "pending") >= len(rows) - 2 and not exp.runs.exists()
    assert sum(r.model_calls - r.cached_calls for r in rows) == len(calls)
    from notifications.models import Notification

    assert Notification.objects.filter(user=user, event_type="experiment.stopped").count() == 1


# ------------------------------------------------------------------ the experiments queue on a real worker


@pytest.mark.celery_worker
def test_an_experiment_runs_end_to_end_on_a_worker_of_the_experiments_queue(served, settings, celery_worker):
    """The Celery task ``experiments.run`` is routed to the queue ``<STUDIO_QUEUE_PREFIX>experiments``;
    with a broker (CI's PostgreSQL configuration) a worker started here with ``-Q`` that queue (CI's
    worker consumes every queue of the run but this one: ``-X``, .ci/run) runs the experiment, its
    questions two at a time in threads of the worker's process, on the test's database and data root.
    Without a broker the same task runs eagerly in this process and the same is asserted
    (tests/conftest_celery.py)."""
    from studio.background import worker_tag
    from studio.celery import app

    base_url, model = served
    queue = f"{settings.STUDIO_QUEUE_PREFIX}experiments"  # the workload's queue (studio/settings.py)
    assert app.amqp.router.route({}, "experiments.run", (1,), {})["queue"].name == queue
    settings.STUDIO_JUDGE_RUNNER = "celery"  # dispatched as the Celery task, whatever the broker
    settings.STUDIO_EXPERIMENT_BACKOFF_S = 0.05
    with celery_worker.eager():  # the gold replays in this process (a worker of the default queue need not run)
        user, qids = _tasks(2)
    config = services.save_config(user, name="smol", base_url=base_url, model=model, protocol="IF",
                                  max_tokens=MAX_TOKENS, max_steps=MAX_STEPS_AT_ONCE, tool_results=TOOL_RESULTS,
                                  max_concurrency=2)
    worker = celery_worker.start_own_worker(queue) if celery_worker.real else None
    exp = services.start_experiment(user, config, question_ids=qids)
    deadline = time.monotonic() + 900
    while True:
        exp.refresh_from_db()
        if exp.status in ("done", "failed", "cancelled", "stopped"):
            break
        assert time.monotonic() < deadline, f"experiment {exp.pk} still {exp.status}{celery_worker._log_tail()}"
        time.sleep(0.2)
    assert exp.status == "done", (exp.error, exp.stop_reason, celery_worker._log_tail())
    if worker is not None:  # run by the pool process of the worker started here, not by this process
        (child,) = celery_worker.pool_children(worker)
        assert exp.worker.partition(".")[0] == str(child)
    else:
        assert exp.worker == worker_tag()
    rows = list(exp.questions.order_by("id"))
    assert [r.question_id for r in rows] == qids and all(r.status in ("done", "error") for r in rows)
    assert _most_at_once(rows) == 2  # the two questions at once, in the worker's threads
    assert sum(r.model_calls for r in rows) == ModelCall.objects.count() >= 2
    (run,) = exp.runs.all()
    assert sorted(run.records.values_list("question_id", flat=True)) == qids and run.dora_score is not None
    folder = services.run_folder(exp, 1)
    assert (folder / "t1_perception_and_assessment" / "benchmark.jsonl").read_text().count("\n") == 2
