"""Vector tools on tiny hand-made layers; expected values worked out by hand in comments."""
import json
import math

import pytest
from shapely.geometry import Point, box, shape

from kernel.tools import ToolInputError, call_tool
from kernel.tools.testing import make_ctx, write_geojson, write_tif


@pytest.fixture
def ctx(tmp_path):
    return make_ctx(tmp_path)


def data(ctx):
    return ctx.work_dir.parent / "data"  # make_ctx's input folder


def layer(ctx, name):
    return json.loads((ctx.work_dir / name).read_text())


# ---------------------------------------------------------------- vec.buffer
def test_buffer_pixel_space_uses_pixel_size(ctx):
    d = data(ctx)
    write_geojson(d / "p.geojson", [{"geometry": Point(10, 10), "properties": {"pixel_size_m": 0.5}}])
    obs = call_tool("vec.buffer", {"vector_path": "p.geojson", "meter": 2}, ctx)
    # 2 m / 0.5 m per px = 4 px
    assert obs["distance_input_m"] == 2.0 and obs["distance_used_units"] == 4.0
    assert obs["input_vector"] == "p.geojson"
    doc = layer(ctx, obs["buffer_path"])
    assert "crs" not in doc
    f = doc["features"][0]
    assert shape(f["geometry"]).bounds == pytest.approx((6, 6, 14, 14))
    assert shape(f["geometry"]).area == pytest.approx(math.pi * 16, rel=0.01)
    assert f["properties"]["buffer_input_m"] == 2.0 and f["properties"]["buffer_used_units"] == 4.0


def test_buffer_geographic_in_utm(ctx):
    import geopandas as gpd

    d = data(ctx)
    write_geojson(d / "g.geojson", [{"geometry": Point(-95.0, 29.5), "properties": {}}],
                  crs="urn:ogc:def:crs:OGC:1.3:CRS84")
    obs = call_tool("vec.buffer", {"vector_path": "g.geojson", "meter": 100}, ctx)
    assert obs["distance_used_units"] == 100.0
    g = gpd.read_file(ctx.work_dir / obs["buffer_path"])
    # written back in lon/lat; in UTM 15N its area is a 100 m disc: pi * 100^2 = 31416 m2
    assert g.crs.is_geographic
    assert g.to_crs(32615).geometry.iloc[0].area == pytest.approx(math.pi * 1e4, rel=0.01)


def test_buffer_errors_and_empty(ctx):
    d = data(ctx)
    # benchmark parity: a file that does not exist is an empty layer, as the benchmark's
    # _read_vector_no_default_crs makes it (QC manifest.file_missing flags the step)
    obs = call_tool("vec.buffer", {"vector_path": "none.geojson", "meter": 1}, ctx)
    assert obs["buffer_path"] is None
    with pytest.raises(ToolInputError) as ei:  # a path outside the data roots still fails
        call_tool("vec.buffer", {"vector_path": "/etc/passwd", "meter": 1}, ctx)
    assert ei.value.argument == "vector_path"
    with pytest.raises(ToolInputError):
        call_tool("vec.buffer", {"vector_path": "x", "meter": "far"}, ctx)
    write_geojson(d / "empty.geojson", [])
    obs = call_tool("vec.buffer", {"vector_path": "empty.geojson", "meter": 1}, ctx)
    assert obs["buffer_path"] is None and "note" in obs


# ---------------------------------------------------------------- vec.intersect
def test_intersect_pixel_space(ctx):
    d = data(ctx)
    write_geojson(d / "a.geojson", [{"geometry": box(0, 0, 10, 10), "properties": {"id": 1}},
                                    {"geometry": box(20, 0, 30, 10), "properties": {"id": 2}},
                                    {"geometry": box(50, 50, 60, 60), "properties": {"id": 3}}])
    # B: two overlapping strips, merged into one feature before the overlay
    write_geojson(d / "b.geojson", [{"geometry": box(5, 0, 25, 5), "properties": {}},
                                    {"geometry": box(6, 0, 24, 5), "properties": {}}])
    obs = call_tool("vec.intersect", {"vector_a_path": "a.geojson", "vector_b_path": "b.geojson",
                                      "pixel_size_m": 0.5}, ctx)
    # pieces [5,10]x[0,5] and [20,25]x[0,5]: 25 + 25 = 50 px2 -> 50 * 0.25 = 12.5 m2
    assert obs["intersection_count"] == 2
    assert obs["intersecting_a_count"] == 2 and obs["intersecting_b_count"] == 1
    assert obs["intersection_area_px2"] == 50.0 and obs["intersection_area_m2"] == 12.5
    assert len(layer(ctx, obs["intersection_path"])["features"]) == 2
    obs = call_tool("vec.intersect", {"vector_a_path": "a.geojson", "vector_b_path": "b.geojson"},
                    ctx)
    assert obs["intersection_area_m2"] is None and obs["pixel_size_m"] is None


