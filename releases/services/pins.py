"""Layer pins of a release: which version of each layer a release's tasks read.

A release pins, when its tasks are pinned (``releases.services.lifecycle._pin_into``: creation and
each edit of a draft), the current version (``annotation.services.layer_versions.ensure_version``)
of every layer of every event it has tasks of: one ``ReleaseLayerPin`` per layer. The export of the
release (``releases.services.export.LayoutWriter``) and a replay of a released task
(``replay.services.runs.execute_replay``, through the reader registered in ``ReleasesConfig.ready``)
read the pinned versions; a re-import keeps a pinned version's files
(``annotation.services.layer_versions.archive_version``). Pins of a draft are replaced when it is
re-pinned and go with it when it is deleted; a published release's pins never change.
"""
from __future__ import annotations

from annotation.models import Layer, LayerVersion
from annotation.services.layer_versions import ensure_version
from releases.models import Release, ReleaseLayerPin, ReleaseTask

__all__ = ["pin_layers", "release_layer_pins", "task_layer_pins", "version_is_pinned"]


def pin_layers(release: Release) -> int:
    """Replace ``release``'s layer pins by the current version of every layer of the events of
    its pinned tasks; returns the number of pins. Runs inside the caller's transaction (a version
    row a layer lacked is created there too)."""
    ReleaseLayerPin.objects.filter(release=release).delete()
    event_ids = set(ReleaseTask.objects.filter(release=release).values_list("task__event_id", flat=True).distinct())
    # locked in id order (as an import locks the layers it rebuilds): an import running now either
    # finished (its new version is pinned) or waits until this release commits (and keeps the files)
    pins = [ReleaseLayerPin(release=release, layer=layer, version=ensure_version(layer))
            for layer in Layer.objects.select_for_update().filter(event_id__in=event_ids).order_by("id")]
    ReleaseLayerPin.objects.bulk_create(pins)
    return len(pins)


def release_layer_pins(release_id: int | None) -> dict[int, LayerVersion]:
    """``{layer id: LayerVersion}`` pinned by the release (empty for None, or for a release pinned
    before layers had versions: it reads the layers' current rows)."""
    if release_id is None:
        return {}
    return {p.layer_id: p.version for p in ReleaseLayerPin.objects.filter(release_id=release_id).select_related("version")}


def task_layer_pins(task_id: int) -> dict[int, LayerVersion]:
    """The layer versions a released task reads: the pins of the newest published release that
    holds it (by publishing time, then id); empty when no published release holds it."""
    release_id = (Release.objects.filter(items__task_id=task_id, status=Release.Status.PUBLISHED)
                  .order_by("-published_at", "-id").values_list("id", flat=True).first())
    return release_layer_pins(release_id)


def version_is_pinned(version_id: int) -> bool:
    """Whether any release (draft or published) pins the layer version."""
    return ReleaseLayerPin.objects.filter(version_id=version_id).exists()
