"""The QC suite (annotation/qc/): a corpus of seeded defects, one check id per task file.

``tests/qc_corpus/*.json`` are benchmark task files (lists of samples); ``expected.json`` says
which check ids each one must trigger (exactly those), and the clean_* files trigger none. The
data root of each case is a temporary folder holding empty files for the manifest's inputs.
"""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from conftest import SCORING_EXAMPLES, requires_shared

from annotation import qc
from annotation.qc import tool_info
from annotation.services.qc import qc_for_task_file
from kernel.inputs import input_entries

CORPUS = Path(__file__).resolve().parent / "qc_corpus"
EXPECTED = json.loads((CORPUS / "expected.json").read_text(encoding="utf-8"))["files"]
REPO = Path(__file__).resolve().parents[1]
SCORING_TASKS = SCORING_EXAMPLES / "tasks"


def _data_root(tmp_path: Path, samples: list, missing: list[str]) -> Path:
    root = tmp_path / "dora"
    for sample in samples:
        for _loc, path, _entry in input_entries(sample.get("input_data") or {}):
            if Path(path).name in missing:
                continue
            target = (root / "images" / path).resolve()
            if not target.is_relative_to(root.resolve()):
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(b"")
    root.mkdir(exist_ok=True)
    return root


def _run_corpus_file(name: str, tmp_path: Path):
    spec = EXPECTED[name]
    samples = json.loads((CORPUS / name).read_text(encoding="utf-8"))
    root = _data_root(tmp_path, samples, spec.get("missing_files", []))
    result = qc_for_task_file(CORPUS / name, root)
    findings = list(result["findings"]) + [f for t in result["tasks"] for f in t["findings"]]
    if spec.get("replay_hashes"):
        findings += qc.check_determinism(*spec["replay_hashes"])
    return spec, findings, result


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus_case_triggers_exactly_its_check(name, tmp_path):
    spec, findings, result = _run_corpus_file(name, tmp_path)
    assert {f.check for f in findings} == set(spec["checks"]), [f.as_dict() for f in findings]
    assert {f.check for f in result["release"]["findings"]} == set(spec.get("release_checks", []))
    for f in findings:
        assert f.severity == qc.CHECKS[f.check][0]
        assert f.location and f.message


UNIT_TESTED = {"tools.not_implemented", "manifest.layer_unknown", "eval_spec.name", "eval_spec.duplicate",
               "eval_spec.source",
               # robustness variants live in the database (TaskVariant), not in task files: tests/test_variants.py
               "variant.broken_step", "variant.alternative_name", "variant.distractor_in_plan",
               "variant.refusal_gold", "variant.unknown_kind",
               # tests/test_variant_review.py (they need a replay of the variant)
               "variant.unsolvable_proceeds", "variant.alternative_differs",
               # derived values against their sources (layers, replays): tests/test_derived_staleness.py
               "derived.manifest_stale", "derived.manifest_outdated", "derived.gold_stale"}


def test_every_check_id_is_covered():
    corpus = {c for spec in EXPECTED.values() for c in spec["checks"] + spec.get("release_checks", [])}
    assert corpus | UNIT_TESTED == set(qc.CHECKS)
    assert not corpus & UNIT_TESTED
    assert all(sev in ("error", "warning") for sev, _ in qc.CHECKS.values())


#: the concern module of annotation/qc/ that declares each check family, and how many checks each
#: family has (the table of checks as annotation/qc.py held it before it became a package)
FAMILIES = [("structure", "structure", 7), ("tools", "steps", 7), ("references", "references", 5),
            ("manifest", "manifest", 11), ("classes", "manifest", 2), ("eval_spec", "answers", 9),
            ("sanity", "gold", 8), ("determinism", "gold", 1), ("alignment", "answers", 8),
            ("hygiene", "hygiene", 2), ("derived", "derived", 3), ("release", "release", 1),
            ("tool", "tool_parity", 14), ("vec", "tool_parity", 8), ("poi", "tool_parity", 2),
            ("vis", "tool_parity", 8), ("variant", "variants", 7)]