def test_intersect_georeferenced_and_frame_mix(ctx):
    d = data(ctx)
    crs = "urn:ogc:def:crs:EPSG::32615"
    write_geojson(d / "a.geojson", [{"geometry": box(500000, 3300000, 500010, 3300010)}], crs=crs)
    write_geojson(d / "b.geojson", [{"geometry": box(500005, 3300000, 500020, 3300004)}], crs=crs)
    obs = call_tool("vec.intersect", {"vector_a_path": "a.geojson", "vector_b_path": "b.geojson",
                                      "pixel_size_m": 2.0}, ctx)
    # overlap 5 m x 4 m = 20 m2; in 2 m pixels: 5 px2
    assert obs["intersection_area_m2"] == pytest.approx(20.0)
    assert obs["intersection_area_px2"] == pytest.approx(5.0)
    write_geojson(d / "pix.geojson", [{"geometry": box(0, 0, 1, 1)}])
    # a pixel-space layer with a UTM one is no longer refused: the benchmark overlays the raw
    # coordinates (analysis.py:vec_intersect), finds nothing and, without a pixel
    # size, reports a null m2 area; QC flags the step (vec_mixed_frames)
    obs = call_tool("vec.intersect", {"vector_a_path": "a.geojson", "vector_b_path": "pix.geojson"},
                    ctx)
    assert obs["intersection_count"] == 0 and obs["intersection_area_px2"] == 0.0
    assert obs["intersection_area_m2"] is None and obs["pixel_size_m"] is None


# ---------------------------------------------------------------- vec.filter_by_attribute
def test_filter_by_attribute(ctx):
    d = data(ctx)
    write_geojson(d / "poi.geojson", [
        {"geometry": Point(0, 0), "properties": {"name": "A", "types": "hospital, health"}},
        {"geometry": Point(1, 1), "properties": {"name": "B", "types": "school"}},
        {"geometry": Point(2, 2), "properties": {"name": "C", "types": "Hospital,x"}}])
    # (list-valued properties: tests/parity/test_parity_vector_layers.py — GDAL reads them as
    # arrays, which match no token in the benchmark)
    obs = call_tool("vec.filter_by_attribute", {"vector_path": "poi.geojson",
                                                "attribute_name": "types",
                                                "allowed_values": ["HOSPITAL "]}, ctx)
    assert (obs["total_input"], obs["total_filtered"]) == (3, 2)
    names = [f["properties"]["name"] for f in layer(ctx, obs["vector_path"])["features"]]
    assert names == ["A", "C"]
    obs = call_tool("vec.filter_by_attribute", {"vector_path": "poi.geojson",
                                                "attribute_name": "properties.types",
                                                "allowed_values": ["school"]}, ctx)
    assert obs["total_filtered"] == 1
    with pytest.raises(ToolInputError) as ei:
        call_tool("vec.filter_by_attribute", {"vector_path": "poi.geojson",
                                              "attribute_name": "kind",
                                              "allowed_values": ["x"]}, ctx)
    assert "'name'" in str(ei.value) and "'types'" in str(ei.value)


