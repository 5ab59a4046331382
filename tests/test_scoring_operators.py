"""Hand-worked cases for each operator of the scorer (mode dora unless said otherwise).

Each expected value is derived in the comment beside it from the rule in shared/spec/scoring.md.
"""
from __future__ import annotations

import json
import math

import pytest

from evaluation.scoring import evaluate_samples, parse_prediction, score_task
from evaluation.scoring.config import ScoringConfig
from evaluation.scoring.normalize import canonical_exact, normalize_dict_key, normalize_tool_name
from evaluation.scoring.operators import (
    haversine_m,
    score_answer,
    score_exact,
    score_ranking_kendall,
    score_ratio,
    score_scalar,
    score_scalar_dict,
    score_set_f1,
)
from evaluation.scoring.parsing import parse_string_prediction
from evaluation.scoring.polygons import polygon_iou_detail, score_polygon_iou
from evaluation.scoring.trajectory import _canonical_stem, trajectory_metrics

PAPER = ScoringConfig(mode="paper")


# ── scalars ──────────────────────────────────────────────────────────────
@pytest.mark.parametrize("pred,gold,expected", [
    (14.4, 12, 1.0),       # |2.4| <= 1 + 0.2*12 = 3.4
    (15.5, 12, 0.0),       # |3.5| >  3.4
    (5, 4, 1.0),           # |1| <= 1 + 0.8
    ("6 images", 6, 0.0),  # float("6 images") fails
    (" 7 ", 7, 1.0),       # float() trims spaces
    (None, None, 1.0),     # equality shortcut: a field missing on both sides passes
    (float("nan"), float("nan"), 1.0),
    (True, 1, 1.0),        # True == 1 in Python
    ([1, 2], [1, 2], 1.0), # equality shortcut on non-numbers
])
def test_scalar(pred, gold, expected):
    assert score_scalar(pred, gold) == expected


@pytest.mark.parametrize("pred,gold,expected", [
    ("42 %", 0.42, 1.0),   # 42 -> gold is a fraction, pred is not -> 42/100 = 0.42
    (0.18, 18.0, 1.0),     # 0.18*100 = 18
    (0.5, 0.42, 1.0),      # |0.08| <= 0.2*0.42 = 0.084
    (0.51, 0.42, 0.0),     # |0.09| >  0.084 (no absolute slack for ratios)
    (1.6, 1.5, 1.0),       # |0.1| <= 0.3, both "fractions", no rescale needed
    (160, 1.6, 0.0),       # gold 1.6 > 1.5 is not a fraction: 160 is not rescaled, |158.4| > 0.32
    (None, 0.4, 0.0),      # fallback score_scalar(None, 0.4, tau_a=0) -> float(None) fails
])
def test_ratio(pred, gold, expected):
    assert score_ratio(pred, gold) == expected


def test_percent_like_names_only_for_scalar_continuous():
    spec = {"road_share": "scalar_continuous", "count_pct": "scalar_count"}
    # road_share: ratio rule, 42 -> 0.42 passes; count_pct: plain scalar, |42-0.42| > 1.084 fails
    _, fields = score_answer({"road_share": 42, "count_pct": 42}, {"road_share": 0.42, "count_pct": 0.42}, spec)
    assert fields == {"road_share": 1.0, "count_pct": 0.0}


# ── exact match ──────────────────────────────────────────────────────────
@pytest.mark.parametrize("pred,gold,expected", [
    ("T2", "phase_t2", 1.0),      # "phase_t2" -> "t2"; "T2" -> "t2"
    ("Phase 2", "p2", 1.0),       # "phase 2" -> "p2"
    ("t 3", "T3", 1.0),           # "t 3" -> "t3"
    ("No.", "no", 1.0),           # punctuation removed; "no" -> "false"
    (False, "no", 1.0),
    ("y", "yes", 0.0),            # only yes/true and no/false are boolean aliases
    (5.0, "5", 1.0),              # integral float -> "5"
    ("5.0", 5, 0.0),              # the *string* "5.0" becomes "5 0" before the number check
    ("HIGH", "high", 1.0),
    (None, "", 1.0),
])
def test_exact(pred, gold, expected):
    assert score_exact(pred, gold) == expected


