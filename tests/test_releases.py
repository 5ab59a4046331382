"""Releases: create/publish/immutability (services and database), export in the benchmark's layout
with the sidecar, import (idempotent, all or nothing, clear errors), byte-exact round trips, diff."""
from __future__ import annotations

import hashlib
import io
import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import REALDATA, SCORING_EXAMPLES, needs_demo_data, needs_shared
from django.core.exceptions import PermissionDenied
from django.core.management import call_command
from django.db import IntegrityError, transaction
from django.test import override_settings
from support.stored import read_stored

from annotation.models import Event, Layer, Task, TaskRevision
from releases.models import Release, ReleaseTask
from releases.services import lifecycle, release_export, release_import
from releases.services.export import SampleArrayWriter, data_paths, dumps, load_schema, schema_problems
from replay.models import ReplayRun

TASK_NAMES = ["t1_perception_and_assessment.json", "t2_spatial_relation_analysis.json", "t3_operational_planning.json",
              "t4_multi_temporal_reasoning.json", "t5_multi_modal_report_synthesis.json"]


def _counts() -> dict:
    return {m.__name__: m.objects.count() for m in (Event, Layer, Task, TaskRevision, ReplayRun, Release, ReleaseTask)}


def _tree(root: Path) -> dict[str, str]:
    """relative path → sha256 of every file under ``root`` (tmp/ left out)."""
    root = Path(root)
    if not root.exists():
        return {}
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and "tmp" not in p.relative_to(root).parts}


def _bytes_of(folder: Path, prefix: str) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.relative_to(folder).as_posix().startswith(prefix)}


# ------------------------------------------------------------------ the demo release (built once)


@pytest.fixture(scope="module")
def demo_release(django_db_setup, django_db_blocker, tmp_path_factory):
    """The real-data demo's tasks approved, released as 1.0.0 and exported; then the export imported
    into the same database and exported again. Everything in one transaction, rolled back."""
    from django.contrib.auth.models import User

    needs_demo_data()
    base = tmp_path_factory.mktemp("demo_release")
    data = base / "data"
    data.mkdir()
    with django_db_blocker.unblock(), override_settings(STUDIO_DATA_ROOT=data, STUDIO_ARTIFACT_ROOT=data / "artifacts"):
        with transaction.atomic():
            call_command("demo", "--skip-osm", stdout=io.StringIO())
            user = User.objects.get(username="maxine")
            Task.objects.update(status=Task.Status.APPROVED)
            release = lifecycle.create_release(user, "1.0.0", "first release")
            lifecycle.publish_release(user, release)
            statuses = sorted(Task.objects.values_list("status", flat=True))
            out = base / "export"
            call_command("export_release", "1.0.0", "--out", str(out), stdout=io.StringIO(), stderr=io.StringIO())
            before, data_before = _counts(), _tree(data)
            report = release_import.import_release_dir(user, out)
            after, data_after = _counts(), _tree(data)
            out2 = base / "export2"
            call_command("export_release", "1.0.0", "--out", str(out2), stdout=io.StringIO(), stderr=io.StringIO())
            transaction.set_rollback(True)
    return SimpleNamespace(out=out, out2=out2, report=report, before=before, after=after, statuses=statuses,
                           data_before=data_before, data_after=data_after)


