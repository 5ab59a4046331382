"""Crashed workers: ``manage.py judge`` and ``manage.py export_release`` killed with
SIGKILL part-way leave nothing half-done behind, and running them again gives the full result.

The commands run as subprocesses on a file copy of the (committed) test database, made with
SQLite's backup API like ``test_mcp.py`` does, and the test's data root. The judge talks to a
local OpenAI-compatible server on 127.0.0.1 that answers slowly, so the kill lands between
judgements; the export is paused at a chosen point (inside a task file, just before the final
rename) by a wrapper around ``manage.py`` and killed there.
"""
from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from conftest import REPO, SCORING_EXAMPLES, ChildDatabase, needs_shared
from support.children import child_env, manage
from support.judge_server import GOOD, completion
from support.populated import populate

KEY_ENV = "STUDIO_TEST_CRASH_JUDGE_KEY"


# ── the judge ──────────────────────────────────────────────────────────────────────────────────


class SlowJudge:
    """An OpenAI-compatible chat endpoint that answers every request with ``GOOD`` after ``delay`` s."""

    def __init__(self, delay: float):
        self.delay = delay
        self.answered = 0
        judge = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                self.rfile.read(int(self.headers.get("content-length") or 0))
                time.sleep(judge.delay)
                data = json.dumps(completion(GOOD)).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                judge.answered += 1

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def slow_judge():
    s = SlowJudge(delay=0.25)
    yield s
    s.close()


