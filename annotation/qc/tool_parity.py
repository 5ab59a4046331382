"""QC checks for steps that rely on a benchmark tool behaviour the studio no longer refuses.

The studio's tools return what the benchmark's tools return (``kernel/tools/quirks.py``), so
inputs the tools used to refuse by raising (an absent class index, layers in mixed pixel and
geographic frames, georeferencing without a CRS, a multi-band mask, an unknown field, a negative
volume, ...) now give the benchmark's observation. These checks tell the author instead, without
changing the gold: an ``error`` when the step relies on a meaningless value, a ``warning`` when it
relies on a documented quirk.

Each family section contributes its check ids to ``CHECKS`` (id → (severity, meaning)) and a
function over the QC analysis (``annotation.qc.plan.Analysis``: ``a.tool_calls`` lists every
(nested) call as ``(location, ToolInfo, args, scope)``, ``a.layer(value)`` the layer a literal
file names, ``a.describe(value, scope)`` the sources of an argument; ``a.add(check, message,
location)`` records a finding). ``run(a)`` is called by ``annotation.qc.suite`` after the step checks.
"""
from __future__ import annotations

from typing import Any

from kernel.references import get_obs_value, loop_over_reference, parse_reference

from .registry import declare

__all__ = ["CHECKS", "run"]


# ---------------------------------------------------------------------------------------------
# ras.*, mask.*, calc.*, logi.*, tool.*, report.*
# ---------------------------------------------------------------------------------------------
RASTER_AND_LOGIC_CHECKS: dict[str, tuple[str, str]] = {
    "tool.multiband_mask": ("error", "a mask tool reads a multi-band image: ras.count_pixels / "
                                     "ras.area count every band, ras.vectorize / "
                                     "mask.compose_multiclass read band 1 only"),
    "tool.geographic_dem": ("error", "a terrain or resampling tool gets a raster in a geographic "
                                     "CRS or without CRS: the benchmark uses its degrees (or "
                                     "pixels) as metres"),
    "tool.nonpositive_pixel_size": ("error", "a literal pixel_size_m is zero or negative: the "
                                             "benchmark squares or multiplies it anyway"),
    "tool.loop_stub_obs": ("error", "an iteration of tool.loop kept a stub observation: a "
                                    "nested call failed and the benchmark went on"),
    "tool.loop_over_unresolved": ("error", "tool.loop's loop_over refers to an earlier step's "
                                           "value that is neither a list nor a layer path: the "
                                           "benchmark loops over nothing"),
    "tool.negative_volume": ("error", "logi.truck_trips gets a negative volume: the benchmark "
                                      "returns a meaningless trip count (0 or negative)"),
    "tool.hillshade_direction": ("warning", "ras.hillshade lights the terrain from another "
                                            "direction than its azimuth names (benchmark quirk)"),
    "tool.loop_over_string": ("warning", "tool.loop's loop_over is a file path string: only "
                                         "gold replay expands it, the benchmark's tool schema "
                                         "(agents) refuses it"),
    "tool.reduce_boolean": ("warning", "tool.reduce ranks a boolean field: the benchmark counts "
                                       "true as 1 and false as 0"),
    "tool.vectorize_area": ("warning", "ras.vectorize's areas are 0 (mask without CRS and no "
                                       "pixel_size_m) or square degrees (geographic mask)"),
    "tool.empty_classes": ("warning", "a class list is empty: ras.count_pixels counts nothing, "
                                      "ras.vectorize gives 0 polygons (ras.area: every class)"),
    "tool.unknown_option": ("warning", "an option value the benchmark silently replaces (units "
                                       "other than percent mean degrees, an unknown resampling "
                                       "means bilinear, an altitude outside 0..90 is used as "
                                       "is)"),
    "tool.float32_format": ("error", "ras.slope / ras.focal_stats get a PNG, JPEG, GIF or BMP "
                                     "raster: the benchmark writes the float32 result in that "
                                     "format, which cannot hold it (focal_stats fails, slope_path "
                                     "names no file)"),
    "tool.threshold_values": ("warning", "ras.threshold's true_value is outside 0..255 (cast to "
                                         "uint8) or equals false_value (nothing tells the "
                                         "selection apart)"),
}

#: mask arguments of the tools that read a mask's samples (tool → argument)
_MASK_READERS = {"ras.count_pixels": "mask_path", "ras.area": "mask_path",
                 "ras.vectorize": "mask_path"}
#: tools that use |transform.a| / |transform.e| as metres (tool → raster argument)
_METRE_PIXEL_TOOLS = {"ras.slope": "dem_path", "ras.hillshade": "dem_path",
                      "ras.resample": "raster_path"}
