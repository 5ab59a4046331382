"""The gold set of a run (``evaluation.goldset``): a run scored against a release gets, number for
number, what the official evaluator (``evaluation.scoring``, ``manage.py evaluate_runs``) gives on
that release's exported ``tasks/`` folder; robustness variants (exported under ``variants/``) are
never part of the DORA score or the per-dimension table, they have their own robustness table.

The release: the demo's T1 task (hurricane-florence_demo01) and T2 task (joplin-tornado_demo01),
and three variants of the T1 task, one of each kind (extraneous, broken, unsolvable). The run: the
demo run (fixtures/demo_run) plus one record per variant (the demo T1 record under the variant's
question id). Expected values are the evaluator's own on the exported files (the bar), and the
hand-worked demo figures of tests/test_skeleton_flow.py's docstring: T1 task score 0.5 over 1
task, T2 0, DORA 0.25 (with the variants counted, T1 would be 4 tasks and a different mean).
"""
from __future__ import annotations

import json
import shutil

import pytest
from conftest import REPO, needs_demo_data
from django.core.management import call_command

DEMO_T1 = "hurricane-florence_demo01_task0"


@pytest.fixture
def release_with_variants(db, tmp_path, make_user):
    """The demo's tasks approved, one variant of each kind of the T1 task (replayed, approved), a
    published release 1.0.0 of all of them, and a run folder answering every question."""
    from annotation.models import Task
    from annotation.services.variants import create_variant
    from releases.services.lifecycle import create_release, publish_release
    from replay.services.runs import start_replay

    needs_demo_data()
    call_command("demo", "--skip-osm", stdout=open(tmp_path / "demo.log", "w"))
    maint = make_user("mo", "maintainer", "author", "reviewer")
    Task.objects.update(status=Task.Status.APPROVED)  # setup shortcut (review is not the subject)
    base = Task.objects.get(question_id=DEMO_T1)
    variants = {}
    for kind, params in (("extraneous", {"n": 2, "seed": 0}), ("broken", {"step": 1}),
                         ("unsolvable", {"strategy": "tool_removal"})):
        v, _ = create_variant(maint, base, kind, **params)
        replay = start_replay(maint, v.task)
        assert replay.status == "succeeded", replay.error
        variants[kind] = v
    Task.objects.update(status=Task.Status.APPROVED)
    release = publish_release(maint, create_release(maint, "1.0.0", "tasks and variants"))
    assert release.items.count() == 2 + 3
    run_dir = tmp_path / "demo-agent_AP"
    shutil.copytree(REPO / "fixtures" / "demo_run", run_dir, ignore=shutil.ignore_patterns("*.md"))
    t1 = run_dir / "t1_perception_and_assessment" / "benchmark.jsonl"
    demo_rec = json.loads(t1.read_text().splitlines()[0])
    lines = [json.dumps(demo_rec)]
    for v in variants.values():
        rec = dict(demo_rec, question_id=v.task.question_id, sample_id=v.task.sample_id)
        if v.kind == "unsolvable":
            rec["predicted_answer"] = {"answer": "REJECT"}
        lines.append(json.dumps(rec))
    t1.write_text("\n".join(lines) + "\n")
    return maint, release, variants, run_dir


def _evaluator_on_export(release, run_dir, out):
    """The official evaluator's eval.json on the release's exported ``tasks/`` (the CLI's function)."""
    from evaluation.scoring import evaluate_run_dir
    from releases.services.release_export import export_release

    export_release(release, out)
    assert (out / "variants" / "tasks" / "t1_perception_and_assessment.json").is_file()
    return evaluate_run_dir(run_dir, out / "tasks")


