"""Event pages (list, map viewer) and the layer endpoints the map reads: tiles, image, GeoJSON.

Views are thin: they read through ``annotation.selectors`` and render with ``annotation.tiles``.

``layer_map_spec(layer)`` / ``map_config(layers)`` build the JSON that ``StudioMap`` (static
``studio/map.js``) consumes; task and run pages can reuse them.
"""
from __future__ import annotations

import logging
import math

from django.conf import settings
from django.http import (
    FileResponse,
    Http404,
    HttpResponse,
    HttpResponseBadRequest,
    HttpResponseNotModified,
    JsonResponse,
)
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_safe

from annotation import selectors, tiles
from annotation.models import Event, Layer, LayerAuditEvent
from kernel.paths import OutsideRoot, confine
from studio import storage
from studio.permissions import Action, can

log = logging.getLogger(__name__)

TILE_CACHE_SECONDS = 86400
OVERZOOM = 4  # Leaflet may zoom this many levels past the source's native maximum (pixels enlarged)

# Vector features are coloured by their damage label (xBD ``subtype``) or numeric code (``dmg``):
# the palettes are annotation.tiles' (VECTOR_COLOUR_MAP, VECTOR_CODE_COLOURS).
VECTOR_COLOUR_PROPERTIES = ["subtype", "damage", "damage_class", "class", "label", "dmg"]
#: the vector layer the xBD importer makes of a ``<tile>_bounding_boxes.csv`` (annotation.services.imports)
BUILDING_BOX_SUFFIX = "_bounding_boxes.geojson"

_PHASE_ORDER = {"pre": 0, "post": 1}


def _url_template(name: str, layer_id: int) -> str:
    url = reverse(name, args=[layer_id, 910001, 920002, 930003])
    return url.replace("910001", "{z}").replace("920002", "{x}").replace("930003", "{y}")


def _pixel_size(layer: Layer, *related: Layer | None) -> tuple[int, int] | None:
    """``(width, height)`` of a pixel-frame layer; a vector borrows the size of its image."""
    for source in (layer, *related):
        if source is not None and source.width and source.height:
            return int(source.width), int(source.height)
    return None


def _pixel_bounds(layer: Layer) -> list[float] | None:
    b = layer.bounds
    if isinstance(b, (list, tuple)) and len(b) == 4:
        try:
            return [float(v) for v in b]
        except (TypeError, ValueError):
            return None
    return None


def geojson_relpath(layer: Layer) -> str:
    """The stored GeoJSON of a vector layer, relative to STUDIO_DATA_ROOT."""
    return (layer.metadata or {}).get("geojson_path") or layer.path


