"""Several questions of an experiment in flight at once (``ExperimentConfig.max_concurrency``):
the setting is a versioned field of a configuration (service, API, form, command line), and the job
runs that many questions in workers of its own (processes forked from it on PostgreSQL, threads on
SQLite: ``services._workers_are_processes``), each with its own database connections and work
folder, the folder written whole, and one question's stop (or death) ending the others. Each CI
configuration runs these tests on its database: the threads on SQLite, the processes on PostgreSQL.

No model server here: the questions are answered from the request cache (``ModelCall``), filled
by hand with an answer in the shape llama-cpp-python's server gives (marked below), so the threads'
work is deterministic. The same machinery against the real SmolLM2 server is in
``test_experiments_llm.py``. Tests that run several at once use a transactional database: a worker's
own connection sees only committed rows (inside a transaction the job runs one question at a time).
A worker process inherits the test's monkeypatches (it is forked), which the crash tests use.
"""
from __future__ import annotations

import json
import os
import signal
import time

import pytest
from conftest import requires_shared
from django.core.management import call_command
from django.core.management.base import CommandError
from support.florence import FLORENCE
from support.mcp import GT_COUNTS, make_task

from experiments import harness, services
from experiments.models import Experiment, ExperimentConfig, ExperimentQuestion, ModelCall
from kernel.errors import InvalidInput
from replay.mcp_server import build_server

URL = "http://127.0.0.1:9/v1"  # an allowed test host (tests/conftest.py); nothing is sent there
Q1, Q2 = "florence_mcp01_task0", "florence_mcp02_task0"
#: the Florence task's gold answer (tests/support/mcp.py: 26,492 + 274 = 26,766 pixels)
RIGHT = {"damaged_pixels": 26766, "pixels_by_class": GT_COUNTS}

needs_florence = requires_shared(FLORENCE)
#: the tests of worker processes (their pids, a kill -9, torch after a fork) need a server database
needs_processes = pytest.mark.skipif(not services._workers_are_processes(),
                                     reason="the job's workers are threads: SQLite, or STUDIO_EXPERIMENT_WORKER_PROCESSES=0 "
                                            "(services._workers_are_processes)")


def _config(user, **kw):
    return services.save_config(user, name=kw.pop("name", "smol"), base_url=URL, model="smollm2-135m",
                                protocol="IF", **kw)


@pytest.mark.django_db
def test_questions_at_once_is_a_versioned_setting_of_the_service_api_form_and_command_line(client, maintainer):
    # the default keeps the one-at-a-time run of every version saved before the setting existed
    assert _config(maintainer).max_concurrency == 1
    v2 = _config(maintainer, max_concurrency=4)
    assert (v2.version, v2.max_concurrency) == (2, 4)
    assert ExperimentConfig.objects.get(name="smol", version=1).max_concurrency == 1  # unchanged
    for bad in (0, 17, "two"):  # 1 to 16 (services.MAX_CONCURRENCY)
        with pytest.raises(InvalidInput, match="^max_concurrency: "):
            _config(maintainer, max_concurrency=bad)
    client.force_login(maintainer)
    body = {"name": "api", "base_url": URL, "model": "m"}
    r = client.post("/api/experiment-configs/", body, content_type="application/json")
    assert r.status_code == 201 and r.json()["max_concurrency"] == 1
    r = client.post("/api/experiment-configs/", dict(body, max_concurrency=3), content_type="application/json")
    assert r.status_code == 201 and r.json()["max_concurrency"] == 3
    r = client.post("/api/experiment-configs/", dict(body, max_concurrency=17), content_type="application/json")
    assert r.status_code == 400 and "max_concurrency" in json.dumps(r.json())
    # the form on /experiments/ (blank: the default)
    page = client.get("/experiments/").content.decode()
    assert 'name="max_concurrency"' in page
    form = {"name": "form", "base_url": URL, "model": "m", "protocol": "AP", "max_concurrency": "2"}
    assert client.post("/experiments/configs/", form).status_code == 302
    assert client.post("/experiments/configs/", dict(form, max_concurrency="")).status_code == 302
    assert list(ExperimentConfig.objects.filter(name="form").order_by("version")
                .values_list("max_concurrency", flat=True)) == [2, 1]
    # the command line
    call_command("experiment", "--as-user", maintainer.username, "config", "--name", "cli", "--base-url", URL,
                 "--model", "m", "--max-concurrency", "5")
    assert ExperimentConfig.objects.get(name="cli").max_concurrency == 5
    with pytest.raises(CommandError, match="max_concurrency"):
        call_command("experiment", "--as-user", maintainer.username, "config", "--name", "cli", "--base-url", URL,
                     "--model", "m", "--max-concurrency", "0")


