"""Robustness variants served over MCP: ``replay.variant_tools`` through
``replay.mcp_server.build_server`` and ``manage.py mcp_serve``, driven with the MCP client of
tests/test_mcp.py.

Data: test_mcp's real Florence T1 task (seg.building_damage → ras.count_pixels(classes [2, 3]),
approved here as a setup shortcut) and its hand-checked counts: {"2": 26492, "3": 274}, total
26766 (np.unique on the real hurricane-florence_00000018_mask.png, see test_mcp's docstring).
"""
from __future__ import annotations

import json
import sys

import anyio
import pytest
from conftest import REPO, requires_shared
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters
from support.florence import FLORENCE, POST, PRE
from support.mcp import GT_COUNTS, make_task, obs_of, run_async, subprocess_env

from annotation.models import Task
from annotation.services.variants import create_variant
from annotation.variants import broken_observation, inert_observation
from kernel.tools.registry import all_tools
from replay.mcp_server import SUBMIT_TOOL, build_server
from replay.sessions import SessionRecorder

pytestmark = requires_shared(FLORENCE)

GOLD_ANSWER = {"damaged_pixels": 26766, "pixels_by_class": GT_COUNTS}


def approved_task():
    user, task = make_task()
    # setup shortcut: the review cycle (replay, submit, approve) is test_review_workflow's subject
    Task.objects.filter(pk=task.pk).update(status=Task.Status.APPROVED)
    task.refresh_from_db()
    return user, task


def listed(server) -> dict:
    out = {}

    async def main():
        async with Client(server) as client:
            out["tools"] = [t for t in (await client.list_tools()).tools]

    run_async(main)
    return out["tools"]


@pytest.mark.django_db
def test_extraneous_variant_lists_its_distractors_and_they_answer_inert():
    user, base = approved_task()
    variant, _ = create_variant(user, base, "extraneous", n=2, seed=0)
    distractors = variant.tools["distractors"]
    assert len(distractors) == 2
    server = build_server(variant.task)
    out = {}

    async def main():
        async with Client(server) as client:
            out["tools"] = (await client.list_tools()).tools
            for d in distractors:
                out[d["name"]] = await client.call_tool(d["name"].replace(".", "_"),
                                                        {"pre_image_path": PRE, "post_image_path": POST})
            seg = await client.call_tool("seg_building_damage", {"pre_image_path": PRE, "post_image_path": POST})
            out["count"] = await client.call_tool("ras_count_pixels", {"mask_path": obs_of(seg)["mask_path"],
                                                                       "classes": [2, 3]})

    run_async(main)
    names = [t.name for t in out["tools"]]
    by_name = {t.name: t for t in out["tools"]}
    registry = all_tools()
    # every registry tool plus the 2 distractors, nothing else
    assert len(names) == len(registry) + 2
    assert set(names) == {s.alias for s in registry.values()} | {d["name"].replace(".", "_") for d in distractors}
    for d in distractors:
        alias = d["name"].replace(".", "_")
        tool = by_name[alias]
        mirror = registry[d["mirrors"]]
        # listed right after the gold tool it mimics, with its own description and that tool's schema
        assert names.index(alias) > names.index(mirror.alias)
        assert tool.description.startswith(d["description"])
        schema = dict(tool.input_schema)
        assert schema.pop("title") == f"{alias}_input"
        expected = mirror.input_schema()
        expected.pop("title")
        assert schema == expected
        # called, it answers that it does not apply, and nothing else
        r = out[d["name"]]
        assert not r.is_error and obs_of(r) == inert_observation(d)
        assert obs_of(r)["status"] == "not_applicable"
    # the real tools still compute: the hand-checked Florence counts
    assert obs_of(out["count"])["counts"] == GT_COUNTS


