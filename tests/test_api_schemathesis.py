"""Property-based tests of the REST API against its own OpenAPI schema: schemathesis
(4.x) generates requests for every operation of ``/api/schema/`` (drf-spectacular) and sends them
in-process to the Django WSGI application with a logged-in maintainer (session cookie + CSRF
token); no answer may be a server error (5xx), and no exception may leave a view.

The database holds real data (:func:`populate`): the xBD hurricane-florence tile (imported), a
released and a draft task over it (replayed), a release with an export, agent_a's run of the
scoring examples (12 records), a comment, human verdicts, a scoring item, a judge configuration
and job. Each operation gets ``MAX_EXAMPLES`` cases (30; ``STUDIO_SCHEMATHESIS_EXAMPLES`` to
change, ``STUDIO_SCHEMATHESIS_RANDOM=1`` for a fresh seed instead of the fixed one), drawn from:
valid requests with generated path parameters (mostly unknown ids: 404), and valid and
schema-violating requests on the ids of existing objects, so that the handlers behind them run.
"""
from __future__ import annotations

import os
import traceback
from collections import Counter

import pytest
from django.core.signals import got_request_exception, request_finished, request_started
from django.db import close_old_connections
from django.test import Client
from support.populated import basic_auth_header, populate

MAX_EXAMPLES = int(os.environ.get("STUDIO_SCHEMATHESIS_EXAMPLES", "30"))


@pytest.fixture
def wsgi_app():
    """The studio's WSGI application, with the connection-closing signal handlers detached for the
    test (as Django's test client does): the test's transaction must survive each request."""
    from django.core.wsgi import get_wsgi_application

    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield get_wsgi_application()
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


@pytest.fixture
def server_errors():
    """Tracebacks of every exception a view let escape during the test."""
    seen: list[str] = []

    def on_exception(sender, request=None, **kwargs):
        seen.append(f"{getattr(request, 'method', '?')} {getattr(request, 'get_full_path', lambda: '?')()}\n"
                    + traceback.format_exc())

    got_request_exception.connect(on_exception)
    yield seen
    got_request_exception.disconnect(on_exception)


def session_auth(user) -> tuple[dict, dict]:
    """(cookies, headers) of a logged-in session with a CSRF token (cookie and header agree)."""
    from django.middleware.csrf import _get_new_csrf_string

    client = Client()
    client.force_login(user)
    token = _get_new_csrf_string()
    return {"sessionid": client.cookies["sessionid"].value, "csrftoken": token}, {"X-CSRFToken": token}


@pytest.mark.django_db
def test_api_schema_has_no_server_errors(maintainer, wsgi_app, server_errors, settings):
    """Every operation of the OpenAPI schema, with valid (positive) and schema-violating (negative)
    generated requests, on generated and on existing ids: never a 5xx, never an exception out of a
    view, and a GET is never refused to a maintainer (every role)."""
    import schemathesis
    from hypothesis import HealthCheck, given
    from hypothesis import settings as hsettings
    from hypothesis import strategies as st
    from schemathesis import GenerationMode
    from schemathesis.checks import not_a_server_error

    settings.DEBUG = False
    ids = populate(maintainer)
    cookies, headers = session_auth(maintainer)
    schema = schemathesis.openapi.from_wsgi("/api/schema/", wsgi_app,
                                             headers=basic_auth_header(maintainer.username, "pw-test-123"))
    # the session is ours: no generated sessionid cookie / Authorization header replaces it
    schema.config.generation.update(with_security_parameters=False)
    real_pk = {  # the id of an existing object behind each path's {id}, by path prefix
        "/api/tasks/": ids["draft_task"].pk, "/api/layers/": ids["layer"].pk, "/api/replays/": ids["replay"].pk,
        "/api/runs/": ids["run"].pk, "/api/records/": ids["record"].pk, "/api/comments/": ids["comment"].pk,
        "/api/judge/jobs/": ids["job"].pk, "/api/scoring/items/": ids["item"].pk,
        "/api/run-imports/": ids["run_import"].pk, "/api/webhooks/": ids["webhook"].pk,
        "/api/webhook-deliveries/": ids["delivery"].pk, "/api/experiments/": ids["experiment"].pk,
        "/api/experiment-questions/": ids["experiment_question"].pk,
    }
    real = {"slug": ids["event"].slug, "version": ids["release"].version, "number": 1, "job": ids["export"]}
    real_query = {"/api/releases/diff/": {"a": "1.0.0", "b": "1.0.0"},
                  "/api/leaderboard/compare/": {"a": ids["run"].pk, "b": ids["run"].pk}}
    # deletions last: a DELETE on a real id (a webhook) must not leave the reads after it only 404s
    operations = sorted((r.ok() for r in schema.get_all_operations()), key=lambda o: o.method.upper() == "DELETE")
    assert len(operations) >= 45, [o.label for o in operations]  # 49 operations when this was written
    failures: list[str] = []
    statuses: dict[str, Counter] = {}
    for op in operations:
        names = [p.name for p in op.path_parameters]
        fixed = {n: next((v for prefix, v in real_pk.items() if op.path.startswith(prefix)), 1) if n == "id"
                 else real[n] for n in names}
        # generated path ids are nearly always unknown (404): the schema-violating cases go to real ids
        strategies = [op.as_strategy(GenerationMode.POSITIVE),
                      op.as_strategy(GenerationMode.NEGATIVE, path_parameters=fixed or None)]
        if names or op.path in real_query:
            strategies.append(op.as_strategy(GenerationMode.POSITIVE, path_parameters=fixed or None,
                                             query=real_query.get(op.path)))
        seen = statuses.setdefault(op.label, Counter())

        @given(case=st.one_of(strategies))
        @hsettings(max_examples=MAX_EXAMPLES, deadline=None, database=None,
                   derandomize=not os.environ.get("STUDIO_SCHEMATHESIS_RANDOM"),
                   suppress_health_check=list(HealthCheck))
        def run(case):
            response = case.call(headers=headers, cookies=cookies)
            seen[response.status_code] += 1  # noqa: B023 (called within this iteration)
            try:
                # a maintainer holds every role: reading is never refused
                assert response.status_code not in (401, 403) or op.method.upper() != "GET", (  # noqa: B023 (called within this iteration)
                    response.status_code, response.text[:300])
                case.validate_response(response, checks=[not_a_server_error])
            except (Exception, BaseExceptionGroup) as exc:  # noqa: BLE001 — reported together below
                failures.append(f"{op.label}: {response.status_code} {exc!r}"[:500])  # noqa: B023 (called within this iteration)
                raise

        try:
            run()
        except (Exception, BaseExceptionGroup):  # noqa: BLE001 — already in failures
            pass
    assert not failures and not server_errors, "\n".join(failures[:10] + server_errors[:5])
    # every read reached its handler and answered at least once with data (the ids exist)
    unanswered = {label: dict(c) for label, c in statuses.items()
                  if label.startswith("GET ") and not any(200 <= code < 300 for code in c)}
    assert not unanswered, unanswered
    total = sum(statuses.values(), Counter())
    assert total[400] > 50 and total[404] > 50, total  # bad input and unknown ids were tried too


