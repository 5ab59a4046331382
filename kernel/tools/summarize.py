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

from ._io import raster_meta
from .base import ToolContext, ToolError
from .spec import register

#: suffixes of the mask files report.extract_evidence describes (``model.py``)
_MASK_SUFFIXES = (".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp", ".webp")
_TS = re.compile(r"t\d+")
_TS_IN_STEM = re.compile(r"_(t\d+)(?:_|$|\.)")


# ============================================================================================
# report.extract_evidence
# ============================================================================================
def _collect_mask_paths(obj: Any, parent: str = "") -> list[tuple[str, str]]:
    """(source key, path) of the masks an observation names, depth first: a string under
    ``mask_path`` / ``output_mask_path``, each string value of a ``mask_paths`` object (key
    ``<parent>.mask_paths.<k>``), anything else searched recursively (list items as
    ``<parent>[i]``). A ``mask_paths`` list is searched like any list, so its bare strings are
    not collected — as ``_collect_paths`` in ``dora/tools/model.py``."""
    out: list[tuple[str, str]] = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            key = f"{parent}.{k}" if parent else str(k)
            if k in ("mask_path", "output_mask_path") and isinstance(v, str):
                out.append((key, v))
            elif k == "mask_paths" and isinstance(v, dict):
                out.extend((f"{key}.{kk}", vv) for kk, vv in v.items() if isinstance(vv, str))
            else:
                out.extend(_collect_mask_paths(v, key))
    elif isinstance(obj, list):
        for i, el in enumerate(obj):
            out.extend(_collect_mask_paths(el, f"{parent}[{i}]"))
    return out


def _timestamp_of_key(key: str) -> str | None:
    """The last ``t<digits>`` part of a source key (``mask_paths.t2`` → ``t2``), else None."""
    for part in reversed(key.replace("[", ".").replace("]", "").split(".")):
        if _TS.fullmatch(part):
            return part
    return None


def _timestamp_of_item(item: Any) -> str | None:
    """A loop item's ``timestamp`` (``t<digits>``), else ``_t<digits>`` in the stem of its
    post_image_path / image_path / mask_path."""
    if not isinstance(item, dict):
        return None
    ts = item.get("timestamp")
    if isinstance(ts, str) and _TS.fullmatch(ts):
        return ts
    for key in ("post_image_path", "image_path", "mask_path"):
        v = item.get(key)
        if isinstance(v, str):
            m = _TS_IN_STEM.search(Path(v).stem)
            if m:
                return m.group(1)
    return None


def _quadrant(row: float, col: float, h: int, w: int) -> str:
    """north/south by row < h/2, west/east by col < w/2 (the image taken as north-up)."""
    return ("north" if row < h / 2 else "south") + ("west" if col < w / 2 else "east")


def _load_mask_pil(path: Path) -> np.ndarray:
    """The mask as Pillow reads it (``np.array(Image.open(path))``), first channel of a
    multi-channel image — the benchmark's ``_safe_load_mask``; a file Pillow cannot read
    raises (and becomes an ``errors`` entry)."""
    from PIL import Image

    with Image.open(path) as im:
        arr = np.array(im)
    if arr.ndim == 3:
        arr = arr[..., 0]
    return arr


def _target_values(target_classes) -> list[int] | None:
    if not isinstance(target_classes, (list, tuple, set)):
        return None
    vals = set()
    for v in target_classes:
        try:
            iv = int(v)
        except (TypeError, ValueError):
            continue
        if iv != 0:
            vals.add(iv)
    return sorted(vals) or None


def _describe_mask(path: Path, shown_path: str, classes: dict, pixel_size_m, targets) -> dict:
    from scipy import ndimage

    arr = _load_mask_pil(path)
    if targets is not None:
        selected = np.isin(arr, targets)
        uniq, cnt = np.unique(arr[selected], return_counts=True)
        pairs = [(int(v), int(c)) for v, c in zip(uniq.tolist(), cnt.tolist()) if int(v) in targets]
    else:
        selected = arr != 0
        uniq, cnt = np.unique(arr, return_counts=True)
        pairs = [(int(v), int(c)) for v, c in zip(uniq.tolist(), cnt.tolist()) if int(v) != 0]
    total = int(sum(c for _, c in pairs))
    by_class: dict[str, dict] = {}
    for v, c in pairs:
        entry: dict[str, Any] = {"pixel_count": c, "label": classes.get(str(v), str(v))}
        if pixel_size_m is not None:
            entry["area_m2"] = float(c * (float(pixel_size_m) ** 2))
        by_class[str(v)] = entry
    bbox = centroid = region = None
    ncomp = 0
    if selected.any():
        rows, cols = np.nonzero(selected)
        bbox = {"row_min": int(rows.min()), "row_max": int(rows.max()),
                "col_min": int(cols.min()), "col_max": int(cols.max())}
        r, c = float(rows.mean()), float(cols.mean())
        centroid = {"row": r, "col": c}
        region = _quadrant(r, c, arr.shape[0], arr.shape[1])
        ncomp = int(ndimage.label(selected, structure=[[0, 1, 0], [1, 1, 1], [0, 1, 0]])[1])
    return {"mask_path": shown_path, "shape": [int(arr.shape[0]), int(arr.shape[1])],
            "nonzero_pixel_count": total,
            "nonzero_area_m2": float(total * (float(pixel_size_m) ** 2))
            if pixel_size_m is not None else None,
            "connected_components": ncomp, "bbox": bbox, "centroid": centroid,
            "dominant_region": region, "classes": classes, "target_classes": targets,
            "class_statistics": by_class}


