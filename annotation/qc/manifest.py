"""Layer and input checks: the manifest (``input_data``) declares every file the steps read, the
files exist under the data root, each tool gets the modality, dates, GSD and CRS it needs
(``manifest.*``; the tables are in ``annotation.qc.layers``), and class indices name classes the
mask has (``classes.*``, run during the walk of the steps).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from annotation.variants import unsolvable_block, withheld_files
from kernel.inputs import input_entries, normalise_modality
from kernel.paths import OutsideRoot, confine
from kernel.references import find_all_references, parse_reference

from .layers import (
    BINARY,
    CLASS_ARGS,
    CRS_TOOLS,
    GSD_RTOL,
    METRIC_TOOLS,
    MODALITY_RULES,
    as_number,
    basename,
    georeferenced,
    int_list,
    is_file_string,
)
from .plan import Analysis, Scope
from .registry import declare
from .tool_info import ToolInfo

__all__ = ["CHECKS", "check_manifest", "check_classes"]

#: the checks of this concern: id → (severity, meaning)
CHECKS: dict[str, tuple[str, str]] = declare("manifest", {
    "manifest.layer_unknown": ("error", "a file named by the task is not a layer of the event"),
    "manifest.not_in_input_data": ("error", "a file used by a step is not declared in input_data"),
    "manifest.file_missing": ("error", "a layer's file is absent from the data root"),
    "manifest.outside_root": ("error", "a layer's path leaves the data root"),
    "manifest.gsd_missing": ("error", "a tool needs a pixel size but the source raster has no GSD"),
    "manifest.gsd_mismatch": ("warning", "a literal pixel_size_m differs from the source raster's GSD"),
    "manifest.crs_missing": ("error", "a tool needs a CRS (or pixel_size_m) the source layer lacks"),
    "manifest.modality": ("error", "the layer's modality does not fit the tool"),
    "manifest.single_date": ("error", "a bi-temporal tool gets one date twice"),
    "manifest.phase_order": ("warning", "a bi-temporal tool gets its dates swapped or out of order"),
    "manifest.ground_truth_input": ("warning", "the manifest gives the agent a ground-truth mask (the gold's own source)"),
    "classes.stale_index": ("error", "class indices that the mask does not contain"),
    "classes.binary_expected": ("warning", "a tool that merges binary masks gets a multi-class one"),
})


def check_manifest(a: Analysis, data_root: str | Path | None):
    """``manifest.*`` over the analysed task: files named but not layers of the event or not in
    ``input_data``, ground-truth masks given as inputs, files absent from ``data_root`` (None: not
    looked for) or outside it, then each tool call's modality, dates, CRS and GSD. Calls an
    unsolvable variant's gold never runs, and the files it withholds, are left out."""
    declared = {basename(p) for _, p, _ in input_entries(a.content.get("input_data") or {})}
    for loc, path, _entry in input_entries(a.content.get("input_data") or {}):
        fn = basename(path)
        if a.explicit_layers and fn not in a._explicit:
            a.add("manifest.layer_unknown", f"{loc}: '{fn}' is not a layer of this event; import it or pick an existing layer.", loc)
    for loc, path, _entry in input_entries(a.content.get("input_data") or {}):
        layer = a.layers.get(basename(path))
        if layer and layer.get("kind") == "mask":
            a.add("manifest.ground_truth_input", f"{loc}: '{basename(path)}' is a ground-truth mask (the replay's perception reads it for the gold); in input_data the agent gets the answer's source. Remove it unless the task means to hand the agent that mask.", loc)
    reported = set()
    # an unsolvable variant withholds these on purpose (annotation.qc.variants says why)
    withheld = withheld_files(a.content, a.content.get("variant"))
    for loc, value in a.files:
        fn = basename(value)
        if fn in reported or fn in withheld:
            continue
        if fn not in declared:
            reported.add(fn)
            if a.explicit_layers and fn not in a._explicit:
                a.add("manifest.layer_unknown", f"{loc}: '{value}' is neither a layer of this event nor a reference; use a layer's file name or <key> from trajectory[N].obs.", loc)
            else:
                a.add("manifest.not_in_input_data", f"{loc}: '{fn}' is not declared in input_data, so the agent cannot know it; add it to the manifest.", loc)
    if data_root is not None:
        for loc, path, _entry in input_entries(a.content.get("input_data") or {}):
            layer = a.layers.get(basename(path))
            if not layer or not layer.get("path"):
                continue
            try:
                p = confine(data_root, str(layer["path"]))
            except OutsideRoot:
                a.add("manifest.outside_root", f"{loc}: '{layer['path']}' resolves outside the data root; store the file under it.", loc)
                continue
            if not p.is_file():
                a.add("manifest.file_missing", f"{loc}: the file of '{basename(path)}' ({layer['path']}) is missing from the data root; import it again.", loc)
    # an unsolvable variant's gold replay stops at the step that needs what it took away
    # (annotation.variants.unsolvable_block): the calls from there on never run, and their
    # inputs are withheld on purpose, so their manifest is not checked
    blocked = unsolvable_block(a.content, a.content.get("variant"))
    for loc, info, args, scope in a.tool_calls:
        at = re.match(r"trajectory\[(\d+)\]", loc)
        if blocked is not None and at and int(at.group(1)) >= blocked["step"]:
            continue
        _check_call_manifest(a, loc, info, args, scope)


