"""Road-graph and geometry vector tools: hand-made layers with hand-worked values, plus real
data (OSM roads of test.osm.pbf for routing, the Joplin footprints for buffers)."""
import json
import math
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
from shapely.geometry import LineString, Point, box, shape

from replay.tools import ClassIndexError, ToolInputError, call_tool
from replay.tools.testing import make_ctx, write_geojson, write_png

REALDATA = Path(__file__).resolve().parents[1].parent / "shared" / "realdata"
OSM = REALDATA / "osm-helsinki" / "test.osm.pbf"
JOPLIN = REALDATA / "xview2-deploy-joplin" / "bldg_polys.gpkg"


@pytest.fixture
def ctx(tmp_path):
    return make_ctx(tmp_path)


def data(ctx):
    return ctx.work_dir.parent / "data"


def layer(ctx, name):
    return json.loads((ctx.work_dir / name).read_text())


# ============================================================ road graphs (pixel space)
def square_roads(ctx, left_class=3):
    """A 10 px square of roads (x = col, y = row), its left side of class `left_class`."""
    feats = [
        {"geometry": LineString([(0, 0), (10, 0)]), "properties": {"road_class": 1}},   # top
        {"geometry": LineString([(10, 0), (10, 10)]), "properties": {"road_class": 1}},  # right
        {"geometry": LineString([(0, 0), (0, 10)]), "properties": {"road_class": left_class}},
        {"geometry": LineString([(0, 10), (10, 10)]), "properties": {"road_class": 1}},  # bottom
    ]
    write_geojson(data(ctx) / "square.geojson", feats)
    return call_tool("vec.build_graph", {"centerline_path": "square.geojson"}, ctx)


def test_build_graph_square(ctx):
    obs = square_roads(ctx)
    # 4 corners, 4 sides; pixel frame
    assert obs["node_count"] == 4 and obs["edge_count"] == 4
    assert obs["frame"] == "pixel" and obs["length_unit"] == "px"
    g = nx.read_graphml(ctx.work_dir / obs["graph_path"])
    lengths = sorted(float(d["length"]) for *_e, d in g.edges(data=True))
    assert lengths == [10.0, 10.0, 10.0, 10.0]
    blocked = [d for *_e, d in g.edges(data=True) if d["damaged"]]
    assert len(blocked) == 1 and blocked[0]["road_class"] == 3
    # node ids are row-major: (row 0, col 0) = 0, (0, 10) = 1, (10, 0) = 2, (10, 10) = 3
    assert (g.nodes["0"]["row"], g.nodes["0"]["col"]) == (0.0, 0.0)
    assert (g.nodes["3"]["row"], g.nodes["3"]["col"]) == (10.0, 10.0)


def test_shortest_path_avoids_blocked_edge(ctx):
    g = square_roads(ctx)["graph_path"]
    obs = call_tool("vec.graph_shortest_path", {"graph_path": g, "start": [0, 0], "end": [10, 0],
                                                "pixel_size_m": 0.5}, ctx)
    # the left side (10 px) is blocked: top + right + bottom = 30 px; 30 * 0.5 = 15 m
    assert obs["distance_px"] == pytest.approx(30.0) and obs["distance_m"] == pytest.approx(15.0)
    assert obs["path_pixels"] == [[0, 0], [0, 10], [10, 10], [10, 0]]
    assert obs["snapped_start"] == [0, 0] and obs["snapped_end"] == [10, 0]
    assert not obs["snap_failed"] and not obs["snapped_on_damaged"]
    route = layer(ctx, obs["path_geojson"])
    assert "crs" not in route
    assert shape(route["features"][0]["geometry"]).length == pytest.approx(30.0)


