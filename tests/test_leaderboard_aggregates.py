"""The leaderboard from sums stored at scoring time and its background bootstrap.

The promise: the tables built from the stored sums (``RunAggregate``) are *identical* — the same
floats, not merely close — to the ones built from every record (``evaluation.leaderboard.build``
over ``leaderboard_data()``, the computation the page used before), after an import, after a gold
change and after a task deletion; the sums are written in the import's transaction; the
bootstrap intervals are the same ``bootstrap_ci`` numbers, computed off the request.
"""
from __future__ import annotations

import json
import math
import time

import pytest
from conftest import REALDATA, SCORING_EXAMPLES, needs_shared
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import include, path

from evaluation import leaderboard as lb

urlpatterns = [path("", include("frontend.urls_leaderboard")), path("", include("studio.urls"))]
FLORENCE = REALDATA / "xbd-hurricane-florence"
TABLES = ("official", "length", "modality", "traj_extras", "modes")


def _row(run_id, dim, score, bucket=None, modality=None, task_id=1, **kw):
    base = {"record_id": None, "run_id": run_id, "dimension": dim, "question_id": "q", "task_id": task_id,
            "task_score": score, "length_bucket": bucket, "modality": modality,
            **{m: kw.pop(m, None) for m in lb.METRICS},
            "lcs_par_acc": None, "multiset_recall": None, "extraneous_calls": None, "n_pred_steps": None}
    base.update(kw)
    return base


def _by_run(rows):
    out = {}
    for r in rows:
        out.setdefault(r["run_id"], []).append(r)
    return out


def _from_aggregates(runs, rows):
    # through JSON, as the sums are stored (a JSON column)
    sums = {rid: json.loads(json.dumps(lb.run_aggregate(rs))) for rid, rs in _by_run(rows).items()}
    return lb.build_from_aggregates(runs, sums)


# ── pure: the sums give the from-records tables exactly ──────────────────

def test_sums_rebuild_the_tables_exactly_with_nan_none_and_missing_metrics():
    t1 = {"dim_score": 0.5, "n_tasks": 3, "n_scored_tasks": 2, "t_any": 1.0, "t_ord": 0.5, "t_em": 0.0,
          "par_acc": 0.25, "eff": 1.0}
    no_eff = {k: v for k, v in t1.items() if k != "eff"}  # a stored block without Eff: recomputed
    runs = [{"run_id": 1, "agent": "gold", "mode": "dora", "dora_score": 1.0, "dimensions": {"t1": t1}},
            {"run_id": 2, "agent": "a", "mode": "dora", "dora_score": 0.4, "dimensions": {"t1": no_eff, "t2": t1}},
            {"run_id": 3, "agent": "b", "mode": "paper", "dora_score": None, "dimensions": {}}]
    rows = [
        _row(1, "t1", 1.0, "1", "optical", eff=1.0), _row(1, "t1", 1.0, "2–3", "optical+sar", eff=0.5),
        _row(2, "t1", 0.1, "1", "optical", eff=0.3, lcs_par_acc=0.5, par_acc=0.25, multiset_recall=1.0,
             extraneous_calls=2, n_pred_steps=5),
        _row(2, "t1", 0.2, "1", "optical", eff=float("nan"), lcs_par_acc=1.0, par_acc=None, multiset_recall=0.5,
             extraneous_calls=0, n_pred_steps=3),
        _row(2, "t1", float("nan"), "≥11", "optical", eff=0.7),  # NaN score: "≥11" listed, no accuracy
        _row(2, "t2", None, "2–3", "optical"),  # no scored field: in no group
        _row(2, "t2", 0.7, None, None, task_id=None),  # no studio task
        _row(3, "t1", 0.3, "4–5", "sar", lcs_par_acc=0.0, n_pred_steps=0, extraneous_calls=0),
    ]
    old = lb.build(runs, rows, n_boot=50)
    new = _from_aggregates(runs, rows)
    for key in TABLES:
        assert new[key] == old[key], key
    assert new["n_records"] == 8 and new["n_no_task"] == 1
    # by hand: run 2's "1" bucket is the mean of 0.1 and 0.2; its recomputed Eff mean over the t1
    # records with a value is (0.3 + 0.7) / 2 = 0.5, averaged with t2's stored 1.0 → 0.75
    cell = next(c for r in new["length"]["rows"] if r["run_id"] == 2 for c in r["cells"] if c["group"] == "1")
    assert math.isclose(cell["acc"], 0.15) and cell["n"] == 2
    assert new["length"]["groups"] == ["1", "2–3", "4–5", "≥11"]
    official_2 = next(r for r in new["official"] if r["run_id"] == 2)
    assert official_2["source"] == "recomputed" and math.isclose(official_2["metrics"]["eff"], 0.75)
    extras_2 = next(e for e in new["traj_extras"] if e["run_id"] == 2)
    assert extras_2["n"] == 2 and extras_2["par_acc"] == 0.25 and extras_2["extraneous_rate"] == 2 / 8