def _assert_run_equals(run, official):
    assert run.dora_score == official["dora_score"]
    assert run.dimensions == official["dimensions"]
    by_key = {(d, t["sample_id"], t["task_idx"]): t for d, block in official["full"].items() for t in block["tasks"]}
    answered = {(r.dimension, r.sample_id, r.task_index): r for r in run.records.all()}
    unanswered = {u["question_id"]: u for u in run.unanswered}
    for key, t in by_key.items():
        if key not in answered:  # listed as unanswered, with the evaluator's numbers
            u = unanswered.pop(f"{key[1]}_task{key[2]}")
            assert (u["dimension"], u["task_score"], u["t_any"], u["eff"]) == (key[0], t["task_score"], t["t_any"], t["eff"])
            continue
        rec = answered[key]
        assert (rec.task_score, rec.field_scores, rec.n_scored_fields) == (
            t["task_score"], t["field_scores"], t["n_scored_fields"]), key
        assert (rec.t_any, rec.t_ord, rec.t_em, rec.par_acc, rec.eff) == (
            t["t_any"], t["t_ord"], t["t_em"], t["par_acc"], t["eff"]), key
    assert unanswered == {}  # nothing listed that the evaluator does not count


@pytest.mark.django_db
def test_run_on_a_release_equals_the_evaluator_on_its_exported_tasks(release_with_variants, tmp_path):
    from evaluation.services.runs import import_run_dir

    maint, release, variants, run_dir = release_with_variants
    run = import_run_dir(maint, run_dir, "demo-agent", release=release)
    official = _evaluator_on_export(release, run_dir, tmp_path / "export")
    # the evaluator on the exported files: T1 one task (0.5), T2 one task (0), DORA 0.25
    assert official["dora_score"] == 0.25
    assert (official["dimensions"]["t1"]["n_tasks"], official["dimensions"]["t1"]["dim_score"]) == (1, 0.5)
    _assert_run_equals(run, official)
    # the variants' records keep their own outcome (the robustness table), outside the score
    recs = {r.question_id: r for r in run.records.all()}
    for kind, v in variants.items():
        rec = recs[v.task.question_id]
        assert rec.robustness["kind"] == kind
        assert rec.in_gold_set is False
    assert recs[DEMO_T1].in_gold_set is True
    # the run names its set: the published release and its manifest digest
    assert (run.gold_set, run.gold_set_digest, run.gold_set_at) == (
        "release 1.0.0", release.manifest_sha256, release.published_at)


@pytest.mark.django_db
def test_run_page_and_api_show_the_evaluators_numbers_and_the_set(release_with_variants, tmp_path, client):
    from evaluation.services.runs import import_run_dir

    maint, release, variants, run_dir = release_with_variants
    run = import_run_dir(maint, run_dir, "demo-agent", release=release)
    official = _evaluator_on_export(release, run_dir, tmp_path / "export")
    client.force_login(maint)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert '<b id="dora-score">0.2500</b>' in page
    # T1: answer score 0.5 over 1 task, 1 scored (not 4: the variants are not benchmark tasks)
    assert "<tr><td>T1</td><td>0.5000</td><td>1</td><td>1</td>" in page
    assert "gold set <b>release 1.0.0</b>" in page and release.manifest_sha256[:10] in page
    assert page.count("not in the gold set (robustness variant)") == 3
    api = client.get(f"/api/runs/{run.pk}/").json()
    assert (api["dora_score"], api["dimensions"]) == (official["dora_score"], official["dimensions"])
    assert (api["gold_set"], api["gold_set_digest"], api["release"]) == ("release 1.0.0", release.manifest_sha256, "1.0.0")
    in_set = {r["question_id"]: r["in_gold_set"] for r in api["records"]}
    assert in_set == {DEMO_T1: True, "joplin-tornado_demo01_task0": True,
                      **{v.task.question_id: False for v in variants.values()}}


@pytest.mark.django_db
def test_studio_set_leaves_variants_out_and_the_leaderboard_rows_too(release_with_variants):
    from evaluation.selectors.leaderboard import leaderboard_rows
    from evaluation.services.runs import import_run_dir

    maint, release, variants, run_dir = release_with_variants
    run = import_run_dir(maint, run_dir, "demo-agent")  # no release: the studio's current tasks
    assert run.release is None and run.gold_set.startswith("studio tasks (unversioned) ")
    assert len(run.gold_set_digest) == 64 and run.gold_set_at is not None
    # the same two benchmark tasks at the same gold: the same numbers as on the release
    assert run.dora_score == 0.25 and run.dimensions["t1"]["n_tasks"] == 1
    rows = leaderboard_rows(run_ids=[run.pk])
    assert sorted(r["question_id"] for r in rows) == [DEMO_T1, "joplin-tornado_demo01_task0"]
    assert run.aggregate.n_records == 2