@pytest.mark.django_db(transaction=True)
def test_judge_killed_mid_batch_is_detected_and_rerun_completes(tmp_path, make_user, slow_judge):
    """agent_a's 12 records, one judgement each, one at a time (max_concurrency 1) at 0.25 s per
    answer; SIGKILL after 3 answers. The job is left ``running``; running the command again marks
    it failed (worker lost) and judges only what has no verdict: 12 judge verdicts in all, one per
    record, none twice, every call counted once."""
    from evaluation.models import JudgeConfig
    from evaluation.services.runs import import_run_dir

    user = make_user("imp", "maintainer")
    run = import_run_dir(user, needs_shared(SCORING_EXAMPLES / "runs" / "agent_a"), "agent_a", tasks_dir=needs_shared(SCORING_EXAMPLES / "tasks"))
    n_records = run.records.count()
    assert n_records == 12  # the scoring examples' README: twelve tasks
    JudgeConfig.objects.create(name="slow", base_url=slow_judge.base_url, model="judge-m", api_key_env=KEY_ENV,
                               max_concurrency=1)
    db = ChildDatabase(tmp_path)
    env = child_env(db, tmp_path)
    env[KEY_ENV] = "sk-test-crash-0123456789"
    cmd = manage("judge", "--config", "slow", "--run", str(run.pk), "--no-code", "--json", env=env)
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while slow_judge.answered < 3:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the judge made no 3 calls in 60 s"
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    (job_id, status, done), = db.rows("select id, status, done from evaluation_judgejob")
    assert status == "running" and 1 <= done < n_records  # killed part-way, the row still says running
    before = db.rows("select count(*) from evaluation_verdict where source = 'judge'")[0][0]
    # each answer is stored (verdict + call, one transaction) before the row counts it: the kill may
    # fall between the two, never inside the transaction
    assert done <= before <= done + 1
    assert db.rows("select count(*) from evaluation_judgecall")[0][0] == before

    slow_judge.delay = 0.0
    again = subprocess.run(manage("judge", "--config", "slow", "--run", str(run.pk), "--no-code", "--json",
                                  "--stuck-after", "0", env=env),
                           cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr[-2000:]
    # the killed process was of this host: its job is taken as lost at once (its pid is gone)
    assert f"job {job_id}: its worker was lost (its worker process" in again.stderr
    summary = json.loads(again.stdout)
    assert (summary["status"], summary["judgements"], summary["ok"], summary["cached"]) == (
        "done", n_records, n_records, before)
    old_status, old_errors = db.rows("select status, errors from evaluation_judgejob where id = %s", job_id)[0]
    assert old_status == "failed" and json.loads(old_errors)[-1]["kind"] == "worker_lost"
    per_record = db.rows("select record_id, count(*) from evaluation_verdict where source = 'judge' "
                         "group by record_id")
    assert len(per_record) == n_records and {c for _, c in per_record} == {1}
    assert db.rows("select count(*), count(distinct cache_key) from evaluation_judgecall "
                   "where status = 'ok'")[0] == (n_records, n_records)


@pytest.mark.django_db
def test_fail_stuck_judge_jobs_leaves_live_jobs_alone(make_user):
    """Only a running job whose last progress is older than the timeout is marked failed."""
    from datetime import timedelta

    from django.utils import timezone

    from evaluation.models import JudgeConfig, JudgeJob
    from evaluation.services.judge import fail_stuck_judge_jobs

    cfg = JudgeConfig.objects.create(name="c", base_url="http://127.0.0.1:9/v1", model="m")
    now = timezone.now()
    old = JudgeJob.objects.create(config=cfg, status="running", heartbeat_at=now - timedelta(seconds=1000))
    live = JudgeJob.objects.create(config=cfg, status="running", heartbeat_at=now - timedelta(seconds=10))
    done = JudgeJob.objects.create(config=cfg, status="done", heartbeat_at=now - timedelta(seconds=5000))
    assert fail_stuck_judge_jobs(900) == [old.pk]
    assert [JudgeJob.objects.get(pk=j.pk).status for j in (old, live, done)] == ["failed", "running", "done"]
    assert fail_stuck_judge_jobs(900) == []  # already failed: not again


# ── the release export ─────────────────────────────────────────────────────────────────────────

#: ``manage.py`` with a pause at one point of the export (fault injection: the process stops there
#: and tells the test on stdout, which then kills it).
PAUSED_MANAGE = r"""
import os, sys, time
sys.path.insert(0, {repo!r})
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "studio.settings")
import django
django.setup()
point = {point!r}

def pause():
    print("PAUSED", flush=True)
    time.sleep(600)

if point == "task-file":
    from releases.services import export
    real_write = export.SampleArrayWriter.write
    def write(self, sample):
        real_write(self, sample)
        self._fh.flush()  # a half-written task file on disk (in the staging folder)
        pause()
    export.SampleArrayWriter.write = write
elif point == "rename":
    from releases.services import release_export
    real_rename = release_export.os.rename
    def rename(src, dst):
        if ".tmp-" in str(src):
            pause()
        return real_rename(src, dst)
    release_export.os.rename = rename
from django.core.management import execute_from_command_line
execute_from_command_line(["manage.py", *sys.argv[1:]])
"""


def tree(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.django_db(transaction=True)
def test_export_killed_part_way_never_shows_a_partial_folder(tmp_path, maintainer):
    """The release (one task over the xBD tile, its two images) exported in-process is the
    reference. The command is killed while writing a task file and again just before the final
    rename: ``--out`` does not exist after either kill (only the hidden ``.out.tmp-…`` staging
    folder does); run again, the command writes a folder whose files are byte for byte the
    reference's (the manifest differs only in ``generated_at``)."""
    from releases.models import Release
    from releases.services.release_export import export_release

    populate(maintainer)
    release = Release.objects.get(version="1.0.0")
    ref = tmp_path / "ref"
    export_release(release, ref)
    db = ChildDatabase(tmp_path)
    env = child_env(db, tmp_path)
    out = tmp_path / "exports" / "dora-1.0.0"
    for point in ("task-file", "rename"):
        script = tmp_path / f"paused_{point}.py"
        script.write_text(PAUSED_MANAGE.format(repo=str(REPO), point=point))
        proc = subprocess.Popen([sys.executable, str(script), "export_release", "1.0.0", "--out", str(out)],
                                cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            line = proc.stdout.readline()  # blocks until the pause (or the end of the process)
            assert line.strip() == "PAUSED", (point, line, proc.stderr.read()[-2000:] if proc.poll() is not None else "")
            staging = [p for p in out.parent.iterdir() if p.name.startswith(".dora-1.0.0.tmp-")]
            assert staging, point  # the export is under way, under its temporary name
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert not out.exists(), point  # never a partial folder under the final name
    again = subprocess.run(manage("export_release", "1.0.0", "--out", str(out), env=env), cwd=REPO, env=env,
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr[-2000:]
    got, want = tree(out), tree(ref)
    assert set(got) == set(want) and len(want) >= 5  # 5 task files, 2 images, schemas, the manifest
    differ = [name for name in want if got[name] != want[name]]
    assert differ == ["studio_manifest.json"], differ
    strip = lambda p: {k: v for k, v in json.loads(p.read_text()).items() if k != "generated_at"}  # noqa: E731
    assert strip(out / "studio_manifest.json") == strip(ref / "studio_manifest.json")
