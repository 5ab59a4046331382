"""Quality control of benchmark tasks, over plain data (no database, no HTTP).

The paper's QC (seed 000, §3.4 "Quality control": question–answer alignment, eval-spec
completeness with zero unknown-type fields, numerical sanity) plus the structural, reference,
manifest, class-index, determinism and hygiene checks the studio needs. Every finding has a
stable ``check`` id (listed in ``CHECKS``), a severity (``error`` blocks submission, ``warning``
informs), a message that names the problem and the fix, and a location (``trajectory[2].args.
classes``, ``answer_spec[0]``, ``input_data.post_image`` ...).

Entry points
------------
``check_task(content, *, layers=None)``
    The fast checks, run on every save: structure, tools, references, classes, eval-spec,
    alignment, hygiene. ``content`` is the studio's task content: ``question``, ``trajectory``
    (``[{call, args}]``, ``obs`` optional), ``answer_spec`` (``[{name, eval_type, source,
    answer_format}]``), ``input_data``, ``classes`` and optionally ``final_answer`` (task files).
``full_qc(content, *, layers=None, replay=None, data_root=None, replay_hashes=None, polygons=None)``
    The fast checks plus manifest, numerical sanity (on the replayed gold), polygon golds and
    determinism. ``replay`` is ``{"trajectory": [{call, args, obs}], "final_answer": {...}}``.
``check_task_file(samples)``
    The layout of a benchmark task file (a list of samples with tasks): required fields, unique
    ids. ``content_from_dora_task(sample, task)`` maps one task onto the content shape.
``check_derived(content, derived)``
    Derived values against their sources (a manifest's GSD/CRS against its layers now, the gold
    replay's input fingerprint then and now); ``full_qc(..., derived=)`` runs it.
``check_determinism(hash_a, hash_b)``, ``release_findings(items)``, ``release_report(items)``.

Layers
------
``layers`` maps a file name to a ``LayerInfo``-like dict: ``kind`` (raster|mask|vector),
``modality``, ``phase``, ``path`` (relative to the data root), ``crs``, ``frame``
(geographic|pixel), ``gsd_m``, ``width``, ``height``, ``class_map`` ({index: label}),
``band_count``, ``bounds``. Without it, layers are derived from ``input_data``
(``layers_from_input_data``); when it is given (from the event's layers) a file named in the task
that is not among them is ``manifest.layer_unknown``.

Heuristics (documented here, reported as warnings)
-------------------------------------------------
* Alignment (``ALIGNMENT_RULES``): cue phrases of the query, matched on the lower-cased text,
  each demanding a field of some eval types: "how many"/"number of" → ``scalar_count`` or
  ``scalar_dict`` ("how many square metres …" is a measure, not a count); "how much", "what
  area/length/distance/volume", "how far/large" → a numeric field; "what share/percentage/
  proportion/fraction", "percent", "%" → ``ratio_pct``, ``scalar_dict`` or a percent-like
  ``scalar_continuous``; a question-word "where", "locate", "coordinates", "centroid" → a point
  or polygon field; a question-word "which", "what type/class/name…" → ``set_f1``,
  ``exact_match``, ``ranking_kendall`` or ``scalar_dict``; "rank", "sort", "prioritise",
  "top 3" → ``ranking_kendall`` (``set_f1`` for top-k); "route", "shortest path" → a length/
  distance field plus a line or two points. Relative "where"/"which" ("areas where flooding
  occurred") are not cues. The query splits into parts at "?", ";", ", and" and "and
  how/what/which/where…"; each part holding a cue is one asked quantity, and fewer scored fields
  (a ``_row``/``_col`` or ``_lat``/``_lon`` pair counts once) than asked quantities is
  ``alignment.quantity_missing``. A field of unknown type (already an error) matches any cue.
* Tools: the registry is the authority; the catalogue (``dora-tools.json``, found through
  ``STUDIO_TOOL_CATALOGUE``, ``STUDIO_SHARED`` or ``../shared/spec``) adds conditional result
  keys and their types, and lets a benchmark tool the studio does not implement be checked
  (``tools.not_implemented``). Reference types are compared as kinds (str/num/bool/list/dict)
  from the catalogue's "returns", else from the key's name.
* Modality expected by each tool (``MODALITY_RULES``), transcribed from the catalogue semantics
  (dora-tools.json): the bi-temporal optical models, the optical+SAR damage model, the 14-band
  multispectral models, the single-image optical models, the DEM tools.
* Class conventions of mask producers (``mask_classes_of``): seg.building_damage(_opt_sar) and
  seg.road_damage → {0,1,2,3}; every other ``seg.*`` → {0,255}; ras.threshold →
  {false_value, true_value}; mask.compose_multiclass → {0} ∪ class_values; ras.clip → those of
  its input; a mask layer → its class map ∪ {0}.
* Numerical sanity reads field names: area-like (``area``, ``_m2``, ``_km2``, ``_ha``) ≤ the
  scene's area; distance-like (``distance``) ≤ the scene's diagonal (route *lengths* are not
  bounded: roads wind); percent-like names and ``ratio_pct`` in [0, 1] as a fraction or
  [0, 100] as a percentage.
* Hygiene: a step is used when a later step or an answer source refers to it; in a task file,
  whose answers are literal values, a step whose observation holds an answer value counts as
  feeding the answer, and when some value cannot be traced no step is called unused.
"""
from __future__ import annotations

from kernel.catalogue import catalogue_by_name, parse_returns
from kernel.inputs import (PATH_SUFFIXES, VECTOR_SUFFIXES, input_entries, modality_config, normalise_modality,
                           phase_of_key)
from kernel.steps import step_args, step_call_raw
from kernel.vocabulary import BY_KEY, dimension_of_code, dimension_of_file

import difflib
import json
import math
import os
import re
import unicodedata
from collections import Counter
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import Any, Callable, Iterable

from kernel.references import find_all_references, format_path, parse_reference
from kernel.tools.registry import PAPER_ALIASES, UnknownToolError, get_tool
from kernel.paths import OutsideRoot, confine

from . import qc_tools, qc_variants
from .variants import unsolvable_block, withheld_files
from kernel.tools.registry import all_tools

__all__ = [
    "EVAL_TYPES", "CHECKS", "Finding", "check_task", "full_qc", "check_task_file",
    "content_from_dora_task", "layers_from_input_data", "check_determinism",
    "release_findings", "release_report", "has_errors", "MODALITY_RULES", "mask_classes_of",
    "used_layer_files", "input_entries", "DERIVED_MANIFEST_FIELDS", "stale_manifest_values", "answer_in_metres",
    "check_derived",
]

EVAL_TYPES = (
    "scalar_count",
    "scalar_continuous",
    "ratio_pct",
    "exact_match",
    "scalar_dict",
    "set_f1",
    "ranking_kendall",
    "polygon_iou",
    "point_pixel",
    "point_haversine",
    "ignore",
)

#: every check id → (severity, what it means). Severities are fixed per id.
CHECKS: dict[str, tuple[str, str]] = {
    # structure
    "structure.question": ("error", "the query is empty"),
    "structure.trajectory": ("error", "the trajectory has no step"),
    "structure.step": ("error", "a step is not {call: str, args: dict}"),
    "structure.input_data": ("error", "input_data is not a dict of layer entries with a path"),
    "structure.field": ("error", "a field the benchmark's task-file layout requires is missing or of the wrong type"),
    "structure.duplicate_id": ("error", "two samples share a sample id (question ids collide)"),
    "structure.category": ("warning", "task_category_code is not T1..T5 or a sub-code (T1-1, T1.2), or is another dimension's than its file's"),
    # tools
    "tools.exists": ("error", "the tool is in neither the registry nor the catalogue"),
    "tools.not_implemented": ("warning", "the tool is in the benchmark's catalogue but the studio cannot replay it"),
    "tools.alias": ("warning", "the tool is named by an alias; write the code's dotted name"),
    "tools.required_argument": ("error", "a required argument is missing"),
    "tools.unknown_argument": ("error", "an argument is not a parameter of the tool"),
    "tools.invalid_value": ("error", "a literal argument value fails the tool's input schema"),
    "tools.loop_nesting": ("error", "a POI/Vis/Model tool is nested in tool.loop (the benchmark cannot)"),
    # references
    "references.order": ("error", "a reference points to the same or a later step"),
    "references.key": ("error", "a reference names a key the step's result does not have"),
    "references.type": ("error", "a reference's value type does not fit the argument or answer type"),
    "references.loop_scope": ("error", "step[N] or <item.…> used outside a tool.loop's calls"),
    "references.malformed": ("error", "a value written as a reference is not one (e.g. it names a deleted step)"),
    # manifest
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
    # classes
    "classes.stale_index": ("error", "class indices that the mask does not contain"),
    "classes.binary_expected": ("warning", "a tool that merges binary masks gets a multi-class one"),
    # eval spec
    "eval_spec.empty": ("error", "the answer has no field"),
    "eval_spec.name": ("error", "an answer field has no name"),
    "eval_spec.duplicate": ("error", "an answer field is declared twice"),
    "eval_spec.unknown_type": ("error", "an eval_spec type the evaluator does not know"),
    "eval_spec.source": ("error", "an answer field has no source"),
    "eval_spec.all_ignored": ("error", "every answer field is 'ignore'"),
    "eval_spec.point_pair": ("error", "a _row/_col or _lat/_lon field has no partner of the same type"),
    "eval_spec.field_mismatch": ("error", "final_answer and eval_spec do not name the same fields"),
    "eval_spec.polygon_grid": ("error", "a polygon gold has no dora_grid"),
    # numerical sanity
    "sanity.count": ("error", "a count is not a non-negative integer"),
    "sanity.ratio": ("error", "a ratio/percentage is out of range for its form"),
    "sanity.area": ("error", "an area is negative or exceeds the scene's area"),
    "sanity.distance": ("error", "a distance is negative or exceeds the scene's diagonal"),
    "sanity.point": ("error", "a point lies outside the raster (or outside lat/lon range)"),
    "sanity.polygon": ("error", "a polygon gold is invalid, unreadable or empty"),
    "sanity.nan": ("error", "a gold value is missing, null or NaN"),
    "sanity.step_failed": ("error", "a replayed step has no observation or a stub one"),
    # determinism
    "determinism.hash": ("error", "two replays of the task give different hashes"),
    # question–answer alignment (heuristic)
    "alignment.count": ("warning", "the query asks 'how many' but no field is a count"),
    "alignment.measure": ("warning", "the query asks for an area/length/amount but no field is numeric"),
    "alignment.ratio": ("warning", "the query asks for a share/percentage but no field is a ratio"),
    "alignment.location": ("warning", "the query asks 'where' but no field is a point or polygon"),
    "alignment.choice": ("warning", "the query asks 'which' but no field is a set or exact match"),
    "alignment.ranking": ("warning", "the query asks for a ranking but no field is a ranking"),
    "alignment.route": ("warning", "the query asks for a route but the answer lacks a length or endpoints"),
    "alignment.quantity_missing": ("warning", "the query asks for more quantities than the answer has fields"),
    # hygiene
    "hygiene.unused_step": ("warning", "nothing uses the step's output"),
    "hygiene.unused_layer": ("warning", "a manifest layer no step uses"),
    # derived values: what a revision copied from other records, against those records now
    "derived.manifest_stale": ("error", "a GSD/CRS the manifest copied from its layer differs from the layer's now, and the answer is in metres"),
    "derived.manifest_outdated": ("warning", "a GSD/CRS the manifest copied from its layer differs from the layer's now"),
    "derived.gold_stale": ("warning", "the gold replay read inputs (layer files, GSD/CRS, tool versions) that changed since"),
    # release level
    "release.duplicate_question": ("warning", "two questions are the same or nearly the same"),
    # tool parity (annotation/qc_tools.py)
    **qc_tools.CHECKS,
    # robustness variants (annotation/qc_variants.py)
    **qc_variants.CHECKS,
}

