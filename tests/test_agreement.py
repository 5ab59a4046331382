"""Agreement statistics (evaluation.agreement) and ``manage.py agreement``.

Every expected number below is worked out by hand in the comment next to it.
"""
from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from evaluation.agreement import (
    RowError,
    agreement_report,
    build_reference,
    cohen_kappa,
    fleiss_kappa,
    load_jsonl,
    normalize_row,
    prf,
    quadratic_weighted_kappa,
)
from evaluation.judge.verdict import E_CODES, GRADES

approx = pytest.approx


# --------------------------------------------------------------------------------------------
# The named statistics
# --------------------------------------------------------------------------------------------


def _from_2x2(yy: int, yn: int, ny: int, nn: int) -> tuple[list[str], list[str]]:
    a = ["y"] * yy + ["y"] * yn + ["n"] * ny + ["n"] * nn
    b = ["y"] * yy + ["n"] * yn + ["y"] * ny + ["n"] * nn
    return a, b


def test_cohen_kappa_symmetric_2x2():
    # 10 items: both yes 4, A yes/B no 1, A no/B yes 1, both no 4.
    # p_o = 8/10 = 0.8; each rater says yes 5/10, so p_e = .5*.5 + .5*.5 = 0.5;
    # kappa = (0.8 - 0.5) / (1 - 0.5) = 0.6
    a, b = _from_2x2(4, 1, 1, 4)
    assert cohen_kappa(a, b) == approx(0.6)


def test_cohen_kappa_asymmetric_2x2():
    # 50 items: yes/yes 20, yes/no 5, no/yes 10, no/no 15.
    # p_o = 35/50 = 0.7; A yes 25/50 = .5, B yes 30/50 = .6;
    # p_e = .5*.6 + .5*.4 = 0.5; kappa = (0.7 - 0.5) / 0.5 = 0.4
    a, b = _from_2x2(20, 5, 10, 15)
    assert cohen_kappa(a, b) == approx(0.4)
    assert cohen_kappa(b, a) == approx(0.4)


def test_cohen_kappa_undefined_is_null():
    assert cohen_kappa([], []) is None
    # both raters say "y" on every item: p_e = 1, kappa = 0/0 -> null (not 0, not 1)
    assert cohen_kappa(["y"] * 3, ["y"] * 3) is None
    # perfect disagreement with disjoint labels: p_o = 0, p_e = 0 -> kappa = 0
    assert cohen_kappa(["y", "y"], ["n", "n"]) == approx(0.0)
    with pytest.raises(ValueError):
        cohen_kappa(["y"], [])


def test_fleiss_three_raters_by_hand():
    # 4 subjects, 3 raters, 2 categories:
    #   [3,0] P=(9-3)/(3*2)=1   [0,3] P=1   [2,1] P=(4+1-3)/6=1/3   [1,2] P=1/3
    # P_bar = (1+1+1/3+1/3)/4 = 2/3; p = (6/12, 6/12), P_e = 1/2;
    # kappa = (2/3 - 1/2) / (1/2) = 1/3
    assert fleiss_kappa([[3, 0], [0, 3], [2, 1], [1, 2]]) == approx(1 / 3)


def test_fleiss_wikipedia_worked_example():
    # Wikipedia "Fleiss' kappa", worked example: 10 subjects, 14 raters, 5 categories.
    # Column totals 20, 28, 39, 21, 32 over 140 ratings -> p_j = .143, .200, .279, .150, .229;
    # P_e = sum p_j^2 = 0.2128; P_bar = 0.378 (row P_i = 1.000, .253, .308, .440, .330, .462,
    # .242, .176, .286, .286); kappa = (0.378 - 0.2128) / (1 - 0.2128) = 0.210.
    table = [
        [0, 0, 0, 0, 14],
        [0, 2, 6, 4, 2],
        [0, 0, 3, 5, 6],
        [0, 3, 9, 2, 0],
        [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0],
        [3, 2, 6, 3, 0],
        [2, 5, 3, 2, 2],
        [6, 5, 2, 1, 0],
        [0, 2, 2, 3, 7],
    ]
    assert fleiss_kappa(table) == approx(0.210, abs=5e-4)


