"""Vector tools (``vec.*``): shapely, pyproj, geopandas.

Frames: a layer with a CRS is georeferenced (measured in metres; a geographic layer in its UTM
zone); a layer without one is in pixel space (x = column, y = row) and is scaled by a pixel size
from the arguments or from a ``pixel_size_m`` property of its features. Mixing a pixel-space
layer with a georeferenced one is not refused: as in the benchmark, the coordinates are used as
they are (a meaningless value; ``annotation.qc.tool_parity`` flags the step). Every tool returns the
observation of the benchmark's own implementation (Junjue-Wang/DORA ``dora/tools/analysis.py``);
deliberate reproductions of its quirks are listed in ``kernel/tools/quirks.py``.
"""
from __future__ import annotations

import csv
import io
import math
import warnings
from pathlib import Path

import numpy as np

from ._io import metric_frame, raster_meta, read_band, read_raster, read_vector, read_vector_path, write_vector
from .base import ToolContext, ToolInputError
from .raster import named_output, resolve_or_missing
from .spec import register


def _stem(value: str) -> str:
    return Path(str(value)).name


def read_vector_as_benchmark(ctx: ToolContext, value, *, tool: str, argument: str,
                             geojson_pixel: bool = True, missing_empty: bool | None = None):
    """(GeoDataFrame, path) with the CRS the benchmark's tool sees.

    The benchmark reads layers with ``gpd.read_file``, which gives a GeoJSON file without a
    ``crs`` member EPSG:4326 (GDAL's default); its helper ``_read_vector_no_default_crs`` then
    drops that CRS again for files ending in ``.geojson`` only. ``geojson_pixel`` True follows the
    helper (``.geojson`` without crs = pixel space, ``.json`` without crs = EPSG:4326), False
    follows plain ``gpd.read_file`` (both EPSG:4326), as in vec.convex_hull, vec.voronoi,
    vec.dissolve, vec.simplify and vec.point_in_polygon.

    A file that does not exist is an empty layer and ``path`` is None when ``missing_empty``
    (default: ``geojson_pixel``): the helper answers ``not os.path.exists`` with an empty
    GeoDataFrame, so those tools give their empty-input result (QC ``manifest.file_missing``);
    plain ``gpd.read_file`` fails instead (ToolInputError).
    """
    import geopandas as gpd

    if missing_empty is None:
        missing_empty = geojson_pixel
    if missing_empty and resolve_or_missing(ctx, value, tool=tool, argument=argument) is None:
        return gpd.GeoDataFrame(geometry=gpd.GeoSeries([])), None
    gdf, path = read_vector(ctx, value, tool=tool, argument=argument)
    suffix = path.suffix.lower()
    if gdf.crs is None and (suffix == ".json" or (suffix == ".geojson" and not geojson_pixel)):
        gdf = gdf.set_crs("EPSG:4326", allow_override=True)
    return gdf, path


def first_property_value(gdf, column: str) -> float | None:
    """First non-null value of a numeric property, as a float (the benchmark's
    ``s.dropna().iloc[0]``: zero and negative values count); None when absent or unreadable."""
    if column not in gdf.columns:
        return None
    for v in gdf[column]:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            continue
        try:
            return float(v)
        except (TypeError, ValueError):
            return None
    return None


def _buffer_units(gdf, meter: float) -> tuple[float, float | None]:
    """(distance in layer units, pixel size) for a buffer of ``meter`` (analysis.py:vec_buffer):
    a pixel-space layer with a (non-zero) ``pixel_size_m`` property is buffered by meter / px
    pixels; every other layer by ``meter`` of its own unit (geographic layers in UTM metres,
    projected ones in their unit, feet included: a quirk)."""
    px = first_property_value(gdf, "pixel_size_m")
    if gdf.crs is None and px:
        return meter / px, px
    return meter, px


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
    out["buffer_input_m"] = meter
    out["buffer_used_units"] = dist
    return out, dist


# --------------------------------------------------------------------------------------------
@register("vec.buffer", server="Analysis", module="vector", version=2,
          result_keys=["tool", "buffer_path", "distance_input_m", "distance_used_units",
                       "input_vector"],
          notes={"meter": "distance in metres"})
def vec_buffer(ctx: ToolContext, vector_path: str, meter: float) -> dict:
    """Buffer every geometry by ``meter`` metres.

    Pixel-space layers with a ``pixel_size_m`` property are buffered by meter / pixel_size_m
    pixels (without it: by ``meter`` pixels, as the benchmark does); geographic layers are
    buffered in metres in their UTM zone and written back in their CRS; projected layers in
    their own unit (``_buffer_units``). Output features gain ``buffer_input_m``,
    ``buffer_used_units`` and ``pixel_size_m``. Empty layer → ``buffer_path`` null plus a note.
    """
    tool = "vec.buffer"
    gdf, path = read_vector_as_benchmark(ctx, vector_path, tool=tool, argument="vector_path")
    if len(gdf) == 0:
        return {"tool": tool, "buffer_path": None, "vector_path": vector_path,
                "note": "Empty input; no features to buffer."}
    out, dist = _buffer_layer(gdf, meter)
    out_path = ctx.output_path(tool, {"vector": path, "meter": float(meter)}, ".geojson")
    write_vector(out_path, out)
    return {"tool": tool, "buffer_path": ctx.artifact_name(out_path),
            "distance_input_m": meter, "distance_used_units": dist,
            "input_vector": vector_path}


@register("vec.kbuffer", server="Analysis", module="vector", version=2,
          result_keys=["tool", "buffers", "input_vector"])
