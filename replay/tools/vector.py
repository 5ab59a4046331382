"""Vector tools (``vec.*``): shapely, pyproj, geopandas.

Frames: a layer with a CRS is georeferenced (measured in metres; a geographic layer in its UTM
zone); a layer without one is in pixel space (x = column, y = row) and is scaled by a pixel size
from the arguments or from a ``pixel_size_m`` property of its features. Mixing a pixel-space
layer with a georeferenced one is an error here (the benchmark only logs a warning and usually
returns zero).
"""
from __future__ import annotations

import csv
import io
import math
from pathlib import Path

import numpy as np

from ._io import (layer_pixel_size, metric_frame, raster_meta, read_vector, read_vector_path,
                  write_vector)
from .base import ToolContext, ToolInputError
from .registry import register


def _stem(value: str) -> str:
    return Path(str(value)).name


def _buffer_units(gdf, meter: float) -> tuple[float, float | None]:
    """(distance in layer units, pixel size used) for a buffer of ``meter`` metres."""
    px = layer_pixel_size(gdf)
    if gdf.crs is None:
        return (meter / px if px else meter), px
    if gdf.crs.is_geographic:
        return meter, px  # buffered in UTM metres
    factor = gdf.crs.axis_info[0].unit_conversion_factor if gdf.crs.axis_info else 1.0
    return meter / float(factor or 1.0), px


def _buffered(gdf, dist_units: float):
    if gdf.crs is not None and gdf.crs.is_geographic:
        utm = gdf.estimate_utm_crs()
        return gdf.to_crs(utm).geometry.buffer(dist_units).to_crs(gdf.crs)
    return gdf.geometry.buffer(dist_units)


def _buffer_layer(gdf, meter: float):
    dist, px = _buffer_units(gdf, float(meter))
    out = gdf.copy()
    out[out.geometry.name] = _buffered(gdf, dist)
    if "pixel_size_m" not in out.columns:
        out["pixel_size_m"] = px
    out["buffer_input_m"] = float(meter)
    out["buffer_used_units"] = float(dist)
    return out, dist


# --------------------------------------------------------------------------------------------
@register("vec.buffer", server="Analysis", module="vector",
          result_keys=["tool", "buffer_path", "distance_input_m", "distance_used_units",
                       "input_vector"],
          notes={"meter": "distance in metres"})
def vec_buffer(ctx: ToolContext, vector_path: str, meter: float) -> dict:
    """Buffer every geometry by ``meter`` metres.

    Pixel-space layers with a ``pixel_size_m`` property are buffered by meter / pixel_size_m
    pixels (without it: by ``meter`` pixels, as the benchmark does); geographic layers are
    buffered in metres in their UTM zone and written back in their CRS; projected layers in
    their unit (metres converted). Output features gain ``buffer_input_m``,
    ``buffer_used_units`` and ``pixel_size_m``. Empty layer → ``buffer_path`` null plus a note.
    """
    tool = "vec.buffer"
    gdf, path = read_vector(ctx, vector_path, tool=tool, argument="vector_path")
    if len(gdf) == 0:
        return {"tool": tool, "buffer_path": None, "distance_input_m": float(meter),
                "distance_used_units": None, "input_vector": vector_path,
                "note": "Empty input; no features to buffer."}
    out, dist = _buffer_layer(gdf, meter)
    out_path = ctx.output_path(tool, {"vector": path, "meter": float(meter)}, ".geojson")
    write_vector(out_path, out)
    return {"tool": tool, "buffer_path": ctx.artifact_name(out_path),
            "distance_input_m": float(meter), "distance_used_units": float(dist),
            "input_vector": vector_path}


@register("vec.kbuffer", server="Analysis", module="vector",
          result_keys=["tool", "buffers", "input_vector"])
def vec_kbuffer(ctx: ToolContext, vector_path: str, meters: list[float]) -> dict:
    """``vec.buffer`` for several distances, one output file per distance (ring/zone
    analysis). Empty layer → no buffers plus a note."""
    tool = "vec.kbuffer"
    if not meters:
        raise ToolInputError("is empty", tool=tool, argument="meters",
                             expected="one or more distances in metres")
    gdf, path = read_vector(ctx, vector_path, tool=tool, argument="vector_path")
    if len(gdf) == 0:
        return {"tool": tool, "buffers": [], "input_vector": vector_path,
                "note": "Empty input; no features to buffer."}
    buffers = []
    for m in meters:
        out, dist = _buffer_layer(gdf, m)
        out_path = ctx.output_path(tool, {"vector": path, "meter": float(m)}, ".geojson")
        write_vector(out_path, out)
        buffers.append({"distance_input_m": float(m), "distance_used_units": float(dist),
                        "buffer_path": ctx.artifact_name(out_path)})
    return {"tool": tool, "buffers": buffers, "input_vector": vector_path}