@pytest.mark.django_db
def test_rescore_makes_a_new_run_on_the_new_set_and_the_old_scores_stay(release_with_variants, tmp_path, client,
                                                                       settings, django_capture_on_commit_callbacks):
    """The run scored on the studio's tasks, then re-scored on release 1.0.0 (command) and again
    (the API, in the background: the inline runner under tests): each run keeps its own set."""
    from django.core.management import call_command as cc

    from evaluation.models import AgentRun
    from evaluation.services.runs import import_run_dir
    from notifications.models import Notification
    from studio.accounts import upsert_user

    maint, release, variants, run_dir = release_with_variants
    moe = upsert_user("moe", "pw-test-123", ["maintainer"])  # another maintainer: told of every run scored
    first = import_run_dir(maint, run_dir, "demo-agent")
    out = tmp_path / "out.json"
    with open(out, "w") as fh:
        cc("rescore_run", "--run", str(first.pk), "--release", "1.0.0", "--as-user", "mo", "--json", stdout=fh)
    summary = json.loads(out.read_text())
    second = AgentRun.objects.get(pk=summary["run_id"])
    assert (second.rescored_from_id, second.release, second.gold_set) == (first.pk, release, "release 1.0.0")
    # a re-score is a run scored: the other maintainers hear of it as of the import
    told = Notification.objects.filter(user=moe, event_type="run.scored").values_list("data__run_id", flat=True)
    assert sorted(told) == [first.pk, second.pk]
    official = _evaluator_on_export(release, run_dir, tmp_path / "export")
    _assert_run_equals(second, official)
    first.refresh_from_db()
    assert first.gold_set.startswith("studio tasks") and first.dora_score == 0.25
    assert second.records.count() == first.records.count() == 5
    client.force_login(maint)
    settings.STUDIO_JUDGE_RUNNER = "inline"  # the job runs when the request's transaction commits
    with django_capture_on_commit_callbacks() as after_commit:
        job = client.post(f"/api/runs/{first.pk}/rescore/", {"release": "1.0.0"}, content_type="application/json")
    after_commit[0]()  # the job's start (what the commit of the request runs)
    assert job.status_code == 202, job.content
    done = client.get(f"/api/run-imports/{job.json()['id']}/").json()
    assert done["status"] == "done", done
    third = AgentRun.objects.get(pk=done["run"])
    assert (third.rescored_from_id, third.gold_set, third.dora_score) == (first.pk, "release 1.0.0", 0.25)
    bad = client.post(f"/api/runs/{first.pk}/rescore/", {"release": "9.9.9"}, content_type="application/json")
    assert bad.status_code == 400 and "no release" in bad.json()["detail"]
    # the run page offers the same (the release's version, or the studio's current tasks)
    page = client.get(f"/runs/{third.pk}/").content.decode()
    assert 'id="rescore-form"' in page and '<option value="1.0.0">release 1.0.0</option>' in page
    assert f're-scored from <a href="/runs/{first.pk}/">run {first.pk}</a>' in page
    with django_capture_on_commit_callbacks() as after_commit:
        r = client.post(f"/runs/{third.pk}/rescore/", {"release": ""})
    assert r.status_code == 302 and "/runs/#import-" in r["Location"]
    after_commit[0]()
    fourth = AgentRun.objects.order_by("-id").first()
    assert (fourth.rescored_from_id, fourth.release, fourth.dora_score) == (third.pk, None, 0.25)
    assert fourth.gold_set.startswith("studio tasks (unversioned) ")