def test_unknown_type_is_exact_match():
    _, fields = score_answer({"headline": "severe flooding in sylhet."}, {"headline": "Severe flooding in Sylhet"},
                             {"headline": "text_similarity"})
    assert fields == {"headline": 1.0}


def test_canonical_forms():
    assert canonical_exact("Phase T1") == "t1"
    assert normalize_dict_key("Phase 2") == "p2"
    assert normalize_dict_key("rank_3") == "3"
    assert normalize_dict_key("Flooded-Buildings") == "flooded_building"
    assert normalize_dict_key("class") == "class"        # ends in "ss": kept
    assert normalize_dict_key("bus") == "bus"            # 3 letters: kept
    assert normalize_tool_name("seg_building_damage(pre, post)") == "seg.building_damage"
    assert normalize_tool_name("tool.loop") == "tool.loop"


# ── sets and rankings ───────────────────────────────────────────────────
def test_set_f1():
    gold = ["Residential", "Commercial", "Industrial"]
    assert score_set_f1("residential, commercial", gold) == pytest.approx(0.8)   # P=1, R=2/3
    assert score_set_f1(["RESIDENTIAL", "commercial", "industrial", "agricultural"], gold) == pytest.approx(6 / 7)
    assert score_set_f1([], []) == 1.0
    assert score_set_f1(None, gold) == 0.0


def test_kendall():
    assert score_ranking_kendall(["Z2", "Z1", "Z3", "Z4"], ["Z1", "Z2", "Z3", "Z4"]) == pytest.approx(5 / 6)  # tau=4/6
    assert score_ranking_kendall(["A", "C"], ["A", "B", "C"]) == 1.0   # common items A, C in order
    assert score_ranking_kendall(["a", "b", "c"], ["A", "B", "C"]) == 0.0  # no common item, different sets
    assert score_ranking_kendall(["C", "B", "A"], ["A", "B", "C"]) == 0.0  # tau = -1
    assert score_ranking_kendall(["A"], ["A"]) == 1.0
    assert score_ranking_kendall("A,B", ["A", "B"]) == 0.0


# ── dicts ────────────────────────────────────────────────────────────────
def test_scalar_dict():
    gold = {"Phase 1": 0.25, "phase_2": 40, "buildings": 120, "zone_id": "A7", "centroid_lat": 24.0}
    pred = {"p1": 25, "P2": 47, "building": 150, "zone_id": "a7 ", "centroid_lat": 24.0001, "extra": 5}
    # p1: |g|<=1.5 -> ratio rule, 25/100 = 0.25 -> 1
    # p2: |47-40| = 7 <= 1 + 8 -> 1
    # building: |30| > 1 + 24 -> 0
    # zone_id: exact "a7" == "a7" -> 1
    # centroid_lat: GSD 1 m -> 20 m = 1.797e-4 deg >= 1e-4 -> 1 ; "extra" is ignored
    assert score_scalar_dict(pred, gold, gsd_m=1.0) == pytest.approx(4 / 5)
    # with GSD 0.2 m the tolerance is 4 m = 3.59e-5 deg < 1e-4 -> the lat key fails
    assert score_scalar_dict(pred, gold, gsd_m=0.2) == pytest.approx(3 / 5)
    assert score_scalar_dict({}, {}) == 1.0
    assert score_scalar_dict("x", {}) == 0.0


