"""Accounting of experiment runs (issue "Experiments", item 4), without a model server: the
question rows get hand-chosen tokens, seconds and costs, the run folders are written and scored as
``experiments.services.score_experiment`` does at an experiment's end, and the figures the
leaderboard (columns, CSV, API, the score-against-cost SVG) and the experiment page show are the
sums worked out by hand. An imported run (no accounting) shows blank, never 0."""
from __future__ import annotations

import io
import re

import pandas as pd
import pytest
from conftest import requires_shared
from django.db import connection
from django.test.utils import CaptureQueriesContext
from support.florence import FLORENCE
from support.mcp import make_task

from evaluation import leaderboard as lb
from experiments import harness, selectors, services
from experiments.models import Experiment, ExperimentQuestion
from frontend.views.leaderboard import accounting_text

URL = "http://127.0.0.1:9/v1"  # an allowed test host (tests/conftest.py); nothing is called here
needs_florence = requires_shared(FLORENCE)

# the figures, by hand: repeat 1 answered with 1,200 prompt + 300 completion tokens at $0.50 / $1.50
# per million: 1200 × 0.50 / 1e6 + 300 × 1.50 / 1e6 = 0.0006 + 0.00045 = 0.00105; repeat 2 with
# 800 + 200 tokens, of which one of its two calls came from the cache (free): the one request
# sent had 500 + 100 tokens, 500 × 0.50 / 1e6 + 100 × 1.50 / 1e6 = 0.00025 + 0.00015 = 0.0004
REPEATS = {1: dict(prompt_tokens=1200, completion_tokens=300, cost=0.00105, seconds=12.5, model_calls=3, cached_calls=0),
           2: dict(prompt_tokens=800, completion_tokens=200, cost=0.0004, seconds=7.4, model_calls=2, cached_calls=1)}


def _finish(exp: Experiment, answers: dict[int, object]) -> None:
    """Every question of ``exp`` done with the figures of :data:`REPEATS` and the answer of its
    repeat, its folder written, as the run loop leaves them (no model call)."""
    questions = {q["question_id"]: q for _, q in services.questions_of(services.gold_of(exp))}
    for row in exp.questions.all():
        record = harness.record_of(questions[row.question_id], predicted_answer=answers[row.repeat], error=None,
                                   trajectory=[], elapsed_time=REPEATS[row.repeat]["seconds"],
                                   timestamp="2026-12-05T12:00:00")
        ExperimentQuestion.objects.filter(pk=row.pk).update(status="done", record=record, **REPEATS[row.repeat])
        services.write_folder(exp, row.repeat, row.dimension)


def _gold_answer(exp: Experiment):
    gold = services.gold_of(exp)
    return gold.samples["t1"][0]["tasks"][0]["final_answer"]  # the gold replay's answer


@pytest.fixture
def scored(db, settings, django_capture_on_commit_callbacks):
    """A pilot of 2 repeats priced $0.50 / $1.50 per million, scored: repeat 1 gave the gold answer
    (DORA 1.0), repeat 2 none (DORA 0.0); plus the same folder imported by hand (no accounting)."""
    from evaluation.services.runs import import_run_dir
    from replay.services.runs import start_replay

    user, task = make_task()
    assert start_replay(user, task).status == "succeeded"
    cfg = services.save_config(user, name="priced", base_url=URL, model="m", protocol="IF",
                               price_prompt_per_m=0.5, price_completion_per_m=1.5)
    with django_capture_on_commit_callbacks():  # stays queued: nothing is called
        exp = services.start_experiment(user, cfg, question_ids=[task.question_id], repeats=2, agent_name="exp-agent")
    _finish(exp, {1: _gold_answer(exp), 2: "No answer found"})
    runs = services.score_experiment(exp)
    imported = import_run_dir(user, services.run_folder(exp, 1), "imported-agent")
    return {"user": user, "exp": exp, "runs": runs, "imported": imported}


@pytest.mark.django_db
@needs_florence
def test_scoring_an_experiment_stores_each_repeats_accounting_on_its_run(scored):
    r1, r2 = scored["runs"]
    r1.refresh_from_db()
    r2.refresh_from_db()
    assert (r1.prompt_tokens, r1.completion_tokens, r1.seconds) == (1200, 300, 12.5)
    assert r1.cost == pytest.approx(0.00105, abs=1e-12)
    assert (r2.prompt_tokens, r2.completion_tokens, r2.seconds) == (800, 200, 7.4)
    assert r2.cost == pytest.approx(0.0004, abs=1e-12)
    assert (r1.dora_score, r2.dora_score) == (1.0, 0.0)
    imported = scored["imported"]
    imported.refresh_from_db()
    assert (imported.prompt_tokens, imported.completion_tokens, imported.cost, imported.seconds) == (None,) * 4


