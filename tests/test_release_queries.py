"""create_release and export_release at scale: the number of SQL queries grows with the
batches, not with the tasks, and the batched sidecar adjudication summary equals the per-task one.

The data: ``seed_synthetic`` over the Florence scene, 2 tasks per sample (sample k's dimension is
t1…t5 by k mod 5, tests/test_seed_synthetic.py), every task approved with one succeeded gold replay
of its head. The batches are made small (``PIN_BATCH`` = ``EXPORT_BATCH`` = 10 tasks) so that 20
and 40 tasks span several batches. Per batch, by reading the services: ``create_release`` runs one
gold-replay SELECT and one INSERT; the export (per dimension file, whole samples per batch) runs
the tasks, revisions, replays, import replays (revisions without a stored source), authors,
approvers, variants and run records: 8 SELECTs. Before the batching it was two queries per task
for ``create_release`` and more than five per task for the export (bench figures in
docs/benchmarks.md).
"""
from __future__ import annotations

import pytest
from conftest import REALDATA, needs_shared
from django.db import connection
from django.test.utils import CaptureQueriesContext

from annotation.models import Task
from annotation.services.imports import import_xbd_folder
from evaluation.models import Adjudication, AgentRun, RunRecord, Verdict
from evaluation.selectors.adjudication import release_adjudication, release_adjudications
from evaluation.services.seeding import seed_synthetic
from releases.models import Release, ReleaseTask
from releases.services import export as export_svc
from releases.services import lifecycle, release_export

FLORENCE = REALDATA / "xbd-hurricane-florence"
BATCH = 10
EXPORT_BATCH = 4


@pytest.fixture
def seeded(db, settings, tmp_path, monkeypatch):
    from django.contrib.auth.models import User

    settings.STUDIO_DATA_ROOT = tmp_path / "data"
    settings.STUDIO_ARTIFACT_ROOT = tmp_path / "data" / "artifacts"
    import_xbd_folder(needs_shared(FLORENCE))
    seed_synthetic(40, 2, batch=20, tasks_per_sample=2, seed=5)
    # the layers' versions exist, as an import makes them (seed_synthetic writes rows directly):
    # create_release then pins them without making any (a few queries per layer, none per task)
    from annotation.models import Layer
    from annotation.services.layer_versions import ensure_version
    for layer in Layer.objects.all():
        ensure_version(layer)
    monkeypatch.setattr(lifecycle, "PIN_BATCH", BATCH)
    monkeypatch.setattr(export_svc, "EXPORT_BATCH", EXPORT_BATCH)
    user = User.objects.create_superuser("rel-queries", password="pw-test-123")
    return user


