"""Every list endpoint of the API is cursor-paginated: a client that follows
``next_cursor`` from the first page sees every row exactly once, in the list's documented order,
and each page costs the same number of SQL queries however deep it is.

The rows are made directly (``bulk_create``: the endpoints read rows, how they were written is
beside the point here). Each list holds ``N = 17`` rows and is read with ``?page_size=7``: pages of
7, 7 and 3 rows, so there are three pages and the last one is short — worked out by hand.

Queries per page, counted by hand for a client logged in with a session: 2 for the request's
authentication (the session row, then the user), then the endpoint's own — 1 for the page (the
paginator reads ``page_size + 1`` rows in one query to know whether there is a next page), 1 more
for the parent object of a nested list (the task, the layer), 1 more for the prefetched replies of
a page of comment threads.
"""
from __future__ import annotations

import pytest

from annotation.models import AuditEvent, Event, Layer, LayerAuditEvent, Task, TaskComment, TaskRevision, TaskVariant
from evaluation.models import Agent, AgentRun, JudgeConfig, JudgeJob
from releases.models import Release

N = 17
PAGE = 7
AUTH_QUERIES = 2  # django_session, then auth_user


@pytest.fixture
def event(db):
    return Event.objects.create(slug="ev-00", name="event 0")


@pytest.fixture
def task(event):
    return Task.objects.create(event=event, sample_id="s0", question_id="s0_task0", dimension="t1")


def _events(event, task):
    Event.objects.bulk_create(Event(slug=f"ev-{i:02d}", name=f"event {i}") for i in range(1, N))
    return "/api/events/", [e.slug for e in Event.objects.order_by("slug")], "slug", 1


def _tasks(event, task):
    Task.objects.bulk_create(Task(event=event, sample_id=f"s{i}", question_id=f"s{i}_task0", dimension="t1")
                             for i in range(1, N))
    return "/api/tasks/", list(Task.objects.order_by("-id").values_list("id", flat=True)), "id", 1


def _releases(event, task):
    Release.objects.bulk_create(Release(version=f"1.0.{i}") for i in range(N))
    return "/api/releases/", list(Release.objects.order_by("-id").values_list("version", flat=True)), "version", 1


def _runs(event, task):
    agent = Agent.objects.create(name="agent")
    AgentRun.objects.bulk_create(AgentRun(agent=agent, name=f"run {i}") for i in range(N))
    return "/api/runs/", list(AgentRun.objects.order_by("-id").values_list("id", flat=True)), "id", 1


def _judge_configs(event, task):
    JudgeConfig.objects.bulk_create(JudgeConfig(name=f"judge-{i:02d}", base_url="http://127.0.0.1:9", model="m")
                                    for i in range(N))
    return "/api/judge/configs/", [f"judge-{i:02d}" for i in range(N)], "name", 1


def _judge_jobs(event, task):
    config = JudgeConfig.objects.create(name="judge", base_url="http://127.0.0.1:9", model="m")
    JudgeJob.objects.bulk_create(JudgeJob(config=config) for _ in range(N))
    return "/api/judge/jobs/", list(JudgeJob.objects.order_by("-id").values_list("id", flat=True)), "id", 1


def _audit(event, task):
    AuditEvent.objects.bulk_create(AuditEvent(task=task, action="submit", reason=f"r{i}") for i in range(N))
    reasons = list(AuditEvent.objects.filter(task=task).order_by("id").values_list("reason", flat=True))
    return f"/api/tasks/{task.pk}/audit/", reasons, "reason", 2


def _revisions(event, task):
    TaskRevision.objects.bulk_create(TaskRevision(task=task, number=i, question=f"q{i}") for i in range(1, N + 1))
    return f"/api/tasks/{task.pk}/revisions/", list(range(N, 0, -1)), "number", 2


def _comments(event, task):
    roots = TaskComment.objects.bulk_create(TaskComment(task=task, body=f"c{i}") for i in range(N))
    TaskComment.objects.create(task=task, body="a reply", parent=roots[3])  # one reply: not a thread
    ids = [c.pk for c in sorted(roots, key=lambda c: c.pk)]
    return f"/api/tasks/{task.pk}/comments/", ids, "id", 3


def _layer_audit(event, task):
    layer = Layer.objects.create(event=event, name="roads", kind="vector", file_name="roads.geojson", path="x")
    LayerAuditEvent.objects.bulk_create(LayerAuditEvent(layer=layer, reason=f"r{i}") for i in range(N))
    ids = list(LayerAuditEvent.objects.filter(layer=layer).order_by("-id").values_list("reason", flat=True))
    return f"/api/layers/{layer.pk}/georeferencing/", ids, "reason", 2


def _variants(event, task):
    base = TaskRevision.objects.create(task=task, number=1, question="q")
    made = Task.objects.bulk_create(Task(event=event, sample_id=f"s0_{i}", question_id=f"s0_ext{i}s0_task0",
                                         dimension="t1") for i in range(N))
    TaskVariant.objects.bulk_create(TaskVariant(task=t, base_task=task, base_revision=base, kind="extraneous")
                                    for t in made)
    ids = list(TaskVariant.objects.filter(base_task=task).order_by("id").values_list("task_id", flat=True))
    return f"/api/tasks/{task.pk}/variants/", ids, "id", 2