@pytest.mark.django_db
def test_leaderboard_ranks_one_gold_set_at_a_time(release_with_variants, client):
    """The same predictions on the studio's tasks and on release 1.0.0: two sets, never one table.
    The default is the newest published release with runs; the CSV names the set in every row."""
    import csv
    import io

    from evaluation.services.runs import import_run_dir, rescore_run

    maint, release, variants, run_dir = release_with_variants
    studio_run = import_run_dir(maint, run_dir, "studio-agent")
    release_run = rescore_run(maint, studio_run, release=release)
    client.force_login(maint)
    page = client.get("/leaderboard/").content.decode()
    official = page[page.index('id="official-table"'):page.index("</table>", page.index('id="official-table"'))]
    assert f'data-run="{release_run.pk}"' in official and f'data-run="{studio_run.pk}"' not in official
    assert "gold set <b>release 1.0.0</b>" in page.replace('id="gold-set-shown">Every table, plot and export below '
                                                           'ranks only runs scored on the ', "")
    # a run on the studio's current tasks: the set of those questions at those revisions and replays
    studio_key = f"studio:{studio_run.gold_set_digest}"
    page = client.get(f"/leaderboard/?set={studio_key}").content.decode()
    official = page[page.index('id="official-table"'):page.index("</table>", page.index('id="official-table"'))]
    assert f'data-run="{studio_run.pk}"' in official and f'data-run="{release_run.pk}"' not in official
    assert f"gold set <b>{studio_run.gold_set} · digest {studio_run.gold_set_digest[:12]}</b>" in page
    rows = list(csv.DictReader(io.StringIO(client.get("/leaderboard.csv").getvalue().decode())))
    # the release run's benchmark tasks only (the 3 variant records are in the robustness table)
    assert sorted(r["question_id"] for r in rows) == [DEMO_T1, "joplin-tornado_demo01_task0"]
    assert {(r["run_id"], r["gold_set"]) for r in rows} == {(str(release_run.pk), "release 1.0.0")}
    rows = list(csv.DictReader(io.StringIO(client.get(f"/leaderboard.csv?set={studio_key}").getvalue().decode())))
    # the runs read from the same studio tasks (the same digest) rank together; the demo's own run
    # (imported by `demo` on the studio's tasks) is in this set exactly when it read the same ones
    from evaluation.models import AgentRun

    studio_ids = {str(pk) for pk in AgentRun.objects.filter(gold_set__startswith="studio tasks",
                                                             gold_set_digest=studio_run.gold_set_digest).values_list("pk", flat=True)}
    assert str(studio_run.pk) in studio_ids and {r["run_id"] for r in rows} == studio_ids
    assert all(r["gold_set"].startswith("studio tasks (unversioned) 20") for r in rows)
    assert client.get(f"/leaderboard/plot/dimensions.png?set={studio_key}").content.startswith(b"\x89PNG")
    # the paired comparison: runs on two sets are refused; two runs on one set are paired task by
    # task (the same predictions twice: every task a tie, B - A = 0, and every signing of zero
    # differences is as extreme as the observed 0, so p = 1)
    refused = client.get(f"/leaderboard/compare/?a={studio_run.pk}&b={release_run.pk}")
    assert refused.status_code == 400 and "never compared" in refused.content.decode()
    twin = rescore_run(maint, studio_run, release=release)
    page = client.get(f"/leaderboard/compare/?a={release_run.pk}&b={twin.pk}")
    assert page.status_code == 200
    html = page.content.decode()
    assert "<td><b>overall</b></td><td>2</td><td>25.00</td><td>25.00</td><td><b>+0.00</b></td>" in html
    assert "0 wins · 0 losses · 2 ties for B" in html and "1.0000" in html
    png = client.get(f"/leaderboard/compare.png?a={release_run.pk}&b={twin.pk}")
    assert png.status_code == 200 and png.content.startswith(b"\x89PNG")
    # the API: one set a table, every row naming it; the comparison as JSON, two sets refused
    body = client.get("/api/leaderboard/").json()
    assert body["gold_set"]["label"] == "release 1.0.0"
    assert {r["run_id"] for r in body["rows"]} == {release_run.pk, twin.pk}
    assert {(r["gold_set"], r["gold_set_key"]) for r in body["rows"]} == {("release 1.0.0", body["gold_set"]["key"])}
    body = client.get(f"/api/leaderboard/?set={studio_key}").json()
    assert str(studio_run.pk) in {str(r["run_id"]) for r in body["rows"]}
    assert release_run.pk not in {r["run_id"] for r in body["rows"]}
    assert {r["gold_set_key"] for r in body["rows"]} == {studio_key}
    same = client.get(f"/api/leaderboard/compare/?a={release_run.pk}&b={twin.pk}").json()
    assert same["gold_set"] == "release 1.0.0" and same["b"]["id"] == twin.pk
    refused = client.get(f"/api/leaderboard/compare/?a={studio_run.pk}&b={release_run.pk}")
    assert refused.status_code == 400 and "never compared" in refused.json()["detail"]


