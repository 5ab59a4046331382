"""The record API shows field by field what the record page shows: gold,
prediction as the evaluator parses it, raw text, type, tolerance, score, verdict and reason, the
steps aligned by tool and the map geometry, from the one selector the page uses
(:func:`evaluation.selectors.runs.record_evidence`).

Hand-worked: agent_a's t3_s09_task1 answers 14.4 teams for a gold 12, a ``scalar_count``:
|14.4 − 12| = 2.4 ≤ 1 + 0.2·|12| = 3.4, so it passes with score 1.
"""
from __future__ import annotations

import pytest

from evaluation.models import RunRecord

pytestmark = pytest.mark.urls("support.judging")


@pytest.mark.django_db
def test_record_api_field_by_field_matches_the_page(run_a, make_user, client):
    rec = run_a.records.get(question_id="t3_s09_task1")
    client.force_login(make_user("ana", "scorer"))
    ev = client.get(f"/api/records/{rec.pk}/").json()["evidence"]
    assert ev["has_gold_answer"] is True and ev["parsed_ok"] is True
    row = next(f for f in ev["fields"] if f["field"] == "teams_required")
    assert (row["gold"], row["pred"], row["type"]) == (12, 14.4, "scalar_count")
    assert row["tolerance"] == "|pred − gold| ≤ 1 + 0.2·|gold|"
    assert row["why"] == "|14.4 − 12| = 2.4 ≤ 1 + 0.2·|12| = 3.4"
    assert row["score"] == 1.0 and row["passed"] is True and row["kind"] == "field"
    assert ev["parsed"]["teams_required"] == 14.4
    assert isinstance(ev["steps"], list) and {s["kind"] for s in ev["steps"]} <= {"match", "skipped", "inserted"}
    # the page renders the same rows (same selector): each field with the same reason
    html = client.get(f"/records/{rec.pk}/").content.decode()
    for f in ev["fields"]:
        assert f'data-field="{f["field"]}"' in html
    assert "|14.4 − 12| = 2.4 ≤ 1 + 0.2·|12| = 3.4" in html


@pytest.mark.django_db
def test_record_api_raw_text_and_point_geometry(run_a, make_user, client):
    # a text answer with embedded JSON: raw is the text, parsed the object inside it; a point pair
    # 0.001° of latitude apart = 111.195 m on the evaluator's sphere (R = 6 371 000 m) > 20 m
    rec = RunRecord.objects.create(
        run=run_a, question_id="pt_s01_task0", sample_id="pt_s01", dimension="t2",
        predicted_answer='<Answer>{"site_lat": 35.001, "site_lon": -77.0}</Answer>', field_scores={"site__point_geo": 0.0},
        gold={"question": "Where is the shelter?", "final_answer": {"site_lat": 35.0, "site_lon": -77.0},
              "eval_spec": {"site_lat": "point_haversine", "site_lon": "point_haversine"}})
    client.force_login(make_user("ana", "scorer"))
    ev = client.get(f"/api/records/{rec.pk}/").json()["evidence"]
    assert ev["raw"] == '<Answer>{"site_lat": 35.001, "site_lon": -77.0}</Answer>'
    assert ev["parsed"] == {"site_lat": 35.001, "site_lon": -77.0}
    (row,) = ev["fields"]
    assert row["field"] == "site__point_geo" and row["fields"] == ["site_lat", "site_lon"]
    assert row["why"] == "111.195 m > 20 m" and row["passed"] is False
    (geo,) = ev["geometries"]
    assert geo["frame"] == "geographic"
    assert geo["gold"]["geometry"]["coordinates"] == [-77.0, 35.0]
    assert geo["pred"]["geometry"]["coordinates"] == [-77.0, 35.001]
