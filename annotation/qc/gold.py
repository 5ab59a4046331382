"""Checks of the replayed gold: numerical sanity of the answer values (``sanity.*``) and
determinism of two replays (``determinism.hash``).

Numerical sanity reads field names: area-like (``area``, ``_m2``, ``_km2``, ``_ha``) ≤ the
scene's area; distance-like (``distance``) ≤ the scene's diagonal (route *lengths* are not
bounded: roads wind); percent-like names and ``ratio_pct`` in [0, 1] as a fraction or
[0, 100] as a percentage. A polygon gold must be readable, non-empty, valid polygons with a
``dora_grid`` (``eval_spec.polygon_grid``, an eval-spec check made here where the gold is read).
"""
from __future__ import annotations

import math
import re
from typing import Any

from .answers import PERCENT_NAME
from .layers import as_number
from .plan import Analysis
from .registry import Finding, declare, finding

__all__ = ["CHECKS", "AREA_NAME", "DIST_NAME", "is_nan", "check_sanity", "check_determinism"]

#: the checks of this concern: id → (severity, meaning)
CHECKS: dict[str, tuple[str, str]] = declare("gold", {
    "sanity.count": ("error", "a count is not a non-negative integer"),
    "sanity.ratio": ("error", "a ratio/percentage is out of range for its form"),
    "sanity.area": ("error", "an area is negative or exceeds the scene's area"),
    "sanity.distance": ("error", "a distance is negative or exceeds the scene's diagonal"),
    "sanity.point": ("error", "a point lies outside the raster (or outside lat/lon range)"),
    "sanity.polygon": ("error", "a polygon gold is invalid, unreadable or empty"),
    "sanity.nan": ("error", "a gold value is missing, null or NaN"),
    "sanity.step_failed": ("error", "a replayed step has no observation or a stub one"),
    "determinism.hash": ("error", "two replays of the task give different hashes"),
})


AREA_NAME = re.compile(r"(?:^|_)area(?:_|$)|_m2$|_km2$|_ha$|hectare|sq_?m|sqkm")
DIST_NAME = re.compile(r"distance|(?:^|_)dist(?:_|$)")


def is_nan(v: Any) -> bool:
    """Whether ``v`` is no value: None, NaN or infinite, or a blank/``nan``/``null``/``inf`` string."""
    if v is None:
        return True
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return True
    if isinstance(v, str) and v.strip().lower() in ("", "nan", "none", "null", "inf", "-inf"):
        return True
    return False


