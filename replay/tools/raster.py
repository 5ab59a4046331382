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



# ============================================================================================
# Terrain, warping and focal statistics (ras.hillshade, ras.slope, ras.reproject,
# ras.resample, ras.focal_stats)
# ============================================================================================
_RESAMPLING = ("nearest", "bilinear", "cubic")
_TERRAIN_NODATA = -9999.0


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


def _check_resampling(value: str, tool: str):
    from rasterio.enums import Resampling

    if value not in _RESAMPLING:
        raise ToolInputError(f"unknown resampling {value!r}", tool=tool, argument="resampling",
                             expected="nearest, bilinear or cubic (nearest for class masks)")
    return getattr(Resampling, value)


def _valid_mask(arr: np.ndarray, nodata) -> np.ndarray:
    valid = np.isfinite(arr) if arr.dtype.kind == "f" else np.ones(arr.shape, dtype=bool)
    if nodata is not None and not (isinstance(nodata, float) and np.isnan(nodata)):
        valid &= arr != nodata
    return valid


def _metric_pixel_sizes(meta, tool: str) -> tuple[np.ndarray, float | np.ndarray]:
    """(x size per row, y size) of the pixels in metres.

    Projected CRS: the transform's |a| and |e| in metres (linear unit converted). Geographic
    CRS (e.g. SRTM tiles in EPSG:4326): degrees converted to metres at each row's centre
    latitude on the CRS ellipsoid, with the radii of curvature
    ``N = a / sqrt(1 - e² sin²φ)`` (east-west: N cos φ · Δλ) and
    ``M = a (1 - e²) / (1 - e² sin²φ)^1.5`` (north-south: M · Δφ). Rotated transforms and
    rasters without CRS → ToolInputError (a slope needs metres per pixel).
    """
    t = meta.transform
    if not meta.georeferenced:
        raise ToolInputError("has no CRS, so its pixel size in metres is unknown", tool=tool,
                             argument="dem_path", expected="a georeferenced DEM (GeoTIFF, HGT)")
    if t.b or t.d:
        raise ToolInputError("has a rotated transform", tool=tool, argument="dem_path",
                             expected="a north-up DEM")
    if meta.crs.is_geographic:
        from pyproj import CRS

        ell = CRS.from_user_input(meta.crs.to_wkt()).ellipsoid
        a = ell.semi_major_metre
        inv_f = ell.inverse_flattening
        f = 1.0 / inv_f if inv_f else 0.0
        e2 = f * (2 - f)
        rows = np.arange(meta.height, dtype=np.float64) + 0.5
        lat = np.radians(t.f + t.e * rows)
        w = 1.0 - e2 * np.sin(lat) ** 2
        n_rad = a / np.sqrt(w)
        m_rad = a * (1 - e2) / w ** 1.5
        dx = n_rad * np.cos(lat) * np.radians(abs(t.a))
        dy = m_rad * np.radians(abs(t.e))
        return dx, dy
    try:
        factor = float(meta.crs.linear_units_factor[1])
    except Exception:
        factor = 1.0
    return np.full(meta.height, abs(t.a) * factor), abs(t.e) * factor


