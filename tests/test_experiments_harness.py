"""The benchmark's harness as the experiments reproduce it (experiments/harness.py): the prompt of
each protocol, the answer and trajectory readings, argument normalisation and IF's tool filter.
Expected values are worked out by hand from the harness's documented behaviour (Junjue-Wang/DORA
``dora/agent/prompts.py``, ``runner.py``, ``mcp_tools.py``, ``dora/benchmark.py``)."""
from __future__ import annotations

import json

from experiments import harness

SAMPLE = {
    "sample_id": "florence_01", "disaster_type": "hurricane",
    "input_data": {"pre_image": "xbd/pre.png", "post_image": "xbd/post.png", "gsd_m": 0.5},
    "classes": {"roads": {"10": "intact", "11": "flooded", "12": "blocked"}},
    "tasks": [{
        "question": "How many damaged pixels?", "task_category": "perception_and_assessment",
        "task_category_code": "T1",
        "eval_spec": {"damaged_pixels": "scalar_count", "flood_pct": "ratio_pct", "note": "ignore"},
        "answer_format": {"damaged_pixels": "total over classes 2 and 3"},
        "tools": [{"call": "seg.building_damage(pre_image_path, post_image_path)"}],
        "trajectory": [
            {"call": "seg.building_damage(pre_image_path, post_image_path)", "args": {}},
            {"call": "tool.loop(calls)", "args": {"calls": [{"call": "ras.count_pixels(mask_path)"}]}},
        ],
    }],
}


def test_questions_are_built_per_sample_task_with_the_harness_ids_and_context():
    (q,) = harness.questions_from_samples([SAMPLE], "/dora/images")
    assert q["question_id"] == "florence_01_task0"
    assert q["task_scoped_question_id"] == "perception_and_assessment::florence_01_task0"
    assert q["input_data"]["pre_image"] == "/dora/images/xbd/pre.png" and q["input_data"]["gsd_m"] == 0.5
    ctx = q["context"]
    # the harness's frame: 12 spaces before each line of the frame, the JSON indented by 2
    assert ctx.startswith("\n            Sample Metadata:\n            {\n  \"sample_id\": \"florence_01\"")
    assert '"roads": {\n      "1": "intact",\n      "2": "flooded",\n      "3": "blocked"' in ctx
    assert "Road segmentation tool outputs classes 1/2/3 (intact/flooded/blocked)." in ctx
    assert '"tasks"' not in ctx


def test_the_if_prompt_adds_the_gold_tool_names_in_order_and_ap_does_not():
    (q,) = harness.questions_from_samples([SAMPLE], "/dora/images")
    ap, if_ = harness.build_prompt(q, "AP"), harness.build_prompt(q, "IF")
    assert ap.startswith("You are a disaster-response geospatial analyst.")
    assert "RECOMMENDED TOOL SEQUENCE" not in ap
    assert ("\nRECOMMENDED TOOL SEQUENCE (a plan to guide you; you may expand, split, or adapt steps as needed \u2014 "
            "bind arguments yourself):\n  Step 1: seg_building_damage\n  Step 2: tool_loop\n\nGUIDELINES:") in if_
    seq = if_[if_.index("RECOMMENDED"):if_.index("tool_loop") + len("tool_loop")]
    assert if_.replace("\n" + seq + "\n", "", 1) == ap  # IF = AP with the sequence block after the header
    tail = ap[ap.index("\n\nQuestion: "):]
    # question, blank line, context, blank line, the answer fields (the ignored field left out)
    assert tail.startswith("\n\nQuestion: How many damaged pixels?\n\n\n            Sample Metadata:")
    assert tail.endswith(
        'ANSWER_FIELDS (your <Answer> must be a JSON object with exactly these keys):\n'
        '  - "damaged_pixels": integer; total over classes 2 and 3\n'
        '  - "flood_pct": float in [0, 100] (e.g., 55.0 means 55%)')


def test_if_offers_the_gold_tools_including_calls_nested_in_a_loop():
    (q,) = harness.questions_from_samples([SAMPLE], "/dora/images")
    assert harness.required_tool_names(q) == {"seg.building_damage", "tool.loop", "ras.count_pixels"}


def test_arguments_sent_as_json_text_are_normalised_recursively():
    args = {"classes": "[2, 3]", "opts": ' {"a": "[1]"} ', "path": "mask.png", "bad": "[1, 2", "n": 3}
    assert harness.normalize_arguments(args) == {"classes": [2, 3], "opts": {"a": [1]}, "path": "mask.png",
                                                 "bad": "[1, 2", "n": 3}


def test_the_answer_is_the_newest_answer_tag_else_the_newest_text():
    assert harness.extract_answer(["<Answer>{\"a\": 1}</Answer>", "thinking"]) == {"a": 1}  # newest with tags wins
    assert harness.extract_answer(["x", "see <Answer>not json</Answer>"]) == "not json"
    assert harness.extract_answer(["first", "", "result: {\"b\": 2} done"]) == {"b": 2}
    assert harness.extract_answer(["plain words", ""]) == "plain words"
    assert harness.extract_answer(["", ""]) == harness.NO_ANSWER == "No answer found"


def test_observations_and_calls_are_written_as_the_harness_writes_them():
    assert harness.normalize_observation('{"total": 5}') == {"total": 5}
    assert harness.normalize_observation("Error: ToolException('x')") == {"raw_output": "Error: ToolException('x')"}
    assert harness.call_text("ras_count_pixels", {"mask_path": "m", "classes": [2]}) == "ras_count_pixels(mask_path, classes)"
    assert harness.call_text("vis_legend", {}) == "vis_legend()"


def test_steps_left_follow_langgraphs_remaining_steps():
    # recursion limit 50: model call k (from 0) runs at super-step 2k; the 25th call (k = 24) still
    # has 2 steps left and may use tools, the 26th (k = 25) has 0 and ends the question
    assert harness.steps_left(24, 50) == 2 and harness.steps_left(25, 50) == 0


def test_a_record_and_its_files_carry_the_runner_fields():
    (q,) = harness.questions_from_samples([SAMPLE], "/dora/images")
    rec = harness.record_of(q, predicted_answer={"damaged_pixels": 3}, error=None, trajectory=[], elapsed_time=1.5,
                            timestamp="2026-12-05T17:00:00")
    assert list(rec) == ["question_id", "task_scoped_question_id", "task_category", "task_category_code", "sample_id",
                         "worker_id", "question", "predicted_answer", "error", "trajectory", "elapsed_time", "timestamp"]
    assert harness.trajectory_file_name(rec) == "perception_and_assessment__florence_01_task0_trajectory.json"
    doc = harness.trajectory_document(rec)
    assert "predicted_answer" not in doc and doc["final_answer"] == {"damaged_pixels": 3}
    err = dict(rec, predicted_answer="Error: x", error="x", elapsed_time=2.5)
    stats = harness.run_stats([rec, err], "t")
    assert stats == {"total": 2, "success": 1, "failed": 1, "avg_time": 2.0, "timestamp": "t"}
    json.dumps(stats)
