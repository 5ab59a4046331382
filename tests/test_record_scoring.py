"""Scoring built for the people doing it.

* the answer field by field (gold, prediction as the evaluator parses it, pass rule, reason);
* trajectories aligned by tool along the LCS the In-Order metric (T-ORD) uses;
* one verdict per person per record, revisable (each revision kept) until marked final, blind
  until then on every path (API, record page, queue, agreement), refused (409) after;
* nobody adjudicates a record they scored; an adjudication is no rater in agreement.

Hand-worked values come from ../shared/scoring-examples (tasks and agent_a's run; the expected
numbers in expected/per_task.jsonl).
"""
from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied
from support.judging import flags

from evaluation.agreement import agreement_report
from evaluation.blind import NotBlind
from evaluation.models import RunRecord, Verdict, VerdictRevision
from evaluation.scoring.explain import explain_answer
from evaluation.scoring.trajectory import align_by_tool, lcs_length
from evaluation.selectors.verdicts import agreement_rows
from evaluation.services.adjudication import adjudicate
from evaluation.services.verdicts import VerdictLocked, submit_human_verdict

pytestmark = pytest.mark.urls("support.judging")


# ----------------------------------------------------------------------------- field by field


def test_scalar_reason_restates_the_evaluators_rule():
    # agent_b's t3_s09_task1: 15.5 teams vs gold 12: |15.5-12| = 3.5 > 1 + 0.2*12 = 3.4 (fails);
    # 6 boats vs 4: |6-4| = 2 > 1 + 0.8 = 1.8 (fails) — per_task.jsonl gives both field scores 0.0
    ex = explain_answer({"teams_required": 15.5, "boats_required": 6}, {"teams_required": 12, "boats_required": 4},
                        {"teams_required": "scalar_count", "boats_required": "scalar_count"})
    rows = {r["field"]: r for r in ex["fields"]}
    assert rows["teams_required"]["why"] == "|15.5 − 12| = 3.5 > 1 + 0.2·|12| = 3.4"
    assert rows["teams_required"]["score"] == 0.0 and rows["teams_required"]["passed"] is False
    assert rows["boats_required"]["why"] == "|6 − 4| = 2 > 1 + 0.2·|4| = 1.8"
    assert rows["teams_required"]["tolerance"] == "|pred − gold| ≤ 1 + 0.2·|gold|"
    assert rows["teams_required"]["gold"] == 12 and rows["teams_required"]["pred"] == 15.5


def test_string_answer_is_parsed_as_the_evaluator_parses_it_and_the_raw_text_kept():
    # "<Answer>{...}</Answer>" is parsed to its JSON object (dora/evaluation.py's string parser);
    # 45% vs gold 0.4 (ratio_pct): 44.6 > 0.08, rescaled 0.45: |0.45-0.4| = 0.05 <= 0.2*0.4 = 0.08
    raw = '<Answer>{"buildings": 9, "pct": "45%"}</Answer>'
    ex = explain_answer(raw, {"buildings": 5, "pct": 0.4}, {"buildings": "scalar_count", "pct": "ratio_pct"})
    assert ex["raw"] == raw and ex["parsed"] == {"buildings": 9, "pct": "45%"} and ex["parsed_ok"]
    rows = {r["field"]: r for r in ex["fields"]}
    assert rows["buildings"]["why"] == "|9 − 5| = 4 > 1 + 0.2·|5| = 2"  # the issue's own example
    assert rows["pct"]["score"] == 1.0
    assert rows["pct"]["why"].endswith("rescaled to 0.45: |0.45 − 0.4| = 0.05 ≤ 0.08")
    unparsed = explain_answer("I think about nine", {"buildings": 5}, {"buildings": "scalar_count"})
    assert not unparsed["parsed_ok"] and unparsed["fields"][0]["why"] == "no value predicted"


def test_point_pixel_reason_gives_the_distance():
    # agent_a's t1_s06_task0: [473, 872] vs {461, 856}: sqrt(12^2 + 16^2) = 20 px <= 20 px: passes
    ex = explain_answer({"epicenter_px": [473, 872]}, {"epicenter_px": {"pixel_row": 461, "pixel_col": 856}},
                        {"epicenter_px": "point_pixel"})
    assert ex["fields"][0]["why"] == "20 px ≤ 20 px" and ex["fields"][0]["score"] == 1.0


# ----------------------------------------------------------------------------- LCS alignment


