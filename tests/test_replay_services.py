"""Replay services on real data: hand-worked answer, determinism, the step cache, crash
recovery, progress, the gold diff and its acceptance (service, API and the task-page block).

Hand-worked values (Florence tile ``hurricane-florence_00000018``; its SOURCE.md lists mask values
{0, 3, 4}): np.unique on the mask gives value 3 (major) on 26,492 px and 4 (destroyed) on 274 px.
``seg.building_damage`` in GT mode remaps xBD major → 2 and destroyed → 3, so
``ras.area(mask, pixel_size_m=0.5, classes=[2, 3])`` = (26,492 + 274) × 0.25 = 6,691.5 m².
With the destroyed pixels cleared from the mask (4 → 0) it is 26,492 × 0.25 = 6,623.0 m².
"""
from __future__ import annotations

import pytest
from django.urls import include, path
from support.replay import ANSWER, STEPS, clear_destroyed, count_calls

import kernel.engine as engine
from annotation.services.tasks import create_task, save_revision

# the task page's block needs two page routes (frontend/urls_pages.py); the tests add them here
from frontend.views import replays as views_replays  # noqa: E402
from replay.models import ReplayRun, ReplayStep, StepCacheEntry
from replay.selectors import latest_successful_replay, replay_diff
from replay.services.gold import ReplayStateError, accept_gold
from replay.services.runs import create_run, execute_replay, resume_stuck_replays, start_replay

urlpatterns = [
    path("tasks/<int:pk>/replay-diff/", views_replays.replay_diff_block, name="replay-diff"),
    path("replays/<int:pk>/accept/", views_replays.replay_accept, name="replay-accept"),
    path("", include("studio.urls")),
]


@pytest.fixture
def task(florence_area_task):
    """The two-step area task over Florence (:func:`support.replay.florence_area_task`)."""
    return florence_area_task


def test_real_answer_determinism_and_cache(task, maintainer, monkeypatch, settings):
    calls = count_calls(monkeypatch)
    first = start_replay(maintainer, task)
    assert first.status == "succeeded", first.error
    assert first.final_answer == {"damaged_area_m2": 6691.5}
    assert first.filled_trajectory[1]["obs"]["pixel_count"] == 26766
    assert calls == ["seg.building_damage", "ras.area"] and first.tool_calls == 2
    assert first.steps_done == first.steps_total == 2
    steps = list(first.steps.all())
    assert [s.status for s in steps] == ["succeeded", "succeeded"] and not any(s.cached for s in steps)
    assert steps[1].resolved_args["mask_path"] == steps[0].obs["mask_path"]
    # content-addressed store + per-run manifest
    mask = steps[0].obs["mask_path"]
    sha = first.artifact_manifest[mask]
    cas = settings.STUDIO_ARTIFACT_ROOT / "cas" / sha[:2] / sha
    run_file = settings.STUDIO_ARTIFACT_ROOT / first.artifact_dir / mask
    assert cas.is_file() and run_file.read_bytes() == cas.read_bytes()
    assert StepCacheEntry.objects.count() == 2
    # the second replay of the unchanged task calls no tool; same bytes, same hash
    calls.clear()
    second = start_replay(maintainer, task)
    assert calls == [] and second.tool_calls == 0 and second.cache_hits == 2
    assert all(s.cached for s in second.steps.all())
    assert second.replay_hash == first.replay_hash and second.filled_trajectory == first.filled_trajectory
    assert (settings.STUDIO_ARTIFACT_ROOT / second.artifact_dir / mask).read_bytes() == cas.read_bytes()
    # without the cache every tool runs again and still gives the same hash
    third = execute_replay(create_run(task).pk, use_cache=False)
    assert calls == ["seg.building_damage", "ras.area"] and third.replay_hash == first.replay_hash
    assert second.gold_accepted and latest_successful_replay(task).pk == third.pk


def test_failure_stops_the_run_readably(florence, maintainer):
    t = create_task(maintainer, florence, dimension="t1", content={
        "question": "q", "input_data": {}, "answer_spec": ANSWER, "trajectory": [
            STEPS[0],
            # benchmark parity: an absent class counts 0 as in the benchmark; a null pixel size fails
            # there (a required float) and here
            {"call": "ras.area", "args": {"mask_path": "<mask_path> from trajectory[0].obs", "pixel_size_m": None,
                                          "classes": [4]}},
            {"call": "calc.div", "args": {"a": "<area_m2> from trajectory[1].obs", "b": 2}}]})
    run = start_replay(maintainer, t)
    assert run.status == "failed" and run.steps_done == 1
    assert [s.status for s in run.steps.all()] == ["succeeded", "failed", "skipped"]
    assert run.error.startswith("step 1 (ras.area), argument 'pixel_size_m':")
    assert latest_successful_replay(t) is None


def test_killed_worker_rerun_gives_the_same_result(task, maintainer, monkeypatch):
    real = engine.call_tool

    def dies_on_area(name, args, ctx, **kw):
        if name == "ras.area":
            raise SystemExit("worker killed")  # what a killed worker looks like from inside
        return real(name, args, ctx, **kw)

    monkeypatch.setattr(engine, "call_tool", dies_on_area)
    run = create_run(task)
    with pytest.raises(SystemExit):
        execute_replay(run.pk)
    run.refresh_from_db()
    assert run.status == "running" and run.steps_done == 1
    monkeypatch.setattr(engine, "call_tool", real)
    calls = count_calls(monkeypatch)
    again = execute_replay(run.pk)
    assert again.status == "succeeded" and again.final_answer == {"damaged_area_m2": 6691.5}
    assert calls == ["ras.area"]  # step 0 had finished: it comes from the cache
    assert ReplayStep.objects.filter(run=again).count() == 2
    clean = execute_replay(create_run(task).pk, use_cache=False)
    assert clean.replay_hash == again.replay_hash


