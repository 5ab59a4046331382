"""Mode ``paper``: the atomic operators of the DORA paper's Table 3, not the official evaluator.

Differences from mode ``dora`` (documented choices where the paper is silent are marked *):

* scalar (``scalar_count``, ``scalar_continuous``, ``ratio_pct``, ``scalar_numeric``):
  pass when |p−g| ≤ τr·|g| — no absolute slack (``tau_a`` is ignored), no fraction/percent
  rescaling, no percent-like field names. *Numbers may be written as text; one trailing ``%`` sign
  is stripped when parsing, nothing else.
* string (``exact_match`` and any unknown type): nrm(p) = nrm(g) with nrm = NFKC, lower case,
  punctuation to spaces, collapsed spaces; *bools print as true/false and integral floats as
  integers; no yes/no, phase or t/p aliases.
* set (``set_f1``): F1 over normalised strings (same as dora).
* dict (``scalar_dict``): mean of the atomic scores over the *union* of keys (a key missing on
  one side scores 0); *keys compared after lower case and separator folding only; a value pair of
  numbers uses the scalar rule, anything else the string rule.
* point (``point_pixel``, ``point_haversine``, and ``_row/_col``, ``_lat/_lon`` pairs):
  Euclidean distance in pixels ≤ 20 px. *A geographic point is converted to pixels with the
  sample GSD (haversine metres ÷ GSD), 1 m per pixel when the GSD is unknown.
* line (``line``/``polyline``, only in this mode; dora mode scores them as exact match):
  mean of start-point gate, end-point gate (20 px each) and total-length scalar gate.
* ranking (``ranking_kendall``): *no ranking operator: the ordered lists are compared position by
  position with the string rule, averaged over the longer list.
* polygon (``polygon_iou``): IoU ≥ 0.5, as in dora.

Trajectory metrics are the same in both modes. Identical values always score 1, so gold against
gold gives 1.0 in this mode too.
"""
from __future__ import annotations

import math
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .config import TAU_PX, ScoringConfig
from .measures import extract_point, haversine_m, pixel_distance, score_set_f1, walk_answer
from .normalize import normalize_string
from .polygons import score_polygon_iou

PAPER_SCALAR_TYPES = ("scalar_count", "scalar_continuous", "ratio_pct", "scalar_numeric")
LINE_TYPES = ("line", "polyline")
_SEPARATORS = re.compile(r"[\s\-]+")


