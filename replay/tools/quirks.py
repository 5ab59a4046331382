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
_VECTOR: tuple[Quirk, ...] = (
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
          'a list- or dict-valued group field fails the call (unhashable); with no data the observation lacks return_item_details/return_sum',
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
          'statistics is the data argument echoed; empty data draws empty axes',
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