# ── Django: a seeded benchmark ───────────────────────────────────────────

@pytest.fixture
def logged_in(client, settings):
    from django.contrib.auth import get_user_model

    settings.ROOT_URLCONF = __name__
    user = get_user_model().objects.create_user("lea", password="pw-test-123")
    client.force_login(user)
    return client


@pytest.fixture
def seeded(db):
    from annotation.services.imports import import_xbd_folder
    from evaluation.services.seeding import seed_synthetic

    import_xbd_folder(needs_shared(FLORENCE))
    return seed_synthetic(40, 3, batch=10, tasks_per_sample=2, seed=3)


def _tables_now(gold_set=None):
    from frontend.views.leaderboard import _tables

    return _tables(gold_set)[1]


def _tables_from_records(gold_set=None):
    from evaluation.selectors.leaderboard import leaderboard_data

    runs, rows = leaderboard_data(gold_set=gold_set)
    return lb.build(runs, rows, n_boot=10), rows


def _assert_identical():
    """Per gold set (the leaderboard never ranks two sets together): the tables from the stored
    sums equal those built from every record of the set's runs; the counts add up over the sets."""
    sets = _tables_now()["sets"]
    n_records = n_no_task = 0
    official, groups = [], {"length": set(), "modality": set()}
    for entry in sets:
        new = _tables_now(entry["key"])
        assert new["gold_set"]["key"] == entry["key"]
        old, rows = _tables_from_records(entry["key"])
        for key in TABLES:
            assert new[key] == old[key], (entry["label"], key)
        assert new["n_records"] == len(rows) and new["n_no_task"] == sum(r["task_id"] is None for r in rows)
        n_records, n_no_task = n_records + new["n_records"], n_no_task + new["n_no_task"]
        official += new["official"]
        for key in groups:
            groups[key] |= set(new[key]["groups"])
    return {"n_records": n_records, "n_no_task": n_no_task, "sets": sets, "official": official,
            **{key: {"groups": g} for key, g in groups.items()}}


def _write_run_folder(tmp_path, run):
    """A run folder in the benchmark's layout holding ``run``'s predictions (to import them again)."""
    from annotation.services.tasks import TASK_FILES
    from evaluation.models import RunRecord

    folder = tmp_path / "again"
    for r in RunRecord.objects.filter(run=run).order_by("id"):
        d = folder / TASK_FILES[r.dimension][:-5]
        d.mkdir(parents=True, exist_ok=True)
        with open(d / "benchmark.jsonl", "a") as fh:
            fh.write(json.dumps({"question_id": r.question_id, "predicted_answer": r.predicted_answer,
                                 "trajectory": r.trajectory}) + "\n")
    return folder


def test_seeded_benchmark_tables_equal_the_from_records_ones(seeded, maintainer, tmp_path):
    from evaluation.models import AgentRun, RunAggregate
    from evaluation.services.runs import import_run_dir

    assert RunAggregate.objects.count() == 3  # seed_synthetic writes them with the scores
    _assert_identical()
    # an import over the studio's tasks and one over a task folder (records without studio tasks)
    import_run_dir(maintainer, _write_run_folder(tmp_path, AgentRun.objects.order_by("id")[1]), "again-agent")
    import_run_dir(maintainer, needs_shared(SCORING_EXAMPLES / "runs" / "agent_a"), "agent_a", tasks_dir=needs_shared(SCORING_EXAMPLES / "tasks"))
    assert RunAggregate.objects.count() == 5
    new = _assert_identical()
    assert new["n_no_task"] > 0 and len(new["official"]) == 5
    # the re-imported run scores as the run it copies (same predictions, same gold): by construction
    again = next(r for r in new["official"] if r["agent"] == "again-agent")
    copied = next(r for r in new["official"] if r["run_id"] == AgentRun.objects.order_by("id")[1].pk)
    assert again["avg"] == copied["avg"] and again["dims"] == copied["dims"]


