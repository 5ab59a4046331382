"""The gold and predicted geometry of an answer's polygon and point fields, for drawing them on a
map beside the field's score (pure Python, no Django).

Polygons are read exactly as the evaluator reads them for ``polygon_iou``
(:mod:`.polygons`): the value is a file path resolved with :func:`~.polygons.resolve_polygon_path`
(the path itself, else its longest trailing part under a root), the largest polygon of each file
is taken with :func:`~.polygons.largest_polygon`, and a predicted file without ``crs`` is mapped
through the gold file's ``dora_grid`` (pixel col/row to the grid's world frame), one in another CRS
reprojected into the grid's CRS. What is drawn is therefore the very pair of polygons whose IoU
the score is. A predicted GeoJSON *object* (not a path) is drawn too, with a note: the evaluator
applies ``str()`` to it and scores it 0.

Frames: a world frame with a known CRS is reprojected to lon/lat (EPSG:4326, ``frame
"geographic"``); without a CRS (a pixel grid, or files with bare coordinates outside lon/lat
ranges) the geometry stays in image coordinates, x = column, y = row (``frame "pixel"``).
Points: ``point_haversine`` as lon/lat, ``point_pixel`` as (col, row), taken with
:func:`~.measures.extract_point` as the operator takes them.
"""
from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .measures import extract_point
from .polygons import EMPTY_ANSWERS, largest_polygon, resolve_polygon_path


def _crs_name(doc: Any) -> str | None:
    crs = doc.get("crs") if isinstance(doc, dict) else None
    return (crs or {}).get("properties", {}).get("name") if isinstance(crs, dict) else None


def _feature(geom, role: str) -> dict[str, Any]:
    from shapely.geometry import mapping

    return {"type": "Feature", "properties": {"role": role}, "geometry": json.loads(json.dumps(mapping(geom)))}


def _looks_lonlat(geoms) -> bool:
    for g in geoms:
        x0, y0, x1, y1 = g.bounds
        if not (-180 <= x0 <= x1 <= 180 and -90 <= y0 <= y1 <= 90):
            return False
    return True


def _to_lonlat(geom, crs: str):
    import shapely
    from pyproj import CRS, Transformer

    src = CRS(crs)
    if src == CRS("EPSG:4326"):
        return geom
    project = Transformer.from_crs(src, CRS("EPSG:4326"), always_xy=True).transform
    return shapely.transform(geom, project, interleaved=False)


