"""Judge prompts for the planning benchmark's five settings (versioned templates), checked for
what each must show the judge (the paper's definitions of each setting) and for an output example
that parse_verdict reads in that setting."""
from __future__ import annotations

import hashlib
import json
import re

import pytest

from evaluation.judge.prompts import (
    PromptTemplateError,
    load_template,
    prompt_fingerprint,
    render_error_definitions,
    render_grade_rubric,
    render_holistic_prompt,
    render_prompt,
    render_stepwise_prompt,
)
from evaluation.judge.verdict import parse_verdict

TOOLS = [{"name": "seg.flood", "params": [{"name": "image", "type": "str", "required": True}]},
         {"name": "seg.flood_v2", "params": [{"name": "image", "type": "str", "required": True}]},
         {"name": "ras.area", "params": [{"name": "mask_path", "type": "str", "required": True}]},
         {"name": "gen.crop_yield", "description": "Crop yield forecast."}]
GOLD = [{"call": "seg.flood", "args": {"image": "post.tif"}, "obs": {"mask_path": "/m.tif"}},
        {"call": "ras.area", "args": {"mask_path": "<mask_path> from trajectory[0].obs"}, "obs": {"area_m2": 900}}]
CASE = {
    "query": "How many square metres are flooded?", "tools": TOOLS,
    "gold_trajectory": GOLD, "predicted_trajectory": GOLD, "predicted_answer": {"area_m2": 900},
    "prefix_trajectory": GOLD[:1], "reference_steps": GOLD[1:], "predicted_steps": [{"call": "ras.area", "args": {}}],
    "distractors": ["gen.crop_yield"],
    "failing_step_index": 0, "replacement_tool": TOOLS[1],
    "unsolvable_type": "visual_information_inaccessible", "unsolvable_detail": "the post-event scene was removed",
}


def test_holistic_v2_names_e2_by_regime_and_v1_is_unchanged():
    text, version = render_holistic_prompt(CASE["query"], TOOLS, GOLD, GOLD, None)
    assert version == "holistic_v2"
    assert "**E2 Task incompleteness** (E2-H)" in text and "E2_PREMATURE_CONCLUSION" not in text
    old, v1 = render_holistic_prompt(CASE["query"], TOOLS, GOLD, GOLD, None, version="holistic_v1")
    assert v1 == "holistic_v1" and "(`E2_PREMATURE_CONCLUSION`)" in old  # a released template keeps its text
    # and its cache fingerprint: the template text plus the blocks it embedded then
    h = hashlib.sha256()
    for part in (load_template("holistic_v1").text, render_error_definitions(), render_grade_rubric("holistic"),
                 render_grade_rubric("stepwise")):
        h.update(part.encode("utf-8"))
    assert prompt_fingerprint("holistic_v1") == h.hexdigest()[:16]
    assert prompt_fingerprint("holistic_v2") != prompt_fingerprint("holistic_v1")


def test_stepwise_gold_prefix_and_blind():
    text, version = render_prompt("step-wise", CASE)
    assert version == "stepwise_v2"
    assert "expert's trajectory up to step 0" in text and "**E2 Premature conclusion** (E2-S)" in text
    assert "Reference next step(s)" in text and "[1] call: ras.area" in text
    blind, bversion = render_prompt("step-wise", CASE, blind=True)
    assert bversion == "stepwise_blind_v1" and "Reference next step(s)" not in blind
    # the studio's own-cut prompt stays stepwise_v1
    assert render_stepwise_prompt(CASE["query"], TOOLS, GOLD[:1], GOLD[1:], [])[1] == "stepwise_v1"


def test_extraneous_receives_the_distractor_list():
    text, version = render_prompt("tool-extraneous", CASE)
    assert version == "tool_extraneous_v1"
    section = text.split("### Distractor tools (not needed for this task)\n", 1)[1].split("###", 1)[0]
    assert section.strip() == "- gen.crop_yield"
    text2, version2 = render_prompt("tool-extraneous", CASE, regime="step-wise")
    assert version2 == "tool_extraneous_stepwise_v1" and "- gen.crop_yield" in text2 and "steps 0 to 0" in text2
    with pytest.raises(PromptTemplateError, match="distractor list is empty"):
        render_prompt("tool-extraneous", {**CASE, "distractors": []})


def test_tool_broken_receives_failing_step_and_replacement():
    text, version = render_prompt("tool-broken", CASE)
    assert version == "tool_broken_v1"
    assert "step 0 called `seg.flood` and got an error" in text
    assert "`seg.flood_v2`" in text and "### The failing step\n[0] call: seg.flood" in text
    with pytest.raises(PromptTemplateError, match="outside the prefix"):
        render_prompt("tool-broken", {**CASE, "failing_step_index": 3})


def test_unsolvable_receives_the_type():
    text, version = render_prompt("unsolvable", CASE)
    assert version == "unsolvable_v1"
    assert "Type: visual_information_inaccessible (missing imagery). the post-event scene was removed" in text
    assert "the imagery the task needs" in text
    with pytest.raises(PromptTemplateError, match="not one of"):
        render_prompt("unsolvable", {**CASE, "unsolvable_type": "cloudy"})


def test_dispatcher_names_missing_inputs():
    with pytest.raises(PromptTemplateError, match="lacks replacement_tool"):
        render_prompt("tool-broken", {k: v for k, v in CASE.items() if k != "replacement_tool"})
    with pytest.raises(PromptTemplateError, match="no blind prompt"):
        render_prompt("unsolvable", CASE, blind=True)


@pytest.mark.parametrize("setting, regime, blind", [
    ("holistic", None, False), ("holistic", None, True), ("step-wise", None, False), ("step-wise", None, True),
    ("tool-extraneous", "holistic", False), ("tool-extraneous", "step-wise", False),
    ("tool-broken", None, False), ("unsolvable", None, False),
])
def test_each_prompts_output_example_is_read_in_its_setting(setting, regime, blind):
    text, version = render_prompt(setting, CASE, regime=regime, blind=blind)
    assert "{{" not in text, version
    example = re.findall(r"^\{.*\}$", text.split("## Output", 1)[1], flags=re.M)
    assert len(example) == 1, version
    v = parse_verdict(example[0], setting=setting, regime=regime)
    assert v.setting == setting
    json.loads(example[0])
