"""bench/scoring.py's check that the studio's eval.json says what the official evaluator's says
(``bench/_dora_official.compare``: "identical outputs"). No timing here.

Expected values are worked out by hand from the tiny documents below, which have the official
eval.json's shape (``summary_table``, ``dora_score``, ``dimensions``, ``full`` with per-task
``field_scores``; shared/scoring-examples/expected/*.eval.json) and the studio's one extra key
``mode`` (evaluation/scoring/aggregate.official_document).
"""
import copy
import importlib.util
import json
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench" / "_dora_official.py"
_spec = importlib.util.spec_from_file_location("_dora_official", BENCH)
official_side = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(official_side)

TASK = {"sample_id": "t1_s01", "task_idx": 0, "task_score": 0.75, "field_scores": {"a": 1.0, "b": 0.5},
        "n_scored_fields": 2, "t_any": 1.0, "t_ord": 1.0, "t_em": 1.0, "par_acc": 0.5, "eff": 1.0}
DIM = {"dim_score": 0.75, "n_tasks": 1, "n_scored_tasks": 1, "t_any": 1.0, "t_ord": 1.0, "t_em": 1.0,
       "par_acc": 0.5, "eff": 1.0}
OFFICIAL = {"summary_table": "table", "dora_score": 0.75, "dimensions": {"t1": DIM},
            "full": {"t1": {**DIM, "tasks": [TASK]}}}
# numbers: dora_score 1, dimensions 8, full block 8, task 2 field scores + task_idx, task_score,
# n_scored_fields and 5 trajectory metrics = 10  -> 27
NUMBERS = 1 + 8 + 8 + 10


def studio_of(doc):
    return {**copy.deepcopy(doc), "mode": "dora"}


def test_the_same_document_with_mode_added_agrees():
    diffs, numbers = official_side.compare(OFFICIAL, studio_of(OFFICIAL))
    assert diffs == []
    assert numbers == NUMBERS


def test_a_changed_per_task_field_score_is_named_by_its_place():
    studio = studio_of(OFFICIAL)
    studio["full"]["t1"]["tasks"][0]["field_scores"]["b"] = 0.25
    diffs, _ = official_side.compare(OFFICIAL, studio)
    assert diffs == ["full.t1.tasks[0].field_scores.b: official 0.5, studio 0.25"]


def test_missing_and_extra_keys_and_another_number_type_are_differences():
    studio = studio_of(OFFICIAL)
    del studio["dimensions"]["t1"]["eff"]
    studio["full"]["t1"]["tasks"][0]["field_scores"]["c"] = 1.0
    studio["dora_score"] = 1  # official 0.75 -> also a value change
    studio["full"]["t1"]["tasks"][0]["t_any"] = 1  # 1 against 1.0: a different file
    studio["extra"] = True  # only "mode" may be added at the top
    diffs, _ = official_side.compare(OFFICIAL, studio)
    assert sorted(diffs) == sorted([
        "extra: only in the studio's",
        "dora_score: official 0.75, studio 1",
        "dimensions.t1.eff: missing in the studio's (official 1.0)",
        "full.t1.tasks[0].field_scores.c: only in the studio's",
        "full.t1.tasks[0].t_any: official 1.0, studio 1",
    ])


def test_a_missing_task_and_a_changed_table_are_differences():
    studio = studio_of(OFFICIAL)
    studio["full"]["t1"]["tasks"] = []
    studio["summary_table"] = "other"
    diffs, _ = official_side.compare(OFFICIAL, studio)
    assert sorted(diffs) == ["full.t1.tasks: official 1 entries, studio 0",
                             "summary_table: official 'table', studio 'other'"]


def test_compare_files_reports_byte_identity_without_mode(tmp_path):
    off, stu = tmp_path / "official.json", tmp_path / "studio.json"
    off.write_text(json.dumps(OFFICIAL, ensure_ascii=False, indent=2), encoding="utf-8")
    stu.write_text(json.dumps(studio_of(OFFICIAL), ensure_ascii=False, indent=2), encoding="utf-8")
    assert official_side.compare_files(off, stu) == {"differences": [], "numbers": NUMBERS, "bytes_identical": True}
    # the same values in another key order: equal, not byte-identical
    reordered = studio_of(OFFICIAL)
    reordered["dimensions"]["t1"] = dict(reversed(list(reordered["dimensions"]["t1"].items())))
    stu.write_text(json.dumps(reordered, ensure_ascii=False, indent=2), encoding="utf-8")
    got = official_side.compare_files(off, stu)
    assert got["differences"] == [] and got["bytes_identical"] is False


def test_a_folder_without_the_evaluator_is_refused(tmp_path, monkeypatch):
    monkeypatch.delenv(official_side.ENV, raising=False)
    monkeypatch.setattr(official_side, "DEFAULT", tmp_path / "no-clone-here")
    assert official_side.checkout(None) is None
    # the default clone of ``make bench-dora`` is taken when it holds the evaluator's files
    for f in official_side.REQUIRED:
        (tmp_path / "clone" / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "clone" / f).write_text("", encoding="utf-8")
    monkeypatch.setattr(official_side, "DEFAULT", tmp_path / "clone")
    assert official_side.checkout(None) == tmp_path / "clone"
    (tmp_path / "dora").mkdir()
    try:
        official_side.checkout(str(tmp_path))
    except SystemExit as exc:
        assert "scripts/evaluate.py" in str(exc)
    else:
        raise AssertionError("a folder without scripts/evaluate.py was taken for a DORA checkout")
