"""The scoring core's run-time helpers and its Django-free command line (faster, the same bytes)."""
from __future__ import annotations

import gc
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SCORING_EXAMPLES, needs_shared
from hypothesis import given, settings
from hypothesis import strategies as st

from evaluation.scoring.runtime import dumps_indented, leave_to_exit, paused_gc

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = SCORING_EXAMPLES

# JSON-like values as eval.json holds them, plus the odd ones json.dumps accepts: NaN and ±Infinity,
# non-string keys (int, float, bool, None), tuples, unicode and control characters, deep nesting.
_scalars = (st.none() | st.booleans() | st.integers(min_value=-(10**20), max_value=10**20)
            | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=12))
_keys = st.text(max_size=8) | st.integers(-5, 5) | st.floats(allow_nan=False, width=16) | st.booleans() | st.none()
_values = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner)
                       | st.dictionaries(_keys, inner, max_size=4), max_leaves=30)


@settings(max_examples=400, deadline=None, derandomize=True)
@given(_values)
def test_dumps_indented_is_json_dumps_character_for_character(value):
    # The reference is the standard library itself: json.dumps(obj, ensure_ascii=False, indent=2).
    assert dumps_indented(value) == json.dumps(value, ensure_ascii=False, indent=2)


def test_dumps_indented_hand_worked_and_refusals():
    # Hand-written expected text in json.dumps's indent=2 layout.
    assert dumps_indented({"a": [1, 2.5, None], "b": {}, "c": [], 3: math.nan}) == (
        '{\n  "a": [\n    1,\n    2.5,\n    null\n  ],\n  "b": {},\n  "c": [],\n  "3": NaN\n}')
    assert dumps_indented([True, "é\n", -math.inf]) == '[\n  true,\n  "é\\n",\n  -Infinity\n]'
    with pytest.raises(TypeError):
        dumps_indented({"x": object()})
    with pytest.raises(TypeError):
        dumps_indented({(1, 2): 1})  # json refuses tuple keys too


def test_paused_gc_restores_the_collector_and_nests():
    assert gc.isenabled()
    with paused_gc():
        assert not gc.isenabled()
        with paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner block leaves it as the outer one set it
    assert gc.isenabled()
    gc.disable()
    try:
        with paused_gc():
            pass
        assert not gc.isenabled()  # it was off before: it stays off
    finally:
        gc.enable()


def test_leave_to_exit_keeps_objects_until_a_collection():
    # What the command line relies on: the objects stay alive after the last name for them goes
    # (no freeing one by one); inside paused_gc(freeze=True) the frozen cycle is never collected;
    # outside it, the next full collection frees them like any garbage.
    import weakref

    class Box:
        pass

    box = Box()
    ref = weakref.ref(box)
    with paused_gc():
        leave_to_exit(box, [1, 2])
        del box
        assert ref() is not None
    gc.collect()
    assert ref() is None


@pytest.mark.parametrize("agent", ["agent_a", "agent_b"])
def test_manage_py_evaluate_runs_runs_without_django_and_writes_the_official_bytes(agent, tmp_path):
    # From a shell, manage.py hands evaluate_runs to evaluation.scoring.cli before Django starts; the
    # file it writes is the official evaluator's eval.json (shared/scoring-examples/expected) plus
    # the documented "mode" key.
    out = tmp_path / "eval.json"
    run_dir, tasks_dir = str(needs_shared(EXAMPLES / "runs" / agent)), str(needs_shared(EXAMPLES / "tasks"))
    probe = (f"import runpy, sys; sys.argv = ['manage.py', 'evaluate_runs', '--run', {run_dir!r}, '--tasks-dir', "
             f"{tasks_dir!r}, '--output', {str(out)!r}]\ntry:\n    runpy.run_path('manage.py', run_name='__main__')\n"
             "except SystemExit as e:\n"
             "    assert e.code == 0, e.code\nassert 'django.conf' not in sys.modules, 'Django was imported'\n")
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    official = needs_shared(EXAMPLES / "expected" / f"{agent}.eval.json").read_text(encoding="utf-8")
    got = json.loads(out.read_text(encoding="utf-8"))
    assert got.pop("mode") == "dora"
    assert json.dumps(got, ensure_ascii=False, indent=2) == official
    assert out.with_suffix(".txt").read_text(encoding="utf-8") == \
        needs_shared(EXAMPLES / "expected" / f"{agent}.eval.txt").read_text(encoding="utf-8")
    assert "DORA Score" in done.stdout


def test_evaluate_runs_start_up_imports_neither_django_nor_dataclasses():
    # the start-up target (<= 0.1 s over bare Python, bench/scoring.py): the command's
    # import path avoids Django and ``dataclasses``, which imports ``inspect`` (about 9 ms of the
    # 37 ms measured on 2026-12-02; kernel.vocabulary, kernel.taskfile and the scoring config are
    # plain classes for that reason).
    probe = ("import runpy, sys; sys.argv = ['manage.py', 'evaluate_runs', '--help']\ntry:\n"
             "    runpy.run_path('manage.py', run_name='__main__')\nexcept SystemExit as e:\n    assert e.code == 0, e.code\n"
             "print(sorted(m for m in ('django', 'django.conf', 'dataclasses', 'inspect') if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "--tau-r" in done.stdout and done.stdout.strip().splitlines()[-1] == "[]"


def test_evaluate_runs_names_a_missing_folder(tmp_path):
    done = subprocess.run([sys.executable, "manage.py", "evaluate_runs", "--run", str(tmp_path / "nope")],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and f"run directory not found: {tmp_path / 'nope'}" in done.stderr


# Lists of objects with the same keys in the same order (eval.json's full.<dim>.tasks) take the
# table path of dumps_indented (at least 8 rows; values scalars or flat objects, empty ones too).
_flat = st.dictionaries(_keys, _scalars, max_size=3)
_rows = st.lists(st.text(max_size=5) | st.integers(-3, 3), min_size=1, max_size=5, unique=True).flatmap(
    lambda keys: st.lists(st.fixed_dictionaries({k: _flat if i % 2 else _scalars for i, k in enumerate(keys)}),
                          min_size=8, max_size=12))


@settings(max_examples=200, deadline=None, derandomize=True)
@given(_rows, st.integers(0, 3))
def test_dumps_indented_tables_are_json_dumps_character_for_character(rows, depth):
    value = rows
    for _ in range(depth):  # the table nested at some depth, as in {"full": {"t1": {"tasks": [...]}}}
        value = {"x": value, "y": [1, {"z": None}]}
    assert dumps_indented(value) == json.dumps(value, ensure_ascii=False, indent=2)
    # a row that breaks the table (other keys, a nested list) falls back to the general writer
    odd = rows + [{"other": [1, [2]]}]
    assert dumps_indented(odd) == json.dumps(odd, ensure_ascii=False, indent=2)
    # ... and so does a row with the same keys in another order, or a dict subclass
    swapped = rows + [dict(reversed(rows[0].items()))]
    assert dumps_indented(swapped) == json.dumps(swapped, ensure_ascii=False, indent=2)
    sub = rows[:-1] + [type("Row", (dict,), {})(rows[-1])]
    assert dumps_indented(sub) == json.dumps(sub, ensure_ascii=False, indent=2)
