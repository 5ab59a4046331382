"""Login, CSRF and request-size limits.

* every URL the resolver knows (but the login page) refuses an anonymous client: pages redirect to
  the login page, ``/api/`` answers 401/403 — for every method, with ids of objects that exist;
* every state-changing request of a logged-in session without a CSRF token is refused (403), pages
  and API alike; with the token it goes through;
* a request body over Django's ``DATA_UPLOAD_MAX_MEMORY_SIZE`` is a 400, never a 500.
"""
from __future__ import annotations

import itertools
import json

import pytest
from django.conf import settings
from django.test import Client
from support.populated import LOGIN, all_urls, basic_auth_header

METHODS = ("get", "post", "put", "patch", "delete")


@pytest.fixture
def ids(populated, maintainer):
    """The populated studio (support.populated: populated once for this module)."""
    return populated


def test_sample_urls_resolve(ids):
    """Each sample URL resolves to its own pattern (so the tests below really reach every view)."""
    from django.urls import resolve

    urls = all_urls(ids)
    assert len(urls) >= 85, len(urls)  # 90 patterns (api/ 45, pages 45) when this was written
    for name, url in urls:
        assert resolve(url).url_name == name, (name, url)


def test_anonymous_is_refused_everywhere(ids, client):
    """Anonymous: pages answer 302 to the login page (GET, and every other method), the API 401 or
    403 with a JSON detail — also the schema (it used to be public: drf-spectacular's default)."""
    for method, (name, url) in itertools.product(METHODS, all_urls(ids)):
        r = getattr(client, method)(url)
        if url.startswith("/api/") and name != "api-docs":
            assert r.status_code in (401, 403), (method, url, r.status_code)
            if r.status_code in (401, 403) and r.get("Content-Type", "").startswith("application/json"):
                assert "credentials" in r.json()["detail"], (url, r.json())
        elif method == "get":
            assert r.status_code == 302 and r["Location"].startswith(f"{LOGIN}?next="), (method, url, r.status_code)
        else:  # the CSRF check runs before the login check: 403 without a token; with one, 302 to login
            assert r.status_code in (302, 403), (method, url, r.status_code)
            if r.status_code == 302:
                assert r["Location"].startswith(f"{LOGIN}?next="), url


def test_anonymous_post_with_csrf_token_still_needs_login(ids):
    """Past the CSRF check (a valid token), an anonymous POST to a page still goes to the login."""
    client = Client(enforce_csrf_checks=True)
    client.get(LOGIN)  # sets the csrftoken cookie
    token = client.cookies["csrftoken"].value
    for name, url in all_urls(ids):
        if url.startswith("/api/") and name != "api-docs":
            continue
        r = client.post(url, {"csrfmiddlewaretoken": token})
        assert r.status_code == 302 and r["Location"].startswith(f"{LOGIN}?next="), (url, r.status_code)


def test_api_basic_auth(ids, client, maintainer):
    """HTTP Basic works for the API (REST_FRAMEWORK lists it): the right password reads, a wrong
    one is refused (403: DRF answers 401 only when the first authentication class, here the
    session, sends a challenge); a page never accepts Basic (the session login only)."""
    ok = client.get("/api/tasks/", **{"HTTP_" + k.upper(): v for k, v in basic_auth_header("mia", "pw-test-123").items()})
    assert ok.status_code == 200 and len(ok.json()["results"] if isinstance(ok.json(), dict) else ok.json()) == 2
    bad = client.get("/api/tasks/", **{"HTTP_" + k.upper(): v for k, v in basic_auth_header("mia", "wrong").items()})
    assert bad.status_code == 403 and bad.json()["detail"] == "Invalid username/password."
    page = client.get("/tasks/", **{"HTTP_" + k.upper(): v for k, v in basic_auth_header("mia", "pw-test-123").items()})
    assert page.status_code == 302


def test_admin_needs_staff_login(client, maintainer):
    r = client.get("/admin/")
    assert r.status_code == 302 and "/admin/login/" in r["Location"]
    client.force_login(maintainer)  # a maintainer of the studio is not staff
    r = client.get("/admin/")
    assert r.status_code == 302 and "/admin/login/" in r["Location"]


def test_logged_in_pages_are_reachable(ids, client, maintainer):
    """The positive control of the anonymous test: logged in, no page GET goes to the login page."""
    client.force_login(maintainer)
    for _name, url in all_urls(ids):
        r = client.get(url)
        assert not (r.status_code == 302 and r["Location"].startswith(LOGIN)), url
        assert r.status_code < 500, (url, r.status_code)


# ── CSRF ────────────────────────────────────────────────────────────────────────────────────────