def layer_map_spec(layer: Layer, annotated: Layer | None = None, image: Layer | None = None) -> dict:
    """One layer as ``StudioMap`` expects it (see ``studio/map.js``).

    ``annotated`` is the layer a GT mask annotates (passed to avoid a query); a mask without a phase
    inherits its phase. ``image`` is the image a pixel-frame vector was drawn on
    (``metadata["image"]``, a file name), which gives it its pixel size.
    """
    if annotated is None and layer.annotates_id:
        annotated = layer.annotates
    phase = layer.phase or (annotated.phase if annotated is not None else "")
    meta = layer.metadata or {}
    spec: dict = {
        "id": layer.id,
        "name": layer.name,
        "kind": layer.kind,
        "frame": layer.frame,
        "phase": phase,
        "modality": layer.modality,
        "file_name": layer.file_name,
        "opacity": 0.7 if layer.kind == Layer.Kind.MASK else 1.0,
        "gsd_m": layer.gsd_m,  # the pixel frame's scale bar and cursor read metres from it
    }
    if layer.frame == Layer.Frame.PIXEL:
        tile = meta.get("tile") or next(
            ((other.metadata or {}).get("tile") for other in (annotated, image) if other is not None
             and (other.metadata or {}).get("tile")), "")
        spec["group"] = f"pixel:{tile}" if tile else "pixel"
        spec["groupLabel"] = f"Image {tile} (pixels)" if tile else "Image frame (pixels)"
        size = _pixel_size(layer, annotated, image)
        if size:
            spec["width"], spec["height"] = size
            spec["bounds"] = [0, 0, size[0], size[1]]
        elif _pixel_bounds(layer):
            spec["bounds"] = _pixel_bounds(layer)
    else:
        spec["group"] = "geographic"
        spec["groupLabel"] = "Geographic (lon/lat)"
        if layer.bounds and len(layer.bounds) == 4:
            spec["bounds"] = [float(v) for v in layer.bounds]

    if layer.kind in (Layer.Kind.RASTER, Layer.Kind.MASK):
        if layer.kind == Layer.Kind.MASK:
            spec["legend"] = tiles.legend(layer)
        spec["valueUrl"] = reverse("layer_value", args=[layer.id])
        if layer.frame == Layer.Frame.PIXEL:
            spec["image"] = reverse("layer_image", args=[layer.id])
        else:
            _tile_fields(layer, spec)
    elif layer.file_name.endswith(BUILDING_BOX_SUFFIX):
        # xBD's building boxes: outlines of their own colour over the damage mask they summarise
        # (coloured by their damage class they looked like the mask's major-damage pixels)
        spec["geojson"] = reverse("layer_geojson", args=[layer.id])
        spec.update(color=tiles.BUILDING_BOX_COLOUR, colorBy=[], fill=False,
                    legend=[{"value": "□", "label": "building box (click one for its damage class)",
                             "colour": tiles.BUILDING_BOX_COLOUR}])
    else:
        spec["geojson"] = reverse("layer_geojson", args=[layer.id])
        spec["colorBy"] = VECTOR_COLOUR_PROPERTIES
        spec["colorMap"] = tiles.VECTOR_COLOUR_MAP
        spec["codeColours"] = tiles.VECTOR_CODE_COLOURS
        # a legend for vectors whose features carry damage classes (the map's class styling)
        fields = {str(f).lower() for f in (meta.get("fields") or meta.get("columns") or [])}
        if fields & {"dmg"}:
            spec["legend"] = [{"value": k, "label": v, "colour": tiles.CLASS_COLOURS[k]} for k, v in tiles.VECTOR_CODE_LABELS.items()]
        elif fields & {"subtype", "damage", "damage_class"}:
            spec["legend"] = [{"value": k, "label": k, "colour": c} for k, c in tiles.VECTOR_COLOUR_MAP.items()]
    return spec


def _tile_fields(layer: Layer, spec: dict) -> None:
    """The tile URL and zoom range of a layer served as web-mercator tiles (or the spec's error)."""
    try:
        minzoom, maxzoom = tiles.tile_zoom_range(layer)
    except tiles.LayerFileError as exc:
        spec["error"] = str(exc)
    except Exception as exc:  # an unreadable file must not break the whole page
        log.warning("layer %s: cannot read tile source: %s", layer.id, exc)
        spec["error"] = "unreadable tile source"
    else:
        spec["tiles"] = _url_template("layer_tile", layer.id)
        spec["minZoom"] = max(0, minzoom - tiles.MIN_ZOOM_SLACK)
        spec["maxNativeZoom"] = maxzoom
        spec["maxZoom"] = maxzoom + OVERZOOM


def geographic_twin_spec(layer: Layer, spec: dict) -> dict | None:
    """The pixel-frame raster/mask ``layer`` (its ``layer_map_spec``) drawn on the globe as well,
    or None when it has no display georeference (``annotation.tiles.display_georeference``).

    The twin is in the ``geographic`` group, id ``"<id>:geo"``, served as web-mercator tiles read
    through the importer's affine fit (so xBD imagery lies under the event's lon/lat vectors);
    click-to-identify asks ``value?frame=geographic``. Bounds: the image's corners under the fit.
    """
    georef = tiles.display_georeference(layer)
    if georef is None or not spec.get("width") or not spec.get("height"):
        return None
    from affine import Affine

    fit = Affine(*georef[1])
    corners = [fit @ (c, r) for c, r in ((0, 0), (spec["width"], 0), (spec["width"], spec["height"]), (0, spec["height"]))]
    twin = {k: v for k, v in spec.items() if k not in ("image", "width", "height", "bounds", "gsd_m")}
    twin.update(id=f"{layer.id}:geo", frame="geographic", group="geographic", groupLabel="Geographic (lon/lat)",
                bounds=[min(p[0] for p in corners), min(p[1] for p in corners),
                        max(p[0] for p in corners), max(p[1] for p in corners)],
                placedBy=(layer.metadata or {}).get("georeference", {}).get("fitted_from") or "affine fit",
                valueUrl=reverse("layer_value", args=[layer.id]) + "?frame=geographic")
    _tile_fields(layer, twin)
    return twin