# ── points ───────────────────────────────────────────────────────────────
def test_point_pixel_field_and_pair():
    spec = {"epicenter_px": "point_pixel"}
    gold = {"epicenter_px": {"pixel_row": 461, "pixel_col": 856}}
    assert score_answer({"epicenter_px": [473, 872]}, gold, spec)[1] == {"epicenter_px": 1.0}  # sqrt(144+256)=20
    assert score_answer({"epicenter_px": {"row": 461, "col": 877}}, gold, spec)[1] == {"epicenter_px": 0.0}  # 21 px
    spec = {"site_row": "point_pixel", "site_col": "point_pixel", "n": "scalar_count"}
    score, fields = score_answer({"site_row": 100, "site_col": 112, "n": 3}, {"site_row": 100, "site_col": 100, "n": 3}, spec)
    assert fields == {"n": 1.0, "site__point_px": 1.0} and score == 1.0           # 12 px; pairs come last


def test_point_haversine_uses_gsd():
    # 1e-4 degree of latitude = 6 371 000 * 1e-4 * pi/180 = 11.12 m ; 8e-5 -> 8.90 m
    assert haversine_m(24.0, 90.0, 24.0001, 90.0) == pytest.approx(11.1195, abs=1e-3)
    spec = {"shelter_lat": "point_haversine", "shelter_lon": "point_haversine"}
    gold = {"shelter_lat": 24.0, "shelter_lon": 90.0}
    near = {"shelter_lat": 24.00008, "shelter_lon": 90.0}
    far = {"shelter_lat": 24.0001, "shelter_lon": 90.0}
    assert score_answer(near, gold, spec, gsd_m=0.5)[1] == {"shelter__point_geo": 1.0}  # 8.9 m <= 20*0.5 = 10 m
    assert score_answer(far, gold, spec, gsd_m=0.5)[1] == {"shelter__point_geo": 0.0}   # 11.1 m > 10 m
    assert score_answer(far, gold, spec, gsd_m=None)[1] == {"shelter__point_geo": 1.0}  # fallback 20 m
    assert score_answer({"shelter_lat": None}, gold, spec)[1] == {"shelter__point_geo": 0.0}  # float(None) fails
    # a single-field geographic point, dict against list
    one = {"site": "point_haversine"}
    assert score_answer({"site": [24.00008, 90.0]}, {"site": {"lat": 24.0, "lon": 90.0}}, one, gsd_m=0.5)[1] == {"site": 1.0}
    # a lone half of a pair is never scored
    assert score_answer({}, {}, {"x_lat": "point_haversine"})[1] == {}


def test_gsd_from_input_data_in_score_task():
    sample = {"sample_id": "s", "input_data": {"post_image": {"pixel_size_m": 0.5}}}
    task = {"final_answer": {"p_lat": 24.0, "p_lon": 90.0}, "trajectory": [],
            "eval_spec": {"p_lat": "point_haversine", "p_lon": "point_haversine"}}
    rec = {"question_id": "s_task0", "predicted_answer": {"p_lat": 24.0001, "p_lon": 90.0}}
    assert score_task(task, sample, rec)["field_scores"] == {"p__point_geo": 0.0}   # 11.1 m > 10 m
    sample["input_data"] = {"temporal_images": {"t1": {"pixel_size_m": 10}}}
    assert score_task(task, sample, rec)["field_scores"] == {"p__point_geo": 1.0}   # 11.1 m <= 200 m


def test_ignore_only_task_has_no_score():
    score, fields = score_answer({"a": 1}, {"a": 1}, {"a": "ignore"})
    assert math.isnan(score) and fields == {}
    res = score_task({"final_answer": {"a": 1}, "eval_spec": {"a": "ignore"}, "trajectory": []}, {"sample_id": "s"}, None)
    assert res["task_score"] is None and res["n_scored_fields"] == 0


# ── polygons ─────────────────────────────────────────────────────────────
# grid: x = 0.5*col + 500000, y = -0.5*row + 4000000 (EPSG:32633). Gold square: cols/rows 10..30
# -> x 500005..500015, y 3999985..3999995: 100 m2.
GRID = {"transform": [0.5, 0, 500000, 0, -0.5, 4000000], "crs": "EPSG:32633"}


def _square(c0, r0, c1, r1):
    return [[[c0, r0], [c1, r0], [c1, r1], [c0, r1], [c0, r0]]]


