"""A queue per workload (docs/deployment.md, "Queues"): replay, judge, experiments, exports and imports
each on ``<STUDIO_QUEUE_PREFIX><workload>``, everything else on the default queue; a worker started
without ``-Q`` consumes them all; Redis's visibility timeout outlasts the longest job.

The expected table is written out here by hand from the brief of the change (the five workloads and
the Celery task that runs each, ``*/jobs.py``), not read back from ``CELERY_TASK_ROUTES``: a new task
of the project fails the first test until it is given its place.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from conftest import REALDATA, needs_shared

from annotation.services.imports import import_xbd_folder
from annotation.services.tasks import create_task
from replay.services.runs import start_replay

REPO = Path(__file__).resolve().parents[1]

#: task name → workload (None: the default queue), from the task modules' docstrings
WORKLOAD_OF_TASK = {
    "replay.tasks.run_replay": "replay",
    "evaluation.judge_batch": "judge",
    "experiments.run": "experiments",
    "annotation.tasks.export_release_job": "exports",
    "evaluation.run_import": "imports",
    "replay.tasks.resume_stuck": None,
    "evaluation.leaderboard_bootstrap": None,
    "notifications.send_webhook": None,
}
WORKLOADS = ["replay", "judge", "experiments", "exports", "imports"]
PROJECT_TASK_PREFIXES = ("replay.", "evaluation.", "experiments.", "annotation.", "releases.", "notifications.")


def _celery_view(env_extra: dict[str, str]) -> dict:
    """The Celery app's queues, routes and transport options as a fresh process with the
    environment plus ``env_extra`` loads them (settings are read once, at import)."""
    code = (
        "import json, django; django.setup()\n"
        "from studio.celery import app\n"
        "app.loader.import_default_modules()\n"
        "names = sorted(n for n in app.tasks if not n.startswith('celery.'))\n"
        "print(json.dumps({'queues': sorted(app.amqp.queues.consume_from),\n"
        "  'routes': {n: app.amqp.router.route({}, n, (1,), {})['queue'].name for n in names},\n"
        "  'visibility_timeout': app.conf.broker_transport_options.get('visibility_timeout')}))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("STUDIO_QUEUE_PREFIX", "CELERY_TASK_DEFAULT_QUEUE",
                                                           "STUDIO_BROKER_VISIBILITY_TIMEOUT_S", "CELERY_BROKER_URL")}
    env.update(DJANGO_SETTINGS_MODULE="studio.settings", **env_extra)
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_every_task_of_the_project_is_routed_to_its_workloads_queue_under_the_prefix():
    """With ``STUDIO_QUEUE_PREFIX=acme-`` and ``CELERY_TASK_DEFAULT_QUEUE=acme``, each project task
    goes to ``acme-<workload>`` or, without a workload, to ``acme`` (the table above)."""
    view = _celery_view({"STUDIO_QUEUE_PREFIX": "acme-", "CELERY_TASK_DEFAULT_QUEUE": "acme"})
    project = {n: q for n, q in view["routes"].items() if n.startswith(PROJECT_TASK_PREFIXES)}
    assert project == {n: (f"acme-{w}" if w else "acme") for n, w in WORKLOAD_OF_TASK.items()}


def test_a_worker_without_queue_options_consumes_the_default_queue_and_the_five_workload_queues():
    """The queues a plain ``celery -A studio worker`` consumes (no ``-Q``): the default queue
    (``celery``, Celery's own default name) and one per workload, here without a prefix."""
    view = _celery_view({})
    assert view["queues"] == sorted(["celery", *WORKLOADS])
    assert view["routes"]["experiments.run"] == "experiments"  # a plain worker now takes experiments too


def test_the_broker_visibility_timeout_is_a_day_by_default_and_set_by_the_environment():
    """24 h (86,400 s, the documented default: longer than an experiment of hours); the variable
    overrides it."""
    assert _celery_view({})["visibility_timeout"] == 86400.0
    assert _celery_view({"STUDIO_BROKER_VISIBILITY_TIMEOUT_S": "7200"})["visibility_timeout"] == 7200.0


def test_this_process_routes_with_its_own_prefix(settings):
    """The test process's own app (CI: ``STUDIO_QUEUE_PREFIX=studio-ci-<pid>-``; else none) routes
    every project task as the table says, under the configured prefix and default queue."""
    from studio.celery import app

    app.loader.import_default_modules()
    names = sorted(n for n in app.tasks if n.startswith(PROJECT_TASK_PREFIXES))
    assert names == sorted(WORKLOAD_OF_TASK)
    prefix, default = settings.STUDIO_QUEUE_PREFIX, settings.CELERY_TASK_DEFAULT_QUEUE
    routed = {n: app.amqp.router.route({}, n, (1,), {})["queue"].name for n in names}
    assert routed == {n: (prefix + w if w else default) for n, w in WORKLOAD_OF_TASK.items()}
    assert set(app.amqp.queues.consume_from) == {default, *(prefix + w for w in WORKLOADS)}


# ------------------------------------------------------------------ a worker of the replay queue only


@pytest.mark.celery_worker
def test_a_replay_started_by_the_service_runs_on_a_worker_of_the_replay_queue_only(celery_worker, make_user, settings):
    """With a broker: a worker started here with ``-Q <p>replay`` only, under a queue prefix ``<p>``
    of its own (no other worker consumes its queues: CI's worker consumes the run's prefix), runs the
    replay that ``start_replay`` sends once this process routes under ``<p>`` too; its log names the
    task's id. Without a broker the replay runs eagerly. Either way the count is 26,766 px (the
    Florence mask's major + destroyed pixels, tests/test_celery_worker.py's docstring)."""
    from replay.jobs import run_replay
    from studio.celery import app

    user = make_user("ada", "author")
    event = import_xbd_folder(needs_shared(REALDATA / "xbd-hurricane-florence")).event
    pre, post = "hurricane-florence_00000018_pre_original.png", "hurricane-florence_00000018_post_original.png"
    task = create_task(user, event, dimension="t1", content={
        "question": "How many pixels show partially damaged or destroyed buildings?",
        "trajectory": [
            {"call": "seg.building_damage", "args": {"pre_image_path": pre, "post_image_path": post}},
            {"call": "ras.count_pixels", "args": {"mask_path": "<mask_path> from trajectory[0].obs", "classes": [2, 3]}},
        ],
        "answer_spec": [{"name": "damaged_pixels", "eval_type": "scalar_count", "source": "<total> from trajectory[1].obs"}],
    })
    if not celery_worker.real:
        run = celery_worker.wait_replay(start_replay(user, task))
        assert run.status == "succeeded" and run.final_answer == {"damaged_pixels": 26766}
        return
    prefix = f"{settings.STUDIO_QUEUE_PREFIX}own-{uuid.uuid4().hex[:8]}-"
    worker = celery_worker.start_own_worker(f"{prefix}replay", queue_prefix=prefix)
    before = app.conf.task_routes
    # this process routes as a process started with STUDIO_QUEUE_PREFIX=<p> would (conf.update rebuilds the router)
    app.conf.update(task_routes={n: {"queue": prefix + r["queue"].removeprefix(settings.STUDIO_QUEUE_PREFIX)}
                                 for n, r in before.items()})
    try:
        assert app.amqp.router.route({}, run_replay.name, (1,), {})["queue"].name == f"{prefix}replay"
        run = celery_worker.wait_replay(start_replay(user, task))
    finally:
        app.conf.update(task_routes=before)
    assert run.status == "succeeded", run.error
    assert run.final_answer == {"damaged_pixels": 26766}
    result = celery_worker.dispatched[-1]
    assert result.get(timeout=60) == "succeeded"
    assert worker.poll() is None
    log = celery_worker.logs[-1].read_text(errors="replace")
    assert f"replay.tasks.run_replay[{result.id}] succeeded" in log
