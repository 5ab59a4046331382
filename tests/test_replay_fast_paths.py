"""The replay's database paths, kept lean for benchmark scale (``bench/replay.py``).

- A replay writes in one transaction at its end when it is shorter than ``FLUSH_S``; a longer one
  shows its progress (``running``, steps done, finished and pending step rows) every ``FLUSH_S``.
- The whole-run cache copies the earlier run's step rows and filled trajectory inside the
  database; the copy equals the original.
- The statements per replay are pinned (as list pages pin theirs), on both database configurations.
- ``replay.services.sql``: inserts that skip conflicting rows, updates with a value copied in SQL.

Values: the Florence tile ``hurricane-florence_00000018`` gives 6,691.5 m² for classes [2, 3] at
0.5 m (worked out by hand in ``tests/test_replay_services.py``: (26,492 + 274) px × 0.25 m²).
"""
from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from support.replay import run_layers_variant_statements

import kernel.engine as engine
import replay.services.progress as progress_module
from replay.models import ReplayRun, ReplayStep, StepCacheEntry
from replay.services.runs import create_run, execute_replay
from replay.services.sql import insert_rows, update_by


@pytest.fixture
def task(florence_area_task):
    """The two-step area task over Florence (:func:`support.replay.florence_area_task`)."""
    return florence_area_task


def _state_when_area_runs(monkeypatch):
    """Record, when ``ras.area`` (step 1) starts, what the database shows of its run."""
    seen = {}
    real = engine.call_tool

    def spy(name, args, ctx, **kw):
        if name == "ras.area":
            run = ReplayRun.objects.order_by("-id").first()
            seen.update(status=run.status, steps_done=run.steps_done,
                        rows=list(ReplayStep.objects.filter(run=run).order_by("index").values_list("index", "status")))
        return real(name, args, ctx, **kw)

    monkeypatch.setattr(engine, "call_tool", spy)
    return seen


def test_a_short_replay_is_written_once_at_its_end(task, monkeypatch):
    monkeypatch.setattr(progress_module, "FLUSH_S", 3600.0)
    seen = _state_when_area_runs(monkeypatch)
    run = execute_replay(create_run(task).pk)
    # nothing was written while it ran: the run was still queued and had no step rows
    assert seen == {"status": "queued", "steps_done": 0, "rows": []}
    assert run.status == "succeeded" and run.final_answer == {"damaged_area_m2": 6691.5}
    stored = ReplayRun.objects.get(pk=run.pk)
    assert (stored.status, stored.steps_done, stored.final_answer) == ("succeeded", 2, {"damaged_area_m2": 6691.5})
    assert list(stored.steps.values_list("index", "status")) == [(0, "succeeded"), (1, "succeeded")]


def test_a_long_replay_shows_its_progress(task, monkeypatch):
    monkeypatch.setattr(progress_module, "FLUSH_S", 0.0)  # every step counts as "long"
    seen = _state_when_area_runs(monkeypatch)
    run = execute_replay(create_run(task).pk)
    assert seen == {"status": "running", "steps_done": 1, "rows": [(0, "succeeded"), (1, "pending")]}
    assert run.status == "succeeded" and run.steps_done == 2
    assert list(ReplayStep.objects.filter(run=run).values_list("status", flat=True)) == ["succeeded", "succeeded"]


def test_the_whole_run_cache_copies_steps_and_trajectory_in_the_database(task):
    first = execute_replay(create_run(task).pk)
    second = execute_replay(create_run(task).pk)
    assert second.status == "succeeded" and second.tool_calls == 0 and second.cache_hits == 2
    # the returned instance loads the copied trajectory when it is read
    assert "filled_trajectory" in second.get_deferred_fields()
    assert second.filled_trajectory == first.filled_trajectory and second.replay_hash == first.replay_hash
    cols = ("index", "call", "status", "args", "resolved_args", "obs", "artifacts", "error", "expanded")
    assert list(ReplayStep.objects.filter(run=second).values_list(*cols)) == \
        list(ReplayStep.objects.filter(run=first).values_list(*cols))
    assert set(ReplayStep.objects.filter(run=second).values_list("cached", "duration_ms")) == {(True, 0)}
    fresh = ReplayRun.objects.get(pk=second.pk)
    assert (fresh.final_answer, fresh.steps_done, fresh.cache_hits) == ({"damaged_area_m2": 6691.5}, 2, 2)
    assert fresh.artifact_manifest == first.artifact_manifest and fresh.gold_accepted