# --------------------------------------------------------------------------------------------
def _merge_overlapping(gdf):
    """Merge polygons of one layer that overlap with positive area (e.g. per-feature buffers);
    a merged feature keeps the attributes of its largest member. Touching features stay apart."""
    import geopandas as gpd
    import pandas as pd
    import shapely

    if len(gdf) < 2 or not gdf.geometry.geom_type.isin(["Polygon", "MultiPolygon"]).all():
        return gdf
    geoms = list(gdf.geometry)
    parent = list(range(len(geoms)))

    def root(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    left, right = gdf.sindex.query(gdf.geometry, predicate="intersects")
    for i, j in sorted(zip(left.tolist(), right.tolist())):
        if i < j and geoms[i].intersection(geoms[j]).area > 0:
            ri, rj = root(i), root(j)
            if ri != rj:
                parent[max(ri, rj)] = min(ri, rj)
    groups: dict[int, list[int]] = {}
    for i in range(len(geoms)):
        groups.setdefault(root(i), []).append(i)
    if len(groups) == len(geoms):
        return gdf
    members = sorted(groups.values())
    attrs = gdf.drop(columns=gdf.geometry.name)
    rows = [attrs.iloc[max(m, key=lambda k: (geoms[k].area, -k))] for m in members]
    merged = [shapely.union_all([geoms[k] for k in m]) if len(m) > 1 else geoms[m[0]]
              for m in members]
    return gpd.GeoDataFrame(pd.DataFrame(rows).reset_index(drop=True),
                            geometry=gpd.GeoSeries(merged, crs=gdf.crs), crs=gdf.crs)


def _explode_mixed(gdf):
    if len(gdf) and gdf.geometry.geom_type.nunique() > 1:
        return gdf.explode(ignore_index=True)
    return gdf


def _first_pixel_size(gdf) -> float | None:
    """First positive value of any ``pixel_size_m*`` column (overlay suffixes _1/_2)."""
    for col in [c for c in gdf.columns if str(c).startswith("pixel_size_m")]:
        for v in gdf[col]:
            try:
                f = float(v)
            except (TypeError, ValueError):
                continue
            if math.isfinite(f) and f > 0:
                return f
    return None


def _check_frames(a, b, tool, arg_a, arg_b):
    if (a.crs is None) != (b.crs is None):
        pix, geo = (arg_a, arg_b) if a.crs is None else (arg_b, arg_a)
        raise ToolInputError(f"{pix} is a pixel-space layer (no CRS) but {geo} is georeferenced; "
                             f"they cannot be overlaid", tool=tool, argument=pix,
                             expected="two layers in the same frame")


@register("vec.intersect", server="Analysis", module="vector",
          result_keys=["tool", "intersection_count", "intersecting_a_count",
                       "intersecting_b_count", "intersection_area_px2", "intersection_area_m2",
                       "pixel_size_m", "intersection_path"],
          notes={"pixel_size_m": "scales pixel-space areas; ignored for georeferenced layers"})
def vec_intersect(ctx: ToolContext, vector_a_path: str, vector_b_path: str,
                  pixel_size_m: float | None = None) -> dict:
    """Polygon overlay (intersection) of two layers.

    Overlapping features within each layer are merged first (nothing is counted twice);
    ``intersecting_a_count`` / ``_b_count`` are the features of A / B that take part (e.g.
    buildings hit by a flood layer passed as B). Pixel-space: area_m2 = area_px2 · px², px from
    the argument or a ``pixel_size_m`` property (area_m2 null when unknown); georeferenced:
    metres (geographic via UTM), B reprojected to A's CRS. Empty input → zero counts and a note.
    A pixel-space layer with a georeferenced one → ToolInputError.
    """
    import geopandas as gpd

    tool = "vec.intersect"
    a, pa = read_vector(ctx, vector_a_path, tool=tool, argument="vector_a_path")
    b, pb = read_vector(ctx, vector_b_path, tool=tool, argument="vector_b_path")
    key = {"a": pa, "b": pb, "pixel_size_m": pixel_size_m}
    out_path = ctx.output_path(tool, key, ".geojson")
    px_arg = float(pixel_size_m) if pixel_size_m is not None else None
    a = a[a.geometry.notna()]
    b = b[b.geometry.notna()]
    if len(a) == 0 or len(b) == 0:
        write_vector(out_path, gpd.GeoDataFrame(geometry=gpd.GeoSeries([], crs=a.crs)))
        return {"tool": tool, "intersection_count": 0, "intersecting_a_count": 0,
                "intersecting_b_count": 0, "intersection_area_px2": 0.0,
                "intersection_area_m2": 0.0 if px_arg is not None else None,
                "pixel_size_m": px_arg, "intersection_path": ctx.artifact_name(out_path),
                "note": "One or both inputs are empty or have no geometry."}
    _check_frames(a, b, tool, "vector_a_path", "vector_b_path")
    a = _explode_mixed(a)
    b = _explode_mixed(b)
    if a.crs is not None and b.crs is not None and a.crs != b.crs:
        b = b.to_crs(a.crs)
    a = _merge_overlapping(a).reset_index(drop=True)
    b = _merge_overlapping(b).reset_index(drop=True)
    a = a.copy()
    b = b.copy()
    a["_a_feature"] = range(len(a))
    b["_b_feature"] = range(len(b))
    inter = gpd.overlay(a, b, how="intersection", keep_geom_type=True)
    inter = inter[~inter.geometry.is_empty].reset_index(drop=True)
    a_hits = int(inter["_a_feature"].nunique()) if len(inter) else 0
    b_hits = int(inter["_b_feature"].nunique()) if len(inter) else 0
    inter = inter.drop(columns=["_a_feature", "_b_feature"], errors="ignore")
    px = px_arg
    if px is None:
        px = _first_pixel_size(inter)
    if len(inter) == 0:
        write_vector(out_path, inter)
        return {"tool": tool, "intersection_count": 0, "intersecting_a_count": 0,
                "intersecting_b_count": 0, "intersection_area_px2": 0.0,
                "intersection_area_m2": 0.0 if px is not None or inter.crs is not None else None,
                "pixel_size_m": px, "intersection_path": ctx.artifact_name(out_path)}
    inter = inter.drop(columns=[c for c in inter.columns if str(c).startswith("pixel_size_m")])
    if inter.crs is None:
        area_px2 = [float(v) for v in inter.geometry.area]
        area_m2 = [v * px ** 2 for v in area_px2] if px is not None else [None] * len(area_px2)
    else:
        metric, scale = metric_frame(inter)
        area_m2 = [float(v) * scale ** 2 for v in metric.geometry.area]
        area_px2 = [v / px ** 2 for v in area_m2] if px else [None] * len(area_m2)
    inter["area_px2"] = area_px2
    inter["area_m2"] = area_m2
    inter["pixel_size_m"] = px
    write_vector(out_path, inter)
    return {"tool": tool, "intersection_count": int(len(inter)),
            "intersecting_a_count": a_hits, "intersecting_b_count": b_hits,
            "intersection_area_px2": float(sum(area_px2)) if None not in area_px2 else None,
            "intersection_area_m2": float(sum(area_m2)) if None not in area_m2 else None,
            "pixel_size_m": px, "intersection_path": ctx.artifact_name(out_path)}


# --------------------------------------------------------------------------------------------
@register("vec.filter_by_attribute", server="Analysis", module="vector",
          result_keys=["tool", "vector_path", "attribute_name", "allowed_values", "total_input",
                       "total_filtered"],
          notes={"attribute_name": "e.g. 'types'; a dotted name falls back to its last segment"})
def vec_filter_by_attribute(ctx: ToolContext, vector_path: str, attribute_name: str,
                            allowed_values: list[str]) -> dict:
    """Keep features whose attribute (a list, or a comma-separated string) contains at least
    one allowed token, compared trimmed and case-insensitively. Unknown attribute →
    ToolInputError listing the available ones. Empty layer → zero counts plus a note."""
    import geopandas as gpd

    tool = "vec.filter_by_attribute"
    gdf, path = read_vector(ctx, vector_path, tool=tool, argument="vector_path")
    if len(gdf) == 0:
        return {"tool": tool, "vector_path": vector_path, "attribute_name": attribute_name,
                "allowed_values": list(allowed_values), "total_input": 0, "total_filtered": 0,
                "note": "Empty input; no features to filter."}
    attr = attribute_name
    if attr not in gdf.columns and "." in attr and attr.split(".")[-1] in gdf.columns:
        attr = attr.split(".")[-1]
    if attr not in gdf.columns or attr == gdf.geometry.name:
        avail = [str(c) for c in gdf.columns if c != gdf.geometry.name]
        raise ToolInputError(f"attribute {attribute_name!r} not found; available attributes: "
                             f"{avail}", tool=tool, argument="attribute_name",
                             expected=f"one of {avail}")
    allowed = {str(v).strip().lower() for v in allowed_values if str(v).strip()}

    def match(value) -> bool:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return False
        if isinstance(value, (list, tuple, np.ndarray)):
            tokens = [str(v).strip().lower() for v in value]
        else:
            tokens = [t.strip().lower() for t in str(value).split(",")]
        return any(t in allowed for t in tokens if t)

    keep = [match(v) for v in gdf[attr]]
    out = gdf[keep].copy() if any(keep) else gpd.GeoDataFrame(gdf.iloc[0:0].copy())
    out_path = ctx.output_path(tool, {"vector": path, "attribute": attribute_name,
                                      "allowed": list(allowed_values)}, ".geojson")
    write_vector(out_path, out)
    return {"tool": tool, "vector_path": ctx.artifact_name(out_path),
            "attribute_name": attribute_name, "allowed_values": list(allowed_values),
            "total_input": int(len(gdf)), "total_filtered": int(len(out))}


# --------------------------------------------------------------------------------------------
@register("vec.connected_components", server="Analysis", module="vector",
          result_keys=["tool", "count", "vector_path", "mode"])
def vec_connected_components(ctx: ToolContext, vector_path: str) -> dict:
    """Number of features of a vector layer; a raster given instead is read as a mask and its
    4-connected non-zero components are counted (``mode`` says which, raster mode echoes
    ``mask_path``)."""
    from scipy import ndimage

    tool = "vec.connected_components"
    path = ctx.resolve(vector_path, tool=tool, argument="vector_path")
    if path.suffix.lower() in (".geojson", ".json", ".shp", ".gpkg"):
        gdf = read_vector_path(path, ctx=ctx, tool=tool, argument="vector_path")
        return {"tool": tool, "count": int(len(gdf)), "vector_path": vector_path, "mode": "vector"}
    from ._io import read_raster

    arr, _ = read_raster(path, tool=tool, argument="vector_path")
    binary = np.any(arr != 0, axis=0)
    _, n = ndimage.label(binary, structure=[[0, 1, 0], [1, 1, 1], [0, 1, 0]])
    return {"tool": tool, "count": int(n), "mask_path": vector_path, "mode": "raster"}


# --------------------------------------------------------------------------------------------
def _areas_m2(gdf, pixel_size_m):
    if "area_m2" in gdf.columns and gdf["area_m2"].notna().any():
        return [float(v) if v is not None and not (isinstance(v, float) and math.isnan(v))
                else float("nan") for v in gdf["area_m2"]]
    metric, scale = metric_frame(gdf, pixel_size_m if pixel_size_m is not None
                                 else layer_pixel_size(gdf))
    return [float(v) * (scale ** 2 if scale else 1.0) for v in metric.geometry.area]


@register("vec.max_polygon", server="Analysis", module="vector",
          result_keys=["tool", "max_area_m2", "max_pixel_count", "topk_polygons",
                       "total_polygons", "vector_path"])
def vec_max_polygon(ctx: ToolContext, vector_path: str, pixel_size_m: float | None = None,
                    topk: int = 1) -> dict:
    """The k largest polygons by area (an existing ``area_m2`` property is preferred, else the
    geometry area in metres; a pixel-space layer without any pixel size is ranked in px²).
    Ties keep file order. Empty layer → max_area_m2 0 and an empty list."""
    tool = "vec.max_polygon"
    if int(topk) < 1:
        raise ToolInputError(f"must be >= 1, got {topk}", tool=tool, argument="topk")
    gdf, _ = read_vector(ctx, vector_path, tool=tool, argument="vector_path")
    if len(gdf) == 0:
        return {"tool": tool, "max_area_m2": 0.0, "max_pixel_count": 0, "topk_polygons": [],
                "total_polygons": 0, "vector_path": vector_path}
    areas = _areas_m2(gdf, pixel_size_m)
    order = sorted(range(len(gdf)), key=lambda i: (-(areas[i] if not math.isnan(areas[i]) else -1), i))
    top = order[: int(topk)]
    polys = []
    for i in top:
        rec = {}
        for col in ("id", "class", "pixel_count"):
            if col in gdf.columns:
                rec[col] = gdf.iloc[i][col]
        rec["area_m2"] = areas[i]
        polys.append(rec)
    first = gdf.iloc[top[0]]
    pc = first["pixel_count"] if "pixel_count" in gdf.columns else None
    max_pixels = int(pc) if pc is not None and pc == pc else None
    return {"tool": tool, "max_area_m2": float(areas[top[0]]), "max_pixel_count": max_pixels,
            "topk_polygons": polys, "total_polygons": int(len(gdf)), "vector_path": vector_path}


# --------------------------------------------------------------------------------------------
@register("vec.centroid", server="Analysis", module="vector",
          result_keys=["tool", "feature_idx", "geometry_type"],
          notes={"feature_idx": "0-based; -1 = the largest feature"})
def vec_centroid(ctx: ToolContext, vector_path: str, feature_idx: int = 0,
                 raster_path: str | None = None) -> dict:
    """Centroid of one feature: a pixel-space layer gives ``pixel_row`` (y) / ``pixel_col`` (x);
    a georeferenced one gives WGS84 ``latitude``/``longitude`` and, with ``raster_path``, the
    centroid's pixel_row/pixel_col in that raster's grid. ``feature_idx`` −1 picks the largest
    feature. Index out of range → ToolInputError; empty layer → null centroid plus a note."""
    import geopandas as gpd

    tool = "vec.centroid"
    gdf, _ = read_vector(ctx, vector_path, tool=tool, argument="vector_path")
    if len(gdf) == 0:
        return {"tool": tool, "centroid_x": None, "centroid_y": None, "vector_path": vector_path,
                "note": "Empty input; no features to compute centroid."}
    idx = int(feature_idx)
    if idx == -1:
        areas = _areas_m2(gdf, None)
        idx = max(range(len(gdf)), key=lambda i: (areas[i] if not math.isnan(areas[i]) else -1, -i))
    if not 0 <= idx < len(gdf):
        raise ToolInputError(f"feature {idx} does not exist; the layer has {len(gdf)} feature(s)",
                             tool=tool, argument="feature_idx",
                             expected=f"0..{len(gdf) - 1} or -1 (largest)")
    geom = gdf.geometry.iloc[idx]
    if geom is None or geom.is_empty:
        raise ToolInputError(f"feature {idx} has an empty geometry", tool=tool,
                             argument="feature_idx")
    c = geom.centroid
    out = {"tool": tool, "feature_idx": idx, "geometry_type": geom.geom_type}
    if gdf.crs is None:
        out["pixel_row"] = float(c.y)
        out["pixel_col"] = float(c.x)
        return out
    ll = gpd.GeoSeries([c], crs=gdf.crs).to_crs("EPSG:4326").iloc[0]
    out["latitude"] = float(ll.y)
    out["longitude"] = float(ll.x)
    if raster_path:
        rp = ctx.resolve(raster_path, tool=tool, argument="raster_path")
        meta = raster_meta(rp, tool=tool, argument="raster_path")
        if meta.georeferenced:
            xy = gpd.GeoSeries([c], crs=gdf.crs).to_crs(meta.crs).iloc[0]
            col, row = ~meta.transform @ (xy.x, xy.y)
            out["pixel_row"] = float(row)
            out["pixel_col"] = float(col)
    return out


# --------------------------------------------------------------------------------------------
@register("vec.pixel_to_world", server="Analysis", module="vector",
          result_keys=["tool", "pixel_row", "pixel_col", "latitude", "longitude", "crs"])
def vec_pixel_to_world(ctx: ToolContext, raster_path: str, pixel_row: int, pixel_col: int) -> dict:
    """WGS84 position of a pixel (row, col) through the raster's affine transform (pixel
    corner, no half-pixel shift). A raster without CRS → ToolInputError (there is no world
    position to give)."""
    from pyproj import Transformer

    tool = "vec.pixel_to_world"
    rp = ctx.resolve(raster_path, tool=tool, argument="raster_path")
    meta = raster_meta(rp, tool=tool, argument="raster_path")
    if not meta.georeferenced:
        raise ToolInputError(f"{_stem(raster_path)} has no CRS", tool=tool,
                             argument="raster_path", expected="a georeferenced raster")
    x, y = meta.transform @ (int(pixel_col), int(pixel_row))
    if meta.crs.to_epsg() != 4326:
        lon, lat = Transformer.from_crs(meta.crs, "EPSG:4326", always_xy=True).transform(x, y)
    else:
        lon, lat = x, y
    return {"tool": tool, "pixel_row": int(pixel_row), "pixel_col": int(pixel_col),
            "latitude": float(lat), "longitude": float(lon), "crs": str(meta.crs)}


# --------------------------------------------------------------------------------------------
def _write_csv(path: Path, rows: list[dict], columns: list[str]) -> None:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n", extrasaction="ignore")
    w.writeheader()
    for r in rows:
        w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in columns})
    Path(path).write_text(buf.getvalue(), encoding="utf-8")


def _lengths(ctx, tool, vector_path, pixel_size_m, key):
    gdf, path = read_vector(ctx, vector_path, tool=tool, argument="vector_path")
    if len(gdf) == 0:
        return gdf, path, None
    px = pixel_size_m if pixel_size_m is not None else layer_pixel_size(gdf)
    metric, scale = metric_frame(gdf, px)
    if scale is None:
        raise ToolInputError("is needed for a pixel-space layer (no CRS, no pixel_size_m "
                             "property)", tool=tool, argument="pixel_size_m",
                             expected="metres per pixel")
    if key == "perimeter_m":
        vals = [float(g.boundary.length) * scale if g is not None else 0.0 for g in metric.geometry]
    else:
        vals = [float(v) * scale for v in metric.geometry.length]
    return gdf, path, vals


@register("vec.length", server="Analysis", module="vector",
          result_keys=["tool", "total_length_m", "table_path", "input_vector"],
          notes={"pixel_size_m": "metres per pixel for pixel-space vectors"})
def vec_length(ctx: ToolContext, vector_path: str, pixel_size_m: float | None = None) -> dict:
    """Total length in metres of the (line) features; pixel-space × pixel size (argument or
    ``pixel_size_m`` property, else ToolInputError), projected in CRS metres, geographic via
    UTM. The CSV table lists id and length_m per feature."""
    tool = "vec.length"
    gdf, path, vals = _lengths(ctx, tool, vector_path, pixel_size_m, "length_m")
    if vals is None:
        return {"tool": tool, "total_length_m": 0.0, "count": 0, "vector_path": vector_path,
                "note": "Empty input; no features to measure."}
    ids = list(gdf["id"]) if "id" in gdf.columns else list(range(1, len(gdf) + 1))
    table = ctx.output_path(tool, {"vector": path, "pixel_size_m": pixel_size_m}, ".csv")
    _write_csv(table, [{"id": i, "length_m": v} for i, v in zip(ids, vals)], ["id", "length_m"])
    return {"tool": tool, "total_length_m": float(sum(vals)),
            "table_path": ctx.artifact_name(table), "input_vector": vector_path}