#: servers whose tools ``tool.loop`` cannot call (catalogue, tool.loop semantics)
NON_NESTABLE_SERVERS = ("POI", "Vis", "Model")

#: suffixes the benchmark treats as file paths (``resolve_paths`` in dora/benchmark.py): kernel.inputs
FILE_SUFFIXES = PATH_SUFFIXES

#: result keys that hold a mask produced by the step
MASK_KEYS = ("mask_path", "output_path", "output_mask_path")

LOOP_TOOL = "tool.loop"


@dataclass(frozen=True)
class Finding:
    check: str
    severity: str  # "error" or "warning"
    message: str
    location: str

    def as_dict(self) -> dict:
        return asdict(self)


def has_errors(findings: list[Finding]) -> bool:
    return any(f.severity == "error" for f in findings)


def _finding(check: str, message: str, location: str) -> Finding:
    return Finding(check, CHECKS[check][0], message, location)


def _sorted(findings: list[Finding]) -> list[Finding]:
    seen, out = set(), []
    for f in findings:
        key = (f.check, f.location, f.message)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return sorted(out, key=lambda f: f.severity != "error")


# ============================================================================================
# Tool information: the registry, completed by the catalogue where one is found
# ============================================================================================
@dataclass(frozen=True)
class ParamInfo:
    name: str
    type: str
    required: bool
    default: Any = None


@dataclass(frozen=True)
class ToolInfo:
    name: str
    server: str
    params: tuple[ParamInfo, ...]
    result_keys: frozenset
    result_types: dict = field(default_factory=dict, compare=False, hash=False)
    spec: Any = field(default=None, compare=False, hash=False)  # registry ToolSpec, or None

    @property
    def registered(self) -> bool:
        return self.spec is not None

    def param(self, name: str) -> ParamInfo | None:
        return next((p for p in self.params if p.name == name), None)

    def default(self, name: str) -> Any:
        p = self.param(name)
        return p.default if p else None


#: result keys the tools return only in some cases, which the registry's list leaves out
#: (catalogue "returns"); used when no catalogue file is found
EXTRA_RESULT_KEYS = {
    "vec.centroid": ("latitude", "longitude", "pixel_row", "pixel_col", "centroid_x", "centroid_y", "note"),
    "tool.reduce": ("region", "row_idx", "col_idx", "mean_value"),
    "ras.vectorize": ("note",),
    "vec.filter_by_area": ("original_count", "filtered_count", "removed_count"),
    "vec.length": ("count", "note"),
    "vec.perimeter": ("count", "note"),
}


def _catalogue() -> dict[str, dict]:
    """The benchmark's tool catalogue by dotted name ({} when no catalogue file is found; kernel.catalogue)."""
    return catalogue_by_name()


_parse_returns = parse_returns


def _catalogue_name(text: str) -> str | None:
    cat = _catalogue()
    if text in cat:
        return text
    alias = PAPER_ALIASES.get(text)
    if alias in cat:
        return alias
    if "." not in text and "_" in text:
        dotted = text.replace("_", ".", 1)
        if dotted in cat:
            return dotted
    for name, entry in cat.items():
        if entry.get("alias") == text:
            return name
    return None


def _known_tool_names() -> list[str]:
    return sorted(set(all_tools()) | set(_catalogue()))


def _clean_call(raw: str) -> str:
    text = raw.strip()
    if "(" in text:
        text = text[: text.index("(")].strip()
    return text


@lru_cache(maxsize=512)
def resolve_tool(raw: str) -> tuple[ToolInfo | None, str | None]:
    """``(ToolInfo or None, alias used or None)`` for a step's call text."""
    text = _clean_call(raw)
    spec = None
    try:
        spec = get_tool(text)
    except UnknownToolError:
        spec = None
    cat_name = spec.name if spec is not None else _catalogue_name(text.removeprefix("functions."))
    entry = _catalogue().get(cat_name) if cat_name else None
    if spec is None and entry is None:
        return None, None
    cat_types = _parse_returns(entry.get("returns", ())) if entry else {}
    if spec is not None:
        params = tuple(ParamInfo(p.name, p.type, p.required, p.default) for p in spec.params)
        keys = set(spec.result_keys) | set(cat_types) | set(EXTRA_RESULT_KEYS.get(spec.name, ()))
        info = ToolInfo(spec.name, spec.server, params, frozenset(keys), cat_types, spec)
    else:
        params = tuple(ParamInfo(p["name"], p.get("type", "any"), bool(p.get("required")), p.get("default"))
                       for p in entry.get("params", ()))
        keys = set(cat_types) | set(EXTRA_RESULT_KEYS.get(cat_name, ())) | {"tool"}
        info = ToolInfo(cat_name, entry.get("server", ""), params, frozenset(keys), cat_types, None)
    alias = text if text != info.name else None
    return info, alias


# ---- value kinds, for reference type compatibility ----------------------------------------
_KIND_OF_WORD = {"str": "str", "string": "str", "int": "num", "float": "num", "number": "num",
                 "bool": "bool", "list": "list", "dict": "dict"}
_LIST_KEYS = {"windows", "features", "results", "ranked", "allocations", "records", "filtered_results",
              "topk_polygons", "buffers", "path_pixels", "evidence_items", "matches", "repair_edges",
              "exposed_pois", "feature_stats", "image_shape", "out_shape", "image_size", "class_values",
              "point_a", "point_b", "base_tile_px", "shape", "band_map"}
_DICT_KEYS = {"counts", "groups", "classes", "data", "statistics", "stats", "pixel_values", "best_item",
              "window", "image_bounds", "_meta", "components", "top_exposed_poi"}
_NUM_SUFFIXES = ("_count", "_m", "_m2", "_m3", "_px", "_px2", "_pixels", "_value", "_ratio", "_idx", "_index")
_NUM_KEYS = {"count", "total", "sum", "product", "difference", "diff", "ratio", "value", "score", "min", "max",
             "mean", "std", "area_m2", "distance_m", "distance_px", "threshold", "row", "col", "latitude",
             "longitude", "pixel_row", "pixel_col", "best_value", "best_index", "trips_required",
             "iteration_count", "selected_pixels", "valid_pixels", "total_pixels", "feature_idx", "a", "b",
             "row_idx", "col_idx", "pixel_size_m", "volume_m3", "mean_value"}


def _result_kind(info: ToolInfo | None, key: str) -> str | None:
    if info is not None and key in info.result_types:
        kind = _KIND_OF_WORD.get(info.result_types[key])
        if kind:
            return kind
    if key in _LIST_KEYS:
        return "list"
    if key in _DICT_KEYS:
        return "dict"
    if key.endswith("_path") or key == "path":
        return "str"
    if key in _NUM_KEYS or key.startswith(("total_", "max_", "min_", "num_")) or key.endswith(_NUM_SUFFIXES):
        return "num"
    return None


def _param_kinds(type_str: str) -> set[str] | None:
    kinds = set()
    for part in str(type_str or "any").split("|"):
        part = part.strip().lower()
        if part.startswith("list"):
            kinds.add("list")
        elif part.startswith("dict"):
            kinds.add("dict")
        elif part in ("str",):
            kinds.add("str")
        elif part in ("int", "float"):
            kinds.add("num")
        elif part == "bool":
            kinds.add("bool")
        elif part in ("null", "none"):
            continue
        else:
            return None
    return kinds or None


def _compatible(result_kind: str | None, wanted: set[str] | None, param_name: str = "") -> bool:
    if result_kind is None or wanted is None or result_kind in wanted:
        return True
    if result_kind in ("num", "bool") and wanted & {"num", "bool"}:
        return True
    if result_kind == "str" and param_name == "loop_over":  # a .geojson path is expanded (gold replay)
        return True
    return False


#: the kinds of value an answer field of each eval type holds
ANSWER_KINDS = {
    "scalar_count": {"num"}, "scalar_continuous": {"num"}, "ratio_pct": {"num"},
    "scalar_dict": {"dict"}, "set_f1": {"list", "str"}, "ranking_kendall": {"list"},
    "polygon_iou": {"str", "dict"}, "point_pixel": {"num", "list", "dict"},
    "point_haversine": {"num", "list", "dict"},
}

# ============================================================================================
# Layers
# ============================================================================================
_norm_modality = normalise_modality


def _is_file_string(value: Any) -> bool:
    return (isinstance(value, str) and parse_reference(value) is None
            and value.strip().lower().endswith(FILE_SUFFIXES))


def _basename(value: str) -> str:
    return PurePosixPath(str(value).strip().replace("\\", "/")).name


_phase_of_key = phase_of_key
_input_entries = input_entries


def _norm_crs(value: Any) -> tuple[str | None, bool | None]:
    """(crs, georeferenced): 'pixel'/'none'/'image' → (None, False); absent → (None, None)."""
    if value is None:
        return None, None
    v = str(value).strip()
    if not v:
        return None, None
    if v.lower() in ("pixel", "none", "image", "unknown", "null"):
        return None, False
    return v, True


def _class_set(class_map: Any) -> frozenset | None:
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
    for loc, path, entry in _input_entries(input_data):
        fn = _basename(path)
        key = loc.split(".")[-1]
        crs, geo = _norm_crs(entry.get("spatial_coordinate_system", entry.get("coordinate_system", entry.get("crs"))))
        kind = "vector" if fn.lower().endswith(VECTOR_SUFFIXES) else "raster"
        stem = fn.rsplit(".", 1)[0]
        cmap = None
        for ck, cv in classes.items():
            if ck == key or ck == stem or stem.startswith(str(ck)):
                cmap = cv
                break
        modality = entry.get("modality") or ("vector" if kind == "vector" else "")
        if kind == "raster" and (cmap or _norm_modality(modality) == "mask"):
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


def _georeferenced(layer: dict) -> bool | None:
    if "georeferenced" in layer and layer["georeferenced"] is not None:
        return layer["georeferenced"]
    frame = layer.get("frame")
    crs, geo = _norm_crs(layer.get("crs"))
    if frame == "pixel":
        return False
    if geo is not None:
        return geo
    if frame == "geographic":
        return None  # geographic frame but no CRS recorded: unknown
    return None