def polygon_pair(pred: Any, gold: Any, roots: Iterable[Path] = ()) -> dict[str, Any]:
    """The polygons a ``polygon_iou`` field compares, ready for a map:
    ``{frame: "geographic" | "pixel", gold: Feature | None, pred: Feature | None, notes: [str]}``
    (GeoJSON Features, lon/lat in the geographic frame, col/row in the pixel frame; ``notes`` say
    why a side is missing or how it was read). Never raises: an unreadable file is a note."""
    roots = tuple(roots)
    notes: list[str] = []
    gold_doc = grid = None
    gold_poly = pred_poly = None
    gold_s = str(gold)
    gold_file = resolve_polygon_path(gold_s, roots) if gold is not None else None
    if gold_file is None:
        notes.append(f"gold polygon file not found: {gold_s}")
    else:
        try:
            gold_doc = json.loads(Path(gold_file).read_text(encoding="utf-8"))
            grid = gold_doc.get("dora_grid") if isinstance(gold_doc, dict) else None
            gold_poly = largest_polygon(gold_doc)
            if gold_poly is None:
                notes.append("the gold file holds no polygon")
        except Exception as exc:  # a broken file is shown as a note, as the evaluator scores it 0
            notes.append(f"gold polygon file unreadable: {exc}")
    pred_doc = None
    if isinstance(pred, dict):
        pred_doc = pred
        notes.append("the prediction is an inline GeoJSON object: drawn here, but the evaluator reads a file path "
                     "and scores an object 0")
    elif pred is not None and str(pred).strip().lower() not in EMPTY_ANSWERS:
        pred_file = resolve_polygon_path(str(pred), roots)
        if pred_file is None:
            notes.append(f"predicted polygon file not found: {pred}")
        else:
            try:
                pred_doc = json.loads(Path(pred_file).read_text(encoding="utf-8"))
            except Exception as exc:
                notes.append(f"predicted polygon file unreadable: {exc}")
    else:
        notes.append("no polygon predicted (an empty answer)")
    if isinstance(pred_doc, dict):
        try:
            pred_poly = largest_polygon(pred_doc, grid)
            if pred_poly is None:
                notes.append("the predicted GeoJSON holds no polygon")
        except Exception as exc:
            notes.append(f"predicted polygon unreadable: {exc}")
    # the frame both are in: the grid's CRS; without a grid each file's own CRS
    if grid is not None:
        crs_gold = crs_pred = grid.get("crs")
    else:
        crs_gold, crs_pred = _crs_name(gold_doc), _crs_name(pred_doc)
    shown = [g for g in (gold_poly, pred_poly) if g is not None]
    frame = "pixel"
    try:
        if all(c for c, g in ((crs_gold, gold_poly), (crs_pred, pred_poly)) if g is not None) and shown:
            gold_poly = _to_lonlat(gold_poly, crs_gold) if gold_poly is not None else None
            pred_poly = _to_lonlat(pred_poly, crs_pred) if pred_poly is not None else None
            frame = "geographic"
        elif shown and grid is None and not (crs_gold or crs_pred) and _looks_lonlat(shown):
            frame = "geographic"  # bare coordinates in lon/lat ranges: read as lon/lat
        elif shown:
            notes.append("no coordinate reference system: drawn in image coordinates (column, row)")
    except Exception as exc:
        notes.append(f"cannot reproject to lon/lat: {exc}")
        gold_poly = pred_poly = None
    return {"frame": frame, "gold": _feature(gold_poly, "gold") if gold_poly is not None else None,
            "pred": _feature(pred_poly, "predicted") if pred_poly is not None else None, "notes": notes}


def _point(value: Any, kind: str, role: str) -> dict[str, Any] | None:
    a, b = extract_point(value, kind)
    if a is None or b is None:
        return None
    if kind == "geo":
        if not (-90 <= a <= 90 and -180 <= b <= 180):
            return None
        coords = [b, a]  # GeoJSON order: lon, lat
    else:
        coords = [b, a]  # x = column, y = row
    return {"type": "Feature", "properties": {"role": role}, "geometry": {"type": "Point", "coordinates": coords}}


def answer_geometries(fields: Iterable[dict[str, Any]], roots: Iterable[Path] = ()) -> list[dict[str, Any]]:
    """Map geometry of the polygon and point rows of :func:`.explain.explain_answer`:
    ``[{field, type, frame, gold: Feature | None, pred: Feature | None, notes: [str]}]``, one per
    ``polygon_iou``, ``point_haversine`` or ``point_pixel`` row with a geometry on at least one
    side (rows typed otherwise are left out)."""
    roots = tuple(roots)
    out: list[dict[str, Any]] = []
    for row in fields:
        etype = row.get("type")
        if etype == "polygon_iou":
            geo = polygon_pair(row.get("pred"), row.get("gold"), roots)
        elif etype in ("point_haversine", "point_pixel"):
            kind = "geo" if etype == "point_haversine" else "pixel"
            gold, pred = _point(row.get("gold"), kind, "gold"), _point(row.get("pred"), kind, "predicted")
            notes = [f"no {'lat/lon' if kind == 'geo' else 'row/column'} point on the {side} side"
                     for side, f in (("gold", gold), ("predicted", pred)) if f is None]
            geo = {"frame": "geographic" if kind == "geo" else "pixel", "gold": gold, "pred": pred, "notes": notes}
        else:
            continue
        if geo["gold"] is None and geo["pred"] is None:
            continue
        out.append({"field": row["field"], "type": etype, **geo})
    return out