def _layers_of(a: Analysis, value: Any, scope: Scope) -> list[dict]:
    return [a.layers[fn] for fn in sorted(a.describe(value, scope).sources) if fn in a.layers]


def _check_call_manifest(a: Analysis, loc: str, info: ToolInfo, args: dict, scope: Scope):
    name = info.name
    label = f"{loc} ({name})"
    rule = MODALITY_RULES.get(name)
    if rule:
        for param, allowed in rule["params"].items():
            layer = a.layer(args.get(param))
            mod = normalise_modality(layer.get("modality")) if layer else None
            if mod and mod not in allowed:
                hint = ""
                if name == "seg.building_damage" and param == "post_image_path" and mod == "sar":
                    hint = " (for an optical pre / SAR post pair use seg.building_damage_opt_sar)"
                a.add("manifest.modality", f"{label}: '{param}' is '{basename(args.get(param))}', a {mod} layer, but this tool expects {'/'.join(sorted(allowed))}{hint}.", f"{loc}.args.{param}")
        if rule.get("bitemporal"):
            _check_dates(a, loc, label, args)
    if name in CRS_TOOLS:
        param = CRS_TOOLS[name]
        for layer in _layers_of(a, args.get(param), scope):
            if georeferenced(layer) is False:
                a.add("manifest.crs_missing", f"{label}: '{layer['file_name']}' has no CRS, so pixels cannot be mapped to the world; give the layer a CRS or answer in pixels.", f"{loc}.args.{param}")
    desc = a.describe({k: v for k, v in args.items() if k != "calls"}, scope)
    if name in METRIC_TOOLS and "pixel_size_m" not in args and not desc.px:
        srcs = [a.layers[fn] for fn in desc.sources if fn in a.layers]
        if srcs and all(georeferenced(l) is False for l in srcs):
            # one rule for metres on pixel-frame inputs: they need the rasters' GSD, passed as
            # pixel_size_m. No GSD recorded → gsd_missing (the same finding as with a literal
            # pixel_size_m below); a GSD recorded but not passed → crs_missing naming the value.
            rasters = [l for l in srcs if l.get("kind") != "vector"]
            gsds = sorted({g for g in (as_number(l.get("gsd_m")) for l in rasters) if g})
            names = ", ".join(sorted(l["file_name"] for l in srcs))
            if rasters and not gsds:
                a.add("manifest.gsd_missing", f"{label}: measures in metres but its inputs come from pixel-frame layers ({names}) with no CRS and no GSD recorded; a maintainer records the layer's GSD (event page), then pass it as pixel_size_m.", loc)
            else:
                value = f"={gsds[0]:g}" if len(gsds) == 1 else " (the layer's GSD)"
                a.add("manifest.crs_missing", f"{label}: measures in metres but its inputs come from pixel-frame layers ({names}) with no CRS and no pixel_size_m is given; pass pixel_size_m{value}.", loc)
    px = as_number(args.get("pixel_size_m")) if "pixel_size_m" in args and not find_all_references(args.get("pixel_size_m")) else None
    if px is not None:
        rasters = [a.layers[fn] for fn in sorted(desc.sources) if fn in a.layers and a.layers[fn].get("kind") != "vector"]
        gsds = [as_number(l.get("gsd_m")) for l in rasters]
        known = [g for g in gsds if g]
        if rasters and not known:
            a.add("manifest.gsd_missing", f"{label}: pixel_size_m={px:g} cannot be known by the agent: the source raster(s) {', '.join(l['file_name'] for l in rasters)} have no GSD (pixel_size_m) in the manifest; a maintainer records the layer's GSD (event page).", f"{loc}.args.pixel_size_m")
        elif known and min(abs(px - g) / g for g in known) > GSD_RTOL:
            a.add("manifest.gsd_mismatch", f"{label}: pixel_size_m={px:g} but the source raster's GSD is {', '.join(f'{g:g}' for g in sorted(set(known)))} m; use the manifest's value.", f"{loc}.args.pixel_size_m")


