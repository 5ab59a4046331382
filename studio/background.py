"""What every background job shares, whatever runs it (a Celery worker, a thread of a web process,
the caller): who runs it, that it is alive, how its failure is written, and the sweep that ends
jobs whose worker died.

The kinds of job (run zip imports and judge jobs, ``evaluation``; release exports, ``releases``;
replays, ``replay``) keep their state in their own row or file and register a *sweeper* here at
start-up (``AppConfig.ready``), so this module imports no app.

* **Owner and heartbeat.** A job that starts writes its worker's tag (``kernel.processes.process_tag``:
  ``<pid>.<host tag>``) and then, while it runs, a heartbeat every ``STUDIO_JOB_HEARTBEAT_S``
  seconds from a thread of its own (:class:`Heartbeat`, its own database connection), so a long
  judge call or unpacking still shows the job alive. :func:`job_running` does both and also lists
  the job as live in this process, from before its claim is written to after its end is written,
  so no sweep or page of the same process ever reads the claim of a job that no thread runs.
* **Failure without the failed connection.** :func:`write_failure` writes a crash on a fresh
  connection of the thread, retried with backoff (``RECORD_ATTEMPTS``); when the database stays
  unreachable it logs and gives up: the job is left for the sweep, never silently "queued".
* **The sweep.** :func:`sweep_jobs` asks every sweeper to end (fail, with files cleaned) or
  re-queue its jobs that :func:`worker_lost` says are dead: the worker is a process of this host
  that is gone (at once), or a job of this process that no longer runs here (at once), or no
  heartbeat for ``STUDIO_JOB_STALE_AFTER_S`` seconds (another host, or a hung worker). It runs at
  the start of a Celery worker (``studio/celery.py``), in the background of a web process's first
  request and then every ``STUDIO_JOB_SWEEP_EVERY_S`` seconds of requests (:func:`maybe_sweep`),
  before a re-run of a job, and as ``manage.py sweep_jobs`` (cron; docs/deployment.md).
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections
from django.utils import timezone

from kernel.processes import process_gone, process_tag

logger = logging.getLogger(__name__)

#: :func:`write_failure`'s tries on a fresh connection, and the first wait between two (doubled
#: each time, at most 5 s): 0.25 + 0.5 + 1 + 2 + 4 ≈ 8 s in all, longer than a busy PostgreSQL's
#: burst of refused connections usually lasts; after that the sweep takes the job.
RECORD_ATTEMPTS = 6
RECORD_BACKOFF_S = 0.25

#: ``{(kind, id): [thread, ...]}``: the threads of this process that run or are claiming each job
#: now (:func:`job_running`; two deliveries of one job in one process both list themselves).
_live: dict[tuple[str, str], list[threading.Thread]] = {}
_live_lock = threading.Lock()


def stale_after_s() -> float:
    """``STUDIO_JOB_STALE_AFTER_S``: seconds without a heartbeat after which a job's worker is
    taken as dead (default 600)."""
    return float(settings.STUDIO_JOB_STALE_AFTER_S)


def heartbeat_s() -> float:
    """``STUDIO_JOB_HEARTBEAT_S``: seconds between two heartbeats of a running job (default 15)."""
    return float(settings.STUDIO_JOB_HEARTBEAT_S)


def worker_tag() -> str:
    """The tag a job started here records as its worker (``kernel.processes.process_tag``)."""
    return process_tag()


class Heartbeat:
    """A daemon thread calling ``beat()`` every ``interval`` seconds until :meth:`stop` (or the
    ``with`` block's end). ``beat`` writes the job's heartbeat (a row's ``heartbeat_at``, a file's
    mtime); a beat that fails (database busy or unreachable) is logged and tried again at the next
    interval. The thread's database connections are closed when it stops."""

    def __init__(self, beat: Callable[[], Any], interval: float | None = None, name: str = "heartbeat"):
        self.beat, self.interval = beat, heartbeat_s() if interval is None else float(interval)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def _run(self) -> None:
        try:
            while not self._stop.wait(self.interval):
                try:
                    self.beat()
                except Exception as exc:  # noqa: BLE001 — a missed beat is retried; the sweep decides by age
                    logger.warning("%s: heartbeat not written (%s: %s)", self._thread.name, type(exc).__name__, exc)
                    connections[DEFAULT_DB_ALIAS].close()
        finally:
            connections.close_all()

    def start(self) -> Heartbeat:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=self.interval + 30)

    def __enter__(self) -> Heartbeat:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


