"""Tasks over the Florence tile and the helpers the replay, variant and release tests share:
the two-step area task (fixture ``florence_area_task``), the benchmark-layout task file, the
approved Florence base task of the variant tests (fixture ``approved_florence``), a task whose
answer depends on the pixel size, and running a management command in-process.

Hand-worked (the Florence tile's mask, see :mod:`support.florence`): ``seg.building_damage`` in GT
mode remaps xBD major → 2 and destroyed → 3, so ``ras.area(mask, pixel_size_m=0.5, classes=[2, 3])``
= (26,492 + 274) × 0.25 = 6,691.5 m²; with the destroyed pixels cleared (4 → 0) 26,492 × 0.25 =
6,623.0 m².
"""
from __future__ import annotations

import json
from io import StringIO

import numpy as np
import pytest
from conftest import REALDATA, needs_shared
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connection
from PIL import Image

import kernel.engine as engine
from annotation.models import Event, Layer, Task
from annotation.services import imports
from annotation.services.tasks import build_input_data, create_task, save_revision
from replay.services.paths import data_path
from studio import storage
from support.florence import FLORENCE, MASK, POST, PRE
from support.stored import republish_file

#: The two-step area task: seg.building_damage, then ras.area of classes 2 and 3 at 0.5 m/px.
STEPS = [
    {"call": "seg.building_damage", "args": {"pre_image_path": PRE, "post_image_path": POST}},
    {"call": "ras.area", "args": {"mask_path": "<mask_path> from trajectory[0].obs", "pixel_size_m": 0.5,
                                  "classes": [2, 3]}},
]
ANSWER = [{"name": "damaged_area_m2", "eval_type": "scalar_continuous", "source": "<area_m2> from trajectory[1].obs"}]


@pytest.fixture
def florence_area_task(florence, maintainer):
    """The maintainer's two-step area task over ``florence`` (answer 6,691.5 m², worked out above)."""
    return create_task(maintainer, florence, dimension="t1", content={
        "question": "What area do damaged buildings cover?", "input_data": {}, "trajectory": STEPS,
        "answer_spec": ANSWER})


def count_calls(monkeypatch) -> list[str]:
    """Count the engine's tool calls for the rest of the test: returns the list the names of the
    tools called are appended to."""
    calls = []
    real = engine.call_tool

    def counting(name, args, ctx, **kw):
        calls.append(name)
        return real(name, args, ctx, **kw)

    monkeypatch.setattr(engine, "call_tool", counting)
    return calls


def clear_destroyed(florence) -> None:
    """Clear the destroyed pixels (4 → 0) from the Florence event's stored damage mask."""
    mask = Layer.objects.get(event=florence, kind="mask")
    p = data_path(mask.path)
    arr = np.array(Image.open(p))
    arr[arr == 4] = 0
    Image.fromarray(arr).save(p)
    sha = republish_file(mask.path)
    if storage.uses_bucket():  # there the row's hash is what a reader checks the file against
        Layer.objects.filter(pk=mask.pk).update(sha256=sha)


#: The benchmark's temp folder of a recorded run (its absolute paths, which the gold diff ignores).
TMP = "/home/dora/out/tmp/flo_0002_task0"


def run_cmd(*args) -> tuple[str, int]:
    """``call_command(*args)`` in-process: returns (its stdout, its exit status; 0 when it returned)."""
    out = StringIO()
    try:
        call_command(*args, stdout=out, stderr=StringIO())
        code = 0
    except SystemExit as exc:
        code = exc.code
    return out.getvalue(), code


#: The benchmark's own tool calls and outputs (../shared/tool-examples/cases.jsonl), and those on
#: the Florence tile that :func:`benchmark_task_file` records.
TOOL_CASES = REALDATA.parent / "tool-examples" / "cases.jsonl"
FLORENCE_CASES = ("grid_windows_florence_3", "vis_add_map_elements", "vis_pie_chart")


def benchmark_task_file(tmp_path, edit=None):
    """A benchmark-layout task file (``flo_0003``, one T1 task) in ``tmp_path``: a perception step on
    the pre/post images whose observation a model gave, then the :data:`FLORENCE_CASES` calls with
    the observations the benchmark's tools returned; ``edit(trajectory)`` may change it first.
    Returns the file's path."""
    cases = {c["id"]: c for c in map(json.loads, needs_shared(TOOL_CASES).read_text(encoding="utf-8").splitlines())}
    traj = [{"call": "seg_building_damage(pre_image_path, post_image_path)",
             "args": {"pre_image_path": PRE, "post_image_path": POST},
             "obs": {"tool": "seg.building_damage", "mask_path": f"{TMP}/building_damage_3b1f.png",
                     "classes": {"1": "no-damage", "2": "minor-damage", "3": "major-damage", "4": "destroyed"},
                     "model": "dora-damage-v1"}}]
    for cid in FLORENCE_CASES:
        case = cases[cid]
        args = {k: (v.rsplit("/", 1)[-1] if isinstance(v, str) and v.startswith("xbd-") else v)
                for k, v in case["args"].items()}
        traj.append({"call": case["tool"], "args": args, "obs": json.loads(json.dumps(case["expected"]))})
    if edit:
        edit(traj)
    sample = {"sample_id": "flo_0003", "disaster_type": "hurricane",
              "input_data": {"pre_image": {"image_path": PRE, "pixel_size_m": 0.5},
                             "post_image": {"image_path": POST, "pixel_size_m": 0.5},
                             "damage_mask": {"image_path": MASK}},
              "tasks": [{"task_category": "perception_and_assessment", "task_category_code": "T1",
                         "question": "How many analysis windows cover the tile?",
                         "tools": [s["call"].split("(")[0] for s in traj], "trajectory": traj,
                         "final_answer": {"windows": 9}, "eval_spec": {"windows": "scalar_count"}}]}
    p = tmp_path / "t1_perception_and_assessment.json"
    p.write_text(json.dumps([sample]), encoding="utf-8")
    return p


