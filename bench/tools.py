"""Median run times of every raster and vector tool on real data.

    .venv/bin/python bench/tools.py [--repeats 5] [--only PREFIX]

Inputs (read from ../shared/realdata, nothing is copied into the repository; derived inputs
are written to a temporary directory):

* ``xview2-deploy-joplin/output_chips_post_0_post.tif`` and ``..._pre_0_pre.tif``: 1024×1024
  RGB chips, EPSG:32615; band 1 of the post chip also stands in for a DEM;
* ``output_dmg_0_pre.tif``: band 1 (damage classes 0..4 of the xView2 model) as the mask;
* ``bldg_polys.gpkg``: 77 Joplin footprints, reprojected to EPSG:32615 (GeoJSON);
* ``osm-helsinki/test.osm.pbf``: roads (for the georeferenced road graph) and POIs.

Each tool runs ``--repeats`` times (the first run included, so file caches are warm after it);
the table gives the median, the minimum and the tool's outcome. No asserts: a tool that fails
is listed with its error.
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
REAL = ROOT.parent / "shared" / "realdata"

from kernel.tools import ToolError, all_tools, call_tool  # noqa: E402
from kernel.tools.testing import make_ctx  # noqa: E402


def prepare(data: Path) -> dict:
    import geopandas as gpd
    import numpy as np
    import rasterio

    jop = REAL / "xview2-deploy-joplin"
    post, pre = jop / "output_chips_post_0_post.tif", jop / "output_chips_pre_0_pre.tif"
    for src in (post, pre):  # into the temporary data dir (the resolver rejects symlinks out)
        shutil.copyfile(src, data / src.name)
    with rasterio.open(jop / "output_dmg_0_pre.tif") as src:
        dmg = src.read(1).astype("uint8")
        prof = {"driver": "GTiff", "height": src.height, "width": src.width, "count": 1,
                "dtype": "uint8", "crs": src.crs, "transform": src.transform}
    with rasterio.open(data / "dmg.tif", "w", **prof) as dst:
        dst.write(dmg, 1)
    with rasterio.open(data / "destroyed.tif", "w", **prof) as dst:
        dst.write(np.where(dmg == 4, 255, 0).astype("uint8"), 1)
    with rasterio.open(data / "intact.tif", "w", **prof) as dst:
        dst.write(np.where(dmg == 1, 255, 0).astype("uint8"), 1)
    fp = gpd.read_file(jop / "bldg_polys.gpkg").to_crs("EPSG:32615")
    fp["name"] = [f"b{i}" for i in range(len(fp))]
    fp["kind"] = ["even" if i % 2 == 0 else "odd" for i in range(len(fp))]
    fp[["name", "kind", "geometry"]].to_file(data / "footprints.geojson", driver="GeoJSON")
    fp_pts = fp.copy()
    fp_pts["geometry"] = fp.geometry.centroid
    fp_pts[["name", "geometry"]].to_file(data / "footprint_points.geojson", driver="GeoJSON")
    fp_pts.to_crs("EPSG:4326")[["name", "geometry"]].to_file(data / "footprint_poi.geojson",
                                                             driver="GeoJSON")
    roi = gpd.GeoDataFrame(geometry=[fp.union_all().envelope.buffer(-40)], crs=fp.crs)
    roi.to_file(data / "roi.geojson", driver="GeoJSON")
    from annotation.importers.osm import extract

    roads, pois, _ = extract(REAL / "osm-helsinki" / "test.osm.pbf")
    crs84 = {"type": "name", "properties": {"name": "urn:ogc:def:crs:OGC:1.3:CRS84"}}
    (data / "roads.geojson").write_text(json.dumps({**roads, "crs": crs84}))
    (data / "pois.geojson").write_text(json.dumps(pois))
    first = fp_pts.to_crs("EPSG:4326").geometry.iloc[0]
    return {"lat": first.y, "lon": first.x}


def plan(ctx, info) -> list[tuple[str, dict]]:
    """(tool, args) in dependency order; args may be callables of earlier observations."""
    return [
        ("ras.count_pixels", {"mask_path": "dmg.tif", "classes": [1, 2, 3, 4]}),
        ("ras.area", {"mask_path": "dmg.tif", "pixel_size_m": 0.6, "classes": [4]}),
        ("ras.threshold", {"image_path": "output_chips_post_0_post.tif", "threshold": 128}),
        ("mask.compose_multiclass", {"mask_paths": ["intact.tif", "destroyed.tif"],
                                     "class_values": [1, 3]}),
        ("ras.vectorize", {"mask_path": "dmg.tif", "classes": [4]}),
        ("ras.stats", {"image_path": "output_chips_post_0_post.tif"}),
        ("ras.sample_point", {"image_path": "output_chips_post_0_post.tif", "row": 512,
                              "col": 512}),
        ("ras.sample_points", {"image_path": "output_chips_post_0_post.tif",
                               "points": [{"row": r, "col": c} for r in range(0, 1024, 128)
                                          for c in range(0, 1024, 128)]}),
        ("ras.clip", {"image_path": "output_chips_post_0_post.tif", "x1": 0, "x2": 512,
                      "y1": 0, "y2": 512}),
        ("ras.grid_windows", {"image_path": "output_chips_post_0_post.tif", "n": 4}),
        # the damage raster shares the pre chip's grid (the post chip is offset by < 1 px)
        ("ras.diff", {"image_a_path": "output_chips_pre_0_pre.tif", "image_b_path": "dmg.tif"}),
        ("ras.concat", lambda o: {"image_path_list": ["output_chips_post_0_post.tif",
                                                      o["ras.threshold"]["mask_path"]]}),
        ("ras.slope", {"dem_path": "output_chips_post_0_post.tif"}),
        ("ras.hillshade", {"dem_path": "output_chips_post_0_post.tif"}),
        ("ras.reproject", {"raster_path": "output_chips_post_0_post.tif",
                           "dst_crs": "EPSG:4326"}),
        ("ras.resample", {"raster_path": "output_chips_post_0_post.tif",
                          "target_pixel_size_m": 1.2}),
        ("ras.focal_stats", {"raster_path": "output_chips_post_0_post.tif", "statistic": "std",
                             "window_size": 5}),
        ("vec.buffer", {"vector_path": "footprints.geojson", "meter": 10}),
        ("vec.kbuffer", {"vector_path": "footprints.geojson", "meters": [10, 50, 100]}),
        ("vec.intersect", {"vector_a_path": "footprints.geojson",
                           "vector_b_path": "roi.geojson"}),
        ("vec.filter_by_attribute", {"vector_path": "footprints.geojson",
                                     "attribute_name": "kind", "allowed_values": ["even"]}),
        ("vec.connected_components", {"vector_path": "footprints.geojson"}),
        ("vec.max_polygon", {"vector_path": "footprints.geojson", "topk": 5}),
        ("vec.centroid", {"vector_path": "footprints.geojson", "feature_idx": -1,
                          "raster_path": "output_chips_post_0_post.tif"}),
        ("vec.pixel_to_world", {"raster_path": "output_chips_post_0_post.tif",
                                "pixel_row": 100, "pixel_col": 200}),
        ("vec.length", {"vector_path": "roads.geojson"}),
        ("vec.perimeter", {"vector_path": "footprints.geojson"}),
        ("vec.filter_by_area", {"vector_path": "footprints.geojson", "min_area_m2": 150,
                                "pixel_size_m": 0.6}),
        ("vec.filter_by_distance", {"vector_path": "footprints.geojson",
                                    "center_lat": info["lat"], "center_lon": info["lon"],
                                    "max_distance_m": 200}),
        ("vec.nearest", {"vector_a_path": "footprints.geojson",
                         "vector_b_path": "footprint_points.geojson", "topk": 3}),
        ("vec.clip", {"vector_path": "footprints.geojson", "roi_vector_path": "roi.geojson"}),
        ("vec.raster_stats", {"vector_path": "footprints.geojson", "raster_path": "dmg.tif",
                              "stats": ["mean", "max"]}),
        ("vec.convex_hull", {"vector_path": "footprints.geojson"}),
        ("vec.voronoi", {"points_path": "footprint_points.geojson",
                         "boundary_path": "roi.geojson"}),
        ("vec.dissolve", {"vector_path": "footprints.geojson", "by": "kind"}),
        ("vec.simplify", {"vector_path": "footprints.geojson", "tolerance": 1.0}),
        ("vec.point_in_polygon", {"points_path": "footprint_points.geojson",
                                  "polygons_path": "roi.geojson"}),
        ("vec.road_centerline_extraction", {"mask_path": "dmg.tif", "intact_classes": [1],
                                            "damaged_classes": [2, 3, 4]}),
        ("vec.build_graph", lambda o: {"centerline_path":
                                       o["vec.road_centerline_extraction"]["centerline_path"]}),
        ("vec.graph_shortest_path", lambda o: _route_args(ctx, o["vec.build_graph"])),
        ("vec.repair_min_edges", lambda o: {"graph_path": o["vec.build_graph"]["graph_path"]}),
        ("vec.build_graph [OSM roads]", {"centerline_path": "roads.geojson"}),
        ("vec.graph_shortest_path [OSM]", lambda o: _route_args(ctx, o["vec.build_graph [OSM roads]"])),
        ("vec.repair_min_edges [OSM]", lambda o: {"graph_path":
                                                  o["vec.build_graph [OSM roads]"]["graph_path"]}),
        ("poi.search_by_name", {"geojson_path": "pois.geojson", "name": "a"}),
        ("poi.to_vector", {"geojson_path": "pois.geojson"}),
        ("poi.world_to_pixel", {"geojson_path": "footprint_poi.geojson",
                                "raster_path": "output_chips_post_0_post.tif"}),
        ("poi.group_by", lambda o: {"data": _items(o), "group_field": "item.kind"}),
        ("poi.filter_by_damage", lambda o: {"data": _items(o), "min_damage_class": 2}),
        ("poi.filter_by_intact", lambda o: {"data": _items(o)}),
        ("poi.filter_by_attribute", lambda o: {"data": _items(o), "attribute_name": "item.kind",
                                               "allowed_values": ["even"]}),
        ("poi.damage_population_exposure",
         lambda o: {"damage_feature_stats": _stats(o, "max"),
                    "population_feature_stats": _stats(o, "mean"), "join_field": "name"}),
    ]


def _route_args(ctx, built):
    """Start and end of a route between the first and last node of the largest component of a
    vec.build_graph graph (the benchmark's layout: node attribute xy_json "[row, col]")."""
    import json

    import networkx as nx

    g = nx.read_graphml(ctx.work_dir / built["graph_path"])
    comp = max(nx.connected_components(g), key=len)
    ids = sorted(comp, key=int)
    a, b = (json.loads(g.nodes[n]["xy_json"]) for n in (ids[0], ids[-1]))
    return {"graph_path": built["graph_path"], "start": a, "end": b, "pixel_size_m": 0.6}


def _items(o):
    feats = o["vec.raster_stats"].get("feature_stats", [])
    return [{"item": {"name": f"b{f['feature_idx']}",
                      "kind": "even" if f["feature_idx"] % 2 == 0 else "odd"},
             "last_obs": {"pixel_values": {"1": int(f["max"])}}} for f in feats]


def _stats(o, key):
    return [{"name": f"b{f['feature_idx']}", "max": f["max"], "mean": f["mean"],
             "type": "building"} for f in o["vec.raster_stats"].get("feature_stats", [])]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--only", default="", help="run only tools whose name starts with this")
    args = ap.parse_args()
    if not (REAL / "xview2-deploy-joplin" / "output_chips_post_0_post.tif").is_file():
        sys.exit(f"real data not found under {REAL}")
    tools = all_tools()
    with tempfile.TemporaryDirectory() as tmp:
        ctx = make_ctx(Path(tmp))
        info = prepare(Path(tmp) / "data")
        obs, rows = {}, []
        for label, a in plan(ctx, info):
            name = label.split(" [")[0]
            if args.only and not name.startswith(args.only):
                if callable(a):
                    continue
            try:
                a = a(obs) if callable(a) else a
            except Exception as exc:  # an earlier step failed
                rows.append((label, None, None, f"skipped: {exc!r}"[:60]))
                continue
            times, outcome = [], "ok"
            for _ in range(max(1, args.repeats)):
                t0 = time.perf_counter()
                try:
                    result = call_tool(name, a, ctx)
                except ToolError as exc:
                    outcome = f"error: {exc}"[:60]
                    times.append(time.perf_counter() - t0)
                    break
                times.append(time.perf_counter() - t0)
                obs[label] = result
            rows.append((label, statistics.median(times) * 1000, min(times) * 1000, outcome))
        covered = {r[0].split(" [")[0] for r in rows}
        missing = sorted(n for n, s in tools.items()
                         if s.module in ("raster", "vector") and n not in covered)
    w = max(len(r[0]) for r in rows)
    print(f"{'tool':<{w}}  {'median ms':>10}  {'min ms':>9}  outcome")
    print("-" * (w + 40))
    for label, med, mn, outcome in rows:
        med_s = f"{med:10.1f}" if med is not None else f"{'-':>10}"
        mn_s = f"{mn:9.1f}" if mn is not None else f"{'-':>9}"
        print(f"{label:<{w}}  {med_s}  {mn_s}  {outcome}")
    if missing and not args.only:
        print("\nraster/vector tools not benchmarked:", ", ".join(missing))


if __name__ == "__main__":
    main()
