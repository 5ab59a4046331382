"""Run zips uploaded with a bucket (``STUDIO_STORAGE_URL``, ``studio/storage.py``), against a real
SeaweedFS (``tests/support/seaweedfs.py``; no mock of S3): the runs page stores the zip as the object
``uploads/<random>.zip`` and nothing on the web process's disk; the worker downloads it to its own
scratch (``uploads/scratch/<worker tag>/<job id>.zip``), imports and scores it, removes the scratch and,
once done, the object; the unpacked run folder is uploaded to ``runs/<random>/…`` (the record pages of
other machines read its predicted polygon files: ``evaluation.run_folders``). A second "machine" (a
child process with its own empty data root, sharing only the database and the bucket) imports an
upload made here, after a first worker there was killed mid-import, swept, and the job re-run.

What the checks compare: the object's bytes and the uploaded zip's (same SHA-256); the records of a
run uploaded with a bucket and of the same zip uploaded without one (same question ids and the same
scores, field by field: the same scorer on the same files); agent_a's 12 records (the scoring
examples' README: twelve tasks).
"""
from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, ChildDatabase
from support.children import child_env, manage
from support.judging import TASKS, run_zip
from support.seaweedfs import machine_env

from evaluation.models import AgentRun, RunImportJob
from evaluation.run_folders import folder_key
from evaluation.services import runs as services
from kernel.processes import host_tag
from studio import storage

pytestmark = pytest.mark.urls("support.judging")

#: the scores a record carries (RunRecord's columns), compared between two imports of one zip
SCORE_FIELDS = ("question_id", "dimension", "task_score", "field_scores", "n_scored_fields", "t_any", "t_ord",
                "t_em", "par_acc", "eff", "error")


@pytest.fixture
def scored(monkeypatch, settings):
    """The inline runner, scoring against the scoring examples' tasks (no studio tasks here)."""
    settings.STUDIO_JUDGE_RUNNER = "inline"
    real = services.import_run_dir
    monkeypatch.setattr(services, "import_run_dir", lambda *a, **kw: real(*a, tasks_dir=TASKS, **kw))


def _scores(run: AgentRun) -> list[tuple]:
    return [tuple(json.dumps(v, sort_keys=True) if isinstance(v, dict) else v for v in row)
            for row in run.records.order_by("question_id").values_list(*SCORE_FIELDS)]


def _not_runs(keys: list[str]) -> list[str]:
    """The keys but the unpacked run folders' (``runs/…``: uploaded when an import succeeds)."""
    return [k for k in keys if not k.startswith("runs/")]


def _local_files(root: Path, folder: str) -> list[str]:
    base = root / folder
    return sorted(str(p.relative_to(root)) for p in base.rglob("*") if p.is_file()) if base.exists() else []


