"""Verdict record and parser: both reference dialects, the studio dialect, lenient extraction."""
from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from evaluation.judge import (
    E_CODES,
    E_DEFINITIONS,
    FLAT_KEYS,
    GRADES,
    Verdict,
    VerdictParseError,
    grade_from_flags,
    parse_verdict,
    snap_grade,
)
from evaluation.judge.verdict import extract_json_object
from kernel.taxonomy import E_NAMES


def test_error_list_dialect():
    v = parse_verdict('{"is_correct": false, "grade": 0.4, "error_list": [0, 1, 0, 1, 0, 0], "reasoning": "misses the route"}')
    assert v.dialect == "error_list"
    assert v.flags == ["E2", "E4"] and v.error_list == [0, 1, 0, 1, 0, 0]
    assert v.grade == 0.4 and v.is_correct is False and v.model_is_correct is False
    assert v.reasoning == "misses the route" and v.contradictions == [] and v.notes == []


def test_flat_dialect_with_yes_no_and_missing_keys():
    text = json.dumps({
        "E1_GOAL_MISALIGNMENT": False, "E2_PREMATURE_CONCLUSION": False, "E3_CONSTRAINT_VIOLATION": False,
        "E4_LOGIC_ERROR": False, "E5_TOOL_USE_ERROR": True, "E6_HALLUCINATION_ERROR": False,
        "score": 0.6, "reasoning": "wrong GSD", "is_correct": "NO",
    })
    v = parse_verdict(text)
    assert v.dialect == "flat" and v.flags == ["E5"] and v.grade == 0.6 and not v.is_correct
    assert v.contradictions == []
    # keys the reference code reads with .get(..., False): absent means false
    v2 = parse_verdict('{"E6_HALLUCINATION_ERROR": true, "score": 0.2, "is_correct": "NO", "reasoning": "x"}')
    assert v2.flags == ["E6"]
    # other spellings used in the reference code base
    v3 = parse_verdict('{"E1_GOAL_UNDERSTANDING": 0, "E2_TASK_COMPLETENESS": 1, "E4_LOGICAL_DEFECT": 0, "grade": "0.4"}')
    assert v3.flags == ["E2"] and v3.grade == 0.4


def test_exact_flat_keys_roundtrip():
    assert list(FLAT_KEYS.values()) == [
        "E1_GOAL_MISALIGNMENT", "E2_PREMATURE_CONCLUSION", "E3_CONSTRAINT_VIOLATION",
        "E4_LOGIC_ERROR", "E5_TOOL_USE_ERROR", "E6_HALLUCINATION_ERROR",
    ]
    v = Verdict.build({"E3"}, 0.2, reasoning="r")
    assert parse_verdict(v.to_reference("flat")).flags == ["E3"]
    assert parse_verdict(json.dumps(v.to_reference("error_list"))).error_list == [0, 0, 1, 0, 0, 0]


def test_studio_dialect_with_reasons():
    obj = {"errors": {c: {"present": c in ("E4", "E5"), "reason": f"step 2: {c}" if c in ("E4", "E5") else ""} for c in E_CODES},
           "grade": 0.4, "is_correct": False, "reasoning": "two minor errors"}
    v = parse_verdict(json.dumps(obj))
    assert v.dialect == "studio" and v.flags == ["E4", "E5"]
    assert v.reasons == {"E4": "step 2: E4", "E5": "step 2: E5"}
    # bools directly, and a list of codes, are accepted too
    assert parse_verdict('{"errors": {"E1": true}, "grade": 0.2}').flags == ["E1"]
    assert parse_verdict('{"errors": ["E6", "E5 tool misuse"], "grade": 0.0}').flags == ["E5", "E6"]
    # an already-decoded mapping
    assert parse_verdict(obj).flags == ["E4", "E5"]


def test_fenced_and_prose_wrapped():
    text = (
        "Let me think. The plan uses {curly} words in prose.\n\n"
        "```json\n{\n  \"is_correct\": true,\n  \"grade\": 1.0,\n  \"error_list\": [0,0,0,0,0,0],\n"
        "  \"reasoning\": \"braces in strings } { are fine\"\n}\n```\nHope this helps!"
    )
    v = parse_verdict(text)
    assert v.is_correct and v.grade == 1.0 and v.reasoning.startswith("braces in strings")
    # no fence, prose around the object, nested object inside
    text2 = 'Verdict follows: {"errors": {"E2": {"present": true, "reason": "no {route}"}}, "grade": 0.4, "reasoning": "x"} -- end'
    assert parse_verdict(text2).reasons == {"E2": "no {route}"}
    # reasoning-model think block and Python literals / trailing comma
    text3 = "<think>maybe {not json}</think>{'x': 1}\n{\"error_list\": [0,0,0,0,1,0], \"grade\": 0.6, \"is_correct\": False,}"
    v3 = parse_verdict(text3)
    assert v3.flags == ["E5"]


