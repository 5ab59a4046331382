"""The vec.* quirks list and the QC checks that guard former tool refusals: each
check fires on the input the tool used to refuse and stays quiet on the sound variant; every
quirk names a benchmark function and an existing check."""
import re

import pytest

from annotation import qc
from annotation.qc.tool_parity import VECTOR_CHECKS
from kernel.tools.quirks import _VECTOR
from kernel.tools.registry import REGISTRY, get_tool


def vec_checks(traj, input_data, question="How many features?"):
    content = {"question": question, "trajectory": traj, "input_data": input_data,
               "answer_spec": [{"name": "n", "eval_type": "scalar_count",
                                "source": f"<count> from trajectory[{len(traj) - 1}].obs"}]}
    return sorted(f.check for f in qc.check_task(content) if f.check.startswith("vec."))


def layer(path, crs):
    return {"image_path": path, "modality": "vector", "spatial_coordinate_system": crs}


PIX, GEO, UTM = "pixel", "EPSG:4326", "EPSG:32615"


def test_every_quirk_names_a_benchmark_function_and_a_known_check():
    get_tool("vec.buffer")  # loads the registry
    for q in _VECTOR:
        assert q.tool in REGISTRY, q.tool
        assert re.fullmatch(r"dora/tools/analysis\.py:\w+@[0-9a-f]{40}", q.reference), q.reference
        assert q.qc_check is None or q.qc_check in qc.CHECKS, q.qc_check
    # every vec.* check guards at least one quirk
    assert set(VECTOR_CHECKS) <= {q.qc_check for q in _VECTOR}


@pytest.mark.parametrize("tool,args", [
    ("vec.intersect", {"vector_a_path": "a.geojson", "vector_b_path": "b.geojson"}),
    ("vec.clip", {"vector_path": "a.geojson", "roi_vector_path": "b.geojson"}),
    ("vec.nearest", {"vector_a_path": "a.geojson", "vector_b_path": "b.geojson"}),
    ("vec.point_in_polygon", {"points_path": "a.geojson", "polygons_path": "b.geojson"}),
])
@pytest.mark.parametrize("crs_b,expected", [(GEO, ["vec.mixed_frames"]), (PIX, [])])
def test_mixed_frames(tool, args, crs_b, expected):
    inp = {"a": layer("a.geojson", PIX), "b": layer("b.geojson", crs_b)}
    assert vec_checks([{"call": tool, "args": args}], inp) == expected


def test_mixed_frames_raster_stats_with_a_pixel_frame_road_output():
    # the centre lines of vec.road_centerline_extraction are pixel space, the raster is not
    inp = {"m": {"image_path": "roads.tif", "modality": "mask", "spatial_coordinate_system": UTM},
           "d": {"image_path": "dem.tif", "modality": "dem", "spatial_coordinate_system": UTM}}
    traj = [{"call": "vec.road_centerline_extraction", "args": {"mask_path": "roads.tif"}},
            {"call": "vec.raster_stats", "args": {"vector_path": "<centerline_path> from trajectory[0].obs",
                                                  "raster_path": "dem.tif"}}]
    assert vec_checks(traj, inp) == ["vec.mixed_frames"]


@pytest.mark.parametrize("crs,expected", [(UTM, ["vec.distance_not_lonlat"]),
                                          (PIX, ["vec.distance_not_lonlat"]), (GEO, [])])
def test_distance_not_lonlat(crs, expected):
    traj = [{"call": "vec.filter_by_distance", "args": {"vector_path": "s.geojson", "center_lat": 1,
                                                        "center_lon": 2, "max_distance_m": 9}}]
    assert vec_checks(traj, {"s": layer("s.geojson", crs)}) == expected


@pytest.mark.parametrize("crs,expected", [(GEO, ["vec.graph_georeferenced"]), (PIX, [])])
def test_graph_georeferenced(crs, expected):
    traj = [{"call": "vec.build_graph", "args": {"centerline_path": "r.geojson"}}]
    assert vec_checks(traj, {"r": layer("r.geojson", crs)}) == expected


