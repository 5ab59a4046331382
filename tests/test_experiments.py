"""Experiments without a model server: configurations are versioned and checked by the judge's
egress rules, an experiment's questions are the gold set's × repeats, cancel/resume refuse the
states they must, the API lists and writes with its permission rows. The end-to-end runs against
the real model server are in ``test_experiments_llm.py``."""
from __future__ import annotations

import re

import pytest
from conftest import requires_shared
from django.core.exceptions import PermissionDenied
from support.florence import FLORENCE
from support.mcp import make_task

from experiments import services
from experiments.models import Experiment, ExperimentConfig
from experiments.services import ExperimentStateError
from kernel.errors import InvalidInput

URL = "http://127.0.0.1:9/v1"  # an allowed test host (tests/conftest.py); nothing is called here


def _config(user, **kw):
    return services.save_config(user, name=kw.pop("name", "smol"), base_url=kw.pop("base_url", URL),
                                model=kw.pop("model", "smollm2-135m"), **kw)


@pytest.mark.django_db
def test_saving_a_configuration_again_makes_its_next_version_and_keeps_the_first(maintainer):
    v1 = _config(maintainer, protocol="IF", max_tokens=64)
    v2 = _config(maintainer, temperature=0.0)
    assert (v1.version, v2.version) == (1, 2) and v1.pk != v2.pk
    v1.refresh_from_db()
    assert (v1.protocol, v1.max_tokens, v1.temperature) == ("IF", 64, 0.1)  # unchanged
    # the harness's defaults (dora/agent/runner.py AgentConfig, llm.py): recursion limit 50, 900 s, temperature 0.1
    assert (v2.max_steps, v2.question_timeout_s, v2.request_timeout_s, v2.protocol) == (50, 900.0, 1200.0, "AP")


@pytest.mark.django_db
@pytest.mark.parametrize("kw, field", [
    ({"base_url": "http://evil.example.org/v1"}, "base_url"),  # not an allowed judge host
    ({"api_key_env": "sk-live-1234567890"}, "api_key_env"),  # a key, not a variable name
    ({"api_key_env": "HOME"}, "api_key_env"),  # not a declared key variable
    ({"protocol": "XY"}, "protocol"),
    ({"budget_cost": -1}, "budget_cost"),
])
def test_a_configuration_is_refused_naming_the_field(maintainer, kw, field):
    with pytest.raises(InvalidInput) as exc:
        _config(maintainer, **kw)
    assert str(exc.value).startswith(f"{field}:")
    assert not ExperimentConfig.objects.exists()


@pytest.mark.django_db
def test_only_maintainers_spend_on_an_endpoint(make_user, maintainer):
    author = make_user("writer", "author")
    with pytest.raises(PermissionDenied):
        _config(author)
    cfg = _config(maintainer)
    with pytest.raises(PermissionDenied):
        services.start_experiment(author, cfg, question_ids=["x_task0"])


@pytest.mark.django_db
def test_a_pilot_needs_known_tasks_with_gold(maintainer):
    cfg = _config(maintainer)
    with pytest.raises(InvalidInput, match="release: give a release, or question_ids"):
        services.start_experiment(maintainer, cfg)
    with pytest.raises(InvalidInput, match="question_ids: no studio task nope_task0"):
        services.start_experiment(maintainer, cfg, question_ids=["nope_task0"])
    with pytest.raises(InvalidInput, match="release: no release '9.9'"):
        services.start_experiment(maintainer, cfg, release="9.9")


@pytest.mark.django_db
@requires_shared(FLORENCE)
def test_a_pilot_has_one_question_row_per_repeat_and_a_queued_one_cancels_at_once(settings,
                                                                                 django_capture_on_commit_callbacks):
    from replay.services.runs import start_replay

    user, task = make_task()
    assert start_replay(user, task).status == "succeeded"
    cfg = _config(user, protocol="IF")
    with django_capture_on_commit_callbacks() as hooks:  # not run: the experiment stays queued
        exp = services.start_experiment(user, cfg, question_ids=[task.question_id], repeats=3)
    assert len(hooks) == 1
    assert exp.total == 3 and exp.agent_name == "smollm2-135m (smol v1)"
    assert list(exp.questions.values_list("repeat", "question_id", "dimension", "status")) == [
        (r, "florence_mcp01_task0", "t1", "pending") for r in (1, 2, 3)]
    with pytest.raises(ExperimentStateError, match="is queued"):
        services.resume_experiment(user, exp)
    assert services.cancel_experiment(user, exp).status == "cancelled"
    with pytest.raises(ExperimentStateError, match="only a queued or running one is cancelled"):
        services.cancel_experiment(user, exp)