def _statements(ctx: CaptureQueriesContext) -> list[str]:
    """The data statements (transaction control: BEGIN, SAVEPOINT, RELEASE left out)."""
    return [q["sql"].split()[0].upper() for q in ctx.captured_queries
            if not q["sql"].upper().startswith(("SAVEPOINT", "RELEASE", "BEGIN", "COMMIT", "ROLLBACK"))]


def test_statements_per_replay_are_pinned(task):
    cold = create_run(task)
    with CaptureQueriesContext(connection) as ctx:
        execute_replay(cold.pk)
    # the run with its revision and task; the event's layers; the task's variant row (none: a
    # robustness variant's replay rules, replay.services.runs); an identical earlier run (none);
    # two step-cache lookups; at the end (one transaction): the cache's new entries, the step
    # rows, the run's update (the gold lookup is two subqueries of it: it was a SELECT of its own)
    assert _statements(ctx) == run_layers_variant_statements() + ["SELECT"] * 3 + ["INSERT", "INSERT", "UPDATE"]
    warm = create_run(task)
    with CaptureQueriesContext(connection) as ctx:
        execute_replay(warm.pk)
    # the run; the layers; the variant row; the identical earlier run; then copy its steps, update
    # (gold inside); inside the test's transaction, so the PostgreSQL one-statement form is not
    # taken (next test)
    assert _statements(ctx) == run_layers_variant_statements() + ["SELECT", "INSERT", "UPDATE"]


@pytest.mark.django_db(transaction=True)
def test_outside_a_transaction_a_replay_ends_in_one_statement(task, monkeypatch):
    """In autocommit (a worker, the bench): ``create_run`` is one INSERT, no transaction around
    it; on PostgreSQL a short replay's end (cold: the cache's entries, the step rows, the gold
    decision, the run's update; warm: the step copy, the gold decision, the run's update) is one
    statement too. Counted: the statements sent and the COMMITs of transactions Django opened."""
    commits = []
    real_commit = connection._commit
    monkeypatch.setattr(connection, "_commit", lambda: (commits.append(1), real_commit())[1])
    pg = connection.vendor == "postgresql"
    cold = create_run(task)
    with CaptureQueriesContext(connection) as ctx:
        first = execute_replay(cold.pk)
    # the run, the layers, the variant row (none), an identical run (none), two cache lookups
    assert _statements(ctx) == run_layers_variant_statements() + ["SELECT"] * 3 + (["WITH"] if pg else ["INSERT", "INSERT", "UPDATE"])
    assert commits == ([] if pg else [1])
    assert first.status == "succeeded" and first.gold_accepted is True and first.tool_calls == 2
    assert StepCacheEntry.objects.count() == 2 and first.final_answer == {"damaged_area_m2": 6691.5}
    commits.clear()
    with CaptureQueriesContext(connection) as ctx:
        run = create_run(task)
    assert _statements(ctx) == ["INSERT"] and commits == []
    # the relaxed commit rides in the INSERT's RETURNING list on PostgreSQL (was SET LOCAL)
    assert ("set_config('synchronous_commit', 'off', true)" in ctx.captured_queries[0]["sql"]) is pg
    with CaptureQueriesContext(connection) as ctx:
        warm = execute_replay(run.pk)
    # the run, the layers, the variant row, the identical earlier run; then PostgreSQL: one WITH …
    # INSERT … UPDATE, no transaction; SQLite (no data-modifying WITH): INSERT … SELECT and UPDATE,
    # one transaction
    assert _statements(ctx) == run_layers_variant_statements() + ["SELECT"] + (["WITH"] if pg else ["INSERT", "UPDATE"])
    assert commits == ([] if pg else [1])
    assert warm.tool_calls == 0 and warm.gold_accepted is True and warm.accepted_by_id is None
    stored = ReplayRun.objects.get(pk=warm.pk)
    assert (stored.status, stored.replay_hash, stored.filled_trajectory, stored.gold_accepted) == \
        ("succeeded", first.replay_hash, first.filled_trajectory, True)
    cols = ("index", "call", "status", "args", "resolved_args", "obs", "artifacts", "error", "expanded")
    assert list(ReplayStep.objects.filter(run=warm).order_by("index").values_list(*cols)) == \
        list(ReplayStep.objects.filter(run=first).order_by("index").values_list(*cols))


