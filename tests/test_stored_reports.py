"""Reports kept by the hash of their inputs (evaluation.services.reports): computed once for given
rows and options, again as soon as one row changes (never stale), read back as computed, and the
agreement page and API served from them."""
from __future__ import annotations

import math

import pytest
from django.utils import timezone

from evaluation.models import StoredReport, Verdict
from evaluation.services import reports
from evaluation.services.seeding import seed_synthetic

pytestmark = pytest.mark.django_db


def test_a_report_is_computed_once_for_its_rows_and_again_when_a_row_changes():
    calls = []

    def compute(rows):
        calls.append(len(rows))
        return {"n": len(rows), "by_size": {2: 7, 1: 1}, "pair": ("a", "b"), "nan": float("nan")}

    rows = [{"run_id": "1:holistic", "grade": 0.8}, {"run_id": "2:holistic", "grade": 0.4}]
    first = reports.stored_report("agreement", {"tie_break": "exclude"}, rows, lambda: compute(rows))
    again = reports.stored_report("agreement", {"tie_break": "exclude"}, [dict(r) for r in rows], lambda: compute(rows))
    assert calls == [2] and StoredReport.objects.count() == 1
    # read back as computed: integer keys stay integers, a tuple comes back a list, NaN stays NaN
    for got in (first, again):
        assert got["by_size"] == {2: 7, 1: 1} and got["pair"] == ["a", "b"] and math.isnan(got["nan"])
    changed = [rows[0], dict(rows[1], grade=0.6)]
    reports.stored_report("agreement", {"tie_break": "exclude"}, changed, lambda: compute(changed))
    reports.stored_report("agreement", {"tie_break": "incorrect"}, rows, lambda: compute(rows))  # other options
    assert calls == [2, 2, 2] and StoredReport.objects.count() == 3


def test_only_the_newest_reports_of_a_kind_are_kept():
    for i in range(reports.KEEP_PER_KIND + 3):
        reports.stored_report("agreement", {}, [i], lambda: {"i": 1})
    reports.stored_report("other", {}, [0], lambda: {})
    assert StoredReport.objects.filter(kind="agreement").count() == reports.KEEP_PER_KIND
    assert StoredReport.objects.filter(kind="other").count() == 1


def test_the_agreement_page_and_api_follow_a_changed_verdict_at_once(florence, maintainer, client):
    # 6 tasks, 1 run, its first 4 records judged: each has two people's final verdicts, so the
    # reference counts {2 humans: 4 records}; one person's verdict reopened (not final: no decision
    # yet) leaves that record one human
    seed_synthetic(6, 1, seed=2, verdicts=4)
    client.force_login(maintainer)
    assert client.get("/api/agreement/").json()["reference"]["humans_per_run"] == {"2": 4}
    assert client.get("/agreement/").status_code == 200
    assert StoredReport.objects.filter(kind="agreement").count() == 1  # the page read the API's report
    v = Verdict.objects.filter(source="human").order_by("id").first()
    Verdict.objects.filter(pk=v.pk).update(sealed_at=None)
    assert client.get("/api/agreement/").json()["reference"]["humans_per_run"] == {"1": 1, "2": 3}
    Verdict.objects.filter(pk=v.pk).update(sealed_at=timezone.now())
    assert client.get("/api/agreement/").json()["reference"]["humans_per_run"] == {"2": 4}
    assert StoredReport.objects.filter(kind="agreement").count() == 2  # the first one read again