def test_every_check_is_declared_once_by_the_module_of_its_concern():
    import importlib

    listed = qc.checks()
    assert [c.id for c in listed] == list(qc.CHECKS)
    assert all(qc.CHECKS[c.id] == (c.severity, c.meaning) for c in listed)
    families = []
    for c in listed:
        family = c.id.split(".")[0]
        if not families or families[-1][0] != family:
            families.append((family, c.concern, 0))
        assert families[-1][1] == c.concern, c.id
        families[-1] = (family, c.concern, families[-1][2] + 1)
        tables = [v for k, v in vars(importlib.import_module(f"annotation.qc.{c.concern}")).items()
                  if k.endswith("CHECKS") and isinstance(v, dict)]
        assert any(c.id in table for table in tables), c.id
    assert families == FAMILIES


# ---- the demo tasks, filled with plausible file names --------------------------------------
NAMES = {"pre": "florence_pre.tif", "post": "florence_post.tif", "damage": "damage_joplin.geojson",
         "buildings": "bldg_polys_joplin.geojson"}


def _fill(value):
    if isinstance(value, str):
        for key, fn in NAMES.items():
            value = value.replace("{" + key + "}", fn)
        return value
    if isinstance(value, list):
        return [_fill(v) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v) for k, v in value.items()}
    return value


def _raster(fn, phase):
    return {"file_name": fn, "kind": "raster", "modality": "optical", "phase": phase, "path": f"events/demo/{fn}",
            "crs": "EPSG:32617", "frame": "geographic", "gsd_m": 0.5, "width": 1024, "height": 1024,
            "class_map": {}, "band_count": 3, "bounds": [-77.95, 34.22, -77.94, 34.23]}


def _vector(fn):
    return {"file_name": fn, "kind": "vector", "modality": "vector", "phase": "", "path": f"events/demo/{fn}",
            "crs": "EPSG:4326", "frame": "geographic", "gsd_m": None, "width": None, "height": None, "class_map": {}}


DEMO_LAYERS = {NAMES["pre"]: _raster(NAMES["pre"], "pre"), NAMES["post"]: _raster(NAMES["post"], "post"),
               NAMES["damage"]: _vector(NAMES["damage"]), NAMES["buildings"]: _vector(NAMES["buildings"])}


def _entry(fn):
    layer = DEMO_LAYERS[fn]
    if layer["kind"] == "vector":
        return {"path": fn}
    return {"image_path": fn, "modality": "optical", "pixel_size_m": 0.5,
            "spatial_coordinate_system": layer["crs"], "band_info": ["R", "G", "B"]}


def _demo_contents():
    data = json.loads((REPO / "fixtures" / "demo_tasks.json").read_text(encoding="utf-8"))
    out = []
    for t in data["tasks"]:
        out.append({"question": t["question"], "task_category": t["task_category"],
                    "task_category_code": t["task_category_code"], "disaster_type": "hurricane",
                    "input_data": {k: _entry(_fill(v)) for k, v in t["input"].items()},
                    "classes": {}, "trajectory": _fill(t["trajectory"]), "answer_spec": t["answer"]})
    return out


def _demo_data_root(tmp_path):
    for layer in DEMO_LAYERS.values():
        p = tmp_path / layer["path"]
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"")
    return tmp_path


def test_demo_task_1_is_clean(tmp_path):
    content = _demo_contents()[0]
    assert qc.check_task(content, layers=DEMO_LAYERS) == []
    replay = {"trajectory": [dict(s, obs=o) for s, o in zip(content["trajectory"], [
        {"tool": "seg.building_damage", "mask_path": "m.tif", "classes": {"1": "intact"}},
        {"tool": "ras.vectorize", "vector_path": "v.geojson", "count": 7, "total_pixels": 900, "total_area_m2": 225.0},
        {"tool": "ras.count_pixels", "counts": {"2": 10, "3": 900}, "total": 910, "classes": [2, 3]}])],
        "final_answer": {"destroyed_building_count": 7, "damaged_pixels": 910}}
    assert qc.full_qc(content, layers=DEMO_LAYERS, replay=replay, data_root=_demo_data_root(tmp_path),
                      replay_hashes=["f" * 64, "f" * 64]) == []


