"""The judge's aggregate report on a small verdict table whose figures are worked out by hand
(in the comments next to each assertion)."""
from __future__ import annotations

import pytest

from evaluation.judge.report import ReportRowError, benchmark_split, judge_report

J1, J2 = "gpt-4o@holistic_v2", "qwen3@holistic_v2"


def _e(*codes):
    return {c: c in codes for c in ("E1", "E2", "E3", "E4", "E5", "E6")}


TABLE = [
    # holistic, J1: six read verdicts and one failed judgement
    dict(setting="holistic", judge=J1, is_correct=True, judge_is_correct=True, grade=1.0, errors=_e()),
    dict(setting="holistic", judge=J1, is_correct=False, judge_is_correct=True, grade=0.8, errors=_e("E5")),
    dict(setting="holistic", judge=J1, is_correct=False, judge_is_correct=False, grade=0.4, errors=_e("E2", "E4")),
    dict(setting="holistic", judge=J1, is_correct=False, judge_is_correct=False, grade=0.2, errors=_e("E1")),
    dict(setting="holistic", judge=J1, is_correct=True, judge_is_correct=True, grade=1.0, errors=_e()),
    dict(setting="holistic", judge=J1, is_correct=True, judge_is_correct=None, grade=1.0, errors=_e()),
    dict(setting="holistic", judge=J1, status="failed"),
    # holistic, J2
    dict(setting="holistic", judge=J2, is_correct=True, judge_is_correct=True, grade=1.0, errors=_e()),
    dict(setting="holistic", judge=J2, is_correct=True, judge_is_correct=True, grade=0.8, errors=_e()),
    # step-wise, J1
    dict(setting="step-wise", judge=J1, is_correct=True, judge_is_correct=True, grade=1.0, errors=_e()),
    dict(setting="step-wise", judge=J1, is_correct=False, judge_is_correct=False, grade=0.6, errors=_e("E4")),
    dict(setting="step-wise", judge=J1, is_correct=False, judge_is_correct=False, grade=0.4, errors=_e("E2")),
    dict(setting="step-wise", judge=J1, is_correct=False, judge_is_correct=True, grade=0.4, errors=_e("E4", "E5")),
    # tool-broken, J1 (five-class answers judge no flags)
    *[dict(setting="tool-broken", judge=J1, is_correct=ok, judge_is_correct=ok, grade=1.0 if ok else 0.0,
           errors=None, outcome=o)
      for o, ok in (("replacement", True), ("Replace", True), ("alternative", True), ("retry", False), ("refusal", False))],
    # unsolvable, J1
    dict(setting="unsolvable", judge=J1, is_correct=True, judge_is_correct=True, grade=1.0, errors=_e(),
         unsolvable_type="information_missing"),
    dict(setting="unsolvable", judge=J1, is_correct=False, judge_is_correct=False, grade=0.0, errors=_e(),
         unsolvable_type="information_missing"),
    dict(setting="unsolvable", judge=J1, is_correct=True, judge_is_correct=True, grade=1.0, errors=_e(),
         unsolvable_type="tool_removal"),
    dict(setting="unsolvable", judge=J1, is_correct=True, judge_is_correct=True, grade=1.0, errors=_e("E6"),
         unsolvable_type="tool_removal"),
    dict(setting="unsolvable", judge=J1, is_correct=False, judge_is_correct=False, grade=0.2, errors=_e("E6"),
         unsolvable_type="contradictory_constraints"),
    # tool-extraneous, holistic regime, J1
    dict(setting="tool-extraneous", judge=J1, is_correct=True, judge_is_correct=True, grade=1.0, errors=_e(),
         distractors_used=[]),
    dict(setting="tool-extraneous", judge=J1, is_correct=False, judge_is_correct=False, grade=0.6, errors=_e("E5"),
         distractors_used=["gen.crop_yield"]),
    dict(setting="tool-extraneous", judge=J1, is_correct=False, judge_is_correct=False, grade=0.4, errors=_e("E5"),
         distractors_used=["gen.crop_yield", "gen.traffic"]),
]


def _group(report, **keys):
    found = [g for g in report["groups"] if all(g[k] == v for k, v in keys.items())]
    assert len(found) == 1, keys
    return found[0]


def test_holistic_figures():
    r = judge_report(TABLE)
    g = _group(r, setting="holistic", judge=J1)
    assert (g["split"], g["regime"]) == ("holistic_planning", "holistic")
    assert g["n"] == 6 and g["failed"] == 1
    assert g["cr_derived_pct"] == 50.0  # 3 correct of 6
    assert g["cr_judge_pct"] == 60.0 and g["n_judge_is_correct"] == 5  # 3 true of the 5 that said
    assert g["mean_grade"] == 0.7333  # (1 + 0.8 + 0.4 + 0.2 + 1 + 1) / 6 = 4.4 / 6
    assert g["e_rates_pct"] == {"E1": 16.67, "E2": 16.67, "E3": 0.0, "E4": 16.67, "E5": 16.67, "E6": 0.0}  # 1/6
    assert g["e2_label"] == "E2-H task incompleteness"
    assert g["tool_broken"] is None and g["unsolvable"] is None and g["distractors"] is None
    g2 = _group(r, setting="holistic", judge=J2)
    assert g2["n"] == 2 and g2["cr_derived_pct"] == 100.0 and g2["mean_grade"] == 0.9  # (1 + 0.8) / 2


