"""The ``apb`` reading of a judge's answer: the planning benchmark's own parse results
(``parse_verdict(raw, setting=..., reading="apb")``), beside the studio's.

Every expected value below is worked out by hand from the benchmark's code at 6d0ff248
(``evaluation/apb_eval/runner.py`` and ``legacy_reference/step_wise/online_planning/src/evaluators/``);
each case's ``decided_by`` names the lines that decide it (it is the case's docstring).  ``None``
for correctness or grade means the benchmark's code counts none for the answer; ``DROPPED`` means
it drops the answer (or its judge stage raises): a failed judgement.
"""
from __future__ import annotations

import json
from typing import Any, NamedTuple

import pytest

from evaluation.judge.verdict import (
    APB_PATHS,
    FLAT_KEYS,
    KNOWN_DIFFERENCES,
    READINGS,
    Verdict,
    VerdictParseError,
    normalize_reading,
    parse_verdict,
)

DROPPED = "dropped"
NO_FLAGS = {k: False for k in FLAT_KEYS.values()}


class Case(NamedTuple):
    name: str
    setting: str
    raw: Any
    expected: Any  # (path, is_correct, grade, flags, outcome) or DROPPED
    decided_by: str  # the benchmark's lines that decide it (the case's docstring)
    regime: str | None = None
    horizon: int | None = None


def _j(obj: Any) -> str:
    return json.dumps(obj)


#: The two dialects ../shared/spec/judge.md names ("error_list as six 0/1 integers with grade, or
#: flat E1_GOAL_MISALIGNMENT ... E6_HALLUCINATION_ERROR booleans with score").
SPEC_CASES = [
    Case("spec error_list, clean", "holistic",
         _j({"is_correct": True, "grade": 1.0, "error_list": [0, 0, 0, 0, 0, 0], "reasoning": "same chain"}),
         ("runner", True, 1.0, [], None), "runner.py 186-189: bool(is_correct) counted, grade averaged"),
    Case("spec error_list, E5", "holistic",
         _j({"is_correct": False, "grade": 0.6, "error_list": [0, 0, 0, 0, 1, 0], "reasoning": "SAR to optical"}),
         ("runner", False, 0.6, ["E5"], None), "runner.py 186-189"),
    Case("spec flat, clean", "step-wise",
         _j({**NO_FLAGS, "score": 1.0, "reasoning": "same call", "is_correct": "YES"}),
         ("next1", True, 1.0, [], None), "next1_evaluator.py 776-788: no truthy exact key, is_correct overwritten True",
         horizon=1),
    Case("spec flat, E4", "step-wise",
         _j({**NO_FLAGS, "E4_LOGIC_ERROR": True, "score": 0.6, "reasoning": "wrong mask", "is_correct": "NO"}),
         ("next1", False, 0.6, ["E4"], None), "next1_evaluator.py 718-726, 776-788", horizon=1),
]

