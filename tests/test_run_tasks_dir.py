"""A run scored against a separate tasks folder (``import_runs --tasks-dir``) keeps that folder
(``AgentRun.gold_dir``), so its gold polygon files are found again when a scorer opens a record
(both geometries on the map), though they lie neither under the run folder nor
under a studio replay's artifacts.

Hand-worked geometry (as tests/test_answer_map_geometry.py): the gold square is cols/rows 10..30 on the
grid x = 0.5·col + 500000, y = −0.5·row + 4000000 (EPSG:32633), the prediction cols 12..32 in
pixels; both exist, so the map gets two features and no "not found" note.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import SCORING_EXAMPLES, needs_shared

from evaluation.models import AgentRun, RunRecord
from evaluation.selectors.runs import polygon_roots, record_evidence
from evaluation.services.runs import import_run_dir

GRID = {"transform": [0.5, 0, 500000, 0, -0.5, 4000000], "crs": "EPSG:32633"}


def _fc(geom, **extra):
    return {"type": "FeatureCollection", "features": [{"type": "Feature", "properties": {}, "geometry": geom}], **extra}


def _sq(c0, c1):
    return [[[c0, 10], [c1, 10], [c1, 30], [c0, 30], [c0, 10]]]


@pytest.mark.django_db
def test_import_with_a_tasks_folder_keeps_it(make_user):
    user = make_user("max", "maintainer")
    run = import_run_dir(user, needs_shared(SCORING_EXAMPLES / "runs" / "agent_a"), "agent_a", tasks_dir=needs_shared(SCORING_EXAMPLES / "tasks"))
    assert run.gold_dir == str(needs_shared(SCORING_EXAMPLES / "tasks").resolve())
    rec = run.records.first()
    assert polygon_roots(rec)[:2] == [Path(run.source_dir), Path(run.gold_dir)]


@pytest.mark.django_db
def test_gold_polygon_only_in_the_tasks_folder_is_drawn(run_a, tmp_path):
    tasks, run_dir = tmp_path / "tasks", tmp_path / "poly_run"
    (tasks / "gold_polygons").mkdir(parents=True)
    (run_dir / "t1" / "out").mkdir(parents=True)
    world = [[[0.5 * c + 500000, -0.5 * r + 4000000] for c, r in _sq(10, 30)[0]]]
    (tasks / "gold_polygons" / "flood.geojson").write_text(json.dumps(_fc(
        {"type": "Polygon", "coordinates": world}, crs={"type": "name", "properties": {"name": "EPSG:32633"}},
        dora_grid=GRID)))
    (run_dir / "t1" / "out" / "pred.geojson").write_text(json.dumps(_fc({"type": "Polygon", "coordinates": _sq(12, 32)})))
    gold = {"question": "Outline the flood.", "final_answer": {"flood_extent": "gold_polygons/flood.geojson"},
            "eval_spec": {"flood_extent": "polygon_iou"}}

    def geometry(gold_dir: str):
        run = AgentRun.objects.create(agent=run_a.agent, name="poly_run", source_dir=str(run_dir), gold_dir=gold_dir)
        rec = RunRecord.objects.create(
            run=run, question_id="pg_s01_task0", sample_id="pg_s01", dimension="t1",
            predicted_answer={"flood_extent": "/agent/outputs/poly_run/t1/out/pred.geojson"},
            field_scores={"flood_extent": 1.0}, gold=gold)
        (geo,) = [g for g in record_evidence(rec)["geometries"] if g["field"] == "flood_extent"]
        return geo

    without = geometry("")  # the run folder alone: the gold file is not there
    assert without["gold"] is None and any("gold polygon file not found" in n for n in without["notes"])
    kept = geometry(str(tasks))
    assert kept["gold"] is not None and kept["pred"] is not None and kept["notes"] == []
    assert kept["frame"] == "geographic"
