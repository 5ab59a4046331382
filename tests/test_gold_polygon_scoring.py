"""``polygon_iou`` answers of a release's or the studio's tasks (``evaluation.goldset``): the gold
polygon file is the one the task's own gold replay wrote, in the form the release export writes it
(``releases.services.export.GoldPolygons``: the value ``gold_polygons/<name>``, ``dora_grid``
added), so the score stored at import equals the official evaluator's (``evaluate_run_dir``) on
the release's exported ``tasks/`` and the record page's recomputed value.

The damage task: the Florence tile's damage question (tests/test_two_workers_bucket.py's
``DAMAGE``), whose gold replay runs ``seg.building_damage``, ``ras.count_pixels`` (26,766 px: worked
out by hand in tests/test_celery_worker.py) and ``ras.vectorize`` (the polygons, an artifact of the
replay). A run predicting the gold's own polygon file scores IoU 1 (the same polygons), so 1.0; a
square of 10 x 10 px at pixel (10,000, 10,000), far outside the 1024 px tile, overlaps nothing:
IoU 0, so 0.0. Before gold polygons were resolved from the gold replay, the import stored 0.0 for
both ("gold polygon file not found": it looked in the run folder only).

The gold baseline (``gold_baseline``, oracle perception) replays the damage task to the same
polygons; its run folder holds that file at the answer's path, as an agent's would, so it scores
IoU 1 (1.0) like the gold. (Without the file the evaluator cannot read the prediction: 0.)

Two imported tasks (two benchmark folders, samples ``s1`` and ``s2``) whose gold files share the
path ``gold_polygons/area.geojson`` with different squares (identity ``dora_grid``, pixel units):
``s1`` the 10 x 10 square at the origin (area 100), ``s2`` the 10 x 4 one (area 40, inside it).
Each is scored against its own file: the prediction equal to its own gold gives IoU 1 (1.0), the
other task's square gives IoU 40 / 100 = 0.4 < 0.5 (0.0), and a 10 x 5 square gives 50 / 100 = 0.5
against ``s1`` (1.0: the gate is IoU >= 0.5) and 40 / 50 = 0.8 against ``s2`` (1.0).
"""
from __future__ import annotations

import json

import pytest
from support.florence import DAMAGE_TASK as DAMAGE

from annotation.models import Task
from annotation.services.tasks import create_task
from evaluation.scoring import evaluate_run_dir
from evaluation.selectors.runs import record_evidence
from evaluation.services.baseline import gold_baseline
from evaluation.services.runs import import_run_dir
from releases.services import lifecycle, release_import
from releases.services.export import dumps
from releases.services.release_export import export_release
from replay.services.paths import artifact_path
from replay.services.runs import start_replay

T1 = "t1_perception_and_assessment"
FAR_SQUARE = {"type": "FeatureCollection", "features": [{"type": "Feature", "properties": {}, "geometry": {
    "type": "Polygon", "coordinates": [[[10000, 10000], [10010, 10000], [10010, 10010], [10000, 10010], [10000, 10000]]]}}]}


def _square(width: float, height: float, grid: bool = False) -> dict:
    doc = {"type": "FeatureCollection", "features": [{"type": "Feature", "properties": {}, "geometry": {
        "type": "Polygon", "coordinates": [[[0, 0], [width, 0], [width, height], [0, height], [0, 0]]]}}]}
    if grid:
        doc["dora_grid"] = {"transform": [1.0, 0.0, 0.0, 0.0, 1.0, 0.0], "crs": None}
    return doc


def _run_dir(path, answers: dict, files: dict):
    """A run folder ``path`` (``<model>_AP``): one T1 record per ``{question id: predicted answer}``
    and the polygon files ``{name: GeoJSON dict or bytes}`` in it."""
    (path / T1).mkdir(parents=True)
    (path / T1 / "benchmark.jsonl").write_text("".join(
        json.dumps({"question_id": q, "task_category": "perception_and_assessment", "predicted_answer": a,
                    "trajectory": []}) + "\n" for q, a in answers.items()))
    for name, doc in files.items():
        (path / name).write_bytes(doc if isinstance(doc, bytes) else json.dumps(doc).encode())
    return path