# ---------------------------------------------------------------- other vector tools
def test_measures(ctx):
    d = data(ctx)
    write_geojson(d / "polys.geojson", [
        {"geometry": box(0, 0, 2, 2), "properties": {"id": 1}},
        {"geometry": box(10, 0, 13, 3), "properties": {"id": 2}}])
    # px 0.5: areas 4 px2 -> 1 m2 and 9 px2 -> 2.25 m2
    mp = call_tool("vec.max_polygon", {"vector_path": "polys.geojson", "pixel_size_m": 0.5,
                                       "topk": 2}, ctx)
    assert mp["max_area_m2"] == 2.25 and [p["id"] for p in mp["topk_polygons"]] == [2, 1]
    # perimeters 8 px and 12 px -> 4 m + 6 m
    pr = call_tool("vec.perimeter", {"vector_path": "polys.geojson", "pixel_size_m": 0.5}, ctx)
    assert pr["total_perimeter_m"] == 10.0
    assert (ctx.work_dir / pr["table_path"]).read_text().splitlines()[0] == "id,perimeter_m"
    with pytest.raises(ToolInputError):
        call_tool("vec.perimeter", {"vector_path": "polys.geojson"}, ctx)
    fa = call_tool("vec.filter_by_area", {"vector_path": "polys.geojson", "min_area_m2": 2,
                                          "pixel_size_m": 0.5}, ctx)
    assert [f["properties"]["id"] for f in layer(ctx, fa["vector_path"])["features"]] == [2]
    c = call_tool("vec.centroid", {"vector_path": "polys.geojson", "feature_idx": -1}, ctx)
    assert (c["feature_idx"], c["pixel_row"], c["pixel_col"]) == (1, 1.5, 11.5)
    with pytest.raises(ToolInputError):
        call_tool("vec.centroid", {"vector_path": "polys.geojson", "feature_idx": 5}, ctx)
    cc = call_tool("vec.connected_components", {"vector_path": "polys.geojson"}, ctx)
    assert (cc["count"], cc["mode"]) == (2, "vector")
    write_geojson(d / "line.geojson", [{"geometry": {"type": "LineString",
                                                     "coordinates": [[0, 0], [3, 4]]}}])
    ln = call_tool("vec.length", {"vector_path": "line.geojson", "pixel_size_m": 2}, ctx)
    assert ln["total_length_m"] == 10.0  # 5 px * 2 m


def test_nearest_clip_kbuffer(ctx):
    d = data(ctx)
    write_geojson(d / "a.geojson", [{"geometry": Point(0, 0), "properties": {"id": 7}}])
    write_geojson(d / "b.geojson", [{"geometry": Point(3, 4), "properties": {"id": 1}},
                                    {"geometry": Point(0, 10), "properties": {"id": 2}}])
    n = call_tool("vec.nearest", {"vector_a_path": "a.geojson", "vector_b_path": "b.geojson",
                                  "pixel_size_m": 0.5}, ctx)
    # nearest B to (0,0) is (3,4): 5 px -> 2.5 m
    assert (n["distance_px"], n["distance_m"], n["nearest_a_id"], n["nearest_b_id"]) == (5.0, 2.5, 7, 1)
    write_geojson(d / "roi.geojson", [{"geometry": box(-1, -1, 5, 5)}])
    cl = call_tool("vec.clip", {"vector_path": "b.geojson", "roi_vector_path": "roi.geojson"}, ctx)
    assert (cl["input_count"], cl["output_count"]) == (2, 1)
    kb = call_tool("vec.kbuffer", {"vector_path": "a.geojson", "meters": [1, 2]}, ctx)
    assert [b["distance_used_units"] for b in kb["buffers"]] == [1.0, 2.0]
    assert kb["buffers"][0]["buffer_path"] != kb["buffers"][1]["buffer_path"]


def test_distance_and_pixel_to_world(ctx):
    d = data(ctx)
    write_geojson(d / "ll.geojson", [{"geometry": Point(0.0, 0.0), "properties": {"n": "a"}},
                                     {"geometry": Point(0.0, 1.0), "properties": {"n": "b"}}],
                  crs="urn:ogc:def:crs:OGC:1.3:CRS84")
    fd = call_tool("vec.filter_by_distance", {"vector_path": "ll.geojson", "center_lat": 0.0,
                                              "center_lon": 0.0, "max_distance_m": 120000}, ctx)
    # 1 degree of latitude on a 6371 km sphere: 6371000 * pi / 180 = 111195 m
    assert fd["total_filtered"] == 2
    assert fd["farthest_distance_m"] == pytest.approx(6371000 * math.pi / 180)
    write_tif(d / "geo.tif", [[0, 0], [0, 0]], crs="EPSG:4326", origin=(10.0, 50.0), res=0.5)
    pw = call_tool("vec.pixel_to_world", {"raster_path": "geo.tif", "pixel_row": 2,
                                          "pixel_col": 1}, ctx)
    assert (pw["longitude"], pw["latitude"]) == (10.5, 49.0)
