"""What both scoring modes measure the same way (mode ``dora``, :mod:`.operators`, and mode
``paper``, :mod:`.paper`): set F1 over normalised strings, point extraction, pixel and great-circle
distances, and the pairing of ``_row``/``_col`` and ``_lat``/``_lon`` fields into points.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from .config import EARTH_RADIUS_M
from .normalize import normalize_string

# ── sets ──────────────────────────────────────────────────────────────────

def _string_set(value: Any) -> set:
    if isinstance(value, (list, tuple, set)):
        return {normalize_string(x) for x in value}
    if isinstance(value, str):
        return {normalize_string(x) for x in value.split(",") if x.strip()}
    return set()


def score_set_f1(pred: Any, gold: Any) -> float:
    """F1 of normalised string sets (a string splits on commas; other scalars give an empty set).
    Both empty → 1, one empty → 0."""
    p, g = _string_set(pred), _string_set(gold)
    if not p and not g:
        return 1.0
    if not p or not g:
        return 0.0
    tp = len(p & g)
    precision, recall = tp / len(p), tp / len(g)
    return 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0


# ── points ───────────────────────────────────────────────────────────────

_PIXEL_KEYS = (("pixel_row", "pixel_col"), ("row", "col"), ("r", "c"), ("y", "x"))
_GEO_KEYS = (("latitude", "longitude"), ("lat", "lon"), ("lat", "lng"), ("y", "x"))


def extract_point(value: Any, kind: str) -> tuple[float | None, float | None]:
    """(row, col) for ``kind="pixel"`` or (lat, lon) for ``"geo"`` from a 2-list/tuple or a dict
    with one of the known key pairs; (None, None) when no pair parses."""
    if value is None:
        return None, None
    if isinstance(value, (list, tuple)) and len(value) == 2:
        try:
            return float(value[0]), float(value[1])
        except (TypeError, ValueError):
            return None, None
    if isinstance(value, dict):
        for k1, k2 in (_PIXEL_KEYS if kind == "pixel" else _GEO_KEYS):
            if k1 in value and k2 in value:
                try:
                    return float(value[k1]), float(value[k2])
                except (TypeError, ValueError):
                    pass
    return None, None


def haversine_m(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    """Great-circle distance in metres on a sphere of radius 6 371 000 m."""
    phi1, lam1, phi2, lam2 = map(math.radians, (lat1, lon1, lat2, lon2))
    h = math.sin((phi2 - phi1) / 2) ** 2 + math.cos(phi1) * math.cos(phi2) * math.sin((lam2 - lam1) / 2) ** 2
    return EARTH_RADIUS_M * 2 * math.asin(math.sqrt(min(h, 1.0)))


def pixel_distance(r1: float, c1: float, r2: float, c2: float) -> float:
    """Euclidean distance in pixels, computed as the official evaluator does (square root of the
    sum of squares, which can differ from ``math.hypot`` in the last bit); inf when a coordinate
    is so large that the squares overflow."""
    try:
        return math.sqrt((r1 - r2) ** 2 + (c1 - c2) ** 2)
    except OverflowError:
        return math.inf


_GEO_SUFFIXES = (("_latitude", "lat"), ("_longitude", "lon"), ("_lat", "lat"), ("_lon", "lon"))
_PX_SUFFIXES = (("_row", "row"), ("_col", "col"))


def detect_point_pairs(eval_spec: dict[str, str]) -> dict[str, dict[str, str]]:
    """``{base: {"type": "geo"|"pixel", "lat"/"row": field, "lon"/"col": field}}`` for fields typed
    point_haversine (suffix _latitude/_longitude/_lat/_lon) or point_pixel (_row/_col). A base
    keeps the type of its first field. A lone half is recorded too (and then never scored)."""
    pairs: dict[str, dict[str, str]] = {}
    for field, etype in eval_spec.items():
        if etype == "point_haversine":
            suffixes, kind = _GEO_SUFFIXES, "geo"
        elif etype == "point_pixel":
            suffixes, kind = _PX_SUFFIXES, "pixel"
        else:
            continue
        for suffix, role in suffixes:
            if field.endswith(suffix):
                base = field[: -len(suffix)]
                pairs.setdefault(base, {"type": kind})[role] = field
                break
    return pairs


def walk_answer(pred_answer: Any, gold_answer: Any, eval_spec: Any,
                score_field: Callable[[str, str, Any, Any], float],
                score_pair: Callable[[dict, dict, dict[str, str]], float | None]) -> tuple[float, dict[str, float]]:
    """The task-level walk both scoring modes share (``dora/evaluation.py``'s per-task loop):
    ``(task_score, field_scores)``, the task score the mean of the field scores, NaN when none.

    A non-dict answer or ``eval_spec`` reads as ``{}``. Every field but ``ignore`` ones and the
    halves of a point pair (:func:`detect_point_pairs`) is scored by
    ``score_field(field, etype, pred_value, gold_value)``; then each pair by
    ``score_pair(pred_answer, gold_answer, info)`` under ``<base>__point_geo`` or
    ``<base>__point_px``, unless it answers None (an incomplete pair is not scored). Unrounded."""
    pred_answer = pred_answer if isinstance(pred_answer, dict) else {}
    gold_answer = gold_answer if isinstance(gold_answer, dict) else {}
    eval_spec = eval_spec if isinstance(eval_spec, dict) else {}
    pairs = detect_point_pairs(eval_spec)
    paired = {f for info in pairs.values() for role, f in info.items() if role != "type"}
    scores: dict[str, float] = {}
    for field, etype in eval_spec.items():
        if etype == "ignore" or field in paired:
            continue
        scores[field] = score_field(field, etype, pred_answer.get(field), gold_answer.get(field))
    for base, info in pairs.items():
        s = score_pair(pred_answer, gold_answer, info)
        if s is not None:
            scores[f"{base}__point_{'geo' if info['type'] == 'geo' else 'px'}"] = s
    if not scores:
        return float("nan"), scores
    return sum(scores.values()) / len(scores), scores
