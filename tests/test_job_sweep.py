"""Background jobs whose worker died (``studio.background``): a run zip import and a release export
killed with SIGKILL part-way are left ``running`` with their files; ``manage.py sweep_jobs`` marks
them failed with the reason, removes the files (the unpacked ``runs/<id>`` folder; the export's
staging folder and spool files) and a re-run is taken at once and completes.

As in ``test_crash_judge_export.py``, the jobs run in child processes on a file copy of the test
database (SQLite) or the test database itself (PostgreSQL), paused at a chosen point by a wrapper
script (fault injection in the child) and killed there.
"""
from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, ChildDatabase
from django.conf import settings
from support.children import child_env, manage
from support.judging import TASKS, run_zip
from support.populated import populate

from kernel.processes import host_tag

#: the child's preamble: Django set up, ``pause()`` tells the test and sleeps until killed
PREAMBLE = r"""
import os, sys, time, json
sys.path.insert(0, {repo!r})
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "studio.settings")
import django
django.setup()

def pause():
    print("PAUSED", flush=True)
    time.sleep(600)
"""

#: run import job ``job`` with the import paused after the zip was unpacked (the folder exists)
IMPORT_PAUSED = PREAMBLE + r"""
from evaluation.services import runs as services
services.import_run_dir = lambda *a, **kw: pause()
from evaluation.services.runs import execute_run_import
execute_run_import({job})
"""

#: re-run import job ``job`` inline (scored against the scoring examples' tasks); print its state
IMPORT_RERUN = PREAMBLE + r"""
from django.conf import settings
settings.STUDIO_JUDGE_RUNNER = "inline"
from django.contrib.auth import get_user_model
from evaluation.services import runs as services
real = services.import_run_dir
services.import_run_dir = lambda *a, **kw: real(*a, tasks_dir={tasks!r}, **kw)
from evaluation.models import RunImportJob
from evaluation.services.runs import rerun_run_import
user = get_user_model().objects.get(username={user!r})
rerun_run_import(user, RunImportJob.objects.get(pk={job}))
job = RunImportJob.objects.get(pk={job})
print(json.dumps([job.status, job.run.records.count() if job.run else None, job.error]))
"""

#: export release 1.0.0 with a pause inside a task file (the staging folder exists)
EXPORT_PAUSED = PREAMBLE + r"""
from releases.services import export
real_write = export.SampleArrayWriter.write
def write(self, sample):
    real_write(self, sample)
    self._fh.flush()
    pause()
export.SampleArrayWriter.write = write
from django.contrib.auth import get_user_model
from releases.models import Release
from releases.services.release_export import start_export
start_export(get_user_model().objects.get(username={user!r}), Release.objects.get(version="1.0.0"))
"""


