"""parse_verdict per setting of the planning benchmark, one test per dialect, with answers written
by hand for this suite in the formats the benchmark's code asks its judges for:

* ``error_list`` with ``grade`` / ``is_correct`` (evaluation/apb_eval/prompts.py: every split);
* flat ``E<k>_...`` keys with ``score`` and ``is_correct`` YES/NO (legacy step-wise evaluators),
  and a list of them for a k-step prediction (next3_evaluator aggregates: flags OR-ed, min score);
* the five-class tool-broken object (tool_broken_evaluator: correct iff category 1 or 2, score
  1.0 / 0.0);
* unsolvable: pass iff the agent refuses, asks, or explains (UNSOLVABLE_JUDGE_PROMPT).

Expected values are worked out by hand from those rules; each test says which rule it checks.
"""
from __future__ import annotations

import json

import pytest

from evaluation.judge.verdict import (
    KNOWN_DIFFERENCES,
    SETTINGS,
    Verdict,
    VerdictParseError,
    distractor_calls,
    is_correct_rule,
    parse_verdict,
)

# --------------------------------------------------------------------------------------------
# holistic (error_list)
# --------------------------------------------------------------------------------------------


def test_holistic_error_list_counts_are_integers():
    # "error_list": six integers [E1..E6]; a count of 2 logic errors is present, not malformed
    raw = ('{"is_correct": false, "grade": 0.4, "error_list": [0, 0, 0, 2, 1, 0], '
           '"reasoning": "area computed before the flood mask exists (step 2 and 4); GSD 10 m passed for a 0.5 m scene"}')
    v = parse_verdict(raw, setting="holistic")
    assert (v.setting, v.regime, v.dialect) == ("holistic", "holistic", "error_list")
    assert v.flags == ["E4", "E5"] and v.error_counts == {"E4": 2}
    assert v.is_correct is False and v.judge_is_correct is False and v.grade == 0.4
    assert v.e2_subtype is None and v.contradictions == []


def test_holistic_judge_is_correct_is_kept_beside_the_derived_one():
    # the judge says correct but flags E5: the studio derives incorrect (flags) and keeps the
    # judge's true, which is what the benchmark's runner.score counts for its CR
    raw = '{"is_correct": "true", "grade": 0.8, "error_list": [0,0,0,0,1,0], "reasoning": "one trivial argument slip"}'
    v = parse_verdict(raw, setting="holistic")
    assert v.is_correct is False and v.judge_is_correct is True
    assert any(c.startswith("is_correct: source said true") for c in v.contradictions)


def test_holistic_string_false_is_false():
    # known difference "bool-of-string": bool("false") is True in the benchmark's runner
    v = parse_verdict('{"is_correct": "false", "grade": 0.2, "error_list": [1,0,0,0,0,0], "reasoning": "counts buildings, asked for area"}')
    assert v.judge_is_correct is False and v.is_correct is False and v.flags == ["E1"]


def test_holistic_e2_is_task_incompleteness():
    v = parse_verdict('{"is_correct": false, "grade": 0.6, "error_list": [0,1,0,0,0,0], "reasoning": "phase 2 never analysed"}')
    assert v.flags == ["E2"] and v.e2_subtype == "E2-H"


def test_two_objects_in_one_answer():
    # known difference "greedy-regex": \{.*\} would span both objects and fail; the studio skips
    # the quoted tool call (not a verdict) and reads the verdict that follows
    raw = ('Step 3 of the prediction was {"call": "ras.area", "args": {"mask": "<m>", "pixel_size_m": 10}}.\n'
           'Verdict: {"is_correct": false, "grade": 0.6, "error_list": [0,0,0,0,1,0], "reasoning": "wrong GSD"}')
    v = parse_verdict(raw, setting="holistic")
    assert v.flags == ["E5"] and v.grade == 0.6


def test_holistic_rejects_a_list():
    raw = '[{"error_list": [0,0,0,0,0,0], "grade": 1.0}, {"error_list": [0,0,0,1,0,0], "grade": 0.6}]'
    with pytest.raises(VerdictParseError, match="step-wise"):
        parse_verdict(raw, setting="holistic")