@contextmanager
def job_running(kind: str, job_id, beat: Callable[[], Any], claim: Callable[[], Any] | None = None) -> Iterator[bool]:
    """While the block runs: job ``(kind, job_id)`` is listed as live in this process (the sweep of
    this process leaves it alone) and ``beat()`` is called every ``STUDIO_JOB_HEARTBEAT_S`` seconds
    from a thread of its own. Yields whether the job is this worker's.

    ``claim()``: the caller's claim of the job (the write of its status, this worker's tag and first
    heartbeat; truthy when the job is now this worker's), called *inside* the listing. Listed only
    after its claim, a job would be open to a sweep of this process reading the claim in between:
    it would see its own tag on a job that no thread of it runs, end the job and remove its files
    under the worker. When the claim fails, the block gets False, no heartbeat runs and the block
    should return. Without ``claim`` the job's start is the caller's, written before the block."""
    key, me = (kind, str(job_id)), threading.current_thread()
    with _live_lock:
        _live.setdefault(key, []).append(me)
    try:
        if claim is not None and not claim():
            yield False
            return
        with Heartbeat(beat, name=f"{kind}-{job_id}-heartbeat"):
            yield True
    finally:
        with _live_lock:
            threads = _live.get(key, [])
            if me in threads:
                threads.remove(me)
            if not threads:
                _live.pop(key, None)


def is_live_here(kind: str, job_id) -> bool:
    """Whether a thread of this process other than the calling one runs or is claiming job
    ``(kind, job_id)`` now (:func:`job_running`, the thread alive). The caller is left out: a
    thread deciding whether to take a job over is listed itself while it claims."""
    me = threading.current_thread()
    with _live_lock:
        threads = list(_live.get((kind, str(job_id)), ()))
    return any(t is not me and t.is_alive() for t in threads)


def worker_lost(kind: str, job_id, worker: str, last_beat: datetime | None, *, now: datetime | None = None,
                stale_after: float | None = None) -> str:
    """Why job ``(kind, job_id)`` of ``worker`` (its tag; "" if none started it) with its newest
    heartbeat ``last_beat`` (or start, or creation) is dead, in words, or "" when it may be alive.

    Dead: a worker of this process that does not run it any more (its thread ended without
    writing the end); a worker process of this host that is gone; no heartbeat for
    ``stale_after`` seconds (default ``STUDIO_JOB_STALE_AFTER_S``) — the only sign for a worker on
    another host, a hung one, or a queued job that no worker took."""
    if worker and worker == worker_tag():
        return "" if is_live_here(kind, job_id) else "its worker thread in this process ended without finishing it"
    if worker and process_gone(worker):
        return f"its worker process ({worker.partition('.')[0]}) is gone"
    limit = stale_after_s() if stale_after is None else float(stale_after)
    now = now or timezone.now()
    if last_beat is None or last_beat <= now - timedelta(seconds=limit):
        return f"no heartbeat for {limit:g} s"
    return ""


def write_failure(write: Callable[[], Any], *, what: str, attempts: int | None = None,
                  backoff_s: float | None = None) -> bool:
    """Write a job's failure with ``write()`` on a fresh database connection: this thread's
    connection is closed first (it may be the one that failed) and the write is tried up to
    ``attempts`` times (default :data:`RECORD_ATTEMPTS`), waiting ``backoff_s`` (doubled each
    time, at most 5 s) after a ``DatabaseError``. Returns True once written, False when the
    database stayed unreachable (logged with ``what``: the job is left for :func:`sweep_jobs`).

    Inside a transaction (the caller's, e.g. a test or an inline job) the connection belongs to
    it and is not replaced: ``write()`` runs once on it."""
    conn = connections[DEFAULT_DB_ALIAS]
    if conn.in_atomic_block:
        write()
        return True
    attempts = RECORD_ATTEMPTS if attempts is None else int(attempts)
    wait = RECORD_BACKOFF_S if backoff_s is None else float(backoff_s)
    for i in range(max(1, attempts)):
        conn.close()
        try:
            write()
            return True
        except DatabaseError as exc:
            logger.warning("%s: not written (try %d of %d): %s: %s", what, i + 1, attempts, type(exc).__name__, exc)
        if i + 1 < attempts:
            time.sleep(min(wait * (2 ** i), 5.0))
    conn.close()
    logger.error("%s: the database stayed unreachable; the job is left for the sweep (manage.py sweep_jobs)", what)
    return False