def test_a_stop_met_by_one_question_is_raised_in_the_others_with_its_kind_and_reason():
    stop = services.StopSignal()
    stop.check()  # nothing yet
    stop.set(services.BudgetReached("budget reached: 12 tokens of 10"))
    stop.set(services.Cancelled())  # the first stop stays
    with pytest.raises(services.BudgetReached, match="^budget reached: 12 tokens of 10$"):
        stop.check()
    crashed = services.StopSignal()
    crashed.set_crash(RuntimeError("boom"))
    crashed.set(services.BudgetReached("later"))  # after a crash nothing else is recorded
    assert crashed.stop is None and isinstance(crashed.crash, RuntimeError)
    with pytest.raises(services.Cancelled):  # the others stop as on a cancel; the job re-raises the crash
        crashed.check()


def _two_tasks():
    """The Florence T1 task (``florence_mcp01_task0``) and a copy under ``florence_mcp02``, both replayed."""
    from annotation.services.content import revision_content
    from annotation.services.tasks import create_task
    from replay.services.runs import start_replay

    user, task = make_task()
    other = create_task(user, task.event, dimension="t1", content=revision_content(task.head), sample_id="florence_mcp02")
    assert start_replay(user, task).status == "succeeded" and start_replay(user, other).status == "succeeded"
    return user, task, other


def _cache_answers(exp: Experiment, tmp_path, answer: dict) -> None:
    """Put in the cache, for every question and repeat of ``exp``, the answer to its first request
    (the harness's prompt with the offered tools, as ``run_question`` builds it): an assistant
    message ``<Answer>answer</Answer>`` without tool calls, in llama-cpp-python's response shape
    (written here, not recorded), 100 prompt and 20 completion tokens."""
    cfg = exp.config
    url = cfg.base_url.rstrip("/") + "/chat/completions"
    gold = services.gold_of(exp)
    for _, question in services.questions_of(gold):
        server = build_server(gold.task_by_qid[question["question_id"]], work_dir=tmp_path / "probe",
                              perception_mode=cfg.perception_mode)
        tools = services.offered_tools(server, question, cfg.protocol)
        messages = [{"role": "user", "content": harness.build_prompt(question, cfg.protocol)}]
        for repeat in range(1, exp.repeats + 1):
            body = services.chat_body(cfg, messages, tools, repeat)
            response = {"id": f"chatcmpl-{question['question_id']}-{repeat}", "object": "chat.completion",
                        "model": cfg.model, "choices": [{"index": 0, "finish_reason": "stop", "message": {
                            "role": "assistant", "content": f"<Answer>{json.dumps(answer)}</Answer>"}}],
                        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}}
            ModelCall.objects.create(key=services.request_key(url, body), request={"url": url, "body": body},
                                     response=response, prompt_tokens=100, completion_tokens=20)


@pytest.fixture
def queued(monkeypatch):
    """Start experiments left queued (their dispatch after commit does nothing): the test runs
    each with ``services.run_experiment`` in its own thread, as a worker would."""
    monkeypatch.setattr(services, "dispatch_experiment", lambda exp_id: None)

    def start(user, cfg, repeats: int) -> Experiment:
        return services.start_experiment(user, cfg, question_ids=[Q1, Q2], repeats=repeats)

    return start