def test_import_writes_the_sums_in_its_transaction(seeded, maintainer, tmp_path, monkeypatch):
    from evaluation.models import AgentRun, RunAggregate, RunRecord
    from evaluation.selectors.leaderboard import newest_revision_id
    from evaluation.services import runs as services

    folder = _write_run_folder(tmp_path, AgentRun.objects.order_by("id").first())
    before = (AgentRun.objects.count(), RunRecord.objects.count(), RunAggregate.objects.count())

    def broken(rows):
        raise RuntimeError("sums failed")

    monkeypatch.setattr(lb, "run_aggregate", broken)  # what write_run_aggregate sums with
    with pytest.raises(RuntimeError, match="sums failed"):
        services.import_run_dir(maintainer, folder, "half-agent")
    # nothing half-written: no run, no record without its sums
    assert (AgentRun.objects.count(), RunRecord.objects.count(), RunAggregate.objects.count()) == before
    monkeypatch.undo()
    run = services.import_run_dir(maintainer, folder, "whole-agent")
    agg = RunAggregate.objects.get(run=run)
    assert agg.n_records == RunRecord.objects.filter(run=run).count() == 40 and agg.n_no_task == 0
    assert agg.gold_revision == newest_revision_id()


def test_a_gold_change_and_a_task_deletion_rebuild_only_the_runs_they_touch(seeded, maintainer):
    from annotation.models import Task, TaskRevision
    from evaluation.models import Agent, AgentRun, RunAggregate, RunRecord

    _assert_identical()
    # a fourth run with a record on one task only
    other = Task.objects.order_by("id").last()
    lone = AgentRun.objects.create(agent=Agent.objects.create(name="lone"), name="lone-run", dora_score=0.0,
                                   dimensions={})
    RunRecord.objects.create(run=lone, task=other, question_id=other.question_id, sample_id=other.sample_id,
                             dimension=other.dimension, task_score=0.0)
    _assert_identical()
    stamp_lone = RunAggregate.objects.get(run=lone).computed_at

    # a new head revision of the first task: one step instead of its gold's two or more, so its
    # records move to length bucket "1" (by hand: gold_length of a one-call trajectory is 1)
    task = Task.objects.order_by("id").first()
    head = task.head
    rev = TaskRevision.objects.create(task=task, number=head.number + 1, question=head.question,
                                      input_data={"post_image": {"image_path": "b.tif", "modality": "sar"}},
                                      trajectory=[{"call": "ras.count_pixels", "args": {}}])
    Task.objects.filter(pk=task.pk).update(head=rev, version=rev.number)
    new = _assert_identical()
    assert "1" in new["length"]["groups"] and "sar" in new["modality"]["groups"]
    # the lone run has no record on that task: its sums were kept, only their stamp moved up
    lone_agg = RunAggregate.objects.get(run=lone)
    assert lone_agg.computed_at == stamp_lone and lone_agg.gold_revision == rev.pk

    # deleting a task leaves its records without a task (SET_NULL): out of the breakdowns
    n_no_task = _assert_identical()["n_no_task"]
    other.delete()
    new = _assert_identical()
    assert new["n_no_task"] == n_no_task + 4  # its records in the 3 seeded runs and the lone one