def _world(c0, r0, c1, r1):
    return [[[0.5 * c + 500000, -0.5 * r + 4000000] for c, r in ring] for ring in _square(c0, r0, c1, r1)][0]


def _fc(*geoms, crs=None, grid=None):
    doc = {"type": "FeatureCollection", "features": [{"type": "Feature", "properties": {}, "geometry": g} for g in geoms]}
    if crs:
        doc["crs"] = {"type": "name", "properties": {"name": crs}}
    if grid:
        doc["dora_grid"] = grid
    return doc


@pytest.fixture()
def polygon_dirs(tmp_path):
    tasks, run = tmp_path / "tasks", tmp_path / "run"
    (tasks / "gold_polygons").mkdir(parents=True)
    artifacts = run / "t1_perception_and_assessment" / "workers" / "w0" / "tmp" / "q"
    artifacts.mkdir(parents=True)
    gold = _fc({"type": "Polygon", "coordinates": [_world(10, 10, 30, 30)]}, crs="EPSG:32633", grid=GRID)
    (tasks / "gold_polygons" / "flood.geojson").write_text(json.dumps(gold))
    (tasks / "gold_polygons" / "none.geojson").write_text(json.dumps(_fc(grid=GRID)))

    def pred(name, doc):
        (artifacts / name).write_text(json.dumps(doc))
        # the run record names the file by its absolute path on the agent's machine
        return f"/home/agent/outputs/myrun/t1_perception_and_assessment/workers/w0/tmp/q/{name}"
    return tasks, run, pred


def test_polygon_iou_with_dora_grid(polygon_dirs):
    tasks, run, pred = polygon_dirs
    roots = (tasks, run)
    gold = "gold_polygons/flood.geojson"
    # pixel prediction shifted 2 columns (1 m): intersection 9x10 = 90, union 110 -> IoU 0.82 -> 1
    shifted = pred("a.geojson", _fc({"type": "Polygon", "coordinates": _square(12, 10, 32, 30)}))
    assert polygon_iou_detail(shifted, gold, roots)[0] == 1.0
    # shifted 15 columns (7.5 m): intersection 2.5x10 = 25, union 175 -> IoU 0.14 -> 0
    far = pred("b.geojson", _fc({"type": "Polygon", "coordinates": _square(25, 10, 45, 30)}))
    score, why = polygon_iou_detail(far, gold, roots)
    assert score == 0.0 and why.startswith("IoU 0.1429")
    # multipolygon: the largest part (the good square) is used, the small far one ignored
    multi = pred("c.geojson", _fc({"type": "MultiPolygon", "coordinates": [_square(500, 500, 502, 502), _square(10, 10, 30, 30)]}))
    assert score_polygon_iou(multi, gold, roots) == 1.0
    # same CRS as the grid: world coordinates taken as they are
    world = pred("d.geojson", _fc({"type": "Polygon", "coordinates": [_world(10, 10, 30, 30)]}, crs="EPSG:32633"))
    assert score_polygon_iou(world, gold, roots) == 1.0
    # another CRS: reprojected into the grid's CRS first
    from pyproj import Transformer
    to_ll = Transformer.from_crs("EPSG:32633", "EPSG:4326", always_xy=True)
    ring = [list(to_ll.transform(x, y)) for x, y in _world(10, 10, 30, 30)]
    lonlat = pred("e.geojson", _fc({"type": "Polygon", "coordinates": [ring]}, crs="EPSG:4326"))
    assert score_polygon_iou(lonlat, gold, roots) == 1.0
    # a bow-tie ring is repaired with buffer(0) instead of failing
    bowtie = pred("f.geojson", _fc({"type": "Polygon", "coordinates": [[[10, 10], [30, 30], [30, 10], [10, 30], [10, 10]]]}))
    assert polygon_iou_detail(bowtie, gold, roots)[1].startswith("IoU")
    # missing file, empty answer, identical value
    with pytest.warns(UserWarning, match="cannot locate pred polygon file"):
        assert score_polygon_iou("/nowhere/x.geojson", gold, roots) == 0.0
    assert score_polygon_iou("none", gold, roots) == 0.0
    assert score_polygon_iou(gold, gold, roots) == 1.0
    # empty gold: an empty answer scores 1, a polygon 0
    assert score_polygon_iou("", "gold_polygons/none.geojson", roots) == 1.0
    assert score_polygon_iou(None, "gold_polygons/none.geojson", roots) == 1.0     # str(None) = "None"
    assert score_polygon_iou(shifted, "gold_polygons/none.geojson", roots) == 0.0