def test_fleiss_degenerate_and_bad_rows():
    assert fleiss_kappa([]) is None
    # every rating in one category: P_e = 1 -> null
    assert fleiss_kappa([[3, 0], [3, 0]]) is None
    with pytest.raises(ValueError):
        fleiss_kappa([[1, 0]])  # a single rating cannot agree with anyone
    with pytest.raises(ValueError):
        fleiss_kappa([[2, 1], [3]])


def test_quadratic_weighted_kappa_by_hand():
    # levels 0,1,2; a = [0,1,2,2], b = [0,2,2,1]; weights (i-j)^2 (the (k-1)^2 divisor cancels).
    # observed: (0,0)=0 (1,2)=1 (2,2)=0 (2,1)=1 -> 2/4 = 0.5
    # marginals a: {0:1,1:1,2:2}, b: {0:1,1:1,2:2}; expected sum w*ra*cb / n^2:
    #   (0,1)1*1*1 + (0,2)4*1*2 + (1,0)1*1*1 + (1,2)1*1*2 + (2,0)4*2*1 + (2,1)1*2*1 = 22 -> 22/16
    # kappa_w = 1 - 0.5 / 1.375 = 1 - 4/11 = 7/11
    assert quadratic_weighted_kappa([0, 1, 2, 2], [0, 2, 2, 1], [0, 1, 2]) == approx(7 / 11)
    # the same pattern on the first three grades of the 6-level scale: unused levels add nothing
    # and the normaliser cancels, so the value is again 7/11
    assert quadratic_weighted_kappa([0.0, 0.2, 0.4, 0.4], [0.0, 0.4, 0.4, 0.2], GRADES) == approx(7 / 11)
    assert quadratic_weighted_kappa([1.0, 0.0], [1.0, 0.0], GRADES) == approx(1.0)
    assert quadratic_weighted_kappa([], [], GRADES) is None
    assert quadratic_weighted_kappa([0.8, 0.8], [0.8, 0.8], GRADES) is None  # single level: 0/0
    with pytest.raises(ValueError):
        quadratic_weighted_kappa([0.5], [0.4], GRADES)


def test_prf_by_hand_and_nulls():
    # pred/ref: (i,i) (i,c) (c,i) (c,c) (i,i) -> TP 2, FP 1, FN 1, TN 1 -> P = R = F1 = 2/3
    s = prf(["i", "i", "c", "c", "i"], ["i", "c", "i", "c", "i"], "i")
    assert (s["tp"], s["fp"], s["fn"], s["tn"], s["support"], s["predicted"]) == (2, 1, 1, 1, 3, 3)
    assert s["precision"] == approx(2 / 3) and s["recall"] == approx(2 / 3) and s["f1"] == approx(2 / 3)
    # never predicts positive, reference has one: precision null (0/0), recall 0, F1 0
    s = prf(["c", "c"], ["i", "c"], "i")
    assert s["precision"] is None and s["recall"] == 0.0 and s["f1"] == 0.0
    # no positive anywhere: all three null, not 0
    s = prf(["c", "c"], ["c", "c"], "i")
    assert s["precision"] is None and s["recall"] is None and s["f1"] is None
    # no reference positive but a predicted one: recall null, precision 0, F1 0
    s = prf(["i"], ["c"], "i")
    assert s["recall"] is None and s["precision"] == 0.0 and s["f1"] == 0.0


# --------------------------------------------------------------------------------------------
# Rows and the reference
# --------------------------------------------------------------------------------------------


def _row(run, source, annotator, ok, grade=None, flags=(), **extra):
    row = {"run_id": run, "source": source, "annotator": annotator, "is_correct": ok,
           "grade": grade, "errors": {c: c in flags for c in E_CODES}}
    row.update(extra)
    return row


