"""Summarisation tools (``report.extract_evidence``, ``model.summarize``): plain Python.

Both are deterministic. ``report.extract_evidence`` describes the masks that a trajectory
produced; ``model.summarize`` renders a fixed template from the trajectory's observations. The
benchmark's ``model.summarize`` asks an LLM (Gemini/OpenAI) for a JSON report; the catalogue
offers no parameter that switches between the two, so this implementation never calls a
model: it records the requested model name as ``requested_model`` and answers with
``model: "template"``, which keeps replays byte-identical.
"""
from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import numpy as np

from ._io import raster_meta, read_mask, read_mask_tags
from .base import ToolContext, ToolError
from .registry import register

_IMAGE_SUFFIXES = (".png", ".tif", ".tiff", ".jpg", ".jpeg")
_TS_FILE = re.compile(r"_t(\d+)(?=[._]|$)", re.IGNORECASE)


# ============================================================================================
# report.extract_evidence
# ============================================================================================
def _is_image(value: Any) -> bool:
    return isinstance(value, str) and value.lower().endswith(_IMAGE_SUFFIXES)


def _mask_refs(obs: Any, timestamp: str | None = None):
    """(key, path, timestamp) of the masks an observation names.

    Keys ``mask_path`` / ``output_mask_path``; ``mask_paths`` as a dict (its keys are
    timestamps) or a list; any other key holding an image path when the key or the file name
    says "mask". ``tool.loop`` results ({item, last_obs}) are searched item by item, with the
    item's ``timestamp``.
    """
    refs = []
    if isinstance(obs, list):
        for el in obs:
            if isinstance(el, dict) and "last_obs" in el:
                item = el.get("item") if isinstance(el.get("item"), dict) else {}
                ts = item.get("timestamp", timestamp)
                refs += _mask_refs(el.get("last_obs"), str(ts) if ts is not None else None)
            else:
                refs += _mask_refs(el, timestamp)
        return refs
    if not isinstance(obs, dict):
        return refs
    for key, value in obs.items():
        if key == "mask_paths":
            if isinstance(value, dict):
                for ts, p in value.items():
                    if _is_image(p):
                        refs.append((f"mask_paths.{ts}", p, str(ts)))
            elif isinstance(value, list):
                for i, p in enumerate(value):
                    if _is_image(p):
                        refs.append((f"mask_paths[{i}]", p, timestamp))
        elif key in ("mask_path", "output_mask_path"):
            if _is_image(value):
                refs.append((key, value, timestamp))
        elif _is_image(value) and ("mask" in key.lower() or "mask" in Path(value).name.lower()):
            refs.append((key, value, timestamp))
        elif key in ("results",) and isinstance(value, list):
            refs += _mask_refs(value, timestamp)
    return refs


def _natural(ts: str):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(ts))]


def _region(row: float, col: float, h: int, w: int) -> str:
    """Image quadrant of a point: north/south by the middle row, west/east by the middle
    column (the image is taken as north-up)."""
    ns = "north" if row < (h - 1) / 2.0 else "south"
    ew = "west" if col < (w - 1) / 2.0 else "east"
    return ns + ew


def _trend(values: list[float]) -> str:
    if len(values) < 2:
        return "single_timestamp"
    d = np.diff(values)
    if (d >= 0).all():
        return "expanding_or_non_decreasing"
    if (d <= 0).all():
        return "shrinking_or_non_increasing"
    peak = int(np.argmax(values))
    if (np.diff(values[:peak + 1]) >= 0).all() and (np.diff(values[peak:]) <= 0).all():
        return "expand_then_recede"
    return "mixed"


def _pixel_size(meta, tags_px, arg_px):
    if arg_px is not None:
        return float(arg_px)
    if tags_px:
        return float(tags_px)
    if meta.georeferenced and not meta.crs.is_geographic:
        t = meta.transform
        if not (t.b or t.d) and abs(abs(t.a) - abs(t.e)) <= 1e-9 * abs(t.a):
            try:
                f = float(meta.crs.linear_units_factor[1])
            except Exception:
                f = 1.0
            return abs(t.a) * f
    return None


