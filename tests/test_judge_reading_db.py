"""Re-reading stored judge answers under the other reading: the report, agreement, the API, the
page and ``manage.py judge_report`` name the reading, and the apb reading makes no judge call
(the local judge server counts its requests; no JudgeCall row is added).

Hand-worked (the apb values from the benchmark's code, see tests/test_judge_reading_apb.py):

* record 1, holistic, ``{"is_correct": false, "grade": 0.6, "error_list": [0,0,0,0,0,0]}``:
  studio correct (no flag; judge's own false); apb incorrect (runner.py 186-187), grade 0.6;
* record 2, step-wise next-3: the first answer is a list whose second step has no score (the
  studio refuses it and re-asks), the second answer a clean list: studio correct, grade 1.0; apb
  reads the first answer (the benchmark never re-asks): E5, grade 0.0 (next3_evaluator.py 840-842),
  incorrect;
* record 3, tool-broken ``{"category": "Replacement"}``: studio replacement (correct); apb dropped
  (tool_broken_evaluator.py 325), a failed row;
* record 4, unsolvable ``{"verdict": "PASS"}``: studio pass (correct, grade 1.0 from the pass); apb
  read but uncounted: CR and grade None (runner.py 186-189).
"""
from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from evaluation.judge.report import judge_report
from evaluation.models import JudgeCall
from evaluation.selectors.judge_report import judge_report_rows
from evaluation.services.judge import judge_record
from evaluation.services.judge_settings import judge_setting_case

HOLISTIC = json.dumps({"is_correct": False, "grade": 0.6, "error_list": [0, 0, 0, 0, 0, 0], "reasoning": "ok"})
NO_SCORE = json.dumps([{"E4_LOGIC_ERROR": False, "score": 0.8, "reasoning": "a"},
                       {"E5_TOOL_USE_ERROR": True, "reasoning": "b"},
                       {"score": 1.0, "reasoning": "c"}])
CLEAN3 = json.dumps([{"E4_LOGIC_ERROR": False, "E5_TOOL_USE_ERROR": False, "score": 1.0, "reasoning": r}
                     for r in "abc"])


@pytest.fixture
def judged(run_a, judge_config, judge_server):  # noqa: F811
    recs = list(run_a.records.order_by("id"))
    judge_server.reply(HOLISTIC)
    judge_record(judge_config, recs[0])
    multi = next(r for r in recs[1:] if len(r.trajectory or []) >= 3)
    judge_server.reply(NO_SCORE)
    judge_server.reply(CLEAN3)
    judge_record(judge_config, multi, "stepwise", cut="middle", n_next=3)
    others = [r for r in recs[1:] if r.pk != multi.pk]
    pred = list(others[0].trajectory)
    judge_server.reply(json.dumps({"category": "Replacement", "reason": "swapped"}))
    judge_setting_case(judge_config, others[0], "tool-broken", {
        "prefix_trajectory": pred[:1], "failing_step_index": 0, "replacement_tool": "seg.flood_v2",
        "predicted_steps": pred[1:2]})
    judge_server.reply(json.dumps({"verdict": "PASS", "reasoning": "asks for the missing image"}))
    judge_setting_case(judge_config, others[1], "unsolvable", {"unsolvable_type": "information_missing"})
    return judge_server


def _groups(report):
    return {g["setting"]: g for g in report["groups"]}


