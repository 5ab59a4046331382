"""Raster tools (``ras.*``, ``mask.*``): rasterio + numpy.

Conventions (see the package docstring): paths in the arguments are resolved through the
context; artifacts are written into the work dir under hashed names and returned by name; class
indices that a mask does not hold raise ``ClassIndexError``.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ._io import (check_classes, raster_meta, read_band, read_mask, read_mask_tags, read_raster,
                  values_present, write_mask, write_raster)
from .base import ModalityError, ToolContext, ToolInputError
from .registry import register

#: RescueNet / aerial labels (benchmark's table), used to name composed classes
RESCUENET_CLASSES = {
    0: "background", 1: "building_no_damage", 2: "building_damage", 3: "building_total_damage",
    4: "pool", 5: "road_no_damage", 6: "road_sand_covered", 7: "tree_fallen",
    8: "tree_not_fallen", 9: "vehicle_not_trapped", 10: "vehicle_trapped", 11: "water",
    255: "ignore",
}

_OPS = {
    ">=": np.greater_equal, ">": np.greater, "<=": np.less_equal, "<": np.less, "==": np.equal,
}


def _nonempty_classes(classes, tool):
    if not classes:
        raise ToolInputError("must list at least one class index", tool=tool, argument="classes",
                             expected="list[int], e.g. [1, 2, 3]")


# --------------------------------------------------------------------------------------------
@register("ras.count_pixels", server="Analysis", module="raster",
          result_keys=["tool", "counts", "total", "classes"])
def ras_count_pixels(ctx: ToolContext, mask_path: str, classes: list[int]) -> dict:
    """Count the pixels of a class-index mask equal to each requested class value.

    Input: a single-band mask (uint8 or integer), any format rasterio reads. Output:
    ``counts`` {"<class>": int} (JSON keys are strings), ``total`` = sum over the distinct
    requested classes, ``classes`` echoed. No area conversion (see ``ras.area``).
    Errors: unknown file → ToolInputError; indices the mask does not hold → ClassIndexError;
    multi-band image → ModalityError.
    """
    tool = "ras.count_pixels"
    _nonempty_classes(classes, tool)
    path = ctx.resolve(mask_path, tool=tool, argument="mask_path")
    arr, _ = read_mask(path, tool=tool, argument="mask_path")
    class_map, _px = read_mask_tags(path)
    check_classes(classes, arr, class_map, mask_name=Path(mask_path).name, tool=tool)
    counts: dict[str, int] = {}
    for c in classes:
        counts[str(int(c))] = int(np.count_nonzero(arr == int(c)))
    return {"tool": tool, "counts": counts, "total": int(sum(counts.values())),
            "classes": [int(c) for c in classes]}


# --------------------------------------------------------------------------------------------
@register("ras.area", server="Calculate", module="raster",
          result_keys=["tool", "area_m2", "pixel_count", "pixel_size_m"],
          notes={"pixel_size_m": "metres per pixel; null: taken from the transform of a "
                                 "projected (metre) raster",
                 "classes": "None/empty -> all non-zero pixels"})
def ras_area(ctx: ToolContext, mask_path: str, pixel_size_m: float | None,
             classes: list[int] | None = None) -> dict:
    """Area in m² of the selected class values (or of all non-zero pixels).

    ``area_m2 = pixel_count * pixel_size_m²``; as in the benchmark the given pixel size wins
    and the georeferencing is not consulted. When ``pixel_size_m`` is null the pixel size is
    read from the transform of a raster in a projected metre CRS (square pixels); otherwise
    ToolInputError. Class indices the mask does not hold → ClassIndexError.
    """
    tool = "ras.area"
    path = ctx.resolve(mask_path, tool=tool, argument="mask_path")
    arr, meta = read_mask(path, tool=tool, argument="mask_path")
    if pixel_size_m is None:
        pixel_size_m = _pixel_size_from_transform(meta, tool)
    if not (pixel_size_m > 0):
        raise ToolInputError(f"must be positive, got {pixel_size_m}", tool=tool,
                             argument="pixel_size_m", expected="metres per pixel > 0")
    if classes:
        class_map, _ = read_mask_tags(path)
        check_classes(classes, arr, class_map, mask_name=Path(mask_path).name, tool=tool)
        target = np.isin(arr, [int(c) for c in classes])
    else:
        target = arr > 0
    n = int(np.count_nonzero(target))
    return {"tool": tool, "area_m2": float(n * float(pixel_size_m) ** 2), "pixel_count": n,
            "pixel_size_m": float(pixel_size_m)}


def _pixel_size_from_transform(meta, tool) -> float:
    if not meta.georeferenced or meta.crs.is_geographic:
        raise ToolInputError("is null and the raster has no projected CRS to read it from",
                             tool=tool, argument="pixel_size_m",
                             expected="metres per pixel (the sample's pixel_size_m)")
    t = meta.transform
    ax = abs(t.a)
    ay = abs(t.e)
    if t.b or t.d or abs(ax - ay) > 1e-9 * max(ax, ay):
        raise ToolInputError("is null and the raster's pixels are not square/axis-aligned",
                             tool=tool, argument="pixel_size_m", expected="metres per pixel")
    try:
        factor = meta.crs.linear_units_factor[1]
    except Exception:
        factor = 1.0
    return float(ax * factor)


# --------------------------------------------------------------------------------------------
@register("ras.threshold", server="Analysis", module="raster",
          result_keys=["tool", "image_path", "mask_path", "threshold", "op", "band",
                       "selected_pixels", "true_value", "false_value"],
          notes={"op": "one of >=, >, <=, <, =="})
def ras_threshold(ctx: ToolContext, image_path: str, threshold: float, op: str = ">=",
                  band: int = 1, true_value: int = 255, false_value: int = 0) -> dict:
    """Binary uint8 mask (default {0, 255}) from comparing one band to a threshold.

    NaN and nodata pixels are never selected. The output is a GeoTIFF keeping the input's
    georeferencing, nodata = ``false_value``; its class map is {false: background,
    true: selected}. Errors: bad op, band out of range, values outside 0..255 → ToolInputError.
    """
    tool = "ras.threshold"
    if op not in _OPS:
        raise ToolInputError(f"unknown operator {op!r}", tool=tool, argument="op",
                             expected="one of >=, >, <=, <, ==")
    for name, v in (("true_value", true_value), ("false_value", false_value)):
        if not 0 <= int(v) <= 255:
            raise ToolInputError(f"{v} does not fit a uint8 mask", tool=tool, argument=name,
                                 expected="0..255")
    if int(true_value) == int(false_value):
        raise ToolInputError("true_value equals false_value", tool=tool, argument="true_value",
                             expected="two different values")
    path = ctx.resolve(image_path, tool=tool, argument="image_path")
    arr, meta = read_band(path, int(band), tool=tool, argument="image_path")
    valid = np.ones(arr.shape, dtype=bool)
    if arr.dtype.kind == "f":
        valid &= np.isfinite(arr)
    if meta.nodata is not None and not (isinstance(meta.nodata, float) and np.isnan(meta.nodata)):
        valid &= arr != meta.nodata
    selected = np.zeros(arr.shape, dtype=bool)
    selected[valid] = _OPS[op](arr[valid], float(threshold))
    out = np.where(selected, int(true_value), int(false_value)).astype(np.uint8)
    out_path = ctx.output_path(tool, {"image": path, "threshold": float(threshold), "op": op,
                                      "band": int(band), "true": int(true_value),
                                      "false": int(false_value)}, ".tif")
    write_mask(out_path, out, like=meta, nodata=int(false_value),
               class_map={int(false_value): "background", int(true_value): "selected"})
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
    """Merge binary masks into one class-index map.

    Positive pixels of mask i get ``class_values[i]``; later masks overwrite earlier ones;
    background 0. Output: uint8 GeoTIFF (georeferencing of the first mask), nodata 0. Labels
    come from the RescueNet table or ``class_<v>``. Errors: empty list or length mismatch,
    masks of different sizes, values outside 1..255 → ToolInputError; a mask with more than
    one non-zero value (not binary) → ModalityError.
    """
    tool = "mask.compose_multiclass"
    if not mask_paths:
        raise ToolInputError("needs at least one mask", tool=tool, argument="mask_paths",
                             expected="list[str] of binary mask paths")
    if len(mask_paths) != len(class_values):
        raise ToolInputError(f"{len(class_values)} class values for {len(mask_paths)} masks",
                             tool=tool, argument="class_values",
                             expected="one class value per mask")
    for v in class_values:
        if not 1 <= int(v) <= 255:
            raise ToolInputError(f"class value {v} does not fit a uint8 class map", tool=tool,
                                 argument="class_values", expected="1..255")
    resolved = [ctx.resolve(p, tool=tool, argument="mask_paths") for p in mask_paths]
    composed = None
    first_meta = None
    for p, name, value in zip(resolved, mask_paths, class_values):
        arr, meta = read_mask(p, tool=tool, argument="mask_paths")
        nonzero = [v for v in np.unique(arr) if v != 0]
        if len(nonzero) > 1:
            raise ModalityError(f"{Path(name).name} is not binary: it holds the non-zero values "
                                f"{[int(v) for v in nonzero]}", tool=tool, argument="mask_paths",
                                expected="binary masks ({0, 255} or {0, 1})")
        if composed is None:
            composed = np.zeros(arr.shape, dtype=np.uint8)
            first_meta = meta
        elif arr.shape != composed.shape:
            raise ToolInputError(f"{Path(name).name} is {arr.shape[0]}x{arr.shape[1]} but the "
                                 f"first mask is {composed.shape[0]}x{composed.shape[1]}",
                                 tool=tool, argument="mask_paths", expected="masks of one size")
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
          notes={"classes": "class values to polygonise (e.g. [3] for destroyed, [255] for a "
                            "binary mask)",
                 "pixel_size_m": "used only for non-georeferenced masks"})
def ras_vectorize(ctx: ToolContext, mask_path: str, classes: list[int],
                  pixel_size_m: float | None = None) -> dict:
    """Polygons of the 4-connected regions of the selected class values (rasterio shapes).

    GeoJSON features carry ``id`` (1-based), ``class``, ``pixel_count``, ``area_m2``,
    ``pixel_size_m``. A georeferenced mask keeps its CRS and is measured in metres (a
    geographic CRS in its UTM zone); a non-georeferenced mask gives pixel coordinates
    (x = column, y = row, no crs member) and ``area_m2 = pixels * pixel_size_m²``, or null
    when the pixel size is unknown. ``count`` is the number of polygons.
    Errors: ClassIndexError for indices the mask does not hold; ToolInputError otherwise.
    """
    import geopandas as gpd
    from affine import Affine
    from rasterio import features
    from shapely.geometry import shape

    tool = "ras.vectorize"
    _nonempty_classes(classes, tool)
    if pixel_size_m is not None and not pixel_size_m > 0:
        raise ToolInputError(f"must be positive, got {pixel_size_m}", tool=tool,
                             argument="pixel_size_m", expected="metres per pixel > 0")
    path = ctx.resolve(mask_path, tool=tool, argument="mask_path")
    arr, meta = read_mask(path, tool=tool, argument="mask_path")
    class_map, _ = read_mask_tags(path)
    check_classes(classes, arr, class_map, mask_name=Path(mask_path).name, tool=tool)
    target = np.isin(arr, [int(c) for c in classes])
    georef = meta.georeferenced
    transform = meta.transform if georef else Affine.identity()
    records = []
    geoms = []
    if target.any():
        pix_area = abs(transform.a * transform.e - transform.b * transform.d)
        for geom, value in features.shapes(arr.astype(np.int32), mask=target.astype(np.uint8),
                                           transform=transform, connectivity=4):
            g = shape(geom)
            geoms.append(g)
            records.append({"id": len(records) + 1, "class": int(value),
                            "pixel_count": int(round(g.area / pix_area)),
                            "area_m2": None,
                            "pixel_size_m": float(pixel_size_m) if pixel_size_m else None})
    gdf = gpd.GeoDataFrame(records, geometry=gpd.GeoSeries(geoms, crs=meta.crs if georef else None),
                           crs=meta.crs if georef else None) if records else \
        gpd.GeoDataFrame({"id": [], "class": [], "pixel_count": [], "area_m2": [],
                          "pixel_size_m": []}, geometry=gpd.GeoSeries([], crs=meta.crs if georef else None))
    if len(gdf):
        if georef:
            from ._io import metric_frame

            metric, scale = metric_frame(gdf)
            gdf["area_m2"] = [round(float(a) * scale ** 2, 2) for a in metric.geometry.area]
        elif pixel_size_m:
            gdf["area_m2"] = [round(n * float(pixel_size_m) ** 2, 2) for n in gdf["pixel_count"]]
    from ._io import write_vector

    out_path = ctx.output_path(tool, {"mask": path, "classes": [int(c) for c in classes],
                                      "pixel_size_m": pixel_size_m}, ".geojson")
    write_vector(out_path, gdf)
    total_pixels = int(sum(int(n) for n in gdf["pixel_count"])) if len(gdf) else 0
    if georef or pixel_size_m:
        total_area = float(round(sum(float(a) for a in gdf["area_m2"]), 2)) if len(gdf) else 0.0
    else:
        total_area = None
    return {"tool": tool, "vector_path": ctx.artifact_name(out_path), "count": int(len(gdf)),
            "total_pixels": total_pixels, "total_area_m2": total_area}


# --------------------------------------------------------------------------------------------
@register("ras.stats", server="Analysis", module="raster",
          result_keys=["tool", "image_path", "band", "nodata", "min", "max", "mean", "std",
                       "valid_pixels"])
def ras_stats(ctx: ToolContext, image_path: str, band: int = 1, ignore_nodata: bool = True) -> dict:
    """Min, max, mean and (population) standard deviation of one band.

    NaN pixels are always ignored; nodata pixels when ``ignore_nodata``. No valid pixel →
    the statistics are null and ``valid_pixels`` is 0.
    """
    tool = "ras.stats"
    path = ctx.resolve(image_path, tool=tool, argument="image_path")
    arr, meta = read_band(path, int(band), tool=tool, argument="image_path")
    valid = np.isfinite(arr) if arr.dtype.kind == "f" else np.ones(arr.shape, dtype=bool)
    if ignore_nodata and meta.nodata is not None and not np.isnan(meta.nodata):
        valid &= arr != meta.nodata
    vals = arr[valid].astype(np.float64)
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
    """Pixel value of every band at (row, col); ``pixel_values`` keys are 1-based band
    numbers. A point outside the image → ToolInputError naming the image size."""
    tool = "ras.sample_point"
    path = ctx.resolve(image_path, tool=tool, argument="image_path")
    arr, meta = read_raster(path, tool=tool, argument="image_path")
    if not (0 <= row < meta.height and 0 <= col < meta.width):
        raise ToolInputError(f"pixel ({row}, {col}) is outside the {meta.height}x{meta.width} image",
                             tool=tool, argument="row" if not 0 <= row < meta.height else "col",
                             expected=f"row 0..{meta.height - 1}, col 0..{meta.width - 1}")
    values = {str(b + 1): _num(arr[b, row, col]) for b in range(arr.shape[0])}
    return {"tool": tool, "row": int(row), "col": int(col), "pixel_values": values,
            "is_inside": True}


@register("ras.sample_points", server="Analysis", module="raster",
          result_keys=["tool", "image_path", "total_points", "results"])
def ras_sample_points(ctx: ToolContext, image_path: str, points: list[dict[str, int]]) -> dict:
    """Pixel values at many {row, col} points; points outside the image get
    ``pixel_values: null, is_inside: false`` (not an error)."""
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
                            "pixel_values": {str(b + 1): _num(arr[b, r, c])
                                             for b in range(arr.shape[0])}})
        else:
            results.append({"row": r, "col": c, "pixel_values": None, "is_inside": False})
    return {"tool": tool, "image_path": image_path, "total_points": len(points),
            "results": results}


def _num(v):
    """Python number of a numpy scalar (ints stay ints, floats stay floats)."""
    return v.item() if hasattr(v, "item") else v


# --------------------------------------------------------------------------------------------
@register("ras.clip", server="Analysis", module="raster",
          result_keys=["tool", "output_path", "window", "out_shape", "bands", "dtype", "crs",
                       "transform", "clamped"],
          notes={"x1": "first row", "x2": "end row (exclusive)", "y1": "first column",
                 "y2": "end column (exclusive)"})
def ras_clip(ctx: ToolContext, image_path: str, x1: int, x2: int, y1: int, y2: int) -> dict:
    """Crop the pixel window [x1:x2, y1:y2] (x = rows, y = columns, end exclusive; swapped
    bounds are reordered; the window is clamped to the image). GeoTIFF output keeping the
    georeferencing (shifted transform). Empty window or window outside → ToolInputError."""
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
    cx1, cx2 = max(0, x1), min(meta.height, x2)
    cy1, cy2 = max(0, y1), min(meta.width, y2)
    if cx1 >= cx2 or cy1 >= cy2:
        raise ToolInputError(f"window rows {x1}:{x2}, cols {y1}:{y2} lies outside the "
                             f"{meta.height}x{meta.width} image", tool=tool, argument="x1",
                             expected="a window overlapping the image")
    data = arr[:, cx1:cx2, cy1:cy2]
    win = Window.from_slices((cx1, cx2), (cy1, cy2))
    new_t = win_transform(win, meta.transform) if meta.georeferenced else None
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
            "transform": [float(v) for v in tuple(new_t)[:6]] if new_t is not None else None,
            "clamped": (cx1, cx2, cy1, cy2) != (x1, x2, y1, y2)}


def _retag(path, class_map, px):
    import json

    import rasterio

    from ._io import CLASS_TAG, PIXEL_TAG

    tags = {}
    if class_map:
        tags[CLASS_TAG] = json.dumps({str(k): v for k, v in sorted(class_map.items())},
                                     separators=(",", ":"))
    if px:
        tags[PIXEL_TAG] = repr(float(px))
    from ._io import _quiet

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
    if a.shape != b.shape:
        raise ToolInputError(f"rasters differ in size: {a.shape} vs {b.shape}", tool=tool,
                             argument="image_b_path", expected="rasters of one grid")
    if ma.crs != mb.crs or (ma.georeferenced and ma.transform != mb.transform):
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
    vals = diff[valid].astype(np.float64)
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
    """Stack rasters of one size (and, when present, one CRS/transform) along the band axis
    into one GeoTIFF; dtype is numpy's common type. ``band_map`` lists each input's bands."""
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
            if ref.crs is not None and meta.crs is not None and (
                    ref.crs != meta.crs or ref.transform != meta.transform):
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
    write_raster(out_path, data, like=ref)
    return {"tool": tool, "output_path": ctx.artifact_name(out_path), "height": ref.height,
            "width": ref.width, "bands": int(data.shape[0]), "dtype": str(dtype),
            "crs": str(ref.crs) if ref.georeferenced else None,
            "transform": [float(v) for v in tuple(ref.transform)[:6]] if ref.georeferenced else None,
            "band_map": band_map,
            "note": "Concatenated along bands; inputs must share size & georeferencing."}

