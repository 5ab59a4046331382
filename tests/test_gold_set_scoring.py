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
from django.core.management import call_command

from conftest import REPO

DEMO_T1 = "hurricane-florence_demo01_task0"


@pytest.fixture
def release_with_variants(db, tmp_path, make_user):
    """The demo's tasks approved, one variant of each kind of the T1 task (replayed, approved), a
    published release 1.0.0 of all of them, and a run folder answering every question."""
    from annotation.models import Task
    from annotation.services.variants import create_variant
    from releases.services.releases import create_release, publish_release
    from replay.services import start_replay

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
    from releases.services.releases import export_release

    export_release(release, out)
    assert (out / "variants" / "tasks" / "t1_perception_and_assessment.json").is_file()
    return evaluate_run_dir(run_dir, out / "tasks")


def _assert_run_equals(run, official):
    assert run.dora_score == official["dora_score"]
    assert run.dimensions == official["dimensions"]
    by_key = {(d, t["sample_id"], t["task_idx"]): t for d, block in official["full"].items() for t in block["tasks"]}
    answered = {(r.dimension, r.sample_id, r.task_index): r for r in run.records.all()}
    for key, t in by_key.items():
        rec = answered[key]
        assert (rec.task_score, rec.field_scores, rec.n_scored_fields) == (
            t["task_score"], t["field_scores"], t["n_scored_fields"]), key
        assert (rec.t_any, rec.t_ord, rec.t_em, rec.par_acc, rec.eff) == (
            t["t_any"], t["t_ord"], t["t_em"], t["par_acc"], t["eff"]), key


@pytest.mark.django_db
def test_run_on_a_release_equals_the_evaluator_on_its_exported_tasks(release_with_variants, tmp_path):
    from evaluation.services import import_run_dir

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
