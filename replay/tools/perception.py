"""Perception tools (``seg.*``).

Modes (``ToolContext.perception_mode``)
    ``gt`` (annotation and replay): the tool returns the ground-truth mask that the caller's
    ``gt_lookup`` links to its input image, remapped to the tool's class convention by LABEL
    NAME (never by pixel value, because datasets number their classes differently).
    No linked mask → ``GTMissingError``.
    ``model``: would load ``<checkpoint_dir>/<file>.safetensors``; without a configured
    directory, or without the file, ``ModelUnavailableError`` says so. Torch inference is not
    part of this package, so even with a checkpoint present the error says the backend is
    missing (never a stub observation).
    ``classical``: no classical method exists for the damage tools → ``ModelUnavailableError``.

Building damage convention (benchmark): 0 background, 1 intact, 2 partially damaged,
3 totally destroyed. xBD labels map as: no-damage → 1; minor-damage and major-damage → 2;
destroyed → 3; un-classified → 0 (its footprint could not be judged, so it is not counted as a
building of any damage level); background → 0.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ._io import raster_meta, read_mask, write_mask
from .base import (GTMask, GTMissingError, ModelUnavailableError, ToolContext, ToolError,
                   ToolInputError)
from .registry import register

DAMAGE_CLASSES = {0: "background", 1: "intact", 2: "partially damaged", 3: "totally destroyed"}

#: normalised label → building-damage class index
DAMAGE_LABELS = {
    "background": 0, "bg": 0, "no-building": 0, "un-classified": 0, "unclassified": 0,
    "ignore": 0,
    "no-damage": 1, "intact": 1, "undamaged": 1, "building-no-damage": 1, "no-damaged": 1,
    "minor-damage": 2, "major-damage": 2, "partially-damaged": 2, "partial-damage": 2,
    "damaged": 2, "building-damage": 2, "building-minor-damage": 2,
    "building-major-damage": 2,
    "destroyed": 3, "totally-destroyed": 3, "total-damage": 3, "building-total-damage": 3,
    "building-destroyed": 3,
}

#: checkpoint file of each perception tool (benchmark's MODEL_ZOO)
CHECKPOINTS = {
    "seg.building_damage": "seg_building_damage.safetensors",
    "seg.building_damage_opt_sar": "seg_building_damage_opt_sar.safetensors",
}


def normalise_label(label: str) -> str:
    return "-".join(str(label).strip().lower().replace("_", " ").replace("-", " ").split())


def remap_by_label(arr: np.ndarray, class_map: dict[int, str], table: dict[str, int], *,
                   tool: str, mask_name: str) -> tuple[np.ndarray, dict[int, int]]:
    """Remap GT pixel values to a tool's classes through their label names.

    Returns (remapped uint8 array, {gt value: tool class}). A value present in the mask without
    a label, or a label the tool cannot place, raises ``ToolError``.
    """
    present = [int(v) for v in np.unique(arr)]
    mapping: dict[int, int] = {}
    for value, label in sorted(class_map.items()):
        key = normalise_label(label)
        if key not in table:
            if int(value) in present:
                raise ToolError(f"GT mask {mask_name}: label {label!r} (value {value}) has no "
                                f"counterpart among the tool's classes", tool=tool,
                                expected=f"labels among {sorted(set(table))}")
            continue
        mapping[int(value)] = table[key]
    unnamed = [v for v in present if v not in mapping]
    if unnamed:
        raise ToolError(f"GT mask {mask_name} holds values {unnamed} that its class map "
                        f"{ {int(k): v for k, v in class_map.items()} } does not name", tool=tool,
                        expected="a class map naming every value of the mask")
    lut = np.zeros(max(max(present), max(mapping) if mapping else 0) + 1, dtype=np.uint8)
    for v, c in mapping.items():
        lut[v] = c
    if arr.min() < 0:
        raise ToolError(f"GT mask {mask_name} holds negative values", tool=tool)
    return lut[arr.astype(np.int64)], {v: mapping[v] for v in present}


def _model_unavailable(ctx: ToolContext, tool: str) -> ToolError:
    if ctx.perception_mode == "classical":
        return ModelUnavailableError("no classical method exists for this tool; use "
                                     "perception mode 'gt' or 'model'", tool=tool)
    ckpt = CHECKPOINTS.get(tool, f"{tool.replace('.', '_')}.safetensors")
    if ctx.checkpoint_dir is None:
        return ModelUnavailableError(
            "perception mode 'model' needs a checkpoint directory, and none is configured "
            f"(expected {ckpt} in it)", tool=tool, expected="ToolContext.checkpoint_dir")
    path = Path(ctx.checkpoint_dir) / ckpt
    if not path.is_file():
        return ModelUnavailableError(f"checkpoint not found: {path}", tool=tool,
                                     expected=f"{ckpt} in the checkpoint directory")
    return ModelUnavailableError(f"checkpoint {path.name} is present but this build has no torch "
                                 "inference backend", tool=tool)


def _bitemporal_damage(ctx: ToolContext, tool: str, pre_image_path: str,
                       post_image_path: str, *, always_png: bool = False) -> dict:
    pre = ctx.resolve(pre_image_path, tool=tool, argument="pre_image_path")
    post = ctx.resolve(post_image_path, tool=tool, argument="post_image_path")
    pre_meta = raster_meta(pre, tool=tool, argument="pre_image_path")
    post_meta = raster_meta(post, tool=tool, argument="post_image_path")
    if pre_meta.shape != post_meta.shape:
        raise ToolInputError(f"pre image is {pre_meta.height}x{pre_meta.width} but post image is "
                             f"{post_meta.height}x{post_meta.width}", tool=tool,
                             argument="post_image_path", expected="pre and post of one size")
    if ctx.perception_mode != "gt":
        raise _model_unavailable(ctx, tool)
    gt = ctx.gt_lookup(tool, {"pre_image_path": pre, "post_image_path": post}) \
        if ctx.gt_lookup else None
    if gt is None:
        raise GTMissingError(f"no ground-truth damage mask is linked to post image "
                             f"{Path(post_image_path).name}", tool=tool,
                             argument="post_image_path",
                             expected="a GT mask linked to the image in the sample manifest")
    if not isinstance(gt, GTMask):
        raise ToolError(f"gt_lookup returned {type(gt).__name__}, not GTMask", tool=tool)
    gt_path = Path(gt.path)
    if not gt_path.is_file():
        raise GTMissingError(f"linked ground-truth mask {gt_path.name} does not exist", tool=tool,
                             argument="post_image_path")
    arr, gt_meta = read_mask(gt_path, tool=tool, argument="post_image_path")
    if arr.shape != post_meta.shape:
        raise ToolError(f"GT mask {gt_path.name} is {arr.shape[0]}x{arr.shape[1]} but the post "
                        f"image is {post_meta.height}x{post_meta.width}", tool=tool,
                        argument="post_image_path", expected="a GT mask on the image's grid")
    remapped, used = remap_by_label(arr, {int(k): v for k, v in gt.class_map.items()},
                                    DAMAGE_LABELS, tool=tool, mask_name=gt_path.name)
    like = pre_meta if pre_meta.georeferenced else (gt_meta if gt_meta.georeferenced else None)
    if always_png:
        like = None
    suffix = ".tif" if like is not None else ".png"
    out_path = ctx.output_path(tool, {"pre": pre, "post": post, "gt": gt_path,
                                      "gt_classes": {str(k): v for k, v in sorted(gt.class_map.items())},
                                      "mode": "gt"}, suffix)
    write_mask(out_path, remapped, like=like, class_map=DAMAGE_CLASSES,
               pixel_size_m=gt.pixel_size_m)
    meta = {"mode": "gt", "gt_mask": gt_path.name,
            "class_remap": {str(k): int(v) for k, v in sorted(used.items())}}
    if gt.pixel_size_m is not None:
        meta["pixel_size_m"] = float(gt.pixel_size_m)
    return {"tool": tool, "mask_path": ctx.artifact_name(out_path),
            "classes": {str(k): v for k, v in DAMAGE_CLASSES.items() if k},
            "_meta": meta}


@register("seg.building_damage", server="Perception", module="perception",
          result_keys=["tool", "mask_path", "classes", "_meta"],
          notes={"pre_image_path": "3-band pre-event image",
                 "post_image_path": "3-band post-event image, same size as pre"})
def seg_building_damage(ctx: ToolContext, pre_image_path: str, post_image_path: str) -> dict:
    """Bi-temporal building damage map: uint8 class indices 0 background, 1 intact,
    2 partially damaged, 3 totally destroyed.

    GT mode returns the linked GT mask remapped by label (xBD: no-damage→1, minor/major→2,
    destroyed→3, un-classified→0). Output is a GeoTIFF carrying the pre image's
    georeferencing when it has one, else a PNG; the class map travels inside the file.
    ``_meta`` is deterministic: {mode, gt_mask (file name), class_remap, pixel_size_m?}; the
    benchmark's run-time fields (pid, timings) are left out so replays are byte-identical.
    Errors: pre/post of different sizes → ToolInputError; no GT → GTMissingError; model mode
    without checkpoints → ModelUnavailableError.
    """
    return _bitemporal_damage(ctx, "seg.building_damage", pre_image_path, post_image_path)


@register("seg.building_damage_opt_sar", server="Perception", module="perception",
          result_keys=["tool", "mask_path", "classes", "_meta"],
          notes={"pre_image_path": "optical pre-event image",
                 "post_image_path": "SAR post-event image, same size as pre"})
def seg_building_damage_opt_sar(ctx: ToolContext, pre_image_path: str,
                                post_image_path: str) -> dict:
    """Optical-pre / SAR-post building damage map, same classes and GT remapping as
    ``seg.building_damage``; the mask is always a PNG, as in the benchmark."""
    return _bitemporal_damage(ctx, "seg.building_damage_opt_sar", pre_image_path,
                              post_image_path, always_png=True)
