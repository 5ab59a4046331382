"""Read queries for tasks (lists keep large JSON out: only the head's question is read)."""
from __future__ import annotations

from annotation.models import Task, TaskRevision


def task_list(*, event_slug: str | None = None, dimension: str | None = None, limit: int = 200):
    """Tasks newest first with their event and head question; one query."""
    qs = Task.objects.order_by("-id")
    if event_slug:
        qs = qs.filter(event__slug=event_slug)
    if dimension:
        qs = qs.filter(dimension=dimension)
    return qs.select_related("event", "head").only(
        "id", "question_id", "sample_id", "dimension", "status", "version", "updated_at",
        "event__slug", "event__name", "head__question", "head__number",
    )[:limit]


def task_detail(pk: int) -> Task:
    """A task with its event, head revision and creator; ``Task.DoesNotExist`` if absent."""
    return Task.objects.select_related("event", "head", "created_by").get(pk=pk)


def task_revisions(task: Task):
    return task.revisions.select_related("author").order_by("-number")