def _half() -> list[int]:
    """The tasks of the first half of the samples (20 of 40: whole samples, so the release is valid)."""
    samples = sorted(set(Task.objects.values_list("sample_id", flat=True)))
    return list(Task.objects.filter(sample_id__in=samples[:len(samples) // 2]).values_list("pk", flat=True))


def _create(user, version, tasks):
    with CaptureQueriesContext(connection) as cq:
        release = lifecycle.create_release(user, version, "queries", tasks=tasks)
    return release, len(cq.captured_queries)


def _export(release, out):
    with CaptureQueriesContext(connection) as cq:
        release_export.export_release(release, out)
    return len(cq.captured_queries)


def test_queries_grow_with_batches_not_tasks(seeded, tmp_path):
    """20 and 40 tasks: create_release adds 2 queries per extra batch of 10 (20 → 40 tasks: 2 more
    batches, 4 more queries); the export at most 8 per extra batch and fewer than one per extra
    task. The rows are the ones the tasks pin: head revision, newest gold replay."""
    half = _half()
    assert len(half) == 20
    small, q_create_small = _create(seeded, "0.1.0", Task.objects.filter(pk__in=half))
    big, q_create_big = _create(seeded, "0.2.0", None)
    assert (ReleaseTask.objects.filter(release=small).count(), ReleaseTask.objects.filter(release=big).count()) == (20, 40)
    assert q_create_big - q_create_small == 2 * 2
    for item in ReleaseTask.objects.filter(release=big).select_related("task"):
        assert item.revision_id == item.task.head_id
        assert item.replay_id == export_svc.gold_replay(item.task_id, item.task.head_id).pk
    # pinning order: newest task first (Task's ordering), as before the batching
    assert list(ReleaseTask.objects.filter(release=big).order_by("id").values_list("task_id", flat=True)) == \
        list(Task.objects.values_list("pk", flat=True))
    q_export_small = _export(small, tmp_path / "small")
    q_export_big = _export(big, tmp_path / "big")
    # 2 tasks a sample, 5 dimensions: 20 tasks are 2 samples (4 tasks) per dimension file, one
    # batch of 4 each; 40 tasks are 8 per dimension, two batches each: 5 more batches, 8 queries each
    assert q_export_big - q_export_small == 5 * 8


def test_batch_errors_roll_back_everything(seeded):
    """A task that cannot be pinned in the second batch (asked for by the caller, but a draft)
    leaves no release and no row, and names that task; a sample missing its task 0 is refused by the positional check."""
    tasks = list(Task.objects.order_by("-id"))
    bad = tasks[15]
    Task.objects.filter(pk=bad.pk).update(status=Task.Status.DRAFT)
    with pytest.raises(lifecycle.ReleaseError, match=f"{bad.question_id} is draft"):
        lifecycle.create_release(seeded, "0.3.0", "x", tasks=Task.objects.all())
    assert not Release.objects.filter(version="0.3.0").exists() and ReleaseTask.objects.count() == 0
    Task.objects.filter(pk=bad.pk).update(status=Task.Status.APPROVED)
    t0 = Task.objects.filter(task_index=0).order_by("id").first()
    with pytest.raises(lifecycle.ReleaseError, match=rf"sample {t0.sample_id} \({t0.dimension}\) would hold tasks \[1\]"):
        lifecycle.create_release(seeded, "0.3.0", "x", tasks=Task.objects.exclude(pk=t0.pk))
    assert not Release.objects.filter(version="0.3.0").exists() and ReleaseTask.objects.count() == 0


def test_batched_adjudication_summary_equals_per_task(seeded):
    """release_adjudications(ids) == {id: release_adjudication(task)}: the runs scored on the release,
    records counted per task, adjudicated records counted once however many adjudications they have,
    overrides_all counted per adjudication row."""
    release, _ = _create(seeded, "0.4.0", None)
    AgentRun.objects.update(release=release)
    records = list(RunRecord.objects.order_by("id")[:6])
    for i, rec in enumerate(records):
        verdict = Verdict.objects.create(record=rec, source=Verdict.Source.choices[0][0])
        for j in range(1 + i % 2):  # records 1, 3, 5 get two adjudications
            Adjudication.objects.create(record=rec, final_verdict=verdict, overrides_all=(i + j) % 3 == 0)
    ids = list(Task.objects.values_list("pk", flat=True))
    batched = release_adjudications(ids, release.pk)
    assert batched == {t.pk: release_adjudication(t, release.pk) for t in Task.objects.all()}
    assert sum(v["records"] for v in batched.values()) == RunRecord.objects.count()
    assert sum(v["adjudicated"] for v in batched.values()) == 6
    assert sum(v["overrides_all"] for v in batched.values()) == Adjudication.objects.filter(overrides_all=True).count()
    assert release_adjudications(ids, None) == {pk: {"records": 0, "adjudicated": 0, "overrides_all": 0} for pk in ids}


def test_release_entries_stream_in_export_order(seeded):
    """release_entries reads the rows by keyset in chunks and merges sorted runs from disk; with
    chunks of 3 (14 runs for 40 tasks) the order is the export's, worked out here from its
    definition (export.py, ``Entry.order``): dimension by dimension in TASK_FILES order (t1…t5);
    in each, the samples whose revisions were imported (``source.sample_index``) first, by that
    index, then the others by sample id; tasks by task index. Three samples get imported
    positions in the reverse of their sample-id order. The spool folder is gone after close."""
    import os

    from annotation.models import TaskRevision
    from releases.selectors import release_entries

    release, _ = _create(seeded, "0.5.0", None)
    t1_samples = sorted(set(Task.objects.filter(dimension="t1").values_list("sample_id", flat=True)))
    assert len(t1_samples) == 4  # 40 tasks, 8 per dimension, 2 per sample
    imported = {t1_samples[1]: 2, t1_samples[2]: 1, t1_samples[3]: 0}  # reverse order
    for task in Task.objects.filter(sample_id__in=imported):
        TaskRevision.objects.filter(pk=task.head_id).update(source=f'{{"sample_index": {imported[task.sample_id]:d}}}')
    expected = []
    for dim in ("t1", "t2", "t3", "t4", "t5"):
        samples = sorted(set(Task.objects.filter(dimension=dim).values_list("sample_id", flat=True)))
        samples = sorted((s for s in samples if s in imported), key=imported.get) + [s for s in samples if s not in imported]
        for s in samples:
            expected += list(Task.objects.filter(sample_id=s).order_by("task_index").values_list("question_id", flat=True))
    with release_entries(release, chunk=3) as entries:
        assert len(entries) == 40
        got = [e.question_id for e in entries]
        assert got == [e.question_id for e in entries]  # re-iterable
        spool = entries._dir
        assert len(os.listdir(spool)) == 14  # ceil(40 / 3) runs
        positions = {e.sample_id: e.position for e in entries}
    assert got == expected
    assert {s: p for s, p in positions.items() if p} == {s: (i,) for s, i in imported.items()}
    assert not os.path.exists(spool)


def test_gold_replay_pick_is_one_rule_for_one_revision_and_for_a_batch(seeded):
    # GOLD_REPLAY_ORDER (releases.services.export): among a revision's succeeded replays, the newest
    # one accepted as gold, else the newest one; failed replays never count. Worked by hand on
    # replays added to one seeded task: accepted a (oldest) < unaccepted b < failed c.
    from replay.models import ReplayRun

    task = Task.objects.order_by("pk").first()
    (a,) = ReplayRun.objects.filter(task=task, revision_id=task.head_id, status=ReplayRun.Status.SUCCEEDED)
    assert a.gold_accepted

    def copy_of(run, **changes):
        new = ReplayRun.objects.get(pk=run.pk)
        new.pk = None
        for k, v in changes.items():
            setattr(new, k, v)
        new.save()
        return new

    b = copy_of(a, gold_accepted=False)
    copy_of(a, gold_accepted=True, status=ReplayRun.Status.FAILED)
    pair = (task.pk, task.head_id)
    assert export_svc.gold_replay(*pair).pk == a.pk            # accepted beats newer
    assert lifecycle._gold_replays([pair]) == {pair: a.pk}
    ReplayRun.objects.filter(pk=a.pk).update(gold_accepted=False)
    assert export_svc.gold_replay(*pair).pk == b.pk            # none accepted: the newest succeeded
    assert lifecycle._gold_replays([pair]) == {pair: b.pk}
    ReplayRun.objects.filter(pk=a.pk).update(gold_accepted=True)
    d = copy_of(b, gold_accepted=True)
    assert export_svc.gold_replay(*pair).pk == d.pk            # of two accepted, the newer (a is older)
    assert lifecycle._gold_replays([pair, (task.pk, -1)]) == {pair: d.pk}   # a pair without replays is absent
