"""Run folders uploaded as a zip, imported and scored in the background: the request stores the
zip and starts a :class:`~evaluation.models.RunImportJob`; the job (the app's one background
mechanism, :mod:`evaluation.background`) unpacks it, scores the run as the official evaluator does
(:func:`evaluation.services.runs.import_run_zip`) and queues a share of its records for human scoring
(:func:`evaluation.services.queue.queue_share_of_run`). The runs page follows the job; a failed
one shows its first error and can be re-run (the stored zip is kept until the job succeeds).

A job's worker (``studio.background``): the process that claims it writes its tag and a
heartbeat while it runs; a crash is written on a fresh connection; :func:`sweep_run_imports`
(registered with :func:`studio.background.register_sweeper`) fails a running job whose worker
died, removing the folder it was unpacking to, and re-sends a queued job that no worker took.
A failed job (so also a swept one) is re-run at once.
"""
from __future__ import annotations

import logging
import shutil
import uuid
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from releases.models import Release
from evaluation.background import dispatch, job_runner
from evaluation.errors import EvaluationConflict
from evaluation.models import AgentRun, RunImportJob
from evaluation.services.runs import RunImportError, check_run_zip, import_run_zip, rescore_run
from evaluation.services.queue import queue_share_of_run
from studio.background import job_running, worker_lost, worker_tag, write_failure
from studio.permissions import require

UPLOAD_DIR = "uploads"  # under STUDIO_DATA_ROOT
RUNS_DIR = "runs"  # under STUDIO_DATA_ROOT: where a job unpacks its zip (kept: records read it)
KIND = "run-import"  # the job kind in studio.background
logger = logging.getLogger(__name__)


class RunImportStateError(RunImportError, EvaluationConflict):
    """The import job cannot be run again in its state (not failed, or its zip is gone): HTTP 409."""

    status_code, code = EvaluationConflict.status_code, EvaluationConflict.code


def _store(upload, filename: str) -> Path:
    """Copy the uploaded file to ``STUDIO_DATA_ROOT/uploads/<random>.zip`` (in chunks)."""
    folder = Path(settings.STUDIO_DATA_ROOT) / UPLOAD_DIR
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{uuid.uuid4().hex[:16]}.zip"
    with open(path, "wb") as out:
        chunks = upload.chunks() if hasattr(upload, "chunks") else iter(lambda: upload.read(1 << 20), b"")
        for chunk in chunks:
            out.write(chunk)
    return path


def start_run_import(user, upload, agent_name: str, *, filename: str = "run.zip", release: str = "",
                     protocol: str | None = None, scaffold: str = "", queue_share: float | None = None,
                     queue_n: int | None = None) -> RunImportJob:
    """Store an uploaded run zip and start its import in the background; returns the job at once.

    Checked here, before anything is stored (cheap, they read the zip's directory only): the
    ``run.import`` permission, the agent name, the release version (``release``: blank for the
    studio's tasks) and :func:`evaluation.services.runs.check_run_zip`. Everything else (records, gold,
    scores) is the job's, and a problem there ends the job failed with the message. ``protocol``
    None: read from the folder name; ``queue_share``/``queue_n`` None: the settings.
    Raises ``RunImportError`` naming the field or file."""
    require(user, "run.import")
    agent_name = str(agent_name or "").strip()
    if not agent_name:
        raise RunImportError("agent: give the agent's name")
    release = str(release or "").strip()
    if release and not Release.objects.filter(version=release).exists():
        raise RunImportError(f"release: no release {release!r}")
    check_run_zip(upload, filename)
    path = _store(upload, filename)
    with transaction.atomic():
        job = RunImportJob.objects.create(
            archive=str(path), filename=str(filename)[:255], agent_name=agent_name[:200], created_by=user,
            options={"release": release, "protocol": protocol, "scaffold": str(scaffold or ""),
                     "queue_share": queue_share, "queue_n": queue_n},
            stage="waiting for a worker")
        transaction.on_commit(lambda: dispatch_run_import(job.pk))
    return job


def lost_reason(job: RunImportJob, now=None) -> str:
    """Why ``job`` (queued or running) will never end by itself, in words (its worker died, or no
    heartbeat for ``STUDIO_JOB_STALE_AFTER_S``: :func:`studio.background.worker_lost`), or ""."""
    if job.status not in (RunImportJob.Status.QUEUED, RunImportJob.Status.RUNNING):
        return ""
    return worker_lost(KIND, job.pk, job.worker, job.heartbeat_at or job.started_at or job.created_at, now=now)