#: tools whose literal pixel_size_m the benchmark uses without checking its sign
_PIXEL_SIZE_TOOLS = ("ras.area", "ras.vectorize", "calc.point_distance", "report.extract_evidence")
#: tools that write a float32 result with the input raster's own driver (tool → argument), and
#: the file suffixes of the formats whose drivers refuse float32 (kernel.tools._io
#: FLOAT32_UNWRITABLE_DRIVERS: PNG, JPEG, GIF, BMP)
_FLOAT32_WRITERS = {"ras.slope": "dem_path", "ras.focal_stats": "raster_path"}
_FLOAT32_UNWRITABLE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".bmp")
#: (tool, argument) → values the benchmark's code distinguishes; anything else is replaced
_OPTIONS = {("ras.slope", "units"): ("degrees", "percent"),
            ("ras.reproject", "resampling"): ("nearest", "bilinear", "cubic"),
            ("ras.resample", "resampling"): ("nearest", "bilinear", "cubic")}
#: boolean result keys of the benchmark's tools (calc.greater_than, ras.sample_point(s),
#: ras.clip, vec.graph_shortest_path, vec.repair_min_edges, calc.weighted_sum, road graphs)
_BOOLEAN_KEYS = {"result", "is_inside", "clamped", "snap_failed", "snapped_on_damaged",
                 "auto_selected", "normalized", "damaged"}


def _band_count(layer: dict | None) -> int | None:
    if not layer:
        return None
    try:
        n = int(layer.get("band_count"))
    except (TypeError, ValueError):
        return None
    return n


def _crs_is_geographic(layer: dict | None) -> bool:
    """True when the layer's CRS is a geographic (degree) CRS such as EPSG:4326."""
    if not layer or not layer.get("crs"):
        return False
    try:
        from pyproj import CRS

        return bool(CRS.from_user_input(str(layer["crs"])).is_geographic)
    except Exception:
        return False


def _not_georeferenced(layer: dict | None) -> bool:
    if not layer:
        return False
    return layer.get("georeferenced") is False or str(layer.get("frame", "")) == "pixel"