@register("vec.perimeter", server="Analysis", module="vector",
          result_keys=["tool", "total_perimeter_m", "table_path", "input_vector"],
          notes={"pixel_size_m": "metres per pixel for pixel-space vectors"})
def vec_perimeter(ctx: ToolContext, vector_path: str, pixel_size_m: float | None = None) -> dict:
    """Sum of polygon boundary lengths in metres (holes included), same unit rules as
    ``vec.length``."""
    tool = "vec.perimeter"
    gdf, path, vals = _lengths(ctx, tool, vector_path, pixel_size_m, "perimeter_m")
    if vals is None:
        return {"tool": tool, "total_perimeter_m": 0.0, "count": 0, "vector_path": vector_path,
                "note": "Empty input; no features to measure."}
    ids = list(gdf["id"]) if "id" in gdf.columns else list(range(1, len(gdf) + 1))
    table = ctx.output_path(tool, {"vector": path, "pixel_size_m": pixel_size_m}, ".csv")
    _write_csv(table, [{"id": i, "perimeter_m": v} for i, v in zip(ids, vals)],
               ["id", "perimeter_m"])
    return {"tool": tool, "total_perimeter_m": float(sum(vals)),
            "table_path": ctx.artifact_name(table), "input_vector": vector_path}


# --------------------------------------------------------------------------------------------
@register("vec.filter_by_area", server="Analysis", module="vector",
          result_keys=["tool", "vector_path", "min_area_m2"])
def vec_filter_by_area(ctx: ToolContext, vector_path: str, min_area_m2: float,
                       pixel_size_m: float) -> dict:
    """Keep polygons of at least ``min_area_m2`` (pixel-space: area · px², a feature's own
    ``pixel_size_m`` property winning over the argument; georeferenced: metric area) and write
    ``area_m2`` onto the kept features."""
    tool = "vec.filter_by_area"
    gdf, path = read_vector(ctx, vector_path, tool=tool, argument="vector_path")
    if len(gdf) == 0:
        return {"tool": tool, "vector_path": vector_path, "original_count": 0,
                "filtered_count": 0, "removed_count": 0, "min_area_m2": float(min_area_m2)}
    if not pixel_size_m > 0:
        raise ToolInputError(f"must be positive, got {pixel_size_m}", tool=tool,
                             argument="pixel_size_m")
    if gdf.crs is None:
        if "pixel_size_m" in gdf.columns:
            px = [float(v) if v is not None and v == v else float(pixel_size_m)
                  for v in gdf["pixel_size_m"]]
        else:
            px = [float(pixel_size_m)] * len(gdf)
        areas = [float(a) * p ** 2 for a, p in zip(gdf.geometry.area, px)]
    else:
        metric, scale = metric_frame(gdf)
        areas = [float(a) * scale ** 2 for a in metric.geometry.area]
        px = list(gdf["pixel_size_m"]) if "pixel_size_m" in gdf.columns else [float(pixel_size_m)] * len(gdf)
    keep = [a >= float(min_area_m2) for a in areas]
    out = gdf[keep].copy()
    out["area_m2"] = [a for a, k in zip(areas, keep) if k]
    out["pixel_size_m"] = [p for p, k in zip(px, keep) if k]
    out_path = ctx.output_path(tool, {"vector": path, "min": float(min_area_m2),
                                      "px": float(pixel_size_m)}, ".geojson")
    write_vector(out_path, out)
    return {"tool": tool, "vector_path": ctx.artifact_name(out_path),
            "min_area_m2": float(min_area_m2)}


# --------------------------------------------------------------------------------------------
def _haversine_m(lat1, lon1, lat2, lon2) -> float:
    r = 6371000.0
    p1, p2 = math.radians(lat1), math.radians(lat2)
    dphi = p2 - p1
    dlmb = math.radians(lon2 - lon1)
    a = math.sin(dphi / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dlmb / 2) ** 2
    return r * 2 * math.atan2(math.sqrt(a), math.sqrt(1 - a))


@register("vec.filter_by_distance", server="Analysis", module="vector",
          result_keys=["tool", "vector_path", "center_lat", "center_lon", "max_distance_m",
                       "total_input", "total_filtered", "nearest_distance_m",
                       "farthest_distance_m"])
def vec_filter_by_distance(ctx: ToolContext, vector_path: str, center_lat: float,
                           center_lon: float, max_distance_m: float) -> dict:
    """Keep features within a great-circle distance (haversine, R = 6,371 km) of a WGS84
    point, measured to the point geometry or the centroid; adds ``distance_m``. A layer with a
    CRS is reprojected to WGS84 first; a pixel-space layer is read as lon/lat (as the
    benchmark does) only when its coordinates fit, else ToolInputError."""
    tool = "vec.filter_by_distance"
    if not (-90 <= center_lat <= 90 and -180 <= center_lon <= 180):
        raise ToolInputError(f"({center_lat}, {center_lon}) is not a WGS84 position", tool=tool,
                             argument="center_lat", expected="latitude -90..90, longitude -180..180")
    gdf, path = read_vector(ctx, vector_path, tool=tool, argument="vector_path")
    if len(gdf) == 0:
        return {"tool": tool, "vector_path": vector_path, "center_lat": float(center_lat),
                "center_lon": float(center_lon), "max_distance_m": float(max_distance_m),
                "total_input": 0, "total_filtered": 0, "nearest_distance_m": None,
                "farthest_distance_m": None, "note": "Empty input; no features to filter."}
    ll = gdf.to_crs("EPSG:4326") if gdf.crs is not None else gdf
    if gdf.crs is None:
        minx, miny, maxx, maxy = ll.total_bounds
        if minx < -180 or maxx > 180 or miny < -90 or maxy > 90:
            raise ToolInputError("layer has no CRS and its coordinates are not lon/lat",
                                 tool=tool, argument="vector_path",
                                 expected="a WGS84 (lon/lat) layer")
    dists = []
    for g in ll.geometry:
        if g is None or g.is_empty:
            dists.append(float("inf"))
            continue
        p = g if g.geom_type == "Point" else g.centroid
        dists.append(_haversine_m(float(center_lat), float(center_lon), p.y, p.x))
    out = gdf.copy()
    out["distance_m"] = dists
    keep = [d <= float(max_distance_m) for d in dists]
    out = out[keep]
    kept = [d for d, k in zip(dists, keep) if k]
    out_path = ctx.output_path(tool, {"vector": path, "lat": float(center_lat),
                                      "lon": float(center_lon), "max": float(max_distance_m)},
                               ".geojson")
    write_vector(out_path, out)
    return {"tool": tool, "vector_path": ctx.artifact_name(out_path),
            "center_lat": float(center_lat), "center_lon": float(center_lon),
            "max_distance_m": float(max_distance_m), "total_input": int(len(gdf)),
            "total_filtered": int(len(out)),
            "nearest_distance_m": float(min(kept)) if kept else None,
            "farthest_distance_m": float(max(kept)) if kept else None}


# --------------------------------------------------------------------------------------------
@register("vec.nearest", server="Analysis", module="vector",
          result_keys=["tool", "mode", "topk", "pair_count", "pixel_size_m", "distance_px",
                       "distance_m", "nearest_a_id", "nearest_b_id", "table_path",
                       "links_geojson", "vector_a_path", "vector_b_path"])
def vec_nearest(ctx: ToolContext, vector_a_path: str, vector_b_path: str,
                pixel_size_m: float | None = None, topk: int = 1) -> dict:
    """For each A feature its k nearest B features by straight-line distance (pixel-space ×
    pixel size; georeferenced in metres, geographic via UTM). ids from an ``id`` property or
    1-based order; the top-level distance/ids are of the closest pair overall (first on ties).
    Empty A or B → pair_count 0 and null paths, with a note."""
    import geopandas as gpd
    from shapely.geometry import LineString
    from shapely.ops import nearest_points

    tool = "vec.nearest"
    if int(topk) < 1:
        raise ToolInputError(f"must be >= 1, got {topk}", tool=tool, argument="topk")
    a, pa = read_vector(ctx, vector_a_path, tool=tool, argument="vector_a_path")
    b, pb = read_vector(ctx, vector_b_path, tool=tool, argument="vector_b_path")
    base = {"tool": tool, "mode": "euclidean", "topk": int(topk),
            "vector_a_path": vector_a_path, "vector_b_path": vector_b_path}
    if len(a) == 0 or len(b) == 0:
        return {**base, "pair_count": 0, "pixel_size_m": pixel_size_m, "distance_px": None,
                "distance_m": None, "table_path": None, "links_geojson": None,
                "note": "Empty input A or B; no nearest pairs."}
    _check_frames(a, b, tool, "vector_a_path", "vector_b_path")
    px = float(pixel_size_m) if pixel_size_m is not None else (layer_pixel_size(a) or
                                                               layer_pixel_size(b))
    a_ids = [int(v) for v in a["id"]] if "id" in a.columns else list(range(1, len(a) + 1))
    b_ids = [int(v) for v in b["id"]] if "id" in b.columns else list(range(1, len(b) + 1))
    if a.crs is not None:
        a_m, unit = metric_frame(a)
        b_m = b.to_crs(a_m.crs)
    else:
        a_m, unit = a, px
        b_m = b
    rows, links = [], []
    for ia, ga in enumerate(a_m.geometry):
        if ga is None or ga.is_empty:
            continue
        ds = sorted(((float(ga.distance(gb)), ib) for ib, gb in enumerate(b_m.geometry)
                     if gb is not None and not gb.is_empty), key=lambda t: (t[0], t[1]))
        for rank, (d, ib) in enumerate(ds[: int(topk)], start=1):
            p_a, p_b = nearest_points(ga, b_m.geometry.iloc[ib])
            if a.crs is None:
                d_px, d_m = d, (d * px if px is not None else None)
            else:
                d_m = d * unit
                d_px = d_m / px if px else None
            rows.append({"a_id": a_ids[ia], "b_id": b_ids[ib], "rank": rank, "distance_px": d_px,
                         "distance_m": d_m, "pixel_size_m": px, "a_nearest_x": float(p_a.x),
                         "a_nearest_y": float(p_a.y), "b_nearest_x": float(p_b.x),
                         "b_nearest_y": float(p_b.y)})
            links.append(LineString([(p_a.x, p_a.y), (p_b.x, p_b.y)]))
    if not rows:
        return {**base, "pair_count": 0, "pixel_size_m": px, "distance_px": None,
                "distance_m": None, "table_path": None, "links_geojson": None,
                "note": "No valid nearest pairs found."}
    key = {"a": pa, "b": pb, "px": pixel_size_m, "topk": int(topk)}
    table = ctx.output_path(tool, key, ".csv")
    cols = ["a_id", "b_id", "rank", "distance_px", "distance_m", "pixel_size_m", "a_nearest_x",
            "a_nearest_y", "b_nearest_x", "b_nearest_y"]
    _write_csv(table, rows, cols)
    link_path = ctx.output_path(tool, {**key, "links": True}, ".geojson")
    import pandas as pd

    write_vector(link_path, gpd.GeoDataFrame(pd.DataFrame(rows),
                                             geometry=gpd.GeoSeries(links, crs=a_m.crs)))
    best = min(rows, key=lambda r: r["distance_m"] if r["distance_m"] is not None
               else r["distance_px"])
    return {**base, "pair_count": len(rows), "pixel_size_m": px,
            "distance_px": best["distance_px"], "distance_m": best["distance_m"],
            "nearest_a_id": best["a_id"], "nearest_b_id": best["b_id"],
            "table_path": ctx.artifact_name(table), "links_geojson": ctx.artifact_name(link_path)}


