"""The review workflow: the one place where a task's status changes, and review comments.

States and transitions (``TRANSITIONS``; each is an ``AuditEvent`` with who, when, the revision
number and the reason)::

    draft ──submit──▶ submitted ──start_review──▶ in_review ──approve──▶ approved ──release──▶ released
      ▲                 │  │                          │                     │
      │                 │  └────────return (reason)───┴─────────────────────┘──▶ returned
      └────withdraw─────┘            (returned ──submit──▶ submitted: the author fixed it)

Permissions come from the table in ``studio.permissions`` (checked here, not only in views):
``task.submit`` / ``task.withdraw`` (author: own), ``task.review`` and ``task.approve``
(reviewer: ``not_own``; an author never reviews or approves their own task), ``task.return``,
``task.release`` (maintainer), ``task.comment`` and ``comment.resolve``.

Submitting runs the full QC (``annotation.services.qc.qc_for_task``): any error blocks it, and so
do the registered submission checks (:func:`register_submission_check`). The replay app registers "a succeeded replay of the head
revision exists" (reviewers judge the filled gold answer, so it must exist); review does not import
replay, which sits above annotation (issue 19).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone

from annotation import qc
from annotation.models import AuditEvent, Task, TaskComment
from annotation.services.qc import qc_for_task
from annotation.services.tasks import TaskValidationError, require_unreleased
from kernel.errors import Conflict, InvalidInput
from kernel.taskfile import json_problem
from studio.events import emit
from studio.permissions import Action, can, require

S = Task.Status


class TransitionError(InvalidInput):
    """The transition is not allowed from the task's current status (or lacks its reason)."""


class OpenCommentsError(Conflict):
    """Approving a task whose review comments are still open needs an explicit confirmation
    (``acknowledge_open_comments=True``), which the audit event then records. ``open_count``.
    Answered as a 409 with ``open_comments`` in the body (the editor asks for the confirmation
    then)."""

    def __init__(self, task: Task, open_count: int):
        self.task = task
        self.open_count = open_count
        super().__init__(f"comments: {task.question_id} has {open_count} open review comment(s); resolve them, "
                         "or confirm that it is approved with them open")

    def context(self) -> dict:
        return {"open_comments": self.open_count, "open_comment_threads": open_comment_threads(task=self.task)}


def open_comment_count(task: Task) -> int:
    """Open (unresolved) comment threads of ``task`` (replies do not count: they share their thread)."""
    return TaskComment.objects.filter(task=task, parent__isnull=True, resolved=False).count()


@dataclass(frozen=True)
class Transition:
    name: str
    sources: tuple[str, ...]
    target: str
    permission: str
    needs_reason: bool = False
    label: str = ""


TRANSITIONS: dict[str, Transition] = {t.name: t for t in (
    Transition("submit", (S.DRAFT, S.RETURNED), S.SUBMITTED, Action.TASK_SUBMIT, label="Submit for review"),
    Transition("withdraw", (S.SUBMITTED, S.IN_REVIEW), S.DRAFT, Action.TASK_WITHDRAW, label="Withdraw"),
    Transition("start_review", (S.SUBMITTED,), S.IN_REVIEW, Action.TASK_REVIEW, label="Start review"),
    Transition("return", (S.SUBMITTED, S.IN_REVIEW, S.APPROVED), S.RETURNED, Action.TASK_RETURN, needs_reason=True,
               label="Return to author"),
    Transition("approve", (S.IN_REVIEW,), S.APPROVED, Action.TASK_APPROVE, label="Approve"),
    Transition("release", (S.APPROVED,), S.RELEASED, Action.TASK_RELEASE, label="Mark released"),
)}


def submission_findings(task: Task) -> list[qc.Finding]:
    """The QC findings that gate submission: the full suite (``annotation.services.qc.qc_for_task``)."""
    return qc_for_task(task)