@pytest.mark.django_db
def test_the_api_saves_versions_and_lists_them_paginated(client, maintainer, make_user):
    client.force_login(maintainer)
    body = {"name": "smol", "base_url": URL, "model": "smollm2-135m", "protocol": "IF", "max_tokens": 32}
    assert client.post("/api/experiment-configs/", body, content_type="application/json").status_code == 201
    r = client.post("/api/experiment-configs/", body, content_type="application/json")
    assert r.status_code == 201 and r.json()["version"] == 2 and "api_key" not in r.json()
    page = client.get("/api/experiment-configs/?page_size=1").json()
    assert [c["version"] for c in page["results"]] == [2] and page["next_cursor"]
    bad = client.post("/api/experiment-configs/", dict(body, base_url="http://evil.example.org/v1"),
                      content_type="application/json")
    assert bad.status_code == 400 and bad.json()["field"] == "base_url"
    assert client.get("/api/experiments/").json()["results"] == []
    client.force_login(make_user("writer", "author"))
    assert client.post("/api/experiment-configs/", body, content_type="application/json").status_code == 403
    assert Experiment.objects.count() == 0


@pytest.mark.django_db
def test_the_pages_list_and_offer_start_only_to_who_may_run(client, maintainer, make_user):
    client.force_login(maintainer)
    page = client.get("/experiments/").content.decode()
    assert 'id="start-experiment"' in page and 'id="save-config"' in page
    client.force_login(make_user("writer", "author"))
    page = client.get("/experiments/").content.decode()
    assert 'id="experiments"' in page and 'id="start-experiment"' not in page


@pytest.mark.django_db
def test_a_configuration_names_its_perception_mode_by_default_the_benchmarks(client, maintainer):
    """How the seg.* tools answer the agent is part of a configuration: ``model`` unless it says
    otherwise (the benchmark's protocol, as ``mcp_serve`` serves), ``gt`` (oracle perception) only
    when chosen; anything else is refused naming the field, from the service, the API and the
    command line."""
    from django.core.management import call_command
    from django.core.management.base import CommandError

    assert _config(maintainer).perception_mode == "model"
    assert _config(maintainer, perception_mode="gt").perception_mode == "gt"
    with pytest.raises(InvalidInput, match="perception_mode"):
        _config(maintainer, perception_mode="oracle")
    client.force_login(maintainer)
    body = {"name": "api", "base_url": URL, "model": "m"}
    r = client.post("/api/experiment-configs/", body, content_type="application/json")
    assert r.status_code == 201 and r.json()["perception_mode"] == "model"
    r = client.post("/api/experiment-configs/", dict(body, perception_mode="classical"), content_type="application/json")
    assert r.json()["perception_mode"] == "classical"
    assert client.post("/api/experiment-configs/", dict(body, perception_mode="x"),
                       content_type="application/json").status_code == 400
    call_command("experiment", "--as-user", maintainer.username, "config", "--name", "cli", "--base-url", URL,
                 "--model", "m", "--perception", "gt")
    assert ExperimentConfig.objects.get(name="cli").perception_mode == "gt"
    with pytest.raises(CommandError):
        call_command("experiment", "--as-user", maintainer.username, "config", "--name", "cli", "--base-url", URL,
                     "--model", "m", "--perception", "oracle")
    page = client.get("/experiments/").content.decode()
    assert 'name="perception_mode"' in page and "oracle perception" in page


