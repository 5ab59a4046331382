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
          "a string loop_over (trajectory reference or .geojson path) is expanded only by a "
          "direct call (gold replay); over MCP the list-typed schema refuses it",
          instead="one behaviour for both",
          reference="dora/tools/analysis.py:tool_loop@2b24be70",
          qc_check="tool.loop_over_string"),
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
_VECTOR: tuple[Quirk, ...] = (
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
