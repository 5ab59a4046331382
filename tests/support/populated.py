"""A studio database with one of everything the API and the pages show (:func:`populate`), and the
URLs to visit in it: every URL pattern with the ids of existing objects (:func:`all_urls`) and the
pages that show user text (:func:`pages`). The API fuzzer, the login/CSRF, escaping and judge-key
tests share them."""
from __future__ import annotations

import base64
import json
import re
import shutil

import pytest
from conftest import REALDATA, SCORING_EXAMPLES, needs_shared
from django.db import models
from django.test import override_settings
from django.urls import URLPattern, URLResolver, get_resolver

from support.db import module_transaction

#: The demo's T1 task over the hurricane-florence tile (fixtures/demo_tasks.json), layers by role.
QUESTION = "How many buildings were totally destroyed in this post-hurricane scene?"


def populate(user, *, question: str = QUESTION, text: str = "note") -> dict:
    """Fill the test database with one of everything the API and the pages show; returns the ids.

    ``question`` is the task's question; ``text`` goes into every other free-text field the
    studio keeps (answer field name, comment, verdict reasoning, release changelog, layer name,
    event name, agent name, judge configuration name) — the escaping tests pass a hostile string.
    Returns ``{task (released), draft_task, event, layer, replay, run, record, comment, verdict, item, release, config,
    job, export (an export job id of the release)}``.
    """
    from annotation.models import Event, Layer, Task
    from annotation.services import imports, review
    from annotation.services.tasks import build_input_data, create_task
    from evaluation.models import Agent, JudgeConfig, JudgeJob
    from evaluation.services.queue import enqueue_run
    from evaluation.services.runs import import_run_dir
    from evaluation.services.verdicts import submit_human_verdict
    from releases.services.lifecycle import create_release
    from releases.services.release_export import start_export
    from replay.services.runs import start_replay
    from studio.accounts import upsert_user

    imports.import_xbd_folder(needs_shared(REALDATA / "xbd-hurricane-florence"))
    event = Event.objects.get(slug="hurricane-florence")
    pre = event.layers.get(kind="raster", phase="pre")
    post = event.layers.get(kind="raster", phase="post")
    answer_name = "destroyed_count" if text == "note" else text
    content = {
        "question": question, "task_category": "perception_and_assessment", "task_category_code": "T1",
        "disaster_type": event.disaster_type,
        "input_data": build_input_data(event, {"pre_image": pre.pk, "post_image": post.pk}),
        "trajectory": [
            {"call": "seg.building_damage", "args": {"pre_image_path": pre.file_name, "post_image_path": post.file_name}},
            {"call": "ras.count_pixels", "args": {"mask_path": "<mask_path> from trajectory[0].obs", "classes": [2, 3]}},
        ],
        "answer_spec": [{"name": answer_name, "eval_type": "scalar_count", "source": "<total> from trajectory[1].obs",
                         "answer_format": "pixels of class 2 or 3"}],
    }
    task = create_task(user, event, dimension="t1", content=content, sample_id="hurricane-florence_sec01")
    replay = start_replay(user, task)
    replay.refresh_from_db()
    assert replay.status == "succeeded", replay.error
    comment = review.add_comment(user, task, text, answer_field=answer_name)
    review.submit(user, task)
    reviewer = upsert_user("rev-populate", "pw-test-123", ["reviewer"])  # nobody reviews their own task
    review.start_review(reviewer, task)
    review.approve(reviewer, task, acknowledge_open_comments=True)  # the comment stays open on purpose
    task.refresh_from_db()
    release = create_release(user, "1.0.0", text, tasks=[task])
    export = start_export(user, release)  # runs in-process (no broker)
    run = import_run_dir(user, needs_shared(SCORING_EXAMPLES / "runs" / "agent_a"), "agent_a",
                         tasks_dir=needs_shared(SCORING_EXAMPLES / "tasks"))
    record = run.records.order_by("id").first()
    verdict = submit_human_verdict(user, record, errors={"E4": True}, grade=0.6, reasons={"E4": text}, reasoning=text)
    # a second person's disagreeing verdict puts the record on the adjudication queue (one verdict
    # per person per record: a second one by the same person would be a revision)
    second = upsert_user("scorer-populate", "pw-test-123", ["scorer"])
    submit_human_verdict(second, record, errors={}, grade=1.0, reasoning=text)
    enqueue_run(user, run, n=1)
    from evaluation.models import ScoringItem

    item = ScoringItem.objects.order_by("id").first()
    config = JudgeConfig.objects.create(name=f"judge {text}"[:100], base_url="http://127.0.0.1:9/v1", model="m")
    job = JudgeJob.objects.create(config=config, record_ids=[record.pk], total=1)
    from evaluation.models import RunImportJob

    run_import = RunImportJob.objects.create(archive="/nonexistent/run.zip", filename="run.zip", agent_name="a",
                                             status=RunImportJob.Status.FAILED, error="test")
    if text != "note":  # names the escaping tests show
        Layer.objects.filter(pk=pre.pk).update(name=text)
        Event.objects.filter(pk=event.pk).update(name=text)
        Agent.objects.filter(pk=run.agent_id).update(name=text)
    task = Task.objects.get(pk=task.pk)
    draft = create_task(user, event, dimension="t1", content={**content, "question": question + " (draft)"},
                        sample_id="hurricane-florence_sec02")
    start_replay(user, draft)
    from django.utils import timezone

    from notifications.models import Notification, Webhook, WebhookDelivery

    hook = Webhook.objects.create(created_by=user, url="https://hooks.example.org/studio", secret="whsec_" + "QUJD" * 8,
                                  event_types=["release.published", "task.returned"])
    delivery = WebhookDelivery.objects.create(webhook=hook, message_id="msg_populate", event_type="release.published",
                                              body=json.dumps({"data": {"note": text}}), next_attempt_at=timezone.now())
    notification = Notification.objects.create(user=user, event_type="task.returned", event_id="evt_populate", text=f"returned: {text}",
                                url=f"/tasks/{task.pk}/", data={"reason": text})
    from experiments.models import Experiment, ExperimentConfig, ExperimentQuestion

    exp_config = ExperimentConfig.objects.create(name=f"agent {text}"[:100], base_url="http://127.0.0.1:9/v1",
                                                 model="smollm2-135m", protocol="IF", created_by=user)
    experiment = Experiment.objects.create(config=exp_config, question_ids=[draft.question_id], agent_name=text[:200],
                                           status=Experiment.Status.DONE, total=1, done=1, created_by=user)
    # done without errors: a generated cancel or resume is refused (409), nothing runs
    experiment_question = ExperimentQuestion.objects.create(
        experiment=experiment, dimension="t1", question_id=draft.question_id, task=draft,
        status=ExperimentQuestion.Status.DONE, trajectory=[{"call": "vis_legend()", "args": {}, "obs": {"note": text}}])
    return {"task": task, "draft_task": draft, "event": event, "layer": pre, "replay": replay, "run": run, "record": record,
            "comment": comment, "verdict": verdict, "item": item, "release": release, "config": config, "job": job,
            "export": export["id"], "run_import": run_import, "webhook": hook, "delivery": delivery,
            "notification": notification, "experiment": experiment, "experiment_question": experiment_question}


