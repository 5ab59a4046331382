"""The leaderboard's stored sums per run and its bootstrap intervals, computed in the background
and stored per state; the table of one gold set (:func:`leaderboard_of_set`).

A run's sums (:class:`~evaluation.models.RunAggregate`) are written with its import and rebuilt
when a task's head revision changes (:func:`write_run_aggregate`, :func:`refresh_run_aggregates`).

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
from evaluation.jobs import leaderboard_bootstrap
from evaluation.models import LeaderboardBootstrap, RunAggregate
from evaluation.selectors.leaderboard import (
    aggregated_runs,
    bootstrap_inputs,
    bootstrap_row,
    bootstrap_version,
    default_gold_set,
    gold_set_key,
    gold_sets,
    leaderboard_rows,
    leaderboard_runs,
    newest_revision_id,
    records_state,
    stale_aggregates,
)

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


def write_run_aggregate(run_id: int) -> RunAggregate | None:
    """Store the leaderboard sums of run ``run_id`` (:func:`evaluation.leaderboard.run_aggregate`
    over the run's rows as :func:`~evaluation.selectors.leaderboard.leaderboard_rows` reads them,
    extras included), stamped with the newest task revision id read *before* the rows (a head
    that changes meanwhile makes the sums stale, never wrongly current). Replaces earlier sums.
    Inside the caller's transaction when there is one (an import: the sums commit with the run).
    Also stored: the number of records and the newest record id (the leaderboard's bootstrap state,
    :func:`~evaluation.selectors.leaderboard.records_state`). Cost: reading and scoring the extras
    of the run's records once (about the time the page took per run before the sums existed)."""
    newest = newest_revision_id()
    rows = leaderboard_rows(run_ids=[run_id])
    sums = lb.run_aggregate(rows)
    return _store_aggregate(run_id, newest, sums, max((r["record_id"] for r in rows), default=0))


def _store_aggregate(run_id: int, newest: int, sums: dict, newest_record: int) -> RunAggregate:
    # single-statement writes (an UPDATE, else an INSERT): outside an import they run in autocommit,
    # so a page that rebuilds sums beside an import never holds a read lock it must upgrade (SQLite
    # refuses such an upgrade at once, busy timeout or not)
    fields = {"gold_revision": newest, "n_records": sums["n_records"], "n_no_task": sums["n_no_task"],
              "newest_record": newest_record, "sums": sums}
    if not RunAggregate.objects.filter(run_id=run_id).update(**fields):
        try:
            with transaction.atomic():
                return RunAggregate.objects.create(run_id=run_id, **fields)
        except IntegrityError:  # a concurrent writer stored them first (ours are as new), or the run is gone
            RunAggregate.objects.filter(run_id=run_id).update(**fields)
    return RunAggregate.objects.filter(run_id=run_id).first()


def refresh_run_aggregates(run_ids, state: dict) -> set:
    """Make the stored sums of ``run_ids`` current (``state`` as
    :func:`~evaluation.selectors.leaderboard.aggregated_runs` returns it): rebuild the stale ones
    (:func:`~evaluation.selectors.leaderboard.stale_aggregates`: no sums yet, a task deleted, or a
    newer head revision of a task the run has a record on) and move the stamp of the others up.
    Returns the ids of the rebuilt runs (usually none: an import writes its sums itself). A run
    deleted meanwhile is skipped."""
    stale, behind, newest = stale_aggregates(run_ids, state)
    for run_id in sorted(stale):
        write_run_aggregate(run_id)  # a run deleted meanwhile stores nothing
    if behind:
        RunAggregate.objects.filter(run_id__in=behind, gold_revision__lt=newest).update(gold_revision=newest)
    return stale


def leaderboard_of_set(asked: str | None = None) -> tuple[list[dict], dict]:
    """``(runs, tables)``: the leaderboard of one gold set without its bootstrap, built from the
    runs' stored sums (made current first: :func:`refresh_run_aggregates`), never from the records.
    ``asked``: the set's ranking key (``evaluation.goldset.ranking_key``; the page's and the API's
    ``?set=``); None or unknown: the default set (``evaluation.selectors.leaderboard.default_gold_set``: the
    newest published release with runs, else the set of the newest run). ``runs``: every run (the
    bootstrap's state is over all of them); ``tables`` (``evaluation.leaderboard.build_from_aggregates``)
    holds only the set's runs, with ``sets`` (every set, for a selector) and ``gold_set`` (the set
    shown: ``{key, label, n_runs, newest_run, published}``, or None without runs). The one place the
    page, its exports and ``GET /api/leaderboard/`` read a set's table from."""
    runs, sums, state = aggregated_runs()
    if refresh_run_aggregates([r["run_id"] for r in runs], state):
        runs, sums, state = aggregated_runs()
    sets = gold_sets(runs)
    keys = {e["key"] for e in sets}
    key = asked if asked in keys else default_gold_set(sets)
    shown = [r for r in runs if gold_set_key(r) == key]
    data = lb.build_from_aggregates(shown, {r["run_id"]: sums[r["run_id"]] for r in shown if r["run_id"] in sums})
    data["sets"] = sets
    data["gold_set"] = next((e for e in sets if e["key"] == key), None)
    return runs, data
