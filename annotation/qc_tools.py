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

from pyproj import CRS

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
}


def check_vector(a: Any) -> None:
    """Findings for vec.* steps."""


# ---------------------------------------------------------------------------------------------
# poi.*, vis.*
# ---------------------------------------------------------------------------------------------
POI_AND_VIS_CHECKS: dict[str, tuple[str, str]] = {
    "poi.layer_not_lonlat": ("error", "a POI layer in a projected CRS given to a tool that reads "
                                      "its x/y as WGS84 lon/lat"),
    "poi.constant_pixel_size": ("warning", "a step reads the pixel_size_m of poi.world_to_pixel, "
                                           "which is the constant 0.8"),
    "vis.alpha_range": ("error", "an opacity outside 0..1"),
    "vis.pixel_size_not_positive": ("error", "a pixel size <= 0 for a map's scale bar"),
    "vis.marker_without_position": ("warning", "a point marker without row/col (skipped, but "
                                               "counted)"),
    "vis.chart_data": ("error", "chart data that charts nothing meaningful (empty, or a pie "
                                "with negative values or a zero total)"),
    "vis.panel_labels": ("warning", "a temporal panel whose labels do not pair with its images"),
    "vis.route_points": ("warning", "route points that are not [row, col] (skipped) or a route "
                                    "width < 1"),
    "vis.heatmap_bandwidth": ("warning", "a heatmap bandwidth, which the benchmark reads as a "
                                         "factor on the data covariance, not a distance"),
    "vis.mask_first_channel": ("warning", "a multi-band file overlaid as a mask: only its first "
                                          "band is drawn"),
}

#: the CRS texts that name WGS84 longitude/latitude (what the POI tools assume)
_LONLAT_CRS = {"epsg:4326", "ogc:crs84", "crs84", "wgs84", "urn:ogc:def:crs:ogc:1.3:crs84",
               "urn:ogc:def:crs:epsg::4326"}
_POI_LONLAT_TOOLS = ("poi.world_to_pixel", "poi.search_by_name")
_VIS_ALPHA = {"vis.overlay_mask": ("alpha",), "vis.damage_map": ("alpha",),
              "vis.route_map": ("alpha",), "vis.add_map_elements": ("legend_alpha",)}
_VIS_PIXEL_SIZE = ("vis.add_map_elements", "vis.damage_map", "vis.route_map")
_VIS_MASKS = {"vis.overlay_mask": "mask_path", "vis.damage_map": "overlay_mask_path",
              "vis.route_map": "overlay_mask_path"}


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _is_literal_file(value: Any) -> bool:
    return isinstance(value, str) and "<" not in value and "." in value.rsplit("/", 1)[-1]


def _crs_is_lonlat(crs: Any) -> bool | None:
    """True/False for a CRS text that is/is not WGS84 lon/lat; None when unknown or unreadable."""
    if not crs:
        return None
    text = str(crs).strip()
    if text.lower() in _LONLAT_CRS:
        return True
    try:
        parsed = CRS.from_user_input(text)
    except Exception:
        return None
    return bool(parsed.is_geographic and parsed.to_epsg() in (4326, None))


def _check_poi(a: Any, loc: str, name: str, args: dict, at: int, label: str) -> None:
    if name in _POI_LONLAT_TOOLS:
        value = args.get("geojson_path")
        layer = a.layer(value) if _is_literal_file(value) else None
        if layer and _crs_is_lonlat(layer.get("crs")) is False:
            a.add("poi.layer_not_lonlat",
                  f"{label} ({name}): layer '{value}' is in {layer.get('crs')}, but the benchmark's "
                  f"{name} reads every point's x/y as WGS84 longitude/latitude, so the positions "
                  f"are meaningless; give the layer in EPSG:4326 (reproject it before the import).",
                  f"{loc}.args.geojson_path")


def _strings(value: Any):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v)


