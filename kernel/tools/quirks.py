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
    Quirk("ras.count_pixels",
          "compares the whole image read by skimage.io.imread, so a multi-band image is counted"
          " over every band (an RGB pixel can count three times)",
          instead="refuse or read one band of a multi-band mask",
          reference="dora/tools/analysis.py:ras_count_pixels@2b24be70",
          qc_check="tool.multiband_mask"),
    Quirk("ras.count_pixels",
          "counts a class index the mask does not hold as 0, also a stale index from another "
          "label scheme (xBD 4 on a 0-3 mask)",
          instead="tell a stale index from a true zero",
          reference="dora/tools/analysis.py:ras_count_pixels@2b24be70",
          qc_check="classes.stale_index"),
    Quirk("ras.count_pixels",
          "reads a JPEG-compressed TIFF with imread's tifffile + imagecodecs (libjpeg), whose "
          "samples differ from GDAL's decode of the same file; ras.area too",
          instead="decode every raster one way (GDAL, as the other raster tools do)",
          reference="dora/tools/analysis.py:ras_count_pixels@2b24be70",
          qc_check=None),
    Quirk("ras.count_pixels",
          "a mask file that does not exist gives {tool, note, count: 0, mask_path, classes} "
          "(the guard on FileNotFoundError), not an error; ras.vectorize answers a missing mask"
          " with 0 features and vector_path null",
          instead="fail the step",
          reference="dora/tools/analysis.py:_tool_guard@2b24be70",
          qc_check="manifest.file_missing"),
    Quirk("ras.hillshade",
          "a DEM nodata that uint8 cannot hold (-9999, NaN) makes the rasterio write fail and "
          "the Pillow fallback write a TIFF without CRS, transform or nodata",
          instead="keep the georeferencing",
          reference="dora/tools/analysis.py:ras_hillshade@2b24be70",
          qc_check=None),
    Quirk("ras.area",
          "counts every band of a multi-band image, like ras.count_pixels, and never reads the "
          "georeferencing: the given pixel_size_m wins, a negative one is squared",
          instead="measure a single-band mask with its own pixel size",
          reference="dora/tools/calculate.py:ras_area@7b969887",
          qc_check="tool.multiband_mask"),
    Quirk("ras.vectorize",
          "without a CRS and without pixel_size_m every polygon gets area_m2 0 and "
          "total_area_m2 is 0.0 (not null); with a geographic CRS area_m2 is the area in square"
          " degrees rounded to 0.01",
          instead="null areas without a pixel size, metres on a geographic mask",
          reference="dora/tools/analysis.py:_vectorize_mask_to_gdf@2b24be70",
          qc_check="tool.vectorize_area"),
    Quirk("ras.vectorize",
          "writes its GeoJSON through GDAL's driver, which leaves out the crs member of a CRS "
          "without an authority code (a Mars or geostationary CRS): the polygons read back as "
          "pixel space (every vector output of the benchmark's _save_gdf alike)",
          instead="keep the CRS (as WKT) in the output",
          reference="dora/tools/analysis.py:_save_gdf@2b24be70",
          qc_check=None),
    Quirk("mask.compose_multiclass",
          "reads band 1 of each mask and gives every value > 0 the class, whatever else the "
          "mask holds (multi-class or multi-band masks are not refused)",
          instead="require binary single-band masks",
          reference="dora/tools/analysis.py:mask_compose_multiclass@2b24be70",
          qc_check="classes.binary_expected"),
    Quirk("ras.count_pixels",
          "an empty classes list gives counts {} and total 0 (ras.vectorize: 0 polygons; "
          "ras.area: every non-zero sample)",
          instead="refuse an empty class list",
          reference="dora/tools/analysis.py:ras_count_pixels@2b24be70",
          qc_check="tool.empty_classes"),
    Quirk("ras.area",
          "a zero or negative pixel_size_m is used as is: the area is pixel_count times its "
          "square",
          instead="refuse a non-positive pixel size",
          reference="dora/tools/calculate.py:ras_area@7b969887",
          qc_check="tool.nonpositive_pixel_size"),
    Quirk("ras.slope",
          "any units other than \"percent\" mean degrees and are echoed; ras.reproject / "
          "ras.resample take an unknown resampling as bilinear",
          instead="refuse an unknown option",
          reference="dora/tools/analysis.py:ras_slope@2b24be70",
          qc_check="tool.unknown_option"),
    Quirk("ras.threshold",
          "casts true_value to uint8 (256 -> 0, -1 -> 255) and allows true_value == false_value",
          instead="refuse values a uint8 mask cannot hold",
          reference="dora/tools/analysis.py:ras_threshold@2b24be70",
          qc_check="tool.threshold_values"),
    Quirk("ras.sample_point",
          "casts every band value to int (366.5 -> 366), so a float DEM or reflectance is "
          "truncated",
          instead="return the raster's own value",
          reference="dora/tools/analysis.py:ras_sample_point@2b24be70",
          qc_check=None),
    Quirk("ras.sample_points",
          "casts every band value to int, like ras.sample_point",
          instead="return the raster's own value",
          reference="dora/tools/analysis.py:ras_sample_points@2b24be70",
          qc_check=None),
    Quirk("ras.slope",
          "uses np.gradient central differences (not Horn's method its description names) with "
          "the pixel size abs(a), abs(e) in CRS units: on a geographic DEM degrees are used as "
          "metres; nodata values enter the differences",
          instead="Horn's method in metres with nodata masked",
          reference="dora/tools/analysis.py:ras_slope@2b24be70",
          qc_check="tool.geographic_dem"),
    Quirk("ras.hillshade",
          "uses np.gradient rows (south-positive) with aspect atan2(-dz/dx, dz/dy), so the "
          "light comes from another direction than the azimuth names; truncates to uint8; "
          "degrees as metres on a geographic DEM",
          instead="Horn's gradients lit from the azimuth (ESRI / gdaldem)",
          reference="dora/tools/analysis.py:ras_hillshade@2b24be70",
          qc_check="tool.hillshade_direction"),
    Quirk("ras.resample",
          "floors the output size from the x pixel size for both axes and echoes the target as "
          "dst_pixel_size_m; degrees as metres on a geographic raster; an unknown resampling "
          "means bilinear",
          instead="round each axis and report the size obtained",
          reference="dora/tools/analysis.py:ras_resample@2b24be70",
          qc_check="tool.geographic_dem"),
    Quirk("ras.focal_stats",
          "uses scipy's nearest border; min/max/std treat nodata pixels as 0 and std divides by"
          " every window cell; sum is a float32 mean times w^2",
          instead="skip nodata and the outside of the image",
          reference="dora/tools/analysis.py:ras_focal_stats@2b24be70",
          qc_check=None),
    Quirk("ras.slope",
          "writes the float32 slope with the DEM's own driver; for a PNG, JPEG, GIF or BMP DEM "
          "that write fails and the fallback saves <slope_path>.npy, while slope_path (reported"
          " with the stats) names no file",
          instead="write a GeoTIFF whatever the input format",
          reference="dora/tools/analysis.py:ras_slope@2b24be70",
          qc_check="tool.float32_format"),
    Quirk("ras.focal_stats",
          "writes the float32 result with the input's own driver, so any PNG, JPEG, GIF or BMP "
          "input fails the call (\"PNG driver doesn't support data type Float32\")",
          instead="write a GeoTIFF whatever the input format",
          reference="dora/tools/analysis.py:ras_focal_stats@2b24be70",
          qc_check="tool.float32_format"),
    Quirk("ras.threshold",
          "writes its output with the input's rasterio profile, photometric included: a JPEG/"
          "YCbCr-compressed GeoTIFF input fails the call (so do ras.clip, ras.diff, "
          "mask.compose_multiclass and ras.focal_stats), ras.slope saves only <slope_path>.npy "
          "and ras.hillshade writes a plain TIFF without georeferencing",
          instead="write a fresh GeoTIFF profile whatever the input's compression",
          reference="dora/tools/analysis.py:_safe_raster_profile@2b24be70",
          qc_check=None),
    Quirk("ras.resample",
          "writes with the source's profile: a JPEG-compressed source is re-encoded as JPEG, so"
          " the resampled pixels carry a second round of compression loss",
          instead="write the resampled values losslessly",
          reference="dora/tools/analysis.py:ras_resample@2b24be70",
          qc_check=None),
    Quirk("ras.reproject",
          "writes no nodata when the source has none (pixels outside the source are 0 and count"
          " as data); an unknown resampling means bilinear; dst_crs is echoed as given",
          instead="mark the area outside the source as nodata",
          reference="dora/tools/analysis.py:ras_reproject@2b24be70",
          qc_check=None),
    Quirk("ras.clip",
          "reports the window's transform as the Affine's 9 numbers, also for an image without "
          "CRS (its identity grid shifted)",
          instead="6 numbers, null without georeferencing",
          reference="dora/tools/analysis.py:ras_clip@2b24be70",
          qc_check=None),
    Quirk("ras.concat",
          "reports the first raster's 9 transform numbers even without CRS and requires equal "
          "transforms also for rasters without CRS",
          instead="6 numbers, null without georeferencing",
          reference="dora/tools/analysis.py:ras_concat@2b24be70",
          qc_check=None),
    Quirk("ras.stats",
          "computes the statistics in the band's dtype (float32 rounding for a float32 band)",
          instead="float64 statistics",
          reference="dora/tools/analysis.py:ras_stats@2b24be70",
          qc_check=None),
    Quirk("ras.diff",
          "computes min/max/mean of the float32 difference in float32",
          instead="float64 statistics",
          reference="dora/tools/analysis.py:ras_diff@2b24be70",
          qc_check=None),
    Quirk("tool.reduce",
          "counts booleans as numbers (true = 1.0, false = 0.0) and keeps NaN (compares false)",
          instead="skip non-numeric values",
          reference="dora/tools/analysis.py:tool_reduce@2b24be70",
          qc_check="tool.reduce_boolean"),
    Quirk("tool.loop",
          "a failing nested call leaves its stub object as the obs and the loop goes on (except"
          " ras.sample_point(s) / mask.compose_multiclass / vec.centroid / "
          "vec.filter_by_distance, called as unguarded helpers, whose exception ends the loop, "
          "and unknown or missing arguments to a tool without _tool_guard, a TypeError that "
          "ends it too); an unresolved reference is passed on as the literal string",
          instead="stop at the first failing call",
          reference="dora/tools/analysis.py:tool_loop@2b24be70",
          qc_check="tool.loop_stub_obs"),
    Quirk("tool.loop",
          "passes nested arguments unconverted (no schema): a string where the function "
          "computes without float() (ras.area pixel_size_m, calc.volume depth_m, "
          "logi.truck_trips capacity_m3, ...) fails that call (stub obs), a string or float "
          "pixel index to ras.sample_point(s) ends the loop",
          instead="coerce nested arguments as the tool schema does",
          reference="dora/tools/analysis.py:tool_loop@2b24be70",
          qc_check="tool.loop_stub_obs"),
    Quirk("tool.loop",
          "a string loop_over (trajectory reference or .geojson path) is expanded only by a "
          "direct call (gold replay); over MCP the list-typed schema refuses it; the reference "
          "is read with the spaces around 'from' optional ('<k>from trajectory[0].obs' too, which "
          "the task files' reference syntax and the evaluator do not read); a string that "
          "is neither (also a reference to a step that has not run, which the studio's replay "
          "refuses as an authoring error) is iterated character by character",
          instead="one behaviour for both",
          reference="dora/tools/analysis.py:tool_loop@2b24be70",
          qc_check="tool.loop_over_string"),
    Quirk("tool.loop",
          "in gold replay a loop_over reference to an earlier step whose key is missing or "
          "holds neither a list nor a .geojson/.json path, or a path to no file, gives no "
          "items: the loop returns [] instead of failing",
          instead="fail on a reference that does not resolve",
          reference="dora/tools/analysis.py:tool_loop@2b24be70",
          qc_check="tool.loop_over_unresolved"),
    Quirk("tool.loop",
          "calls are read as {call (else tool), args}: 'name' and 'inputs' are not read and "
          "args given as a JSON string fail; an unknown tool or one outside the Analysis, "
          "Calculate and Perception servers fails only when an item reaches it (no items: []); "
          "an empty calls list gives every item last_obs null; grid_n 0 means none and a "
          "negative grid_n floor-divides (row_idx -1); a nested call is a direct Python call, so an "
          "int given for a float parameter stays an int (vec.buffer echoes 10, not 10.0)",
          instead="check the calls before looping",
          reference="dora/tools/analysis.py:tool_loop@2b24be70",
          qc_check=None),
    Quirk("logi.truck_trips",
          "accepts a negative volume: ceil(volume / capacity) gives 0 or a negative trip count;"
          " a capacity <= 0 gives 0 trips",
          instead="refuse a negative volume and a non-positive capacity",
          reference="dora/tools/calculate.py:logi_truck_trips@7b969887",
          qc_check="tool.negative_volume"),
    Quirk("calc.div",
          "returns ratio 0.0 for a zero denominator",
          instead="an error or infinity",
          reference="dora/tools/calculate.py:calc_div@7b969887",
          qc_check=None),
    Quirk("report.extract_evidence",
          "reads masks with Pillow (first channel), takes areas only from pixel_size_m, labels "
          "a class without a class map by its value (\"255\"), describes a mask named twice "
          "twice, takes timestamps only from source keys or loop items (a later mask of a "
          "timestamp replaces an earlier one) and writes step_index as a string in errors",
          instead="one description per mask with its own pixel size",
          reference="dora/tools/model.py:report_extract_evidence@7b969887",
          qc_check=None),
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
    Quirk("vec.filter_by_attribute",
          "filters the values gpd.read_file gives: a list-valued GeoJSON property is read by GDAL "
          "as an array (a whole column of arrays once one feature has a list) whose text "
          "\"['a' 'b']\" matches no token, and kept arrays make the writer of a layer without CRS "
          "fail; a missing value is the token \"nan\"; the geometry column is its WKT text",
          "match list elements, skip missing values, refuse the geometry column",
          _A.format("vec_filter_by_attribute"), "vec.attribute_text"),
    Quirk("vec.buffer",
          "(also vec.kbuffer, intersect, max_polygon, centroid, length, perimeter, filter_by_area, "
          "filter_by_attribute, filter_by_distance, nearest, clip, raster_stats, "
          "connected_components) a vector path that names no file is an empty layer, so the tool "
          "gives its empty-input result (0 features, null paths), not an error",
          "fail on a missing input file",
          _A.format("_read_vector_no_default_crs"), "manifest.not_in_input_data"),
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
    Quirk('poi.world_to_pixel',
          "writes pixel_size_m 0.8 onto every projected POI, whatever the raster's pixel size (the tool wrapper never passes the argument, default 0.8)",
          "the raster's own pixel size",
          'dora/tools/poi.py:poi_world_to_pixel_tool@7b9698872e65742461b037c9ed4b95b7bc249915',
          'poi.constant_pixel_size'),
    Quirk('poi.world_to_pixel',
          "reads each point's x/y as WGS84 lon/lat whatever the layer's CRS (no reprojection)",
          'reproject the layer from its CRS to WGS84 first',
          'dora/tools/poi.py:poi_world_to_pixel@7b9698872e65742461b037c9ed4b95b7bc249915',
          'poi.layer_not_lonlat'),
    Quirk('poi.world_to_pixel',
          'pixel position int((x - c)/a), int((f - y)/-e): truncation toward zero, rotation terms ignored, so a point up to one pixel left of or above the image lands in column/row 0',
          'floor of the inverse affine transform; points outside dropped',
          'dora/tools/poi.py:_world_to_pixel@7b9698872e65742461b037c9ed4b95b7bc249915',
          None),
    Quirk('poi.search_by_name',
          "latitude/longitude are the point's y/x in the layer's own CRS (no reprojection); a matching polygon or line fails the call",
          'WGS84 coordinates, a representative point for polygons',
          'dora/tools/poi.py:poi_search_by_name@7b9698872e65742461b037c9ed4b95b7bc249915',
          'poi.layer_not_lonlat'),
    Quirk('poi.search_by_name',
          'output_path is the string "None" when nothing matches; a fuzzy search over a layer with a missing (NaN) or non-text name fails the call',
          'null; unnamed features skipped',
          'dora/tools/poi.py:poi_search_by_name@7b9698872e65742461b037c9ed4b95b7bc249915',
          None),
    Quirk('poi.to_vector',
          'the name filter is pandas str.contains over lower-cased names, a regular-expression search ("st. john" matches "st john")',
          'a literal substring match',
          'dora/tools/poi.py:poi_to_vector@7b9698872e65742461b037c9ed4b95b7bc249915',
          None),
    Quirk('poi.group_by',
          ('a list- or dict-valued group field fails the call (unhashable); with no data the observation lacks return_item_details/return_sum; '
           'groups whose values print alike (1 and "1") share one name and the later one\'s count replaces the other\'s'),
          "group by the list's first element; one observation shape",
          'dora/tools/poi.py:poi_group_by@7b9698872e65742461b037c9ed4b95b7bc249915',
          None),
    Quirk('poi.filter_by_intact',
          'reads a one-entry sample {k: v} as class v only when k is 1..10, otherwise as a class -> count map ({"0": 5} is class 0), unlike poi.filter_by_damage',
          'one damage-class reading for all POI filters',
          'dora/tools/poi.py:poi_filter_by_intact@7b9698872e65742461b037c9ed4b95b7bc249915',
          None),
    Quirk('poi.filter_by_attribute',
          'an item whose properties is not an object fails the call; a missing attribute is compared as "", a null one as "None"; no data gives no allowed_values key',
          'skip such items; one observation shape',
          'dora/tools/poi.py:poi_filter_by_attribute@7b9698872e65742461b037c9ed4b95b7bc249915',
          None),
    Quirk('poi.to_vector',
          '(also poi.search_by_name, poi.world_to_pixel) an empty layer is a stub (status "stub", "Empty GeoJSON input"), i.e. a failed call; only .geojson/.shp names are read',
          'empty results; any vector format',
          'dora/tools/poi.py:_read_geojson@7b9698872e65742461b037c9ed4b95b7bc249915',
          None),
    Quirk('vis.overlay_mask',
          'class_labels in the observation is the argument echoed ({} when absent), naming none of the classes present; a mask of another size is cast to uint8 (values > 255 wrap) before the nearest-neighbour resize; no range check on alpha',
          'labels for the classes present; an opacity in 0..1',
          'dora/tools/vis.py:vis_overlay_mask@7b9698872e65742461b037c9ed4b95b7bc249915',
          'vis.alpha_range'),
    Quirk('vis.overlay_mask',
          'a multi-band mask (an RGB image, say) is overlaid by its first band as class values',
          'refuse a mask that is not single-band',
          'dora/tools/vis.py:_load_mask@7b9698872e65742461b037c9ed4b95b7bc249915',
          'vis.mask_first_channel'),
    Quirk('vis.add_map_elements',
          'scale_bar reads scale_bar and pixel_size_m is not None, so a pixel size <= 0 reports a bar that is not drawn; point_marker_count counts markers without a position, which are skipped',
          'report what was drawn; refuse a marker without position',
          'dora/tools/vis.py:vis_add_map_elements@7b9698872e65742461b037c9ed4b95b7bc249915',
          'vis.pixel_size_not_positive'),
    Quirk('vis.add_map_elements',
          'a marker without row/col (pixel_row|row|y, pixel_col|col|x) is skipped but counted; a null label is drawn as "None"',
          'refuse it',
          'dora/tools/vis.py:_draw_point_markers@7b9698872e65742461b037c9ed4b95b7bc249915',
          'vis.marker_without_position'),
    Quirk('vis.damage_map',
          'legend_alpha is alpha whenever a mask is given (even with no class present); scale_bar is true whenever pixel_size_m is given; layers lists base_image/overlay_mask only',
          'report the legend and bar actually drawn',
          'dora/tools/vis.py:vis_damage_map@7b9698872e65742461b037c9ed4b95b7bc249915',
          'vis.pixel_size_not_positive'),
    Quirk('vis.route_map',
          'path points with fewer than 2 numbers are skipped; legend_items always ends with intact route/route start/route end, with or without a route',
          'refuse malformed points; legend of what is drawn',
          'dora/tools/vis.py:vis_route_map@7b9698872e65742461b037c9ed4b95b7bc249915',
          'vis.route_points'),
    Quirk('vis.pie_chart',
          'statistics is the data argument echoed (values as floats); empty data, negative values and a zero total are drawn without error',
          'statistics of the data; refuse what a pie cannot show',
          'dora/tools/vis.py:vis_pie_chart@7b9698872e65742461b037c9ed4b95b7bc249915',
          'vis.chart_data'),
    Quirk('vis.bar_chart',
          "statistics is the data argument echoed; empty data draws empty axes; a negative value "
          "fails the call (Pillow refuses the bar's inverted rectangle)",
          'statistics of the data; refuse empty data',
          'dora/tools/vis.py:vis_bar_chart@7b9698872e65742461b037c9ed4b95b7bc249915',
          'vis.chart_data'),
    Quirk('vis.line_chart',
          'statistics is the data argument echoed; empty data draws empty axes',
          'statistics of the data (first, last, change)',
          'dora/tools/vis.py:vis_line_chart@7b9698872e65742461b037c9ed4b95b7bc249915',
          'vis.chart_data'),
    Quirk('vis.temporal_panel',
          'images and labels are paired in order and the longer list is cut; columns < 1 is taken as 1; no images draw a title-only canvas',
          'refuse mismatched labels and columns < 1',
          'dora/tools/vis.py:vis_temporal_panel@7b9698872e65742461b037c9ed4b95b7bc249915',
          'vis.panel_labels'),
    Quirk('vis.report_page',
          'an image path that names no file is left off the page silently while components still reads true',
          'refuse it, or report false',
          'dora/tools/vis.py:vis_report_page@7b9698872e65742461b037c9ed4b95b7bc249915',
          'manifest.not_in_input_data'),
    Quirk('vis.heatmap',
          "bandwidth is scipy's gaussian_kde bw_method, a factor on the points' covariance, not a distance; the density is evaluated on a 200x200 grid over the points' bounds in the layer's own units",
          'a kernel width in map units',
          'dora/tools/vis.py:vis_heatmap@7b9698872e65742461b037c9ed4b95b7bc249915',
          'vis.heatmap_bandwidth'),
)


QUIRKS: tuple[Quirk, ...] = _RASTER_AND_LOGIC + _VECTOR + _POI_AND_VIS


def quirks_of(tool: str) -> list[Quirk]:
    """The quirks of one tool (dotted name), in list order."""
    return [q for q in QUIRKS if q.tool == tool]
