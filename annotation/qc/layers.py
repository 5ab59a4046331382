"""What QC knows of a task's layers and the conventions of the tools that read them.

``layers`` maps a file name to a ``LayerInfo``-like dict: ``kind`` (raster|mask|vector),
``modality``, ``phase``, ``path`` (relative to the data root), ``crs``, ``frame``
(geographic|pixel), ``gsd_m``, ``width``, ``height``, ``class_map`` ({index: label}),
``band_count``, ``bounds``. Without it, layers are derived from ``input_data``
(:func:`layers_from_input_data`); when it is given (from the event's layers) a file named in the
task that is not among them is ``manifest.layer_unknown``.

Documented tables (the manifest and class checks read them):

* Modality expected by each tool (:data:`MODALITY_RULES`), transcribed from the catalogue
  semantics (dora-tools.json): the bi-temporal optical models, the optical+SAR damage model, the
  14-band multispectral models, the single-image optical models, the DEM tools.
* Class conventions of mask producers (:func:`mask_classes_of`): seg.building_damage(_opt_sar)
  and seg.road_damage → {0,1,2,3}; every other ``seg.*`` → {0,255}; ras.threshold →
  {false_value, true_value}; mask.compose_multiclass → {0} ∪ class_values; ras.clip → those of
  its input; a mask layer → its class map ∪ {0}.
"""
from __future__ import annotations

import json
import math
import os
from pathlib import PurePosixPath
from typing import Any

from kernel.inputs import PATH_SUFFIXES, VECTOR_SUFFIXES, input_entries, normalise_modality
from kernel.references import parse_reference

from .tool_info import resolve_tool

__all__ = ["MASK_KEYS", "is_file_string", "basename", "norm_crs", "class_set", "layers_from_input_data",
           "georeferenced", "as_number", "MODALITY_RULES", "CLASS_ARGS", "FOUR_CLASS_PRODUCERS", "BINARY", "GSD_RTOL",
           "METRIC_TOOLS", "CRS_TOOLS", "int_list", "mask_classes_of"]

#: result keys that hold a mask produced by the step
MASK_KEYS = ("mask_path", "output_path", "output_mask_path")


def is_file_string(value: Any) -> bool:
    """Whether ``value`` is a literal file path (a benchmark path suffix, not a reference)."""
    return (isinstance(value, str) and parse_reference(value) is None
            and value.strip().lower().endswith(PATH_SUFFIXES))


def basename(value: str) -> str:
    """The file name of a path as a task writes it (``/`` or ``\\`` separated)."""
    return PurePosixPath(str(value).strip().replace("\\", "/")).name


def norm_crs(value: Any) -> tuple[str | None, bool | None]:
    """(crs, georeferenced): 'pixel'/'none'/'image' → (None, False); absent → (None, None)."""
    if value is None:
        return None, None
    v = str(value).strip()
    if not v:
        return None, None
    if v.lower() in ("pixel", "none", "image", "unknown", "null"):
        return None, False
    return v, True


def class_set(class_map: Any) -> frozenset | None:
    """The class values of a class map (its integer keys and 0), or None when it has none or a key is
    not an integer."""
    if not isinstance(class_map, dict) or not class_map:
        return None
    values = set()
    for k in class_map:
        try:
            values.add(int(str(k).strip()))
        except ValueError:
            return None
    return frozenset(values | {0})


def layers_from_input_data(input_data: dict, classes: dict | None = None) -> dict[str, dict]:
    """LayerInfo dicts by file name, read from a benchmark ``input_data`` (task files).

    ``path`` is ``images/<path>`` (the benchmark's data root layout); ``crs`` from
    ``spatial_coordinate_system`` (or ``coordinate_system``), ``gsd_m`` from ``pixel_size_m`` (or
    ``GSD_m``); ``width``/``height``/``bounds`` when the entry carries them. ``classes`` (the
    sample's class maps) attaches a class map to the entry whose key or file stem matches.
    """
    layers: dict[str, dict] = {}
    classes = classes if isinstance(classes, dict) else {}
    for loc, path, entry in input_entries(input_data):
        fn = basename(path)
        key = loc.split(".")[-1]
        crs, geo = norm_crs(entry.get("spatial_coordinate_system", entry.get("coordinate_system", entry.get("crs"))))
        kind = "vector" if fn.lower().endswith(VECTOR_SUFFIXES) else "raster"
        stem = fn.rsplit(".", 1)[0]
        cmap = None
        for ck, cv in classes.items():
            if ck == key or ck == stem or stem.startswith(str(ck)):
                cmap = cv
                break
        modality = entry.get("modality") or ("vector" if kind == "vector" else "")
        if kind == "raster" and (cmap or normalise_modality(modality) == "mask"):
            kind = "mask"
        bands = entry.get("band_info", entry.get("band"))
        layers[fn] = {
            "file_name": fn, "kind": kind, "modality": modality, "phase": entry.get("_phase", ""),
            "path": "images/" + str(path).lstrip("/") if not os.path.isabs(str(path)) else str(path),
            "crs": crs, "georeferenced": geo,
            "gsd_m": entry.get("pixel_size_m", entry.get("GSD_m")),
            "width": entry.get("width"), "height": entry.get("height"), "bounds": entry.get("bounds"),
            "class_map": cmap or {}, "band_count": len(bands) if isinstance(bands, list) else entry.get("band_count"),
        }
    return layers


def georeferenced(layer: dict) -> bool | None:
    """Whether ``layer`` has a CRS: its ``georeferenced`` flag, else from its frame and CRS; None when
    unknown."""
    if "georeferenced" in layer and layer["georeferenced"] is not None:
        return layer["georeferenced"]
    frame = layer.get("frame")
    crs, geo = norm_crs(layer.get("crs"))
    if frame == "pixel":
        return False
    if geo is not None:
        return geo
    if frame == "geographic":
        return None  # geographic frame but no CRS recorded: unknown
    return None