def test_polygon_through_evaluate_samples(polygon_dirs):
    tasks, run, pred = polygon_dirs
    path = pred("a.geojson", _fc({"type": "Polygon", "coordinates": _square(12, 10, 32, 30)}))
    samples = {"t1": [{"sample_id": "s1", "input_data": {}, "tasks": [
        {"final_answer": {"extent": "gold_polygons/flood.geojson"}, "eval_spec": {"extent": "polygon_iou"}, "trajectory": []}]}]}
    records = {"t1": [{"question_id": "s1_task0", "predicted_answer": {"extent": path}, "trajectory": []}]}
    doc = evaluate_samples(samples, records, tasks / "gold_polygons", polygon_roots=[run])
    assert doc["full"]["t1"]["tasks"][0]["field_scores"] == {"extent": 1.0}
    assert doc["mode"] == "dora" and doc["dora_score"] == 1.0


# ── prediction parsing ───────────────────────────────────────────────────
@pytest.mark.parametrize("value,expected", [
    ({"a": 1}, {"a": 1}),
    (None, {}),
    ('<Answer>```json\n{"a": 1}\n```</Answer>', {"a": 1}),
    ('Based on the analysis, {"severity": "High", "n": {"x": 2}} as computed.', {"severity": "High", "n": {"x": 2}}),
    ('first {broken} then {"a": 2}', {"a": 2}),            # a failed block resets the scan
    ('} {"a": 1}', {"_raw": '} {"a": 1}'}),                # the stray "}" drives the depth below 0
    ("42", {"_raw": "42"}),                                # JSON, but not an object
    (42, {"_raw": "42"}),
    ("", {"_raw": ""}),
])
def test_parse_prediction(value, expected):
    assert parse_prediction(value) == expected


def test_parse_string_prediction_returns_text_when_no_dict():
    assert parse_string_prediction("no answer") == "no answer"


# ── trajectories ─────────────────────────────────────────────────────────
def _text_obs(d):
    return [{"type": "text", "text": json.dumps(d)}]


GOLD_TRAJ = [
    {"call": "seg.flood", "args": {"pre_image_path": "scene/pre.tif", "post_image_path": "scene/post.tif"},
     "obs": {"mask_path": "/gold/out/flood_mask.tif"}},
    {"call": "tool.loop", "args": {"calls": []}, "obs": []},                                   # wrapper: dropped
    {"call": "ras.area", "args": {"mask_path": "<mask_path> from trajectory[0].obs", "class_id": 1}, "obs": {"area_m2": 1200}},
    {"call": "vec.buffer", "args": {"input_path": "/gold/out/flood_mask.tif", "distance_m": 50},
     "obs": {"output_path": "/gold/out/buf.geojson"}},
    {"call": "vis.map", "args": {"layer": "/gold/out/buf.geojson", "title": "Flood"}, "obs": {}},
]
PRED_TRAJ = [
    {"call": "seg_flood(pre_image_path, post_image_path)",
     "args": {"pre_image_path": "/abs/images/scene/pre.tif", "post_image_path": "/abs/images/scene/post.tif"},
     "obs": _text_obs({"mask_path": "/w/tmp/q/flood_mask_3fa9c2d1.tif"})},
    {"call": "ras_area(mask_path, class_id)", "args": {"mask_path": "/w/tmp/q/flood_mask_3fa9c2d1.tif", "class_id": 1.5},
     "obs": _text_obs({"area_m2": 1100})},
    {"call": "vec_buffer(input_path, distance_m)", "args": {"input_path": "/w/tmp/q/other.tif", "distance_m": 80},
     "obs": _text_obs({"output_path": "/w/tmp/q/buf.geojson"})},
    {"call": "vis_map(layer, title)", "args": {"layer": "/w/tmp/q/buf.geojson", "title": "flood!"}, "obs": None},
    {"call": "report_extract_evidence", "args": {}, "obs": None},
]