def _describe(ctx, path: Path, arg_px, target_classes, class_labels):
    from scipy import ndimage

    arr, meta = read_mask(path, tool="report.extract_evidence", argument="trajectory")
    class_map, tags_px = read_mask_tags(path)
    px = _pixel_size(meta, tags_px, arg_px)
    present = [int(v) for v in np.unique(arr) if v != 0 and float(v).is_integer()]
    counted = [c for c in present if target_classes is None or c in target_classes]
    sel = np.isin(arr, counted) if counted else np.zeros(arr.shape, bool)
    n = int(sel.sum())
    h, w = arr.shape
    item = {"shape": [int(h), int(w)], "nonzero_pixel_count": n,
            "nonzero_area_m2": n * px * px if px is not None else None,
            "pixel_size_m": px, "classes": present,
            "target_classes": sorted(target_classes) if target_classes is not None else None}
    if n:
        _lab, ncomp = ndimage.label(sel, structure=[[0, 1, 0], [1, 1, 1], [0, 1, 0]])
        rows, cols = np.nonzero(sel)
        r, c = float(rows.mean()), float(cols.mean())
        item.update({"connected_components": int(ncomp),
                     "bbox": {"row_min": int(rows.min()), "row_max": int(rows.max()),
                              "col_min": int(cols.min()), "col_max": int(cols.max())},
                     "centroid": {"row": r, "col": c}, "dominant_region": _region(r, c, h, w)})
    else:
        item.update({"connected_components": 0, "bbox": None, "centroid": None,
                     "dominant_region": None})
    stats = {}
    for v in counted:
        k = int((arr == v).sum())
        label = (class_labels or {}).get(str(v)) or (class_map or {}).get(v) or f"class_{v}"
        entry = {"pixel_count": k, "label": str(label)}
        if px is not None:
            entry["area_m2"] = k * px * px
        stats[str(v)] = entry
    item["class_statistics"] = stats
    return item


@register("report.extract_evidence", server="Model", module="summarization",
          result_keys=["tool", "total_evidence_items", "evidence_items", "tool_rollup",
                       "timeline", "peak_timestamp", "trend", "errors"],
          notes={"trajectory": "steps with obs (tool.loop results {item,last_obs} accepted)",
                 "target_classes": "undocumented; restrict counting to these non-zero classes"})
def report_extract_evidence(ctx: ToolContext, trajectory: list[dict],
                            pixel_size_m: float | None = None, include_empty_masks: bool = False,
                            target_classes: list[int] | None = None) -> dict:
    """Deterministic evidence (no LLM) from the masks named in a trajectory's observations.

    Masks are found under ``mask_path``/``output_mask_path``, in ``mask_paths`` (dict keys are
    timestamps), or under any key holding an image path when the key or file name says "mask";
    a step may be {call, args, obs} or a ``tool.loop`` result {item, last_obs}. Each mask is
    described once (first reference wins): per-class pixel counts and areas, bbox, centroid,
    image quadrant (``dominant_region``, the image taken as north-up), 4-connected component
    count. Areas use ``pixel_size_m``, else the mask's own pixel-size tag, else a projected
    transform; otherwise they are null. ``target_classes`` restricts the counted classes.
    Masks with no counted pixel are left out unless ``include_empty_masks``. Timestamps come
    from ``mask_paths`` keys, a loop item's ``timestamp`` or ``_tN`` in the file name; the
    timeline sums pixels per timestamp in natural order, with its peak (first on ties) and a
    trend label (expanding_or_non_decreasing, shrinking_or_non_increasing, expand_then_recede,
    mixed, single_timestamp). Never raises on a bad mask: it is listed in ``errors``
    ('file_not_found' or the error text).
    """
    tool = "report.extract_evidence"
    targets = None
    if target_classes is not None:
        targets = {int(c) for c in target_classes if int(c) != 0}
    items, errors, seen = [], [], set()
    for step_index, step in enumerate(trajectory):
        if "obs" in step:
            obs = step.get("obs")
        elif "last_obs" in step:
            obs = [step]
        else:
            obs = step
        src_tool = step.get("call") or step.get("name") or step.get("tool")
        if not src_tool and isinstance(obs, dict):
            src_tool = obs.get("tool")
        if not src_tool and isinstance(obs, list) and obs and isinstance(obs[0], dict):
            lo = obs[0].get("last_obs") if "last_obs" in obs[0] else obs[0]
            src_tool = lo.get("tool") if isinstance(lo, dict) else None
        class_labels = None
        if isinstance(obs, dict) and isinstance(obs.get("classes"), dict):
            class_labels = {str(k): str(v) for k, v in obs["classes"].items()}
        for key, value, ts in _mask_refs(obs):
            if ts is None:
                m = _TS_FILE.search(Path(value).stem)
                ts = f"t{int(m.group(1))}" if m else None
            try:
                path = ctx.resolve(value, tool=tool, argument="trajectory")
            except ToolError:
                errors.append({"step_index": step_index, "source_key": key, "path": value,
                               "error": "file_not_found"})
                continue
            ident = (str(path), ts)
            if ident in seen:
                continue
            seen.add(ident)
            try:
                desc = _describe(ctx, path, pixel_size_m, targets, class_labels)
            except Exception as exc:  # unreadable or multi-band: evidence, not a failure
                errors.append({"step_index": step_index, "source_key": key, "path": value,
                               "error": str(exc)})
                continue
            if desc["nonzero_pixel_count"] == 0 and not include_empty_masks:
                continue
            items.append({"mask_path": value, **desc, "step_index": step_index,
                          "source_tool": src_tool, "source_key": key, "timestamp": ts})
    rollup: dict = {}
    for it in items:
        r = rollup.setdefault(str(it["source_tool"]), {"mask_count": 0, "total_nonzero_pixels": 0,
                                                       "total_nonzero_area_m2": 0.0,
                                                       "dominant_regions": []})
        r["mask_count"] += 1
        r["total_nonzero_pixels"] += it["nonzero_pixel_count"]
        if it["nonzero_area_m2"] is None or r["total_nonzero_area_m2"] is None:
            r["total_nonzero_area_m2"] = None
        else:
            r["total_nonzero_area_m2"] += it["nonzero_area_m2"]
        if it["dominant_region"] and it["dominant_region"] not in r["dominant_regions"]:
            r["dominant_regions"].append(it["dominant_region"])
    timeline = peak = trend = None
    stamped = [it for it in items if it["timestamp"] is not None]
    if stamped:
        per: dict = {}
        for it in stamped:
            e = per.setdefault(it["timestamp"], {"timestamp": it["timestamp"], "mask_count": 0,
                                                 "nonzero_pixel_count": 0,
                                                 "nonzero_area_m2": 0.0})
            e["mask_count"] += 1
            e["nonzero_pixel_count"] += it["nonzero_pixel_count"]
            if it["nonzero_area_m2"] is None or e["nonzero_area_m2"] is None:
                e["nonzero_area_m2"] = None
            else:
                e["nonzero_area_m2"] += it["nonzero_area_m2"]
        timeline = [per[k] for k in sorted(per, key=_natural)]
        counts = [e["nonzero_pixel_count"] for e in timeline]
        peak = timeline[int(np.argmax(counts))]["timestamp"]
        trend = _trend([float(c) for c in counts])
    return {"tool": tool, "total_evidence_items": len(items), "evidence_items": items,
            "tool_rollup": rollup, "timeline": timeline, "peak_timestamp": peak, "trend": trend,
            "errors": errors}