@pytest.fixture(scope="module")
def populated_once(django_db_setup, django_db_blocker, tmp_path_factory):
    """:func:`populate` run once for a test module by the maintainer ``mia`` (the conftest's
    ``maintainer``), in a transaction rolled back at the module's end
    (:func:`support.db.module_transaction`), its files in a data root of their own. Yields (ids,
    data root). Not for modules with transactional tests."""
    from studio.accounts import upsert_user

    needs_shared(REALDATA / "xbd-hurricane-florence"), needs_shared(SCORING_EXAMPLES / "runs" / "agent_a")
    root = tmp_path_factory.mktemp("populated") / "data"
    root.mkdir()
    with module_transaction(django_db_blocker):
        with django_db_blocker.unblock(), \
                override_settings(STUDIO_DATA_ROOT=root, STUDIO_ARTIFACT_ROOT=root / "artifacts"):
            user = upsert_user("mia", "pw-test-123", ["maintainer", "author", "reviewer", "scorer"])
            ids = populate(user)
        yield ids, root


@pytest.fixture
def populated(db, populated_once, settings) -> dict:
    """What ``populate(maintainer)`` returns, from the module's one run (:func:`populated_once`):
    its files copied into this test's data root, its rows read afresh (each test's own writes roll
    back)."""
    ids, root = populated_once
    shutil.copytree(root, settings.STUDIO_DATA_ROOT, dirs_exist_ok=True)
    return {k: type(v).objects.get(pk=v.pk) if isinstance(v, models.Model) else v for k, v in ids.items()}