@pytest.mark.django_db(transaction=True)
@needs_florence
def test_two_questions_run_at_once_in_two_workers_and_the_folder_holds_every_record_in_question_order(
        tmp_path, queued, monkeypatch):
    user, task, other = _two_tasks()
    cfg = _config(user, max_concurrency=2)
    exp = queued(user, cfg, 2)
    _cache_answers(exp, tmp_path, RIGHT)
    real, seen = services.run_question, tmp_path / "pids"

    def noting_the_process(exp, row, *args, **kwargs):  # each question's process id, one line each
        with open(seen, "a") as fh:
            fh.write(f"{os.getpid()}\n")
        # the first two questions meet before either answers: one waits (up to 30 s) until the
        # other has started, so a worker that starts late cannot find the first question already
        # over; workers that ran one after the other would miss the meeting and fail below
        deadline = time.monotonic() + 30
        while len(seen.read_text().split()) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        return real(exp, row, *args, **kwargs)

    monkeypatch.setattr(services, "run_question", noting_the_process)
    exp = services.run_experiment(exp.pk)
    exp.refresh_from_db()
    assert exp.status == "done" and exp.done == exp.total == 4, (exp.error, exp.stop_reason)
    rows = list(exp.questions.order_by("repeat", "id"))
    # every question answered by its one cached request: nothing sent, nothing spent
    assert [(r.status, r.model_calls, r.cached_calls, r.attempts) for r in rows] == [("done", 1, 1, 1)] * 4
    assert (exp.prompt_tokens, exp.completion_tokens, exp.cost) == (0, 0, 0.0)
    # two worker processes, neither of them this one (the job's), ran the four questions; on SQLite
    # two threads of this process did
    pids = seen.read_text().split()
    if services._workers_are_processes():
        assert len(pids) == 4 and len(set(pids)) == 2 and str(os.getpid()) not in pids
    else:
        assert pids == [str(os.getpid())] * 4
    # the first two questions were taken at once (they met above), so each started before the
    # other ended
    first, second = rows[0], rows[1]
    assert max(first.started_at, second.started_at) < min(first.finished_at, second.finished_at)
    # each repeat's folder holds both records, in question order, whichever ended first
    for repeat in (1, 2):
        lines = (services.run_folder(exp, repeat) / "t1_perception_and_assessment" / "benchmark.jsonl").read_text()
        assert [json.loads(line)["question_id"] for line in lines.splitlines()] == [Q1, Q2]
    # scored like a run made one at a time: both questions right in both repeats
    runs = list(exp.runs.order_by("id"))
    assert len(runs) == 2 and all(r.dora_score is not None for r in runs)
    assert sorted(rec.task_score for run in runs for rec in run.records.all()) == [1.0] * 4

    # the same configuration one at a time gives the same records (all from the cache)
    one = _config(user, max_concurrency=1)  # version 3: the same requests (max_concurrency is not sent)
    assert services.chat_body(one, [], [], 1) == services.chat_body(cfg, [], [], 1)
    again = services.run_experiment(queued(user, one, 2).pk)
    assert again.status == "done"

    def comparable(e):
        return [{k: v for k, v in r.record.items() if k not in ("timestamp", "elapsed_time")}
                for r in e.questions.order_by("repeat", "id")]

    assert comparable(again) == comparable(exp)


@pytest.mark.django_db(transaction=True)
@needs_florence
def test_a_cancel_met_by_the_questions_in_flight_puts_them_back_and_starts_no_other(
        tmp_path, queued):
    user, task, other = _two_tasks()
    exp = queued(user, _config(user, max_concurrency=2), 2)
    _cache_answers(exp, tmp_path, RIGHT)
    # a cancel asked for while the job starts (as cancel_experiment does for a running one): every
    # question taken meets it before its first model call
    Experiment.objects.filter(pk=exp.pk).update(cancel_requested=True)
    exp = services.run_experiment(exp.pk)
    exp.refresh_from_db()
    assert (exp.status, exp.stop_reason, exp.done) == ("cancelled", "cancelled", 0)
    rows = list(exp.questions.order_by("repeat", "id"))
    assert {r.status for r in rows} == {ExperimentQuestion.Status.PENDING}
    # at most the two questions in flight were started (one, when the first stop came before the
    # second thread took its question); the other repeat's questions never started
    assert [r.attempts for r in rows[2:]] == [0, 0] and 1 <= sum(r.attempts for r in rows[:2]) <= 2
    assert all(r.model_calls == 0 for r in rows) and not exp.runs.exists()
    # resume runs them all, two at once, from the cache
    services.resume_experiment(user, exp)
    exp = services.run_experiment(exp.pk)
    assert exp.status == "done" and exp.questions.filter(status="done").count() == 4


def _q2_left_running_and_resume_finishes(user, exp: Experiment, monkeypatch, real) -> None:
    """After a job that failed on repeat 1's Q2: that question is left ``running``, every other one
    ``done`` or ``pending``; with ``run_question`` back to ``real``, resume runs all four to ``done``."""
    rows = {(r.repeat, r.question_id): r for r in exp.questions.all()}
    assert rows.pop((1, Q2)).status == "running"
    assert {r.status for r in rows.values()} <= {"done", "pending"}
    monkeypatch.setattr(services, "run_question", real)
    services.resume_experiment(user, exp)
    exp = services.run_experiment(exp.pk)
    assert exp.status == "done" and exp.questions.filter(status="done").count() == 4


