"""Parity of the poi.* tools with the benchmark's dora/tools/poi.py (@7b96988).

Each expected value is worked out by hand from the benchmark's documented behaviour (its code's
branches, read with read_file, summarised in kernel/tools/quirks.py) on small layers written
here, or counted once by hand on the shared Houston fire-station layer. A benchmark stub (its
_tool_guard turning an exception into status "stub") is a ToolError in the studio.
"""
from __future__ import annotations

import numpy as np
import pytest
from conftest import REALDATA, requires_shared
from shapely.geometry import Point, box

from kernel.tools import ToolContext, ToolError, call_tool
from kernel.tools.base import directory_resolver
from kernel.tools.testing import write_geojson, write_tif

REAL = REALDATA
HOUSTON = REAL / "houston-harvey-flooded-roads"

# a 4x4 UTM 15N raster, 10 m pixels, origin (500000, 3300040): col = (x - 500000) / 10,
# row = (3300040 - y) / 10
DMG = np.array([[1, 1, 0, 3], [1, 2, 0, 3], [0, 0, 0, 0], [0, 0, 0, 1]], np.uint8)


@pytest.fixture
def ctx(tmp_path):
    from pyproj import Transformer

    d = tmp_path / "data"
    d.mkdir(exist_ok=True)
    write_tif(d / "dmg.tif", DMG, res=10.0, origin=(500000.0, 3300040.0))
    to_ll = Transformer.from_crs("EPSG:32615", "EPSG:4326", always_xy=True)
    pts = [(500015, 3300025, "Clinic A", "hospital, health"),   # row 1, col 1
           (500035, 3300035, "School", "school"),              # row 0, col 3
           (499995, 3300035, "Edge", "store"),                 # x 0.5 px left: int(-0.5) = 0
           (499985, 3300035, "Left", "store"),                 # x 1.5 px left: int(-1.5) = -1
           (500500, 3300035, "Far", "store")]                  # col 50: outside
    write_geojson(d / "pois.geojson", [
        {"geometry": Point(*to_ll.transform(x, y)), "properties": {"name": n, "types": t}}
        for x, y, n, t in pts])
    write_geojson(d / "polys.geojson", [
        {"geometry": box(0, 0, 1, 1), "properties": {"name": "Park"}},
        {"geometry": Point(5, 5), "properties": {"name": "Kiosk"}}])
    write_geojson(d / "unnamed.geojson", [
        {"geometry": Point(1, 1), "properties": {"name": "Depot"}},
        {"geometry": Point(2, 2), "properties": {"kind": "x"}}])
    write_geojson(d / "listprop.geojson", [
        {"geometry": Point(-94.5, 37.07), "properties": {"name": "L", "types": ["a", "b"]}}])
    write_geojson(d / "empty.geojson", [])
    (d / "pois.json").write_text((d / "pois.geojson").read_text())
    roots = [d] + ([HOUSTON] if HOUSTON.is_dir() else [])
    return ToolContext(work_dir=tmp_path / "work", resolve_path=directory_resolver(*roots))


def run(ctx, tool, **args):
    return call_tool(tool, args, ctx)


# ---- poi.world_to_pixel -------------------------------------------------------------------
def test_w2p_positions_truncate_toward_zero(ctx):
    w = run(ctx, "poi.world_to_pixel", geojson_path="pois.geojson", raster_path="dmg.tif")
    rc = {f["properties"]["name"]: (f["properties"]["pixel_row"], f["properties"]["pixel_col"])
          for f in w["features"]}
    # Clinic (1, 1), School (0, 3), Edge int(-0.5) = 0 kept; Left int(-1.5) = -1 and Far dropped
    assert rc == {"Clinic A": (1, 1), "School": (0, 3), "Edge": (0, 0)}
    assert (w["total_points"], w["valid_points"], w["filtered_points"]) == (5, 3, 2)


def test_w2p_constant_pixel_size_and_metadata(ctx):
    w = run(ctx, "poi.world_to_pixel", geojson_path="pois.geojson", raster_path="dmg.tif")
    props = w["features"][0]["properties"]
    assert props["pixel_size_m"] == 0.8  # the benchmark's constant, not the raster's 10 m
    assert props["utm_x"] == pytest.approx(500015, abs=1e-6)
    assert w["features"][0]["geometry"]["coordinates"] == [1.0, 1.0]  # [col, row] floats
    # rasterio bounds of the 40 m square
    assert w["image_bounds"] == {"left": 500000.0, "right": 500040.0, "bottom": 3300000.0,
                                 "top": 3300040.0}
    assert w["image_size"] == [4, 4] and w["source_crs"] == "EPSG:4326"
    assert w["target_crs"] == "EPSG:32615"