def _horn_gradients(dem: np.ndarray, valid: np.ndarray, dx, dy):
    """Horn's (1981) 3×3 finite differences, in elevation units per metre.

    For the window ``a b c / d e f / g h i`` (rows top to bottom):
    ``dz/dx = ((c + 2f + i) − (a + 2d + g)) / (8 Δx)`` (east positive) and
    ``dz/dy = ((g + 2h + i) − (a + 2b + c)) / (8 Δy)`` (south positive, rows grow southwards).
    Source: B. K. P. Horn, "Hill shading and the reflectance map", Proc. IEEE 69(1), 1981,
    pp. 14–47; the same weights as GDAL's gdaldem and ESRI's Slope tool. Border pixels use the
    edge value repeated (GDAL's ``-compute_edges``); a window touching nodata gives nodata.
    """
    z = np.where(valid, dem.astype(np.float64), 0.0)
    p = np.pad(z, 1, mode="edge")
    a, b, c = p[:-2, :-2], p[:-2, 1:-1], p[:-2, 2:]
    d, f = p[1:-1, :-2], p[1:-1, 2:]
    g, h, i = p[2:, :-2], p[2:, 1:-1], p[2:, 2:]
    dx = np.asarray(dx, dtype=np.float64).reshape(-1, 1) if np.ndim(dx) else float(dx)
    dy = np.asarray(dy, dtype=np.float64).reshape(-1, 1) if np.ndim(dy) else float(dy)
    dzdx = ((c + 2 * f + i) - (a + 2 * d + g)) / (8.0 * dx)
    dzdy = ((g + 2 * h + i) - (a + 2 * b + c)) / (8.0 * dy)
    from scipy import ndimage

    ok = ndimage.minimum_filter(valid.astype(np.uint8), size=3, mode="nearest").astype(bool)
    return dzdx, dzdy, ok


def _dem(ctx, tool, dem_path):
    path = ctx.resolve(dem_path, tool=tool, argument="dem_path")
    arr, meta = read_band(path, 1, tool=tool, argument="dem_path")
    if arr.dtype.kind not in "iuf":
        raise ToolInputError(f"has dtype {arr.dtype}", tool=tool, argument="dem_path",
                             expected="a numeric elevation band")
    return path, arr, meta


@register("ras.slope", server="Analysis", module="raster",
          result_keys=["tool", "slope_path", "units", "stats"],
          notes={"units": "'degrees' or 'percent'", "out_path": "auto <temp>/slope.tif"})
def ras_slope(ctx: ToolContext, dem_path: str, units: str = "degrees",
              out_path: str | None = None) -> dict:
    """Slope of a DEM (band 1) in degrees (0–90) or percent rise (100·tan), float32 GeoTIFF.

    Gradients: Horn's (1981) weighted 3×3 differences with the pixel size in metres read from
    the transform (a geographic DEM such as an SRTM tile is converted at each row's latitude on
    its ellipsoid, see ``_metric_pixel_sizes``); slope = atan(√((dz/dx)² + (dz/dy)²)).
    Elevations are taken as metres. Nodata: −9999 where the 3×3 window touches nodata/NaN.
    ``stats`` {min, max, mean} over valid pixels. Errors: unknown units, DEM without CRS or with
    a rotated transform → ToolInputError.
    """
    tool = "ras.slope"
    if units not in ("degrees", "percent"):
        raise ToolInputError(f"unknown units {units!r}", tool=tool, argument="units",
                             expected="'degrees' or 'percent'")
    path, arr, meta = _dem(ctx, tool, dem_path)
    dx, dy = _metric_pixel_sizes(meta, tool)
    valid = _valid_mask(arr, meta.nodata)
    dzdx, dzdy, ok = _horn_gradients(arr, valid, dx, dy)
    rise = np.hypot(dzdx, dzdy)
    slope = np.degrees(np.arctan(rise)) if units == "degrees" else 100.0 * rise
    out = np.where(ok, slope, _TERRAIN_NODATA).astype(np.float32)
    dst = named_output(ctx, tool, {"dem": path, "units": units}, ".tif", out_path,
                       (".tif", ".tiff"))
    write_raster(dst, out, like=meta, nodata=_TERRAIN_NODATA)
    vals = out[ok].astype(np.float64)
    stats = ({"min": float(vals.min()), "max": float(vals.max()), "mean": float(vals.mean())}
             if vals.size else {"min": None, "max": None, "mean": None})
    return {"tool": tool, "slope_path": ctx.artifact_name(dst), "units": units, "stats": stats}


@register("ras.hillshade", server="Analysis", module="raster",
          result_keys=["tool", "hillshade_path", "shape", "stats"],
          notes={"azimuth": "degrees clockwise from north", "altitude": "degrees",
                 "out_path": "leave empty; auto path <temp>/hillshade.tif"})
