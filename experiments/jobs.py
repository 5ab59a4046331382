"""Celery tasks of the experiments app, routed to their own queue ``<STUDIO_QUEUE_PREFIX>experiments``
(``CELERY_TASK_ROUTES`` in ``studio/settings.py``; a worker started with ``-Q`` that queue, or one
without ``-Q``); without a broker they run in-process (``evaluation.background``)."""
from __future__ import annotations

from celery import shared_task

from studio.background import run_guarded


@shared_task(acks_late=True, name="experiments.run")
def run(exp_id: int) -> dict:
    """Run :class:`~experiments.models.Experiment` ``exp_id`` (:func:`experiments.services.run_experiment`;
    a crash is written on the row by :func:`studio.background.run_guarded`); returns its state."""
    from experiments.models import Experiment
    from experiments.services import KIND, record_crash, run_experiment

    run_guarded(KIND, exp_id, run_experiment, record_crash, close=False)
    exp = Experiment.objects.get(pk=exp_id)
    return {"experiment": exp.pk, "status": exp.status, "done": exp.done, "total": exp.total}
