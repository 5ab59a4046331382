"""The one way the evaluation app runs a job in the background, so no request waits for it:
judge jobs (:mod:`evaluation.services_judge`) and run imports (:mod:`evaluation.services_run_import`).

Setting ``STUDIO_JUDGE_RUNNER`` (the name is historical: it covers every job here):
``"celery"`` (a worker; the default when ``CELERY_BROKER_URL`` is set), ``"thread"`` (a daemon
thread of this process; the default on the embedded setup, where Celery runs in-process) or
``"inline"`` (in the caller, to its end: tests and the command line).
"""
from __future__ import annotations

import logging
import threading
from typing import Any, Callable

from django.conf import settings

logger = logging.getLogger(__name__)

RUNNERS = ("celery", "thread", "inline")


def job_runner() -> str:
    """``STUDIO_JUDGE_RUNNER`` checked (see the module docstring); ``ValueError`` naming the
    setting for an unknown value."""
    default = "thread" if settings.CELERY_TASK_ALWAYS_EAGER else "celery"
    runner = settings.STUDIO_JUDGE_RUNNER or default
    if runner not in RUNNERS:
        raise ValueError(f"STUDIO_JUDGE_RUNNER: {runner!r} is not one of {', '.join(RUNNERS)}")
    return runner


def _in_thread(job_id: int, body: Callable[[int], Any], on_crash: Callable[[int, Exception], None], kind: str) -> None:
    """Body of a background thread: run ``body(job_id)``; an unexpected crash is logged and
    handed to ``on_crash`` (which records it on the job, so its page shows it failed instead of
    forever running); the thread's database connections are closed at the end."""
    from django.db import connections

    try:
        body(job_id)
    except Exception as exc:  # noqa: BLE001 — a crash must end the job visibly, whatever it was
        logger.exception("%s %s crashed", kind, job_id)
        on_crash(job_id, exc)
    finally:
        connections.close_all()


def dispatch(job_id: int, body: Callable[[int], Any], celery_task, on_crash: Callable[[int, Exception], None],
             kind: str = "job"):
    """Hand job ``job_id`` to the runner (:func:`job_runner`) and return at once, except inline.

    ``body(job_id)``: runs the job (thread and inline); ``celery_task``: the Celery task taking
    ``job_id`` (its own code must catch crashes like ``on_crash`` does); ``on_crash(job_id, exc)``
    records a crash of the thread runner. Returns the started thread, the Celery result, or
    ``body``'s return value (inline: a crash propagates to the caller)."""
    runner = job_runner()
    if runner == "inline":
        return body(job_id)
    if runner == "thread":
        t = threading.Thread(target=_in_thread, args=(job_id, body, on_crash, kind), name=f"{kind}-{job_id}", daemon=True)
        t.start()
        return t
    return celery_task.delay(job_id)
