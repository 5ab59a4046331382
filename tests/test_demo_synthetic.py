"""``manage.py demo`` on a clone without ../shared: the SYNTHETIC event, its tasks and its run.

Hand-worked values (the layout in ``evaluation/demo_synthetic.py``: 24 buildings of 40 × 30 px
= 1 200 px = 300 m² at 0.5 m, 4 rows × 6 columns, 8 m apart in a row, 30 m between rows; the
classes of ``DAMAGE_GRID``: 14 no-damage, 3 minor, 2 major, 4 destroyed, 1 un-classified):

- mask pixel counts: background 512² − 24 · 1 200 = 233 344; no-damage 16 800, minor 3 600,
  major 2 400, destroyed 4 800, un-classified 1 200;
- T1 gold: seg.building_damage is filled from the mask (it annotates the post image) in the damage
  tools' classes (minor, major → 2; destroyed → 3; un-classified → 0): 4 regions of class 3 (no two
  destroyed buildings touch); classes 2 and 3 cover (3 + 2 + 4) · 1 200 px · 0.25 m² = 2 700 m²;
- T2 gold: the destroyed buildings r0c3, r1c0, r2c3, r2c4 and their other row neighbours r0c2,
  r0c4, r1c1, r2c2, r2c5 (8 m away; the next row is 30 m away) = 9 footprints within 10 m;
  overlap = 4 · 300 m² + 5 strips of 2 m × 15 m = 1 350 m² (the footprints go through EPSG:4326
  and back: a tolerance of 0.01 m²);
- the example run (fixtures/SYNTHETIC_demo_run): T1 answers 9 destroyed (|9 − 4| = 5 > 1 + 0.2·4)
  and 2 700 m² (exact): 0.5; T2 answers 9 (exact) and 2 100 m² (|2 100 − 1 350| > 1 + 0.2·1 350):
  0.5; DORA score = mean(0.5, 0.5) = 0.5 (the scalar rule of dora/evaluation.py, tau_r = 0.2,
  tau_a = 1). Its tools are the gold's, in order (t_any = t_ord = t_em = eff = 1); arguments:
  T1 2/2, 1/2 (classes [2, 3] vs [3]) and 3/3 → par_acc 2.5/3; T2 3/3, 1/2 (its path names step 0's
  output as the gold's reference does; meter 20 vs 10) and 2/2 → 2.5/3.
"""
from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import numpy as np
import pytest
import rasterio
from django.contrib.auth import get_user_model
from django.core.management import call_command
from scipy import ndimage

from annotation.importers.common import DAMAGE_CLASS_MAP
from annotation.models import Event, Task
from evaluation import demo_synthetic
from evaluation.models import AgentRun, RunRecord
from replay.models import ReplayRun


def test_generator_draws_the_documented_layout_the_same_way_every_time(tmp_path):
    a = demo_synthetic.write_synthetic_event(tmp_path / "a")
    b = demo_synthetic.write_synthetic_event(tmp_path / "b")
    assert sorted(p.name for p in a.values()) == sorted(demo_synthetic.FILES.values())
    assert all(p.name.startswith("SYNTHETIC_") for p in a.values())
    digest = lambda p: hashlib.sha256(p.read_bytes()).hexdigest()  # noqa: E731
    assert {k: digest(p) for k, p in a.items()} == {k: digest(p) for k, p in b.items()}

    for role, bands in (("pre", 3), ("post", 3), ("mask", 1)):
        with rasterio.open(a[role]) as src:
            assert (src.width, src.height, src.count) == (512, 512, bands)
            assert src.crs.to_epsg() == 32615 and src.res == (0.5, 0.5)
            assert (src.bounds.left, src.bounds.top) == (500000.0, 3300000.0)
            assert "SYNTHETIC" in src.tags()
    with rasterio.open(a["mask"]) as src:
        mask = src.read(1)
    values, counts = np.unique(mask, return_counts=True)
    assert dict(zip(values.tolist(), counts.tolist())) == {0: 233344, 1: 16800, 2: 3600, 3: 2400, 4: 4800, 5: 1200}
    assert ndimage.label(mask == 4)[1] == 4

    # footprints: one per building, its subtype the mask's class under it
    fc = json.loads(a["buildings"].read_text())
    assert len(fc["features"]) == 24
    inverse = ~demo_synthetic._transform()
    for f in fc["features"]:
        ring = f["geometry"]["coordinates"][0]
        cx = sum(x for x, _ in ring[:4]) / 4
        cy = sum(y for _, y in ring[:4]) / 4
        col, row = (int(v) for v in inverse @ (cx, cy))
        assert DAMAGE_CLASS_MAP[str(mask[row, col])] == f["properties"]["subtype"]
        assert f["properties"]["uid"].startswith("SYNTHETIC-")
    destroyed = {f["properties"]["uid"][10:] for f in fc["features"] if f["properties"]["subtype"] == "destroyed"}
    assert destroyed == {"r0c3", "r1c0", "r2c3", "r2c4"}


def _succeeded_answer(task: Task) -> dict:
    return ReplayRun.objects.get(task=task, revision=task.head, status="succeeded").final_answer