def test_stepwise_figures():
    g = _group(judge_report(TABLE), setting="step-wise")
    assert (g["split"], g["regime"], g["n"]) == ("step_wise_planning", "step-wise", 4)
    assert g["cr_derived_pct"] == 25.0 and g["cr_judge_pct"] == 50.0  # 1 of 4; 2 of 4
    assert g["mean_grade"] == 0.6  # (1 + 0.6 + 0.4 + 0.4) / 4
    assert g["e_rates_pct"]["E4"] == 50.0 and g["e_rates_pct"]["E2"] == 25.0 and g["e_rates_pct"]["E5"] == 25.0
    assert g["e2_label"] == "E2-S premature conclusion"


def test_tool_broken_figures():
    g = _group(judge_report(TABLE), setting="tool-broken")
    assert (g["split"], g["n"], g["n_flagged"]) == ("step_wise_tool_broken", 5, 0)
    assert g["cr_derived_pct"] == 60.0 and g["mean_grade"] == 0.6  # 3 of 5 correct, grades 1,1,1,0,0
    assert g["e_rates_pct"] == {c: None for c in ("E1", "E2", "E3", "E4", "E5", "E6")}  # no flags judged
    assert g["tool_broken"] == {"n": 5, "shares_pct": {"replacement": 40.0, "alternative": 20.0, "retry": 20.0,
                                                       "refusal": 20.0, "other": 0.0}}


def test_unsolvable_figures():
    g = _group(judge_report(TABLE), setting="unsolvable")
    assert (g["split"], g["n"], g["cr_derived_pct"]) == ("holistic_unsolvable", 5, 60.0)  # 3 of 5 refused
    u = g["unsolvable"]
    assert u["information_missing"]["refusal_rate_pct"] == 50.0 and u["information_missing"]["n"] == 2
    assert u["tool_removal"]["refusal_rate_pct"] == 100.0
    assert u["contradictory_constraints"]["refusal_rate_pct"] == 0.0
    assert u["visual_information_inaccessible"] == {"label": "missing imagery", "n": 0, "refusal_rate_pct": None}
    assert g["e_rates_pct"]["E6"] == 40.0  # 2 of 5


def test_tool_extraneous_figures():
    g = _group(judge_report(TABLE), setting="tool-extraneous")
    assert (g["split"], g["regime"], g["n"]) == ("holistic_tool_extraneous", "holistic", 3)
    assert g["cr_derived_pct"] == 33.33 and g["e_rates_pct"]["E5"] == 66.67  # 1 of 3; 2 of 3
    assert g["distractors"] == {"n": 3, "use_rate_pct": 66.67, "ext_use": 3}  # 2 of 3 used one; 1 + 2 calls


def test_groups_split_by_tested_model_and_order():
    rows = [dict(setting="holistic", judge=J1, tested_model=m, is_correct=ok, grade=1.0 if ok else 0.2,
                 errors=_e() if ok else _e("E1")) for m, ok in (("a", True), ("a", False), ("b", True))]
    r = judge_report(rows)
    assert r["group_keys"] == ["setting", "split", "regime", "judge", "tested_model"]
    assert [(g["tested_model"], g["cr_derived_pct"]) for g in r["groups"]] == [("a", 50.0), ("b", 100.0)]
    assert [g["setting"] for g in judge_report(TABLE)["groups"]] == [
        "holistic", "holistic", "step-wise", "tool-extraneous", "tool-broken", "unsolvable"]


def test_benchmark_split_names():
    assert benchmark_split("tool-extraneous", "step-wise") == "step_wise_tool_extraneous"
    assert benchmark_split("unsolvable", "holistic") == "holistic_unsolvable"


@pytest.mark.parametrize("row, field", [
    (dict(setting="offline", is_correct=True), "setting"),
    (dict(setting="holistic", is_correct="yes"), "is_correct"),
    (dict(setting="holistic", is_correct=True, grade=1.4), "grade"),
    (dict(setting="tool-broken", is_correct=True, outcome="swap"), "outcome"),
    (dict(setting="tool-broken", is_correct=True, outcome="retry"), "outcome"),  # retry is never correct
    (dict(setting="unsolvable", is_correct=True, unsolvable_type="cloudy"), "unsolvable_type"),
    (dict(setting="tool-extraneous", is_correct=True, distractors_used="gen.x"), "distractors_used"),
])
def test_bad_rows_name_row_and_field(row, field):
    with pytest.raises(ReportRowError, match=rf"row 1: .*{field}"):
        judge_report([dict(setting="holistic", is_correct=True), row])
