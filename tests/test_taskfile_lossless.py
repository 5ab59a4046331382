"""Lossless benchmark files through the database.

* The property: for any folder the benchmark's loader accepts (generated: NaN and infinities in
  answers and observations, list/string/absent ``args``, ``inputs`` spellings, unknown keys at
  sample and task level in random order, unicode, non-string question / task_category /
  disaster_type, sub-codes and integer task_category_code), ``import_release`` then ``export_release``
  gives byte-identical ``tasks/*.json`` and identical ``tasks/gold_polygons/``.
* The held-back case of the issue: a release with NaN gold answers and a list ``args`` imports
  (no IntegrityError from the JSON CHECK constraint) and exports byte for byte.
* Both importers build the same task from the same file.

Expected bytes are the input bytes themselves: the benchmark writes its files with Python's json
(indent 1, ensure_ascii False, NaN tokens, no trailing newline; dora-format.md §(a)).
"""
from __future__ import annotations

import json
import math
import shutil
import uuid
from pathlib import Path

import pytest
from django.db import connection, transaction
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from annotation.models import Event, Task
from kernel.taskfile import dumps, from_storage
from releases.models import Release
from releases.services import release_export, release_import
from replay.models import ReplayRun

T1 = "t1_perception_and_assessment.json"
T3 = "t3_operational_planning.json"

text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",), exclude_characters="\x00"), max_size=8)
scalars = (st.none() | st.booleans() | st.integers(-10**15, 10**15)
           | st.floats(allow_nan=True, allow_infinity=True) | text)
values = st.recursive(scalars, lambda c: st.lists(c, max_size=3) | st.dictionaries(text, c, max_size=3), max_leaves=8)
odd_args = st.dictionaries(st.sampled_from(["mask_path", "classes", "pixel_size_m"]), values, max_size=3) | st.lists(values, max_size=3) | text | st.none()
GOLD = {"type": "FeatureCollection", "dora_grid": {"transform": [0.5, 0.0, 100.0, 0.0, -0.5, 200.0], "crs": "EPSG:32615"},
        "features": [{"type": "Feature", "properties": {}, "geometry": {
            "type": "Polygon", "coordinates": [[[0, 0], [1, 0], [1, 1], [0, 0]]]}}]}


def _shuffled(draw, d: dict) -> dict:
    order = draw(st.permutations(list(d)))
    return {k: d[k] for k in order}


@st.composite
def steps(draw):
    step = {"call": draw(st.sampled_from(["ras.area", "seg_flood(pre_image_path, post_image_path)", "calc.add", "unknown.tool"]))}
    key = draw(st.sampled_from(["args", "inputs", None]))
    if key:
        step[key] = draw(odd_args)
    if draw(st.booleans()):
        step["obs"] = draw(values)
    return _shuffled(draw, step)


@st.composite
def tasks(draw, sid: str, j: int):
    spec = draw(st.dictionaries(st.sampled_from(["count", "area_m2", "label", "ratio_pct"]),
                                st.sampled_from(["scalar_count", "scalar_continuous", "exact_match", "ratio_pct"]), max_size=3))
    answer = {name: draw(values) for name in spec}
    polygon = draw(st.booleans())
    if polygon:
        spec["flood"] = "polygon_iou"
        answer["flood"] = f"gold_polygons/{sid}_{j}.geojson"
    task = {"question": draw(text.filter(bool) | values),
            "task_category": draw(st.sampled_from(["perception_and_assessment", ["perception", "assessment"], 3])),
            "task_category_code": draw(st.sampled_from(["T1", "T1-1", "T1.2", 1])),
            "tools": draw(st.lists(st.sampled_from(["ras.area", "calc.add"]), max_size=2)),
            "trajectory": draw(st.lists(steps(), max_size=3)), "final_answer": answer, "eval_spec": spec}
    if draw(st.booleans()):
        task["answer_format"] = {k: draw(text) for k in spec}
    for k in draw(st.lists(st.sampled_from(["difficulty", "notes", "ünïcode_key"]), unique=True, max_size=2)):
        task[k] = draw(values)
    return _shuffled(draw, task), polygon


