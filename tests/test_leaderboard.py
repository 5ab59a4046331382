"""Leaderboard: pure functions on hand-made rows, bootstrap determinism, exports, the page.

Expected values below are worked out by hand from the rows written next to them (means of a few
0/0.25/0.5/1 scores, set/multiset counts, LCS pairings); the comment on each says how.
"""
from __future__ import annotations

import io

import pandas as pd
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import include, path

from evaluation import leaderboard as lb
from evaluation.scoring.trajectory import parameter_accuracy

# The page's URLs, mounted next to the studio's own (so the test does not depend on whether
# frontend/urls.py includes frontend.urls_leaderboard yet; when it does, the first match wins).
urlpatterns = [
    path("", include("frontend.urls_leaderboard")),
    path("", include("studio.urls")),
]

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def run(run_id, agent, mode="dora", dora=None, dimensions=None, name=None):
    return {"run_id": run_id, "agent": agent, "run_name": name or f"run{run_id}", "mode": mode,
            "dora_score": dora, "dimensions": dimensions or {}}


def row(run_id, dim, score, bucket=None, modality=None, **kw):
    base = {"record_id": kw.pop("record_id", None), "run_id": run_id, "agent": kw.pop("agent", "a"),
            "run_name": f"run{run_id}", "mode": kw.pop("mode", "dora"), "dimension": dim,
            "question_id": kw.pop("question_id", "q"), "task_id": kw.pop("task_id", None), "task_score": score,
            "t_any": None, "t_ord": None, "t_em": None, "par_acc": None, "eff": None,
            "gold_len": None, "length_bucket": bucket, "modality": modality,
            "n_pred_steps": None, "lcs_par_acc": None, "multiset_recall": None, "extraneous_calls": None}
    base.update(kw)
    return base


# ── per-record helpers ───────────────────────────────────────────────────

@pytest.mark.parametrize("n,bucket", [(None, None), (0, None), (1, "1"), (2, "2–3"), (3, "2–3"), (4, "4–5"),
                                      (5, "4–5"), (6, "6–7"), (7, "6–7"), (8, "8–10"), (10, "8–10"),
                                      (11, "≥11"), (25, "≥11")])
def test_length_bucket(n, bucket):
    assert lb.length_bucket(n) == bucket


def test_gold_length_counts_like_the_evaluator():
    # 3 named steps; the loop wrapper, the empty call and the non-dict entry are dropped.
    traj = [{"call": "seg.flood", "args": {}}, {"call": "tool.loop", "args": {"calls": []}}, {"call": ""},
            "junk", {"call": "vec_buffer"}, {"call": "ras.area(x)"}]
    assert lb.gold_length(traj) == 3
    assert lb.gold_length(None) is None
    assert lb.gold_length([]) == 0


def test_modality_config():
    optical = {"image_path": "a.tif", "modality": "optical"}
    assert lb.modality_config({"pre_image": optical, "post_image": {"image_path": "b.tif", "modality": "SAR"}}) == "optical+sar"
    assert lb.modality_config({"post_image": optical, "poi_data": {"path": "poi.geojson"}}) == "optical+vector"
    assert lb.modality_config({"temporal_images": {"t1": {"modality": "multispectral"}, "t2": {"modality": "dem"}}}) == "dem+multispectral"
    assert lb.modality_config({"pre_image": {"image_path": "x.tif"}}) == "optical"  # the manifest's default
    assert lb.modality_config({}) is None and lb.modality_config(None) is None


def test_lcs_parameter_accuracy_survives_an_inserted_step():
    gold = [{"call": "seg.a", "args": {"x": 1}}, {"call": "vec.b", "args": {"y": "foo"}}, {"call": "ras.c"}]
    pred = [{"call": "seg.a", "args": {"x": 1}}, {"call": "tool.z", "args": {}},
            {"call": "vec.b", "args": {"y": "foo"}}, {"call": "ras.c"}]
    # Positional (official): step 0 matches (1), step 1 b≠z (0), step 2 c≠b (0) → 1/3.
    assert parameter_accuracy(pred, gold)[0] == pytest.approx(1 / 3)
    # LCS pairs a-a, b-b, c-c, every argument matches → 3/3.
    assert lb.lcs_parameter_accuracy(pred, gold) == pytest.approx(1.0)
    assert lb.lcs_alignment(["a", "b", "c"], ["a", "z", "b", "c"]) == [(0, 0), (1, 2), (2, 3)]