@pytest.mark.django_db
def test_the_two_readings_of_the_same_stored_answers(judged):
    studio = judge_report(judge_report_rows(sources=("judge",)))
    assert studio["reading"] == "studio" and {g["reading"] for g in studio["groups"]} == {"studio"}
    s = _groups(studio)
    assert (s["holistic"]["cr_derived_pct"], s["holistic"]["cr_judge_pct"]) == (100.0, 0.0)
    assert (s["step-wise"]["cr_derived_pct"], s["step-wise"]["mean_grade"]) == (100.0, 1.0)
    assert s["tool-broken"]["tool_broken"]["shares_pct"]["replacement"] == 100.0
    assert s["unsolvable"]["unsolvable"]["information_missing"]["refusal_rate_pct"] == 100.0

    calls, requests = JudgeCall.objects.count(), len(judged.requests)
    apb = judge_report(judge_report_rows(reading="apb"), reading="apb")
    assert apb["reading"] == "apb" and {g["reading"] for g in apb["groups"]} == {"apb"}
    assert "apb" in apb["labels"]["cr_derived_pct"]
    a = _groups(apb)
    assert (a["holistic"]["n"], a["holistic"]["cr_derived_pct"], a["holistic"]["cr_judge_pct"],
            a["holistic"]["mean_grade"]) == (1, 0.0, 0.0, 0.6)
    assert (a["step-wise"]["cr_derived_pct"], a["step-wise"]["mean_grade"], a["step-wise"]["e_rates_pct"]["E5"]) == (
        0.0, 0.0, 100.0)
    assert (a["tool-broken"]["n"], a["tool-broken"]["failed"], a["tool-broken"]["tool_broken"]) == (0, 1, None)
    assert (a["unsolvable"]["n"], a["unsolvable"]["n_counted"], a["unsolvable"]["cr_derived_pct"],
            a["unsolvable"]["mean_grade"]) == (1, 0, None, None)
    # no judge call: the server saw nothing new and no JudgeCall row was added
    assert (JudgeCall.objects.count(), len(judged.requests)) == (calls, requests)


@pytest.mark.django_db
def test_command_api_page_and_agreement_name_the_reading_and_call_no_judge(judged, client, make_user):
    calls, requests = JudgeCall.objects.count(), len(judged.requests)
    out = io.StringIO()
    call_command("judge_report", "--reading", "apb", stdout=out)
    assert out.getvalue().splitlines()[0] == "reading: apb"
    out = io.StringIO()
    call_command("judge_report", "--reading", "apb", "--json", stdout=out)
    assert json.loads(out.getvalue())["reading"] == "apb"

    client.force_login(make_user("rita", "reviewer"))
    body = client.get("/api/judge/report/?reading=apb").json()
    assert body["reading"] == "apb" and _groups(body)["holistic"]["cr_derived_pct"] == 0.0
    assert client.get("/api/judge/report/").json()["reading"] == "studio"
    bad = client.get("/api/judge/report/?reading=paper")
    assert bad.status_code == 400 and bad.json()["field"] == "reading"
    page = client.get("/judge/report/?reading=apb")
    assert page.status_code == 200 and b'data-reading="apb"' in page.content
    assert b"correctness.png?reading=apb" in page.content
    assert client.get("/judge/report/plots/correctness.png?reading=apb").content[:4] == b"\x89PNG"
    assert client.get("/judge/report/?reading=paper").status_code == 400
    agree = client.get("/api/agreement/?reading=apb").json()
    # not counted by the benchmark's code: the unsolvable PASS (no is_correct) and the class given as a name
    assert agree["reading"] == "apb" and agree["reading_dropped"] == 2
    assert client.get("/api/agreement/").json()["reading"] == "studio"
    page = client.get("/agreement/?reading=apb")
    assert page.status_code == 200 and b'data-reading="apb"' in page.content
    assert b"2 judge verdicts not counted by it" in page.content and b"reading=apb" in page.content
    assert client.get("/agreement/plots/correctness.png?reading=apb").content[:4] == b"\x89PNG"
    assert (JudgeCall.objects.count(), len(judged.requests)) == (calls, requests)


