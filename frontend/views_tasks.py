"""Task pages: list, authoring form, detail with replay. Views read through selectors and
write through the API (the same service functions)."""
from __future__ import annotations

from django.http import Http404
from django.shortcuts import get_object_or_404, render

from annotation.models import Event, Task
from annotation.qc import EVAL_TYPES
from annotation.selectors_tasks import task_detail, task_list, task_revisions
from annotation.services.tasks import run_fast_qc
from replay.api import tool_catalogue
from replay.models import ReplayRun


def task_list_page(request):
    tasks = task_list(event_slug=request.GET.get("event") or None, dimension=request.GET.get("dimension") or None)
    return render(request, "frontend/task_list.html", {
        "tasks": tasks, "events": Event.objects.order_by("slug"), "dimensions": Task.Dimension.choices,
    })


def task_new_page(request):
    slug = request.GET.get("event")
    events = Event.objects.order_by("slug")
    event = get_object_or_404(Event, slug=slug) if slug else events.first()
    if event is None:
        raise Http404("no event yet: import data first")
    layers = list(event.layers.values("id", "name", "kind", "modality", "phase", "file_name", "gsd_m", "crs", "class_map"))
    return render(request, "frontend/task_edit.html", {
        "event": event, "events": events, "layers": layers, "tools": tool_catalogue(),
        "eval_types": EVAL_TYPES, "dimensions": Task.Dimension.choices,
    })


def task_detail_page(request, pk: int):
    try:
        task = task_detail(pk)
    except Task.DoesNotExist:
        raise Http404("no such task")
    latest = ReplayRun.objects.filter(task=task).order_by("-id").first()
    return render(request, "frontend/task_detail.html", {
        "task": task, "rev": task.head, "qc": run_fast_qc(task.head), "revisions": task_revisions(task)[:20],
        "latest_replay_id": latest.pk if latest else None,
        "layers": list(task.event.layers.values("id", "file_name", "kind", "frame", "width", "height", "bounds", "class_map")),
    })