def test_demo_release_export_layout(demo_release):
    """The export holds the benchmark's files, every image input_data names, the schemas and a sidecar
    whose checksums and counts match (demo: one T1 hurricane task, one T2 tornado task)."""
    out = demo_release.out
    assert demo_release.statuses == ["released", "released"]  # approved → released on publish
    text = (out / "studio_manifest.json").read_text()
    manifest = json.loads(text)
    assert schema_problems("manifest", manifest) == []
    # the manifest is streamed (questions spooled): still the exact text that dumping the
    # whole document at once gives (indent 1, the same key order), two questions in it
    assert text == dumps(manifest) and len(manifest["questions"]) == 2
    assert list(manifest)[:6] == ["format", "format_version", "release", "generated_at", "events", "questions"]
    # the events' sources name where the data came from, never the server's folders
    sources = {slug: e["source"] for slug, e in manifest["events"].items()}
    assert sources and all(s and "/" not in s for s in sources.values()), sources
    files = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()} - {"studio_manifest.json"}
    assert set(manifest["files"]) == files
    for rel, info in manifest["files"].items():
        assert hashlib.sha256((out / rel).read_bytes()).hexdigest() == info["sha256"], rel
    # every file that input_data names is shipped under images/ (the demo's inputs: fixtures/demo_tasks.json)
    named = set()
    for name in ("t1_perception_and_assessment.json", "t2_spatial_relation_analysis.json"):
        for sample in json.loads((out / "tasks" / name).read_text()):
            named |= {f"images/{p}" for p in data_paths(sample["input_data"])}
    assert "images/hurricane-florence_00000018_post_original.png" in named
    assert sorted(f for f in files if f.startswith("images/")) == sorted(named)
    # images are the stored originals, unchanged
    assert (out / "images/hurricane-florence_00000018_post_original.png").read_bytes() == \
        needs_shared(REALDATA / "xbd-hurricane-florence/hurricane-florence_00000018_post_original.png").read_bytes()
    assert manifest["counts"]["by_dimension"] == {"t1": 1, "t2": 1}
    assert manifest["counts"]["by_disaster_type"] == {"hurricane": 1, "tornado": 1}
    q = manifest["questions"]["hurricane-florence_demo01_task0"]
    assert (q["dimension"], q["revision"], q["authors"], q["file"]) == (
        "t1", 1, ["ada"], "tasks/t1_perception_and_assessment.json")
    assert len(q["replay_hash"]) == 64
    t1 = json.loads((out / "tasks/t1_perception_and_assessment.json").read_text())
    assert t1[0]["tasks"][0]["final_answer"] == {"destroyed_building_count": 5, "damaged_pixels": 26766}
    # the digest covers every file of the folder but the sidecar: sha256sum's lines, sorted by path,
    # hashed (worked out here from the bytes on disk, not from the manifest's own list)
    on_disk = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert set(on_disk) == set(manifest["files"]) | {"studio_manifest.json"}
    lines = "".join(f"{hashlib.sha256((out / rel).read_bytes()).hexdigest()}  {rel}\n"
                    for rel in on_disk if rel != "studio_manifest.json")
    assert manifest["format_version"] == 2
    assert manifest["release"]["content_sha256"] == hashlib.sha256(lines.encode()).hexdigest()
    assert schema_problems("task_file", t1) == []


def test_demo_release_import_same_db_changes_nothing(demo_release):
    """Importing the export into the database it came from: every task unchanged, every layer
    linked, no row and no file added; exporting again gives the same task files and images."""
    r = demo_release.report
    assert (r.created, r.updated, sorted(r.unchanged)) == ([], [], ["hurricane-florence_demo01_task0",
                                                                    "joplin-tornado_demo01_task0"])
    n_images = len(_bytes_of(demo_release.out, "images/"))
    assert set(r.layers.values()) == {"linked"} and len(r.layers) == n_images >= 4
    assert (r.release, r.release_created) == ("1.0.0", False)
    assert demo_release.after == demo_release.before
    assert demo_release.data_after == demo_release.data_before
    assert _bytes_of(demo_release.out2, "tasks/") == _bytes_of(demo_release.out, "tasks/")
    assert _bytes_of(demo_release.out2, "images/") == _bytes_of(demo_release.out, "images/")


def test_demo_release_round_trip_into_fresh_database(demo_release, db, tmp_path):
    """Import into an empty studio (events, layers from images/, tasks, release 1.0.0 from the
    sidecar), export again: task files and images byte for byte the same; a second import changes nothing."""
    report = release_import.import_release_dir(None, demo_release.out)
    assert sorted(report.events_created) == ["hurricane-florence", "joplin-tornado"]
    assert set(report.layers.values()) == {"created"} and len(report.layers) == len(_bytes_of(demo_release.out, "images/"))
    assert len(report.created) == 2 and report.release_created
    release = Release.objects.get(version="1.0.0")
    assert release.status == "published"
    out = tmp_path / "again"
    release_export.export_release(release, out)
    assert _bytes_of(out, "tasks/") == _bytes_of(demo_release.out, "tasks/")
    assert _bytes_of(out, "images/") == _bytes_of(demo_release.out, "images/")
    # the gold kept: an import replay with the file's trajectory (obs) and a symbolic revision
    task = Task.objects.get(question_id="joplin-tornado_demo01_task0")
    run = ReplayRun.objects.get(task=task)
    assert run.gold_accepted and run.status == "succeeded" and run.mode == "import"
    assert all("obs" in s for s in run.filled_trajectory) and all("obs" not in s for s in task.head.trajectory)
    before = _counts()
    again = release_import.import_release_dir(None, demo_release.out)
    assert (len(again.unchanged), again.created, again.updated) == (2, [], [])
    assert _counts() == before
    manifest = json.loads((out / "studio_manifest.json").read_text())
    assert manifest["questions"]["joplin-tornado_demo01_task0"]["imported_from"]["provenance"]["authors"] == ["ada"]


