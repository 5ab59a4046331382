"""The judge's own is_correct and the setting stored with a judge verdict, and the aggregate
report over stored verdicts through the API, ``manage.py judge_report`` and the page.

Hand-worked: agent_a's first record judged holistically with an answer whose is_correct is true
but whose error_list sets E5 (count 2): derived incorrect, judge's true; a second record judged
step-wise (middle cut, 3-step list: clean, E4 at 0.6, clean): incorrect, grade 0.6.  Report:
holistic group n=1, CR derived 0.0 %, CR judge 100.0 %, E5 100.0 %; step-wise group n=1, grade 0.6,
E4 100.0 %.
"""
from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from evaluation.judge.report import judge_report
from evaluation.selectors.judge_report import judge_report_rows
from evaluation.services.judge import judge_record

SAYS_CORRECT = json.dumps({"is_correct": True, "grade": 0.8, "error_list": [0, 0, 0, 0, 2, 0],
                           "reasoning": "GSD passed twice as 10 m"})
THREE_STEPS = json.dumps([
    {"E1_GOAL_MISALIGNMENT": False, "E4_LOGIC_ERROR": False, "score": 1.0, "reasoning": "a", "is_correct": "YES"},
    {"E4_LOGIC_ERROR": True, "score": 0.6, "reasoning": "b", "is_correct": "NO"},
    {"E4_LOGIC_ERROR": False, "score": 1.0, "reasoning": "c", "is_correct": "YES"},
])


@pytest.fixture
def judged(run_a, judge_config, judge_server):
    recs = list(run_a.records.order_by("id"))
    judge_server.reply(SAYS_CORRECT)
    h = judge_record(judge_config, recs[0])
    multi = next(r for r in recs if len(r.trajectory or []) >= 3)
    judge_server.reply(THREE_STEPS)
    s = judge_record(judge_config, multi, "stepwise", cut="middle", n_next=3)
    return h, s


@pytest.mark.django_db
def test_stored_fields(judged):
    h, s = judged
    h.refresh_from_db()
    s.refresh_from_db()
    assert (h.setting, h.regime, h.is_correct, h.judge_is_correct) == ("holistic", "holistic", False, True)
    assert h.details["error_counts"] == {"E5": 2} and h.outcome == ""
    assert (s.setting, s.regime, s.is_correct, s.judge_is_correct, s.grade) == ("step-wise", "step-wise", False, False, 0.6)
    assert s.details["n_steps"] == 3 and s.details["step_grades"] == [1.0, 0.6, 1.0]
    assert s.errors["E4"] is True


@pytest.mark.django_db
def test_report_over_stored_verdicts(judged, client, make_user):
    groups = {g["setting"]: g for g in judge_report(judge_report_rows())["groups"]}
    h, s = groups["holistic"], groups["step-wise"]
    assert (h["n"], h["cr_derived_pct"], h["cr_judge_pct"], h["e_rates_pct"]["E5"]) == (1, 0.0, 100.0, 100.0)
    # judged under the studio's own-trajectory cut, which is not a benchmark split
    assert (s["n"], s["mean_grade"], s["e_rates_pct"]["E4"], s["split"]) == (1, 0.6, 100.0, "step_wise_own_cut")
    assert s["protocol"] == "stepwise-middle-3"
    assert h["judge"] == "local v1@holistic_v2" and h["tested_model"] == "agent_a"

    out = io.StringIO()
    call_command("judge_report", "--json", stdout=out)
    assert json.loads(out.getvalue())["groups"] == judge_report(judge_report_rows())["groups"]

    client.force_login(make_user("rita", "reviewer"))
    api = client.get("/api/judge/report/")
    assert api.status_code == 200 and len(api.json()["groups"]) == 2
    page = client.get("/judge/report/")
    assert page.status_code == 200 and b"CR % judge" in page.content and b"step_wise_own_cut" in page.content
    png = client.get("/judge/report/plots/correctness.png")
    assert png.status_code == 200 and png.content[:4] == b"\x89PNG"
    client.force_login(make_user("sam", "scorer"))
    assert client.get("/api/judge/report/").status_code == 403


def test_command_reads_a_file_and_names_the_bad_line(tmp_path):
    f = tmp_path / "v.jsonl"
    f.write_text(json.dumps({"setting": "unsolvable", "judge": "j", "is_correct": True, "grade": 1.0,
                             "unsolvable_type": "tool_removal"}) + "\n"
                 + json.dumps({"setting": "unsolvable", "judge": "j", "is_correct": False, "grade": 0.0,
                               "unsolvable_type": "tool_removal"}) + "\n")
    out = io.StringIO()
    call_command("judge_report", "--verdicts", str(f), "--json", stdout=out)
    g = json.loads(out.getvalue())["groups"][0]
    assert g["unsolvable"]["tool_removal"]["refusal_rate_pct"] == 50.0  # 1 of 2
    f.write_text(json.dumps({"setting": "holistic", "is_correct": "maybe"}) + "\n")
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="row 0: is_correct"):
        call_command("judge_report", "--verdicts", str(f))


