"""QC checks for steps that rely on a benchmark tool behaviour the studio no longer refuses.

The studio's tools return what the benchmark's tools return (``replay/tools/quirks.py``), so
inputs the tools used to refuse by raising (an absent class index, layers in mixed pixel and
geographic frames, georeferencing without a CRS, a multi-band mask, an unknown field, a negative
volume, ...) now give the benchmark's observation. These checks tell the author instead, without
changing the gold: an ``error`` when the step relies on a meaningless value, a ``warning`` when it
relies on a documented quirk.

Each family section contributes its check ids to ``CHECKS`` (id → (severity, meaning)) and a
function over the QC analysis (``annotation.qc._Analysis``: ``a.tool_calls`` lists every
(nested) call as ``(location, ToolInfo, args, scope)``, ``a.layer(value)`` the layer a literal
file names, ``a.describe(value, scope)`` the sources of an argument; ``a.add(check, message,
location)`` records a finding). ``run(a)`` is called by ``annotation.qc`` after the step checks.
"""
from __future__ import annotations

from typing import Any

__all__ = ["CHECKS", "run"]


# ---------------------------------------------------------------------------------------------
# ras.*, mask.*, calc.*, logi.*, tool.*, report.*
# ---------------------------------------------------------------------------------------------
RASTER_AND_LOGIC_CHECKS: dict[str, tuple[str, str]] = {
}


def check_raster_and_logic(a: Any) -> None:
    """Findings for ras.*, mask.*, calc.*, logi.*, tool.* and report.* steps."""


# ---------------------------------------------------------------------------------------------
# vec.*
# ---------------------------------------------------------------------------------------------
VECTOR_CHECKS: dict[str, tuple[str, str]] = {
    "vec.mixed_frames": ("error", "a vec.* step combines a pixel-space input with a georeferenced "
                                  "one; the benchmark uses the raw coordinates (a meaningless value)"),
    "vec.distance_not_lonlat": ("error", "vec.filter_by_distance reads a layer that is not WGS84 "
                                         "lon/lat as degrees (a meaningless distance)"),
    "vec.pixel_size_ignored": ("error", "a vec.* step needs a pixel size the benchmark does not "
                                        "take from the layer (it fails or reports 0 m²)"),
    "vec.graph_georeferenced": ("error", "vec.build_graph gets a georeferenced layer; the benchmark "
                                         "rounds its coordinates to integer pixels"),
    "vec.unknown_field": ("warning", "a field named by vec.dissolve or vec.point_in_polygon is not "
                                     "an attribute of the layer; the benchmark silently ignores it"),
    "vec.hull_area_zero": ("warning", "vec.convex_hull's area_m2 is 0.0 for a layer that is not in a "
                                      "projected CRS (the benchmark's rule)"),
    "vec.repair_auto_select": ("warning", "vec.repair_min_edges gets only one of source/target; "
                                          "the benchmark then auto-selects both"),
}

#: vec.* tools whose output layer is in the pixel frame whatever the input's
_PIXEL_OUTPUT = frozenset({"vec.road_centerline_extraction", "vec.build_graph",
                           "vec.graph_shortest_path"})
#: attributes of the layers some tools write (ras.vectorize, vec.road_centerline_extraction,
#: vec.voronoi: dora/tools/analysis.py), for the unknown-field check
_OUTPUT_FIELDS = {
    "ras.vectorize": frozenset({"id", "class", "pixel_count", "area_m2", "pixel_size_m"}),
    "vec.road_centerline_extraction": frozenset({"u", "v", "length_px", "length", "damaged",
                                                 "img_h", "img_w"}),
    "vec.voronoi": frozenset({"cell_id"}),
}
#: (tool, first layer argument, second layer argument) pairs the benchmark overlays without
#: checking that their frames agree
_PAIRED = (("vec.intersect", "vector_a_path", "vector_b_path"),
           ("vec.clip", "vector_path", "roi_vector_path"),
           ("vec.nearest", "vector_a_path", "vector_b_path"),
           ("vec.point_in_polygon", "points_path", "polygons_path"),
           ("vec.voronoi", "points_path", "boundary_path"),
           ("vec.raster_stats", "vector_path", "raster_path"))