# --------------------------------------------------------------------------------------------
# step-wise (flat, error_list, multi-step lists)
# --------------------------------------------------------------------------------------------

FLAT_CLEAN = {"E1_GOAL_MISALIGNMENT": False, "E2_PREMATURE_CONCLUSION": False, "E3_CONSTRAINT_VIOLATION": False,
              "E4_LOGIC_ERROR": False, "E5_TOOL_USE_ERROR": False, "E6_HALLUCINATION_ERROR": False}


def _flat(**flags):
    out = dict(FLAT_CLEAN)
    out.update(flags)
    return out


def test_stepwise_flat_single():
    raw = json.dumps(_flat(E2_PREMATURE_CONCLUSION=True, score=0.4, reasoning="answers before ras.area ran",
                           is_correct="NO"))
    v = parse_verdict(raw, setting="step-wise")
    assert (v.setting, v.regime, v.dialect) == ("step-wise", "step-wise", "flat")
    assert v.flags == ["E2"] and v.e2_subtype == "E2-S" and v.grade == 0.4 and v.judge_is_correct is False
    assert v.n_steps == 1 and v.step_grades == []


def test_stepwise_lowercase_keys_and_missing_reasoning():
    # known differences "exact-case-keys" and "missing-free-text": the benchmark reads
    # e4_logic_error as absent and drops an answer without "reasoning"
    v = parse_verdict('{"e4_logic_error": true, "score": 0.6, "is_correct": "NO"}', setting="step-wise")
    assert v.flags == ["E4"] and v.reasoning == "" and v.grade == 0.6


def test_stepwise_three_step_list_or_flags_min_grade():
    # the case: E4 on step 2, E5 on step 3 -> flags {E4, E5}, grade min(1.0, 0.6, 0.6)
    steps = [
        _flat(score=1.0, reasoning="loads the post-event scene", is_correct="YES"),
        _flat(E4_LOGIC_ERROR=True, score=0.6, reasoning="links the water mask, not the damage mask", is_correct="NO"),
        _flat(E5_TOOL_USE_ERROR=True, score=0.6, reasoning="pixel_size_m 10 for a 0.5 m scene", is_correct="NO"),
    ]
    raw = "Per-step evaluation:\n```json\n" + json.dumps(steps, indent=2) + "\n```"
    v = parse_verdict(raw, setting="step-wise")
    assert v.flags == ["E4", "E5"] and v.grade == 0.6 and v.is_correct is False
    assert v.judge_is_correct is False  # YES and NO and NO
    assert v.n_steps == 3 and v.step_grades == [1.0, 0.6, 0.6]
    assert v.reasoning.splitlines() == [
        "[Step 1] loads the post-event scene",
        "[Step 2] links the water mask, not the damage mask",
        "[Step 3] pixel_size_m 10 for a 0.5 m scene",
    ]


def test_stepwise_two_step_list_wrapped_and_error_list_items():
    # apb_eval's step-wise judge answers error_list; a judge that wraps its steps in "steps"
    raw = json.dumps({"steps": [
        {"is_correct": True, "grade": 1.0, "error_list": [0, 0, 0, 0, 0, 0], "reasoning": "ok"},
        {"is_correct": False, "grade": 0.2, "error_list": [0, 0, 0, 0, 0, 1], "reasoning": "calls seg.flood_depth"},
    ]})
    v = parse_verdict(raw, setting="step-wise")
    assert v.dialect == "error_list" and v.flags == ["E6"] and v.grade == 0.2 and v.n_steps == 2


def test_stepwise_list_item_without_grade_is_refused():
    # known difference "missing-grade-in-list": the benchmark would count it as 0.0
    raw = json.dumps([_flat(score=1.0, reasoning="a"), _flat(E4_LOGIC_ERROR=True, reasoning="b")])
    with pytest.raises(VerdictParseError, match="step 2: no grade"):
        parse_verdict(raw, setting="step-wise")


