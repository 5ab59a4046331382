"""Read queries used by the pages and the API. Views read through these, never through ad-hoc ORM."""
from __future__ import annotations

from django.db.models import Count, Q

from annotation.models import Event, Layer

# --- events and layers -------------------------------------------------------------------------


def event_list():
    """Every event, by slug, with ``layer_count``, ``raster_count``, ``mask_count``, ``vector_count``; one query."""
    return Event.objects.order_by("slug").annotate(
        layer_count=Count("layers"),
        raster_count=Count("layers", filter=Q(layers__kind=Layer.Kind.RASTER)),
        mask_count=Count("layers", filter=Q(layers__kind=Layer.Kind.MASK)),
        vector_count=Count("layers", filter=Q(layers__kind=Layer.Kind.VECTOR)),
    )


def event_with_layers(slug: str) -> Event:
    """An event with its layers prefetched (``event.layers.all()`` costs no query).

    Raises ``Event.DoesNotExist`` when no event has that slug.
    """
    return Event.objects.prefetch_related("layers").get(slug=slug)


def layer_by_id(layer_id: int) -> Layer:
    """One layer, without its event (the layer endpoints, tiles first, never read it: the join
    cost a tile 0.3 ms, issue 16; ``layer.event`` still loads on access); raises
    ``Layer.DoesNotExist``."""
    return Layer.objects.get(pk=layer_id)