@pytest.mark.django_db
def test_page_shows_robustness_tables(run_a, client, make_user):
    # stored verdicts of the robustness settings (as variants will write them): two tool-broken
    # (replacement, retry -> 50.0 % each), two unsolvable of one type (pass, fail -> refusal 50.0 %)
    from evaluation.models import Verdict

    recs = list(run_a.records.order_by("id")[:4])
    common = dict(source="judge", judge_name="m@v", status="ok", errors={c: False for c in ("E1", "E2", "E3", "E4", "E5", "E6")})
    Verdict.objects.create(record=recs[0], setting="tool-broken", regime="step-wise", outcome="replacement",
                           is_correct=True, judge_is_correct=True, grade=1.0, **common)
    Verdict.objects.create(record=recs[1], setting="tool-broken", regime="step-wise", outcome="retry",
                           is_correct=False, judge_is_correct=False, grade=0.0, **common)
    for rec, ok in ((recs[2], True), (recs[3], False)):
        Verdict.objects.create(record=rec, setting="unsolvable", regime="holistic", is_correct=ok, judge_is_correct=ok,
                               grade=1.0 if ok else 0.0, details={"unsolvable_type": "tool_removal"}, **common)
    groups = {g["setting"]: g for g in judge_report(judge_report_rows())["groups"]}
    assert groups["tool-broken"]["tool_broken"]["shares_pct"]["replacement"] == 50.0
    assert groups["tool-broken"]["e_rates_pct"]["E1"] is None  # a classified answer judges no flags
    assert groups["unsolvable"]["unsolvable"]["tool_removal"]["refusal_rate_pct"] == 50.0
    client.force_login(make_user("rita", "reviewer"))
    page = client.get("/judge/report/").content.decode()
    assert 'id="tool-broken"' in page and 'id="unsolvable"' in page and "missing tool" in page
    for name in ("correctness", "errors", "tool-broken", "unsolvable"):
        png = client.get(f"/judge/report/plots/{name}.png")
        assert png.status_code == 200 and png.content[:4] == b"\x89PNG", name
    assert client.get("/judge/report/plots/nope.png").status_code == 404


@pytest.mark.django_db
def test_nav_marks_the_report_not_the_judges(client, make_user):
    client.force_login(make_user("rita", "reviewer"))
    page = client.get("/judge/report/").content.decode()
    # the report's entry is the active one; Judges (maintainers only, studio_nav) is not offered to a reviewer
    assert 'href="/judge/report/" class="active"' in page and 'href="/judge/configs/"' not in page


@pytest.mark.django_db
def test_robustness_cases_judged_stored_and_reported(run_a, judge_config, judge_server):
    # hand-worked: a tool-broken answer of class 2 (alternative, correct); an unsolvable FAIL with
    # no flag (incorrect, type tool_removal); a tool-extraneous answer flagging E5 whose agent
    # trajectory calls the distractor once -> distractor use 100.0 %, ExtUse 1
    from evaluation.services.judge import JudgeInputError
    from evaluation.services.judge_settings import judge_setting_case

    recs = list(run_a.records.order_by("id")[:3])
    pred = list(recs[0].trajectory)
    judge_server.reply('{"category": 2, "category_name": "alternative", "is_correct": true, "reason": "uses another tool"}')
    tb = judge_setting_case(judge_config, recs[0], "tool-broken", {
        "prefix_trajectory": pred[:1], "failing_step_index": 0, "replacement_tool": "seg.flood_v2",
        "predicted_steps": pred[1:2]})
    assert (tb.protocol, tb.setting, tb.regime, tb.outcome, tb.is_correct, tb.grade) == (
        "tool-broken", "tool-broken", "step-wise", "alternative", True, 1.0)
    assert "`seg.flood_v2`" in tb.prompt and tb.prompt_version == "tool_broken_v1"

    judge_server.reply('{"is_correct": false, "grade": 0.0, "error_list": [0,0,0,0,0,0], "reasoning": "plans anyway"}')
    un = judge_setting_case(judge_config, recs[1], "unsolvable", {"unsolvable_type": "tool_removal"})
    assert (un.setting, un.is_correct, un.judge_is_correct, un.details["unsolvable_type"]) == (
        "unsolvable", False, False, "tool_removal")

    distractor = pred[0]["call"]
    judge_server.reply('{"is_correct": false, "grade": 0.6, "error_list": [0,0,0,0,1,0], "reasoning": "distractor"}')
    ex = judge_setting_case(judge_config, recs[2], "tool-extraneous",
                            {"distractors": [distractor], "predicted_trajectory": pred[:1]})
    assert (ex.protocol, ex.regime, ex.errors["E5"]) == ("tool-extraneous-h", "holistic", True)
    assert len(ex.details["distractors_used"]) == 1
    # the same case again: a cache hit, no call
    n_calls = len(judge_server.requests)
    assert judge_setting_case(judge_config, recs[2], "tool-extraneous",
                              {"distractors": [distractor], "predicted_trajectory": pred[:1]}).pk == ex.pk
    assert len(judge_server.requests) == n_calls
    with pytest.raises(JudgeInputError, match="lacks unsolvable_type"):
        judge_setting_case(judge_config, recs[1], "unsolvable", {})

    groups = {g["setting"]: g for g in judge_report(judge_report_rows())["groups"]}
    assert groups["tool-broken"]["tool_broken"]["shares_pct"]["alternative"] == 100.0
    assert groups["unsolvable"]["unsolvable"]["tool_removal"]["refusal_rate_pct"] == 0.0
    assert groups["tool-extraneous"]["distractors"] == {"n": 1, "use_rate_pct": 100.0, "ext_use": 1}