# --------------------------------------------------------------------------------------------
@register("vec.clip", server="Analysis", module="vector",
          result_keys=["tool", "clip_path", "input_count", "output_count", "input_vector",
                       "roi_vector"])
def vec_clip(ctx: ToolContext, vector_path: str, roi_vector_path: str) -> dict:
    """Cut a layer to the union of the ROI polygons (geometries are trimmed, not just
    selected); the ROI is reprojected to the layer's CRS. Empty layer or ROI → null path plus
    a note; pixel-space vs georeferenced → ToolInputError."""
    import geopandas as gpd
    import shapely

    tool = "vec.clip"
    gdf, path = read_vector(ctx, vector_path, tool=tool, argument="vector_path")
    roi, rpath = read_vector(ctx, roi_vector_path, tool=tool, argument="roi_vector_path")
    base = {"tool": tool, "input_vector": vector_path, "roi_vector": roi_vector_path}
    if len(gdf) == 0:
        return {**base, "clip_path": None, "input_count": 0, "output_count": 0,
                "note": "Empty input; 0 features to clip."}
    if len(roi) == 0:
        return {**base, "clip_path": None, "input_count": int(len(gdf)), "output_count": 0,
                "note": "Empty ROI; no clip region."}
    _check_frames(gdf, roi, tool, "vector_path", "roi_vector_path")
    if gdf.crs is not None and roi.crs is not None and gdf.crs != roi.crs:
        roi = roi.to_crs(gdf.crs)
    roi_geom = shapely.union_all([g for g in roi.geometry if g is not None])
    clipped = gpd.clip(gdf, roi_geom)
    clipped = clipped[~clipped.geometry.is_empty].sort_index()
    out_path = ctx.output_path(tool, {"vector": path, "roi": rpath}, ".geojson")
    write_vector(out_path, clipped)
    return {**base, "clip_path": ctx.artifact_name(out_path), "input_count": int(len(gdf)),
            "output_count": int(len(clipped))}


# --------------------------------------------------------------------------------------------
_STATS = ("mean", "min", "max", "std")


@register("vec.raster_stats", server="Analysis", module="vector",
          result_keys=["tool", "vector_path", "raster_path", "output_vector_path", "band",
                       "stats", "feature_count", "min_pixels", "pixel_area_m2"])
def vec_raster_stats(ctx: ToolContext, vector_path: str, raster_path: str,
                     stats: list[str] | None = None, band: int = 1, return_features: bool = True,
                     min_pixels: int = 1, all_touched: bool = False) -> dict:
    """Zonal statistics: raster values under each geometry (a point samples its pixel; lines
    and polygons their rasterised coverage, ``all_touched`` as in rasterio), NaN/nodata
    ignored. Features with fewer than ``min_pixels`` valid pixels are dropped. Per-feature stats
    (with osm_id/name/type/ref copied when present) and pooled stats over the union of kept
    features. The layer is reprojected to the raster's CRS when both have one; a pixel-space
    layer is read in the raster's pixel grid. Unknown stat or band → ToolInputError."""
    from rasterio import features as rfeatures

    from ._io import read_band

    tool = "vec.raster_stats"
    stats = list(stats or ["mean", "min", "max"])
    bad = [s for s in stats if s not in _STATS]
    if bad:
        raise ToolInputError(f"unsupported statistics {bad}", tool=tool, argument="stats",
                             expected=f"any of {list(_STATS)}")
    gdf, vpath = read_vector(ctx, vector_path, tool=tool, argument="vector_path")
    rp = ctx.resolve(raster_path, tool=tool, argument="raster_path")
    arr, meta = read_band(rp, int(band), tool=tool, argument="raster_path")
    base = {"tool": tool, "vector_path": vector_path, "raster_path": raster_path}
    if len(gdf) == 0:
        return {**base, "output_vector_path": None, "band": int(band), "stats": stats,
                "feature_count": 0, "min_pixels": int(min_pixels), "pixel_area_m2": None,
                "feature_stats": [], "note": "Empty input; no features for raster stats."}
    if gdf.crs is not None and meta.georeferenced and gdf.crs != meta.crs:
        gdf = gdf.to_crs(meta.crs)
    elif (gdf.crs is None) != (not meta.georeferenced):
        which = "vector_path" if gdf.crs is None else "raster_path"
        raise ToolInputError("one of the layer and the raster is georeferenced and the other is "
                             "not", tool=tool, argument=which,
                             expected="both georeferenced, or both in pixel space")
    transform = meta.transform
    valid = np.isfinite(arr) if arr.dtype.kind == "f" else np.ones(arr.shape, dtype=bool)
    if meta.nodata is not None and not (isinstance(meta.nodata, float) and math.isnan(meta.nodata)):
        valid &= arr != meta.nodata
    pixel_area = None
    if meta.georeferenced and not meta.crs.is_geographic:
        try:
            f = meta.crs.linear_units_factor[1]
        except Exception:
            f = 1.0
        pixel_area = abs(transform.a * transform.e - transform.b * transform.d) * f * f
    union = np.zeros(arr.shape, dtype=bool)
    kept_idx, items = [], []
    inv = ~transform
    for i in range(len(gdf)):
        geom = gdf.geometry.iloc[i]
        if geom is None or geom.is_empty:
            continue
        sample = np.zeros(arr.shape, dtype=bool)
        prow = pcol = None
        if geom.geom_type == "Point":
            c, r = inv @ (geom.x, geom.y)
            prow, pcol = math.floor(r), math.floor(c)
            if 0 <= prow < arr.shape[0] and 0 <= pcol < arr.shape[1]:
                sample[prow, pcol] = True
        else:
            sample = rfeatures.geometry_mask([geom.__geo_interface__], out_shape=arr.shape,
                                             transform=transform, invert=True,
                                             all_touched=bool(all_touched))
        sample &= valid
        n = int(sample.sum())
        if n < int(min_pixels):
            continue
        vals = arr[sample].astype(np.float64)
        item = {"feature_idx": i, "geometry_type": geom.geom_type, "pixel_count": n}
        if pixel_area is not None:
            item["sampled_area_m2"] = n * pixel_area
        if prow is not None:
            item["pixel_row"], item["pixel_col"] = int(prow), int(pcol)
        for col in ("osm_id", "name", "type", "ref"):
            if col in gdf.columns:
                v = gdf[col].iloc[i]
                item[col] = None if isinstance(v, float) and math.isnan(v) else v
        for s in stats:
            item[s] = float(getattr(vals, s)())
        items.append(item)
        kept_idx.append(i)
        union |= sample
    kept = gdf.iloc[kept_idx].copy()
    for key in sorted({k for it in items for k in it if k != "feature_idx"}):
        if key in ("osm_id", "name", "type", "ref"):
            continue
        kept[key] = [it.get(key) for it in items]
    out_path = ctx.output_path(tool, {"vector": vpath, "raster": rp, "stats": stats,
                                      "band": int(band), "min_pixels": int(min_pixels),
                                      "all_touched": bool(all_touched)}, ".geojson")
    write_vector(out_path, kept)
    out = {**base, "output_vector_path": ctx.artifact_name(out_path), "band": int(band),
           "stats": stats, "feature_count": len(items), "min_pixels": int(min_pixels),
           "pixel_area_m2": pixel_area}
    if return_features:
        out["feature_stats"] = items
    pooled = arr[union].astype(np.float64)
    for s in stats:
        out[s] = float(getattr(pooled, s)()) if pooled.size else None
    return out


# ============================================================================================
# Road graphs: vec.road_centerline_extraction, vec.build_graph, vec.graph_shortest_path,
# vec.repair_min_edges
# ============================================================================================
#: road classes of the benchmark's road tools (seg.road_damage): 1 intact, 2 flooded, 3 blocked
ROAD_CLASSES = {0: "background", 1: "intact", 2: "flooded", 3: "blocked"}
_ROAD_LABELS = {"intact": 1, "no_damage": 1, "road_no_damage": 1, "flooded": 2, "blocked": 3,
                "debris": 3, "debris_blocked": 3, "debris-blocked": 3}
#: RGB road masks: black 0, white 1 (intact), (248, 179, 101) 2 (flooded), red 3 (blocked)
_RGB_ROAD = {(0, 0, 0): 0, (255, 255, 255): 1, (248, 179, 101): 2, (255, 0, 0): 3}
_MIN_OBJECT_PX = 32
_JUNCTION_IGNORE_PX = 3


def _zhang_suen(binary: np.ndarray) -> np.ndarray:
    """One-pixel-wide skeleton (8-connected) by Zhang–Suen thinning.

    T. Y. Zhang and C. Y. Suen, "A fast parallel algorithm for thinning digital patterns",
    Commun. ACM 27(3), 1984, pp. 236–239: two sub-iterations delete a pixel P1 with
    2 ≤ B(P1) ≤ 6 neighbours, exactly one 0→1 transition A(P1) = 1 around it, and
    P2·P4·P6 = P4·P6·P8 = 0 (first) or P2·P4·P8 = P2·P6·P8 = 0 (second), until nothing changes.
    Vectorised over the bounding box of the foreground.
    """
    img = np.zeros((binary.shape[0] + 2, binary.shape[1] + 2), dtype=np.uint8)
    img[1:-1, 1:-1] = binary.astype(bool)
    rows, cols = np.nonzero(img)
    if rows.size == 0:
        return np.zeros(binary.shape, dtype=bool)
    r0, r1 = max(rows.min() - 1, 0), min(rows.max() + 2, img.shape[0])
    c0, c1 = max(cols.min() - 1, 0), min(cols.max() + 2, img.shape[1])
    sub = img[r0:r1, c0:c1]
    while True:
        changed = False
        for step in (0, 1):
            p = np.pad(sub, 1)
            p2, p3, p4 = p[:-2, 1:-1], p[:-2, 2:], p[1:-1, 2:]
            p5, p6, p7 = p[2:, 2:], p[2:, 1:-1], p[2:, :-2]
            p8, p9 = p[1:-1, :-2], p[:-2, :-2]
            ring = (p2, p3, p4, p5, p6, p7, p8, p9, p2)
            b = sum(x.astype(np.int8) for x in ring[:8])
            a = sum(((ring[k] == 0) & (ring[k + 1] == 1)).astype(np.int8) for k in range(8))
            if step == 0:
                c = ((p2 & p4 & p6) == 0) & ((p4 & p6 & p8) == 0)
            else:
                c = ((p2 & p4 & p8) == 0) & ((p2 & p6 & p8) == 0)
            kill = (sub == 1) & (b >= 2) & (b <= 6) & (a == 1) & c
            if kill.any():
                sub[kill] = 0
                changed = True
        if not changed:
            break
    out = img[1:-1, 1:-1].astype(bool)
    return out


