"""Celery tasks of the replay engine (in-process unless CELERY_BROKER_URL is set).

``run_replay`` is acknowledged late and rejected when its worker is lost (settings
``CELERY_TASK_ACKS_LATE`` / ``CELERY_TASK_REJECT_ON_WORKER_LOST``), so a killed worker's replay is
delivered again; ``execute_replay`` restarts such a run from the start and the step cache makes the
re-run cheap. ``resume_stuck`` re-queues runs stuck in ``running`` (for a periodic schedule).
"""
from celery import shared_task


@shared_task(bind=True, acks_late=True, name="replay.tasks.run_replay")
def run_replay(self, run_id: int, use_cache: bool = True) -> str:
    """Execute replay run ``run_id`` (``use_cache=False``: call every tool); returns its final status."""
    from replay.services.runs import execute_replay

    return execute_replay(run_id, use_cache=use_cache).status


@shared_task(name="replay.tasks.resume_stuck")
def resume_stuck(timeout_s: float = 900.0) -> list[int]:
    """Re-queue replays without progress for ``timeout_s`` seconds; returns their ids."""
    from replay.services.runs import resume_stuck_replays

    return resume_stuck_replays(timeout_s)
