"""Every reference form of dora-format.md §b."""
import pytest

from kernel.references import (
    FoundReference,
    apply_bind,
    find_all_references,
    find_references,
    format_path,
    get_obs_value,
    parse_reference,
    resolve_args,
    resolve_value,
    unresolved_references,
)

TRAJ = [
    {"call": "seg.flood", "args": {}, "obs": {"mask_path": "m.tif", "classes": {"1": "water"},
                                             "zero": 0, "nothing": None}},
    {"call": "tool.loop", "args": {}, "obs": [{"item": {"x1": 0}, "last_obs": {"area_m2": 2.0}}]},
    {"call": "ras.area", "args": {}, "obs": {"area_m2": 12.5}},
]


def test_parse_forms():
    r = parse_reference("<mask_path> from trajectory[0].obs")
    assert (r.kind, r.key, r.index) == ("trajectory", "mask_path", 0)
    r = parse_reference("  <Area_M2>   FROM   Trajectory[12].OBS ")  # trimmed, case-insensitive
    assert (r.kind, r.key, r.index) == ("trajectory", "Area_M2", 12)
    r = parse_reference("<output_path> from step[1].obs")
    assert (r.kind, r.key, r.index) == ("step", "output_path", 1)
    r = parse_reference("<item.properties.pixel_row>")
    assert (r.kind, r.item_path) == ("item", ["properties", "pixel_row"])
    assert parse_reference("<ITEM.x1>").kind == "item"


@pytest.mark.parametrize("text", [
    "<mask_path>from trajectory[0].obs",       # whitespace required around "from"
    "<mask_path> fromtrajectory[0].obs",
    "see <mask_path> from trajectory[0].obs",  # whole string only, no interpolation
    "<mask_path> from trajectory[0].obs!",
    "mask_path from trajectory[0].obs",
    "<mask path> from trajectory[0].obs",
    "<item.>",
    "plain.tif",
])
def test_not_references(text):
    assert parse_reference(text) is None
    assert resolve_value(text, trajectory=TRAJ) == text


def test_trajectory_resolution():
    assert resolve_value("<mask_path> from trajectory[0].obs", trajectory=TRAJ) == "m.tif"
    assert resolve_value("<zero> from trajectory[0].obs", trajectory=TRAJ) == 0
    assert resolve_value("<classes> from trajectory[0].obs", trajectory=TRAJ) == {"1": "water"}
    # list obs: only "results" gives the whole list
    assert resolve_value("<results> from trajectory[1].obs", trajectory=TRAJ) == TRAJ[1]["obs"]
    for unresolved in ["<area_m2> from trajectory[1].obs",   # list obs, other key
                       "<nope> from trajectory[0].obs",      # absent key
                       "<nothing> from trajectory[0].obs",   # null value
                       "<area_m2> from trajectory[9].obs"]:  # out of range
        assert resolve_value(unresolved, trajectory=TRAJ) == unresolved
    assert get_obs_value([1], "results") == [1] and get_obs_value([1], "x") is None


def test_recursive_through_lists_and_dicts():
    args = {"a": ["<area_m2> from trajectory[2].obs", {"b": "<mask_path> from trajectory[0].obs"}],
            "n": 3, "s": "keep"}
    out = resolve_args(args, trajectory=TRAJ)
    assert out == {"a": [12.5, {"b": "m.tif"}], "n": 3, "s": "keep"}
    assert args["a"][0] == "<area_m2> from trajectory[2].obs"  # input untouched


def test_step_and_item_resolution():
    steps = [{"tool": "ras.clip", "obs": {"output_path": "c.tif"}}]
    item = {"x1": 4, "properties": {"pixel_row": 7, "tags": ["a", "b"]}}
    args = {"p": "<output_path> from step[0].obs", "q": "<output_path> from step[1].obs",
            "r": "<item.properties.pixel_row>", "t": "<item.properties.tags.1>",
            "u": "<item.missing>", "x": "<item.x1>"}
    out = resolve_value(args, steps=steps, item=item)
    assert out == {"p": "c.tif", "q": "<output_path> from step[1].obs", "r": 7, "t": "b",
                   "u": "<item.missing>", "x": 4}
    # a kinds filter leaves the other forms alone
    assert resolve_value("<item.x1>", item=item, kinds=("trajectory",)) == "<item.x1>"


def test_bind():
    args = {"image_path": "placeholder", "row": 1}
    item = {"path": "tile.tif", "row": 9}
    out = apply_bind(args, {"image_path": "path", "col": "row"}, item)
    assert out == {"image_path": "tile.tif", "row": 1}  # "col" not in args: not added
    out = apply_bind(args, {"image_path": "<mask_path> from trajectory[0].obs"}, item, TRAJ)
    assert out["image_path"] == "m.tif"
    out = apply_bind(args, {"image_path": "<nope> from trajectory[0].obs"}, item, TRAJ)
    assert out["image_path"] == "<nope> from trajectory[0].obs"
    out = apply_bind(args, {"image_path": "unknown_key"}, item)
    assert out["image_path"] == "placeholder"


def test_find_references_for_qc():
    args = {"calls": [{"call": "ras.clip", "args": {"image_path": "<output_path> from trajectory[3].obs",
                                                     "x1": "<item.x1>"}}],
            "loop_over": "<windows> from trajectory[1].obs",
            "bind": {"image_path": "<mask_path> from trajectory[0].obs"}}
    found = find_references(args)
    assert found == [
        FoundReference(("calls", 0, "args", "image_path"), "output_path", 3),
        FoundReference(("loop_over",), "windows", 1),
        FoundReference(("bind", "image_path"), "mask_path", 0)]
    assert format_path(found[0].path) == "calls[0].args.image_path"
    kinds = sorted(r.kind for _, r in find_all_references(args))
    assert kinds == ["item", "trajectory", "trajectory", "trajectory"]
    assert unresolved_references({"a": 1, "b": ["<item.z>"]})[0][0] == ("b", 0)
