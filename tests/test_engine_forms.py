"""Replay engine: every reference form and tool.loop case of dora-format.md §b, the stored
(expanded) form of loops, the step cache and the content-addressed store (no database)."""
from __future__ import annotations

import json

import numpy as np
import pytest
from support.replay import count_calls

import kernel.engine as engine
from kernel.engine import ArtifactStore, MemoryStepCache, collapse_expanded, fill_answer, replay_hash, run_trajectory
from kernel.tools import GTMask
from kernel.tools.registry import call_tool, get_tool
from kernel.tools.testing import XBD_CLASSES, make_ctx, write_geojson, write_png

GT = np.array([[0, 1, 4, 4],
               [3, 3, 0, 0]], dtype=np.uint8)  # remapped to the damage convention: 1 intact px,
# 2 partial px (xBD 3 -> 2), 2 destroyed px (xBD 4 -> 3)


def ctx_for(tmp_path, work="work"):
    d = tmp_path / "data"
    d.mkdir(parents=True, exist_ok=True)
    write_png(d / "pre.png", np.zeros((2, 4, 3), np.uint8))
    write_png(d / "post.png", np.zeros((2, 4, 3), np.uint8))
    if not (d / "gt.png").exists():
        write_png(d / "gt.png", GT)
    return make_ctx(tmp_path, work=work, gt={"post.png": GTMask(d / "gt.png", XBD_CLASSES)})


SEG = {"call": "seg.building_damage", "args": {"pre_image_path": "pre.png", "post_image_path": "post.png"}}


def test_whole_string_trimmed_case_insensitive(tmp_path):
    ctx = ctx_for(tmp_path)
    res = run_trajectory([
        {"call": "calc.add", "args": {"a": 2, "b": 3}},
        # trimmed, the pattern in any case (the key itself is a dict key): resolves to 5.0
        {"call": "calc.mul", "args": {"a": "  <sum> FROM Trajectory[0].OBS ", "b": 2}},
        # not the whole string: stays literal, and a float parameter refuses the text
        {"call": "calc.mul", "args": {"a": "x <sum> from trajectory[0].obs", "b": 2}},
    ], ctx)
    assert res.steps[1].obs["product"] == 10.0
    assert res.steps[2].status == "failed" and "argument 'a'" in res.steps[2].error


def test_list_obs_answers_only_results(tmp_path):
    ctx = ctx_for(tmp_path)
    loop = {"call": "tool.loop", "args": {"loop_over": [1, 2], "calls": [
        {"call": "calc.mul", "args": {"a": "<item.value>", "b": 10}}]}}
    res = run_trajectory([loop, {"call": "tool.reduce", "args": {
        "values": "<results> from trajectory[0].obs", "field": "last_obs.product"}}], ctx)
    assert res.ok, res.error
    assert res.steps[1].obs["best_value"] == 20.0 and res.steps[1].obs["best_index"] == 1
    bad = run_trajectory([loop, {"call": "calc.add", "args": {"a": "<product> from trajectory[0].obs",
                                                               "b": 1}}], ctx_for(tmp_path, "w2"))
    assert "returned a list, whose only key is 'results'" in bad.steps[1].error


def test_step_item_and_trajectory_refs_inside_loop(tmp_path):
    ctx = ctx_for(tmp_path)
    steps = [
        {"call": "calc.add", "args": {"a": 100, "b": 0}},
        {"call": "tool.loop", "args": {"loop_over": [1, 2, 3], "calls": [
            {"call": "calc.mul", "args": {"a": "<item.value>", "b": 2}},
            {"call": "calc.add", "args": {"a": "<product> from step[0].obs",
                                          "b": "<sum> from trajectory[0].obs"}}]}},
    ]
    res = run_trajectory(steps, ctx)
    assert res.ok, res.error
    # item v -> 2v + 100: 102, 104, 106; only the last call's obs is kept per item
    assert [r["last_obs"]["sum"] for r in res.steps[1].obs] == [102.0, 104.0, 106.0]
    assert [r["item"] for r in res.steps[1].obs] == [{"value": 1}, {"value": 2}, {"value": 3}]


