"""poi.* tools and vec.raster_stats; the loop chain world_to_pixel → sample → filter/group."""
import json

import numpy as np
import pytest
from conftest import REALDATA, requires_shared
from shapely.geometry import Point, box

from kernel.tools import ToolInputError, call_tool
from kernel.tools.testing import make_ctx, write_geojson, write_png, write_tif

FIRESTATIONS = (REALDATA
                / "houston-harvey-flooded-roads" / "firestations.geojson")

# damage mask on a 4x4 UTM grid, 10 m pixels, origin (500000, 3300040)
DMG = np.array([[1, 1, 0, 3],
                [1, 2, 0, 3],
                [0, 0, 0, 0],
                [0, 0, 0, 1]], dtype=np.uint8)


@pytest.fixture
def ctx(tmp_path):
    c = make_ctx(tmp_path)
    d = tmp_path / "data"
    write_tif(d / "dmg.tif", DMG, res=10.0, origin=(500000.0, 3300040.0))
    # three POIs at pixel centres of the UTM 15N grid, one outside the image, written as WGS84
    # lon/lat: the benchmark's poi.world_to_pixel reads every point's x/y as lon/lat (a layer in
    # UTM would be read as lon/lat too and fail to project; see test_world_to_pixel_utm_layer)
    from pyproj import Transformer

    to_ll = Transformer.from_crs("EPSG:32615", "EPSG:4326", always_xy=True)
    utm = [(500015, 3300025, "Clinic", "hospital, health"),  # row 1, col 1 -> 2
           (500035, 3300035, "School", "school"),  # row 0, col 3 -> 3
           (500005, 3300035, "Shop", "store"),  # row 0, col 0 -> 1
           (500500, 3300035, "Far", "store")]
    write_geojson(d / "pois_utm.geojson", [
        {"geometry": Point(*to_ll.transform(x, y)), "properties": {"name": n, "types": t}}
        for x, y, n, t in utm])
    return c


def test_world_to_pixel_loop_and_filters(ctx):
    w = call_tool("poi.world_to_pixel", {"geojson_path": "pois_utm.geojson", "raster_path": "dmg.tif"},
                  ctx)
    assert (w["total_points"], w["valid_points"], w["filtered_points"]) == (4, 3, 1)
    assert w["image_size"] == [4, 4] and w["target_crs"] == "EPSG:32615"
    rc = [(f["properties"]["pixel_row"], f["properties"]["pixel_col"]) for f in w["features"]]
    assert rc == [(1, 1), (0, 3), (0, 0)]
    # the benchmark writes the constant 0.8 whatever the raster's 10 m pixels (quirks.py)
    assert w["features"][0]["properties"]["pixel_size_m"] == 0.8
    assert w["features"][0]["properties"]["utm_x"] == pytest.approx(500015, abs=1e-3)
    loop = call_tool("tool.loop", {
        # benchmark parity: called as a tool, tool.loop takes a list (the benchmark's MCP schema
        # refuses a reference string; only gold replay expands one)
        "loop_over": w["features"],
        "trajectory": [{"obs": w}],
        "calls": [{"call": "ras.sample_point", "args": {"image_path": "dmg.tif",
                                                        "row": "<item.properties.pixel_row>",
                                                        "col": "<item.properties.pixel_col>"}}]}, ctx)
    assert [r["last_obs"]["pixel_values"] for r in loop] == [{"1": 2}, {"1": 3}, {"1": 1}]
    dmg = call_tool("poi.filter_by_damage", {"data": loop}, ctx)
    assert (dmg["total_input"], dmg["total_filtered"]) == (3, 2)
    assert [r["item"]["properties"]["name"] for r in dmg["filtered_results"]] == ["Clinic", "School"]
    assert call_tool("poi.filter_by_damage", {"data": loop, "min_damage_class": 3},
                     ctx)["total_damaged"] == 1
    intact = call_tool("poi.filter_by_intact", {"data": loop}, ctx)
    assert intact["total_intact"] == 1 and intact["filtered_results"][0]["item"]["properties"]["name"] == "Shop"
    att = call_tool("poi.filter_by_attribute", {"data": loop, "attribute_name": "types",
                                                "allowed_values": ["hospital", "school"]}, ctx)
    assert att["total_filtered"] == 2
    assert call_tool("poi.filter_by_attribute", {"data": loop, "attribute_name": "types",
                                                 "allowed_values": ["Hospital"]}, ctx)["total_filtered"] == 0
    grp = call_tool("poi.group_by", {"data": loop, "group_field": "item.properties.types",
                                     "count_field": "damage_class", "return_sum": True}, ctx)
    # first tokens: hospital (class 2), school (3), store (1)
    assert grp["groups"] == {"hospital": {"count": 1, "sum": 2.0}, "school": {"count": 1, "sum": 3.0},
                             "store": {"count": 1, "sum": 1.0}}
    write_png(ctx.work_dir.parent / "data" / "plain.png", DMG)
    with pytest.raises(ToolInputError) as ei:  # no CRS: no world position
        call_tool("poi.world_to_pixel", {"geojson_path": "pois_utm.geojson",
                                         "raster_path": "plain.png"}, ctx)
    assert ei.value.argument == "raster_path"


