"""OpenStreetMap PBF → road network and POI GeoJSON, with pyosmium.

Roads: every way with a ``highway`` tag as a LineString with ``osmid``, ``highway``, ``name`` and
the routing tags present (oneway, maxspeed, lanes, ref, surface, bridge, tunnel, access).
Ways whose nodes lie partly outside a clipped extract keep the nodes present.
POIs: nodes with one of :data:`POI_KEYS` as Points; closed ways with one as the centroid Point of
their polygon (``osm_type`` says which). ``category`` is the first POI key's value.
"""
from __future__ import annotations

from pathlib import Path

from .common import with_crs84, write_json
from .errors import DataImportError

ROAD_TAGS = ("oneway", "maxspeed", "lanes", "ref", "surface", "bridge", "tunnel", "access", "service")
POI_KEYS = ("amenity", "healthcare", "emergency", "shop", "tourism", "office", "leisure")
POI_EXTRA = ("name", "operator", "addr:street", "addr:housenumber", "opening_hours", "building")


def extract(path: str | Path) -> tuple[dict, dict, dict]:
    """Returns (roads FeatureCollection, POIs FeatureCollection, stats)."""
    import osmium
    from shapely.geometry import Polygon

    path = Path(path)
    roads, pois = [], []
    stats = {"ways_clipped": 0}
    try:
        fp = osmium.FileProcessor(str(path)).with_locations().with_filter(
            osmium.filter.KeyFilter("highway", *POI_KEYS))
        for obj in fp:
            tags = {t.k: t.v for t in obj.tags}
            if obj.is_node():
                key = next((k for k in POI_KEYS if k in tags), None)
                if key is None:
                    continue
                pois.append(_poi(obj.id, "node", [obj.location.lon, obj.location.lat], tags, key))
            elif obj.is_way():
                # a clipped extract lacks the nodes outside its box: keep the part inside
                coords = [[n.location.lon, n.location.lat] for n in obj.nodes if n.location.valid()]
                if len(coords) < len(obj.nodes):
                    stats["ways_clipped"] += 1
                if "highway" in tags and len(coords) >= 2:
                    props = {"osmid": obj.id, "highway": tags["highway"], "name": tags.get("name")}
                    props.update({k: tags[k] for k in ROAD_TAGS if k in tags})
                    roads.append({"type": "Feature", "geometry": {"type": "LineString", "coordinates": coords},
                                  "properties": props})
                key = next((k for k in POI_KEYS if k in tags), None)
                if key is not None and len(coords) >= 4 and coords[0] == coords[-1]:
                    c = Polygon(coords).centroid
                    pois.append(_poi(obj.id, "way", [c.x, c.y], tags, key))
    except RuntimeError as exc:
        raise DataImportError(path, "pbf", f"cannot be read as an OSM file ({exc})") from None
    stats.update(roads=len(roads), pois=len(pois))
    return ({"type": "FeatureCollection", "features": roads},
            {"type": "FeatureCollection", "features": pois}, stats)


def _poi(osmid: int, osm_type: str, coords, tags: dict, key: str) -> dict:
    props = {"osmid": osmid, "osm_type": osm_type, "category": tags[key], "category_key": key}
    props.update({k: tags[k] for k in POI_KEYS if k in tags})
    props.update({k: tags[k] for k in POI_EXTRA if k in tags})
    props.setdefault("name", None)
    return {"type": "Feature", "geometry": {"type": "Point", "coordinates": coords}, "properties": props}


def write(fc: dict, path: str | Path) -> dict:
    write_json(path, with_crs84(fc))
    xs = []
    ys = []
    for f in fc["features"]:
        g = f["geometry"]
        pts = [g["coordinates"]] if g["type"] == "Point" else g["coordinates"]
        xs.extend(p[0] for p in pts)
        ys.extend(p[1] for p in pts)
    bounds = [min(xs), min(ys), max(xs), max(ys)] if xs else None
    return {"feature_count": len(fc["features"]), "bounds": bounds}