def test_nested_item_path_and_bind(tmp_path):
    ctx = ctx_for(tmp_path)
    feats = [{"properties": {"px": {"row": 0, "col": 2}}, "w": 0.5},
             {"properties": {"px": {"row": 1, "col": 0}}, "w": 2.0}]
    steps = [
        SEG,
        {"call": "calc.add", "args": {"a": 1, "b": 2}},
        {"call": "tool.loop", "args": {
            "loop_over": feats,
            "bind": {"b": "w", "a": "<sum> from trajectory[1].obs", "normalize": "w"},
            "calls": [
                {"call": "ras.sample_point", "args": {"image_path": "<mask_path> from trajectory[0].obs",
                                                      "row": "<item.properties.px.row>",
                                                      "col": "<item.properties.px.col>"}},
                # bind: b <- item["w"], a <- the trajectory reference's value; 'normalize' is not
                # in the args, so it is not bound
                {"call": "calc.mul", "args": {"a": 0, "b": 0}}]}},
    ]
    res = run_trajectory(steps, ctx)
    assert res.ok, res.error
    nested = res.steps[2].expanded
    # (0,2) is xBD 4 -> destroyed 3; (1,0) is xBD 3 -> partial 2
    assert [e["obs"]["pixel_values"] for e in nested[0::2]] == [{"1": 3}, {"1": 2}]
    assert [e["args"] for e in nested[1::2]] == [{"a": 3.0, "b": 0.5}, {"a": 3.0, "b": 2.0}]
    assert [r["last_obs"]["product"] for r in res.steps[2].obs] == [1.5, 6.0]


def test_item_coercion_grid_windows_scalars_and_earlier_results(tmp_path):
    ctx = ctx_for(tmp_path)
    steps = [
        # 4-element lists become windows; grid_n adds row_idx / col_idx
        {"call": "tool.loop", "args": {"loop_over": [[0, 2, 0, 1], [2, 4, 0, 1], [0, 2, 1, 2], [2, 4, 1, 2]],
                                       "grid_n": 2, "calls": [
            {"call": "calc.add", "args": {"a": "<item.x1>", "b": "<item.y2>"}}]}},
        # an earlier loop's {item, last_obs} is unwrapped to its item
        {"call": "tool.loop", "args": {"loop_over": "<results> from trajectory[0].obs", "calls": [
            {"call": "calc.mul", "args": {"a": "<item.row_idx>", "b": "<item.col_idx>"}}]}},
        # return_all false: a summary dict
        {"call": "tool.loop", "args": {"loop_over": [7, 8], "return_all": False, "calls": [
            {"call": "calc.mul", "args": {"a": "<item.value>", "b": 1}}]}},
    ]
    res = run_trajectory(steps, ctx)
    assert res.ok, res.error
    items = [r["item"] for r in res.steps[0].obs]
    assert items[1] == {"x1": 2, "x2": 4, "y1": 0, "y2": 1, "row_idx": 0, "col_idx": 1}
    assert items[2]["row_idx"] == 1 and items[2]["col_idx"] == 0
    assert [r["last_obs"]["sum"] for r in res.steps[0].obs] == [1.0, 3.0, 2.0, 4.0]  # x1 + y2
    assert [r["last_obs"]["product"] for r in res.steps[1].obs] == [0.0, 0.0, 0.0, 1.0]  # row*col
    assert res.steps[2].obs == {"tool": "tool.loop", "iteration_count": 2, "results": []}


def test_loop_over_geojson_path_and_reference_to_path(tmp_path):
    ctx = ctx_for(tmp_path)
    from shapely.geometry import Point

    write_geojson(tmp_path / "data" / "pts.geojson", [
        {"geometry": Point(0, 0), "properties": {"n": 4}},
        {"geometry": Point(1, 1), "properties": {"n": 5}}])
    steps = [
        {"call": "tool.loop", "args": {"loop_over": "pts.geojson", "calls": [
            {"call": "calc.mul", "args": {"a": "<item.properties.n>", "b": 2}}]}},
    ]
    res = run_trajectory(steps, ctx)
    assert res.ok, res.error
    assert [r["last_obs"]["product"] for r in res.steps[0].obs] == [8.0, 10.0]


def test_engine_loop_equals_the_tool(tmp_path):
    """The engine runs tool.loop itself (to expand and cache nested calls); its output must be
    the registered tool's, byte for byte."""
    ctx = ctx_for(tmp_path)
    args = {"loop_over": [[0, 2, 0, 1], [2, 4, 0, 2]], "grid_n": 2, "bind": {"b": "x2"}, "calls": [
        {"call": "calc.add", "args": {"a": "<item.y2>", "b": 0}},
        {"call": "calc.mul", "args": {"a": "<sum> from step[0].obs", "b": "<item.col_idx>"}}]}
    res = run_trajectory([{"call": "tool.loop", "args": args}], ctx)
    direct = call_tool("tool.loop", dict(args, trajectory=[]), ctx)
    assert json.dumps(res.steps[0].obs, sort_keys=True) == json.dumps(direct, sort_keys=True)


