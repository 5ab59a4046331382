"""The content reads that tasks, QC and review share: a revision's plain content and the
manifest values a save derives from the event's layers.

Below ``annotation.services.tasks`` (the writer), ``annotation.services.qc`` (the QC glue) and
``annotation.services.review`` (status changes): each imports this module, none imports the
others back.
"""
from __future__ import annotations

from typing import Any

from annotation import qc
from annotation.models import Layer, TaskRevision
from kernel.content import CONTENT_FIELDS
from kernel.inputs import base_name, input_entries

__all__ = ["layer_manifest_entry", "derived_manifest", "revision_content"]


def layer_manifest_entry(layer: Layer) -> dict:
    """The benchmark's ``input_data`` entry for a layer (dora-format.md §(a)).

    Rasters: ``{image_path, modality, pixel_size_m, spatial_coordinate_system, band_info}``;
    vectors: ``{path}``. Paths are the layer's file name, as the benchmark's release stores them
    under ``images/``.
    """
    if layer.kind == Layer.Kind.VECTOR:
        return {"path": layer.file_name}
    entry = {
        "image_path": layer.file_name,
        "modality": layer.modality or "optical",
        "pixel_size_m": layer.gsd_m,
        "spatial_coordinate_system": layer.crs or "pixel",
        "band_info": list(layer.bands or []),
    }
    return entry


def derived_manifest(input_data: Any, layers) -> dict:
    """What the manifest's derived values would be if the revision were saved now:
    ``{location: {"file_name", "values": {field: value}}}`` for each entry of ``input_data`` that
    names a raster or mask of ``layers`` (the event's ``Layer`` rows; matched on the path's file
    name), holding the fields of ``qc.DERIVED_MANIFEST_FIELDS`` that the entry states, each as
    :func:`layer_manifest_entry` (the one derivation a save uses) gives it now. QC compares it
    with the stored values (``qc.stale_manifest_values``); ``annotation.services.tasks.refresh_derived``
    writes it."""
    by_name = {l.file_name: l for l in layers}
    out = {}
    for loc, path, entry in input_entries(input_data):
        layer = by_name.get(base_name(path))
        if layer is None or layer.kind == Layer.Kind.VECTOR:
            continue
        now = layer_manifest_entry(layer)
        values = {f: now[f] for f in qc.DERIVED_MANIFEST_FIELDS if f in entry and f in now}
        if values:
            out[loc] = {"file_name": layer.file_name, "values": values}
    return out


def revision_content(rev: TaskRevision) -> dict:
    """The plain content dict of a revision (what QC and the exporters read)."""
    return {k: getattr(rev, k) for k in CONTENT_FIELDS}