#: Cases written from the benchmark's code, one per decision it makes.
CODE_CASES = [
    # -- apb_eval runner: holistic, unsolvable, tool-extraneous (holistic) and every error_list answer
    Case("is_correct false beside no flag", "holistic",
         _j({"is_correct": False, "grade": 0.6, "error_list": [0, 0, 0, 0, 0, 0], "reasoning": "r"}),
         ("runner", False, 0.6, [], None), "runner.py 186-187: the judge's is_correct is counted, flags unread"),
    Case("is_correct as the string false", "holistic",
         _j({"is_correct": "false", "grade": 0.2, "error_list": [1, 0, 0, 0, 0, 0]}),
         ("runner", True, 0.2, ["E1"], None), "runner.py 187: bool('false') is True"),
    Case("grade as a string", "holistic",
         _j({"is_correct": True, "grade": "0.8", "error_list": [0, 0, 0, 0, 0, 0]}),
         ("runner", True, None, [], None), "runner.py 188: a str is not (int, float), no grade averaged"),
    Case("grade as a boolean", "holistic",
         _j({"is_correct": False, "grade": True, "error_list": [0, 0, 0, 1, 0, 0]}),
         ("runner", False, 1.0, ["E4"], None), "runner.py 188-189: a bool is an int, float(True) = 1.0"),
    Case("grade off the scale", "holistic",
         _j({"is_correct": False, "grade": 0.7, "error_list": [0, 1, 0, 0, 0, 0]}),
         ("runner", False, 0.7, ["E2"], None), "runner.py 189: float(grade), never snapped"),
    Case("grade NaN", "holistic", '{"is_correct": true, "grade": NaN, "error_list": [0,0,0,0,0,0]}',
         ("runner", True, None, [], None),
         "runner.py 186-189: counted, but a NaN grade would make the mean NaN: left uncounted (non-finite-grade)"),
    Case("no is_correct", "holistic", _j({"grade": 0.4, "error_list": [0, 1, 0, 0, 0, 0]}),
         ("runner", None, 0.4, ["E2"], None), "runner.py 186: 'is_correct' not in judgement, nothing counted"),
    Case("a list, not an object", "holistic", _j([{"is_correct": True, "grade": 1.0}]),
         ("runner", None, None, [], None), "runner.py 38: wrapped as {'value': [...]}, neither key present"),
    Case("fenced from the first character", "holistic",
         '```json\n{"is_correct": true, "grade": 0.8, "error_list": [0,0,0,0,0,0]}\n```',
         ("runner", True, 0.8, [], None), "runner.py 25-31: the leading ```json and trailing ``` are removed"),
    Case("prose, then a fence", "holistic",
         'Verdict:\n```json\n{"is_correct": true, "grade": 0.8, "error_list": [0,0,0,0,0,0]}\n```',
         ("runner", True, 0.8, [], None), "runner.py 32-36: json.loads fails, the greedy {.*} span parses"),
    Case("two objects", "holistic",
         'Example {"a": 1} then {"is_correct": true, "grade": 1.0, "error_list": [0,0,0,0,0,0]}',
         DROPPED, "runner.py 34-36: the greedy span runs from the first { to the last } and is not JSON"),
    Case("no JSON at all", "holistic", "The plan is fine.", DROPPED,
         "runner.py 35-36: no {...} span, the JSONDecodeError is raised again"),
    Case("error_list of six strings", "holistic",
         _j({"is_correct": True, "grade": 1.0, "error_list": ["0", "0", "0", "0", "2", "0"]}),
         ("runner", True, 1.0, ["E5"], None), "runner.py 183-191: error_list is never read (the prompt's meaning)"),
    Case("unsolvable: a bare PASS", "unsolvable", _j({"verdict": "PASS", "reasoning": "asks for the image"}),
         ("runner", None, None, [], None), "runner.py 186-188: neither is_correct nor grade, nothing counted"),
    Case("unsolvable: is_correct NO", "unsolvable",
         _j({"is_correct": "NO", "grade": 0.0, "error_list": [0, 0, 0, 0, 0, 0]}),
         ("runner", True, 0.0, [], None), "runner.py 187: bool('NO') is True"),
    Case("tool-extraneous holistic", "tool-extraneous",
         _j({"is_correct": False, "grade": 0.6, "error_list": [0, 0, 0, 0, 1, 0]}),
         ("runner", False, 0.6, ["E5"], None), "runner.py 186-189 (TOOL_EXTRANEOUS_JUDGE_PROMPT asks error_list)"),
    Case("tool-broken in the runner's dialect", "tool-broken",
         _j({"is_correct": True, "grade": 0.8, "error_list": [0, 0, 0, 0, 1, 0]}),
         ("runner", True, 0.8, ["E5"], None), "runner.py 186-189 (TOOL_BROKEN_JUDGE_PROMPT asks error_list)"),
    Case("step-wise in the runner's dialect", "step-wise",
         _j({"is_correct": False, "grade": 0.6, "error_list": [0, 0, 0, 1, 0, 0]}),
         ("runner", False, 0.6, ["E4"], None), "runner.py 186-189 (STEP_WISE_JUDGE_PROMPT asks error_list)"),
    # -- legacy step-wise evaluators (flat dialect, lists)
    Case("flat value as the string false", "step-wise",
         _j({"E4_LOGIC_ERROR": "false", "score": 0.6, "reasoning": "r", "is_correct": "YES"}),
         ("next1", False, 0.6, ["E4"], None), "next1_evaluator.py 776-788: 'false' is truthy, is_correct overwritten",
         horizon=1),
    Case("lower-case key", "step-wise", _j({"e4_logic_error": True, "score": 0.6, "reasoning": "r"}),
         ("next1", True, 0.6, [], None), "next1_evaluator.py 720-726, 776-785: only the exact keys are read",
         horizon=1),
    Case("bare E4 key", "step-wise", _j({"E4": True, "score": 0.6, "reasoning": "r"}),
         ("next2", True, 0.6, [], None), "next2_evaluator.py 749-761: only the exact keys are read", horizon=2),
    Case("no reasoning", "step-wise", _j({"E5_TOOL_USE_ERROR": True, "score": 0.6}), DROPPED,
         "next1_evaluator.py 728: eval_data['reasoning'] raises KeyError, the sample is dropped", horizon=1),
    Case("no score", "step-wise", _j({"E5_TOOL_USE_ERROR": True, "reasoning": "r"}), DROPPED,
         "next3_evaluator.py 748: eval_data['score'] raises KeyError", horizon=3),
    Case("the judge's NO overwritten", "step-wise",
         _j({**NO_FLAGS, "score": 0.4, "reasoning": "r", "is_correct": "NO"}),
         ("next1", True, 0.4, [], None), "next1_evaluator.py 788: is_correct = not has_any_error", horizon=1),
    Case("next-3 list, a step without score", "step-wise",
         _j([{"E4_LOGIC_ERROR": False, "score": 0.8, "reasoning": "a"}, {"E5_TOOL_USE_ERROR": True, "reasoning": "b"}]),
         ("next3", False, 0.0, ["E5"], None), "next3_evaluator.py 840-842: item.get('score', 0.0), the minimum",
         horizon=3),
    Case("a list where the horizon is unknown", "step-wise",
         _j([{"E1_GOAL_MISALIGNMENT": True, "score": 0.2, "reasoning": "a"}]),
         ("next3", False, 0.2, ["E1"], None), "next3_evaluator.py 803-862: only next-3 reads a list"),
    Case("a list to next-1", "step-wise", _j([{"score": 1.0, "reasoning": "a"}]), DROPPED,
         "next1_evaluator.py 776: data.get on a list raises, the sample is dropped", horizon=1),
    Case("a list to next-2", "step-wise", _j([{"score": 1.0, "reasoning": "a"}]), DROPPED,
         "next2_evaluator.py 744-746: not a dict, dropped", horizon=2),
    Case("an empty list", "step-wise", "[]", DROPPED, "next3_evaluator.py 804-806: an empty list is dropped",
         horizon=3),
    Case("a list with a string score", "step-wise", _j([{"score": "0.8", "reasoning": "a"}]), DROPPED,
         "next3_evaluator.py 841: '0.8' < 1.0 raises TypeError, dropped", horizon=3),
    Case("a list with a note among the steps", "step-wise",
         _j([{"E6_HALLUCINATION_ERROR": True, "score": 0.2}, "note"]),
         ("next3", False, 0.2, ["E6"], None), "next3_evaluator.py 831-832: a non-dict item is skipped", horizon=3),
    Case("prose around a fence", "step-wise",
         'Here:\n```json\n{"E2_PREMATURE_CONCLUSION": true, "score": 0.4, "reasoning": "stops"}\n```\nDone.',
         ("next1", False, 0.4, ["E2"], None), "next1_evaluator.py 748-749: the text after ```json up to the next fence",
         horizon=1),
    Case("a trailing comma, repaired", "step-wise", '{"E4_LOGIC_ERROR": true, "score": 0.6, "reasoning": "r",}',
         ("next1", False, 0.6, ["E4"], None), "next1_evaluator.py 756-764: json_repair mends a trailing comma",
         horizon=1),
    Case("tool-extraneous step-wise, flat", "tool-extraneous",
         _j({"E5_TOOL_USE_ERROR": True, "score": 0.6, "reasoning": "calls the distractor"}),
         ("next1", False, 0.6, ["E5"], None),
         "tool_redundancy_evaluator.py 309-335: next1's _parse_evaluation, then the exact keys"),
    # -- legacy tool-broken evaluator (five classes)
    Case("class 2 by number", "tool-broken",
         _j({"category": 2, "category_name": "alternative", "is_correct": True, "reason": "other tool"}),
         ("tool_broken", True, 1.0, [], "alternative"), "tool_broken_evaluator.py 325, 345-346, 378"),
    Case("a class given as a name", "tool-broken", _j({"category": "Replacement", "reason": "swapped"}), DROPPED,
         "tool_broken_evaluator.py 325: int('Replacement') raises ValueError, 350-355 skip the sample"),
    Case("only category_name", "tool-broken", _j({"category_name": "replacement", "reason": "swapped"}),
         ("tool_broken", False, 0.0, [], "other"),
         "tool_broken_evaluator.py 325: no category is 5; 342: category_name is overwritten"),
    Case("category out of range", "tool-broken", _j({"category": 7, "reason": "?"}),
         ("tool_broken", False, 0.0, [], "other"), "tool_broken_evaluator.py 340-341: 7 becomes 5"),
    Case("category 1.9", "tool-broken", _j({"category": 1.9}),
         ("tool_broken", True, 1.0, [], "replacement"), "tool_broken_evaluator.py 325: int(1.9) is 1"),
    Case("category true", "tool-broken", _j({"category": True}),
         ("tool_broken", True, 1.0, [], "replacement"), "tool_broken_evaluator.py 325: int(True) is 1"),
    Case("category as the string 3", "tool-broken", _j({"category": "3"}),
         ("tool_broken", False, 0.0, [], "retry"), "tool_broken_evaluator.py 325: int('3') is 3"),
    Case("category as the string 1.0", "tool-broken", _j({"category": "1.0"}), DROPPED,
         "tool_broken_evaluator.py 325: int('1.0') raises ValueError"),
    Case("category 1e400", "tool-broken", '{"category": 1e400}', DROPPED,
         "tool_broken_evaluator.py 325: int(inf) raises OverflowError, 350-355 drop the sample"),
    Case("category null", "tool-broken", _j({"category": None}), DROPPED,
         "tool_broken_evaluator.py 325: get returns None (the key exists), int(None) raises TypeError"),
    Case("refusal with is_correct true", "tool-broken", _j({"category": 4, "is_correct": True}),
         ("tool_broken", False, 0.0, [], "refusal"), "tool_broken_evaluator.py 345-348: the class decides"),
    Case("a null reason", "tool-broken", _j({"category": 1, "reason": None}), DROPPED,
         "tool_broken_evaluator.py 328 and 359: reason is None, reason[:200] raises TypeError, 386-389 drop it"),
    Case("a reason as a list", "tool-broken", _j({"category": 3, "reason": ["retried", "twice"]}),
         ("tool_broken", False, 0.0, [], "retry"), "tool_broken_evaluator.py 359: a list can be sliced"),
    Case("fenced five-class answer after prose", "tool-broken",
         'I classify it as:\n```json\n{"category": 1, "reason": "uses the replacement"}\n```',
         ("tool_broken", True, 1.0, [], "replacement"), "tool_broken_evaluator.py 299-300: the fenced body"),
]


