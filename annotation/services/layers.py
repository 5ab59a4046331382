"""Service functions for a layer's georeferencing metadata, the one writer of ``Layer.gsd_m`` and
``Layer.crs`` after import.

Pixel-frame imagery (xBD chips without a geotransform, e.g. hurricane-florence) arrives without a
ground sample distance, so no metric question can be asked of it: QC says ``manifest.gsd_missing``.
A maintainer who knows the GSD (the xBD/Maxar product's metadata) or the CRS records it here, with a
reason; the change is a ``LayerAuditEvent`` naming the tasks whose replays read the layer. Those
replays are stale from then on: ``replay.services.layers.input_fingerprint`` covers the layer's GSD and CRS,
so ``manage.py replay --all --changed-only`` replays them, and QC reads the new values at once
(``annotation.services.qc.layer_info``). The manifests those tasks saved still hold the old values:
QC reports them (``derived.manifest_stale``/``derived.manifest_outdated``) until
``annotation.services.tasks.refresh_derived`` writes the layers' values into a new revision.
"""
from __future__ import annotations

import math

from django.db import transaction

from annotation import qc
from annotation.models import Layer, LayerAuditEvent, Task
from kernel.errors import InvalidInput
from kernel.inputs import input_entries
from studio.permissions import Action, require

#: the largest GSD accepted (m/px): coarser than any imagery the benchmark uses (Sentinel-1/2: 10-20 m,
#: DEMs: 30 m, MODIS: 250-1000 m); a value above is almost surely a unit slip (cm, km)
MAX_GSD_M = 1000.0


def _clean_gsd(value) -> float | None:
    if value is None or value == "":
        return None
    try:
        gsd = float(value)
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"gsd_m: '{value}' is not a number (metres per pixel)") from exc
    if not math.isfinite(gsd) or gsd <= 0 or gsd > MAX_GSD_M:
        raise InvalidInput(f"gsd_m: {value} m/px is out of range (0, {MAX_GSD_M:g}]")
    return gsd


def _clean_crs(value) -> str:
    text = str(value or "").strip()
    if not text:
        return ""
    from pyproj import CRS
    from pyproj.exceptions import CRSError

    try:
        crs = CRS.from_user_input(text)
    except CRSError as exc:
        raise InvalidInput(f"crs: '{text[:80]}' is not a coordinate reference system pyproj knows ({exc})") from exc
    auth = crs.to_authority()
    return f"{auth[0]}:{auth[1]}" if auth else crs.to_wkt()


def tasks_using_layer(layer: Layer) -> list[Task]:
    """Tasks of the layer's event whose head revision names the layer's file (in ``input_data``
    or a step argument), ordered by question id."""
    out = []
    for task in Task.objects.filter(event_id=layer.event_id, head__isnull=False).select_related("head").order_by("question_id"):
        rev = task.head
        content = {"input_data": rev.input_data, "trajectory": rev.trajectory}
        files = {e[1].rsplit("/", 1)[-1] for e in input_entries(rev.input_data or {})} | qc.used_layer_files(content)
        if layer.file_name in files:
            out.append(task)
    return out


@transaction.atomic
def set_layer_georeferencing(user, layer: Layer, *, gsd_m=None, crs=None, reason: str) -> LayerAuditEvent:
    """Record a layer's GSD (m/px) and/or CRS (any text pyproj reads: ``EPSG:32617``, WKT, PROJ),
    with the reason; ``None`` leaves a field as it is, ``""`` clears it.

    Returns the ``LayerAuditEvent`` (``changes`` {field: {old, new}}, ``stale_tasks``: the question
    ids of tasks whose replays read the layer). Raises ``PermissionDenied`` (``layer.edit_metadata``:
    maintainers) and ``ValueError`` naming the field (no reason, a GSD out of (0, 1000] m/px, an
    unknown CRS, nothing changed); nothing is written then.
    """
    require(user, Action.LAYER_EDIT_METADATA, layer)
    reason = str(reason or "").strip()
    if not reason:
        raise InvalidInput("reason: say where the value comes from (e.g. the product's metadata)")
    locked = Layer.objects.select_for_update().get(pk=layer.pk)
    new = {}
    if gsd_m is not None:
        new["gsd_m"] = _clean_gsd(gsd_m)
    if crs is not None:
        new["crs"] = _clean_crs(crs)
    changes = {k: {"old": getattr(locked, k), "new": v} for k, v in new.items() if getattr(locked, k) != v}
    if not changes:
        raise InvalidInput("gsd_m, crs: nothing changes (give a new GSD or CRS)")
    for k, c in changes.items():
        setattr(locked, k, c["new"])
    locked.save(update_fields=list(changes))
    stale = [t.question_id for t in tasks_using_layer(locked)]
    event = LayerAuditEvent.objects.create(layer=locked, actor=user, changes=changes, reason=reason, stale_tasks=stale)
    for k, c in changes.items():
        setattr(layer, k, c["new"])
    return event
