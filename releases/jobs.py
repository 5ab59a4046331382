"""Celery tasks of the releases app (in-process unless CELERY_BROKER_URL is set). The task keeps its
name from the days releases lived in the annotation app (`annotation.tasks.export_release_job`): the
workers and queued messages know it by that name."""
from celery import shared_task


@shared_task(bind=True, acks_late=True, name="annotation.tasks.export_release_job")
def export_release_job(self, version: str, job_id: str) -> str:
    """Run export job ``job_id`` of release ``version`` (see ``releases.services.release_export``);
    returns the job's final status (``succeeded`` or ``failed``)."""
    from releases.services.release_export import run_export_job

    return run_export_job(version, job_id)["status"]