def test_resume_stuck(task):
    from datetime import timedelta

    from django.utils import timezone

    run = create_run(task)
    ReplayRun.objects.filter(pk=run.pk).update(status="running", heartbeat_at=timezone.now() - timedelta(hours=1))
    fresh = create_run(task)
    ReplayRun.objects.filter(pk=fresh.pk).update(status="running", heartbeat_at=timezone.now())
    assert resume_stuck_replays(timeout_s=600) == [run.pk]  # in-process: re-run at once
    run.refresh_from_db()
    assert run.status == "succeeded" and run.final_answer == {"damaged_area_m2": 6691.5}


def test_mask_change_needs_acceptance(task, florence, maintainer, make_user, client, settings):
    gold = start_replay(maintainer, task)
    assert gold.gold_accepted and gold.accepted_by is None  # first replay: nothing approved to protect
    gold = accept_gold(maintainer, gold)
    assert gold.accepted_by == maintainer
    clear_destroyed(florence)
    new = start_replay(maintainer, task)
    assert new.status == "succeeded" and new.final_answer == {"damaged_area_m2": 6623.0}
    assert not new.gold_accepted
    # the approved gold is not overwritten silently
    assert latest_successful_replay(task).pk == gold.pk
    diff = replay_diff(new)
    assert diff["base"] == gold.pk and diff["pending"] and diff["changed"]
    assert diff["answer"] == [{"field": "damaged_area_m2", "before": 6691.5, "after": 6623.0, "changed": True}]
    assert [s["state"] for s in diff["steps"]] == ["changed", "changed"]
    area = {c["path"]: c for c in diff["steps"][1]["changes"]}
    assert area["pixel_count"]["before"] == 26766 and area["pixel_count"]["after"] == 26492
    # the API shows the same diff; someone without the right may not accept
    client.force_login(maintainer)
    body = client.get(f"/api/tasks/{task.pk}/replay-diff/").json()
    assert body["run"] == new.pk and body["answer"][0]["after"] == 6623.0
    scorer = make_user("sam", "scorer")
    from django.core.exceptions import PermissionDenied
    with pytest.raises(PermissionDenied):
        accept_gold(scorer, new)
    # the task-page block offers the acceptance; accepting through it moves the gold
    settings.ROOT_URLCONF = __name__
    html = client.get(f"/tasks/{task.pk}/replay-diff/").content.decode()
    assert "waiting for acceptance" in html and 'id="accept-gold"' in html and "6623.0" in html
    resp = client.post(f"/replays/{new.pk}/accept/")
    assert resp.status_code == 302 and resp["Location"] == f"/tasks/{task.pk}/"
    new.refresh_from_db()
    assert new.gold_accepted and new.accepted_by == maintainer
    assert latest_successful_replay(task).pk == new.pk
    html = client.get(f"/tasks/{task.pk}/replay-diff/").content.decode()
    assert f"replay {new.pk} against the gold before it, replay " in html  # the replay is the gold now
    assert "accepted as gold by mia" in html and 'id="accept-gold"' not in html
    # accepting the older replay now is refused
    settings.ROOT_URLCONF = "studio.urls"
    assert client.post(f"/api/replays/{gold.pk}/accept/").status_code == 409
    with pytest.raises(ReplayStateError):
        accept_gold(maintainer, gold)


def test_first_replay_block_shows_no_gold_before_not_null(task, maintainer, client, settings):
    """The first gold replay has no gold before it: the block says so instead of a ``null`` gold
    for every field (the demo's task page read 'gold null, this replay 60' under a 'gold' badge)."""
    start_replay(maintainer, task)
    client.force_login(maintainer)
    settings.ROOT_URLCONF = __name__
    html = client.get(f"/tasks/{task.pk}/replay-diff/").content.decode()
    assert "no gold before" in html and "<code>null</code>" not in html and "6691.5" in html


def test_unchanged_replay_after_approval_stays_gold_and_edit_is_pending(task, maintainer):
    gold = accept_gold(maintainer, start_replay(maintainer, task))
    same = start_replay(maintainer, task)
    assert same.gold_accepted and same.accepted_by == maintainer  # same hash: nothing changed
    save_revision(maintainer, task, expected_version=task.version, content={"trajectory": [
        STEPS[0], dict(STEPS[1], args=dict(STEPS[1]["args"], pixel_size_m=1.0))]})
    task.refresh_from_db()
    edited = start_replay(maintainer, task)
    assert edited.final_answer == {"damaged_area_m2": 26766.0} and not edited.gold_accepted
    assert latest_successful_replay(task) is None  # the head revision has no accepted gold yet
    assert gold.pk < same.pk


def test_progress_in_api(task, maintainer, client):
    client.force_login(maintainer)
    run = client.post(f"/api/tasks/{task.pk}/replays/", {}, content_type="application/json").json()
    assert (run["steps_done"], run["steps_total"], run["status"]) == (2, 2, "succeeded")
    assert run["tool_calls"] + run["cache_hits"] == 2 and run["gold_accepted"]
    got = client.get(f"/api/replays/{run['id']}/").json()
    assert [s["status"] for s in got["steps"]] == ["succeeded", "succeeded"]
    assert got["steps"][1]["resolved_args"]["classes"] == [2, 3]


def test_task_page_include_loads_the_block(task):
    from django.template.loader import render_to_string

    # what task_detail.html includes: a placeholder that fetches the block from its page route
    html = render_to_string("frontend/replay_diff.html", {"task": task})
    assert f'data-src="/tasks/{task.pk}/replay-diff/"' in html and "fetch(" in html
    assert "Accept as gold" not in html
