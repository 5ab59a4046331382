"""Celery tasks of the replay engine (in-process unless CELERY_BROKER_URL is set)."""
from celery import shared_task


@shared_task(bind=True, acks_late=True)
def run_replay(self, run_id: int) -> str:
    """Execute replay run ``run_id``; returns its final status."""
    from replay.services import execute_replay

    return execute_replay(run_id).status