def test_shortest_path_intact_square_and_mid_edge_snap(ctx):
    g = square_roads(ctx, left_class=1)["graph_path"]
    obs = call_tool("vec.graph_shortest_path", {"graph_path": g, "start": [0, 0],
                                                "end": [10, 0]}, ctx)
    assert obs["distance_px"] == pytest.approx(10.0)  # straight down the (now intact) left side
    # start (row 3, col 12) snaps 2 px across onto the right side at (3, 10); end (row 10,
    # col 4) lies on the bottom side: 7 px down the right side + 6 px along the bottom = 13
    obs = call_tool("vec.graph_shortest_path", {"graph_path": g, "start": [3, 12],
                                                "end": [10, 4]}, ctx)
    assert obs["snapped_start"] == [3, 10] and obs["snapped_end"] == [10, 4]
    assert obs["distance_px"] == pytest.approx(13.0)
    assert obs["path_pixels"] == [[3, 10], [10, 10], [10, 4]]
    # both on the top side: direct 6 px along it, not around the square
    obs = call_tool("vec.graph_shortest_path", {"graph_path": g, "start": [0, 8],
                                                "end": [1, 2]}, ctx)
    assert obs["distance_px"] == pytest.approx(6.0) and obs["path_pixels"] == [[0, 8], [0, 2]]


def test_shortest_path_no_route_cases(ctx):
    g = square_roads(ctx)["graph_path"]
    # start 30 px away from every road, buffer 10 -> snap failure, not an error
    obs = call_tool("vec.graph_shortest_path", {"graph_path": g, "start": [40, 40],
                                                "end": [0, 0]}, ctx)
    assert obs["snap_failed"] and obs["distance_m"] is None and obs["path_pixels"] == []
    assert obs["snapped_start"] is None and obs["snapped_end"] == [0, 0]
    line = shape(layer(ctx, obs["path_geojson"])["features"][0]["geometry"])
    assert list(line.coords) == [(40.0, 40.0), (0.0, 0.0)]  # straight start-end line (x=col)
    # start (row 5, col 1) is within 10 px of both the blocked left side (1 px) and the intact
    # top/bottom (5 px): intact is preferred, so a route exists
    obs = call_tool("vec.graph_shortest_path", {"graph_path": g, "start": [5, 1],
                                                "end": [10, 10]}, ctx)
    assert not obs["snapped_on_damaged"] and obs["distance_px"] is not None
    # with a 2 px buffer only the blocked side is in reach
    obs = call_tool("vec.graph_shortest_path", {"graph_path": g, "start": [5, 1],
                                                "end": [10, 10], "snap_buffer_px": 2}, ctx)
    assert obs["snapped_on_damaged"] and obs["distance_px"] is None
    assert obs["snapped_start"] == [5, 0]


def test_shortest_path_disconnected(ctx):
    write_geojson(data(ctx) / "two.geojson", [
        {"geometry": LineString([(0, 0), (5, 0)]), "properties": {}},
        {"geometry": LineString([(20, 0), (30, 0)]), "properties": {}}])
    g = call_tool("vec.build_graph", {"centerline_path": "two.geojson"}, ctx)["graph_path"]
    obs = call_tool("vec.graph_shortest_path", {"graph_path": g, "start": [0, 0],
                                                "end": [0, 30]}, ctx)
    assert obs["distance_px"] is None and not obs["snap_failed"]
    assert "not connected" in obs["note"]


def test_graph_errors(ctx):
    g = square_roads(ctx)["graph_path"]
    with pytest.raises(ToolInputError) as ei:
        call_tool("vec.graph_shortest_path", {"graph_path": g, "start": [1, 2, 3],
                                              "end": [0, 0]}, ctx)
    assert ei.value.argument == "start"
    with pytest.raises(ToolInputError) as ei:
        call_tool("vec.graph_shortest_path", {"graph_path": g, "start": [0, 0], "end": [1, 1],
                                              "pixel_size_m": 0}, ctx)
    assert ei.value.argument == "pixel_size_m"
    with pytest.raises(ToolInputError) as ei:
        call_tool("vec.graph_shortest_path", {"graph_path": "nope.graphml", "start": [0, 0],
                                              "end": [1, 1]}, ctx)
    assert ei.value.argument == "graph_path"
    write_geojson(data(ctx) / "pts.geojson", [{"geometry": Point(1, 1), "properties": {}}])
    with pytest.raises(ToolInputError) as ei:
        call_tool("vec.build_graph", {"centerline_path": "pts.geojson"}, ctx)
    assert ei.value.argument == "centerline_path"