def _skeleton_chains(skel: np.ndarray):
    """Split a skeleton into chains between key pixels.

    Pixel graph: 8-neighbours, minus a diagonal step whenever one of the two pixels orthogonally
    adjacent to both is set (staircase corners would otherwise look like junctions). Key
    pixels: degree ≠ 2 (ends, junctions); touching junction pixels form one node. A ring without
    key pixels gets its first pixel (row-major) as node. Returns (nodes, chains): ``nodes`` a
    list of (row, col) representative pixels, ``chains`` a list of (u, v, [(row, col), ...])
    running from node u's pixel to node v's pixel.
    """
    import networkx as nx

    h, w = skel.shape
    pix = {(int(r), int(c)) for r, c in zip(*np.nonzero(skel))}
    g = nx.Graph()
    g.add_nodes_from(sorted(pix))
    for (r, c) in sorted(pix):
        for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
            q = (r + dr, c + dc)
            if q not in pix:
                continue
            if dr and dc and ((r + dr, c) in pix or (r, c + dc) in pix):
                continue
            g.add_edge((r, c), q)
    key = {p for p in g.nodes if g.degree(p) != 2}
    for comp in nx.connected_components(g):
        if not (comp & key):
            key.add(min(comp))
    # junction clusters (adjacent key pixels of degree >= 3) become one node
    junction = {p for p in key if g.degree(p) >= 3}
    cluster_of: dict = {}
    for comp in sorted(nx.connected_components(g.subgraph(junction)), key=min):
        comp = sorted(comp)
        cr = sum(p[0] for p in comp) / len(comp)
        cc = sum(p[1] for p in comp) / len(comp)
        rep = min(comp, key=lambda p: ((p[0] - cr) ** 2 + (p[1] - cc) ** 2, p))
        for p in comp:
            cluster_of[p] = rep
    for p in key:
        cluster_of.setdefault(p, p)
    reps = sorted(set(cluster_of.values()))
    node_id = {rep: i for i, rep in enumerate(reps)}
    chains = []
    used = set()
    for start in sorted(key):
        for nb in sorted(g.neighbors(start)):
            if frozenset((start, nb)) in used:
                continue
            if nb in key and cluster_of[nb] == cluster_of[start]:
                continue  # inside one junction cluster
            path = [start, nb]
            used.add(frozenset((start, nb)))
            prev, cur = start, nb
            while cur not in key:
                nxt = [q for q in g.neighbors(cur) if q != prev]
                if not nxt:
                    break
                prev, cur = cur, sorted(nxt)[0]
                used.add(frozenset((prev, cur)))
                path.append(cur)
            u = node_id[cluster_of[start]]
            v = node_id[cluster_of[cur]] if cur in cluster_of else None
            if v is None:
                continue
            # start and end at the cluster representatives
            rs, re_ = cluster_of[start], cluster_of[cur]
            if path[0] != rs:
                path.insert(0, rs)
            if path[-1] != re_:
                path.append(re_)
            chains.append((u, v, path))
    return reps, chains


def _road_mask(ctx, tool, mask_path):
    from ._io import read_raster

    path = ctx.resolve(mask_path, tool=tool, argument="mask_path")
    arr, meta = read_raster(path, tool=tool, argument="mask_path")
    if arr.shape[0] >= 3 and not (np.array_equal(arr[0], arr[1]) and np.array_equal(arr[0], arr[2])):
        rgb = arr[:3].astype(np.int32)
        out = np.zeros(rgb.shape[1:], dtype=np.uint8)
        for colour, value in _RGB_ROAD.items():
            hit = (rgb[0] == colour[0]) & (rgb[1] == colour[1]) & (rgb[2] == colour[2])
            out[hit] = value
        return path, out, meta, True
    if arr.shape[0] not in (1, 3, 4):
        from .base import ModalityError

        raise ModalityError(f"{_stem(mask_path)} has {arr.shape[0]} bands", tool=tool,
                            argument="mask_path", expected="a road class map or an RGB road mask")
    return path, arr[0], meta, False


@register("vec.road_centerline_extraction", server="Analysis", module="vector",
          result_keys=["tool", "centerline_path", "input_mask", "edge_count"],
          notes={"mask_path": "road class map (seg.road_damage) or RGB road mask",
                 "intact_classes": "None -> [1]", "damaged_classes": "None -> [2,3]"})
def vec_road_centerline_extraction(ctx: ToolContext, mask_path: str,
                                   intact_classes: list[int] | None = None,
                                   damaged_classes: list[int] | None = None) -> dict:
    """Road centre lines of a road class map as pixel-space GeoJSON LineStrings.

    Road pixels = intact ∪ damaged classes (defaults [1] and [2, 3]; RGB masks are mapped
    black→0, white→1, (248,179,101)→2, red→3). Objects under 32 px (8-connected) are dropped,
    a 3×3 closing fills pinholes, the result is thinned (Zhang–Suen 1984) and cut into edges at
    ends and junctions (``_skeleton_chains``). An edge is ``damaged`` when ≥ 50 % (and ≥ 1) of
    its road pixels hold a damaged class, the 3 px next to each end being ignored when the edge
    is longer than 6 px; ``road_class`` is 1, or the most frequent damaged class (3 on ties).
    Lines are in the mask's pixel frame, x = col, y = row (``y_axis: "down"``; the benchmark
    writes y flipped, which ``vec.build_graph`` also reads); properties id, u, v, length_px,
    length, damaged, road_class, img_h, img_w. Empty road → ``edge_count`` 0 and an empty layer.
    Errors: class indices absent from the mask and the class map → ClassIndexError; overlapping
    class lists → ToolInputError.
    """
    import geopandas as gpd
    from scipy import ndimage
    from shapely.geometry import LineString

    from ._io import check_classes, read_mask_tags

    tool = "vec.road_centerline_extraction"
    intact = [int(c) for c in (intact_classes if intact_classes is not None else [1])]
    damaged = [int(c) for c in (damaged_classes if damaged_classes is not None else [2, 3])]
    if not intact and not damaged:
        raise ToolInputError("no road classes given", tool=tool, argument="intact_classes",
                             expected="at least one class index")
    if set(intact) & set(damaged):
        raise ToolInputError(f"classes {sorted(set(intact) & set(damaged))} are both intact and "
                             f"damaged", tool=tool, argument="damaged_classes",
                             expected="disjoint class lists")
    path, mask, meta, is_rgb = _road_mask(ctx, tool, mask_path)
    class_map = dict(ROAD_CLASSES) if is_rgb else read_mask_tags(path)[0]
    explicit = (intact_classes or []) + (damaged_classes or [])
    if explicit:
        check_classes(explicit, mask, class_map, mask_name=_stem(mask_path), tool=tool,
                      argument="intact_classes" if intact_classes else "damaged_classes")
    road = np.isin(mask, intact + damaged)
    lab, n = ndimage.label(road, structure=np.ones((3, 3)))
    if n:
        sizes = np.bincount(lab.ravel())
        small = sizes < _MIN_OBJECT_PX
        small[0] = False
        road &= ~small[lab]
    padded = np.pad(road, 2)
    closed = ndimage.binary_closing(padded, structure=np.ones((3, 3)))[2:-2, 2:-2]
    skel = _zhang_suen(closed)
    _nodes, chains = _skeleton_chains(skel)
    dmg = np.isin(mask, damaged)
    h, w = mask.shape
    records, geoms = [], []
    for u, v, pts in chains:
        if len(pts) < 2:
            continue
        rr = np.array([p[0] for p in pts])
        cc = np.array([p[1] for p in pts])
        core = slice(_JUNCTION_IGNORE_PX, len(pts) - _JUNCTION_IGNORE_PX) \
            if len(pts) > 2 * _JUNCTION_IGNORE_PX else slice(None)
        on_road = road[rr[core], cc[core]] | dmg[rr[core], cc[core]]
        vals = mask[rr[core], cc[core]][on_road]
        n_dmg = int(np.isin(vals, damaged).sum())
        is_dmg = n_dmg >= 1 and n_dmg >= 0.5 * max(len(vals), 1)
        road_class = 1
        if is_dmg:
            counts = {c: int((vals == c).sum()) for c in damaged}
            road_class = max(counts, key=lambda c: (counts[c], c))
        line = LineString([(float(c), float(r)) for r, c in pts])
        length = float(line.length)
        geoms.append(line)
        records.append({"id": len(records) + 1, "u": int(u), "v": int(v),
                        "length_px": round(length, 6), "length": round(length, 6),
                        "damaged": bool(is_dmg), "road_class": int(road_class),
                        "img_h": int(h), "img_w": int(w), "y_axis": "down"})
    cols = ["id", "u", "v", "length_px", "length", "damaged", "road_class", "img_h", "img_w",
            "y_axis"]
    import pandas as pd

    gdf = gpd.GeoDataFrame(pd.DataFrame(records, columns=cols), geometry=gpd.GeoSeries(geoms))
    out_path = ctx.output_path(tool, {"mask": path, "intact": intact, "damaged": damaged},
                               ".geojson")
    write_vector(out_path, gdf)
    return {"tool": tool, "centerline_path": ctx.artifact_name(out_path),
            "input_mask": mask_path, "edge_count": len(records)}


# --------------------------------------------------------------------------------------------
def _truthy(v) -> bool:
    if v is None:
        return False
    if isinstance(v, float) and math.isnan(v):
        return False
    if isinstance(v, str):
        return v.strip().lower() in ("1", "true", "yes", "y", "t")
    return bool(v)


def _road_class_of(props: dict) -> int:
    """1 intact / 2 flooded / 3 blocked from a feature's properties.

    Looked up in order: an integer (or label) in ``road_class``, ``damage_class`` or ``class``
    (non-road values such as OSM's ``class: "street"`` are ignored); then the flags
    ``blocked`` (→ 3), ``is_flooded``/``flooded`` (→ 2) and ``damaged`` (→ 2, "damaged" without
    a kind). Nothing → 1 (intact).
    """
    for key in ("road_class", "damage_class", "class"):
        v = props.get(key)
        if v is None or (isinstance(v, float) and math.isnan(v)):
            continue
        if isinstance(v, str):
            s = v.strip().lower()
            if s in _ROAD_LABELS:
                return _ROAD_LABELS[s]
            if s.isdigit() and int(s) in (1, 2, 3):
                return int(s)
            continue
        try:
            iv = int(v)
        except (TypeError, ValueError):
            continue
        if iv in (1, 2, 3) and float(v) == iv:
            return iv
    if _truthy(props.get("blocked")):
        return 3
    if _truthy(props.get("is_flooded")) or _truthy(props.get("flooded")):
        return 2
    if _truthy(props.get("damaged")):
        return 2
    return 1


def _line_parts(geom):
    if geom is None or geom.is_empty:
        return []
    if geom.geom_type == "LineString":
        return [geom]
    if geom.geom_type == "MultiLineString":
        return list(geom.geoms)
    return []


@register("vec.build_graph", server="Analysis", module="vector",
          result_keys=["tool", "graph_path", "node_count", "edge_count", "input_centerline"],
          notes={"centerline_path": "output of vec.road_centerline_extraction (pixel space)"})