@pytest.mark.parametrize("by,expected", [("kind", ["vec.unknown_field"]), ("class", [])])
def test_unknown_field_after_vectorize(by, expected):
    inp = {"m": {"image_path": "m.png", "modality": "mask", "spatial_coordinate_system": PIX,
                 "pixel_size_m": 0.5}}
    traj = [{"call": "ras.vectorize", "args": {"mask_path": "m.png", "classes": [1], "pixel_size_m": 0.5}},
            {"call": "vec.dissolve", "args": {"vector_path": "<vector_path> from trajectory[0].obs", "by": by}}]
    assert vec_checks(traj, inp) == expected


@pytest.mark.parametrize("crs,expected", [(PIX, ["vec.hull_area_zero"]), (GEO, ["vec.hull_area_zero"]),
                                          (UTM, [])])
def test_hull_area_zero(crs, expected):
    traj = [{"call": "vec.convex_hull", "args": {"vector_path": "p.geojson"}}]
    assert vec_checks(traj, {"p": layer("p.geojson", crs)}) == expected


@pytest.mark.parametrize("args,expected", [({"source": 1}, ["vec.repair_auto_select"]),
                                           ({"target": 1}, ["vec.repair_auto_select"]),
                                           ({"source": 1, "target": 2}, []), ({}, [])])
def test_repair_auto_select(args, expected):
    traj = [{"call": "vec.repair_min_edges", "args": {"graph_path": "g.json", **args}}]
    assert vec_checks(traj, {"g": layer("g.json", PIX)}) == expected


@pytest.mark.parametrize("vectorize_px,step_px,expected", [
    (0.5, None, ["vec.pixel_size_ignored"]),   # the property only: the benchmark's step fails
    (0.5, 0.5, []),
])
def test_pixel_size_ignored_by_length(vectorize_px, step_px, expected):
    inp = {"m": {"image_path": "m.png", "modality": "mask", "spatial_coordinate_system": PIX,
                 "pixel_size_m": 0.5}}
    length_args = {"vector_path": "<vector_path> from trajectory[0].obs"}
    if step_px is not None:
        length_args["pixel_size_m"] = step_px
    traj = [{"call": "ras.vectorize", "args": {"mask_path": "m.png", "classes": [1],
                                               "pixel_size_m": vectorize_px}},
            {"call": "vec.length", "args": length_args}]
    assert vec_checks(traj, inp) == expected


@pytest.mark.parametrize("vectorize_args,expected", [({}, ["vec.pixel_size_ignored"]),
                                                     ({"pixel_size_m": 0.5}, [])])
def test_pixel_size_ignored_by_max_polygon(vectorize_args, expected):
    inp = {"m": {"image_path": "m.png", "modality": "mask", "spatial_coordinate_system": PIX,
                 "pixel_size_m": 0.5}}
    traj = [{"call": "ras.vectorize", "args": {"mask_path": "m.png", "classes": [1], **vectorize_args}},
            {"call": "vec.max_polygon", "args": {"vector_path": "<vector_path> from trajectory[0].obs",
                                                 "pixel_size_m": 0.5}}]
    assert vec_checks(traj, inp) == expected


@pytest.mark.parametrize("attr,expected", [("geometry", ["vec.attribute_text"]),
                                           ("properties.geometry", ["vec.attribute_text"]),
                                           ("types", [])])
def test_filter_by_attribute_on_the_geometry(attr, expected):
    # the benchmark compares the tokens with each geometry's WKT text ('POINT (1 2)')
    inp = {"a": layer("a.geojson", PIX)}
    traj = [{"call": "vec.filter_by_attribute",
             "args": {"vector_path": "a.geojson", "attribute_name": attr, "allowed_values": ["x"]}}]
    assert vec_checks(traj, inp) == expected