# ============================================================================================
# model.summarize
# ============================================================================================
_SKIP_KEYS = {"band", "band_a", "band_b", "row", "col", "pixel_row", "pixel_col", "x1", "x2",
              "y1", "y2", "threshold", "true_value", "false_value", "topk", "version",
              "window_size", "feature_idx", "step_index", "min_pixels", "grid_n", "n",
              "snap_buffer_px", "height", "width", "bands", "nodata", "rank", "columns"}
_MAX_STEPS = 40


def _step_parts(step: dict):
    obs = step.get("obs", step.get("last_obs", step))
    name = step.get("call") or step.get("name") or step.get("tool")
    if not name and isinstance(obs, dict):
        name = obs.get("tool")
    return str(name or "unknown"), obs


def _numbers(obs) -> list[tuple[str, float]]:
    """(key, value) of the finite numeric top-level fields of an observation (booleans and
    positional/index keys excluded), in key order; ``counts``-style dicts one level down as
    ``<key>.<sub>``."""
    out = []
    if not isinstance(obs, dict):
        return out
    for k in obs:
        v = obs[k]
        if k in _SKIP_KEYS or isinstance(v, bool):
            continue
        if isinstance(v, (int, float)) and math.isfinite(float(v)):
            out.append((str(k), v))
        elif isinstance(v, dict) and k in ("counts", "statistics", "stats", "totals"):
            for sk, sv in v.items():
                if isinstance(sv, (int, float)) and not isinstance(sv, bool) and \
                        math.isfinite(float(sv)):
                    out.append((f"{k}.{sk}", sv))
    return out


def _fmt(v) -> str:
    if isinstance(v, float):
        if v == int(v) and abs(v) < 1e15:
            return f"{int(v):,}"
        return f"{v:,.2f}" if abs(v) >= 100 else f"{v:.4g}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


