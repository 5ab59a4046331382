"""POI tools (``poi.*``): point-of-interest layers and per-POI loop results.

POI layers are WGS84 points: a GeoJSON without a ``crs`` member is read as lon/lat here (the
tools' contract), one with a ``crs`` member is reprojected to WGS84. Deviations from the
benchmark, all towards explicit or measured values: pixel positions are floored (not truncated
toward zero, which let points just outside the left/top edge in); the ``pixel_size_m`` written
onto projected POIs is the raster's own pixel size (the benchmark writes a constant 0.8);
``poi.search_by_name`` returns ``output_path: null`` when nothing matches (the benchmark writes
the string "None"); an empty POI layer gives empty results instead of a stub.
"""
from __future__ import annotations

import json
import math
from collections import OrderedDict
from pathlib import Path
from typing import Any

from ._io import raster_meta, read_vector_path, write_vector
from .base import ToolContext, ToolInputError, jsonable
from .registry import register


def _read_poi(ctx: ToolContext, value: str, tool: str, argument: str = "geojson_path"):
    from pyproj import CRS

    path = ctx.resolve(value, tool=tool, argument=argument)
    gdf = read_vector_path(path, ctx=None, tool=tool, argument=argument)
    if gdf.crs is None:
        gdf = gdf.set_crs(CRS.from_user_input("OGC:CRS84"), allow_override=True)
    elif not gdf.crs.is_geographic or gdf.crs.to_epsg() not in (4326, None):
        gdf = gdf.to_crs("OGC:CRS84")
    return gdf, path


def _lonlat(geom) -> tuple[float, float] | None:
    if geom is None or geom.is_empty:
        return None
    p = geom if geom.geom_type == "Point" else geom.representative_point()
    return float(p.x), float(p.y)


def _props(row, geom_col) -> dict:
    out = {}
    for k, v in row.items():
        if k == geom_col:
            continue
        if isinstance(v, float) and math.isnan(v):
            v = None
        try:
            out[str(k)] = jsonable(v)
        except TypeError:
            out[str(k)] = str(v)
    return out


def _name_match(poi_name: Any, name: str, exact: bool) -> bool:
    poi_name = "" if poi_name is None or (isinstance(poi_name, float) and math.isnan(poi_name)) \
        else str(poi_name)
    return poi_name == name if exact else name.lower() in poi_name.lower()


# --------------------------------------------------------------------------------------------
@register("poi.search_by_name", server="POI", module="vector",
          result_keys=["tool", "search_name", "exact_match", "total_found", "results",
                       "output_path"],
          notes={"geojson_path": ".geojson or .shp with Point geometries and a 'name' property"})
def poi_search_by_name(ctx: ToolContext, geojson_path: str, name: str, exact: bool = False) -> dict:
    """POIs whose ``name`` contains the query case-insensitively (or equals it with
    ``exact``); results carry name, WGS84 latitude/longitude (a polygon gives its representative
    point) and properties; matches are saved as a FeatureCollection (``output_path`` null when
    nothing matches)."""
    tool = "poi.search_by_name"
    gdf, path = _read_poi(ctx, geojson_path, tool)
    geom_col = gdf.geometry.name
    results = []
    for i in range(len(gdf)):
        row = gdf.iloc[i]
        ll = _lonlat(row[geom_col])
        if ll is None:
            continue
        poi_name = row.get("name") if "name" in gdf.columns else None
        if not _name_match(poi_name, name, exact):
            continue
        props = _props(row, geom_col)
        props["geometry_type"] = row[geom_col].geom_type
        results.append({"name": props.get("name") or "", "latitude": ll[1], "longitude": ll[0],
                        "properties": props})
    out_name = None
    if results:
        out_path = ctx.output_path(tool, {"layer": path, "name": name, "exact": bool(exact)},
                                   ".geojson")
        doc = {"type": "FeatureCollection",
               "features": [{"type": "Feature",
                             "geometry": {"type": "Point", "coordinates": [r["longitude"], r["latitude"]]},
                             "properties": {"name": r["name"], "properties": r["properties"]}}
                            for r in results]}
        out_path.write_text(json.dumps(doc, ensure_ascii=False, separators=(",", ":")),
                            encoding="utf-8")
        out_name = ctx.artifact_name(out_path)
    return {"tool": tool, "search_name": name, "exact_match": bool(exact),
            "total_found": len(results), "results": results, "output_path": out_name}


@register("poi.to_vector", server="POI", module="vector",
          result_keys=["tool", "vector_path", "count", "name_filter", "exact_match"],
          notes={"name": "optional substring filter"})