@pytest.fixture
def csrf_client(ids, maintainer):
    client = Client(enforce_csrf_checks=True)
    client.force_login(maintainer)
    return client


def test_session_writes_without_csrf_token_are_refused(ids, csrf_client):
    """A logged-in session's state-changing request without the token: 403 everywhere (Django's
    middleware for pages, DRF's SessionAuthentication for the API); nothing changed."""
    from annotation.models import Task, TaskComment
    from evaluation.models import Verdict
    from releases.models import Release

    before = (Task.objects.count(), TaskComment.objects.count(), Verdict.objects.count(),
              list(Release.objects.values_list("status", flat=True)), list(Task.objects.values_list("status", flat=True)))
    for method, (name, url) in itertools.product(METHODS[1:], all_urls(ids)):
        r = getattr(csrf_client, method)(url, data=json.dumps({"body": "x"}), content_type="application/json")
        if name in ("api-schema",) and method != "post":
            # the schema view has only GET: 405 before any authentication (nothing to forge)
            assert r.status_code in (403, 405), (url, r.status_code)
            continue
        assert r.status_code == 403, (method, url, r.status_code)
        if url.startswith("/api/") and name != "api-docs" and r.get("Content-Type", "").startswith("application/json"):
            assert "CSRF" in r.json()["detail"], (url, r.json())
    after = (Task.objects.count(), TaskComment.objects.count(), Verdict.objects.count(),
             list(Release.objects.values_list("status", flat=True)), list(Task.objects.values_list("status", flat=True)))
    assert after == before


def test_session_writes_with_csrf_token_go_through(ids, csrf_client):
    """The same session with the token (cookie + X-CSRFToken / csrfmiddlewaretoken) is let through."""
    from annotation.models import TaskComment

    csrf_client.get("/tasks/")  # a page with a form sets the csrftoken cookie
    token = csrf_client.cookies["csrftoken"].value
    task = ids["task"]
    r = csrf_client.post(f"/api/tasks/{task.pk}/comments/", {"body": "with a token"}, content_type="application/json",
                         HTTP_X_CSRFTOKEN=token)
    assert r.status_code == 201, r.content
    assert TaskComment.objects.filter(body="with a token").count() == 1
    r = csrf_client.post("/scoring/enqueue/", {"csrfmiddlewaretoken": token, "run": ids["run"].pk})
    assert r.status_code != 403, r.status_code


def test_api_basic_auth_needs_no_csrf_token(ids, maintainer):
    """Basic auth carries no cookie a third-party page could ride on, so DRF asks no token."""
    client = Client(enforce_csrf_checks=True)
    auth = {"HTTP_AUTHORIZATION": basic_auth_header("mia", "pw-test-123")["Authorization"]}
    r = client.post(f"/api/tasks/{ids['task'].pk}/comments/", {"body": "basic"}, content_type="application/json", **auth)
    assert r.status_code == 201, r.content


# ── request size ────────────────────────────────────────────────────────────────────────────────


def test_body_over_the_upload_limit_is_a_400(ids, client, maintainer, caplog):
    """A body over DATA_UPLOAD_MAX_MEMORY_SIZE (Django's default 2.5 MiB; the studio keeps it) to
    POST /api/tasks/ is refused with 400 before it is parsed, JSON or form, and nothing is created."""
    from annotation.models import Task

    client.force_login(maintainer)
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    assert limit == 2_621_440  # Django's default (2.5 MiB)
    question = "x" * (limit + 1)
    bodies = {
        "application/json": json.dumps({"event": ids["event"].slug, "dimension": "t1", "question": question,
                                        "trajectory": [], "answer_spec": []}),
        "application/x-www-form-urlencoded": f"event={ids['event'].slug}&dimension=t1&question={question}",
    }
    n = Task.objects.count()
    for content_type, body in bodies.items():
        r = client.post("/api/tasks/", body, content_type=content_type)
        assert r.status_code == 400, (content_type, r.status_code, r.content[:300])
        # Django's refusal (RequestDataTooBig) as a JSON 400 naming the limit (studio.api_views.APIView)
        assert r.json()["detail"] == (f"request body: more than the limit of {limit} bytes "
                                      "(STUDIO_MAX_UPLOAD_BYTES)"), content_type
    assert Task.objects.count() == n
    # just under the limit, the same request is parsed (and refused for its content, not its size)
    small = client.post("/api/tasks/", json.dumps({"event": ids["event"].slug, "dimension": "t1", "question": "x" * 1000,
                                                   "trajectory": [], "answer_spec": []}), content_type="application/json")
    assert small.status_code in (201, 400) and b"too large" not in small.content.lower()