def test_a_skipped_step_does_not_shift_every_later_row():
    # agent_a's t3_s11_task0 skips two gold steps; per_task.jsonl: t_ord 0.6 (LCS 3 of 5 gold steps)
    gold = [{"call": "analysis.sortie_plan", "args": {"zone": "north"}}, {"call": "analysis.check_fuel", "args": {"liters": 500}},
            {"call": "analysis.sortie_plan", "args": {"zone": "south"}}, {"call": "analysis.check_fuel", "args": {"liters": 300}},
            {"call": "analysis.summarize", "args": {}}]
    pred = [{"call": "analysis.sortie_plan", "args": {"zone": "north"}}, {"call": "analysis.check_fuel", "args": {"liters": 900}},
            {"call": "analysis.summarize", "args": {}}, {"call": "vis.render_map", "args": {"layers": []}}]
    rows = align_by_tool(pred, gold)
    assert [(r["kind"], r["gold_index"], r["pred_index"]) for r in rows] == [
        ("match", 0, 0), ("match", 1, 1), ("skipped", 2, None), ("skipped", 3, None), ("match", 4, 2), ("inserted", None, 3)]
    assert sum(r["kind"] == "match" for r in rows) == lcs_length([s["call"] for s in gold], [s["call"] for s in pred]) == 3
    # 900 vs 500 liters: off by 400, tolerance 1 + 0.2*500 = 101 (the evaluator's argument rule)
    assert rows[1]["args"] == [{"name": "liters", "gold": 500, "pred": 900, "ok": False,
                                "why": "number off by 400 (tolerance 101)"}]


# ----------------------------------------------------------------------------- blind verdicts


@pytest.fixture
def rec(run_a):
    return run_a.records.get(question_id="t3_s09_task1")


def _post(client, rec, final, *on, grade=1.0, token=None):
    body = {"errors": flags(*on), "grade": grade, "final": final}
    if token:
        body["idempotency_key"] = token
    return client.post(f"/api/records/{rec.pk}/verdicts/", body, content_type="application/json")


@pytest.mark.django_db
def test_blind_until_final_then_no_change(rec, make_user, client):
    ana, bo = make_user("ana", "scorer"), make_user("bo", "scorer")
    submit_human_verdict(bo, rec, errors=flags("E4"), grade=0.4, reasons={"E4": "bo's secret note"})
    client.force_login(ana)
    # before any verdict: nothing shown, one hidden (API and page)
    got = client.get(f"/api/records/{rec.pk}/").json()
    assert got["verdicts"] == [] and got["verdicts_hidden"] == 1
    # a revisable verdict (final: false): still blind — only her own is shown
    first = _post(client, rec, False)
    assert first.status_code == 201 and first.json()["sealed_at"] is None
    got = client.get(f"/api/records/{rec.pk}/").json()
    assert [v["annotator"] for v in got["verdicts"]] == ["ana"] and got["verdicts_hidden"] == 1
    page = client.get(f"/records/{rec.pk}/").content.decode()
    assert "bo&#x27;s secret note" not in page and "bo's secret note" not in page and "1 verdict hidden" in page
    # revising: 200, the same verdict, revision 2; both states kept
    second = _post(client, rec, False, "E2", grade=0.6)
    assert second.status_code == 200 and second.json()["id"] == first.json()["id"] and second.json()["revision"] == 2
    v = Verdict.objects.get(pk=first.json()["id"])
    assert [(r.number, r.grade, r.errors["E2"]) for r in v.revisions.all()] == [(1, 1.0, False), (2, 0.6, True)]
    # while revisable it takes no part in agreement or adjudication
    assert not [r for r in agreement_rows() if r.get("annotator") == "ana"]
    # marking it final: the other verdicts appear, on the API and the page
    third = _post(client, rec, True, "E2", grade=0.6, token="tok-3")
    assert third.status_code == 200 and third.json()["sealed_at"] and third.json()["revision"] == 3
    got = client.get(f"/api/records/{rec.pk}/").json()
    assert sorted(v["annotator"] for v in got["verdicts"]) == ["ana", "bo"] and got["verdicts_hidden"] == 0
    assert "bo&#x27;s secret note" in client.get(f"/records/{rec.pk}/").content.decode()
    assert [r["annotator"] for r in agreement_rows() if r.get("annotator") == "ana"] == ["ana"]
    # peek and overwrite (the broken promise): refused, nothing changes
    again = _post(client, rec, True, grade=1.0)
    assert again.status_code == 409 and "final" in again.json()["detail"]
    assert Verdict.objects.filter(record=rec, annotator__username="ana").count() == 1
    assert VerdictRevision.objects.filter(verdict=v).count() == 3 and Verdict.objects.get(pk=v.pk).grade == 0.6
    # the final form resent (same token, a double click) returns the verdict and creates nothing
    resent = _post(client, rec, True, "E2", grade=0.6, token="tok-3")
    assert resent.status_code == 200 and resent.json()["revision"] == 3
    assert VerdictRevision.objects.filter(verdict=v).count() == 3