#: The robustness variants of the review tests: (kind, parameters, where an unsolvable variant's
#: gold replay stops: (step, tool, reason) or None), read off the base plan by hand.
VARIANTS = [
    ("extraneous", {"n": 2, "seed": 1}, None),
    ("broken", {"step": 1}, None),
    ("unsolvable", {"strategy": "tool_removal"}, (3, "vis.pie_chart", "vis.pie_chart is removed")),
    ("unsolvable", {"strategy": "information_missing"},
     (0, "seg.building_damage", "hurricane-florence_00000018_post_original.png is missing from")),
    ("unsolvable", {"strategy": "visual_inaccessible"},
     (0, "seg.building_damage", "hurricane-florence_00000018_post_original.png is unreadable in")),
    ("unsolvable", {"strategy": "contradictory_constraints", "constraint": "Use no imagery at all."}, None),
]


@pytest.fixture
def approved_florence(florence_with_root, people, tmp_path):
    """The benchmark-layout task (:func:`benchmark_task_file`) imported over Florence, its answer
    bound to the window count, set approved directly."""
    florence = florence_with_root
    run_cmd("import_tasks", str(benchmark_task_file(tmp_path)), "--event", florence.slug)
    task = Task.objects.get(question_id="flo_0003_task0")
    spec = [{**task.head.answer_spec[0], "source": "<count> from trajectory[1].obs"}]
    save_revision(get_user_model().objects.get(username="root"), task, expected_version=task.version,
                  content={"answer_spec": spec}, message="gold: the window count")
    # setup shortcut: the base task's own review is test_review_workflow's subject
    Task.objects.filter(pk=task.pk).update(status=Task.Status.APPROVED)
    task.refresh_from_db()
    return task


#: The question of :func:`florence_max_polygon_task`.
MAX_POLYGON_QUESTION = "What is the area in square metres of the largest major-damage building footprint?"


def florence_max_polygon_task(user, *, pixel_size_m=0.5):
    """Florence imported and ``user``'s task whose answer depends on the pixel size
    (seg.building_damage → ras.vectorize → vec.max_polygon; ``pixel_size_m`` None leaves it out):
    returns (event, post layer, task)."""
    imports.import_xbd_folder(needs_shared(FLORENCE))
    event = Event.objects.get(slug="hurricane-florence")
    pre = event.layers.get(kind="raster", phase="pre")
    post = event.layers.get(kind="raster", phase="post")
    area_args = {"vector_path": "<vector_path> from trajectory[1].obs"}
    vectorize_args = {"mask_path": "<mask_path> from trajectory[0].obs", "classes": [2]}
    if pixel_size_m is not None:
        area_args["pixel_size_m"] = pixel_size_m
        # the benchmark's vec.max_polygon ranks by the area_m2 ras.vectorize wrote: that step needs
        # the pixel size too (QC vec.pixel_size_ignored, kernel/tools/quirks.py)
        vectorize_args["pixel_size_m"] = pixel_size_m
    content = {
        "question": MAX_POLYGON_QUESTION, "task_category": "perception_and_assessment", "task_category_code": "T1",
        "disaster_type": event.disaster_type,
        "input_data": build_input_data(event, {"pre_image": pre.pk, "post_image": post.pk}),
        "trajectory": [
            {"call": "seg.building_damage", "args": {"pre_image_path": pre.file_name, "post_image_path": post.file_name}},
            {"call": "ras.vectorize", "args": vectorize_args},
            {"call": "vec.max_polygon", "args": area_args},
        ],
        "answer_spec": [{"name": "max_area_m2", "eval_type": "scalar_continuous",
                         "source": "<max_area_m2> from trajectory[2].obs", "answer_format": "square metres"}],
    }
    return event, post, create_task(user, event, dimension="t1", content=content, sample_id="hurricane-florence_gsd01")


def run_layers_variant_statements() -> list[str]:
    """The statements that load a replay run (with revision and task), the event's layers and the task's robustness variant row:
    three SELECTs, sent as one round trip on PostgreSQL (``replay.services.sql.load_many``; one
    captured query there)."""
    return ["SELECT"] if connection.vendor == "postgresql" else ["SELECT", "SELECT", "SELECT"]
