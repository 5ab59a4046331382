"""Celery tasks of the evaluation app (without a broker they run eagerly, in-process)."""
from __future__ import annotations

from celery import shared_task

from studio.background import run_guarded


@shared_task(acks_late=True, name="evaluation.judge_batch")
def judge_batch(job_id: int) -> dict:
    """Run :class:`~evaluation.models.JudgeJob` ``job_id`` (see
    :func:`evaluation.services.judge.run_judge_job`; a crash is written on the job by
    :func:`studio.background.run_guarded`); returns its final counts."""
    from evaluation.models import JudgeJob
    from evaluation.services.judge import JOB_KIND, record_crash, run_judge_job

    run_guarded(JOB_KIND, job_id, run_judge_job, record_crash, close=False)  # a crash ends the job failed
    job = JudgeJob.objects.get(pk=job_id)
    return {"job": job.pk, "status": job.status, "done": job.done, "total": job.total, "ok": job.n_ok,
            "failed": job.n_failed, "cached": job.n_cached}


@shared_task(acks_late=True, name="evaluation.leaderboard_bootstrap")
def leaderboard_bootstrap(n_boot: int, seed: int) -> dict:
    """Compute and store the leaderboard's bootstrap intervals of the current runs and records
    (:func:`evaluation.services.leaderboard.compute_bootstrap`); returns the state and status."""
    from evaluation.services.leaderboard import compute_bootstrap

    row = compute_bootstrap(n_boot, seed)
    return {"version": row.version, "status": row.status} if row is not None else {"status": "superseded"}


@shared_task(acks_late=True, name="evaluation.run_import")
def run_import(job_id: int) -> dict:
    """Run :class:`~evaluation.models.RunImportJob` ``job_id`` (see
    :func:`evaluation.services.runs.execute_run_import`); returns its final state."""
    from evaluation.services.runs import execute_run_import

    job = execute_run_import(job_id)
    return {"job": job.pk, "status": job.status, "run": job.run_id, "error": job.error}
