"""Replay artifacts for the browser: masks as colour PNGs, vectors as GeoJSON (inside the run's folder only)."""
from __future__ import annotations

from django.http import FileResponse, Http404, HttpResponse
from django.shortcuts import get_object_or_404

from annotation.models import Task
from annotation.services.tasks import TaskLockedError
from replay.models import ReplayRun, ReplayStep
from replay.rendering import class_labels, raster_png
from replay.selectors import task_replay_diff
from replay.services.gold import ReplayStateError, accept_gold
from replay.services.paths import artifact_path
from studio.permissions import Action, can


def _artifact(pk: int, name: str):
    run = get_object_or_404(ReplayRun, pk=pk)
    try:
        path = artifact_path(run, name)
    except ValueError as exc:
        raise Http404("no such artifact") from exc
    if not path.is_file():
        raise Http404("no such artifact")
    return path


def artifact_png(request, pk: int, name: str):
    """A raster or mask artifact rendered as PNG (masks with the class palette, by the class labels
    of the step that wrote it, as the map legend of ``replay_overlays`` shows them)."""
    path = _artifact(pk, name)
    step = next((s for s in ReplayStep.objects.filter(run_id=pk).only("obs", "artifacts")
                 if any(a.get("name") == name for a in s.artifacts or [])), None)
    return HttpResponse(raster_png(path, class_labels(step.obs) if step else None), content_type="image/png")


def artifact_file(request, pk: int, name: str):
    """A vector artifact (GeoJSON) as stored."""
    path = _artifact(pk, name)
    if path.suffix.lower() not in (".geojson", ".json"):
        raise Http404("only vector artifacts are served raw; rasters at .png")
    return FileResponse(open(path, "rb"), content_type="application/geo+json")


# ---- replay diff and gold acceptance (task page block) --------------------------------------
def replay_diff_block(request, pk: int):
    """The task page's replay-diff block (HTML fragment): the pending (or newest) replay's
    observations and answer against the gold, with an accept button when a change waits."""
    from django.shortcuts import render

    task = get_object_or_404(Task, pk=pk)
    diff = task_replay_diff(task)
    return render(request, "frontend/replay_diff.html", {
        "task": task, "diff": diff, "diff_loaded": True,
        "can_accept": can(request.user, Action.TASK_REPLAY, task),
    })


def replay_accept(request, pk: int):
    """POST: accept replay ``pk`` as its task's gold, then back to the task page."""
    from django.contrib import messages
    from django.core.exceptions import PermissionDenied
    from django.http import HttpResponseNotAllowed
    from django.shortcuts import redirect

    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    run = get_object_or_404(ReplayRun, pk=pk)
    try:
        accept_gold(request.user, run)
    except PermissionDenied:
        raise
    except (ReplayStateError, TaskLockedError) as exc:
        messages.error(request, str(exc))
    return redirect(f"/tasks/{run.task_id}/")