def test_normalize_row_names_the_field():
    with pytest.raises(RowError) as exc:
        normalize_row({"run_id": "r", "source": "robot", "annotator": "a", "is_correct": True})
    assert exc.value.field == "source"
    with pytest.raises(RowError) as exc:
        normalize_row({"run_id": "r", "source": "judge", "annotator": "a", "is_correct": True, "grade": 1.5})
    assert exc.value.field == "grade"
    with pytest.raises(RowError) as exc:
        normalize_row({"run_id": "r", "source": "judge", "annotator": "a", "is_correct": True, "errors": {"E9": True}})
    assert exc.value.field == "errors.E9"
    with pytest.raises(RowError) as exc:
        normalize_row({"run_id": "r", "source": "judge", "annotator": "a", "is_correct": "yes"})
    assert exc.value.field == "is_correct"
    r = normalize_row({"run_id": 7, "source": "Judge", "annotator": "g3", "is_correct": False, "grade": 0.79,
                       "errors": ["E4"], "judge_model": "gemini-3-pro", "prompt_version": "v2"})
    assert r["run_id"] == "7" and r["level"] == 0.8 and r["errors"]["E4"] and not r["errors"]["E1"]
    assert r["rater"] == "judge:g3/gemini-3-pro@v2"


def test_reference_majority_and_ties():
    h = [normalize_row(_row("r", "human", n, ok, g, fl)) for n, ok, g, fl in
         [("a", True, 1.0, ()), ("b", False, 0.6, ("E4",))]]
    # two humans disagree: correctness and E4 are ties -> null under "exclude"
    ref = build_reference(h, "exclude")
    assert ref["is_correct"] is None and ref["errors"]["E4"] is None and ref["errors"]["E1"] is False
    assert ref["ties"] == ["is_correct", "E4"]
    # mean grade 0.8 is on the grid
    assert ref["grade"] == approx(0.8) and ref["level"] == 0.8
    # the conservative rule: a tie counts as incorrect / flag present
    ref = build_reference(h, "incorrect")
    assert ref["is_correct"] is False and ref["errors"]["E4"] is True
    # midpoint grade (0.8 + 0.6)/2 = 0.7 snaps down to 0.6
    h2 = [normalize_row(_row("r", "human", "a", False, 0.8, ("E5",))),
          normalize_row(_row("r", "human", "b", False, 0.6, ("E4",)))]
    assert build_reference(h2)["level"] == 0.6
    # an adjudicated (final) verdict overrides the majority
    h3 = h + [normalize_row(_row("r", "human", "c", True, 1.0, (), final=True))]
    ref = build_reference(h3)
    assert ref["adjudicated"] and ref["is_correct"] is True and ref["n_humans"] == 1


# --------------------------------------------------------------------------------------------
# The report on a small hand-worked data set
# --------------------------------------------------------------------------------------------
#
# Six runs, three humans (h1 h2 h3) on all, one judge J on all; C = correct (grade 1.0, no flag),
# I = incorrect (humans: grade 0.6 and E4; judge: grade 0.4 and E4, plus E5 on r2).
#   run  h1 h2 h3 -> ref   J   tested_model
#   r1   C  C  C     C     C   m1
#   r2   I  I  I     I     I   m1   (J also flags E5)
#   r3   C  C  I     C     I   m1
#   r4   I  I  C     I     C   m2
#   r5   C  C  C     C     C   m2
#   r6   I  C  I     I     I   m2
HUMANS = {
    "h1": "CICICI",
    "h2": "CICICC",
    "h3": "CIICCI",
}
JUDGE = "CIICCI"


def _dataset(**judge_extra):
    rows = []
    for name, marks in HUMANS.items():
        for i, m in enumerate(marks, start=1):
            ok = m == "C"
            rows.append(_row(f"r{i}", "human", name, ok, 1.0 if ok else 0.6, () if ok else ("E4",)))
    for i, m in enumerate(JUDGE, start=1):
        ok = m == "C"
        flags = () if ok else (("E4", "E5") if i == 2 else ("E4",))
        rows.append(_row(f"r{i}", "judge", "J", ok, 1.0 if ok else 0.4, flags,
                         tested_model="m1" if i <= 3 else "m2", **judge_extra))
    return rows