# ------------------------------------------------------------------ the benchmark's own files


def test_writer_matches_the_benchmark_formatting(tmp_path):
    """The originals are json.dumps(indent=1) without a trailing newline; the streaming writer
    (one sample at a time) produces exactly that text."""
    for name in TASK_NAMES:
        text = needs_shared(SCORING_EXAMPLES / "tasks" / name).read_text(encoding="utf-8")
        samples = json.loads(text)
        assert dumps(samples) == text
        buf = tmp_path / name
        w = SampleArrayWriter(buf)
        for s in samples:
            w.write(s)
        info = w.close()
        assert buf.read_text(encoding="utf-8") == text
        assert info["sha256"] == hashlib.sha256(text.encode()).hexdigest()


def test_scoring_examples_import_and_export_unchanged(db, tmp_path, settings):
    """The scoring examples (tools outside the catalogue, no images/) import as 12 tasks and export
    again byte for byte; their five referenced images are recorded as missing, not fatal."""
    report = release_import.import_release_dir(None, needs_shared(SCORING_EXAMPLES), release_version="0.1.0")
    assert len(report.created) == 12  # 10 samples, t2_s04 has two tasks, README says twelve
    assert sorted(m["path"] for m in report.images_missing) == [
        "s2/t1.tif", "s2/t2.tif", "s2/t3.tif", "scene/post.png", "scene/pre.png"]
    out = tmp_path / "out"
    manifest = release_export.export_release(Release.objects.get(version="0.1.0"), out)
    for name in TASK_NAMES:
        original = needs_shared(SCORING_EXAMPLES / "tasks" / name).read_bytes()
        assert json.loads((out / "tasks" / name).read_bytes()) == json.loads(original)
        assert (out / "tasks" / name).read_bytes() == original, name
    assert manifest["counts"]["tasks"] == 12 and manifest["counts"]["samples"] == 10
    assert {m["path"] for m in manifest["images_missing"]} == {"s2/t1.tif", "s2/t2.tif", "s2/t3.tif",
                                                               "scene/post.png", "scene/pre.png"}
    before = _counts()
    again = release_import.import_release_dir(None, needs_shared(SCORING_EXAMPLES), release_version="0.1.0")
    assert len(again.unchanged) == 12 and _counts() == before


def _scoring_copy(tmp_path) -> Path:
    d = tmp_path / "bench"
    shutil.copytree(needs_shared(SCORING_EXAMPLES / "tasks"), d / "tasks")
    for p in (d / "tasks").iterdir():
        p.chmod(0o644)
    return d


def _edit(path: Path, fn) -> None:
    data = json.loads(path.read_text())
    fn(data)
    path.write_text(dumps(data))


# What the benchmark's loader itself refuses (load_questions in dora/benchmark.py reads
# sample["sample_id"], sample["tasks"], t["question"], t["task_category"], t["task_category_code"]):
@pytest.mark.parametrize("change, expected", [
    (lambda d: d[1]["tasks"][0].pop("question"),
     "tasks/t1_perception_and_assessment.json: sample t1_s06: tasks[0].question: missing (the benchmark's loader requires it)"),
    (lambda d: d[0]["tasks"][0].pop("task_category_code"),
     "tasks/t1_perception_and_assessment.json: sample t1_s05: tasks[0].task_category_code: missing"),
    (lambda d: d[1].pop("sample_id"),
     "tasks/t1_perception_and_assessment.json: sample #1: sample_id: missing"),
    (lambda d: d[1].__setitem__("tasks", "ask me"),
     "tasks/t1_perception_and_assessment.json: sample t1_s06: tasks: must be a list, not str"),
    (lambda d: d.__setitem__(0, ["not", "a", "sample"]),
     "tasks/t1_perception_and_assessment.json: sample #0: a sample must be an object, not list"),
    (lambda d: d[1].__setitem__("sample_id", "t1_s05"),
     "tasks/t1_perception_and_assessment.json: sample t1_s05: sample_id: sample id also used in tasks/t1_perception_and_assessment.json"),
])
def test_schema_violations_name_file_sample_field_and_change_nothing(db, tmp_path, settings, change, expected):
    d = _scoring_copy(tmp_path)
    _edit(d / "tasks" / TASK_NAMES[0], change)
    before, data_before = _counts(), _tree(settings.STUDIO_DATA_ROOT)
    with pytest.raises(release_import.ReleaseImportError) as exc:
        release_import.import_release_dir(None, d)
    assert str(exc.value).startswith(expected)
    assert exc.value.file == "tasks/t1_perception_and_assessment.json"
    assert _counts() == before and _tree(settings.STUDIO_DATA_ROOT) == data_before