def poi_to_vector(ctx: ToolContext, geojson_path: str, name: str | None = None,
                  exact: bool = False) -> dict:
    """Copy a POI layer (optionally name-filtered) into a managed GeoJSON with an explicit
    WGS84 ``crs`` member, so the vector tools measure it in metres."""
    tool = "poi.to_vector"
    gdf, path = _read_poi(ctx, geojson_path, tool)
    if name:
        if "name" not in gdf.columns:
            raise ToolInputError("the layer has no 'name' property to filter on", tool=tool,
                                 argument="name")
        gdf = gdf[[_name_match(v, name, exact) for v in gdf["name"]]]
    out_path = ctx.output_path(tool, {"layer": path, "name": name, "exact": bool(exact)},
                               ".geojson")
    write_vector(out_path, gdf)
    return {"tool": tool, "vector_path": ctx.artifact_name(out_path), "count": int(len(gdf)),
            "name_filter": name, "exact_match": bool(exact)}


# --------------------------------------------------------------------------------------------
@register("poi.world_to_pixel", server="POI", module="vector",
          result_keys=["tool", "features", "output_path", "total_points", "valid_points",
                       "filtered_points", "image_bounds", "image_size", "source_crs",
                       "target_crs"],
          notes={"geojson_path": "WGS84 points", "raster_path": "georeferenced reference image"})
def poi_world_to_pixel(ctx: ToolContext, geojson_path: str, raster_path: str) -> dict:
    """Project WGS84 POIs into the raster's CRS and pixel grid, dropping points outside the
    image. Each kept feature becomes a pixel-space point [col, row] whose properties gain
    pixel_row, pixel_col, latitude, longitude, utm_x, utm_y (raster CRS coordinates) and
    pixel_size_m (the raster's). The saved FeatureCollection is the usual ``loop_over`` for
    per-POI sampling with ``<item.properties.pixel_row>``. A raster without CRS →
    ToolInputError."""
    from pyproj import Transformer

    tool = "poi.world_to_pixel"
    rp = ctx.resolve(raster_path, tool=tool, argument="raster_path")
    meta = raster_meta(rp, tool=tool, argument="raster_path")
    if not meta.georeferenced:
        raise ToolInputError(f"{Path(raster_path).name} has no CRS", tool=tool,
                             argument="raster_path", expected="a georeferenced raster")
    gdf, path = _read_poi(ctx, geojson_path, tool)
    tr = Transformer.from_crs("OGC:CRS84", meta.crs, always_xy=True)
    inv = ~meta.transform
    try:
        unit = meta.crs.linear_units_factor[1]
    except Exception:
        unit = None
    px_size = float(abs(meta.transform.a) * unit) if unit else None
    geom_col = gdf.geometry.name
    feats = []
    for i in range(len(gdf)):
        row = gdf.iloc[i]
        ll = _lonlat(row[geom_col])
        if ll is None:
            continue
        x, y = tr.transform(ll[0], ll[1])
        colf, rowf = inv @ (x, y)
        col, r = math.floor(colf), math.floor(rowf)
        if not (0 <= r < meta.height and 0 <= col < meta.width):
            continue
        props = _props(row, geom_col)
        props.update({"pixel_row": int(r), "pixel_col": int(col), "latitude": ll[1],
                      "longitude": ll[0], "utm_x": float(x), "utm_y": float(y),
                      "pixel_size_m": px_size})
        feats.append({"type": "Feature", "properties": props,
                      "geometry": {"type": "Point", "coordinates": [float(col), float(r)]}})
    left, top = meta.transform @ (0, 0)
    right, bottom = meta.transform @ (meta.width, meta.height)
    bounds = {"left": float(min(left, right)), "right": float(max(left, right)),
              "bottom": float(min(top, bottom)), "top": float(max(top, bottom))}
    total = int(len(gdf))
    summary = {"total_points": total, "valid_points": len(feats),
               "filtered_points": total - len(feats), "image_bounds": bounds,
               "image_size": [meta.width, meta.height], "source_crs": "EPSG:4326",
               "target_crs": str(meta.crs)}
    out_path = ctx.output_path(tool, {"layer": path, "raster": rp}, ".geojson")
    doc = {"type": "FeatureCollection", "features": feats,
           "metadata": {"source_geojson": geojson_path, "source_raster": raster_path, **summary}}
    out_path.write_text(json.dumps(jsonable(doc), ensure_ascii=False, separators=(",", ":")),
                        encoding="utf-8")
    return {"tool": tool, "features": feats, "output_path": ctx.artifact_name(out_path),
            **summary}


# --------------------------------------------------------------------------------------------
def _get(obj: Any, path: str) -> Any:
    cur = obj
    for k in path.split("."):
        if isinstance(cur, dict) and k in cur:
            cur = cur[k]
        else:
            return None
    return cur


def damage_class_of(pixel_values: Any) -> int | None:
    """Damage class of a sampled loop result: a single-band sample {"1": v} gives v; a
    class → count dict gives its most frequent class (first on ties)."""
    if not isinstance(pixel_values, dict) or not pixel_values:
        return None
    if len(pixel_values) == 1:
        v = next(iter(pixel_values.values()))
        try:
            return int(v)
        except (TypeError, ValueError):
            return None
    best, best_n = None, None
    for k, n in pixel_values.items():
        try:
            cls, cnt = int(k), float(n)
        except (TypeError, ValueError):
            continue
        if best_n is None or cnt > best_n:
            best, best_n = cls, cnt
    return best