def test_report_judge_against_reference():
    rep = agreement_report(_dataset())
    j = next(e for e in rep["vs_reference"] if e["rater"] == "judge:J")
    c = j["correctness"]
    # agree on r1 r2 r5 r6 = 4/6; TP (I,I) r2 r6 = 2, FP r3, FN r4, TN r1 r5
    assert c["n"] == 6 and c["agreement"] == approx(4 / 6)
    assert (c["tp"], c["fp"], c["fn"], c["tn"]) == (2, 1, 1, 2)
    assert c["precision"] == approx(2 / 3) and c["recall"] == approx(2 / 3) and c["f1"] == approx(2 / 3)
    # both say incorrect 3/6 -> p_e = .5; kappa = (2/3 - 1/2)/(1/2) = 1/3
    assert c["kappa"] == approx(1 / 3)
    g = j["grade"]
    # human mean grades: r1 1, r2 .6, r3 .8667, r4 .7333, r5 1, r6 .7333; judge 1 .4 .4 1 1 .4
    # |diff| = 0, .2, .4667, .2667, 0, .3333 -> sum 19/15 -> MAE 19/90
    assert g["mae"] == approx(19 / 90)
    # snapped reference 1, .6, .8, .8, 1, .8: exact r1 r5 = 2/6; within 0.2: r1 r2 r4 r5 = 4/6
    assert g["exact"] == approx(2 / 6) and g["within_0_2"] == approx(4 / 6)
    assert g["qwk"] is not None
    f = j["flags"]
    # E4 mirrors correctness
    assert f["E4"]["support"] == 3 and f["E4"]["f1"] == approx(2 / 3) and f["E4"]["agreement"] == approx(4 / 6)
    # E5: no reference positive -> recall null; one false alarm -> precision 0, F1 0; agree 5/6
    assert f["E5"]["support"] == 0 and f["E5"]["recall"] is None
    assert f["E5"]["precision"] == 0.0 and f["E5"]["f1"] == 0.0 and f["E5"]["agreement"] == approx(5 / 6)
    # E1: nobody flags it -> P, R, F1 and kappa all null, agreement 1
    assert f["E1"]["precision"] is None and f["E1"]["recall"] is None and f["E1"]["f1"] is None
    assert f["E1"]["kappa"] is None and f["E1"]["agreement"] == 1.0
    # error set equal on r1 r5 r6 = 3/6
    assert j["error_set"]["exact_match"] == approx(0.5)


def test_report_human_ceiling_and_fleiss():
    rep = agreement_report(_dataset())
    hc = rep["human_ceiling"]
    p12 = next(p for p in hc["pairwise"] if {p["a"], p["b"]} == {"human:h1", "human:h2"})
    # h1 CICICI vs h2 CICICC: agree 5/6; incorrect 3/6 vs 2/6 -> p_e = .5*2/6 + .5*4/6 = .5;
    # kappa = (5/6 - 1/2)/(1/2) = 2/3
    assert p12["agreement"] == approx(5 / 6) and p12["kappa"] == approx(2 / 3)
    # Fleiss on [incorrect, correct] counts: [0,3] [3,0] [1,2] [2,1] [0,3] [2,1]
    # P_i = 1 1 1/3 1/3 1 1/3 -> P_bar = 2/3; p = (8/18, 10/18), P_e = 41/81;
    # kappa = (54/81 - 41/81) / (40/81) = 13/40
    assert hc["fleiss"]["n_runs"] == 6 and hc["fleiss"]["raters_per_run"] == [3, 3]
    assert hc["fleiss"]["correctness_kappa"] == approx(13 / 40)
    # all six pairs with a run in common (3 human-human, 3 human-judge), humans first
    assert len(rep["pairs"]) == 6
    assert all(p["a"].startswith("human:") for p in rep["pairs"])
    # humans are compared with the other two (leave-one-out): ties happen, e.g. h1 on r3 (h2 C, h3 I)
    h1 = next(e for e in rep["vs_reference"] if e["rater"] == "human:h1")
    assert h1["against"].startswith("other humans") and h1["correctness"]["n"] < 6


