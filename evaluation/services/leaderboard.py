"""The leaderboard's bootstrap intervals, computed in the background and stored per state.

:func:`evaluation.leaderboard.bootstrap_ci` resamples every record a thousand times (seconds at
200,000 records), so the page never computes it: it shows the intervals stored for the current
state of the runs and records (:class:`~evaluation.models.LeaderboardBootstrap`) or "computing…",
and asks for them (:func:`request_bootstrap`). They are computed by the Celery task
``evaluation.leaderboard_bootstrap`` — on a real worker when ``CELERY_BROKER_URL`` is set, else in
this process through Celery's eager path on a thread of its own, so that no request waits for it.
"""
from __future__ import annotations

import threading
from datetime import timedelta

from django.db import IntegrityError, connections, transaction
from django.utils import timezone

from evaluation import leaderboard as lb
from evaluation.models import LeaderboardBootstrap
from evaluation.selectors.leaderboard import bootstrap_inputs, bootstrap_row, bootstrap_version, leaderboard_runs, records_state
from evaluation.jobs import leaderboard_bootstrap

#: the page's bootstrap: resamples and seed (docs/leaderboard: B = 1000, seed 0)
N_BOOT = 1000
SEED = 0
#: a request queued this long ago without a result is sent again (a lost worker or process)
REQUEUE_AFTER = timedelta(minutes=10)


def compute_bootstrap(n_boot: int = N_BOOT, seed: int = SEED) -> LeaderboardBootstrap | None:
    """Compute the intervals of the current runs and records and store them under the state that
    was read (:func:`~evaluation.selectors.leaderboard.bootstrap_inputs`); rows of older states
    are deleted. A failure is stored (``status = failed``, the error text) and raised again.
    Returns the stored row; None when a computation of a newer state deleted it meanwhile."""
    runs, rows, version = bootstrap_inputs()
    key = {"version": version, "n_boot": n_boot, "seed": seed}
    try:
        result = lb.bootstrap_ci(runs, rows, n_boot=n_boot, seed=seed)
    except Exception as exc:
        _store(key, status=LeaderboardBootstrap.Status.FAILED, error=f"{type(exc).__name__}: {exc}",
               finished_at=timezone.now())
        raise
    row = _store(key, status=LeaderboardBootstrap.Status.DONE, result=result, error="", finished_at=timezone.now())
    if row is not None:
        LeaderboardBootstrap.objects.filter(pk__lt=row.pk).delete()
    return row


def _store(key: dict, **fields) -> LeaderboardBootstrap | None:
    # single-statement writes in autocommit (an UPDATE, else an INSERT): this runs beside requests
    # and imports, and SQLite refuses at once to upgrade a read transaction to a write
    if not LeaderboardBootstrap.objects.filter(**key).update(**fields):
        try:
            with transaction.atomic():
                return LeaderboardBootstrap.objects.create(**key, **fields)
        except IntegrityError:  # a request queued the same state meanwhile
            LeaderboardBootstrap.objects.filter(**key).update(**fields)
    return LeaderboardBootstrap.objects.filter(**key).first()  # None: a newer state's computation deleted it


def _run_here(n_boot: int, seed: int) -> None:
    try:
        leaderboard_bootstrap.apply(args=(n_boot, seed))
    finally:
        connections.close_all()  # this thread's own connections


def _dispatch(n_boot: int, seed: int) -> None:
    """Run the bootstrap: ``settings.STUDIO_LEADERBOARD_BOOTSTRAP_RUNNER`` "inline" computes it
    here and now (the tests: no second thread on their database); else on a thread of its own
    when Celery runs in-process (the embedded default), else on a Celery worker."""
    from django.conf import settings

    if settings.STUDIO_LEADERBOARD_BOOTSTRAP_RUNNER == "inline":
        _run_here(n_boot, seed)
    elif leaderboard_bootstrap.app.conf.task_always_eager:
        # not a daemon: a management command (an import) waits for it before its process exits
        threading.Thread(target=_run_here, args=(n_boot, seed), name="leaderboard-bootstrap", daemon=False).start()
    else:
        leaderboard_bootstrap.delay(n_boot, seed)


def request_bootstrap(version: str, n_boot: int = N_BOOT, seed: int = SEED) -> LeaderboardBootstrap:
    """The stored intervals of state ``version``; when there are none yet, a queued row is stored and
    the computation sent (once per state: a concurrent request finds the row; again after
    :data:`REQUEUE_AFTER`), after the current transaction commits."""
    row = bootstrap_row(version, n_boot, seed)
    if row is not None and (row.status != LeaderboardBootstrap.Status.QUEUED
                            or row.requested_at > timezone.now() - REQUEUE_AFTER):
        return row
    if row is None:
        try:
            with transaction.atomic():
                row = LeaderboardBootstrap.objects.create(version=version, n_boot=n_boot, seed=seed)
        except IntegrityError:  # a concurrent request queued it first
            return bootstrap_row(version, n_boot, seed)
    else:
        LeaderboardBootstrap.objects.filter(pk=row.pk).update(requested_at=timezone.now())
    transaction.on_commit(lambda: _dispatch(n_boot, seed))
    return row


def schedule_bootstrap(n_boot: int = N_BOOT, seed: int = SEED) -> None:
    """After the current transaction commits (an import), request the intervals of the new state."""
    def after_commit():
        request_bootstrap(bootstrap_version(leaderboard_runs(), records_state()), n_boot, seed)

    transaction.on_commit(after_commit)


def current_bootstrap(runs: list[dict], n_boot: int = N_BOOT, seed: int = SEED) -> LeaderboardBootstrap | None:
    """The bootstrap row of the current state (``runs`` as the page read them): ``status`` done
    (``result`` holds :func:`~evaluation.leaderboard.bootstrap_ci`'s list), queued (being computed;
    requested by this call if it was not) or failed (``error``). Two queries when it is stored."""
    return request_bootstrap(bootstrap_version(runs, records_state()), n_boot, seed)