@st.composite
def folders(draw):
    """``{file name: [sample, ...]}`` and the gold polygon file names."""
    out, polygons = {}, []
    n = 0
    for name in draw(st.lists(st.sampled_from([T1, T3]), min_size=1, max_size=2, unique=True)):
        samples = []
        for _ in range(draw(st.integers(1, 2))):
            n += 1
            sid = f"s{n}" + draw(st.sampled_from(["", "_ü", "-x"]))
            ts = []
            for j in range(draw(st.integers(1, 2))):
                t, poly = draw(tasks(sid, j))
                ts.append(t)
                if poly:
                    polygons.append(f"{sid}_{j}.geojson")
            sample = {"sample_id": sid, "disaster_type": draw(st.sampled_from(["flood", "earthquake", "", ["flood", "storm"]])),
                      "input_data": draw(st.sampled_from([{}, {"post_image": {"image_path": "missing/post.tif", "pixel_size_m": math.nan}}])),
                      "tasks": ts}
            for k in draw(st.lists(st.sampled_from(["classes", "scene_notes", "zz_extra"]), unique=True, max_size=2)):
                sample[k] = draw(values)
            samples.append(_shuffled(draw, sample))
        out[name] = samples
    return out, polygons


def _write_folder(root: Path, files: dict, polygons: list) -> None:
    (root / "tasks" / "gold_polygons").mkdir(parents=True)
    for name, samples in files.items():
        (root / "tasks" / name).write_text(dumps(samples), encoding="utf-8")
    for p in polygons:
        (root / "tasks" / "gold_polygons" / p).write_text(json.dumps(GOLD), encoding="utf-8")


def _bytes_under(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted((folder / "tasks").rglob("*")) if p.is_file()}


@hsettings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(folders())
def test_import_release_then_export_release_is_the_identity(db, tmp_path, settings, folder):
    files, polygons = folder
    root = tmp_path / uuid.uuid4().hex[:8] / "bench"
    _write_folder(root, files, polygons)
    try:
        with transaction.atomic():
            release_import.import_release_dir(None, root, release_version="1.0.0")
            out = root.parent / "out"
            release_export.export_release(Release.objects.get(version="1.0.0"), out)
            assert _bytes_under(out) == _bytes_under(root)
            transaction.set_rollback(True)
    finally:
        shutil.rmtree(root.parent, ignore_errors=True)


def _held_back_release(root: Path) -> bytes:
    """A release in the benchmark's layout with what the issue's held-back folders hold: NaN gold
    answers (NaN against NaN passes in the official evaluator), a gold step whose args is a list."""
    sample = {"sample_id": "hb_01", "disaster_type": "flood", "input_data": {},
              "tasks": [{"task_category": "perception_and_assessment", "task_category_code": "T1-1",
                         "question": "Mean flood depth where no pixel is flooded?",
                         "tools": ["ras.zonal_stats"],
                         "trajectory": [{"call": "ras.zonal_stats", "args": ["post.tif"],
                                         "obs": {"tool": "ras.zonal_stats", "mean": math.nan, "max": -math.inf}}],
                         "final_answer": {"mean_depth_m": math.nan}, "eval_spec": {"mean_depth_m": "scalar_continuous"}}]}
    (root / "tasks").mkdir(parents=True)
    data = dumps([sample]).encode("utf-8")
    (root / "tasks" / T1).write_bytes(data)
    return data