#: The checks a submission must pass besides QC, in registration order. Each is
#: ``check(task) -> None`` and raises :class:`TransitionError` (its message tells the author what
#: to do). Apps above annotation register theirs from ``AppConfig.ready``.
_SUBMISSION_CHECKS: list[Callable[[Task], None]] = []


def register_submission_check(check: Callable[[Task], None]) -> None:
    """Add ``check`` to the checks that :func:`transition` ``submit`` runs after QC (once: a
    second registration of the same function is ignored, as ``ready()`` may run twice)."""
    if check not in _SUBMISSION_CHECKS:
        _SUBMISSION_CHECKS.append(check)


def submission_checks() -> tuple[Callable[[Task], None], ...]:
    """The registered submission checks, in the order they run."""
    return tuple(_SUBMISSION_CHECKS)


def _check_submission(task: Task) -> None:
    findings = submission_findings(task)
    if qc.has_errors(findings):
        raise TaskValidationError(findings)
    for check in _SUBMISSION_CHECKS:
        check(task)


def open_comments_of_release(release) -> dict[str, int]:
    """``{question id: open comment threads}`` over the tasks pinned in ``release`` (only those with some)."""
    rows = (TaskComment.objects.filter(task__release_items__release=release, parent__isnull=True, resolved=False)
            .values("task__question_id").annotate(n=Count("id", filter=Q(resolved=False))))
    return {r["task__question_id"]: r["n"] for r in rows}


def open_comment_threads(*, task: Task | None = None, release=None) -> list[dict]:
    """The open comment threads of ``task``, or on the tasks pinned in ``release``, oldest first:
    ``[{"task": question id, "id", "author", "body", "step_index", "answer_field", "location",
    "created_at": ISO 8601}]`` (what an approve or publish without confirmation answers with)."""
    rows = TaskComment.objects.filter(parent__isnull=True, resolved=False)
    rows = rows.filter(task=task) if task is not None else rows.filter(task__release_items__release=release)
    return [{"task": c.task.question_id, "id": c.pk, "author": c.author.username if c.author_id else None,
             "body": c.body, "step_index": c.step_index, "answer_field": c.answer_field, "location": c.location,
             "created_at": c.created_at.isoformat()}
            for c in rows.select_related("task", "author").order_by("created_at", "id")]


@transaction.atomic
def record_publish_with_open_comments(user, release, open_by_task: dict[str, int]) -> int:
    """Record, on each task with open comments, that ``user`` confirmed publishing ``release``
    with them open (an ``AuditEvent`` ``publish_with_open_comments``); returns how many were written."""
    tasks = Task.objects.filter(question_id__in=list(open_by_task))
    events = [AuditEvent(task=t, actor=user, action="publish_with_open_comments", from_status=t.status,
                         to_status=t.status, revision_number=t.version,
                         reason=f"release {release.version} published with {open_by_task[t.question_id]} open comment(s), confirmed")
              for t in tasks]
    AuditEvent.objects.bulk_create(events)
    return len(events)


def available_transitions(user, task: Task) -> list[Transition]:
    """The transitions ``user`` may apply to ``task`` now (for buttons; the services check again)."""
    return [t for t in TRANSITIONS.values() if task.status in t.sources and can(user, t.permission, task)]


