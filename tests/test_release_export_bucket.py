"""Release exports in an S3 bucket (``STUDIO_STORAGE_URL``, ``studio/storage.py``), against a real
SeaweedFS (``tests/support/seaweedfs.py``; no mock of S3): the job's state and heartbeat are objects
of the bucket, the zip is uploaded and the worker's scratch removed, the download is a 302 to a
presigned GET URL that a plain HTTP client fetches, and the sweep of dead export jobs works there.

What the byte checks compare: (1) the bytes a plain HTTP client fetches from the presigned URL and
the local zip file the job uploaded (copied aside by a spy around the real ``storage.upload_file``):
same SHA-256; (2) that zip and a local export of the same release with no bucket: the same member
names, every member's bytes equal except ``studio_manifest.json``, whose only difference is its
``generated_at`` (the export's clock: two exports never share it), and the same ``content_sha256``.

The storage-URL checks need no server.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import pytest
from conftest import SCORING_EXAMPLES, needs_shared
from django.core.exceptions import ImproperlyConfigured
from django.core.files.storage import FileSystemStorage
from support.seaweedfs import machine_env

from kernel.processes import host_tag
from releases.models import Release
from releases.services import lifecycle, release_import
from studio import storage


@pytest.fixture
def release(db, maintainer):
    """Release 1.0.0 (a draft) of the 12 tasks of the scoring examples."""
    release_import.import_release_dir(None, needs_shared(SCORING_EXAMPLES), make_release=False)
    from annotation.models import Task

    return lifecycle.create_release(maintainer, "1.0.0", "first", tasks=list(Task.objects.order_by("id")))


def _get(url: str) -> tuple[int, bytes, dict]:
    """``(status, body, headers)`` of a plain GET (urllib, no S3 client)."""
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, r.read(), dict(r.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), dict(exc.headers)


def _members(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        return {n: zf.read(n) for n in zf.namelist()}


# ── configuration (no server) ───────────────────────────────────────────────────────────────────


def test_the_storage_url_names_a_bucket_and_an_optional_prefix_or_is_refused():
    assert storage.parse_storage_url("") is None
    assert storage.parse_storage_url("s3://studio-data") == ("studio-data", "")
    assert storage.parse_storage_url("s3://studio.data-1/team/a/") == ("studio.data-1", "team/a")
    for bad in ("file:///srv/data", "s3://", "s3://ab", "s3://Studio", "/srv/data", "gs://bucket"):
        with pytest.raises(ImproperlyConfigured, match="STUDIO_STORAGE_URL"):
            storage.parse_storage_url(bad)


def test_keys_are_the_paths_below_the_data_root_and_never_climb():
    assert storage.key("exports", "1.0.0", "ab12", "job.json") == "exports/1.0.0/ab12/job.json"
    for bad in ("..", ".", "", "a/b", "a\\b", "a\x00b"):
        with pytest.raises(ValueError):
            storage.key("exports", bad)


def test_without_a_bucket_the_storage_is_the_local_data_root(settings, tmp_path):
    settings.STUDIO_STORAGE_URL = ""  # the embedded default (CI's configuration 2 names a bucket)
    assert not storage.uses_bucket()
    st = storage.storage()
    assert isinstance(st, FileSystemStorage) and Path(st.location) == Path(settings.STUDIO_DATA_ROOT)
    storage.write_bytes("exports/x/job.json", b"1")
    storage.write_bytes("exports/x/job.json", b"22")  # replaced, not renamed aside
    assert (Path(settings.STUDIO_DATA_ROOT) / "exports" / "x" / "job.json").read_bytes() == b"22"
    assert storage.list_dir("exports/x") == ([], ["job.json"])
    with pytest.raises(ImproperlyConfigured):
        storage.download_url("exports/x/job.json", "job.json")


def test_without_a_bucket_an_export_stays_a_local_folder_and_zip_streamed_by_the_view(release, maintainer, client,
                                                                                      settings):
    """Today's behaviour, unchanged: job.json, the folder and the zip under STUDIO_DATA_ROOT."""
    from releases.services.release_export import start_export

    settings.STUDIO_STORAGE_URL = ""  # (CI's configuration 2 keeps every file in a bucket)

    job = start_export(maintainer, release)
    base = Path(settings.STUDIO_DATA_ROOT) / "exports" / "1.0.0" / job["id"]
    assert (job["status"], job["folder"], job["zip"]) == ("succeeded", f"exports/1.0.0/{job['id']}/dora-1.0.0",
                                                          "dora-1.0.0.zip")
    # (a heartbeat file too when the export outlived one heartbeat interval, 15 s: not this one)
    assert sorted(p.name for p in base.iterdir()) == ["dora-1.0.0", "dora-1.0.0.zip", "job.json"]
    client.force_login(maintainer)
    r = client.get(f"/releases/1.0.0/exports/{job['id']}/download/")
    assert r.status_code == 200 and r["Content-Type"] == "application/zip"
    assert b"".join(r.streaming_content) == (base / "dora-1.0.0.zip").read_bytes()