@register("model.summarize", server="Model", module="summarization",
          result_keys=["summary", "image_observations", "key_findings", "statistics",
                       "recommendations", "confidence", "tool", "model", "image_input_count",
                       "status"],
          notes={"image_paths": "raw or derived images; non-existent paths dropped",
                 "model": "recorded as requested_model; this implementation renders a fixed "
                          "template and never calls an LLM"})
def model_summarize(ctx: ToolContext, task_question: str, trajectory: list[dict],
                    image_paths: list[str] | None = None,
                    final_answer_template: dict[str, Any] | None = None,
                    model: str = "gemini-3-flash-preview") -> dict:
    """Deterministic report from a trajectory by a fixed template (no LLM is called).

    The first 40 steps are read; ``statistics`` holds every finite numeric field of their
    observations (the last step reporting a key wins; index/position keys such as band, row,
    x1 are skipped; ``counts``/``stats`` dicts appear as ``counts.<k>``). ``key_findings``: one
    line per step with numbers (up to 4 per step, 12 steps). ``summary``: the question, the
    tools used and the findings. ``final_answer`` (with ``final_answer_template``): each
    template key filled from the statistic of the same name (case-insensitive), else null.
    ``recommendations`` follow fixed rules (damage found, route found or not, a default).
    ``confidence`` is "medium" with statistics and no failed step, else "low".
    ``image_observations`` lists size and bands of the images that exist; others are dropped.
    ``model`` is "template", ``requested_model`` the argument, ``status`` "template".
    """
    tool = "model.summarize"
    steps = trajectory[:_MAX_STEPS]
    stats: dict[str, Any] = {}
    findings, tools_used = [], []
    failed = 0
    route_found = route_missing = damage_seen = False
    for i, step in enumerate(steps):
        name, obs = _step_parts(step)
        if name not in tools_used:
            tools_used.append(name)
        if isinstance(obs, dict) and (obs.get("status") in ("stub", "error") or "error" in obs):
            failed += 1
        nums = _numbers(obs)
        for k, v in nums:
            stats[k] = v
            if ("damage" in k or "destroyed" in k) and v:
                damage_seen = True
        if isinstance(obs, dict) and "distance_m" in obs:
            if obs.get("distance_m") is None:
                route_missing = True
            else:
                route_found = True
        if nums and len(findings) < 12:
            shown = ", ".join(f"{k} = {_fmt(v)}" for k, v in nums[:4])
            findings.append(f"Step {i} ({name}): {shown}.")
        if name.startswith("seg.") and isinstance(obs, dict) and obs.get("mask_path"):
            damage_seen = damage_seen or "damage" in name
    images = []
    for p in image_paths or []:
        try:
            rp = ctx.resolve(p, tool=tool, argument="image_paths")
            meta = raster_meta(rp, tool=tool, argument="image_paths")
        except ToolError:
            continue
        images.append({"image": Path(str(p)).name, "width": meta.width, "height": meta.height,
                       "bands": meta.count,
                       "georeferenced": bool(meta.georeferenced)})
    lines = [f"Question: {task_question.strip()}",
             f"The analysis ran {len(steps)} tool step(s)"
             + (f" ({', '.join(tools_used)})." if tools_used else ".")]
    if len(trajectory) > _MAX_STEPS:
        lines.append(f"Only the first {_MAX_STEPS} of {len(trajectory)} steps were read.")
    lines += findings if findings else ["No step reported a numeric result."]
    final_answer = None
    if final_answer_template:
        lower = {k.lower(): k for k in stats}
        final_answer = {}
        for k in final_answer_template:
            hit = stats.get(k, stats.get(lower.get(str(k).lower(), ""), None))
            final_answer[k] = hit
        filled = [k for k, v in final_answer.items() if v is not None]
        lines.append(f"Answer fields filled from the results: {', '.join(filled) or 'none'}.")
    recs = []
    if damage_seen:
        recs.append("Prioritise field verification and response in the damaged areas "
                    "identified by the analysis.")
    if route_found:
        recs.append("Use the computed intact route for access; re-check it if conditions "
                    "change.")
    if route_missing:
        recs.append("No intact route was found: plan debris clearance or an alternative "
                    "access before dispatching vehicles.")
    recs.append("Confirm the automated estimates with ground reports before allocating "
                "resources.")
    out = {"tool": tool, "summary": " ".join(lines), "image_observations": images,
           "key_findings": findings, "statistics": stats, "recommendations": recs,
           "confidence": "medium" if stats and not failed else "low", "model": "template",
           "requested_model": model, "image_input_count": len(images), "status": "template",
           "steps_read": len(steps), "failed_steps": failed}
    if final_answer is not None:
        out["final_answer"] = final_answer
    return out
