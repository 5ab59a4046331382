"""manage.py seed_synthetic: synthetic tasks over real scenes, with runs scored by the evaluator.

Hand-worked values: the Florence mask holds 26,492 px of class 3 and 274 px of class 4 (np.unique,
see tests/test_skeleton_flow.py), so the scene's damaged pixels (classes ≥ 2) are 26,766 — the T1
gold, and what a real GT replay of the same trajectory counts. 25 tasks in samples of 2 make 13
samples (k = 0…12, the last holding one task); sample k has dimension t1…t5 by k mod 5: t1 gets
k = 0, 5, 10 (6 tasks), t2 k = 1, 6, 11 (6), t3 k = 2, 7, 12 (2 + 2 + 1 = 5), t4 k = 3, 8 (4),
t5 k = 4, 9 (4): 25 in all.
"""
from __future__ import annotations

import pytest
from conftest import needs_shared
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from support.florence import FLORENCE

from annotation.models import Event, Layer, Task
from annotation.services.imports import import_xbd_folder
from evaluation.agreement import agreement_report
from evaluation.models import AgentRun, RunRecord, Verdict
from evaluation.scoring import evaluate_samples
from evaluation.selectors.verdicts import agreement_rows
from evaluation.services.seeding import seed_synthetic
from kernel.taxonomy import plan_is_correct
from releases.services.export import dora_samples
from replay.models import ReplayRun


def _records_by_dim(run):
    out = {}
    for r in RunRecord.objects.filter(run=run).order_by("id"):
        out.setdefault(r.dimension, []).append({"question_id": r.question_id, "sample_id": r.sample_id,
                                                "predicted_answer": r.predicted_answer, "trajectory": r.trajectory})
    return out


def test_seeds_marked_synthetic_tasks_and_scored_runs(florence):
    out = seed_synthetic(25, 2, batch=10, tasks_per_sample=2, seed=7)
    assert out["tasks"] == 25 and out["runs"] == 2 and out["records"] == 50 and out["events"] == 1

    event = Event.objects.get(slug="synthetic-hurricane-florence")
    assert event.metadata["synthetic"] is True and event.name.startswith("[synthetic]")
    # its layers are rows over the real files: same stored paths, nothing copied
    real_paths = set(florence.layers.values_list("path", flat=True))
    assert set(event.layers.values_list("path", flat=True)) == real_paths
    mask = event.layers.get(kind=Layer.Kind.MASK)
    assert mask.annotates.event_id == event.pk

    tasks = Task.objects.filter(event=event).select_related("head")
    assert tasks.count() == 25 and not Task.objects.exclude(event=event).exclude(event=florence).exists()
    assert all(t.question_id.startswith("synthetic-") and t.head.question.startswith("[synthetic] ") for t in tasks)
    assert sorted(tasks.values_list("dimension", flat=True)) == ["t1"] * 6 + ["t2"] * 6 + ["t3"] * 5 + ["t4"] * 4 + ["t5"] * 4
    t1 = tasks.filter(dimension="t1").first()
    gold = ReplayRun.objects.get(task=t1)
    assert gold.mode == "synthetic" and gold.gold_accepted and gold.final_answer == {"damaged_pixels": 26766}

    # every stored score is the evaluator's: one evaluate_samples call over the studio's own gold
    # (the export path) and the stored predictions reproduces each record and the run's aggregate
    samples = dora_samples(list(tasks))
    for run in AgentRun.objects.filter(agent__name__startswith="synthetic-"):
        result = evaluate_samples(samples, _records_by_dim(run))
        assert run.dora_score == result["dora_score"]
        assert run.dimensions == result["dimensions"]
        entries = {(e["sample_id"], e["task_idx"]): e for block in result["full"].values() for e in block["tasks"]}
        for rec in RunRecord.objects.filter(run=run):
            e = entries[(rec.sample_id, rec.task_index)]
            assert (rec.task_score, rec.field_scores, rec.t_em, rec.par_acc) == (e["task_score"], e["field_scores"], e["t_em"], e["par_acc"])
    scores = sorted(AgentRun.objects.values_list("dora_score", flat=True))
    assert scores[0] < scores[1] <= 1.0  # agent 1 is the better one (skill 0.85 against 0.65)


