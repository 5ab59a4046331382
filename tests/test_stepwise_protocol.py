"""The planning benchmark's step-wise protocol: cases cut from a gold trajectory, the planner
export and the prediction import (pure), then judged, scored by a person and counted in agreement
(database).

Cut rule (next1/next2/next3 evaluators at 6d0ff248): j = max(1, int(n * ratio)), ratio early 0.25,
middle 0.5, late 0.75; the k expected steps must fit (j + k <= n).  Worked by hand below.
"""
from __future__ import annotations

import json

import pytest

from evaluation.judge.stepwise import (
    StepwiseCaseError,
    build_cases,
    cut_index,
    export_jsonl,
    parse_predictions,
    parse_protocol_label,
    protocol_label,
)


@pytest.mark.parametrize("n, position, k, j", [
    (4, "early", 1, 1), (4, "middle", 1, 2), (4, "late", 1, 3),   # int(1), int(2), int(3)
    (3, "early", 1, 1),                                            # int(0.75) = 0 -> at least 1
    (3, "middle", 2, 1),                                           # next2: n // 2 = 1, steps 1 and 2
    (5, "middle", 3, 2),                                           # next3: n // 2 = 2, steps 2, 3, 4
    (7, "late", 1, 5),                                             # int(5.25)
])
def test_cut_index(n, position, k, j):
    assert cut_index(n, position, k) == j


@pytest.mark.parametrize("n, position, k", [(4, "middle", 3), (2, "middle", 2), (1, "early", 1), (4, "late", 2)])
def test_no_case_when_the_expected_steps_do_not_fit(n, position, k):
    with pytest.raises(StepwiseCaseError, match="no .* case"):
        cut_index(n, position, k)


GOLD = [{"call": f"t{i}", "args": {}, "obs": {"v": i}} for i in range(4)]


def test_build_and_export():
    cases, skipped = build_cases([{"question_id": "q1", "question": "Q?", "tools": ["t0"], "trajectory": GOLD},
                                  {"question_id": "q2", "question": "Q2", "tools": [], "trajectory": GOLD[:1]}],
                                 positions=("middle",), horizons=(1, 3))
    assert [c["case_id"] for c in cases] == ["q1::middle::1"]  # k = 3 does not fit 4 steps at j = 2
    assert len(skipped) == 3  # q1 k=3, q2 k=1, q2 k=3
    c = cases[0]
    assert c["cut_index"] == 2 and c["prefix"] == GOLD[:2] and c["expected"] == GOLD[2:3] and c["remaining"] == GOLD[3:]
    line = json.loads(export_jsonl(cases))
    assert line["trajectory_prefix"] == GOLD[:2] and line["prediction_horizon"] == 1
    assert "expected" not in line and "remaining" not in line and '"t2"' not in json.dumps(line)
    assert protocol_label("middle", 1) == "stepwise-gold-middle-1"
    assert parse_protocol_label("stepwise-gold-late-3") == ("late", 3)
    assert parse_protocol_label("stepwise-middle-1") is None  # the studio's own-cut protocol


@pytest.mark.parametrize("text, match", [
    ("not json", "line 1: not JSON"),
    ('{"predicted_steps": []}', "line 1: case_id is missing"),
    ('{"case_id": "zz", "predicted_steps": []}', "not an exported case"),
    ('{"case_id": "a"}', "predicted_steps is missing"),
    ('{"case_id": "a", "predicted_steps": [1]}', r"predicted_steps\[0\] is not a step"),
    ('{"case_id": "a", "predicted_steps": []}\n{"case_id": "a", "predicted_steps": []}', "line 2: .* twice"),
])
def test_prediction_file_errors(text, match):
    with pytest.raises(StepwiseCaseError, match=match):
        parse_predictions(text, ["a"], source="p.jsonl")


def test_prediction_shapes():
    got = parse_predictions('{"case_id": "a", "predicted_steps": {"predicted_steps": [{"call": "x"}]}}\n\n'
                            '{"case_id": "b", "predicted_steps": "I would call x"}', ["a", "b"])
    assert got == {"a": [{"call": "x"}], "b": "I would call x"}


# --------------------------------------------------------------------------------------------
# database: import, judge, human verdict, agreement
# --------------------------------------------------------------------------------------------

