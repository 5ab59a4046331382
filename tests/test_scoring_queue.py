"""The human scoring queue: slots, claims with a lease (also under concurrency), drafts,
idempotent submission, blind verdicts, silent gold checks, and the queue pages.

Hand-worked values: agent_a's run has 12 records; with 2 verdicts per record the queue holds
24 items, 12 with slot 1 and 12 with slot 2. Claims go slot first, then record id, so the first
two claimers get slot 1 of records 1 and 2; a scorer never gets both slots of one record.
"""
from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from django.core.exceptions import PermissionDenied
from django.db import OperationalError, connection
from django.utils import timezone
from support.judging import flags

from evaluation.models import ScoringItem, Verdict
from evaluation.selectors.queue import scorer_accuracy
from evaluation.services.queue import (
    QueueError,
    QueueFilter,
    add_gold_check,
    claim_next,
    enqueue_run,
    release_item,
    save_draft,
    submit_item,
)
from evaluation.services.verdicts import submit_human_verdict

pytestmark = pytest.mark.urls("support.judging")


@pytest.fixture
def queued(run_a, maintainer):
    assert enqueue_run(maintainer, run_a) == 24
    return run_a


def _submit(user, item, *on, grade=None, key=None):
    return submit_item(user, item, errors=flags(*on), grade=grade if grade is not None else (0.6 if on else 1.0),
                       idempotency_key=key)


@pytest.mark.django_db
def test_enqueue_is_idempotent_and_needs_the_role(queued, maintainer, make_user, settings):
    assert enqueue_run(maintainer, queued) == 0
    settings.STUDIO_HUMAN_VERDICTS_PER_RECORD = 3
    assert enqueue_run(maintainer, queued) == 12  # one more slot per record
    with pytest.raises(PermissionDenied):
        enqueue_run(make_user("sam", "scorer"), queued)


@pytest.mark.django_db
def test_claim_order_one_slot_per_record_per_scorer(queued, make_user):
    ana = make_user("ana", "scorer")
    first = claim_next(ana)
    rec_ids = list(queued.records.order_by("id").values_list("id", flat=True))
    assert (first.slot, first.record_id) == (1, rec_ids[0])
    assert claim_next(ana).pk == first.pk  # a held item comes back, it is not a second claim
    seen = []
    item = first
    while item is not None:
        seen.append(item.record_id)
        _submit(ana, item)
        item = claim_next(ana)
    assert sorted(seen) == rec_ids  # 12 items: one per record, never the second slot of the same record
    assert ScoringItem.objects.filter(scorer=ana).count() == 12


@pytest.mark.django_db
def test_queue_filters(queued, make_user):
    ana = make_user("ana", "scorer")
    item = claim_next(ana, QueueFilter(agent="agent_a", dimension="t3"))
    assert item.record.dimension == "t3"
    assert claim_next(make_user("bo", "scorer"), QueueFilter(agent="nobody")) is None
    assert claim_next(make_user("cy", "scorer"), QueueFilter(release="9.9.9")) is None


@pytest.mark.django_db(transaction=True)
def test_two_scorers_at_once_never_get_the_same_item(run_a, maintainer, make_user, perms):
    """Six scorers claim at the same moment (a barrier releases the threads together), then keep
    claiming and submitting until the queue is empty: every item goes to exactly one scorer."""
    enqueue_run(maintainer, run_a)
    users = [make_user(f"s{i}", "scorer") for i in range(6)]
    barrier = threading.Barrier(len(users))
    got: dict[str, list[int]] = {u.username: [] for u in users}
    errors = []

    def retry(fn):
        # SQLite's shared-cache test database reports a busy table at once ("database table is
        # locked") instead of waiting; every step is atomic, so running it again is safe.
        # PostgreSQL never needs this.
        for i in range(200):
            try:
                return fn()
            except OperationalError as exc:
                if "locked" not in str(exc):
                    raise
                time.sleep(0.005 * (1 + i % 10))
        raise AssertionError("still locked")

    def work(user):
        try:
            barrier.wait()
            while True:
                item = retry(lambda: claim_next(user))
                if item is None:
                    break
                got[user.username].append(item.pk)
                retry(lambda: _submit(user, item))  # noqa: B023 (called within this iteration)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(repr(exc))
        finally:
            connection.close()

    threads = [threading.Thread(target=work, args=(u,)) for u in users]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    claimed = [pk for ids in got.values() for pk in ids]
    assert len(claimed) == len(set(claimed)) == 24  # all 24 items, none twice
    assert all(len(ids) <= 12 for ids in got.values())
    assert Verdict.objects.filter(source="human").count() == 24
    for u in users:  # nobody scored a record twice
        recs = list(ScoringItem.objects.filter(scorer=u).values_list("record_id", flat=True))
        assert len(recs) == len(set(recs))