def map_config(layers) -> dict:
    """The viewer config for a set of layers (one event's, usually): ``{"layers": [spec, ...]}``.

    Layers fall into groups that share one map: every geographic layer together, and pixel-frame
    layers per xBD tile (``metadata["tile"]``); a pixel-frame raster or mask with a display
    georeference is in both (``geographic_twin_spec``). Default visibility per group: one raster (the latest
    phase, ``post`` before ``pre``), the GT masks (those that annotate an image, or
    ``metadata.role == "gt"``; else the first mask), and the vectors of that raster's phase or of no
    phase.
    """
    layers = list(layers)
    by_id = {la.id: la for la in layers}
    by_file = {la.file_name: la for la in layers}
    specs, roles = [], {}
    for la in layers:
        meta = la.metadata or {}
        annotated = by_id.get(la.annotates_id) if la.annotates_id else None
        image = by_file.get(meta.get("image")) if isinstance(meta.get("image"), str) else None
        spec = layer_map_spec(la, annotated, image)
        specs.append(spec)
        roles[la.id] = "gt" if (la.annotates_id or meta.get("role") == "gt") else meta.get("role", "")
        twin = geographic_twin_spec(la, spec)
        if twin is not None:  # imagery in both frames: the pixel one and, placed by its fit, the globe
            specs.append(twin)
            roles[twin["id"]] = roles[la.id]

    groups: dict[str, list[dict]] = {}
    for spec in specs:
        groups.setdefault(spec["group"], []).append(spec)
    for members in groups.values():
        rasters = sorted((s for s in members if s["kind"] == "raster" and not s.get("error")),
                         key=lambda s: (-_PHASE_ORDER.get(s["phase"], 0.5), s["id"]))
        shown_phase = rasters[0]["phase"] if rasters else None
        masks = [s for s in members if s["kind"] == "mask" and not s.get("error")]
        gt = [s for s in masks if roles[s["id"]] == "gt"] or masks[:1]
        visible = {rasters[0]["id"]} if rasters else set()
        visible |= {s["id"] for s in gt}
        for s in members:
            if s["kind"] == "vector" and (not rasters or not s["phase"] or s["phase"] == shown_phase):
                visible.add(s["id"])
        for s in members:
            s["visible"] = s["id"] in visible
    return {"layers": specs}


# --- pages ----------------------------------------------------------------------------------------


@require_safe
def event_list(request):
    return render(request, "frontend/event_list.html", {"events": selectors.event_list()})


@require_safe
def event_detail(request, slug: str):
    try:
        event = selectors.event_with_layers(slug)
    except Event.DoesNotExist as exc:
        raise Http404("no such event") from exc
    layers = list(event.layers.all())
    by_id = {la.id: la for la in layers}
    audits = {}
    for a in LayerAuditEvent.objects.filter(layer__event=event).select_related("actor").order_by("-id"):
        audits.setdefault(a.layer_id, []).append(a)
    rows = []
    for la in layers:
        rows.append({
            "layer": la,
            "annotated": by_id.get(la.annotates_id),
            "legend": tiles.legend(la) if la.kind == Layer.Kind.MASK else [],
            "audit": audits.get(la.id, []),
        })
    return render(request, "frontend/event_detail.html", {
        "event": event,
        "rows": rows,
        "map_config": map_config(layers),
        "can_edit_meta": can(request.user, Action.LAYER_EDIT_METADATA),
    })


# --- layer endpoints ------------------------------------------------------------------------------


def _layer_or_404(layer_id: int) -> Layer:
    try:
        return selectors.layer_by_id(layer_id)
    except Layer.DoesNotExist as exc:
        raise Http404("no such layer") from exc


def _png(data: bytes) -> HttpResponse:
    response = HttpResponse(data, content_type="image/png")
    response["Cache-Control"] = f"private, max-age={TILE_CACHE_SECONDS}"
    return response