# ── in the bucket (real SeaweedFS) ──────────────────────────────────────────────────────────────


def test_an_export_lives_in_the_bucket_and_downloads_by_a_presigned_link_with_the_uploaded_bytes(
        release, maintainer, make_user, client, settings, bucket, seaweedfs, monkeypatch, tmp_path):
    from releases.selectors import export_job
    from releases.services.release_export import start_export

    uploaded: dict[str, bytes] = {}
    real_upload = storage.upload_file

    def spy(name, path):  # the real upload runs; the spy keeps the bytes it sent
        uploaded[name] = Path(path).read_bytes()
        return real_upload(name, path)

    states: list[dict] = []
    real_write = storage.write_bytes

    def watch(name, data):  # every state the job writes, read back from the bucket by another client
        real_write(name, data)
        if name.endswith("/job.json"):
            body = seaweedfs.client().get_object(Bucket=bucket, Key=name)["Body"].read()
            states.append(json.loads(body))

    monkeypatch.setattr(storage, "upload_file", spy)
    monkeypatch.setattr(storage, "write_bytes", watch)
    job = start_export(maintainer, release)
    jid = job["id"]
    prefix = f"exports/1.0.0/{jid}/"
    assert (job["status"], job["done"], job["total"], job["zip"], job["folder"]) == \
        ("succeeded", 12, 12, "dora-1.0.0.zip", "")
    # the progress, as the bucket held it: queued, running through the tasks (12 in the scoring
    # examples), zip, upload, done
    assert states[0]["status"] == "queued" and states[-1]["status"] == "succeeded"
    stages = [s["stage"] for s in states]
    assert stages[:2] == ["", "tasks"] and stages[-3:] == ["zip", "upload", "done"]
    assert [s["done"] for s in states if s["stage"] == "tasks"][-1] == 12
    assert export_job("1.0.0", jid) == states[-1]  # the selector reads the same object
    # in the bucket: the state, the heartbeat maybe (every 15 s), the zip; on the worker's disk: nothing
    assert set(seaweedfs.keys(bucket)) - {prefix + "heartbeat"} == {prefix + "job.json", prefix + "dora-1.0.0.zip"}
    assert not (Path(settings.STUDIO_DATA_ROOT) / "exports" / "1.0.0" / jid).exists()
    assert list(uploaded) == [prefix + "dora-1.0.0.zip"]

    # the API reads the job's progress from the bucket
    client.force_login(maintainer)
    r = client.get(f"/api/releases/1.0.0/exports/{jid}/")
    assert r.status_code == 200 and (r.json()["status"], r.json()["zip"]) == ("succeeded", "dora-1.0.0.zip")
    assert [j["id"] for j in client.get("/api/releases/1.0.0/").json()["exports"]] == [jid]

    # the release page lists the job (read from the bucket) with its download link, never a signed URL
    page = client.get("/releases/1.0.0/").content.decode()
    assert f"/releases/1.0.0/exports/{jid}/download/" in page and "X-Amz-Signature" not in page
    # the page's download: a 302 to a presigned GET URL of the bucket, fetched by a plain HTTP client
    r = client.get(f"/releases/1.0.0/exports/{jid}/download/")
    assert r.status_code == 302 and r["Cache-Control"] == "no-store"
    link = r["Location"]
    assert link.startswith(f"{seaweedfs.endpoint}/{bucket}/{prefix}dora-1.0.0.zip?")
    assert "X-Amz-Expires=300" in link and "X-Amz-Signature=" in link  # STUDIO_STORAGE_LINK_TTL_S default
    status, body, headers = _get(link)
    assert status == 200 and headers["Content-Disposition"] == 'attachment; filename="dora-1.0.0.zip"'
    assert hashlib.sha256(body).hexdigest() == hashlib.sha256(uploaded[prefix + "dora-1.0.0.zip"]).hexdigest()

    # the same release exported locally (no bucket): the same files, the manifest's clock apart
    monkeypatch.setattr(storage, "write_bytes", real_write)
    settings.STUDIO_STORAGE_URL = ""
    local = start_export(maintainer, Release.objects.get(version="1.0.0"))
    local_zip = (Path(settings.STUDIO_DATA_ROOT) / "exports" / "1.0.0" / local["id"] / "dora-1.0.0.zip").read_bytes()
    ours, theirs = _members(body), _members(local_zip)
    assert sorted(ours) == sorted(theirs) and "dora-1.0.0/tasks/t5_multi_modal_report_synthesis.json" in ours
    differ = [n for n in ours if ours[n] != theirs[n]]
    assert differ == ["dora-1.0.0/studio_manifest.json"]
    a, b = json.loads(ours[differ[0]]), json.loads(theirs[differ[0]])
    assert a.pop("generated_at") != b.pop("generated_at") and a == b
    assert local["content_sha256"] == job["content_sha256"] and len(job["content_sha256"]) == 64