def test_contradictions_are_recorded_not_applied():
    v = parse_verdict('{"is_correct": true, "grade": 0.6, "error_list": [0,0,0,1,0,0], "reasoning": "x"}')
    assert v.is_correct is False and v.flags == ["E4"] and v.model_is_correct is True
    assert v.has_contradiction and v.contradictions[0].startswith("is_correct")
    # grade 1.0 with a flag: flagged, grade kept
    v2 = parse_verdict('{"is_correct": false, "grade": 1.0, "error_list": [0,0,0,0,1,0]}')
    assert v2.grade == 1.0 and any(c.startswith("grade") for c in v2.contradictions)
    # grade below 1 with no flag
    v3 = parse_verdict('{"is_correct": true, "grade": 0.8, "error_list": [0,0,0,0,0,0]}')
    assert v3.is_correct and v3.grade == 0.8 and any(c.startswith("grade") for c in v3.contradictions)
    # two flag fields that disagree: union kept
    v4 = parse_verdict('{"error_list": [1,0,0,0,0,0], "E4_LOGIC_ERROR": true, "grade": 0.2}')
    assert v4.flags == ["E1", "E4"] and any(c.startswith("flags") for c in v4.contradictions)


def test_grade_snapping_and_validation():
    assert snap_grade(0.75) == 0.8 and snap_grade("0.61") == 0.6 and snap_grade("80%") == 0.8 and snap_grade(1) == 1.0
    assert snap_grade(0.7) == 0.6  # exact tie goes down
    v = parse_verdict('{"grade": 0.85, "error_list": [0,0,0,0,1,0]}')
    assert v.grade == 0.8 and any("snapped" in n for n in v.notes)
    for bad in ('{"grade": 1.5, "error_list": [0,0,0,0,0,0]}', '{"grade": "high", "error_list": [0,0,0,0,0,0]}',
                '{"grade": -0.2, "error_list": [0,0,0,0,0,0]}'):
        with pytest.raises(VerdictParseError):
            parse_verdict(bad)
    with pytest.raises(ValidationError):
        Verdict(is_correct=False, grade=0.5, errors={"E1": True})


@pytest.mark.parametrize("text, why", [
    ("", "empty"),
    ("The plan looks fine to me.", "no JSON"),
    ('{"is_correct": true, "reasoning": "no flags, no grade"}', "no flags"),
    ('{"error_list": [0,0,0,0,0,0], "reasoning": "no grade"}', "no grade"),
    ('{"error_list": [0,0,1], "grade": 0.2}', "short list"),
    # the benchmark asks for six integers (a count of 2 is read as present, see
    # test_judge_settings.py); a negative or fractional count is not a count
    ('{"error_list": [0,0,0,0,-1,0], "grade": 0.2}', "negative count"),
    ('{"error_list": [0,0,0,0,0.5,0], "grade": 0.2}', "fractional count"),
    ('{"E4_LOGIC_ERROR": "maybe", "score": 0.6}', "not a bool"),
    ('```json\n{"grade": 0.4, "error_list": [0,1,0,0,0,0]\n```', "truncated"),
])
def test_parse_errors_keep_raw_text(text, why):
    with pytest.raises(VerdictParseError) as ei:
        parse_verdict(text)
    assert ei.value.raw_text == text, why
    assert ei.value.reason


def test_verdict_record_invariants():
    v = Verdict(is_correct=True, grade=1.0, errors={})
    assert v.errors == {c: False for c in E_CODES} and v.flags == []
    v2 = Verdict(grade=0.6, errors={"E5": True}, reasons={"E5": "  missing band "})
    assert v2.is_correct is False and v2.reasons == {"E5": "missing band"}
    with pytest.raises(ValidationError):  # is_correct must follow the flags
        Verdict(is_correct=True, grade=0.6, errors={"E5": True})
    with pytest.raises(ValidationError):
        Verdict(grade=1.0, errors={"E7": True})
    assert Verdict.from_dict(v2.to_dict()) == v2


def test_definitions_and_rubric():
    assert list(E_DEFINITIONS) == list(E_CODES)
    for code, d in E_DEFINITIONS.items():
        assert d.code == code and d.flat_key == FLAT_KEYS[code] and d.definition
        assert d.name == E_NAMES[code]  # the one place the names live (kernel.taxonomy)
        assert d.tooltip().startswith(f"{code} {d.name}")
    text = " ".join(d.tooltip() for d in E_DEFINITIONS.values())
    for case in ("ras.compose_classes", "ras.threshold", "SAR", "GSD", "wrong upstream mask", "seg.landslide"):
        assert case in text
    assert "seg.landslide" in E_DEFINITIONS["E1"].tooltip() and "seg.landslide" in E_DEFINITIONS["E5"].tooltip()
    assert grade_from_flags({}) == 1.0
    assert grade_from_flags({"E5"}, trivial_e5=True) == 0.8
    assert grade_from_flags({"E4"}) == 0.6
    assert grade_from_flags({"E4", "E5"}) == 0.4 and grade_from_flags({"E5"}, {"E5": 2}) == 0.4
    assert grade_from_flags({"E2"}) == 0.4
    assert grade_from_flags({"E3"}) == 0.2 and grade_from_flags({"E6", "E4"}) == 0.2
    assert grade_from_flags({"E1", "E6"}) == 0.0
    assert set(GRADES) == {0.0, 0.2, 0.4, 0.6, 0.8, 1.0}


def test_extract_prefers_verdict_like_object():
    obj = extract_json_object('{"note": 1} then {"grade": 0.2, "error_list": [1,0,0,0,0,0]}')
    assert "grade" in obj


@pytest.mark.parametrize("value", [True, 0, 3.5])
def test_a_bare_scalar_is_no_verdict(value):
    # found by the property test of tests/test_properties.py (a boolean answer raised TypeError)
    from evaluation.judge.verdict import VerdictParseError, parse_verdict

    with pytest.raises(VerdictParseError, match="not a verdict"):
        parse_verdict(value)