def test_held_back_release_with_nan_and_list_args_round_trips(db, tmp_path):
    data = _held_back_release(tmp_path / "bench")
    assert b"NaN" in data and b"-Infinity" in data
    report = release_import.import_release_dir(None, tmp_path / "bench", release_version="3.0.0")
    assert report.created == ["hb_01_task0"]
    task = Task.objects.get(question_id="hb_01_task0")
    rev = task.head
    # the list args is kept as written (never {}), the NaN answer bound to the obs key that holds it
    assert rev.trajectory == [{"call": "ras.zonal_stats", "args": ["post.tif"]}]
    assert rev.answer_spec == [{"name": "mean_depth_m", "eval_type": "scalar_continuous",
                                "source": "<mean> from trajectory[0].obs"}]
    run = ReplayRun.objects.get(task=task)
    assert run.final_answer == {"mean_depth_m": {"$float": "NaN"}}
    with connection.cursor() as cur:  # what the JSON column holds: no raw NaN token
        cur.execute("SELECT final_answer, filled_trajectory FROM replay_replayrun WHERE id = %s", [run.pk])
        raw = " ".join(str(x) for x in cur.fetchone())
    assert "NaN" not in raw.replace('"NaN"', "") and '"$float"' in raw
    assert math.isnan(from_storage(run.final_answer)["mean_depth_m"])
    out = tmp_path / "out"
    release_export.export_release(Release.objects.get(version="3.0.0"), out)
    assert (out / "tasks" / T1).read_bytes() == data
    # the scorer sees the NaN gold as a float again: gold against itself (the evaluator's --sanity)
    # scores the field 1.0, NaN against NaN passing as in the official evaluator
    from evaluation.scoring import evaluate_samples
    from releases.services.export import release_samples

    samples, _ = release_samples(Release.objects.get(version="3.0.0"))
    assert math.isnan(samples["t1"][0]["tasks"][0]["final_answer"]["mean_depth_m"])
    doc = evaluate_samples({"t1": samples["t1"]}, None)
    assert doc["full"]["t1"]["tasks"][0]["field_scores"] == {"mean_depth_m": 1.0}


def test_both_importers_build_the_same_task(db, tmp_path, make_user):
    """The same file through import_tasks and import_release: equal revision content and equal
    kept source (sample, task, derived content), in the same order."""
    from annotation.services.task_import import import_task_file

    user = make_user("root", "maintainer", "author")
    data = _held_back_release(tmp_path / "bench")
    (tmp_path / T1).write_bytes(data)
    fields = ("question", "task_category", "task_category_code", "disaster_type", "input_data", "classes",
              "tools", "trajectory", "answer_spec")

    def snapshot():
        rev = Task.objects.get(question_id="hb_01_task0").head
        src = {k: v for k, v in json.loads(rev.source).items() if k in ("sample", "task", "content", "sample_index", "task_index")}
        return json.dumps({f: getattr(rev, f) for f in fields}), json.dumps(src)

    with transaction.atomic():
        event = Event.objects.create(slug="bench", name="bench")
        rows = import_task_file(user, tmp_path / T1, event)
        assert [r["status"] for r in rows] == ["created"]
        by_tasks = snapshot()
        transaction.set_rollback(True)
    release_import.import_release_dir(None, tmp_path / "bench", make_release=False)
    assert snapshot() == by_tasks


@hsettings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(folders())
def test_import_tasks_never_ends_in_a_traceback(db, tmp_path, make_user, folder):
    """Any file the loader accepts is imported by import_tasks, or refused with TaskImportError
    (here: an input_data path that names no layer of the event, or a gold answer found under an
    observation key no reference can name), each problem naming the file, sample and task; the stored values are
    storage-tagged (no raw NaN reaches the JSON columns) and the kept source reads back equal."""
    from annotation.services.task_import import TaskImportError, import_task_file
    from kernel.taskfile import same_value

    files, _ = folder
    user = make_user("root", "maintainer", "author")
    name, samples = next(iter(files.items()))
    path = tmp_path / uuid.uuid4().hex[:8] / name
    path.parent.mkdir(parents=True)
    path.write_text(dumps(samples), encoding="utf-8")
    with transaction.atomic():
        event = Event.objects.create(slug=f"ev-{uuid.uuid4().hex[:6]}", name="e")
        try:
            rows = import_task_file(user, path, event)
        except TaskImportError as exc:  # each problem on a line naming the file, sample and task
            assert all(line.startswith(f"{name}: sample ") and ("names no layer of event" in line or "references: " in line)
                       for line in str(exc).splitlines()), str(exc)
        else:
            assert len(rows) == sum(len(s["tasks"]) for s in samples)
            for s in samples:
                for i, t in enumerate(s["tasks"]):
                    rev = Task.objects.get(question_id=f"{s['sample_id']}_task{i}").head
                    json.dumps([rev.answer_spec, rev.trajectory], allow_nan=False)
                    kept = json.loads(rev.source)["task"]
                    assert same_value(kept, t) and json.dumps(kept) == json.dumps(t)  # same order too
        transaction.set_rollback(True)