def ras_hillshade(ctx: ToolContext, dem_path: str, azimuth: float = 315.0,
                  altitude: float = 45.0, z_factor: float = 1.0,
                  out_path: str | None = None) -> dict:
    """Shaded relief (uint8 0–255 GeoTIFF) of a DEM lit from (azimuth, altitude).

    ``255 · (cos Z cos S + sin Z sin S cos(A − D))`` clipped at 0, rounded, where Z = 90° −
    altitude, S = atan(z_factor · |∇z|), A = the sun azimuth in math convention
    (360° − azimuth + 90°) and D = atan2(dz/dy, −dz/dx) the aspect; gradients by Horn's method
    as in ``ras.slope`` (Burrough & McDonnell, Principles of GIS, 1998; ESRI "How Hillshade
    works"; gdaldem hillshade). Nodata pixels (window touching nodata) are 0, and the output's
    nodata is 0. Errors: altitude outside 0–90, DEM without CRS → ToolInputError.
    """
    tool = "ras.hillshade"
    if not 0.0 <= float(altitude) <= 90.0:
        raise ToolInputError(f"altitude {altitude} is outside 0..90", tool=tool,
                             argument="altitude", expected="degrees above the horizon, 0..90")
    if not np.isfinite(azimuth) or not np.isfinite(z_factor):
        raise ToolInputError("must be finite", tool=tool, argument="azimuth")
    path, arr, meta = _dem(ctx, tool, dem_path)
    dx, dy = _metric_pixel_sizes(meta, tool)
    valid = _valid_mask(arr, meta.nodata)
    dzdx, dzdy, ok = _horn_gradients(arr, valid, dx, dy)
    zenith = np.radians(90.0 - float(altitude))
    az = np.radians((360.0 - float(azimuth) + 90.0) % 360.0)
    slope = np.arctan(float(z_factor) * np.hypot(dzdx, dzdy))
    aspect = np.arctan2(dzdy, -dzdx)
    shade = 255.0 * (np.cos(zenith) * np.cos(slope)
                     + np.sin(zenith) * np.sin(slope) * np.cos(az - aspect))
    out = np.where(ok, np.clip(np.rint(shade), 0, 255), 0).astype(np.uint8)
    dst = named_output(ctx, tool, {"dem": path, "azimuth": float(azimuth),
                                   "altitude": float(altitude), "z": float(z_factor)}, ".tif",
                       out_path, (".tif", ".tiff"))
    write_raster(dst, out, like=meta, nodata=0)
    vals = out[ok]
    stats = ({"min": int(vals.min()), "max": int(vals.max()), "mean": float(vals.mean())}
             if vals.size else {"min": None, "max": None, "mean": None})
    return {"tool": tool, "hillshade_path": ctx.artifact_name(dst),
            "shape": [int(meta.height), int(meta.width)], "stats": stats}


@register("ras.reproject", server="Analysis", module="raster",
          result_keys=["tool", "output_path", "src_crs", "dst_crs", "shape"],
          notes={"dst_crs": "e.g. 'EPSG:32636'",
                 "resampling": "nearest|bilinear|cubic (use nearest for class masks)",
                 "out_path": "auto <temp>/reprojected.tif"})