def vec_kbuffer(ctx: ToolContext, vector_path: str, meters: list[float]) -> dict:
    """``vec.buffer`` for several distances, one output file per distance (ring/zone
    analysis). No distances → no buffers. Empty layer → ``buffer_path`` null, the distances
    echoed, and a note (analysis.py:vec_kbuffer)."""
    tool = "vec.kbuffer"
    gdf, path = read_vector_as_benchmark(ctx, vector_path, tool=tool, argument="vector_path")
    if len(gdf) == 0:
        return {"tool": tool, "buffer_path": None, "vector_path": vector_path,
                "meters": list(meters), "note": "Empty input; no features to buffer."}
    buffers = []
    for m in meters:
        out, dist = _buffer_layer(gdf, m)
        out_path = ctx.output_path(tool, {"vector": path, "meter": float(m)}, ".geojson")
        write_vector(out_path, out)
        buffers.append({"distance_input_m": m, "distance_used_units": dist,
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
    """The pixel size the benchmark's vec.intersect takes from an overlay: the first non-null
    value of the first ``pixel_size_m*`` column (overlay suffixes _1/_2) that has one."""
    for col in [c for c in gdf.columns if str(c).startswith("pixel_size_m")]:
        v = first_property_value(gdf, col)
        if v is not None:
            return v
    return None


@register("vec.intersect", server="Analysis", module="vector", version=2,
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
    metres (geographic via UTM), B reprojected to A's CRS. Empty input or no intersection →
    zero counts, ``intersection_area_m2`` 0.0 only when ``pixel_size_m`` is given (else null).
    A pixel-space layer with a georeferenced one is overlaid coordinate for coordinate, as the
    benchmark does (analysis.py:vec_intersect; QC error ``vec_mixed_frames``).
    """
    import geopandas as gpd

    tool = "vec.intersect"
    a, pa = read_vector_as_benchmark(ctx, vector_a_path, tool=tool, argument="vector_a_path")
    b, pb = read_vector_as_benchmark(ctx, vector_b_path, tool=tool, argument="vector_b_path")
    key = {"a": pa, "b": pb, "pixel_size_m": pixel_size_m}
    out_path = ctx.output_path(tool, key, ".geojson")
    px_arg = float(pixel_size_m) if pixel_size_m is not None else None
    if len(a) == 0 or len(b) == 0:
        write_vector(out_path, gpd.GeoDataFrame(geometry=gpd.GeoSeries([], crs=a.crs)))
        return {"tool": tool, "intersection_count": 0, "intersecting_a_count": 0,
                "intersecting_b_count": 0, "intersection_area_px2": 0.0,
                "intersection_area_m2": 0.0 if px_arg is not None else None,
                "pixel_size_m": px_arg, "intersection_path": ctx.artifact_name(out_path),
                "note": "One or both inputs are empty or have no geometry."}
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
    with warnings.catch_warnings():  # a CRS mismatch is only a warning, as in the benchmark
        warnings.simplefilter("ignore")
        inter = gpd.overlay(a, b, how="intersection", keep_geom_type=True)
    inter = inter[~inter.geometry.is_empty].reset_index(drop=True)
    a_hits = int(inter["_a_feature"].nunique()) if len(inter) else 0
    b_hits = int(inter["_b_feature"].nunique()) if len(inter) else 0
    inter = inter.drop(columns=["_a_feature", "_b_feature"], errors="ignore")
    if len(inter) == 0:
        write_vector(out_path, inter)
        return {"tool": tool, "intersection_count": 0, "intersecting_a_count": 0,
                "intersecting_b_count": 0, "intersection_area_px2": 0.0,
                "intersection_area_m2": 0.0 if px_arg is not None else None,
                "pixel_size_m": px_arg, "intersection_path": ctx.artifact_name(out_path)}
    px = px_arg
    if px is None:
        px = _first_pixel_size(inter)
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
@register("vec.filter_by_attribute", server="Analysis", module="vector", version=3,
          result_keys=["tool", "vector_path", "attribute_name", "allowed_values", "total_input",
                       "total_filtered"],
          notes={"attribute_name": "e.g. 'types'; a dotted name falls back to its last segment"})
def vec_filter_by_attribute(ctx: ToolContext, vector_path: str, attribute_name: str,
                            allowed_values: list[str]) -> dict:
    """Keep features whose attribute value holds at least one allowed token
    (analysis.py:vec_filter_by_attribute).

    The values are those ``gpd.read_file`` (pyogrio/GDAL) gives, as the benchmark reads them:
    a Python list is a list of tokens; anything else is ``str(value)`` split at commas — so a
    missing value reads "nan", a geometry (attribute "geometry") its WKT, and a list-valued
    GeoJSON property, which GDAL reads as an array (a whole column of arrays as soon as one
    feature has a list), the array's text "['a' 'b']": it matches no plain token (quirk, QC
    ``vec.list_attribute``). Tokens are trimmed and compared case-insensitively; only None
    never matches. Unknown attribute → ToolInputError listing the available ones. Empty or
    missing layer → zero counts plus a note. Output: a GeoJSON of the kept features; as in the
    benchmark's writer (``_save_gdf``), a layer without CRS is serialised with
    ``GeoDataFrame.to_json``, which fails on array values (→ ToolInputError), a layer with a
    CRS through pyogrio (arrays written as their text).
    """
    tool = "vec.filter_by_attribute"
    path = resolve_or_missing(ctx, vector_path, tool=tool, argument="vector_path")
    gdf = _read_file_as_benchmark(path, tool=tool, argument="vector_path") if path else None
    if gdf is None or len(gdf) == 0:
        return {"tool": tool, "vector_path": vector_path, "total_input": 0, "total_filtered": 0,
                "note": "Empty input; no features to filter."}
    attr = attribute_name
    if attr not in gdf.columns and "." in attr and attr.split(".")[-1] in gdf.columns:
        attr = attr.split(".")[-1]
    if attr not in gdf.columns:
        avail = [str(c) for c in gdf.columns if c != "geometry"]
        raise ToolInputError(f"attribute {attribute_name!r} not found; available attributes: "
                             f"{avail}", tool=tool, argument="attribute_name",
                             expected=f"one of {avail}")
    allowed = {str(v).strip().lower() for v in allowed_values if str(v).strip()}

    def match(value) -> bool:
        if value is None:
            return False
        if isinstance(value, list):
            tokens = [str(v).strip().lower() for v in value]
        else:
            tokens = [t.strip().lower() for t in str(value).split(",")]
        return any(t in allowed for t in tokens if t)

    keep = [match(v) for v in gdf[attr]]
    out = gdf[keep].copy()
    out_path = ctx.output_path(tool, {"vector": path, "attribute": attribute_name,
                                      "allowed": list(allowed_values)}, ".geojson")
    _save_as_benchmark(out, out_path, tool=tool)
    return {"tool": tool, "vector_path": ctx.artifact_name(out_path),
            "attribute_name": attribute_name, "allowed_values": list(allowed_values),
            "total_input": int(len(gdf)), "total_filtered": int(len(out))}


def _read_file_as_benchmark(path: Path, *, tool: str, argument: str):
    """The layer as the benchmark's ``_read_vector_no_default_crs`` holds it: ``gpd.read_file``
    (pyogrio/GDAL value types: arrays for list properties, NaN for missing strings), with the
    CRS dropped for a ``.geojson`` file that has no ``crs`` member."""
    import json

    import geopandas as gpd

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            gdf = gpd.read_file(path)
    except Exception as exc:
        raise ToolInputError(f"cannot read {path.name} as a vector layer: {exc}", tool=tool,
                             argument=argument, expected="GeoJSON, Shapefile or GeoPackage") from exc
    if path.name.lower().endswith(".geojson"):
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError):
            doc = None
        if isinstance(doc, dict) and "crs" not in doc:
            gdf = gdf.set_crs(None, allow_override=True)
    return gdf


def _save_as_benchmark(gdf, out_path: Path, *, tool: str) -> None:
    """Write ``gdf`` as the benchmark's ``_save_gdf`` does: without CRS through
    ``GeoDataFrame.to_json`` (no ``crs`` member; array values are not JSON-serialisable and
    fail, as there), with a CRS through pyogrio's GeoJSON driver."""
    import json

    if gdf.crs is None:
        try:
            doc = json.loads(gdf.to_json())
        except (TypeError, ValueError) as exc:
            raise ToolInputError(f"the kept features cannot be written as GeoJSON: {exc} (a "
                                 f"list-valued property, read by GDAL as an array)", tool=tool,
                                 argument="vector_path") from exc
        doc.pop("crs", None)
        out_path.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gdf.to_file(out_path, driver="GeoJSON", engine="pyogrio")


# --------------------------------------------------------------------------------------------
@register("vec.connected_components", server="Analysis", module="vector", version=2,
          result_keys=["tool", "count", "vector_path", "mode"])
def vec_connected_components(ctx: ToolContext, vector_path: str) -> dict:
    """Number of features of a vector layer; a raster given instead is read as a mask and its
    4-connected non-zero components are counted (``mode`` says which, raster mode echoes
    ``mask_path`` and, as the benchmark, the ``vector_error`` that sent it there). A file that
    does not exist counts 0 features (mode "vector", a note), as there; QC
    ``manifest.file_missing``."""
    from scipy import ndimage

    tool = "vec.connected_components"
    path = resolve_or_missing(ctx, vector_path, tool=tool, argument="vector_path")
    if path is None:  # analysis.py:vec_connected_components: no such file → zero components
        return {"tool": tool, "count": 0, "vector_path": vector_path, "mode": "vector",
                "note": "No input vector available; zero components."}
    if path.suffix.lower() in (".geojson", ".json", ".shp", ".gpkg"):
        gdf = read_vector_path(path, ctx=ctx, tool=tool, argument="vector_path")
        return {"tool": tool, "count": int(len(gdf)), "vector_path": vector_path, "mode": "vector"}
    arr, _ = read_raster(path, tool=tool, argument="vector_path")
    binary = np.any(arr != 0, axis=0)
    _, n = ndimage.label(binary, structure=[[0, 1, 0], [1, 1, 1], [0, 1, 0]])
    return {"tool": tool, "count": int(n), "mask_path": vector_path, "mode": "raster",
            "vector_error": f"{_stem(vector_path)}: not recognized as a vector layer"}


# --------------------------------------------------------------------------------------------
def _areas_m2(gdf, pixel_size_m):
    """Areas (m²) as the benchmark's vec.max_polygon ranks them: an ``area_m2`` property when it
    holds any value, else the geometry area in metres (geographic layers via UTM, pixel space ×
    the ``pixel_size_m`` ARGUMENT², the layer's property unused; raw px² without it)."""
    if "area_m2" in gdf.columns and gdf["area_m2"].notna().any():
        return gdf["area_m2"]
    metric, scale = metric_frame(gdf, pixel_size_m)
    return (metric.geometry.area * (scale ** 2 if scale else 1)).values


@register("vec.max_polygon", server="Analysis", module="vector", version=2,
          result_keys=["tool", "max_area_m2", "max_pixel_count", "topk_polygons",
                       "total_polygons", "vector_path"])
def vec_max_polygon(ctx: ToolContext, vector_path: str, pixel_size_m: float | None = None,
                    topk: int = 1) -> dict:
    """The ``topk`` largest polygons by area (analysis.py:vec_max_polygon; ``_areas_m2``).

    Ranked by pandas ``sort_values`` descending (file order on ties, missing areas last);
    ``topk_polygons`` lists id, class, pixel_count (null when the layer has none) and area_m2
    of each, ``max_pixel_count`` the first one's pixel count (null when unknown). Empty layer →
    max_area_m2 0.0, max_pixel_count 0, an empty list. Errors: ``topk`` 0 (no first polygon) →
    ToolInputError; a negative ``topk`` drops that many from the end (pandas ``head``).
    """
    import pandas as pd

    tool = "vec.max_polygon"
    gdf, _ = read_vector_as_benchmark(ctx, vector_path, tool=tool, argument="vector_path")
    if len(gdf) == 0:
        return {"tool": tool, "max_area_m2": 0.0, "max_pixel_count": 0, "topk_polygons": [],
                "total_polygons": 0, "vector_path": vector_path}
    table = pd.DataFrame(gdf.drop(columns=gdf.geometry.name))
    table["area_m2"] = list(_areas_m2(gdf, pixel_size_m))
    if "pixel_count" not in table.columns:
        table["pixel_count"] = None
    top = table.sort_values(by="area_m2", ascending=False).head(int(topk))
    if len(top) == 0:
        raise ToolInputError(f"topk={topk} selects no polygon", tool=tool, argument="topk",
                             expected="topk >= 1")
    cols = [c for c in ("id", "class", "pixel_count", "area_m2") if c in top.columns]
    polys = [{c: _plain(rec[c]) for c in cols} for rec in top[cols].to_dict(orient="records")]
    pc = top.iloc[0]["pixel_count"]
    max_pixels = int(pc) if pc is not None and pc == pc else None
    return {"tool": tool, "max_area_m2": float(top.iloc[0]["area_m2"]),
            "max_pixel_count": max_pixels, "topk_polygons": polys,
            "total_polygons": int(len(gdf)), "vector_path": vector_path}


def _plain(v):
    """A pandas/numpy scalar as a JSON value (NaN → null)."""
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


# --------------------------------------------------------------------------------------------
@register("vec.centroid", server="Analysis", module="vector", version=2,
          result_keys=["tool", "feature_idx", "geometry_type"],
          notes={"feature_idx": "0-based; -1 = the largest feature"})
def vec_centroid(ctx: ToolContext, vector_path: str, feature_idx: int = 0,
                 raster_path: str | None = None) -> dict:
    """Centroid of one feature: a pixel-space layer gives ``pixel_row`` (y) / ``pixel_col`` (x);
    a georeferenced one gives WGS84 ``latitude``/``longitude`` and, with ``raster_path``, the
    centroid's pixel_row/pixel_col in that raster's grid. ``feature_idx`` −1 picks the largest
    feature (by its ``area_m2`` property when any, else by raw geometry area in layer units). Index out of range → ToolInputError; empty layer → null centroid plus a note."""
    import geopandas as gpd

    tool = "vec.centroid"
    gdf, _ = read_vector_as_benchmark(ctx, vector_path, tool=tool, argument="vector_path")
    if len(gdf) == 0:
        return {"tool": tool, "centroid_x": None, "centroid_y": None, "vector_path": vector_path,
                "note": "Empty input; no features to compute centroid."}
    idx = int(feature_idx)
    if idx == -1:  # analysis.py:vec_centroid: area_m2 property, else raw geometry area
        if "area_m2" in gdf.columns and gdf["area_m2"].notna().any():
            idx = int(np.nanargmax(np.array([float(v) if v is not None else np.nan
                                             for v in gdf["area_m2"]], dtype=float)))
        else:
            idx = int(np.argmax(np.asarray(gdf.geometry.area, dtype=float)))
    if not 0 <= idx < len(gdf):
        raise ToolInputError(f"feature {idx} does not exist; the layer has {len(gdf)} feature(s)",
                             tool=tool, argument="feature_idx",
                             expected=f"0..{len(gdf) - 1} or -1 (largest)")
    geom = gdf.geometry.iloc[idx]
    if geom is None or geom.is_empty:
        err = ToolInputError(f"feature {idx} has an empty geometry", tool=tool,
                             argument="feature_idx")
        err.benchmark_stub = True  # the benchmark's "Empty geometry" stub object: kept in tool.loop
        raise err
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
@register("vec.pixel_to_world", server="Analysis", module="vector", version=2,
          result_keys=["tool", "pixel_row", "pixel_col", "latitude", "longitude", "crs"])
def vec_pixel_to_world(ctx: ToolContext, raster_path: str, pixel_row: int, pixel_col: int) -> dict:
    """WGS84 position of a pixel (row, col) through the raster's affine transform (pixel
    corner, no half-pixel shift). A raster without CRS gives its (identity) transform's x/y as
    longitude/latitude and ``crs`` "unknown", as the benchmark does (analysis.py:
    vec_pixel_to_world; a meaningless value, QC error ``vec_pixel_to_world_no_crs``)."""
    from pyproj import Transformer

    tool = "vec.pixel_to_world"
    rp = ctx.resolve(raster_path, tool=tool, argument="raster_path")
    meta = raster_meta(rp, tool=tool, argument="raster_path")
    t = meta.transform
    x = t.c + t.a * pixel_col + t.b * pixel_row
    y = t.f + t.d * pixel_col + t.e * pixel_row
    if not meta.georeferenced:
        return {"tool": tool, "pixel_row": pixel_row, "pixel_col": pixel_col,
                "latitude": float(y), "longitude": float(x), "crs": "unknown"}
    if meta.crs.to_epsg() != 4326:
        lon, lat = Transformer.from_crs(meta.crs, "EPSG:4326", always_xy=True).transform(x, y)
    else:
        lon, lat = x, y
    return {"tool": tool, "pixel_row": pixel_row, "pixel_col": pixel_col,
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
    gdf, path = read_vector_as_benchmark(ctx, vector_path, tool=tool, argument="vector_path")
    if len(gdf) == 0:
        return gdf, path, None
    metric, scale = metric_frame(gdf, pixel_size_m)
    if scale is None:  # the benchmark reads only the argument, never a pixel_size_m property
        raise ToolInputError("is needed for a pixel-space layer (no CRS); a pixel_size_m "
                             "property is not read", tool=tool, argument="pixel_size_m",
                             expected="metres per pixel")
    vals = [float(v) * scale for v in metric.geometry.length]
    return gdf, path, vals


@register("vec.length", server="Analysis", module="vector", version=2,
          result_keys=["tool", "total_length_m", "table_path", "input_vector"],
          notes={"pixel_size_m": "metres per pixel for pixel-space vectors"})
def vec_length(ctx: ToolContext, vector_path: str, pixel_size_m: float | None = None) -> dict:
    """Total length in metres of the features (``length`` of shapely: a polygon's boundary);
    pixel-space × the ``pixel_size_m`` argument (without it → ToolInputError, even when the
    features carry a ``pixel_size_m`` property: analysis.py:vec_length), projected in CRS
    units, geographic via UTM. The CSV table lists id and length_m per feature."""
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


@register("vec.perimeter", server="Analysis", module="vector", version=2,
          result_keys=["tool", "total_perimeter_m", "table_path", "input_vector"],
          notes={"pixel_size_m": "metres per pixel for pixel-space vectors"})
def vec_perimeter(ctx: ToolContext, vector_path: str, pixel_size_m: float | None = None) -> dict:
    """Sum of the features' lengths in metres (a polygon's boundary, holes included; a line's
    own length), same unit rules as ``vec.length`` (analysis.py:vec_perimeter)."""
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
@register("vec.filter_by_area", server="Analysis", module="vector", version=2,
          result_keys=["tool", "vector_path", "min_area_m2"])
def vec_filter_by_area(ctx: ToolContext, vector_path: str, min_area_m2: float,
                       pixel_size_m: float) -> dict:
    """Keep polygons of at least ``min_area_m2`` (pixel-space: area · px², a feature's own
    ``pixel_size_m`` property winning over the argument; georeferenced: metric area) and write
    ``area_m2`` onto the kept features."""
    tool = "vec.filter_by_area"
    gdf, path = read_vector_as_benchmark(ctx, vector_path, tool=tool, argument="vector_path")
    if len(gdf) == 0:
        return {"tool": tool, "vector_path": vector_path, "original_count": 0,
                "filtered_count": 0, "removed_count": 0, "min_area_m2": float(min_area_m2)}
    if pixel_size_m is None:
        raise ToolInputError("is required", tool=tool, argument="pixel_size_m",
                             expected="metres per pixel")
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


@register("vec.filter_by_distance", server="Analysis", module="vector", version=2,
          result_keys=["tool", "vector_path", "center_lat", "center_lon", "max_distance_m",
                       "total_input", "total_filtered", "nearest_distance_m",
                       "farthest_distance_m"])
def vec_filter_by_distance(ctx: ToolContext, vector_path: str, center_lat: float,
                           center_lon: float, max_distance_m: float) -> dict:
    """Keep features within a great-circle distance (haversine, R = 6,371 km) of a WGS84
    point, measured to the point geometry or the centroid; adds ``distance_m``. As in the
    benchmark (analysis.py:vec_filter_by_distance) the layer's coordinates are read as lon/lat
    whatever its CRS: a projected or pixel-space layer gives meaningless distances (QC error
    ``vec_distance_not_lonlat``). Empty layer → zero counts plus a note."""
    tool = "vec.filter_by_distance"
    gdf, path = read_vector_as_benchmark(ctx, vector_path, tool=tool, argument="vector_path")
    if len(gdf) == 0:
        return {"tool": tool, "vector_path": vector_path, "total_input": 0, "total_filtered": 0,
                "note": "Empty input; no features to filter by distance."}
    dists = []
    for g in gdf.geometry:
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
@register("vec.nearest", server="Analysis", module="vector", version=2,
          result_keys=["tool", "mode", "topk", "pair_count", "pixel_size_m", "distance_px",
                       "distance_m", "nearest_a_id", "nearest_b_id", "table_path",
                       "links_geojson", "vector_a_path", "vector_b_path"])
def vec_nearest(ctx: ToolContext, vector_a_path: str, vector_b_path: str,
                pixel_size_m: float | None = None, topk: int = 1) -> dict:
    """For each A feature its k nearest B features by straight-line distance (pixel-space ×
    pixel size; georeferenced in metres, geographic via UTM). ids from an ``id`` property or
    1-based order; the top-level distance/ids are of the closest pair overall (first on ties).
    Empty A or B → pair_count 0 and null paths, with a note; ``topk`` slices the sorted list
    (0: no pairs). Pixel size: the argument, else the first ``pixel_size_m`` property of A,
    then of B. A pixel-space layer with a georeferenced one is measured coordinate for
    coordinate (analysis.py:vec_polygon_nearest; QC error ``vec_mixed_frames``)."""
    import geopandas as gpd
    from shapely.geometry import LineString
    from shapely.ops import nearest_points

    tool = "vec.nearest"
    a, pa = read_vector_as_benchmark(ctx, vector_a_path, tool=tool, argument="vector_a_path")
    b, pb = read_vector_as_benchmark(ctx, vector_b_path, tool=tool, argument="vector_b_path")
    paths = {"vector_a_path": vector_a_path, "vector_b_path": vector_b_path}
    if len(a) == 0 or len(b) == 0:
        return {"tool": tool, "pair_count": 0, "table_path": None, "links_geojson": None,
                "pixel_size_m": pixel_size_m, **paths,
                "note": "Empty input A or B; no nearest pairs."}
    if a.crs is not None and b.crs is not None and a.crs != b.crs:
        b = b.to_crs(a.crs)
    px = float(pixel_size_m) if pixel_size_m is not None else None
    if px is None:
        px = first_property_value(a, "pixel_size_m")
        if px is None:
            px = first_property_value(b, "pixel_size_m")
    try:
        a_ids = [int(v) for v in a["id"]] if "id" in a.columns else list(range(1, len(a) + 1))
        b_ids = [int(v) for v in b["id"]] if "id" in b.columns else list(range(1, len(b) + 1))
    except (TypeError, ValueError) as exc:
        raise ToolInputError(f"an id property is not an integer: {exc}", tool=tool,
                             argument="vector_a_path", expected="integer id properties") from exc
    a_m, unit = metric_frame(a, px)
    b_m = b.to_crs(a_m.crs) if a_m.crs is not None and b.crs is not None else b
    rows, links = [], []
    for ia, ga in enumerate(a_m.geometry):
        if ga is None or ga.is_empty:
            continue
        ds = sorted(((float(ga.distance(gb)), ib) for ib, gb in enumerate(b_m.geometry)
                     if gb is not None and not gb.is_empty), key=lambda t: (t[0], t[1]))
        for rank, (d, ib) in enumerate(ds[:topk], start=1):
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
        return {"tool": tool, "pair_count": 0, "table_path": None, "links_geojson": None,
                "pixel_size_m": px, **paths, "note": "No valid nearest pairs found."}
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
    return {"distance_px": best["distance_px"], "distance_m": best["distance_m"],
            "nearest_a_id": best["a_id"], "nearest_b_id": best["b_id"], "tool": tool,
            "mode": "euclidean", "topk": topk, "pair_count": len(rows), "pixel_size_m": px,
            "table_path": ctx.artifact_name(table), "links_geojson": ctx.artifact_name(link_path),
            **paths}


# --------------------------------------------------------------------------------------------
@register("vec.clip", server="Analysis", module="vector", version=2,
          result_keys=["tool", "clip_path", "input_count", "output_count", "input_vector",
                       "roi_vector"])
def vec_clip(ctx: ToolContext, vector_path: str, roi_vector_path: str) -> dict:
    """Cut a layer to the union of the ROI polygons (geometries are trimmed, not just
    selected); the ROI is reprojected to the layer's CRS when both have one. Empty layer or ROI
    → null path plus a note. A pixel-space layer with a georeferenced ROI is cut coordinate for
    coordinate, as the benchmark does (analysis.py:vec_clip; QC error ``vec_mixed_frames``)."""
    import geopandas as gpd
    import shapely

    tool = "vec.clip"
    gdf, path = read_vector_as_benchmark(ctx, vector_path, tool=tool, argument="vector_path")
    roi, rpath = read_vector_as_benchmark(ctx, roi_vector_path, tool=tool, argument="roi_vector_path")
    base = {"tool": tool, "input_vector": vector_path, "roi_vector": roi_vector_path}
    if len(gdf) == 0:
        return {**base, "clip_path": None, "input_count": 0, "output_count": 0,
                "note": "Empty input; 0 features to clip."}
    if len(roi) == 0:
        return {**base, "clip_path": None, "input_count": int(len(gdf)), "output_count": 0,
                "note": "Empty ROI; no clip region."}
    if gdf.crs is not None and roi.crs is not None and gdf.crs != roi.crs:
        roi = roi.to_crs(gdf.crs)
    roi_geom = shapely.union_all([g for g in roi.geometry if g is not None])
    if roi_geom is None or roi_geom.is_empty:
        return {**base, "clip_path": None, "input_count": int(len(gdf)), "output_count": 0,
                "note": "ROI geometry empty after union."}
    clipped = gpd.clip(gdf, roi_geom)
    clipped = clipped[~clipped.geometry.is_empty].copy()
    if "pixel_size_m" in gdf.columns and "pixel_size_m" not in clipped.columns:
        clipped["pixel_size_m"] = gdf["pixel_size_m"].iloc[0]
    out_path = ctx.output_path(tool, {"vector": path, "roi": rpath}, ".geojson")
    write_vector(out_path, clipped)
    return {**base, "clip_path": ctx.artifact_name(out_path), "input_count": int(len(gdf)),
            "output_count": int(len(clipped))}


# --------------------------------------------------------------------------------------------
_STATS = ("mean", "min", "max", "std")


@register("vec.raster_stats", server="Analysis", module="vector", version=2,
          result_keys=["tool", "vector_path", "raster_path", "output_vector_path", "band",
                       "stats", "feature_count", "min_pixels", "pixel_area_m2"])
def vec_raster_stats(ctx: ToolContext, vector_path: str, raster_path: str,
                     stats: list[str] | None = None, band: int = 1, return_features: bool = True,
                     min_pixels: int = 1, all_touched: bool = False) -> dict:
    """Zonal statistics: raster values under each geometry (a point samples its pixel; lines
    and polygons their rasterised coverage, ``all_touched`` as in rasterio), NaN/nodata
    ignored. Features with fewer than ``min_pixels`` valid pixels are dropped. Per-feature stats
    (with osm_id/name/type/ref copied when present) and pooled stats over the union of kept
    features, computed in the raster's own dtype as numpy does (float32 rasters in float32).
    The layer is reprojected to the raster's CRS when both have one; otherwise its coordinates
    are read through the raster's transform as they are (a pixel-space layer on a
    georeferenced raster, or the reverse, gives meaningless values, as in the benchmark:
    analysis.py:vec_raster_stats; QC error ``vec_mixed_frames``). ``pixel_area_m2`` is
    |a·e| of the transform whatever the unit (1.0 for a PNG, degrees² for a geographic raster).
    Unknown stat or band → ToolInputError; empty layer → no statistics and a note."""
    from rasterio import features as rfeatures
    from rasterio.transform import rowcol

    tool = "vec.raster_stats"
    stats = list(stats or ["mean", "min", "max"])
    bad = [s for s in stats if s not in _STATS]
    if bad:
        raise ToolInputError(f"unsupported statistics {bad}", tool=tool, argument="stats",
                             expected=f"any of {list(_STATS)}")
    gdf, vpath = read_vector_as_benchmark(ctx, vector_path, tool=tool, argument="vector_path")
    base = {"tool": tool, "vector_path": vector_path, "raster_path": raster_path}
    if len(gdf) == 0:
        return {"tool": tool, "feature_stats": [], "count": 0, **base,
                "note": "Empty input; no features for raster stats."}
    rp = ctx.resolve(raster_path, tool=tool, argument="raster_path")
    arr, meta = read_band(rp, int(band), tool=tool, argument="raster_path")
    if gdf.crs is not None and meta.georeferenced and gdf.crs != meta.crs:
        gdf = gdf.to_crs(meta.crs)
    transform = meta.transform
    valid = np.isfinite(arr)
    if meta.nodata is not None:
        valid &= arr != meta.nodata
    pixel_area = abs(float(transform.a) * float(transform.e))
    union = np.zeros(arr.shape, dtype=bool)
    kept_idx, items = [], []
    for i in range(len(gdf)):
        geom = gdf.geometry.iloc[i]
        if geom is None or geom.is_empty:
            continue
        sample = np.zeros(arr.shape, dtype=bool)
        prow = pcol = None
        if geom.geom_type == "Point":
            prow, pcol = (int(v) for v in rowcol(transform, geom.x, geom.y))
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
        vals = arr[sample]
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
    pooled = arr[union]
    for s in stats:
        out[s] = float(getattr(pooled, s)()) if pooled.size else None
    return out


# ============================================================================================
# Road graphs: vec.road_centerline_extraction, vec.build_graph, vec.graph_shortest_path,
# vec.repair_min_edges — the benchmark's pixel graph, reproduced edge for edge
# ============================================================================================
#: the benchmark's diagonal step (dora/tools/analysis.py:_step_len): √2 cut to 11 decimals
DIAGONAL_STEP = 1.41421356237
#: the 8 neighbour offsets (drow, dcol) in the benchmark's scan order (row-major, centre skipped)
_OFFS8 = tuple((dy, dx) for dy in (-1, 0, 1) for dx in (-1, 0, 1) if (dy, dx) != (0, 0))
#: RGB road masks, as the benchmark reads them (analysis.py:color2labelidx): a colour's key
#: 3·R + 4·G + 5·B is looked up among the keys of black 0, white 1, (248, 179, 101) 2, red 3
_RGB_KEY_WEIGHTS = (3, 4, 5)
_RGB_ROAD = (((0, 0, 0), 0), ((255, 255, 255), 1), ((248, 179, 101), 2), ((255, 0, 0), 3))
_MIN_OBJECT_PX = 32          # remove_small_objects(min_size=32): ≤ 32 px go (skimage 0.26)
_TURN_MIN_DEG = 5.0          # a direction change of at least 5° ...
_MIN_SEGMENT_PX = 4          # ... after at least 4 steps splits an edge
_DAMAGED_RATIO = 0.5         # an edge is damaged when ≥ 50 % ...
_MIN_DAMAGED_PX = 1          # ... and ≥ 1 of its pixels are damaged
_JUNCTION_DEG = 3            # junction nodes: degree ≥ 3
_JUNCTION_TRIM_PX = 3        # pixels next to a junction ignored when re-judging damage
_CONNECTOR_MAX_PX = 12.0     # junction–junction edges up to 12 px are connectors
SNAP_BUFFER_PX = 10


def step_length(a, b) -> float:
    """Length of one skeleton step between (row, col) pixels a and b, as the benchmark counts it:
    ``DIAGONAL_STEP`` when both row and column change by exactly 1, else 1.0 (also for
    non-adjacent or repeated coordinates: a quirk, see ``quirks.py``)."""
    return DIAGONAL_STEP if abs(a[0] - b[0]) == 1 and abs(a[1] - b[1]) == 1 else 1.0


def pixel_path_length(pixels) -> float:
    """Sum of ``step_length`` over consecutive (row, col) pixels (0.0 for fewer than 2)."""
    return float(sum(step_length(pixels[i - 1], pixels[i]) for i in range(1, len(pixels))))


def _road_label_mask(ctx, tool, mask_path):
    """(resolved path, 2-D class array): band 1 of a mask with fewer than 3 bands, else bands
    1–3 read as colours and mapped by their 3R+4G+5B key (so a grey mask stored as RGB, or any
    colour sharing a key, maps as the benchmark maps it)."""
    path = ctx.resolve(mask_path, tool=tool, argument="mask_path")
    arr, _meta = read_raster(path, tool=tool, argument="mask_path")
    if arr.shape[0] < 3:
        return path, arr[0]
    w = np.array(_RGB_KEY_WEIGHTS, dtype=np.int64).reshape(3, 1, 1)
    key = (arr[:3].astype(np.int64) * w).sum(axis=0)
    out = np.zeros(key.shape, dtype=np.int64)
    for colour, label in _RGB_ROAD:
        out = np.where(key == int(np.dot(colour, _RGB_KEY_WEIGHTS)), label, out)
    return path, out


def _road_skeleton(road: np.ndarray) -> np.ndarray:
    """scikit-image's pipeline of the benchmark (analysis.py:_to_skeleton): objects of at most
    32 px (4-connected; scikit-image 0.26 reads the benchmark's ``min_size=32`` as
    ``max_size``) removed, a 3×3 binary closing, then ``skeletonize``. A road one pixel wide
    on a diagonal is a chain of 1-px 4-connected objects and vanishes."""
    import warnings as _w

    from skimage.morphology import binary_closing, remove_small_objects, skeletonize

    with _w.catch_warnings():
        _w.simplefilter("ignore")
        r = remove_small_objects(road.astype(bool), min_size=_MIN_OBJECT_PX)
        r = binary_closing(r, np.ones((3, 3), dtype=np.uint8))
        return skeletonize(r).astype(bool)


def _skeleton_neighbours(p, skel):
    y, x = p
    h, w = skel.shape
    return [(y + dy, x + dx) for dy, dx in _OFFS8
            if 0 <= y + dy < h and 0 <= x + dx < w and skel[y + dy, x + dx]]


def build_pixel_road_graph(road: np.ndarray, damaged: np.ndarray):
    """The benchmark's road graph of a road mask (analysis.py:_build_road_graph and
    _postprocess_intersection_damage), as an ``nx.Graph``.

    Nodes: skeleton pixels whose 8-neighbour count is not 2, numbered row-major, attribute
    ``xy`` = (row, col). From each node every neighbour direction not yet walked is followed
    pixel by pixel (first neighbour in scan order) until a node pixel; on the way a new node is
    cut wherever the direction turns by ≥ 5° after ≥ 4 steps (turn nodes are numbered on from
    the last pixel node, in the order they are found). A walk that meets an already-walked step
    stops there with an edge to the node at that pixel (or none). Walks are not marked in the
    reverse direction, so the way back is walked again and cut at its own turns: parallel edges
    between different turn nodes and 1-pixel edges at junctions are part of the benchmark's
    graph. Edge attributes: ``pixels`` [(row, col)...], ``length`` (``pixel_path_length``),
    ``damaged`` (≥ 50 % and ≥ 1 damaged pixel; then re-judged without the 3 px next to each
    junction end, and connectors ≤ 12 px between junctions cleared when ≥ 2 intact arms leave
    their junction cluster). Graph attributes img_h, img_w.
    """
    import networkx as nx

    skel = _road_skeleton(road)
    h, w = skel.shape
    pad = np.pad(skel.astype(np.uint8), 1)
    deg = np.zeros((h, w), dtype=np.uint8)
    for dy, dx in _OFFS8:
        deg += pad[1 + dy:1 + dy + h, 1 + dx:1 + dx + w]
    node_mask = skel & (deg != 2)
    node_coords = [(int(r), int(c)) for r, c in np.argwhere(node_mask)]
    node_id = {p: i for i, p in enumerate(node_coords)}
    next_id = len(node_coords)
    dmg = damaged.astype(bool)
    g = nx.Graph()
    for i, p in enumerate(node_coords):
        g.add_node(i, xy=p)
    seen = set()

    def add_edge(u, v, pixels):
        if u == v or (min(u, v), max(u, v)) in seen:
            return
        seen.add((min(u, v), max(u, v)))
        rr, cc = np.array(pixels).T
        n_dmg = int(np.count_nonzero(dmg[rr, cc]))
        is_dmg = (n_dmg / max(len(pixels), 1) >= _DAMAGED_RATIO) and n_dmg >= _MIN_DAMAGED_PX
        g.add_edge(u, v, pixels=pixels, length=pixel_path_length(pixels), damaged=bool(is_dmg))

    walked = set()
    g.graph["img_h"] = int(h)
    g.graph["img_w"] = int(w)
    for start in node_coords:
        for first in _skeleton_neighbours(start, skel):
            if (start, first) in walked:
                continue
            path = [start]
            last = node_id[start]
            prev, cur = start, first
            walked.add((prev, cur))
            heading = (cur[0] - prev[0], cur[1] - prev[1])
            steps = 0
            while True:
                path.append(cur)
                steps += 1
                if node_mask[cur] and cur != start:
                    add_edge(last, node_id[cur], path[:])
                    break
                ahead = [p for p in _skeleton_neighbours(cur, skel) if p != prev]
                if not ahead:
                    break
                nxt = ahead[0]
                if (cur, nxt) in walked:
                    add_edge(last, node_id.get(cur, last), path[:])
                    break
                walked.add((cur, nxt))
                now = (nxt[0] - cur[0], nxt[1] - cur[1])
                dot = heading[0] * now[0] + heading[1] * now[1]
                norm = np.hypot(*heading) * np.hypot(*now) + 1e-6
                angle = np.degrees(np.arccos(np.clip(dot / norm, -1.0, 1.0)))
                if angle >= _TURN_MIN_DEG and steps >= _MIN_SEGMENT_PX:
                    nid = next_id
                    next_id += 1
                    node_id[cur] = nid
                    g.add_node(nid, xy=cur)
                    add_edge(last, nid, path[:])
                    last = nid
                    path = [cur]
                    steps = 0
                prev, cur = cur, nxt
                heading = (cur[0] - prev[0], cur[1] - prev[1])
    _rejudge_junction_damage(g, dmg)
    return g


def _rejudge_junction_damage(g, dmg) -> None:
    """Second damage pass of the benchmark (analysis.py:_postprocess_intersection_damage)."""
    import networkx as nx

    if g.number_of_edges() == 0:
        return
    deg = dict(g.degree())
    for u, v, d in g.edges(data=True):
        pixels = d.get("pixels", [])
        if not pixels:
            continue
        lt = _JUNCTION_TRIM_PX if deg.get(u, 0) >= _JUNCTION_DEG else 0
        rt = _JUNCTION_TRIM_PX if deg.get(v, 0) >= _JUNCTION_DEG else 0
        core = [] if lt + rt >= len(pixels) else pixels[lt:len(pixels) - rt]
        if not core:
            continue
        rr, cc = np.array(core, dtype=np.int32).T
        n_dmg = int(np.count_nonzero(dmg[rr, cc]))
        d["damaged"] = bool((n_dmg / max(len(core), 1) >= _DAMAGED_RATIO)
                            and n_dmg >= _MIN_DAMAGED_PX)
    junctions = [n for n, k in deg.items() if k >= _JUNCTION_DEG]
    if not junctions:
        return
    connectors = [(u, v) for u, v, d in g.edges(data=True)
                  if deg.get(u, 0) >= _JUNCTION_DEG and deg.get(v, 0) >= _JUNCTION_DEG
                  and float(d.get("length", 0.0)) <= _CONNECTOR_MAX_PX]
    if not connectors:
        return
    c = nx.Graph()
    c.add_nodes_from(junctions)
    c.add_edges_from(connectors)
    for comp in nx.connected_components(c):
        arms, intact = set(), 0
        for u in comp:
            for v in g.neighbors(u):
                if v in comp or (min(u, v), max(u, v)) in arms:
                    continue
                arms.add((min(u, v), max(u, v)))
                if not g[u][v].get("damaged", False):
                    intact += 1
        if intact >= 2:
            for u, v in g.subgraph(comp).edges():
                if float(g[u][v].get("length", 0.0)) <= _CONNECTOR_MAX_PX:
                    g[u][v]["damaged"] = False


def _pixel_to_layer_xy(p, img_h):
    """(x, y) of a (row, col) pixel in the benchmark's centreline layers: x = col and y flipped
    (img_h − 1 − row) when the image height is known, else y = row."""
    r, c = p
    return (c, img_h - 1 - r) if img_h is not None else (c, r)


@register("vec.road_centerline_extraction", server="Analysis", module="vector", version=2,
          result_keys=["tool", "centerline_path", "input_mask", "edge_count"],
          notes={"mask_path": "road class map (seg.road_damage) or RGB road mask",
                 "intact_classes": "None -> [1]", "damaged_classes": "None -> [2,3]"})
def vec_road_centerline_extraction(ctx: ToolContext, mask_path: str,
                                   intact_classes: list[int] | None = None,
                                   damaged_classes: list[int] | None = None) -> dict:
    """Road centre lines of a road mask as pixel-space GeoJSON LineStrings, one per edge of the
    benchmark's road graph (``build_pixel_road_graph``; analysis.py:road_centerline_extraction).

    Road pixels: values in intact ∪ damaged classes (defaults [1] and [2, 3]); a mask with 3 or
    more bands is read as RGB colours (``_road_label_mask``). Classes absent from the mask just
    select nothing, no error (QC: ``classes.stale_index``). Lines run along the edge pixels with
    x = col, y = img_h − 1 − row (the benchmark's y-up layout, read back by
    ``vec.build_graph``); properties u, v, length_px,
    length (pixels, diagonal step 1.41421356237), damaged, img_h, img_w, in the graph's edge
    order. An empty road gives ``edge_count`` 0 and an empty layer.
    """
    import geopandas as gpd
    import pandas as pd
    from shapely.geometry import LineString

    tool = "vec.road_centerline_extraction"
    intact = [int(c) for c in (intact_classes if intact_classes is not None else [1])]
    damaged = [int(c) for c in (damaged_classes if damaged_classes is not None else [2, 3])]
    path, mask = _road_label_mask(ctx, tool, mask_path)
    g = build_pixel_road_graph(np.isin(mask, intact + damaged), np.isin(mask, damaged))
    img_h, img_w = g.graph["img_h"], g.graph["img_w"]
    rows, geoms = [], []
    for u, v, d in g.edges(data=True):
        if not d["pixels"]:
            continue
        geoms.append(LineString([_pixel_to_layer_xy(p, img_h) for p in d["pixels"]]))
        rows.append({"u": int(u), "v": int(v), "length_px": float(d["length"]),
                     "length": float(d["length"]), "damaged": bool(d["damaged"]),
                     "img_h": img_h, "img_w": img_w})
    cols = ["u", "v", "length_px", "length", "damaged", "img_h", "img_w"]
    gdf = gpd.GeoDataFrame(pd.DataFrame(rows, columns=cols), geometry=gpd.GeoSeries(geoms))
    out_path = ctx.output_path(tool, {"mask": path, "intact": intact, "damaged": damaged,
                                      "v": 2}, ".geojson")
    write_vector(out_path, gdf)
    return {"tool": tool, "centerline_path": ctx.artifact_name(out_path),
            "input_mask": mask_path, "edge_count": len(rows)}


# --------------------------------------------------------------------------------------------
def _benchmark_bool(value) -> bool:
    """A ``damaged`` value as the benchmark reads it: a string is true only when it is "true"
    (any case); anything else by Python truth (so NaN, a missing value in pandas, is true)."""
    if isinstance(value, str):
        return value.lower() == "true"
    return bool(value)


def save_road_graphml(g, path) -> None:
    """Write a pixel road graph in the benchmark's GraphML layout (analysis.py:
    _save_graph_graphml): node ids as text with ``xy_json`` "[row, col]", edges with
    ``pixels_json`` "[[row, col], ...]", ``length`` and ``damaged``; graph attributes kept."""
    import json as _json

    import networkx as nx

    h = nx.Graph()
    h.graph.update(g.graph)
    for n, d in g.nodes(data=True):
        attrs = {k: v for k, v in d.items() if k != "xy"}
        if d.get("xy") is not None:
            attrs["xy_json"] = _json.dumps([int(x) for x in d["xy"]])
        h.add_node(str(n), **attrs)
    for u, v, d in g.edges(data=True):
        attrs = {k: val for k, val in d.items() if k != "pixels"}
        if d.get("pixels") is not None:
            attrs["pixels_json"] = _json.dumps([[int(x) for x in p] for p in d["pixels"]])
        h.add_edge(str(u), str(v), **attrs)
    nx.write_graphml(h, str(path))


def load_road_graphml(path):
    """Inverse of ``save_road_graphml`` (analysis.py:_load_graph_graphml): integer node ids with
    ``xy`` (row, col) or None, edges with ``pixels``, ``length`` (attribute, else pixel count
    − 1) and ``damaged`` (``_benchmark_bool``)."""
    import json as _json

    import networkx as nx

    h = nx.read_graphml(str(path))
    g = nx.Graph()
    g.graph.update(h.graph)
    for n, d in h.nodes(data=True):
        xy = d.get("xy_json")
        g.add_node(int(n), xy=tuple(_json.loads(xy)) if xy is not None else None)
    for u, v, d in h.edges(data=True):
        pj = d.get("pixels_json")
        pixels = [tuple(p) for p in _json.loads(pj)] if pj is not None else []
        try:
            length = float(d["length"]) if d.get("length") is not None else float(len(pixels) - 1)
        except (TypeError, ValueError):
            length = float(len(pixels) - 1)
        g.add_edge(int(u), int(v), pixels=pixels, length=length,
                   damaged=_benchmark_bool(d.get("damaged", False)))
    return g


def _read_graphml_for(ctx, tool, graph_path):
    path = ctx.resolve(graph_path, tool=tool, argument="graph_path")
    try:
        return load_road_graphml(path), path
    except Exception as exc:
        raise ToolInputError(f"cannot read {_stem(graph_path)} as a road graph: {exc}", tool=tool,
                             argument="graph_path", expected="a .graphml file from vec.build_graph") from exc


@register("vec.build_graph", server="Analysis", module="vector", version=2,
          result_keys=["tool", "graph_path", "node_count", "edge_count", "input_centerline"],
          notes={"centerline_path": "output of vec.road_centerline_extraction (pixel space)"})
def vec_build_graph(ctx: ToolContext, centerline_path: str) -> dict:
    """Road graph (GraphML, ``save_road_graphml``) from centre-line LineStrings, as the benchmark
    builds it (analysis.py:build_road_graph).

    Each line's coordinates become (row, col) pixels: row = round(img_h − 1 − y) when the layer
    has an ``img_h`` property (its first value), else round(y); col = round(x) (Python rounding,
    half to even) — whatever the layer's CRS (lon/lat are rounded too: QC flags it). Its first
    and last pixel are nodes, numbered in order of appearance; the edge keeps all pixels, a
    ``length`` of ``pixel_path_length`` (1 per step, 1.41421356237 per diagonal step, 1 also for
    longer steps) and ``damaged`` (``_benchmark_bool`` of the property; absent → false). Lines
    with fewer than 2 coordinates are skipped; a second line between the same two nodes
    replaces the first (an ``nx.Graph``). Errors: an empty layer, a feature without a geometry
    or with a non-LineString geometry (MultiLineString, Polygon) → ToolInputError.
    """
    import networkx as nx

    tool = "vec.build_graph"
    gdf, path = read_vector_as_benchmark(ctx, centerline_path, tool=tool, argument="centerline_path")
    if len(gdf) == 0:
        raise ToolInputError(f"{_stem(centerline_path)} is an empty centerline layer", tool=tool,
                             argument="centerline_path", expected="LineString features")

    def first_int(col):
        if col not in gdf.columns:
            return None
        for v in gdf[col]:
            if v is None or (isinstance(v, float) and math.isnan(v)):
                continue
            try:
                return int(v)
            except (TypeError, ValueError):
                return None
        return None

    img_h, img_w = first_int("img_h"), first_int("img_w")
    g = nx.Graph()
    node_of: dict = {}

    def node(p):
        if p not in node_of:
            node_of[p] = len(node_of)
            g.add_node(node_of[p], xy=p)
        return node_of[p]

    has_damaged = "damaged" in gdf.columns
    for i in range(len(gdf)):
        geom = gdf.geometry.iloc[i]
        if geom is None or geom.geom_type not in ("LineString", "LinearRing", "Point"):
            kind = "no geometry" if geom is None else f"a {geom.geom_type}"
            raise ToolInputError(f"feature {i} has {kind}; the benchmark reads single lines only",
                                 tool=tool, argument="centerline_path",
                                 expected="LineString features")
        if geom.is_empty:
            continue
        coords = [c[:2] for c in geom.coords]
        if img_h is not None:
            pixels = [(int(round(img_h - 1 - y)), int(round(x))) for x, y in coords]
        else:
            pixels = [(int(round(y)), int(round(x))) for x, y in coords]
        if len(pixels) < 2:
            continue
        u, v = node(pixels[0]), node(pixels[-1])
        flag = gdf["damaged"].iloc[i] if has_damaged else False
        g.add_edge(u, v, pixels=pixels, length=pixel_path_length(pixels),
                   damaged=_benchmark_bool(flag))
    if img_h is not None:
        g.graph["img_h"] = img_h
    if img_w is not None:
        g.graph["img_w"] = img_w
    out_path = ctx.output_path(tool, {"centerline": path, "v": 2}, ".graphml")
    save_road_graphml(g, out_path)
    return {"tool": tool, "graph_path": ctx.artifact_name(out_path),
            "node_count": g.number_of_nodes(), "edge_count": g.number_of_edges(),
            "input_centerline": centerline_path}


# --------------------------------------------------------------------------------------------
def _snap_pick(samples, meta, tree, point, buffer_px):
    """The benchmark's snap (analysis.py:shortest_path_on_intact_roads._snap): among the 64
    nearest edge pixels within ``buffer_px`` (in distance order), the first pixel carried by an
    intact edge, else the first edge at the nearest pixel; (u, v, index, (row, col), damaged)
    or None."""
    k = min(64, len(samples))
    dists, idxs = tree.query(np.asarray(point, dtype=np.int32), k=k)
    dists, idxs = np.atleast_1d(dists), np.atleast_1d(idxs)
    intact = any_pick = None
    for dist, idx in zip(dists, idxs):
        if not dist <= buffer_px:
            continue
        xy = tuple(int(x) for x in samples[idx])
        for j in np.where((samples[:, 0] == xy[0]) & (samples[:, 1] == xy[1]))[0]:
            u, v, k_, dmg = meta[j]
            if not dmg and intact is None:
                intact = (u, v, k_, xy, dmg)
            if any_pick is None:
                any_pick = (u, v, k_, xy, dmg)
        if intact is not None:
            break
    return intact if intact is not None else any_pick


def _split_road_edge(h, u, v, xy):
    """Node at pixel ``xy`` of graph ``h``, splitting an edge there when needed (analysis.py:
    _split_edge_at_pixel): an existing node with that ``xy`` first; else edge (u, v) — or the
    first edge holding the pixel — is cut at the pixel's index (the nearest pixel when absent),
    the left part (pixels up to it) attached to u and the right part to v, both keeping the
    edge's ``damaged``; an index at either end returns that end's node."""
    for n, d in h.nodes(data=True):
        if tuple(d.get("xy")) == tuple(xy):
            return n

    def index_on(d):
        for i, p in enumerate(d["pixels"]):
            if tuple(p) == tuple(xy):
                return i
        arr = np.array(d["pixels"])
        return int(np.argmin((arr[:, 0] - xy[0]) ** 2 + (arr[:, 1] - xy[1]) ** 2))

    def split(a, b, idx):
        d = h.get_edge_data(a, b)
        pix = d["pixels"]
        if idx <= 0:
            return a
        if idx >= len(pix) - 1:
            return b
        left, right = pix[:idx + 1], pix[idx:]
        new = max(h.nodes) + 1
        h.add_node(new, xy=tuple(pix[idx]))
        h.remove_edge(a, b)
        h.add_edge(a, new, pixels=left, length=pixel_path_length(left), damaged=d["damaged"])
        h.add_edge(new, b, pixels=right, length=pixel_path_length(right), damaged=d["damaged"])
        return new

    d = h.get_edge_data(u, v)
    if d is not None:
        return split(u, v, index_on(d))
    for a, b, d in h.edges(data=True):
        if tuple(xy) in {tuple(p) for p in d["pixels"]}:
            return split(a, b, index_on(d))
    raise ToolInputError(f"no edge holds pixel {list(xy)}", tool="vec.graph_shortest_path",
                         argument="graph_path")


def _oriented_pixels(h, a, b, d):
    """Edge pixels running from node a to node b (analysis.py:_edge_pixels_in_direction)."""
    pix = d["pixels"]
    if not pix:
        return pix
    pa, pb = tuple(h.nodes[a]["xy"]), tuple(h.nodes[b]["xy"])
    if tuple(pix[0]) == pa and tuple(pix[-1]) == pb:
        return pix
    if tuple(pix[0]) == pb and tuple(pix[-1]) == pa:
        return list(reversed(pix))
    d0 = (pix[0][0] - pa[0]) ** 2 + (pix[0][1] - pa[1]) ** 2
    d1 = (pix[-1][0] - pa[0]) ** 2 + (pix[-1][1] - pa[1]) ** 2
    return pix if d0 <= d1 else list(reversed(pix))


def route_on_intact_roads(g, start, end, snap_buffer_px=SNAP_BUFFER_PX):
    """(length px | None, pixels | None, snapped start, snapped end, snapped_on_damaged,
    snap_failed) of the shortest intact route, as analysis.py:shortest_path_on_intact_roads
    computes it: both points snap (``_snap_pick``); a failed snap gives (None, None, start, end,
    True, True); a snap onto a damaged edge (None, None, s, t, True, False); else both snapped
    edges are split (``_split_road_edge``), damaged edges dropped, and Dijkstra by ``length``
    runs between the two nodes (no route: (None, None, s, t, False, False)). A graph without
    edges gives (None, None, None, None, None, False)."""
    import networkx as nx
    from scipy.spatial import cKDTree

    h = g.copy()
    coords, meta = [], []
    for u, v, d in g.edges(data=True):
        for i, p in enumerate(d["pixels"]):
            coords.append(p)
            meta.append((u, v, i, bool(d.get("damaged", False))))
    if not coords:
        return None, None, None, None, None, False
    samples = np.array(coords, dtype=np.int32)
    tree = cKDTree(samples)
    s_pick = _snap_pick(samples, meta, tree, tuple(start), snap_buffer_px)
    t_pick = _snap_pick(samples, meta, tree, tuple(end), snap_buffer_px)
    if s_pick is None or t_pick is None:
        return None, None, tuple(start), tuple(end), True, True
    su, sv, _si, sxy, sdmg = s_pick
    tu, tv, _ti, txy, tdmg = t_pick
    if sdmg or tdmg:
        return None, None, sxy, txy, True, False
    s_node = _split_road_edge(h, su, sv, sxy)
    t_node = _split_road_edge(h, tu, tv, txy)
    h.remove_edges_from([(u, v) for u, v, d in h.edges(data=True) if d.get("damaged", False)])
    try:
        nodes = nx.shortest_path(h, s_node, t_node, weight="length")
    except nx.NetworkXNoPath:
        return None, None, sxy, txy, False, False
    pixels, total = [], 0.0
    for a, b in zip(nodes[:-1], nodes[1:]):
        d = h.get_edge_data(a, b)
        if d is None:
            continue
        seg = _oriented_pixels(h, a, b, d)
        total += float(d["length"])
        pixels.extend(seg[1:] if pixels else seg[:])
    return total, pixels, sxy, txy, False, False


@register("vec.graph_shortest_path", server="Analysis", module="vector", version=2,
          result_keys=["tool", "distance_px", "distance_m", "path_pixels", "path_geojson",
                       "snapped_start", "snapped_end", "snapped_on_damaged", "snap_failed"],
          types_={"start": "list[int]", "end": "list[int]"},
          notes={"start": "[row, col] pixel", "end": "[row, col] pixel",
                 "snap_buffer_px": "undocumented in description"})
def vec_graph_shortest_path(ctx: ToolContext, graph_path: str, start: list[float],
                            end: list[float], pixel_size_m: float = 1.0,
                            snap_buffer_px: int = SNAP_BUFFER_PX) -> dict:
    """Shortest route over intact road edges of a ``vec.build_graph`` graph, as the benchmark
    routes (analysis.py:graph_shortest_path, ``route_on_intact_roads``).

    ``start``/``end`` are [row, col] pixels (truncated to integers) snapped to edge pixels within
    ``snap_buffer_px``; the snapped edges are split there and damaged edges removed.
    ``distance_px`` is the route length in pixels (diagonal step 1.41421356237),
    ``distance_m = distance_px · pixel_size_m``; ``path_pixels`` the route's [row, col] pixels;
    ``path_geojson`` a pixel-space LineString layer (y flipped by img_h as the centre lines).
    No route is not an error: null distances, an empty path, the snapped (or given) points and
    the flags; a failed snap sets both ``snap_failed`` and ``snapped_on_damaged`` (as the
    benchmark does).
    """
    import geopandas as gpd
    from shapely.geometry import LineString

    tool = "vec.graph_shortest_path"
    for name, val in (("start", start), ("end", end)):
        if len(val) != 2 or not all(math.isfinite(float(x)) for x in val):
            raise ToolInputError(f"expected two numbers, got {list(val)}", tool=tool,
                                 argument=name, expected="[row, col]")
    g, gpath = _read_graphml_for(ctx, tool, graph_path)
    img_h = g.graph.get("img_h")
    length, pixels, sxy, txy, on_dmg, failed = route_on_intact_roads(
        g, tuple(start), tuple(end), snap_buffer_px=snap_buffer_px)
    key = {"graph": gpath, "start": [float(x) for x in start], "end": [float(x) for x in end],
           "px": float(pixel_size_m), "snap": snap_buffer_px, "v": 2}
    out_path = ctx.output_path(tool, key, ".geojson")
    if length is None or on_dmg:
        a = tuple(sxy) if sxy is not None else tuple(start)
        b = tuple(txy) if txy is not None else tuple(end)
        layer = gpd.GeoDataFrame({"distance_px": [None], "distance_m": [None],
                                  "snapped_on_damaged": [on_dmg], "snap_failed": [failed]},
                                 geometry=gpd.GeoSeries([LineString([_pixel_to_layer_xy(a, img_h),
                                                                     _pixel_to_layer_xy(b, img_h)])]))
        write_vector(out_path, layer)
        return {"tool": tool, "distance_px": None, "distance_m": None, "path_pixels": [],
                "path_geojson": ctx.artifact_name(out_path), "snapped_start": list(a),
                "snapped_end": list(b), "snapped_on_damaged": on_dmg, "snap_failed": failed}
    distance_m = float(length * pixel_size_m)
    line = LineString([_pixel_to_layer_xy(p, img_h) for p in pixels]) if len(pixels) > 1 \
        else LineString()
    write_vector(out_path, gpd.GeoDataFrame({"distance_px": [length], "distance_m": [distance_m]},
                                            geometry=gpd.GeoSeries([line])))
    return {"tool": tool, "distance_px": float(length), "distance_m": distance_m,
            "path_pixels": [[int(x) for x in p] for p in pixels],
            "path_geojson": ctx.artifact_name(out_path),
            "snapped_start": list(sxy) if sxy else None, "snapped_end": list(txy) if txy else None,
            "snapped_on_damaged": on_dmg, "snap_failed": failed}


# --------------------------------------------------------------------------------------------
#: the benchmark's penalty for routing over a blocked edge (analysis.py:vec_repair_min_edges)
BLOCK_PENALTY = 1e12


def _blocked_flag(value) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes")
    return bool(value)


def _repair_graph(ctx, tool, graph_path, blocked_attr):
    """nx.Graph with edge ``length_m`` and ``blocked`` as analysis.py:vec_repair_min_edges
    loads it: a ``.graphml`` file (ids made integers where they parse; length from length_m,
    length, weight, else 1.0; blocked from ``blocked_attr``, else ``damaged``), any other file
    as JSON {nodes: [{id}], edges: [{source, target, length_m|length|weight, ...}]}."""
    import json as _json

    import networkx as nx

    path = ctx.resolve(graph_path, tool=tool, argument="graph_path")
    g = nx.Graph()

    def as_int(x):
        try:
            return int(x)
        except (TypeError, ValueError):
            return x

    try:
        if path.suffix.lower() == ".graphml":
            h = nx.read_graphml(str(path))
            for n, d in h.nodes(data=True):
                g.add_node(as_int(n), **dict(d))
            for u, v, d in h.edges(data=True):
                try:
                    uu, vv = int(u), int(v)
                except (TypeError, ValueError):
                    uu, vv = u, v
                raw_len = d.get("length_m", d.get("length", d.get("weight", 1.0)))
                try:
                    length = float(raw_len)
                except (TypeError, ValueError):
                    length = 1.0
                g.add_edge(uu, vv, length_m=length,
                           blocked=_blocked_flag(d.get(blocked_attr, d.get("damaged", False))))
        else:
            doc = _json.loads(path.read_text(encoding="utf-8"))
            for n in doc.get("nodes", []):
                g.add_node(n["id"])
            for e in doc.get("edges", []):
                length = float(e.get("length_m", e.get("length", e.get("weight", 1.0))))
                g.add_edge(e["source"], e["target"], length_m=length,
                           blocked=_blocked_flag(e.get(blocked_attr, e.get("damaged", False))))
    except ToolInputError:
        raise
    except Exception as exc:
        raise ToolInputError(f"cannot read {_stem(graph_path)} as a graph: {exc}", tool=tool,
                             argument="graph_path",
                             expected=".graphml (vec.build_graph) or JSON {nodes, edges}") from exc
    return g


@register("vec.repair_min_edges", server="Analysis", module="vector", version=2,
          result_keys=["tool", "repair_edges", "repair_count", "path_length_m",
                       "path_node_count", "source", "target", "auto_selected", "blocked_attr",
                       "graph_nodes", "graph_edges"],
          notes={"graph_path": ".graphml (vec.build_graph) or JSON {nodes:[{id}], edges:[{source,"
                               "target,length_m|length|weight,damaged|blocked}]}"})
def vec_repair_min_edges(ctx: ToolContext, graph_path: str, source: str | int | None = None,
                         target: str | int | None = None, blocked_attr: str = "damaged") -> dict:
    """Fewest blocked edges to repair for a source→target route, ties by length, as the
    benchmark computes it (analysis.py:vec_repair_min_edges).

    Dijkstra with edge weight length_m + 1e12 · blocked (``_repair_graph``). Source and target
    are made integers where they parse; when either is missing or not a node of the graph,
    BOTH are auto-selected (``auto_selected``): the smallest node id of the largest component
    (the first found on ties) and the node farthest from it in hops (the first found in
    breadth-first order). ``path_length_m`` is the route's length in the graph's unit (pixels
    for ``vec.build_graph`` graphs). Errors: no nodes, a largest component of one node, no
    route between the two → ToolInputError.
    """
    import networkx as nx

    tool = "vec.repair_min_edges"
    g = _repair_graph(ctx, tool, graph_path, blocked_attr)
    if g.number_of_nodes() == 0:
        raise ToolInputError("graph has no nodes", tool=tool, argument="graph_path")

    def coerce(x):
        try:
            return int(x) if x is not None else None
        except (TypeError, ValueError):
            return x

    s, t = coerce(source), coerce(target)
    auto = False
    if s is None or s not in g or t is None or t not in g:
        comp = g.subgraph(max(nx.connected_components(g), key=len)).copy()
        if comp.number_of_nodes() < 2:
            raise ToolInputError("the largest component has fewer than 2 nodes", tool=tool,
                                 argument="graph_path")
        try:
            s = sorted(comp.nodes)[0]
        except TypeError as exc:
            raise ToolInputError(f"node ids cannot be ordered: {exc}", tool=tool,
                                 argument="graph_path") from exc
        hops = nx.single_source_shortest_path_length(comp, s)
        t = max(hops, key=hops.get)
        auto = True

    def weight(u, v, d):
        return d.get("length_m", 1.0) + (BLOCK_PENALTY if d.get("blocked", False) else 0.0)

    try:
        nodes = nx.shortest_path(g, source=s, target=t, weight=weight)
    except nx.NetworkXNoPath:
        raise ToolInputError(f"no path exists between {s} and {t} even with repairs allowed "
                             f"(disconnected components)", tool=tool, argument="target") from None
    repairs, length = [], 0.0
    for a, b in zip(nodes[:-1], nodes[1:]):
        d = g[a][b]
        length += float(d.get("length_m", 1.0))
        if d.get("blocked", False):
            repairs.append([a, b])
    return {"tool": tool, "repair_edges": repairs, "repair_count": len(repairs),
            "path_length_m": float(length), "path_node_count": len(nodes),
            "source": s if isinstance(s, (int, float, str)) else str(s),
            "target": t if isinstance(t, (int, float, str)) else str(t),
            "auto_selected": bool(auto), "blocked_attr": blocked_attr,
            "graph_nodes": g.number_of_nodes(), "graph_edges": g.number_of_edges()}


# ============================================================================================
# Geometry: vec.convex_hull, vec.voronoi, vec.dissolve, vec.simplify, vec.point_in_polygon
# (the benchmark reads these layers with plain gpd.read_file: a GeoJSON without crs is
# EPSG:4326 here, see read_vector_as_benchmark)
# ============================================================================================
def _out_vector(ctx, tool, key, out_path):
    return named_output(ctx, tool, key, ".geojson", out_path, (".geojson", ".json"))


def count_vertices(geom) -> int:
    """Vertices as the benchmark's vec.simplify counts them (analysis.py:vec_simplify): a
    polygon's rings with their closing points, a line's coordinates, the sum over the parts of
    multi-geometries and collections; points (and anything else) count 0."""
    if geom is None or geom.is_empty:
        return 0
    kind = geom.geom_type
    if kind == "Polygon":
        return len(geom.exterior.coords) + sum(len(r.coords) for r in geom.interiors)
    if kind == "LineString":
        return len(geom.coords)
    if kind in ("MultiPolygon", "MultiLineString", "GeometryCollection"):
        return sum(count_vertices(g) for g in geom.geoms)
    return 0


@register("vec.convex_hull", server="Analysis", module="vector", version=2,
          result_keys=["tool", "output_path", "area_m2", "vertex_count"],
          notes={"out_path": "auto <temp>/convex_hull.geojson"})
def vec_convex_hull(ctx: ToolContext, vector_path: str, out_path: str | None = None) -> dict:
    """Convex hull of all geometries of a layer, one feature (analysis.py:vec_convex_hull).

    ``area_m2``: the hull's area in the layer's units when the CRS is projected, else 0.0 (a
    geographic or pixel-space layer: a quirk). ``vertex_count``: the hull exterior's
    coordinates, closing point included; 0 when the hull is a point or a line. Empty layer →
    ToolInputError.
    """
    import geopandas as gpd
    import shapely

    tool = "vec.convex_hull"
    gdf, path = read_vector_as_benchmark(ctx, vector_path, tool=tool, argument="vector_path",
                                         geojson_pixel=False)
    if len(gdf) == 0:
        raise ToolInputError(f"{_stem(vector_path)} is empty", tool=tool,
                             argument="vector_path", expected="a layer with at least one feature")
    hull = shapely.union_all([g for g in gdf.geometry if g is not None]).convex_hull
    area = float(hull.area) if gdf.crs is not None and gdf.crs.is_projected else 0.0
    vertices = len(hull.exterior.coords) if hull.geom_type == "Polygon" else 0
    dst = _out_vector(ctx, tool, {"vector": path, "v": 2}, out_path)
    write_vector(dst, gpd.GeoDataFrame(geometry=gpd.GeoSeries([hull], crs=gdf.crs), crs=gdf.crs))
    return {"tool": tool, "output_path": ctx.artifact_name(dst), "area_m2": area,
            "vertex_count": int(vertices)}


@register("vec.voronoi", server="Analysis", module="vector", version=2,
          result_keys=["tool", "output_path", "cell_count"])
def vec_voronoi(ctx: ToolContext, points_path: str, boundary_path: str | None = None,
                out_path: str | None = None) -> dict:
    """Voronoi cells of the Point features (analysis.py:vec_voronoi; shapely/GEOS
    ``voronoi_diagram``), each with ``cell_id`` (0-based).

    Only Point geometries are seeds (other features are ignored). The diagram's envelope is
    the points' bounding box buffered by its perimeter (at least 1 unit); with
    ``boundary_path`` every cell is intersected with the union of the boundary layer — as it
    is, no reprojection (QC error ``vec_mixed_frames`` when its frame differs) — and empty
    cells are dropped. Errors: an empty layer, fewer than 2 points → ToolInputError.
    """
    import geopandas as gpd
    import shapely
    from shapely.geometry import MultiPoint

    tool = "vec.voronoi"
    gdf, path = read_vector_as_benchmark(ctx, points_path, tool=tool, argument="points_path",
                                         geojson_pixel=False)
    if len(gdf) == 0:
        raise ToolInputError(f"{_stem(points_path)} is empty", tool=tool, argument="points_path",
                             expected="a point layer")
    pts = MultiPoint([(g.x, g.y) for g in gdf.geometry if g is not None and g.geom_type == "Point"])
    if len(pts.geoms) < 2:
        raise ToolInputError(f"{len(pts.geoms)} point(s); a Voronoi diagram needs at least 2",
                             tool=tool, argument="points_path", expected="at least 2 points")
    envelope = pts.envelope.buffer(max(pts.envelope.length, 1.0))
    diagram = shapely.voronoi_polygons(pts, extend_to=envelope)
    bpath = None
    if boundary_path:
        bnd, bpath = read_vector_as_benchmark(ctx, boundary_path, tool=tool,
                                              argument="boundary_path", geojson_pixel=False)
        boundary = shapely.union_all([g for g in bnd.geometry if g is not None])
        cells = [c.intersection(boundary) for c in diagram.geoms if not c.is_empty]
        cells = [c for c in cells if not c.is_empty]
    else:
        cells = [c for c in diagram.geoms if not c.is_empty]
    out = gpd.GeoDataFrame({"cell_id": list(range(len(cells)))},
                           geometry=gpd.GeoSeries(cells, crs=gdf.crs), crs=gdf.crs)
    dst = _out_vector(ctx, tool, {"points": path, "boundary": bpath, "v": 2}, out_path)
    write_vector(dst, out)
    return {"tool": tool, "output_path": ctx.artifact_name(dst), "cell_count": int(len(cells))}


@register("vec.dissolve", server="Analysis", module="vector", version=2,
          result_keys=["tool", "output_path", "input_count", "output_count"])
def vec_dissolve(ctx: ToolContext, vector_path: str, by: str | None = None,
                 out_path: str | None = None) -> dict:
    """Union the geometries (geopandas ``dissolve``; analysis.py:vec_dissolve): one feature per
    value of attribute ``by`` (features with a missing value dropped, as pandas groups), or one
    feature for the whole layer when ``by`` is omitted OR names no attribute (QC warns
    ``vec_dissolve_unknown_field``).
    """
    tool = "vec.dissolve"
    gdf, path = read_vector_as_benchmark(ctx, vector_path, tool=tool, argument="vector_path",
                                         geojson_pixel=False)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if by and by in gdf.columns:
                out = gdf.dissolve(by=by).reset_index()
            else:
                out = gdf.dissolve()
    except Exception as exc:
        raise ToolInputError(f"cannot dissolve {_stem(vector_path)}: {exc}", tool=tool,
                             argument="vector_path") from exc
    dst = _out_vector(ctx, tool, {"vector": path, "by": by, "v": 2}, out_path)
    write_vector(dst, out)
    return {"tool": tool, "output_path": ctx.artifact_name(dst),
            "input_count": int(len(gdf)), "output_count": int(len(out))}


@register("vec.simplify", server="Analysis", module="vector", version=2,
          result_keys=["tool", "output_path", "input_vertex_count", "output_vertex_count"],
          notes={"tolerance": "CRS units"})
def vec_simplify(ctx: ToolContext, vector_path: str, tolerance: float,
                 preserve_topology: bool = True, out_path: str | None = None) -> dict:
    """Douglas–Peucker vertex reduction (shapely/GEOS; D. Douglas & T. Peucker, Cartographica
    10(2), 1973) with ``tolerance`` in the layer's units (pixels for pixel-space layers,
    degrees for geographic ones); ``preserve_topology`` keeps polygons valid. Vertex counts
    follow ``count_vertices`` (points count 0), as analysis.py:vec_simplify. Errors: a
    tolerance GEOS refuses → ToolInputError.
    """
    tool = "vec.simplify"
    gdf, path = read_vector_as_benchmark(ctx, vector_path, tool=tool, argument="vector_path",
                                         geojson_pixel=False)
    before = sum(count_vertices(g) for g in gdf.geometry)
    out = gdf.copy()
    try:
        out[out.geometry.name] = gdf.geometry.simplify(tolerance=tolerance,
                                                       preserve_topology=bool(preserve_topology))
    except Exception as exc:
        raise ToolInputError(f"cannot simplify with tolerance {tolerance}: {exc}", tool=tool,
                             argument="tolerance", expected="a distance in the layer's units") from exc
    after = sum(count_vertices(g) for g in out.geometry)
    dst = _out_vector(ctx, tool, {"vector": path, "tol": float(tolerance),
                                  "keep": bool(preserve_topology), "v": 2}, out_path)
    write_vector(dst, out)
    return {"tool": tool, "output_path": ctx.artifact_name(dst),
            "input_vertex_count": int(before), "output_vertex_count": int(after)}


@register("vec.point_in_polygon", server="Analysis", module="vector", version=2,
          result_keys=["tool", "matches", "inside_count"])
def vec_point_in_polygon(ctx: ToolContext, points_path: str, polygons_path: str,
                         polygon_id_field: str | None = None) -> dict:
    """Features of the point layer that lie strictly inside at least one polygon (shapely
    ``contains``: a point on the boundary is outside), with those polygons' ids
    (analysis.py:vec_point_in_polygon).

    The points are reprojected to the polygons' CRS when the two differ. Polygon ids come from
    ``polygon_id_field`` when the polygons have it, else (also for an unknown field: QC warns
    ``vec_unknown_id_field``) their 0-based row index; ``matches`` lists {point_index,
    polygon_ids} in point order. Errors: points without a CRS with polygons that have one
    (pixel-space points are GeoJSON's EPSG:4326 here, so only a Shapefile without .prj) →
    ToolInputError.
    """
    tool = "vec.point_in_polygon"
    pts, _ = read_vector_as_benchmark(ctx, points_path, tool=tool, argument="points_path",
                                      geojson_pixel=False)
    polys, _ = read_vector_as_benchmark(ctx, polygons_path, tool=tool, argument="polygons_path",
                                        geojson_pixel=False)
    if pts.crs != polys.crs and polys.crs is not None:
        if pts.crs is None:
            raise ToolInputError("the points have no CRS and cannot be reprojected to the "
                                 "polygons' CRS", tool=tool, argument="points_path",
                                 expected="a point layer with a CRS")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pts = pts.to_crs(polys.crs)
    use_field = bool(polygon_id_field) and polygon_id_field in polys.columns
    matches = []
    for i in range(len(pts)):
        g = pts.geometry.iloc[i]
        if g is None:
            continue
        hit = [j for j in range(len(polys)) if polys.geometry.iloc[j] is not None
               and polys.geometry.iloc[j].contains(g)]
        if hit:
            ids = [_plain(polys[polygon_id_field].iloc[j]) for j in hit] if use_field else hit
            matches.append({"point_index": i, "polygon_ids": ids})
    return {"tool": tool, "matches": matches, "inside_count": len(matches)}