@pytest.mark.parametrize("layer", ["empty.geojson", "polys.geojson", "pois.json"])
def test_w2p_benchmark_failures(ctx, layer):
    # empty layer: stub "Empty GeoJSON input"; a polygon has no .x; .json is not read by
    # _read_geojson
    with pytest.raises(ToolError):
        run(ctx, "poi.world_to_pixel", geojson_path=layer, raster_path="dmg.tif")


def test_list_property_fails_only_where_properties_are_written(ctx):
    # geopandas reads a list property as a numpy array, which json.dumps cannot write: the
    # search (which writes every match's properties) fails; world_to_pixel drops this point
    # (outside the 40 m raster) before writing its properties, so it does not
    with pytest.raises(ToolError):
        run(ctx, "poi.search_by_name", geojson_path="listprop.geojson", name="l")
    w = run(ctx, "poi.world_to_pixel", geojson_path="listprop.geojson", raster_path="dmg.tif")
    assert (w["valid_points"], w["filtered_points"]) == (0, 1)


# ---- poi.search_by_name -------------------------------------------------------------------
def test_search_fuzzy_exact_and_none(ctx):
    s = run(ctx, "poi.search_by_name", geojson_path="pois.geojson", name="CLINIC")
    assert s["total_found"] == 1 and s["results"][0]["name"] == "Clinic A"
    assert s["results"][0]["properties"] == {"name": "Clinic A", "types": "hospital, health",
                                             "geometry_type": "Point"}
    assert run(ctx, "poi.search_by_name", geojson_path="pois.geojson", name="clinic a",
               exact=True)["total_found"] == 0  # exact is case-sensitive
    none = run(ctx, "poi.search_by_name", geojson_path="pois.geojson", name="zzz")
    assert none["output_path"] == "None" and none["results"] == []  # str(None)


def test_search_raw_coordinates_of_a_pixel_layer(ctx):
    # no reprojection: latitude/longitude are the point's y/x as stored
    s = run(ctx, "poi.search_by_name", geojson_path="polys.geojson", name="kiosk")
    assert (s["results"][0]["latitude"], s["results"][0]["longitude"]) == (5.0, 5.0)


@pytest.mark.parametrize("layer,name,exact", [("polys.geojson", "park", False),
                                              ("unnamed.geojson", "depot", False),
                                              ("empty.geojson", "x", False)])
def test_search_failures(ctx, layer, name, exact):
    # a matching polygon has no .y; an unnamed feature's NaN has no .lower(); empty → stub
    with pytest.raises(ToolError):
        run(ctx, "poi.search_by_name", geojson_path=layer, name=name, exact=exact)


def test_search_exact_over_unnamed_features(ctx):
    # exact compares NaN == "Depot" (False) without calling .lower(): no failure
    assert run(ctx, "poi.search_by_name", geojson_path="unnamed.geojson", name="Depot",
               exact=True)["total_found"] == 1


@requires_shared(HOUSTON)
def test_search_real_houston(ctx):
    # counted once by hand over the 111 stations: names containing "station 4" are 40-49 less
    # the missing ones (the tool-examples case lists 40, 46, 49 for the smaller layer)
    s = run(ctx, "poi.search_by_name", geojson_path="firestations.geojson", name="station 2")
    assert s["total_found"] == 13


# ---- poi.to_vector ------------------------------------------------------------------------
def test_to_vector_regex_filter(ctx):
    # str.contains is a regular expression: "cl.nic" matches "clinic a"
    assert run(ctx, "poi.to_vector", geojson_path="pois.geojson", name="cl.nic")["count"] == 1
    assert run(ctx, "poi.to_vector", geojson_path="pois.geojson")["count"] == 5
    v = run(ctx, "poi.to_vector", geojson_path="pois.geojson", name="School", exact=True)
    assert (v["count"], v["name_filter"], v["exact_match"]) == (1, "School", True)