def test_lcs_parameter_accuracy_matches_paths_by_aligned_producers():
    gold = [{"call": "seg.a", "args": {"output_path": "g/one.tif"}}, {"call": "vec.b", "args": {"src": "g/one.tif"}}]
    pred = [{"call": "ras.z", "args": {}}, {"call": "seg.a", "args": {"output_path": "p/two.tif"}},
            {"call": "vec.b", "args": {"src": "p/two.tif"}}]
    # gold path made by gold step 0, predicted path by pred step 1, and (0, 1) is an aligned pair:
    # both arguments match → (1 + 1) / 2. Positionally nothing lines up (seg.a vs ras.z, vec.b vs seg.a).
    assert lb.lcs_parameter_accuracy(pred, gold) == pytest.approx(1.0)
    assert parameter_accuracy(pred, gold)[0] == 0.0
    # a half-wrong argument: gold step 1 has 2 args, one differs → (1 + 1/2) / 2.
    gold2 = [gold[0], {"call": "vec.b", "args": {"src": "g/one.tif", "k": 3}}]
    pred2 = pred[:2] + [{"call": "vec.b", "args": {"src": "p/two.tif", "k": 30}}]
    assert lb.lcs_parameter_accuracy(pred2, gold2) == pytest.approx(0.75)
    assert lb.lcs_parameter_accuracy([], []) == 1.0 and lb.lcs_parameter_accuracy([{"call": "a.b"}], []) == 0.0


def test_multiset_recall_and_extraneous_calls():
    # G = a,a,b; P = a,b,b,c: common multiset {a:1, b:1} → recall 2/3; extraneous = 4 − 2 = 2 (b, c).
    assert lb.multiset_recall(["a", "b", "b", "c"], ["a", "a", "b"]) == pytest.approx(2 / 3)
    assert lb.extraneous_calls(["a", "b", "b", "c"], ["a", "a", "b"]) == 2
    assert lb.multiset_recall([], []) == 1.0 and lb.multiset_recall(["a"], []) == 0.0
    extras = lb.record_extras([{"call": "a.x"}, {"call": "a.x"}], [{"call": "a.x"}])
    assert extras == {"n_pred_steps": 2, "lcs_par_acc": 1.0, "multiset_recall": 1.0, "extraneous_calls": 1}
    assert lb.record_extras([{"call": "a.x"}], None) == {"n_pred_steps": 1, "lcs_par_acc": None,
                                                          "multiset_recall": None, "extraneous_calls": None}


# ── official table ───────────────────────────────────────────────────────

def _dim(score, t_any, n=2, **m):
    base = {"dim_score": score, "n_tasks": n, "n_scored_tasks": n, "t_any": t_any, "t_ord": 0.5, "t_em": 0.5,
            "par_acc": 0.5, "eff": 1.0}
    base.update(m)
    return base


def test_official_table_uses_stored_scores_and_the_evaluators_macro():
    runs = [
        # t1, t2 have tasks, t3 has none (not averaged): T-Any = (0.8 + 0.6) / 2 = 0.7; T-EM = (0.2 + 0.4) / 2.
        run(1, "agent-a", dora=0.75, dimensions={"t1": _dim(0.5, 0.8, t_em=0.2), "t2": _dim(1.0, 0.6, t_em=0.4),
                                                 "t3": {"n_tasks": 0, "n_tasks_scored": 0}}),
        run(2, "gold", dora=1.0, dimensions={"t1": _dim(1.0, 1.0)}),
        run(3, "agent-b", mode="paper", dora=0.9, dimensions={"t1": _dim(0.9, 0.1)}),
    ]
    table = lb.official_table(runs)
    assert [r["agent"] for r in table] == ["gold", "agent-b", "agent-a"]  # gold first, then by DORA
    a = table[2]
    assert a["avg"] == 0.75 and a["dims"] == {"t1": 0.5, "t2": 1.0, "t3": None, "t4": None, "t5": None}
    assert a["metrics"]["t_any"] == pytest.approx(0.7) and a["metrics"]["t_em"] == pytest.approx(0.3)
    assert a["source"] == "stored" and a["label"] == "agent-a [dora]" and table[1]["mode"] == "paper"