def test_report_bias_per_tested_model():
    rep = agreement_report(_dataset())
    b = {x["tested_model"]: x for x in rep["bias"]}
    # m1 = r1..r3: human CR (C, I, C) = 2/3, judge (C, I, I) = 1/3 -> bias -1/3
    assert b["m1"]["human_cr"] == approx(2 / 3) and b["m1"]["judge_cr"] == approx(1 / 3)
    assert b["m1"]["cr_bias"] == approx(-1 / 3)
    # m2 = r4..r6: human (I, C, I) = 1/3, judge (C, C, I) = 2/3 -> +1/3
    assert b["m2"]["cr_bias"] == approx(1 / 3)
    # m1 grades: human means (1 + .6 + .8667)/3 = .8222, judge (1 + .4 + .4)/3 = .6 -> -.2222
    assert b["m1"]["grade_bias"] == approx(0.6 - (1 + 0.6 + 2.6 / 3) / 3)


def test_ties_excluded_or_counted():
    rows = [_row("r1", "human", "a", True, 1.0), _row("r1", "human", "b", False, 0.6, ("E4",)),
            _row("r1", "judge", "J", False, 0.6, ("E4",)),
            _row("r2", "human", "a", True, 1.0), _row("r2", "judge", "J", True, 1.0)]
    rep = agreement_report(rows)
    j = next(e for e in rep["vs_reference"] if e["source"] == "judge")
    # r1's correctness is a tie -> only r2 counts; the judge and reference agree, both correct
    assert rep["reference"]["ties"]["is_correct"] == 1
    assert j["correctness"]["n"] == 1 and j["correctness"]["agreement"] == 1.0
    # no incorrect anywhere among the counted runs -> P, R, F1 null; kappa null (one label)
    assert j["correctness"]["precision"] is None and j["correctness"]["f1"] is None
    assert j["correctness"]["kappa"] is None
    assert j["error_set"]["n"] == 1
    rep = agreement_report(rows, tie_break="incorrect")
    j = next(e for e in rep["vs_reference"] if e["source"] == "judge")
    assert j["correctness"]["n"] == 2 and j["correctness"]["recall"] == 1.0


def test_breakdowns_and_group_by():
    rows = _dataset(judge_model="gemini-3-pro", prompt_version="v1")
    # a second prompt version that says "correct" everywhere
    for i in range(1, 7):
        rows.append(_row(f"r{i}", "judge", "J", True, 1.0, (), judge_model="gemini-3-pro", prompt_version="v2"))
    for r in rows:
        if r["source"] == "judge":
            r["dimension"] = "perception" if r["run_id"] in ("r1", "r2", "r3") else "reasoning"
    rep = agreement_report(rows, group_by=["prompt_version"])
    raters = [e["rater"] for e in rep["vs_reference"] if e["source"] == "judge"]
    assert raters == ["judge:J/gemini-3-pro@v1", "judge:J/gemini-3-pro@v2"]
    # per prompt version: humans (no prompt_version) are shared by both groups
    groups = {g["key"]["prompt_version"]: g for g in rep["groups"]}
    assert set(groups) == {"v1", "v2"}
    v2 = next(e for e in groups["v2"]["vs_reference"] if e["source"] == "judge")
    # v2 says correct on all six; reference incorrect on r2 r4 r6 -> agreement 3/6, recall 0,
    # precision null (never predicts incorrect), F1 0
    assert v2["correctness"]["agreement"] == approx(0.5)
    assert v2["correctness"]["precision"] is None and v2["correctness"]["recall"] == 0.0
    assert v2["correctness"]["f1"] == 0.0
    # automatic breakdowns: dimension (propagated to the human rows of each run) and model+version
    dims = {tuple(g["key"].values()): g for g in rep["breakdowns"]["dimension"]}
    assert set(dims) == {("perception",), ("reasoning",)} and dims[("perception",)]["n_runs"] == 3
    assert len(rep["breakdowns"]["judge_model+prompt_version"]) == 2