@transaction.atomic
def transition(user, task: Task, name: str, *, reason: str = "", acknowledge_open_comments: bool = False) -> Task:
    """Apply transition ``name`` to ``task`` and record it as an ``AuditEvent``; returns the task.

    Raises ``TransitionError`` (unknown name, wrong status, missing reason),
    ``OpenCommentsError`` (approve with open comments, unless ``acknowledge_open_comments``: the
    audit event's reason then says how many were open), ``PermissionDenied`` (table),
    ``TaskValidationError`` (submit with QC errors).
    """
    spec = TRANSITIONS.get(name)
    if spec is None:
        raise TransitionError(f"action: '{name}' is not one of {', '.join(TRANSITIONS)}")
    locked = Task.objects.select_for_update(of=("self",)).select_related("head", "event").get(pk=task.pk)
    require(user, spec.permission, locked)
    if locked.status not in spec.sources:
        raise TransitionError(f"status: '{name}' is not possible for a {locked.status} task "
                              f"(only from {', '.join(spec.sources)})")
    reason = (reason or "").strip()
    if spec.needs_reason and not reason:
        raise TransitionError(f"reason: {name} needs a reason the author can act on")
    if name == "submit":
        _check_submission(locked)
    if name == "approve":
        n_open = open_comment_count(locked)
        if n_open and not acknowledge_open_comments:
            raise OpenCommentsError(locked, n_open)
        if n_open:
            note = f"approved with {n_open} open comment(s), confirmed by {user.get_username()}"
            reason = f"{note}: {reason}" if reason else note
    return _record(locked, user, name, spec.target, reason)


def submit(user, task: Task) -> Task:
    """draft/returned → submitted (QC errors or a missing replay block it)."""
    return transition(user, task, "submit")


def withdraw(user, task: Task) -> Task:
    """submitted/in_review → draft: the author takes the task back to edit it."""
    return transition(user, task, "withdraw")


def start_review(user, task: Task) -> Task:
    """submitted → in_review (a reviewer other than the author takes it)."""
    return transition(user, task, "start_review")


def return_task(user, task: Task, reason: str) -> Task:
    """submitted/in_review/approved → returned, with the reason the author sees."""
    return transition(user, task, "return", reason=reason)


def approve(user, task: Task, *, acknowledge_open_comments: bool = False) -> Task:
    """in_review → approved (never by the task's author)."""
    return transition(user, task, "approve", acknowledge_open_comments=acknowledge_open_comments)


def release(user, task: Task, *, note: str = "") -> Task:
    """approved → released (a release froze it; ``note`` names the release)."""
    return transition(user, task, "release", reason=note)


@transaction.atomic
def release_for_release(user, task: Task, *, note: str) -> Task | None:
    """Publishing a release: approved → released through the ``release`` transition and its
    permission ``task.release`` (maintainers only: a reviewer cannot release tasks through a
    release). A task that is not approved any more (returned since it was pinned) is left as it is
    and None returned. ``user`` None is a system import (``manage.py import_release`` with no user,
    which ``releases.services.release_import.import_release_dir`` allows): the transition is recorded
    without an actor. Raises ``PermissionDenied``."""
    if user is not None:
        return transition(user, task, "release", reason=note) if _status(task) == S.APPROVED else None
    locked = Task.objects.select_for_update(of=("self",)).get(pk=task.pk)
    if locked.status != S.APPROVED:
        return None
    return _record(locked, None, "release", S.RELEASED, note)


@transaction.atomic
def approve_imported(user, task: Task, *, from_status: str, reason: str) -> Task:
    """Content imported from a release arrives approved: the release's own review stands in for
    the studio's (``AuditEvent`` action ``imported``, from ``from_status``: ``""`` for a task the
    import created). Needs ``data.import`` (``user`` None: a system import, as above); a released
    task is locked (``annotation.services.tasks.require_unreleased``). Raises ``PermissionDenied``,
    ``TaskLockedError``."""
    if user is not None:
        require(user, Action.DATA_IMPORT)
    locked = Task.objects.select_for_update(of=("self",)).get(pk=task.pk)
    require_unreleased(locked, "an import with other content")
    return _record(locked, user, "imported", S.APPROVED, reason, from_status=from_status)


def _status(task: Task) -> str:
    return Task.objects.filter(pk=task.pk).values_list("status", flat=True).get()