def _check_vis(a: Any, loc: str, name: str, args: dict, label: str) -> None:
    for arg in _VIS_ALPHA.get(name, ()):
        alpha = _number(args.get(arg))
        if alpha is not None and not 0.0 <= alpha <= 1.0:
            a.add("vis.alpha_range",
                  f"{label} ({name}): '{arg}' is {alpha:g}; the benchmark blends with it anyway "
                  f"and the colours wrap around; use an opacity between 0 and 1.",
                  f"{loc}.args.{arg}")
    if name in _VIS_PIXEL_SIZE:
        px = _number(args.get("pixel_size_m"))
        if px is not None and px <= 0:
            a.add("vis.pixel_size_not_positive",
                  f"{label} ({name}): pixel_size_m is {px:g}; no scale bar is drawn, yet the "
                  f"observation reads scale_bar: true; give the image's GSD in metres (> 0) or "
                  f"leave pixel_size_m out.", f"{loc}.args.pixel_size_m")
    if name == "vis.add_map_elements" and isinstance(args.get("point_markers"), list):
        for k, m in enumerate(args["point_markers"]):
            if not isinstance(m, dict):
                continue
            row = next((m[x] for x in ("pixel_row", "row", "y") if x in m), None)
            col = next((m[x] for x in ("pixel_col", "col", "x") if x in m), None)
            if row is None or col is None:
                a.add("vis.marker_without_position",
                      f"{label} ({name}): point marker {k} has no row/col (pixel_row|row|y and "
                      f"pixel_col|col|x); the benchmark skips it but counts it in "
                      f"point_marker_count; give its position or drop it.",
                      f"{loc}.args.point_markers[{k}]")
    if name in ("vis.pie_chart", "vis.bar_chart", "vis.line_chart") and isinstance(args.get("data"), dict):
        data = args["data"]
        nums = [_number(v) for v in data.values()]
        problem = None
        if not data:
            problem = "is empty"
        elif name == "vis.pie_chart" and any(v is not None and v < 0 for v in nums):
            problem = "has negative values"
        elif name == "vis.pie_chart" and all(v is not None for v in nums) and sum(nums) <= 0:
            problem = "sums to 0"
        if problem:
            a.add("vis.chart_data",
                  f"{label} ({name}): data {problem}; the benchmark draws it without complaint "
                  f"but the chart shows nothing meaningful; chart positive counts or areas.",
                  f"{loc}.args.data")
    if name == "vis.temporal_panel":
        images, labels = args.get("image_paths"), args.get("labels")
        cols = _number(args.get("columns"))
        if isinstance(images, list) and not images:
            msg = "image_paths is empty, so the panel shows only its title"
        elif isinstance(images, list) and isinstance(labels, list) and labels and len(labels) != len(images):
            msg = (f"{len(labels)} labels for {len(images)} images; the benchmark pairs them in "
                   f"order and drops the rest")
        elif cols is not None and cols < 1:
            msg = f"columns is {cols:g}; the benchmark uses 1"
        else:
            msg = None
        if msg:
            a.add("vis.panel_labels", f"{label} ({name}): {msg}; give one label per image "
                                      f"and columns >= 1.", f"{loc}.args")
    mask_arg = _VIS_MASKS.get(name)
    value = args.get(mask_arg) if mask_arg else None
    layer = a.layer(value) if _is_literal_file(value) else None
    if layer and (layer.get("band_count") or 1) > 1:
        a.add("vis.mask_first_channel",
              f"{label} ({name}): '{value}' has {layer['band_count']} bands; the benchmark overlays "
              f"its first band as class values (an RGB image's red channel); give a single-band "
              f"class mask (e.g. the mask_path of a seg.* step).", f"{loc}.args.{mask_arg}")
    if name == "vis.route_map":
        bad = [k for k, p in enumerate(args.get("path_pixels") or [])
               if isinstance(args.get("path_pixels"), list)
               and not (isinstance(p, list) and len(p) >= 2)]
        width = _number(args.get("route_width"))
        ends = [k for k in ("start_point", "end_point")
                if isinstance(args.get(k), list) and len(args[k]) not in (0, 2)]
        if bad or ends or (width is not None and width < 1):
            what = (f"path points {bad} are not [row, col] and are skipped" if bad
                    else f"{', '.join(ends)} is not [row, col] (fewer than 2 numbers fall back to "
                         f"the path's end, more are cut)" if ends
                    else f"route_width is {width:g}")
            a.add("vis.route_points", f"{label} ({name}): {what}; give [[row, col], ...] from "
                                      f"vec.graph_shortest_path and a width >= 1.",
                  f"{loc}.args")
    if name == "vis.heatmap" and _number(args.get("bandwidth")) is not None:
        a.add("vis.heatmap_bandwidth",
              f"{label} ({name}): bandwidth {args['bandwidth']} is read by the benchmark as "
              f"scipy's bw_method, a factor on the points' covariance, not a distance in map "
              f"units; leave it out (Scott's rule) unless the factor is meant.",
              f"{loc}.args.bandwidth")


def check_poi_and_vis(a: Any) -> None:
    """Findings for poi.* and vis.* steps: the inputs the studio's poi/vis tools refused before
    they followed the benchmark (``replay/tools/quirks.py``, section poi.*, vis.*), read from
    the literal arguments and the task's layers."""
    w2p_steps: list[int] = []
    for loc, info, args, scope in a.tool_calls:
        if info is None or not isinstance(args, dict):
            continue
        name = info.name
        label = f"Step {scope.at}"
        if name == "poi.world_to_pixel":
            w2p_steps.append(scope.at)
        if name.startswith("poi."):
            _check_poi(a, loc, name, args, scope.at, label)
        elif name.startswith("vis."):
            _check_vis(a, loc, name, args, label)
        if w2p_steps and any(scope.at >= s for s in w2p_steps) and name != "poi.world_to_pixel":
            if any("pixel_size_m>" in s or "pixel_size_m " in s for s in _strings(args)
                   if "<" in s):
                a.add("poi.constant_pixel_size",
                      f"{label} ({name}): reads pixel_size_m from poi.world_to_pixel's features, "
                      f"which the benchmark always sets to 0.8 m whatever the raster's GSD; use "
                      f"the layer's pixel size instead.", f"{loc}.args")


CHECKS: dict[str, tuple[str, str]] = {**RASTER_AND_LOGIC_CHECKS, **VECTOR_CHECKS, **POI_AND_VIS_CHECKS}


def run(a: Any) -> None:
    """Every tool-parity check over one QC analysis (see the module docstring)."""
    check_raster_and_logic(a)
    check_vector(a)
    check_poi_and_vis(a)