@pytest.mark.django_db
@needs_florence
def test_a_run_rescored_on_another_set_keeps_its_accounting(scored):
    from evaluation.services.runs import rescore_run

    r1 = scored["runs"][0]
    r1.refresh_from_db()
    new = rescore_run(scored["user"], r1)
    new.refresh_from_db()
    assert (new.rescored_from_id, new.prompt_tokens, new.completion_tokens, new.seconds) == (r1.pk, 1200, 300, 12.5)
    assert new.cost == pytest.approx(0.00105, abs=1e-12)


@pytest.mark.django_db
@needs_florence
def test_an_unpriced_configuration_leaves_the_cost_blank_and_the_plot_uses_tokens(settings,
                                                                                 django_capture_on_commit_callbacks):
    from replay.services.runs import start_replay

    user, task = make_task()
    assert start_replay(user, task).status == "succeeded"
    cfg = services.save_config(user, name="free", base_url=URL, model="m", protocol="IF")
    with django_capture_on_commit_callbacks():
        exp = services.start_experiment(user, cfg, question_ids=[task.question_id], agent_name="free-agent")
    _finish(exp, {1: "No answer found"})
    assert selectors.repeat_sums(exp, 1)["cost"] is None
    (run,) = services.score_experiment(exp)
    run.refresh_from_db()
    assert (run.prompt_tokens, run.completion_tokens, run.cost) == (1200, 300, None)
    assert run.perception_mode == "model"  # the configuration's default: the benchmark's protocol
    table = lb.official_table([{"run_id": run.pk, "agent": "free-agent", "mode": "dora", "dora_score": 0.0,
                                "prompt_tokens": 1200, "completion_tokens": 300, "cost": None, "seconds": 12.5}])
    points = lb.cost_points(table)
    assert points["x"] == "tokens" and points["points"][0]["x"] == 1500  # 1200 + 300


def _cells(html: str, run_id: int) -> list[str]:
    row = re.search(rf'<tr data-run="{run_id}">(.*?)</tr>', html, re.S).group(1)
    return [re.sub(r"<[^>]+>", "", c) for c in re.findall(
        r'<td class="acc-(?:prompt|completion|cost|seconds)">(.*?)</td>', row)]


@pytest.mark.django_db
@needs_florence
def test_the_leaderboard_shows_the_accounting_blank_for_an_imported_run_in_constant_queries(scored, client):
    client.force_login(scored["user"])
    r1, r2 = scored["runs"]
    imported = scored["imported"]
    assert client.get("/leaderboard/").status_code == 200  # the bootstrap row of this state queued
    with CaptureQueriesContext(connection) as queries:
        html = client.get("/leaderboard/").content.decode()
    # as test_leaderboard.py pins it: session, user, runs with their sums (accounting in the same
    # row), newest revision, records without a task, records state, bootstrap row, robustness
    # records, the bell's unread count
    assert len(queries) == 10, [q["sql"][:80] for q in queries.captured_queries]
    assert 'id="accounting-head"' in html
    assert _cells(html, r1.pk) == ["1\u202f200", "300", "0.001050", "12.5"]
    assert _cells(html, r2.pk) == ["800", "200", "0.000400", "7.4"]
    assert _cells(html, imported.pk) == ["", "", "", ""]  # blank, never 0
    # the figure's caption says the same as the SVG, in words
    assert 'id="cost-plot"' in html and "1 run not plotted (imported: no accounting)" in html
    assert "at 0.001050" in html and "at 0.000400" in html