def test_values_longer_than_the_studio_columns_are_refused_naming_field_and_limit(db, tmp_path):
    """The loader does not limit lengths; the studio's short columns do (task_category 200,
    task_category_code 40, disaster_type 40). A longer value is refused by name with its limit,
    never cut (a 10,000-character task_category was silently cut to 200); nothing is
    written. A sample id too long to key a question is refused by name too."""
    root = tmp_path / "bench"
    (root / "tasks").mkdir(parents=True)
    sample = {"sample_id": "long_01", "disaster_type": "d" * 50, "tasks": [{
        "question": "q?", "task_category": "c" * 250, "task_category_code": "T1-" + "x" * 60}]}
    for change, message in [({}, "task_category: 250 characters, more than the 200"),
                            ({"task_category": "c"}, "task_category_code: 63 characters, more than the 40")]:
        bad_task = dict(sample["tasks"][0], **change)
        (root / "tasks" / T1).write_bytes(dumps([dict(sample, tasks=[bad_task])]).encode("utf-8"))
        with pytest.raises(release_import.ReleaseImportError, match=message):
            release_import.import_release_dir(None, root, release_version="4.0.0")
    ok_task = dict(sample["tasks"][0], task_category="c", task_category_code="T1")
    (root / "tasks" / T1).write_bytes(dumps([dict(sample, tasks=[ok_task])]).encode("utf-8"))
    with pytest.raises(release_import.ReleaseImportError, match="disaster_type: 50 characters, more than the 40"):
        release_import.import_release_dir(None, root, release_version="4.0.0")
    assert not Task.objects.exists() and not Release.objects.exists()
    bad = tmp_path / "bad"
    (bad / "tasks").mkdir(parents=True)
    (bad / "tasks" / T1).write_text(dumps([dict(sample, sample_id="s" * 201)]))
    with pytest.raises(release_import.ReleaseImportError, match=r"sample_id: longer than 200 characters"):
        release_import.import_release_dir(None, bad)


@pytest.mark.parametrize("case", ["import_tasks_nan_in_args", "import_tasks_nan_in_classes"])
def test_nan_in_args_or_classes_is_kept_not_refused(db, tmp_path, make_user, case):
    """NaN in a step's args or in classes once ended in a traceback; the benchmark's loader
    accepts them (``json.load`` reads NaN), so they import losslessly instead of being refused:
    stored tagged, written back as the same token."""
    from annotation.services.task_import import import_task_file
    from kernel.taskfile import read_task_file

    text = {"import_tasks_nan_in_args": '[{"sample_id": "s1", "input_data": {}, "tasks": [{"task_category": '
            '"perception_and_assessment", "task_category_code": "T1", "question": "How many?", "trajectory": '
            '[{"call": "perception.count", "args": {"k": NaN}}], "final_answer": {"n": 1}, "eval_spec": '
            '{"n": "scalar_count"}}]}]',
            "import_tasks_nan_in_classes": '[{"sample_id": "s1", "input_data": {}, "tasks": [{"task_category": '
            '"perception_and_assessment", "task_category_code": "T1", "question": "How many?", "trajectory": [], '
            '"final_answer": {"n": 1}, "eval_spec": {"n": "scalar_count"}}], "classes": {"1": NaN}}]'}[case]
    path = tmp_path / T1
    path.write_text(text)
    event = Event.objects.create(slug="corpus", name="corpus")
    rows = import_task_file(make_user("mia", "maintainer", "author"), path, event)
    assert [r["status"] for r in rows] == ["created"]
    rev = Task.objects.get(question_id="s1_task0").head
    stored = rev.trajectory[0]["args"]["k"] if case.endswith("args") else rev.classes["1"]
    assert stored == {"$float": "NaN"}  # kernel.taskfile's storage tag of the NaN token
    json.dumps([rev.trajectory, rev.classes], allow_nan=False)  # no raw NaN reached a JSON column
    kept = read_task_file(text.encode(), T1).samples[0]
    assert json.loads(rev.source)["sample"]["sample_id"] == kept["sample_id"]
