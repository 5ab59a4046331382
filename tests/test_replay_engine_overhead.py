"""The replay's per-step helpers give what they gave before their fast paths.

``canonical_json`` (step cache keys, output names, replay hashes, input fingerprints),
``to_storage`` / ``from_storage`` (every observation stored) and the JSON columns' value
preparation (``replay.services.sql``) took a copy of every value in Python; plain JSON now skips it.
Each is compared here with the general path it replaces, written out as it was (the reference
functions below), over random JSON values and over the values that take the general path
(NaN and infinities, numpy numbers, tuples, sets, paths, non-string keys, subclasses).

A replay without the cache (``use_cache=False``) asks which step-cache keys are stored before
writing its entries, and writes none that are: its statements are pinned below (the two-step
Florence task of ``tests/test_replay_services.py``).
"""
from __future__ import annotations

import json
import math
from collections import OrderedDict
from enum import IntEnum
from pathlib import Path

import numpy as np
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.replay import run_layers_variant_statements

from kernel import taskfile
from kernel.tools.base import canonical_json, jsonable
from replay.models import ReplayRun, StepCacheEntry
from replay.services.runs import create_run, execute_replay


@pytest.fixture
def task(florence_area_task):
    """The two-step area task over Florence (:func:`support.replay.florence_area_task`)."""
    return florence_area_task