def test_the_bucket_download_is_for_signed_in_users_and_its_link_is_signed_and_expires(
        release, maintainer, make_user, client, settings, bucket, seaweedfs):
    """Who may download is unchanged (any signed-in user, as the release page; the anonymous are
    sent to sign in and never see a link); the link works for its lifetime only, for its own key
    only, and the bucket answers no unsigned GET."""
    from releases.services.release_export import start_export

    job = start_export(maintainer, release)
    url = f"/releases/1.0.0/exports/{job['id']}/download/"
    r = client.get(url)  # anonymous
    assert r.status_code == 302 and r["Location"].startswith("/accounts/login/?next=")
    assert seaweedfs.endpoint not in r["Location"] and "X-Amz" not in r["Location"]

    client.force_login(make_user("sam", "scorer"))  # a signed-in scorer could download before: still can
    r = client.get(url)
    assert r.status_code == 302 and r["Location"].startswith(seaweedfs.endpoint)
    assert _get(r["Location"])[0] == 200
    # the same signature for another key (a tampered link) and an unsigned GET are refused
    assert _get(r["Location"].replace("dora-1.0.0.zip", "job.json"))[0] == 403
    assert _get(f"{seaweedfs.endpoint}/{bucket}/exports/1.0.0/{job['id']}/dora-1.0.0.zip")[0] == 403
    # no such job, or a job not finished: 404, no link
    assert client.get(f"/releases/1.0.0/exports/{'0' * 32}/download/").status_code == 404

    settings.STUDIO_STORAGE_LINK_TTL_S = 1
    link = client.get(url)["Location"]
    assert "X-Amz-Expires=1&" in link
    time.sleep(2.5)
    status, body, _ = _get(link)
    assert status == 403 and b"expired" in body.lower()


def test_a_bucket_export_whose_zip_is_gone_answers_404(release, maintainer, client, bucket, seaweedfs):
    from releases.services.release_export import start_export

    job = start_export(maintainer, release)
    seaweedfs.client().delete_object(Bucket=bucket, Key=f"exports/1.0.0/{job['id']}/dora-1.0.0.zip")
    client.force_login(maintainer)
    assert client.get(f"/releases/1.0.0/exports/{job['id']}/download/").status_code == 404


def test_the_sweep_ends_dead_export_jobs_kept_in_the_bucket(release, maintainer, settings, bucket, seaweedfs):
    """Three jobs written as a worker leaves them: A ``running`` by a process of this host that is
    gone (its scratch folder half-written, a heartbeat object); B ``running`` on another host with
    a fresh heartbeat object though its job.json's last progress is two hours old (alive: the
    object's Last-Modified counts); C as B without the heartbeat object (dead after 60 s)."""
    from django.utils import timezone

    from releases.selectors import export_job
    from releases.services.release_export import start_export, sweep_export_jobs

    gone = subprocess.Popen(["true"])  # a process of this host that has ended
    gone.wait()
    old = (timezone.now() - timezone.timedelta(hours=2)).isoformat()
    ids = {}
    for name, worker in (("A", f"{gone.pid}.{host_tag()}"), ("B", "4242.0badc0de"), ("C", "4243.0badc0de")):
        ids[name] = f"{ord(name):032x}"
        storage.write_bytes(f"exports/1.0.0/{ids[name]}/job.json", json.dumps({
            "id": ids[name], "release": "1.0.0", "status": "running", "stage": "tasks", "done": 3, "total": 12,
            "error": "", "folder": "", "zip": "", "content_sha256": "", "requested_by": "mia", "created_at": old,
            "started_at": old, "finished_at": None, "worker": worker, "heartbeat_at": old}).encode())
    for name in ("A", "B"):
        storage.write_bytes(f"exports/1.0.0/{ids[name]}/heartbeat", b"")
    scratch = Path(settings.STUDIO_DATA_ROOT) / "exports" / "1.0.0" / ids["A"]
    (scratch / ".dora-1.0.0.tmp-1234").mkdir(parents=True)
    (scratch / ".dora-1.0.0.tmp-1234.questions").write_text("{")

    rows = sweep_export_jobs(stale_after=60)
    assert [(r["id"], r["action"], r["why"], r["removed"]) for r in rows] == [
        (ids["A"], "failed", f"its worker process ({gone.pid}) is gone",
         [".dora-1.0.0.tmp-1234", ".dora-1.0.0.tmp-1234.questions", "heartbeat"]),
        (ids["C"], "failed", "no heartbeat for 60 s", []),
    ]
    assert not scratch.exists()
    assert seaweedfs.keys(bucket, f"exports/1.0.0/{ids['A']}/") == [f"exports/1.0.0/{ids['A']}/job.json"]
    for name, status in (("A", "failed"), ("B", "running"), ("C", "failed")):
        assert export_job("1.0.0", ids[name])["status"] == status
    assert "the export's worker was lost (its worker process" in export_job("1.0.0", ids["A"])["error"]
    assert sweep_export_jobs(stale_after=60) == []  # B is alive; nothing else is left
    # a new export of the release succeeds beside them
    assert start_export(maintainer, Release.objects.get(version="1.0.0"))["status"] == "succeeded"


