"""Read queries for tasks (lists keep large JSON out: only the head's question is read).

List pages use keyset pagination on the task id (newest first): a page is ``id < before``, so a
page costs the same query whatever its depth, and rows do not shift when new tasks arrive.
"""
from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, IntegerField, OuterRef, Prefetch, Q, Subquery, Value
from django.db.models.functions import Coalesce

from annotation.models import AuditEvent, Task, TaskComment, TaskRevision

PAGE_SIZE = 50

#: the reviewer's queue tabs → the statuses they show
QUEUE_TABS = {
    "submitted": (Task.Status.SUBMITTED, Task.Status.IN_REVIEW),
    "returned": (Task.Status.RETURNED,),
    "approved": (Task.Status.APPROVED,),
}

_LIST_FIELDS = (
    "id", "question_id", "sample_id", "dimension", "status", "version", "updated_at", "created_by_id",
    "event__slug", "event__name", "head__question", "head__number", "created_by__username",
)


@dataclass
class Page:
    """One keyset page: ``rows``, and ``next_before`` (the cursor of the next page, or None)."""

    rows: list
    next_before: int | None


def _filtered(*, event_slug=None, dimension=None, author=None, statuses=None):
    qs = Task.objects.all()
    if event_slug:
        qs = qs.filter(event__slug=event_slug)
    if dimension:
        qs = qs.filter(dimension=dimension)
    if author:
        qs = qs.filter(created_by__username=author)
    if statuses:
        qs = qs.filter(status__in=list(statuses))
    return qs


def task_list(*, event_slug: str | None = None, dimension: str | None = None, limit: int | None = 200):
    """Tasks newest first with their event and head question; one query. ``limit=None``: every
    task, an unsliced queryset (the API pages it with ``studio.pagination``)."""
    qs = _filtered(event_slug=event_slug, dimension=dimension).order_by("-id").select_related(
        "event", "head", "created_by").only(*_LIST_FIELDS)
    return qs if limit is None else qs[:limit]


def task_page(*, event_slug=None, dimension=None, author=None, statuses=None, before: int | None = None,
              size: int = PAGE_SIZE) -> Page:
    """One keyset page of tasks (newest first) with ``open_comments`` counted; one query.

    ``before`` is the cursor (exclusive task id) from the previous page's ``next_before``.
    """
    qs = _filtered(event_slug=event_slug, dimension=dimension, author=author, statuses=statuses)
    if before:
        qs = qs.filter(id__lt=before)
    # a correlated subquery, not a JOIN + GROUP BY: the database then counts comments for the
    # page's rows only, after ORDER BY id DESC LIMIT (docs/benchmarks.md: 0.5 s → ms at 100k tasks)
    open_count = (TaskComment.objects.filter(task=OuterRef("pk"), resolved=False, parent__isnull=True)
                  .order_by().values("task").annotate(n=Count("id")).values("n"))
    qs = qs.order_by("-id").select_related("event", "head", "created_by").only(*_LIST_FIELDS).annotate(
        open_comments=Coalesce(Subquery(open_count, output_field=IntegerField()), Value(0)))
    rows = list(qs[: size + 1])
    more = len(rows) > size
    rows = rows[:size]
    return Page(rows=rows, next_before=rows[-1].pk if more and rows else None)


def queue_counts(*, event_slug=None, dimension=None, author=None) -> dict[str, int]:
    """``{tab: number of tasks}`` for the queue tabs under the same filters; one query."""
    qs = _filtered(event_slug=event_slug, dimension=dimension, author=author)
    agg = qs.aggregate(**{tab: Count("id", filter=Q(status__in=list(st))) for tab, st in QUEUE_TABS.items()})
    return {tab: agg[tab] or 0 for tab in QUEUE_TABS}


def task_authors() -> list[str]:
    """Usernames of everyone who created a task (the author filter's choices); one query."""
    return list(Task.objects.filter(created_by__isnull=False).order_by("created_by__username")
                .values_list("created_by__username", flat=True).distinct())


def task_detail(pk: int) -> Task:
    """A task with its event, head revision and creator; ``Task.DoesNotExist`` if absent."""
    return Task.objects.select_related("event", "head", "head__author", "created_by").get(pk=pk)


def task_revisions(task: Task):
    """The task's revisions, newest first, with their authors (large JSON fields deferred)."""
    return task.revisions.select_related("author").defer(
        "input_data", "classes", "tools", "trajectory", "answer_spec").order_by("-number")


def task_revision(task: Task, number: int) -> TaskRevision:
    """Revision ``number`` of ``task`` with its author; ``TaskRevision.DoesNotExist`` if absent."""
    return TaskRevision.objects.select_related("author").get(task_id=task.pk, number=number)


def task_comments(task: Task) -> list[TaskComment]:
    """The task's comment threads: first comments in order, each with ``thread_replies`` (a list).

    Two queries at most (comments with authors; nothing else).
    """
    comments = list(TaskComment.objects.filter(task=task).select_related("author", "resolved_by").order_by("id"))
    roots, by_id = [], {}
    for c in comments:
        c.thread_replies = []
        by_id[c.pk] = c
    for c in comments:
        if c.parent_id and c.parent_id in by_id:
            by_id[c.parent_id].thread_replies.append(c)
        else:
            roots.append(c)
    return roots


def task_comment_threads(task: Task):
    """The task's comment threads as a queryset of first comments (oldest first), each with
    ``thread_replies`` (its replies, oldest first; threads are one level deep): what
    :func:`task_comments` gives, for a paginated list (two queries a page)."""
    replies = TaskComment.objects.select_related("author", "resolved_by").order_by("id")
    return (TaskComment.objects.filter(task=task, parent__isnull=True).select_related("author", "resolved_by")
            .prefetch_related(Prefetch("replies", queryset=replies, to_attr="thread_replies")))


def task_audit(task: Task):
    """The task's audit trail (status changes), oldest first, with actors."""
    return AuditEvent.objects.filter(task=task).select_related("actor").order_by("id")


def last_return(task: Task) -> AuditEvent | None:
    """The newest ``return`` event of the task (its reason is what the author must fix), or None."""
    return AuditEvent.objects.filter(task=task, action="return").select_related("actor").order_by("-id").first()


def user_draft(task: Task, user):
    """The user's autosaved draft of the task, or None."""
    return task.drafts.filter(user=user).first() if getattr(user, "is_authenticated", False) else None
