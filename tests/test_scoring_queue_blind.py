"""Blind until final, in the queue too: a person who was shown other people's
verdicts of a record — on the record page or API once they became visible to them, or on the
adjudication page — cannot then score that record blind in the queue. The queue skips it, and a
direct claim (API ``item``, or opening a held item's page) is refused with the reason.

Hand-worked: agent_a's run has 12 records; with 2 slots each the queue holds 24 items, taken
slot first then record id, so a fresh claimer's first item is slot 1 of the lowest record id.
"""
from __future__ import annotations

import pytest
from support.judging import flags

from evaluation.models import ScoringItem, VerdictsSeen
from evaluation.services.queue import (
    QueueError,
    claim_item,
    claim_next,
    enqueue_run,
    note_verdicts_seen,
    submit_item,
)

pytestmark = pytest.mark.urls("support.judging")


@pytest.fixture
def scored_first(run_a, maintainer, make_user):
    """The queue of run_a with ana's final verdict on slot 1 of the first record."""
    assert enqueue_run(maintainer, run_a) == 24
    ana = make_user("ana", "scorer")
    item = claim_next(ana)
    submit_item(ana, item, errors=flags("E4"), grade=0.6)
    return item.record


@pytest.mark.django_db
def test_reviewer_who_saw_the_record_page_skips_it_in_the_queue(scored_first, make_user, client):
    rita = make_user("rita", "reviewer")  # verdict.view_all: the record page shows her ana's verdict
    client.force_login(rita)
    page = client.get(f"/records/{scored_first.pk}/").content.decode()
    assert "ana" in page
    seen = VerdictsSeen.objects.get(user=rita, record=scored_first)
    assert seen.via == "record page"
    # the queue would give her slot 2 of the first record (slot 1 is submitted); it skips it
    item = claim_next(rita)
    assert item.record_id != scored_first.pk
    # a direct claim of slot 2 of that record is refused, with the reason
    slot2 = ScoringItem.objects.get(record=scored_first, slot=2)
    with pytest.raises(QueueError, match="you cannot score it blind"):
        claim_item(rita, slot2)
    r = client.post("/api/scoring/claim/", {"item": slot2.pk}, content_type="application/json")
    assert r.status_code == 409 and "saw the other verdicts" in r.json()["detail"]
    assert ScoringItem.objects.get(pk=slot2.pk).scorer_id is None


@pytest.mark.django_db
def test_api_read_counts_as_seen_only_when_other_verdicts_were_shown(scored_first, make_user, client):
    bo = make_user("bo", "scorer")  # no view_all: the API hides ana's verdict from him
    client.force_login(bo)
    assert client.get(f"/api/records/{scored_first.pk}/").json()["verdicts_hidden"] == 1
    assert not VerdictsSeen.objects.filter(user=bo).exists()
    rita = make_user("rita", "reviewer")
    client.force_login(rita)
    assert len(client.get(f"/api/records/{scored_first.pk}/").json()["verdicts"]) == 1
    assert VerdictsSeen.objects.get(user=rita, record=scored_first).via == "record API"
    # a direct claim through the API of an item of another record works
    other = ScoringItem.objects.exclude(record=scored_first).filter(scorer__isnull=True).order_by("id").first()
    r = client.post("/api/scoring/claim/", {"item": other.pk}, content_type="application/json")
    assert r.status_code == 200 and r.json()["id"] == other.pk


@pytest.mark.django_db
def test_slot_holder_is_blind_even_as_a_reviewer_and_a_showing_refuses_the_held_item(scored_first, make_user, client):
    rita = make_user("rita", "reviewer")
    slot2 = ScoringItem.objects.get(record=scored_first, slot=2)
    assert claim_item(rita, slot2).scorer_id == rita.pk  # claimed before she saw anything
    client.force_login(rita)
    # holding a slot she must score the record blind (evaluation.blind): the adjudication page, the
    # record page and the API show her no other verdict, and nothing is noted as seen
    r = client.get(f"/adjudication/records/{scored_first.pk}/")
    assert r.status_code == 403
    assert client.get(f"/api/records/{scored_first.pk}/").json()["verdicts_hidden"] == 1
    assert "1 verdict hidden until yours is final" in client.get(f"/records/{scored_first.pk}/").content.decode()
    assert not VerdictsSeen.objects.filter(user=rita).exists()
    # a showing recorded all the same (say she had the adjudication page open before she claimed)
    note_verdicts_seen(rita, scored_first, "adjudication page")
    with pytest.raises(QueueError, match="cannot score it blind"):
        submit_item(rita, slot2, errors=flags(), grade=1.0)
    # opening the held item's page refuses it with the reason and gives it back to the queue
    r = client.get(f"/scoring/items/{slot2.pk}/", follow=True)
    html = r.content.decode()
    assert "you cannot score it blind" in html
    assert ScoringItem.objects.get(pk=slot2.pk).scorer_id is None
    # and the next claim from the queue page goes to another record
    r = client.post("/scoring/next/")
    assert r.status_code == 302
    assert ScoringItem.objects.get(scorer=rita, verdict__isnull=True).record_id != scored_first.pk


@pytest.mark.django_db
def test_own_revisable_verdict_alone_is_not_seeing_others(scored_first, make_user):
    """note_verdicts_seen with only the person's own verdict shown records nothing."""
    ana = scored_first.verdicts.get().annotator
    assert note_verdicts_seen(ana, scored_first, "record page", list(scored_first.verdicts.all())) is False
    assert note_verdicts_seen(ana, scored_first, "adjudication page") is True
    assert note_verdicts_seen(ana, scored_first, "record page") is False  # the first showing is kept