def start_rescore(user, run: AgentRun, release: str = "") -> RunImportJob:
    """Re-score the stored predictions of ``run`` against another gold set in the background
    (:func:`evaluation.services.runs.rescore_run`: a new run, the old one and its scores stay): release
    version ``release``, or the studio's current tasks when blank. The job is an import job
    without a zip (``options["rescore_of"]``), listed and followed like the uploads on the runs
    page. Raises ``RunImportError`` for an unknown release or a step-wise planner run;
    ``PermissionDenied`` without ``run.import``."""
    require(user, "run.import")
    release = str(release or "").strip()
    if release and not Release.objects.filter(version=release).exists():
        raise RunImportError(f"release: no release {release!r}")
    if run.scoring_mode == "stepwise":
        raise RunImportError(f"run {run.pk}: a step-wise planner run has no DORA score to re-score")
    with transaction.atomic():
        job = RunImportJob.objects.create(
            archive="", filename=f"re-score of run {run.pk}: {run.name}"[:255], agent_name=run.agent.name[:200],
            created_by=user, options={"release": release, "rescore_of": run.pk}, stage="waiting for a worker")
        transaction.on_commit(lambda: dispatch_run_import(job.pk))
    return job


def is_stale(job: RunImportJob, now=None) -> bool:
    """A job still queued or running whose worker is lost (:func:`lost_reason`)."""
    return bool(lost_reason(job, now))


def can_rerun(job: RunImportJob) -> bool:
    """Whether :func:`rerun_run_import` takes ``job``: failed, or lost (:func:`is_stale`)."""
    return job.status == RunImportJob.Status.FAILED or is_stale(job)


def rerun_run_import(user, job: RunImportJob) -> RunImportJob:
    """Start a failed or lost (:func:`is_stale`) import job again (same stored zip and options):
    a lost one is swept first (failed, its folder removed), so a re-run after a dead worker is
    taken at once. Raises ``RunImportStateError`` (409) when the job is still alive or done, or
    its zip is gone."""
    require(user, "run.import")
    sweep_run_imports(only=job.pk)
    with transaction.atomic():
        job = RunImportJob.objects.select_for_update().get(pk=job.pk)
        if job.status != RunImportJob.Status.FAILED:
            raise RunImportStateError(f"import job {job.pk} is {job.status}: only a failed job (or one whose worker "
                                      "was lost) is re-run")
        if not (job.options or {}).get("rescore_of") and not Path(job.archive).is_file():
            raise RunImportStateError(f"import job {job.pk}: its stored zip is gone; upload the run again")
        RunImportJob.objects.filter(pk=job.pk).update(
            status=RunImportJob.Status.QUEUED, stage="waiting for a worker", error="", started_at=None,
            finished_at=None, heartbeat_at=timezone.now(), worker="", folder="")
        transaction.on_commit(lambda: dispatch_run_import(job.pk))
    job.refresh_from_db()
    return job


def record_crash(job_id: int, exc: Exception) -> None:
    """A crashed job ends failed with the crash as its first error."""
    RunImportJob.objects.filter(pk=job_id).update(
        status=RunImportJob.Status.FAILED, finished_at=timezone.now(), stage="crashed",
        error=f"the job crashed: {type(exc).__name__}: {exc}")


def dispatch_run_import(job_id: int):
    """Hand import job ``job_id`` to the background runner (:func:`evaluation.background.dispatch`)."""
    from evaluation.jobs import run_import

    return dispatch(job_id, execute_run_import, run_import, record_crash, kind=KIND)


def _remove_folder(folder: str) -> list[str]:
    """Remove a dead job's unpacked folder (only under ``STUDIO_DATA_ROOT/runs/``, and only when no
    imported run reads from it); returns the paths removed."""
    if not folder:
        return []
    path = Path(folder)
    root = (Path(settings.STUDIO_DATA_ROOT) / RUNS_DIR).resolve()
    try:
        inside = path.resolve().parent == root
    except OSError:
        return []
    if not inside or not path.exists() or AgentRun.objects.filter(source_dir__startswith=str(path)).exists():
        return []
    shutil.rmtree(path, ignore_errors=True)
    return [str(path)]


def sweep_run_imports(stale_after: float | None = None, *, only: int | None = None) -> list[dict]:
    """The sweeper of run imports (:func:`studio.background.register_sweeper`): a running job whose
    worker is lost (:func:`lost_reason`) ends ``failed`` ("the job's worker was lost: <why>; run it
    again") and its unpacked folder is removed; a queued job that no worker took is sent again
    (runners celery and thread; a second delivery finds it taken) or, inline, failed. ``only``:
    that job alone. Returns ``{kind, id, action, why, removed}`` per job."""
    out = []
    rows = RunImportJob.objects.filter(status__in=[RunImportJob.Status.QUEUED, RunImportJob.Status.RUNNING])
    if only is not None:
        rows = rows.filter(pk=only)
    now = timezone.now()
    for job in list(rows.order_by("id")):
        why = worker_lost(KIND, job.pk, job.worker, job.heartbeat_at or job.started_at or job.created_at, now=now,
                          stale_after=stale_after)
        if not why:
            continue
        if job.status == RunImportJob.Status.QUEUED and job_runner() != "inline":
            n = RunImportJob.objects.filter(pk=job.pk, status=RunImportJob.Status.QUEUED).update(
                heartbeat_at=timezone.now(), stage=f"sent again ({why})")
            if n:
                dispatch_run_import(job.pk)
                out.append({"kind": KIND, "id": job.pk, "action": "requeued", "why": why, "removed": []})
            continue
        n = RunImportJob.objects.filter(pk=job.pk, status=job.status, worker=job.worker).update(
            status=RunImportJob.Status.FAILED, finished_at=timezone.now(), stage="lost",
            error=f"the job's worker was lost ({why}); run it again")
        if n:
            out.append({"kind": KIND, "id": job.pk, "action": "failed", "why": why,
                        "removed": _remove_folder(job.folder)})
    return out