def _check_dates(a: Analysis, loc: str, label: str, args: dict):
    pre, post = args.get("pre_image_path"), args.get("post_image_path")
    if not isinstance(pre, str) or not isinstance(post, str):
        return
    if pre.strip() == post.strip() or (is_file_string(pre) and is_file_string(post) and basename(pre) == basename(post)):
        a.add("manifest.single_date", f"{label}: pre_image_path and post_image_path are the same image '{basename(pre) if is_file_string(pre) else pre}'; a bi-temporal tool needs a pre-event and a post-event image.", f"{loc}.args.post_image_path")
        return
    lpre, lpost = a.layer(pre), a.layer(post)
    if not lpre or not lpost:
        return
    pa, pb = str(lpre.get("phase") or ""), str(lpost.get("phase") or "")
    if pa and pb and pa == pb:
        a.add("manifest.single_date", f"{label}: both images are of phase '{pa}'; a bi-temporal tool needs two dates.", f"{loc}.args.post_image_path")
    elif (pa, pb) == ("post", "pre"):
        a.add("manifest.phase_order", f"{label}: pre_image_path is the post-event image and post_image_path the pre-event one; swap them.", f"{loc}.args.pre_image_path")
    else:
        ma, mb = re.fullmatch(r"t(\d+)", pa), re.fullmatch(r"t(\d+)", pb)
        if ma and mb and int(ma.group(1)) > int(mb.group(1)):
            a.add("manifest.phase_order", f"{label}: the 'pre' image is of phase {pa}, later than the 'post' image's {pb}; swap them.", f"{loc}.args.pre_image_path")


def check_classes(a: Analysis, info: ToolInfo, args: dict, loc: str, scope: Scope, label: str):
    """``classes.*`` of one call: class indices its mask argument's producer cannot write, and
    multi-class masks given to mask.compose_multiclass."""
    for class_arg, mask_arg in CLASS_ARGS.get(info.name, {}).items():
        wanted = int_list(args.get(class_arg))
        if not wanted:
            continue
        desc = a.describe(args.get(mask_arg), scope)
        known = desc.mask_classes
        if known is None:
            continue
        stale = sorted(set(wanted) - known)
        if stale:
            origin = _mask_origin(a, args.get(mask_arg), scope)
            valid = sorted(set(known) - {0}) or sorted(known)
            a.add("classes.stale_index",
                  f"{label} ({info.name}): class {', '.join(map(str, stale))} of '{class_arg}' is not in {origin} (classes {sorted(known)}); use indices from {valid}.",
                  f"{loc}.args.{class_arg}")
    if info.name == "mask.compose_multiclass":
        paths = args.get("mask_paths")
        if isinstance(paths, list):
            for k, value in enumerate(paths):
                known = a.describe(value, scope).mask_classes
                if known is not None and not (known <= BINARY or known <= frozenset({0, 1})):
                    a.add("classes.binary_expected",
                          f"{label} (mask.compose_multiclass): mask_paths[{k}] is a multi-class mask {sorted(known)} from {_mask_origin(a, value, scope)}; every positive pixel would get one class: binarise it first (ras.threshold).",
                          f"{loc}.args.mask_paths[{k}]")


def _mask_origin(a: Analysis, value: Any, scope: Scope) -> str:
    ref = parse_reference(value)
    if ref is not None and ref.kind == "trajectory" and ref.index < len(a.outs) and a.outs[ref.index] and a.outs[ref.index].info:
        return f"the mask of step {ref.index} ({a.outs[ref.index].info.name})"
    if ref is not None and ref.kind == "step" and scope.in_loop and ref.index < len(scope.calls) and scope.calls[ref.index] and scope.calls[ref.index].info:
        return f"the mask of loop call {ref.index} ({scope.calls[ref.index].info.name})"
    if is_file_string(value):
        return f"layer '{basename(value)}'"
    return "the mask"