def _record(locked: Task, user, action: str, target: str, reason: str, *, from_status: str | None = None) -> Task:
    """Set ``locked``'s status to ``target`` and write its ``AuditEvent`` (the one status writer)."""
    previous = locked.status if from_status is None else from_status
    locked.status = target
    locked.updated_at = timezone.now()
    locked.save(update_fields=["status", "updated_at"])
    AuditEvent.objects.create(task=locked, actor=user, action=action, from_status=previous, to_status=target,
                              revision_number=locked.version, reason=reason)
    if action in _EVENTS:
        extra = {} if action == "submit" else {"reason": reason}
        emit(_EVENTS[action], {**task_payload(locked, user), **extra}, task=locked, actor=user)
    return locked


#: the review actions that are events (``studio.events``): who must hear of them (docs/notifications.md)
_EVENTS = {"submit": "task.submitted", "return": "task.returned", "approve": "task.approved"}


def task_payload(task: Task, user) -> dict:
    """The keys every ``task.*`` event's payload shares (``studio.events``): ``task_id``,
    ``question_id``, ``dimension``, ``event`` (its slug), ``actor`` (username), ``revision``."""
    return {"task_id": task.pk, "question_id": task.question_id, "dimension": task.dimension,
            "event": task.event.slug, "actor": user.get_username() if user is not None else None,
            "revision": task.version}


# ---- comments ------------------------------------------------------------------------------------
def _clean_location(location) -> dict | None:
    """``{"frame": "pixel"|"geographic", "x": float, "y": float}`` or a GeoJSON geometry, else ValueError."""
    if location in (None, "", {}):
        return None
    if not isinstance(location, dict):
        raise InvalidInput("location: expected {frame, x, y} or a GeoJSON geometry")
    if "type" in location and "coordinates" in location:
        problem = json_problem(location["coordinates"], "location.coordinates")
        if problem:
            raise InvalidInput(problem)
        _require_geometry(location)
        return {"type": str(location["type"]), "coordinates": location["coordinates"],
                **({"frame": location["frame"]} if location.get("frame") in ("pixel", "geographic") else {})}
    frame = location.get("frame")
    if frame not in ("pixel", "geographic"):
        raise InvalidInput("location.frame: must be 'pixel' or 'geographic'")
    try:
        x, y = float(location["x"]), float(location["y"])
    except (KeyError, TypeError, ValueError, OverflowError):
        raise InvalidInput("location: x and y must be numbers (pixel column/row, or lon/lat)") from None
    if not (math.isfinite(x) and math.isfinite(y)):  # NaN, 1e999: no JSON number, no place on a map
        raise InvalidInput("location: x and y must be finite numbers (pixel column/row, or lon/lat)")
    out = {"frame": frame, "x": x, "y": y}
    if location.get("layer"):
        out["layer"] = str(location["layer"])
        if len(out["layer"]) > COMMENT_TEXT_LIMIT:
            raise InvalidInput(f"location.layer: {len(out['layer'])} characters, more than the "
                               f"{COMMENT_TEXT_LIMIT} it may hold")
    return out


#: the GeoJSON geometry types a comment may be pinned to (RFC 7946 §3.1, less GeometryCollection,
#: which has no ``coordinates``)
GEOMETRY_TYPES = ("Point", "MultiPoint", "LineString", "MultiLineString", "Polygon", "MultiPolygon")
#: the longest layer name and answer field a comment keeps
COMMENT_TEXT_LIMIT = 200


def _require_geometry(location: dict) -> None:
    """``InvalidInput`` naming ``location`` unless it is a GeoJSON geometry of
    :data:`GEOMETRY_TYPES` that shapely builds (``shapely.geometry.shape``: positions of 2 or 3
    numbers, a line of 2 or more, closed rings of 4 or more) and that is not empty."""
    from shapely.errors import GeometryTypeError, ShapelyError
    from shapely.geometry import shape

    kind = location.get("type")
    if kind not in GEOMETRY_TYPES:
        raise InvalidInput(f"location.type: {str(kind)[:40]!r} is not one of {', '.join(GEOMETRY_TYPES)}")
    if not _numbers_only(location["coordinates"]):  # shapely reads "1" and true as 1.0; the studio would keep them
        raise InvalidInput(f"location.coordinates: the positions of a GeoJSON {str(kind)} must be numbers "
                           "(not strings or true/false)")
    try:
        geom = shape({"type": kind, "coordinates": location["coordinates"]})
    except (GeometryTypeError, ShapelyError, ValueError, TypeError, IndexError, KeyError, AttributeError) as exc:
        raise InvalidInput(f"location.coordinates: not the coordinates of a GeoJSON {kind} "
                           f"({str(exc)[:200]})") from None
    if geom.is_empty:
        raise InvalidInput(f"location.coordinates: an empty {kind}")