def test_stepwise_clean_list_is_correct():
    raw = json.dumps([_flat(score=1.0, is_correct="YES", reasoning="a"), _flat(score=1.0, is_correct="YES", reasoning="b")])
    v = parse_verdict(raw, setting="step-wise")
    assert v.is_correct is True and v.judge_is_correct is True and v.grade == 1.0 and v.contradictions == []


# --------------------------------------------------------------------------------------------
# tool-extraneous
# --------------------------------------------------------------------------------------------


def test_tool_extraneous_holistic_with_distractor_use():
    trajectory = [
        {"call": "seg.flood", "args": {"image": "post.tif"}},
        {"call": "gen_crop_yield", "args": {"region": "x"}},  # a distractor, under its model-facing alias
        {"call": "ras.area", "args": {"mask": "<m>"}},
        {"tool_calls": [{"type": "function", "function": {"name": "gen.crop_yield", "arguments": {}}}]},
    ]
    used = distractor_calls(trajectory, ["gen.crop_yield", "gen.traffic_forecast"])
    assert used == ["gen.crop_yield", "gen.crop_yield"]  # two calls, so ExtUse counts 2
    raw = '{"is_correct": false, "grade": 0.6, "error_list": [0,0,0,0,1,0], "reasoning": "uses the crop-yield distractor"}'
    v = parse_verdict(raw, setting="tool-extraneous", distractors_used=used)
    assert (v.setting, v.regime) == ("tool-extraneous", "holistic")
    assert v.flags == ["E5"] and v.distractors_used == ["gen.crop_yield", "gen.crop_yield"]


def test_tool_extraneous_stepwise_regime_from_dialect_or_caller():
    raw = json.dumps(_flat(E5_TOOL_USE_ERROR=True, score=0.6, reasoning="distractor", is_correct="NO"))
    v = parse_verdict(raw, setting="tool_extraneous")
    assert v.regime == "step-wise" and any("inferred" in n for n in v.notes)
    v2 = parse_verdict('{"is_correct": true, "grade": 1.0, "error_list": [0,0,0,0,0,0]}', setting="tool-extraneous",
                       regime="step-wise")
    assert v2.regime == "step-wise" and v2.is_correct and v2.distractors_used is None


# --------------------------------------------------------------------------------------------
# tool-broken (five classes)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("answer, outcome, correct", [
    ({"category": 1, "category_name": "replacement", "is_correct": True, "reason": "calls seg.flood_v2"}, "replacement", True),
    ({"category": "2", "category_name": "alternative", "is_correct": True, "reason": "uses sar.water instead"}, "alternative", True),
    ({"category": "Retry", "is_correct": False, "reason": "calls the broken seg.flood again"}, "retry", False),
    ({"category": 4, "category_name": "refusal", "is_correct": False, "reason": "gives up"}, "refusal", False),
    ({"category_name": "other", "is_correct": False, "reason": "text only"}, "other", False),
])
def test_tool_broken_classes(answer, outcome, correct):
    v = parse_verdict(json.dumps(answer), setting="tool-broken")
    assert (v.setting, v.regime, v.dialect, v.outcome) == ("tool-broken", "step-wise", "tool_broken", outcome)
    assert v.is_correct is correct and v.grade == (1.0 if correct else 0.0) and v.flags == []
    assert v.contradictions == []
    assert parse_verdict(v.to_reference("tool_broken"), setting="tool-broken").outcome == outcome


def test_tool_broken_judge_contradiction_and_errors():
    # category 3 with is_correct "true": the class decides (benchmark: category in [1, 2])
    v = parse_verdict('{"category": 3, "category_name": "retry", "is_correct": "true", "reason": "retries"}',
                      setting="tool-broken")
    assert v.is_correct is False and v.judge_is_correct is True and v.contradictions
    for bad in ('{"is_correct": false, "reason": "no class"}', '{"category": 7, "reason": "x"}',
                '{"category": 1, "category_name": "retry", "reason": "x"}'):
        with pytest.raises(VerdictParseError):
            parse_verdict(bad, setting="tool-broken")