@pytest.mark.django_db
@needs_florence
def test_the_api_and_the_csv_carry_the_accounting(scored, client):
    client.force_login(scored["user"])
    r1, r2 = scored["runs"]
    rows = {r["run_id"]: r for r in client.get("/api/leaderboard/").json()["rows"]}
    assert {k: rows[r1.pk][k] for k in lb.ACCOUNTING} == {"prompt_tokens": 1200, "completion_tokens": 300,
                                                          "cost": pytest.approx(0.00105), "seconds": 12.5}
    assert {k: rows[scored["imported"].pk][k] for k in lb.ACCOUNTING} == dict.fromkeys(lb.ACCOUNTING)
    frame = pd.read_csv(io.BytesIO(client.get("/leaderboard.csv").getvalue()))
    by_run = frame.drop_duplicates("run_id").set_index("run_id")
    assert by_run.loc[r2.pk, "run_prompt_tokens"] == 800 and by_run.loc[r2.pk, "run_completion_tokens"] == 200
    assert by_run.loc[r2.pk, "run_cost"] == pytest.approx(0.0004) and by_run.loc[r2.pk, "run_seconds"] == 7.4
    assert by_run.loc[scored["imported"].pk, ["run_prompt_tokens", "run_cost", "run_seconds"]].isna().all()


@pytest.mark.django_db
@needs_florence
def test_the_score_against_cost_svg_has_one_labelled_point_per_accounted_run_and_is_accessible(scored, client):
    client.force_login(scored["user"])
    r1, r2 = scored["runs"]
    resp = client.get("/leaderboard/plot/cost.svg")
    assert resp.status_code == 200 and resp["Content-Type"].startswith("image/svg+xml")
    svg = resp.content.decode()
    assert '<svg role="img" aria-labelledby="plot-title plot-desc"' in svg
    assert '<title id="plot-title">DORA score against cost per run</title>' in svg
    desc = re.search(r'<desc id="plot-desc">(.*?)</desc>', svg, re.S).group(1)
    # labels are "agent [mode] #id" (two runs of one agent): DORA 100 % at 0.00105, 0 % at 0.0004
    assert desc == (f"exp-agent [dora] #{r1.pk}: DORA 100.00 %, 0.001050; exp-agent [dora] #{r2.pk}: DORA 0.00 %, "
                    f"0.000400. 1 run not plotted (no accounting or no DORA score).")
    texts = re.findall(r"<text[^>]*>([^<]*)</text>", svg)
    assert f"exp-agent [dora] #{r1.pk}" in texts and f"exp-agent [dora] #{r2.pk}" in texts
    assert "imported-agent [dora]" not in texts
    assert "DORA score (%)" in texts and any(t.startswith("cost per run (") for t in texts)
    # offline: no script, no reference out of the document (the xmlns and DTD names are not fetched)
    assert "<script" not in svg and not re.search(r'(?:xlink:)?href="(?!#)', svg)
    assert client.get("/leaderboard/plot/nope.svg").status_code == 404
    # the same figures give the same bytes (cached, and deterministic without the cache)
    assert lb.plot_cost(lb.official_table([]), "") == lb.plot_cost(lb.official_table([]), "")


def test_cost_points_fall_back_to_tokens_when_one_run_has_no_price():
    table = [{"run_id": 1, "label": "a", "avg": 0.5, "prompt_tokens": 1200, "completion_tokens": 300, "cost": 0.00105},
             {"run_id": 2, "label": "b", "avg": 0.25, "prompt_tokens": 100, "completion_tokens": 50, "cost": None},
             {"run_id": 3, "label": "c", "avg": 0.75, "prompt_tokens": None, "completion_tokens": None, "cost": None},
             {"run_id": 4, "label": "d", "avg": None, "prompt_tokens": 10, "completion_tokens": 5, "cost": 0.1}]
    assert lb.cost_points(table) == {"x": "tokens", "left_out": ["c", "d"], "points": [
        {"run_id": 1, "label": "a", "y": 50.0, "x": 1500}, {"run_id": 2, "label": "b", "y": 25.0, "x": 150}]}
    assert lb.cost_points(table[:1])["x"] == "cost" and lb.cost_points(table[:1])["points"][0]["x"] == 0.00105
    assert lb.cost_points([]) == {"x": "tokens", "points": [], "left_out": []}


def test_accounting_text_is_blank_not_zero_without_accounting():
    assert accounting_text({}) == {"prompt_tokens_text": "", "completion_tokens_text": "", "cost_text": "",
                                   "seconds_text": ""}
    assert accounting_text({"prompt_tokens": 0, "completion_tokens": 1234567, "cost": 0.0, "seconds": 0.0}) == {
        "prompt_tokens_text": "0", "completion_tokens_text": "1\u202f234\u202f567", "cost_text": "0.000000",
        "seconds_text": "0.0"}