@pytest.mark.django_db
def test_a_verdict_posted_final_by_default_cannot_be_posted_again(rec, make_user, client):
    # the attack once found: "The same person can then post again (201, a second verdict)" — no longer
    client.force_login(make_user("sam", "scorer"))
    assert _post(client, rec, True).status_code == 201
    assert client.post(f"/api/records/{rec.pk}/verdicts/", {"errors": flags(), "grade": 0.2},
                       content_type="application/json").status_code == 409
    assert Verdict.objects.filter(record=rec, source="human").count() == 1


@pytest.mark.django_db
def test_reviewer_sees_all_but_is_blind_once_scoring(rec, make_user, client):
    rita, bo = make_user("rita", "reviewer"), make_user("bo", "scorer")
    submit_human_verdict(bo, rec, errors=flags(), grade=1.0)
    client.force_login(rita)
    assert len(client.get(f"/api/records/{rec.pk}/").json()["verdicts"]) == 1  # no verdict of hers: view_all
    page = client.get(f"/records/{rec.pk}/").content.decode()
    assert "you cannot score it blind" in page  # she has seen the others: the form is locked
    with pytest.raises(NotBlind, match="you cannot score it blind"):  # and the service refuses her too
        submit_human_verdict(rita, rec, errors=flags("E1"), grade=0.2, seal=False)
    # a reviewer who never looked scores blind, and then sees only her own verdict
    vera = make_user("vera", "reviewer")
    submit_human_verdict(vera, rec, errors=flags("E1"), grade=0.2, seal=False)
    client.force_login(vera)
    got = client.get(f"/api/records/{rec.pk}/").json()
    assert [v["annotator"] for v in got["verdicts"]] == ["vera"] and got["verdicts_hidden"] == 1


@pytest.mark.django_db
def test_agreement_is_not_open_to_scorers(make_user, client):
    client.force_login(make_user("sam", "scorer"))
    assert client.get("/api/agreement/").status_code == 403 and client.get("/agreement/").status_code == 403


@pytest.mark.django_db
def test_adjudication_locks_revisable_verdicts(rec, make_user):
    ana, bo, rita = make_user("ana", "scorer"), make_user("bo", "scorer"), make_user("rita", "reviewer")
    submit_human_verdict(ana, rec, errors=flags(), grade=1.0, seal=False)
    submit_human_verdict(bo, rec, errors=flags("E4"), grade=0.4)
    adjudicate(rita, rec, errors=flags("E4"), grade=0.4)
    with pytest.raises(VerdictLocked, match="adjudicated"):
        submit_human_verdict(ana, rec, errors=flags(), grade=0.8)
    with pytest.raises(PermissionDenied, match="you adjudicated this record"):
        submit_human_verdict(rita, rec, errors=flags(), grade=0.8)


# ----------------------------------------------------------------------------- adjudication


@pytest.mark.django_db
def test_nobody_adjudicates_a_record_they_scored(rec, make_user, maintainer, client):
    bo = make_user("bo", "scorer")
    submit_human_verdict(maintainer, rec, errors=flags(), grade=1.0)
    submit_human_verdict(bo, rec, errors=flags("E4"), grade=0.4)
    with pytest.raises(PermissionDenied, match="you scored t3_s09_task1, so you cannot adjudicate it"):
        adjudicate(maintainer, rec, errors=flags("E4"), grade=0.4)
    client.force_login(maintainer)
    api = client.post(f"/api/records/{rec.pk}/adjudication/", {"errors": flags("E4"), "grade": 0.4},
                      content_type="application/json")
    assert api.status_code == 403 and "cannot adjudicate" in api.json()["detail"]
    page = client.get(f"/adjudication/records/{rec.pk}/").content.decode()
    assert "so you cannot adjudicate it; another reviewer must" in page and 'id="adjudicate-submit"' not in page
    posted = client.post(f"/adjudication/records/{rec.pk}/", {"E4": "on", "grade": "0.4", "token": "t1"})
    assert posted.status_code == 400 and "cannot adjudicate" in posted.content.decode()
    queue = client.get("/adjudication/").content.decode()
    assert "you scored it" in queue
    assert not RunRecord.objects.get(pk=rec.pk).verdicts.filter(is_final=True).exists()