def test_official_table_recomputes_a_missing_metric_from_records():
    runs = [run(1, "a", dora=0.5, dimensions={"t1": {"dim_score": 0.5, "n_tasks": 2, "t_any": 1, "t_ord": 1,
                                                     "t_em": 1, "par_acc": 1}})]  # no eff
    rows = [row(1, "t1", 1.0, eff=1.0), row(1, "t1", 0.0, eff=0.5)]  # eff = (1 + 0.5) / 2
    r = lb.official_table(runs, rows)[0]
    assert r["metrics"]["eff"] == pytest.approx(0.75) and r["source"] == "recomputed"


# ── breakdowns ───────────────────────────────────────────────────────────

def _breakdown_rows():
    return [
        # run 1 (agent a): 2–3 → (1 + 0) / 2 = 0.5; ≥11 → 0.25; the None score and the no-task row are left out.
        row(1, "t1", 1.0, "2–3", "optical"), row(1, "t2", 0.0, "2–3", "optical+sar"),
        row(1, "t3", 0.25, "≥11", "optical+sar"), row(1, "t3", None, "≥11", "optical"),
        row(1, "t4", 1.0, None, None),
        # run 2 (gold): 2–3 → 1.0; ≥11 → (0.5 + 0.5) / 2 = 0.5
        row(2, "t1", 1.0, "2–3", "optical", agent="gold"), row(2, "t3", 0.5, "≥11", "optical+sar", agent="gold"),
        row(2, "t3", 0.5, "≥11", "optical+sar", agent="gold"),
    ]


def test_length_breakdown_gap_against_the_gold_run():
    runs = [run(1, "a", dora=0.5), run(2, "gold", dora=0.8)]
    b = lb.length_breakdown(runs, _breakdown_rows())
    assert b["groups"] == ["2–3", "≥11"]  # only buckets that have records, in bucket order
    a = next(r for r in b["rows"] if r["agent"] == "a")
    cells = {c["group"]: c for c in a["cells"]}
    assert cells["2–3"]["acc"] == pytest.approx(0.5) and cells["2–3"]["n"] == 2
    assert cells["2–3"]["gap"] == pytest.approx(0.5 - 1.0)
    assert cells["≥11"]["acc"] == pytest.approx(0.25) and cells["≥11"]["n"] == 1
    assert cells["≥11"]["gap"] == pytest.approx(0.25 - 0.5)
    gold = next(r for r in b["rows"] if r["agent"] == "gold")
    assert all(c["gap"] == 0 for c in gold["cells"])


def test_length_breakdown_gap_against_one_without_a_gold_run():
    rows = [r for r in _breakdown_rows() if r["run_id"] == 1]
    b = lb.length_breakdown([run(1, "a")], rows)
    cells = {c["group"]: c for c in b["rows"][0]["cells"]}
    assert cells["2–3"]["gap"] == pytest.approx(-0.5) and cells["≥11"]["gap"] == pytest.approx(-0.75)
    assert cells["2–3"]["gold"] == 1.0


def test_gold_run_must_share_the_mode():
    runs = [run(1, "a", mode="paper"), run(2, "gold", mode="dora"), run(3, "Gold", mode="paper"), run(4, "gold", mode="paper")]
    assert lb.gold_run_for(runs[0], runs)["run_id"] == 4  # newest gold in the same mode
    assert lb.gold_run_for(run(5, "b", mode="other"), runs) is None


def test_modality_breakdown():
    runs = [run(1, "a"), run(2, "gold")]
    b = lb.modality_breakdown(runs, _breakdown_rows())
    assert b["groups"] == ["optical", "optical+sar"]
    a = {c["group"]: c for c in next(r for r in b["rows"] if r["run_id"] == 1)["cells"]}
    # optical: only the 1.0 row (the None score is left out); optical+sar: (0 + 0.25) / 2.
    assert a["optical"]["acc"] == 1.0 and a["optical"]["n"] == 1
    assert a["optical+sar"]["acc"] == pytest.approx(0.125) and a["optical+sar"]["n"] == 2


# ── extras ───────────────────────────────────────────────────────────────

def _ci_rows():
    scores = {"t1": [0, 1, 1, 0.5, 0.25], "t2": [1, 1, 0], "t3": [0.2]}
    return [row(1, d, s) for d, ss in scores.items() for s in ss]