def ras_reproject(ctx: ToolContext, raster_path: str, dst_crs: str, resampling: str = "bilinear",
                  out_path: str | None = None) -> dict:
    """Warp every band of a raster to ``dst_crs`` (GDAL warp through rasterio).

    The output grid is GDAL's suggested one (``calculate_default_transform``: same number of
    pixels along the diagonal, square pixels). Pixels outside the source are nodata (the
    source's nodata, else 0 for integers and NaN for floats). A mask's class map and pixel-size
    tags are kept. Errors: source without CRS, unknown ``dst_crs``, unknown resampling →
    ToolInputError.
    """
    import rasterio
    from rasterio.crs import CRS
    from rasterio.warp import calculate_default_transform, reproject

    tool = "ras.reproject"
    method = _check_resampling(resampling, tool)
    try:
        target = CRS.from_user_input(str(dst_crs).strip())
    except Exception as exc:
        raise ToolInputError(f"unknown CRS {dst_crs!r}: {exc}", tool=tool, argument="dst_crs",
                             expected="an EPSG code or CRS string, e.g. 'EPSG:32636'") from None
    path = ctx.resolve(raster_path, tool=tool, argument="raster_path")
    arr, meta = read_raster(path, tool=tool, argument="raster_path")
    if not meta.georeferenced:
        raise ToolInputError(f"{Path(raster_path).name} has no CRS to reproject from", tool=tool,
                             argument="raster_path", expected="a georeferenced raster")
    left, bottom, right, top = rasterio.transform.array_bounds(meta.height, meta.width,
                                                               meta.transform)
    dst_t, w, h = calculate_default_transform(meta.crs, target, meta.width, meta.height,
                                              left, bottom, right, top)
    nodata = meta.nodata
    if nodata is None:
        nodata = float("nan") if arr.dtype.kind == "f" else 0
    out = np.full((arr.shape[0], h, w), nodata, dtype=arr.dtype)
    reproject(arr, out, src_transform=meta.transform, src_crs=meta.crs, src_nodata=meta.nodata,
              dst_transform=dst_t, dst_crs=target, dst_nodata=nodata, resampling=method)
    dst = named_output(ctx, tool, {"raster": path, "dst_crs": target.to_string(),
                                   "resampling": resampling}, ".tif", out_path, (".tif", ".tiff"))
    write_raster(dst, out, nodata=nodata, transform=dst_t, crs=target)
    class_map, px = read_mask_tags(path)
    if class_map:
        _retag(dst, class_map, None)
    return {"tool": tool, "output_path": ctx.artifact_name(dst), "src_crs": meta.crs.to_string(),
            "dst_crs": target.to_string(), "shape": [int(h), int(w)]}


@register("ras.resample", server="Analysis", module="raster",
          result_keys=["tool", "output_path", "src_pixel_size_m", "dst_pixel_size_m", "shape"],
          notes={"resampling": "nearest|bilinear|cubic", "out_path": "auto <temp>/resampled.tif"})
def ras_resample(ctx: ToolContext, raster_path: str, target_pixel_size_m: float,
                 resampling: str = "bilinear", out_path: str | None = None) -> dict:
    """Change the pixel size: output shape = round(size · src / target) per axis, the transform
    scaled to match (same extent up to rounding). The source pixel size is |transform.a| in CRS
    units, as in the benchmark (metres for projected rasters; a raster without CRS has 1 unit
    per pixel). Resampling by GDAL on read (``nearest`` duplicates/decimates pixels; use it for
    class masks). Errors: target ≤ 0, unknown resampling, a result smaller than one pixel →
    ToolInputError.
    """
    import rasterio
    from affine import Affine

    from ._io import _quiet

    tool = "ras.resample"
    method = _check_resampling(resampling, tool)
    if not (np.isfinite(target_pixel_size_m) and target_pixel_size_m > 0):
        raise ToolInputError(f"must be positive, got {target_pixel_size_m}", tool=tool,
                             argument="target_pixel_size_m", expected="metres per pixel > 0")
    path = ctx.resolve(raster_path, tool=tool, argument="raster_path")
    meta = raster_meta(path, tool=tool, argument="raster_path")
    t = meta.transform
    src_x, src_y = abs(t.a), abs(t.e)
    tgt = float(target_pixel_size_m)
    w = int(round(meta.width * src_x / tgt))
    h = int(round(meta.height * src_y / tgt))
    if w < 1 or h < 1:
        raise ToolInputError(f"{tgt} would leave less than one pixel of a {meta.height}x"
                             f"{meta.width} raster with {src_x} units per pixel", tool=tool,
                             argument="target_pixel_size_m",
                             expected=f"at most {min(meta.width * src_x, meta.height * src_y)}")
    quiet = _quiet()
    try:
        with rasterio.open(path) as src:
            data = src.read(out_shape=(src.count, h, w), resampling=method)
    finally:
        quiet.__exit__(None, None, None)
    new_t = t @ Affine.scale(meta.width / w, meta.height / h)
    dst = named_output(ctx, tool, {"raster": path, "target": tgt, "resampling": resampling},
                       ".tif", out_path, (".tif", ".tiff"))
    write_raster(dst, data, nodata=meta.nodata,
                 transform=new_t if meta.georeferenced else None,
                 crs=meta.crs if meta.georeferenced else None)
    class_map, _px = read_mask_tags(path)
    if class_map:
        _retag(dst, class_map, tgt if not meta.georeferenced else None)
    return {"tool": tool, "output_path": ctx.artifact_name(dst), "src_pixel_size_m": float(src_x),
            "dst_pixel_size_m": float(abs(new_t.a)), "shape": [h, w]}