def test_build_graph_reads_benchmark_y_flipped_layout(ctx):
    # the benchmark writes y = img_h - 1 - row; with img_h = 11 the line y 10 -> 0 is row 0 -> 10
    write_geojson(data(ctx) / "flip.geojson", [
        {"geometry": LineString([(2, 10), (2, 0)]), "properties": {"img_h": 11, "img_w": 11,
                                                                   "damaged": False}}])
    g = call_tool("vec.build_graph", {"centerline_path": "flip.geojson"}, ctx)["graph_path"]
    obs = call_tool("vec.graph_shortest_path", {"graph_path": g, "start": [0, 2],
                                                "end": [10, 2], "snap_buffer_px": 0}, ctx)
    assert obs["distance_px"] == pytest.approx(10.0)
    assert obs["path_pixels"] == [[0, 2], [10, 2]]


# ------------------------------------------------------------ centerline extraction
def plus_mask():
    # 40x40: a 4 px wide horizontal road (rows 18-21) and vertical road (cols 18-21);
    # the top 14 rows of the vertical road are class 3 (blocked)
    m = np.zeros((40, 40), np.uint8)
    m[18:22, :] = 1
    m[:, 18:22] = 1
    m[0:14, 18:22] = 3
    return m


def test_centerline_plus_and_routing(ctx):
    write_png(data(ctx) / "road.png", plus_mask())
    obs = call_tool("vec.road_centerline_extraction", {"mask_path": "road.png"}, ctx)
    # a plus thins to 4 arms meeting at one junction
    assert obs["edge_count"] == 4 and obs["input_mask"] == "road.png"
    feats = layer(ctx, obs["centerline_path"])["features"]
    props = [f["properties"] for f in feats]
    assert all(p["img_h"] == 40 and p["img_w"] == 40 and p["y_axis"] == "down" for p in props)
    dmg = [f for f in feats if f["properties"]["damaged"]]
    assert len(dmg) == 1 and dmg[0]["properties"]["road_class"] == 3
    top = shape(dmg[0]["geometry"])
    assert top.bounds[1] < 5 and top.bounds[3] > 15  # the top arm: from near row 0 to the centre
    for f in feats:  # length_px is the polyline length of the pixel chain
        assert f["properties"]["length_px"] == pytest.approx(shape(f["geometry"]).length)
    g = call_tool("vec.build_graph", {"centerline_path": obs["centerline_path"]}, ctx)
    assert g["node_count"] == 5 and g["edge_count"] == 4
    r = call_tool("vec.graph_shortest_path", {"graph_path": g["graph_path"], "start": [19, 0],
                                              "end": [19, 39], "pixel_size_m": 2.0}, ctx)
    # left end to right end along the centre row: the skeleton spans cols 2..37 -> 35 px
    assert r["distance_px"] == pytest.approx(35.0, abs=2)
    assert r["distance_m"] == pytest.approx(2 * r["distance_px"])
    assert all(abs(rc[0] - 19.5) <= 1 for rc in r["path_pixels"])  # stays on the centre row
    blocked = call_tool("vec.graph_shortest_path", {"graph_path": g["graph_path"],
                                                    "start": [1, 19], "end": [19, 38]}, ctx)
    assert blocked["snapped_on_damaged"] and blocked["distance_px"] is None
    rep = call_tool("vec.repair_min_edges", {"graph_path": g["graph_path"],
                                             "source": 0, "target": 4}, ctx)
    # node 0 is the top end (row-major first); reaching the right end needs the top arm repaired
    assert rep["repair_count"] == 1 and not rep["auto_selected"]