def basic_auth_header(username: str, password: str) -> dict:
    """The HTTP Basic ``Authorization`` header of ``username:password``."""
    return {"Authorization": "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()}


#: The login page: the one URL an anonymous client may open.
LOGIN = "/accounts/login/"


def url_patterns(patterns=None, prefix: str = ""):
    """(route text, pattern) of every URL pattern, includes flattened; the admin left out (its own
    login, tested below)."""
    for p in get_resolver().url_patterns if patterns is None else patterns:
        route = prefix + str(p.pattern)
        if route.startswith("admin/"):
            continue
        if isinstance(p, URLResolver):
            yield from url_patterns(p.url_patterns, route)
        else:
            assert isinstance(p, URLPattern)
            yield route, p


def sample_url(route: str, ids: dict) -> str:
    """The route with each parameter replaced by the id of an existing object (or a sample value).

    Raises ``KeyError`` for a parameter this table does not know: a new URL needs a sample here.
    """
    values = {
        "pk": None, "layer_id": ids["layer"].pk, "z": 0, "x": 0, "y": 0, "name": "mask", "slug": ids["event"].slug,
        "version": ids["release"].version, "job": ids["export"], "number": 1, "action": "ping",
    }
    # <pk> by the path's first segment (the object the page or endpoint is about)
    pks = {"tasks": ids["task"].pk, "replays": ids["replay"].pk, "runs/imports": ids["run_import"].pk,
           "run-imports": ids["run_import"].pk, "runs": ids["run"].pk, "records": ids["record"].pk,
           "comments": ids["comment"].pk, "scoring": ids["item"].pk, "judge/jobs": ids["job"].pk,
           "judge/configs": ids["config"].pk, "adjudication": ids["record"].pk, "layers": ids["layer"].pk,
           "notifications": ids["notification"].pk, "webhooks": ids["webhook"].pk,
           "webhook-deliveries": ids["delivery"].pk, "experiments": ids["experiment"].pk,
           "experiment-questions": ids["experiment_question"].pk}
    path = route.replace("^", "").replace("$", "")
    bare = path[4:] if path.startswith("api/") else path
    values["pk"] = next(v for k, v in pks.items() if bare.startswith(k)) if "<int:pk>" in path else None

    def fill(m):
        name = m.group("name")
        return str(values[name])

    path = re.sub(r"\(\?P<(?P<name>\w+)>[^()]*\)(?:\{\d+\})?", fill, path)  # re_path groups first
    path = re.sub(r"<(?:\w+:)?(?P<name>\w+)>", fill, path)
    return "/" + path


def all_urls(ids) -> list[tuple[str, str]]:
    """(name, sample URL) of every pattern but the login page."""
    out = [(p.name, sample_url(route, ids)) for route, p in url_patterns()]
    return [(n, u) for n, u in out if u != LOGIN]


def pages(ids) -> dict[str, str]:
    """Every page that shows user text, by what it is."""
    t, d = ids["task"].pk, ids["draft_task"].pk
    return {
        "event list": "/", "event map": f"/events/{ids['event'].slug}/",
        "task list": "/tasks/", "task detail": f"/tasks/{t}/", "task edit": f"/tasks/{d}/edit/",
        "task edit (released)": f"/tasks/{t}/edit/", "task history": f"/tasks/{t}/history/",
        "review queue": "/review/", "replay diff": f"/tasks/{t}/replay-diff/",
        "runs": "/runs/", "run": f"/runs/{ids['run'].pk}/", "record": f"/records/{ids['record'].pk}/",
        "scoring home": "/scoring/", "scoring item": f"/scoring/items/{ids['item'].pk}/",
        "adjudication queue": "/adjudication/", "adjudication": f"/adjudication/records/{ids['record'].pk}/",
        "releases": "/releases/", "release": f"/releases/{ids['release'].version}/",
        "release diff": f"/releases/diff/?a={ids['release'].version}&b={ids['release'].version}",
        "leaderboard": "/leaderboard/", "agreement": "/agreement/",
        "judge configs": "/judge/configs/", "judge jobs": "/judge/jobs/", "judge job": f"/judge/jobs/{ids['job'].pk}/",
        "experiments": "/experiments/", "experiment": f"/experiments/{ids['experiment'].pk}/",
    }
