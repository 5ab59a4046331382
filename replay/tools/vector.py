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