def _read(case: Case) -> Any:
    try:
        v = parse_verdict(case.raw, setting=case.setting, regime=case.regime, reading="apb", horizon=case.horizon)
    except VerdictParseError:
        return DROPPED
    return (v.apb_path, v.is_correct, v.grade, v.flags, v.outcome)


@pytest.mark.parametrize("case", SPEC_CASES + CODE_CASES, ids=lambda c: c.name)
def test_apb_reading_equals_the_benchmarks_parse(case):
    assert _read(case) == case.expected, case.decided_by


def test_every_case_names_the_benchmark_lines_that_decide_it():
    for case in SPEC_CASES + CODE_CASES:
        assert case.decided_by and any(ch.isdigit() for ch in case.decided_by), case.name


def test_every_setting_and_benchmark_path_is_covered():
    cases = SPEC_CASES + CODE_CASES
    assert {c.setting for c in cases} == {"holistic", "step-wise", "tool-extraneous", "tool-broken", "unsolvable"}
    assert {c.expected[0] for c in cases if c.expected != DROPPED} == set(APB_PATHS)


@pytest.mark.parametrize("raw, setting, studio, apb", [
    # the three kinds of deliberate choice the issue names, read both ways (hand-worked)
    (_j({"category": "Replacement", "reason": "swapped"}), "tool-broken", (True, "replacement"), DROPPED),
    (_j({"is_correct": False, "grade": 0.6, "error_list": [0, 0, 0, 0, 0, 0]}), "holistic", (True, None), (False, None)),
    (_j({"verdict": "PASS"}), "unsolvable", (True, None), (None, None)),
])
def test_the_two_readings_differ_where_the_studio_chose_to(raw, setting, studio, apb):
    s = parse_verdict(raw, setting=setting)
    assert (s.reading, s.is_correct, s.outcome) == ("studio",) + studio
    try:
        a = parse_verdict(raw, setting=setting, reading="apb")
    except VerdictParseError:
        assert apb == DROPPED
    else:
        assert (a.reading, a.is_correct, a.outcome) == ("apb",) + apb


