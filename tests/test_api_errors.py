"""The API's one error contract: domain errors raised by services become
400 / 403 / 404 / 409 / 423 through ``studio.errors.exception_handler`` with one body
``{"detail", "code", "field"?, ...context}``; views catch nothing; the text of an unexpected
exception is never echoed.

The first half raises each class from a throwaway view (the mapping alone); the second half drives
the real endpoints on the Joplin T2 task of tests/test_review_workflow.py (the statuses there are
the ones the editor's JavaScript reads: 409 with the current task, 423 with ``locked``).
"""
from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied
from rest_framework.test import APIRequestFactory, force_authenticate
from support.joplin import create_t2 as _create, post_json as _post, t2_payload

from annotation.errors import (AnnotationConflict, AnnotationError, AnnotationForbidden, AnnotationInputError,
                               AnnotationLocked, AnnotationNotFound)
from annotation.models import Task
from annotation.services import tasks as task_services
from evaluation.errors import EvaluationConflict, EvaluationError
from kernel.errors import Conflict, DomainError, InvalidInput
from replay.errors import ReplayError, ReplayNotFound
from studio.api_views import APIView


def _raising(exc):
    class Raises(APIView):
        def get(self, request):
            raise exc

    request = APIRequestFactory().get("/api/x/")
    force_authenticate(request, user=type("U", (), {"is_authenticated": True, "is_active": True})())
    return Raises.as_view()(request)


@pytest.mark.parametrize("exc, status, code, field", [
    (AnnotationInputError("gsd_m: 0 m/px is out of range (0, 1000]"), 400, "invalid", "gsd_m"),
    (AnnotationInputError("answer_spec.count: no such answer field"), 400, "invalid", "answer_spec.count"),
    (AnnotationInputError("nothing to name here"), 400, "invalid", None),
    (AnnotationForbidden("ada may not task.release"), 403, "permission_denied", None),
    (AnnotationNotFound("revision: task 3 has revisions r1..r2, not r9"), 404, "not_found", "revision"),
    (ReplayNotFound("the task has no succeeded replay"), 404, "not_found", None),
    (AnnotationConflict("version: someone saved meanwhile", field="expected_version"), 409, "conflict",
     "expected_version"),
    (EvaluationConflict("claimed by someone else"), 409, "conflict", None),
    (AnnotationLocked("task s0_task0 is released"), 423, "locked", None),
])
def test_each_domain_error_class_gets_its_status_and_one_body(exc, status, code, field):
    r = _raising(exc)
    assert r.status_code == status
    body = r.data
    assert body["detail"] == str(exc) and body["code"] == code and body.get("field") == field
    assert set(body) <= {"detail", "code", "field", "locked"}
    assert ("locked" in body) == (status == 423)


def test_each_app_has_one_base_class_and_the_status_classes_cut_across_apps():
    assert issubclass(task_services.TaskLockedError, AnnotationError)
    assert issubclass(task_services.StaleVersionError, AnnotationError) and issubclass(
        task_services.StaleVersionError, Conflict)
    assert issubclass(EvaluationConflict, EvaluationError) and issubclass(EvaluationConflict, Conflict)
    assert issubclass(ReplayNotFound, ReplayError) and not issubclass(ReplayNotFound, AnnotationError)
    assert all(issubclass(c, DomainError) for c in (AnnotationError, ReplayError, EvaluationError))
    # pages written against ValueError keep working: a 400 is a ValueError, a 409 is not
    assert issubclass(AnnotationInputError, ValueError) and issubclass(InvalidInput, ValueError)
    assert not issubclass(AnnotationConflict, ValueError)


def test_djangos_permission_denied_and_does_not_exist_answer_the_same_body():
    r = _raising(PermissionDenied("ada may not task.release"))
    assert (r.status_code, r.data) == (403, {"detail": "ada may not task.release", "code": "permission_denied"})
    r = _raising(Task.DoesNotExist("Task matching query does not exist."))
    assert (r.status_code, r.data) == (404, {"detail": "not found", "code": "not_found"})


def test_an_unexpected_value_error_is_a_500_that_does_not_echo_its_text():
    """A bare ``ValueError`` (a library's, or a service's bug) is not a domain error: DRF's handler
    returns None, so Django answers 500 with its own page, never the exception's text."""
    with pytest.raises(ValueError, match="secret internal"):
        _raising(ValueError("invalid literal for int() with base 10: 'secret internal'"))


@pytest.mark.django_db
def test_an_unexpected_error_inside_a_real_endpoint_is_a_500_without_its_text(joplin, people, client, monkeypatch):
    def broken(*a, **kw):
        raise ValueError("could not convert string to float: 'secret internal'")

    monkeypatch.setattr(task_services, "create_task", broken)
    client.raise_request_exception = False
    client.force_login(people["ada"])
    r = client.post("/api/tasks/", t2_payload(joplin), content_type="application/json")
    assert r.status_code == 500 and b"secret internal" not in r.content


@pytest.mark.django_db
def test_the_real_endpoints_answer_400_403_404_409_423(joplin, people, client):
    client.force_login(people["ada"])
    task = _create(client, joplin)
    tid = task["id"]
    # 400: a layer of no event (annotation.services.tasks.build_input_data), field named
    bad = _post(client, "/api/tasks/", t2_payload(joplin, input_layers={"damage_data": 999_999}))
    assert bad.status_code == 400 and bad.json()["code"] == "invalid"
    assert bad.json()["field"] == "input_data.damage_data" and "999999" in bad.json()["detail"]
    # 404: a revision that does not exist names the range
    missing = _post(client, f"/api/tasks/{tid}/revisions/9/restore/", {"expected_version": 1})
    assert missing.status_code == 404 and missing.json()["code"] == "not_found"
    assert missing.json()["detail"] == f"revision: task {tid} has revisions r1..r1, not r9"
    assert client.get(f"/api/tasks/{tid + 1000}/").json() == {"detail": "not found", "code": "not_found"}
    # 409: a save against a stale version carries the current task beside the error
    body = {**t2_payload(joplin), "expected_version": 1, "message": "first"}
    assert client.put(f"/api/tasks/{tid}/", body, content_type="application/json").status_code == 200
    stale = client.put(f"/api/tasks/{tid}/", {**body, "message": "late"}, content_type="application/json")
    assert stale.status_code == 409
    s = stale.json()
    assert (s["code"], s["field"], s["version"], s["id"]) == ("conflict", "expected_version", 2, tid)
    assert s["detail"].endswith("is at version 2, the save was based on 1")
    # 403: an author may not approve (the permission table)
    client.force_login(people["bob"])
    refused = _post(client, f"/api/tasks/{tid}/transitions/", {"action": "approve"})
    assert refused.status_code == 403 and refused.json()["code"] == "permission_denied"
    # 423: with a reviewer the content is locked
    client.force_login(people["ada"])
    early = _post(client, f"/api/tasks/{tid}/submit/")  # a TransitionError: no replay of the head yet
    assert early.status_code == 400 and early.json()["code"] == "invalid" and "replay" in early.json()["detail"]
    assert _post(client, f"/api/tasks/{tid}/replays/").json()["status"] == "succeeded"
    assert _post(client, f"/api/tasks/{tid}/submit/").status_code == 200
    locked = client.put(f"/api/tasks/{tid}/", {**body, "expected_version": 2}, content_type="application/json")
    assert locked.status_code == 423
    assert locked.json()["locked"] is True and locked.json()["code"] == "locked"