@pytest.fixture
def damage(florence, make_user):
    """The damage task, replayed (its gold: 26,766 px and the vectorized polygons), approved."""
    user = make_user("mia", "maintainer", "author", "reviewer", "scorer")
    task = create_task(user, florence, dimension="t1", content=DAMAGE)
    replay = start_replay(user, task)
    assert replay.status == "succeeded", replay.error
    (vectors,) = [n for n in replay.artifact_manifest if n.endswith(".geojson")]
    assert replay.final_answer == {"damaged_pixels": 26766, "damaged_area": vectors}
    Task.objects.filter(pk=task.pk).update(status=Task.Status.APPROVED)  # review is not this test's subject
    task.refresh_from_db()
    return user, task, artifact_path(replay, vectors).read_bytes()


def _field(run, field="damaged_area"):
    (rec,) = run.records.all()
    return rec, rec.field_scores[field]


def _page_row(rec, field="damaged_area"):
    (row,) = [r for r in record_evidence(rec)["fields"] if r["field"] == field]
    return row


@pytest.mark.django_db
def test_polygon_answer_on_the_studio_tasks_is_scored_against_the_gold_replays_polygons(damage, tmp_path):
    user, task, gold_bytes = damage
    right = _run_dir(tmp_path / "right_AP", {task.question_id: {"damaged_pixels": 26766, "damaged_area": "damage_pred.geojson"}},
                     {"damage_pred.geojson": gold_bytes})
    run = import_run_dir(user, right, "florence")
    assert run.gold_set.startswith("studio tasks (unversioned)")
    rec, score = _field(run)
    assert score == 1.0  # IoU 1: the prediction is the gold's own polygons (0.0 before: gold file not found)
    assert rec.task_score == 1.0 and run.dora_score == 1.0  # both fields right: 26,766 px and the polygons
    assert rec.gold["final_answer"]["damaged_area"].startswith("gold_polygons/")  # the export's value
    row = _page_row(rec)
    assert row["score"] == 1.0 and "recomputed" not in row and row["why"] == "IoU 1.0000 vs gate 0.5"

    wrong = _run_dir(tmp_path / "wrong_AP", {task.question_id: {"damaged_pixels": 26766, "damaged_area": "far.geojson"}},
                     {"far.geojson": FAR_SQUARE})
    rec, score = _field(import_run_dir(user, wrong, "florence"))
    assert score == 0.0 and rec.task_score == 0.5  # IoU 0 (no overlap); the pixel count still right
    row = _page_row(rec)
    assert row["score"] == 0.0 and "recomputed" not in row and row["why"] == "IoU 0.0000 vs gate 0.5"


@pytest.mark.django_db
def test_polygon_answer_on_a_release_equals_the_evaluator_on_its_exported_tasks(damage, tmp_path):
    user, task, gold_bytes = damage
    release = lifecycle.publish_release(user, lifecycle.create_release(user, "1.0.0", "damage", tasks=[task]))
    out = tmp_path / "export"
    export_release(release, out)
    exported = json.loads((out / "tasks" / f"{T1}.json").read_text())
    gold_value = exported[0]["tasks"][0]["final_answer"]["damaged_area"]
    gold_file = json.loads((out / "tasks" / gold_value).read_text())
    assert gold_value.startswith("gold_polygons/") and "dora_grid" in gold_file  # the export added the grid
    for name, doc, expected in (("right_AP", gold_bytes, 1.0), ("wrong_AP", FAR_SQUARE, 0.0)):
        folder = _run_dir(tmp_path / name, {task.question_id: {"damaged_pixels": 26766, "damaged_area": "pred.geojson"}},
                          {"pred.geojson": doc})
        run = import_run_dir(user, folder, "florence", release=release)
        official = evaluate_run_dir(folder, out / "tasks")
        (t,) = official["full"]["t1"]["tasks"]
        rec, score = _field(run)
        assert t["field_scores"]["damaged_area"] == score == expected
        assert rec.field_scores == t["field_scores"] and rec.task_score == t["task_score"]
        assert run.dora_score == official["dora_score"] and run.dimensions == official["dimensions"]
        assert rec.gold["final_answer"]["damaged_area"] == gold_value
        row = _page_row(rec)
        assert row["score"] == expected and "recomputed" not in row