@require_safe
def layer_tile(request, layer_id: int, z: int, x: int, y: int):
    """``/tiles/<id>/<z>/<x>/<y>.png``: a transparent tile outside the raster or far below its zooms."""
    layer = _layer_or_404(layer_id)
    if not tiles.has_tiles(layer):
        return HttpResponseBadRequest("this layer has no web-mercator tiles", content_type="text/plain")
    if z > 30:
        return HttpResponseBadRequest("zoom out of range", content_type="text/plain")
    try:
        signature = tiles.tile_signature(layer)
        etag = tiles.tile_etag(signature, z, x, y)
        if etag in _if_none_match(request):
            response = HttpResponseNotModified()
        else:
            response = _png(tiles.cached_tile(layer, z, x, y, signature))
    except tiles.LayerFileError as exc:
        raise Http404(str(exc)) from exc
    # A tile's identity is its ETag (the layer's file and drawing inputs, z/x/y): a browser may
    # keep it for a day and then revalidate it with a 304.
    response["ETag"] = etag
    response["Cache-Control"] = f"private, max-age={TILE_CACHE_SECONDS}"
    return response


def _if_none_match(request) -> set[str]:
    """The entity tags of the request's If-None-Match header (weak ones compared as strong)."""
    header = request.headers.get("If-None-Match", "")
    return {t.strip().removeprefix("W/") for t in header.split(",") if t.strip()}


@require_safe
def layer_image(request, layer_id: int):
    """``/layers/<id>/image.png``: the whole raster/mask as one PNG (longest side ≤ 2048)."""
    layer = _layer_or_404(layer_id)
    if layer.kind not in (Layer.Kind.RASTER, Layer.Kind.MASK):
        return HttpResponseBadRequest("only raster and mask layers have an image", content_type="text/plain")
    try:
        return _png(tiles.render_image(layer))
    except tiles.LayerFileError as exc:
        raise Http404(str(exc)) from exc


@require_safe
def layer_value(request, layer_id: int):
    """``/layers/<id>/value?x=&y=``: the raster's values at a point (column/row in the pixel frame,
    lon/lat otherwise, and with ``frame=geographic`` for a pixel-frame layer drawn on the globe by
    its display georeference) as JSON, for click-to-identify (``annotation.tiles.pixel_values``)."""
    layer = _layer_or_404(layer_id)
    if layer.kind not in (Layer.Kind.RASTER, Layer.Kind.MASK):
        return HttpResponseBadRequest("only raster and mask layers have pixel values", content_type="text/plain")
    try:
        x, y = float(request.GET["x"]), float(request.GET["y"])
    except (KeyError, ValueError):
        return HttpResponseBadRequest("x, y: give the point as numbers (?x=&y=)", content_type="text/plain")
    if not (math.isfinite(x) and math.isfinite(y)):  # float() reads "nan", "inf" and 1e309 (inf)
        return HttpResponseBadRequest("x, y: give the point as finite numbers (not NaN or infinity)",
                                      content_type="text/plain")
    try:
        lnglat = request.GET.get("frame") == "geographic"
        return JsonResponse({"layer": layer.id, "name": layer.name, **tiles.pixel_values(layer, x, y, lnglat=lnglat)})
    except tiles.LayerFileError as exc:
        raise Http404(str(exc)) from exc


@require_safe
def layer_geojson(request, layer_id: int):
    """``/layers/<id>/geojson``: the vector layer's stored GeoJSON (EPSG:4326, or pixel [col, row])."""
    layer = _layer_or_404(layer_id)
    if layer.kind != Layer.Kind.VECTOR:
        return HttpResponseBadRequest("not a vector layer", content_type="text/plain")
    rel = geojson_relpath(layer)
    if not rel:
        raise Http404("layer has no stored file")
    try:
        path = confine(settings.STUDIO_DATA_ROOT, rel)
        if storage.uses_bucket():  # the data root is this machine's cache of the bucket
            storage.local_copy(rel, layer.sha256 if rel == layer.path else "")
    except (OutsideRoot, FileNotFoundError, ValueError):
        raise Http404("layer file is missing") from None
    if not path.is_file():
        raise Http404("layer file is missing")
    if path.suffix.lower() not in (".geojson", ".json"):
        raise Http404("layer has no GeoJSON file")
    response = FileResponse(open(path, "rb"), content_type="application/geo+json")
    response["Cache-Control"] = f"private, max-age={TILE_CACHE_SECONDS}"
    return response
