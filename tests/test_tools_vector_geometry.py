"""Road-graph and geometry vector tools: hand-made layers with hand-worked values, plus real
data (the Joplin footprints for buffers)."""
import json
import math

import pytest
from conftest import REALDATA, requires_shared
from shapely.geometry import LineString, Point, box, shape

from kernel.tools import ToolInputError, call_tool
from kernel.tools.testing import make_ctx, write_geojson

JOPLIN = REALDATA / "xview2-deploy-joplin" / "bldg_polys.gpkg"


@pytest.fixture
def ctx(tmp_path):
    return make_ctx(tmp_path)


def data(ctx):
    return ctx.work_dir.parent / "data"


def layer(ctx, name):
    return json.loads((ctx.work_dir / name).read_text())


# Road graphs (vec.road_centerline_extraction, vec.build_graph, vec.graph_shortest_path,
# vec.repair_min_edges) are tested in tests/parity/test_parity_vector_roads.py against the
# benchmark's own graph: the studio's former graph (junction clusters, geodesic
# OSM edges, road_class) is gone, so its tests were rewritten there for the benchmark's rules.


# ============================================================ geometry tools
def test_convex_hull_pixel_and_projected(ctx):
    d = data(ctx)
    write_geojson(d / "pts.geojson", [
        {"geometry": Point(0, 0), "properties": {"pixel_size_m": 0.5}},
        {"geometry": Point(4, 0), "properties": {"pixel_size_m": 0.5}},
        {"geometry": Point(4, 3), "properties": {"pixel_size_m": 0.5}},
        {"geometry": Point(0, 3), "properties": {"pixel_size_m": 0.5}},
        {"geometry": Point(2, 1), "properties": {"pixel_size_m": 0.5}}])  # interior point
    obs = call_tool("vec.convex_hull", {"vector_path": "pts.geojson"}, ctx)
    # the benchmark (analysis.py:vec_convex_hull) reads a GeoJSON without crs as
    # EPSG:4326, a geographic CRS, so area_m2 is 0.0 whatever the pixel size; the 4 x 3
    # rectangle's exterior has 5 coordinates (closing point counted)
    assert obs["vertex_count"] == 5 and obs["area_m2"] == 0.0
    write_geojson(d / "utm.geojson", [{"geometry": box(500000, 3300000, 500010, 3300020),
                                       "properties": {}},
                                      {"geometry": Point(500030, 3300000), "properties": {}}],
                  crs="EPSG:32615")
    obs = call_tool("vec.convex_hull", {"vector_path": "utm.geojson"}, ctx)
    # hull of the box and the point: box 10x20 = 200 plus triangle (10,0)-(30,0)-(10,20) = 200;
    # 4 corners + the closing point = 5 (the benchmark's count)
    assert obs["area_m2"] == pytest.approx(400.0) and obs["vertex_count"] == 5
    write_geojson(d / "empty.geojson", [])
    with pytest.raises(ToolInputError) as ei:
        call_tool("vec.convex_hull", {"vector_path": "empty.geojson"}, ctx)
    assert ei.value.argument == "vector_path"


def test_voronoi_two_points_in_boundary(ctx):
    d = data(ctx)
    write_geojson(d / "p.geojson", [{"geometry": Point(0, 0), "properties": {"name": "a"}},
                                    {"geometry": Point(10, 0), "properties": {"name": "b"}}])
    write_geojson(d / "b.geojson", [{"geometry": box(-5, -5, 15, 5), "properties": {}}])
    obs = call_tool("vec.voronoi", {"points_path": "p.geojson", "boundary_path": "b.geojson"},
                    ctx)
    assert obs["cell_count"] == 2
    cells = layer(ctx, obs["output_path"])["features"]
    # bisector x = 5: cells [-5,5]x[-5,5] and [5,15]x[-5,5]; the benchmark's cells carry only
    # cell_id (analysis.py:vec_voronoi), in GEOS's order
    geoms = sorted((shape(c["geometry"]) for c in cells), key=lambda g: g.bounds)
    assert geoms[0].equals(box(-5, -5, 5, 5)) and geoms[1].equals(box(5, -5, 15, 5))
    assert sorted(c["properties"]["cell_id"] for c in cells) == [0, 1]
    # no boundary: the envelope of two points on y = 0 is a flat polygon (0,0)-(10,0) whose
    # perimeter is 20; buffered by 20 its bounding box is [-20,30]x[-20,20], to which GEOS
    # clips the diagram: each cell is 25 x 40 = 1000
    obs = call_tool("vec.voronoi", {"points_path": "p.geojson"}, ctx)
    cells = layer(ctx, obs["output_path"])["features"]
    assert [shape(c["geometry"]).area for c in cells] == [pytest.approx(1000.0)] * 2
    write_geojson(d / "one.geojson", [{"geometry": Point(0, 0), "properties": {}}])
    with pytest.raises(ToolInputError) as ei:
        call_tool("vec.voronoi", {"points_path": "one.geojson"}, ctx)
    assert ei.value.argument == "points_path"