def _sampled_class(entry: Any) -> int | None:
    if not isinstance(entry, dict):
        return None
    last = entry.get("last_obs")
    return damage_class_of(last.get("pixel_values")) if isinstance(last, dict) else None


@register("poi.group_by", server="POI", module="vector",
          result_keys=["tool", "group_field", "count_field", "return_item_details", "return_sum",
                       "total_items", "total_groups", "groups"],
          notes={"data": "e.g. tool.loop results",
                 "group_field": "dotted path, e.g. item.properties.types",
                 "count_field": "dotted path to sum; 'damage_class' reads last_obs.pixel_values"})
def poi_group_by(ctx: ToolContext, data: list[dict], group_field: str,
                 count_field: str | None = None, return_item_details: bool = False,
                 return_sum: bool = False) -> dict:
    """Count items per value of a (nested) field, in first-seen order. A comma-separated string
    is grouped by its first token, a list by its first element. With ``count_field`` the values
    are summed (``sum`` shown when ``return_sum`` and non-zero, rounded to 2 decimals)."""
    tool = "poi.group_by"
    groups: "OrderedDict[str, dict]" = OrderedDict()
    for entry in data:
        key = _get(entry, group_field)
        if count_field == "damage_class":
            val = _sampled_class(entry)
        elif count_field:
            val = _get(entry, count_field)
        else:
            val = None
        if key is None:
            continue
        if isinstance(key, list):
            if not key:
                continue
            key = key[0]
        if isinstance(key, str) and "," in key:
            key = key.split(",")[0].strip()
        g = groups.setdefault(str(key), {"count": 0, "sum": 0.0, "items": []})
        g["count"] += 1
        if val is not None:
            try:
                g["sum"] += float(val)
            except (TypeError, ValueError):
                raise ToolInputError(f"{count_field!r} of an item is {val!r}, not a number",
                                     tool=tool, argument="count_field")
        g["items"].append(entry)
    out = {}
    for k, g in groups.items():
        rec = {"count": g["count"]}
        if return_sum and g["sum"]:
            rec["sum"] = round(g["sum"], 2)
        if return_item_details:
            rec["items"] = g["items"]
        out[k] = rec
    return {"tool": tool, "group_field": group_field, "count_field": count_field,
            "return_item_details": bool(return_item_details), "return_sum": bool(return_sum),
            "total_items": len(data), "total_groups": len(out), "groups": out}


@register("poi.filter_by_damage", server="POI", module="vector",
          result_keys=["tool", "total_input", "total_filtered", "total_damaged",
                       "filtered_results"],
          notes={"data": "tool.loop results {item, last_obs}",
                 "min_damage_class": "2 = partially damaged or worse"})
def poi_filter_by_damage(ctx: ToolContext, data: list[dict], min_damage_class: int = 2) -> dict:
    """Loop results whose sampled damage class (building-damage convention 1 intact,
    2 partially damaged, 3 destroyed) is >= ``min_damage_class``."""
    kept = [e for e in data if (c := _sampled_class(e)) is not None and c >= int(min_damage_class)]
    return {"tool": "poi.filter_by_damage", "total_input": len(data), "total_filtered": len(kept),
            "total_damaged": len(kept), "filtered_results": kept}


@register("poi.filter_by_intact", server="POI", module="vector",
          result_keys=["tool", "total_input", "total_intact", "filtered_results"],
          notes={"data": "tool.loop results"})
def poi_filter_by_intact(ctx: ToolContext, data: list[dict]) -> dict:
    """Loop results whose sampled damage class is 1 (intact)."""
    kept = [e for e in data if _sampled_class(e) == 1]
    return {"tool": "poi.filter_by_intact", "total_input": len(data), "total_intact": len(kept),
            "filtered_results": kept}


@register("poi.filter_by_attribute", server="POI", module="vector",
          result_keys=["tool", "total_input", "total_filtered", "attribute_name",
                       "allowed_values", "filtered_results"],
          notes={"data": "tool.loop results",
                 "attribute_name": "looked up in item.properties (or item)"})
def poi_filter_by_attribute(ctx: ToolContext, data: list[dict], attribute_name: str,
                            allowed_values: list[str]) -> dict:
    """Loop results whose item attribute (list, or comma-separated string) contains an allowed
    value; exact, case-sensitive tokens (unlike ``vec.filter_by_attribute``)."""
    allowed = set(allowed_values)
    kept = []
    for e in data:
        item = e.get("item", {}) if isinstance(e, dict) else {}
        if not isinstance(item, dict):
            continue
        props = item.get("properties", item)
        if not isinstance(props, dict):
            continue
        v = props.get(attribute_name, "")
        if isinstance(v, str):
            tokens = [t.strip() for t in v.split(",")]
        elif isinstance(v, list):
            tokens = v
        else:
            tokens = [str(v)]
        if any(t in allowed for t in tokens):
            kept.append(e)
    return {"tool": "poi.filter_by_attribute", "total_input": len(data),
            "total_filtered": len(kept), "attribute_name": attribute_name,
            "allowed_values": list(allowed_values), "filtered_results": kept}


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