def test_demo_task_2_is_clean_and_an_unused_layer_warns(tmp_path):
    content = _demo_contents()[1]
    assert qc.full_qc(content, layers=DEMO_LAYERS, data_root=_demo_data_root(tmp_path)) == []
    # manifesting the post image that no step reads is a hygiene warning
    content = copy.deepcopy(content)
    content["input_data"]["post_image"] = _entry(NAMES["post"])
    findings = qc.full_qc(content, layers=DEMO_LAYERS, data_root=_demo_data_root(tmp_path))
    assert [(f.check, f.location) for f in findings] == [("hygiene.unused_layer", "input_data.post_image")]


# ---- checks that need the studio's form (layers from the event, answer_spec) ---------------
def test_layer_unknown_when_the_event_lacks_the_file():
    content = _demo_contents()[0]
    layers = {k: v for k, v in DEMO_LAYERS.items() if k != NAMES["post"]}
    checks = {(f.check, f.location) for f in qc.full_qc(content, layers=layers)}
    assert ("manifest.layer_unknown", "input_data.post_image") in checks
    assert {c for c, _ in checks} == {"manifest.layer_unknown"}


def test_answer_spec_name_duplicate_and_source():
    content = _demo_contents()[0]
    content["answer_spec"] = [dict(content["answer_spec"][0]), dict(content["answer_spec"][0]),
                              {"name": "", "eval_type": "scalar_count", "source": "<total> from trajectory[2].obs"},
                              {"name": "damaged_pixels", "eval_type": "scalar_count", "source": ""}]
    got = {f.check for f in qc.check_task(content, layers=DEMO_LAYERS)}
    assert got == {"eval_spec.duplicate", "eval_spec.name", "eval_spec.source"}


def test_not_implemented_tool_is_checked_from_the_catalogue(monkeypatch):
    entry = {"name": "vec.future_tool", "alias": "vec_future_tool", "server": "Analysis",
             "params": [{"name": "vector_path", "type": "str", "required": True, "default": None}],
             "returns": ["tool:str; count:int; vector_path:str"], "semantics": "", "errors": ""}
    monkeypatch.setattr(tool_info, "catalogue", lambda: {"vec.future_tool": entry})
    tool_info.resolve_tool.cache_clear()
    try:
        content = _demo_contents()[1]
        content["trajectory"].append({"call": "vec.future_tool", "args": {"vector_path": "<vector_path> from trajectory[0].obs"}})
        content["answer_spec"].append({"name": "n", "eval_type": "scalar_count", "source": "<count> from trajectory[3].obs"})
        checks = {f.check for f in qc.check_task(content, layers=DEMO_LAYERS)}
        assert "tools.not_implemented" in checks and "tools.exists" not in checks and "references.key" not in checks
        content["answer_spec"][-1]["source"] = "<area> from trajectory[3].obs"
        assert "references.key" in {f.check for f in qc.check_task(content, layers=DEMO_LAYERS)}
    finally:
        tool_info.resolve_tool.cache_clear()


# ---- targeted behaviour --------------------------------------------------------------------
def _content(trajectory, answer_spec, question="How many pixels?", input_data=None):
    return {"question": question, "trajectory": trajectory, "answer_spec": answer_spec,
            "input_data": input_data if input_data is not None else {
                "pre_image": {"image_path": "pre.png", "modality": "optical", "pixel_size_m": 0.5,
                              "spatial_coordinate_system": "pixel"},
                "post_image": {"image_path": "post.png", "modality": "optical", "pixel_size_m": 0.5,
                               "spatial_coordinate_system": "pixel"}}}


BD = {"call": "seg.building_damage", "args": {"pre_image_path": "pre.png", "post_image_path": "post.png"}}


