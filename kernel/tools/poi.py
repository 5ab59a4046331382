"""POI tools (``poi.*``): point-of-interest layers and per-POI loop results.

Every tool returns the observation of the benchmark's POI server (Junjue-Wang/DORA
``dora/tools/poi.py`` at 7b96988), including its surprising behaviours, which are listed in
``kernel/tools/quirks.py`` (section poi.*, vis.*) with the QC check that flags a step relying on
one. In short: layers are read as geopandas reads them (no reprojection; the coordinates of a
point are taken as lon/lat whatever the layer's CRS), only ``.geojson``/``.shp`` files are
accepted, an empty layer is a failure (the benchmark answers a stub), ``poi.world_to_pixel``
truncates pixel positions toward zero and writes the constant ``pixel_size_m`` 0.8, a search
without match returns ``output_path`` "None", list-valued group keys fail.

A benchmark stub (its ``_tool_guard`` turning an exception into ``status: "stub"``) is a
``ToolError`` here, as everywhere in the studio's registry. A missing number property is NaN in
the observation, as in the benchmark's (its JSON text carries the token ``NaN``; see
docs/tool-parity.md, non-finite numbers).
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from ._io import write_vector
from .base import ToolContext, ToolError, ToolInputError, jsonable
from .spec import register

#: the constant pixel size the benchmark's ``poi.world_to_pixel`` writes onto every projected POI
#: (its wrapper never passes the function's ``pixel_size_m`` argument, default 0.8)
WORLD_TO_PIXEL_PIXEL_SIZE_M = 0.8

#: sample keys ``poi.filter_by_intact`` reads as a band number (its "format 1"), 1..10
_INTACT_BAND_KEYS = range(1, 11)


def _read_layer(ctx: ToolContext, value: str, tool: str, argument: str = "geojson_path"):
    """(GeoDataFrame as geopandas reads it, resolved path). Only ``.geojson``/``.shp`` names are
    accepted (the benchmark's ``_read_geojson``); the CRS is kept, never reprojected. An empty
    layer is a ``ToolError`` (the benchmark returns a stub "Empty GeoJSON input")."""
    import geopandas as gpd

    path = ctx.resolve(value, tool=tool, argument=argument)
    if not str(value).lower().endswith((".geojson", ".shp")):
        raise ToolInputError(f"unsupported file format: {value}", tool=tool, argument=argument,
                             expected="a .geojson or .shp file")
    try:
        gdf = gpd.read_file(path)
    except Exception as exc:
        raise ToolInputError(f"{Path(value).name} cannot be read: {exc}", tool=tool,
                             argument=argument, expected="a GeoJSON or Shapefile") from None
    if len(gdf) == 0:
        raise ToolError("empty GeoJSON input (the benchmark answers a stub)", tool=tool,
                        argument=argument)
    return gdf, path


def _rows(gdf) -> list[tuple[Any, dict]]:
    """(geometry, properties) of every feature, as ``GeoDataFrame.iterrows`` gives them (the
    benchmark's loop): a row is one object Series, so integer columns come out as Python ints
    (``iloc`` would give numpy scalars), a missing text as NaN."""
    geom_col = gdf.geometry.name
    out = []
    for _idx, row in gdf.iterrows():
        props = {str(k): v for k, v in row.items() if k not in (geom_col, "geometry")}
        out.append((row[geom_col], props))
    return out


def _checked_props(props: dict, i: int, tool: str) -> dict:
    """``props`` when Python's ``json`` can write every value (NaN stays NaN in the
    observation; an object property stays an object). A value it cannot write (a list property,
    which geopandas reads as a numpy array; a date, read as a Timestamp) fails the call: the
    benchmark's server serialises its result with ``json.dumps`` and answers a stub."""
    for k, v in props.items():
        if not (v is None or isinstance(v, (str, int, float, bool, dict, list, tuple))):
            raise ToolInputError(f"feature {i}: property {k!r} holds a {type(v).__name__}, "
                                 f"which the benchmark's server cannot write as JSON", tool=tool,
                                 argument="geojson_path",
                                 expected="text, number or boolean properties")
    return dict(props)


def _point_xy(geom, tool: str, i: int) -> tuple[float, float]:
    """(x, y) of a point geometry; any other geometry fails the whole call, as the benchmark's
    ``geom.x`` does (shapely has no x on a polygon or line)."""
    if geom.geom_type != "Point":
        raise ToolInputError(f"feature {i} is a {geom.geom_type}, which has no x/y",
                             tool=tool, argument="geojson_path",
                             expected="Point geometries")
    return float(geom.x), float(geom.y)


def _poi_name(value: Any) -> Any:
    """The benchmark's ``row.get('name', '') or ''``: missing or falsy → ''; NaN stays NaN."""
    if value is None:
        return ""
    try:
        if not value:
            return ""
    except (TypeError, ValueError):
        pass
    return value


def _name_matches(poi_name: Any, name: str, exact: bool, tool: str, i: int) -> bool:
    if exact:
        return poi_name == name
    if not isinstance(poi_name, str):
        # the benchmark calls .lower() on it: a missing name (NaN in pandas 3) or a number fails
        shown = "missing (NaN)" if isinstance(poi_name, float) and math.isnan(poi_name) \
            else repr(poi_name)
        raise ToolInputError(f"feature {i} has a name that is not text: {shown}", tool=tool,
                             argument="geojson_path",
                             expected="a text 'name' on every feature (or exact=true)")
    return name.lower() in poi_name.lower()


def _dump(doc: Any) -> str:
    return json.dumps(jsonable(doc), ensure_ascii=False, indent=2)


# --------------------------------------------------------------------------------------------
@register("poi.search_by_name", server="POI", module="vector",
          result_keys=["tool", "search_name", "exact_match", "total_found", "results",
                       "output_path"],
          notes={"geojson_path": ".geojson or .shp with Point geometries and a 'name' property"})
def poi_search_by_name(ctx: ToolContext, geojson_path: str, name: str, exact: bool = False) -> dict:
    """POIs whose ``name`` contains ``name`` case-insensitively (or equals it, case-sensitive,
    with ``exact``), as the benchmark's ``poi_search_by_name``.

    ``results``: [{name, latitude (= y), longitude (= x) in the layer's own coordinates,
    properties (every column plus ``geometry_type``)}] in layer order; features without
    geometry are skipped. Matches are saved as a FeatureCollection; ``output_path`` is the
    string "None" when nothing matches (quirk). Errors (the benchmark's stubs): a file that is
    not .geojson/.shp, an empty layer, a matching non-point feature, a fuzzy search over a
    feature whose name is missing or not text.
    """
    tool = "poi.search_by_name"
    gdf, path = _read_layer(ctx, geojson_path, tool)
    results = []
    for i, (geom, raw) in enumerate(_rows(gdf)):
        if geom is None or geom.is_empty:
            continue
        poi_name = _poi_name(raw.get("name"))
        if not _name_matches(poi_name, name, exact, tool, i):
            continue
        x, y = _point_xy(geom, tool, i)
        props = _checked_props(raw, i, tool)
        props["geometry_type"] = geom.geom_type
        results.append({"name": poi_name, "latitude": y, "longitude": x, "properties": props})
    out_name = "None"
    if results:
        out_path = ctx.output_path(tool, {"layer": path, "name": name, "exact": bool(exact)},
                                   ".geojson")
        doc = {"type": "FeatureCollection",
               "features": [{"type": "Feature",
                             "geometry": {"type": "Point",
                                          "coordinates": [r["longitude"], r["latitude"]]},
                             "properties": {"name": r["name"], "properties": r["properties"]}}
                            for r in results]}
        out_path.write_text(_dump(doc), encoding="utf-8")
        out_name = ctx.artifact_name(out_path)
    return {"tool": tool, "search_name": name, "exact_match": exact,
            "total_found": len(results), "results": results, "output_path": out_name}


@register("poi.to_vector", server="POI", module="vector",
          result_keys=["tool", "vector_path", "count", "name_filter", "exact_match"],
          notes={"name": "optional filter: a case-insensitive regular expression search"})
def poi_to_vector(ctx: ToolContext, geojson_path: str, name: str | None = None,
                  exact: bool = False) -> dict:
    """Copy a POI layer, optionally filtered by ``name``, into a managed GeoJSON with the
    layer's CRS (the benchmark's ``poi_to_vector``). The filter is pandas'
    ``str.contains(name.lower(), na=False)`` over the lower-cased names, i.e. a regular
    expression search (quirk: "st. john" also matches "st john"); with ``exact`` an equality.
    ``count`` may be 0 (an empty layer is written). Errors: a file that is not .geojson/.shp,
    an empty input layer, a filter over a layer without a text 'name' column, an invalid
    regular expression.
    """
    import re

    tool = "poi.to_vector"
    gdf, path = _read_layer(ctx, geojson_path, tool)
    if name:
        if "name" not in gdf.columns:
            raise ToolInputError("the layer has no 'name' column to filter on", tool=tool,
                                 argument="name")
        col = gdf["name"]
        if exact:
            keep = (col == name).tolist()
        else:
            try:
                keep = col.str.lower().str.contains(name.lower(), na=False).tolist()
            except AttributeError:
                raise ToolInputError("the 'name' column is not text", tool=tool,
                                     argument="name") from None
            except re.error as exc:
                raise ToolInputError(f"{name!r} is not a valid regular expression: {exc}",
                                     tool=tool, argument="name") from None
        gdf = gdf[keep].copy()
    out_path = ctx.output_path(tool, {"layer": path, "name": name, "exact": bool(exact)},
                               ".geojson")
    write_vector(out_path, gdf)
    return {"tool": tool, "vector_path": ctx.artifact_name(out_path), "count": int(len(gdf)),
            "name_filter": name, "exact_match": exact}


# --------------------------------------------------------------------------------------------
@register("poi.world_to_pixel", server="POI", module="vector",
          result_keys=["tool", "features", "output_path", "total_points", "valid_points",
                       "filtered_points", "image_bounds", "image_size", "source_crs",
                       "target_crs"],
          notes={"geojson_path": "points whose x/y are read as WGS84 lon/lat",
                 "raster_path": "georeferenced reference image"})
def poi_world_to_pixel(ctx: ToolContext, geojson_path: str, raster_path: str) -> dict:
    """Project POIs into the raster's pixel grid (the benchmark's ``poi_world_to_pixel``).

    Each point's x/y is taken as WGS84 lon/lat whatever the layer's CRS (quirk), transformed to
    the raster's CRS (``utm_x``, ``utm_y``), then ``col = int((x − c)/a)``,
    ``row = int((f − y)/−e)`` with the transform's c, a, f, e (truncation toward zero, rotation
    ignored: a point up to one pixel left of or above the image lands in column/row 0, quirk).
    Points with 0 ≤ row < height and 0 ≤ col < width are kept as pixel-space points [col, row]
    whose properties gain pixel_row, pixel_col, latitude, longitude, utm_x, utm_y and
    ``pixel_size_m`` = 0.8 whatever the raster's pixel size (quirk). ``image_bounds`` are
    rasterio's bounds. Errors: a raster without CRS, an empty layer, a non-point feature.
    """
    import rasterio
    from pyproj import Transformer

    tool = "poi.world_to_pixel"
    rp = ctx.resolve(raster_path, tool=tool, argument="raster_path")
    try:
        with rasterio.open(rp) as src:
            bounds, transform, crs = src.bounds, src.transform, src.crs
            width, height = int(src.width), int(src.height)
    except rasterio.errors.RasterioIOError as exc:
        raise ToolInputError(f"{Path(raster_path).name} cannot be read: {exc}", tool=tool,
                             argument="raster_path", expected="a raster file") from None
    gdf, path = _read_layer(ctx, geojson_path, tool)
    if crs is None:
        raise ToolInputError(f"{Path(raster_path).name} has no CRS", tool=tool,
                             argument="raster_path", expected="a georeferenced raster")
    tr = Transformer.from_crs("EPSG:4326", crs.to_wkt(), always_xy=True)
    feats = []
    for i, (geom, raw) in enumerate(_rows(gdf)):
        if geom is None or geom.is_empty:
            continue
        lon, lat = _point_xy(geom, tool, i)
        x, y = tr.transform(lon, lat)
        if not (math.isfinite(x) and math.isfinite(y)):
            raise ToolInputError(f"feature {i} ({lon}, {lat}) has no position in {crs}",
                                 tool=tool, argument="geojson_path",
                                 expected="WGS84 lon/lat inside the raster CRS's area")
        col = int((x - transform.c) / transform.a)
        row = int((transform.f - y) / -transform.e)
        if not (0 <= row < height and 0 <= col < width):
            continue
        props = _checked_props(raw, i, tool)
        props.update({"pixel_row": row, "pixel_col": col, "latitude": lat, "longitude": lon,
                      "utm_x": float(x), "utm_y": float(y),
                      "pixel_size_m": float(WORLD_TO_PIXEL_PIXEL_SIZE_M)})
        feats.append({"type": "Feature", "properties": props,
                      "geometry": {"type": "Point", "coordinates": [float(col), float(row)]}})
    image_bounds = {"left": float(bounds.left), "right": float(bounds.right),
                    "bottom": float(bounds.bottom), "top": float(bounds.top)}
    total = int(len(gdf))
    target = str(crs)
    out_path = ctx.output_path(tool, {"layer": path, "raster": rp}, ".geojson")
    doc = {"type": "FeatureCollection", "features": feats,
           "metadata": {"source_geojson": geojson_path, "source_raster": raster_path,
                        "source_crs": "EPSG:4326", "target_crs": target,
                        "image_bounds": image_bounds, "image_size": [width, height],
                        "total_input_points": total, "valid_points": len(feats),
                        "filtered_points": total - len(feats)}}
    out_path.write_text(_dump(doc), encoding="utf-8")
    return {"tool": tool, "features": feats, "output_path": ctx.artifact_name(out_path),
            "total_points": total, "valid_points": len(feats),
            "filtered_points": total - len(feats), "image_bounds": image_bounds,
            "image_size": [width, height], "source_crs": "EPSG:4326", "target_crs": target}


# --------------------------------------------------------------------------------------------
def _get(obj: Any, path: str) -> Any:
    """A dotted path ("item.properties.types") into nested dicts; None when a step is missing."""
    cur = obj
    for k in path.split("."):
        if isinstance(cur, dict) and k in cur:
            cur = cur[k]
        else:
            return None
    return cur


def _most_frequent_class(pixel_values: dict) -> int | None:
    """The key (as int) with the largest count, first on ties; keys that are not integers and
    counts that do not compare with numbers are skipped."""
    best, best_n = None, -1
    for k, n in pixel_values.items():
        try:
            cls = int(k)
            if n > best_n:
                best, best_n = cls, n
        except (TypeError, ValueError):
            continue
    return best


def damage_class_of(pixel_values: Any) -> int | None:
    """Damage class of a sampled loop result as ``poi.group_by`` and ``poi.filter_by_damage``
    read it (the benchmark's ``extract_damage_class`` of those two tools): a one-entry dict
    ``{"1": v}`` gives ``int(v)`` (None when v is not an integer); a longer dict is a class →
    count map and gives its most frequent class; anything else None."""
    if not isinstance(pixel_values, dict) or not pixel_values:
        return None
    if len(pixel_values) == 1:
        v = next(iter(pixel_values.values()))
        try:
            return int(v)
        except (TypeError, ValueError):
            return None
    return _most_frequent_class(pixel_values)


def intact_class_of(pixel_values: Any) -> int | None:
    """Damage class as ``poi.filter_by_intact`` reads it (its own ``extract_damage_class``): a
    one-entry dict whose key is a band number 1..10 gives ``int(value)``; any other dict
    (including ``{"0": v}`` or ``{"11": v}``, and a one-entry dict whose value is not an
    integer) is a class → count map and gives its most frequent class (so ``{"0": 5}`` is
    class 0 and ``{"12": 1}`` class 12)."""
    if not isinstance(pixel_values, dict) or not pixel_values:
        return None
    if len(pixel_values) == 1:
        k, v = next(iter(pixel_values.items()))
        try:
            if int(k) in _INTACT_BAND_KEYS:
                return int(v)
        except (TypeError, ValueError):
            pass
    return _most_frequent_class(pixel_values)


def _last_obs_values(entry: dict) -> Any:
    last = entry.get("last_obs")
    if last and isinstance(last, dict):
        return last.get("pixel_values"), True
    return None, False


@register("poi.group_by", server="POI", module="vector",
          result_keys=["tool", "group_field", "count_field", "return_item_details", "return_sum",
                       "total_items", "total_groups", "groups"],
          notes={"data": "e.g. tool.loop results",
                 "group_field": "dotted path, e.g. item.properties.types",
                 "count_field": "dotted path to sum; 'damage_class' reads last_obs.pixel_values"})
def poi_group_by(ctx: ToolContext, data: list[dict], group_field: str,
                 count_field: str | None = None, return_item_details: bool = False,
                 return_sum: bool = False) -> dict:
    """Count items per value of a (dotted) field, in first-seen order (the benchmark's
    ``poi_group_by``). Items whose field is missing or null are left out of the groups (but
    counted in ``total_items``); a string with a comma is grouped by its first token, stripped;
    group keys are ``str(value)``. A list or dict value fails the call (unhashable in the
    benchmark, quirk). ``count_field`` values (``damage_class``: the sampled class of
    ``last_obs.pixel_values``) are summed; ``sum`` appears with ``return_sum`` when non-zero,
    rounded to 2 decimals; ``items`` with ``return_item_details``. Empty ``data`` gives the short
    observation without ``return_item_details``/``return_sum`` (as the benchmark).
    Errors: a list/dict group value, a non-numeric count value.
    """
    tool = "poi.group_by"
    if not data:
        return {"tool": tool, "group_field": group_field, "count_field": count_field,
                "total_items": 0, "total_groups": 0, "groups": {}}
    groups: dict = {}
    for i, entry in enumerate(data):
        key = _get(entry, group_field)
        value = None
        if count_field == "damage_class":
            pv, ok = _last_obs_values(entry)
            value = damage_class_of(pv) if ok else None
        elif count_field:
            value = _get(entry, count_field)
        if key is None:
            continue
        if isinstance(key, str) and "," in key:
            key = key.split(",")[0].strip()
        if isinstance(key, (list, dict)):
            raise ToolInputError(f"item {i}: {group_field!r} is a {type(key).__name__} "
                                 f"({key!r:.60}); the benchmark cannot group by it",
                                 tool=tool, argument="group_field",
                                 expected="a field holding text or numbers")
        g = groups.setdefault(key, {"count": 0, "sum": 0.0, "items": []})
        g["count"] += 1
        if value is not None:
            try:
                g["sum"] += float(value)
            except (TypeError, ValueError):
                raise ToolInputError(f"item {i}: {count_field!r} is {value!r}, not a number",
                                     tool=tool, argument="count_field") from None
        g["items"].append(entry)
    out = {}
    for k, g in groups.items():
        rec = {"count": g["count"]}
        if return_sum and g["sum"]:
            rec["sum"] = round(g["sum"], 2)
        if return_item_details:
            rec["items"] = g["items"]
        out[_group_name(k)] = rec
    return {"tool": tool, "group_field": group_field, "count_field": count_field,
            "return_item_details": return_item_details, "return_sum": return_sum,
            "total_items": len(data), "total_groups": len(out), "groups": out}


def _group_name(key: Any) -> str:
    """Python's ``str`` of a group value, as the benchmark names groups (True → "True",
    2.0 → "2.0")."""
    return str(key)


@register("poi.filter_by_damage", server="POI", module="vector",
          result_keys=["tool", "total_input", "total_filtered", "total_damaged",
                       "filtered_results"],
          notes={"data": "tool.loop results {item, last_obs}",
                 "min_damage_class": "2 = partially damaged or worse"})
def poi_filter_by_damage(ctx: ToolContext, data: list[dict], min_damage_class: int = 2) -> dict:
    """Loop results whose sampled damage class (``damage_class_of`` of
    ``last_obs.pixel_values``) is >= ``min_damage_class`` (the benchmark's
    ``poi_filter_by_damage``); entries without a dict ``last_obs`` are dropped."""
    kept = []
    for entry in data:
        pv, ok = _last_obs_values(entry)
        c = damage_class_of(pv) if ok else None
        if c is not None and c >= min_damage_class:
            kept.append(entry)
    return {"tool": "poi.filter_by_damage", "total_input": len(data), "total_filtered": len(kept),
            "total_damaged": len(kept), "filtered_results": kept}


@register("poi.filter_by_intact", server="POI", module="vector",
          result_keys=["tool", "total_input", "total_intact", "filtered_results"],
          notes={"data": "tool.loop results"})
def poi_filter_by_intact(ctx: ToolContext, data: list[dict]) -> dict:
    """Loop results whose sampled class (``intact_class_of``) is 1 (the benchmark's
    ``poi_filter_by_intact``); note the class reading differs from ``poi.filter_by_damage``'s
    (quirk: ``{"0": 1}`` is class 0 here, ``{"2": 1, "1": 3}`` class 1)."""
    kept = []
    for entry in data:
        pv, ok = _last_obs_values(entry)
        if ok and intact_class_of(pv) == 1:
            kept.append(entry)
    return {"tool": "poi.filter_by_intact", "total_input": len(data), "total_intact": len(kept),
            "filtered_results": kept}


@register("poi.filter_by_attribute", server="POI", module="vector",
          result_keys=["tool", "total_input", "total_filtered", "attribute_name",
                       "allowed_values", "filtered_results"],
          notes={"data": "tool.loop results",
                 "attribute_name": "looked up in item.properties (or item)"})
def poi_filter_by_attribute(ctx: ToolContext, data: list[dict], attribute_name: str,
                            allowed_values: list[str]) -> dict:
    """Loop results whose ``item.properties[attribute_name]`` (``item`` itself when it has no
    ``properties``) holds an allowed value: a string is split at commas and stripped, a list is
    taken as is, anything else (a missing value is "") compared as ``str(value)``; exact,
    case-sensitive (the benchmark's ``poi_filter_by_attribute``). Empty ``data`` gives the short
    observation without ``allowed_values``. Errors: an item whose ``properties`` is not an
    object."""
    tool = "poi.filter_by_attribute"
    if not data:
        return {"tool": tool, "total_input": 0, "total_filtered": 0,
                "attribute_name": attribute_name, "filtered_results": []}
    kept = []
    for i, entry in enumerate(data):
        item = entry.get("item", {})
        if not isinstance(item, dict):
            continue
        props = item.get("properties", item)
        if not isinstance(props, dict):
            raise ToolInputError(f"item {i}: 'properties' is {props!r:.60}, not an object",
                                 tool=tool, argument="data",
                                 expected="tool.loop results whose item has properties")
        v = props.get(attribute_name, "")
        if isinstance(v, str):
            tokens = [t.strip() for t in v.split(",")]
        elif isinstance(v, list):
            tokens = v
        else:
            tokens = [_group_name(v)]
        if any(t in allowed_values for t in tokens):
            kept.append(entry)
    return {"tool": tool, "total_input": len(data), "total_filtered": len(kept),
            "attribute_name": attribute_name, "allowed_values": allowed_values,
            "filtered_results": kept}


@register("poi.damage_population_exposure", server="POI", module="vector",
          result_keys=["tool", "join_field", "damage_field", "population_field",
                       "damage_threshold", "allowed_types", "total_damage_features",
                       "total_population_features", "total_exposed", "exposed_pois",
                       "top_exposed_poi"],
          notes={"damage_feature_stats": "e.g. vec.raster_stats feature_stats over a damage mask",
                 "population_feature_stats": "same over a population raster"})
def poi_damage_population_exposure(ctx: ToolContext, damage_feature_stats: list[dict],
                                   population_feature_stats: list[dict],
                                   damage_threshold: float = 2.0, damage_field: str = "max",
                                   population_field: str = "max", join_field: str = "name",
                                   allowed_types: list[str] | None = None) -> dict:
    """Join per-POI damage and population statistics on ``join_field``; keep POIs whose damage
    reaches the threshold (and whose type/types tokens meet ``allowed_types``); rank by
    population, then damage, then name."""
    pop = {}
    for it in population_feature_stats:
        k = it.get(join_field)
        if k is not None:
            pop[str(k)] = it
    allowed = {str(x).strip() for x in (allowed_types or []) if str(x).strip()}
    exposed = []
    for it in damage_feature_stats:
        k = it.get(join_field)
        if k is None or str(k) not in pop:
            continue
        p = pop[str(k)]
        dv, pv = it.get(damage_field), p.get(population_field)
        if dv is None or pv is None:
            continue
        types = it.get("type") or it.get("types") or p.get("type") or p.get("types")
        if allowed:
            toks = {t.strip() for t in str(types or "").split(",") if t.strip()}
            if not toks & allowed:
                continue
        if float(dv) < float(damage_threshold):
            continue
        exposed.append({"name": str(k), "types": types, "damage_value": float(dv),
                        "population_value": float(pv),
                        "damage_feature_idx": it.get("feature_idx"),
                        "population_feature_idx": p.get("feature_idx")})
    exposed.sort(key=lambda e: (-e["population_value"], -e["damage_value"], e["name"]))
    return {"tool": "poi.damage_population_exposure", "join_field": join_field,
            "damage_field": damage_field, "population_field": population_field,
            "damage_threshold": float(damage_threshold), "allowed_types": sorted(allowed),
            "total_damage_features": len(damage_feature_stats),
            "total_population_features": len(population_feature_stats),
            "total_exposed": len(exposed), "exposed_pois": exposed,
            "top_exposed_poi": exposed[0] if exposed else None}