@pytest.mark.django_db
def test_lease_expiry_returns_the_item(queued, make_user, settings):
    settings.STUDIO_SCORING_LEASE_MINUTES = 30
    ana, bo = make_user("ana", "scorer"), make_user("bo", "scorer")
    t0 = timezone.now()
    item = claim_next(ana, now=t0)
    save_draft(ana, item, {"errors": {"E4": True}, "grade": "0.6"})
    # before expiry, bo gets another item; after it, bo gets ana's (the first in order)
    other = claim_next(bo, now=t0 + timedelta(minutes=10))
    assert other.pk != item.pk
    release_item(bo, other)
    taken = claim_next(bo, now=timezone.now() + timedelta(minutes=31))
    assert taken.pk == item.pk and taken.scorer_id == bo.pk and taken.draft is None  # ana's draft is not shown to bo
    with pytest.raises(QueueError, match="not claimed by you"):
        _submit(ana, item, "E4")
    v = _submit(bo, taken)
    assert v.annotator_id == bo.pk


@pytest.mark.django_db
def test_draft_autosave_and_double_submit(queued, make_user):
    ana, bo = make_user("ana", "scorer"), make_user("bo", "scorer")
    item = claim_next(ana)
    before = item.lease_expires_at
    saved = save_draft(ana, item, {"errors": {"E5": True}, "reasons": {"E5": "wrong GSD"}, "grade": "0.6"})
    assert saved.draft["reasons"]["E5"] == "wrong GSD" and saved.lease_expires_at >= before
    with pytest.raises(QueueError):
        save_draft(bo, item, {})
    v1 = _submit(ana, item, "E5", key="tok-1")
    v2 = _submit(ana, item, "E5", key="tok-1")  # the same form sent twice
    assert v1.pk == v2.pk and Verdict.objects.filter(annotator=ana).count() == 1
    item.refresh_from_db()
    assert item.verdict_id == v1.pk and item.draft is None
    with pytest.raises(QueueError, match="already submitted"):
        _submit(ana, item, "E5", key="tok-2")


@pytest.mark.django_db
def test_api_double_post_creates_one_verdict(queued, make_user, client):
    ana = make_user("ana", "scorer")
    client.force_login(ana)
    rec = queued.records.first()
    body = {"errors": flags("E2"), "grade": 0.4, "idempotency_key": "form-abc"}
    r1 = client.post(f"/api/records/{rec.pk}/verdicts/", body, content_type="application/json")
    r2 = client.post(f"/api/records/{rec.pk}/verdicts/", body, content_type="application/json")
    assert r1.status_code == r2.status_code == 201 and r1.json()["id"] == r2.json()["id"]
    assert Verdict.objects.filter(record=rec).count() == 1
    # the queue API: claim, autosave a draft, submit twice with one token, next URL keeps the queue
    claim = client.post("/api/scoring/claim/", {"dimension": "t1"}, content_type="application/json")
    assert claim.status_code == 200
    pk = claim.json()["id"]
    assert client.put(f"/api/scoring/items/{pk}/draft/", {"draft": {"grade": "1.0"}},
                      content_type="application/json").status_code == 200
    body = {"errors": flags(), "grade": 1.0, "idempotency_key": "form-xyz"}
    s1 = client.post(f"/api/scoring/items/{pk}/submit/?dimension=t1", body, content_type="application/json")
    s2 = client.post(f"/api/scoring/items/{pk}/submit/?dimension=t1", body, content_type="application/json")
    assert s1.status_code == s2.status_code == 201
    assert s1.json()["verdict"]["id"] == s2.json()["verdict"]["id"]
    assert s1.json()["next_url"] == "/scoring/next/?dimension=t1"


