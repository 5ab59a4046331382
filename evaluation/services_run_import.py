"""Run folders uploaded as a zip, imported and scored in the background: the request stores the
zip and starts a :class:`~evaluation.models.RunImportJob`; the job (the app's one background
mechanism, :mod:`evaluation.background`) unpacks it, scores the run as the official evaluator does
(:func:`evaluation.services.import_run_zip`) and queues a share of its records for human scoring
(:func:`evaluation.services_queue.queue_share_of_run`). The runs page follows the job; a failed
one shows its first error and can be re-run (the stored zip is kept until the job succeeds).
"""
from __future__ import annotations

import logging
import uuid
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from releases.models import Release
from evaluation.background import dispatch
from evaluation.errors import EvaluationConflict
from evaluation.models import AgentRun, RunImportJob
from evaluation.services import RunImportError, check_run_zip, import_run_zip, rescore_run
from evaluation.services_queue import queue_share_of_run
from studio.permissions import require

UPLOAD_DIR = "uploads"  # under STUDIO_DATA_ROOT
#: A job queued or running this long is taken as lost (its worker or web process died) and may be
#: re-run; an import of the largest allowed zip takes minutes, not an hour.
STALE_AFTER = timedelta(hours=1)
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
    studio's tasks) and :func:`evaluation.services.check_run_zip`. Everything else (records, gold,
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


def start_rescore(user, run: AgentRun, release: str = "") -> RunImportJob:
    """Re-score the stored predictions of ``run`` against another gold set in the background
    (:func:`evaluation.services.rescore_run`: a new run, the old one and its scores stay): release
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
    """A job still queued or running :data:`STALE_AFTER` after it was started (or created): its
    worker or web process died with it, so it will never end by itself."""
    now = now or timezone.now()
    return job.status in (RunImportJob.Status.QUEUED, RunImportJob.Status.RUNNING) and \
        (job.started_at or job.created_at) < now - STALE_AFTER


def can_rerun(job: RunImportJob) -> bool:
    """Whether :func:`rerun_run_import` takes ``job``: failed, or lost (:func:`is_stale`)."""
    return job.status == RunImportJob.Status.FAILED or is_stale(job)


@transaction.atomic
def rerun_run_import(user, job: RunImportJob) -> RunImportJob:
    """Start a failed or lost (:func:`is_stale`) import job again (same stored zip and options).
    Raises ``RunImportError`` when the job is neither or its zip is gone."""
    require(user, "run.import")
    job = RunImportJob.objects.select_for_update().get(pk=job.pk)
    if not can_rerun(job):
        raise RunImportStateError(f"import job {job.pk} is {job.status}: only a failed job (or one lost for "
                             f"{int(STALE_AFTER.total_seconds() // 60)} minutes) is re-run")
    if not (job.options or {}).get("rescore_of") and not Path(job.archive).is_file():
        raise RunImportStateError(f"import job {job.pk}: its stored zip is gone; upload the run again")
    RunImportJob.objects.filter(pk=job.pk).update(status=RunImportJob.Status.QUEUED, stage="waiting for a worker", error="",
                                                  started_at=None, finished_at=None)
    transaction.on_commit(lambda: dispatch_run_import(job.pk))
    job.refresh_from_db()
    return job


def _record_crash(job_id: int, exc: Exception) -> None:
    """A crashed job ends failed with the crash as its first error."""
    RunImportJob.objects.filter(pk=job_id).update(
        status=RunImportJob.Status.FAILED, finished_at=timezone.now(), stage="crashed",
        error=f"the job crashed: {type(exc).__name__}: {exc}")


def dispatch_run_import(job_id: int):
    """Hand import job ``job_id`` to the background runner (:func:`evaluation.background.dispatch`)."""
    from evaluation.jobs import run_import

    return dispatch(job_id, execute_run_import, run_import, _record_crash, kind="run-import")


def _stage(job_id: int, text: str, **fields) -> None:
    RunImportJob.objects.filter(pk=job_id).update(stage=text, **fields)


def execute_run_import(job_id: int) -> RunImportJob:
    """Run import job ``job_id`` to its end: unpack and score the zip, queue the share (a re-score
    job, ``options["rescore_of"]``: score that run's stored predictions against the job's gold set,
    :func:`evaluation.services.rescore_run`, nothing queued), and end ``done`` (``job.run``, ``job.queued``; the stored zip is removed) or ``failed`` (``job.error``:
    the import's message, or ``the job crashed: <type>: <message>`` for any other error)."""
    job = RunImportJob.objects.select_related("created_by").get(pk=job_id)
    if job.status != RunImportJob.Status.QUEUED:
        return job  # already taken by another worker, or ended
    _stage(job_id, "unpacking the zip and scoring the run", status=RunImportJob.Status.RUNNING,
           started_at=timezone.now(), attempts=job.attempts + 1)
    opts = job.options or {}
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
                    run = import_run_zip(job.created_by, fh, job.agent_name, filename=job.filename, release=release,
                                         protocol=opts.get("protocol") or None, scaffold=opts.get("scaffold") or "")
                queued = queue_share_of_run(job.created_by, run, opts.get("queue_share"), opts.get("queue_n"))
    except (RunImportError, ValueError, FileNotFoundError) as exc:
        _stage(job_id, "failed", status=RunImportJob.Status.FAILED, finished_at=timezone.now(), error=str(exc))
        return RunImportJob.objects.get(pk=job_id)
    except Exception as exc:  # noqa: BLE001 — any crash ends the job visibly, on every runner
        logger.exception("run import job %s crashed", job_id)
        _record_crash(job_id, exc)
        return RunImportJob.objects.get(pk=job_id)
    _stage(job_id, f"done: {run.records.count()} records scored", status=RunImportJob.Status.DONE,
           finished_at=timezone.now(), run=run, queued=queued, error="")
    if job.archive:
        Path(job.archive).unlink(missing_ok=True)
    return RunImportJob.objects.get(pk=job_id)
