"""A run's page lists its records a page at a time (RECORD_PAGE_SIZE, in question id order): a run
of 100,000 records renders as fast as one of 200 (bench/lists.py), in the same number of queries;
records the viewer scores blind are left out of every page and counted (evaluation.blind)."""
from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from evaluation.models import Agent, AgentRun, RunRecord, ScoringItem
from evaluation.services.queue import claim_item, enqueue_records
from frontend.views.runs import RECORD_PAGE_SIZE

pytestmark = pytest.mark.django_db


def _run(n: int, name: str = "paged") -> AgentRun:
    run = AgentRun.objects.create(agent=Agent.objects.create(name=f"agent-{name}"), name=name,
                                  unanswered=[{"question_id": "zz-missing_task0", "dimension": "t1", "task_score": 0.0}])
    RunRecord.objects.bulk_create([RunRecord(run=run, question_id=f"q{i:04d}_task0", sample_id=f"q{i:04d}",
                                             dimension=("t1", "t2")[i % 2], task_score=0.5) for i in range(n)])
    return run


def _listed(html: str) -> list[str]:
    return re.findall(r'<a href="/records/\d+/">(q\d{4}_task0)</a>', html)


def test_a_runs_records_come_a_page_at_a_time_in_question_order(client, maintainer):
    assert RECORD_PAGE_SIZE == 100
    run = _run(230)
    client.force_login(maintainer)
    seen, url, pages = [], f"/runs/{run.pk}/", 0
    while url:
        html = client.get(url).content.decode()
        pages += 1
        rows = _listed(html)
        seen += rows
        assert ("zz-missing_task0" in html) == (len(seen) == 230)  # the unanswered rows close the last page
        nxt = re.search(r'href="\?([^"]+)#record-table" id="records-next"', html)
        url = f"/runs/{run.pk}/?{nxt.group(1).replace('&amp;', '&')}" if nxt else None
        assert len(rows) == (100 if url else 30)
    assert pages == 3 and seen == [f"q{i:04d}_task0" for i in range(230)]


def test_the_run_page_makes_as_many_queries_for_230_records_as_for_130(client, maintainer):
    client.force_login(maintainer)
    counts = []
    for n, name in ((130, "small"), (230, "large")):
        run = _run(n, name)
        client.get(f"/runs/{run.pk}/")  # the session and the caches, once
        with CaptureQueriesContext(connection) as q:
            assert client.get(f"/runs/{run.pk}/").status_code == 200
        counts.append(len(q))
    assert counts[0] == counts[1]


def test_a_record_the_viewer_scores_blind_is_on_no_page_and_is_counted(client, maintainer, make_user):
    run = _run(150)
    held = RunRecord.objects.get(run=run, question_id="q0042_task0")
    enqueue_records(maintainer, [held], 1)
    rex = make_user("rex", "reviewer")
    claim_item(rex, ScoringItem.objects.get(record=held))
    client.force_login(rex)
    first = client.get(f"/runs/{run.pk}/").content.decode()
    assert 'id="records-blind"' in first and "1 record of this run is not listed" in first
    rows = _listed(first)
    assert len(rows) == 100 and "q0042_task0" not in rows and rows[42] == "q0043_task0"
    client.force_login(maintainer)  # holds no slot: sees it, and no blind note
    html = client.get(f"/runs/{run.pk}/").content.decode()
    assert "q0042_task0" in _listed(html) and 'id="records-blind"' not in html