def test_a_queued_bucket_export_no_worker_took_is_sent_again_and_finishes(release, maintainer, settings, bucket,
                                                                          seaweedfs):
    """With a broker (``CELERY_TASK_ALWAYS_EAGER`` off: the sweep re-sends instead of failing) a job
    left ``queued`` in the bucket for two hours by no worker is re-sent; the tests' Celery app runs
    it in-process, and it ends ``succeeded`` with its zip in the bucket."""
    from django.utils import timezone

    from releases.selectors import export_job
    from releases.services.release_export import sweep_export_jobs

    settings.CELERY_TASK_ALWAYS_EAGER = False
    jid = "b" * 32
    old = (timezone.now() - timezone.timedelta(hours=2)).isoformat()
    storage.write_bytes(f"exports/1.0.0/{jid}/job.json", json.dumps({
        "id": jid, "release": "1.0.0", "status": "queued", "stage": "", "done": 0, "total": 0, "error": "",
        "folder": "", "zip": "", "content_sha256": "", "requested_by": "mia", "created_at": old, "started_at": None,
        "finished_at": None, "worker": "", "heartbeat_at": None}).encode())
    rows = sweep_export_jobs(stale_after=60)
    assert [(r["id"], r["action"], r["why"]) for r in rows] == [(jid, "requeued", "no heartbeat for 60 s")]
    job = export_job("1.0.0", jid)
    assert (job["status"], job["done"], job["zip"]) == ("succeeded", 12, "dora-1.0.0.zip")
    assert seaweedfs.keys(bucket, f"exports/1.0.0/{jid}/dora-") == [f"exports/1.0.0/{jid}/dora-1.0.0.zip"]


