"""Final-answer operators of the official DORA evaluator (mode ``dora``), one per ``eval_spec`` type.

Each ``score_*`` function returns 1.0/0.0 or a fraction. :func:`score_answer` scores all fields of
one task, pairing ``_row``/``_col`` and ``_lat``/``_lon`` fields into single point units, and
dispatches to :mod:`evaluation.scoring.paper` in ``paper`` mode.
"""
from __future__ import annotations

import math
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .config import METRES_PER_DEGREE, TAU_PX, ScoringConfig
from .measures import extract_point, haversine_m, pixel_distance, score_set_f1, walk_answer
from .normalize import canonical_exact, normalize_dict_key
from .paper import score_answer_paper
from .polygons import score_polygon_iou

DEFAULT = ScoringConfig()

SCALAR_TYPES = ("scalar_continuous", "scalar_count")
POINT_TYPES = ("point_haversine", "point_pixel")
KNOWN_TYPES = (
    "scalar_count", "scalar_continuous", "ratio_pct", "exact_match", "scalar_dict", "set_f1",
    "ranking_kendall", "polygon_iou", "point_pixel", "point_haversine", "ignore",
)
_GEO_KEY = re.compile(r"(^|_)(lat|latitude|lon|lng|longitude)$")


# ── scalars ─────────────────────────────────────────────────────────────────

def score_scalar(pred: Any, gold: Any, tau_r: float = DEFAULT.tau_r, tau_a: float = DEFAULT.tau_a) -> float:
    """1 if ``pred == gold`` (Python equality, so ``None``/``None`` and equal lists pass), else both
    through ``float()`` and pass when |p−g| ≤ tau_a + tau_r·|g|; NaN/NaN passes; unparseable fails."""
    if pred == gold:
        return 1.0
    try:
        p, g = float(pred), float(gold)
    except (TypeError, ValueError):
        return 0.0
    if math.isnan(p) and math.isnan(g):
        return 1.0
    return 1.0 if abs(p - g) <= tau_a + tau_r * abs(g) else 0.0


def score_form_tolerant(pred: float, gold: float, tau_r: float = DEFAULT.tau_r, tau_a: float = 0.0) -> float:
    """Ratio rule: the raw value, and when exactly one side looks like a fraction (|x| ≤ 1.5) the
    prediction rescaled to the gold's form (÷100 or ×100); the better score is kept."""
    best = score_scalar(pred, gold, tau_r, tau_a)
    gold_fraction, pred_fraction = abs(gold) <= 1.5, abs(pred) <= 1.5
    if gold_fraction != pred_fraction:
        rescaled = pred / 100.0 if gold_fraction else pred * 100.0
        best = max(best, score_scalar(rescaled, gold, tau_r, tau_a))
    return best


def _ratio_number(value: Any) -> float:
    if isinstance(value, str):
        value = value.strip().rstrip("%").strip()
    return float(value)


def score_ratio(pred: Any, gold: Any, tau_r: float = DEFAULT.tau_r) -> float:
    """``ratio_pct`` and percent-like ``scalar_continuous`` fields: trailing ``%`` stripped, no
    absolute slack, fraction/percent forms both tried. When either side is ``None`` or does not
    parse, falls back to :func:`score_scalar` on the raw values with tau_a = 0."""
    if pred is not None and gold is not None:
        try:
            p, g = _ratio_number(pred), _ratio_number(gold)
        except (TypeError, ValueError):
            pass
        else:
            return score_form_tolerant(p, g, tau_r, 0.0)
    return score_scalar(pred, gold, tau_r, 0.0)


def is_percent_like(field: str) -> bool:
    """Field names the evaluator treats as ratios when typed ``scalar_continuous``."""
    name = field.lower()
    return ("percentage" in name or "_pct" in name or name.endswith("pct") or "_ratio" in name
            or name.endswith("ratio") or "_share" in name or name.endswith("share"))


# ── strings, sets, rankings ────────────────────────────────────────────────

def score_exact(pred: Any, gold: Any) -> float:
    """Canonical forms equal (see :func:`evaluation.scoring.normalize.canonical_exact`)."""
    return 1.0 if canonical_exact(pred) == canonical_exact(gold) else 0.0


def _hashable(value: Any) -> Any:
    # The evaluator indexes list items in a dict; unhashable items (dicts, lists) make it crash.
    # They are keyed by their repr here so such answers score instead of aborting the run.
    try:
        hash(value)
        return value
    except TypeError:
        return ("__unhashable__", repr(value))


