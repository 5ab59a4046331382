"""Replays as background jobs: on a real Celery worker when CELERY_BROKER_URL is set (CI's second
configuration: PostgreSQL + Redis + ``celery -A studio worker``), eagerly otherwise.

Hand-worked values: the Florence mask (``hurricane-florence_00000018_mask.png``) holds value 3
(major) on 26,492 px and 4 (destroyed) on 274 px (np.unique; its SOURCE.md lists {0, 3, 4}); the
damage tools map major → 2 and destroyed → 3, so ``ras.count_pixels(classes=[2, 3])`` totals
26,492 + 274 = 26,766 (the same figure as tests/test_skeleton_flow.py).

Crash recovery, two ways (both must give the eager replay's hash):
- with a worker: the test starts a worker of its own on a private queue (one pool process), sends a
  replay of 10 real steps to it (about 4 s), SIGKILLs the pool process once the run is RUNNING with some steps done,
  and the worker's main process re-queues the task (``acks_late`` + ``reject_on_worker_lost`` in
  settings) and re-runs it from the start in a fresh pool process;
- without a broker: the crash state is made in-process (the replay dies with a ``BaseException``
  after step 4, as a killed process stops: run left RUNNING, later steps pending, a partial
  artifact folder) and the run is sent again.
"""
from __future__ import annotations

import os
import signal
import uuid

import pytest
from conftest import REALDATA, needs_shared

from annotation.services.imports import import_xbd_folder
from annotation.services.tasks import create_task
from replay.models import ReplayRun, ReplayStep
from replay.services.runs import create_run, execute_replay, start_replay

FLORENCE = REALDATA / "xbd-hurricane-florence"
PRE = "hurricane-florence_00000018_pre_original.png"
POST = "hurricane-florence_00000018_post_original.png"
DAMAGE = [
    {"call": "seg.building_damage", "args": {"pre_image_path": PRE, "post_image_path": POST}},
    {"call": "ras.count_pixels", "args": {"mask_path": "<mask_path> from trajectory[0].obs", "classes": [2, 3]}},
]


def _maps(n: int) -> list[dict]:
    """``n`` real ``vis.damage_map`` renderings of the damage mask over the post image (about 0.4 s
    each, measured; distinct titles, so the step cache cannot answer one from another)."""
    return [{"call": "vis.damage_map", "args": {"base_image_path": POST, "overlay_mask_path": "<mask_path> from trajectory[0].obs",
                                                "title": f"Florence damage, panel {i + 1}"}} for i in range(n)]


def _florence_task(user, extra_steps=()):
    event = import_xbd_folder(needs_shared(FLORENCE)).event
    return create_task(user, event, dimension="t1", content={
        "question": "How many pixels show partially damaged or destroyed buildings?",
        "trajectory": DAMAGE + list(extra_steps),
        "answer_spec": [{"name": "damaged_pixels", "eval_type": "scalar_count", "source": "<total> from trajectory[1].obs"}],
    })


def _fresh_reference(task):
    """An eager replay of the task that calls every tool (no step cache): the reference hash."""
    run = execute_replay(create_run(task).pk, use_cache=False)
    assert run.status == "succeeded" and run.final_answer == {"damaged_pixels": 26766}
    return run


@pytest.mark.celery_worker
def test_florence_replay_on_the_worker_matches_the_eager_replay(celery_worker, make_user):
    user = make_user("ada", "author")
    task = _florence_task(user)
    run = celery_worker.wait_replay(start_replay(user, task))
    assert run.status == "succeeded", run.error
    assert run.final_answer == {"damaged_pixels": 26766}
    assert list(run.steps.values_list("status", flat=True)) == ["succeeded", "succeeded"]
    result = celery_worker.dispatched[-1]
    if celery_worker.real:  # it went through the broker and came back through the result backend
        assert type(result).__name__ == "AsyncResult"
        assert result.get(timeout=60) == "succeeded"
    else:
        assert type(result).__name__ == "EagerResult" and result.get() == "succeeded"
    assert run.replay_hash == _fresh_reference(task).replay_hash and len(run.replay_hash) == 64


@pytest.mark.celery_worker
def test_a_replay_killed_mid_run_reruns_to_the_same_result(celery_worker, make_user, monkeypatch):
    user = make_user("ada", "author")
    # on a worker 10 real steps (about 4 s): long enough to be killed in the middle; eagerly 6 suffice
    n_steps = 10 if celery_worker.real else 6
    task = _florence_task(user, _maps(n_steps - 2))

    if celery_worker.real:
        from replay.jobs import run_replay

        queue = f"kill-test-{uuid.uuid4().hex[:8]}"
        worker = celery_worker.start_own_worker(queue, concurrency=1)
        monkeypatch.setattr(run_replay, "delay", lambda run_id: run_replay.apply_async((run_id,), queue=queue))
        run = start_replay(user, task)
        run = celery_worker.wait_replay(run, until=lambda r: r.status == "running" and r.steps_done >= 3)
        first_start = run.started_at
        (child,) = celery_worker.pool_children(worker)
        os.kill(child, signal.SIGKILL)
        run.refresh_from_db()
        assert run.status == "running" and run.steps_done < n_steps  # killed in the middle
        run = celery_worker.wait_replay(run, timeout=180)
        assert run.started_at > first_start  # the worker re-ran it from the start
    else:
        import replay.services.runs as services

        real_run = services.run_trajectory

        def dies_after_step_4(steps, ctx, on_step, **kwargs):
            def step(result):
                on_step(result)
                if result.index == 3:
                    raise KeyboardInterrupt("simulated: the process executing the replay is killed")
            return real_run(steps, ctx, on_step=step, **kwargs)

        monkeypatch.setattr(services, "run_trajectory", dies_after_step_4)
        with pytest.raises(KeyboardInterrupt):
            start_replay(user, task)
        run = ReplayRun.objects.filter(task=task).order_by("-id").first()
        # the state a SIGKILL leaves: RUNNING, four steps stored, the rest pending, a partial folder
        assert run.status == "running" and run.steps_done == 4
        assert ReplayStep.objects.filter(run=run, status="pending").count() == n_steps - 4
        monkeypatch.setattr(services, "run_trajectory", real_run)
        from replay.jobs import run_replay

        run_replay.delay(run.pk)
        run = celery_worker.wait_replay(run)

    assert run.status == "succeeded", run.error
    assert run.final_answer == {"damaged_pixels": 26766} and run.steps_done == n_steps
    assert ReplayStep.objects.filter(run=run).count() == n_steps
    assert not ReplayStep.objects.filter(run=run).exclude(status="succeeded").exists()
    assert run.replay_hash == _fresh_reference(task).replay_hash