LISTS = {"events": _events, "tasks": _tasks, "releases": _releases, "runs": _runs, "judge-configs": _judge_configs,
         "judge-jobs": _judge_jobs, "task-audit": _audit, "task-revisions": _revisions, "task-comments": _comments,
         "layer-audit": _layer_audit, "task-variants": _variants}


@pytest.mark.django_db
@pytest.mark.parametrize("name", list(LISTS))
def test_a_client_following_next_cursor_reads_every_row_once_in_order(name, event, task, maintainer, client,
                                                                      django_assert_num_queries):
    url, expected, field, own_queries = LISTS[name](event, task)
    assert len(expected) == N
    client.force_login(maintainer)
    seen, sizes, cursor = [], [], None
    for _ in range(N):  # more tries than pages: a list that never ends fails below
        params = {"page_size": PAGE} | ({"cursor": cursor} if cursor else {})
        with django_assert_num_queries(AUTH_QUERIES + own_queries):
            r = client.get(url, params)
        assert r.status_code == 200, r.content
        body = r.json()
        assert set(body) == {"results", "next_cursor", "prev_cursor", "page_size", "next", "previous"}
        assert body["page_size"] == PAGE and (body["prev_cursor"] is None) == (cursor is None)
        seen += [row[field] for row in body["results"]]
        sizes.append(len(body["results"]))
        cursor = body["next_cursor"]
        assert (cursor is None) == (body["next"] is None)
        if cursor is None:
            break
    assert sizes == [7, 7, 3]
    assert seen == expected


@pytest.mark.django_db
def test_tasks_list_pages_past_the_old_cap_of_200(event, task, maintainer, client):
    """``/api/tasks/`` stopped at 200 rows; 450 tasks read 200 at a time are three
    pages of 200, 200 and 50 — every task, none twice."""
    Task.objects.bulk_create(Task(event=event, sample_id=f"s{i}", question_id=f"s{i}_task0", dimension="t1")
                             for i in range(1, 450))
    client.force_login(maintainer)
    ids, sizes, cursor = [], [], None
    while True:
        body = client.get("/api/tasks/", {"page_size": 200} | ({"cursor": cursor} if cursor else {})).json()
        ids += [t["id"] for t in body["results"]]
        sizes.append(len(body["results"]))
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert sizes == [200, 200, 50]
    assert sorted(ids, reverse=True) == ids and len(set(ids)) == 450 == Task.objects.count()


@pytest.mark.django_db
def test_filters_survive_in_the_next_link_and_the_default_page_is_50(event, task, maintainer, client):
    """``next`` keeps the request's filters (``?event=``); without ``page_size`` a page has
    ``studio.pagination.DEFAULT_PAGE_SIZE`` = 50 rows."""
    other = Event.objects.create(slug="other", name="other")
    Task.objects.bulk_create(Task(event=event, sample_id=f"s{i}", question_id=f"s{i}_task0", dimension="t1")
                             for i in range(1, 60))
    Task.objects.bulk_create(Task(event=other, sample_id=f"o{i}", question_id=f"o{i}_task0", dimension="t1")
                             for i in range(5))
    client.force_login(maintainer)
    first = client.get("/api/tasks/", {"event": event.slug}).json()
    assert first["page_size"] == 50 and len(first["results"]) == 50
    assert "event=ev-00" in first["next"] and "cursor=" in first["next"]
    second = client.get(first["next"]).json()
    assert len(second["results"]) == 10  # 60 tasks of ev-00: 50 + 10, the 5 of "other" never
    assert {t["event"] for t in first["results"] + second["results"]} == {"ev-00"}


@pytest.mark.django_db
@pytest.mark.parametrize("params", [{"cursor": "not-a-cursor"}, {"page_size": 0}, {"page_size": 201},
                                    {"page_size": "ten"}])
def test_a_bad_cursor_or_page_size_is_a_400_naming_the_parameter(params, maintainer, client):
    client.force_login(maintainer)
    r = client.get("/api/runs/", params)
    assert r.status_code == 400
    body = r.json()
    assert body["code"] == "invalid" and body["field"] in params


def test_the_schema_documents_the_cursor_parameters_and_the_page_body_of_every_list(maintainer, client, db):
    client.force_login(maintainer)
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    lists = ["/api/events/", "/api/tasks/", "/api/releases/", "/api/runs/", "/api/judge/configs/",
             "/api/judge/jobs/", "/api/tasks/{id}/audit/", "/api/tasks/{id}/revisions/",
             "/api/tasks/{id}/comments/", "/api/layers/{id}/georeferencing/", "/api/tasks/{id}/variants/"]
    for path in lists:
        op = schema["paths"][path]["get"]
        assert {"cursor", "page_size"} <= {p["name"] for p in op.get("parameters", [])}, path
        body = op["responses"]["200"]["content"]["application/json"]["schema"]
        ref = body["$ref"].rsplit("/", 1)[-1]
        props = schema["components"]["schemas"][ref]["properties"]
        assert {"results", "next_cursor", "prev_cursor", "page_size"} <= set(props), path