@pytest.mark.django_db(transaction=True)
def test_relax_commit_in_an_update_applies_to_the_outermost_transaction_only(task):
    from django.db import transaction

    pg = connection.vendor == "postgresql"

    def setting():  # PostgreSQL's per-transaction value (SQLite has no such setting)
        if not pg:
            return None
        with connection.cursor() as cur:
            cur.execute("SELECT current_setting('synchronous_commit')")
            return cur.fetchone()[0]

    run = create_run(task)
    with transaction.atomic():
        update_by(ReplayRun, {"id": run.pk}, {"steps_done": 1}, relax_commit=True)
        outer = setting()
    with transaction.atomic():
        with transaction.atomic():  # nested: the outer transaction's commit decides, nothing changes
            update_by(ReplayRun, {"id": run.pk}, {"steps_done": 2}, relax_commit=True)
            nested = setting()
    assert (outer, nested) == (("off", "on") if pg else (None, None))
    assert ReplayRun.objects.get(pk=run.pk).steps_done == 2


def test_insert_rows_skips_conflicts_and_update_by_copies_in_sql(db):
    now = "2026-11-29T12:00:00+00:00"
    from django.utils.dateparse import parse_datetime

    at = parse_datetime(now)
    cols = ["key", "tool", "tool_version", "obs", "artifacts", "hits", "created_at"]
    assert insert_rows(StepCacheEntry, cols, [["k1", "calc.add", 1, {"sum": 3}, [], 0, at],
                                              ["k2", "calc.add", 1, {"sum": 5}, [], 0, at]]) == 2
    insert_rows(StepCacheEntry, cols, [["k1", "calc.add", 1, {"sum": 999}, [], 0, at],
                                       ["k3", "calc.mul", 2, None, [{"name": "a.png", "sha256": "0" * 64}], 0, at]],
                ignore_conflicts=True)
    rows = {e.key: e for e in StepCacheEntry.objects.all()}
    assert sorted(rows) == ["k1", "k2", "k3"]
    assert rows["k1"].obs == {"sum": 3}  # the first row stays; the conflicting one was skipped
    assert rows["k3"].obs is None and rows["k3"].artifacts[0]["name"] == "a.png" and rows["k3"].created_at == at
    update_by(StepCacheEntry, {"key": "k2"}, {"hits": 7}, copy_fields=("obs",), copy_from={"key": "k1"})
    k2 = StepCacheEntry.objects.get(key="k2")
    assert (k2.hits, k2.obs) == (7, {"sum": 3})
    assert StepCacheEntry.objects.get(key="k1").hits == 0


def _row_values(obj):
    return {f.attname: getattr(obj, f.attname) for f in type(obj)._meta.concrete_fields
            if f.attname not in obj.get_deferred_fields()}


