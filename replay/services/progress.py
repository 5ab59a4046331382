"""The write buffer of a running replay: finished steps are stored every ``FLUSH_S`` seconds
(``_Progress``) so that progress (steps done / total) is visible while a long replay runs; a replay
shorter than that is written once, in one transaction, when it ends (it shows ``queued`` until
then). The run's own row is written by ``_save_fields`` and, when it succeeds, by
``_finish_succeeded`` (which decides on the gold in the same statement).

The statements per replay are few and pinned by a test (``tests/test_replay_fast_paths.py``); the
hot ones go through ``replay.services.sql``. On PostgreSQL in autocommit (a worker) the last write is
one statement (``WITH … INSERT … UPDATE``: the cache's entries, the step rows or the copied ones,
the gold decision and the run's fields) and so its own transaction.
"""
from __future__ import annotations

from typing import Any

from django.db import router, transaction
from django.utils import timezone

from kernel.taskfile import to_storage
from replay.models import ReplayRun, ReplayStep
from replay.selectors import GOLD_MODE
from replay.services.cache import DbStepCache
from replay.services.sql import insert_rows_sql, newest_row_sql, one_statement_writes, update_by, update_rows
from studio.events import emit

#: longest time (s) between two progress writes of a running replay; a replay that ends sooner
#: is written once, when it ends. Below the replay page's polling interval (0.6 s,
#: ``replay_view.js``), so that every poll of a long replay still sees new progress; each write is
#: a transaction (0.25 s before: most no-cache replays of the benchmark's size then paid one)
FLUSH_S = 0.5



class _StepRow:
    """The values of one ``ReplayStep`` row before it is written (``_Progress``): a plain object
    with the model's defaults for a pending step (a model instance per step cost more to build
    than its row costs to write)."""

    __slots__ = ("index", "call", "args", "status", "duration_ms", "resolved_args", "obs", "error", "artifacts",
                 "cached", "expanded")

    def __init__(self, index: int, call: str, args: Any):
        self.index, self.call, self.args = index, call, args
        self.status, self.duration_ms, self.resolved_args = ReplayStep.Status.PENDING, None, {}
        self.obs, self.error, self.artifacts, self.cached, self.expanded = None, "", [], False, []



class _Progress:
    """The database side of a running replay: buffers finished steps and writes them, with the
    run's progress and the cache's new entries, in one transaction at most every ``FLUSH_S``
    seconds, so fast (cached) steps cost no query each.

    The first write also marks the run ``running`` (``start``: the fields to set, its old step
    rows deleted when it ran before) and inserts every step row (finished ones with their result,
    the rest ``pending``); later writes update the finished rows. ``finish(**fields)`` writes what
    is left and the run's final fields in one transaction (a replay shorter than ``FLUSH_S``
    costs that one transaction)."""

    FIELDS = ["status", "duration_ms", "resolved_args", "obs", "error", "artifacts", "cached", "expanded"]

    def __init__(self, run: ReplayRun, cache: DbStepCache, steps: list, start: dict, restarted: bool):
        import time as _time

        self.run = run
        self.cache = cache
        self.start = start
        self.restarted = restarted
        self.rows = [_StepRow(i, str(s.get("call", s.get("name", ""))) if isinstance(s, dict) else "",
                              (s.get("args", s.get("inputs")) or {}) if isinstance(s, dict) else {})
                     for i, s in enumerate(steps)]
        self.inserted = False
        self.buffer: list[_StepRow] = []
        self.done = 0
        self.last = _time.monotonic()

    def __call__(self, result) -> None:
        import time as _time

        if not 0 <= result.index < len(self.rows):
            return
        row = self.rows[result.index]
        row.status, row.duration_ms = result.status, result.duration_ms
        # the engine's values are plain JSON already, but an observation may hold NaN/inf
        # (as the benchmark's do): tagged for the JSON column (kernel.taskfile.to_storage)
        row.resolved_args = result.resolved_args or {}
        row.obs, row.error = to_storage(result.obs), result.error or ""
        row.artifacts = result.artifacts or []
        row.cached, row.expanded = result.cached, result.expanded or []
        self.buffer.append(row)
        if result.status == "succeeded":
            self.done = result.index + 1
        if _time.monotonic() - self.last >= FLUSH_S:
            self.flush()

    def flush(self) -> None:
        """Write what is buffered (a no-op when nothing is)."""
        import time as _time

        if self.inserted and not self.buffer and not self.cache.dirty:
            return
        with transaction.atomic():  # the last UPDATE relaxes the commit (replay.services.runs, "Crashes")
            self._write()
            _save_fields(self.run, relax_commit=True, steps_done=self.done, heartbeat_at=timezone.now())
        self.last = _time.monotonic()

    def finish(self, **fields) -> None:
        """Write what is buffered and set the run's final ``fields``, in one transaction; a
        ``status`` of ``succeeded`` goes through ``_finish_succeeded`` (``final_answer`` and
        ``replay_hash`` given), which decides on the gold. On PostgreSQL in autocommit, a first
        run of a replay that wrote nothing yet is one statement: the cache's writes and the step
        rows ride in the run's UPDATE (``WITH … INSERT``; one round trip where a transaction was
        five)."""
        if not self.inserted and not self.restarted and one_statement_writes(ReplayRun) and \
                not transaction.get_connection(router.db_for_write(ReplayRun)).in_atomic_block:
            fields = {**self.start, **fields, "with_statements": self.cache.statements() + self._rows_sql()}
            self.inserted, self.buffer = True, []
            self._end(fields)
            return
        with transaction.atomic():  # the last UPDATE relaxes the commit (replay.services.runs, "Crashes")
            if not self.inserted:  # one UPDATE of the run: its start fields, then the final ones
                fields = {**self.start, **fields}
            self._write(start=False)
            self._end(fields)

    def _end(self, fields: dict) -> None:
        if fields.get("status") == ReplayRun.Status.SUCCEEDED:
            fields.pop("status")
            _finish_succeeded(self.run, fields.pop("final_answer"), fields.pop("replay_hash"), **fields)
        else:
            _save_fields(self.run, relax_commit=True, **fields)

    def _rows_sql(self) -> list[tuple[str, list]]:
        """The INSERT of every step row (finished ones with their result, the rest pending)."""
        return insert_rows_sql(ReplayStep, ["run", "index", "call", *self.FIELDS, "args"],
                               ([self.run.pk, r.index, r.call, *(getattr(r, f) for f in self.FIELDS), r.args]
                                for r in self.rows))

    def _write(self, start: bool = True) -> None:
        """Write the cache's new entries and the buffered steps; on the first write also the step
        rows and (``start``) the run's start fields."""
        self.cache.flush()
        if not self.inserted:
            if self.restarted:
                ReplayStep.objects.filter(run=self.run).delete()
            if start:
                _save_fields(self.run, **self.start)
            with transaction.get_connection(router.db_for_write(ReplayStep)).cursor() as cur:
                for sql, params in self._rows_sql():
                    cur.execute(sql, params)
            self.inserted = True
            self.buffer = []
            return
        update_rows(ReplayStep, ["run", "index"], self.FIELDS,
                    (([self.run.pk, r.index], [getattr(r, f) for f in self.FIELDS]) for r in self.buffer))
        self.buffer = []