def test_to_vector_empty_result_and_failures(ctx):
    assert run(ctx, "poi.to_vector", geojson_path="pois.geojson", name="zzz")["count"] == 0
    with pytest.raises(ToolError):  # empty input: stub
        run(ctx, "poi.to_vector", geojson_path="empty.geojson")
    with pytest.raises(ToolError):  # unbalanced bracket: re.error
        run(ctx, "poi.to_vector", geojson_path="pois.geojson", name="a[")


# ---- loop results -------------------------------------------------------------------------
def _loop(*samples, item=None):
    return [{"item": item or {"properties": {"types": f"t{i}, x"}}, "last_obs": {"pixel_values": pv}}
            for i, pv in enumerate(samples)]


@pytest.mark.parametrize("pv,damage_class,intact_class", [
    ({"1": 3}, 3, 3),            # one band: the value
    ({"1": "2"}, 2, 2),          # int("2")
    ({"1": "x"}, None, None),    # int("x") fails; as a count map "x" > -1 is a TypeError
    ({"0": 5}, 5, 0),            # damage: the value; intact: key 0 is no band → class 0
    ({"12": 1}, 1, 12),          # key 12 is no band (1..10) → class 12
    ({"1": 4, "2": 9}, 2, 2),    # a count map: the most frequent class
    ({"1": 4, "2": 4}, 1, 1),    # ties: the first
    ({}, None, None),
])
def test_damage_and_intact_class_readings(pv, damage_class, intact_class):
    from kernel.tools.poi import damage_class_of, intact_class_of

    assert damage_class_of(pv) == damage_class and intact_class_of(pv) == intact_class


def test_filter_by_damage_and_intact(ctx):
    data = _loop({"1": 1}, {"1": 2}, {"1": 3}, {"0": 1}) + [{"item": {}, "last_obs": None}]
    d = run(ctx, "poi.filter_by_damage", data=data)
    assert (d["total_input"], d["total_filtered"], d["total_damaged"]) == (5, 2, 2)
    assert run(ctx, "poi.filter_by_damage", data=data, min_damage_class=1)["total_filtered"] == 4
    i = run(ctx, "poi.filter_by_intact", data=data)
    # {"1": 1} is class 1; {"0": 1} is class 0 for filter_by_intact (and 1 for filter_by_damage)
    assert (i["total_input"], i["total_intact"]) == (5, 1)
    assert run(ctx, "poi.filter_by_intact", data=[]) == {
        "tool": "poi.filter_by_intact", "total_input": 0, "total_intact": 0, "filtered_results": []}


def test_group_by_first_token_sum_and_short_empty(ctx):
    data = _loop({"1": 2}, {"1": 3}) + _loop({"1": 1})
    g = run(ctx, "poi.group_by", data=data, group_field="item.properties.types",
            count_field="damage_class", return_sum=True)
    # t0 (class 2 + class 1 from the second _loop's t0), t1 (class 3)
    assert g["groups"] == {"t0": {"count": 2, "sum": 3.0}, "t1": {"count": 1, "sum": 3.0}}
    assert g["total_items"] == 3 and g["total_groups"] == 2
    e = run(ctx, "poi.group_by", data=[], group_field="x")
    assert set(e) == {"tool", "group_field", "count_field", "total_items", "total_groups", "groups"}


def test_group_by_keys_missing_numbers_and_lists(ctx):
    data = [{"k": 2}, {"k": 2.0}, {"k": True}, {"k": None}, {"z": 1}]
    g = run(ctx, "poi.group_by", data=data, group_field="k")
    # 2 and 2.0 are one dict key (named after the first seen, "2"); True is another ("True");
    # a null and a missing field are left out of the groups but counted in total_items
    assert g["groups"] == {"2": {"count": 2}, "True": {"count": 1}} and g["total_items"] == 5
    with pytest.raises(ToolError):  # a list value is unhashable in the benchmark
        run(ctx, "poi.group_by", data=[{"k": ["a", "b"]}], group_field="k")
    with pytest.raises(ToolError):
        run(ctx, "poi.group_by", data=[{"k": "a", "v": "many"}], group_field="k",
            count_field="v")


def test_group_by_zero_sum_hidden(ctx):
    g = run(ctx, "poi.group_by", data=[{"k": "a", "v": 0}], group_field="k", count_field="v",
            return_sum=True, return_item_details=True)
    assert g["groups"] == {"a": {"count": 1, "items": [{"k": "a", "v": 0}]}}  # sum 0 left out