def test_a_file_over_the_multipart_threshold_arrives_whole(bucket, seaweedfs, tmp_path):
    """boto3 uploads a file above 8 MiB (s3transfer's default threshold) in parts; SeaweedFS publishes
    it whole: the object's ETag is a multipart one (``"<md5 of the part md5s>-<parts>"``: 9 MiB in
    8 MiB parts is 2) and the presigned GET returns the file's bytes (same SHA-256)."""
    data = hashlib.sha256(b"seed").digest() * (9 * 2**20 // 32)  # 9 MiB, not compressible to nothing
    path = tmp_path / "big.zip"
    path.write_bytes(data)
    storage.upload_file("exports/9.9.9/big/big.zip", path)
    head = seaweedfs.client().head_object(Bucket=bucket, Key="exports/9.9.9/big/big.zip")
    assert head["ContentLength"] == 9 * 2**20 and head["ETag"].strip('"').endswith("-2")
    status, body, headers = _get(storage.download_url("exports/9.9.9/big/big.zip", "big.zip"))
    assert status == 200 and hashlib.sha256(body).hexdigest() == hashlib.sha256(data).hexdigest()
    assert headers["Content-Type"] == "application/zip"


# ── another machine: a child process with its own data root, sharing the database and the bucket ─

#: machine B's export of release 1.0.0, paused inside the first task file (its scratch is written)
EXPORT_PAUSED_ON_B = r"""
import os, sys, time
sys.path.insert(0, {repo!r})
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "studio.settings")
import django
django.setup()
from releases.services import export
real_write = export.SampleArrayWriter.write
def write(self, sample):
    real_write(self, sample)
    self._fh.flush()
    print("PAUSED", flush=True)
    time.sleep(600)
export.SampleArrayWriter.write = write
from django.contrib.auth import get_user_model
from releases.models import Release
from releases.services.release_export import start_export
start_export(get_user_model().objects.get(username={user!r}), Release.objects.get(version="1.0.0"))
"""

#: machine B's whole export of release 1.0.0; prints the job's id
EXPORT_ON_B = r"""
import os, sys
sys.path.insert(0, {repo!r})
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "studio.settings")
import django
django.setup()
from django.contrib.auth import get_user_model
from releases.models import Release
from releases.services.release_export import start_export
job = start_export(get_user_model().objects.get(username={user!r}), Release.objects.get(version="1.0.0"))
print(job["id"], job["status"], flush=True)
"""


@pytest.mark.django_db(transaction=True)
def test_an_export_on_another_machine_is_followed_swept_and_downloaded_from_this_one(
        release, maintainer, client, settings, bucket, seaweedfs, tmp_path):
    """Machine B is a child process with its own empty ``STUDIO_DATA_ROOT`` that shares only the
    database and the bucket with this process (machine A, another data root). B's export, paused
    mid-way, shows as running with B's worker tag through the bucket on A; B is killed and A's
    sweep fails the job (B's pid is gone); B's own sweep then removes its scratch. A second export
    on B succeeds and A downloads its zip through the presigned link; A's disk never holds an
    export file."""
    from conftest import REPO, ChildDatabase
    from support.children import child_env

    from releases.services.release_export import sweep_export_jobs

    db = ChildDatabase(tmp_path)
    root_b = tmp_path / "machine-b"
    env = machine_env(child_env(db, tmp_path), root_b, seaweedfs, bucket)
    if os.environ.get("PYTHONPATH"):  # a venv extended by PYTHONPATH: the child sees the same packages
        env["PYTHONPATH"] += os.pathsep + os.environ["PYTHONPATH"]
    script = tmp_path / "paused.py"
    script.write_text(EXPORT_PAUSED_ON_B.format(repo=str(REPO), user=maintainer.username))
    proc = subprocess.Popen([sys.executable, str(script)], cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.strip() == "PAUSED", proc.stderr.read()[-3000:] if proc.poll() is not None else line
        client.force_login(maintainer)
        jobs = client.get("/api/releases/1.0.0/").json()["exports"]
        assert [(j["status"], j["stage"]) for j in jobs] == [("running", "tasks")]
        jid = jobs[0]["id"]
        assert export_job_state(jid)["worker"] == f"{proc.pid}.{host_tag()}"
        scratch_b = root_b / "exports" / "1.0.0" / jid
        assert any(p.name.endswith(".questions") for p in scratch_b.iterdir())  # B's half-written export
    finally:
        proc.kill()
        proc.wait(timeout=30)

    rows = sweep_export_jobs()  # on A: B's process is gone; B's disk is out of A's reach
    assert [(r["id"], r["action"], r["why"], r["removed"]) for r in rows] == [
        (jid, "failed", f"its worker process ({proc.pid}) is gone", [])]
    assert export_job_state(jid)["status"] == "failed" and scratch_b.is_dir()
    # B's own sweep (a worker's start, manage.py sweep_jobs there) removes its scratch
    out = subprocess.run([sys.executable, str(REPO / "manage.py"), "sweep_jobs", "--json"], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    swept = json.loads(out.stdout)
    assert [(r["id"], r["action"], r["why"]) for r in swept] == [(jid, "scratch-removed", "the job is failed")]
    assert not scratch_b.exists()

    script = tmp_path / "whole.py"
    script.write_text(EXPORT_ON_B.format(repo=str(REPO), user=maintainer.username))
    out = subprocess.run([sys.executable, str(script)], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    second, status = out.stdout.split()
    assert status == "succeeded"
    r = client.get(f"/releases/1.0.0/exports/{second}/download/")
    assert r.status_code == 302
    status, body, _ = _get(r["Location"])
    assert status == 200 and "dora-1.0.0/tasks/t5_multi_modal_report_synthesis.json" in _members(body)
    assert not (root_b / "exports" / "1.0.0" / second).exists()  # B kept nothing either
    assert not (Path(settings.STUDIO_DATA_ROOT) / "exports").exists()  # nor A


def export_job_state(job_id: str) -> dict:
    from releases.selectors import export_job

    return export_job("1.0.0", job_id)
