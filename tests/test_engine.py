"""Replay engine: references between steps, failure propagation, determinism, answers."""
import json

import numpy as np
import pytest

from kernel.engine import fill_answer, replay_hash, run_trajectory
from kernel.tools import GTMask, ToolError
from kernel.tools.testing import XBD_CLASSES, make_ctx, write_png

GT = np.array([[0, 1, 4, 4],
               [3, 3, 0, 0]], dtype=np.uint8)  # remapped: intact 1 px, partial 2 px, destroyed 2 px

STEPS = [
    {"call": "seg_building_damage(pre_image_path, post_image_path)",
     "args": {"pre_image_path": "pre.png", "post_image_path": "post.png"}},
    {"call": "ras.area", "args": {"mask_path": "<mask_path> from trajectory[0].obs",
                                  "pixel_size_m": 0.5, "classes": [3]}},
    {"call": "calc.div", "args": {"a": "<area_m2> from trajectory[1].obs", "b": 4}},
]


def setup(tmp_path, work="work"):
    d = tmp_path / "data"
    d.mkdir(parents=True, exist_ok=True)
    write_png(d / "pre.png", np.zeros((2, 4, 3), np.uint8))
    write_png(d / "post.png", np.zeros((2, 4, 3), np.uint8))
    write_png(d / "gt.png", GT)
    return make_ctx(tmp_path, work=work, gt={"post.png": GTMask(d / "gt.png", XBD_CLASSES)})


def test_three_steps_with_references(tmp_path):
    ctx = setup(tmp_path)
    seen = []
    res = run_trajectory(STEPS, ctx, on_step=seen.append)
    assert res.ok and [s.status for s in res.steps] == ["succeeded"] * 3
    assert [s.index for s in seen] == [0, 1, 2]
    mask = res.steps[0].obs["mask_path"]
    assert res.steps[0].artifacts == [{"key": "mask_path", "name": mask}]
    assert res.steps[1].resolved_args["mask_path"] == mask
    # destroyed: 2 px * 0.25 m2 = 0.5 m2; / 4 = 0.125
    assert res.steps[1].obs["area_m2"] == 0.5
    assert res.steps[2].resolved_args == {"a": 0.5, "b": 4} and res.steps[2].obs["ratio"] == 0.125
    # args stay symbolic in the filled trajectory; the call text is kept as written
    ft = res.filled_trajectory
    assert ft[1]["args"]["mask_path"] == "<mask_path> from trajectory[0].obs"
    assert ft[0]["call"] == STEPS[0]["call"] and ft[2]["obs"]["ratio"] == 0.125
    assert all(s.duration_ms >= 0 for s in res.steps)
    answer = fill_answer([{"name": "destroyed_area_m2", "source": "<area_m2> from trajectory[1].obs"},
                          {"name": "ratio", "source": "<ratio> from trajectory[2].obs"},
                          {"name": "unit", "source": "m2"}], ft)
    assert answer == {"destroyed_area_m2": 0.5, "ratio": 0.125, "unit": "m2"}
    json.dumps(ft)  # plain JSON


def test_failure_stops_and_skips(tmp_path):
    ctx = setup(tmp_path)
    steps = [dict(STEPS[0]),
             # benchmark parity: an absent class index counts 0 and a missing mask gives an empty
             # count, as in the benchmark; ras.stats on a missing raster fails there too
             {"call": "ras.stats", "args": {"image_path": "absent_mask.png"}},
             dict(STEPS[2])]
    res = run_trajectory(steps, ctx)
    assert not res.ok
    assert [s.status for s in res.steps] == ["succeeded", "failed", "skipped"]
    err = res.steps[1].error
    assert err.startswith("step 1 (ras.stats), argument 'image_path':") and \
        "absent_mask.png" in err
    assert res.steps[1].error_detail["type"] == "ToolInputError"
    assert res.failed_step.index == 1 and res.error == err
    assert res.filled_trajectory[2]["obs"] is None and res.steps[2].obs is None


def test_reference_problems_are_explicit(tmp_path):
    ctx = setup(tmp_path)
    res = run_trajectory([{"call": "calc.div", "args": {"a": "<ratio> from trajectory[1].obs", "b": 2}},
                          {"call": "calc.div", "args": {"a": 1, "b": 2}}], ctx)
    assert "points to step 1" in res.steps[0].error and "argument 'a'" in res.steps[0].error
    res = run_trajectory([{"call": "calc.div", "args": {"a": 1, "b": 2}},
                          {"call": "calc.div", "args": {"a": "<sum> from trajectory[0].obs", "b": 2}}],
                         ctx)
    assert "has no 'sum'" in res.steps[1].error and "'ratio'" in res.steps[1].error
    res = run_trajectory([{"call": "calc.div", "args": {"a": "<item.x>", "b": 2}}], ctx)
    assert "inside tool.loop" in res.steps[0].error
    res = run_trajectory([{"call": "seg.nothing", "args": {}}, {"call": "calc.add", "args": {}}], ctx)
    assert "unknown tool" in res.steps[0].error and res.steps[1].status == "skipped"