def test_file_that_is_not_a_list_is_refused(db, tmp_path):
    d = _scoring_copy(tmp_path)
    (d / "tasks" / TASK_NAMES[0]).write_text(json.dumps({"sample_id": "x", "tasks": []}))
    with pytest.raises(release_import.ReleaseImportError, match=r"^tasks/t1_perception_and_assessment.json: the file must hold "
                                                     r"a JSON list of samples, not dict$"):
        release_import.import_release_dir(None, d)
    assert Task.objects.count() == 0


def test_invalid_json_names_line_and_column(db, tmp_path):
    d = _scoring_copy(tmp_path)
    (d / "tasks" / TASK_NAMES[2]).write_text('[\n {"sample_id": "x",\n}')
    with pytest.raises(release_import.ReleaseImportError, match=r"^tasks/t3_operational_planning.json: not valid JSON: "
                                                     r"Expecting property name enclosed in double quotes \(line 3, column 1\)"):
        release_import.import_release_dir(None, d)
    assert Task.objects.count() == 0


def test_bad_image_rolls_back_rows_and_files(db, tmp_path, settings):
    """a.tif imports (a real GeoTIFF), then b.tif is not a raster: the error names images/b.tif and
    the event, the layer of a.tif and its stored files are gone again."""
    d = tmp_path / "bench"
    (d / "images").mkdir(parents=True)
    (d / "tasks").mkdir()
    shutil.copyfile(needs_shared(REALDATA / "rasterio-testdata" / "float_nan.tif"), d / "images" / "a.tif")
    (d / "images" / "b.tif").write_bytes(b"not a raster")
    sample = {"sample_id": "s1", "input_data": {"pre_image": {"image_path": "a.tif"}, "post_image": {"image_path": "b.tif"}},
              "tasks": [{"task_category": "perception_and_assessment", "task_category_code": "T1", "question": "Q?",
                         "trajectory": [], "final_answer": {"n": 1}, "eval_spec": {"n": "scalar_count"}}]}
    (d / "tasks" / TASK_NAMES[0]).write_text(dumps([sample]))
    data_before = _tree(settings.STUDIO_DATA_ROOT)
    with pytest.raises(release_import.ReleaseImportError) as exc:
        release_import.import_release_dir(None, d, event_slug="bad-image")
    assert exc.value.file == "images/b.tif"
    assert _counts() == {k: 0 for k in _counts()}
    assert _tree(settings.STUDIO_DATA_ROOT) == data_before
    assert not (Path(settings.STUDIO_DATA_ROOT) / "events" / "bad-image").exists()


def test_polygon_gold_and_extra_keys_round_trip(db, tmp_path):
    """A polygon_iou answer with its gold file under tasks/gold_polygons/ (with dora_grid), extra
    sample and task keys and an unusual key order come back byte for byte."""
    d = tmp_path / "bench"
    (d / "tasks" / "gold_polygons").mkdir(parents=True)
    gold = {"type": "FeatureCollection", "dora_grid": {"transform": [0.5, 0, 100, 0, -0.5, 200], "crs": "EPSG:32615"},
            "features": [{"type": "Feature", "properties": {}, "geometry": {
                "type": "Polygon", "coordinates": [[[0, 0], [1, 0], [1, 1], [0, 0]]]}}]}
    (d / "tasks" / "gold_polygons" / "flood_s1.geojson").write_text(json.dumps(gold))
    sample = {"tasks": [{"question": "Outline the flood.", "task_category": "perception_and_assessment",
                         "task_category_code": "T1", "final_answer": {"flood": "gold_polygons/flood_s1.geojson"},
                         "eval_spec": {"flood": "polygon_iou"}, "difficulty": "hard",
                         "trajectory": [{"call": "seg.flood", "args": {"post_image_path": "/x/post.tif"}, "obs": {"mask_path": "m.png"}}]}],
              "sample_id": "s1", "scene_notes": "ñ — kept as UTF-8", "input_data": {}}
    (d / "tasks" / TASK_NAMES[0]).write_text(dumps([sample]))
    release_import.import_release_dir(None, d, release_version="2.0.0")
    out = tmp_path / "out"
    release_export.export_release(Release.objects.get(version="2.0.0"), out)
    assert _bytes_of(out, "tasks/") == _bytes_of(d, "tasks/")


