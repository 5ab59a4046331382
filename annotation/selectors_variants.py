"""Reads of robustness variants (``annotation.models.TaskVariant``) for the task page and the API."""
from __future__ import annotations

from annotation.models import Task, TaskVariant

__all__ = ["variants_of", "variant_row"]


def variants_of(task: Task):
    """The variants made from ``task`` (oldest first), with their task, base and revision (one query)."""
    return TaskVariant.objects.filter(base_task=task).select_related("task", "base_task", "base_revision").order_by("id")


def variant_row(task: Task) -> TaskVariant | None:
    """The variant row of ``task`` when it is itself a variant, else None (one query)."""
    return TaskVariant.objects.filter(task=task).select_related("base_task", "base_revision").first()