def test_deterministic_across_work_dirs(tmp_path):
    a = run_trajectory(STEPS, setup(tmp_path, work="run_a"))
    b = run_trajectory(STEPS, setup(tmp_path, work="run_b"))
    ans = [{"name": "r", "source": "<ratio> from trajectory[2].obs"}]
    ha = replay_hash(a.filled_trajectory, fill_answer(ans, a.filled_trajectory))
    hb = replay_hash(b.filled_trajectory, fill_answer(ans, b.filled_trajectory))
    assert ha == hb and len(ha) == 64
    assert a.filled_trajectory == b.filled_trajectory
    # key order does not matter, content does
    assert replay_hash([{"b": 1, "a": 2}], {}) == replay_hash([{"a": 2, "b": 1}], {})
    assert replay_hash([{"a": 2}], {}) != replay_hash([{"a": 3}], {})


def test_loop_step_sees_trajectory(tmp_path):
    ctx = setup(tmp_path)
    steps = [dict(STEPS[0]),
             {"call": "ras.grid_windows", "args": {"image_path": "<mask_path> from trajectory[0].obs",
                                                   "n": 2}},
             {"call": "logi.loop", "args": {
                 "loop_over": "<windows> from trajectory[1].obs", "grid_n": 2,
                 "calls": [{"call": "ras.clip", "args": {
                     "image_path": "<mask_path> from trajectory[0].obs", "x1": "<item.x1>",
                     "x2": "<item.x2>", "y1": "<item.y1>", "y2": "<item.y2>"}},
                     {"call": "ras.area", "args": {"mask_path": "<output_path> from step[0].obs",
                                                   "pixel_size_m": 1, "classes": [3]}}]}},
             {"call": "tool.reduce", "args": {"values": "<results> from trajectory[2].obs",
                                              "field": "last_obs.area_m2"}}]
    res = run_trajectory(steps, ctx)
    assert res.ok, res.error
    # windows of the 2x4 mask: [0:1, 0:2], [0:1, 2:4], [1:2, 0:2], [1:2, 2:4]; destroyed px in
    # the remapped mask are at (0,2) and (0,3) -> areas 0, 2, 0, 0
    assert [r["last_obs"]["area_m2"] for r in res.steps[2].obs] == [0.0, 2.0, 0.0, 0.0]
    assert res.steps[3].obs["best_index"] == 1 and res.steps[3].obs["col_idx"] == 1
    assert res.steps[2].call == "tool.loop"
    assert "trajectory" not in res.steps[2].resolved_args
    with pytest.raises(ToolError) as ei:
        fill_answer([{"name": "x", "source": "<best> from trajectory[3].obs"}], res.trajectory)
    assert "has no 'best'" in str(ei.value)


def test_named_files_and_input_digests_take_work_dir_files_only(tmp_path):
    """The engine's file checks (string paths, for speed): a string names an artifact when it
    is a bare or relative name of a file in the work dir; a shapefile brings its sidecars (same
    stem); absolute paths, '..' and missing files are not artifacts. Expected lists worked out by
    hand from the files made here."""
    from kernel.engine import _artifacts, _input_digests, _named_files
    from kernel.hashing import file_sha256
    from kernel.tools import ToolContext

    wd = tmp_path / "work"
    (wd / "sub").mkdir(parents=True)
    for name in ("roads.shp", "roads.shx", "roads.dbf", "mask.png", "sub/a.shp", "sub/a.prj", "sub/b.tif"):
        (wd / name).write_bytes(name.encode())
    (tmp_path / "outside.shp").write_bytes(b"x")
    ctx = ToolContext(work_dir=wd)
    obs = {"path": "roads.shp", "mask": "mask.png", "n": 3, "missing": "gone.tif",
           "nested": [{"p": "sub/a.shp"}, "../outside.shp", str(tmp_path / "outside.shp")], "unit": "m2"}
    assert _named_files(obs, ctx) == ["mask.png", "roads.dbf", "roads.shp", "roads.shx", "sub/a.prj", "sub/a.shp"]
    # top-level values only, input echoes dropped; 'known' names are taken without a look at the disk
    assert _artifacts(obs, ctx, {"image": "mask.png"}) == [{"key": "path", "name": "roads.shp"}]
    assert _artifacts({"x": "not-on-disk.tif"}, ctx, {}, known={"not-on-disk.tif": "0" * 64}) == \
        [{"key": "x", "name": "not-on-disk.tif"}]
    got = _input_digests({"a": "sub/b.tif", "b": ["roads.dbf", "gone.tif"], "c": "../outside.shp"}, ctx, {})
    assert got == {"sub/b.tif": file_sha256(wd / "sub/b.tif"), "roads.dbf": file_sha256(wd / "roads.dbf")}