def test_centerline_rgb_and_errors(ctx):
    m = plus_mask()
    rgb = np.zeros((40, 40, 3), np.uint8)
    rgb[m == 1] = (255, 255, 255)
    rgb[m == 3] = (255, 0, 0)
    write_png(data(ctx) / "rgb.png", rgb)
    obs = call_tool("vec.road_centerline_extraction", {"mask_path": "rgb.png"}, ctx)
    assert obs["edge_count"] == 4
    assert sum(f["properties"]["damaged"] for f in
               layer(ctx, obs["centerline_path"])["features"]) == 1
    write_png(data(ctx) / "road.png", plus_mask())
    with pytest.raises(ClassIndexError) as ei:
        call_tool("vec.road_centerline_extraction", {"mask_path": "road.png",
                                                     "damaged_classes": [11, 12]}, ctx)
    assert ei.value.absent == [11, 12]
    with pytest.raises(ToolInputError) as ei:
        call_tool("vec.road_centerline_extraction", {"mask_path": "road.png",
                                                     "intact_classes": [1, 3],
                                                     "damaged_classes": [3]}, ctx)
    assert ei.value.argument == "damaged_classes"
    write_png(data(ctx) / "empty.png", np.zeros((8, 8), np.uint8))
    obs = call_tool("vec.road_centerline_extraction", {"mask_path": "empty.png"}, ctx)
    assert obs["edge_count"] == 0


# ------------------------------------------------------------ vec.repair_min_edges
def test_repair_min_edges_json_graph(ctx):
    # 0-1-3 is short but has one blocked edge (2 + 2); 0-2-3 is intact but long (10 + 10)
    g = {"nodes": [{"id": 0}, {"id": 1}, {"id": 2}, {"id": 3}, {"id": 9}],
         "edges": [{"source": 0, "target": 1, "length_m": 2, "blocked": False},
                   {"source": 1, "target": 3, "length_m": 2, "blocked": True},
                   {"source": 0, "target": 2, "length_m": 10, "blocked": False},
                   {"source": 2, "target": 3, "length_m": 10, "blocked": False}]}
    (data(ctx) / "g.json").write_text(json.dumps(g))
    obs = call_tool("vec.repair_min_edges", {"graph_path": "g.json", "source": 0, "target": 3,
                                             "blocked_attr": "blocked"}, ctx)
    # fewest repairs first: the intact detour, 20 m, 0 repairs
    assert obs["repair_count"] == 0 and obs["path_length_m"] == 20.0
    assert obs["path_node_count"] == 3 and obs["graph_nodes"] == 5 and obs["graph_edges"] == 4
    # block the detour too: both routes need 1 repair -> the shorter (4 m) wins
    g["edges"][2]["blocked"] = True
    (data(ctx) / "g2.json").write_text(json.dumps(g))
    obs = call_tool("vec.repair_min_edges", {"graph_path": "g2.json", "source": "0",
                                             "target": "3", "blocked_attr": "blocked"}, ctx)
    assert obs["repair_count"] == 1 and obs["repair_edges"] == [[1, 3]]
    assert obs["path_length_m"] == 4.0
    # auto selection: largest component {0,1,2,3}, smallest id 0, farthest in hops = 3 (2 hops)
    obs = call_tool("vec.repair_min_edges", {"graph_path": "g2.json",
                                             "blocked_attr": "blocked"}, ctx)
    assert obs["auto_selected"] and (obs["source"], obs["target"]) == (0, 3)


def test_repair_min_edges_errors(ctx):
    g = {"nodes": [{"id": 0}, {"id": 1}, {"id": 5}, {"id": 6}],
         "edges": [{"source": 0, "target": 1, "length": 1, "damaged": False},
                   {"source": 5, "target": 6, "length": 1, "damaged": True}]}
    (data(ctx) / "g.json").write_text(json.dumps(g))
    with pytest.raises(ToolInputError) as ei:
        call_tool("vec.repair_min_edges", {"graph_path": "g.json", "source": 0, "target": 6}, ctx)
    assert "not connected" in str(ei.value)
    with pytest.raises(ToolInputError) as ei:
        call_tool("vec.repair_min_edges", {"graph_path": "g.json", "source": 42}, ctx)
    assert ei.value.argument == "source"
    with pytest.raises(ToolInputError) as ei:
        call_tool("vec.repair_min_edges", {"graph_path": "g.json", "blocked_attr": "flooded"},
                  ctx)
    assert ei.value.argument == "blocked_attr" and "damaged" in ei.value.expected


# ------------------------------------------------------------ real OSM roads
@pytest.fixture(scope="module")
def osm_roads():
    assert OSM.is_file(), f"{OSM}: the real test data (../shared/realdata) is missing"
    from annotation.importers.osm import extract

    roads, _pois, _stats = extract(OSM)
    roads["crs"] = {"type": "name", "properties": {"name": "urn:ogc:def:crs:OGC:1.3:CRS84"}}
    return roads


