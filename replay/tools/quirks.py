"""The benchmark's tool behaviours the studio reproduces on purpose: one list.

The studio's tools return, for every input, the observation the benchmark's own tool servers
return (Junjue-Wang/DORA, ``dora/tools/*.py``), because agents are run with those servers and the
benchmark's gold was filled with them. Where that behaviour is physically wrong or surprising
(a light direction, degrees used as metres, a constant pixel size, a value computed from layers in
two unrelated frames), the studio reproduces it anyway and lists it here, with the benchmark file
and function it follows and the QC check that tells an author a step relies on it.

``QUIRKS`` is read by ``docs/tool-parity.md``'s table and by tests that assert every QC check
named here exists. The sections below are kept apart by tool family.
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Quirk", "QUIRKS", "quirks_of"]


@dataclass(frozen=True)
class Quirk:
    """One deliberate reproduction of the benchmark's behaviour.

    ``tool``: dotted tool name; ``behaviour``: what the benchmark's tool does (and so the studio's);
    ``instead``: what a physically correct tool would do; ``reference``: ``file:function@commit`` of
    the benchmark's code it follows; ``qc_check``: the QC check id that flags a step relying on it
    (``None`` when the quirk changes no gold an author could avoid).
    """

    tool: str
    behaviour: str
    instead: str
    reference: str
    qc_check: str | None = None


# ---------------------------------------------------------------------------------------------
# ras.*, mask.*, calc.*, logi.*, tool.*, report.*
# ---------------------------------------------------------------------------------------------
_RASTER_AND_LOGIC: tuple[Quirk, ...] = (
)


# ---------------------------------------------------------------------------------------------
# vec.*
# ---------------------------------------------------------------------------------------------
_A = "dora/tools/analysis.py:{}@2b24be7033a8f66dea6f557bf9861e927ee5d113"
_VECTOR: tuple[Quirk, ...] = (
    Quirk("vec.intersect",
          "a pixel-space layer and a georeferenced one are overlaid coordinate for coordinate "
          "(only a warning is logged); usually 0 intersections",
          "refuse, or bring both layers into one frame first",
          _A.format("vec_intersect"), "vec.mixed_frames"),
    Quirk("vec.intersect",
          "with no intersection, intersection_area_m2 is 0.0 only when pixel_size_m is passed, "
          "else null (also for georeferenced layers, which are measured in metres)",
          "0.0 m² whenever the area is known to be zero",
          _A.format("vec_intersect")),
    Quirk("vec.clip",
          "a pixel-space layer is clipped by a georeferenced ROI (or the reverse) using the raw "
          "coordinates",
          "refuse, or reproject the ROI into the layer's frame",
          _A.format("vec_clip"), "vec.mixed_frames"),
    Quirk("vec.nearest",
          "distances between a pixel-space and a georeferenced layer are taken between raw "
          "coordinates (pixels against metres or degrees)",
          "refuse mixed frames",
          _A.format("vec_polygon_nearest"), "vec.mixed_frames"),
    Quirk("vec.raster_stats",
          "a vector layer in another frame than the raster (pixel-space layer on a GeoTIFF, "
          "georeferenced layer on a PNG) is rasterised through the raster's transform as it is",
          "refuse, or reproject the layer into the raster's frame",
          _A.format("vec_raster_stats"), "vec.mixed_frames"),
    Quirk("vec.raster_stats",
          "pixel_area_m2 (and each sampled_area_m2) is |a·e| of the raster's transform in its own "
          "units: 1.0 for a PNG, degrees² for a geographic raster",
          "m² from the GSD, or null when unknown",
          _A.format("vec_raster_stats")),
    Quirk("vec.voronoi",
          "the boundary layer is intersected as it is, without reprojection into the points' CRS; "
          "only Point features are seeds; the envelope is the points' bounding box buffered by its "
          "perimeter",
          "reproject the boundary; use every feature (e.g. by centroid)",
          _A.format("vec_voronoi"), "vec.mixed_frames"),
    Quirk("vec.point_in_polygon",
          "layers are read with gpd.read_file, which makes a GeoJSON without crs EPSG:4326: "
          "pixel-space points are projected as lon/lat onto projected polygons; a point on a "
          "polygon's boundary is outside (contains)",
          "treat a GeoJSON without crs as pixel space and refuse mixed frames; count boundary "
          "points as inside",
          _A.format("vec_point_in_polygon"), "vec.mixed_frames"),
    Quirk("vec.point_in_polygon",
          "a polygon_id_field the polygons do not have is ignored: row indices are the ids",
          "refuse an unknown field",
          _A.format("vec_point_in_polygon"), "vec.unknown_field"),
    Quirk("vec.filter_by_distance",
          "the layer's x/y are read as longitude/latitude whatever its CRS (projected metres and "
          "pixel coordinates included) and fed to the haversine formula",
          "reproject the layer to WGS84, refuse a pixel-space layer",
          _A.format("vec_filter_by_distance"), "vec.distance_not_lonlat"),
    Quirk("vec.pixel_to_world",
          "a raster without CRS maps the pixel through its identity transform: latitude = row, "
          "longitude = col, crs \"unknown\"",
          "refuse: there is no world position",
          _A.format("vec_pixel_to_world"), "manifest.crs_missing"),
    Quirk("vec.length",
          "a pixel-space layer needs the pixel_size_m argument; a pixel_size_m property of its "
          "features (ras.vectorize writes one) is not read, so the step fails",
          "fall back to the layer's pixel_size_m property",
          _A.format("vec_length"), "vec.pixel_size_ignored"),
    Quirk("vec.perimeter",
          "as vec.length: the pixel_size_m property is not read; a line's perimeter is its length",
          "fall back to the property; a line has no perimeter",
          _A.format("vec_perimeter"), "vec.pixel_size_ignored"),
    Quirk("vec.max_polygon",
          "an area_m2 property with any value wins over the geometry (ras.vectorize without "
          "pixel_size_m writes 0 for every polygon, so max_area_m2 is 0 and the first polygon "
          "wins); otherwise a pixel-space layer is measured with the pixel_size_m argument only",
          "measure the geometry when the stored areas are unknown; read the layer's pixel size",
          _A.format("vec_max_polygon"), "vec.pixel_size_ignored"),
    Quirk("vec.centroid",
          "feature_idx -1 picks the largest feature by its area_m2 property, else by raw area in "
          "layer units (degrees² for a geographic layer)",
          "rank by metric area",
          _A.format("vec_centroid")),
    Quirk("vec.buffer",
          "a projected layer is buffered by `meter` of its own unit (feet for a US-feet CRS); a "
          "pixel-space layer without a pixel_size_m property by `meter` pixels",
          "convert metres to the layer's unit; refuse without a pixel size",
          _A.format("vec_buffer")),
    Quirk("vec.kbuffer", "as vec.buffer, for each distance",
          "as vec.buffer", _A.format("vec_kbuffer")),
    Quirk("vec.convex_hull",
          "area_m2 is the hull's area in CRS units only for a projected CRS, 0.0 otherwise (a "
          "pixel-space GeoJSON is EPSG:4326 to gpd.read_file); vertex_count includes the closing "
          "point",
          "metric area (UTM for geographic layers, pixel size for pixel space); distinct vertices",
          _A.format("vec_convex_hull"), "vec.hull_area_zero"),
    Quirk("vec.dissolve",
          "a `by` field the layer does not have dissolves the whole layer into one feature; "
          "features with a missing `by` value are dropped (pandas groupby)",
          "refuse an unknown field; keep a null group",
          _A.format("vec_dissolve"), "vec.unknown_field"),
    Quirk("vec.simplify",
          "vertex counts give points 0 and count ring closing points",
          "count every coordinate",
          _A.format("vec_simplify")),
    Quirk("vec.connected_components",
          "a vector layer's count is its number of features (touching polygons are not merged); "
          "a raster is counted with 4-connectivity",
          "count connected geometries",
          _A.format("vec_connected_components")),
    Quirk("vec.road_centerline_extraction",
          "a mask with 3 or more bands is read as colours and mapped by the key 3R+4G+5B (so a "
          "grey mask stored as RGB gives no road, and colours sharing a key collide)",
          "read a band-equal mask as classes; match colours exactly",
          _A.format("color2labelidx")),
    Quirk("vec.road_centerline_extraction",
          "objects of at most 32 px are removed with 4-connectivity (scikit-image 0.26 reads the "
          "benchmark's min_size=32 as max_size): a 1-pixel-wide diagonal road vanishes",
          "remove objects under 32 px, 8-connected",
          _A.format("_to_skeleton")),
    Quirk("vec.road_centerline_extraction",
          "edges are cut at every ≥5° turn after ≥4 steps, and each edge is walked again from its "
          "other end and cut at its own turns: duplicated edges between different turn nodes and "
          "1-pixel junction edges are part of the graph (edge_count counts them)",
          "one edge per skeleton branch between junctions",
          _A.format("_build_road_graph")),
    Quirk("vec.build_graph",
          "coordinates are rounded to integer (row, col) pixels whatever the CRS, and every "
          "vertex step counts 1 (1.41421356237 for a diagonal pixel step), so lines with long "
          "segments or in lon/lat get meaningless lengths",
          "measure segment lengths in the layer's frame (geodesic for lon/lat)",
          _A.format("build_road_graph"), "vec.graph_georeferenced"),
    Quirk("vec.graph_shortest_path",
          "a snapped edge is split with the pixels before the snap point attached to the edge's "
          "first node in graph order, whatever the direction its pixels run: a route from a "
          "mid-edge snap can get the other part's length and run past the snap point",
          "attach each part to the node it touches",
          _A.format("_split_edge_at_pixel")),
    Quirk("vec.graph_shortest_path",
          "a failed snap reports snapped_on_damaged true as well as snap_failed",
          "snapped_on_damaged false when nothing was snapped",
          _A.format("shortest_path_on_intact_roads")),
    Quirk("vec.repair_min_edges",
          "when either source or target is missing or not a node, both are auto-selected "
          "(smallest id of the largest component and its farthest node in hops); blocked edges "
          "cost length + 1e12",
          "auto-select only the missing endpoint; refuse an unknown node",
          _A.format("vec_repair_min_edges"), "vec.repair_auto_select"),
)


# ---------------------------------------------------------------------------------------------
# poi.*, vis.*
# ---------------------------------------------------------------------------------------------
_POI_AND_VIS: tuple[Quirk, ...] = (
)


QUIRKS: tuple[Quirk, ...] = _RASTER_AND_LOGIC + _VECTOR + _POI_AND_VIS


def quirks_of(tool: str) -> list[Quirk]:
    """The quirks of one tool (dotted name), in list order."""
    return [q for q in QUIRKS if q.tool == tool]
