"""Versioned prompt templates and the holistic prompt renderer."""
from __future__ import annotations

import pytest

from evaluation.judge import E_CODES, render_holistic_prompt
from evaluation.judge.prompts import (
    PromptTemplateError,
    available_versions,
    latest_version,
    load_template,
    prompt_fingerprint,
    render_tools,
)

TOOLS = [
    {"name": "seg.flood", "alias": "seg_flood", "params": [
        {"name": "pre_image_path", "type": "str", "required": True},
        {"name": "post_image_path", "type": "str", "required": True},
        {"name": "threshold", "type": "float", "required": False}],
     "semantics": "Flood mask from a pre/post optical pair."},
    {"type": "function", "function": {"name": "ras_area", "description": "Area of a class.",
                                      "parameters": {"properties": {"mask_path": {"type": "string"}}, "required": ["mask_path"]}}},
    "poi.filter_by_damage",
]
GOLD = [
    {"call": "seg.flood", "args": {"pre_image_path": "pre.tif", "post_image_path": "post.tif"}, "obs": {"mask_path": "flood.tif"}},
    {"call": "ras.area", "args": {"mask_path": "<mask_path> from trajectory[0].obs"}, "obs": {"area_m2": 1200.5}},
]
PRED = [
    {"call": "seg_flood(pre_image_path, post_image_path)", "args": {"pre_image_path": "/d/pre.tif", "post_image_path": "/d/post.tif"},
     "obs": {"mask_path": "/tmp/f.tif", "geojson": "x" * 5000}},
]


def test_versions_on_disk():
    assert "holistic_v1" in available_versions("holistic")
    assert "holistic_blind_v1" in available_versions("holistic_blind")
    assert latest_version("holistic") == "holistic_v2"
    t = load_template("holistic_v1")
    assert t.kind == "holistic" and t.number == 1 and not t.text.startswith("<!--")
    assert {"query", "available_tools", "gold_trajectory", "predicted_trajectory", "predicted_answer"} <= t.placeholders
    with pytest.raises(PromptTemplateError):
        load_template("holistic_v999")
    with pytest.raises(PromptTemplateError):
        load_template("../etc/passwd")


def test_render_holistic():
    text, version = render_holistic_prompt("How large is the flooded area in m2?", TOOLS, GOLD, PRED, {"flooded_area_m2": 1200})
    assert version == "holistic_v2"
    assert "{{" not in text
    assert "How large is the flooded area in m2?" in text
    assert "- seg.flood(pre_image_path: str, post_image_path: str, threshold?: float) - Flood mask" in text
    assert "- ras_area(mask_path: string) - Area of a class." in text and "- poi.filter_by_damage" in text
    assert "<mask_path> from trajectory[0].obs" in text  # gold reference shown
    assert "[0] call: seg_flood(pre_image_path, post_image_path)" in text
    assert "truncated" in text and "x" * 2000 not in text  # long observation clipped
    assert '"flooded_area_m2": 1200' in text
    for code in E_CODES:
        assert f"**{code} " in text
    assert "ras.compose_classes" in text and "seg.landslide" in text
    assert '"errors": {"E1": {"present": false' in text
    # deterministic
    assert render_holistic_prompt("How large is the flooded area in m2?", TOOLS, GOLD, PRED, {"flooded_area_m2": 1200})[0] == text


def test_inserted_text_is_not_rescanned_and_empty_inputs():
    text, _ = render_holistic_prompt("what about {{gold_trajectory}}?", [], None, [], None, constraints="Answer in km2.")
    assert "what about {{gold_trajectory}}?" in text
    assert "(empty: no tool calls)" in text and "(no final answer)" in text and "(no tool list given)" in text
    assert "Answer in km2." in text


def test_blind_has_no_reference():
    text, version = render_holistic_prompt("q", TOOLS, GOLD, PRED, "42", blind=True)
    assert version == "holistic_blind_v2"
    assert "<mask_path> from trajectory[0].obs" not in text and "Reference trajectory" not in text


def test_fingerprint_stable():
    assert prompt_fingerprint("holistic_v1") == prompt_fingerprint("holistic_v1")
    assert prompt_fingerprint("holistic_v1") != prompt_fingerprint("holistic_blind_v1")
    assert render_tools([]) == "(no tool list given)"


def test_render_stepwise():
    from evaluation.judge import render_stepwise_prompt

    prefix = GOLD[:1]
    ref = GOLD[1:]
    pred = [{"call": "ras_area", "args": {"mask_path": "<mask_path> from trajectory[0].obs"}}]
    text, version = render_stepwise_prompt("Flooded area?", TOOLS, prefix, ref, pred)
    assert version == "stepwise_v1" and "{{" not in text
    assert "next 1 step(s)" in text and "steps 0 to 0" in text
    assert "[1] call: ras_area" in text and "[1] call: ras.area" in text  # numbered from the cut point
    assert "**0.4**: Two or more E4/E5, or one E2." in text
    assert "flood.tif" in text  # prefix observations shown
    raw_text, _ = render_stepwise_prompt("q", [], prefix, ref, "I would call ras_area next")
    assert "I would call ras_area next" in raw_text


def test_duck_typed_backend_reask():
    from evaluation.judge import judge_run
    from evaluation.judge.backends import JudgeResponse

    class Scripted:  # judge() only
        def __init__(self):
            self.prompts = []
            self.answers = ["nope", '{"error_list": [0,0,0,0,0,0], "grade": 1.0, "is_correct": true}']

        def judge(self, prompt):
            self.prompts.append(prompt)
            return JudgeResponse(self.answers.pop(0), 1, 1, 0.0, "s")

    b = Scripted()
    out = judge_run(b, "PROMPT")
    assert out.status == "ok" and len(b.prompts) == 2
    assert b.prompts[1].startswith("PROMPT") and "nope" in b.prompts[1] and "could not be read" in b.prompts[1]