@pytest.mark.django_db
def test_broken_variant_fails_every_call_and_its_alternative_computes_the_original(tmp_path):
    user, base = approved_task()
    variant, _ = create_variant(user, base, "broken", step=1, error="ras.count_pixels: backend timed out")
    assert variant.tools["broken"]["tool"] == "ras.count_pixels"
    assert variant.tools["broken"]["alternative"] == "ras.count_pixels_alt"
    recorder = SessionRecorder.for_task(tmp_path / "run", variant.task, agent="probe")
    server = build_server(variant.task, recorder=recorder)
    out = {}

    async def main():
        async with Client(server) as client:
            out["tools"] = (await client.list_tools()).tools
            seg = await client.call_tool("seg_building_damage", {"pre_image_path": PRE, "post_image_path": POST})
            mask = obs_of(seg)["mask_path"]
            out["first"] = await client.call_tool("ras_count_pixels", {"mask_path": mask, "classes": [2, 3]})
            out["again"] = await client.call_tool("ras_count_pixels", {"mask_path": mask, "classes": [2, 3]})
            out["alt"] = await client.call_tool("ras_count_pixels_alt", {"mask_path": mask, "classes": [2, 3]})
            out["loop"] = await client.call_tool("tool_loop", {
                "calls": [{"call": "ras.count_pixels", "args": {"mask_path": mask, "classes": [2]}}],
                "loop_over": [{"i": 1}]})
            await client.call_tool(SUBMIT_TOOL, {"answer": GOLD_ANSWER})

    run_async(main)
    names = [t.name for t in out["tools"]]
    assert len(names) == len(all_tools()) + 2  # the alternative and the studio's submit tool
    # the alternative follows the broken tool, with its description and schema (retitled)
    assert names.index("ras_count_pixels_alt") == names.index("ras_count_pixels") + 1
    alt = next(t for t in out["tools"] if t.name == "ras_count_pixels_alt")
    assert alt.input_schema["required"] == ["mask_path", "classes"]
    assert alt.description.startswith(all_tools()["ras.count_pixels"].description)
    failed = broken_observation("ras.count_pixels", "ras.count_pixels: backend timed out")
    for key in ("first", "again"):  # every call fails, not only the first (a Retry does not recover)
        assert out[key].is_error and obs_of(out[key]) == failed
    # the alternative computes what the original computes: the hand-checked counts
    assert not out["alt"].is_error
    alt_obs = obs_of(out["alt"])
    assert alt_obs["counts"] == GT_COUNTS and alt_obs["total"] == 26766 and alt_obs["tool"] == "ras.count_pixels_alt"
    # nor can tool.loop step around it
    assert out["loop"].is_error and obs_of(out["loop"]) == failed
    rec = json.loads((tmp_path / "run" / "t1_perception_and_assessment" / "benchmark.jsonl").read_text())
    calls = [s["call"].split("(")[0] for s in rec["trajectory"]]
    assert calls == ["seg_building_damage", "ras_count_pixels", "ras_count_pixels", "ras_count_pixels_alt", "tool_loop"]
    assert rec["trajectory"][1]["obs"] == failed and rec["trajectory"][3]["obs"]["counts"] == GT_COUNTS


@pytest.mark.django_db
def test_broken_variant_gold_replay_still_computes_the_base_plan():
    from replay.services.runs import start_replay

    user, base = approved_task()
    variant, _ = create_variant(user, base, "broken", step=1)
    replay = start_replay(user, variant.task)
    # the replay engine runs the unchanged registry tools: the base task's gold answer
    assert replay.status == "succeeded", replay.error
    assert replay.final_answer == GOLD_ANSWER


@pytest.mark.django_db
def test_unsolvable_tool_removal_variant_does_not_list_the_removed_tool():
    user, base = approved_task()
    variant, _ = create_variant(user, base, "unsolvable", strategy="tool_removal")
    assert variant.tools["removed"] == ["ras.count_pixels"]  # the last tool step by default
    server = build_server(variant.task)
    out = {}

    async def main():
        async with Client(server) as client:
            out["tools"] = {t.name for t in (await client.list_tools()).tools}
            out["call"] = await client.call_tool("ras_count_pixels", {"mask_path": "x.png", "classes": [2]})
            out["loop"] = await client.call_tool("tool_loop", {
                "calls": [{"call": "ras_count_pixels", "args": {"mask_path": "x.png", "classes": [2]}}],
                "loop_over": [{"i": 1}]})

    run_async(main)
    assert out["tools"] == {s.alias for s in all_tools().values()} - {"ras_count_pixels"}
    assert out["call"].is_error and "ras_count_pixels" in out["call"].content[0].text
    assert out["loop"].is_error and "unknown tool" in out["loop"].content[0].text


@pytest.mark.django_db(transaction=True)
def test_mcp_serve_over_stdio_serves_the_variant_tool_set(tmp_path):
    user, base = approved_task()
    removal, _ = create_variant(user, base, "unsolvable", strategy="tool_removal")
    env = subprocess_env(tmp_path)
    params = StdioServerParameters(
        command=sys.executable, cwd=str(REPO), env=env,
        args=[str(REPO / "manage.py"), "mcp_serve", "--task", removal.task.question_id],
    )
    out = {}

    async def main():
        with anyio.fail_after(60):
            async with Client(params) as client:
                out["tools"] = {t.name for t in (await client.list_tools()).tools}
                out["div"] = await client.call_tool("calc_div", {"a": 3, "b": 4})

    run_async(main)
    assert "ras_count_pixels" not in out["tools"] and len(out["tools"]) == len(all_tools()) - 1
    assert obs_of(out["div"])["ratio"] == 0.75  # 3 / 4, the other tools answer as ever