def _num(value: Any) -> float | None:
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


def _int_list(value: Any) -> list[int] | None:
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
        values = _int_list(args.get("class_values"))
        return frozenset({0, *values}) if values else None
    if tool == "ras.clip":
        return input_classes(args.get("image_path"))
    return None


# ============================================================================================
# The task analysis
# ============================================================================================
@dataclass
class _Out:
    """What a step (or a loop call) produces, as far as QC can tell."""
    info: ToolInfo | None
    args: dict
    sources: frozenset = frozenset()  # layer file names upstream
    px: bool = False  # a literal pixel_size_m upstream
    mask_classes: frozenset | None = None
    list_obs: bool = False  # a return_all tool.loop: only 'results'


@dataclass
class _Scope:
    at: int  # top-level index of the step (references must point before it)
    calls: list | None = None  # loop call outs so far (inside a loop)
    call_index: int | None = None
    item_sources: frozenset = frozenset()

    @property
    def in_loop(self) -> bool:
        return self.calls is not None


def _step_call(step: dict) -> Any:
    return step_call_raw(step)


def _loop_returns_list(args: Any) -> bool:
    """Whether a ``tool.loop`` with these args returns a bare list (``return_all``, true unless
    given false), whose only reference key is ``results``."""
    return not isinstance(args, dict) or args.get("return_all", True) is not False


def reference_accepts(steps: list) -> Callable[[int, str], bool]:
    """``accepts(N, key)`` for ``kernel.content.answer_source``: whether the ``references.key``
    check below takes ``<key> from trajectory[N].obs`` of these authored steps — the keys of a
    return_all ``tool.loop`` are ``results`` only, a known tool's are its result keys, an unknown
    tool's are not checked (any key)."""
    def accepts(index: int, key: str) -> bool:
        step = steps[index] if 0 <= index < len(steps) else None
        if not isinstance(step, dict):
            return True
        info, _alias = resolve_tool(str(_step_call(step) or ""))
        if info is None:
            return True
        if info.name == LOOP_TOOL and _loop_returns_list(_step_args(step)):
            return key == "results"
        return key in info.result_keys
    return accepts


def _step_args(step: dict) -> Any:
    return step_args(step, {})


