"""The one way the evaluation app runs a job in the background, so no request waits for it:
judge jobs (:mod:`evaluation.services.judge`) and run imports (:mod:`evaluation.services.runs`).

Setting ``STUDIO_JUDGE_RUNNER`` (the name is historical: it covers every job here):
``"celery"`` (a worker; the default when ``CELERY_BROKER_URL`` is set), ``"thread"`` (a daemon
thread of this process; the default on the embedded setup, where Celery runs in-process) or
``"inline"`` (in the caller, to its end: tests and the command line).

What every job shares whatever its runner (its worker tag and heartbeat, its failure written on a
fresh connection, the sweep of jobs whose worker died) is :mod:`studio.background`.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from django.conf import settings

from studio.background import run_guarded

RUNNERS = ("celery", "thread", "inline")


def job_runner() -> str:
    """``STUDIO_JUDGE_RUNNER`` checked (see the module docstring); ``ValueError`` naming the
    setting for an unknown value."""
    default = "thread" if settings.CELERY_TASK_ALWAYS_EAGER else "celery"
    runner = settings.STUDIO_JUDGE_RUNNER or default
    if runner not in RUNNERS:
        raise ValueError(f"STUDIO_JUDGE_RUNNER: {runner!r} is not one of {', '.join(RUNNERS)}")
    return runner


def dispatch(job_id: int, body: Callable[[int], Any], celery_task, on_crash: Callable[[int, Exception], None],
             kind: str = "job"):
    """Hand job ``job_id`` to the runner (:func:`job_runner`) and return at once, except inline.

    ``body(job_id)``: runs the job (thread and inline); ``celery_task``: the Celery task taking
    ``job_id`` (it runs ``body`` through :func:`studio.background.run_guarded` too); ``on_crash(job_id, exc)``
    records a crash of the thread runner (:func:`studio.background.run_guarded`: on a fresh
    connection, retried; left for the sweep if the database stays unreachable). Returns the started thread, the Celery result, or
    ``body``'s return value (inline: a crash propagates to the caller)."""
    runner = job_runner()
    if runner == "inline":
        return body(job_id)
    if runner == "thread":
        t = threading.Thread(target=run_guarded, args=(kind, job_id, body, on_crash), name=f"{kind}-{job_id}", daemon=True)
        t.start()
        return t
    return celery_task.delay(job_id)