@pytest.mark.django_db
def test_demo_without_real_data_builds_the_synthetic_event_tasks_and_run(settings, tmp_path, client):
    settings.STUDIO_DEMO_DATA = tmp_path / "no-shared" / "realdata"
    out = io.StringIO()
    call_command("demo", stdout=out)
    log = out.getvalue()
    assert "Demo data folder missing" in log and "SYNTHETIC" in log and "SOURCE.md" in log

    event = Event.objects.get()
    assert event.slug == "synthetic-demo-hurricane" and "SYNTHETIC" in event.name
    assert event.disaster_type == "hurricane"
    layers = {layer.file_name: layer for layer in event.layers.all()}
    assert set(layers) == {"SYNTHETIC_pre_disaster.tif", "SYNTHETIC_post_disaster.tif",
                           "SYNTHETIC_damage_mask.tif", "SYNTHETIC_building_footprints.geojson"}
    assert all("SYNTHETIC" in layer.name for layer in layers.values())
    pre, post = layers["SYNTHETIC_pre_disaster.tif"], layers["SYNTHETIC_post_disaster.tif"]
    assert (pre.phase, post.phase, pre.crs, pre.gsd_m, pre.band_count) == ("pre", "post", "EPSG:32615", 0.5, 3)
    mask = layers["SYNTHETIC_damage_mask.tif"]
    assert mask.kind == "mask" and mask.class_map == DAMAGE_CLASS_MAP and mask.annotates_id == post.pk
    assert mask.class_counts == {"0": 233344, "1": 16800, "2": 3600, "3": 2400, "4": 4800, "5": 1200}
    footprints = layers["SYNTHETIC_building_footprints.geojson"]
    assert footprints.kind == "vector" and footprints.feature_count == 24 and footprints.modality == "buildings"

    t1 = Task.objects.get(question_id="SYNTHETIC-hurricane_demo01_task0")
    t2 = Task.objects.get(question_id="SYNTHETIC-hurricane_demo02_task0")
    assert (t1.dimension, t2.dimension) == ("t1", "t2")
    assert _succeeded_answer(t1) == {"destroyed_building_count": 4, "damaged_area_m2": 2700.0}
    a2 = _succeeded_answer(t2)
    assert a2["buildings_near_destroyed"] == 9
    assert a2["overlap_area_m2"] == pytest.approx(1350.0, abs=0.01)

    run = AgentRun.objects.get()
    assert run.agent.name == "SYNTHETIC-demo-agent" and run.dora_score == 0.5
    r1 = RunRecord.objects.get(run=run, task=t1)
    r2 = RunRecord.objects.get(run=run, task=t2)
    assert r1.task_score == 0.5 and r1.field_scores == {"destroyed_building_count": 0.0, "damaged_area_m2": 1.0}
    assert r2.task_score == 0.5 and r2.field_scores == {"buildings_near_destroyed": 1.0, "overlap_area_m2": 0.0}
    assert (r1.t_any, r1.t_ord, r1.t_em, r1.eff) == (1.0, 1.0, 1.0, 1.0) == (r2.t_any, r2.t_ord, r2.t_em, r2.eff)
    assert r1.par_acc == pytest.approx(2.5 / 3, abs=1e-6) and r2.par_acc == pytest.approx(2.5 / 3, abs=1e-6)

    # the event page says SYNTHETIC
    client.force_login(get_user_model().objects.get(username="maxine"))
    page = client.get(f"/events/{event.slug}/")
    assert page.status_code == 200 and b"SYNTHETIC demo event" in page.content

    # idempotent: a second run adds nothing
    counts = (Event.objects.count(), event.layers.count(), Task.objects.count(), ReplayRun.objects.count(),
              AgentRun.objects.count())
    call_command("demo", stdout=io.StringIO())
    assert (Event.objects.count(), event.layers.count(), Task.objects.count(), ReplayRun.objects.count(),
            AgentRun.objects.count()) == counts


@pytest.mark.django_db
def test_synthetic_demo_tasks_walk_review_release_and_scoring(settings, tmp_path):
    """The synthetic tasks pass submission (QC, replay), review and a published release; the
    release exported in the benchmark's layout scores 1.0 against itself, and the example run
    imported against the release scores as worked out in the module docstring (0.5)."""
    from annotation.services import review
    from evaluation.scoring import evaluate_sanity
    from evaluation.services.runs import import_run_dir
    from releases.services.lifecycle import create_release, publish_release
    from releases.services.release_export import export_release

    settings.STUDIO_DEMO_DATA = tmp_path / "missing"
    call_command("demo", stdout=io.StringIO())
    users = get_user_model().objects.in_bulk(["ada", "rey", "maxine"], field_name="username")
    tasks = list(Task.objects.filter(question_id__startswith="SYNTHETIC-").order_by("question_id"))
    assert len(tasks) == 2
    for task in tasks:
        review.submit(users["ada"], task)
        review.start_review(users["rey"], task)
        review.approve(users["rey"], task)
    release = publish_release(users["maxine"], create_release(users["maxine"], "0.1.0", "SYNTHETIC demo"))
    assert sorted(Task.objects.values_list("status", flat=True)) == ["released", "released"]

    export_release(release, tmp_path / "export")
    t1 = json.loads((tmp_path / "export" / "tasks" / "t1_perception_and_assessment.json").read_text())
    assert t1[0]["tasks"][0]["final_answer"] == {"destroyed_building_count": 4, "damaged_area_m2": 2700.0}
    assert evaluate_sanity(tmp_path / "export" / "tasks")["dora_score"] == 1.0

    run = import_run_dir(users["maxine"], Path(settings.BASE_DIR) / "fixtures" / "SYNTHETIC_demo_run", "SYNTHETIC-agent-on-0.1.0",
                         release=release)
    assert run.dora_score == 0.5 and run.records.count() == 2