def test_default_reading_is_the_studios_and_unknown_readings_are_refused():
    v = parse_verdict(_j({"is_correct": True, "grade": 1.0, "error_list": [0] * 6}))
    assert v.reading == "studio" and v.apb_path is None and READINGS == ("studio", "apb")
    assert normalize_reading(None) == "studio" and normalize_reading(" APB ") == "apb"
    with pytest.raises(ValueError, match="reading 'paper' is not one of studio, apb"):
        parse_verdict("{}", reading="paper")


def test_studio_verdicts_keep_their_invariants():
    with pytest.raises(ValueError, match="is_correct"):
        Verdict(is_correct=None, grade=1.0, errors=set())
    with pytest.raises(ValueError, match="grade 0.7"):
        Verdict(is_correct=False, grade=0.7, errors={"E4"})
    # the same values are a legal apb verdict (the benchmark counts them so)
    assert Verdict(is_correct=None, grade=0.7, errors={"E4"}, reading="apb").grade == 0.7


def test_every_known_difference_says_what_the_apb_reading_does():
    ids = [d["id"] for d in KNOWN_DIFFERENCES]
    assert len(ids) == len(set(ids))
    for d in KNOWN_DIFFERENCES:
        assert set(d) == {"id", "benchmark", "studio", "apb"} and all(d.values()), d["id"]
    assert {"greedy-regex", "bool-of-string", "exact-case-keys", "missing-free-text", "missing-grade-in-list",
            "tool-broken-category", "is-correct-beside-flags", "bare-pass-fail", "grade-as-given",
            "non-object-answer"} <= set(ids)


