"""``manage.py tools``: the registry as JSON and as a table grouped by module (no database)."""
from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from kernel.tools.registry import SERVERS, all_tools


def run(*args) -> str:
    out = StringIO()
    call_command("tools", *args, stdout=out)
    return out.getvalue()


def test_json_lists_every_registry_tool():
    registry = all_tools()
    entries = json.loads(run("--json"))
    assert len(entries) == len(registry)
    by_name = {e["name"]: e for e in entries}
    assert set(by_name) == set(registry)
    for e in entries:
        assert set(e) == {"name", "alias", "server", "module", "version", "description", "parameters", "result_keys"}
        spec = registry[e["name"]]
        assert e["alias"] == spec.alias == e["name"].replace(".", "_")
        assert (e["server"], e["module"], e["version"]) == (spec.server, spec.module, spec.version)
        assert [p["name"] for p in e["parameters"]] == [p.name for p in spec.params]
        assert e["result_keys"] == spec.result_keys
    # hand-checked entries
    assert by_name["ras.count_pixels"]["parameters"] == [
        {"name": "mask_path", "type": "str", "required": True, "default": None},
        {"name": "classes", "type": "list[int]", "required": True, "default": None},
    ]
    assert by_name["ras.count_pixels"]["result_keys"] == ["tool", "counts", "total", "classes"]
    assert by_name["calc.div"]["server"] == "Calculate" and by_name["calc.div"]["module"] == "logical"
    assert by_name["seg.building_damage"]["alias"] == "seg_building_damage"
    loop = {p["name"]: p for p in by_name["tool.loop"]["parameters"]}
    assert loop["return_all"] == {"name": "return_all", "type": "bool", "required": False, "default": True}
    # the benchmark's server order
    order = [SERVERS.index(e["server"]) for e in entries]
    assert order == sorted(order)


def test_json_filters():
    entries = json.loads(run("--json", "--module", "perception"))
    assert entries and {e["module"] for e in entries} == {"perception"}
    assert all(e["name"].startswith("seg.") for e in entries)
    calc = json.loads(run("--json", "--server", "calculate"))
    assert calc and {e["server"] for e in calc} == {"Calculate"}
    with pytest.raises(CommandError, match="no tool matches"):
        run("--module", "nonexistent")


def test_table_is_grouped_by_module():
    registry = all_tools()
    text = run()
    lines = text.splitlines()
    modules = sorted({s.module for s in registry.values()})
    assert lines[0] == f"{len(registry)} tools in {len(modules)} modules"
    headers = [l for l in lines if l.startswith("== ")]
    assert headers == [f"== {m} ({sum(s.module == m for s in registry.values())}) ==" for m in modules]
    row = next(l for l in lines if l.startswith("ras.count_pixels "))
    assert "ras_count_pixels" in row and "Analysis" in row
    assert "(mask_path: str, classes: list[int]) -> tool, counts, total, classes" in row
    # every tool appears once, in its module's block
    for name, spec in registry.items():
        rows = [i for i, l in enumerate(lines) if l.split(" ")[0] == name]
        assert len(rows) == 1, name
        header = max(i for i, l in enumerate(lines[: rows[0]]) if l.startswith("== "))
        assert lines[header].startswith(f"== {spec.module} ("), name