@pytest.mark.django_db
def test_cases_are_judged_scored_and_compared(run_a, judge_config, judge_server, make_user):
    from evaluation.models import Verdict
    from evaluation.selectors.adjudication import considered
    from evaluation.selectors.verdicts import agreement_rows
    from evaluation.services.judge import judge_record
    from evaluation.services.stepwise import import_stepwise_predictions, stepwise_cases
    from evaluation.services.verdicts import submit_human_verdict

    cases, _ = stepwise_cases(run_a, ("middle",), (1,))
    assert cases and all(c["cut_index"] == max(1, len(c["prefix"] + c["expected"] + c["remaining"]) // 2) for c in cases)
    lines = "\n".join(json.dumps({"case_id": c["case_id"], "predicted_steps": c["expected"]}) for c in cases)
    owner = make_user("imp", "maintainer")
    with pytest.raises(StepwiseCaseError, match="no prediction"):
        import_stepwise_predictions(owner, run_a, "planner-x", lines.splitlines()[0])
    assert run_a.agent.__class__.objects.filter(name="planner-x").count() == 0  # nothing half-written
    new = import_stepwise_predictions(owner, run_a, "planner-x", lines)
    assert new.records.count() == len(cases) and new.scoring_mode == "stepwise"
    rec = new.records.order_by("id").first()
    case = rec.gold["stepwise"]
    assert case["protocol"] == "stepwise-gold-middle-1" and rec.trajectory == case["expected"]

    judge_server.reply(json.dumps({"is_correct": True, "grade": 1.0, "error_list": [0] * 6, "reasoning": "same step"}))
    v = judge_record(judge_config, rec)  # the default protocol; the case record uses its own
    assert (v.protocol, v.prompt_version, v.setting, v.regime) == ("stepwise-gold-middle-1", "stepwise_v2", "step-wise", "step-wise")
    assert "Expert trajectory so far (steps 0 to" in v.prompt

    person = make_user("sara", "scorer")
    h = submit_human_verdict(person, rec, errors={"E4": True}, grade=0.6, reasoning="wrong mask")
    assert (h.protocol, h.setting) == ("stepwise-gold-middle-1", "step-wise")
    units = {(r["source"], r["run_id"]) for r in agreement_rows() if r["run_id"].startswith(f"{rec.pk}:")}
    assert units == {("judge", f"{rec.pk}:stepwise-gold-middle-1"), ("human", f"{rec.pk}:stepwise-gold-middle-1")}
    assert {x.pk for x in considered(Verdict.objects.filter(record=rec))} == {v.pk, h.pk}


@pytest.mark.django_db
def test_planner_runs_stay_off_the_dora_leaderboard(run_a, make_user):
    from evaluation.selectors.leaderboard import leaderboard_rows, leaderboard_runs
    from evaluation.services.stepwise import import_stepwise_predictions, stepwise_cases

    cases, _ = stepwise_cases(run_a)
    lines = "\n".join(json.dumps({"case_id": c["case_id"], "predicted_steps": "stop here"}) for c in cases)
    new = import_stepwise_predictions(make_user("imp", "maintainer"), run_a, "planner-y", lines)
    assert new.records.filter(predicted_answer="stop here", trajectory=[]).count() == len(cases)  # raw text kept
    assert [r["run_id"] for r in leaderboard_runs()] == [run_a.pk]
    assert {r["run_id"] for r in leaderboard_rows(extras=False)} == {run_a.pk}


@pytest.mark.django_db
def test_api_export_and_import(run_a, client, make_user):
    client.force_login(make_user("imp", "maintainer"))
    got = client.get(f"/api/runs/{run_a.pk}/stepwise-cases/?positions=middle&horizons=1")
    assert got.status_code == 200
    cases = got.json()["cases"]
    assert cases and all(c["prediction_horizon"] == 1 and "expected" not in c for c in cases)
    assert client.get(f"/api/runs/{run_a.pk}/stepwise-cases/?positions=sideways").status_code == 400
    lines = "\n".join(json.dumps({"case_id": c["case_id"], "predicted_steps": []}) for c in cases)
    bad = client.post(f"/api/runs/{run_a.pk}/stepwise-predictions/",
                      {"planner": "p", "predictions": '{"case_id": "nope", "predicted_steps": []}'},
                      content_type="application/json")
    assert bad.status_code == 400 and "line 1" in bad.json()["detail"]
    ok = client.post(f"/api/runs/{run_a.pk}/stepwise-predictions/", {"planner": "p", "predictions": lines},
                     content_type="application/json")
    assert ok.status_code == 201 and ok.json()["records"] == len(cases)
    client.force_login(make_user("sam", "scorer"))
    denied = client.post(f"/api/runs/{run_a.pk}/stepwise-predictions/", {"planner": "p", "predictions": lines},
                         content_type="application/json")
    assert denied.status_code == 403