def test_docs_list_every_known_difference():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "judge-settings.md").read_text(encoding="utf-8")
    for d in KNOWN_DIFFERENCES:  # the table holds each entry word for word ('|' escaped)
        row = " | ".join([f"| `{d['id']}`"] + [d[k].replace("|", "\\|") for k in ("benchmark", "studio", "apb")])
        assert row + " |" in text, d["id"]


# -- any answer: the apb reading gives a verdict or a failed judgement, never another exception --

from hypothesis import given  # noqa: E402
from hypothesis import settings as hsettings
from hypothesis import strategies as st

_KEYS = st.sampled_from(["is_correct", "grade", "error_list", "score", "reasoning", "category", "category_name",
                         "reason", "verdict", *FLAT_KEYS.values(), "E4", "x"])
_SCALARS = (st.none() | st.booleans() | st.integers(-10**400, 10**400) | st.floats(allow_nan=True)
            | st.sampled_from([float("nan"), float("inf"), 10**400, 1e308, 1.9, 7])
            | st.text(max_size=8) | st.sampled_from(["false", "NO", "1.0", "Replacement", "PASS"]))
_JSON = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=6) | st.dictionaries(_KEYS, inner, max_size=6),
                     max_leaves=12)


@hsettings(max_examples=300, deadline=None)
@given(value=_JSON, setting=st.sampled_from(["holistic", "step-wise", "tool-extraneous", "tool-broken", "unsolvable"]),
       horizon=st.sampled_from([None, 1, 2, 3]), fence=st.booleans())
def test_apb_reading_gives_a_verdict_or_a_failed_judgement(value, setting, horizon, fence):
    text = json.dumps(value)
    if fence:
        text = f"Answer:\n```json\n{text}\n```"
    try:
        v = parse_verdict(text, setting=setting, reading="apb", horizon=horizon)
    except VerdictParseError:
        return
    assert v.reading == "apb" and v.apb_path in APB_PATHS
    # a report can always carry it: a finite grade or none
    assert v.grade is None or v.grade == v.grade and abs(v.grade) != float("inf")