def _save_fields(run: ReplayRun, *, filled_trajectory_of: int | None = None, relax_commit: bool = False,
                 expressions: dict | None = None, returning: tuple[str, ...] = (), with_statements=(),
                 **fields) -> tuple | None:
    """``UPDATE`` the run's row with ``fields`` (plain values, by field name or attname) and set them
    on ``run`` too, so that the caller's instance matches the row without reading it back.

    ``filled_trajectory_of``: copy ``filled_trajectory`` from that run inside the database (the
    instance then loads it when it is read). One statement, written here rather than through
    ``QuerySet.update`` because replays call it on their hot path (the ORM's compilation cost
    more than the statement). ``relax_commit``, ``expressions``, ``returning`` (whose values it
    returns; not set on ``run``: the caller converts them) and ``with_statements``: as
    ``replay.services.sql.update_by`` takes them."""
    copied = ("filled_trajectory",) if filled_trajectory_of is not None else ()
    back = update_by(ReplayRun, {"id": run.pk}, fields, copy_fields=copied, copy_from={"id": filled_trajectory_of},
                     expressions=expressions, returning=returning, relax_commit=relax_commit,
                     with_statements=with_statements)
    for name, value in fields.items():
        setattr(run, name, value)
    if filled_trajectory_of is not None:
        run.__dict__.pop("filled_trajectory", None)  # a deferred field: Django loads it when read
    return back



def _finish_succeeded(run: ReplayRun, answer, h: str, **fields) -> None:
    """Mark ``run`` succeeded and decide whether it is the gold (the rule: ``replay.services.gold``), in the
    run's one ``UPDATE``: the newest other accepted gold of the task is read by two scalar
    subqueries of that statement and the decision returned (``RETURNING``), so that it costs no
    round trip of its own. The rule (unchanged): a GT-mode run is accepted when the task has no
    gold, or its gold was accepted automatically (``accepted_by`` null), or it has the gold's
    hash (then it takes the gold's ``accepted_by``); other modes never are.
    Joins the caller's transaction when there is one; ``fields`` go to ``_save_fields`` (and
    ``relax_commit`` is set: the replay's own transactions end with this statement)."""
    fields.update(status=ReplayRun.Status.SUCCEEDED, error="", final_answer=answer, replay_hash=h)
    if run.mode != GOLD_MODE:
        _save_fields(run, relax_commit=True, gold_accepted=False, accepted_by_id=None, **fields)
        return
    q = transaction.get_connection(router.db_for_write(ReplayRun)).ops.quote_name
    meta = ReplayRun._meta
    by, hsh = q(meta.get_field("accepted_by").column), q(meta.get_field("replay_hash").column)
    gold = dict(where=dict(task=run.task_id, mode=GOLD_MODE, status=ReplayRun.Status.SUCCEEDED, gold_accepted=True),
                exclude_pk=run.pk, select_params=[h])
    auto_sql, auto_params = newest_row_sql(ReplayRun, f"NOT ({by} IS NOT NULL AND {hsh} <> %s)", **gold)
    by_sql, by_params = newest_row_sql(ReplayRun, f"CASE WHEN {hsh} = %s THEN {by} END", **gold)
    back = _save_fields(run, relax_commit=True, returning=("gold_accepted", "accepted_by"),
                        expressions={"gold_accepted": (f"COALESCE(({auto_sql}), TRUE)", auto_params),
                                     "accepted_by": (f"({by_sql})", by_params)}, **fields)
    if back is not None:
        run.gold_accepted, run.accepted_by_id = bool(back[0]), back[1]
        if not run.gold_accepted:  # a changed gold answer waits for a person (rare: the hot path pays nothing)
            task = run.task
            emit("gold.changed", {"replay_id": run.pk, "task_id": task.pk, "question_id": task.question_id}, task=task)