@pytest.mark.django_db(transaction=True)
@needs_florence
def test_a_question_that_crashes_stops_the_others_and_the_job_fails_saying_why(tmp_path, queued, monkeypatch):
    from experiments.jobs import run as celery_run

    user, task, other = _two_tasks()
    exp = queued(user, _config(user, max_concurrency=2), 2)
    _cache_answers(exp, tmp_path, RIGHT)
    real = services.run_question

    def crashes_on_q2(exp, row, *args, **kwargs):  # a bug in the studio's code, not the endpoint's answer
        if row.question_id == Q2:
            raise RuntimeError("a bug")
        return real(exp, row, *args, **kwargs)

    monkeypatch.setattr(services, "run_question", crashes_on_q2)
    celery_run(exp.pk)  # the Celery task's body: a crash is written on the row (studio.background.run_guarded)
    exp.refresh_from_db()
    assert (exp.status, exp.error) == ("failed", "the job crashed: RuntimeError: a bug")
    # the crashed question stays running (as a crash one at a time leaves it); the other worker's
    # question ended or went back to pending at its next model call: none is left running
    _q2_left_running_and_resume_finishes(user, exp, monkeypatch, real)


@pytest.mark.django_db(transaction=True)
@needs_florence
@needs_processes
def test_a_question_worker_killed_with_sigkill_fails_the_job_saying_so_and_resume_finishes(tmp_path, queued, monkeypatch):
    user, task, other = _two_tasks()
    exp = queued(user, _config(user, max_concurrency=2), 2)
    _cache_answers(exp, tmp_path, RIGHT)
    real = services.run_question

    def killed_on_q2(exp, row, *args, **kwargs):  # the kernel's OOM killer, or an operator's kill -9
        if row.question_id == Q2 and row.repeat == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(exp, row, *args, **kwargs)

    monkeypatch.setattr(services, "run_question", killed_on_q2)
    from experiments.jobs import run as celery_run

    celery_run(exp.pk)
    exp.refresh_from_db()
    # the worker that ran Q2 is w1 or w0, whichever took it (Q1 of repeat 1 went to the other)
    assert exp.status == "failed" and exp.error in {
        f"the job crashed: RuntimeError: the question worker experiment-{exp.pk}-w{i} died (signal 9)" for i in (0, 1)}
    _q2_left_running_and_resume_finishes(user, exp, monkeypatch, real)  # as a worker killed mid-question leaves it