def paper_number(value: Any) -> float | None:
    """A float from a number or numeric text (one trailing ``%`` allowed); None otherwise."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        if text.endswith("%"):
            text = text[:-1].strip()
        try:
            return float(text)
        except ValueError:
            return None
    return None


def paper_scalar(pred: Any, gold: Any, tau_r: float) -> float:
    """|p−g| ≤ τr·|g| (Table 3); identical values and NaN/NaN pass."""
    if pred == gold:
        return 1.0
    p, g = paper_number(pred), paper_number(gold)
    if p is None or g is None:
        return 0.0
    if math.isnan(p) and math.isnan(g):
        return 1.0
    return 1.0 if abs(p - g) <= tau_r * abs(g) else 0.0


def paper_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return normalize_string(value)


def paper_string(pred: Any, gold: Any) -> float:
    """nrm(p) = nrm(g) (Table 3), no aliases."""
    return 1.0 if pred == gold or paper_text(pred) == paper_text(gold) else 0.0


def _paper_key(key: Any) -> str:
    return _SEPARATORS.sub("_", str(key).strip().lower())


def paper_atom(pred: Any, gold: Any, tau_r: float) -> float:
    """Scalar rule when both values read as numbers, string rule otherwise."""
    if paper_number(gold) is not None and paper_number(pred) is not None:
        return paper_scalar(pred, gold, tau_r)
    return paper_string(pred, gold)


def paper_dict(pred: Any, gold: Any, tau_r: float) -> float:
    """Mean of atomic scores over the union of (folded) keys; both empty → 1."""
    if pred == gold:
        return 1.0
    if not isinstance(gold, dict) or not isinstance(pred, dict):
        return 0.0
    g = {_paper_key(k): v for k, v in gold.items()}
    p = {_paper_key(k): v for k, v in pred.items()}
    keys = list(dict.fromkeys(list(g) + list(p)))
    if not keys:
        return 1.0
    return sum(paper_atom(p[k], g[k], tau_r) if k in g and k in p else 0.0 for k in keys) / len(keys)


def paper_ranking(pred: Any, gold: Any) -> float:
    """Position-by-position string matches averaged over the longer list; both empty → 1."""
    if pred == gold:
        return 1.0
    if not isinstance(gold, list) or not isinstance(pred, list):
        return 0.0
    n = max(len(gold), len(pred))
    if n == 0:
        return 1.0
    return sum(paper_string(p, g) for p, g in zip(pred, gold)) / n


def _geo_to_px(metres: float, gsd_m: float | None) -> float:
    return metres / gsd_m if gsd_m else metres


def paper_point(pred: Any, gold: Any, etype: str, gsd_m: float | None) -> float:
    """Pixel distance ≤ 20 px; geographic points go through the GSD (see module docstring)."""
    if pred == gold:
        return 1.0
    kind = "pixel" if etype == "point_pixel" else "geo"
    g1, g2 = extract_point(gold, kind)
    p1, p2 = extract_point(pred, kind)
    if None in (g1, g2, p1, p2):
        return 0.0
    if kind == "pixel":
        return 1.0 if pixel_distance(p1, p2, g1, g2) <= TAU_PX else 0.0
    return 1.0 if _geo_to_px(haversine_m(p1, p2, g1, g2), gsd_m) <= TAU_PX else 0.0


def _line_points(value: Any) -> list[tuple[float, float]] | None:
    if isinstance(value, dict):
        if value.get("type") == "Feature":
            return _line_points(value.get("geometry"))
        if value.get("type") == "LineString":
            return _line_points(value.get("coordinates"))
        return None
    if isinstance(value, list) and len(value) >= 2:
        points = [extract_point(v, "pixel") for v in value]
        if any(a is None or b is None for a, b in points):
            return None
        return points
    return None


def _line_parts(value: Any):
    """(start, end, length) from a polyline, a GeoJSON LineString, or a dict with start/end/length."""
    if isinstance(value, dict) and "start" in value and "end" in value:
        start, end = extract_point(value["start"], "pixel"), extract_point(value["end"], "pixel")
        length = None
        for key in ("length", "total_length", "length_m", "length_px"):
            if key in value:
                length = paper_number(value[key])
                break
        if None in start or None in end:
            return None
        return start, end, length
    points = _line_points(value)
    if points is None:
        return None
    length = sum(pixel_distance(*points[i], *points[i + 1]) for i in range(len(points) - 1))
    return points[0], points[-1], length


def paper_line(pred: Any, gold: Any, tau_r: float) -> float:
    """Mean of: start point ≤ 20, end point ≤ 20 (in the line's units), total length scalar rule."""
    if pred == gold:
        return 1.0
    g, p = _line_parts(gold), _line_parts(pred)
    if g is None or p is None:
        return 0.0
    start = 1.0 if pixel_distance(*p[0], *g[0]) <= TAU_PX else 0.0
    end = 1.0 if pixel_distance(*p[1], *g[1]) <= TAU_PX else 0.0
    length = paper_scalar(p[2], g[2], tau_r) if g[2] is not None else 0.0
    return (start + end + length) / 3.0


def score_field_paper(field: str, etype: str, pred: Any, gold: Any, gsd_m: float | None,
                      polygon_roots: Iterable[Path], cfg: ScoringConfig) -> float:
    """One field in paper mode."""
    if etype in PAPER_SCALAR_TYPES:
        return paper_scalar(pred, gold, cfg.tau_r)
    if etype == "scalar_dict":
        return paper_dict(pred, gold, cfg.tau_r)
    if etype == "set_f1":
        return score_set_f1(pred, gold)
    if etype == "polygon_iou":
        return score_polygon_iou(pred, gold, roots=polygon_roots)
    if etype == "ranking_kendall":
        return paper_ranking(pred, gold)
    if etype in ("point_pixel", "point_haversine"):
        return paper_point(pred, gold, etype, gsd_m)
    if etype in LINE_TYPES:
        return paper_line(pred, gold, cfg.tau_r)
    return paper_string(pred, gold)


def score_answer_paper(pred_answer: Any, gold_answer: Any, eval_spec: dict[str, str], gsd_m: float | None,
                       polygon_roots: Iterable[Path], cfg: ScoringConfig) -> tuple[float, dict[str, float]]:
    """``(task_score, field_scores)`` in paper mode; same field keys and pairing as dora mode."""
    def score_pair(pred: dict, gold: dict, info: dict[str, str]) -> float | None:
        roles = ("lat", "lon") if info["type"] == "geo" else ("row", "col")
        if not all(r in info for r in roles):
            return None
        etype = "point_haversine" if info["type"] == "geo" else "point_pixel"
        return paper_point([pred.get(info[r]) for r in roles], [gold.get(info[r]) for r in roles], etype, gsd_m)

    return walk_answer(
        pred_answer, gold_answer, eval_spec,
        lambda field, etype, pred, gold: score_field_paper(field, etype, pred, gold, gsd_m, polygon_roots, cfg),
        score_pair)