def test_stored_form_wrapper_then_expanded_calls(tmp_path):
    ctx = ctx_for(tmp_path)
    steps = [
        SEG,
        {"call": "ras.grid_windows", "args": {"image_path": "<mask_path> from trajectory[0].obs", "n": 2}},
        {"call": "logi.loop", "args": {
            "loop_over": "<windows> from trajectory[1].obs", "grid_n": 2,
            "calls": [{"call": "ras.clip", "args": {
                "image_path": "<mask_path> from trajectory[0].obs", "x1": "<item.x1>",
                "x2": "<item.x2>", "y1": "<item.y1>", "y2": "<item.y2>"}},
                {"call": "ras.area", "args": {"mask_path": "<output_path> from step[0].obs",
                                              "pixel_size_m": 1, "classes": [3]}}]}},
        {"call": "tool.reduce", "args": {"values": "<results> from trajectory[2].obs",
                                         "field": "last_obs.area_m2"}},
    ]
    res = run_trajectory(steps, ctx)
    assert res.ok, res.error
    ft = res.filled_trajectory
    # 4 windows x 2 calls expanded after the wrapper: 3 + 1 + 8 = 12 entries
    assert len(ft) == 12 and len(res.trajectory) == 4
    assert ft[2]["call"] == "logi.loop" and ft[2]["args"] == steps[2]["args"]
    assert [s["call"] for s in ft[3:11]] == ["ras.clip", "ras.area"] * 4
    # expanded args are concrete: item values and the step[0] artifact substituted
    assert ft[3]["args"]["x2"] == 1 and ft[4]["args"]["mask_path"] == ft[3]["obs"]["output_path"]
    # the reduce step's reference is renumbered to the wrapper's stored position (still 2 here),
    # and the evaluator's flattening (wrappers skipped) sees exactly the nested calls
    assert ft[11]["args"]["values"] == "<results> from trajectory[2].obs"
    flat = [s["call"] for s in ft if s["call"] not in ("tool.loop", "logi.loop", "tool.reduce")]
    assert flat == ["seg.building_damage", "ras.grid_windows"] + ["ras.clip", "ras.area"] * 4
    # windows of the 2x4 mask ([x1, x2, y1, y2] = rows x1..x2, cols y1..y2); destroyed px at
    # (0,2),(0,3): areas 0, 2, 0, 0 -> reduce picks 1
    assert res.steps[3].obs["best_index"] == 1 and res.steps[3].obs["col_idx"] == 1
    # a step after the loop: its reference index moves to the stored position
    res2 = run_trajectory(steps + [{"call": "calc.add", "args": {
        "a": "<best_value> from trajectory[3].obs", "b": 0}}], ctx_for(tmp_path, "w2"))
    assert res2.filled_trajectory[12]["args"]["a"] == "<best_value> from trajectory[11].obs"
    assert res2.steps[4].obs["sum"] == 2.0
    # collapsing the stored form gives back the authored steps and indices
    authored, index_map = collapse_expanded(res2.filled_trajectory)
    assert [s["args"] for s in authored] == [s["args"] for s in steps] + [
        {"a": "<best_value> from trajectory[3].obs", "b": 0}]
    assert index_map == {0: 0, 1: 1, 2: 2, 11: 3, 12: 4}
    # answers resolve against the authored view
    assert fill_answer([{"name": "best", "source": "<best_value> from trajectory[3].obs"}],
                       res.trajectory) == {"best": 2.0}


def test_loop_failure_names_iteration_and_skips_rest(tmp_path):
    ctx = ctx_for(tmp_path)
    # benchmark parity: as in the benchmark's loop, the unresolved <item.nope> is passed on literally,
    # calc.mul fails inside its own try and its stub object is kept: the loop goes on
    res = run_trajectory([
        {"call": "tool.loop", "args": {"loop_over": [1, 2], "calls": [
            {"call": "calc.mul", "args": {"a": "<item.nope>", "b": 2}}]}},
        {"call": "calc.add", "args": {"a": 1, "b": 2}}], ctx)
    assert [s.status for s in res.steps] == ["succeeded", "succeeded"]
    stub = res.steps[0].obs[0]["last_obs"]
    assert stub["status"] == "stub" and stub["inputs"]["a"] == "<item.nope>"
    # an argument calc.mul does not have is a TypeError before its try block: the loop fails,
    # naming the iteration and the call, and the rest is skipped
    res = run_trajectory([
        {"call": "tool.loop", "args": {"loop_over": [1, 2], "calls": [
            {"call": "calc.mul", "args": {"a": 1, "b": 2, "c": "<item.value>"}}]}},
        {"call": "calc.add", "args": {"a": 1, "b": 2}}], ctx)
    assert [s.status for s in res.steps] == ["failed", "skipped"]
    assert "iteration 0, call 0" in res.steps[0].error and "calc.mul" in res.steps[0].error
    res = run_trajectory([{"call": "tool.loop", "args": {"loop_over": [1], "calls": [
        {"call": "vis.damage_map", "args": {}}]}}], ctx)
    assert "cannot be nested" in res.steps[0].error