@pytest.mark.django_db(transaction=True)
@needs_florence
@needs_processes
def test_the_question_workers_die_with_a_job_process_killed_with_sigkill(tmp_path, queued, monkeypatch):
    """A Celery worker killed with ``kill -9`` mid-experiment takes its question processes with
    it (PR_SET_PDEATHSIG): none goes on writing rows that a resumed job will own."""
    import multiprocessing

    user, task, other = _two_tasks()
    exp = queued(user, _config(user, max_concurrency=2), 1)
    pids = tmp_path / "pids"

    def waits(exp, row, *args, **kwargs):  # a question waiting on a slow model: its process id noted
        with open(pids, "a") as fh:
            fh.write(f"{os.getpid()}\n")
        time.sleep(120)
        raise AssertionError("still alive after two minutes")

    monkeypatch.setattr(services, "run_question", waits)
    job = multiprocessing.get_context("fork").Process(target=services.run_experiment, args=(exp.pk,))
    from django.db import connections

    connections.close_all()  # the job process opens its own
    job.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (not pids.exists() or len(pids.read_text().split()) < 2):
        time.sleep(0.1)
    workers = [int(p) for p in pids.read_text().split()]
    assert len(workers) == 2 and job.pid not in workers

    def alive(pid: int) -> bool:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                return fh.read().split(")")[-1].split()[0] != "Z"  # a zombie is dead, not yet reaped
        except FileNotFoundError:
            return False

    assert all(alive(pid) for pid in workers)
    os.kill(job.pid, signal.SIGKILL)
    job.join(10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(alive(pid) for pid in workers):
        time.sleep(0.05)
    assert not any(alive(pid) for pid in workers)
    # both questions stay running, as a killed worker leaves them (the sweep fails the job; resume reruns them)
    assert sorted(exp.questions.values_list("status", flat=True)) == ["running", "running"]


@pytest.mark.django_db(transaction=True)
@needs_florence
@needs_processes
def test_a_worker_forked_after_the_job_used_torch_threads_still_runs_torch(tmp_path, queued, monkeypatch):
    """torch's OpenMP thread pool does not survive a fork: a matrix product in a worker forked
    from a process that had run one on two threads hangs (measured: killed after 60 s) unless
    the worker sets torch to one thread, which ``services._question_worker`` does."""
    import torch

    user, task, other = _two_tasks()
    exp = queued(user, _config(user, max_concurrency=2), 1)
    _cache_answers(exp, tmp_path, RIGHT)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    a = torch.ones(600, 600)
    assert float((a @ a)[0, 0]) == 600.0  # the pool of two threads now exists in this (the job's) process
    real = services.run_question

    def with_torch(exp, row, *args, **kwargs):  # model-mode perception's work, in the worker's main thread
        signal.alarm(30)  # a watchdog: a hung worker dies of SIGALRM and the job fails saying so
        try:
            product = float((a @ a)[0, 0])
        finally:
            signal.alarm(0)
        assert product == 600.0
        return real(exp, row, *args, **kwargs)

    monkeypatch.setattr(services, "run_question", with_torch)
    try:
        exp = services.run_experiment(exp.pk)
    finally:
        torch.set_num_threads(before)
    exp.refresh_from_db()
    assert (exp.status, exp.error, exp.done) == ("done", "", 2)


def test_the_workers_are_processes_on_postgresql_with_the_setting_and_threads_otherwise(monkeypatch, settings):
    from studio import settings as studio_settings

    # on by default, off with STUDIO_EXPERIMENT_WORKER_PROCESSES=0
    if os.environ.get("STUDIO_EXPERIMENT_WORKER_PROCESSES") is None:
        assert studio_settings.STUDIO_EXPERIMENT_WORKER_PROCESSES is True
    settings.STUDIO_EXPERIMENT_WORKER_PROCESSES = True
    vendor = {"vendor": "postgresql"}
    monkeypatch.setattr(services, "connections", {"default": type("C", (), vendor)()})
    assert services._workers_are_processes()
    vendor["vendor"] = "sqlite"  # SQLite's lock state does not survive a fork (services._workers_are_processes)
    monkeypatch.setattr(services, "connections", {"default": type("C", (), vendor)()})
    assert not services._workers_are_processes()
    vendor["vendor"] = "postgresql"
    settings.STUDIO_EXPERIMENT_WORKER_PROCESSES = False  # STUDIO_EXPERIMENT_WORKER_PROCESSES=0
    assert not services._workers_are_processes()


def test_a_process_with_cuda_initialised_runs_its_questions_one_at_a_time(monkeypatch):
    cfg = ExperimentConfig(max_concurrency=4)
    monkeypatch.setattr(services, "connections", {"default": type("C", (), {"in_atomic_block": False})()})
    assert services.concurrency_of(cfg, 10) == 4
    monkeypatch.setattr(services, "_cuda_initialised", lambda: True)  # model mode ran here on a GPU
    assert services.concurrency_of(cfg, 10) == 1


@pytest.mark.django_db
def test_inside_a_transaction_the_questions_run_one_at_a_time_in_the_caller(maintainer):
    """A test's (or an inline caller's) transaction holds rows no other connection sees: the job
    runs its questions in the calling thread there, whatever the configuration says."""
    cfg = _config(maintainer, max_concurrency=4)
    assert services.concurrency_of(cfg, 10) == 1
    cfg.max_concurrency = 1
    assert services.concurrency_of(cfg, 10) == 1


@pytest.mark.django_db(transaction=True)
def test_outside_a_transaction_the_job_runs_as_many_questions_as_the_configuration_allows(maintainer):
    cfg = _config(maintainer, max_concurrency=4)
    # at most the configuration's number, at most the questions left
    assert (services.concurrency_of(cfg, 10), services.concurrency_of(cfg, 3), services.concurrency_of(cfg, 1)) == (
        4, 3, 1)


def test_each_worker_has_its_own_work_folder_in_the_harness_layout(tmp_path):
    exp = Experiment(pk=7, folder=str(tmp_path / "experiments" / "7"),
                     config=ExperimentConfig(model="smollm2-135m", protocol="IF"))
    assert services.work_dir_of(exp, 2, "a/b_task0", 3) == (
        tmp_path / "experiments" / "7" / "smollm2-135m-r2_IF" / "workers" / "w3" / "tmp" / "a_b_task0")


def test_a_tool_server_call_from_a_thread_with_a_running_event_loop_still_answers():
    """The job may run where the thread already has an event loop running (an async caller; in the
    suite, Playwright's sync API leaves one in the main thread after a browser test), where
    ``anyio.run`` refuses to start another: the call then runs in a thread of its own and answers
    the same (here 6 * 7 = 42, and the thread it ran in is not the caller's)."""
    import asyncio
    import threading

    from experiments.services import _run_async

    async def answer():
        return 6 * 7, threading.get_ident()

    assert _run_async(answer)[0] == 42  # no loop here: in this thread

    async def caller():
        return _run_async(answer), threading.get_ident()

    # the caller's loop runs in a thread of its own: this one may already hold Playwright's
    got = {}
    loop_thread = threading.Thread(target=lambda: got.update(result=asyncio.run(caller())))
    loop_thread.start()
    loop_thread.join(30)
    (value, inner), outer = got["result"]
    assert value == 42 and inner != outer