def test_stale_index_after_binarisation_by_threshold():
    """The paper's most common error: damage classes passed to a mask ras.threshold made {0,255}."""
    traj = [BD, {"call": "ras.threshold", "args": {"image_path": "<mask_path> from trajectory[0].obs", "threshold": 2}},
            {"call": "ras.count_pixels", "args": {"mask_path": "<mask_path> from trajectory[1].obs", "classes": [2, 3]}}]
    spec = [{"name": "n", "eval_type": "scalar_count", "source": "<total> from trajectory[2].obs"}]
    findings = qc.check_task(_content(traj, spec))
    assert [f.check for f in findings] == ["classes.stale_index"]
    assert "[0, 255]" in findings[0].message and findings[0].location == "trajectory[2].args.classes"
    traj[2]["args"]["classes"] = [255]
    assert qc.check_task(_content(traj, spec)) == []
    traj[1]["args"].update(true_value=1, false_value=0)
    assert [f.check for f in qc.check_task(_content(traj, spec))] == ["classes.stale_index"]


def test_stale_index_inside_a_loop_follows_ras_clip_and_layer_class_maps():
    content = json.loads((CORPUS / "clean_loop.json").read_text())[0]
    c = qc.content_from_dora_task(content, content["tasks"][0])
    c["trajectory"][2]["args"]["calls"][1]["args"]["classes"] = [4]
    assert {f.check for f in qc.check_task(c)} == {"classes.stale_index"}
    # a GT mask layer with the xBD class map {1..4}: 4 is valid there
    traj = [{"call": "ras.count_pixels", "args": {"mask_path": "gt.png", "classes": [4]}}]
    spec = [{"name": "n", "eval_type": "scalar_count", "source": "<total> from trajectory[0].obs"}]
    inp = {"buildings": {"image_path": "gt.png", "modality": "mask"}}
    assert qc.check_task(_content(traj, spec, input_data=inp) | {"classes": {"buildings": {"1": "a", "2": "b", "3": "c", "4": "d"}}}) == []
    traj[0]["args"]["classes"] = [5]
    assert {f.check for f in qc.check_task(_content(traj, spec, input_data=inp) | {"classes": {"buildings": {"1": "a", "4": "d"}}})} == {"classes.stale_index"}


def test_metric_vector_tool_on_pixel_frame_layers_needs_pixel_size():
    traj = [BD, {"call": "ras.vectorize", "args": {"mask_path": "<mask_path> from trajectory[0].obs", "classes": [3]}},
            {"call": "vec.length", "args": {"vector_path": "<vector_path> from trajectory[1].obs"}}]
    spec = [{"name": "edge_length_m", "eval_type": "scalar_continuous", "source": "<total_length_m> from trajectory[2].obs"}]
    content = _content(traj, spec, question="What is the total length of the destroyed buildings' edges?")
    assert {f.check for f in qc.full_qc(content)} == {"manifest.crs_missing"}
    traj[1]["args"]["pixel_size_m"] = 0.5
    # the pixel size now reaches vec.length only as a property of ras.vectorize's polygons,
    # which the benchmark's vec.length does not read (analysis.py:vec_length)
    assert {f.check for f in qc.full_qc(content)} == {"vec.pixel_size_ignored"}
    traj[2]["args"]["pixel_size_m"] = 0.5
    assert qc.full_qc(content) == []


def test_loop_results_only_answer_results_and_return_all_false_is_a_dict():
    loop = {"call": "tool.loop", "args": {"loop_over": [{"x": 1}], "calls": [
        {"call": "calc.add", "args": {"a": "<item.x>", "b": 1}}]}}
    spec = [{"name": "n", "eval_type": "scalar_count", "source": "<iteration_count> from trajectory[0].obs"}]
    findings = qc.check_task(_content([loop], spec, question="Sum it.", input_data={}))
    assert [f.check for f in findings] == ["references.key"] and "<results>" in findings[0].message
    loop["args"]["return_all"] = False
    assert qc.check_task(_content([loop], spec, question="Sum it.", input_data={})) == []