def reference_canonical_json(value):
    """``canonical_json`` before its fast path: the ``jsonable`` copy, then the encoder."""
    return json.dumps(jsonable(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def reference_to_storage(value):
    """``to_storage`` before its fast path."""
    if isinstance(value, float) and not math.isfinite(value):
        return {taskfile.FLOAT_TAG: "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")}
    if isinstance(value, dict):
        out = {k: reference_to_storage(v) for k, v in value.items()}
        if len(value) == 1 and next(iter(value)) in (taskfile.FLOAT_TAG, taskfile.ESCAPE_TAG):
            return {taskfile.ESCAPE_TAG: out}
        return out
    if isinstance(value, (list, tuple)):
        return [reference_to_storage(v) for v in value]
    return value


def reference_from_storage(value):
    """``from_storage`` before its fast path."""
    if isinstance(value, dict):
        if len(value) == 1:
            (k, v), = value.items()
            if k == taskfile.FLOAT_TAG and isinstance(v, str) and v in ("NaN", "Infinity", "-Infinity"):
                return float(v.replace("Infinity", "inf").replace("NaN", "nan"))
            if k == taskfile.ESCAPE_TAG and isinstance(v, dict):
                return {kk: reference_from_storage(vv) for kk, vv in v.items()}
        return {k: reference_from_storage(v) for k, v in value.items()}
    if isinstance(value, list):
        return [reference_from_storage(v) for v in value]
    return value


def same(a, b) -> bool:
    """Equal as JSON values, NaN equal to NaN, types kept (``True`` is not ``1``)."""
    return json.dumps(a, sort_keys=False) == json.dumps(b, sort_keys=False) and type(a) is type(b)


keys = st.text(max_size=5) | st.sampled_from(["$float", "$json", "tool", "b", "a", "10", "2"])
scalars = (st.none() | st.booleans() | st.integers(-10**20, 10**20) | st.floats(allow_nan=True, allow_infinity=True)
           | st.text(max_size=6))
values = st.recursive(scalars, lambda c: st.lists(c, max_size=4) | st.dictionaries(keys, c, max_size=4)
                      | st.lists(c, max_size=3).map(tuple), max_leaves=20)
FAST = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class Level(IntEnum):
    HIGH = 3


class Text(str):
    pass


# values that leave the fast paths: each must still give what the general path gives
ODD = [
    {"a": math.nan, "b": [1, math.inf, -math.inf]},
    {1: "x", 10: "y", 2: "z"},  # int keys: strings, sorted as strings ("10" < "2")
    {True: 1, None: 2, 1.5: 3},
    {"x": (1, 2, (3, 4))},
    {"s": {3, 1, 2}},
    {"p": Path("/data/a/b.png")},
    {"n": np.float64(0.1), "i": np.int64(7), "b": np.bool_(True), "arr": np.arange(3), "nan": np.float64("nan")},
    OrderedDict([("b", 1), ("a", 2)]),
    {"e": Level.HIGH, "t": Text("τ"), "u": "ü 漢字"},
    [{"$float": "NaN"}, {"$json": {"$float": 1}}, {"$float": math.nan}],
    [],
    {},
    "plain",
    3.25,
    None,
]


@FAST
@given(values)
def test_canonical_json_is_unchanged_on_random_json(value):
    assert canonical_json(value) == reference_canonical_json(value)


@pytest.mark.parametrize("value", ODD, ids=range(len(ODD)))
def test_canonical_json_is_unchanged_off_the_fast_path(value):
    assert canonical_json(value) == reference_canonical_json(value)


def test_canonical_json_refuses_what_it_refused():
    for bad in [{"x": object()}, [b"bytes"]]:
        with pytest.raises(TypeError):
            reference_canonical_json(bad)
        with pytest.raises(TypeError):
            canonical_json(bad)


@FAST
@given(values)
def test_storage_tagging_is_unchanged_on_random_json(value):
    stored = taskfile.to_storage(value)
    assert same(stored, reference_to_storage(value))
    text = json.loads(json.dumps(stored))
    assert same(taskfile.from_storage(text), reference_from_storage(text))


@pytest.mark.parametrize("value", ODD, ids=range(len(ODD)))
def test_storage_tagging_is_unchanged_off_the_fast_path(value):
    stored = taskfile.to_storage(value)
    ref = reference_to_storage(value)
    assert repr(stored) == repr(ref)
    assert repr(taskfile.from_storage(stored)) == repr(reference_from_storage(ref))


def test_to_storage_copies_containers():
    value = {"a": [1, {"b": 2.5}], "t": (1, 2)}
    stored = taskfile.to_storage(value)
    assert stored == {"a": [1, {"b": 2.5}], "t": [1, 2]}
    assert stored is not value and stored["a"] is not value["a"] and stored["a"][1] is not value["a"][1]


def test_json_columns_are_prepared_as_the_field_prepares_them(db):
    from replay.services.sql import _preparer

    field = StepCacheEntry._meta.get_field("obs")
    prep = _preparer(field, connection)
    for value in [{"tool": "ras.area", "area_m2": 6691.5, "poly": [[0, 1], [2.5, 3]]}, [1, "a", None], "text", 3, None]:
        fast, slow = prep(value), field.get_db_prep_save(value, connection)
        # SQLite: the JSON text; PostgreSQL: psycopg's Jsonb wrapper of the value itself
        assert type(fast) is type(slow) and repr(getattr(fast, "obj", fast)) == repr(getattr(slow, "obj", slow))


def _statements(ctx: CaptureQueriesContext) -> list[str]:
    return [q["sql"].split()[0].upper() for q in ctx.captured_queries
            if not q["sql"].upper().startswith(("SAVEPOINT", "RELEASE", "BEGIN", "COMMIT", "ROLLBACK", "SET"))]


def test_a_replay_without_the_cache_writes_no_entry_that_is_stored(task):
    first = execute_replay(create_run(task).pk)
    entries = list(StepCacheEntry.objects.order_by("key").values_list("key", "obs", "artifacts", "hits", "created_at"))
    assert len(entries) == 2  # the two steps
    run = create_run(task)
    with CaptureQueriesContext(connection) as ctx:
        again = execute_replay(run.pk, use_cache=False)
    # the run, the layers and the task's variant row (none); which of the two keys are stored
    # (both); at the end: the step rows, the run's update with the gold lookup inside (no cache
    # INSERT; the gold lookup was a SELECT of its own before the round trips were cut)
    assert _statements(ctx) == run_layers_variant_statements() + ["SELECT", "INSERT", "UPDATE"]
    assert again.status == "succeeded" and again.tool_calls == 2 and again.cache_hits == 0
    assert again.replay_hash == first.replay_hash
    assert list(StepCacheEntry.objects.order_by("key").values_list("key", "obs", "artifacts", "hits", "created_at")) == entries


def test_a_replay_without_the_cache_still_fills_it(task):
    run = create_run(task)
    with CaptureQueriesContext(connection) as ctx:
        done = execute_replay(run.pk, use_cache=False)
    # the run, the layers, the variant; which keys are stored (none); the cache's entries, the step
    # rows, the run's update
    assert _statements(ctx) == run_layers_variant_statements() + ["SELECT", "INSERT", "INSERT", "UPDATE"]
    assert done.status == "succeeded" and StepCacheEntry.objects.count() == 2
    # the next cached replay finds the entries (it reuses the whole run: nothing runs)
    warm = execute_replay(create_run(task).pk)
    assert warm.tool_calls == 0 and ReplayRun.objects.get(pk=warm.pk).replay_hash == done.replay_hash