class _Analysis:
    def __init__(self, content: dict, layers: dict | None):
        self.content = content if isinstance(content, dict) else {}
        self.explicit_layers = layers is not None
        self._explicit = set(layers or {})
        self.input_layers = layers_from_input_data(self.content.get("input_data") or {}, self.content.get("classes"))
        merged = {}
        for fn, info in self.input_layers.items():
            merged[fn] = dict(info)
        if layers is not None:
            for fn, info in layers.items():
                base = merged.get(fn, {})
                # the event's layer is the authority; input_data gives the phase when it lacks one
                merged[fn] = {**base, **{k: v for k, v in info.items() if v not in (None, "", [], {})}}
                if not merged[fn].get("phase") and base.get("phase"):
                    merged[fn]["phase"] = base["phase"]
        self.layers = merged
        self.findings: list[Finding] = []
        self.steps = self.content.get("trajectory") or []
        self.outs: list[_Out | None] = []
        self.refs_to: dict[int, list[str]] = {}  # step index → locations referring to it
        self.files: list[tuple[str, str]] = []  # (location, literal file string) in step args
        self.tool_calls: list[tuple[str, ToolInfo, dict, _Scope]] = []  # every (nested) call, for later checks

    def add(self, check: str, message: str, location: str):
        self.findings.append(_finding(check, message, location))

    # ---- layers / values ------------------------------------------------------------------
    def layer(self, value: Any) -> dict | None:
        if not _is_file_string(value):
            return None
        return self.layers.get(_basename(value))

    def describe(self, value: Any, scope: _Scope) -> _Out:
        """Sources/px/mask classes of an argument value."""
        if isinstance(value, (list, tuple)):
            outs = [self.describe(v, scope) for v in value]
            return _Out(None, {}, frozenset().union(*(o.sources for o in outs)) if outs else frozenset(),
                        any(o.px for o in outs))
        if isinstance(value, dict):
            return self.describe(list(value.values()), scope)
        ref = parse_reference(value)
        if ref is not None:
            src = None
            if ref.kind == "trajectory" and ref.index < min(scope.at, len(self.outs)):
                src = self.outs[ref.index]
            elif ref.kind == "step" and scope.in_loop and ref.index < len(scope.calls):
                src = scope.calls[ref.index]
            elif ref.kind == "item":
                return _Out(None, {}, scope.item_sources)
            if src is None:
                return _Out(None, {})
            return _Out(src.info, {}, src.sources, src.px, src.mask_classes if ref.key in MASK_KEYS else None)
        if _is_file_string(value):
            fn = _basename(value)
            layer = self.layers.get(fn)
            return _Out(None, {}, frozenset({fn}), False, _class_set(layer.get("class_map")) if layer else None)
        return _Out(None, {})

    # ---- structure ------------------------------------------------------------------------
    def check_structure(self):
        c = self.content
        if not str(c.get("question", "") or "").strip():
            self.add("structure.question", "The query is empty: write the question.", "question")
        if not isinstance(self.steps, list) or not self.steps:
            self.add("structure.trajectory", "The trajectory has no step: add at least one tool call.", "trajectory")
            self.steps = self.steps if isinstance(self.steps, list) else []
        input_data = c.get("input_data")
        if input_data not in (None, {}) and not isinstance(input_data, dict):
            self.add("structure.input_data", "input_data must be an object mapping a key to a layer entry.", "input_data")
        elif isinstance(input_data, dict):
            for key, entry in input_data.items():
                if isinstance(entry, str):
                    continue
                if not isinstance(entry, dict):
                    self.add("structure.input_data", f"input_data.{key} must be a layer entry {{image_path|path, ...}}.",
                             f"input_data.{key}")
                    continue
                if not (entry.get("image_path") or entry.get("path")) and not any(isinstance(v, dict) for v in entry.values()):
                    self.add("structure.input_data",
                             f"input_data.{key} has no image_path (rasters) or path (vectors): name the layer's file.",
                             f"input_data.{key}")

    # ---- tools, references, classes --------------------------------------------------------
    def check_steps(self):
        for i, step in enumerate(self.steps):
            loc = f"trajectory[{i}]"
            if not isinstance(step, dict) or not isinstance(_step_call(step), str) or not _step_call(step).strip():
                self.add("structure.step", f"Step {i} has no tool name: write it as {{\"call\": \"<tool>\", \"args\": {{...}}}}.", loc)
                self.outs.append(None)
                continue
            args = _step_args(step)
            if args is None:
                args = {}
            if isinstance(args, str):
                try:
                    args = json.loads(args)
                except ValueError:
                    pass
            if not isinstance(args, dict):
                self.add("structure.step", f"Step {i}: args must be an object of argument → value.", f"{loc}.args")
                self.outs.append(None)
                continue
            scope = _Scope(at=i)
            info = self.check_call(_step_call(step), args, loc, scope, nested=False)
            self.outs.append(self.output_of(info, args, scope, loc))

    def output_of(self, info: ToolInfo | None, args: dict, scope: _Scope, loc: str) -> _Out:
        skip = ("calls",) if info is not None and info.name == LOOP_TOOL else ()
        desc = self.describe({k: v for k, v in args.items() if k not in skip}, scope)
        px = desc.px or _num(args.get("pixel_size_m")) is not None
        out = _Out(info, args, desc.sources, px)
        if info is None:
            return out
        if info.name == LOOP_TOOL:
            out.list_obs = _loop_returns_list(args)
            out.sources = out.sources | getattr(self, "_last_loop_sources", frozenset())
        else:
            out.mask_classes = mask_classes_of(info.name, args, lambda v: self.describe(v, scope).mask_classes)
        return out

    def check_call(self, raw_call: str, args: dict, loc: str, scope: _Scope, nested: bool) -> ToolInfo | None:
        info, alias = resolve_tool(raw_call)
        label = f"Step {scope.at}" + (f", loop call {scope.call_index}" if nested else "")
        if info is None:
            close = difflib.get_close_matches(_clean_call(raw_call), _known_tool_names(), n=1, cutoff=0.8)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            self.add("tools.exists", f"{label}: tool '{_clean_call(raw_call)}' does not exist in the catalogue{hint}; pick a tool from the list.", loc)
            self.check_references(args, loc, scope, None)
            return None
        if alias:
            self.add("tools.alias", f"{label}: '{alias}' is an alias of '{info.name}'; write '{info.name}' (the benchmark's code name).", loc)
        if not info.registered:
            self.add("tools.not_implemented", f"{label}: '{info.name}' is a benchmark tool the studio's replay does not implement yet; replay will fail at this step.", loc)
        if nested and info.server in NON_NESTABLE_SERVERS:
            self.add("tools.loop_nesting", f"{label}: '{info.name}' ({info.server} server) cannot run inside tool.loop in the benchmark; call it after the loop on its results.", loc)
        for p in info.params:
            if p.required and (p.name not in args or args[p.name] in (None, "")):
                self.add("tools.required_argument", f"{label} ({info.name}): required argument '{p.name}' is missing; give a value or a reference.", f"{loc}.args.{p.name}")
        known = {p.name for p in info.params}
        for a in args:
            if a not in known:
                self.add("tools.unknown_argument", f"{label} ({info.name}): argument '{a}' is not a parameter of this tool (parameters: {', '.join(sorted(known))}).", f"{loc}.args.{a}")
        self.check_values(info, args, loc, label)
        if info.name == LOOP_TOOL:
            self.check_loop(args, loc, scope)
            self.check_references({k: v for k, v in args.items() if k != "calls"}, loc, scope, info)
        else:
            self.check_references(args, loc, scope, info)
        self.check_classes(info, args, loc, scope, label)
        for path, value in _walk_strings(args, ()):
            if path and path[0] == "calls" and info.name == LOOP_TOOL:
                continue
            if _is_file_string(value):
                self.files.append((f"{loc}.args.{format_path(path)}", value))
        self.tool_calls.append((loc, info, args, scope))
        return info

    def check_values(self, info: ToolInfo, args: dict, loc: str, label: str):
        spec = info.spec
        if spec is None:
            return
        literal = {}
        for k, v in args.items():
            if k not in spec.input_model.model_fields or find_all_references(v):
                continue
            if k in spec.json_params and isinstance(v, str):
                s = v.strip()
                if s[:1] in "[{" and s[-1:] in "]}":
                    try:
                        v = json.loads(s)
                    except ValueError:
                        pass
            literal[k] = v
        try:
            spec.input_model.model_validate(literal)
        except Exception as exc:  # pydantic.ValidationError
            errors = getattr(exc, "errors", lambda: [])()
            for err in errors:
                where = err.get("loc") or ()
                if err.get("type") in ("missing", "extra_forbidden") or not where or where[0] not in literal:
                    continue
                arg = str(where[0])
                inner = "".join(f"[{x}]" for x in where[1:])
                p = info.param(arg)
                got = repr(err.get("input"))
                got = got if len(got) <= 60 else got[:57] + "..."
                self.add("tools.invalid_value", f"{label} ({info.name}): argument '{arg}{inner}' = {got} is invalid: {err.get('msg')}; expected {p.type if p else 'another value'}.", f"{loc}.args.{arg}")

    def check_loop(self, args: dict, loc: str, scope: _Scope):
        calls = args.get("calls")
        if isinstance(calls, str):
            try:
                calls = json.loads(calls)
            except ValueError:
                calls = None
        if not isinstance(calls, list):
            self._last_loop_sources = frozenset()
            return
        item_sources = self.describe(args.get("loop_over"), scope).sources
        loop_scope = _Scope(at=scope.at, calls=[], call_index=0, item_sources=item_sources)
        sources = set(item_sources)
        for j, call in enumerate(calls):
            cloc = f"{loc}.args.calls[{j}]"
            loop_scope.call_index = j
            name = call.get("call", call.get("tool", call.get("name"))) if isinstance(call, dict) else None
            cargs = (call.get("args", call.get("inputs")) if isinstance(call, dict) else None) or {}
            if not isinstance(name, str) or not name.strip() or not isinstance(cargs, dict):
                self.add("structure.step", f"Step {scope.at}, loop call {j}: write it as {{\"call\": \"<tool>\", \"args\": {{...}}}}.", cloc)
                loop_scope.calls.append(None)
                continue
            info = self.check_call(name, cargs, cloc, loop_scope, nested=True)
            out = self.output_of(info, cargs, loop_scope, cloc)
            sources |= out.sources
            loop_scope.calls.append(out)
        self._last_loop_sources = frozenset(sources)

    def check_references(self, args: Any, loc: str, scope: _Scope, info: ToolInfo | None):
        for path, ref in find_all_references(args):
            where = f"{loc}.args.{format_path(path)}" if path else f"{loc}.args"
            arg_name = next((p for p in path if isinstance(p, str)), None)
            param = info.param(arg_name) if info is not None and arg_name else None
            # a bind value is an item key or a trajectory reference, not an argument value
            wanted = None if (path and path[0] == "bind") else (_param_kinds(param.type) if param else None)
            if len(path) > 1 and wanted is not None:
                wanted = None  # an element inside a list/dict argument: the element type is not checked
            self.check_reference(ref, where, scope, wanted, arg_name or "")

    def check_reference(self, ref, where: str, scope: _Scope, wanted: set | None, arg_name: str,
                        answer: bool = False):
        if ref.kind in ("step", "item") and not scope.in_loop:
            form = f"<{ref.key}> from step[{ref.index}].obs" if ref.kind == "step" else f"<item.{ref.key}>"
            fix = "write <key> from trajectory[N].obs" if ref.kind == "step" else "take the value from a step's result"
            self.add("references.loop_scope", f"{where}: '{form}' is only valid inside a tool.loop's calls; {fix}.", where)
            return
        if ref.kind == "item":
            return
        if ref.kind == "step":
            if ref.index >= (scope.call_index or 0):
                self.add("references.order", f"{where}: step[{ref.index}] is not an earlier call of this loop iteration (this is call {scope.call_index}; calls count from 0).", where)
                return
            src = scope.calls[ref.index]
        else:
            if ref.index >= scope.at:
                self.add("references.order", f"{where}: refers to step {ref.index}, which is not an earlier step (this is {'the answer' if answer else f'step {scope.at}'}; steps count from 0).", where)
                return
            src = self.outs[ref.index] if ref.index < len(self.outs) else None
            self.refs_to.setdefault(ref.index, []).append(where)
        if src is None or src.info is None:
            return
        label = f"step {ref.index}" if ref.kind == "trajectory" else f"loop call {ref.index}"
        if src.list_obs:
            keys = frozenset({"results"})
        else:
            keys = src.info.result_keys
        if ref.key not in keys:
            hint = " (a tool.loop with return_all=true returns a bare list: use <results>)" if src.list_obs else ""
            self.add("references.key", f"{where}: {label} ({src.info.name}) returns no key '{ref.key}'{hint}; it returns {', '.join(sorted(keys))}.", where)
            return
        kind = "list" if src.list_obs else _result_kind(src.info, ref.key)
        if not _compatible(kind, wanted, arg_name):
            what = f"answer type ({'/'.join(sorted(wanted))})" if answer else f"argument '{arg_name}' ({'/'.join(sorted(wanted))})"
            self.add("references.type", f"{where}: '{ref.key}' of {label} ({src.info.name}) is a {kind}, which does not fit the {what}; refer to a key of the right type.", where)

    def check_classes(self, info: ToolInfo, args: dict, loc: str, scope: _Scope, label: str):
        for class_arg, mask_arg in CLASS_ARGS.get(info.name, {}).items():
            wanted = _int_list(args.get(class_arg))
            if not wanted:
                continue
            desc = self.describe(args.get(mask_arg), scope)
            known = desc.mask_classes
            if known is None:
                continue
            stale = sorted(set(wanted) - known)
            if stale:
                origin = self._mask_origin(args.get(mask_arg), scope)
                valid = sorted(set(known) - {0}) or sorted(known)
                self.add("classes.stale_index",
                         f"{label} ({info.name}): class {', '.join(map(str, stale))} of '{class_arg}' is not in {origin} (classes {sorted(known)}); use indices from {valid}.",
                         f"{loc}.args.{class_arg}")
        if info.name == "mask.compose_multiclass":
            paths = args.get("mask_paths")
            if isinstance(paths, list):
                for k, value in enumerate(paths):
                    known = self.describe(value, scope).mask_classes
                    if known is not None and not (known <= BINARY or known <= frozenset({0, 1})):
                        self.add("classes.binary_expected",
                                 f"{label} (mask.compose_multiclass): mask_paths[{k}] is a multi-class mask {sorted(known)} from {self._mask_origin(value, scope)}; every positive pixel would get one class: binarise it first (ras.threshold).",
                                 f"{loc}.args.mask_paths[{k}]")

    def _mask_origin(self, value: Any, scope: _Scope) -> str:
        ref = parse_reference(value)
        if ref is not None and ref.kind == "trajectory" and ref.index < len(self.outs) and self.outs[ref.index] and self.outs[ref.index].info:
            return f"the mask of step {ref.index} ({self.outs[ref.index].info.name})"
        if ref is not None and ref.kind == "step" and scope.in_loop and ref.index < len(scope.calls) and scope.calls[ref.index] and scope.calls[ref.index].info:
            return f"the mask of loop call {ref.index} ({scope.calls[ref.index].info.name})"
        if _is_file_string(value):
            return f"layer '{_basename(value)}'"
        return "the mask"

    # ---- eval spec ------------------------------------------------------------------------
    def answer_fields(self) -> list:
        spec = self.content.get("answer_spec")
        if not isinstance(spec, list):
            return []
        out = []
        for f in spec:
            if isinstance(f, dict) and not isinstance(f.get("eval_type"), (str, type(None))):
                f = {**f, "eval_type": json.dumps(f["eval_type"], default=str)}  # unknown type, hashable
            if isinstance(f, dict) and not isinstance(f.get("name", ""), str):
                f = {**f, "name": json.dumps(f["name"], default=str)}
            out.append(f)
        return out

    def check_eval_spec(self, final_answer: dict | None = None):
        fields = self.answer_fields()
        if not fields:
            self.add("eval_spec.empty", "The answer has no field: declare at least one answer field with its eval_spec type.", "answer_spec")
        names: set[str] = set()
        types: dict[str, str] = {}
        answer_scope = _Scope(at=len(self.steps))
        for j, fld in enumerate(fields):
            loc = f"answer_spec[{j}]"
            if not isinstance(fld, dict):
                self.add("eval_spec.name", f"Answer field {j} is not an object {{name, eval_type, source}}.", loc)
                continue
            fname = str(fld.get("name", "") or "").strip()
            if not fname:
                self.add("eval_spec.name", f"Answer field {j} has no name: name it as the agent should.", loc)
            elif fname in names:
                self.add("eval_spec.duplicate", f"Answer field '{fname}' is declared twice: rename or remove one.", loc)
            names.add(fname)
            etype = fld.get("eval_type")
            types[fname] = etype
            if etype not in EVAL_TYPES:
                self.add("eval_spec.unknown_type", f"Answer field '{fname}': eval_spec type '{etype}' is unknown (the evaluator would fall back to exact match); use one of {', '.join(EVAL_TYPES)}.", loc)
            source = fld.get("source")
            file_gold = isinstance(self.content.get("final_answer"), dict) and fname in self.content["final_answer"]
            if (source is None or source == "") and not file_gold:  # a null gold value is sanity.nan
                self.add("eval_spec.source", f"Answer field '{fname}' has no source: bind it to a step output (<key> from trajectory[N].obs) or give a value.", loc)
            else:
                wanted = ANSWER_KINDS.get(etype)
                for path, ref in find_all_references(source):
                    where = f"{loc}.source" + (f".{format_path(path)}" if path else "")
                    self.check_reference(ref, where, answer_scope, wanted if not path else None, fname, answer=True)
        if fields and all(isinstance(f, dict) and f.get("eval_type") == "ignore" for f in fields):
            self.add("eval_spec.all_ignored", "Every answer field is 'ignore': nothing would be scored; give at least one field a scored type.", "answer_spec")
        self._check_pairs(types)
        for fa, where in ((self.content.get("final_answer"), "final_answer"), (final_answer, "replay.final_answer")):
            if isinstance(fa, dict) and fields:
                missing_type = [k for k in fa if k not in names]
                missing_value = [n for n in names if n and n not in fa]
                if missing_type:
                    self.add("eval_spec.field_mismatch", f"{where} has field(s) {', '.join(sorted(missing_type))} with no eval_spec type: add a type (or 'ignore') for each.", where)
                if missing_value:
                    self.add("eval_spec.field_mismatch", f"eval_spec declares {', '.join(sorted(missing_value))} but {where} has no such field: add the value or drop the type.", where)

    def _check_pairs(self, types: dict[str, str]):
        pairs = (("point_pixel", ("_row", "_col")),
                 ("point_haversine", ("_lat", "_lon")), ("point_haversine", ("_latitude", "_longitude")))
        for name, etype in types.items():
            for ptype, (a, b) in pairs:
                for mine, other in ((a, b), (b, a)):
                    if not name.endswith(mine):
                        continue
                    if ptype == "point_haversine" and mine in ("_lat", "_lon") and name.endswith(("_latitude", "_longitude")):
                        continue
                    if etype != ptype and types.get(name[: -len(mine)] + other) != ptype:
                        continue  # neither half is a point of this type: an ordinary field
                    prefix = name[: -len(mine)]
                    candidates = [prefix + other]
                    if ptype == "point_haversine":
                        candidates += [prefix + o for o in ("_lat", "_latitude", "_lon", "_longitude") if o.startswith(other[:4])]
                    partner = next((c for c in candidates if c in types), None)
                    if partner is None:
                        self.add("eval_spec.point_pair", f"Answer field '{name}' ({etype}) has no partner '{prefix + other}': a point is scored as a {a}/{b} pair; add the partner field.", "answer_spec")
                    elif types[partner] != ptype or etype != ptype:
                        self.add("eval_spec.point_pair", f"Answer fields '{name}' ({etype}) and '{partner}' ({types[partner]}) must both be {ptype} to be scored as one point.", "answer_spec")

    # ---- hygiene --------------------------------------------------------------------------
    def used_files(self) -> set[str]:
        return {_basename(v) for _, v in self.files}

    def check_hygiene(self, replay_trajectory: list | None = None):
        n = len(self.steps)
        used = set(self.refs_to)
        fields = self.answer_fields()
        answer_refs = any(find_all_references(f.get("source")) for f in fields if isinstance(f, dict))
        if not answer_refs and n:
            # answers are literal values (a task file): trace them through the observations; when
            # a value cannot be traced, no leaf step can be called unused
            values = [f.get("source") for f in fields if isinstance(f, dict)]
            traj = replay_trajectory if replay_trajectory else self.steps
            untraced = 0
            for v in values:
                hit = [i for i, st in enumerate(traj[:n]) if isinstance(st, dict) and st.get("obs") is not None
                       and not _is_nan(v) and _holds(st.get("obs"), v)]
                used.update(hit)
                untraced += not hit
            if untraced or not values:
                used.update(range(n))
        for i, out in enumerate(self.outs):
            if out is None or out.info is None or i in used:
                continue
            self.add("hygiene.unused_step", f"Step {i} ({out.info.name}): nothing uses its output (no later step or answer field refers to trajectory[{i}]); remove it or refer to it.", f"trajectory[{i}]")
        used_files = self.used_files()
        for loc, path, _entry in _input_entries(self.content.get("input_data") or {}):
            if _basename(path) not in used_files:
                self.add("hygiene.unused_layer", f"{loc} ('{_basename(path)}') is in the manifest but no step uses it; remove it or use it (the agent sees every manifest layer).", loc)

    # ---- manifest -------------------------------------------------------------------------
    def check_manifest(self, data_root: str | Path | None):
        declared = {_basename(p) for _, p, _ in _input_entries(self.content.get("input_data") or {})}
        for loc, path, _entry in _input_entries(self.content.get("input_data") or {}):
            fn = _basename(path)
            if self.explicit_layers and fn not in self._explicit:
                self.add("manifest.layer_unknown", f"{loc}: '{fn}' is not a layer of this event; import it or pick an existing layer.", loc)
        for loc, path, _entry in _input_entries(self.content.get("input_data") or {}):
            layer = self.layers.get(_basename(path))
            if layer and layer.get("kind") == "mask":
                self.add("manifest.ground_truth_input", f"{loc}: '{_basename(path)}' is a ground-truth mask (the replay's perception reads it for the gold); in input_data the agent gets the answer's source. Remove it unless the task means to hand the agent that mask.", loc)
        reported = set()
        # an unsolvable variant withholds these on purpose (annotation.qc_variants says why)
        withheld = withheld_files(self.content, self.content.get("variant"))
        for loc, value in self.files:
            fn = _basename(value)
            if fn in reported or fn in withheld:
                continue
            if fn not in declared:
                reported.add(fn)
                if self.explicit_layers and fn not in self._explicit:
                    self.add("manifest.layer_unknown", f"{loc}: '{value}' is neither a layer of this event nor a reference; use a layer's file name or <key> from trajectory[N].obs.", loc)
                else:
                    self.add("manifest.not_in_input_data", f"{loc}: '{fn}' is not declared in input_data, so the agent cannot know it; add it to the manifest.", loc)
        if data_root is not None:
            for loc, path, _entry in _input_entries(self.content.get("input_data") or {}):
                layer = self.layers.get(_basename(path))
                if not layer or not layer.get("path"):
                    continue
                try:
                    p = confine(data_root, str(layer["path"]))
                except OutsideRoot:
                    self.add("manifest.outside_root", f"{loc}: '{layer['path']}' resolves outside the data root; store the file under it.", loc)
                    continue
                if not p.is_file():
                    self.add("manifest.file_missing", f"{loc}: the file of '{_basename(path)}' ({layer['path']}) is missing from the data root; import it again.", loc)
        # an unsolvable variant's gold replay stops at the step that needs what it took away
        # (annotation.variants.unsolvable_block): the calls from there on never run, and their
        # inputs are withheld on purpose, so their manifest is not checked
        blocked = unsolvable_block(self.content, self.content.get("variant"))
        for loc, info, args, scope in self.tool_calls:
            at = re.match(r"trajectory\[(\d+)\]", loc)
            if blocked is not None and at and int(at.group(1)) >= blocked["step"]:
                continue
            self._check_call_manifest(loc, info, args, scope)

    def _layers_of(self, value: Any, scope: _Scope) -> list[dict]:
        return [self.layers[fn] for fn in sorted(self.describe(value, scope).sources) if fn in self.layers]

    def _check_call_manifest(self, loc: str, info: ToolInfo, args: dict, scope: _Scope):
        name = info.name
        label = f"{loc} ({name})"
        rule = MODALITY_RULES.get(name)
        if rule:
            for param, allowed in rule["params"].items():
                layer = self.layer(args.get(param))
                mod = _norm_modality(layer.get("modality")) if layer else None
                if mod and mod not in allowed:
                    hint = ""
                    if name == "seg.building_damage" and param == "post_image_path" and mod == "sar":
                        hint = " (for an optical pre / SAR post pair use seg.building_damage_opt_sar)"
                    self.add("manifest.modality", f"{label}: '{param}' is '{_basename(args.get(param))}', a {mod} layer, but this tool expects {'/'.join(sorted(allowed))}{hint}.", f"{loc}.args.{param}")
            if rule.get("bitemporal"):
                self._check_dates(loc, label, args)
        if name in CRS_TOOLS:
            param = CRS_TOOLS[name]
            for layer in self._layers_of(args.get(param), scope):
                if _georeferenced(layer) is False:
                    self.add("manifest.crs_missing", f"{label}: '{layer['file_name']}' has no CRS, so pixels cannot be mapped to the world; give the layer a CRS or answer in pixels.", f"{loc}.args.{param}")
        desc = self.describe({k: v for k, v in args.items() if k != "calls"}, scope)
        if name in METRIC_TOOLS and "pixel_size_m" not in args and not desc.px:
            srcs = [self.layers[fn] for fn in desc.sources if fn in self.layers]
            if srcs and all(_georeferenced(l) is False for l in srcs):
                # one rule for metres on pixel-frame inputs: they need the rasters' GSD, passed as
                # pixel_size_m. No GSD recorded → gsd_missing (the same finding as with a literal
                # pixel_size_m below); a GSD recorded but not passed → crs_missing naming the value.
                rasters = [l for l in srcs if l.get("kind") != "vector"]
                gsds = sorted({g for g in (_num(l.get("gsd_m")) for l in rasters) if g})
                names = ", ".join(sorted(l["file_name"] for l in srcs))
                if rasters and not gsds:
                    self.add("manifest.gsd_missing", f"{label}: measures in metres but its inputs come from pixel-frame layers ({names}) with no CRS and no GSD recorded; a maintainer records the layer's GSD (event page), then pass it as pixel_size_m.", loc)
                else:
                    value = f"={gsds[0]:g}" if len(gsds) == 1 else " (the layer's GSD)"
                    self.add("manifest.crs_missing", f"{label}: measures in metres but its inputs come from pixel-frame layers ({names}) with no CRS and no pixel_size_m is given; pass pixel_size_m{value}.", loc)
        px = _num(args.get("pixel_size_m")) if "pixel_size_m" in args and not find_all_references(args.get("pixel_size_m")) else None
        if px is not None:
            rasters = [self.layers[fn] for fn in sorted(desc.sources) if fn in self.layers and self.layers[fn].get("kind") != "vector"]
            gsds = [_num(l.get("gsd_m")) for l in rasters]
            known = [g for g in gsds if g]
            if rasters and not known:
                self.add("manifest.gsd_missing", f"{label}: pixel_size_m={px:g} cannot be known by the agent: the source raster(s) {', '.join(l['file_name'] for l in rasters)} have no GSD (pixel_size_m) in the manifest; a maintainer records the layer's GSD (event page).", f"{loc}.args.pixel_size_m")
            elif known and min(abs(px - g) / g for g in known) > GSD_RTOL:
                self.add("manifest.gsd_mismatch", f"{label}: pixel_size_m={px:g} but the source raster's GSD is {', '.join(f'{g:g}' for g in sorted(set(known)))} m; use the manifest's value.", f"{loc}.args.pixel_size_m")

    def _check_dates(self, loc: str, label: str, args: dict):
        pre, post = args.get("pre_image_path"), args.get("post_image_path")
        if not isinstance(pre, str) or not isinstance(post, str):
            return
        if pre.strip() == post.strip() or (_is_file_string(pre) and _is_file_string(post) and _basename(pre) == _basename(post)):
            self.add("manifest.single_date", f"{label}: pre_image_path and post_image_path are the same image '{_basename(pre) if _is_file_string(pre) else pre}'; a bi-temporal tool needs a pre-event and a post-event image.", f"{loc}.args.post_image_path")
            return
        lpre, lpost = self.layer(pre), self.layer(post)
        if not lpre or not lpost:
            return
        a, b = str(lpre.get("phase") or ""), str(lpost.get("phase") or "")
        if a and b and a == b:
            self.add("manifest.single_date", f"{label}: both images are of phase '{a}'; a bi-temporal tool needs two dates.", f"{loc}.args.post_image_path")
        elif (a, b) == ("post", "pre"):
            self.add("manifest.phase_order", f"{label}: pre_image_path is the post-event image and post_image_path the pre-event one; swap them.", f"{loc}.args.pre_image_path")
        else:
            ma, mb = re.fullmatch(r"t(\d+)", a), re.fullmatch(r"t(\d+)", b)
            if ma and mb and int(ma.group(1)) > int(mb.group(1)):
                self.add("manifest.phase_order", f"{label}: the 'pre' image is of phase {a}, later than the 'post' image's {b}; swap them.", f"{loc}.args.pre_image_path")

    # ---- scene ---------------------------------------------------------------------------
    def scene(self) -> dict:
        """Extent of the task's rasters: max width/height (px), area (m²), diagonal (m), bounds."""
        w = h = 0
        area = diag = None
        bounds = []
        for _, path, _ in _input_entries(self.content.get("input_data") or {}):
            layer = self.layers.get(_basename(path))
            if not layer:
                continue
            if layer.get("bounds") and _georeferenced(layer) is not False:
                bounds.append(layer["bounds"])
            if layer.get("kind") == "vector":
                continue
            lw, lh, g = _num(layer.get("width")), _num(layer.get("height")), _num(layer.get("gsd_m"))
            if lw and lh:
                w, h = max(w, int(lw)), max(h, int(lh))
                if g:
                    area = max(area or 0.0, lw * lh * g * g)
                    diag = max(diag or 0.0, math.hypot(lw, lh) * g)
        return {"width": w or None, "height": h or None, "area_m2": area, "diagonal_m": diag, "bounds": bounds}