LOOP_STEPS = [
    SEG,
    {"call": "ras.grid_windows", "args": {"image_path": "<mask_path> from trajectory[0].obs", "n": 2}},
    {"call": "tool.loop", "args": {"loop_over": "<windows> from trajectory[1].obs", "grid_n": 2, "calls": [
        {"call": "ras.clip", "args": {"image_path": "<mask_path> from trajectory[0].obs", "x1": "<item.x1>",
                                      "x2": "<item.x2>", "y1": "<item.y1>", "y2": "<item.y2>"}},
        {"call": "ras.area", "args": {"mask_path": "<output_path> from step[0].obs", "pixel_size_m": 0.5,
                                      "classes": [2, 3]}}]}},
    {"call": "ras.area", "args": {"mask_path": "<mask_path> from trajectory[0].obs", "pixel_size_m": 0.5,
                                  "classes": [2, 3]}},
]


def test_cache_second_run_calls_no_tool_and_is_identical(tmp_path, monkeypatch):
    calls = count_calls(monkeypatch)
    cache, store = MemoryStepCache(), ArtifactStore(tmp_path / "cas")
    a = run_trajectory(LOOP_STEPS, ctx_for(tmp_path, "run_a"), cache=cache, store=store)
    assert a.ok, a.error
    # 1 seg + 1 grid + 4 windows x 2 + 1 area = 11 tool calls
    assert len(calls) == 11 and a.tool_calls == 11 and a.cache_hits == 0
    calls.clear()
    b = run_trajectory(LOOP_STEPS, ctx_for(tmp_path, "run_b"), cache=cache, store=store)
    assert calls == [] and b.tool_calls == 0 and b.cache_hits == 11
    assert all(s.cached for s in b.steps)
    ans = [{"name": "area", "source": "<area_m2> from trajectory[3].obs"}]
    assert replay_hash(a.filled_trajectory, fill_answer(ans, a.trajectory)) == \
        replay_hash(b.filled_trajectory, fill_answer(ans, b.trajectory))
    # artifacts are linked back from the store: same bytes under the same names
    mask = b.steps[0].obs["mask_path"]
    assert (tmp_path / "run_b" / mask).read_bytes() == (tmp_path / "run_a" / mask).read_bytes()
    sha = b.manifest[mask]
    assert (tmp_path / "cas" / sha[:2] / sha).is_file()
    # partial (2 px) + destroyed (2 px) = 4 px x 0.25 m2
    assert b.steps[3].obs["area_m2"] == 1.0


def test_cache_recomputes_only_what_changed(tmp_path, monkeypatch):
    calls = count_calls(monkeypatch)
    cache, store = MemoryStepCache(), ArtifactStore(tmp_path / "cas")
    steps = [SEG, {"call": "calc.add", "args": {"a": 1, "b": 2}},
             {"call": "ras.area", "args": {"mask_path": "<mask_path> from trajectory[0].obs",
                                           "pixel_size_m": 0.5, "classes": [3]}}]
    first = run_trajectory(steps, ctx_for(tmp_path, "a"), cache=cache, store=store)
    assert first.steps[2].obs["area_m2"] == 0.5  # 2 destroyed px x 0.25
    calls.clear()
    # the GT mask changes: every pixel of row 1 destroyed -> 2 + 2 = 4 destroyed px
    write_png(tmp_path / "data" / "gt.png", np.array([[0, 1, 4, 4], [4, 4, 4, 4]], np.uint8))

    def fp(tool, args):  # what a perception step reads besides its args (the GT mask)
        from kernel.tools.base import file_sha256
        return file_sha256(tmp_path / "data" / "gt.png")

    second = run_trajectory(steps, ctx_for(tmp_path, "b"), cache=cache, store=store, fingerprint=fp)
    # seg recomputed (new fingerprint), calc.add from cache, ras.area recomputed (new input file)
    assert calls == ["seg.building_damage", "ras.area"]
    assert [s.cached for s in second.steps] == [False, True, False]
    assert second.steps[2].obs["area_m2"] == 1.5  # 6 px x 0.25
    # a tool version bump invalidates that tool's entries
    calls.clear()
    monkeypatch.setattr(get_tool("calc.add"), "version", 99)
    run_trajectory(steps, ctx_for(tmp_path, "c"), cache=cache, store=store, fingerprint=fp)
    assert calls == ["calc.add"]


def test_a_killed_worker_propagates(tmp_path, monkeypatch):
    real = engine.call_tool

    def dies(name, args, ctx, **kw):
        if name == "ras.area":
            raise SystemExit("worker killed")
        return real(name, args, ctx, **kw)

    monkeypatch.setattr(engine, "call_tool", dies)
    with pytest.raises(SystemExit):
        run_trajectory(LOOP_STEPS, ctx_for(tmp_path))