def _numbers_only(coordinates) -> bool:
    """Whether every leaf of nested lists ``coordinates`` is an int or float (never a bool, a
    string or None): what RFC 7946 §3.1.1 calls a position's elements. A non-list is not checked
    here (shapely refuses it with its own reason)."""
    stack = [coordinates]
    while stack:  # iterative: the JSON parser bounds the nesting, this need not recurse
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
        elif item is not coordinates and (isinstance(item, bool) or not isinstance(item, (int, float))):
            return False
    return True


@transaction.atomic
def add_comment(user, task: Task, body: str, *, step_index: int | None = None, answer_field: str = "",
                location=None, parent: TaskComment | None = None) -> TaskComment:
    """A comment on ``task``, pinned to a step (0-based), an answer field or a map location.

    A reply (``parent``) joins the parent's thread (threads are one level deep: a reply to a reply
    attaches to the thread's first comment) and takes its pin. Replying to a resolved thread
    reopens it. Raises ``PermissionDenied`` (``task.comment``) or ``ValueError`` naming the field.
    """
    require(user, Action.TASK_COMMENT, task)
    body = (body or "").strip()
    if not body:
        raise InvalidInput("body: a comment needs text")
    if len(answer_field or "") > COMMENT_TEXT_LIMIT:
        raise InvalidInput(f"answer_field: {len(answer_field)} characters, more than the "
                           f"{COMMENT_TEXT_LIMIT} it may hold")
    if parent is not None:
        if parent.task_id != task.pk:
            raise InvalidInput("parent: that comment belongs to another task")
        root = parent if parent.parent_id is None else parent.parent
        comment = TaskComment.objects.create(
            task=task, parent=root, author=user, body=body, revision_number=task.version,
            step_index=root.step_index, answer_field=root.answer_field, location=root.location,
        )
        if root.resolved:
            TaskComment.objects.filter(pk=root.pk).update(resolved=False, resolved_by=None)
        return _comment_event(comment, task, user)
    steps = len((task.head.trajectory if task.head_id else None) or [])
    if step_index is not None:
        if not isinstance(step_index, int) or not 0 <= step_index < max(steps, 1) or steps == 0:
            raise InvalidInput(f"step_index: {step_index} is not a step of r{task.version} (0..{steps - 1})")
    comment = TaskComment.objects.create(
        task=task, author=user, body=body, revision_number=task.version, step_index=step_index,
        answer_field=answer_field or "", location=_clean_location(location),
    )
    return _comment_event(comment, task, user)


def _comment_event(comment: TaskComment, task: Task, user) -> TaskComment:
    """Emit ``task.commented`` for ``comment`` (in the comment's transaction) and return it."""
    emit("task.commented", {**task_payload(task, user), "comment_id": comment.pk, "body": comment.body[:300],
                            "step_index": comment.step_index, "answer_field": comment.answer_field},
         task=task, actor=user)
    return comment


@transaction.atomic
def resolve_comment(user, comment: TaskComment, *, resolved: bool = True) -> TaskComment:
    """Mark a thread resolved (or open again). Only a thread's first comment carries the state."""
    task = comment.task
    require(user, Action.COMMENT_RESOLVE, task)
    root = comment if comment.parent_id is None else comment.parent
    root.resolved = resolved
    root.resolved_by = user if resolved else None
    root.save(update_fields=["resolved", "resolved_by"])
    return root
