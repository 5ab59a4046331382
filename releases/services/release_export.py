"""Exporting a release: the folder in the benchmark's layout (``export_release``, written by
``releases.services.export``) and the background job that writes it with a zip beside it.

``start_export`` records a job (``STUDIO_DATA_ROOT/exports/<version>/<job id>/job.json``) and
dispatches ``releases.jobs.export_release_job`` (in-process without a broker; imported here to
enqueue, the job imports this module lazily); the job writes the release folder with
:func:`export_release` and a zip beside it. With a bucket (``STUDIO_STORAGE_URL``,
:mod:`studio.storage`) the job's state (``job.json``) and heartbeat live in the bucket under the same
keys, the folder and zip are written in the worker's local scratch folder (the same path), the zip is
uploaded as ``exports/<version>/<job id>/dora-<version>.zip`` and the scratch is removed: nothing of
the job stays on the worker's disk, and the download is a presigned link. A re-export of a published
release that would ship a different file is refused. Lost jobs are ended by the sweep of background jobs
(:func:`sweep_export_jobs`).

Permissions: ``release.export`` for exporting.
"""
from __future__ import annotations

import json
import os
import shutil
import time
import uuid
import zipfile
from datetime import UTC, datetime
from pathlib import Path

from django.conf import settings
from django.utils import timezone

from kernel.taskfile import JSON_INDENT
from releases.jobs import export_release_job
from releases.models import Release, ReleaseFile
from releases.selectors import export_job, export_job_ids, export_key, exports_dir, release_entries
from releases.services import release_variants
from releases.services.export import (
    MANIFEST_NAME,
    ExportError,
    content_digest,
    copy_schemas,
    dumps,
    folder_digest,
    folder_files,
    json_path,
    schema_problems,
    staging_dir_for,
)
from studio import storage
from studio.background import job_running, worker_lost, worker_tag
from studio.permissions import Action, require


def release_info(release: Release) -> dict:
    return {"version": release.version, "status": release.status, "changelog": release.changelog,
            "created_by": release.created_by.username if release.created_by_id else None,
            "created_at": release.created_at.isoformat() if release.created_at else None,
            "published_at": release.published_at.isoformat() if release.published_at else None,
            "content_sha256": release.manifest_sha256 or ""}