def test_duplicate_and_conflicting_rows_are_errors():
    with pytest.raises(RowError, match="second verdict"):
        agreement_report([_row("r1", "judge", "J", True, 1.0), _row("r1", "judge", "J", False, 0.2, ("E1",))])
    with pytest.raises(RowError) as exc:
        agreement_report([_row("r1", "judge", "J", True, 1.0, dimension="a"),
                          _row("r1", "human", "h", True, 1.0, dimension="b")])
    assert exc.value.field == "dimension" and exc.value.where == "row 2"


def test_empty_and_judge_only_give_nulls():
    rep = agreement_report([])
    assert rep["n_runs"] == 0 and rep["vs_reference"] == [] and rep["human_ceiling"]["fleiss"]["correctness_kappa"] is None
    rep = agreement_report([_row("r1", "judge", "J", True, 1.0)])
    j = rep["vs_reference"][0]
    assert j["n"] == 0 and j["correctness"]["agreement"] is None and j["grade"]["mae"] is None
    assert rep["bias"] == []


# --------------------------------------------------------------------------------------------
# The command
# --------------------------------------------------------------------------------------------


def _write(tmp_path, rows, extra_lines=()):
    p = tmp_path / "verdicts.jsonl"
    lines = [json.dumps(r) for r in rows] + list(extra_lines)
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p


def test_command_json(tmp_path):
    rows = _dataset()
    for r in rows:
        r["protocol"] = "holistic"
    path = _write(tmp_path, rows)
    out = StringIO()
    call_command("agreement", "--verdicts", str(path), "--group-by", "protocol", "--json", stdout=out)
    rep = json.loads(out.getvalue())
    j = next(e for e in rep["vs_reference"] if e["rater"] == "judge:J")
    assert j["correctness"]["kappa"] == approx(1 / 3, abs=1e-6)
    assert rep["human_ceiling"]["fleiss"]["correctness_kappa"] == approx(13 / 40, abs=1e-6)
    assert rep["group_by"] == ["protocol"] and rep["groups"][0]["key"] == {"protocol": "holistic"}
    assert j["flags"]["E1"]["f1"] is None  # null survives into JSON


def test_command_text(tmp_path):
    path = _write(tmp_path, _dataset())
    out = StringIO()
    call_command("agreement", "--verdicts", str(path), stdout=out)
    text = out.getvalue()
    assert "Against the human reference" in text and "judge:J" in text
    assert "Fleiss kappa over 6 runs" in text and "Judge bias per tested model" in text
    assert "-0.333" in text  # m1 correctness-rate bias


def test_command_bad_line_names_line_and_field(tmp_path):
    good = _dataset()[:2]
    bad = {"run_id": "r9", "source": "judge", "annotator": "J", "is_correct": True, "grade": "high"}
    path = _write(tmp_path, good + [bad])
    with pytest.raises(CommandError, match=r"line 3: field 'grade'"):
        call_command("agreement", "--verdicts", str(path), "--json", stdout=StringIO())
    path = _write(tmp_path, good, extra_lines=["", "{not json"])
    with pytest.raises(CommandError, match=r"line 4: field '\(json\)'"):
        call_command("agreement", "--verdicts", str(path), stdout=StringIO())
    with pytest.raises(CommandError, match="not found"):
        call_command("agreement", "--verdicts", str(tmp_path / "missing.jsonl"), stdout=StringIO())


def test_load_jsonl_skips_blank_lines():
    rows = load_jsonl(["", json.dumps(_row("r1", "human", "a", True, 1.0)), "   "])
    assert len(rows) == 1 and rows[0]["rater"] == "human:a"