def score_ranking_kendall(pred: Any, gold: Any) -> float:
    """(τ + 1) / 2 over the items common to both lists, in gold order; with fewer than two common
    items: 1 if the two lists hold the same set, else 0. Items are compared as-is (case matters)."""
    if not isinstance(gold, list) or not isinstance(pred, list):
        return 0.0
    gold_items = [_hashable(v) for v in gold]
    pred_items = [_hashable(v) for v in pred]
    gold_rank = {v: i for i, v in enumerate(gold_items)}
    pred_rank = {v: i for i, v in enumerate(pred_items)}
    common = [v for v in gold_items if v in pred_rank]
    if len(common) < 2:
        return 1.0 if set(pred_items) == set(gold_items) else 0.0
    concordant = total = 0
    for i in range(len(common)):
        for j in range(i + 1, len(common)):
            total += 1
            if (gold_rank[common[i]] - gold_rank[common[j]]) * (pred_rank[common[i]] - pred_rank[common[j]]) > 0:
                concordant += 1
    tau = (2 * concordant - total) / total if total > 0 else 0.0
    return (tau + 1.0) / 2.0


# ── dicts ────────────────────────────────────────────────────────────────

def score_scalar_dict(pred: Any, gold: Any, tau_r: float = DEFAULT.tau_r, tau_a: float = DEFAULT.tau_a,
                      gsd_m: float | None = None) -> float:
    """Mean over the gold keys (after :func:`normalize_dict_key`); a missing key scores 0.
    ``id``/``*_id``/``*osmid`` keys: exact match. Lat/lon keys: |p−g| ≤ 20·GSD m (or 20 m) in
    degrees (÷ 111 320). Numbers: ratio rule with tau_a = 0 when |g| ≤ 1.5, else ratio rule with
    tau_a (so a fraction/percent rescale is tried there too). Non-numbers: :func:`score_scalar`.
    Non-dict gold or prediction → 0; empty gold dict → 1."""
    if not isinstance(gold, dict) or not isinstance(pred, dict):
        return 0.0
    gold_n = {normalize_dict_key(k): v for k, v in gold.items()}
    pred_n = {normalize_dict_key(k): v for k, v in pred.items()}
    if not gold_n:
        return 1.0
    total = 0.0
    for key, g_val in gold_n.items():
        if key not in pred_n:
            continue
        p_val = pred_n[key]
        if key == "id" or key.endswith("_id") or key.endswith("osmid"):
            total += score_exact(p_val, g_val)
            continue
        try:
            g_f, p_f = float(g_val), float(p_val)
        except (TypeError, ValueError):
            total += score_scalar(p_val, g_val, tau_r, tau_a)
            continue
        if _GEO_KEY.search(key):
            tolerance_deg = DEFAULT.geo_threshold_m(gsd_m) / METRES_PER_DEGREE
            total += 1.0 if abs(p_f - g_f) <= tolerance_deg else 0.0
            continue
        total += score_form_tolerant(p_f, g_f, tau_r, 0.0 if abs(g_f) <= 1.5 else tau_a)
    # every per-key score is 0 or 1, so summation order cannot change the mean
    return total / len(gold_n)


# ── points ───────────────────────────────────────────────────────────────

def score_point_field(pred: Any, gold: Any, etype: str, gsd_m: float | None = None,
                      cfg: ScoringConfig = DEFAULT) -> float:
    """A point held in one field (dict or 2-list). Pixel: distance ≤ 20 px. Geo: haversine ≤
    20·GSD m (20 m without GSD). When either side has no extractable point: 1 if equal, else
    :func:`score_scalar` on the raw values (the evaluator's fallback)."""
    kind = "pixel" if etype == "point_pixel" else "geo"
    g1, g2 = extract_point(gold, kind)
    p1, p2 = extract_point(pred, kind)
    if g1 is None or g2 is None or p1 is None or p2 is None:
        if pred == gold:
            return 1.0
        return score_scalar(pred, gold, cfg.tau_r, cfg.tau_a)
    if kind == "pixel":
        return 1.0 if pixel_distance(p1, p2, g1, g2) <= TAU_PX else 0.0
    return 1.0 if haversine_m(p1, p2, g1, g2) <= cfg.geo_threshold_m(gsd_m) else 0.0