def check_sanity(a: Analysis, replay: dict, polygons: dict | None):
    """``sanity.*`` (and ``eval_spec.polygon_grid``) on ``replay`` (``{trajectory, final_answer}``):
    each step has a real observation, and each answer value fits its type and the scene
    (``a.scene()``); ``polygons`` maps polygon_iou fields to their gold GeoJSON (None: unreadable)."""
    traj = replay.get("trajectory") or []
    for i, step in enumerate(traj):
        if i >= len(a.outs) or a.outs[i] is None or a.outs[i].info is None:
            continue
        obs = step.get("obs") if isinstance(step, dict) else None
        if obs is None:
            a.add("sanity.step_failed", f"Step {i} ({a.outs[i].info.name}) has no observation in the replay; replay the task again and fix the step.", f"trajectory[{i}].obs")
        elif isinstance(obs, dict) and (obs.get("status") in ("stub", "error") or ("raw_output" in obs and len(obs) == 1)):
            a.add("sanity.step_failed", f"Step {i} ({a.outs[i].info.name}) returned a {obs.get('status') or 'raw text'} observation ({str(obs.get('error') or obs.get('note') or obs.get('raw_output') or '')[:80]}); the gold must come from a real result.", f"trajectory[{i}].obs")
    answer = replay.get("final_answer")
    if not isinstance(answer, dict):
        return
    scene = a.scene()
    types = {str(f.get("name")): f.get("eval_type") for f in a.answer_fields() if isinstance(f, dict)}
    for name, etype in types.items():
        if etype == "ignore" or name not in answer:
            continue
        loc = f"final_answer.{name}"
        value = answer[name]
        if is_nan(value) or (isinstance(value, (dict, list)) and any(is_nan(v) for v in (value.values() if isinstance(value, dict) else value))):
            a.add("sanity.nan", f"Answer field '{name}' is {value!r} after replay: a value is expected; fix the step that produces it.", loc)
            continue
        lname = name.lower()
        if etype == "scalar_count":
            v = as_number(value)
            if v is None or v < 0 or abs(v - round(v)) > 1e-9:
                a.add("sanity.count", f"Answer field '{name}' = {value!r} is not a non-negative integer count; check its source (a count field should come from a count key).", loc)
                continue
        if etype == "ratio_pct" or (etype == "scalar_continuous" and PERCENT_NAME.search(lname)):
            _ratio(a, name, value, loc)
        if etype in ("scalar_continuous", "scalar_count", "scalar_dict") and AREA_NAME.search(lname) and "px" not in lname and "pixel" not in lname:
            for key, v in _numbers(value):
                factor = 1e6 if "km2" in lname or "sqkm" in lname else 1e4 if re.search(r"_ha$|hectare", lname) else 1.0
                m2 = v * factor
                if m2 < 0 or (scene["area_m2"] and m2 > scene["area_m2"] * 1.001):
                    what = "is negative" if m2 < 0 else f"exceeds the scene area ({scene['area_m2']:.0f} m²)"
                    a.add("sanity.area", f"Answer field '{name}'{key} = {v:g} {what}; check units and pixel_size_m.", loc)
        if etype in ("scalar_continuous", "scalar_count", "scalar_dict") and DIST_NAME.search(lname) and "px" not in lname and "pixel" not in lname:
            for key, v in _numbers(value):
                m = v * (1000.0 if "km" in lname else 1.0)
                if m < 0 or (scene["diagonal_m"] and m > scene["diagonal_m"] * 1.001):
                    what = "is negative" if m < 0 else f"exceeds the scene diagonal ({scene['diagonal_m']:.0f} m)"
                    a.add("sanity.distance", f"Answer field '{name}'{key} = {v:g} {what}; check units and pixel_size_m.", loc)
        if etype == "point_pixel":
            _pixel_point(a, name, value, answer, scene, loc)
        if etype == "point_haversine":
            _geo_point(a, name, value, answer, scene, loc)
    for name, gold in (polygons or {}).items():
        if types.get(name) == "polygon_iou":
            _polygon(a, name, gold)


def _numbers(value: Any):
    if isinstance(value, dict):
        for k, v in value.items():
            n = as_number(v)
            if n is not None:
                yield f"[{k!r}]", n
    else:
        n = as_number(value)
        if n is not None:
            yield "", n


def _ratio(a: Analysis, name: str, value: Any, loc: str):
    for key, v in _numbers(value):
        if v < 0 or v > 100:
            a.add("sanity.ratio", f"Answer field '{name}'{key} = {v:g} is outside [0, 1] (fraction) and [0, 100] (percentage); check the division.", loc)
        elif 1 < v <= 1.5:
            a.add("sanity.ratio", f"Answer field '{name}'{key} = {v:g} is above 1 as a fraction yet small as a percentage; the evaluator cannot tell its form: give a fraction ≤ 1 or a percentage.", loc)


def _pixel_point(a: Analysis, name: str, value: Any, answer: dict, scene: dict, loc: str):
    w, h = scene["width"], scene["height"]
    row = col = None
    if name.endswith("_row"):
        row, col = as_number(value), as_number(answer.get(name[:-4] + "_col"))
    elif name.endswith("_col"):
        return  # checked with its _row
    elif isinstance(value, dict):
        row, col = as_number(value.get("row", value.get("y"))), as_number(value.get("col", value.get("x")))
    elif isinstance(value, list) and len(value) == 2:
        row, col = as_number(value[0]), as_number(value[1])
        if h and w and row is not None and col is not None and not (0 <= row < h and 0 <= col < w) and (0 <= col < h and 0 <= row < w):
            return  # maybe (x, y): the order of a 2-list is not fixed
    if row is None or col is None:
        return
    if row < 0 or col < 0 or (h and row >= h) or (w and col >= w):
        a.add("sanity.point", f"Answer field '{name}': point (row {row:g}, col {col:g}) lies outside the raster ({h}×{w} px); check the pixel frame.", loc)