def test_adjudication_is_no_rater_and_is_compared_apart():
    # run r1: ana says correct, bo incorrect, the judge incorrect; maxine adjudicates: incorrect.
    # Raters: ana, bo, the judge (3) — never "maxine (final)". Against the adjudication: the judge
    # and bo agree (1.0), ana does not (0.0). The human-human pair is ana–bo only.
    rows = [
        {"run_id": "r1", "source": "human", "annotator": "ana", "is_correct": True, "grade": 1.0, "errors": flags()},
        {"run_id": "r1", "source": "human", "annotator": "bo", "is_correct": False, "grade": 0.4, "errors": flags("E4")},
        {"run_id": "r1", "source": "judge", "annotator": "m", "is_correct": False, "grade": 0.4, "errors": flags("E4")},
        {"run_id": "r1", "source": "human", "annotator": "maxine (final)", "is_correct": False, "grade": 0.4,
         "errors": flags("E4"), "final": True},
    ]
    rep = agreement_report(rows)
    assert sorted(r["rater"] for r in rep["raters"]) == ["human:ana", "human:bo", "judge:m"]
    assert not any("maxine" in p["a"] + p["b"] for p in rep["pairs"])
    assert [(p["a"], p["b"]) for p in rep["human_ceiling"]["pairwise"]] == [("human:ana", "human:bo")]
    apart = {r["rater"]: r["correctness"]["agreement"] for r in rep["vs_adjudication"]}
    assert apart == {"human:ana": 0.0, "human:bo": 1.0, "judge:m": 1.0}
    assert rep["n_adjudications"] == 1 and rep["reference"]["n_adjudicated"] == 1


# ----------------------------------------------------------------------------- honesty


@pytest.mark.django_db
def test_leaderboard_withholds_small_n_intervals_and_explains_abbreviations(client, run_a, maintainer):
    # agent_a has 2-3 tasks per dimension (< BOOTSTRAP_MIN_N = 5): no interval anywhere
    from evaluation.services.leaderboard import compute_bootstrap

    client.force_login(maintainer)
    assert "computing…" in client.get("/leaderboard/").content.decode()  # queued in the background
    compute_bootstrap()  # what the background task runs
    html = client.get("/leaderboard/").content.decode()
    table = html[html.index('id="bootstrap-table"'):html.index("</table>", html.index('id="bootstrap-table"'))]
    assert "n too small for an interval: n = 2 &lt; 5" in table and "] (n = " not in table  # no interval shown
    assert '<abbr title="tools in order: longest common subsequence' in html and 'id="metric-help"' in html
    assert client.get("/leaderboard/plot/dimensions.png").status_code == 200


@pytest.mark.django_db
def test_agreement_page_says_no_data_and_explains_its_columns(client, rec, make_user, maintainer):
    submit_human_verdict(make_user("ana", "scorer"), rec, errors=flags(), grade=1.0)
    client.force_login(maintainer)
    html = client.get("/agreement/").content.decode()
    assert "Cohen's kappa: agreement corrected for chance" in html and 'id="vs-adjudication"' in html
    assert "No adjudicated unit yet." in html
    for name in ("correctness", "flags", "grade"):
        assert client.get(f"/agreement/plots/{name}.png").status_code == 200


@pytest.mark.django_db
def test_queue_item_and_adjudication_pages_stay_blind(rec, make_user, maintainer, client):
    from evaluation.services.queue import claim_next, enqueue_records

    submit_human_verdict(make_user("bo", "scorer"), rec, errors=flags("E4"), grade=0.4, reasons={"E4": "bo-secret-note"},
                         reasoning="bo-secret-comment")
    enqueue_records(maintainer, [rec], 2)
    ana = make_user("ana", "scorer")
    item = claim_next(ana)
    assert item.record_id == rec.pk
    client.force_login(ana)
    page = client.get(f"/scoring/items/{item.pk}/").content.decode()
    assert page.count("bo-secret") == 0 and 'id="verdict-form"' in page
    assert client.get(f"/adjudication/records/{rec.pk}/").status_code == 403  # a scorer never opens it
    assert client.get("/api/adjudication/").status_code == 403