def _bench(path, sample_id: str, gold: dict):
    """A benchmark folder holding one T1 task (sample ``sample_id``) whose gold is ``gold_polygons/area.geojson``."""
    (path / "tasks" / "gold_polygons").mkdir(parents=True)
    (path / "tasks" / "gold_polygons" / "area.geojson").write_text(json.dumps(gold))
    sample = {"sample_id": sample_id, "input_data": {}, "tasks": [{
        "question": "Outline the area.", "task_category": "perception_and_assessment", "task_category_code": "T1",
        "trajectory": [], "final_answer": {"area": "gold_polygons/area.geojson"}, "eval_spec": {"area": "polygon_iou"}}]}
    (path / "tasks" / f"{T1}.json").write_text(dumps([sample]))
    return path


@pytest.mark.django_db
def test_two_tasks_whose_gold_files_share_a_name_are_each_scored_against_their_own(make_user, tmp_path):
    user = make_user("mia", "maintainer", "author", "reviewer", "scorer")
    for sid, gold in (("s1", _square(10, 10, grid=True)), ("s2", _square(10, 4, grid=True))):
        release_import.import_release_dir(None, _bench(tmp_path / f"bench-{sid}", sid, gold), event_slug=f"ev-{sid}",
                                          make_release=False)
    cases = {  # run: {question: (predicted square, expected field score)}
        "own_AP": {"s1_task0": ((10, 10), 1.0), "s2_task0": ((10, 4), 1.0)},  # IoU 1 each
        "swapped_AP": {"s1_task0": ((10, 4), 0.0), "s2_task0": ((10, 10), 0.0)},  # IoU 40/100 = 0.4 each
        "half_AP": {"s1_task0": ((10, 5), 1.0), "s2_task0": ((10, 5), 1.0)},  # IoU 50/100 = 0.5, 40/50 = 0.8
    }
    for name, answers in cases.items():
        folder = _run_dir(tmp_path / name, {q: {"area": f"{q}.geojson"} for q in answers},
                          {f"{q}.geojson": _square(*wh) for q, (wh, _) in answers.items()})
        run = import_run_dir(user, folder, "agent")
        got = {r.question_id: r.field_scores["area"] for r in run.records.all()}
        assert got == {q: expected for q, (_, expected) in answers.items()}, name
        for rec in run.records.all():
            assert rec.gold["final_answer"]["area"] == "gold_polygons/area.geojson"
            row = _page_row(rec, "area")
            assert row["score"] == got[rec.question_id] and "recomputed" not in row, (name, rec.question_id, row)


@pytest.mark.django_db
def test_gold_baseline_run_folder_holds_its_polygon_files_and_scores_them(damage, tmp_path):
    user, task, gold_bytes = damage
    run_dir, run, summary = gold_baseline(user, tmp_path / "runs", mode="gt")
    assert summary["records"] == 1 and summary["failed"] == []
    (rec,) = run.records.all()
    value = rec.predicted_answer["damaged_area"]
    assert (run_dir / value).read_bytes() == gold_bytes  # the replay's polygons, at the answer's path
    assert rec.field_scores == {"damaged_pixels": 1.0, "damaged_area": 1.0} and run.dora_score == 1.0