def test_filter_by_attribute_tokens(ctx):
    data = [{"item": {"properties": {"types": "cafe, bank"}}},
            {"item": {"properties": {"types": ["bank"]}}},
            {"item": {"types": "bank"}},                     # no properties: the item itself
            {"item": {"properties": {"types": None}}},       # str(None) = "None"
            {"item": {"properties": {}}}]                    # missing: ""
    f = run(ctx, "poi.filter_by_attribute", data=data, attribute_name="types",
            allowed_values=["bank"])
    assert f["total_filtered"] == 3 and f["allowed_values"] == ["bank"]
    assert run(ctx, "poi.filter_by_attribute", data=data, attribute_name="types",
               allowed_values=["None", ""])["total_filtered"] == 2
    e = run(ctx, "poi.filter_by_attribute", data=[], attribute_name="types", allowed_values=["a"])
    assert "allowed_values" not in e and e["total_filtered"] == 0
    with pytest.raises(ToolError):  # properties not an object: .get fails in the benchmark
        run(ctx, "poi.filter_by_attribute", data=[{"item": {"properties": "x"}}],
            attribute_name="types", allowed_values=["a"])


def test_exposure_join_threshold_and_ranking(ctx):
    dmg = [{"name": "H1", "max": 3, "type": "hospital", "feature_idx": 0},
           {"name": "S1", "max": 2, "types": "school, edu", "feature_idx": 1},
           {"name": "M1", "max": 1, "type": "market", "feature_idx": 2},
           {"name": "X", "max": 4, "feature_idx": 3}]
    pop = [{"name": "H1", "max": 100, "feature_idx": 10}, {"name": "S1", "max": 100,
                                                            "feature_idx": 11},
           {"name": "M1", "max": 900, "feature_idx": 12}]
    e = run(ctx, "poi.damage_population_exposure", damage_feature_stats=dmg,
            population_feature_stats=pop)
    # M1 below 2; X has no population; equal population 100: damage 3 (H1) before 2 (S1)
    assert [p["name"] for p in e["exposed_pois"]] == ["H1", "S1"]
    assert e["top_exposed_poi"]["population_feature_idx"] == 10 and e["total_exposed"] == 2
    e = run(ctx, "poi.damage_population_exposure", damage_feature_stats=dmg,
            population_feature_stats=pop, allowed_types=[" edu ", ""])
    assert [p["name"] for p in e["exposed_pois"]] == ["S1"] and e["allowed_types"] == ["edu"]
    with pytest.raises(ToolError):  # float("high") fails in the benchmark
        run(ctx, "poi.damage_population_exposure",
            damage_feature_stats=[{"name": "H1", "max": "high"}], population_feature_stats=pop)


def test_integer_properties_come_out_as_python_ints(ctx, tmp_path):
    # geopandas reads 4611686018427387904 as int64; the benchmark's iterrows rows are object
    # Series, so the value is a Python int that json.dumps writes (an OSM id, say)
    write_geojson(tmp_path / "data" / "osm.geojson", [
        {"geometry": Point(24.94, 60.17), "properties": {"name": "Kauppatori", "osmid": 2 ** 62}}])
    s = run(ctx, "poi.search_by_name", geojson_path="osm.geojson", name="tori")
    assert s["results"][0]["properties"]["osmid"] == 2 ** 62


@requires_shared(HOUSTON)
def test_to_vector_real_houston_keeps_the_layer_crs(ctx):
    import json as _json

    # 6 station names contain "galveston" (counted once by hand with json.load); the 3-D points
    # are read by geopandas as EPSG:4979, which the written layer keeps
    v = run(ctx, "poi.to_vector", geojson_path="firestations.geojson", name="GALVESTON")
    assert v["count"] == 6 and v["name_filter"] == "GALVESTON" and v["exact_match"] is False
    doc = _json.loads((ctx.work_dir / v["vector_path"]).read_text())
    assert len(doc["features"]) == 6 and "4979" in doc["crs"]["properties"]["name"]