def run_paused(script: str, env: dict, tmp_path: Path, name: str) -> subprocess.Popen:
    """Start ``script`` in a child and return it once it printed PAUSED (it sleeps there)."""
    path = tmp_path / f"{name}.py"
    path.write_text(script)
    proc = subprocess.Popen([sys.executable, str(path)], cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if line.strip() != "PAUSED":
        proc.kill()
        raise AssertionError((line, proc.stderr.read()[-3000:]))
    return proc


def kill(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL


def sweep(env: dict) -> list[dict]:
    out = subprocess.run(manage("sweep_jobs", "--json", env=env), cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)


@pytest.mark.django_db(transaction=True)
def test_an_import_killed_mid_way_is_failed_cleaned_and_rerun_at_once(tmp_path, maintainer):
    """The issue's attack: the process running an import (a web worker with the thread runner) is
    killed while it imports. The row says ``running`` with the child's tag and the unpacked
    ``runs/<id>`` folder exists; the sweep fails it at once (the pid is gone: no heartbeat wait)
    naming the reason and removes the folder; the re-run is accepted and scores agent_a's 12
    records (the scoring examples' README: twelve tasks)."""
    from evaluation.models import RunImportJob

    uploads = Path(settings.STUDIO_DATA_ROOT) / "uploads"
    uploads.mkdir(parents=True)
    archive = uploads / "agent_a.zip"
    archive.write_bytes(run_zip("qwen_AP").getvalue())
    job = RunImportJob.objects.create(archive=str(archive), filename="qwen_AP.zip", agent_name="qwen",
                                      created_by=maintainer, options={"release": "", "protocol": None})
    db = ChildDatabase(tmp_path)
    env = child_env(db, tmp_path)
    proc = run_paused(IMPORT_PAUSED.format(repo=str(REPO), job=job.pk), env, tmp_path, "import_paused")
    try:
        (status, worker, folder), = db.rows("select status, worker, folder from evaluation_runimportjob "
                                            "where id = %s", job.pk)
        assert (status, worker) == ("running", f"{proc.pid}.{host_tag()}")
        assert Path(folder).parent == Path(settings.STUDIO_DATA_ROOT) / "runs" and (Path(folder) / "qwen_AP").is_dir()
    finally:
        kill(proc)
    assert db.rows("select status from evaluation_runimportjob where id = %s", job.pk) == [("running",)]

    rows = sweep(env)
    mine = [r for r in rows if r["kind"] == "run-import"]
    assert mine == [{"kind": "run-import", "id": job.pk, "action": "failed",
                     "why": f"its worker process ({proc.pid}) is gone", "removed": [folder]}]
    (status, error), = db.rows("select status, error from evaluation_runimportjob where id = %s", job.pk)
    assert status == "failed" and error == f"the job's worker was lost (its worker process ({proc.pid}) is gone); run it again"
    assert not Path(folder).exists() and archive.is_file()  # the zip is kept for the re-run
    assert sweep(env) == []  # nothing left to sweep

    again = subprocess.run([sys.executable, "-c", IMPORT_RERUN.format(repo=str(REPO), tasks=str(TASKS), job=job.pk,
                                                                       user=maintainer.username)],
                           cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads(again.stdout.strip().splitlines()[-1]) == ["done", 12, ""]
    assert [p.name for p in (Path(settings.STUDIO_DATA_ROOT) / "runs").iterdir()] == \
        [Path(db.rows("select folder from evaluation_runimportjob where id = %s", job.pk)[0][0]).name]


@pytest.mark.django_db(transaction=True)
def test_an_export_killed_mid_way_is_failed_cleaned_and_exported_again(tmp_path, maintainer, settings):
    """The issue's attack: the process running a release export is killed part-way (inside a task
    file). Its ``job.json`` says ``running`` with the child's tag, beside the hidden staging folder
    and the spool files; the sweep fails it and leaves only ``job.json`` in its folder; a new
    export succeeds. (On a local data root; with a bucket: tests/test_release_export_bucket.py.)"""
    settings.STUDIO_STORAGE_URL = ""
    from releases.models import Release
    from releases.selectors import export_jobs, exports_dir
    from releases.services.release_export import start_export

    populate(maintainer)  # release 1.0.0, exported once in-process
    before = {j["id"] for j in export_jobs("1.0.0")}
    db = ChildDatabase(tmp_path)
    env = child_env(db, tmp_path)
    proc = run_paused(EXPORT_PAUSED.format(repo=str(REPO), user=maintainer.username), env, tmp_path, "export_paused")
    try:
        job, = [j for j in export_jobs("1.0.0") if j["id"] not in before]
        assert (job["status"], job["worker"]) == ("running", f"{proc.pid}.{host_tag()}")
        base = exports_dir("1.0.0") / job["id"]
        left = sorted(p.name for p in base.iterdir())
        assert any(n.startswith(".dora-1.0.0.tmp-") and not n.endswith(".questions") for n in left), left
        assert any(n.endswith(".questions") for n in left), left  # the manifest's spool
    finally:
        kill(proc)

    rows = [r for r in sweep(env) if r["kind"] == "release-export"]
    assert [(r["id"], r["action"], r["why"]) for r in rows] == [(job["id"], "failed", f"its worker process ({proc.pid}) is gone")]
    assert sorted(rows[0]["removed"]) == [n for n in left if n != "job.json"]
    assert sorted(p.name for p in base.iterdir()) == ["job.json"]
    swept = json.loads((base / "job.json").read_text())
    assert swept["status"] == "failed" and "the export's worker was lost (its worker process" in swept["error"]

    again = start_export(maintainer, Release.objects.get(version="1.0.0"))
    assert again["status"] == "succeeded" and again["id"] != job["id"]


# ── a job whose thread cannot reach the database ───────────────────────────────────────────────


class RefusedDatabase:
    """The database refuses this test's other connections while the block runs, for real:
    PostgreSQL ``ALTER DATABASE … ALLOW_CONNECTIONS false`` (a new connection fails with "not
    currently accepting connections", as with ``max_connections`` exhausted; the test's own open
    connection stays); SQLite an exclusive transaction of the test's connection (another
    connection fails with "database is locked" once its busy timeout, here cut from 20 s to
    0.3 s through ``monkeypatch``, has passed)."""

    def __init__(self, monkeypatch):
        from django.db import connection

        self.connection = connection
        connection.ensure_connection()
        if connection.vendor == "sqlite":
            monkeypatch.setitem(connection.settings_dict["OPTIONS"], "timeout", 0.3)

    def _alter(self, allow: bool) -> None:
        """``ALTER DATABASE`` from a connection to the server's ``postgres`` database (PostgreSQL
        refuses it on a connection to the database itself)."""
        import psycopg

        sd = self.connection.settings_dict
        with psycopg.connect(host=sd["HOST"] or None, port=sd["PORT"] or None, user=sd["USER"] or None,
                             password=sd["PASSWORD"] or None, dbname="postgres", autocommit=True) as admin:
            admin.execute(f'ALTER DATABASE "{sd["NAME"]}" ALLOW_CONNECTIONS {"true" if allow else "false"}')

    def __enter__(self):
        if self.connection.vendor == "postgresql":
            self._alter(False)
        else:
            self.connection.connection.execute("BEGIN EXCLUSIVE")
        return self

    def __exit__(self, *exc):
        if self.connection.vendor == "postgresql":
            self._alter(True)
        else:
            self.connection.connection.execute("COMMIT")


def _queued_import(maintainer, records=True):
    from evaluation.models import RunImportJob

    uploads = Path(settings.STUDIO_DATA_ROOT) / "uploads"
    uploads.mkdir(parents=True, exist_ok=True)
    archive = uploads / "agent_a.zip"
    archive.write_bytes(run_zip("qwen_AP", records=records).getvalue())
    return RunImportJob.objects.create(archive=str(archive), filename="qwen_AP.zip", agent_name="qwen",
                                       created_by=maintainer, options={"release": "", "protocol": None})


def _wait_for(predicate, what: str, timeout: float = 60.0):
    import time

    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


@pytest.mark.django_db(transaction=True)
def test_a_job_whose_thread_cannot_connect_ends_failed_not_queued(maintainer, settings, monkeypatch, caplog):
    """The issue's attack: more upload threads than connections; a thread that cannot connect
    crashed, and its crash handler needed the database too, so the job stayed "queued" for good.
    Here the thread runner's job meets a database that refuses it; connections come back while
    the crash is being written (on a fresh connection, retried): the job ends ``failed`` with the
    database's error, never ``queued``."""
    import logging

    from evaluation.services.runs import dispatch_run_import
    from studio import background

    settings.STUDIO_JUDGE_RUNNER = "thread"
    monkeypatch.setattr(background, "RECORD_BACKOFF_S", 0.2)  # 0.2, 0.4, 0.8, 1.6, 3.2 s between tries
    caplog.set_level(logging.WARNING, logger="studio.background")
    job = _queued_import(maintainer, records=False)
    with RefusedDatabase(monkeypatch):
        thread = dispatch_run_import(job.pk)
        _wait_for(lambda: any("not written (try 1 of" in r.getMessage() for r in caplog.records),
                  "the job's thread never tried to write its crash")
    thread.join(60)
    assert not thread.is_alive()
    job.refresh_from_db()
    assert job.status == "failed" and job.error.startswith("the job crashed: OperationalError: "), job.error


@pytest.mark.django_db(transaction=True)
def test_a_job_left_queued_by_an_unreachable_database_is_sent_again_by_the_sweep(maintainer, settings, monkeypatch,
                                                                                   caplog):
    """When the database refuses longer than the crash handler's tries, the job cannot be written
    at all: it stays ``queued`` and the log says it is left for the sweep. Once the database is
    back, the sweep (a queued job without a worker for ``stale_after`` seconds, here 0) sends it
    again and it completes: agent_a's 12 records (the scoring examples' README)."""
    import logging

    from evaluation.models import RunImportJob
    from evaluation.services import runs as services
    from evaluation.services.runs import dispatch_run_import, sweep_run_imports
    from studio import background

    settings.STUDIO_JUDGE_RUNNER = "thread"
    monkeypatch.setattr(background, "RECORD_ATTEMPTS", 2)
    monkeypatch.setattr(background, "RECORD_BACKOFF_S", 0.05)
    real = services.import_run_dir
    monkeypatch.setattr(services, "import_run_dir", lambda *a, **kw: real(*a, tasks_dir=TASKS, **kw))
    caplog.set_level(logging.WARNING, logger="studio.background")
    job = _queued_import(maintainer)
    with RefusedDatabase(monkeypatch):
        thread = dispatch_run_import(job.pk)
        thread.join(60)
    assert not thread.is_alive()
    assert any("the database stayed unreachable; the job is left for the sweep" in r.getMessage() for r in caplog.records)
    job.refresh_from_db()
    assert job.status == "queued"  # nothing could be written

    rows = sweep_run_imports(stale_after=0)
    assert [(r["id"], r["action"]) for r in rows] == [(job.pk, "requeued")]
    _wait_for(lambda: RunImportJob.objects.get(pk=job.pk).status in ("done", "failed"), "the re-sent job never ended")
    job.refresh_from_db()
    assert (job.status, job.run.records.count(), job.attempts) == ("done", 12, 1)


@pytest.mark.django_db(transaction=True)
def test_a_web_process_sweeps_every_kind_in_the_background_at_most_every_so_often(maintainer, settings):
    """``studio.wsgi`` connects :func:`studio.background.maybe_sweep` to ``request_started``: the
    first request of a process sweeps (on a thread), the next ones within
    STUDIO_JOB_SWEEP_EVERY_S do not. Jobs of a process of this host that has exited (its pid taken
    from a child that ended): a running import, a running judge job and a running export, all
    failed by that one sweep; a running judge job of another host with a fresh heartbeat is left.
    (The export's folder is written here as a local data root holds it: no bucket.)"""
    settings.STUDIO_STORAGE_URL = ""
    from django.core.signals import request_started
    from django.utils import timezone

    import studio.wsgi  # noqa: F401 — connects the sweep to request_started
    from evaluation.models import JudgeConfig, JudgeJob, RunImportJob
    from releases.selectors import export_job, exports_dir
    from studio import background

    try:
        assert any(receiver[0][0] == "studio.background.maybe_sweep" for receiver in request_started.receivers)
    finally:  # the test client sends request_started too: later tests must not sweep behind their back
        request_started.disconnect(dispatch_uid="studio.background.maybe_sweep")
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = f"{int(gone.stdout)}.{host_tag()}"
    now = timezone.now()
    imp = _queued_import(maintainer, records=False)
    RunImportJob.objects.filter(pk=imp.pk).update(status="running", worker=dead, heartbeat_at=now, started_at=now)
    cfg = JudgeConfig.objects.create(name="c", base_url="http://127.0.0.1:9/v1", model="m")
    judged = JudgeJob.objects.create(config=cfg, status="running", worker=dead, heartbeat_at=now)
    elsewhere = JudgeJob.objects.create(config=cfg, status="running", worker="4242.0000beef", heartbeat_at=now)
    base = exports_dir("9.9.9") / "abc123"
    base.mkdir(parents=True)
    (base / ".dora-9.9.9.tmp-0123456789").mkdir()
    (base / "job.json").write_text(json.dumps({"id": "abc123", "release": "9.9.9", "status": "running", "done": 85,
                                               "total": 305, "worker": dead, "created_at": now.isoformat()}))

    settings.STUDIO_JOB_SWEEP_EVERY_S = 60
    background._last_sweep[0] = 0.0  # this process has not swept yet
    thread = background.maybe_sweep()
    assert thread is not None
    thread.join(60)
    assert background.maybe_sweep() is None  # within the minute: no second sweep
    assert RunImportJob.objects.get(pk=imp.pk).status == "failed"
    assert [JudgeJob.objects.get(pk=j.pk).status for j in (judged, elsewhere)] == ["failed", "running"]
    assert JudgeJob.objects.get(pk=judged.pk).errors[-1]["kind"] == "worker_lost"
    assert export_job("9.9.9", "abc123")["status"] == "failed" and sorted(p.name for p in base.iterdir()) == ["job.json"]


@pytest.mark.django_db
def test_a_job_delivered_again_after_its_worker_died_is_taken_and_completes(maintainer, monkeypatch):
    """Celery delivers a killed pool process's job again (acks_late, reject_on_worker_lost): the
    import left ``running`` by a process of this host that has exited is taken by the new delivery
    (its half-unpacked folder removed) and ends ``done`` with agent_a's 12 records; one whose
    worker may be alive (another host, fresh heartbeat) is not taken twice."""
    from django.utils import timezone

    from evaluation.models import RunImportJob
    from evaluation.services import runs as services
    from evaluation.services.runs import execute_run_import

    real = services.import_run_dir
    monkeypatch.setattr(services, "import_run_dir", lambda *a, **kw: real(*a, tasks_dir=TASKS, **kw))
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    left = Path(settings.STUDIO_DATA_ROOT) / "runs" / "deadbeef0001"
    (left / "qwen_AP").mkdir(parents=True)
    live = _queued_import(maintainer)
    RunImportJob.objects.filter(pk=live.pk).update(status="running", worker="4242.0000beef", heartbeat_at=timezone.now())
    assert execute_run_import(live.pk).status == "running"  # not taken: it may still be running there
    job = _queued_import(maintainer)
    RunImportJob.objects.filter(pk=job.pk).update(status="running", worker=f"{int(gone.stdout)}.{host_tag()}",
                                                  heartbeat_at=timezone.now(), folder=str(left))
    job = execute_run_import(job.pk)
    assert (job.status, job.run.records.count(), job.attempts) == ("done", 12, 1)
    assert not left.exists() and job.folder != str(left)


def _in_another_thread(fn):
    """``fn()``'s value computed on a thread of its own (as a sweep or a page request would)."""
    import threading

    from django.db import connections

    out = []

    def run():
        try:
            out.append(fn())
        finally:
            connections.close_all()  # this thread's own

    t = threading.Thread(target=run)
    t.start()
    t.join(30)
    return out[0]


def test_a_job_being_claimed_counts_as_live_in_its_process():
    """``job_running(claim=...)`` lists the job as run by this process *before* the claim is
    written: a sweep or a page of the same process (another thread) that reads the claim sees a
    live job, never one whose thread "ended without finishing it". After the block the job is
    dead again to the others (a thread that ended without writing the end), and the claiming
    thread itself never counts as the live one (it decides whether to take a lost job over)."""
    from studio.background import job_running, worker_lost, worker_tag

    tag, ended = worker_tag(), "its worker thread in this process ended without finishing it"
    during_claim = []

    def claim():
        during_claim.append(_in_another_thread(lambda: worker_lost("probe", 7, tag, None)))
        during_claim.append(worker_lost("probe", 7, tag, None))  # the claiming thread's own view
        return True

    assert _in_another_thread(lambda: worker_lost("probe", 7, tag, None)) == ended
    with job_running("probe", 7, lambda: None, claim=claim) as claimed:
        assert claimed
        assert _in_another_thread(lambda: worker_lost("probe", 7, tag, None)) == ""
    assert during_claim == ["", ended]
    assert _in_another_thread(lambda: worker_lost("probe", 7, tag, None)) == ended


def test_a_failed_claim_leaves_the_job_to_the_thread_that_holds_it():
    """Two deliveries of one job in one process: the second's claim fails (the first holds the
    job); its block gets False and, once it is left, the job is still live for the others."""
    import threading

    from studio.background import job_running, worker_lost, worker_tag

    tag = worker_tag()
    holding, release = threading.Event(), threading.Event()

    def first():
        with job_running("probe", 8, lambda: None, claim=lambda: True):
            holding.set()
            release.wait(30)

    t = threading.Thread(target=first)
    t.start()
    try:
        assert holding.wait(30)
        with job_running("probe", 8, lambda: None, claim=lambda: False) as claimed:
            assert claimed is False
        assert _in_another_thread(lambda: worker_lost("probe", 8, tag, None)) == ""
    finally:
        release.set()
        t.join(30)
    assert _in_another_thread(lambda: worker_lost("probe", 8, tag, None)) != ""


@pytest.mark.django_db(transaction=True)
def test_an_import_read_right_after_its_claim_is_neither_stale_nor_swept(maintainer, monkeypatch):
    """The runs page and the web process's sweep run on other threads of the process that runs an
    import on the thread runner. Read in the instant after the job's claim (status running, this
    process's tag), the job is not stale (the page would stop following it) and the sweep leaves
    it (it would fail it and remove its folder); the import then ends ``done`` with agent_a's 12
    records (the scoring examples' README)."""
    from evaluation.models import RunImportJob
    from evaluation.services import runs as services

    real_claim, real_import = services._claim, services.import_run_dir
    monkeypatch.setattr(services, "import_run_dir", lambda *a, **kw: real_import(*a, tasks_dir=TASKS, **kw))
    seen = {}

    def claim(job_id, folder):
        taken = real_claim(job_id, folder)
        job = RunImportJob.objects.get(pk=job_id)
        seen["status"] = job.status
        seen["stale"] = _in_another_thread(lambda: services.is_stale(job))
        seen["swept"] = _in_another_thread(lambda: services.sweep_run_imports())
        seen["after"] = RunImportJob.objects.get(pk=job_id).status
        return taken

    monkeypatch.setattr(services, "_claim", claim)
    job = services.execute_run_import(_queued_import(maintainer).pk)
    assert seen == {"status": "running", "stale": False, "swept": [], "after": "running"}
    assert (job.status, job.run.records.count()) == ("done", 12)