def _independent_graph(roads):
    """Every consecutive vertex pair an edge with its WGS84 geodesic length (pyproj.Geod)."""
    from pyproj import Geod

    geod = Geod(ellps="WGS84")
    g = nx.Graph()
    for f in roads["features"]:
        cs = [tuple(c) for c in f["geometry"]["coordinates"]]
        for a, b in zip(cs[:-1], cs[1:]):
            if a != b:
                g.add_edge(a, b, w=geod.inv(a[0], a[1], b[0], b[1])[2])
    return g


def test_osm_routing_matches_independent_dijkstra(tmp_path, osm_roads):
    from pyproj import Geod

    ctx = make_ctx(tmp_path)
    (data(ctx) / "roads.geojson").write_text(json.dumps(osm_roads))
    obs = call_tool("vec.build_graph", {"centerline_path": "roads.geojson"}, ctx)
    assert obs["frame"] == "geographic" and obs["length_unit"] == "m"
    ref = _independent_graph(osm_roads)
    comp = max(nx.connected_components(ref), key=len)
    a, b = min(comp), max(comp)  # the westernmost and easternmost vertices of the main component
    expected = nx.dijkstra_path_length(ref, a, b, weight="w")
    r = call_tool("vec.graph_shortest_path", {"graph_path": obs["graph_path"],
                                              "start": [a[1], a[0]], "end": [b[1], b[0]],
                                              "snap_buffer_px": 1}, ctx)
    assert r["frame"] == "geographic" and not r["snap_failed"]
    assert r["distance_m"] == pytest.approx(expected, rel=1e-6)
    # the route's own geodesic length, and the straight line as a lower bound
    geod = Geod(ellps="WGS84")
    lons, lats = zip(*r["path_lonlat"])
    assert geod.line_length(lons, lats) == pytest.approx(r["distance_m"], rel=1e-6)
    assert r["distance_m"] >= geod.inv(a[0], a[1], b[0], b[1])[2]
    assert r["distance_m"] > 500  # a real route across the extract
    # flood every road the route uses: the route must get longer or disappear
    used = {tuple(p) for p in r["path_lonlat"]}
    for f in osm_roads["features"]:
        cs = {tuple(round(v, 7) for v in c) for c in f["geometry"]["coordinates"]}
        f["properties"] = dict(f["properties"], is_flooded=len(cs & used) >= 2)
    (data(ctx) / "flooded.geojson").write_text(json.dumps(osm_roads))
    g2 = call_tool("vec.build_graph", {"centerline_path": "flooded.geojson"}, ctx)
    r2 = call_tool("vec.graph_shortest_path", {"graph_path": g2["graph_path"],
                                               "start": [a[1], a[0]], "end": [b[1], b[0]],
                                               "snap_buffer_px": 1}, ctx)
    assert r2["distance_m"] is None or r2["distance_m"] > r["distance_m"]


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
    # 4 x 3 rectangle: 12 px2 * 0.25 m2 = 3 m2; 4 vertices
    assert obs["vertex_count"] == 4 and obs["area_units2"] == 12.0 and obs["area_m2"] == 3.0
    write_geojson(d / "utm.geojson", [{"geometry": box(500000, 3300000, 500010, 3300020),
                                       "properties": {}},
                                      {"geometry": Point(500030, 3300000), "properties": {}}],
                  crs="EPSG:32615")
    obs = call_tool("vec.convex_hull", {"vector_path": "utm.geojson"}, ctx)
    # hull of the box and the point: box 10x20 = 200 plus triangle (10,0)-(30,0)-(10,20) = 200
    assert obs["area_m2"] == pytest.approx(400.0) and obs["vertex_count"] == 4
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
    # bisector x = 5: cells [-5,5]x[-5,5] and [5,15]x[-5,5], 100 each, in point order
    assert [c["properties"]["name"] for c in cells] == ["a", "b"]
    assert shape(cells[0]["geometry"]).equals(box(-5, -5, 5, 5))
    assert shape(cells[1]["geometry"]).equals(box(5, -5, 15, 5))
    # no boundary: bbox of the points (0..10 x 0..0) grown by 1 on each side -> [-1,11]x[-1,1]
    obs = call_tool("vec.voronoi", {"points_path": "p.geojson"}, ctx)
    cells = layer(ctx, obs["output_path"])["features"]
    assert shape(cells[0]["geometry"]).area == pytest.approx(6 * 2)
    write_geojson(d / "one.geojson", [{"geometry": Point(0, 0), "properties": {}},
                                      {"geometry": Point(0, 0), "properties": {}}])
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
    assert obs["input_count"] == 4 and obs["output_count"] == 3
    feats = layer(ctx, obs["output_path"])["features"]
    # groups sorted: a, b, null; b's union is [0,3]x[0,2] = 6
    assert [f["properties"]["kind"] for f in feats] == ["a", "b", None]
    assert shape(feats[1]["geometry"]).area == pytest.approx(6.0)
    assert feats[1]["properties"]["feature_count"] == 2
    obs = call_tool("vec.dissolve", {"vector_path": "v.geojson"}, ctx)
    assert obs["output_count"] == 1
    assert shape(layer(ctx, obs["output_path"])["features"][0]["geometry"]).area == \
        pytest.approx(6 + 1 + 1)
    with pytest.raises(ToolInputError) as ei:
        call_tool("vec.dissolve", {"vector_path": "v.geojson", "by": "type"}, ctx)
    assert ei.value.argument == "by" and "kind" in ei.value.expected


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
    # (1,1) in A; (5,5) outside; (2,0) on the shared edge of A and B; (3,3) in B
    assert obs["matches"] == [{"point_index": 0, "polygon_ids": ["A"]},
                              {"point_index": 2, "polygon_ids": ["A", "B"]},
                              {"point_index": 3, "polygon_ids": ["B"]}]
    assert obs["inside_count"] == 3
    obs = call_tool("vec.point_in_polygon", {"points_path": "pts.geojson",
                                             "polygons_path": "polys.geojson"}, ctx)
    assert obs["matches"][0]["polygon_ids"] == [0]
    with pytest.raises(ToolInputError) as ei:
        call_tool("vec.point_in_polygon", {"points_path": "pts.geojson",
                                           "polygons_path": "polys.geojson",
                                           "polygon_id_field": "id"}, ctx)
    assert ei.value.argument == "polygon_id_field"
    write_geojson(d / "geo.geojson", [{"geometry": box(0, 0, 1, 1), "properties": {}}],
                  crs="EPSG:32615")
    with pytest.raises(ToolInputError):
        call_tool("vec.point_in_polygon", {"points_path": "pts.geojson",
                                           "polygons_path": "geo.geojson"}, ctx)