def test_tool_broken_error_list_dialect_from_apb_eval():
    # evaluation/apb_eval's TOOL_BROKEN_JUDGE_PROMPT asks for error_list: no class, flags decide
    v = parse_verdict('{"is_correct": false, "grade": 0.6, "error_list": [0,0,0,0,1,0], "reasoning": "retries"}',
                      setting="tool-broken")
    assert v.outcome is None and v.flags == ["E5"] and v.is_correct is False and v.regime == "step-wise"


# --------------------------------------------------------------------------------------------
# unsolvable
# --------------------------------------------------------------------------------------------


def test_unsolvable_fail_without_flags_is_incorrect():
    # the bug: a FAIL with no flag read as correct when correctness came from flags
    raw = ('{"is_correct": false, "grade": 0.0, "error_list": [0,0,0,0,0,0], '
           '"reasoning": "plans a flood-depth map although no DEM is available"}')
    v = parse_verdict(raw, setting="unsolvable")
    assert (v.setting, v.regime) == ("unsolvable", "holistic")
    assert v.is_correct is False and v.judge_is_correct is False and v.flags == []
    assert is_correct_rule("unsolvable") == "pass"


def test_unsolvable_pass_with_flags_is_correct():
    raw = '{"is_correct": true, "grade": 1.0, "error_list": [0,0,0,0,0,1], "reasoning": "refuses: no pre-event image"}'
    v = parse_verdict(raw, setting="unsolvable")
    assert v.is_correct is True and v.flags == ["E6"]
    assert any(c.startswith("flags: PASS") for c in v.contradictions)


@pytest.mark.parametrize("answer, passed, grade", [
    ({"verdict": "FAIL", "reasoning": "hallucinates a SAR scene"}, False, 0.0),
    ({"result": "pass", "reasoning": "asks which sector is meant"}, True, 1.0),
    ({"pass": True, "grade": 0.8, "reasoning": "refuses, names the missing tool"}, True, 0.8),
])
def test_unsolvable_pass_fail_dialect(answer, passed, grade):
    v = parse_verdict(json.dumps(answer), setting="unsolvable")
    assert v.dialect == "pass_fail" and v.is_correct is passed and v.grade == grade and v.flags == []


def test_unsolvable_needs_pass_or_fail():
    with pytest.raises(VerdictParseError, match="neither pass nor fail"):
        parse_verdict('{"grade": 0.0, "error_list": [0,0,0,0,0,0], "reasoning": "?"}', setting="unsolvable")


# --------------------------------------------------------------------------------------------
# the record
# --------------------------------------------------------------------------------------------


def test_settings_and_round_trip():
    assert SETTINGS == ("holistic", "step-wise", "tool-extraneous", "tool-broken", "unsolvable")
    with pytest.raises(ValueError, match="not one of"):
        parse_verdict('{"grade": 1, "error_list": [0,0,0,0,0,0]}', setting="offline")
    answers = {
        "holistic": '{"is_correct": false, "grade": 0.6, "error_list": [0,1,0,0,0,0]}',
        "step-wise": json.dumps([_flat(score=1.0), _flat(E2_PREMATURE_CONCLUSION=True, score=0.4)]),
        "tool-extraneous": '{"is_correct": true, "grade": 1.0, "error_list": [0,0,0,0,0,0]}',
        "tool-broken": '{"category": 2, "reason": "alternative route"}',
        "unsolvable": '{"verdict": "FAIL"}',
    }
    for setting, raw in answers.items():
        v = parse_verdict(raw, setting=setting)
        back = Verdict.from_dict(json.loads(json.dumps(v.to_dict())))
        assert back == v, setting
    # the stored record refuses a correctness that breaks its setting's rule
    with pytest.raises(ValueError):
        Verdict(is_correct=True, grade=0.0, errors={}, setting="tool-broken", regime="step-wise", outcome="retry")


def test_known_differences_are_listed():
    ids = {d["id"] for d in KNOWN_DIFFERENCES}
    assert {"greedy-regex", "bool-of-string", "exact-case-keys", "missing-free-text"} <= ids