def run_guarded(kind: str, job_id, body: Callable[[Any], Any], on_crash: Callable[[Any, Exception], None], *,
                close: bool = True) -> None:
    """Run a job in a background thread or a Celery task: ``body(job_id)``; an exception is
    logged and written by ``on_crash(job_id, exc)`` through :func:`write_failure` (fresh
    connection, retries; if the database stays unreachable the job is left for the sweep).
    ``close``: close the thread's connections at the end (a thread of its own; a Celery task
    leaves that to Celery, which may run it eagerly in the caller's transaction)."""
    try:
        body(job_id)
    except Exception as exc:  # noqa: BLE001 — a crash must end the job visibly, whatever it was
        logger.exception("%s %s crashed", kind, job_id)
        write_failure(lambda crash=exc: on_crash(job_id, crash), what=f"{kind} {job_id}: its crash ({type(exc).__name__})")
    finally:
        if close:
            connections.close_all()


# ------------------------------------------------------------------ the sweep

#: ``{kind: sweeper}``; a sweeper ``(stale_after_s) -> list[dict]`` ends or re-queues its dead jobs
#: and returns one ``{"kind", "id", "action": "failed"|"requeued", "why", "removed": [paths]}`` each.
_sweepers: dict[str, Callable[[float], list[dict]]] = {}
_sweep_lock = threading.Lock()
_last_sweep = [0.0]  # time.monotonic() of this process's last sweep; 0: none yet


def register_sweeper(kind: str, sweeper: Callable[[float], list[dict]]) -> None:
    """Register the sweeper of job kind ``kind`` (called in ``AppConfig.ready``; again: replaced)."""
    _sweepers[kind] = sweeper


def sweep_jobs(stale_after: float | None = None, kinds: list[str] | None = None) -> list[dict]:
    """Run every registered sweeper (or those of ``kinds``) with ``stale_after`` seconds (default
    ``STUDIO_JOB_STALE_AFTER_S``); returns what they did (see :func:`register_sweeper`). A
    sweeper that fails is logged and the others still run."""
    limit = stale_after_s() if stale_after is None else float(stale_after)
    out: list[dict] = []
    for kind, sweeper in sorted(_sweepers.items()):
        if kinds is not None and kind not in kinds:
            continue
        try:
            out.extend(sweeper(limit))
        except Exception:  # noqa: BLE001 — one kind's trouble must not stop the others' sweep
            logger.exception("sweep of %s jobs failed", kind)
    _last_sweep[0] = time.monotonic()
    for row in out:
        logger.warning("sweep: %s %s %s (%s)", row.get("kind"), row.get("id"), row.get("action"), row.get("why"))
    return out


def maybe_sweep(**_signal_kwargs) -> threading.Thread | None:
    """The periodic sweep of a web process (connected to ``request_started``): at its first
    request and then at most every ``STUDIO_JOB_SWEEP_EVERY_S`` seconds (0: never), run
    :func:`sweep_jobs` on a daemon thread (the request does not wait). Returns the thread, if one
    was started."""
    every = float(settings.STUDIO_JOB_SWEEP_EVERY_S)
    if every <= 0:
        return None
    if _last_sweep[0] and time.monotonic() - _last_sweep[0] < every:
        return None
    if not _sweep_lock.acquire(blocking=False):
        return None
    _last_sweep[0] = time.monotonic()

    def run() -> None:
        try:
            sweep_jobs()
        finally:
            _sweep_lock.release()
            connections.close_all()

    thread = threading.Thread(target=run, name="sweep-jobs", daemon=True)
    thread.start()
    return thread
