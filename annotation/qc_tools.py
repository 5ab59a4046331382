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

from replay.references import parse_reference

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
    benchmark behaviours behind them are listed in ``replay/tools/quirks.py``
    (``_RASTER_AND_LOGIC``); absent class indices are ``classes.stale_index`` and multi-class
    masks given to mask.compose_multiclass ``classes.binary_expected`` (annotation.qc).
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
                    parse_reference(lo) is None:
                a.add("tool.loop_over_string",
                      f"{label}: loop_over is the path {lo!r}; gold replay expands it, but the "
                      f"benchmark's tool schema (list) refuses it when an agent calls the tool, "
                      f"so an agent cannot follow this step as written. Pass the items as a "
                      f"list (e.g. ras.grid_windows' windows) where the plan allows it.",
                      f"{loc}.args.loop_over")
        if name == "tool.loop" and loc.startswith("trajectory[") and loc.endswith("]") \
                and loc.count("[") == 1:
            try:
                step = a.steps[int(loc[len("trajectory["):-1])]
            except (ValueError, IndexError, TypeError):
                step = None
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
}


def check_vector(a: Any) -> None:
    """Findings for vec.* steps."""


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