def test_agreement_command_rereads_judge_rows_from_their_raw_answers(tmp_path):
    # hand-worked: one human says incorrect; the judge's raw answer says is_correct false beside no
    # flag. Studio row (as stored): correct -> disagrees with the human (agreement 0.0); apb re-read:
    # bool(False) -> incorrect -> agrees (1.0).
    raw = json.dumps({"is_correct": False, "grade": 0.6, "error_list": [0, 0, 0, 0, 0, 0]})
    rows = [{"run_id": "r1", "source": "human", "annotator": "ana", "is_correct": False, "grade": 0.6},
            {"run_id": "r1", "source": "judge", "annotator": "judge-m", "is_correct": True, "grade": 0.6,
             "protocol": "holistic", "raw": raw}]
    f = tmp_path / "v.jsonl"
    f.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    reports = {}
    for reading in ("studio", "apb"):
        out = io.StringIO()
        call_command("agreement", "--verdicts", str(f), "--reading", reading, "--json", stdout=out)
        reports[reading] = json.loads(out.getvalue())
        text = io.StringIO()
        call_command("agreement", "--verdicts", str(f), "--reading", reading, stdout=text)
        assert text.getvalue().startswith(f"reading: {reading}")
    judge = {r: next(e for e in reports[r]["vs_reference"] if e["source"] == "judge") for r in reports}
    assert reports["studio"]["reading"] == "studio" and judge["studio"]["correctness"]["agreement"] == 0.0
    assert reports["apb"]["reading"] == "apb" and judge["apb"]["correctness"]["agreement"] == 1.0


@pytest.mark.django_db
def test_a_verdict_copied_from_a_cached_call_is_reread_from_that_calls_first_answer(judged, judge_config, make_user):  # noqa: F811
    # the same agent run imported again: its record has the same inputs, so judging it copies the
    # cached verdict (no call); the copy keeps the last answer (CLEAN3), and the apb reading still
    # reads the call's first one (NO_SCORE: E5, grade 0.0), as for the original
    from conftest import SCORING_EXAMPLES

    from evaluation.models import Verdict
    from evaluation.services.runs import import_run_dir

    again = import_run_dir(make_user("importer2", "maintainer"), SCORING_EXAMPLES / "runs" / "agent_a", "agent_a2",
                           tasks_dir=SCORING_EXAMPLES / "tasks")
    original = Verdict.objects.get(protocol="stepwise-middle-3")
    twin = again.records.get(question_id=original.record.question_id)
    requests = len(judged.requests)
    copy = judge_record(judge_config, twin, "stepwise", cut="middle", n_next=3)
    assert copy.pk != original.pk and copy.raw == CLEAN3 and len(judged.requests) == requests
    rows = [r for r in judge_report_rows(reading="apb") if r["protocol"] == "stepwise-middle-3"]
    assert sorted((r["tested_model"], r["is_correct"], r["grade"], r["errors"]["E5"]) for r in rows) == [
        ("agent_a", False, 0.0, True), ("agent_a2", False, 0.0, True)]


def test_judge_report_from_a_file_never_labels_studio_rows_apb(tmp_path):
    # hand-worked: one judge row as the studio stores it (correct: no flag) whose raw answer says
    # is_correct false. Under the studio reading: CR (derived) 100 %. A row that names no reading
    # is the studio's stored reading, so `--reading apb` refuses it (re-read it first) instead of
    # printing the studio's 100 % under the apb label (the benchmark's runner.score counts
    # bool(False): 0 %); a row that says it was read under apb is reported under apb.
    from django.core.management.base import CommandError

    raw = json.dumps({"is_correct": False, "grade": 0.6, "error_list": [0, 0, 0, 0, 0, 0]})
    row = {"setting": "holistic", "judge": "judge-m@holistic_v2", "is_correct": True, "grade": 0.6,
           "errors": {f"E{i}": False for i in range(1, 7)}, "raw": raw}
    f = tmp_path / "v.jsonl"
    f.write_text(json.dumps(row) + "\n", encoding="utf-8")
    out = io.StringIO()
    call_command("judge_report", "--verdicts", str(f), "--json", stdout=out)
    report = json.loads(out.getvalue())
    assert report["reading"] == "studio" and report["groups"][0]["cr_derived_pct"] == 100.0
    with pytest.raises(CommandError, match="read under the 'studio' reading, not the report's 'apb'"):
        call_command("judge_report", "--verdicts", str(f), "--reading", "apb", "--json", stdout=io.StringIO())
    f.write_text(json.dumps(dict(row, reading="apb", is_correct=False)) + "\n", encoding="utf-8")
    out = io.StringIO()
    call_command("judge_report", "--verdicts", str(f), "--reading", "apb", "--json", stdout=out)
    report = json.loads(out.getvalue())
    assert report["reading"] == "apb" and report["groups"][0]["cr_derived_pct"] == 0.0