@pytest.mark.django_db
def test_the_list_page_pages_the_experiments_newest_first_in_constant_queries(client, maintainer, monkeypatch):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from frontend.views import experiments as views

    cfg = _config(maintainer)

    def add(n):  # rows as start_experiment leaves them (queued; nothing runs here)
        return [Experiment.objects.create(config=cfg, question_ids=["q"], agent_name=f"agent {i}", total=1,
                                          created_by=maintainer).pk for i in range(n)]

    client.force_login(maintainer)
    ids = add(1)

    def listed(query=""):
        with CaptureQueriesContext(connection) as q:
            html = client.get(f"/experiments/{query}").content.decode()
        return [int(i) for i in re.findall(r'<tr id="experiment-(\d+)"', html)], html, len(q)

    shown, _, n_one = listed()
    assert shown == ids
    ids += add(4)
    monkeypatch.setattr(views, "EXPERIMENT_PAGE_SIZE", 2)
    shown, html, n_many = listed()
    assert shown == sorted(ids, reverse=True)[:2] and n_many == n_one  # newest first; no query per row
    nxt = re.search(r'href="\?([^"]+)" id="experiments-next"', html).group(1).replace("&amp;", "&")
    shown2, html2, _ = listed("?" + nxt)
    assert shown2 == sorted(ids, reverse=True)[2:4] and 'id="experiments-prev"' in html2
    assert client.get("/experiments/?cursor=garbage").status_code == 404


@pytest.mark.django_db
@requires_shared(FLORENCE)
def test_the_experiment_page_and_api_show_questions_accounting_and_the_buttons(client,
                                                                             django_capture_on_commit_callbacks):
    from replay.services.runs import start_replay

    user, task = make_task()
    assert start_replay(user, task).status == "succeeded"
    with django_capture_on_commit_callbacks():  # stays queued: nothing is called
        exp = services.start_experiment(user, _config(user, protocol="IF"), question_ids=[task.question_id], repeats=2)
    client.force_login(user)
    body = client.get(f"/api/experiments/{exp.pk}/").json()
    assert body["status"] == "queued" and [q["repeat"] for q in body["questions"]] == [1, 2]
    assert body["accounting"]["by_task"][0] == {
        "question_id": "florence_mcp01_task0", "dimension": "t1", "finished": 0, "repeats": 2, "mean_task_score": None,
        "solved": None, "prompt_tokens": 0, "completion_tokens": 0, "cost": 0.0, "seconds": 0.0, "model_calls": 0,
        "cached_calls": 0}
    page = client.get(f"/experiments/{exp.pk}/").content.decode()
    assert 'id="exp-cancel"' in page and 'id="exp-resume"' not in page and 'data-live="1"' in page
    assert client.post(f"/api/experiments/{exp.pk}/cancel/").json()["status"] == "cancelled"
    page = client.get(f"/experiments/{exp.pk}/").content.decode()
    assert 'id="exp-resume"' in page and 'id="exp-cancel"' not in page
    q = exp.questions.first()
    detail = client.get(f"/api/experiment-questions/{q.pk}/").json()
    assert detail["trajectory"] == [] and detail["record"] is None


@pytest.mark.django_db
@requires_shared(FLORENCE)
def test_resume_goes_on_with_a_new_version_of_the_same_configuration_only(django_capture_on_commit_callbacks):
    from replay.services.runs import start_replay

    user, task = make_task()
    assert start_replay(user, task).status == "succeeded"
    v1 = _config(user, budget_tokens=100)
    with django_capture_on_commit_callbacks():
        exp = services.start_experiment(user, v1, question_ids=[task.question_id])
    services.cancel_experiment(user, exp)
    other = _config(user, name="other")
    with pytest.raises(InvalidInput, match="config: other v1 is not a version of 'smol'"):
        services.resume_experiment(user, exp, other)
    v2 = _config(user, budget_tokens=10_000)  # a raised budget: version 2 of "smol"
    with django_capture_on_commit_callbacks() as hooks:  # queued again, not run here
        exp = services.resume_experiment(user, exp, v2)
    assert len(hooks) == 1 and exp.status == "queued" and exp.config_id == v2.pk