def _layer_georeferenced(layer: dict) -> bool | None:
    """True/False for a layer known to have / lack a CRS, None when unknown (LayerInfo dict)."""
    if layer.get("georeferenced") is not None:
        return bool(layer["georeferenced"])
    if layer.get("frame") == "pixel":
        return False
    crs = str(layer.get("crs") or "").strip().lower()
    if crs in ("pixel", "none", "image"):
        return False
    return True if crs else None


def _layer_geographic(layer: dict) -> bool | None:
    """Whether a georeferenced layer's CRS is WGS84 lon/lat (EPSG:4326, CRS84); None unknown."""
    crs = str(layer.get("crs") or "").upper()
    if not crs:
        return None
    return any(k in crs for k in ("4326", "CRS84", "WGS84", "WGS 84"))


def _frame_of(a: Any, value: Any, scope: Any) -> tuple[bool | None, list[dict]]:
    """(georeferenced?, source layers) of an argument value: False for outputs of the pixel-frame
    road tools; else the common frame of the layers upstream (None when unknown or mixed)."""
    out = a.describe(value, scope)
    if out.info is not None and out.info.name in _PIXEL_OUTPUT:
        return False, []
    layers = [a.layers[fn] for fn in sorted(out.sources) if fn in a.layers]
    frames = {_layer_georeferenced(la) for la in layers}
    if len(frames) == 1:
        return frames.pop(), layers
    return None, layers


def _names(layers: list[dict]) -> str:
    return ", ".join(la.get("file_name", "?") for la in layers) or "an earlier step"