def _geo_point(a: Analysis, name: str, value: Any, answer: dict, scene: dict, loc: str):
    lat = lon = None
    for suf, other in (("_lat", "_lon"), ("_latitude", "_longitude")):
        if name.endswith(suf):
            lat = as_number(value)
            lon = as_number(answer.get(name[: -len(suf)] + other, answer.get(name[: -len(suf)] + ("_lon" if other == "_longitude" else "_longitude"))))
    if name.endswith(("_lon", "_longitude")):
        return
    if lat is None and isinstance(value, dict):
        lat, lon = as_number(value.get("lat", value.get("latitude"))), as_number(value.get("lon", value.get("longitude", value.get("lng"))))
    elif lat is None and isinstance(value, list) and len(value) == 2:
        lat, lon = as_number(value[0]), as_number(value[1])
    if lat is None or lon is None:
        return
    if not (-90 <= lat <= 90 and -180 <= lon <= 180):
        a.add("sanity.point", f"Answer field '{name}': ({lat:g}, {lon:g}) is not a latitude/longitude; check the order and the CRS.", loc)
        return
    boxes = [b for b in scene["bounds"] if isinstance(b, (list, tuple)) and len(b) == 4 and all(as_number(x) is not None for x in b)
             and -180 <= b[0] <= 180 and -90 <= b[1] <= 90]
    if boxes:
        def inside(b):
            mx, my = (b[2] - b[0]) * 0.05, (b[3] - b[1]) * 0.05
            return b[0] - mx <= lon <= b[2] + mx and b[1] - my <= lat <= b[3] + my
        if not any(inside(b) for b in boxes):
            a.add("sanity.point", f"Answer field '{name}': ({lat:g}, {lon:g}) lies outside the scene's bounds {boxes[0]}; check lat/lon order and the CRS.", loc)


def _polygon(a: Analysis, name: str, gold: Any):
    loc = f"final_answer.{name}"
    if gold is None:
        a.add("sanity.polygon", f"Answer field '{name}': the gold polygon file cannot be found or read; replay again or restore it under tasks/gold_polygons/.", loc)
        return
    if isinstance(gold, dict) and gold.get("type") == "FeatureCollection" and "dora_grid" not in gold and not gold.get("crs"):
        a.add("eval_spec.polygon_grid", f"Answer field '{name}': the gold polygon has no dora_grid {{transform, crs}}, so pixel-space predictions cannot be placed on it; write the grid of the source raster.", loc)
    elif isinstance(gold, dict) and "dora_grid" not in gold:
        a.add("eval_spec.polygon_grid", f"Answer field '{name}': the gold polygon has no dora_grid {{transform, crs}}; write the grid of the source raster.", loc)
    try:
        from shapely.geometry import shape
        from shapely.validation import explain_validity
    except ImportError:  # pragma: no cover
        return
    geoms = []
    try:
        if isinstance(gold, dict) and gold.get("type") == "FeatureCollection":
            geoms = [shape(f["geometry"]) for f in gold.get("features") or [] if isinstance(f, dict) and f.get("geometry")]
        elif isinstance(gold, dict) and gold.get("type") == "Feature":
            geoms = [shape(gold["geometry"])] if gold.get("geometry") else []
        elif isinstance(gold, dict) and gold.get("type"):
            geoms = [shape(gold)]
    except Exception as exc:  # malformed coordinates
        a.add("sanity.polygon", f"Answer field '{name}': the gold polygon cannot be read ({type(exc).__name__}: {exc}); write valid GeoJSON.", loc)
        return
    geoms = [g for g in geoms if not g.is_empty]
    if not geoms:
        a.add("sanity.polygon", f"Answer field '{name}': the gold polygon is empty (the evaluator then expects an empty answer); check the step that wrote it.", loc)
        return
    for k, g in enumerate(geoms):
        if g.geom_type not in ("Polygon", "MultiPolygon"):
            a.add("sanity.polygon", f"Answer field '{name}': feature {k} is a {g.geom_type}, not a polygon.", loc)
        elif not g.is_valid:
            a.add("sanity.polygon", f"Answer field '{name}': feature {k} is invalid ({explain_validity(g)}); repair it (buffer(0)) before release.", loc)


def check_determinism(hash_a: str, hash_b: str) -> list[Finding]:
    """``determinism.hash`` when two replays of the same revision give different hashes."""
    if hash_a and hash_b and hash_a != hash_b:
        return [finding("determinism.hash", f"Two replays of the task give different hashes ({hash_a[:12]}… vs {hash_b[:12]}…): a step is not deterministic (wall-clock, random, unordered output); find the step whose obs differ.", "replay")]
    return []