def test_bootstrap_is_deterministic_with_a_fixed_seed():
    runs = [run(1, "a")]
    # min_n=1: an interval for every dimension, to see the resampling itself (the page's default
    # withholds intervals below BOOTSTRAP_MIN_N tasks: test_bootstrap_withholds_intervals_for_small_n)
    first = lb.bootstrap_ci(runs, _ci_rows(), n_boot=1000, seed=7, min_n=1)
    again = lb.bootstrap_ci(runs, _ci_rows(), n_boot=1000, seed=7, min_n=1)
    other = lb.bootstrap_ci(runs, _ci_rows(), n_boot=1000, seed=8, min_n=1)
    assert first == again
    assert first != other
    ci = first[0]
    # point estimates are the record means: t1 = 2.75 / 5, macro = mean(0.55, 2/3, 0.2)
    assert ci["dims"]["t1"]["mean"] == pytest.approx(0.55) and ci["dims"]["t1"]["n"] == 5
    assert ci["macro"]["mean"] == pytest.approx((0.55 + 2 / 3 + 0.2) / 3)
    # a single task cannot vary; the others' intervals hold their mean and stay inside [0, 1]
    assert ci["dims"]["t3"]["lo"] == ci["dims"]["t3"]["hi"] == pytest.approx(0.2)
    for d in ("t1", "t2"):
        assert 0 <= ci["dims"][d]["lo"] <= ci["dims"][d]["mean"] <= ci["dims"][d]["hi"] <= 1
        assert ci["dims"][d]["lo"] < ci["dims"][d]["hi"]
    assert ci["macro"]["lo"] <= ci["macro"]["mean"] <= ci["macro"]["hi"]
    assert ci["dims"]["t4"] is None


def test_bootstrap_withholds_intervals_for_small_n():
    # intervals only where n allows them. t1 has 5 tasks (= BOOTSTRAP_MIN_N): an
    # interval; t2 (3 tasks) and t3 (1 task): none, and so none for the macro score either. The
    # interval of t1 is the same as with min_n=1 (every dimension is still drawn, in order).
    ci = lb.bootstrap_ci([run(1, "a")], _ci_rows(), n_boot=1000, seed=7)[0]
    loose = lb.bootstrap_ci([run(1, "a")], _ci_rows(), n_boot=1000, seed=7, min_n=1)[0]
    assert lb.BOOTSTRAP_MIN_N == 5
    assert ci["dims"]["t1"]["too_small"] is False and ci["dims"]["t1"]["lo"] == loose["dims"]["t1"]["lo"]
    assert ci["dims"]["t2"] == {"mean": pytest.approx(2 / 3), "lo": None, "hi": None, "n": 3, "too_small": True}
    assert ci["dims"]["t3"]["too_small"] is True and ci["dims"]["t3"]["n"] == 1
    assert ci["macro"]["too_small"] is True and ci["macro"]["lo"] is None


def test_trajectory_extras_pool_calls():
    rows = [row(1, "t1", 1, lcs_par_acc=1.0, par_acc=0.5, multiset_recall=1.0, n_pred_steps=4, extraneous_calls=2),
            row(1, "t2", 1, lcs_par_acc=0.5, par_acc=0.5, multiset_recall=0.5, n_pred_steps=2, extraneous_calls=0),
            row(1, "t3", 1, n_pred_steps=9)]  # no gold: skipped
    e = lb.trajectory_extras([run(1, "a")], rows)[0]
    # rate = (2 + 0) / (4 + 2); LCS mean = (1 + 0.5) / 2
    assert e["n"] == 2 and e["extraneous_rate"] == pytest.approx(2 / 6)
    assert e["lcs_par_acc"] == pytest.approx(0.75) and e["multiset_recall"] == pytest.approx(0.75)


# ── exports and plots ────────────────────────────────────────────────────

def _export_rows():
    return [row(1, "t1", 0.5, "≥11", "optical+sar", record_id=1, task_id=3, gold_len=12, t_any=1.0, n_pred_steps=4,
                lcs_par_acc=0.75, extraneous_calls=1, question_id="s_task0", gold_set="release 1.0.0"),
            row(1, "t2", None, None, None, record_id=2, question_id="s_task1", mode="paper", gold_set="release 1.0.0")]