@pytest.mark.django_db
def test_scorers_are_blind_until_they_submit(queued, make_user, client, maintainer):
    ana, bo = make_user("ana", "scorer"), make_user("bo", "scorer")
    item = claim_next(ana)
    _submit(ana, item, "E4")
    client.force_login(bo)
    rec = item.record
    api = client.get(f"/api/records/{rec.pk}/").json()
    assert api["verdicts"] == [] and api["verdicts_hidden"] == 1
    page = client.get(f"/records/{rec.pk}/").content.decode()
    assert "1 verdict hidden" in page and "human: ana" not in page
    submit_human_verdict(bo, rec, errors=flags(), grade=1.0)  # bo gives his own verdict (record page)
    api = client.get(f"/api/records/{rec.pk}/").json()
    assert sorted(v["annotator"] for v in api["verdicts"]) == ["ana", "bo"]
    client.force_login(maintainer)  # reviewers and maintainers see everything
    assert len(client.get(f"/api/records/{rec.pk}/").json()["verdicts"]) == 2


@pytest.mark.django_db
def test_silent_gold_checks_give_accuracy(queued, maintainer, make_user):
    ana, bo = make_user("ana", "scorer"), make_user("bo", "scorer")
    rec = queued.records.order_by("id").first()
    with pytest.raises(ValueError, match="final verdict"):
        add_gold_check(maintainer, rec)
    assert add_gold_check(maintainer, rec, {"errors": flags("E4"), "grade": 0.6}) == 2
    a = claim_next(ana)
    assert a.record_id == rec.pk and a.is_gold_check  # looks like any item to ana
    b = claim_next(bo)
    while b.record_id != rec.pk:  # bo works through the other slot-1 items first (slot order)
        _submit(bo, b)
        b = claim_next(bo)
    _submit(ana, a, "E4", grade=0.6)  # matches the expected verdict
    _submit(bo, b, grade=1.0)  # says correct: wrong correctness, grade off by 0.4, flags differ
    acc = {r["scorer"]: r for r in scorer_accuracy()}
    assert acc["ana"] == {"scorer": "ana", "n": 1, "correctness": 1.0, "grade_mae": 0.0, "flags_exact": 1.0}
    assert acc["bo"]["correctness"] == 0.0 and acc["bo"]["grade_mae"] == pytest.approx(0.4)
    assert acc["bo"]["flags_exact"] == 0.0


@pytest.mark.django_db
def test_queue_pages(queued, make_user, client, maintainer, django_assert_max_num_queries):
    ana = make_user("ana", "scorer")
    client.force_login(ana)
    # a GET (a link, a prefetch, a cross-site request) claims nothing: it shows the button that posts
    shown = client.get("/scoring/next/?dimension=t2")
    assert shown.status_code == 200 and 'id="claim-next"' in shown.content.decode()
    assert not ScoringItem.objects.filter(scorer=ana).exists()
    r = client.post("/scoring/next/?dimension=t2")
    assert r.status_code == 302 and "/scoring/items/" in r["Location"] and "dimension=t2" in r["Location"]
    page = client.get(r["Location"])
    html = page.content.decode()
    assert page.status_code == 200 and 'id="verdict-form"' in html
    assert "E4 Logic error" in html and 'name="token"' in html
    assert "human:" not in html and "judge-m" not in html  # blind
    client.force_login(maintainer)
    with django_assert_max_num_queries(12):  # constant in the number of queues and items
        home = client.get("/scoring/")
    assert home.status_code == 200 and 'id="queues"' in home.content.decode()
    other = client.get(r["Location"])  # not the maintainer's item
    assert other.status_code == 302