def test_a_synthetic_t1_task_replays_on_the_real_files(florence, maintainer):
    from replay.services.runs import start_replay

    seed_synthetic(5, 0, tasks_per_sample=1)
    user = maintainer  # synthetic tasks have no author: a maintainer replays them
    task = Task.objects.filter(event__slug="synthetic-hurricane-florence", dimension="t1").get()
    run = start_replay(user, task)
    assert run.status == "succeeded", run.error
    assert run.final_answer == {"damaged_pixels": 26766}


def test_refuses_twice_replaces_on_request_and_is_deterministic(florence):
    first = seed_synthetic(12, 1, seed=3)
    with pytest.raises(ValueError, match="--replace"):
        seed_synthetic(12, 1, seed=3)
    again = seed_synthetic(12, 1, seed=3, replace=True)
    assert again["dora_scores"] == first["dora_scores"]
    assert Task.objects.filter(event__slug__startswith="synthetic-").count() == 12
    assert AgentRun.objects.count() == 1 and RunRecord.objects.count() == 12
    assert Event.objects.filter(slug__startswith="synthetic-").count() == 1


def test_command_line_and_errors(db, capsys):
    with pytest.raises(CommandError, match="no real scene"):
        call_command("seed_synthetic", "--tasks", "3")
    with pytest.raises(CommandError, match="at least 1"):
        call_command("seed_synthetic", "--tasks", "0")
    import_xbd_folder(needs_shared(FLORENCE))
    call_command("seed_synthetic", "--tasks", "10", "--runs", "1", "--status", "mix")
    text = capsys.readouterr().out
    assert "10 tasks over 1 synthetic events, 1 runs, 10 records" in text and "synthetic-run-1: DORA score" in text
    assert set(Task.objects.values_list("status", flat=True)) <= {"approved", "draft", "submitted", "in_review", "returned"}


def test_a_verdict_sample_gives_the_agreement_report_real_rows(florence):
    # 12 tasks, 2 runs, the first 5 records of each run judged: 10 records × (judge + 2 people) =
    # 30 verdicts; the people's are marked final, so all 30 are decided rows of the report, and
    # each record is one unit with two human raters (humans_per_run {2: 10})
    out = seed_synthetic(12, 2, seed=5, verdicts=5)
    assert out["verdicts"] == 30
    judged = Verdict.objects.values_list("record_id", flat=True).distinct()
    first5 = [set(RunRecord.objects.filter(run=run).order_by("id").values_list("id", flat=True)[:5])
              for run in AgentRun.objects.order_by("id")]
    assert set(judged) == first5[0] | first5[1]
    people = Verdict.objects.filter(source="human")
    assert people.count() == 20 and not people.filter(sealed_at__isnull=True).exists()
    assert set(people.values_list("annotator__username", flat=True)) == {"synthetic-scorer-1", "synthetic-scorer-2"}
    assert Verdict.objects.filter(source="judge", judge_name="synthetic-judge").count() == 10
    for v in Verdict.objects.all():  # the taxonomy's rule: correct exactly when no flag is set
        assert v.is_correct == plan_is_correct(v.errors) and (v.grade == 1.0) == v.is_correct
    rows = agreement_rows()
    assert len(rows) == 30
    assert agreement_report(rows)["reference"]["humans_per_run"] == {2: 10}
    # --replace deletes them with the runs; the scorers stay, without a usable password
    seed_synthetic(12, 2, seed=5, replace=True)
    assert not Verdict.objects.exists()
    assert not get_user_model().objects.get(username="synthetic-scorer-1").has_usable_password()
