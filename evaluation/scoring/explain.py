"""Why each answer field scored what it did: gold, prediction, type, tolerance and the operator's
reasoning, for the people scoring and judging (pure Python, no Django).

The score of every row is the one the evaluator's operator gives (:func:`~.operators.score_field`,
:func:`~.operators.score_point_pair`, or the paper's operators in ``paper`` mode), so an
explanation can never disagree with the number on the leaderboard; the text only restates the
comparison the operator makes, e.g. ``|9 − 5| = 4 > 1 + 0.2·|5| = 2``.
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .config import TAU_IOU, TAU_PX, ScoringConfig
from .measures import _string_set, detect_point_pairs, extract_point, haversine_m, pixel_distance
from .normalize import canonical_exact, normalize_dict_key
from .operators import _GEO_KEY, POINT_TYPES, SCALAR_TYPES, is_percent_like, score_field, score_point_pair
from .paper import score_field_paper
from .parsing import parse_prediction
from .polygons import polygon_iou_detail

DEFAULT = ScoringConfig()


def _num(x: float) -> str:
    return f"{x:.6g}"


def _float(v: Any) -> float | None:
    try:
        f = float(v.strip().rstrip("%").strip()) if isinstance(v, str) else float(v)
    except (TypeError, ValueError, AttributeError):
        return None
    return f


def tolerance_text(field: str, etype: str, gsd_m: float | None, cfg: ScoringConfig = DEFAULT) -> str:
    """The pass rule of a field type in words, e.g. ``"|pred − gold| ≤ 1 + 0.2·|gold|"``."""
    if etype in SCALAR_TYPES and not (etype == "scalar_continuous" and is_percent_like(field)):
        return f"|pred − gold| ≤ {_num(cfg.tau_a)} + {_num(cfg.tau_r)}·|gold|"
    if etype in ("ratio_pct", "scalar_continuous"):
        return f"|pred − gold| ≤ {_num(cfg.tau_r)}·|gold| (a trailing % dropped; fraction and percent forms both tried)"
    if etype == "exact_match":
        return "equal after normalisation (case, spaces, punctuation)"
    if etype == "set_f1":
        return "F1 of the two sets of items (partial credit)"
    if etype == "ranking_kendall":
        return "(Kendall τ + 1) / 2 over the common items (partial credit)"
    if etype == "scalar_dict":
        return (f"per gold key: numbers |pred − gold| ≤ {_num(cfg.tau_a)} + {_num(cfg.tau_r)}·|gold| (no absolute slack "
                f"when |gold| ≤ 1.5), ids exact, lat/lon within {_num(cfg.geo_threshold_m(gsd_m))} m; the mean")
    if etype == "polygon_iou":
        return f"IoU of the largest polygons ≥ {TAU_IOU}"
    if etype == "point_pixel":
        return f"distance ≤ {_num(TAU_PX)} px"
    if etype == "point_haversine":
        return f"great-circle distance ≤ {_num(cfg.geo_threshold_m(gsd_m))} m (20 × GSD{'' if gsd_m else ', no GSD: 20 m'})"
    return "equal after normalisation (type not known to the evaluator)"


def _scalar_why(pred: Any, gold: Any, tau_r: float, tau_a: float, percent: bool) -> str:
    if pred is None:
        return "no value predicted"
    if pred == gold:
        return f"{pred!r} equals the gold value"
    p, g = (_float(pred), _float(gold)) if percent else (_plain(pred), _plain(gold))
    if p is None:
        return f"prediction {pred!r} is not a number"
    if g is None:
        return f"gold {gold!r} is not a number"
    if math.isnan(p) or math.isnan(g):
        return "NaN on one side" if not (math.isnan(p) and math.isnan(g)) else "both NaN"
    tol = tau_a + tau_r * abs(g)
    d = abs(p - g)
    rule = f"{_num(tau_a)} + {_num(tau_r)}·|{_num(g)}|" if tau_a else f"{_num(tau_r)}·|{_num(g)}|"
    text = f"|{_num(p)} − {_num(g)}| = {_num(d)} {'≤' if d <= tol else '>'} {rule} = {_num(tol)}"
    if percent and d > tol and (abs(g) <= 1.5) != (abs(p) <= 1.5):
        q = p / 100.0 if abs(g) <= 1.5 else p * 100.0
        dq = abs(q - g)
        text += f"; rescaled to {_num(q)}: |{_num(q)} − {_num(g)}| = {_num(dq)} {'≤' if dq <= tol else '>'} {_num(tol)}"
    return text


def _plain(v: Any) -> float | None:
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def _why(field: str, etype: str, pred: Any, gold: Any, score: float, gsd_m: float | None,
         roots: Iterable[Path], cfg: ScoringConfig) -> str:
    if etype in SCALAR_TYPES and not (etype == "scalar_continuous" and is_percent_like(field)):
        return _scalar_why(pred, gold, cfg.tau_r, cfg.tau_a, percent=False)
    if etype in ("ratio_pct", "scalar_continuous"):
        return _scalar_why(pred, gold, cfg.tau_r, 0.0, percent=True)
    if etype == "set_f1":
        p, g = _string_set(pred), _string_set(gold)
        if not p and not g:
            return "both sets empty"
        if not p or not g:
            return "prediction is empty" if not p else "gold is empty"
        tp = len(p & g)
        return f"{tp} of {len(p)} predicted items are gold, {tp} of {len(g)} gold items predicted: F1 {score:.3f}"
    if etype == "ranking_kendall":
        if not isinstance(pred, list):
            return "prediction is not a list"
        common = [v for v in gold if v in pred] if isinstance(gold, list) else []
        return f"{len(common)} items in common, order agreement (τ + 1) / 2 = {score:.3f}"
    if etype == "scalar_dict":
        if not isinstance(pred, dict):
            return "prediction is not an object"
        if not isinstance(gold, dict):
            return "gold is not an object"
        pn = {normalize_dict_key(k): v for k, v in pred.items()}
        missing = [normalize_dict_key(k) for k in gold if normalize_dict_key(k) not in pn]
        n_ok = round(score * len(gold)) if gold else 0
        text = f"{n_ok} of {len(gold)} gold keys within tolerance"
        if missing:
            text += f"; missing: {', '.join(missing[:8])}"
        geo = [k for k in gold if _GEO_KEY.search(normalize_dict_key(k))]
        if geo:
            text += f"; lat/lon keys within {_num(cfg.geo_threshold_m(gsd_m))} m"
        return text
    if etype == "polygon_iou":
        return polygon_iou_detail(pred, gold, roots)[1]
    if etype in POINT_TYPES:
        kind = "pixel" if etype == "point_pixel" else "geo"
        g1, g2 = extract_point(gold, kind)
        p1, p2 = extract_point(pred, kind)
        if None in (g1, g2, p1, p2):
            return "no point on " + ("the gold side" if None in (g1, g2) else "the predicted side") + "; raw values compared"
        if kind == "pixel":
            d = pixel_distance(p1, p2, g1, g2)
            return f"{_num(d)} px {'≤' if d <= TAU_PX else '>'} {_num(TAU_PX)} px"
        d = haversine_m(p1, p2, g1, g2)
        lim = cfg.geo_threshold_m(gsd_m)
        return f"{_num(d)} m {'≤' if d <= lim else '>'} {_num(lim)} m"
    if pred is None:
        return "no value predicted"
    same = canonical_exact(pred) == canonical_exact(gold)
    return f"{canonical_exact(pred)!r} {'=' if same else '≠'} {canonical_exact(gold)!r} after normalisation"


def explain_answer(predicted: Any, gold_answer: Any, eval_spec: Any, gsd_m: float | None = None,
                   polygon_roots: Iterable[Path] = (), cfg: ScoringConfig = DEFAULT) -> dict[str, Any]:
    """Field by field comparison of a record's answer with the gold answer.

    ``predicted``: the record's ``predicted_answer`` as stored (dict, string or None) — parsed
    here exactly as the evaluator parses it (:func:`~.parsing.parse_prediction`).
    Returns ``{"parsed": dict, "raw": str | None (the text when the answer was a string),
    "parsed_ok": bool, "fields": [row]}``; a row is ``{field, type, tolerance, gold, pred, score,
    passed, why, kind}`` with ``kind`` ``"field"``, ``"point"`` (a ``_lat``/``_lon`` or
    ``_row``/``_col`` pair scored as one unit, ``gold``/``pred`` then ``[a, b]``) or ``"ignored"``
    (typed ``ignore``: shown, not scored, ``score`` None). ``passed``: score ≥ 1 − 1e-9.
    """
    parsed = parse_prediction(predicted)
    raw = predicted if isinstance(predicted, str) else None
    parsed_ok = not (set(parsed) == {"_raw"} and predicted is not None and not isinstance(predicted, dict))
    gold_answer = gold_answer if isinstance(gold_answer, dict) else {}
    spec = eval_spec if isinstance(eval_spec, dict) else {}
    pairs = detect_point_pairs(spec)
    paired = {f for info in pairs.values() for role, f in info.items() if role != "type"}
    rows: list[dict[str, Any]] = []
    for field, etype in spec.items():
        gold, pred = gold_answer.get(field), parsed.get(field)
        if etype == "ignore":
            rows.append({"field": field, "type": etype, "tolerance": "not scored", "gold": gold, "pred": pred,
                         "score": None, "passed": None, "why": "typed ignore", "kind": "ignored"})
            continue
        if field in paired:
            continue
        if cfg.mode == "paper":
            score = score_field_paper(field, etype, pred, gold, gsd_m, polygon_roots, cfg)
            why = f"the paper's Table 3 operator for {etype}"
        else:
            score = score_field(field, etype, pred, gold, gsd_m, polygon_roots, cfg)
            why = _why(field, etype, pred, gold, score, gsd_m, polygon_roots, cfg)
        rows.append({"field": field, "type": etype, "tolerance": tolerance_text(field, etype, gsd_m, cfg),
                     "gold": gold, "pred": pred, "score": score, "passed": score >= 1 - 1e-9, "why": why,
                     "kind": "field"})
    for base, info in pairs.items():
        a, b = ("lat", "lon") if info["type"] == "geo" else ("row", "col")
        name = f"{base}__point_{'geo' if info['type'] == 'geo' else 'px'}"
        etype = "point_haversine" if info["type"] == "geo" else "point_pixel"
        if a not in info or b not in info:
            rows.append({"field": name, "type": etype, "tolerance": "a lone half of a point pair is not scored",
                         "gold": None, "pred": None, "score": None, "passed": None, "why": "incomplete pair",
                         "kind": "ignored"})
            continue
        gold = [gold_answer.get(info[a]), gold_answer.get(info[b])]
        pred = [parsed.get(info[a]), parsed.get(info[b])]
        score = score_point_pair(parsed, gold_answer, info, gsd_m, cfg)
        # the evaluator reads a missing coordinate as 0 and scores a non-numeric one 0
        as_read = [parsed.get(info[a], 0), parsed.get(info[b], 0)]
        gold_read = [gold_answer.get(info[a], 0), gold_answer.get(info[b], 0)]
        if any(_plain(v) is None for v in as_read + gold_read):
            why = "a coordinate is not a number: the pair scores 0"
        else:
            why = _why(name, etype, as_read, gold_read, score, gsd_m, polygon_roots, cfg)
        missing = [info[r] for r in (a, b) if info[r] not in parsed]
        if missing:
            why = f"{', '.join(missing)} missing (read as 0); " + why
        rows.append({"field": name, "type": etype, "tolerance": tolerance_text(name, etype, gsd_m, cfg),
                     "gold": gold, "pred": pred, "score": score, "passed": score >= 1 - 1e-9, "why": why,
                     "kind": "point", "fields": [info[a], info[b]]})
    return {"parsed": parsed, "raw": raw, "parsed_ok": parsed_ok, "fields": rows}