def check_vector(a: Any) -> None:
    """Findings for vec.* steps that rely on a benchmark behaviour the tools no longer refuse
    (``replay/tools/quirks.py``, vec.* section): mixed frames, distances in non-lon/lat layers,
    pixel sizes the benchmark does not read, georeferenced road graphs, ignored fields, zero
    hull areas and half-given repair endpoints."""
    for loc, info, args, scope in a.tool_calls:
        name = info.name
        if not name.startswith("vec.") or not isinstance(args, dict):
            continue
        label = f"{loc} ({name})"
        for tool, first, second in _PAIRED:
            if name != tool or args.get(first) in (None, "") or args.get(second) in (None, ""):
                continue
            fa, la = _frame_of(a, args.get(first), scope)
            fb, lb = _frame_of(a, args.get(second), scope)
            if fa is not None and fb is not None and fa != fb:
                pix, geo = (first, second) if fa is False else (second, first)
                a.add("vec.mixed_frames",
                      f"{label}: '{pix}' is in the pixel frame ({_names(la if fa is False else lb)}) "
                      f"but '{geo}' is georeferenced ({_names(lb if fa is False else la)}); the "
                      f"benchmark combines the raw coordinates and returns a meaningless value. "
                      f"Use two inputs in the same frame (vectorise the georeferenced mask, or "
                      f"convert with poi.world_to_pixel).", f"{loc}.args.{pix}")
        if name == "vec.filter_by_distance" and args.get("vector_path") not in (None, ""):
            geo, layers = _frame_of(a, args["vector_path"], scope)
            lonlat = {_layer_geographic(la) for la in layers} if geo else set()
            if geo is False or lonlat == {False}:
                what = "is in the pixel frame" if geo is False else "is in a projected CRS"
                a.add("vec.distance_not_lonlat",
                      f"{label}: 'vector_path' {what} ({_names(layers)}); the benchmark reads its "
                      f"x/y as longitude/latitude, so the distances are meaningless. Filter a "
                      f"WGS84 layer (poi.* outputs are lon/lat) or use vec.buffer with vec.clip.",
                      f"{loc}.args.vector_path")
        if name in ("vec.length", "vec.perimeter") and args.get("pixel_size_m") is None:
            geo, layers = _frame_of(a, args.get("vector_path"), scope)
            # without any pixel size upstream manifest.crs_missing already reports the step
            if geo is False and a.describe(args.get("vector_path"), scope).px:
                a.add("vec.pixel_size_ignored",
                      f"{label}: the layer is in the pixel frame and carries its pixel size only as "
                      f"a pixel_size_m property (from an earlier step); the benchmark reads only "
                      f"the argument, so the step fails. Pass pixel_size_m (the source raster's "
                      f"GSD) to this step.", f"{loc}.args.pixel_size_m")
        if name == "vec.max_polygon":
            out = a.describe(args.get("vector_path"), scope)
            geo, _layers = _frame_of(a, args.get("vector_path"), scope)
            if (out.info is not None and out.info.name == "ras.vectorize" and not out.px
                    and geo is False):
                a.add("vec.pixel_size_ignored",
                      f"{label}: the polygons come from ras.vectorize without pixel_size_m on a "
                      f"pixel-frame mask, whose area_m2 is 0 for every polygon; the benchmark ranks "
                      f"by that property, so max_area_m2 is 0 and the first polygon wins. Give "
                      f"ras.vectorize a pixel_size_m.", f"{loc}.args.vector_path")
        if name == "vec.build_graph" and args.get("centerline_path") not in (None, ""):
            geo, layers = _frame_of(a, args["centerline_path"], scope)
            if geo:
                a.add("vec.graph_georeferenced",
                      f"{label}: 'centerline_path' is georeferenced ({_names(layers)}); the "
                      f"benchmark rounds its coordinates to integer pixels and counts each vertex "
                      f"step as 1, so the graph is meaningless. Build the graph from "
                      f"vec.road_centerline_extraction of a road mask.", f"{loc}.args.centerline_path")
        field_arg = {"vec.dissolve": ("by", "vector_path"),
                     "vec.point_in_polygon": ("polygon_id_field", "polygons_path")}.get(name)
        if field_arg and isinstance(args.get(field_arg[0]), str) and args[field_arg[0]]:
            out = a.describe(args.get(field_arg[1]), scope)
            fields = _OUTPUT_FIELDS.get(out.info.name) if out.info is not None else None
            if fields is not None and args[field_arg[0]] not in fields:
                a.add("vec.unknown_field",
                      f"{label}: '{field_arg[0]}' is '{args[field_arg[0]]}', which the layer "
                      f"written by {out.info.name} does not have ({', '.join(sorted(fields))}); the "
                      f"benchmark ignores it ({'dissolves everything into one feature' if name == 'vec.dissolve' else 'uses row indices as ids'}). "
                      f"Name one of its attributes.", f"{loc}.args.{field_arg[0]}")
        if name == "vec.convex_hull" and args.get("vector_path") not in (None, ""):
            geo, layers = _frame_of(a, args["vector_path"], scope)
            lonlat = {_layer_geographic(la) for la in layers} if geo else set()
            if geo is False or lonlat == {True}:
                a.add("vec.hull_area_zero",
                      f"{label}: the layer is {'in the pixel frame' if geo is False else 'in lon/lat'}; "
                      f"the benchmark's area_m2 is 0.0 unless the CRS is projected, so do not "
                      f"answer with it (vertex_count is unaffected).", f"{loc}.args.vector_path")
        if name == "vec.repair_min_edges":
            given = [k for k in ("source", "target") if args.get(k) not in (None, "")]
            if len(given) == 1:
                other = "target" if given == ["source"] else "source"
                a.add("vec.repair_auto_select",
                      f"{label}: only '{given[0]}' is given; the benchmark then auto-selects both "
                      f"source and target, ignoring it. Give '{other}' too, or neither.",
                      f"{loc}.args.{other}")


# ---------------------------------------------------------------------------------------------
# poi.*, vis.*
# ---------------------------------------------------------------------------------------------
POI_AND_VIS_CHECKS: dict[str, tuple[str, str]] = {
}


def check_poi_and_vis(a: Any) -> None:
    """Findings for poi.* and vis.* steps."""


CHECKS: dict[str, tuple[str, str]] = {**RASTER_AND_LOGIC_CHECKS, **VECTOR_CHECKS, **POI_AND_VIS_CHECKS}


def run(a: Any) -> None:
    """Every tool-parity check over one QC analysis (see the module docstring)."""
    check_raster_and_logic(a)
    check_vector(a)
    check_poi_and_vis(a)