def as_number(value: Any) -> float | None:
    """A finite number from a number or numeric string, else None."""
    if isinstance(value, bool):
        return None
    out = None
    if isinstance(value, (int, float)):
        out = float(value)
    elif isinstance(value, str):
        try:
            out = float(value.strip().rstrip("%"))
        except ValueError:
            return None
    return out if out is not None and math.isfinite(out) else None


# ============================================================================================
# Modality, class conventions (documented tables)
# ============================================================================================
_OPT = frozenset({"optical"})
_SAR = frozenset({"sar"})
_MS = frozenset({"multispectral"})
_DEM = frozenset({"dem"})

#: tool → {parameter: modalities it accepts}, and whether it is bi-temporal (pre/post pair).
#: Source: the catalogue's semantics (dora-tools.json) — "bi-temporal optical", "pre-event optical
#: + post-event SAR", "14 input bands (12 Sentinel-2 + DEM + slope)", "post-event optical image",
#: "UAV/airborne image", "from a DEM". Layers of unknown modality are not checked.
MODALITY_RULES: dict[str, dict] = {
    **{t: {"params": {"pre_image_path": _OPT, "post_image_path": _OPT}, "bitemporal": True}
       for t in ("seg.building_damage", "seg.road_damage", "seg.flood", "seg.lava",
                 "seg.landslide_bitemporal", "seg.reconstruction_building")},
    "seg.building_damage_opt_sar": {"params": {"pre_image_path": _OPT, "post_image_path": _SAR}, "bitemporal": True},
    "seg.landslide_ms": {"params": {"post_image_path": _MS}},
    "seg.reservoir": {"params": {"post_image_path": _MS}},
    **{t: {"params": {"post_image_path": _OPT}}
       for t in ("seg.vehicle", "seg.playground", "seg.swimming_pool", "seg.storage_tank", "seg.bridge",
                 "seg.harbor", "seg.roundabout", "seg.ship", "seg.plane", "seg.building_intact_aerial",
                 "seg.building_damage_aerial", "seg.building_destroyed_aerial", "seg.pool_aerial",
                 "seg.road_intact_aerial", "seg.road_debris_aerial", "seg.tree_fallen_aerial",
                 "seg.tree_standing_aerial", "seg.vehicle_free_aerial", "seg.vehicle_trapped_aerial",
                 "seg.water_aerial")},
    "seg.vegetation": {"params": {"image_path": _OPT}},
    "seg.building_lowres": {"params": {"image_path": _OPT}},
    "ras.slope": {"params": {"dem_path": _DEM}},
    "ras.hillshade": {"params": {"dem_path": _DEM}},
    "vis.before_after_panel": {"params": {}, "bitemporal": True},
}

#: tools whose class-index arguments apply to the mask named by another argument
CLASS_ARGS = {
    "ras.count_pixels": {"classes": "mask_path"},
    "ras.area": {"classes": "mask_path"},
    "ras.vectorize": {"classes": "mask_path"},
    "vec.road_centerline_extraction": {"intact_classes": "mask_path", "damaged_classes": "mask_path"},
}

#: producers of multi-class (0..3) masks; every other seg.* tool writes a binary {0,255} mask
FOUR_CLASS_PRODUCERS = {"seg.building_damage", "seg.building_damage_opt_sar", "seg.road_damage"}
BINARY = frozenset({0, 255})

#: two GSDs within this relative difference are the same value (a file's rounding of the raster's
#: own, an affine fit's spread): ``manifest.gsd_mismatch`` and the derived-value check use it
GSD_RTOL = 0.05

#: tools that measure in metres: without pixel_size_m they need a georeferenced (CRS) input
METRIC_TOOLS = {"vec.intersect", "vec.length", "vec.perimeter", "vec.nearest", "vec.max_polygon",
                "vec.graph_shortest_path", "vec.buffer", "vec.kbuffer"}
#: tools that map between pixels and the world: their raster must have a CRS
CRS_TOOLS = {"vec.pixel_to_world": "raster_path", "poi.world_to_pixel": "raster_path"}


def int_list(value: Any) -> list[int] | None:
    """A list of integers from an int, a list of integral numbers or its JSON text; None otherwise
    (booleans, an empty list, a non-integral value)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return [value]
    if not isinstance(value, list) or not value:
        return None
    out = []
    for v in value:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or int(v) != v:
            return None
        out.append(int(v))
    return out


def mask_classes_of(tool: str, args: dict, input_classes=lambda value: None) -> frozenset | None:
    """The class values of the mask a step writes, from the producing tool's convention.

    ``input_classes(value)`` gives the class set of an input argument value (for ras.clip).
    Returns None when the convention is unknown.
    """
    if tool in FOUR_CLASS_PRODUCERS:
        return frozenset({0, 1, 2, 3})
    if tool.startswith("seg."):
        return BINARY
    if tool == "ras.threshold":
        info, _ = resolve_tool(tool)
        tv = args.get("true_value", info.default("true_value") if info else 255)
        fv = args.get("false_value", info.default("false_value") if info else 0)
        if isinstance(tv, int) and isinstance(fv, int) and not isinstance(tv, bool) and not isinstance(fv, bool):
            return frozenset({tv, fv})
        return None
    if tool == "mask.compose_multiclass":
        values = int_list(args.get("class_values"))
        return frozenset({0, *values}) if values else None
    if tool == "ras.clip":
        return input_classes(args.get("image_path"))
    return None