def test_page_reads_no_record_and_shows_computing_then_the_intervals(seeded, logged_in):
    from evaluation.models import LeaderboardBootstrap
    from evaluation.selectors.leaderboard import leaderboard_data
    from evaluation.services.leaderboard import N_BOOT, SEED, compute_bootstrap
    from frontend.views.leaderboard import _display

    with CaptureQueriesContext(connection) as queries:
        page = logged_in.get("/leaderboard/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "computing…" in html and 'class="bootstrap-computing"' in html
    # no query reads or counts every record: the records table is read only for the records without
    # a task (an indexed IS NULL, grouped by run) and for the robustness section's records of variant
    # tasks (the partial index of has_robustness: no variant tasks here); the bootstrap state comes
    # from the runs' stored record counts
    record_reads = [q["sql"] for q in queries.captured_queries
                    if '"evaluation_runrecord"' in q["sql"] and '"evaluation_runrecord"."task_id" IS NULL' not in q["sql"]
                    and 'WHERE ("evaluation_runrecord"."has_robustness"' not in q["sql"]]
    assert record_reads == []
    # on_commit never runs inside this test's transaction: the row waits, queued
    assert LeaderboardBootstrap.objects.get().status == "queued"

    compute_bootstrap()  # what the background task runs
    html = logged_in.get("/leaderboard/").content.decode()
    assert "computing…" not in html
    runs, rows = leaderboard_data(extras=False)
    expected = _display({**lb.build(runs, rows, n_boot=N_BOOT, seed=SEED)})["bootstrap"]
    assert len(expected) == 3
    for b in expected:  # the very bootstrap_ci strings, mean [low, high]
        for text in b["dims_ci"] + [b["macro_ci"]]:
            assert text in html


def test_the_bootstrap_state_comes_from_the_stored_sums_and_matches_what_the_bootstrap_reads(seeded, maintainer,
                                                                                             tmp_path):
    from evaluation.models import Agent, AgentRun, RunAggregate, RunRecord
    from evaluation.selectors.leaderboard import aggregated_runs, bootstrap_inputs, records_state, stale_aggregates
    from evaluation.services.runs import import_run_dir

    def by_hand():  # c<count>-<newest id> of the records of the runs that are not step-wise planner runs
        ids = list(RunRecord.objects.exclude(run__scoring_mode="stepwise").values_list("id", flat=True))
        return f"c{len(ids)}-{max(ids)}"

    with CaptureQueriesContext(connection) as queries:
        state = records_state()
    assert [q for q in queries.captured_queries if '"evaluation_runrecord"' in q["sql"]] == []
    assert state == by_hand() and state.startswith("c120-")  # 40 tasks × 3 runs
    assert bootstrap_inputs()[2].endswith("." + state)
    # a step-wise planner run's records count in neither (bootstrap_ci leaves them out: the same intervals)
    planner = AgentRun.objects.create(agent=Agent.objects.create(name="planner"), name="planner-run",
                                      scoring_mode="stepwise", dimensions={})
    RunRecord.objects.create(run=planner, question_id="q-planner", sample_id="s", dimension="t1", task_score=1.0)
    assert records_state() == state and bootstrap_inputs()[2].endswith("." + state)
    # an import stores its run's count and newest record id with its sums: the state moves with it
    run = import_run_dir(maintainer, _write_run_folder(tmp_path, AgentRun.objects.order_by("id").first()), "again")
    agg = RunAggregate.objects.get(run=run)
    assert (agg.n_records, agg.newest_record) == (40, RunRecord.objects.filter(run=run).order_by("-id")[0].pk)
    assert records_state() == by_hand() != state and bootstrap_inputs()[2].endswith("." + records_state())
    # sums stored before their newest record id was (a database migrated from 0014) are stale
    RunAggregate.objects.filter(run=run).update(newest_record=0)
    runs, _sums, st = aggregated_runs()
    assert run.pk in stale_aggregates([r["run_id"] for r in runs], st)[0]
    _tables_now()  # the page rebuilds them
    assert RunAggregate.objects.get(run=run).newest_record == agg.newest_record
    assert records_state() == by_hand()


def test_has_robustness_is_the_json_key_test_and_follows_a_judge_decision(seeded):
    from evaluation.models import AgentRun, RunRecord
    from evaluation.selectors.robustness import robustness_rows

    recs = list(RunRecord.objects.filter(run=AgentRun.objects.order_by("id").first()).order_by("id")[:3])
    RunRecord.objects.filter(pk=recs[0].pk).update(robustness={"kind": "broken", "decided_by": "judge needed"})
    RunRecord.objects.filter(pk=recs[1].pk).update(robustness={"kind": None})  # has the key: counts, as has_key does
    RunRecord.objects.filter(pk=recs[2].pk).update(robustness={"params": {}})  # no "kind": not a variant's outcome
    flagged = set(RunRecord.objects.filter(has_robustness=True).values_list("id", flat=True))
    assert flagged == set(RunRecord.objects.filter(robustness__has_key="kind").values_list("id", flat=True))
    assert flagged == {recs[0].pk, recs[1].pk}
    assert [r["record_id"] for r in robustness_rows()] == sorted(flagged, key=lambda pk: RunRecord.objects.get(pk=pk).question_id)
    rec = RunRecord.objects.get(pk=recs[2].pk)
    rec.robustness = {"kind": "unsolvable"}
    rec.save(update_fields=["robustness"])  # as a judge's decision is written
    assert RunRecord.objects.get(pk=rec.pk).has_robustness is True


def test_a_failed_bootstrap_says_so(seeded, logged_in, monkeypatch):
    from evaluation.services import leaderboard as services_leaderboard

    def broken(*a, **k):
        raise MemoryError("no room")

    monkeypatch.setattr(services_leaderboard.lb, "bootstrap_ci", broken)
    with pytest.raises(MemoryError):
        services_leaderboard.compute_bootstrap()
    html = logged_in.get("/leaderboard/").content.decode()
    assert "could not be computed: MemoryError: no room" in html


def test_with_a_broker_the_bootstrap_goes_to_the_worker(monkeypatch, settings):
    from evaluation.jobs import leaderboard_bootstrap
    from evaluation.services import leaderboard as services_leaderboard

    settings.STUDIO_LEADERBOARD_BOOTSTRAP_RUNNER = ""  # the deployed path, not the tests' inline one
    sent = []
    conf = leaderboard_bootstrap.app.conf
    eager = conf.task_always_eager
    monkeypatch.setattr(leaderboard_bootstrap, "delay", lambda *a: sent.append(a))
    conf.task_always_eager = False  # as with CELERY_BROKER_URL set (studio/settings.py)
    try:
        services_leaderboard._dispatch(1000, 0)
    finally:
        conf.task_always_eager = eager
    assert sent == [(1000, 0)]


@pytest.mark.celery_worker
def test_after_an_import_the_intervals_arrive_in_the_background(celery_worker, maintainer, client, settings):
    """The import's commit sends the bootstrap: to the real worker with CELERY_BROKER_URL (CI), else
    (the embedded default) to Celery's in-process path on a thread of its own; either way the
    page shows the intervals once they are stored."""
    from evaluation.models import LeaderboardBootstrap
    from evaluation.selectors.leaderboard import bootstrap_version, leaderboard_runs, records_state
    from evaluation.services.runs import import_run_dir

    settings.ROOT_URLCONF = __name__
    settings.STUDIO_LEADERBOARD_BOOTSTRAP_RUNNER = ""  # the deployed path, not the tests' inline one
    client.force_login(maintainer)
    import_run_dir(maintainer, needs_shared(SCORING_EXAMPLES / "runs" / "agent_a"), "agent_a", tasks_dir=needs_shared(SCORING_EXAMPLES / "tasks"))
    version = bootstrap_version(leaderboard_runs(), records_state())
    deadline = time.monotonic() + 60
    row = None
    while time.monotonic() < deadline:
        row = LeaderboardBootstrap.objects.filter(version=version).first()
        if row is not None and row.status != "queued":
            break
        time.sleep(0.2)
    assert row is not None and row.status == "done", row and row.error
    assert len(row.result) == 1 and row.result[0]["n_boot"] == 1000
    html = client.get("/leaderboard/").content.decode()
    assert "computing…" not in html and row.result[0]["label"] in html


_CONCURRENT_WRITER = r"""
import os, sys, threading, time
import django
django.setup()
from django.core.management import call_command
from django.db import connections
call_command("migrate", "--no-input", verbosity=0)
from evaluation.services.runs import import_run_dir
from evaluation.services.leaderboard import _store
from studio.accounts import upsert_user

user = upsert_user("w", "pw-test-123", ["maintainer"])
stop, writes, errors = threading.Event(), [0], []

def writer():  # what the background bootstrap does when it stores its intervals, over and over
    try:
        while not stop.is_set():
            _store({"version": "v", "n_boot": 1, "seed": 0}, status="done", result=[])
            writes[0] += 1
            time.sleep(0.002)
    except Exception as exc:
        errors.append(repr(exc))
    finally:
        connections.close_all()

t = threading.Thread(target=writer)
t.start()
ok = 0
try:
    for i in range(3):
        import_run_dir(user, sys.argv[1], f"agent-{i}", tasks_dir=sys.argv[2])
        ok += 1
finally:
    stop.set()
    t.join()
print("RESULT", ok, writes[0], errors)
"""


def test_imports_succeed_while_the_background_bootstrap_writes_on_sqlite(tmp_path):
    """A file SQLite database (as deployed), a thread storing bootstrap rows in a loop beside three
    imports in one process: without the import's write lock taken first, SQLite refuses the
    import's first write at once ("database is locked"), as bench/lists.py hit at 10,000 tasks."""
    import os
    import subprocess
    import sys

    from conftest import REPO

    env = dict(os.environ, DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}", STUDIO_DATA_ROOT=str(tmp_path / "data"),
               CELERY_BROKER_URL="", DJANGO_SETTINGS_MODULE="studio.settings", PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-c", _CONCURRENT_WRITER, str(needs_shared(SCORING_EXAMPLES / "runs" / "agent_a")),
                           str(needs_shared(SCORING_EXAMPLES / "tasks"))], env=env, cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT"))
    _, ok, writes, errors = line.split(" ", 3)
    assert ok == "3" and errors == "[]" and int(writes) > 0  # all three imports, the writer never refused