@pytest.mark.django_db
def test_an_upload_with_a_bucket_lives_there_and_scores_as_the_same_zip_without_one(
        client, maintainer, scored, settings, bucket, seaweedfs, monkeypatch, django_capture_on_commit_callbacks):
    root = Path(settings.STUDIO_DATA_ROOT)
    data = run_zip("qwen_AP").getvalue()
    seen = {}
    real_download = storage.download_file

    def spy(name, path):  # the real download runs; the spy notes where the scratch copy went
        real_download(name, path)
        seen[name] = (Path(path), hashlib.sha256(Path(path).read_bytes()).hexdigest())

    monkeypatch.setattr(storage, "download_file", spy)
    client.force_login(maintainer)
    with django_capture_on_commit_callbacks() as after_commit:
        r = client.post("/runs/", {"archive": run_zip("qwen_AP"), "agent": "qwen", "queue_share": "0"})
    assert r.status_code == 302, r.content.decode()[:2000]
    job = RunImportJob.objects.get()
    # stored as the object uploads/<16 hex>.zip with the uploaded bytes; nothing on the web's disk
    assert job.status == "queued" and re.fullmatch(r"uploads/[0-9a-f]{16}\.zip", job.archive), job.archive
    assert seaweedfs.keys(bucket) == [job.archive]
    body = seaweedfs.client().get_object(Bucket=bucket, Key=job.archive)["Body"].read()
    assert hashlib.sha256(body).hexdigest() == hashlib.sha256(data).hexdigest()
    assert _local_files(root, "uploads") == []

    for cb in after_commit:
        cb()
    job.refresh_from_db()
    assert job.status == "done" and job.error == "" and job.run.records.count() == 12
    scratch, digest = seen[job.archive]
    assert scratch == root / "uploads" / "scratch" / services.worker_tag() / f"{job.pk}.zip"
    assert digest == hashlib.sha256(data).hexdigest()
    # the scratch is removed, the object deleted (the job succeeded); the unpacked run folder stays
    # here and is uploaded, file by file, to its keys (for the record pages of other machines)
    assert _local_files(root, "uploads") == [] and not (root / "uploads" / "scratch" / services.worker_tag()).exists()
    assert seaweedfs.keys(bucket) == _local_files(root, "runs") and len(_local_files(root, "runs")) == 5
    assert Path(job.folder).parent == root / "runs" and Path(job.run.source_dir).is_dir()

    # the same zip without a bucket: today's local file, and the same scores
    settings.STUDIO_STORAGE_URL = ""
    with django_capture_on_commit_callbacks() as after_commit:
        r = client.post("/runs/", {"archive": run_zip("qwen_AP"), "agent": "qwen-local", "queue_share": "0"})
    assert r.status_code == 302
    local = RunImportJob.objects.order_by("-id").first()
    assert Path(local.archive).parent == root / "uploads" and Path(local.archive).read_bytes() == data
    for cb in after_commit:
        cb()
    local.refresh_from_db()
    assert local.status == "done" and not Path(local.archive).exists()
    assert _scores(local.run) == _scores(job.run) and len(_scores(job.run)) == 12
    assert local.run.dora_score == job.run.dora_score


@pytest.mark.django_db
def test_a_failed_bucket_import_keeps_its_object_for_the_rerun_and_a_gone_object_is_said(
        client, maintainer, scored, settings, bucket, seaweedfs, monkeypatch, django_capture_on_commit_callbacks):
    root = Path(settings.STUDIO_DATA_ROOT)
    real = services.import_run_dir
    calls = []

    def flaky(*a, **kw):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("disk vanished")  # not an import error: a crash
        return real(*a, **kw)

    monkeypatch.setattr(services, "import_run_dir", flaky)
    client.force_login(maintainer)
    with django_capture_on_commit_callbacks() as after_commit:
        client.post("/runs/", {"archive": run_zip("qwen_AP"), "agent": "qwen", "queue_share": "0"})
    after_commit[0]()
    job = RunImportJob.objects.get()
    assert (job.status, job.error) == ("failed", "the job crashed: RuntimeError: disk vanished")
    assert seaweedfs.keys(bucket) == [job.archive] and _local_files(root, "uploads") == []  # kept; scratch gone
    with django_capture_on_commit_callbacks() as again:
        assert client.post(f"/runs/imports/{job.pk}/rerun/").status_code == 302
    again[0]()
    job.refresh_from_db()
    assert (job.status, job.attempts, job.run.records.count()) == ("done", 2, 12)
    assert _not_runs(seaweedfs.keys(bucket)) == []

    # an upload whose object is removed behind the studio's back: the job fails saying so, and the
    # re-run is refused (409) as for a local zip that is gone
    with django_capture_on_commit_callbacks() as after_commit:
        client.post("/runs/", {"archive": run_zip("qwen_AP"), "agent": "qwen2", "queue_share": "0"})
    gone = RunImportJob.objects.order_by("-id").first()
    seaweedfs.client().delete_object(Bucket=bucket, Key=gone.archive)
    after_commit[0]()
    gone.refresh_from_db()
    assert gone.status == "failed" and gone.error == (
        f"qwen_AP.zip: the stored zip is gone from the bucket ({gone.archive}); upload the run again")
    r = client.post(f"/api/run-imports/{gone.pk}/rerun/")
    assert r.status_code == 409 and "its stored zip is gone; upload the run again" in r.json()["detail"]
    assert _local_files(root, "uploads") == []