def _walk_strings(value: Any, path: tuple):
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _walk_strings(v, path + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _walk_strings(v, path + (i,))
    elif isinstance(value, str):
        yield path, value


def _holds(obs: Any, value: Any, depth: int = 0) -> bool:
    """Whether an observation holds ``value`` (numbers to 1e-9, path strings by base name)."""
    if _same(obs, value):
        return True
    if depth > 3:
        return False
    if isinstance(obs, dict):
        return any(_holds(v, value, depth + 1) for v in obs.values())
    if isinstance(obs, list):
        return any(_holds(v, value, depth + 1) for v in obs[:200])
    return False


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    if isinstance(a, str) and isinstance(b, str):
        return a == b or (_is_file_string(a) and _is_file_string(b) and _basename(a) == _basename(b))
    return a == b and a is not None


# ============================================================================================
# Alignment (heuristic)
# ============================================================================================
_UNIT_AFTER_HOW_MANY = r"(?:square|sq\.?|cubic|hectares?|ha\b|km|kilomet|met(?:er|re)s?\b|m²|m2\b|m3\b|tons?|tonnes?|litres?|liters?|acres?|miles?|feet|degrees?)"
ALIGNMENT_RULES: dict[str, dict] = {
    "count": {"cue": r"\bhow many\b(?!\s+" + _UNIT_AFTER_HOW_MANY + r")|\bnumber of\b|\bcount (?:of|the)\b",
              "types": {"scalar_count", "scalar_dict"}, "what": "a count (scalar_count or scalar_dict)"},
    "measure": {"cue": r"\bhow many\s+" + _UNIT_AFTER_HOW_MANY + r"|\bhow much\b|\bhow (?:far|long|large|big|deep|high)\b|\bwhat (?:is the |was the )?(?:total |combined |overall |mean |average |maximum |minimum )?(?:area|length|distance|volume|extent|size|perimeter|depth|elevation|height|temperature)\b",
                "types": {"scalar_continuous", "scalar_count", "scalar_dict", "ratio_pct"}, "what": "a numeric field (scalar_continuous)"},
    "ratio": {"cue": r"\bwhat (?:share|percentage|proportion|fraction|percent|ratio)\b|\bpercentage\b|\bproportion\b|\bshare of\b|\bfraction of\b|\bpercent\b|%",
              "types": {"ratio_pct", "scalar_dict"}, "what": "a ratio (ratio_pct)"},
    "location": {"cue": r"(?:^|[.?!;:]\s*|,\s*|\band\s+)where\b|\bwhere (?:is|are|was|were|should|would|could|do|does|did|can|will|might|must)\b|\blocate\b|\blocation of\b|\bcoordinates?\b|\bcentroid\b",
                 "types": {"point_pixel", "point_haversine", "polygon_iou", "scalar_dict"}, "what": "a point (point_pixel/point_haversine) or polygon (polygon_iou)"},
    "choice": {"cue": r"(?:^|[.?!;:]\s*|,\s*|\band\s+)which\b|\bwhat (?:type|types|kind|kinds|class|classes|category|categories|name|names|phase|level|grade|severity)\b",
               "types": {"set_f1", "exact_match", "ranking_kendall", "scalar_dict"}, "what": "a set (set_f1) or exact match"},
    "ranking": {"cue": r"\brank(?:s|ed|ing)?\b|\border(?:ed)? (?:them|the|from|by)\b|\bsort(?:ed)?\b|\bprioriti[sz]e\b|\btop[- ]?\d+\b|\btop (?:two|three|four|five|ten)\b",
                "types": {"ranking_kendall"}, "what": "a ranking (ranking_kendall)"},
    "route": {"cue": r"\broutes?\b|\bshortest path\b|\bpath from\b|\bdriv(?:e|ing) from\b|\bnavigat\w*",
              "types": set(), "what": "a route: a length field plus a line or two points"},
}
#: a query splits into asked quantities at "?", ";", ", and" and "and how/what/which/where/…"
_CLAUSE_SPLIT = re.compile(r"\?|;|,\s*and\b|\band\s+(?=how\b|what\b|which\b|where\b|rank\b|list\b|give\b|report\b|name\b|estimate\b|compute\b|find\b|identify\b)")
_PERCENT_NAME = re.compile(r"percentage|_pct|_ratio|_share|(?:pct|ratio|share)$")
_LENGTH_NAME = re.compile(r"length|distance|dist_|_km$|_m$|meters|metres")
_POINT_SUFFIX = re.compile(r"_(?:row|col|lat|lon|latitude|longitude)$")


def _field_list(fields: list[dict]) -> str:
    return ", ".join(f"{f.get('name')}:{f.get('eval_type')}" for f in fields)


def _check_alignment(a: _Analysis):
    variant = a.content.get("variant")
    if isinstance(variant, dict) and variant.get("kind") == "unsolvable":
        return  # its gold answer is the refusal whatever the question asks (qc_variants checks that)
    question = str(a.content.get("question", "") or "").lower()
    fields = [f for f in a.answer_fields() if isinstance(f, dict)]
    scored = [f for f in fields if f.get("eval_type") != "ignore"]
    if not question.strip() or not scored:
        return  # structure / eval-spec errors already say it
    types = Counter(f.get("eval_type") for f in scored)
    names = [str(f.get("name", "")).lower() for f in scored]
    wildcard = any(t not in EVAL_TYPES for t in types)  # eval_spec.unknown_type says it already
    clauses = [c for c in _CLAUSE_SPLIT.split(question) if c and c.strip()]
    asks = 0
    for clause in clauses:
        if any(re.search(rule["cue"], clause) for k, rule in ALIGNMENT_RULES.items() if k != "route"):
            asks += 1
    for ask, rule in ALIGNMENT_RULES.items():
        hits = re.findall(rule["cue"], question)
        if not hits or wildcard:
            continue
        ok_types = set(rule["types"])
        if ask == "ratio":
            ok = bool(ok_types & set(types)) or any(f.get("eval_type") == "scalar_continuous" and _PERCENT_NAME.search(str(f.get("name", "")).lower()) for f in scored)
        elif ask == "ranking":
            ok = bool(ok_types & set(types)) or (re.search(r"\btop\b", question) is not None and "set_f1" in types)
        elif ask == "route":
            has_len = any(f.get("eval_type") in ("scalar_continuous", "scalar_count", "scalar_dict") and _LENGTH_NAME.search(str(f.get("name", "")).lower()) for f in scored)
            points = {re.sub(_POINT_SUFFIX, "", n) for n, f in zip(names, scored) if f.get("eval_type") in ("point_pixel", "point_haversine")}
            has_line = len(points) >= 2 or any(f.get("eval_type") in ("polygon_iou", "scalar_dict") for f in scored) or any(re.search(r"route|path|line", n) and f.get("eval_type") not in ("scalar_continuous", "scalar_count") for n, f in zip(names, scored))
            missing = [w for w, has in (("a length/distance field", has_len), ("a line or a start/end point pair", has_line)) if not has]
            if missing:
                a.add("alignment.route", f"The query asks for a route but the answer lacks {' and '.join(missing)}; a route is scored as start point + end point + total length.", "answer_spec")
            continue
        else:
            ok = bool(ok_types & set(types))
        if not ok:
            cue = hits[0] if isinstance(hits[0], str) else next((h for h in hits[0] if h), "")
            a.add(f"alignment.{ask}", f"The query asks a {ask} question ({cue.strip()!r}) but no answer field is {rule['what']} (fields: {_field_list(scored)}); check the eval_spec types.", "answer_spec")
    units = set()
    for n, f in zip(names, scored):
        units.add(re.sub(_POINT_SUFFIX, "", n) if f.get("eval_type") in ("point_pixel", "point_haversine") else n)
    if asks > len(units):
        a.add("alignment.quantity_missing", f"The query asks for {asks} quantities but the answer has {len(units)} scored field(s); add a field for each quantity asked (or reword the query).", "answer_spec")


# ============================================================================================
# Numerical sanity on the replayed gold
# ============================================================================================
_AREA_NAME = re.compile(r"(?:^|_)area(?:_|$)|_m2$|_km2$|_ha$|hectare|sq_?m|sqkm")
_DIST_NAME = re.compile(r"distance|(?:^|_)dist(?:_|$)")


def _is_nan(v: Any) -> bool:
    if v is None:
        return True
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return True
    if isinstance(v, str) and v.strip().lower() in ("", "nan", "none", "null", "inf", "-inf"):
        return True
    return False


def _check_sanity(a: _Analysis, replay: dict, polygons: dict | None):
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
        if _is_nan(value) or (isinstance(value, (dict, list)) and any(_is_nan(v) for v in (value.values() if isinstance(value, dict) else value))):
            a.add("sanity.nan", f"Answer field '{name}' is {value!r} after replay: a value is expected; fix the step that produces it.", loc)
            continue
        lname = name.lower()
        if etype == "scalar_count":
            v = _num(value)
            if v is None or v < 0 or abs(v - round(v)) > 1e-9:
                a.add("sanity.count", f"Answer field '{name}' = {value!r} is not a non-negative integer count; check its source (a count field should come from a count key).", loc)
                continue
        if etype == "ratio_pct" or (etype == "scalar_continuous" and _PERCENT_NAME.search(lname)):
            _ratio(a, name, value, loc)
        if etype in ("scalar_continuous", "scalar_count", "scalar_dict") and _AREA_NAME.search(lname) and "px" not in lname and "pixel" not in lname:
            for key, v in _numbers(value):
                factor = 1e6 if "km2" in lname or "sqkm" in lname else 1e4 if re.search(r"_ha$|hectare", lname) else 1.0
                m2 = v * factor
                if m2 < 0 or (scene["area_m2"] and m2 > scene["area_m2"] * 1.001):
                    a.add("sanity.area", f"Answer field '{name}'{key} = {v:g} {'is negative' if m2 < 0 else 'exceeds the scene area (%.0f m²)' % scene['area_m2']}; check units and pixel_size_m.", loc)
        if etype in ("scalar_continuous", "scalar_count", "scalar_dict") and _DIST_NAME.search(lname) and "px" not in lname and "pixel" not in lname:
            for key, v in _numbers(value):
                m = v * (1000.0 if "km" in lname else 1.0)
                if m < 0 or (scene["diagonal_m"] and m > scene["diagonal_m"] * 1.001):
                    a.add("sanity.distance", f"Answer field '{name}'{key} = {v:g} {'is negative' if m < 0 else 'exceeds the scene diagonal (%.0f m)' % scene['diagonal_m']}; check units and pixel_size_m.", loc)
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
            n = _num(v)
            if n is not None:
                yield f"[{k!r}]", n
    else:
        n = _num(value)
        if n is not None:
            yield "", n


def _ratio(a: _Analysis, name: str, value: Any, loc: str):
    for key, v in _numbers(value):
        if v < 0 or v > 100:
            a.add("sanity.ratio", f"Answer field '{name}'{key} = {v:g} is outside [0, 1] (fraction) and [0, 100] (percentage); check the division.", loc)
        elif 1 < v <= 1.5:
            a.add("sanity.ratio", f"Answer field '{name}'{key} = {v:g} is above 1 as a fraction yet small as a percentage; the evaluator cannot tell its form: give a fraction ≤ 1 or a percentage.", loc)


def _pixel_point(a: _Analysis, name: str, value: Any, answer: dict, scene: dict, loc: str):
    w, h = scene["width"], scene["height"]
    row = col = None
    if name.endswith("_row"):
        row, col = _num(value), _num(answer.get(name[:-4] + "_col"))
    elif name.endswith("_col"):
        return  # checked with its _row
    elif isinstance(value, dict):
        row, col = _num(value.get("row", value.get("y"))), _num(value.get("col", value.get("x")))
    elif isinstance(value, list) and len(value) == 2:
        row, col = _num(value[0]), _num(value[1])
        if h and w and row is not None and col is not None and not (0 <= row < h and 0 <= col < w) and (0 <= col < h and 0 <= row < w):
            return  # maybe (x, y): the order of a 2-list is not fixed
    if row is None or col is None:
        return
    if row < 0 or col < 0 or (h and row >= h) or (w and col >= w):
        a.add("sanity.point", f"Answer field '{name}': point (row {row:g}, col {col:g}) lies outside the raster ({h}×{w} px); check the pixel frame.", loc)


def _geo_point(a: _Analysis, name: str, value: Any, answer: dict, scene: dict, loc: str):
    lat = lon = None
    for suf, other in (("_lat", "_lon"), ("_latitude", "_longitude")):
        if name.endswith(suf):
            lat = _num(value)
            lon = _num(answer.get(name[: -len(suf)] + other, answer.get(name[: -len(suf)] + ("_lon" if other == "_longitude" else "_longitude"))))
    if name.endswith(("_lon", "_longitude")):
        return
    if lat is None and isinstance(value, dict):
        lat, lon = _num(value.get("lat", value.get("latitude"))), _num(value.get("lon", value.get("longitude", value.get("lng"))))
    elif lat is None and isinstance(value, list) and len(value) == 2:
        lat, lon = _num(value[0]), _num(value[1])
    if lat is None or lon is None:
        return
    if not (-90 <= lat <= 90 and -180 <= lon <= 180):
        a.add("sanity.point", f"Answer field '{name}': ({lat:g}, {lon:g}) is not a latitude/longitude; check the order and the CRS.", loc)
        return
    boxes = [b for b in scene["bounds"] if isinstance(b, (list, tuple)) and len(b) == 4 and all(_num(x) is not None for x in b)
             and -180 <= b[0] <= 180 and -90 <= b[1] <= 90]
    if boxes:
        def inside(b):
            mx, my = (b[2] - b[0]) * 0.05, (b[3] - b[1]) * 0.05
            return b[0] - mx <= lon <= b[2] + mx and b[1] - my <= lat <= b[3] + my
        if not any(inside(b) for b in boxes):
            a.add("sanity.point", f"Answer field '{name}': ({lat:g}, {lon:g}) lies outside the scene's bounds {boxes[0]}; check lat/lon order and the CRS.", loc)


def _polygon(a: _Analysis, name: str, gold: Any):
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


# ============================================================================================
# Public entry points
# ============================================================================================
#: a string that starts as a trajectory/step reference ("<key> from trajectory[…") and so was meant as one
_REFERENCE_LIKE = re.compile(r"^\s*<[^<>]*>\s*from\s+(?:trajectory|step)\b", re.IGNORECASE)

#: the reference checks whose error means the gold plan is wired wrong: a revision is not saved with one
#: (annotation.services.tasks.save_revision); references.type stays a QC error that blocks submission only
BROKEN_REFERENCE_CHECKS = ("references.order", "references.key", "references.loop_scope", "references.malformed")


def _check_malformed_references(a: _Analysis) -> None:
    """``references.malformed``: a step argument or answer source written like a reference
    (``<key> from trajectory[…``) that the benchmark's pattern (``kernel.references``) does not
    read, e.g. ``<count> from trajectory[deleted].obs`` (the editor writes this for a reference to
    a deleted step) or a missing ``.obs``; the runner would pass the text on as a literal."""
    where = [(f"trajectory[{i}].args", _step_args(s)) for i, s in enumerate(a.steps) if isinstance(s, dict)]
    where += [(f"answer_spec[{j}].source", f.get("source")) for j, f in enumerate(a.answer_fields()) if isinstance(f, dict)]
    for loc, value in where:
        for path, text in _walk_strings(value, ()):
            if _REFERENCE_LIKE.match(text) and parse_reference(text) is None:
                sub = format_path(path)
                at = loc + (sub if sub.startswith("[") else f".{sub}") if path else loc
                a.add("references.malformed", f"{at}: '{text[:80]}' is not a reference the benchmark reads "
                      "(write <key> from trajectory[N].obs with N an earlier step); rebind it to a step's output.", at)


def _analyse(content: dict, layers: dict | None, replay: dict | None = None) -> _Analysis:
    a = _Analysis(content, layers)
    a.check_structure()
    a.check_steps()
    _check_malformed_references(a)
    qc_tools.run(a)
    qc_variants.run(a, replay, frozenset(_known_tool_names()))
    a.check_eval_spec(replay.get("final_answer") if isinstance(replay, dict) else None)
    _check_alignment(a)
    a.check_hygiene((replay or {}).get("trajectory") if isinstance(replay, dict) else None)
    return a


def check_task(content: dict, *, layers: dict | None = None) -> list[Finding]:
    """The fast checks (structure, tools, references, classes, eval-spec, alignment, hygiene).

    ``content`` holds ``question``, ``trajectory`` ([{call, args}]), ``answer_spec`` ([{name,
    eval_type, source, answer_format}]), ``input_data``, ``classes``; ``final_answer`` optionally.
    ``layers`` (file name → LayerInfo dict) adds the event's class maps. Errors come first.
    """
    return _sorted(_analyse(content, layers).findings)


def full_qc(content: dict, *, layers: dict | None = None, replay: dict | None = None,
            data_root: str | Path | None = None, replay_hashes: Iterable[str] | None = None,
            polygons: dict | None = None, derived: dict | None = None) -> list[Finding]:
    """Every task-level check: the fast ones plus manifest (with files under ``data_root``),
    numerical sanity on ``replay`` ({trajectory: [{call, args, obs}], final_answer}), polygon
    golds (``polygons``: answer field → GeoJSON dict, or None when its file is missing),
    determinism (``replay_hashes``: the hashes of two replays) and derived values against their
    sources (``derived``: see :func:`check_derived`; None on content that has no saved sources,
    e.g. a task file)."""
    a = _analyse(content, layers, replay)
    if derived:
        a.findings.extend(check_derived(content, derived))
    a.check_manifest(data_root)
    if isinstance(replay, dict):
        _check_sanity(a, replay, polygons)
    elif polygons:
        _check_sanity(a, {"trajectory": [], "final_answer": {}}, polygons)
    hashes = [h for h in (replay_hashes or []) if h]
    if len(hashes) >= 2:
        a.findings.extend(check_determinism(hashes[0], hashes[1]))
    return _sorted(a.findings)


# ---- derived values ---------------------------------------------------------------------------
#: the manifest fields a revision copies from its layer when it is saved
#: (``annotation.services.tasks.layer_manifest_entry``) that a maintainer may change afterwards
#: (``annotation.services.layers.set_layer_georeferencing``): the georeferencing
DERIVED_MANIFEST_FIELDS = ("pixel_size_m", "spatial_coordinate_system")
_AUTHORITY_CODE = re.compile(r"[A-Za-z]+:\d+")
#: answer-field names and format notes in metric units (besides ``_AREA_NAME``/``_DIST_NAME``)
_METRIC_TEXT = re.compile(r"(?:^|[_\s(])(?:m|m2|m3|km|km2|ha|metres?|meters?|kilometres?|kilometers?|hectares?"
                          r"|length|perimeter)(?:$|[_\s).,;])|m²|km²")


def _same_derived(field_name: str, stored: Any, current: Any) -> bool:
    """Whether a stored manifest value still equals its layer's ``current`` one. The layer having
    no value says nothing (an imported manifest may carry its file's own value): the same.
    GSD: equal within :data:`GSD_RTOL`, a stored null differs. CRS: a stored pixel/blank frame
    differs from a layer CRS; two authority codes (``EPSG:32617``) compare case-blind; other
    spellings (WKT, ``WGS84``) are not compared."""
    if field_name == "pixel_size_m":
        cur = _num(current)
        if cur is None:
            return True
        old = _num(stored)
        return old is not None and abs(old - cur) <= GSD_RTOL * abs(cur)
    _cur, geo_cur = _norm_crs(current)
    if not geo_cur:
        return True
    old, geo_old = _norm_crs(stored)
    if not geo_old:
        return False
    if _AUTHORITY_CODE.fullmatch(old) and _AUTHORITY_CODE.fullmatch(_cur):
        return old.upper() == _cur.upper()
    return True


def stale_manifest_values(input_data: Any, manifest: dict) -> list[dict]:
    """The stored manifest values that differ from their layer's now.

    ``manifest``: ``{location: {"file_name", "values": {field: the layer's value now}}}`` for the
    entries of ``input_data`` that name a layer (``annotation.services.tasks.derived_manifest``
    builds it with the derivation a save uses). Only the fields of
    :data:`DERIVED_MANIFEST_FIELDS` that the entry states are compared (:func:`_same_derived`).
    Returns ``[{location, field, file_name, stored, current}]`` in document order; ``location``
    is the entry's (``input_data.post_image``)."""
    out = []
    for loc, _path, entry in input_entries(input_data):
        expected = manifest.get(loc)
        if not expected:
            continue
        for name, current in (expected.get("values") or {}).items():
            if name in entry and not _same_derived(name, entry[name], current):
                out.append({"location": loc, "field": name, "file_name": expected.get("file_name", ""),
                            "stored": entry[name], "current": current})
    return out


def _all_calls(steps: Any) -> Iterable[tuple[str, dict]]:
    for st in steps if isinstance(steps, list) else []:
        if not isinstance(st, dict):
            continue
        args = _step_args(st)
        yield str(_step_call(st) or ""), args if isinstance(args, dict) else {}
        if isinstance(args, dict) and isinstance(args.get("calls"), list):
            yield from _all_calls(args["calls"])


def answer_in_metres(content: dict) -> bool:
    """Whether the task's answer depends on its inputs' GSD or CRS: a step (or a ``tool.loop``
    call) measures in metres (:data:`METRIC_TOOLS`; or passes a ``pixel_size_m`` to a tool that
    takes one, but those of the Vis server, whose scale bars draw on a picture: ``ras.vectorize``
    counting polygons without one measures nothing) or maps pixels to the world
    (:data:`CRS_TOOLS`), or an answer field is metric by its name or format note (area/distance
    names as numerical sanity reads them; ``m``, ``m²``, ``km``, ``ha``, length, perimeter)."""
    for call, args in _all_calls((content or {}).get("trajectory")):
        info, _alias = resolve_tool(call) if call else (None, None)
        name = info.name if info else call
        passes_gsd = args.get("pixel_size_m") not in (None, "")
        if name in METRIC_TOOLS or name in CRS_TOOLS or (info is not None and info.param("pixel_size_m")
                                                          and info.server != "Vis" and passes_gsd):
            return True
    for f in (content or {}).get("answer_spec") or []:
        if not isinstance(f, dict):
            continue
        name = str(f.get("name") or "").lower()
        note = str(f.get("answer_format") or "").lower()
        if "px" in name or "pixel" in name:
            continue
        if _AREA_NAME.search(name) or _DIST_NAME.search(name) or _METRIC_TEXT.search(name) or _METRIC_TEXT.search(note):
            return True
    return False


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def check_derived(content: dict, derived: dict) -> list[Finding]:
    """Derived values of a saved revision against their sources.

    ``derived``: ``{"manifest": {location: {file_name, values}}`` (see
    :func:`stale_manifest_values`), ``"gold": {"run", "stored", "current"}`` or None (the input
    fingerprints of the gold replay: ``replay.services.layers.input_fingerprint`` when it ran and now)}``.
    A stale manifest value is ``derived.manifest_stale`` (error) when :func:`answer_in_metres`,
    else ``derived.manifest_outdated`` (warning); each names the field, the stored and the current
    value. A gold replay whose inputs changed is ``derived.gold_stale`` (warning). Answer-source
    proposals are never stored (worked out from the trajectory when read), so they cannot be stale."""
    out: list[Finding] = []
    stale = stale_manifest_values((content or {}).get("input_data"), derived.get("manifest") or {})
    metric = bool(stale) and answer_in_metres(content)
    for s in stale:
        where = f"{s['location']}.{s['field']}"
        if metric:
            out.append(_finding("derived.manifest_stale", f"{where} is {_json(s['stored'])} in this revision but its layer {s['file_name']} now has {_json(s['current'])}; the answer is measured in metres, so it depends on it: refresh the derived values (task page), then replay.", where))
        else:
            out.append(_finding("derived.manifest_outdated", f"{where} is {_json(s['stored'])} in this revision but its layer {s['file_name']} now has {_json(s['current'])}; refresh the derived values (task page).", where))
    gold = derived.get("gold")
    if isinstance(gold, dict) and gold.get("stored") and gold.get("current") and gold["stored"] != gold["current"]:
        out.append(_finding("derived.gold_stale", f"gold replay {gold.get('run')} read inputs that changed since (input fingerprint {str(gold['stored'])[:12]}… then, {str(gold['current'])[:12]}… now: a layer's file, GSD or CRS, or a tool's version); replay the task and accept the new gold.", "gold"))
    return out


def check_determinism(hash_a: str, hash_b: str) -> list[Finding]:
    """``determinism.hash`` when two replays of the same revision give different hashes."""
    if hash_a and hash_b and hash_a != hash_b:
        return [_finding("determinism.hash", f"Two replays of the task give different hashes ({hash_a[:12]}… vs {hash_b[:12]}…): a step is not deterministic (wall-clock, random, unordered output); find the step whose obs differ.", "replay")]
    return []


def used_layer_files(content: dict) -> set[str]:
    """File names (base names) the task's steps use literally."""
    a = _Analysis(content, None)
    a.check_steps()
    return a.used_files()


# ---- task files -----------------------------------------------------------------------------
TASK_FIELDS = {"question": str, "task_category": str, "task_category_code": (str, int), "trajectory": list,
               "final_answer": dict, "eval_spec": dict}


def check_task_file(samples: Any, file_name: str = "") -> list[Finding]:
    """The layout of one benchmark task file: a list of samples ``{sample_id, input_data,
    classes?, tasks: [{question, task_category, task_category_code, tools?, trajectory,
    final_answer, eval_spec, answer_format?}]}``; sample ids unique."""
    out: list[Finding] = []
    prefix = f"{file_name}:" if file_name else ""
    file_dim = dimension_of_file(file_name) if file_name else None
    if not isinstance(samples, list):
        return [_finding("structure.field", f"{prefix} a task file is a JSON list of samples.", prefix or "file")]
    seen: dict[str, int] = {}
    for s, sample in enumerate(samples):
        sloc = f"{prefix}[{s}]"
        if not isinstance(sample, dict):
            out.append(_finding("structure.field", f"Sample {s} is not an object.", sloc))
            continue
        sid = sample.get("sample_id")
        if not isinstance(sid, str) or not sid.strip():
            out.append(_finding("structure.field", f"Sample {s} has no sample_id (required).", f"{sloc}.sample_id"))
        elif sid in seen:
            out.append(_finding("structure.duplicate_id", f"Sample id '{sid}' is used by samples {seen[sid]} and {s}: question ids ({sid}_task<i>) collide; rename one.", f"{sloc}.sample_id"))
        else:
            seen[sid] = s
        if "input_data" in sample and not isinstance(sample["input_data"], dict):
            out.append(_finding("structure.field", f"Sample {s}: input_data must be an object.", f"{sloc}.input_data"))
        if "classes" in sample and sample["classes"] is not None and not isinstance(sample["classes"], dict):
            out.append(_finding("structure.field", f"Sample {s}: classes must be an object (layer → {{value: label}}).", f"{sloc}.classes"))
        tasks = sample.get("tasks")
        if not isinstance(tasks, list) or not tasks:
            out.append(_finding("structure.field", f"Sample {s} has no tasks list (required).", f"{sloc}.tasks"))
            continue
        for t, task in enumerate(tasks):
            tloc = f"{sloc}.tasks[{t}]"
            if not isinstance(task, dict):
                out.append(_finding("structure.field", f"Sample {s}, task {t} is not an object.", tloc))
                continue
            for key, typ in TASK_FIELDS.items():
                if key == "trajectory" and key not in task and "tools" in task:
                    continue
                if key not in task or not isinstance(task[key], typ):
                    want = typ.__name__ if isinstance(typ, type) else "str"
                    out.append(_finding("structure.field", f"Task {sid}_task{t}: '{key}' is {'missing' if key not in task else 'not a ' + want} (the benchmark's loader and evaluator need it).", f"{tloc}.{key}"))
            code = task.get("task_category_code", "")
            code_dim = dimension_of_code(code)
            if str(code).strip() and code_dim is None:
                out.append(_finding("structure.category", f"Task {sid}_task{t}: task_category_code '{code}' is neither T1..T5 nor a sub-code of one (T1-1, T1.2); the benchmark passes it through, but it names no dimension.", f"{tloc}.task_category_code"))
            elif file_dim and code_dim and code_dim != file_dim:
                out.append(_finding("structure.category", f"Task {sid}_task{t}: task_category_code '{code}' is dimension {BY_KEY[code_dim].code}, but {file_name} holds {BY_KEY[file_dim].code} tasks; move the task or correct the code.", f"{tloc}.task_category_code"))
    return out


def content_from_dora_task(sample: dict, task: dict) -> dict:
    """Map a task of a benchmark task file onto QC content: eval_spec (dict) and final_answer
    (dict) become ``answer_spec`` fields whose ``source`` is the gold value."""
    eval_spec = task.get("eval_spec") if isinstance(task.get("eval_spec"), dict) else {}
    final = task.get("final_answer") if isinstance(task.get("final_answer"), dict) else {}
    fmt = task.get("answer_format") if isinstance(task.get("answer_format"), dict) else {}
    answer_spec = [{"name": k, "eval_type": v, "source": final.get(k), "answer_format": fmt.get(k, "")}
                   for k, v in eval_spec.items()]
    trajectory = task.get("trajectory")
    if trajectory is None:
        trajectory = task.get("tools") if isinstance(task.get("tools"), list) and all(isinstance(x, dict) for x in task.get("tools")) else []
    return {
        "question": task.get("question", ""),
        "task_category": task.get("task_category", ""),
        "task_category_code": task.get("task_category_code", ""),
        "disaster_type": sample.get("disaster_type", task.get("disaster_type", "")),
        "input_data": sample.get("input_data") or {},
        "classes": sample.get("classes") or {},
        "tools": task.get("tools") or [],
        "trajectory": trajectory if isinstance(trajectory, list) else [],
        "answer_spec": answer_spec,
        "final_answer": final if "final_answer" in task else None,
    }


# ---- release level --------------------------------------------------------------------------
def _normalise_question(text: str) -> str:
    t = unicodedata.normalize("NFKC", str(text or "")).lower()
    t = re.sub(r"[^\w\s]", " ", t)
    return re.sub(r"\s+", " ", t).strip()


def release_findings(items: list[dict], threshold: float = 0.9) -> list[Finding]:
    """Duplicate or near-duplicate questions over a release. ``items``: ``{question_id,
    content}`` (or ``question``). Normalised text (NFKC, lower case, punctuation dropped);
    difflib ratio ≥ ``threshold`` → ``release.duplicate_question`` (warning)."""
    rows = []
    for it in items:
        q = it.get("question", (it.get("content") or {}).get("question", ""))
        rows.append((str(it.get("question_id", "")), _normalise_question(q)))
    rows.sort(key=lambda r: len(r[1]))
    out = []
    for i, (qa, ta) in enumerate(rows):
        if not ta:
            continue
        for qb, tb in rows[i + 1:]:
            if 2 * len(ta) < threshold * (len(ta) + len(tb)):
                break  # longer ones cannot reach the threshold
            if ta == tb:
                ratio = 1.0
            else:
                sm = difflib.SequenceMatcher(None, ta, tb, autojunk=False)
                if sm.real_quick_ratio() < threshold or sm.quick_ratio() < threshold:
                    continue
                ratio = sm.ratio()
                if ratio < threshold:
                    continue
            kind = "the same question" if ratio == 1.0 else f"nearly the same question (similarity {ratio:.2f})"
            out.append(_finding("release.duplicate_question", f"{qa} and {qb} ask {kind}; drop one or make them differ.", qb))
    return out


def _modality_config(content: dict) -> str:
    return modality_config(content.get("input_data") or {}) or "none"


def release_report(items: list[dict]) -> dict:
    """Distribution of a release by dimension, disaster type and modality configuration.
    ``items``: ``{question_id, content, dimension?}``."""
    dims, disasters, mods = Counter(), Counter(), Counter()
    for it in items:
        c = it.get("content") or {}
        dim = it.get("dimension") or str(c.get("task_category_code") or "").lower() or "unknown"
        dims[str(dim).lower()] += 1
        disasters[str(c.get("disaster_type") or "unknown").lower()] += 1
        mods[_modality_config(c)] += 1
    return {"tasks": len(items), "by_dimension": dict(sorted(dims.items())),
            "by_disaster_type": dict(sorted(disasters.items())), "by_modality": dict(sorted(mods.items()))}