def test_step_reference_must_point_to_an_earlier_loop_call():
    loop = {"call": "tool.loop", "args": {"loop_over": [{"x": 1}], "calls": [
        {"call": "calc.add", "args": {"a": "<sum> from step[0].obs", "b": 1}}]}}
    spec = [{"name": "r", "eval_type": "exact_match", "source": "<results> from trajectory[0].obs"}]
    findings = qc.check_task(_content([loop], spec, question="Sum it.", input_data={}))
    assert [(f.check, f.location) for f in findings] == [("references.order", "trajectory[0].args.calls[0].args.a")]


def test_check_task_keeps_the_old_minimal_content_shape():
    content = {"question": "How many destroyed pixels?",
               "trajectory": [BD, {"call": "ras.count_pixels", "args": {"mask_path": "<mask_path> from trajectory[0].obs", "classes": [3]}}],
               "answer_spec": [{"name": "n", "eval_type": "scalar_count", "source": "<total> from trajectory[1].obs"}]}
    assert qc.check_task(content) == []
    content["answer_spec"][0]["eval_type"] = "bogus"
    findings = qc.check_task(content)
    assert qc.has_errors(findings) and findings[0].check == "eval_spec.unknown_type"


def test_alignment_ignores_relative_where_and_which():
    traj = [BD, {"call": "ras.count_pixels", "args": {"mask_path": "<mask_path> from trajectory[0].obs", "classes": [3]}}]
    spec = [{"name": "n", "eval_type": "scalar_count", "source": "<total> from trajectory[1].obs"}]
    q = "How many pixels lie in areas where buildings which were hit are totally destroyed?"
    assert qc.check_task(_content(traj, spec, question=q)) == []


def test_determinism_and_release_level():
    assert qc.check_determinism("a" * 64, "a" * 64) == []
    assert [f.check for f in qc.check_determinism("a" * 64, "b" * 64)] == ["determinism.hash"]
    items = [{"question_id": "s1_task0", "content": {"question": "How many buildings were destroyed?", "task_category_code": "T1",
                                                      "disaster_type": "hurricane", "input_data": {"post_image": {"image_path": "a.png", "modality": "optical"}}}},
             {"question_id": "s2_task0", "content": {"question": "How many buildings were destroyed ?!", "task_category_code": "T1",
                                                      "disaster_type": "flood", "input_data": {"post_image": {"image_path": "b.png", "modality": "sar"}, "poi": {"path": "poi.geojson"}}}},
             {"question_id": "s3_task0", "content": {"question": "How many buildings were damaged?", "task_category_code": "T2",
                                                      "disaster_type": "flood", "input_data": {}}},
             {"question_id": "s4_task0", "content": {"question": "Which roads are blocked by debris?"}, "dimension": "t3"}]
    found = qc.release_findings(items)
    assert [(f.check, f.location) for f in found] == [("release.duplicate_question", "s2_task0")]
    assert "s1_task0" in found[0].message and "the same question" in found[0].message
    items[2]["content"]["question"] = "How many buildings were destroyed??"
    assert len(qc.release_findings(items)) == 3  # every pair of the three
    report = qc.release_report(items)
    assert report["tasks"] == 4
    assert report["by_dimension"] == {"t1": 2, "t2": 1, "t3": 1}
    assert report["by_disaster_type"] == {"flood": 2, "hurricane": 1, "unknown": 1}
    assert report["by_modality"] == {"none": 2, "optical": 1, "sar+vector": 1}


@requires_shared(SCORING_TASKS)
def test_scoring_example_task_files_pass_the_layout_and_eval_spec_checks():
    """Those files use invented tool names: only the file layout and the eval-spec checks apply.
    One field deliberately has an unknown type (the evaluator's exact-match fallback): QC flags it."""
    flagged = []
    for path in sorted(SCORING_TASKS.glob("*.json")):
        samples = json.loads(path.read_text(encoding="utf-8"))
        assert qc.check_task_file(samples, path.name) == []
        for sample in samples:
            for task in sample["tasks"]:
                found = qc.check_task(qc.content_from_dora_task(sample, task))
                flagged += [(sample["sample_id"], f.check) for f in found if f.check.startswith("eval_spec.")]
    assert flagged == [("t5_s10", "eval_spec.unknown_type")]