# ------------------------------------------------------------------ services and immutability


@pytest.fixture
def examples(db, make_user):
    """The scoring examples imported (12 approved tasks) and a maintainer."""
    user = make_user("mia", "maintainer")
    release_import.import_release_dir(None, needs_shared(SCORING_EXAMPLES), make_release=False)
    return user


def test_create_release_refuses_bad_input(examples, make_user):
    user = examples
    with pytest.raises(lifecycle.ReleaseError, match=r"^version: '1\.0' is not a semantic version"):
        lifecycle.create_release(user, "1.0")
    # t2_s04 has tasks 0 and 1; with task 0 a draft, task 1 alone would become t2_s04_task0 in the
    # file (question ids are positional): refused
    Task.objects.filter(question_id="t2_s04_task0").update(status=Task.Status.DRAFT)
    with pytest.raises(lifecycle.ReleaseError, match=r"sample t2_s04 \(t2\) would hold tasks \[1\]"):
        lifecycle.create_release(user, "1.0.0")
    with pytest.raises(lifecycle.ReleaseError, match=r"t2_s04_task0 is draft"):
        lifecycle.create_release(user, "1.0.0", tasks=Task.objects.filter(question_id="t2_s04_task0"))
    with pytest.raises(PermissionDenied):
        lifecycle.create_release(make_user("sam", "scorer"), "1.0.0")
    assert Release.objects.count() == 0


def _raw_sql(sql, params):
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute(sql, params)


def test_published_release_refuses_edits_in_services_and_database(examples, make_user):
    user = examples
    release = lifecycle.create_release(user, "1.0.0", "draft text")
    lifecycle.update_release(user, release, changelog="edited while draft")  # a draft may change
    assert ReleaseTask.objects.filter(release=release).count() == 12
    with pytest.raises(PermissionDenied):
        lifecycle.publish_release(make_user("ada", "author"), release)
    lifecycle.publish_release(user, release)
    release.refresh_from_db()
    assert (release.status, release.changelog, len(release.manifest_sha256)) == ("published", "edited while draft", 64)
    assert set(Task.objects.values_list("status", flat=True)) == {"released"}
    with pytest.raises(lifecycle.ReleaseImmutableError, match="release 1.0.0 is published and cannot be changed"):
        lifecycle.update_release(user, release, changelog="x")
    with pytest.raises(lifecycle.ReleaseImmutableError):
        lifecycle.publish_release(user, release)
    with pytest.raises(lifecycle.ReleaseImmutableError):
        lifecycle.delete_release(user, release)
    item = ReleaseTask.objects.filter(release=release).first()
    other_rev = TaskRevision.objects.exclude(pk=item.revision_id).first()
    for attempt in (
        lambda: Release.objects.filter(pk=release.pk).update(changelog="rewritten"),
        lambda: Release.objects.filter(pk=release.pk).update(status="draft"),
        lambda: _raw_sql("DELETE FROM annotation_release WHERE id = %s", [release.pk]),
        lambda: _raw_sql("UPDATE annotation_release SET version = '9.9.9' WHERE id = %s", [release.pk]),
        lambda: ReleaseTask.objects.filter(pk=item.pk).update(revision=other_rev),
        lambda: ReleaseTask.objects.filter(pk=item.pk).delete(),
        lambda: ReleaseTask.objects.create(release=release, task=other_rev.task, revision=other_rev, question_id="x"),
    ):
        with pytest.raises(IntegrityError, match="published and cannot be changed"), transaction.atomic():
            attempt()
    release.refresh_from_db()
    assert release.changelog == "edited while draft" and release.items.count() == 12