_FOCAL = ("mean", "sum", "min", "max", "std")


@register("ras.focal_stats", server="Analysis", module="raster",
          result_keys=["tool", "output_path", "statistic", "window_size", "shape"],
          notes={"statistic": "mean|sum|min|max|std",
                 "window_size": "even values are bumped to odd",
                 "out_path": "auto <temp>/<stem>_focal_<stat>_<w>.tif"})
def ras_focal_stats(ctx: ToolContext, raster_path: str, statistic: str = "mean",
                    window_size: int = 5, nodata: float | None = None,
                    out_path: str | None = None) -> dict:
    """Moving-window statistic of band 1 over a w×w square (float32 GeoTIFF).

    Only valid pixels enter a window (NaN, the raster's nodata, and ``nodata`` when given are
    skipped); windows at the border use the part inside the image. ``std`` is the population
    standard deviation. Nodata pixels of the input stay nodata in the output (value: ``nodata``,
    else the raster's nodata, else NaN). An even ``window_size`` is bumped to the next odd one.
    Errors: unknown statistic, window_size < 1 → ToolInputError.
    """
    from scipy import ndimage

    tool = "ras.focal_stats"
    if statistic not in _FOCAL:
        raise ToolInputError(f"unknown statistic {statistic!r}", tool=tool, argument="statistic",
                             expected="mean, sum, min, max or std")
    if int(window_size) < 1:
        raise ToolInputError(f"must be >= 1, got {window_size}", tool=tool,
                             argument="window_size", expected="an odd window size >= 1")
    w = int(window_size)
    if w % 2 == 0:
        w += 1
    path = ctx.resolve(raster_path, tool=tool, argument="raster_path")
    arr, meta = read_band(path, 1, tool=tool, argument="raster_path")
    valid = _valid_mask(arr, meta.nodata)
    if nodata is not None:
        valid &= arr != nodata
    out_nodata = nodata if nodata is not None else meta.nodata
    if out_nodata is None:
        out_nodata = float("nan")
    x = np.where(valid, arr.astype(np.float64), 0.0)
    kernel = np.ones((w, w), dtype=np.float64)
    if statistic in ("mean", "sum", "std"):
        s = ndimage.correlate(x, kernel, mode="constant", cval=0.0)
        n = ndimage.correlate(valid.astype(np.float64), kernel, mode="constant", cval=0.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            if statistic == "sum":
                res = s
            else:
                mean = s / n
                if statistic == "mean":
                    res = mean
                else:
                    s2 = ndimage.correlate(x * x, kernel, mode="constant", cval=0.0)
                    res = np.sqrt(np.maximum(s2 / n - mean * mean, 0.0))
    elif statistic == "min":
        res = ndimage.minimum_filter(np.where(valid, x, np.inf), size=w, mode="nearest")
    else:
        res = ndimage.maximum_filter(np.where(valid, x, -np.inf), size=w, mode="nearest")
    out = np.where(valid, res, out_nodata).astype(np.float32)
    dst = named_output(ctx, tool, {"raster": path, "statistic": statistic, "w": w,
                                   "nodata": nodata}, ".tif", out_path, (".tif", ".tiff"))
    write_raster(dst, out, like=meta, nodata=float(out_nodata))
    return {"tool": tool, "output_path": ctx.artifact_name(dst), "statistic": statistic,
            "window_size": w, "shape": [int(meta.height), int(meta.width)]}