def check_raster_and_logic(a: Any) -> None:
    """Findings for ras.*, mask.*, calc.*, logi.*, tool.* and report.* steps.

    Each finding names the step argument (``<location>.args.<argument>``) and the fix. The
    benchmark behaviours behind them are listed in ``kernel/tools/quirks.py``
    (``_RASTER_AND_LOGIC``); absent class indices are ``classes.stale_index`` and multi-class
    masks given to mask.compose_multiclass ``classes.binary_expected`` (annotation.qc.manifest).
    """
    for loc, info, args, _scope in a.tool_calls:
        name = info.name
        if not isinstance(args, dict):
            continue
        label = f"{loc} ({name})"
        mask_arg = _MASK_READERS.get(name)
        if mask_arg:
            value = args.get(mask_arg)
            n = _band_count(a.layer(value))
            if n and n > 1:
                how = ("counts each of its bands, so every pixel counts up to "
                       f"{n} times") if name != "ras.vectorize" else "reads band 1 only"
                a.add("tool.multiband_mask",
                      f"{label}: '{value}' has {n} bands; the benchmark {how}. Pass a "
                      f"single-band class mask (a seg.* output, or ras.threshold of one band).",
                      f"{loc}.args.{mask_arg}")
            if name == "ras.vectorize":
                layer = a.layer(value)
                if _crs_is_geographic(layer):
                    a.add("tool.vectorize_area",
                          f"{label}: '{value}' is in a geographic CRS; the benchmark's area_m2 is "
                          f"in square degrees rounded to 0.01 (so 0). Reproject the mask to UTM "
                          f"first (ras.reproject), or measure with ras.area.",
                          f"{loc}.args.{mask_arg}")
                elif _not_georeferenced(layer) and args.get("pixel_size_m") in (None, 0):
                    a.add("tool.vectorize_area",
                          f"{label}: '{value}' has no CRS and no pixel_size_m is given; the "
                          f"benchmark writes area_m2 0 for every polygon and total_area_m2 0.0. "
                          f"Give pixel_size_m (the sample's GSD).",
                          f"{loc}.args.pixel_size_m")
        if name == "mask.compose_multiclass" and isinstance(args.get("mask_paths"), list):
            for k, value in enumerate(args["mask_paths"]):
                n = _band_count(a.layer(value))
                if n and n > 1:
                    a.add("tool.multiband_mask",
                          f"{label}: mask_paths[{k}] '{value}' has {n} bands; the benchmark reads "
                          f"band 1 only and takes every value > 0 of it. Pass a binary "
                          f"single-band mask (ras.threshold).",
                          f"{loc}.args.mask_paths[{k}]")
        raster_arg = _METRE_PIXEL_TOOLS.get(name)
        if raster_arg:
            value = args.get(raster_arg)
            layer = a.layer(value)
            if _crs_is_geographic(layer):
                a.add("tool.geographic_dem",
                      f"{label}: '{value}' is in a geographic CRS; the benchmark divides by its "
                      f"pixel size in degrees as if it were metres, so the result is "
                      f"meaningless. Reproject it to a metric CRS first (ras.reproject to UTM).",
                      f"{loc}.args.{raster_arg}")
            elif _not_georeferenced(layer):
                a.add("tool.geographic_dem",
                      f"{label}: '{value}' has no CRS; the benchmark takes 1 pixel as 1 metre. "
                      f"Use a georeferenced raster (GeoTIFF with a metric CRS).",
                      f"{loc}.args.{raster_arg}")
        if name in _PIXEL_SIZE_TOOLS:
            px = args.get("pixel_size_m")
            if isinstance(px, (int, float)) and not isinstance(px, bool) and px <= 0:
                a.add("tool.nonpositive_pixel_size",
                      f"{label}: pixel_size_m is {px}; the benchmark uses it as is (an area is "
                      f"its square, a distance its multiple). Give the sample's GSD in metres.",
                      f"{loc}.args.pixel_size_m")
        if name in ("ras.count_pixels", "ras.vectorize") and args.get("classes") == []:
            what = "counts nothing ({} / 0)" if name == "ras.count_pixels" else \
                "extracts 0 polygons"
            a.add("tool.empty_classes",
                  f"{label}: classes is empty; the benchmark {what}. List the class indices of "
                  f"the mask to measure.",
                  f"{loc}.args.classes")
        for (tname, opt), allowed in _OPTIONS.items():
            v = args.get(opt) if tname == name else None
            if isinstance(v, str) and v not in allowed:
                means = "degrees" if opt == "units" else "bilinear"
                a.add("tool.unknown_option",
                      f"{label}: {opt} {v!r} is not one of {', '.join(allowed)}; the benchmark "
                      f"silently uses {means}. Write {means!r} (or the option you mean).",
                      f"{loc}.args.{opt}")
        if name == "ras.hillshade":
            alt = args.get("altitude")
            if isinstance(alt, (int, float)) and not isinstance(alt, bool) and not 0 <= alt <= 90:
                a.add("tool.unknown_option",
                      f"{label}: altitude {alt} is outside 0..90 degrees; the benchmark uses it "
                      f"as is. Give the sun's elevation above the horizon.",
                      f"{loc}.args.altitude")
        if name == "ras.threshold":
            tv, fv = args.get("true_value", 255), args.get("false_value", 0)
            if isinstance(tv, int) and not isinstance(tv, bool) and \
                    (not 0 <= tv <= 255 or tv == fv):
                a.add("tool.threshold_values",
                      f"{label}: true_value {tv} " + ("equals false_value" if tv == fv else
                                                      f"is cast to uint8 ({tv % 256})")
                      + "; the mask cannot show the selection. Use a value in 1..255 other than "
                        "false_value (255 by default).",
                      f"{loc}.args.true_value")
        f32_arg = _FLOAT32_WRITERS.get(name)
        if f32_arg and isinstance(args.get(f32_arg), str) and \
                args[f32_arg].strip().lower().endswith(_FLOAT32_UNWRITABLE_SUFFIXES):
            value = args[f32_arg]
            what = ("fails" if name == "ras.focal_stats" else
                    "saves the slope as .npy and reports a slope_path that names no file, so a "
                    "later step reading it finds nothing")
            a.add("tool.float32_format",
                  f"{label}: '{value}' is not a GeoTIFF; the benchmark writes the float32 result "
                  f"with the input's own format, which cannot hold float32, so the step {what}. "
                  f"Pass a GeoTIFF (ras.clip or ras.resample write one).",
                  f"{loc}.args.{f32_arg}")
        if name == "ras.hillshade":
            a.add("tool.hillshade_direction",
                  f"{label}: the benchmark's hillshade (np.gradient rows growing southwards, "
                  f"aspect atan2(-dz/dx, dz/dy)) lights the terrain from another direction than "
                  f"azimuth names; the gold follows it. Do not ask which slopes face the sun.",
                  f"{loc}.args.azimuth")
        if name == "logi.truck_trips":
            vol = args.get("volume_m3")
            if isinstance(vol, (int, float)) and not isinstance(vol, bool) and vol < 0:
                a.add("tool.negative_volume",
                      f"{label}: volume_m3 is {vol}; the benchmark returns ceil({vol} / capacity),"
                      f" a meaningless trip count. Use the (positive) volume of calc.volume.",
                      f"{loc}.args.volume_m3")
        if name == "tool.loop":
            lo = args.get("loop_over")
            # a '<k> from trajectory[N].obs' reference is the gold's notation for the list an
            # agent passes; a literal path string is what the schema refuses
            if isinstance(lo, str) and not lo.strip().startswith("[") and \
                    parse_reference(lo) is None and loop_over_reference(lo) is None:
                a.add("tool.loop_over_string",
                      f"{label}: loop_over is the path {lo!r}; gold replay expands it, but the "
                      f"benchmark's tool schema (list) refuses it when an agent calls the tool, "
                      f"so an agent cannot follow this step as written. Pass the items as a "
                      f"list (e.g. ras.grid_windows' windows) where the plan allows it.",
                      f"{loc}.args.loop_over")
        if name == "tool.loop" and loc.startswith("trajectory[") and loc.endswith("]") \
                and loc.count("[") == 1:
            try:
                at = int(loc[len("trajectory["):-1])
                step = a.steps[at]
            except (ValueError, IndexError, TypeError):
                at, step = None, None
            lo = args.get("loop_over")
            ref = loop_over_reference(lo)  # as the benchmark's loop reads it ("from" spaces optional)
            if at is not None and ref is not None and 0 <= ref[1] < at and ref[1] < len(a.steps):
                ref_key, ref_index = ref
                src = a.steps[ref_index]
                src_obs = src.get("obs") if isinstance(src, dict) else None
                # a key the tool never returns is references.key; here the replayed obs holds
                # the key with a value the benchmark's loop cannot iterate
                if isinstance(src_obs, dict) and ref_key in src_obs:
                    value = get_obs_value(src_obs, ref_key)
                    if not isinstance(value, list) and not (
                            isinstance(value, str) and value.endswith((".geojson", ".json"))):
                        got = "is null" if value is None else f"holds a {type(value).__name__}"
                        a.add("tool.loop_over_unresolved",
                              f"{label}: loop_over is {lo!r}, but '{ref_key}' of step "
                              f"{ref_index} {got}; the benchmark's loop then runs over no items "
                              f"and the gold is an empty list. Refer to a list (e.g. "
                              f"ras.grid_windows' windows) or a layer path.",
                              f"{loc}.args.loop_over")
            obs = step.get("obs") if isinstance(step, dict) else None
            if isinstance(obs, list):
                for k, res in enumerate(obs):
                    last = res.get("last_obs") if isinstance(res, dict) else None
                    if isinstance(last, dict) and last.get("status") == "stub":
                        a.add("tool.loop_stub_obs",
                              f"{label}: iteration {k} kept a stub observation of "
                              f"{last.get('tool')} ({str(last.get('error') or '')[:80]}); the "
                              f"gold of that item is no result. Fix the nested call's arguments "
                              f"(an unresolved <item.…> or step reference, a missing file).",
                              f"{loc}.obs[{k}].last_obs")
                        break
        if name == "tool.reduce":
            fld = args.get("field")
            if isinstance(fld, str) and fld.split(".")[-1] in _BOOLEAN_KEYS:
                a.add("tool.reduce_boolean",
                      f"{label}: field '{fld}' is a boolean result; the benchmark ranks true as "
                      f"1.0 and false as 0.0 (the first true wins 'max'). Reduce a numeric "
                      f"field (e.g. calc.greater_than's 'value').",
                      f"{loc}.args.field")


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
    "vec.attribute_text": ("error", "vec.filter_by_attribute filters the geometry column: the "
                                    "benchmark compares the geometries' WKT text with the "
                                    "allowed tokens"),
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
    (``kernel/tools/quirks.py``, vec.* section): mixed frames, distances in non-lon/lat layers,
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
        if name == "vec.filter_by_attribute" and isinstance(args.get("attribute_name"), str) \
                and args["attribute_name"].split(".")[-1] == "geometry":
            a.add("vec.attribute_text",
                  f"{label}: attribute_name '{args['attribute_name']}' is the geometry column; the "
                  f"benchmark matches the allowed tokens against each geometry's WKT text "
                  f"('POINT (1 2)'), so the result is meaningless. Name a property of the "
                  f"features (e.g. types).", f"{loc}.args.attribute_name")
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
    from pyproj import CRS  # PROJ's database loads only when QC reads a CRS (not at Django's start)

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
    they followed the benchmark (``kernel/tools/quirks.py``, section poi.*, vis.*), read from
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


CHECKS: dict[str, tuple[str, str]] = declare("tool_parity", {**RASTER_AND_LOGIC_CHECKS, **VECTOR_CHECKS,
                                                              **POI_AND_VIS_CHECKS})


def run(a: Any) -> None:
    """Every tool-parity check over one QC analysis (see the module docstring)."""
    check_raster_and_logic(a)
    check_vector(a)
    check_poi_and_vis(a)