# ------------------------------------------------------------ real Joplin footprints
@pytest.mark.skipif(not JOPLIN.is_file(), reason="Joplin footprints not present")
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


def test_graphml_without_from_node_is_oriented_by_node_positions(ctx):
    # a benchmark-style GraphML: pixel lists but no from_node; the edge is stored (1, 0) while
    # its pixels run from node 0 at (row 0, col 0) to node 1 at (row 0, col 4)
    g = nx.MultiGraph()
    g.add_node(0, row=0.0, col=0.0)
    g.add_node(1, row=0.0, col=4.0)
    g.add_node(2, row=3.0, col=4.0)
    g.add_edge(1, 0, length=4.0, damaged=False, pixels_json="[[0,0],[0,1],[0,2],[0,3],[0,4]]")
    g.add_edge(1, 2, length=3.0, damaged=False, pixels_json="[[0,4],[1,4],[2,4],[3,4]]")
    nx.write_graphml(g, data(ctx) / "bench.graphml")
    obs = call_tool("vec.graph_shortest_path", {"graph_path": "bench.graphml", "start": [0, 1],
                                                "end": [3, 4]}, ctx)
    # from (0,1): 3 px east to node 1, then 3 px south: 6
    assert obs["distance_px"] == pytest.approx(6.0)
    assert obs["path_pixels"] == [[0, 1], [0, 2], [0, 3], [0, 4], [1, 4], [2, 4], [3, 4]]