def _trend(counts: list[int], peak_index: int) -> str:
    if len(counts) < 2:
        return "single_timestamp"
    if all(a <= b for a, b in zip(counts, counts[1:])):
        return "expanding_or_non_decreasing"
    if all(a >= b for a, b in zip(counts, counts[1:])):
        return "shrinking_or_non_increasing"
    return "expand_then_recede" if 0 < peak_index < len(counts) - 1 else "mixed"


@register("report.extract_evidence", server="Model", module="summarization",
          result_keys=["tool", "total_evidence_items", "evidence_items", "tool_rollup",
                       "timeline", "peak_timestamp", "trend", "errors"],
          notes={"trajectory": "steps with obs (tool.loop results {item,last_obs} accepted)",
                 "target_classes": "undocumented; restrict counting to these non-zero classes"})
def report_extract_evidence(ctx: ToolContext, trajectory: list[dict],
                            pixel_size_m: float | None = None, include_empty_masks: bool = False,
                            target_classes: list[int] | None = None) -> dict:
    """Deterministic evidence (no LLM) from the masks named in a trajectory's observations,
    as ``report_extract_evidence`` in ``dora/tools/model.py`` builds it.

    Steps: each dict {call|tool, obs}; a ``tool.loop`` result {item, last_obs} whose obs is
    missing, empty or not an object uses ``last_obs`` (source tool ``last_obs.tool``, timestamp
    from the item). Masks: see ``_collect_mask_paths``; files with an image suffix only. Each
    mask reference gives one item (a mask named twice is described twice): the mask as Pillow
    reads it (first channel), per-class pixel counts with the labels of the step's
    ``obs.classes`` (else the value itself, e.g. "255"), areas only with ``pixel_size_m`` (the
    mask's own georeferencing is not used), bbox, centroid, quadrant (row < h/2 → north,
    col < w/2 → west), 4-connected component count, ``classes`` (the step's class map, {}
    without one) and ``target_classes``. Masks with no counted pixel are left out unless
    ``include_empty_masks``. ``tool_rollup`` per source tool (``dominant_regions`` lists every
    item's quadrant). Timestamps: the last ``t<N>`` part of the source key, else the loop
    item's; a later mask of a timestamp replaces an earlier one in the ``timeline``, which is
    ordered by N, with its peak (first maximum) and trend (non-decreasing, non-increasing, a
    peak strictly inside: expand_then_recede, else mixed; one timestamp: single_timestamp).
    Never raises on a bad mask: ``errors`` lists {step_index (a string, as there), source_key,
    path, error} — 'file_not_found' or the reader's message.
    """
    tool = "report.extract_evidence"
    items: list[dict] = []
    errors: list[dict] = []
    rollup: dict[str, dict] = {}
    series: dict[str, dict] = {}
    targets = _target_values(target_classes)
    for step_index, step in enumerate(trajectory):
        if not isinstance(step, dict):
            continue
        obs = step.get("obs", {})
        call_name = step.get("call") or step.get("tool") or f"step_{step_index}"
        step_ts = None
        last = step.get("last_obs")
        if isinstance(last, dict) and (not isinstance(obs, dict) or not obs):
            obs = last
            call_name = obs.get("tool", call_name)
            step_ts = _timestamp_of_item(step.get("item"))
        classes = obs.get("classes") if isinstance(obs, dict) else None
        classes = {str(k): str(v) for k, v in classes.items()} if isinstance(classes, dict) else {}
        for key, value in _collect_mask_paths(obs):
            if Path(value).suffix.lower() not in _MASK_SUFFIXES:
                continue
            if "mask" not in key.lower() and "mask" not in Path(value).stem.lower():
                continue
            try:
                path = ctx.resolve(value, tool=tool, argument="trajectory")
            except ToolError:
                errors.append({"step_index": str(step_index), "source_key": key, "path": value,
                               "error": "file_not_found"})
                continue
            try:
                item = _describe_mask(path, value, classes, pixel_size_m, targets)
            except Exception as exc:  # unreadable: evidence, not a failure
                errors.append({"step_index": str(step_index), "source_key": key, "path": value,
                               "error": str(exc)})
                continue
            if not include_empty_masks and item["nonzero_pixel_count"] == 0:
                continue
            item["step_index"] = step_index
            item["source_tool"] = obs.get("tool", call_name) if isinstance(obs, dict) else call_name
            item["source_key"] = key
            items.append(item)
            roll = rollup.setdefault(str(item["source_tool"]), {
                "mask_count": 0, "total_nonzero_pixels": 0,
                "total_nonzero_area_m2": 0.0 if pixel_size_m is not None else None,
                "dominant_regions": []})
            roll["mask_count"] += 1
            roll["total_nonzero_pixels"] += item["nonzero_pixel_count"]
            if pixel_size_m is not None:
                roll["total_nonzero_area_m2"] += item["nonzero_area_m2"] or 0.0
            if item["dominant_region"] is not None:
                roll["dominant_regions"].append(item["dominant_region"])
            ts = _timestamp_of_key(key) or step_ts
            if ts is not None:
                series[ts] = {"nonzero_pixel_count": item["nonzero_pixel_count"],
                              "nonzero_area_m2": item["nonzero_area_m2"],
                              "source_tool": item["source_tool"],
                              "dominant_region": item["dominant_region"],
                              "connected_components": item["connected_components"]}
    timeline = peak = trend = None
    if series:
        ordered = sorted(series, key=lambda t: int(t[1:]))
        timeline = [{"timestamp": t, **series[t]} for t in ordered]
        counts = [series[t]["nonzero_pixel_count"] for t in ordered]
        peak = max(ordered, key=lambda t: series[t]["nonzero_pixel_count"])
        trend = _trend(counts, ordered.index(peak))
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