@pytest.mark.django_db
def test_run_page_lists_the_unanswered_tasks_of_the_set(release_with_variants, tmp_path, client):
    """The run answers T1 (and the variants) but not the T2 task: the evaluator counts T2 as one
    task, answered by none (its score for a missing answer); the run page lists it, marked."""
    from evaluation.services.runs import import_run_dir

    maint, release, variants, run_dir = release_with_variants
    (run_dir / "t2_spatial_relation_analysis" / "benchmark.jsonl").write_text("")  # the agent answered no T2 task
    run = import_run_dir(maint, run_dir, "demo-agent", release=release)
    official = _evaluator_on_export(release, run_dir, tmp_path / "export")
    _assert_run_equals(run, official)
    assert [u["question_id"] for u in run.unanswered] == ["joplin-tornado_demo01_task0"]
    client.force_login(maint)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    table = page[page.index('id="record-table"'):]
    assert '<tr class="unanswered"><td>joplin-tornado_demo01_task0 <small class="muted">unanswered' in table


@pytest.mark.django_db
def test_export_tasks_writes_variants_apart_so_the_evaluator_on_its_tasks_equals_the_studio_set(
        release_with_variants, tmp_path):
    """``export_tasks`` (the studio's current tasks in the benchmark's layout) keeps the variants
    out of ``tasks/`` as a release export does (``variants/tasks/``): the evaluator on its
    ``tasks/`` then scores the two benchmark tasks only, as the run on the studio's set does (T1
    0.5 over 1 task, T2 0, DORA 0.25). With the three T1 variants inside ``tasks/`` it counted T1
    over 4 tasks instead."""
    from evaluation.scoring import evaluate_run_dir
    from evaluation.services.runs import import_run_dir

    maint, release, variants, run_dir = release_with_variants
    out = tmp_path / "current"
    call_command("export_tasks", "--out", str(out), stdout=open(tmp_path / "export.log", "w"))
    plain = {s["sample_id"] for f in (out / "tasks").glob("t*.json") for s in json.loads(f.read_text())}
    assert plain == {"hurricane-florence_demo01", "joplin-tornado_demo01"}
    apart = json.loads((out / "variants" / "tasks" / "t1_perception_and_assessment.json").read_text())
    assert {s["sample_id"] for s in apart} == {v.task.sample_id for v in variants.values()}
    official = evaluate_run_dir(run_dir, out / "tasks")
    assert (official["dora_score"], official["dimensions"]["t1"]["n_tasks"]) == (0.25, 1)
    run = import_run_dir(maint, run_dir, "demo-agent")  # the studio's current tasks
    _assert_run_equals(run, official)


@pytest.mark.django_db
def test_runs_page_names_the_gold_set_beside_every_score(release_with_variants, client):
    """The runs list shows each run's DORA score beside the set it was computed on: the same
    predictions on the studio's tasks and on release 1.0.0 (both 0.25 here) are told apart."""
    import re

    from evaluation.services.runs import import_run_dir, rescore_run

    maint, release, variants, run_dir = release_with_variants
    studio_run = import_run_dir(maint, run_dir, "studio-agent")
    release_run = rescore_run(maint, studio_run, release=release)
    client.force_login(maint)
    page = client.get("/runs/").content.decode()
    table = page[page.index('id="run-table"'):page.index("</table>", page.index('id="run-table"'))]
    assert "<th>Gold set</th>" in table
    rows = {int(m.group(1)): m.group(0) for m in re.finditer(r'<tr><td><a href="/runs/(\d+)/">.*?</tr>', table, re.S)}
    assert '<td class="gold-set">release 1.0.0</td><td>0.2500</td>' in rows[release_run.pk]
    assert f'<td class="gold-set">{studio_run.gold_set}</td><td>0.2500</td>' in rows[studio_run.pk]