def export_release(release: Release, out, *, force: bool = False, progress=None) -> dict:
    """Write ``release`` in the benchmark's layout into folder ``out``; returns the sidecar manifest
    without its ``questions`` (those are in the written ``studio_manifest.json`` only).

    The folder is written under a temporary name beside ``out`` and renamed at the end; every task
    file (sample by sample), gold polygon and the manifest is validated against its schema first.
    The manifest is streamed (issue 16: 944 MB peak at 100,000 tasks when it was built in memory):
    each question's metadata is validated against the manifest schema's ``questions`` entry and
    spooled to a file in the staging folder as its sample is written; the manifest is then written
    as the text ``dumps`` gives for the whole document (indent 1, same key order), with the spool
    copied in at the ``questions`` member. Raises ``ExportError`` when ``out`` exists and is not
    empty (unless ``force``), when a task cannot be written, or when a published release would
    ship any file differently from what publishing recorded (``ReleaseFile``: the message names
    the first such file; nothing is written). The sidecar's ``content_sha256`` is
    ``export.folder_digest`` of every file but the sidecar (``format_version`` 2); a release
    published before the digest covered the folder keeps its tasks-only digest (``format_version`` 1).
    """
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())) and not force:
        raise ExportError(f"{out}: exists and is not empty; choose another folder or replace it (--force)")
    release = Release.objects.select_related("created_by").get(pk=release.pk)
    # spooled to disk in export order, beside the staging folder (as the questions' spool); closed below
    entries = release_entries(release, spool_dir=out.parent, spool_prefix=f".{out.name}.entries-")
    if not entries:
        entries.close()
        raise ExportError(f"release {release.version} has no task")
    staging = staging_dir_for(out)
    spool_path = staging.parent / f"{staging.name}.questions"
    try:
        with open(spool_path, "w", encoding="utf-8") as spool:
            n_questions = 0

            def keep(question_id: str, meta: dict) -> None:
                nonlocal n_questions
                problems = schema_problems("manifest", meta, ref="#/properties/questions/additionalProperties",
                                           root=json_path(["questions", question_id]))
                if problems:
                    raise ExportError(f"{MANIFEST_NAME}: {problems[0][0]}: {problems[0][1]}")
                # the member as it stands inside the manifest's "questions" object (two levels deep)
                lines = dumps({question_id: meta}).split("\n")[1:-1]
                spool.write(("" if n_questions == 0 else ",\n") + "\n".join(" " * JSON_INDENT + line for line in lines))
                n_questions += 1

            result, variant_entries = release_variants.write_layout(staging, entries, release_id=release.pk,
                                                                    progress=progress, question_sink=keep)
        info = release_info(release)
        schemas = copy_schemas(staging, result.files)
        unlisted = sorted(set(folder_files(staging)) - set(result.files))
        if unlisted:  # every file shipped is checksummed (and so covered by the digest)
            raise ExportError(f"{unlisted[0]}: written without a checksum")
        published = {p: (sha, n) for p, sha, n in ReleaseFile.objects.filter(release=release)
                     .values_list("path", "sha256", "bytes")}
        if published:  # published with the whole-folder digest: exactly the same files, or nothing
            _check_published_files(release, published, result.files)
            format_version, digest = 2, folder_digest(result.files)
        elif release.manifest_sha256:  # published before the digest covered the folder: tasks only
            format_version, digest = 1, content_digest(result.files)
        else:  # a draft
            format_version, digest = 2, folder_digest(result.files)
        if release.manifest_sha256 and digest != release.manifest_sha256:
            raise ExportError(f"release {release.version}: the files differ from what was published "
                              f"(digest {digest[:12]} ≠ {release.manifest_sha256[:12]}); nothing was written")
        info["content_sha256"] = digest
        manifest = {
            "format": "benchmark-studio-release", "format_version": format_version, "release": info,
            "generated_at": timezone.now().isoformat(), "events": result.events,
            "questions": {}, "files": dict(sorted(result.files.items())),
            "images_missing": sorted(result.missing.values(), key=lambda m: m["path"]),
            "counts": result.counts, "schemas": schemas,
        }
        if variant_entries:  # robustness variants beside the benchmark's files (release_variants)
            manifest["variants"] = release_variants.variants_section(release, variant_entries)
        problems = schema_problems("manifest", manifest)  # its questions were checked one by one
        if problems:
            raise ExportError(f"{MANIFEST_NAME}: {problems[0][0]}: {problems[0][1]}")
        marker = "\x00questions\x00"
        head, tail = dumps({**manifest, "questions": marker}).split(json.dumps(marker), 1)
        with open(staging / MANIFEST_NAME, "w", encoding="utf-8") as fh, \
                open(spool_path, encoding="utf-8") as spool:
            fh.write(head)
            if n_questions:
                fh.write("{\n")
                shutil.copyfileobj(spool, fh, 1 << 20)
                fh.write("\n" + " " * JSON_INDENT + "}")
            else:
                fh.write("{}")
            fh.write(tail)
        del manifest["questions"]
        if out.exists():
            old = out.with_name(f".{out.name}.old-{uuid.uuid4().hex[:10]}")
            os.rename(out, old)
            os.rename(staging, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    finally:
        spool_path.unlink(missing_ok=True)
        entries.close()
    return manifest



def _check_published_files(release: Release, published: dict[str, tuple[str, int]], files: dict[str, dict]) -> None:
    """``ExportError`` naming the first file (by path) that a re-export of a published release
    would ship differently from what publishing recorded: changed bytes, missing, or new."""
    for path in sorted(set(published) | set(files)):
        was, now = published.get(path), files.get(path)
        if was is None:
            problem = "would be shipped but was not in the published release"
        elif now is None:
            problem = "was published but would not be shipped"
        elif now["sha256"] != was[0]:
            problem = (f"differs from what was published ({now['bytes']:,} bytes, sha256 {now['sha256'][:12]}… ≠ "
                       f"{was[1]:,} bytes, {was[0][:12]}…)")
        else:
            continue
        raise ExportError(f"release {release.version}: {path} {problem}: a published release's files never "
                          "change, so the export is refused and nothing was written (a layer, replay or source "
                          "behind it changed outside its pins)")



def zip_folder(folder: Path, zip_path: Path) -> Path:
    """Zip ``folder`` (entries under ``<folder name>/``) to ``zip_path`` via a temporary name."""
    tmp = zip_path.with_name(zip_path.name + ".tmp")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for p in sorted(folder.rglob("*")):
            if p.is_file():
                zf.write(p, f"{folder.name}/{p.relative_to(folder).as_posix()}")
    os.replace(tmp, zip_path)
    return zip_path



def _job_path(version: str, job_id: str) -> Path:
    return exports_dir(version) / job_id / "job.json"



def _save_job(job: dict) -> dict:
    """Write an export job's state (``job.json``) through a temporary name in the job folder, or
    with a bucket as one PUT of its key (readers see the old state or the new, whole)."""
    if storage.uses_bucket():
        storage.write_bytes(export_key(job["release"], job["id"], JOB_FILE), json.dumps(job, indent=1).encode())
        return job
    p = _job_path(job["release"], job["id"])
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(f".job-{uuid.uuid4().hex[:8]}.json")  # a sweep of the folder spares only job.json
    tmp.write_text(json.dumps(job, indent=1), encoding="utf-8")
    os.replace(tmp, p)
    return job



#: the export job's kind in :mod:`studio.background`
EXPORT_KIND = "release-export"



#: with a bucket, the least seconds between two progress writes of a job's state (a stage change or
#: the last task is written at once); without one every sample's progress is written
BUCKET_PROGRESS_EVERY_S = 1.0



#: the files of an export job's folder that are not its output: its state and its heartbeat
JOB_FILE, HEARTBEAT_FILE = "job.json", "heartbeat"



def start_export(user, release: Release) -> dict:
    """Record an export job of ``release`` and dispatch it (runs in-process without a broker).

    Returns the job dict ``{id, release, status (queued|running|succeeded|failed), stage, done,
    total, error, folder, zip, content_sha256, requested_by, created_at, started_at, finished_at,
    worker, heartbeat_at}`` as it stands after dispatch (finished, in-process).
    """
    require(user, Action.RELEASE_EXPORT, release)
    job = _save_job({"id": uuid.uuid4().hex, "release": release.version, "status": "queued", "stage": "",
                     "done": 0, "total": 0, "error": "", "folder": "", "zip": "", "content_sha256": "",
                     "requested_by": getattr(user, "username", None), "created_at": timezone.now().isoformat(),
                     "started_at": None, "finished_at": None, "worker": "", "heartbeat_at": None})
    _send_export(release.version, job["id"])
    return export_job(release.version, job["id"]) or job



def _send_export(version: str, job_id: str) -> None:
    """Hand export job ``job_id`` to Celery (``releases.jobs.export_release_job``; in-process,
    to its end, without a broker)."""
    export_release_job.delay(version, job_id)



def _clear_job_folder(base: Path) -> list[str]:
    """Remove everything in an export job's folder but its ``job.json`` (the staging folder and
    spool files, a half-written zip, a half-finished output of a dead worker); returns the names."""
    removed = []
    for p in sorted(base.iterdir()) if base.is_dir() else []:
        if p.name == JOB_FILE:
            continue
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
        removed.append(p.name)
    return removed



def _touch(path: Path) -> None:
    path.touch()


def _beat(version: str, job_id: str, base: Path) -> None:
    """One heartbeat of a running export: the mtime of the job folder's ``heartbeat`` file, or with
    a bucket a fresh empty ``heartbeat`` object (its Last-Modified)."""
    if storage.uses_bucket():
        storage.write_bytes(export_key(version, job_id, HEARTBEAT_FILE), b"")
    else:
        _touch(base / HEARTBEAT_FILE)


def _clear_bucket_job(version: str, job_id: str) -> list[str]:
    """Remove every object of an export job's key folder but its ``job.json`` (a heartbeat, a zip
    of a job being failed); returns the names."""
    removed = []
    for name in storage.list_dir(storage.key("exports", version, job_id))[1]:
        if name != JOB_FILE:
            storage.delete(export_key(version, job_id, name))
            removed.append(name)
    return removed



def run_export_job(version: str, job_id: str) -> dict:
    """The body of the export job: write the folder and the zip, recording progress in job.json.
    A failure is recorded in the job (``status: failed``, ``error``), not raised. While it runs
    the job carries this process's tag (``worker``) and a heartbeat (the mtime of the job folder's
    ``heartbeat`` file, :func:`studio.background.job_running`); what a dead earlier delivery left
    in the job folder is removed first. With a bucket the zip is uploaded to it, the local folder
    (scratch) removed, and ``folder`` stays "" (the unzipped folder is not kept)."""
    job = export_job(version, job_id)
    if job is None:
        raise ValueError(f"no export job {job_id} of release {version}")
    if job.get("status") in ("succeeded", "failed"):
        return job
    base = exports_dir(version) / job_id

    def claim() -> bool:
        _clear_job_folder(base)
        base.mkdir(parents=True, exist_ok=True)  # with a bucket: this worker's scratch, made here
        job.update(status="running", started_at=timezone.now().isoformat(), stage="tasks", worker=worker_tag(),
                   heartbeat_at=timezone.now().isoformat(), error="")
        _save_job(job)
        return True

    folder = base / f"dora-{version}"
    in_bucket = storage.uses_bucket()
    last_put = [time.monotonic()]

    def progress(stage: str, done: int, total: int) -> None:
        changed = stage != job["stage"] or done >= total
        job.update(stage=stage, done=done, total=total, heartbeat_at=timezone.now().isoformat())
        if in_bucket and not changed and time.monotonic() - last_put[0] < BUCKET_PROGRESS_EVERY_S:
            return  # a PUT per sample would cost more than the sample: at most one a second
        _save_job(job)
        last_put[0] = time.monotonic()

    with job_running(EXPORT_KIND, job_id, lambda: _beat(version, job_id, base), claim=claim):
        try:
            release = Release.objects.get(version=version)
            manifest = export_release(release, folder, force=True, progress=progress)
            progress("zip", job["done"], job["total"])
            zip_path = zip_folder(folder, base / f"dora-{version}.zip")
            if in_bucket:
                progress("upload", job["done"], job["total"])
                storage.upload_file(export_key(version, job_id, zip_path.name), zip_path)
            job.update(status="succeeded", stage="done", zip=zip_path.name,
                       folder="" if in_bucket else str(folder.relative_to(settings.STUDIO_DATA_ROOT)),
                       content_sha256=manifest["release"]["content_sha256"])
        except Exception as exc:  # recorded for the UI; the job never stays "running"
            job.update(status="failed", error=str(exc))
        finally:
            if in_bucket:  # the worker's scratch: the result is in the bucket (or the job failed)
                shutil.rmtree(base, ignore_errors=True)
        job["finished_at"] = timezone.now().isoformat()
        return _save_job(job)



def _last_beat(job: dict, base: Path):
    """The newest sign of life of an export job: its heartbeat file's mtime (with a bucket: its
    heartbeat object's Last-Modified), its last progress, its start or its creation (an aware
    datetime), or None."""
    times = []
    for key in ("heartbeat_at", "started_at", "created_at"):
        try:
            times.append(datetime.fromisoformat(job[key]))
        except (KeyError, TypeError, ValueError):
            pass
    if storage.uses_bucket():  # base is exports/<version>/<job id> (the scratch): its names are the key's
        beat = storage.modified_at(export_key(base.parent.name, base.name, HEARTBEAT_FILE))
        if beat is not None:
            times.append(beat)
        return max(times) if times else None
    try:
        times.append(datetime.fromtimestamp((base / HEARTBEAT_FILE).stat().st_mtime, tz=UTC))
    except OSError:
        pass
    return max(times) if times else None



def sweep_export_jobs(stale_after: float | None = None) -> list[dict]:
    """The sweeper of export jobs (:func:`studio.background.register_sweeper`): an export left
    ``queued`` or ``running`` whose worker is lost (:func:`studio.background.worker_lost`) ends
    ``failed`` ("the export's worker was lost …; export again") and its folder keeps only
    ``job.json``: the staging folder, the spool files and a partial zip are removed. (With a
    broker a queued export that no worker took is sent again instead.) With a bucket the jobs are
    read from it; the job's other objects (its heartbeat) are removed there and, when this machine
    ran it, its local scratch folder too (``removed`` names both, scratch first). Returns
    ``{kind, id, action, why, removed}`` per job."""
    out = []
    for job, base in _export_job_states():
        if not isinstance(job, dict) or job.get("status") not in ("queued", "running") or not job.get("id"):
            continue
        why = worker_lost(EXPORT_KIND, job["id"], job.get("worker") or "", _last_beat(job, base),
                          stale_after=stale_after)
        if not why:
            continue
        if job["status"] == "queued" and not settings.CELERY_TASK_ALWAYS_EAGER:
            job["heartbeat_at"] = timezone.now().isoformat()
            _save_job(job)
            _send_export(job["release"], job["id"])
            out.append({"kind": EXPORT_KIND, "id": job["id"], "action": "requeued", "why": why, "removed": []})
            continue
        removed = _clear_job_folder(base)
        if storage.uses_bucket():
            if base.is_dir() and not any(base.iterdir()):
                base.rmdir()
            removed += _clear_bucket_job(base.parent.name, base.name)
        job.update(status="failed", error=f"the export's worker was lost ({why}); export again",
                   finished_at=timezone.now().isoformat())
        _save_job(job)
        out.append({"kind": EXPORT_KIND, "id": job["id"], "action": "failed", "why": why, "removed": removed})
    if storage.uses_bucket():
        out += _sweep_scratch()
    return out


def _sweep_scratch() -> list[dict]:
    """With a bucket: remove this machine's scratch folders (``STUDIO_DATA_ROOT/exports/<version>/<job>``)
    of export jobs that are no longer queued or running in the bucket (ended, maybe swept by another
    machine after this one's worker died) or that the bucket does not know; each machine's sweep (a
    worker's start, a web process, ``manage.py sweep_jobs``) cleans its own disk. A folder holding a
    ``job.json`` (an export kept locally before the bucket was configured) is kept. Returns
    ``{kind, id, action: "scratch-removed", why, removed}`` per folder."""
    root = Path(settings.STUDIO_DATA_ROOT) / "exports"
    out = []
    for base in sorted(root.glob("*/*")) if root.is_dir() else []:
        if not base.is_dir() or base.is_symlink() or (base / JOB_FILE).exists():
            continue  # a job.json: an export kept locally before the bucket was configured, not scratch
        job = export_job(base.parent.name, base.name)
        if job is not None and job.get("status") in ("queued", "running"):
            continue
        removed = sorted(p.name for p in base.iterdir())
        shutil.rmtree(base, ignore_errors=True)
        why = f"the job is {job['status']}" if job is not None else "the bucket has no such job"
        out.append({"kind": EXPORT_KIND, "id": base.name, "action": "scratch-removed", "why": why, "removed": removed})
    return out


def _export_job_states():
    """``(job dict, local job folder)`` of every export job: the ``job.json`` objects of the bucket
    with one (the local folder is then the scratch, maybe absent), else the local ``job.json``
    files; an unreadable state is skipped."""
    if storage.uses_bucket():
        for version in storage.list_dir("exports")[0]:
            for job_id in export_job_ids(version):
                job = export_job(version, job_id)
                if job is not None:
                    yield job, exports_dir(version) / job_id
        return
    root = Path(settings.STUDIO_DATA_ROOT) / "exports"
    for jf in sorted(root.glob(f"*/*/{JOB_FILE}")) if root.is_dir() else []:
        try:
            yield json.loads(jf.read_text(encoding="utf-8")), jf.parent
        except (OSError, ValueError):
            continue