def test_csv_round_trip():
    frame = pd.read_csv(io.BytesIO(lb.to_csv_bytes(_export_rows())))
    assert list(frame.columns) == list(lb.ROW_COLUMNS)
    assert frame.loc[0, "length_bucket"] == "≥11" and frame.loc[0, "modality"] == "optical+sar"
    assert frame.loc[0, "task_score"] == 0.5 and frame.loc[0, "gold_len"] == 12 and frame.loc[0, "lcs_par_acc"] == 0.75
    assert pd.isna(frame.loc[1, "task_score"]) and pd.isna(frame.loc[1, "gold_len"])
    assert list(frame["mode"]) == ["dora", "paper"]
    assert list(frame["gold_set"]) == ["release 1.0.0", "release 1.0.0"]  # every row names its gold set
    pd.testing.assert_frame_equal(frame.drop(columns=["task_id", "gold_len", "n_pred_steps", "extraneous_calls"]),
                                  lb.records_frame(_export_rows()).drop(
                                      columns=["task_id", "gold_len", "n_pred_steps", "extraneous_calls"]),
                                  check_dtype=False)


def test_streamed_csv_pieces_join_to_the_whole_file_byte_for_byte():
    # a piece whose every value of a column is missing (row 2: no task score, no gold length) or
    # whose integers have no gap must still print each column as the whole file does: 1.0 not 1,
    # 12 not 12.0, an empty cell for None, the formula guard on text
    rows = _export_rows() * 3 + [row(2, "t3", 1.0, record_id=9, task_id=4, gold_len=3, question_id="=cmd",
                                     gold_set="release 1.0.0")]
    whole = lb.to_csv_bytes(rows)
    for size in (1, 2, 3, len(rows), 100):
        pieces = list(lb.iter_csv_chunks(iter(rows), chunk_rows=size))
        assert len(pieces) == -(-len(rows) // size)
        assert b"".join(pieces) == whole, size
    assert b"'=cmd" in whole and whole.count(b"\n") == len(rows) + 1
    assert b"".join(lb.iter_csv_chunks(iter(()))) == lb.to_csv_bytes([])  # no row: the header alone


def test_parquet_round_trip():
    pytest.importorskip("pyarrow")
    frame = pd.read_parquet(io.BytesIO(lb.to_parquet_bytes(_export_rows())))
    pd.testing.assert_frame_equal(frame, lb.records_frame(_export_rows()), check_dtype=False)


def test_plots_are_png():
    runs = [run(1, "a", dora=0.5, dimensions={"t1": _dim(0.5, 0.8)}), run(2, "gold", dora=1.0)]
    rows = _breakdown_rows()
    assert lb.plot_dimensions(lb.official_table(runs, rows)).startswith(PNG_MAGIC)
    assert lb.plot_length(lb.length_breakdown(runs, rows)).startswith(PNG_MAGIC)
    assert lb.plot_modality(lb.modality_breakdown(runs, rows)).startswith(PNG_MAGIC)
    assert lb.plot_length({"groups": [], "rows": []}).startswith(PNG_MAGIC)


# ── Django: the page ─────────────────────────────────────────────────────

@pytest.fixture
def logged_in(client, settings):
    from django.contrib.auth import get_user_model

    settings.ROOT_URLCONF = __name__
    user = get_user_model().objects.create_user("lea", password="pw-test-123")
    client.force_login(user)
    return client


def _make_runs(n_tasks: int, prefix: str = ""):
    """Runs of ``gold``, ``agent-alpha``, ``agent-beta`` (names prefixed), each with one record per
    task (n_tasks tasks, 2-step gold, optical or optical+vector) and one record without a task."""
    from annotation.models import Event, Task, TaskRevision
    from evaluation.models import Agent, AgentRun, RunRecord

    event = Event.objects.create(slug=f"{prefix}ev", name="Event")
    tasks = []
    for i in range(n_tasks):
        task = Task.objects.create(event=event, sample_id=f"{prefix}s{i}", question_id=f"{prefix}s{i}_task0",
                                   dimension="t1")
        rev = TaskRevision.objects.create(
            task=task, number=1, question="How many?",
            input_data={"pre_image": {"image_path": "a.tif", "modality": "optical"},
                        "poi_data": {"path": "poi.geojson"}} if i % 2 else
                       {"post_image": {"image_path": "b.tif", "modality": "optical"}},
            trajectory=[{"call": "seg.building", "args": {"image": "b.tif"}}, {"call": "ras.count", "args": {}}])
        task.head, task.version = rev, 1
        task.save()
        tasks.append(task)
    dims = {"t1": _dim(0.5, 1.0, n=n_tasks)}
    for name, score in (("gold", 1.0), ("agent-alpha", 0.5), ("agent-beta", 0.25)):
        agent = Agent.objects.create(name=prefix + name)
        run_ = AgentRun.objects.create(agent=agent, name=f"{name}-run", dora_score=score, dimensions=dims)
        RunRecord.objects.bulk_create([
            RunRecord(run=run_, task=t, question_id=t.question_id, sample_id=t.sample_id, dimension="t1",
                      task_score=score, t_any=1.0, t_ord=1.0, t_em=1.0, par_acc=1.0, eff=1.0,
                      trajectory=[{"call": "seg.building", "args": {"image": "b.tif"}}, {"call": "ras.count"}])
            for t in tasks])
        # one record without a studio task: in the official numbers' sources, not in the breakdowns
        RunRecord.objects.create(run=run_, question_id=f"{prefix}orphan_task0", sample_id="orphan", dimension="t1",
                                 task_score=score)


@pytest.mark.django_db
def test_leaderboard_page_renders(logged_in):
    _make_runs(4)
    resp = logged_in.get("/leaderboard/")
    assert resp.status_code == 200
    html = resp.content.decode()
    for text in ("agent-alpha", "agent-beta", "Official numbers", "Extras (not official numbers)",
                 "/leaderboard.csv", "/leaderboard.parquet", "/leaderboard/plot/length.png", "optical+vector",
                 "2–3", "50.00"):
        assert text in html, text
    csv = logged_in.get("/leaderboard.csv")
    assert csv.status_code == 200
    frame = pd.read_csv(io.BytesIO(csv.getvalue()))  # streamed: read as a client does
    assert len(frame) == 15 and frame["gold_len"].isna().sum() == 3  # 3 runs × (4 tasks + 1 orphan)
    png = logged_in.get("/leaderboard/plot/dimensions.png")
    assert png.status_code == 200 and png["Content-Type"] == "image/png" and png.content.startswith(PNG_MAGIC)
    assert logged_in.get("/leaderboard/plot/nope.png").status_code == 404


@pytest.mark.django_db
def test_leaderboard_page_query_count_is_constant(logged_in):
    # Runs made here bypass the import service, so the first request stores their sums; from then
    # on: session + user + runs with their sums + newest revision + records without a task
    # (freshness) + records state + bootstrap row (+ its queued insert the first time per state)
    # + the notification bell's unread COUNT (base template, every page):
    # nothing per run or per record (counted on this page's code, evaluation/selectors/leaderboard.py)
    from evaluation.services.leaderboard import write_run_aggregate

    _make_runs(2)
    assert logged_in.get("/leaderboard/").status_code == 200  # stores the 3 runs' sums
    with CaptureQueriesContext(connection) as small:
        assert logged_in.get("/leaderboard/").status_code == 200
    _make_runs(20, prefix="more-")  # 3 more runs, 63 more records, their sums stored as an import does
    from evaluation.models import AgentRun

    for run_ in AgentRun.objects.filter(agent__name__startswith="more-"):
        write_run_aggregate(run_.pk)
    with CaptureQueriesContext(connection) as first:
        page = logged_in.get("/leaderboard/")
    assert page.status_code == 200 and b"more-" in page.content
    with CaptureQueriesContext(connection) as again:
        assert logged_in.get("/leaderboard/").status_code == 200
    assert len(small) == len(again) == 10
    # + 2: new task revisions exist, so the older runs' heads are checked (none of their tasks
    # changed) and their stamps moved up; + 3: a new state, its bootstrap row queued (savepoint,
    # insert, release)
    assert len(first) == 10 + 2 + 3


@pytest.mark.django_db
def test_the_streamed_rows_are_the_listed_rows_in_the_same_order_across_page_boundaries():
    # 3 runs × (5 tasks + 1 orphan) read in keyset pages of 1, then 2 records: every page boundary
    # (within a dimension, between dimensions, between runs) is crossed, and the rows must be
    # leaderboard_rows' one query's, in its order (run, dimension, question id)
    from evaluation.models import RunRecord
    from evaluation.selectors.leaderboard import iter_leaderboard_rows, leaderboard_rows

    _make_runs(5)
    for r in RunRecord.objects.all():  # two dimensions a run: every third record is a t2 one
        if r.pk % 3 == 0:
            RunRecord.objects.filter(pk=r.pk).update(dimension="t2")
    listed = leaderboard_rows()
    assert {r["dimension"] for r in listed} == {"t1", "t2"}
    assert len(listed) == 18
    for first, size in ((1, 2), (1, 1), (3, 4), (1000, 10_000)):
        assert list(iter_leaderboard_rows(first_chunk=first, chunk=size)) == listed, (first, size)