@pytest.mark.django_db
def test_release_page_and_api_count_benchmark_tasks_apart_from_variants(release_with_variants, client, tmp_path):
    """Release 1.0.0 ships two benchmark tasks (T1 1, T2 1: its sidecar's ``counts.by_dimension``)
    and three variants of the T1 task under ``variants/``: the page and API count them so, not
    T1 4."""
    from releases.services.release_export import export_release

    maint, release, variants, run_dir = release_with_variants
    export_release(release, tmp_path / "export")
    sidecar = json.loads((tmp_path / "export" / "studio_manifest.json").read_text())
    assert sidecar["counts"]["by_dimension"] == {"t1": 1, "t2": 1}
    client.force_login(maint)
    api = client.get("/api/releases/1.0.0/").json()
    assert (api["counts"], api["variants"], len(api["items"])) == ({"t1": 1, "t2": 1}, 3, 5)
    page = client.get("/releases/1.0.0/").content.decode()
    assert "<dt>Tasks</dt><dd>2 · T1 1 · T2 1 · robustness variants 3</dd>" in page


@pytest.mark.django_db
def test_oracle_perception_runs_are_ranked_apart_from_the_benchmarks_protocol(release_with_variants, client):
    """A run whose seg.* calls were answered from the GT masks (oracle perception) and a run under
    the benchmark's protocol, on the same release: two groups, never one table or comparison."""
    from evaluation.services.runs import import_run_dir

    maint, release, variants, run_dir = release_with_variants
    model_run = import_run_dir(maint, run_dir, "model-agent", release=release)  # records name no mode
    oracle_run = import_run_dir(maint, run_dir, "oracle-agent", release=release, perception_mode="gt")
    assert (model_run.perception_mode, oracle_run.perception_mode) == ("unknown", "gt")
    assert model_run.gold_set_digest == oracle_run.gold_set_digest
    client.force_login(maint)
    page = client.get("/leaderboard/").content.decode()  # default: the release, benchmark protocol
    official = page[page.index('id="official-table"'):page.index("</table>", page.index('id="official-table"'))]
    assert f'data-run="{model_run.pk}"' in official and f'data-run="{oracle_run.pk}"' not in official
    key = f"{oracle_run.gold_set_digest}~oracle"
    assert f'value="{key}"' in page and "release 1.0.0 · oracle perception" in page
    page = client.get(f"/leaderboard/?set={key}").content.decode()
    official = page[page.index('id="official-table"'):page.index("</table>", page.index('id="official-table"'))]
    assert f'data-run="{oracle_run.pk}"' in official and f'data-run="{model_run.pk}"' not in official
    refused = client.get(f"/api/leaderboard/compare/?a={model_run.pk}&b={oracle_run.pk}")
    assert refused.status_code == 400 and "oracle perception" in refused.json()["detail"]
    html = client.get(f"/runs/{oracle_run.pk}/").content.decode()
    assert '<b id="perception-mode">oracle perception (GT masks)</b>' in html
    # a folder recorded by mcp_serve names its mode in every record's studio_session
    t1 = run_dir / "t1_perception_and_assessment" / "benchmark.jsonl"
    recs = [json.loads(line) for line in t1.read_text().splitlines()]
    t1.write_text("".join(json.dumps(dict(r, studio_session={"perception_mode": "model"})) + "\n" for r in recs))
    for other in run_dir.glob("*/benchmark.jsonl"):
        if other != t1:
            other.write_text("".join(json.dumps(dict(json.loads(line), studio_session={"perception_mode": "model"}))
                                     + "\n" for line in other.read_text().splitlines() if line.strip()))
    assert import_run_dir(maint, run_dir, "served-agent", release=release).perception_mode == "model"
