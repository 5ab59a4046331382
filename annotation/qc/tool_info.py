"""What QC knows of a tool: the registry, completed by the catalogue where one is found.

``resolve_tool(call)`` gives a step's :class:`ToolInfo` (parameters, result keys and their types)
and the alias it was called by; the value kinds (str/num/bool/list/dict) of a result key and of a
parameter's type tell whether a reference fits (``references.type``). The registry
(``kernel.tools.registry``) is the authority; the catalogue (``dora-tools.json``, found through
``STUDIO_TOOL_CATALOGUE``, ``STUDIO_SHARED`` or ``../shared/spec``: ``kernel.catalogue``) adds
conditional result keys and their types, and lets a benchmark tool the studio does not implement
be checked (``tools.not_implemented``). Reference types are compared as kinds from the
catalogue's "returns", else from the key's name.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from kernel.catalogue import catalogue_by_name, parse_returns
from kernel.tools.base import UnknownToolError
from kernel.tools.spec import PAPER_ALIASES, all_tools, get_tool

__all__ = ["LOOP_TOOL", "ParamInfo", "ToolInfo", "EXTRA_RESULT_KEYS", "catalogue", "known_tool_names", "clean_call",
           "resolve_tool", "result_kind", "param_kinds", "compatible"]

LOOP_TOOL = "tool.loop"


@dataclass(frozen=True)
class ParamInfo:
    """A tool parameter: name, type text (``int|float``, ``list[str]``…), required, default."""
    name: str
    type: str
    required: bool
    default: Any = None


@dataclass(frozen=True)
class ToolInfo:
    """A tool as QC knows it: name, server, parameters, result keys and their catalogue types, and
    the registry's ``ToolSpec`` (None for a catalogue tool the studio cannot replay)."""
    name: str
    server: str
    params: tuple[ParamInfo, ...]
    result_keys: frozenset
    result_types: dict = field(default_factory=dict, compare=False, hash=False)
    spec: Any = field(default=None, compare=False, hash=False)  # registry ToolSpec, or None

    @property
    def registered(self) -> bool:
        """Whether the studio's registry implements the tool (it can be replayed)."""
        return self.spec is not None

    def param(self, name: str) -> ParamInfo | None:
        """The parameter ``name``, or None."""
        return next((p for p in self.params if p.name == name), None)

    def default(self, name: str) -> Any:
        """The default of parameter ``name`` (None when absent)."""
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


def catalogue() -> dict[str, dict]:
    """The benchmark's tool catalogue by dotted name ({} when no catalogue file is found; kernel.catalogue)."""
    return catalogue_by_name()


def _catalogue_name(text: str) -> str | None:
    cat = catalogue()
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


def known_tool_names() -> list[str]:
    """Every tool name the registry or the catalogue knows, sorted."""
    return sorted(set(all_tools()) | set(catalogue()))


def clean_call(raw: str) -> str:
    """The tool name of a call text (stripped, anything from ``(`` on dropped)."""
    text = raw.strip()
    if "(" in text:
        text = text[: text.index("(")].strip()
    return text


@lru_cache(maxsize=512)
def resolve_tool(raw: str) -> tuple[ToolInfo | None, str | None]:
    """``(ToolInfo or None, alias used or None)`` for a step's call text."""
    text = clean_call(raw)
    spec = None
    try:
        spec = get_tool(text)
    except UnknownToolError:
        spec = None
    cat_name = spec.name if spec is not None else _catalogue_name(text.removeprefix("functions."))
    entry = catalogue().get(cat_name) if cat_name else None
    if spec is None and entry is None:
        return None, None
    cat_types = parse_returns(entry.get("returns", ())) if entry else {}
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


def result_kind(info: ToolInfo | None, key: str) -> str | None:
    """The value kind (str/num/bool/list/dict) of result ``key`` of a tool: from the catalogue's
    types, else from the key's name; None when unknown."""
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


def param_kinds(type_str: str) -> set[str] | None:
    """The value kinds a parameter type text accepts (``int|float`` → {num}); None for any/unknown."""
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


def compatible(result_kind: str | None, wanted: set[str] | None, param_name: str = "") -> bool:
    """Whether a value of ``result_kind`` fits a parameter of ``wanted`` kinds (unknown fits; num and
    bool mix; a path string fits ``loop_over``)."""
    if result_kind is None or wanted is None or result_kind in wanted:
        return True
    if result_kind in ("num", "bool") and wanted & {"num", "bool"}:
        return True
    if result_kind == "str" and param_name == "loop_over":  # a .geojson path is expanded (gold replay)
        return True
    return False