def test_release_diff_on_a_hand_made_change(examples, tmp_path):
    """1.0.0 = the 12 examples. Then by hand: t1_s05's answer and t2_s04_task1's question change, a
    new sample t3_new is added, t5 sample t5_s03 is left out of 1.1.0. 1.0.0 stays a draft: a
    published one would have released its tasks, and an import over a released task is refused
    (test_integrity_locks)."""
    user = examples
    lifecycle.create_release(user, "1.0.0")
    d = _scoring_copy(tmp_path)

    def t1(data):
        data[0]["tasks"][0]["final_answer"]["damaged_classes"] = ["Residential", "Commercial"]

    def t2(data):
        s = next(s for s in data if s["sample_id"] == "t2_s04")
        s["tasks"][1]["question"] = "A reworded question?"

    def t3(data):
        new = json.loads(json.dumps(data[0]))
        new["sample_id"] = "t3_new"
        new["tasks"] = new["tasks"][:1]
        data.append(new)

    _edit(d / "tasks" / TASK_NAMES[0], t1)
    _edit(d / "tasks" / TASK_NAMES[1], t2)
    _edit(d / "tasks" / TASK_NAMES[2], t3)
    report = release_import.import_release_dir(None, d, make_release=False)
    assert sorted(report.updated) == ["t1_s05_task0", "t2_s04_task1"] and report.created == ["t3_new_task0"]
    t5 = json.loads(needs_shared(SCORING_EXAMPLES / "tasks" / TASK_NAMES[4]).read_text())
    dropped = t5[0]["sample_id"]
    keep = Task.objects.exclude(sample_id=dropped)
    lifecycle.create_release(user, "1.1.0", tasks=keep)
    from releases.selectors import release_diff

    diff = release_diff(Release.objects.get(version="1.0.0"), Release.objects.get(version="1.1.0"))
    assert [a["question_id"] for a in diff["added"]] == ["t3_new_task0"]
    assert [r["question_id"] for r in diff["removed"]] == [f"{dropped}_task0"]
    changed = {c["question_id"]: c for c in diff["changed"]}
    assert sorted(changed) == ["t1_s05_task0", "t2_s04_task1"]
    assert changed["t1_s05_task0"]["fields"] == ["final_answer"]
    assert changed["t1_s05_task0"]["gold"]["final_answer"] == {"damaged_classes": {
        "a": ["Residential", "Commercial", "Industrial"], "b": ["Residential", "Commercial"]}}
    assert changed["t2_s04_task1"]["fields"] == ["question"]
    assert changed["t2_s04_task1"]["gold"]["question"]["b"] == "A reworded question?"
    assert (changed["t1_s05_task0"]["revision_a"], changed["t1_s05_task0"]["revision_b"]) == (1, 2)
    assert diff["unchanged"] == 12 - 1 - 2  # 12 in 1.0.0, one removed, two changed
    buf = io.StringIO()
    call_command("release_diff", "1.0.0", "1.1.0", stdout=buf)
    text = buf.getvalue()
    assert text.startswith("release 1.0.0 → 1.1.0: 1 added, 1 removed, 2 changed, 9 unchanged")
    assert '    final_answer.damaged_classes: ["Residential", "Commercial", "Industrial"] → ["Residential", "Commercial"]' in text


def test_export_job_records_progress_and_zip(examples, settings):
    import zipfile

    user = examples
    release = lifecycle.publish_release(user, lifecycle.create_release(user, "1.0.0"))
    job = release_export.start_export(user, release)
    assert (job["status"], job["done"], job["total"], job["stage"]) == ("succeeded", 12, 12, "done")
    names = zipfile.ZipFile(io.BytesIO(read_stored(f"exports/1.0.0/{job['id']}/{job['zip']}"))).namelist()
    assert "dora-1.0.0/tasks/t1_perception_and_assessment.json" in names
    assert "dora-1.0.0/studio_manifest.json" in names
    folder = Path(settings.STUDIO_DATA_ROOT) / "exports" / "1.0.0" / job["id"]  # with a bucket: scratch, removed
    assert not folder.exists() or not any(".tmp" in p.name for p in folder.iterdir())


def test_export_refuses_a_non_empty_folder(examples, tmp_path):
    user = examples
    release = lifecycle.create_release(user, "1.0.0")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("x")
    from releases.services.export import ExportError

    with pytest.raises(ExportError, match="exists and is not empty"):
        release_export.export_release(release, tmp_path / "out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "out"]  # no temporary folder left behind


def test_schemas_are_valid_json_schemas():
    from jsonschema import Draft202012Validator

    for name in ("task_file", "gold_polygon", "manifest"):
        Draft202012Validator.check_schema(load_schema(name))
