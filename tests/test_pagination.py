"""Keyset pagination (studio/pagination.py): order, cursors both ways, nulls, ties, one query a page.

Hand-worked order: seven runs r1…r7 (created in that order, so ids ascend) with DORA scores
0.5, None, 0.5, 0.9, None, 0.1, 0.5. Ordered by ``-dora_score`` (descending, nulls last, ties by
id descending): r4 (0.9); r7, r3, r1 (0.5, newest first); r6 (0.1); then the nulls r5, r2.
Pages of three: [r4, r7, r3], [r1, r6, r5], [r2].
"""
from __future__ import annotations

import pytest
from django.http import QueryDict

from annotation.models import Event
from evaluation.models import Agent, AgentRun
from studio.pagination import InvalidCursor, KeysetPaginator, iterate, paginate

SCORES = [0.5, None, 0.5, 0.9, None, 0.1, 0.5]


@pytest.fixture
def runs(db):
    agent = Agent.objects.create(name="a")
    made = [AgentRun.objects.create(agent=agent, name=f"r{i}", dora_score=s) for i, s in enumerate(SCORES, start=1)]
    return {r.name: r for r in made}


def names(page):
    return [r.name for r in page]


def test_pages_forward_and_back_by_a_nullable_key_with_ties(runs, django_assert_num_queries):
    p = KeysetPaginator(AgentRun.objects.all(), key="-dora_score", page_size=3)
    with django_assert_num_queries(1):
        first = p.page()
    assert names(first) == ["r4", "r7", "r3"] and not first.has_prev and first.has_next
    with django_assert_num_queries(1):
        second = p.page(first.next_cursor)
    assert names(second) == ["r1", "r6", "r5"] and second.has_prev and second.has_next
    third = p.page(second.next_cursor)
    assert names(third) == ["r2"] and not third.has_next and third.has_prev
    # and back again: the same pages
    back2 = p.page(third.prev_cursor)
    assert names(back2) == ["r1", "r6", "r5"] and back2.has_prev and back2.has_next
    back1 = p.page(back2.prev_cursor)
    assert names(back1) == ["r4", "r7", "r3"] and not back1.has_prev and back1.has_next


def test_ascending_key_puts_nulls_last_too(runs):
    # ascending: r6 (0.1); r1, r3, r7 (0.5, oldest first); r4 (0.9); nulls r2, r5 by id
    p = KeysetPaginator(AgentRun.objects.all(), key="dora_score", page_size=2)
    seen, page = [], p.page()
    while True:
        seen += names(page)
        if not page.has_next:
            break
        page = p.page(page.next_cursor)
    assert seen == ["r6", "r1", "r3", "r7", "r4", "r2", "r5"]
    # pages of two: [r6, r1], [r3, r7], [r4, r2], [r5]; from the last page back to the start
    assert names(page) == ["r5"]
    back = []
    while page.has_prev:
        page = p.page(page.prev_cursor)
        back = names(page) + back
    assert back == ["r6", "r1", "r3", "r7", "r4", "r2"]


def test_rows_added_meanwhile_neither_repeat_nor_shift_the_next_page(runs):
    p = KeysetPaginator(AgentRun.objects.all(), key="-id", page_size=3)
    first = p.page()
    assert names(first) == ["r7", "r6", "r5"]
    AgentRun.objects.create(agent=runs["r1"].agent, name="r8", dora_score=1.0)  # newest: before page 1
    runs["r4"].delete()  # the row after the cursor goes: nothing breaks
    assert names(p.page(first.next_cursor)) == ["r3", "r2", "r1"]


def test_cursor_is_opaque_signed_and_bound_to_its_key(runs):
    first = KeysetPaginator(AgentRun.objects.all(), key="-dora_score", page_size=3).page()
    assert "0.5" not in first.next_cursor  # not readable as JSON
    other = KeysetPaginator(AgentRun.objects.all(), key="name", page_size=3)
    with pytest.raises(InvalidCursor, match="ordered by name"):
        other.page(first.next_cursor)
    same = KeysetPaginator(AgentRun.objects.all(), key="-dora_score", page_size=3)
    tampered = first.next_cursor[:-2] + ("AA" if not first.next_cursor.endswith("AA") else "BB")
    with pytest.raises(InvalidCursor):
        same.page(tampered)
    with pytest.raises(InvalidCursor):
        same.page("not-a-cursor")


def test_paginate_reads_the_request_and_keeps_other_filters(runs):
    qd = QueryDict("page_size=2&agent=a&tag=x&tag=y")
    page = paginate(qd, AgentRun.objects.all(), key="-id")
    assert names(page) == ["r7", "r6"] and page.prev_query == ""
    nxt = QueryDict(page.next_query)
    assert nxt["agent"] == "a" and nxt.getlist("tag") == ["x", "y"] and nxt["page_size"] == "2"
    assert names(paginate(nxt, AgentRun.objects.all(), key="-id")) == ["r5", "r4"]
    for bad in ("0", "201", "two"):
        with pytest.raises(InvalidCursor, match="page_size"):
            paginate({"page_size": bad}, AgentRun.objects.all())
    data = page.as_dict(lambda r: r.name)
    assert data["results"] == ["r7", "r6"] and data["next_cursor"] == page.next_cursor and data["prev_cursor"] is None


def test_key_across_a_relation_and_by_datetime(db, django_assert_num_queries):
    # events b, a, c (created in that order): by name → a, b, c; by created_at then id → b, a, c
    for slug in ("b", "a", "c"):
        Event.objects.create(slug=slug, name=slug.upper())
    agent_runs = []
    for slug in ("b", "a", "c"):
        agent = Agent.objects.create(name=slug)
        agent_runs.append(AgentRun.objects.create(agent=agent, name=f"run-{slug}"))
    p = KeysetPaginator(AgentRun.objects.select_related("agent"), key="agent__name", page_size=2)
    with django_assert_num_queries(1):
        first = p.page()
        assert [r.agent.name for r in first] == ["a", "b"]
    assert [r.agent.name for r in p.page(first.next_cursor)] == ["c"]
    by_time = KeysetPaginator(Event.objects.all(), key="created_at", page_size=1)
    page, seen = by_time.page(), []
    while True:
        seen += [e.slug for e in page]
        if not page.has_next:
            break
        page = by_time.page(page.next_cursor)
    assert seen == ["b", "a", "c"]


def test_iterate_reads_every_row_in_batches(runs, django_assert_num_queries):
    # 7 rows in batches of 3: queries for rows 1–3, 4–6 and 7
    with django_assert_num_queries(3):
        assert [r.name for r in iterate(AgentRun.objects.all(), key="id", batch_size=3)] == [f"r{i}" for i in range(1, 8)]