def vec_build_graph(ctx: ToolContext, centerline_path: str) -> dict:
    """Undirected road graph (GraphML, networkx MultiGraph) from LineString roads.

    Nodes: line ends and vertices shared by several lines (so OSM ways that cross at a common
    node are connected); each line is cut at its node vertices into edges. Two frames:

    * pixel space (no CRS, e.g. ``vec.road_centerline_extraction``): node attributes row, col;
      edge ``length`` in pixels (1 per straight step, √2 per diagonal, i.e. the polyline
      length); a line with ``img_h`` but without ``y_axis: "down"`` is the benchmark's y-flipped
      layout and is flipped back (row = img_h − 1 − y);
    * georeferenced (any CRS, reprojected to WGS84): node attributes lon, lat; edge ``length``
      in metres along the WGS84 ellipsoid (pyproj.Geod geodesic line length).

    Every edge carries ``road_class`` (1 intact, 2 flooded, 3 blocked; see ``_road_class_of``),
    ``damaged`` (class 2 or 3), ``from_node`` (the node its coordinates start at), ``xy_json``
    (frame coordinates x, y) and ``pixels_json`` ([row, col], pixel frame only), and
    ``feature`` (0-based line index). Graph attributes: frame, crs, length_unit, img_h, img_w.
    Errors: a layer without any LineString → ToolInputError.
    """
    import json as _json

    import networkx as nx
    from pyproj import Geod

    tool = "vec.build_graph"
    gdf, path = read_vector(ctx, centerline_path, tool=tool, argument="centerline_path")
    georef = gdf.crs is not None
    if georef and gdf.crs.to_epsg() != 4326:
        gdf = gdf.to_crs("EPSG:4326")
    cols = [c for c in gdf.columns if c != gdf.geometry.name]
    lines = []  # (feature index, [(x, y), ...], props)
    img_h = img_w = None
    for i in range(len(gdf)):
        row = gdf.iloc[i]
        props = {c: row[c] for c in cols}
        feat_h = None
        if not georef:
            try:
                feat_h = int(props.get("img_h"))
                img_h, img_w = feat_h, int(props.get("img_w"))
            except (TypeError, ValueError):
                pass
        # the benchmark's centerlines are y-flipped (y = img_h - 1 - row); ours say y_axis down
        flipped = feat_h is not None and props.get("y_axis") != "down"
        for part in _line_parts(row[gdf.geometry.name]):
            coords = [(float(x), float(y)) for x, y, *_ in part.coords]
            if flipped:
                coords = [(x, feat_h - 1 - y) for x, y in coords]
            dedup = [coords[0]] + [p for k, p in enumerate(coords[1:], 1) if p != coords[k - 1]]
            if len(dedup) >= 2:
                lines.append((i, dedup, props))
    if not lines:
        raise ToolInputError(f"{_stem(centerline_path)} holds no LineString roads", tool=tool,
                             argument="centerline_path",
                             expected="a layer of LineStrings (e.g. vec.road_centerline_extraction)")
    digits = 7 if georef else 6

    def key(p):
        return (round(p[0], digits), round(p[1], digits))

    uses: dict = {}
    for _i, coords, _p in lines:
        for p in coords:
            uses[key(p)] = uses.get(key(p), 0) + 1
    node_keys = set()
    for _i, coords, _p in lines:
        node_keys.add(key(coords[0]))
        node_keys.add(key(coords[-1]))
    node_keys |= {k for k, n in uses.items() if n > 1}
    # pixel frame: row-major node ids, as the ids u/v of vec.road_centerline_extraction
    ordered = sorted(node_keys, key=(lambda k: k) if georef else (lambda k: (k[1], k[0])))
    nid = {k: j for j, k in enumerate(ordered)}
    geod = Geod(ellps="WGS84")
    g = nx.MultiGraph()
    g.graph.update({"frame": "geographic" if georef else "pixel",
                    "crs": "EPSG:4326" if georef else "", "length_unit": "m" if georef else "px",
                    "img_h": int(img_h) if img_h is not None else -1,
                    "img_w": int(img_w) if img_w is not None else -1})
    for k in ordered:
        if georef:
            g.add_node(nid[k], lon=float(k[0]), lat=float(k[1]), x=float(k[0]), y=float(k[1]))
        else:
            g.add_node(nid[k], row=float(k[1]), col=float(k[0]), x=float(k[0]), y=float(k[1]))
    for fi, coords, props in lines:
        cls = _road_class_of(props)
        start = 0
        for j in range(1, len(coords)):
            if key(coords[j]) not in node_keys:
                continue
            seg = coords[start:j + 1]
            start = j
            if georef:
                length = float(geod.line_length([p[0] for p in seg], [p[1] for p in seg]))
            else:
                length = float(sum(math.hypot(seg[k + 1][0] - seg[k][0],
                                              seg[k + 1][1] - seg[k][1])
                                   for k in range(len(seg) - 1)))
            u, v = nid[key(seg[0])], nid[key(seg[-1])]
            attrs = {"length": round(length, 6), "road_class": int(cls),
                     "damaged": bool(cls in (2, 3)), "from_node": int(u), "feature": int(fi),
                     "xy_json": _json.dumps([[round(x, 7), round(y, 7)] for x, y in seg],
                                            separators=(",", ":"))}
            if not georef:
                attrs["pixels_json"] = _json.dumps([[int(round(y)), int(round(x))]
                                                    for x, y in seg], separators=(",", ":"))
            g.add_edge(u, v, **attrs)
    out_path = ctx.output_path(tool, {"centerline": path}, ".graphml")
    nx.write_graphml(g, out_path)
    return {"tool": tool, "graph_path": ctx.artifact_name(out_path),
            "node_count": g.number_of_nodes(), "edge_count": g.number_of_edges(),
            "input_centerline": centerline_path, "frame": g.graph["frame"],
            "length_unit": g.graph["length_unit"]}


# --------------------------------------------------------------------------------------------
def _load_graph(ctx, tool, graph_path):
    """(MultiGraph, resolved path): GraphML of ``vec.build_graph`` (or the benchmark's), or JSON
    {nodes: [{id, ...}], edges: [{source, target, length_m|length|weight, ...}]}."""
    import json as _json

    import networkx as nx

    path = ctx.resolve(graph_path, tool=tool, argument="graph_path")
    if path.suffix.lower() == ".json":
        try:
            doc = _json.loads(path.read_text(encoding="utf-8"))
            g = nx.MultiGraph()
            for n in doc.get("nodes", []):
                n = dict(n)
                g.add_node(n.pop("id"), **n)
            for e in doc["edges"]:
                e = dict(e)
                s, t = e.pop("source"), e.pop("target")
                length = next((e[k] for k in ("length_m", "length", "weight") if k in e), 1.0)
                e["length"] = float(length)
                g.add_edge(s, t, **e)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ToolInputError(f"{_stem(graph_path)} is not a graph JSON: {exc}", tool=tool,
                                 argument="graph_path",
                                 expected="{nodes:[{id}], edges:[{source, target, length}]}")
        g.graph.setdefault("frame", "abstract")
        return g, path
    try:
        g = nx.read_graphml(path, force_multigraph=True)
    except Exception as exc:
        raise ToolInputError(f"cannot read {_stem(graph_path)} as GraphML: {exc}", tool=tool,
                             argument="graph_path", expected="a .graphml file from vec.build_graph")
    try:
        g = nx.relabel_nodes(g, {n: int(n) for n in g.nodes})
    except (TypeError, ValueError):
        pass
    for _u, _v, d in g.edges(data=True):
        d["length"] = float(d.get("length", d.get("weight", 1.0)))
        if "from_node" in d:
            d["from_node"] = int(d["from_node"])
    if "frame" not in g.graph:
        g.graph["frame"] = "pixel" if any("pixels_json" in d for *_x, d in g.edges(data=True)) \
            else "abstract"
    return g, path


def _edge_coords(d, frame):
    """Edge coordinates as (x, y) frame pairs (pixel: col, row; geographic: lon, lat)."""
    import json as _json

    if "xy_json" in d and frame != "pixel" or ("xy_json" in d and "pixels_json" not in d):
        return [tuple(map(float, p)) for p in _json.loads(d["xy_json"])]
    if "pixels_json" in d:
        return [(float(c), float(r)) for r, c in _json.loads(d["pixels_json"])]
    return None


@register("vec.graph_shortest_path", server="Analysis", module="vector",
          result_keys=["tool", "distance_px", "distance_m", "path_pixels", "path_geojson",
                       "snapped_start", "snapped_end", "snapped_on_damaged", "snap_failed"],
          types_={"start": "list[int]", "end": "list[int]"},
          notes={"start": "[row, col] pixel ([lat, lon] for a georeferenced graph)",
                 "end": "[row, col] pixel ([lat, lon] for a georeferenced graph)",
                 "snap_buffer_px": "undocumented in description"})
