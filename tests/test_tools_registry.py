"""Registry: catalogue conformance, name resolution, argument validation, artifact names."""
import json

import numpy as np
import pytest
from conftest import SHARED, needs_shared

from kernel.tools import (
    REGISTRY,
    ToolContext,
    ToolError,
    ToolInputError,
    UnknownToolError,
    all_tools,
    call_tool,
    get_tool,
)
from kernel.tools.registry import catalogue_params
from kernel.tools.testing import make_ctx, write_png

CATALOGUE = SHARED / "spec" / "dora-tools.json"

REQUIRED_TOOLS = ["seg.building_damage", "ras.count_pixels", "ras.area", "ras.threshold",
                  "mask.compose_multiclass", "ras.vectorize", "vec.buffer", "vec.intersect",
                  "vec.filter_by_attribute", "calc.div", "logi.truck_trips"]


@pytest.fixture(scope="module")
def catalogue():
    needs_shared(CATALOGUE)
    return {t["name"]: t for t in json.loads(CATALOGUE.read_text(encoding="utf-8"))}


def test_required_tools_registered():
    tools = all_tools()
    for name in REQUIRED_TOOLS:
        assert name in tools


def test_every_tool_matches_catalogue(catalogue):
    for name, spec in all_tools().items():
        entry = catalogue[name]
        assert spec.alias == entry["alias"]
        assert (spec.server, spec.module) == (entry["server"], entry["module"]), name
        mine = [(p.name, p.type, p.required, p.default) for p in spec.params]
        theirs = [(p["name"], p["type"], p["required"], p["default"]) for p in entry["params"]]
        assert mine == theirs, name
        assert spec.version >= 1
        if name != "tool.loop":  # the loop's returns are described per return_all mode
            keys = [r.split(":")[0].strip() for r in entry["returns"]]
            assert set(spec.result_keys) <= set(keys), name
        assert spec.func.__doc__, f"{name} has no docstring"


def test_catalogue_params_helper(catalogue):
    assert [p["name"] for p in catalogue_params("ras.count_pixels", CATALOGUE)] == \
        ["mask_path", "classes"]


@pytest.mark.parametrize("spelling", [
    "seg.building_damage", "seg_building_damage", "seg_building_damage(pre_image_path, post_image_path)",
    "functions.seg_building_damage", "  seg.building_damage ( x ) "])
def test_get_tool_spellings(spelling):
    assert get_tool(spelling).name == "seg.building_damage"


@pytest.mark.parametrize("paper,code", [("logi.loop", "tool.loop"), ("logi.reduce", "tool.reduce"),
                                        ("logi_loop", "tool.loop")])
def test_paper_aliases(paper, code):
    assert get_tool(paper).name == code


def test_unknown_tool():
    with pytest.raises(UnknownToolError) as ei:
        get_tool("seg.teleport")
    assert isinstance(ei.value, ToolError)
    assert "seg.teleport" in str(ei.value)


def test_aliases_unique():
    aliases = [s.alias for s in REGISTRY.values()]
    assert len(aliases) == len(set(aliases))


def _mask(tmp_path):
    ctx = make_ctx(tmp_path)
    write_png(tmp_path / "data" / "m.png", np.array([[0, 1], [1, 2]], dtype=np.uint8))
    return ctx


def test_json_string_list_is_parsed(tmp_path):
    ctx = _mask(tmp_path)
    obs = call_tool("ras_count_pixels", {"mask_path": "m.png", "classes": "[1, 2]"}, ctx)
    # hand count: value 1 at (0,1) and (1,0); value 2 at (1,1)
    assert obs == {"tool": "ras.count_pixels", "counts": {"1": 2, "2": 1}, "total": 3,
                   "classes": [1, 2]}


def test_validation_errors_name_the_argument(tmp_path):
    ctx = _mask(tmp_path)
    with pytest.raises(ToolInputError) as ei:
        call_tool("ras.count_pixels", {"mask_path": "m.png"}, ctx)
    assert ei.value.argument == "classes" and "missing" in ei.value.message
    with pytest.raises(ToolInputError) as ei:
        call_tool("ras.count_pixels", {"mask_path": "m.png", "classes": "abc"}, ctx)
    assert ei.value.argument == "classes" and ei.value.expected == "list[int]"
    with pytest.raises(ToolInputError) as ei:
        call_tool("ras.count_pixels", {"mask_path": "m.png", "classes": [1], "mask": "x"}, ctx)
    assert ei.value.argument == "mask" and "unexpected" in str(ei.value)
    with pytest.raises(ToolInputError) as ei:
        call_tool("calc.div", {"a": "one", "b": 2}, ctx)
    assert ei.value.argument == "a"


def test_defaults_applied(tmp_path):
    ctx = make_ctx(tmp_path)
    write_png(tmp_path / "data" / "img.png", np.array([[10, 200]], dtype=np.uint8))
    obs = call_tool("ras.threshold", {"image_path": "img.png", "threshold": 100}, ctx)
    assert (obs["op"], obs["band"], obs["true_value"], obs["false_value"]) == (">=", 1, 255, 0)


def test_output_path_is_content_addressed(tmp_path):
    a = tmp_path / "a"
    b = tmp_path / "b"
    for d in (a, b):
        d.mkdir()
        (d / "in.png").write_bytes(b"same bytes")
    ca = ToolContext(work_dir=tmp_path / "wa")
    cb = ToolContext(work_dir=tmp_path / "wb")
    pa = ca.output_path("ras.clip", {"image": a / "in.png", "k": 1}, ".tif")
    pb = cb.output_path("ras.clip", {"image": b / "in.png", "k": 1}, ".tif")
    assert pa.name == pb.name and pa.name.startswith("ras_clip_") and len(pa.stem) == len("ras_clip_") + 12
    (b / "in.png").write_bytes(b"other bytes")
    pc = cb.output_path("ras.clip", {"image": b / "in.png", "k": 1}, ".tif")
    assert pc.name != pa.name


def test_resolver_rejects_outside_paths(tmp_path):
    ctx = make_ctx(tmp_path)
    (tmp_path / "secret.png").write_bytes(b"x")
    with pytest.raises(ToolInputError) as ei:
        ctx.resolve(str(tmp_path / "secret.png"), tool="t", argument="a")
    assert "outside" in str(ei.value)
    with pytest.raises(ToolInputError):
        ctx.resolve("../secret.png", tool="t", argument="a")
    with pytest.raises(ToolInputError):
        ToolContext(work_dir=tmp_path / "w").resolve("/etc/passwd")