def _stage(job_id: int, text: str, **fields) -> None:
    RunImportJob.objects.filter(pk=job_id).update(stage=text, **fields)


def _claim(job_id: int, folder: Path) -> bool:
    """Take job ``job_id`` for this process (one statement: of two deliveries one wins): running,
    this worker's tag, the first heartbeat, the folder it will unpack to. A queued job is taken;
    so is a running one whose worker is lost (Celery delivers a killed worker's job again), after
    its folder is removed."""
    now = timezone.now()
    fields = dict(status=RunImportJob.Status.RUNNING, stage="unpacking the zip and scoring the run", started_at=now,
                  heartbeat_at=now, worker=worker_tag(), folder=str(folder), attempts=F("attempts") + 1)
    if RunImportJob.objects.filter(pk=job_id, status=RunImportJob.Status.QUEUED).update(**fields):
        return True
    job = RunImportJob.objects.filter(pk=job_id, status=RunImportJob.Status.RUNNING).first()
    if job is None or not lost_reason(job):
        return False
    if not RunImportJob.objects.filter(pk=job_id, status=RunImportJob.Status.RUNNING, worker=job.worker).update(**fields):
        return False
    _remove_folder(job.folder)
    return True


def _beat(job_id: int) -> None:
    RunImportJob.objects.filter(pk=job_id, status=RunImportJob.Status.RUNNING).update(heartbeat_at=timezone.now())


def _fail(job_id: int, write) -> None:
    """Write a failure (``write()``) on a fresh connection (:func:`studio.background.write_failure`)."""
    write_failure(write, what=f"{KIND} {job_id}: its failure")


def execute_run_import(job_id: int) -> RunImportJob:
    """Run import job ``job_id`` to its end: unpack and score the zip, queue the share (a re-score
    job, ``options["rescore_of"]``: score that run's stored predictions against the job's gold set,
    :func:`evaluation.services.runs.rescore_run`, nothing queued), and end ``done`` (``job.run``,
    ``job.queued``; the stored zip is removed) or ``failed`` (``job.error``: the import's message, or
    ``the job crashed: <type>: <message>`` for any other error). A job that is not queued (taken by
    another delivery, or ended) is returned as it is. While it runs the job carries this process's
    tag and a heartbeat (:func:`studio.background.job_running`)."""
    folder = Path(settings.STUDIO_DATA_ROOT) / RUNS_DIR / uuid.uuid4().hex[:12]
    if not _claim(job_id, folder):
        return RunImportJob.objects.get(pk=job_id)  # already taken by another worker, or ended
    job = RunImportJob.objects.select_related("created_by").get(pk=job_id)
    opts = job.options or {}
    with job_running(KIND, job_id, lambda: _beat(job_id)):
        release = Release.objects.filter(version=opts["release"]).first() if opts.get("release") else None
        try:
            if opts.get("release") and release is None:
                raise RunImportError(f"release: no release {opts['release']!r} (deleted since the upload?)")
            if opts.get("rescore_of"):  # a re-score of stored predictions: no zip, nothing queued
                source = AgentRun.objects.filter(pk=opts["rescore_of"]).select_related("agent").first()
                if source is None:
                    raise RunImportError(f"run {opts['rescore_of']}: deleted since the re-score was asked for")
                run, queued = rescore_run(job.created_by, source, release=release), {}
            else:
                with transaction.atomic():
                    with open(job.archive, "rb") as fh:
                        run = import_run_zip(job.created_by, fh, job.agent_name, filename=job.filename,
                                             release=release, folder=folder, protocol=opts.get("protocol") or None,
                                             scaffold=opts.get("scaffold") or "")
                    queued = queue_share_of_run(job.created_by, run, opts.get("queue_share"), opts.get("queue_n"))
        except (RunImportError, ValueError, FileNotFoundError) as exc:
            _fail(job_id, lambda message=str(exc): _stage(job_id, "failed", status=RunImportJob.Status.FAILED,
                                                          finished_at=timezone.now(), error=message))
            return RunImportJob.objects.get(pk=job_id)
        except Exception as exc:  # noqa: BLE001 — any crash ends the job visibly, on every runner
            logger.exception("run import job %s crashed", job_id)
            _fail(job_id, lambda crash=exc: record_crash(job_id, crash))
            return RunImportJob.objects.get(pk=job_id)
        _stage(job_id, f"done: {run.records.count()} records scored", status=RunImportJob.Status.DONE,
               finished_at=timezone.now(), run=run, queued=queued, error="")
    if job.archive:
        Path(job.archive).unlink(missing_ok=True)
    return RunImportJob.objects.get(pk=job_id)