def test_trajectory_metrics_hand_worked():
    metrics, table = trajectory_metrics(PRED_TRAJ, GOLD_TRAJ, explain=True)
    # G = [seg.flood, ras.area, vec.buffer, vis.map]; P = G + [report.extract_evidence]
    assert metrics["t_any"] == metrics["t_ord"] == metrics["t_em"] == 1.0
    assert metrics["eff"] == 4 / 5
    # step 0: both image paths are raw inputs -> 2/2; step 1: symbolic ref ok, |1.5-1| <= 1.2 -> 2/2
    # step 2: input_path produced by gold step 0 where both call seg.flood -> ok; |80-50| > 11 -> 1/2
    # step 3: layer produced by step 2 on both sides; "flood!" ~ "Flood" -> 2/2      => 3.5 / 4
    assert metrics["par_acc"] == 3.5 / 4
    assert [r["score"] for r in table] == [1.0, 1.0, 0.5, 1.0]
    assert [r["gold_raw_index"] for r in table] == [0, 2, 3, 4]
    why = {(r["gold_index"], a["name"]): a["why"] for r in table for a in r["args"]}
    assert why[(0, "pre_image_path")] == "both are raw inputs (no step produced them)"
    assert why[(1, "mask_path")] == "symbolic reference: any non-null value matches"
    assert why[(2, "input_path")] == "gold path produced by step 0, where both trajectories call seg.flood"
    assert why[(3, "layer")] == "both produced by step 2"
    assert table[2]["args"][1]["ok"] is False and table[2]["args"][1]["why"].startswith("number off by 30")


def test_path_roles_and_hash_suffixes():
    pred = json.loads(json.dumps(PRED_TRAJ))
    pred[1]["obs"] = _text_obs({"output_path": "/w/tmp/q/zz.geojson"})
    pred[3]["args"]["layer"] = "/w/tmp/q/zz.geojson"
    _, table = trajectory_metrics(pred, GOLD_TRAJ, explain=True)
    layer = table[3]["args"][0]
    assert not layer["ok"]
    assert layer["why"] == "path produced by step 2 in gold, by step 1 in the prediction; file names differ"
    assert _canonical_stem("flood_mask_3fa9c2d1.tif") == "flood_mask.tif"
    assert _canonical_stem("a_0123456789ab.tif") == "a_0123456789ab.tif"   # 12 hex digits: not a hash segment


def test_empty_gold_trajectory():
    assert trajectory_metrics([], [])[0] == dict.fromkeys(("t_any", "t_ord", "t_em", "par_acc", "eff"), 1.0)
    assert trajectory_metrics([{"call": "seg.flood"}], [])[0] == dict.fromkeys(("t_any", "t_ord", "t_em", "par_acc", "eff"), 0.0)
    # loop wrappers, empty calls and non-dict steps do not count
    assert trajectory_metrics([{"call": "tool_loop(calls)"}, {"call": ""}, "x"], [])[0]["eff"] == 1.0


def test_lcs_prefix_and_duplicates():
    gold = [{"call": c} for c in ("a.x", "a.y", "a.x", "a.y", "a.z")]
    pred = [{"call": c} for c in ("a.x", "a.y", "a.z")]
    m, _ = trajectory_metrics(pred, gold)
    # set recall 3/3; LCS 3/5; prefix 2/5 (third gold a.x vs pred a.z); steps 0,1 match positionally
    # without args (1 each), step 2 names differ -> 2/5; eff 5/5
    assert (m["t_any"], m["t_ord"], m["t_em"], m["par_acc"], m["eff"]) == (1.0, 0.6, 0.4, 0.4, 1.0)