def _pair_value(answer: dict, field: str) -> float:
    return float(answer.get(field, 0))


def score_point_pair(pred_answer: dict, gold_answer: dict, info: dict[str, str], gsd_m: float | None,
                     cfg: ScoringConfig = DEFAULT) -> float | None:
    """Score one detected pair; None when the pair is incomplete (not scored at all). A missing
    field reads as 0; a non-numeric one makes the pair score 0."""
    if info["type"] == "geo" and "lat" in info and "lon" in info:
        try:
            d = haversine_m(_pair_value(pred_answer, info["lat"]), _pair_value(pred_answer, info["lon"]),
                            _pair_value(gold_answer, info["lat"]), _pair_value(gold_answer, info["lon"]))
        except (TypeError, ValueError):
            return 0.0
        return 1.0 if d <= cfg.geo_threshold_m(gsd_m) else 0.0
    if info["type"] == "pixel" and "row" in info and "col" in info:
        try:
            d = pixel_distance(_pair_value(pred_answer, info["row"]), _pair_value(pred_answer, info["col"]),
                               _pair_value(gold_answer, info["row"]), _pair_value(gold_answer, info["col"]))
        except (TypeError, ValueError):
            return 0.0
        return 1.0 if d <= TAU_PX else 0.0
    return None


# ── task level ───────────────────────────────────────────────────────────

def score_field(field: str, etype: str, pred: Any, gold: Any, gsd_m: float | None = None,
                polygon_roots: Iterable[Path] = (), cfg: ScoringConfig = DEFAULT) -> float:
    """Score one (non-paired, non-ignored) field in dora mode."""
    if etype in SCALAR_TYPES:
        if etype == "scalar_continuous" and is_percent_like(field):
            return score_ratio(pred, gold, cfg.tau_r)
        return score_scalar(pred, gold, cfg.tau_r, cfg.tau_a)
    if etype == "ratio_pct":
        return score_ratio(pred, gold, cfg.tau_r)
    if etype == "exact_match":
        return score_exact(pred, gold)
    if etype == "scalar_dict":
        return score_scalar_dict(pred, gold, cfg.tau_r, cfg.tau_a, gsd_m)
    if etype == "set_f1":
        return score_set_f1(pred, gold)
    if etype == "polygon_iou":
        return score_polygon_iou(pred, gold, roots=polygon_roots)
    if etype == "ranking_kendall":
        return score_ranking_kendall(pred, gold)
    if etype in POINT_TYPES:
        return score_point_field(pred, gold, etype, gsd_m, cfg)
    return score_exact(pred, gold)  # unknown type (scalar_numeric, text_bleu, line, ...)


def score_answer(pred_answer: Any, gold_answer: Any, eval_spec: dict[str, str], gsd_m: float | None = None,
                 polygon_roots: Iterable[Path] = (), cfg: ScoringConfig = DEFAULT) -> tuple[float, dict[str, float]]:
    """``(task_score, field_scores)`` for one task: the mean of the scored fields, NaN when none.

    Paired point fields are scored once, under ``<base>__point_px`` / ``<base>__point_geo``, after
    the other fields. ``ignore`` fields are skipped. Unrounded values.
    """
    if cfg.mode == "paper":
        return score_answer_paper(pred_answer, gold_answer, eval_spec, gsd_m, polygon_roots, cfg)
    if type(eval_spec) is dict and "point_pixel" not in eval_spec.values() and "point_haversine" not in eval_spec.values():
        # no point field, so no pair: walk_answer's loop written out (this runs once per task)
        pred_answer = pred_answer if isinstance(pred_answer, dict) else {}
        gold_answer = gold_answer if isinstance(gold_answer, dict) else {}
        scores: dict[str, float] = {}
        for field, etype in eval_spec.items():
            if etype != "ignore":
                scores[field] = score_field(field, etype, pred_answer.get(field), gold_answer.get(field), gsd_m,
                                            polygon_roots, cfg)
        if not scores:
            return float("nan"), scores
        return sum(scores.values()) / len(scores), scores
    return walk_answer(
        pred_answer, gold_answer, eval_spec,
        lambda field, etype, pred, gold: score_field(field, etype, pred, gold, gsd_m, polygon_roots, cfg),
        lambda pred, gold, info: score_point_pair(pred, gold, info, gsd_m, cfg))
