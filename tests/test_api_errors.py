"""The API's one error contract: domain errors raised by services become
400 / 403 / 404 / 409 / 423 through ``studio.errors.exception_handler`` with one body
``{"detail", "code", "field"?, ...context}``; views catch nothing; the text of an unexpected
exception is never echoed.

The first half raises each class from a throwaway view (the mapping alone); the second half drives
the real endpoints on the Joplin T2 task of tests/test_review_workflow.py (the statuses there are
the ones the editor's JavaScript reads: 409 with the current task, 423 with ``locked``).
"""
from __future__ import annotations

import importlib
import pkgutil

import pytest
from django.core.exceptions import PermissionDenied
from rest_framework.test import APIRequestFactory, force_authenticate
from support.joplin import create_t2 as _create
from support.joplin import post_json as _post
from support.joplin import t2_payload

from annotation.models import Task
from annotation.services import review
from annotation.services import tasks as task_services
from annotation.services.task_import import TaskImportError
from evaluation.blind import NotBlind
from evaluation.services.runs import RunImportError, RunImportStateError
from kernel.errors import Conflict, DomainError, Forbidden, InvalidInput, Locked, NotFound
from releases.services import lifecycle
from replay.services.gold import ReplayStateError
from studio.api_views import APIView


def _raising(exc):
    class Raises(APIView):
        def get(self, request):
            raise exc

    request = APIRequestFactory().get("/api/x/")
    force_authenticate(request, user=type("U", (), {"is_authenticated": True, "is_active": True})())
    return Raises.as_view()(request)


#: the concept classes and the status and ``code`` each answers (the table of ``kernel/errors.py``)
CONCEPTS = {InvalidInput: (400, "invalid"), Forbidden: (403, "permission_denied"), NotFound: (404, "not_found"),
            Conflict: (409, "conflict"), Locked: (423, "locked")}
PROJECT_APPS = ("kernel", "annotation", "replay", "releases", "evaluation", "notifications", "frontend", "studio")


@pytest.mark.parametrize("exc, status, code, field", [
    (InvalidInput("gsd_m: 0 m/px is out of range (0, 1000]"), 400, "invalid", "gsd_m"),
    (InvalidInput("answer_spec.count: no such answer field"), 400, "invalid", "answer_spec.count"),
    (InvalidInput("nothing to name here"), 400, "invalid", None),
    (Forbidden("ada may not task.release"), 403, "permission_denied", None),
    (NotFound("revision: task 3 has revisions r1..r2, not r9"), 404, "not_found", "revision"),
    (Conflict("version: someone saved meanwhile", field="expected_version"), 409, "conflict", "expected_version"),
    (Locked("task s0_task0 is released"), 423, "locked", None),
])
def test_each_concept_error_gets_its_status_and_one_body(exc, status, code, field):
    r = _raising(exc)
    assert r.status_code == status
    body = r.data
    assert body["detail"] == str(exc) and body["code"] == code and body.get("field") == field
    assert set(body) <= {"detail", "code", "field", "locked"}
    assert ("locked" in body) == (status == 423)


@pytest.mark.parametrize("exc, status, code", [  # the statuses the API answered before the per-app bases went
    (TaskImportError("question_id: missing"), 400, "invalid"),
    (review.TransitionError("action: 'x' is not one of submit"), 400, "invalid"),
    (lifecycle.ReleaseError("version: '1.0' is not a semantic version"), 400, "invalid"),
    (RunImportError("release: no release '9.9.9'"), 400, "invalid"),
    (lifecycle.ReleaseExistsError("version: release 1.0.0 already exists"), 409, "conflict"),
    (lifecycle.ReleaseImmutableError("release 1.0.0 is published and cannot be changed"), 409, "conflict"),
    (RunImportStateError("import job 3 is running"), 409, "conflict"),
    (ReplayStateError("the run is not succeeded"), 409, "conflict"),
    (task_services.TaskLockedError("task s0_task0 is released"), 423, "locked"),
])
def test_a_specific_error_answers_the_status_of_its_one_concept(exc, status, code):
    r = _raising(exc)
    assert (r.status_code, r.data["code"]) == (status, code)


def _all_domain_errors() -> set[type]:
    """Every ``DomainError`` subclass defined by the project's packages (each module imported)."""
    for app in PROJECT_APPS:
        package = importlib.import_module(app)
        for info in pkgutil.walk_packages(package.__path__, f"{app}."):
            if ".migrations" in info.name or info.name.endswith(("__main__", "settings_production")):
                continue  # a CLI entry point parses sys.argv on import; production settings need secrets
            importlib.import_module(info.name)
    found, todo = set(), [DomainError]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in found and sub.__module__.split(".")[0] in PROJECT_APPS:
                found.add(sub)
                todo.append(sub)
    return found


def test_every_domain_error_takes_its_status_and_code_from_exactly_one_concept():
    """Single inheritance: no class derives from two concept classes (which needed hand-written
    ``status_code`` overrides), and each has one ``DomainError``-derived base."""
    classes = _all_domain_errors()
    names = {c.__name__ for c in classes}
    assert {"TaskLockedError", "OpenCommentsError", "ReleaseExistsError", "NotBlind", "RunImportStateError"} <= names
    for cls in classes - set(CONCEPTS):
        concepts = [c for c in cls.__mro__ if c in CONCEPTS]
        assert len(concepts) == 1, f"{cls.__qualname__} derives from {concepts}"
        assert len(cls.__bases__) == 1 and issubclass(cls.__bases__[0], DomainError), cls.__bases__
        assert (cls.status_code, cls.code) == CONCEPTS[concepts[0]], cls


def test_only_invalid_input_is_a_value_error():
    """The one exception to single inheritance: ``InvalidInput`` is also a ``ValueError`` so that
    callers written against ``ValueError`` keep working; a 409 is not one."""
    assert issubclass(InvalidInput, ValueError) and issubclass(review.TransitionError, ValueError)
    assert not any(issubclass(c, ValueError) for c in (Forbidden, NotFound, Conflict, Locked))
    assert not issubclass(review.OpenCommentsError, ValueError) and not issubclass(NotBlind, ValueError)


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
