"""The map geometry of polygon and point answers: the polygons the evaluator's
``polygon_iou`` compares, read the same way (path resolution, largest polygon, the gold's
``dora_grid`` for a pixel prediction), brought to lon/lat; points as the operator takes them.

Hand-worked: the grid is x = 0.5·col + 500000, y = −0.5·row + 4000000 in EPSG:32633 (UTM 33N,
central meridian 15° E). The gold square spans x 500005..500015; the prediction, in pixels cols
12..32, spans x 500006..500016: 1 m further east. At latitude ≈ 36.14° one metre east is
1 / (111 320 · cos 36.14°) ≈ 1.112e-5° of longitude, and x = 500005 lies 5 m east of the
central meridian: lon ≈ 15 + 5 · 1.112e-5 ≈ 15.0000556.
"""
from __future__ import annotations

import json

import pytest

from evaluation.scoring.geometry import answer_geometries, polygon_pair

GRID = {"transform": [0.5, 0, 500000, 0, -0.5, 4000000], "crs": "EPSG:32633"}


def _square(c0, r0, c1, r1):
    return [[[c0, r0], [c1, r0], [c1, r1], [c0, r1], [c0, r0]]]


def _fc(geom, **extra):
    return {"type": "FeatureCollection", "features": [{"type": "Feature", "properties": {}, "geometry": geom}], **extra}


@pytest.fixture
def dirs(tmp_path):
    tasks, run = tmp_path / "tasks", tmp_path / "run"
    (tasks / "gold_polygons").mkdir(parents=True)
    (run / "t1" / "out").mkdir(parents=True)
    world = [[[0.5 * c + 500000, -0.5 * r + 4000000] for c, r in _square(10, 10, 30, 30)[0]]]
    (tasks / "gold_polygons" / "flood.geojson").write_text(json.dumps(
        _fc({"type": "Polygon", "coordinates": world}, crs={"type": "name", "properties": {"name": "EPSG:32633"}},
            dora_grid=GRID)))
    (run / "t1" / "out" / "pred.geojson").write_text(json.dumps(_fc({"type": "Polygon", "coordinates": _square(12, 10, 32, 30)})))
    return tasks, run


def _minx(feature):
    return min(x for x, _ in feature["geometry"]["coordinates"][0])


def test_polygon_pair_is_the_evaluators_pair_in_lon_lat(dirs):
    tasks, run = dirs
    # the agent's absolute path on its own machine: found by its trailing part under the run folder
    geo = polygon_pair("/home/agent/outputs/myrun/t1/out/pred.geojson", "gold_polygons/flood.geojson", (tasks, run))
    assert geo["frame"] == "geographic" and geo["notes"] == []
    assert _minx(geo["gold"]) == pytest.approx(15.0000556, abs=2e-7)
    assert _minx(geo["pred"]) - _minx(geo["gold"]) == pytest.approx(1.112e-5, rel=2e-3)
    lat = geo["gold"]["geometry"]["coordinates"][0][0][1]
    assert 36.1 < lat < 36.2
    assert geo["gold"]["properties"]["role"] == "gold" and geo["pred"]["properties"]["role"] == "predicted"


def test_polygon_pair_inline_object_missing_file_and_empty_answer(dirs):
    tasks, run = dirs
    inline = _fc({"type": "Polygon", "coordinates": _square(12, 10, 32, 30)})
    geo = polygon_pair(inline, "gold_polygons/flood.geojson", (tasks, run))
    assert geo["pred"] is not None and "scores an object 0" in geo["notes"][0]  # drawn, with the evaluator's view
    geo = polygon_pair("elsewhere/none.geojson", "gold_polygons/flood.geojson", (tasks, run))
    assert geo["pred"] is None and geo["gold"] is not None
    assert geo["notes"] == ["predicted polygon file not found: elsewhere/none.geojson"]
    geo = polygon_pair("", "gold_polygons/flood.geojson", (tasks, run))
    assert geo["notes"] == ["no polygon predicted (an empty answer)"]
    geo = polygon_pair("x.geojson", "gold_polygons/gone.geojson", (run,))
    assert geo["gold"] is None and geo["notes"][0] == "gold polygon file not found: gold_polygons/gone.geojson"


def test_pixel_grid_without_crs_stays_in_image_coordinates(tmp_path):
    (tmp_path / "g.geojson").write_text(json.dumps(_fc({"type": "Polygon", "coordinates": _square(400, 300, 420, 330)},
                                                       dora_grid={"transform": [1, 0, 0, 0, 1, 0], "crs": None})))
    (tmp_path / "p.geojson").write_text(json.dumps(_fc({"type": "Polygon", "coordinates": _square(401, 300, 421, 330)})))
    geo = polygon_pair("p.geojson", "g.geojson", (tmp_path,))
    assert geo["frame"] == "pixel"
    assert _minx(geo["gold"]) == 400 and _minx(geo["pred"]) == 401  # identity grid: columns as given
    assert "image coordinates" in geo["notes"][0]


def test_answer_geometries_points_and_other_types():
    rows = [
        {"field": "site__point_geo", "type": "point_haversine", "gold": [35.0, -77.0], "pred": [35.001, -77.0]},
        {"field": "hq", "type": "point_pixel", "gold": {"row": 10, "col": 20}, "pred": None},
        {"field": "n", "type": "scalar_count", "gold": 3, "pred": 3},
    ]
    out = answer_geometries(rows)
    assert [g["field"] for g in out] == ["site__point_geo", "hq"]
    assert out[0]["frame"] == "geographic"
    assert out[0]["gold"]["geometry"]["coordinates"] == [-77.0, 35.0]  # GeoJSON order: lon, lat
    assert out[0]["pred"]["geometry"]["coordinates"] == [-77.0, 35.001]
    assert out[1]["frame"] == "pixel" and out[1]["gold"]["geometry"]["coordinates"] == [20.0, 10.0]  # x = col
    assert out[1]["pred"] is None and out[1]["notes"] == ["no row/column point on the predicted side"]