@pytest.mark.django_db
def test_hostile_zips_are_refused_as_before_and_nothing_reaches_the_bucket(client, maintainer, settings, bucket,
                                                                         seaweedfs):
    client.force_login(maintainer)
    evil = run_zip("x_AP", {"x_AP/../../escape.jsonl": "{}"})
    r = client.post("/runs/", {"archive": evil, "agent": "x"})
    assert r.status_code == 400 and ("entry &#x27;x_AP/../../escape.jsonl&#x27;: paths must stay inside the run "
                                     "folder") in r.content.decode()
    settings.STUDIO_RUN_UPLOAD_MAX_MB = 0.001  # about 1 kB: agent_a's files are larger
    r = client.post("/runs/", {"archive": run_zip("big"), "agent": "x"})
    assert r.status_code == 400 and "unpacks to more than" in r.content.decode()
    assert seaweedfs.keys(bucket) == [] and not RunImportJob.objects.exists()


def test_a_zip_over_the_multipart_threshold_goes_up_and_comes_down_whole(bucket, seaweedfs, tmp_path):
    """``upload_fileobj`` of 9 MiB (boto3: two parts of 8 MiB and 1 MiB) and ``download_file`` of it
    (ranged GETs): the same SHA-256 both ways; a missing key raises ``FileNotFoundError`` and writes
    nothing."""
    import io

    data = hashlib.sha256(b"seed").digest() * (9 * 2**20 // 32)  # 9 MiB
    storage.upload_fileobj("uploads/big.zip", io.BytesIO(data))
    head = seaweedfs.client().head_object(Bucket=bucket, Key="uploads/big.zip")
    assert head["ContentLength"] == 9 * 2**20 and head["ETag"].strip('"').endswith("-2")
    storage.download_file("uploads/big.zip", tmp_path / "copy" / "big.zip")
    assert hashlib.sha256((tmp_path / "copy" / "big.zip").read_bytes()).digest() == hashlib.sha256(data).digest()
    with pytest.raises(FileNotFoundError):
        storage.download_file("uploads/none.zip", tmp_path / "none" / "none.zip")
    assert not (tmp_path / "none").exists()


@pytest.mark.django_db
def test_a_done_import_whose_object_cannot_be_deleted_stays_done(maintainer, scored, bucket, seaweedfs, monkeypatch,
                                                                  caplog):
    """The zip's delete after success fails (the bucket refuses it: injected here): the job is done
    all the same, with its 12 records, and the log names the object left behind."""
    def refuse(name):
        raise OSError("the bucket refused the delete")

    monkeypatch.setattr(storage, "delete", refuse)
    job = services.start_run_import(maintainer, run_zip("qwen_AP"), "qwen", filename="qwen_AP.zip", queue_share=0)
    services.execute_run_import(job.pk)
    job.refresh_from_db()
    assert (job.status, job.run.records.count()) == ("done", 12)
    assert _not_runs(seaweedfs.keys(bucket)) == [job.archive]
    assert f"its zip {job.archive} was not deleted from the bucket" in caplog.text


def test_the_key_of_a_run_folder_is_found_in_the_path_its_import_job_unpacked_it_to():
    """``AgentRun.source_dir`` is the importing machine's absolute path; the key is its part from
    ``runs/<12 hex>`` on; any other folder (``import_runs`` of a folder on disk) has none."""
    assert folder_key("/srv/b/data/runs/0123456789ab/qwen_AP") == "runs/0123456789ab/qwen_AP"
    assert folder_key("/srv/b/data/runs/0123456789ab/") == "runs/0123456789ab"
    for other in ("/home/me/qwen_AP", "/srv/runs/not-hex-here/x", "/srv/runs/0123456789ab/../x", ""):
        assert folder_key(other) is None, other


@pytest.mark.django_db
def test_a_run_folder_whose_upload_fails_fails_its_import_and_leaves_nothing(maintainer, scored, settings, bucket,
                                                                             seaweedfs, monkeypatch):
    """The third file's upload fails (the bucket refuses it: injected): the job fails with the
    error, its rows roll back, the two objects already uploaded are deleted and the unpacked folder
    removed; the zip's object stays for the re-run."""
    real, calls = storage.upload_file, []

    def third_fails(name, path):
        calls.append(name)
        if len(calls) == 3:
            raise OSError("the bucket went away")
        real(name, path)

    job = services.start_run_import(maintainer, run_zip("qwen_AP"), "qwen", filename="qwen_AP.zip", queue_share=0)
    monkeypatch.setattr(storage, "upload_file", third_fails)
    services.execute_run_import(job.pk)
    job.refresh_from_db()
    assert (job.status, job.error) == ("failed", "the job crashed: OSError: the bucket went away")
    assert len(calls) == 3 and all(c.startswith("runs/") for c in calls)
    assert seaweedfs.keys(bucket) == [job.archive] and job.run is None
    assert _local_files(Path(settings.STUDIO_DATA_ROOT), "runs") == []


@pytest.mark.django_db
def test_an_upload_queued_before_the_bucket_is_read_from_its_local_path(maintainer, scored, settings, bucket,
                                                                         seaweedfs):
    """A job whose ``archive`` is an absolute path (stored before ``STUDIO_STORAGE_URL`` was set) is
    imported from that file and the file removed, as without a bucket; the bucket gets only the
    unpacked run folder (as for any import while a bucket is configured)."""
    uploads = Path(settings.STUDIO_DATA_ROOT) / "uploads"
    uploads.mkdir(parents=True)
    archive = uploads / "0123456789abcdef.zip"
    archive.write_bytes(run_zip("qwen_AP").getvalue())
    job = RunImportJob.objects.create(archive=str(archive), filename="qwen_AP.zip", agent_name="qwen",
                                      created_by=maintainer, options={"release": "", "protocol": None, "queue_n": 0})
    services.execute_run_import(job.pk)
    job.refresh_from_db()
    assert (job.status, job.run.records.count()) == ("done", 12)
    assert not archive.exists() and _not_runs(seaweedfs.keys(bucket)) == []


@pytest.mark.django_db
def test_the_sweep_removes_the_scratch_of_gone_workers_of_this_host_only(settings, bucket):
    """Three scratch folders: a process of this host that has ended (removed, one row per zip),
    this process (alive: kept), a process of another host (its pid says nothing here: kept)."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    root = Path(settings.STUDIO_DATA_ROOT) / "uploads" / "scratch"
    tags = {"gone": f"{gone.pid}.{host_tag()}", "me": services.worker_tag(), "other": "4242.0badc0de"}
    for tag in tags.values():
        (root / tag).mkdir(parents=True)
        (root / tag / "7.zip").write_bytes(b"PK")
    rows = services.sweep_run_imports()
    assert rows == [{"kind": "run-import", "id": 7, "action": "scratch-removed",
                     "why": f"its worker process ({gone.pid}) is gone", "removed": [str(root / tags["gone"] / "7.zip")]}]
    assert sorted(p.name for p in root.iterdir()) == sorted([tags["me"], tags["other"]])
    assert services.sweep_run_imports() == []


# ── another machine: a child process with its own data root, sharing the database and the bucket ─

PREAMBLE = r"""
import os, sys, time, json
sys.path.insert(0, {repo!r})
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "studio.settings")
import django
django.setup()
from django.conf import settings
settings.STUDIO_JUDGE_RUNNER = "inline"
from evaluation.services import runs as services
real = services.import_run_dir
"""

#: machine B takes job ``job`` and pauses once the zip is downloaded and unpacked (then killed)
IMPORT_PAUSED_ON_B = PREAMBLE + r"""
def pause(*a, **kw):
    print("PAUSED", flush=True)
    time.sleep(600)