def test_filter_by_attribute_is_case_sensitive_and_exact(ctx):
    data = [{"item": {"properties": {"types": "Bank, cafe"}}},
            {"item": {"properties": {"types": "banking"}}}]
    f = run(ctx, "poi.filter_by_attribute", data=data, attribute_name="types",
            allowed_values=["bank"])
    # "Bank" ≠ "bank", "banking" ≠ "bank": exact tokens only
    assert f["total_filtered"] == 0 and f["total_input"] == 2
    assert run(ctx, "poi.filter_by_attribute", data=data, attribute_name="types",
               allowed_values=["cafe"])["total_filtered"] == 1


def test_filter_by_attribute_number_values(ctx):
    data = [{"item": {"properties": {"floors": 3}}}, {"item": {"properties": {"floors": 3.0}}}]
    # non-text values compare as str(value): "3" and "3.0"
    f = run(ctx, "poi.filter_by_attribute", data=data, attribute_name="floors",
            allowed_values=["3"])
    assert f["total_filtered"] == 1 and f["filtered_results"] == [data[0]]


def test_exposure_threshold_and_missing_values(ctx):
    dmg = [{"name": "A", "max": 1.5}, {"name": "B", "max": None}, {"name": "C", "max": 2}]
    pop = [{"name": "A", "max": 10}, {"name": "B", "max": 20}, {"name": "C", "mean": 5}]
    e = run(ctx, "poi.damage_population_exposure", damage_feature_stats=dmg,
            population_feature_stats=pop, damage_threshold=1.0)
    # B has no damage value, C no population "max": only A (1.5 >= 1.0) is kept
    assert [p["name"] for p in e["exposed_pois"]] == ["A"] and e["damage_threshold"] == 1.0
    assert e["exposed_pois"][0] == {"name": "A", "types": None, "damage_value": 1.5,
                                    "population_value": 10.0, "damage_feature_idx": None,
                                    "population_feature_idx": None}


def test_exposure_join_on_another_field_and_empty(ctx):
    dmg = [{"id": 7, "peak": 3.0, "name": "x"}]
    pop = [{"id": "7", "peak": 40.0}]
    e = run(ctx, "poi.damage_population_exposure", damage_feature_stats=dmg,
            population_feature_stats=pop, join_field="id", damage_field="peak",
            population_field="peak")
    # keys are joined as strings: 7 and "7" meet; the exposed name is str(7)
    assert e["total_exposed"] == 1 and e["top_exposed_poi"]["name"] == "7"
    empty = run(ctx, "poi.damage_population_exposure", damage_feature_stats=[],
                population_feature_stats=[])
    assert (empty["total_exposed"], empty["top_exposed_poi"], empty["exposed_pois"]) == (0, None, [])


def test_group_by_number_and_text_keys_share_one_name(ctx):
    # the benchmark groups on the raw value (1 and "1" are two groups) and then names each group
    # str(value) in a new dict, so the later group "1" (count 1) overwrites the group 1
    # (count 2): one group left, though total_items counts all three (worked out by hand)
    g = run(ctx, "poi.group_by", data=[{"k": 1}, {"k": 1}, {"k": "1"}], group_field="k")
    assert g["groups"] == {"1": {"count": 1}} and (g["total_items"], g["total_groups"]) == (3, 1)


def test_count_map_skips_a_text_count(ctx):
    # {"2": "5", "3": 1} has two entries, so it is read as a class -> count map; "5" > -1 is a
    # TypeError, which the benchmark's loop skips, leaving class 3 (by hand from its branches)
    from kernel.tools.poi import damage_class_of, intact_class_of

    assert damage_class_of({"2": "5", "3": 1}) == 3 and intact_class_of({"2": "5", "3": 1}) == 3
    d = run(ctx, "poi.filter_by_damage", data=_loop({"2": "5", "3": 1}), min_damage_class=3)
    assert d["total_filtered"] == 1


def test_search_keeps_a_missing_number_as_nan(ctx):
    # geopandas reads a null in a number column as NaN; the benchmark's props carry it and its
    # json.dumps writes the token NaN, which the harness reads back as a float NaN
    import math

    d = ctx.resolve_path("pois.geojson").parent
    write_geojson(d / "nums.geojson", [
        {"geometry": Point(1, 1), "properties": {"name": "A", "n": 1.5}},
        {"geometry": Point(2, 2), "properties": {"name": "B", "n": None}}])
    r = run(ctx, "poi.search_by_name", geojson_path="nums.geojson", name="b")["results"]
    assert len(r) == 1 and r[0]["name"] == "B" and math.isnan(r[0]["properties"]["n"])