def test_dissolve_by_attribute(ctx):
    d = data(ctx)
    write_geojson(d / "v.geojson", [
        {"geometry": box(0, 0, 2, 2), "properties": {"kind": "b"}},
        {"geometry": box(1, 0, 3, 2), "properties": {"kind": "b"}},
        {"geometry": box(10, 10, 11, 11), "properties": {"kind": "a"}},
        {"geometry": box(20, 20, 21, 21), "properties": {"kind": None}}])
    obs = call_tool("vec.dissolve", {"vector_path": "v.geojson", "by": "kind"}, ctx)
    # geopandas dissolve (the benchmark's, analysis.py:vec_dissolve) drops the null group:
    # groups a and b; b's union is [0,3]x[0,2] = 6
    assert obs["input_count"] == 4 and obs["output_count"] == 2
    feats = layer(ctx, obs["output_path"])["features"]
    assert [f["properties"]["kind"] for f in feats] == ["a", "b"]
    assert shape(feats[1]["geometry"]).area == pytest.approx(6.0)
    obs = call_tool("vec.dissolve", {"vector_path": "v.geojson"}, ctx)
    assert obs["output_count"] == 1
    assert shape(layer(ctx, obs["output_path"])["features"][0]["geometry"]).area == \
        pytest.approx(6 + 1 + 1)
    # an unknown field dissolves everything into one feature, as the benchmark does (QC warns)
    obs = call_tool("vec.dissolve", {"vector_path": "v.geojson", "by": "type"}, ctx)
    assert obs["output_count"] == 1


def test_simplify_vertex_counts(ctx):
    d = data(ctx)
    # 5 vertices, the middle three within 0.1 of the straight line (0,0)-(10,0)
    write_geojson(d / "l.geojson", [{"geometry": LineString([(0, 0), (2, 0.05), (5, -0.05),
                                                             (8, 0.05), (10, 0)]),
                                     "properties": {}}])
    obs = call_tool("vec.simplify", {"vector_path": "l.geojson", "tolerance": 0.1}, ctx)
    assert obs["input_vertex_count"] == 5 and obs["output_vertex_count"] == 2
    obs = call_tool("vec.simplify", {"vector_path": "l.geojson", "tolerance": 0.01}, ctx)
    assert obs["output_vertex_count"] == 5  # every deviation (0.05) exceeds the tolerance
    with pytest.raises(ToolInputError) as ei:
        call_tool("vec.simplify", {"vector_path": "l.geojson", "tolerance": -1}, ctx)
    assert ei.value.argument == "tolerance"


def test_point_in_polygon(ctx):
    d = data(ctx)
    write_geojson(d / "pts.geojson", [{"geometry": Point(1, 1), "properties": {}},
                                      {"geometry": Point(5, 5), "properties": {}},
                                      {"geometry": Point(2, 0), "properties": {}},  # on edge
                                      {"geometry": Point(3, 3), "properties": {}}])
    write_geojson(d / "polys.geojson", [{"geometry": box(0, 0, 2, 2), "properties": {"pid": "A"}},
                                        {"geometry": box(2, 0, 4, 4), "properties": {"pid": "B"}}])
    obs = call_tool("vec.point_in_polygon", {"points_path": "pts.geojson",
                                             "polygons_path": "polys.geojson",
                                             "polygon_id_field": "pid"}, ctx)
    # (1,1) in A; (5,5) outside; (2,0) on the shared edge of A and B: outside both, since the
    # benchmark tests `contains` (analysis.py:vec_point_in_polygon); (3,3) in B
    assert obs["matches"] == [{"point_index": 0, "polygon_ids": ["A"]},
                              {"point_index": 3, "polygon_ids": ["B"]}]
    assert obs["inside_count"] == 2
    obs = call_tool("vec.point_in_polygon", {"points_path": "pts.geojson",
                                             "polygons_path": "polys.geojson"}, ctx)
    assert obs["matches"][0]["polygon_ids"] == [0]
    # an unknown id field falls back to row indices (QC warns)
    obs = call_tool("vec.point_in_polygon", {"points_path": "pts.geojson",
                                             "polygons_path": "polys.geojson",
                                             "polygon_id_field": "id"}, ctx)
    assert [m["polygon_ids"] for m in obs["matches"]] == [[0], [1]]
    # pixel points (EPSG:4326 to gpd.read_file) against UTM polygons: the pixel coordinates are
    # projected as lon/lat, land far from the box, and nothing matches (no error)
    write_geojson(d / "geo.geojson", [{"geometry": box(0, 0, 1, 1), "properties": {}}],
                  crs="EPSG:32615")
    obs = call_tool("vec.point_in_polygon", {"points_path": "pts.geojson",
                                             "polygons_path": "geo.geojson"}, ctx)
    assert obs["inside_count"] == 0


# ------------------------------------------------------------ real Joplin footprints
@requires_shared(JOPLIN)
def test_joplin_buffer_area_matches_steiner_formula(ctx):
    import geopandas as gpd

    gdf = gpd.read_file(JOPLIN).to_crs("EPSG:32615")
    # convex footprints only: for a convex polygon, buffer area = A + P*d + pi*d^2 (Steiner);
    # for a square of side a that is a^2 + 4ad + pi*d^2
    convex = gdf[[abs(g.convex_hull.area - g.area) < 1e-6 * g.area for g in gdf.geometry]]
    convex = convex.iloc[:5].reset_index(drop=True)
    assert len(convex) == 5
    gdf_out = convex[["geometry"]].copy()
    gdf_out.to_file(data(ctx) / "fp.geojson", driver="GeoJSON")
    d = 5.0
    obs = call_tool("vec.buffer", {"vector_path": "fp.geojson", "meter": d}, ctx)
    assert obs["distance_used_units"] == d
    out = gpd.read_file(ctx.work_dir / obs["buffer_path"])
    assert out.crs.to_epsg() == 32615
    for g0, g1 in zip(convex.geometry, out.geometry):
        expected = g0.area + g0.length * d + math.pi * d * d
        # GEOS approximates the quarter circles with 16 segments each: pi -> 32*sin(pi/32)...
        assert g1.area == pytest.approx(expected, rel=2e-3)
    hull = call_tool("vec.convex_hull", {"vector_path": "fp.geojson"}, ctx)
    assert hull["area_m2"] >= sum(g.area for g in convex.geometry)