services.import_run_dir = pause
services.execute_run_import({job})
"""

#: machine B re-runs job ``job`` (scored against the scoring examples' tasks); prints its state and scores
IMPORT_RERUN_ON_B = PREAMBLE + r"""
services.import_run_dir = lambda *a, **kw: real(*a, tasks_dir={tasks!r}, **kw)
from django.contrib.auth import get_user_model
from evaluation.models import RunImportJob
job = services.rerun_run_import(get_user_model().objects.get(username={user!r}), RunImportJob.objects.get(pk={job}))
job.refresh_from_db()
rows = list(job.run.records.order_by("question_id").values_list(*{fields!r})) if job.run else []
print(json.dumps([job.status, job.error, job.folder, job.run.dora_score if job.run else None, rows]))
"""


@pytest.mark.django_db(transaction=True)
def test_an_upload_made_here_is_imported_on_another_machine_after_a_killed_worker_there_is_swept(
        client, maintainer, settings, bucket, seaweedfs, monkeypatch, tmp_path):
    """This process (machine A, the web) takes the upload and sends the job to no worker here.
    Machine B (a child with its own empty data root) takes it, downloads the zip to its scratch and
    is killed mid-import; B's sweep fails the job (B's pid is gone), removes the unpacked folder and
    the scratch copy, and leaves the object; B's re-run scores it: 12 records with the scores of the
    same zip imported here without a bucket, the object deleted, nothing of it on A's disk."""
    root_a = Path(settings.STUDIO_DATA_ROOT)
    monkeypatch.setattr(services, "dispatch_run_import", lambda job_id: None)  # no worker on machine A
    client.force_login(maintainer)
    r = client.post("/runs/", {"archive": run_zip("qwen_AP"), "agent": "qwen", "queue_share": "0"})
    assert r.status_code == 302
    job = RunImportJob.objects.get()
    assert seaweedfs.keys(bucket) == [job.archive] and _local_files(root_a, "uploads") == []

    db = ChildDatabase(tmp_path)
    root_b = tmp_path / "machine-b"
    env = machine_env(child_env(db, tmp_path), root_b, seaweedfs, bucket)
    script = tmp_path / "paused.py"
    script.write_text(IMPORT_PAUSED_ON_B.format(repo=str(REPO), job=job.pk))
    proc = subprocess.Popen([sys.executable, str(script)], cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.strip() == "PAUSED", proc.stderr.read()[-3000:] if proc.poll() is not None else line
        (status, worker, folder), = db.rows("select status, worker, folder from evaluation_runimportjob "
                                            "where id = %s", job.pk)
        tag = f"{proc.pid}.{host_tag()}"
        assert (status, worker) == ("running", tag) and Path(folder).parent == root_b / "runs"
        scratch = root_b / "uploads" / "scratch" / tag / f"{job.pk}.zip"
        assert scratch.is_file() and (Path(folder) / "qwen_AP").is_dir()
    finally:
        proc.kill()
        proc.wait(timeout=30)

    out = subprocess.run(manage("sweep_jobs", "--json", env=env), cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    mine = [r for r in json.loads(out.stdout) if r["kind"] == "run-import"]
    why = f"its worker process ({proc.pid}) is gone"
    assert mine == [{"kind": "run-import", "id": job.pk, "action": "failed", "why": why, "removed": [folder]},
                    {"kind": "run-import", "id": job.pk, "action": "scratch-removed", "why": why,
                     "removed": [str(scratch)]}]
    assert not Path(folder).exists() and not scratch.parent.exists()
    assert db.rows("select status from evaluation_runimportjob where id = %s", job.pk) == [("failed",)]
    assert seaweedfs.keys(bucket) == [job.archive]  # kept for the re-run

    script = tmp_path / "rerun.py"
    script.write_text(IMPORT_RERUN_ON_B.format(repo=str(REPO), job=job.pk, user=maintainer.username,
                                               tasks=str(TASKS), fields=SCORE_FIELDS))
    again = subprocess.run([sys.executable, str(script)], cwd=REPO, env=env, capture_output=True, text=True,
                           timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    status, error, folder_b, dora_b, rows_b = json.loads(again.stdout.strip().splitlines()[-1])
    assert (status, error, len(rows_b)) == ("done", "", 12)
    assert Path(folder_b).parent == root_b / "runs" and _local_files(root_b, "uploads") == []
    assert _not_runs(seaweedfs.keys(bucket)) == [] and _local_files(root_a, "uploads") == []
    assert seaweedfs.keys(bucket) == _local_files(root_b, "runs")  # B's unpacked folder, uploaded
    assert not (root_a / "runs").exists() or not any((root_a / "runs").iterdir())

    # the same zip imported here without a bucket: the same scores
    settings.STUDIO_STORAGE_URL, settings.STUDIO_JUDGE_RUNNER = "", "inline"
    monkeypatch.undo()
    real = services.import_run_dir
    monkeypatch.setattr(services, "import_run_dir", lambda *a, **kw: real(*a, tasks_dir=TASKS, **kw))
    local = services.start_run_import(maintainer, run_zip("qwen_AP"), "qwen-local", filename="qwen_AP.zip",
                                      queue_share=0)
    local.refresh_from_db()
    assert local.status == "done", local.error
    here = json.loads(json.dumps([list(row) for row in
                                  local.run.records.order_by("question_id").values_list(*SCORE_FIELDS)]))
    assert here == rows_b and local.run.dora_score == dora_b
