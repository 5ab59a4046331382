"""``polygon_iou``: largest polygon of a gold and a predicted GeoJSON file, IoU gate.

Gold files live under ``tasks/gold_polygons/``. A gold file may carry
``dora_grid: {transform: [a, b, c, d, e, f], crs}`` (the image's affine grid, rasterio order);
a predicted file without a ``crs`` member is then read as pixel (col, row) coordinates and mapped
through that grid, and one in another CRS is reprojected into the grid's CRS.
"""
from __future__ import annotations

import json
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .config import TAU_IOU

EMPTY_ANSWERS = frozenset({"", "none", "null", "n/a", "na", "nan", "[]", "{}"})
_warned: set = set()


def resolve_polygon_path(value: str, roots: Iterable[Path] = ()) -> Path | None:
    """Find a polygon file: the path itself (relative to the working directory, as the evaluator
    does), else the longest trailing part of the path that exists under one of ``roots`` (longer
    suffixes first; for one suffix, roots in order)."""
    if not value:
        return None
    if Path(value).is_file():
        return Path(value)
    parts = [p for p in str(value).replace("\\", "/").split("/") if p and not p.endswith(":")]
    roots = tuple(roots)
    for start in range(len(parts)):
        for root in roots:
            candidate = Path(root).joinpath(*parts[start:])
            if candidate.is_file():
                return candidate
    return None


def _warn_once(kind: str, path: str) -> None:
    if (kind, path) not in _warned:
        _warned.add((kind, path))
        warnings.warn(f"polygon_iou: cannot locate {kind} polygon file: {path}", stacklevel=3)


def largest_polygon(geojson: Any, grid: dict | None = None):
    """The largest non-empty Polygon of a GeoJSON object (multi-geometries exploded one level),
    optionally brought into the world frame of ``grid`` (see the module docstring)."""
    from shapely.affinity import affine_transform
    from shapely.geometry import shape

    if geojson.get("type") == "FeatureCollection":
        geometries = [feature.get("geometry") for feature in geojson.get("features", [])]
    elif geojson.get("type") == "Feature":
        geometries = [geojson.get("geometry")]
    else:
        geometries = [geojson]
    polygons = []
    for raw in geometries:
        if not raw:
            continue
        geom = shape(raw)
        parts = list(geom.geoms) if hasattr(geom, "geoms") else [geom]
        polygons.extend(p for p in parts if p.geom_type == "Polygon" and not p.is_empty)
    if not polygons:
        return None
    best = polygons[0]
    for candidate in polygons[1:]:
        if candidate.area > best.area:  # first of equal areas wins, like max()
            best = candidate
    if grid is None:
        return best
    crs = (geojson.get("crs") or {}).get("properties", {}).get("name")
    if crs is None:
        a, b, c, d, e, f = grid["transform"]
        # x' = a*col + b*row + c ; y' = d*col + e*row + f
        return affine_transform(best, [a, b, d, e, c, f])
    import shapely
    from pyproj import CRS, Transformer

    if CRS(crs) != CRS(grid["crs"]):
        project = Transformer.from_crs(CRS(crs), CRS(grid["crs"]), always_xy=True).transform
        best = shapely.transform(best, project, interleaved=False)
    return best


def polygon_iou_detail(pred: Any, gold: Any, roots: Iterable[Path] = (), tau_iou: float = TAU_IOU) -> tuple[float, str]:
    """Score (0/1) and a readable reason. Values are file paths; ``str()`` is applied first, so an
    inline GeoJSON dict scores 0 and ``None`` counts as an empty answer, as in the evaluator."""
    pred_s, gold_s = str(pred), str(gold)
    if pred_s == gold_s:
        return 1.0, "same path as gold"
    gold_file = resolve_polygon_path(gold_s, roots)
    if gold_file is None:
        _warn_once("gold", gold_s)
        return 0.0, f"gold polygon file not found: {gold_s}"
    empty_answer = pred_s.strip().lower() in EMPTY_ANSWERS
    try:
        with open(gold_file, encoding="utf-8") as fh:
            gold_json = json.load(fh)
        gold_poly = largest_polygon(gold_json)
        pred_file = None if empty_answer else resolve_polygon_path(pred_s, roots)
        if pred_file is None:
            if not empty_answer:
                _warn_once("pred", pred_s)
                return 0.0, f"predicted polygon file not found: {pred_s}"
            if gold_poly is None:
                return 1.0, "empty answer and empty gold"
            return 0.0, "empty answer but gold has a polygon"
        with open(pred_file, encoding="utf-8") as fh:
            pred_poly = largest_polygon(json.load(fh), gold_json.get("dora_grid"))
        if gold_poly is None or pred_poly is None:
            if gold_poly is None and pred_poly is None:
                return 1.0, "no polygon on either side"
            return 0.0, "no polygon in " + ("gold" if gold_poly is None else "prediction")
        gold_poly, pred_poly = gold_poly.buffer(0), pred_poly.buffer(0)
        union = gold_poly.union(pred_poly).area
        if union <= 0:
            return 0.0, "zero-area union"
        iou = gold_poly.intersection(pred_poly).area / union
        return (1.0 if iou >= tau_iou else 0.0), f"IoU {iou:.4f} vs gate {tau_iou}"
    except Exception as exc:  # the evaluator scores any failure 0 with a warning
        warnings.warn(f"polygon_iou error for {pred_s}: {exc}", stacklevel=2)
        return 0.0, f"error: {exc}"


def score_polygon_iou(pred: Any, gold: Any, roots: Iterable[Path] = (), tau_iou: float = TAU_IOU) -> float:
    """1.0 when IoU(largest predicted, largest gold polygon) ≥ ``tau_iou``; see :func:`polygon_iou_detail`."""
    return polygon_iou_detail(pred, gold, roots, tau_iou)[0]