def test_load_instances_gives_what_the_orm_gives(task):
    from annotation.models import Layer
    from replay.services.sql import load_instances

    run = execute_replay(create_run(task).pk)
    orm = ReplayRun.objects.select_related("revision", "task").get(pk=run.pk)
    [fast] = load_instances(ReplayRun, where={"id": run.pk}, related=("revision", "task"))
    # every field equal and of the same type (datetimes aware, JSON decoded, booleans as bool on SQLite)
    for a, b in [(orm, fast), (orm.revision, fast.revision), (orm.task, fast.task)]:
        assert _row_values(a) == _row_values(b)
        assert {k: type(v) for k, v in _row_values(a).items()} == {k: type(v) for k, v in _row_values(b).items()}
    assert fast.final_answer == {"damaged_area_m2": 6691.5} and fast.gold_accepted is True
    assert fast._state.adding is False and fast.revision.trajectory == task.head.trajectory
    # ``fields`` defers the rest as ``only`` does, in the ORM's order
    fields = ("id", "file_name", "path", "kind", "class_map", "annotates_id")
    orm_layers = list(Layer.objects.filter(event_id=task.event_id).only(*fields).order_by("id"))
    fast_layers = load_instances(Layer, where={"event": task.event_id}, fields=fields, order_by=("id",))
    assert [l.pk for l in fast_layers] == [l.pk for l in orm_layers] and len(fast_layers) >= 2
    assert [_row_values(l) for l in fast_layers] == [_row_values(l) for l in orm_layers]
    assert fast_layers[0].get_deferred_fields() == orm_layers[0].get_deferred_fields() and "gsd_m" in \
        fast_layers[0].get_deferred_fields()
    assert load_instances(ReplayRun, where={"id": run.pk + 1000}) == []
    # several queries at once (one round trip on PostgreSQL), a later one's value found by a subquery
    from annotation.models import Task
    from replay.services.sql import column_sql, load_many

    def event_of(run_id):
        return {"event": column_sql(Task, "event", {"id": column_sql(ReplayRun, "task", {"id": run_id})})}

    [runs, layers] = load_many(dict(model=ReplayRun, where={"id": run.pk}, related=("revision", "task")),
                               dict(model=Layer, where=event_of(run.pk), fields=fields, order_by=("id",)))
    assert [_row_values(r) for r in runs] == [_row_values(fast)] and _row_values(runs[0].task) == _row_values(fast.task)
    assert [_row_values(l) for l in layers] == [_row_values(l) for l in orm_layers]
    assert load_many(dict(model=ReplayRun, where={"id": run.pk + 1000}),
                     dict(model=Layer, where=event_of(run.pk + 1000), fields=fields)) == [[], []]


def test_insert_instance_writes_the_row_the_orm_would(task):
    from replay.services.sql import insert_instance

    run = insert_instance(ReplayRun(task=task, revision=task.head, mode="gt", steps_total=2, eval_spec={"a": "b"}))
    assert run.pk is not None and run._state.adding is False
    stored = ReplayRun.objects.get(pk=run.pk)
    # the model's defaults and auto_now_add applied, as ``objects.create`` applies them
    assert (stored.status, stored.steps_done, stored.filled_trajectory, stored.eval_spec) == ("queued", 0, [], {"a": "b"})
    assert stored.created_at is not None and stored.created_at == run.created_at


@pytest.mark.django_db(transaction=True)
def test_commit_without_flush_wait_applies_to_the_outermost_transaction_only():
    from django.db import transaction

    from replay.services.sql import commit_without_flush_wait

    with pytest.raises(RuntimeError):
        commit_without_flush_wait(ReplayRun)  # autocommit: there is no transaction to relax
    with transaction.atomic():
        with CaptureQueriesContext(connection) as outer:
            commit_without_flush_wait(ReplayRun)
        with transaction.atomic():  # nested: the outer transaction's commit decides, nothing is sent
            with CaptureQueriesContext(connection) as nested:
                commit_without_flush_wait(ReplayRun)
    # PostgreSQL's per-transaction setting; SQLite has no such setting (a no-op there)
    expected = ["SET LOCAL synchronous_commit = off"] if connection.vendor == "postgresql" else []
    assert [q["sql"] for q in outer.captured_queries] == expected
    assert [q["sql"] for q in nested.captured_queries] == []
