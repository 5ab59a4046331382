"""Raster tools (``ras.*``, ``mask.*``): rasterio + numpy.

Conventions (see the package docstring): paths in the arguments are resolved through the
context; artifacts are written into the work dir under hashed names and returned by name.

Every tool returns what the benchmark's own tool returns for the same input
(Junjue-Wang/DORA ``dora/tools/analysis.py`` @2b24be70 and ``calculate.py`` @7b969887): an
absent class counts 0, an empty mask vectorises to 0 polygons, a multi-band image is counted
over all its bands. Where that behaviour is physically wrong it is reproduced anyway and listed
in ``kernel.tools.quirks``; ``annotation.qc.tool_parity`` tells the author. A benchmark tool that
fails (returns its ``status: stub`` object) is a ``ToolError`` here.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ._io import (
    CLASS_TAG,
    PIXEL_TAG,
    _quiet,
    lossy_creation_options,
    raster_meta,
    read_band,
    read_mask_tags,
    read_raster,
    source_profile_unwritable,
    values_present,
    write_mask,
    write_raster,
    write_vector,
)
from .base import ToolContext, ToolError, ToolInputError, resolve_or_missing  # noqa: F401  (re-exported: kernel.tools.raster.resolve_or_missing)
from .spec import register

#: RescueNet / aerial labels (benchmark's table), used to name composed classes
RESCUENET_CLASSES = {
    0: "background", 1: "building_no_damage", 2: "building_damage", 3: "building_total_damage",
    4: "pool", 5: "road_no_damage", 6: "road_sand_covered", 7: "tree_fallen",
    8: "tree_not_fallen", 9: "vehicle_not_trapped", 10: "vehicle_trapped", 11: "water",
    255: "ignore",
}

def _refuse_source_profile(meta, tool: str, argument: str, *, float32: bool = False) -> None:
    """Raise ``ToolError`` where the benchmark's write of this tool's output with the input's
    profile fails (a JPEG/YCbCr GeoTIFF; with ``float32`` also a PNG/JPEG/GIF/BMP input; see
    ``_io.source_profile_unwritable``), so its call returns a stub."""
    why = source_profile_unwritable(meta, float32=float32)
    if why:
        raise ToolError(f"{why}: the benchmark writes the output with the input's profile",
                        tool=tool, argument=argument)


_OPS = {
    ">=": np.greater_equal, ">": np.greater, "<=": np.less_equal, "<": np.less, "==": np.equal,
}


def image_values(path: Path, *, tool: str, argument: str) -> np.ndarray:
    """Every sample of an image as the benchmark's ``skimage.io.imread`` sees it.

    Returns an array of shape (bands, H, W). The benchmark's ``ras.count_pixels`` and
    ``ras.area`` read masks with ``skimage.io.imread`` and compare the whole array, so a
    multi-band image is counted over all its bands (an RGB pixel whose three samples equal the
    class counts three times). A palette PNG is expanded to its RGB(A) colours, as imageio
    does. A JPEG-compressed TIFF is decoded by libjpeg as imread's tifffile + imagecodecs
    decode it (Pillow gives the same samples; GDAL's decoder differs by a few levels). Unreadable
    file → ToolInputError.
    """
    if Path(path).suffix.lower() in (".tif", ".tiff"):
        opts = lossy_creation_options(path)
        if opts and str(opts.get("compress")).lower() == "jpeg":
            try:
                from PIL import Image

                with Image.open(path) as im:
                    arr = np.asarray(im)
                return arr[None] if arr.ndim == 2 else np.moveaxis(arr, -1, 0)
            except OSError:
                pass
    if Path(path).suffix.lower() == ".png":
        try:
            from PIL import Image

            with Image.open(path) as im:
                if im.mode == "P":
                    rgb = np.asarray(im.convert("RGBA" if "transparency" in im.info else "RGB"))
                    return np.moveaxis(rgb, -1, 0)
        except OSError:
            pass
    arr, _meta = read_raster(path, tool=tool, argument=argument)
    return arr


#: the ``note`` of the benchmark's result for a missing input file (``_tool_guard`` /
#: ``ras_vectorize`` in ``dora/tools/analysis.py``)
MISSING_INPUT_NOTE = "No input data available; returning empty result."


# --------------------------------------------------------------------------------------------
@register("ras.count_pixels", server="Analysis", module="raster",
          result_keys=["tool", "counts", "total", "classes"])
def ras_count_pixels(ctx: ToolContext, mask_path: str, classes: list[int]) -> dict:
    """Count the samples of a mask equal to each requested class value.

    Output: ``counts`` {"<class>": int} (JSON keys are strings; a repeated class appears once),
    ``total`` = sum over ``counts``, ``classes`` echoed as given. A class the mask does not hold
    counts 0 and an empty ``classes`` list gives ``{}`` / 0, as in the benchmark
    (``analysis.py:ras_count_pixels``). The whole image is compared, so a multi-band image is
    counted over every band (quirk; QC ``tool.multiband_mask``). No area conversion (see
    ``ras.area``). A mask file that does not exist gives the benchmark's empty result
    {tool, note, count: 0, mask_path, classes} (its ``_tool_guard`` on FileNotFoundError; QC
    ``manifest.file_missing``). Errors: unreadable file, path outside the data → ToolInputError.
    """
    tool = "ras.count_pixels"
    path = resolve_or_missing(ctx, mask_path, tool=tool, argument="mask_path")
    if path is None:
        return {"tool": tool, "note": MISSING_INPUT_NOTE, "count": 0, "mask_path": mask_path,
                "classes": [int(c) for c in classes]}
    arr = image_values(path, tool=tool, argument="mask_path")
    counts: dict[str, int] = {}
    for c in classes:
        counts[str(int(c))] = int(np.count_nonzero(arr == int(c)))
    return {"tool": tool, "counts": counts, "total": int(sum(counts.values())),
            "classes": [int(c) for c in classes]}


# --------------------------------------------------------------------------------------------
@register("ras.area", server="Calculate", module="raster",
          result_keys=["tool", "area_m2", "pixel_count", "pixel_size_m"],
          notes={"classes": "None/empty -> all non-zero pixels"})
def ras_area(ctx: ToolContext, mask_path: str, pixel_size_m: float | None,
             classes: list[int] | None = None) -> dict:
    """Area in m² of the selected class values (or of all non-zero samples).

    ``area_m2 = pixel_count · pixel_size_m²`` (``calculate.py:ras_area``): pure pixel counting,
    the georeferencing is never consulted. ``classes`` null or empty → every sample > 0; absent
    classes count 0. Like ``ras.count_pixels`` every band of a multi-band image is counted.
    ``pixel_size_m`` is echoed as given; a zero or negative size is not refused (the area is
    its square). Errors: ``pixel_size_m`` null (the benchmark's parameter is a required float)
    or unknown file → ToolInputError.
    """
    tool = "ras.area"
    if pixel_size_m is None:
        raise ToolInputError("is required (metres per pixel)", tool=tool, argument="pixel_size_m",
                             expected="the sample's pixel size in metres, e.g. 0.3")
    path = ctx.resolve(mask_path, tool=tool, argument="mask_path")
    arr = image_values(path, tool=tool, argument="mask_path")
    target = np.isin(arr, [int(c) for c in classes]) if classes else arr > 0
    n = int(np.count_nonzero(target))
    return {"tool": tool, "area_m2": float(n * (float(pixel_size_m) ** 2)), "pixel_count": n,
            "pixel_size_m": float(pixel_size_m)}


# --------------------------------------------------------------------------------------------
@register("ras.threshold", server="Analysis", module="raster",
          result_keys=["tool", "image_path", "mask_path", "threshold", "op", "band",
                       "selected_pixels", "true_value", "false_value"],
          notes={"op": "one of >=, >, <=, <, =="})
def ras_threshold(ctx: ToolContext, image_path: str, threshold: float, op: str = ">=",
                  band: int = 1, true_value: int = 255, false_value: int = 0) -> dict:
    """Binary uint8 mask (default {0, 255}) from comparing one band to a threshold.

    NaN and nodata pixels are never selected. The output is a GeoTIFF keeping the input's
    georeferencing, nodata = ``false_value`` (``analysis.py:ras_threshold``). As there,
    ``true_value`` is cast to uint8 (256 → 0, −1 → 255) and may equal ``false_value``.
    Errors: bad op, band out of range, a ``false_value`` outside 0..255 (it cannot be the
    uint8 nodata) → ToolInputError.
    """
    tool = "ras.threshold"
    if op not in _OPS:
        raise ToolInputError(f"unknown operator {op!r}", tool=tool, argument="op",
                             expected="one of >=, >, <=, <, ==")
    if not 0 <= int(false_value) <= 255:
        raise ToolInputError(f"{false_value} is beyond the valid range of the uint8 nodata",
                             tool=tool, argument="false_value", expected="0..255")
    path = ctx.resolve(image_path, tool=tool, argument="image_path")
    arr, meta = read_band(path, int(band), tool=tool, argument="image_path")
    _refuse_source_profile(meta, tool, "image_path")
    valid = np.isfinite(arr)
    if meta.nodata is not None:
        valid &= arr != meta.nodata
    selected = np.zeros(arr.shape, dtype=bool)
    selected[valid] = _OPS[op](arr[valid], float(threshold))
    out = np.where(selected, int(true_value), int(false_value)).astype(np.uint8)
    out_path = ctx.output_path(tool, {"image": path, "threshold": float(threshold), "op": op,
                                      "band": int(band), "true": int(true_value),
                                      "false": int(false_value)}, ".tif")
    true_u8 = int(np.array(int(true_value)).astype(np.uint8))
    class_map = {int(false_value): "background"}
    if true_u8 != int(false_value):
        class_map[true_u8] = "selected"
    write_mask(out_path, out, like=meta, nodata=int(false_value), class_map=class_map)
    return {"tool": tool, "image_path": image_path, "mask_path": ctx.artifact_name(out_path),
            "threshold": float(threshold), "op": op, "band": int(band),
            "selected_pixels": int(selected.sum()), "true_value": int(true_value),
            "false_value": int(false_value)}


# --------------------------------------------------------------------------------------------
@register("mask.compose_multiclass", server="Analysis", module="raster",
          result_keys=["tool", "mask_path", "class_values", "classes"],
          notes={"mask_paths": "binary masks (any value > 0 counts)",
                 "class_values": "same length as mask_paths"})
def mask_compose_multiclass(ctx: ToolContext, mask_paths: list[str],
                            class_values: list[int]) -> dict:
    """Merge masks into one class-index map (``analysis.py:mask_compose_multiclass``).

    Band 1 of each mask is read; its positive pixels get ``class_values[i]``; later masks
    overwrite earlier ones; background 0. A multi-band or non-binary mask is not refused: every
    value > 0 of band 1 counts (QC ``tool.multiband_mask`` / ``tool.nonbinary_mask``). Output:
    uint8 GeoTIFF (georeferencing of the first mask), nodata 0; ``classes`` maps "0" and each
    class value to its RescueNet label or ``class_<v>``. Errors: empty list or length mismatch,
    masks of different sizes, class values outside 0..255 → ToolInputError.
    """
    tool = "mask.compose_multiclass"
    if not mask_paths:
        raise ToolInputError("needs at least one mask", tool=tool, argument="mask_paths",
                             expected="list[str] of binary mask paths")
    if len(mask_paths) != len(class_values):
        raise ToolInputError(f"{len(class_values)} class values for {len(mask_paths)} masks",
                             tool=tool, argument="class_values",
                             expected="one class value per mask")
    resolved = [ctx.resolve(p, tool=tool, argument="mask_paths") for p in mask_paths]
    first_meta = raster_meta(resolved[0], tool=tool, argument="mask_paths")
    _refuse_source_profile(first_meta, tool, "mask_paths")
    composed = np.zeros((first_meta.height, first_meta.width), dtype=np.uint8)
    for p, name, value in zip(resolved, mask_paths, class_values):
        arr, _meta = read_band(p, 1, tool=tool, argument="mask_paths")
        if arr.shape != composed.shape:
            raise ToolInputError(f"{Path(name).name} is {arr.shape[0]}x{arr.shape[1]} but the "
                                 f"first mask is {composed.shape[0]}x{composed.shape[1]}",
                                 tool=tool, argument="mask_paths", expected="masks of one size")
        if not 0 <= int(value) <= 255:
            raise ToolInputError(f"class value {value} is out of bounds for uint8", tool=tool,
                                 argument="class_values", expected="0..255")
        composed[arr > 0] = int(value)
    labels = {0: "background"}
    for v in class_values:
        labels[int(v)] = RESCUENET_CLASSES.get(int(v), f"class_{int(v)}")
    out_path = ctx.output_path(tool, {"masks": resolved, "class_values": list(class_values)},
                               ".tif")
    write_mask(out_path, composed, like=first_meta, class_map=labels, nodata=0)
    return {"tool": tool, "mask_path": ctx.artifact_name(out_path),
            "class_values": [int(v) for v in class_values],
            "classes": {str(k): v for k, v in labels.items()}}


# --------------------------------------------------------------------------------------------
@register("ras.vectorize", server="Analysis", module="raster",
          result_keys=["tool", "vector_path", "count", "total_pixels", "total_area_m2"],
          non_null=("pixel_size_m",),  # analysis.py: pixel_size_m: float = None
          notes={"classes": "class values to polygonise (e.g. [3] for destroyed, [255] for a "
                            "binary mask)",
                 "pixel_size_m": "used only for non-georeferenced masks"})
def ras_vectorize(ctx: ToolContext, mask_path: str, classes: list[int],
                  pixel_size_m: float | None = None) -> dict:
    """Polygons of the 4-connected regions of the selected class values of band 1
    (rasterio ``features.shapes``), as ``analysis.py:ras_vectorize`` makes them.

    GeoJSON features carry ``id`` (1-based), ``class``, ``pixel_count``, ``area_m2``,
    ``pixel_size_m``. A mask with a CRS keeps it: ``area_m2`` is the polygon's area in CRS
    units rounded to 2 decimals (square degrees on a geographic mask: quirk) and
    ``pixel_count`` = area / |a·e|. A mask without CRS gives pixel coordinates (x = column,
    y = row) and ``area_m2 = round(pixels · pixel_size_m², 2)``, or 0 when no pixel size is
    given (quirk: so ``total_area_m2`` is 0.0, not null). No selected pixel (absent class,
    empty mask, empty ``classes``) → 0 polygons, ``total_area_m2`` null. ``count`` is the
    number of polygons; ``total_area_m2`` the sum of the features' areas. A mask file that
    does not exist gives the benchmark's answer {vector_path: null, count: 0, total_pixels: 0,
    total_area_m2: null, note}, not an error.
    """
    import geopandas as gpd
    from affine import Affine
    from rasterio import features
    from shapely.geometry import shape

    tool = "ras.vectorize"
    path = resolve_or_missing(ctx, mask_path, tool=tool, argument="mask_path",
                              empty_is_missing=True)
    if path is None:
        return {"tool": tool, "vector_path": None, "count": 0, "total_pixels": 0,
                "total_area_m2": None, "note": "No raster data available; zero features extracted."}
    arr, meta = read_band(path, 1, tool=tool, argument="mask_path")
    target = np.isin(arr, [int(c) for c in classes])
    georef = meta.georeferenced
    transform = meta.transform if georef else Affine.identity()
    crs = meta.crs if georef else None
    records, geoms = [], []
    if target.any():
        in_crs_units = transform != Affine.identity()
        for geom, value in features.shapes(arr.astype(np.int32), mask=target.astype(np.uint8),
                                           transform=transform):
            g = shape(geom)
            if in_crs_units:
                area = round(g.area, 2)
                n = int(round(g.area / abs(transform.a * transform.e)))
            else:
                n = int(round(g.area))
                area = round(n * (pixel_size_m ** 2), 2) if pixel_size_m else None
            records.append({"id": len(records) + 1, "class": int(value), "pixel_count": n,
                            "area_m2": float(area) if area is not None else 0,
                            "pixel_size_m": float(pixel_size_m) if pixel_size_m is not None
                            else None})
            geoms.append(g)
    if records:
        gdf = gpd.GeoDataFrame(records, geometry=gpd.GeoSeries(geoms, crs=crs), crs=crs)
    else:
        gdf = gpd.GeoDataFrame({"class": [], "pixel_count": [], "area_m2": []},
                               geometry=gpd.GeoSeries([], crs=None))
    out_path = ctx.output_path(tool, {"mask": path, "classes": [int(c) for c in classes],
                                      "pixel_size_m": pixel_size_m}, ".geojson")
    write_vector(out_path, gdf)
    total_pixels = int(sum(int(r["pixel_count"]) for r in records))
    total_area = float(sum(r["area_m2"] for r in records)) if records else None
    return {"tool": tool, "vector_path": ctx.artifact_name(out_path), "count": len(records),
            "total_pixels": total_pixels, "total_area_m2": total_area}


# --------------------------------------------------------------------------------------------
@register("ras.stats", server="Analysis", module="raster",
          result_keys=["tool", "image_path", "band", "nodata", "min", "max", "mean", "std",
                       "valid_pixels"])
def ras_stats(ctx: ToolContext, image_path: str, band: int = 1, ignore_nodata: bool = True) -> dict:
    """Min, max, mean and (population) standard deviation of one band
    (``analysis.py:ras_stats``).

    NaN pixels are always ignored; nodata pixels when ``ignore_nodata``. The statistics are
    computed by numpy in the band's dtype (a float32 band's mean carries float32 rounding, as
    the benchmark's does). No valid pixel → the statistics are null and ``valid_pixels`` is 0.
    A NaN nodata is reported as null (observations are plain JSON; the benchmark writes NaN).
    Errors: band out of range, unknown file → ToolInputError.
    """
    tool = "ras.stats"
    path = ctx.resolve(image_path, tool=tool, argument="image_path")
    arr, meta = read_band(path, int(band), tool=tool, argument="image_path")
    valid = np.isfinite(arr)
    if ignore_nodata and meta.nodata is not None:
        valid &= arr != meta.nodata
    vals = arr[valid]  # statistics in the band's own dtype (float32 stays float32), as there
    out = {"tool": tool, "image_path": image_path, "band": int(band),
           "nodata": float(meta.nodata) if meta.nodata is not None else None}
    if vals.size == 0:
        out.update({"min": None, "max": None, "mean": None, "std": None, "valid_pixels": 0})
    else:
        out.update({"min": float(vals.min()), "max": float(vals.max()), "mean": float(vals.mean()),
                    "std": float(vals.std()), "valid_pixels": int(vals.size)})
    return out


# --------------------------------------------------------------------------------------------
@register("ras.sample_point", server="Analysis", module="raster",
          result_keys=["tool", "row", "col", "pixel_values", "is_inside"])
def ras_sample_point(ctx: ToolContext, image_path: str, row: int, col: int) -> dict:
    """Pixel value of every band at (row, col), cast to int as the benchmark does
    (``analysis.py:ras_sample_point``: 366.5 → 366, −2.7 → −2); ``pixel_values`` keys are
    1-based band numbers. A point outside the image (the benchmark's "Coordinates out of
    bounds" stub) or a NaN value → ToolInputError."""
    tool = "ras.sample_point"
    path = ctx.resolve(image_path, tool=tool, argument="image_path")
    arr, meta = read_raster(path, tool=tool, argument="image_path")
    if not (0 <= row < meta.height and 0 <= col < meta.width):
        err = ToolInputError(f"pixel ({row}, {col}) is outside the {meta.height}x{meta.width} "
                             f"image", tool=tool,
                             argument="row" if not 0 <= row < meta.height else "col",
                             expected=f"row 0..{meta.height - 1}, col 0..{meta.width - 1}")
        err.benchmark_stub = True  # the benchmark's "Coordinates out of bounds" stub object
        raise err
    values = {str(b + 1): _int_value(arr[b, row, col], tool) for b in range(arr.shape[0])}
    return {"tool": tool, "row": int(row), "col": int(col), "pixel_values": values,
            "is_inside": True}


@register("ras.sample_points", server="Analysis", module="raster",
          result_keys=["tool", "image_path", "total_points", "results"])
def ras_sample_points(ctx: ToolContext, image_path: str, points: list[dict[str, int]]) -> dict:
    """Pixel values (cast to int, as ``ras.sample_point``) at many {row, col} points
    (``analysis.py:ras_sample_points``); points outside the image get
    ``pixel_values: null, is_inside: false`` (not an error). A point without row/col or a NaN
    value fails the whole call, as there."""
    tool = "ras.sample_points"
    path = ctx.resolve(image_path, tool=tool, argument="image_path")
    arr, meta = read_raster(path, tool=tool, argument="image_path")
    results = []
    for i, pt in enumerate(points):
        if "row" not in pt or "col" not in pt:
            raise ToolInputError(f"point {i} lacks row/col: {pt}", tool=tool, argument="points",
                                 expected="[{row, col}, ...]")
        r, c = int(pt["row"]), int(pt["col"])
        if 0 <= r < meta.height and 0 <= c < meta.width:
            results.append({"row": r, "col": c, "is_inside": True,
                            "pixel_values": {str(b + 1): _int_value(arr[b, r, c], tool)
                                             for b in range(arr.shape[0])}})
        else:
            results.append({"row": r, "col": c, "pixel_values": None, "is_inside": False})
    return {"tool": tool, "image_path": image_path, "total_points": len(points),
            "results": results}


def _int_value(v, tool: str) -> int:
    """``int(v)`` of a sampled value (truncation toward zero, as Python's ``int``); NaN or
    infinity → ToolInputError (the benchmark's ``int()`` raises there)."""
    f = v.item() if hasattr(v, "item") else v
    if isinstance(f, float) and not math.isfinite(f):
        raise ToolInputError(f"the pixel value is {f}, which cannot be cast to int", tool=tool,
                             argument="image_path", expected="a finite pixel value")
    return int(f)


# --------------------------------------------------------------------------------------------
@register("ras.clip", server="Analysis", module="raster",
          result_keys=["tool", "output_path", "window", "out_shape", "bands", "dtype", "crs",
                       "transform", "clamped"],
          notes={"x1": "first row", "x2": "end row (exclusive)", "y1": "first column",
                 "y2": "end column (exclusive)"})
def ras_clip(ctx: ToolContext, image_path: str, x1: int, x2: int, y1: int, y2: int) -> dict:
    """Crop the pixel window [x1:x2, y1:y2] (x = rows, y = columns, end exclusive; swapped
    bounds are reordered; the window is clamped to the image). GeoTIFF output keeping the
    georeferencing (shifted transform). ``transform`` lists the 9 numbers of the window's
    affine transform, also for an image without CRS (its identity grid shifted), as
    ``analysis.py:ras_clip`` does. Empty window or window outside → ToolInputError."""
    from rasterio.windows import Window
    from rasterio.windows import transform as win_transform

    tool = "ras.clip"
    x1, x2 = sorted((int(x1), int(x2)))
    y1, y2 = sorted((int(y1), int(y2)))
    if x1 == x2 or y1 == y2:
        raise ToolInputError("empty window (x1 == x2 or y1 == y2)", tool=tool, argument="x2",
                             expected="a window of at least one pixel")
    path = ctx.resolve(image_path, tool=tool, argument="image_path")
    arr, meta = read_raster(path, tool=tool, argument="image_path")
    _refuse_source_profile(meta, tool, "image_path")
    cx1, cx2 = max(0, x1), min(meta.height, x2)
    cy1, cy2 = max(0, y1), min(meta.width, y2)
    if cx1 >= cx2 or cy1 >= cy2:
        raise ToolInputError(f"window rows {x1}:{x2}, cols {y1}:{y2} lies outside the "
                             f"{meta.height}x{meta.width} image", tool=tool, argument="x1",
                             expected="a window overlapping the image")
    data = arr[:, cx1:cx2, cy1:cy2]
    win = Window.from_slices((cx1, cx2), (cy1, cy2))
    new_t = win_transform(win, meta.transform)
    out_path = ctx.output_path(tool, {"image": path, "window": [cx1, cx2, cy1, cy2]}, ".tif")
    write_raster(out_path, np.ascontiguousarray(data), like=meta, transform=new_t,
                 nodata=meta.nodata)
    class_map, px = read_mask_tags(path)
    if class_map is None and data.shape[0] == 1 and data.dtype == np.uint8:
        # a window of a mask keeps the value domain of the whole mask, so a class absent from
        # this window only is a legitimate zero, not a stale index
        class_map = {v: f"class_{v}" for v in values_present(arr[0])}
    if class_map or px:  # keep a mask's class map
        _retag(out_path, class_map, px)
    return {"tool": tool, "output_path": ctx.artifact_name(out_path),
            "window": {"x1": cx1, "x2": cx2, "y1": cy1, "y2": cy2},
            "out_shape": [int(data.shape[1]), int(data.shape[2])], "bands": int(data.shape[0]),
            "dtype": str(data.dtype), "crs": str(meta.crs) if meta.georeferenced else None,
            "transform": [float(v) for v in tuple(new_t)],
            "clamped": (cx1, cx2, cy1, cy2) != (x1, x2, y1, y2)}


def _retag(path, class_map, px):
    import json

    import rasterio

    tags = {}
    if class_map:
        tags[CLASS_TAG] = json.dumps({str(k): v for k, v in sorted(class_map.items())},
                                     separators=(",", ":"))
    if px:
        tags[PIXEL_TAG] = repr(float(px))
    quiet = _quiet()
    try:
        with rasterio.open(path, "r+") as dst:
            dst.update_tags(**tags)
    finally:
        quiet.__exit__(None, None, None)


# --------------------------------------------------------------------------------------------
@register("ras.grid_windows", server="Calculate", module="raster",
          result_keys=["tool", "windows", "image_shape", "base_tile_px", "count", "note"])
def ras_grid_windows(ctx: ToolContext, image_path: str, n: int) -> dict:
    """Split the image into an n×n grid of pixel windows [x1, x2, y1, y2] (x = rows), row-major;
    the last row/column absorbs the remainder. n < 1 or n larger than the image →
    ToolInputError."""
    tool = "ras.grid_windows"
    if int(n) < 1:
        raise ToolInputError(f"n must be >= 1, got {n}", tool=tool, argument="n",
                             expected="an integer >= 1")
    path = ctx.resolve(image_path, tool=tool, argument="image_path")
    meta = raster_meta(path, tool=tool, argument="image_path")
    H, W = meta.height, meta.width
    n = int(n)
    if H < n or W < n:
        raise ToolInputError(f"n={n} is too large for a {H}x{W} image", tool=tool, argument="n",
                             expected=f"n <= {min(H, W)}")
    bh, bw = H // n, W // n
    windows = []
    for i in range(n):
        r1, r2 = i * bh, (i + 1) * bh if i < n - 1 else H
        for j in range(n):
            c1, c2 = j * bw, (j + 1) * bw if j < n - 1 else W
            windows.append([r1, r2, c1, c2])
    return {"tool": tool, "windows": windows, "image_shape": [H, W], "base_tile_px": [bh, bw],
            "count": len(windows), "note": "Row-major; last row/col expanded to image boundary."}


# --------------------------------------------------------------------------------------------
@register("ras.diff", server="Analysis", module="raster",
          result_keys=["tool", "image_a_path", "image_b_path", "output_path", "band_a", "band_b",
                       "nodata", "min", "max", "mean", "valid_pixels"])
def ras_diff(ctx: ToolContext, image_a_path: str, image_b_path: str, band_a: int = 1,
             band_b: int = 1) -> dict:
    """A − B for one band each (e.g. DSM − DEM), float32 GeoTIFF with nodata −9999; pixels
    that are NaN or nodata in either input are nodata. Size, CRS or transform mismatch →
    ToolInputError."""
    tool = "ras.diff"
    pa = ctx.resolve(image_a_path, tool=tool, argument="image_a_path")
    pb = ctx.resolve(image_b_path, tool=tool, argument="image_b_path")
    a, ma = read_band(pa, int(band_a), tool=tool, argument="image_a_path")
    b, mb = read_band(pb, int(band_b), tool=tool, argument="image_b_path")
    _refuse_source_profile(ma, tool, "image_a_path")
    if a.shape != b.shape:
        raise ToolInputError(f"rasters differ in size: {a.shape} vs {b.shape}", tool=tool,
                             argument="image_b_path", expected="rasters of one grid")
    if ma.crs != mb.crs or ma.transform != mb.transform:
        raise ToolInputError("rasters differ in CRS or transform", tool=tool,
                             argument="image_b_path", expected="rasters of one grid")
    a = a.astype(np.float32)
    b = b.astype(np.float32)
    valid = np.isfinite(a) & np.isfinite(b)
    if ma.nodata is not None:
        valid &= a != np.float32(ma.nodata)
    if mb.nodata is not None:
        valid &= b != np.float32(mb.nodata)
    nod = -9999.0
    diff = np.full(a.shape, nod, dtype=np.float32)
    diff[valid] = a[valid] - b[valid]
    out_path = ctx.output_path(tool, {"a": pa, "b": pb, "band_a": int(band_a),
                                      "band_b": int(band_b)}, ".tif")
    write_raster(out_path, diff, like=ma, nodata=nod)
    vals = diff[valid]  # float32 statistics, as the benchmark's
    return {"tool": tool, "image_a_path": image_a_path, "image_b_path": image_b_path,
            "output_path": ctx.artifact_name(out_path), "band_a": int(band_a),
            "band_b": int(band_b), "nodata": nod,
            "min": float(vals.min()) if vals.size else None,
            "max": float(vals.max()) if vals.size else None,
            "mean": float(vals.mean()) if vals.size else None, "valid_pixels": int(vals.size)}


# --------------------------------------------------------------------------------------------
@register("ras.concat", server="Analysis", module="raster",
          result_keys=["tool", "output_path", "height", "width", "bands", "dtype", "crs",
                       "transform", "band_map", "note"],
          notes={"dim": "only 'bands' (or 'channels')"})
def ras_concat(ctx: ToolContext, image_path_list: list[str], dim: str = "bands") -> dict:
    """Stack rasters of one size, one transform (and, when both have one, one CRS) along the
    band axis into one GeoTIFF (``analysis.py:ras_concat``); dtype is numpy's common type.
    ``band_map`` lists each input's bands; ``transform`` the first raster's 9 affine numbers
    (also without CRS). Mismatches → ToolInputError."""
    tool = "ras.concat"
    if not image_path_list:
        raise ToolInputError("is empty", tool=tool, argument="image_path_list",
                             expected="at least one raster path")
    if dim.lower() not in ("bands", "channels"):
        raise ToolInputError(f"unsupported dim {dim!r}", tool=tool, argument="dim",
                             expected="'bands' or 'channels'")
    arrays, band_map, metas = [], [], []
    resolved = []
    out_band = 0
    for p in image_path_list:
        rp = ctx.resolve(p, tool=tool, argument="image_path_list")
        resolved.append(rp)
        arr, meta = read_raster(rp, tool=tool, argument="image_path_list")
        if metas:
            ref = metas[0]
            if meta.shape != ref.shape:
                raise ToolInputError(f"{Path(p).name} is {meta.height}x{meta.width}, expected "
                                     f"{ref.height}x{ref.width}", tool=tool,
                                     argument="image_path_list", expected="rasters of one size")
            if (ref.crs is not None and meta.crs is not None and ref.crs != meta.crs) or \
                    ref.transform != meta.transform:
                raise ToolInputError(f"{Path(p).name} differs in CRS or transform", tool=tool,
                                     argument="image_path_list", expected="rasters of one grid")
        metas.append(meta)
        arrays.append(arr)
        band_map.append({"path": p, "in_bands": int(arr.shape[0]), "out_start_band": out_band + 1,
                         "out_end_band": out_band + int(arr.shape[0])})
        out_band += int(arr.shape[0])
    dtype = np.result_type(*[a.dtype for a in arrays])
    data = np.concatenate([a.astype(dtype, copy=False) for a in arrays], axis=0)
    ref = metas[0]
    out_path = ctx.output_path(tool, {"images": resolved, "dim": "bands"}, ".tif")
    write_raster(out_path, data, like=ref, transform=ref.transform)
    return {"tool": tool, "output_path": ctx.artifact_name(out_path), "height": ref.height,
            "width": ref.width, "bands": int(data.shape[0]), "dtype": str(dtype),
            "crs": str(ref.crs) if ref.georeferenced else None,
            "transform": [float(v) for v in tuple(ref.transform)],
            "band_map": band_map,
            "note": "Concatenated along bands; inputs must share size & georeferencing."}



# ============================================================================================
# Terrain, warping and focal statistics (ras.hillshade, ras.slope, ras.reproject,
# ras.resample, ras.focal_stats)
# ============================================================================================
_RESAMPLING = ("nearest", "bilinear", "cubic")


def named_output(ctx: ToolContext, tool: str, key: dict, suffix: str, out_path: str | None,
                 suffixes: tuple[str, ...]) -> Path:
    """Artifact path: the hashed name, or ``out_path`` when given as a bare file name.

    ``out_path`` may not name a directory (artifacts live in the work dir only); its suffix
    must be one of ``suffixes``. Anything else → ToolInputError.
    """
    if out_path is None or not str(out_path).strip():
        return ctx.output_path(tool, key, suffix)
    text = str(out_path).strip()
    p = Path(text)
    if p.name != text or p.name in (".", ".."):
        raise ToolInputError(f"{text!r} names a directory; artifacts are written into the run's "
                             f"work dir", tool=tool, argument="out_path",
                             expected="a bare file name (or leave empty for an automatic name)")
    if p.suffix.lower() not in suffixes:
        raise ToolInputError(f"{text!r} has the wrong suffix", tool=tool, argument="out_path",
                             expected=f"a name ending in one of {list(suffixes)}")
    ctx.work_dir.mkdir(parents=True, exist_ok=True)
    return ctx.work_dir / p.name


def _resampling(value: str):
    """rasterio ``Resampling`` for a name; as in the benchmark an unknown name (or any value
    other than nearest/bilinear/cubic) means bilinear, not an error."""
    from rasterio.enums import Resampling

    return getattr(Resampling, value) if value in _RESAMPLING else Resampling.bilinear


def _dem_float32(ctx, tool, dem_path):
    """(path, band 1 as float32, meta, x resolution, y resolution) of a DEM.

    The resolutions are |transform.a| and |transform.e| in CRS units, as the benchmark reads
    them: degrees on a geographic DEM (quirk ``tool.terrain_geographic_dem``), 1 on a raster
    without georeferencing.
    """
    path = ctx.resolve(dem_path, tool=tool, argument="dem_path")
    arr, meta = read_band(path, 1, tool=tool, argument="dem_path")
    if arr.dtype.kind not in "iuf":
        raise ToolInputError(f"has dtype {arr.dtype}", tool=tool, argument="dem_path",
                             expected="a numeric elevation band")
    if min(arr.shape) < 2:
        raise ToolInputError(f"is {arr.shape[0]}x{arr.shape[1]}; gradients need at least 2x2 "
                             f"pixels", tool=tool, argument="dem_path", expected="a DEM")
    return path, arr.astype(np.float32), meta, abs(meta.transform.a), abs(meta.transform.e)


def _gradients(dem32: np.ndarray, yres: float, xres: float):
    """(dz/drow, dz/dcol) by numpy's ``np.gradient``: second-order central differences inside,
    first-order one-sided differences on the border, in float32 — the method of the
    benchmark's ``ras.slope`` / ``ras.hillshade`` (whose descriptions say Horn; the code does
    not). Rows grow southwards, so dz/drow is positive downhill to the south. Nodata values are
    not masked (quirk: they enter the differences like elevations)."""
    drow, dcol = np.gradient(dem32, yres, xres)
    return drow, dcol


@register("ras.slope", server="Analysis", module="raster",
          result_keys=["tool", "slope_path", "units", "stats"],
          notes={"units": "'degrees' or 'percent'", "out_path": "auto <temp>/slope.tif"})
def ras_slope(ctx: ToolContext, dem_path: str, units: str = "degrees",
              out_path: str | None = None) -> dict:
    """Slope of a DEM (band 1) in degrees, or percent rise (100·tan) when ``units`` is
    "percent" (any other value means degrees and is echoed), float32 GeoTIFF.

    As ``analysis.py:ras_slope``: gradients by ``np.gradient`` (central differences, see
    ``_gradients``) with the pixel size |a|, |e| in CRS units — on a geographic DEM degrees are
    used as if they were metres (quirk); slope = atan(hypot(dz/dx, dz/dy)); every pixel,
    nodata included, gets a slope. ``stats`` {min, max, mean} over all pixels, in float32.
    A DEM in a format that cannot hold float32 (PNG, JPEG, GIF, BMP) gets its slope saved as
    ``<slope_path>.npy`` while ``slope_path`` names no file, as the benchmark's fallback does.
    The output keeps the DEM's profile (CRS, transform, nodata tag).
    """
    tool = "ras.slope"
    path, dem, meta, xres, yres = _dem_float32(ctx, tool, dem_path)
    drow, dcol = _gradients(dem, yres, xres)
    slope_rad = np.arctan(np.hypot(dcol, drow))
    slope = (np.tan(slope_rad) * 100.0 if units == "percent" else np.rad2deg(slope_rad))
    slope = slope.astype(np.float32)
    dst = named_output(ctx, tool, {"dem": path, "units": units}, ".tif", out_path,
                       (".tif", ".tiff"))
    if source_profile_unwritable(meta, float32=True):
        # the benchmark writes with the DEM's own profile, which refuses float32 (a PNG/JPEG
        # driver, a YCbCr photometric); its fallback saves the array as <slope_path>.npy and
        # still reports slope_path, which names no file (quirk): a later step finds nothing
        np.save(str(dst) + ".npy", slope)
    else:
        write_raster(dst, slope, like=meta, nodata=meta.nodata,
                     transform=meta.transform if not meta.georeferenced else None)
    return {"tool": tool, "slope_path": ctx.artifact_name(dst), "units": units,
            "stats": {"min": float(slope.min()), "max": float(slope.max()),
                      "mean": float(slope.mean())}}


@register("ras.hillshade", server="Analysis", module="raster",
          result_keys=["tool", "hillshade_path", "shape", "stats"],
          notes={"azimuth": "degrees clockwise from north", "altitude": "degrees",
                 "out_path": "leave empty; auto path <temp>/hillshade.tif"})
def ras_hillshade(ctx: ToolContext, dem_path: str, azimuth: float = 315.0,
                  altitude: float = 45.0, z_factor: float = 1.0,
                  out_path: str | None = None) -> dict:
    """Shaded relief (uint8 0–255 GeoTIFF) of a DEM, computed as ``analysis.py:ras_hillshade``.

    The DEM (float32) is multiplied by ``z_factor``; gradients by ``np.gradient`` with the
    pixel size in CRS units (see ``ras.slope``); S = atan(|∇z|), aspect = atan2(−dz/dcol,
    dz/drow), A = radians(360 − azimuth + 90) and
    ``255 · (sin(alt) cos S + cos(alt) sin S cos(A − aspect))`` clipped to 0..255 and
    truncated to uint8. With rows growing southwards this lights the terrain from another
    direction than the azimuth names (quirk). No nodata handling; ``stats`` over all pixels.
    The output keeps the DEM's georeferencing and nodata; a nodata that uint8 cannot hold
    (−9999, NaN) makes the benchmark's write fall back to a plain TIFF without
    georeferencing, and so it does here.
    """
    tool = "ras.hillshade"
    path, dem, meta, xres, yres = _dem_float32(ctx, tool, dem_path)
    dem = dem * z_factor
    drow, dcol = _gradients(dem, yres, xres)
    slope = np.arctan(np.hypot(dcol, drow))
    aspect = np.arctan2(-dcol, drow)
    az = np.deg2rad(360.0 - azimuth + 90.0)
    alt = np.deg2rad(altitude)
    shade = np.sin(alt) * np.cos(slope) + np.cos(alt) * np.sin(slope) * np.cos(az - aspect)
    with np.errstate(invalid="ignore"):
        out = np.clip(shade * 255.0, 0, 255).astype(np.uint8)
    dst = named_output(ctx, tool, {"dem": path, "azimuth": float(azimuth),
                                   "altitude": float(altitude), "z": float(z_factor)}, ".tif",
                       out_path, (".tif", ".tiff"))
    nodata = meta.nodata
    if (nodata is not None and (math.isnan(nodata) or not 0 <= nodata <= 255)) or \
            source_profile_unwritable(meta):
        # the benchmark's rasterio write refuses a nodata outside uint8 (or a YCbCr source
        # profile) and falls back to Pillow: a plain TIFF without georeferencing
        write_raster(dst, out)
    else:
        write_raster(dst, out, like=meta, nodata=nodata,
                     transform=meta.transform if not meta.georeferenced else None)
    return {"tool": tool, "hillshade_path": ctx.artifact_name(dst),
            "shape": [int(out.shape[0]), int(out.shape[1])],
            "stats": {"min": int(out.min()), "max": int(out.max()), "mean": float(out.mean())}}


@register("ras.reproject", server="Analysis", module="raster",
          result_keys=["tool", "output_path", "src_crs", "dst_crs", "shape"],
          notes={"dst_crs": "e.g. 'EPSG:32636'",
                 "resampling": "nearest|bilinear|cubic (use nearest for class masks)",
                 "out_path": "auto <temp>/reprojected.tif"})
def ras_reproject(ctx: ToolContext, raster_path: str, dst_crs: str, resampling: str = "bilinear",
                  out_path: str | None = None) -> dict:
    """Warp every band of a raster to ``dst_crs`` (GDAL warp through rasterio), as
    ``analysis.py:ras_reproject`` does.

    The output grid is GDAL's suggested one (``calculate_default_transform``). The output
    keeps the source's dtype and nodata: a source without nodata gets none (pixels outside the
    source are 0, GDAL's default, and are not marked as nodata). An unknown ``resampling``
    means bilinear. ``dst_crs`` is echoed as given; ``src_crs`` is the source CRS's string.
    A mask's class map tag is kept. Errors: source without CRS, unknown ``dst_crs`` →
    ToolInputError.
    """
    import rasterio
    from rasterio.crs import CRS
    from rasterio.warp import calculate_default_transform, reproject

    tool = "ras.reproject"
    method = _resampling(resampling)
    try:
        target = CRS.from_user_input(str(dst_crs).strip())
    except Exception as exc:
        raise ToolInputError(f"unknown CRS {dst_crs!r}: {exc}", tool=tool, argument="dst_crs",
                             expected="an EPSG code or CRS string, e.g. 'EPSG:32636'") from None
    path = ctx.resolve(raster_path, tool=tool, argument="raster_path")
    meta = raster_meta(path, tool=tool, argument="raster_path")
    if not meta.georeferenced:
        raise ToolInputError(f"{Path(raster_path).name} has no CRS to reproject from", tool=tool,
                             argument="raster_path", expected="a georeferenced raster")
    dst = named_output(ctx, tool, {"raster": path, "dst_crs": str(dst_crs),
                                   "resampling": resampling}, ".tif", out_path, (".tif", ".tiff"))
    quiet = _quiet()
    try:
        with rasterio.open(path) as src:
            dst_t, w, h = calculate_default_transform(src.crs, target, src.width, src.height,
                                                      *src.bounds)
            profile = {"driver": "GTiff", "dtype": src.dtypes[0], "count": src.count,
                       "width": w, "height": h, "crs": target, "transform": dst_t}
            if src.nodata is not None:
                profile["nodata"] = src.nodata
            with rasterio.open(dst, "w", **profile) as out:
                for b in range(1, src.count + 1):
                    reproject(source=rasterio.band(src, b), destination=rasterio.band(out, b),
                              src_transform=src.transform, src_crs=src.crs,
                              dst_transform=dst_t, dst_crs=target, resampling=method)
    finally:
        quiet.__exit__(None, None, None)
    class_map, _px = read_mask_tags(path)
    if class_map:
        _retag(dst, class_map, None)
    return {"tool": tool, "output_path": ctx.artifact_name(dst), "src_crs": str(meta.crs),
            "dst_crs": dst_crs, "shape": [int(h), int(w)]}


@register("ras.resample", server="Analysis", module="raster",
          result_keys=["tool", "output_path", "src_pixel_size_m", "dst_pixel_size_m", "shape"],
          notes={"resampling": "nearest|bilinear|cubic", "out_path": "auto <temp>/resampled.tif"})
def ras_resample(ctx: ToolContext, raster_path: str, target_pixel_size_m: float,
                 resampling: str = "bilinear", out_path: str | None = None) -> dict:
    """Change the pixel size as ``analysis.py:ras_resample`` does.

    The source pixel size is |transform.a| in CRS units (1 for a raster without CRS; degrees on
    a geographic raster); scale = src / target; output width = max(1, floor(W · scale)) and
    height = max(1, floor(H · scale)) — both from the x pixel size, truncated, not rounded;
    the transform is scaled by W/w, H/h. Resampling by GDAL on read (an unknown method means
    bilinear). ``dst_pixel_size_m`` echoes the target, not the pixel size the rounding gives.
    Errors: target ≤ 0 → ToolInputError.
    """
    import rasterio
    from affine import Affine

    tool = "ras.resample"
    method = _resampling(resampling)
    if not target_pixel_size_m or not float(target_pixel_size_m) > 0:
        raise ToolInputError(f"must be > 0, got {target_pixel_size_m}", tool=tool,
                             argument="target_pixel_size_m", expected="metres per pixel > 0")
    path = ctx.resolve(raster_path, tool=tool, argument="raster_path")
    meta = raster_meta(path, tool=tool, argument="raster_path")
    t = meta.transform
    src_res = abs(t.a)
    if src_res <= 0:
        src_res = 1.0
    scale = src_res / float(target_pixel_size_m)
    w = max(1, int(meta.width * scale))
    h = max(1, int(meta.height * scale))
    quiet = _quiet()
    try:
        with rasterio.open(path) as src:
            data = src.read(out_shape=(src.count, h, w), resampling=method)
    finally:
        quiet.__exit__(None, None, None)
    new_t = t * Affine.scale(meta.width / w, meta.height / h)
    dst = named_output(ctx, tool, {"raster": path, "target": float(target_pixel_size_m),
                                   "resampling": resampling}, ".tif", out_path, (".tif", ".tiff"))
    # a lossy (JPEG) source is re-encoded with its own options, as the benchmark's copied profile
    write_raster(dst, data, nodata=meta.nodata, transform=new_t,
                 crs=meta.crs if meta.georeferenced else None,
                 creation=lossy_creation_options(path))
    class_map, _px = read_mask_tags(path)
    if class_map:
        _retag(dst, class_map, float(target_pixel_size_m) if not meta.georeferenced else None)
    return {"tool": tool, "output_path": ctx.artifact_name(dst),
            "src_pixel_size_m": float(src_res), "dst_pixel_size_m": float(target_pixel_size_m),
            "shape": [h, w]}


_FOCAL = ("mean", "sum", "min", "max", "std")


@register("ras.focal_stats", server="Analysis", module="raster",
          result_keys=["tool", "output_path", "statistic", "window_size", "shape"],
          notes={"statistic": "mean|sum|min|max|std",
                 "window_size": "even values are bumped to odd",
                 "out_path": "auto <temp>/<stem>_focal_<stat>_<w>.tif"})
def ras_focal_stats(ctx: ToolContext, raster_path: str, statistic: str = "mean",
                    window_size: int = 5, nodata: float | None = None,
                    out_path: str | None = None) -> dict:
    """Moving-window statistic of band 1 over a w×w square (float32 GeoTIFF), computed as
    ``analysis.py:ras_focal_stats`` computes it.

    The band is read as float32; pixels equal to ``nodata`` (else the raster's nodata) are set
    to 0 and are invalid. Windows use scipy's ``mode="nearest"`` border (edge pixels repeated).
    ``mean``: window sum / count of valid pixels (0 where none); ``sum``: the window mean ×
    w² (float32 rounding); ``min``/``max``: over the window with invalid pixels as 0;
    ``std``: population standard deviation over all w² cells, invalid ones as 0. NaN is not
    treated as nodata. Invalid pixels get the nodata value in the output. ``statistic`` is
    lower-cased; an even ``window_size`` is bumped to the next odd one.
    Errors: unknown statistic, window_size < 1 → ToolInputError; an input in a format that
    cannot hold float32 (PNG, JPEG, GIF, BMP: the benchmark writes in the input's format) →
    ToolError.
    """
    from scipy import ndimage

    tool = "ras.focal_stats"
    stat = (statistic or "mean").lower()
    if stat not in _FOCAL:
        raise ToolInputError(f"unknown statistic {statistic!r}", tool=tool, argument="statistic",
                             expected="mean, sum, min, max or std")
    if int(window_size) < 1:
        raise ToolInputError(f"must be >= 1, got {window_size}", tool=tool,
                             argument="window_size", expected="an odd window size >= 1")
    w = int(window_size)
    if w % 2 == 0:
        w += 1
    path = ctx.resolve(raster_path, tool=tool, argument="raster_path")
    band, meta = read_band(path, 1, tool=tool, argument="raster_path")
    # the benchmark writes the float32 result with the input's own profile: a PNG/JPEG driver
    # or a YCbCr photometric refuses it
    _refuse_source_profile(meta, tool, "raster_path", float32=True)
    arr = band.astype(np.float32)
    nd = nodata if nodata is not None else meta.nodata
    valid = arr != nd if nd is not None else np.ones(arr.shape, dtype=bool)
    work = np.where(valid, arr, 0.0)
    cells = w * w
    if stat == "mean":
        num = ndimage.uniform_filter(work, size=w, mode="nearest") * cells
        cnt = ndimage.uniform_filter(valid.astype(np.float32), size=w, mode="nearest") * cells
        res = np.where(cnt > 0, num / np.maximum(cnt, 1e-6), 0.0)
    elif stat == "sum":
        res = ndimage.uniform_filter(work, size=w, mode="nearest") * cells
    elif stat == "min":
        res = ndimage.minimum_filter(work, size=w, mode="nearest")
    elif stat == "max":
        res = ndimage.maximum_filter(work, size=w, mode="nearest")
    else:
        mean = ndimage.uniform_filter(work, size=w, mode="nearest")
        mean_sq = ndimage.uniform_filter(work * work, size=w, mode="nearest")
        res = np.sqrt(np.maximum(mean_sq - mean * mean, 0.0))
    out = res.astype(np.float32)
    if nd is not None:
        out = np.where(valid, out, nd).astype(np.float32)
    dst = named_output(ctx, tool, {"raster": path, "statistic": stat, "w": w,
                                   "nodata": nodata}, ".tif", out_path, (".tif", ".tiff"))
    write_raster(dst, out, like=meta, nodata=float(nd) if nd is not None else None,
                 transform=meta.transform if not meta.georeferenced else None)
    return {"tool": tool, "output_path": ctx.artifact_name(dst), "statistic": stat,
            "window_size": w, "shape": [int(out.shape[0]), int(out.shape[1])]}