# ── paper mode ───────────────────────────────────────────────────────────
def test_paper_scalar_has_no_absolute_slack():
    spec = {"n": "scalar_count"}
    # |15-12| = 3: dora 3 <= 1 + 2.4 passes; paper 3 > 0.2*12 = 2.4 fails
    assert score_answer({"n": 15}, {"n": 12}, spec)[1] == {"n": 1.0}
    assert score_answer({"n": 15}, {"n": 12}, spec, cfg=PAPER)[1] == {"n": 0.0}
    assert score_answer({"n": 14}, {"n": 12}, spec, cfg=PAPER)[1] == {"n": 1.0}   # 2 <= 2.4


def test_paper_dict_over_key_union_and_no_ratio_rescale():
    spec = {"d": "scalar_dict", "r": "ratio_pct", "s": "ratio_pct"}
    gold = {"d": {"a": 1, "b": 2}, "r": 0.42, "s": 18}
    pred = {"d": {"a": 1, "c": 3}, "r": 42, "s": "18%"}
    # dora: d over gold keys {a, b}: a ok, b missing -> 1/2 ; r: 42 -> 0.42 ok ; s: ok
    assert score_answer(pred, gold, spec)[1] == {"d": 0.5, "r": 1.0, "s": 1.0}
    # paper: d over the union {a, b, c} -> 1/3 ; r: no fraction/percent rescale -> 0 ; s: "%" parsed -> ok
    assert score_answer(pred, gold, spec, cfg=PAPER)[1] == {"d": pytest.approx(1 / 3), "r": 0.0, "s": 1.0}


def test_paper_points_in_pixels_and_strings_without_aliases():
    spec = {"p_lat": "point_haversine", "p_lon": "point_haversine", "phase": "exact_match"}
    gold = {"p_lat": 24.0, "p_lon": 90.0, "phase": "phase_t2"}
    near = {"p_lat": 24.00008, "p_lon": 90.0, "phase": "T2"}
    # 8.9 m / 0.5 m per px = 17.8 px <= 20 ; "t2" != "phase_t2" without the alias
    assert score_answer(near, gold, spec, gsd_m=0.5, cfg=PAPER)[1] == {"phase": 0.0, "p__point_geo": 1.0}
    far = dict(near, p_lat=24.0001)  # 11.1 m / 0.5 = 22.2 px > 20
    assert score_answer(far, gold, spec, gsd_m=0.5, cfg=PAPER)[1]["p__point_geo"] == 0.0


def test_paper_line_and_ranking():
    spec = {"route": "line", "order": "ranking_kendall"}
    gold = {"route": [[0, 0], [0, 100]], "order": ["A", "B", "C", "D"]}
    pred = {"route": [[0, 0], [0, 130]], "order": ["B", "A", "C", "D"]}
    # line: start 0 px ok, end 30 px > 20 fails, length 130 vs 100: 30 > 20 fails -> 1/3
    # ranking: positions 3 and 4 agree -> 2/4
    assert score_answer(pred, gold, spec, cfg=PAPER)[1] == {"route": pytest.approx(1 / 3), "order": 0.5}
    # in dora mode "line" is an unknown type (exact match) and the ranking is Kendall: 5/6
    assert score_answer(pred, gold, spec)[1] == {"route": 0.0, "order": pytest.approx(5 / 6)}


def test_tolerances_are_parameters():
    spec = {"n": "scalar_count"}
    assert score_answer({"n": 15.5}, {"n": 12}, spec, cfg=ScoringConfig(tau_r=0.3))[1] == {"n": 1.0}   # 3.5 <= 1 + 3.6
    assert score_answer({"n": 13}, {"n": 12}, spec, cfg=ScoringConfig(tau_r=0.0, tau_a=0.5))[1] == {"n": 0.0}
    with pytest.raises(ValueError):
        ScoringConfig(mode="strict")