# ---- the command ---------------------------------------------------------------------------
def test_command_task_file_json_exit_status(tmp_path, capsys):
    from django.core.management import call_command

    for name, status in (("clean_damage.json", None), ("classes_stale_index.json", 1)):
        samples = json.loads((CORPUS / name).read_text())
        root = _data_root(tmp_path / name, samples, [])
        if status is None:
            call_command("qc", "--task-file", str(CORPUS / name), "--data-root", str(root), "--json")
        else:
            with pytest.raises(SystemExit) as exc:
                call_command("qc", "--task-file", str(CORPUS / name), "--data-root", str(root), "--json")
            assert exc.value.code == status
        out = json.loads(capsys.readouterr().out)
        assert out["summary"]["errors"] == (0 if status is None else 1)
        if status:
            assert out["tasks"][0]["findings"][0]["check"] == "classes.stale_index"


@pytest.mark.django_db
def test_qc_for_task_and_command_on_the_database(make_user, capsys, settings):
    from django.core.management import call_command

    from annotation.models import Event, Layer
    from annotation.services.qc import qc_for_task
    from annotation.services.tasks import create_task

    author = make_user("ada", "author")
    event = Event.objects.create(slug="hurricane-florence", name="Florence", disaster_type="hurricane")
    ids = {}
    for fn, phase in ((NAMES["pre"], "pre"), (NAMES["post"], "post")):
        path = Path(settings.STUDIO_DATA_ROOT) / "events" / fn
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")
        ids[phase] = Layer.objects.create(event=event, name=fn, kind="raster", modality="optical", phase=phase,
                                          file_name=fn, path=f"events/{fn}", crs="EPSG:32617", gsd_m=0.5,
                                          width=1024, height=1024).pk
    content = _demo_contents()[0]
    from annotation.services.tasks import build_input_data

    content["input_data"] = build_input_data(event, {"pre_image": ids["pre"], "post_image": ids["post"]})
    task = create_task(author, event, dimension="t1", content=content, sample_id="hf_demo")
    assert qc_for_task(task) == []
    call_command("qc", "--all", "--json")
    out = json.loads(capsys.readouterr().out)
    assert out["summary"] == {"tasks": 1, "errors": 0, "warnings": 0}
    assert out["release"]["report"]["by_dimension"] == {"t1": 1}
    content["trajectory"][2]["args"]["classes"] = [4]
    task2 = create_task(author, event, dimension="t1", content=content, sample_id="hf_demo2")
    assert [f.check for f in qc_for_task(task2)] == ["classes.stale_index"]
    with pytest.raises(SystemExit):
        call_command("qc", "--task", task2.question_id, "--json")
    assert json.loads(capsys.readouterr().out)["tasks"][0]["findings"][0]["check"] == "classes.stale_index"


@pytest.mark.parametrize("code, finding", [
    ("T1", None), ("t1", None), ("T1-1", None), ("T1.2", None),  # the file's dimension and its sub-codes: clean
    ("T2", "task_category_code 'T2' is dimension T2, but t1_perception_and_assessment.json holds T1 tasks"),
    ("T3-1", "task_category_code 'T3-1' is dimension T3, but t1_perception_and_assessment.json holds T1 tasks"),
    ("T9", "task_category_code 'T9' is neither T1..T5 nor a sub-code of one"),
])
def test_category_codes_of_the_file_dimension_are_clean_others_warn(code, finding):
    """The benchmark requires task_category_code but does not constrain it
    (load_questions copies it through), so sub-codes are legitimate; another dimension's code is a
    warning naming both dimensions."""
    samples = [{"sample_id": "s1", "input_data": {}, "tasks": [{
        "question": "q?", "task_category": "perception_and_assessment", "task_category_code": code,
        "trajectory": [], "final_answer": {}, "eval_spec": {}}]}]
    found = [f for f in qc.check_task_file(samples, "t1_perception_and_assessment.json") if f.check == "structure.category"]
    if finding is None:
        assert found == []
    else:
        assert len(found) == 1 and found[0].severity == "warning" and finding in found[0].message