# ── regressions of what schemathesis found ─────────────────────────────────────────────────────

HUGE = 10**30  # beyond any integer column: SQLite raised OverflowError (a 500) before the bounds


@pytest.mark.django_db
def test_out_of_range_integers_are_a_400_naming_the_field(client, maintainer):
    """Integer inputs are bounded to what their column holds (studio/api_fields.py); before, each of
    these reached the database and answered 500 (schemathesis found the first three: task_ids of
    POST /api/releases/ and PATCH /api/releases/{version}/, base_version of PUT .../draft/)."""
    ids = populate(maintainer)
    client.force_login(maintainer)
    task, draft = ids["task"], ids["draft_task"]
    cases = [
        ("post", "/api/releases/", {"version": "2.0.0", "changelog": "", "task_ids": [HUGE]}, "task_ids"),
        ("patch", "/api/releases/1.0.0/", {"task_ids": [HUGE]}, "task_ids"),
        ("put", f"/api/tasks/{draft.pk}/draft/", {"base_version": HUGE, "content": {}}, "base_version"),
        ("post", f"/api/tasks/{draft.pk}/revisions/1/restore/", {"expected_version": HUGE}, "expected_version"),
        ("post", f"/api/tasks/{task.pk}/comments/", {"body": "x", "step_index": HUGE}, "step_index"),
        ("post", f"/api/tasks/{task.pk}/comments/", {"body": "x", "parent": HUGE}, "parent"),
        ("post", "/api/judge/jobs/", {"config": ids["config"].name, "run": HUGE}, "run"),
    ]
    for method, url, body, field in cases:
        r = getattr(client, method)(url, body, content_type="application/json")
        assert r.status_code == 400, (url, r.status_code, r.content[:300])
        assert field in r.json(), (url, r.json())
    # the content of a task: a layer id in input_layers and the expected version
    r = client.put(f"/api/tasks/{draft.pk}/", {"question": "q", "trajectory": [], "answer_spec": [],
                                                 "input_layers": {"pre_image": HUGE}, "expected_version": HUGE},
                   content_type="application/json")
    assert r.status_code == 400 and {"input_layers", "expected_version"} <= set(r.json()), r.json()
    # ids in the path beyond the column are simply not found
    for url in (f"/api/tasks/{HUGE}/", f"/api/runs/{HUGE}/", f"/api/tasks/{task.pk}/revisions/{HUGE}/"):
        assert client.get(url).status_code == 404, url


@pytest.mark.django_db
def test_deeply_nested_json_is_a_400(client, maintainer):
    """A JSON body nested too deeply (studio/api_views.py: MAX_JSON_DEPTH = 64) is a 400 naming the
    problem: 100 000 levels made json.load raise RecursionError (a 500), 65 levels now stop at the
    parser; 64 levels parse (and fail the serializer, 400, for what they hold)."""
    from studio.api_views import MAX_JSON_DEPTH, json_depth

    client.force_login(maintainer)
    assert (json_depth(1), json_depth([]), json_depth([[1]]), json_depth({"a": [{"b": 1}]})) == (0, 1, 2, 3)
    for body in ("[" * 100_000 + "]" * 100_000, '{"a":' * 50_000 + "1" + "}" * 50_000,
                 "[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1)):
        r = client.post("/api/tasks/", body, content_type="application/json")
        assert r.status_code == 400 and "nested deeper than 64 levels" in r.json()["detail"], r.content[:200]
    ok = client.post("/api/tasks/", "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH, content_type="application/json")
    assert ok.status_code == 400 and "nested" not in ok.content.decode()