@pytest.mark.django_db
@needs_florence
def test_the_experiment_page_shows_accounting_per_question_task_and_run_paginated_in_constant_queries(
        scored, client, monkeypatch):
    import frontend.views.experiments as views

    client.force_login(scored["user"])
    exp = scored["exp"]
    r1, r2 = scored["runs"]
    with CaptureQueriesContext(connection) as queries:
        html = client.get(f"/experiments/{exp.pk}/").content.decode()
    n = len(queries)
    by_repeat = re.search(r'<table class="table" id="by-repeat">(.*?)</table>', html, re.S).group(1)
    rows = [[re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<t[dh]>(.*?)</t[dh]>", r)]
            for r in re.findall(r"<tr[^>]*>(.*?)</tr>", by_repeat, re.S)][1:]  # the header row left out
    assert rows == [["1", str(r1.pk), "1.0000", "1200", "300", "3 (0)", "12.5", "0.001050"],
                    ["2", str(r2.pk), "0.0000", "800", "200", "2 (1)", "7.4", "0.000400"],
                    # the total: 2000 prompt, 500 completion, 5 calls (1 cached), 12.5 + 7.4 = 19.9 s,
                    # 0.00105 + 0.0004 = 0.00145
                    ["total", "", "", "2000", "500", "5 (1)", "19.9", "0.001450"]]
    by_task = re.search(r'<table class="table" id="by-task">.*?<tbody>(.*?)</tbody>', html, re.S).group(1)
    assert re.findall(r"<td>(.*?)</td>", by_task) == [
        "florence_mcp01_task0", "2/2", "1 of 2", "0.5000", "2000", "500", "5 (1)", "19.9", "0.001450"]
    assert 'id="exp-model-seconds"' in html and 'id="questions-next"' not in html
    # more questions per page than fit: the pagers appear, the query count does not grow
    monkeypatch.setattr(views, "QUESTION_PAGE_SIZE", 1)
    monkeypatch.setattr(views, "TASK_PAGE_SIZE", 1)
    with CaptureQueriesContext(connection) as queries:
        html = client.get(f"/experiments/{exp.pk}/").content.decode()
    assert len(queries) == n
    assert html.count('<tr id="q-') == 1 and 'id="questions-next"' in html
    nxt = re.search(r'href="\?([^"]+)" id="questions-next"', html).group(1).replace("&amp;", "&")
    html2 = client.get(f"/experiments/{exp.pk}/?{nxt}").content.decode()
    assert html2.count('<tr id="q-') == 1 and 'id="questions-prev"' in html2
    assert re.findall(r'<tr id="q-(\d+)"', html) != re.findall(r'<tr id="q-(\d+)"', html2)
    assert n == EXPERIMENT_PAGE_QUERIES, [q["sql"][:150] for q in queries.captured_queries]


#: session, user, the permission check's roles, the blind rule's two reads (the person's own open
#: queue slots and unsealed verdicts: ``experiments.selectors.blind_experiment_ids``), the
#: experiment (with configuration and release), its runs (prefetched), the page of questions, the
#: questions' accounting rows, the runs' records (task scores), the bell's unread count
EXPERIMENT_PAGE_QUERIES = 11


@pytest.mark.django_db
@needs_florence
def test_the_migration_backfills_runs_scored_before_runs_carried_accounting(scored):
    import importlib

    from django.apps import apps

    from evaluation.models import AgentRun

    backfill = importlib.import_module("experiments.migrations.0002_backfill_run_accounting").backfill
    r1, r2 = scored["runs"]
    AgentRun.objects.filter(pk__in=[r1.pk, r2.pk]).update(prompt_tokens=None, completion_tokens=None, cost=None,
                                                          seconds=None)
    backfill(apps, None)
    got = {r["id"]: r for r in AgentRun.objects.values("id", "prompt_tokens", "completion_tokens", "cost", "seconds")}
    assert got[r1.pk] == {"id": r1.pk, "prompt_tokens": 1200, "completion_tokens": 300, "cost": 0.00105, "seconds": 12.5}
    assert got[r2.pk] == {"id": r2.pk, "prompt_tokens": 800, "completion_tokens": 200, "cost": 0.0004, "seconds": 7.4}
    imported = scored["imported"].pk  # not an experiment's run: left blank
    assert [got[imported][k] for k in ("prompt_tokens", "cost")] == [None, None]