def test_raster_stats_and_exposure(ctx):
    d = ctx.work_dir.parent / "data"
    crs = "urn:ogc:def:crs:EPSG::32615"
    write_geojson(d / "zones.geojson", [
        {"geometry": box(500000, 3300020, 500020, 3300040), "properties": {"name": "A"}},  # rows 0-1, cols 0-1
        {"geometry": box(500030, 3300020, 500040, 3300040), "properties": {"name": "B"}},  # rows 0-1, col 3
        {"geometry": Point(500035, 3300005), "properties": {"name": "C"}}], crs=crs)       # row 3, col 3
    rs = call_tool("vec.raster_stats", {"vector_path": "zones.geojson", "raster_path": "dmg.tif",
                                        "stats": ["mean", "max"]}, ctx)
    fs = {f["name"]: f for f in rs["feature_stats"]}
    # A covers 1,1,1,2 -> mean 1.25, max 2; B covers 3,3; C samples the single pixel 1
    assert (fs["A"]["pixel_count"], fs["A"]["mean"], fs["A"]["max"]) == (4, 1.25, 2.0)
    assert (fs["B"]["mean"], fs["C"]["pixel_row"], fs["C"]["pixel_col"], fs["C"]["max"]) == (3.0, 3, 3, 1.0)
    assert fs["A"]["sampled_area_m2"] == 400.0 and rs["pixel_area_m2"] == 100.0
    # pooled over 7 pixels: 1+1+1+2+3+3+1 = 12 -> mean 12/7
    assert rs["mean"] == pytest.approx(12 / 7) and rs["max"] == 3.0 and rs["feature_count"] == 3
    with pytest.raises(ToolInputError):
        call_tool("vec.raster_stats", {"vector_path": "zones.geojson", "raster_path": "dmg.tif",
                                       "stats": ["median"]}, ctx)
    pop = [{"name": "A", "max": 50, "feature_idx": 0}, {"name": "B", "max": 900, "feature_idx": 1},
           {"name": "C", "max": 10, "feature_idx": 2}]
    ex = call_tool("poi.damage_population_exposure", {"damage_feature_stats": rs["feature_stats"],
                                                      "population_feature_stats": pop}, ctx)
    # damage max >= 2: A (2) and B (3); ranked by population: B then A
    assert [e["name"] for e in ex["exposed_pois"]] == ["B", "A"] and ex["top_exposed_poi"]["name"] == "B"


@requires_shared(FIRESTATIONS)
def test_real_firestations(tmp_path):
    # counted once with json.load over the 111 features: 13 names contain "station 2",
    # 6 contain "galveston"
    ctx = make_ctx(tmp_path, data_dir=FIRESTATIONS.parent)
    s = call_tool("poi.search_by_name", {"geojson_path": "firestations.geojson", "name": "STATION 2"}, ctx)
    assert s["total_found"] == 13 and s["output_path"].endswith(".geojson")
    e = call_tool("poi.search_by_name", {"geojson_path": "firestations.geojson",
                                         "name": "Houston Fire Station 2", "exact": True}, ctx)
    assert e["total_found"] == 1
    assert (e["results"][0]["longitude"], e["results"][0]["latitude"]) == (-95.481016, 29.762093)
    v = call_tool("poi.to_vector", {"geojson_path": "firestations.geojson", "name": "galveston"}, ctx)
    assert v["count"] == 6
    doc = json.loads((ctx.work_dir / v["vector_path"]).read_text())
    # the layer's CRS as geopandas reads these 3-D points (WGS84 3-D, EPSG:4979), kept as the
    # benchmark's to_file keeps it; still geographic, so vec.buffer measures metres
    assert doc["crs"]["properties"]["name"] == "urn:ogc:def:crs:EPSG::4979"
    b = call_tool("vec.buffer", {"vector_path": v["vector_path"], "meter": 500}, ctx)
    assert b["distance_used_units"] == 500.0
    none = call_tool("poi.search_by_name", {"geojson_path": "firestations.geojson", "name": "zzz"}, ctx)
    # the benchmark's str(None) when nothing matched (quirks.py)
    assert none["total_found"] == 0 and none["output_path"] == "None"


def test_world_to_pixel_utm_layer(ctx, tmp_path):
    # a layer in UTM metres is read as lon/lat (500015 degrees): pyproj gives inf, the benchmark's
    # int(inf) fails the call, so the studio's does too
    from kernel.tools import ToolError

    write_geojson(ctx.work_dir.parent / "data" / "utm.geojson",
                  [{"geometry": Point(500015, 3300025), "properties": {"name": "X"}}],
                  crs="urn:ogc:def:crs:EPSG::32615")
    with pytest.raises(ToolError):
        call_tool("poi.world_to_pixel", {"geojson_path": "utm.geojson", "raster_path": "dmg.tif"}, ctx)