def vec_graph_shortest_path(ctx: ToolContext, graph_path: str, start: list[float],
                            end: list[float], pixel_size_m: float = 1.0,
                            snap_buffer_px: int = 10) -> dict:
    """Shortest route by length over intact road edges only (Dijkstra, networkx).

    ``start``/``end`` snap to the nearest point of an edge within ``snap_buffer_px``, intact
    edges preferred: pixel graphs snap to the nearest edge pixel (distance in pixels);
    georeferenced graphs (``vec.build_graph`` of a layer with a CRS) take [lat, lon] and snap
    onto the edge polylines within ``snap_buffer_px · pixel_size_m`` metres (measured in the
    graph's UTM zone). The snapped edge is split at the snap point. Damaged edges (road_class
    2 flooded or 3 blocked) are removed before routing. Lengths: pixel graphs in pixels,
    ``distance_m = distance_px · pixel_size_m``; georeferenced graphs in geodesic metres,
    ``distance_px = distance_m / pixel_size_m``. ``path_pixels`` is the route as [row, col]
    (pixel graphs; georeferenced ones give ``path_lonlat`` instead and an empty list);
    ``path_geojson`` names a LineString layer of the route. No route (snap failure, a point
    only near damaged roads, disconnected) is not an error: null distances, an empty path, a
    straight start–end line, and the flags set. Errors: start/end not two numbers, pixel size
    ≤ 0, negative snap buffer → ToolInputError.
    """
    import geopandas as gpd
    import networkx as nx
    from shapely.geometry import LineString, Point

    tool = "vec.graph_shortest_path"
    for name, val in (("start", start), ("end", end)):
        if len(val) != 2 or not all(math.isfinite(float(x)) for x in val):
            raise ToolInputError(f"expected two numbers, got {list(val)}", tool=tool,
                                 argument=name, expected="[row, col] (or [lat, lon])")
    if not pixel_size_m > 0:
        raise ToolInputError(f"must be positive, got {pixel_size_m}", tool=tool,
                             argument="pixel_size_m", expected="metres per pixel > 0")
    if snap_buffer_px < 0:
        raise ToolInputError(f"must be >= 0, got {snap_buffer_px}", tool=tool,
                             argument="snap_buffer_px", expected="pixels >= 0")
    g, gpath = _load_graph(ctx, tool, graph_path)
    frame = g.graph.get("frame", "pixel")
    if frame not in ("pixel", "geographic"):
        raise ToolInputError("graph has no edge geometry to snap to", tool=tool,
                             argument="graph_path", expected="a graph from vec.build_graph")
    georef = frame == "geographic"
    # per-edge coordinates in the frame and in a metric frame for snapping
    edges = []
    for u, v, k, d in g.edges(keys=True, data=True):
        coords = _edge_coords(d, frame)
        if coords is None:
            continue
        if "from_node" in d:
            if d["from_node"] != u:
                u, v = v, u
        elif _closer_to(g, v, u, coords[0]):  # graphs without from_node (the benchmark's)
            u, v = v, u
        edges.append((u, v, k, coords, d))
    if georef:
        from pyproj import CRS, Geod, Transformer

        lons = [p[0] for e in edges for p in e[3]]
        lats = [p[1] for e in edges for p in e[3]]
        lon0, lat0 = (min(lons) + max(lons)) / 2, (min(lats) + max(lats)) / 2
        zone = int((lon0 + 180) // 6) + 1
        utm = CRS.from_epsg((32600 if lat0 >= 0 else 32700) + zone)
        to_m = Transformer.from_crs("EPSG:4326", utm, always_xy=True)
        to_ll = Transformer.from_crs(utm, "EPSG:4326", always_xy=True)
        geod = Geod(ellps="WGS84")

        def metric(coords):
            xs, ys = to_m.transform([p[0] for p in coords], [p[1] for p in coords])
            return list(zip(xs, ys))

        def seg_len(coords):
            return float(geod.line_length([p[0] for p in coords], [p[1] for p in coords])) \
                if len(coords) > 1 else 0.0

        def user_point(val):  # [lat, lon]
            return to_m.transform(float(val[1]), float(val[0]))

        snap_tol = float(snap_buffer_px) * float(pixel_size_m)
    else:
        def metric(coords):
            return coords

        def seg_len(coords):
            return float(sum(math.hypot(coords[i + 1][0] - coords[i][0],
                                        coords[i + 1][1] - coords[i][1])
                             for i in range(len(coords) - 1)))

        def user_point(val):  # [row, col]
            return (float(val[1]), float(val[0]))

        snap_tol = float(snap_buffer_px)
    metric_lines = [LineString(metric(e[3])) if len(e[3]) > 1 else None for e in edges]

    def snap(val):
        """(edge index, split coords A, split coords B, snapped frame point) or None, damaged."""
        px, py = user_point(val)
        pt = Point(px, py)
        best = {}
        for idx, ln in enumerate(metric_lines):
            if ln is None:
                continue
            dist = ln.distance(pt)
            if dist > snap_tol + 1e-9:
                continue
            dmg = bool(edges[idx][4].get("damaged", False))
            cand = (dist, idx)
            if dmg not in best or cand < best[dmg]:
                best[dmg] = cand
        if False in best:
            dist, idx = best[False]
            on_dmg = False
        elif True in best:
            dist, idx = best[True]
            on_dmg = True
        else:
            return None, False
        coords = edges[idx][3]
        ln = metric_lines[idx]
        s_along = ln.project(pt)
        mcoords = list(ln.coords)
        acc, t = 0.0, 0.0
        for i in range(len(mcoords) - 1):
            sl = math.hypot(mcoords[i + 1][0] - mcoords[i][0], mcoords[i + 1][1] - mcoords[i][1])
            if acc + sl >= s_along or i == len(mcoords) - 2:
                t = 0.0 if sl == 0 else min(max((s_along - acc) / sl, 0.0), 1.0)
                break
            acc += sl
        if t >= 1.0:
            i, t = i + 1, 0.0
        if t == 0.0:
            sp = coords[i]
        elif georef:
            sx = mcoords[i][0] + t * (mcoords[i + 1][0] - mcoords[i][0])
            sy = mcoords[i][1] + t * (mcoords[i + 1][1] - mcoords[i][1])
            lon, lat = to_ll.transform(sx, sy)
            sp = (float(lon), float(lat))
        else:
            sp = (coords[i][0] + t * (coords[i + 1][0] - coords[i][0]),
                  coords[i][1] + t * (coords[i + 1][1] - coords[i][1]))
        a_part = coords[:i + 1] + ([sp] if t > 0 else [])
        b_part = ([sp] if t > 0 else []) + coords[i + 1 if t > 0 else i:]
        pos = (i, t)
        return (idx, a_part, b_part, sp, pos), on_dmg

    s_snap, s_dmg = snap(start)
    t_snap, t_dmg = snap(end)

    def fmt_point(sp):
        if sp is None:
            return None
        return [float(sp[1]), float(sp[0])] if georef else [int(round(sp[1])), int(round(sp[0]))]

    result = {"tool": tool, "graph_path": graph_path, "frame": frame,
              "pixel_size_m": float(pixel_size_m),
              "snapped_start": fmt_point(s_snap[3]) if s_snap else None,
              "snapped_end": fmt_point(t_snap[3]) if t_snap else None,
              "snapped_on_damaged": bool(s_dmg or t_dmg),
              "snap_failed": s_snap is None or t_snap is None}
    route = None
    if s_snap and t_snap and not (s_dmg or t_dmg):
        h = nx.Graph()
        best_edge = {}
        for idx, (u, v, k, coords, d) in enumerate(edges):
            if d.get("damaged", False):
                continue
            key_ = (min(u, v, key=repr), max(u, v, key=repr)) if u != v else (u, u)
            if key_ not in best_edge or d["length"] < edges[best_edge[key_]][4]["length"]:
                best_edge[key_] = idx
        for (a, b), idx in best_edge.items():
            h.add_edge(a, b, w=edges[idx][4]["length"], parts=[("edge", idx)])
        S, T = ("__start__",), ("__end__",)
        pieces = {}
        for tag, (idx, a_part, b_part, _sp, _pos) in ((S, s_snap), (T, t_snap)):
            u, v = edges[idx][0], edges[idx][1]
            la, lb = seg_len(a_part), seg_len(b_part)
            pieces[(tag, u)] = list(reversed(a_part))  # tag -> u
            pieces[(tag, v)] = b_part                  # tag -> v
            for node, ln_ in ((u, la), (v, lb)):
                if not h.has_edge(tag, node) or ln_ < h[tag][node]["w"]:
                    h.add_edge(tag, node, w=ln_, parts=[("piece", (tag, node))])
        if s_snap[0] == t_snap[0]:
            coords = edges[s_snap[0]][3]
            i1, i2 = s_snap[4][0], t_snap[4][0]
            if s_snap[4] <= t_snap[4]:
                direct = [s_snap[3]] + list(coords[i1 + 1:i2 + 1]) + [t_snap[3]]
            else:
                direct = [t_snap[3]] + list(coords[i2 + 1:i1 + 1]) + [s_snap[3]]
                direct.reverse()
            dd = [direct[0]] + [p for j, p in enumerate(direct[1:], 1) if p != direct[j - 1]]
            pieces[(S, T)] = dd
            dl = seg_len(dd)
            if not h.has_edge(S, T) or dl < h[S][T]["w"]:
                h.add_edge(S, T, w=dl, parts=[("piece", (S, T))])
        try:
            nodes = nx.dijkstra_path(h, S, T, weight="w")
        except nx.NetworkXNoPath:
            nodes = None
        if nodes is not None:
            coords_out = []
            total = 0.0
            for a, b in zip(nodes[:-1], nodes[1:]):
                kind, ref = h[a][b]["parts"][0]
                if kind == "edge":
                    eu, ev, _k, ec, ed = edges[ref]
                    seg = ec if eu == a else list(reversed(ec))
                else:
                    ta_, tb_ = ref
                    if (a, b) == (ta_, tb_):
                        seg = pieces[ref]
                    else:
                        seg = list(reversed(pieces[ref]))
                total += h[a][b]["w"]
                coords_out.extend(seg if not coords_out else seg[1:])
            route = (total, coords_out, [n for n in nodes if not isinstance(n, tuple)])
    if route is not None:
        total, coords_out, node_path = route
        if georef:
            dist_m, dist_px = total, total / float(pixel_size_m)
            path_pixels = []
            result["path_lonlat"] = [[round(x, 7), round(y, 7)] for x, y in coords_out]
        else:
            dist_px, dist_m = total, total * float(pixel_size_m)
            path_pixels = []
            for x, y in coords_out:
                rc = [int(round(y)), int(round(x))]
                if not path_pixels or path_pixels[-1] != rc:
                    path_pixels.append(rc)
        line = LineString(coords_out) if len(coords_out) > 1 else \
            LineString([coords_out[0], coords_out[0]])
        result.update({"distance_px": float(dist_px), "distance_m": float(dist_m),
                       "path_pixels": path_pixels, "path_nodes": node_path})
    else:
        a = (s_snap[3] if s_snap else None) or _frame_point(start, georef)
        b = (t_snap[3] if t_snap else None) or _frame_point(end, georef)
        line = LineString([a, b])
        result.update({"distance_px": None, "distance_m": None, "path_pixels": [],
                       "path_nodes": [],
                       "note": "No intact route: " + (
                           "start/end could not be snapped to a road" if result["snap_failed"]
                           else "start/end lie on damaged roads only" if result["snapped_on_damaged"]
                           else "start and end are not connected by intact roads")})
        if georef:
            result["path_lonlat"] = []
    crs = "EPSG:4326" if georef else None
    layer = gpd.GeoDataFrame({"route_found": [route is not None],
                              "distance_m": [result["distance_m"]],
                              "distance_px": [result["distance_px"]]},
                             geometry=gpd.GeoSeries([line], crs=crs), crs=crs)
    out_path = ctx.output_path(tool, {"graph": gpath, "start": [float(x) for x in start],
                                      "end": [float(x) for x in end],
                                      "px": float(pixel_size_m), "snap": int(snap_buffer_px)},
                               ".geojson")
    write_vector(out_path, layer)
    result["path_geojson"] = ctx.artifact_name(out_path)
    return result


def _node_xy(g, n):
    a = g.nodes[n]
    for kx, ky in (("x", "y"), ("col", "row"), ("lon", "lat")):
        if kx in a and ky in a:
            return float(a[kx]), float(a[ky])
    return None


def _closer_to(g, a, b, point) -> bool:
    """Whether ``point`` (x, y) lies closer to node ``a`` than to node ``b`` (False when the
    nodes carry no position)."""
    pa, pb = _node_xy(g, a), _node_xy(g, b)
    if pa is None or pb is None:
        return False
    return math.dist(pa, point) < math.dist(pb, point)


def _frame_point(val, georef):
    return (float(val[1]), float(val[0]))


# --------------------------------------------------------------------------------------------
def _node_sort_key(n):
    return (0, n, "") if isinstance(n, int) else (1, 0, str(n))


@register("vec.repair_min_edges", server="Analysis", module="vector",
          result_keys=["tool", "repair_edges", "repair_count", "path_length_m",
                       "path_node_count", "source", "target", "auto_selected", "blocked_attr",
                       "graph_nodes", "graph_edges"],
          notes={"graph_path": ".graphml (vec.build_graph) or JSON {nodes:[{id}], edges:[{source,"
                               "target,length_m|length|weight,damaged|blocked}]}"})
def vec_repair_min_edges(ctx: ToolContext, graph_path: str, source: str | int | None = None,
                         target: str | int | None = None, blocked_attr: str = "damaged") -> dict:
    """The source→target path needing the fewest repaired (blocked) edges, ties broken by length.

    Each edge costs ``length + B · blocked`` with B = 1 + the total length of the graph, so any
    path with fewer blocked edges is cheaper than every path with more (lexicographic
    order, exact in floating point unlike a fixed 1e12 penalty). ``blocked`` = the truthiness
    of ``blocked_attr`` on the edge. Parallel edges: the cheapest counts. When source and/or
    target are omitted they are chosen automatically (``auto_selected``): the smallest node id
    of the largest component, and the node farthest from it in hops (smallest id on ties).
    ``path_length_m`` is in the graph's length unit (metres for georeferenced vec.build_graph
    graphs, pixels for pixel ones). Errors: a node id the graph lacks, ``blocked_attr`` on no
    edge, source and target disconnected → ToolInputError.
    """
    import networkx as nx

    tool = "vec.repair_min_edges"
    g, _ = _load_graph(ctx, tool, graph_path)
    if g.number_of_edges() == 0:
        raise ToolInputError("graph has no edges", tool=tool, argument="graph_path")
    attrs = sorted({k for *_x, d in g.edges(data=True) for k in d})
    if not any(blocked_attr in d for *_x, d in g.edges(data=True)):
        raise ToolInputError(f"no edge has the attribute {blocked_attr!r}", tool=tool,
                             argument="blocked_attr", expected=f"one of {attrs}")

    def find(value, name):
        if value is None:
            return None
        for cand in (value, str(value)):
            if cand in g:
                return cand
        try:
            iv = int(str(value))
        except ValueError:
            iv = None
        if iv is not None and iv in g:
            return iv
        sample = sorted(g.nodes, key=_node_sort_key)[:5]
        raise ToolInputError(f"node {value!r} is not in the graph", tool=tool, argument=name,
                             expected=f"a node id such as {sample}")

    s = find(source, "source")
    t = find(target, "target")
    auto = s is None or t is None
    if s is None:
        comps = sorted(nx.connected_components(g),
                       key=lambda c: (-len(c), _node_sort_key(min(c, key=_node_sort_key))))
        s = min(comps[0], key=_node_sort_key)
    if t is None:
        hops = nx.single_source_shortest_path_length(g, s)
        far = max(hops.values())
        t = min((n for n, hh in hops.items() if hh == far), key=_node_sort_key)
    big = 1.0 + sum(float(d["length"]) for *_x, d in g.edges(data=True))

    def cost(u, v, dd):
        return min(float(d["length"]) + (big if _truthy(d.get(blocked_attr)) else 0.0)
                   for d in dd.values())

    try:
        nodes = nx.dijkstra_path(g, s, t, weight=cost)
    except nx.NetworkXNoPath:
        raise ToolInputError(f"source {s!r} and target {t!r} are not connected", tool=tool,
                             argument="target", expected="two nodes of one component") from None
    repairs, length = [], 0.0
    for a, b in zip(nodes[:-1], nodes[1:]):
        d = min(g[a][b].values(), key=lambda dd: (float(dd["length"]) +
                                                  (big if _truthy(dd.get(blocked_attr)) else 0.0)))
        length += float(d["length"])
        if _truthy(d.get(blocked_attr)):
            repairs.append([a, b])
    return {"tool": tool, "repair_edges": repairs, "repair_count": len(repairs),
            "path_length_m": float(length), "path_node_count": len(nodes), "path_nodes": nodes,
            "source": s, "target": t, "auto_selected": bool(auto), "blocked_attr": blocked_attr,
            "graph_nodes": g.number_of_nodes(), "graph_edges": g.number_of_edges()}


# ============================================================================================
# Geometry: vec.convex_hull, vec.voronoi, vec.dissolve, vec.simplify, vec.point_in_polygon
# ============================================================================================
def _area_m2_of(geom, crs, px):
    """(area in m², area in layer units²) of one geometry; m² None when unknown."""
    import geopandas as gpd

    units2 = float(geom.area)
    if crs is None:
        return (units2 * px * px if px else None), units2
    metric, scale = metric_frame(gpd.GeoDataFrame(geometry=gpd.GeoSeries([geom], crs=crs),
                                                  crs=crs))
    return float(metric.geometry.iloc[0].area) * scale ** 2, units2


def _out_vector(ctx, tool, key, out_path):
    from .raster import named_output

    return named_output(ctx, tool, key, ".geojson", out_path, (".geojson", ".json"))


def _n_coords(geoms) -> int:
    import shapely

    return int(sum(int(shapely.get_num_coordinates(g)) for g in geoms if g is not None))


@register("vec.convex_hull", server="Analysis", module="vector",
          result_keys=["tool", "output_path", "area_m2", "vertex_count"],
          notes={"out_path": "auto <temp>/convex_hull.geojson"})
def vec_convex_hull(ctx: ToolContext, vector_path: str, out_path: str | None = None) -> dict:
    """Convex hull of all geometries of a layer (e.g. a damage-cluster footprint), one feature.

    ``area_m2``: georeferenced layers in metres (geographic ones in their UTM zone; the
    benchmark gives 0.0 unless projected); pixel-space layers × ``pixel_size_m``² from the
    features' property, else null (``area_units2`` always gives the raw area).
    ``vertex_count``: distinct hull vertices (the closing point not counted). Empty layer →
    ToolInputError.
    """
    import geopandas as gpd
    import shapely

    tool = "vec.convex_hull"
    gdf, path = read_vector(ctx, vector_path, tool=tool, argument="vector_path")
    geoms = [g for g in gdf.geometry if g is not None and not g.is_empty]
    if not geoms:
        raise ToolInputError(f"{_stem(vector_path)} has no geometries", tool=tool,
                             argument="vector_path", expected="a layer with at least one feature")
    hull = shapely.union_all(geoms).convex_hull
    if hull.geom_type == "Polygon":
        vertices = len(hull.exterior.coords) - 1
    else:
        vertices = int(shapely.get_num_coordinates(hull))
    px = layer_pixel_size(gdf)
    area_m2, area_u = _area_m2_of(hull, gdf.crs, px)
    out = gpd.GeoDataFrame({"feature_count": [len(geoms)], "area_m2": [area_m2],
                            "vertex_count": [vertices]},
                           geometry=gpd.GeoSeries([hull], crs=gdf.crs), crs=gdf.crs)
    dst = _out_vector(ctx, tool, {"vector": path}, out_path)
    write_vector(dst, out)
    return {"tool": tool, "output_path": ctx.artifact_name(dst), "area_m2": area_m2,
            "area_units2": area_u, "vertex_count": vertices, "geometry_type": hull.geom_type}


@register("vec.voronoi", server="Analysis", module="vector",
          result_keys=["tool", "output_path", "cell_count"])
def vec_voronoi(ctx: ToolContext, points_path: str, boundary_path: str | None = None,
                out_path: str | None = None) -> dict:
    """Voronoi service areas around point features (shapely/GEOS), one cell per distinct point,
    in point order, carrying the point's properties and ``point_index`` (0-based).

    Cells are clipped to the union of the boundary polygons (reprojected to the points' CRS)
    when ``boundary_path`` is given, else to the points' bounding box grown by 10 % of its
    larger side on every side (so no cell is unbounded). Non-point features are represented
    by their centroid; repeated locations keep the first feature. ``area_m2`` per cell when the
    layer is georeferenced. Errors: fewer than 2 distinct points, a boundary without polygons or
    in the other frame → ToolInputError.
    """
    import geopandas as gpd
    import pandas as pd
    import shapely
    from shapely.geometry import MultiPoint, box

    tool = "vec.voronoi"
    gdf, path = read_vector(ctx, points_path, tool=tool, argument="points_path")
    pts, rows, seen = [], [], set()
    for i in range(len(gdf)):
        g = gdf.geometry.iloc[i]
        if g is None or g.is_empty:
            continue
        p = g if g.geom_type == "Point" else g.centroid
        k = (round(p.x, 9), round(p.y, 9))
        if k in seen:
            continue
        seen.add(k)
        pts.append(p)
        rows.append(i)
    if len(pts) < 2:
        raise ToolInputError(f"{len(pts)} distinct point(s); a Voronoi diagram needs 2",
                             tool=tool, argument="points_path", expected="at least 2 points")
    if boundary_path:
        bnd, bpath = read_vector(ctx, boundary_path, tool=tool, argument="boundary_path")
        _check_frames(gdf, bnd, tool, "points_path", "boundary_path")
        if bnd.crs is not None and gdf.crs is not None and bnd.crs != gdf.crs:
            bnd = bnd.to_crs(gdf.crs)
        polys = [g for g in bnd.geometry if g is not None and g.geom_type in ("Polygon", "MultiPolygon")]
        if not polys:
            raise ToolInputError("boundary has no polygons", tool=tool, argument="boundary_path",
                                 expected="a polygon layer")
        clip = shapely.union_all(polys)
    else:
        bpath = None
        minx, miny, maxx, maxy = MultiPoint(pts).bounds
        pad = 0.1 * max(maxx - minx, maxy - miny)
        clip = box(minx - pad, miny - pad, maxx + pad, maxy + pad)
    cells = shapely.voronoi_polygons(MultiPoint(pts), extend_to=clip, ordered=True)
    out_geoms = [c.intersection(clip) for c in cells.geoms]
    attrs = gdf.drop(columns=gdf.geometry.name).iloc[rows].reset_index(drop=True)
    attrs["point_index"] = rows
    out = gpd.GeoDataFrame(pd.DataFrame(attrs), geometry=gpd.GeoSeries(out_geoms, crs=gdf.crs),
                           crs=gdf.crs)
    if gdf.crs is not None:
        metric, scale = metric_frame(out)
        out["area_m2"] = [float(a) * scale ** 2 for a in metric.geometry.area]
    dst = _out_vector(ctx, tool, {"points": path, "boundary": bpath}, out_path)
    write_vector(dst, out)
    return {"tool": tool, "output_path": ctx.artifact_name(dst), "cell_count": int(len(out))}


@register("vec.dissolve", server="Analysis", module="vector",
          result_keys=["tool", "output_path", "input_count", "output_count"])
def vec_dissolve(ctx: ToolContext, vector_path: str, by: str | None = None,
                 out_path: str | None = None) -> dict:
    """Union the geometries into one feature, or one per value of attribute ``by``.

    Groups are sorted by their value (as text); a missing value (null) forms its own group,
    last. Each output feature has the group value (under ``by``) and ``feature_count``.
    Errors: unknown attribute (the available ones are listed) → ToolInputError. Empty layer →
    an empty output and counts 0.
    """
    import geopandas as gpd
    import shapely

    tool = "vec.dissolve"
    gdf, path = read_vector(ctx, vector_path, tool=tool, argument="vector_path")
    if by is not None and (by not in gdf.columns or by == gdf.geometry.name):
        avail = [str(c) for c in gdf.columns if c != gdf.geometry.name]
        raise ToolInputError(f"attribute {by!r} not found", tool=tool, argument="by",
                             expected=f"one of {avail}")
    groups: dict = {}
    for i in range(len(gdf)):
        g = gdf.geometry.iloc[i]
        if g is None or g.is_empty:
            continue
        if by is None:
            k = None
        else:
            v = gdf[by].iloc[i]
            k = None if v is None or (isinstance(v, float) and math.isnan(v)) else v
        groups.setdefault(k, []).append(g)
    keys = sorted(groups, key=lambda k: (k is None, str(k)))
    geoms = [shapely.union_all(groups[k]) for k in keys]
    data = {"feature_count": [len(groups[k]) for k in keys]}
    if by is not None:
        data = {by: keys, **data}
    out = gpd.GeoDataFrame(data, geometry=gpd.GeoSeries(geoms, crs=gdf.crs), crs=gdf.crs)
    dst = _out_vector(ctx, tool, {"vector": path, "by": by}, out_path)
    write_vector(dst, out)
    return {"tool": tool, "output_path": ctx.artifact_name(dst),
            "input_count": int(len(gdf)), "output_count": int(len(out))}


@register("vec.simplify", server="Analysis", module="vector",
          result_keys=["tool", "output_path", "input_vertex_count", "output_vertex_count"],
          notes={"tolerance": "CRS units"})
def vec_simplify(ctx: ToolContext, vector_path: str, tolerance: float,
                 preserve_topology: bool = True, out_path: str | None = None) -> dict:
    """Douglas–Peucker vertex reduction (shapely/GEOS; D. Douglas & T. Peucker, Cartographica
    10(2), 1973) with ``tolerance`` in the layer's units (pixels for pixel-space layers,
    degrees for geographic ones). ``preserve_topology`` keeps polygons valid (GEOS
    TopologyPreservingSimplifier). Vertex counts include ring closing points. Errors:
    negative or non-finite tolerance → ToolInputError.
    """
    tool = "vec.simplify"
    if not (math.isfinite(tolerance) and tolerance >= 0):
        raise ToolInputError(f"must be a finite number >= 0, got {tolerance}", tool=tool,
                             argument="tolerance", expected="a distance in the layer's units")
    gdf, path = read_vector(ctx, vector_path, tool=tool, argument="vector_path")
    before = _n_coords(gdf.geometry)
    out = gdf.copy()
    out[out.geometry.name] = [g.simplify(float(tolerance), preserve_topology=bool(preserve_topology))
                              if g is not None else None for g in gdf.geometry]
    after = _n_coords(out.geometry)
    dst = _out_vector(ctx, tool, {"vector": path, "tol": float(tolerance),
                                  "keep": bool(preserve_topology)}, out_path)
    write_vector(dst, out)
    return {"tool": tool, "output_path": ctx.artifact_name(dst), "input_vertex_count": before,
            "output_vertex_count": after}


@register("vec.point_in_polygon", server="Analysis", module="vector",
          result_keys=["tool", "matches", "inside_count"])
def vec_point_in_polygon(ctx: ToolContext, points_path: str, polygons_path: str,
                         polygon_id_field: str | None = None) -> dict:
    """Points that lie in at least one polygon, with the ids of those polygons.

    A point on a polygon's boundary counts as inside (``covers``). The points are reprojected
    to the polygons' CRS; non-point features are represented by their centroid. Polygon ids
    come from ``polygon_id_field`` or are 0-based row indices; ``matches`` lists
    {point_index, polygon_ids} in point order. Errors: unknown id field (available attributes
    listed), a pixel-space layer with a georeferenced one → ToolInputError.
    """
    tool = "vec.point_in_polygon"
    pts, _ = read_vector(ctx, points_path, tool=tool, argument="points_path")
    polys, _ = read_vector(ctx, polygons_path, tool=tool, argument="polygons_path")
    if polygon_id_field is not None and (polygon_id_field not in polys.columns or
                                         polygon_id_field == polys.geometry.name):
        avail = [str(c) for c in polys.columns if c != polys.geometry.name]
        raise ToolInputError(f"attribute {polygon_id_field!r} not found", tool=tool,
                             argument="polygon_id_field", expected=f"one of {avail}")
    if len(pts) == 0 or len(polys) == 0:
        return {"tool": tool, "matches": [], "inside_count": 0, "point_count": int(len(pts)),
                "polygon_count": int(len(polys))}
    _check_frames(pts, polys, tool, "points_path", "polygons_path")
    if pts.crs is not None and polys.crs is not None and pts.crs != polys.crs:
        pts = pts.to_crs(polys.crs)
    ids = (list(polys[polygon_id_field]) if polygon_id_field is not None
           else list(range(len(polys))))
    tree_geoms = list(polys.geometry)
    sidx = polys.sindex
    matches = []
    for i, g in enumerate(pts.geometry):
        if g is None or g.is_empty:
            continue
        p = g if g.geom_type == "Point" else g.centroid
        cand = sorted(int(j) for j in sidx.query(p))
        hit = [ids[j] for j in cand if tree_geoms[j] is not None and tree_geoms[j].covers(p)]
        if hit:
            matches.append({"point_index": i, "polygon_ids": hit})
    return {"tool": tool, "matches": matches, "inside_count": len(matches),
            "point_count": int(len(pts)), "polygon_count": int(len(polys))}
