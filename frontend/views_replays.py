"""Replay artifacts for the browser: masks as colour PNGs, vectors as GeoJSON (inside the run's folder only)."""
from __future__ import annotations

from django.http import FileResponse, Http404, HttpResponse
from django.shortcuts import get_object_or_404

from replay.models import ReplayRun
from replay.rendering import raster_png
from replay.services import artifact_path


def _artifact(pk: int, name: str):
    run = get_object_or_404(ReplayRun, pk=pk)
    try:
        path = artifact_path(run, name)
    except ValueError:
        raise Http404("no such artifact")
    if not path.is_file():
        raise Http404("no such artifact")
    return path


def artifact_png(request, pk: int, name: str):
    """A raster or mask artifact rendered as PNG (masks with the class palette)."""
    return HttpResponse(raster_png(_artifact(pk, name)), content_type="image/png")


def artifact_file(request, pk: int, name: str):
    """A vector artifact (GeoJSON) as stored."""
    path = _artifact(pk, name)
    if path.suffix.lower() not in (".geojson", ".json"):
        raise Http404("only vector artifacts are served raw; rasters at .png")
    return FileResponse(open(path, "rb"), content_type="application/geo+json")
