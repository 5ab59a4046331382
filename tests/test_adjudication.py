"""Disagreement detection, the reviewers' queue, adjudication with its rationale rule, and the
agreement dashboard fed from the database.

Hand-worked: grades 1.0 and 0.6 differ by 0.4, the default threshold, so they disagree; 0.6 and
0.4 (Δ 0.2) do not; 0.6 and 0.2 differ by 0.39999999999999997 in floating point, which still
counts as 0.4.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import PermissionDenied
from support.judging import flags

from evaluation.agreement import agreement_report
from evaluation.disagreement import DisagreementRules, disagreement_reasons
from evaluation.models import Adjudication, Verdict
from evaluation.selectors.adjudication import adjudication_page, adjudication_queue
from evaluation.selectors.verdicts import agreement_rows
from evaluation.services.adjudication import adjudicate

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.urls("support.judging")


def v(ok, grade, *on):
    return {"is_correct": ok, "grade": grade, "errors": flags(*on)}


def test_disagreement_rules_on_hand_made_verdicts():
    r = DisagreementRules()
    assert disagreement_reasons(v(True, 1.0), v(False, 0.6, "E4"), r) == [
        "correctness: yes vs no", "grade: 1.0 vs 0.6 (Δ 0.4)", "flags: none vs E4"]
    assert disagreement_reasons(v(False, 0.6, "E4"), v(False, 0.4, "E4"), r) == []  # Δ 0.2, same flags
    assert disagreement_reasons(v(False, 0.6, "E4"), v(False, 0.6, "E5"), r) == ["flags: E4 vs E5"]
    assert disagreement_reasons(v(False, 0.6, "E5"), v(False, 0.2, "E5"), r) == ["grade: 0.6 vs 0.2 (Δ 0.4)"]
    assert disagreement_reasons(v(False, 0.6, "E4", "E5"), v(False, 0.6, "E5", "E4"), r) == []
    # thresholds are settings
    loose = DisagreementRules(grade_delta=0.6, on_flags=False)
    assert disagreement_reasons(v(True, 1.0), v(False, 0.6, "E4"), loose) == ["correctness: yes vs no"]
    assert disagreement_reasons(v(False, 0.8, "E5"), v(False, 0.4, "E4"), loose) == []


def test_disagreement_rules_need_no_django():
    """``evaluation.disagreement`` is pure: in a fresh interpreter it imports and applies its rules (given,
    not read from settings) without loading a django module. Hand-worked as above: correct 1.0 vs incorrect
    0.6 with E4 differs in all three."""
    code = ("import sys; from evaluation.disagreement import DisagreementRules, find_disagreements; "
            "a = {'is_correct': True, 'grade': 1.0, 'errors': {}}; b = {'is_correct': False, 'grade': 0.6, 'errors': {'E4': True}}; "
            "pairs = find_disagreements([a, b], DisagreementRules()); "
            "print(pairs[0]['reasons'], sorted(m for m in sys.modules if m == 'django' or m.startswith('django.')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['correctness: yes vs no', 'grade: 1.0 vs 0.6 (Δ 0.4)', 'flags: none vs E4'] []"


def test_thresholds_come_from_settings(settings):
    settings.STUDIO_DISAGREEMENT_GRADE_DELTA = 0.2
    settings.STUDIO_DISAGREEMENT_ON_FLAGS = False
    assert disagreement_reasons(v(False, 0.6, "E4"), v(False, 0.4, "E5")) == ["grade: 0.6 vs 0.4 (Δ 0.2)"]


@pytest.mark.django_db
def test_queue_holds_exactly_the_disagreements(disputed_records, django_assert_max_num_queries):
    recs = disputed_records["recs"]
    with django_assert_max_num_queries(3):
        queue = adjudication_queue()
    assert [x["record"].pk for x in queue] == [recs[0].pk, recs[2].pk]
    assert queue[0]["reasons"] == ["flags"] and queue[1]["reasons"] == ["correctness", "flags", "grade"]


@pytest.mark.django_db
def test_the_queue_pages_by_candidate_records_oldest_first(disputed_records, make_user, client):
    # candidates: records with two considered verdicts or more (r0, r1, r2; r4's judge verdict
    # failed); of a page of two candidates (r0, r1) only r0 disagrees, the next page starts after r1
    recs = disputed_records["recs"]
    first, after = adjudication_page(2)
    assert [x["record"].pk for x in first] == [recs[0].pk] and after == recs[1].pk
    second, _ = adjudication_page(2, after)
    assert [x["record"].pk for x in second] == [recs[2].pk]
    whole, end = adjudication_page(100)
    assert [x["record"].pk for x in whole] == [recs[0].pk, recs[2].pk] and end is None
    client.force_login(make_user("rita", "reviewer"))
    page = client.get(f"/adjudication/?after={recs[1].pk}").content.decode()
    assert f"/adjudication/records/{recs[2].pk}/" in page and f"/adjudication/records/{recs[0].pk}/" not in page
    assert 'id="adjudication-first"' in page and 'id="adjudication-next"' not in page
    assert client.get("/adjudication/?after=nonsense").status_code == 200  # read as the first page


@pytest.mark.django_db
def test_adjudication_rationale_rule_and_provenance(disputed_records, make_user, maintainer):
    recs = disputed_records["recs"]
    rev = make_user("rita", "reviewer")
    with pytest.raises(PermissionDenied):
        adjudicate(disputed_records["ana"], recs[0], errors=flags("E4"), grade=0.6)
    # siding with ana (E4, 0.6) overrides nobody: no rationale needed
    adj = adjudicate(rev, recs[0], errors=flags("E4"), grade=0.6, reasons={"E4": "step 2 uses a later mask"})
    assert not adj.overrides_all and adj.rationale == ""
    assert adj.final_verdict.is_final and adj.final_verdict.annotator == rev and adj.final_verdict.source == "human"
    assert sorted(x.annotator.username for x in adj.considered.all()) == ["ana", "bo"]
    assert recs[0].pk not in [x["record"].pk for x in adjudication_queue()]

    # on r2 (human: correct 1.0; judge: E5 0.6) a final E6 verdict overrides both: a rationale is required
    with pytest.raises(ValueError, match="rationale"):
        adjudicate(rev, recs[2], errors=flags("E6"), grade=0.2)
    assert not Adjudication.objects.filter(record=recs[2]).exists()
    adj2 = adjudicate(rev, recs[2], errors=flags("E6"), grade=0.2, rationale="step 1 calls seg.flood_depth, not a tool")
    assert adj2.overrides_all and adj2.considered.count() == 2
    # a later decision replaces the final verdict as the reference; the first decision stays as
    # provenance, still an adjudicated verdict (never turned into rita's person verdict, a rater)
    adj3 = adjudicate(maintainer, recs[2], errors=flags("E5"), grade=0.6)
    assert not adj3.overrides_all  # agrees with the judge (the earlier final verdict is not considered)
    finals = list(Verdict.objects.filter(record=recs[2], is_final=True).order_by("id"))
    assert finals == [adj2.final_verdict, adj3.final_verdict] and Adjudication.objects.filter(record=recs[2]).count() == 2
    unit = [r for r in agreement_rows() if r["run_id"] == f"{recs[2].pk}:holistic" and r["source"] == "human"]
    assert [(r["annotator"], r.get("final")) for r in unit if r.get("final")] == [("mia (final)", True)]


@pytest.mark.django_db
def test_agreement_rows_and_report_from_the_database(disputed_records, make_user):
    recs = disputed_records["recs"]
    rev = make_user("rita", "reviewer")
    adjudicate(rev, recs[0], errors=flags("E4"), grade=0.6)
    rows = agreement_rows()
    judge_rows = [r for r in rows if r["source"] == "judge"]
    # r2 holistic and r3 step-wise (the failed one is left out)
    assert sorted(r["protocol"] for r in judge_rows) == ["holistic", "stepwise-middle-1"]
    assert all(r["judge_model"] == "judge-m" and r["prompt_version"] == "holistic_v1" for r in judge_rows)
    assert [r["annotator"] for r in rows if r.get("final")] == ["rita (final)"]
    report = agreement_report(rows)
    judge = next(x for x in report["vs_reference"] if x["rater"].startswith("judge:"))
    # the judge meets the human reference on one unit only (r2): human correct, judge incorrect
    assert judge["correctness"]["n"] == 1 and judge["correctness"]["agreement"] == 0.0
    assert report["reference"]["n_adjudicated"] == 1


@pytest.mark.django_db
def test_pages_render(disputed_records, make_user, client, django_assert_max_num_queries):
    recs = disputed_records["recs"]
    rev = make_user("rita", "reviewer")
    client.force_login(rev)
    with django_assert_max_num_queries(10):
        page = client.get("/adjudication/")
    assert page.status_code == 200 and recs[0].question_id in page.content.decode()
    detail = client.get(f"/adjudication/records/{recs[0].pk}/").content.decode()
    assert 'id="verdict-grid"' in detail and 'id="aligned-steps"' in detail
    assert "perception.classify_damage" in detail  # the trajectories side by side
    assert "flags: E4 vs E5" in detail
    # overriding everyone without a rationale: refused, the form keeps the input
    bad = client.post(f"/adjudication/records/{recs[0].pk}/", {"E6": "on", "grade": "0.2", "token": "t1"})
    assert bad.status_code == 400 and "rationale" in bad.content.decode()
    ok = client.post(f"/adjudication/records/{recs[0].pk}/",
                     {"E6": "on", "grade": "0.2", "rationale": "both missed the fake tool", "token": "t2"})
    assert ok.status_code == 302 and ok["Location"] == f"/adjudication/records/{recs[2].pk}/"
    again = client.post(f"/adjudication/records/{recs[0].pk}/",
                        {"E6": "on", "grade": "0.2", "rationale": "both missed the fake tool", "token": "t2"})
    assert again.status_code == 302 and Adjudication.objects.filter(record=recs[0]).count() == 1  # resubmission

    with django_assert_max_num_queries(12):
        dash = client.get("/agreement/")
    html = dash.content.decode()
    assert dash.status_code == 200 and 'id="vs-reference"' in html and "judge:judge-m" in html
    for name in ("correctness", "flags", "grade"):
        png = client.get(f"/agreement/plots/{name}.png")
        assert png.status_code == 200 and png["Content-Type"] == "image/png" and png.content[:4] == b"\x89PNG"
    assert client.get("/agreement/plots/nope.png").status_code == 404
    client.force_login(disputed_records["ana"])
    assert client.get("/agreement/").status_code == 403
    assert client.get("/adjudication/").status_code == 403


@pytest.mark.django_db
def test_agreement_rows_read_flags_and_the_decided_rule_from_the_stored_columns(disputed_records):
    """agreement_rows reads ``errors`` as JSON text and ``sealed_at`` only as set or not: the rows
    are those of the stored values. A person's verdict still revisable (not sealed, not final) is
    no row; a flag counts when its stored value is truthy (bool(value), as before: 1 and "yes"
    set, 0 and null not); a verdict with no flags stored has ``errors`` None."""
    recs = disputed_records["recs"]
    ana_r0 = Verdict.objects.get(record=recs[0], annotator__username="ana")
    bo_r0 = Verdict.objects.get(record=recs[0], annotator__username="bo")
    Verdict.objects.filter(pk=ana_r0.pk).update(sealed_at=None, is_final=False)
    Verdict.objects.filter(pk=bo_r0.pk).update(errors={"E1": 1, "E2": 0, "E3": "yes", "E4": None})
    Verdict.objects.filter(record=recs[1], annotator__username="ana").update(errors={})
    rows = {(r["run_id"], r["annotator"]): r for r in agreement_rows()}
    assert (f"{recs[0].pk}:holistic", "ana") not in rows  # revisable: no decision yet
    assert rows[(f"{recs[0].pk}:holistic", "bo")]["errors"] == {
        "E1": True, "E2": False, "E3": True, "E4": False, "E5": False, "E6": False}
    assert rows[(f"{recs[1].pk}:holistic", "ana")]["errors"] is None
    assert rows[(f"{recs[1].pk}:holistic", "bo")]["errors"]["E4"] is True
