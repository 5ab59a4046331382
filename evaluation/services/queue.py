"""The human scoring queue: slots per record, claims with a lease, drafts, submission, gold checks.

Each run record asks for ``STUDIO_HUMAN_VERDICTS_PER_RECORD`` (default 2) human verdicts: one
:class:`~evaluation.models.ScoringItem` per slot. A queue is a filter over the items (release
version, agent, dimension). A scorer claims the next open item; the claim is a lease of
``STUDIO_SCORING_LEASE_MINUTES`` (default 30, renewed by every autosaved draft); an expired lease
returns the item to the queue.

Claiming is safe under concurrency on PostgreSQL and on SQLite alike: candidates are read
(``select_for_update(skip_locked=True)`` on PostgreSQL, so a concurrent claimer skips rows being
claimed; ignored on SQLite), then each is taken with one conditional ``UPDATE … WHERE verdict IS
NULL AND (scorer IS NULL OR lease expired)``; only the claimer whose UPDATE changed the row owns
it, the other moves on to the next candidate. A scorer never gets two slots of one record, nor a
record they already gave a verdict on, nor — blind until final — a record whose other verdicts
they were shown (:func:`note_verdicts_seen`: the record page or API once the verdicts became
visible to them, the adjudication page); such a record is skipped by :func:`claim_next`, and
claiming (:func:`claim_item`) or submitting its item is refused with :class:`QueueError`.

Silent gold checks: items with ``is_gold_check`` and an ``expected`` verdict look like any other
item; :func:`evaluation.selectors.queue.scorer_accuracy` compares each scorer's answers with them.
"""
from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import OperationalError, connection, transaction
from django.db.models import Q
from django.utils import timezone

from evaluation.blind import seen_refusal
from evaluation.judge.verdict import E_CODES
from evaluation.models import AgentRun, RunRecord, ScoringItem, Verdict, VerdictsSeen
from evaluation.selectors.adjudication import record_disagreements
from evaluation.services.verdicts import GRADES, submit_human_verdict
from kernel.errors import Conflict, InvalidInput
from kernel.taxonomy import plan_is_correct
from studio.events import emit
from studio.permissions import Action, require


class QueueError(Conflict):
    """A queue action that cannot be done in the item's state (the message says why; HTTP 409)."""


def verdicts_per_record() -> int:
    """Setting ``STUDIO_HUMAN_VERDICTS_PER_RECORD`` (default 2): human verdicts asked per record."""
    return max(1, int(settings.STUDIO_HUMAN_VERDICTS_PER_RECORD))


def lease_duration() -> timedelta:
    """Setting ``STUDIO_SCORING_LEASE_MINUTES`` (default 30)."""
    return timedelta(minutes=float(settings.STUDIO_SCORING_LEASE_MINUTES))


@dataclass(frozen=True)
class QueueFilter:
    """Which items a queue holds: any combination of release version, agent name, dimension."""

    release: str | None = None
    agent: str | None = None
    dimension: str | None = None

    @classmethod
    def from_params(cls, params) -> QueueFilter:
        """From a query dict (``release``, ``agent``, ``dimension``; blanks ignored)."""
        def get(k):
            v = (params.get(k) or "").strip()
            return v or None
        dim = get("dimension")
        return cls(get("release"), get("agent"), dim.lower() if dim else None)

    def apply(self, qs):
        if self.release:
            qs = qs.filter(record__run__release__version=self.release)
        if self.agent:
            qs = qs.filter(record__run__agent__name=self.agent)
        if self.dimension:
            qs = qs.filter(record__dimension=self.dimension)
        return qs

    def as_params(self) -> dict[str, str]:
        return {k: v for k, v in (("release", self.release), ("agent", self.agent), ("dimension", self.dimension)) if v}

    def label(self) -> str:
        parts = [f"release {self.release}" if self.release else "", f"agent {self.agent}" if self.agent else "",
                 f"dimension {self.dimension.upper()}" if self.dimension else ""]
        return ", ".join(p for p in parts if p) or "all runs"


# --------------------------------------------------------------------------------------------
# Filling the queue
# --------------------------------------------------------------------------------------------


@transaction.atomic
def enqueue_records(user, records: Iterable[RunRecord | int], n: int | None = None) -> int:
    """Make sure each record has ``n`` (default: the setting) scoring slots; return how many
    items were created (existing slots are kept, so this is idempotent)."""
    require(user, Action.QUEUE_MANAGE)
    n = verdicts_per_record() if n is None else int(n)
    if not 1 <= n <= 20:
        raise InvalidInput(f"n: {n} human verdicts per record; use 1 to 20")
    ids = [r.pk if isinstance(r, RunRecord) else int(r) for r in records]
    have = set(ScoringItem.objects.filter(record_id__in=ids).values_list("record_id", "slot"))
    rows = [ScoringItem(record_id=rid, slot=s) for rid in ids for s in range(1, n + 1) if (rid, s) not in have]
    ScoringItem.objects.bulk_create(rows, ignore_conflicts=True)
    return len(rows)


def enqueue_run(user, run: AgentRun, n: int | None = None) -> int:
    """Queue every record of ``run`` for ``n`` human verdicts (see :func:`enqueue_records`)."""
    return enqueue_records(user, run.records.values_list("id", flat=True), n)


def import_queue_share() -> float:
    """Setting ``STUDIO_QUEUE_ON_IMPORT_SHARE`` (default 0: off): the share of an imported run's
    records queued for human scoring at import, 0 to 1."""
    share = float(settings.STUDIO_QUEUE_ON_IMPORT_SHARE or 0.0)
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"STUDIO_QUEUE_ON_IMPORT_SHARE: {share} is not a share between 0 and 1")
    return share


def queue_share_of_run(user, run: AgentRun, share: float | None = None, n: int | None = None) -> dict[str, int]:
    """Queue ``share`` (default: :func:`import_queue_share`) of ``run``'s records for ``n``
    (default: the setting) human verdicts each. The records are a reproducible sample (seeded by
    the run id, so a repeat picks the same ones), at least one when ``share`` > 0.
    Returns ``{records, slots}`` (records chosen, slots created; both 0 when the share is 0)."""
    import math
    import random

    share = import_queue_share() if share is None else float(share)
    if not 0.0 <= share <= 1.0:
        raise InvalidInput(f"share: {share} is not a share between 0 and 1")
    if share == 0.0:
        return {"records": 0, "slots": 0}
    ids = sorted(run.records.values_list("id", flat=True))
    k = min(len(ids), max(1, math.ceil(share * len(ids))))
    chosen = sorted(random.Random(run.pk).sample(ids, k)) if k < len(ids) else ids
    return {"records": len(chosen), "slots": enqueue_records(user, chosen, n)}


def _verdict_expectation(v: Verdict) -> dict[str, Any]:
    return {"is_correct": v.is_correct, "grade": v.grade, "errors": {c: bool((v.errors or {}).get(c)) for c in E_CODES}}


@transaction.atomic
def add_gold_check(user, record: RunRecord, expected: dict[str, Any] | None = None, n: int | None = None) -> int:
    """Make ``record`` a silent gold check: its slots carry the known verdict ``expected``
    (``{is_correct, grade, errors}``; default: the record's adjudicated final verdict). Returns
    the number of slots marked. Raises ``ValueError`` when there is no expected verdict or it is
    malformed (field named)."""
    require(user, Action.QUEUE_MANAGE)
    if expected is None:
        final = record.verdicts.filter(is_final=True, status="ok").order_by("-id").first()
        if final is None:
            raise InvalidInput(f"expected: record {record.question_id} has no final verdict; give the expected verdict")
        expected = _verdict_expectation(final)
    errors = expected.get("errors")
    if not isinstance(errors, dict) or set(errors) - set(E_CODES):
        raise InvalidInput("expected.errors: a mapping of E1–E6 to true/false")
    grade = expected.get("grade")
    if grade is not None and not any(abs(float(grade) - g) < 1e-9 for g in GRADES):
        raise InvalidInput(f"expected.grade: {grade} is not one of 0, 0.2, …, 1.0")
    flags = {c: bool(errors.get(c)) for c in E_CODES}
    clean = {"is_correct": plan_is_correct(flags) if expected.get("is_correct") is None else bool(expected["is_correct"]),
             "grade": None if grade is None else float(grade), "errors": flags}
    enqueue_records(user, [record], n)
    return ScoringItem.objects.filter(record=record).update(is_gold_check=True, expected=clean)


# --------------------------------------------------------------------------------------------
# Claiming
# --------------------------------------------------------------------------------------------


def _retry_locked(fn, attempts: int = 50):
    """Run ``fn`` again when SQLite reports a lock (shared-cache test databases raise at once
    instead of waiting); other errors propagate."""
    for i in range(attempts):
        try:
            return fn()
        except OperationalError as exc:
            if "locked" not in str(exc).lower() or i == attempts - 1:
                raise
            time.sleep(0.01 * (i + 1))
    return None  # pragma: no cover


@transaction.atomic
def note_verdicts_seen(user, record: RunRecord, via: str, shown: Iterable[Verdict] | None = None) -> bool:
    """Remember that ``user`` was shown other people's verdicts of ``record`` (``via``: where, in
    words, e.g. ``"record page"``), so the queue no longer lets them score it blind. ``shown``:
    the verdicts the page showed; only when one of them is not the user's own is it recorded
    (None: the page shows all, e.g. adjudication). Idempotent: the first showing is kept.
    Returns True when this call recorded it. Anonymous users: no-op."""
    if not getattr(user, "is_authenticated", False):
        return False
    if shown is not None and all(v.annotator_id == user.pk and v.source == Verdict.Source.HUMAN and not v.is_final
                                 for v in shown):
        return False
    _, created = VerdictsSeen.objects.get_or_create(user=user, record=record, defaults={"via": str(via)[:40]})
    return created


def note_outcomes_seen(user, records: Iterable[RunRecord], via: str) -> int:
    """Remember that ``user`` was shown the judge's outcome of each of ``records`` (e.g. the
    robustness outcomes the judge decided, listed on a run page), as :func:`note_verdicts_seen`
    does for one record: the queue no longer lets them score these records blind. One query;
    already noted records keep their first showing. Returns how many records were given.
    Anonymous users: no-op (0)."""
    records = list(records)
    if not records or not getattr(user, "is_authenticated", False):
        return 0
    VerdictsSeen.objects.bulk_create([VerdictsSeen(user=user, record=r, via=str(via)[:40]) for r in records],
                                     ignore_conflicts=True)
    return len(records)


def claim_item(user, item: ScoringItem, *, now=None) -> ScoringItem:
    """Claim one given item (a direct claim, e.g. from a link) for ``user`` and return it; an item
    the user already holds is returned with its lease renewed.

    Refused with :class:`QueueError` (the message says why) when the item was submitted, another
    scorer holds it with a live lease, the user holds, held or gave a verdict on another slot of
    its record, or the user was shown the record's other verdicts (blind until final; an item they
    hold then goes back to the queue)."""
    require(user, Action.QUEUE_CLAIM)
    now = now or timezone.now()
    item = ScoringItem.objects.select_related("record").get(pk=item.pk)
    if item.verdict_id:
        raise QueueError("this item was already submitted")
    refusal = seen_refusal(user, item.record)
    if refusal:
        ScoringItem.objects.filter(pk=item.pk, scorer=user, verdict__isnull=True).update(
            scorer=None, claimed_at=None, lease_expires_at=None, draft=None)
        raise QueueError(refusal)
    if item.scorer_id == user.pk:
        ScoringItem.objects.filter(pk=item.pk, scorer=user).update(claimed_at=now, lease_expires_at=now + lease_duration())
    else:
        if ScoringItem.objects.filter(record_id=item.record_id, scorer=user).exclude(pk=item.pk).exists() or \
                Verdict.objects.filter(record_id=item.record_id, annotator=user, source=Verdict.Source.HUMAN).exists():
            raise QueueError(f"you already score {item.record.question_id} in another slot")
        taken = ScoringItem.objects.filter(pk=item.pk, verdict__isnull=True).filter(
            Q(scorer__isnull=True) | Q(lease_expires_at__lte=now)).update(
            scorer=user, claimed_at=now, lease_expires_at=now + lease_duration(), draft=None)
        if taken != 1:
            raise QueueError("another scorer holds this item")
    item.refresh_from_db()
    return item


def claim_next(user, queue: QueueFilter | None = None, *, now=None) -> ScoringItem | None:
    """Claim the next open item of ``queue`` for ``user`` and return it (None: nothing left).

    An item the user already holds (and has not submitted) is returned first, its lease renewed.
    Otherwise open items — no verdict, and no scorer or an expired lease — are taken in the order
    slot, record, id (every record gets its first verdict before any gets a second), skipping
    records on which the user holds or held a slot or gave a human verdict, and records whose
    other verdicts the user was shown (:func:`note_verdicts_seen`); an item the user holds on such
    a record goes back to the queue.
    """
    require(user, Action.QUEUE_CLAIM)
    queue = queue or QueueFilter()
    now = now or timezone.now()
    until = now + lease_duration()

    seen_records = VerdictsSeen.objects.filter(user=user).values("record_id")

    def resume() -> ScoringItem | None:
        with transaction.atomic():
            ScoringItem.objects.filter(scorer=user, verdict__isnull=True, record_id__in=seen_records).update(
                scorer=None, claimed_at=None, lease_expires_at=None, draft=None)
            mine = list(queue.apply(ScoringItem.objects.filter(scorer=user, verdict__isnull=True))
                        .order_by("claimed_at", "id").values_list("id", flat=True)[:1])
            if mine and ScoringItem.objects.filter(pk=mine[0], scorer=user, verdict__isnull=True).update(
                    claimed_at=now, lease_expires_at=until):
                return ScoringItem.objects.get(pk=mine[0])
        return None

    item = _retry_locked(resume)
    if item is not None:
        return item

    open_q = Q(verdict__isnull=True) & (Q(scorer__isnull=True) | Q(lease_expires_at__lte=now))
    mine_records = ScoringItem.objects.filter(scorer=user).values("record_id")
    my_verdicts = Verdict.objects.filter(annotator=user, source=Verdict.Source.HUMAN).values("record_id")

    def attempt() -> tuple[bool, ScoringItem | None]:
        with transaction.atomic():
            base = queue.apply(ScoringItem.objects.filter(open_q)).exclude(record_id__in=mine_records).exclude(
                record_id__in=my_verdicts).exclude(record_id__in=seen_records).order_by("slot", "record_id", "id")
            skip = connection.features.has_select_for_update_skip_locked
            qs = base.select_for_update(skip_locked=True, of=("self",)) if skip else base
            candidates = list(qs.values_list("id", flat=True)[:25])
            if not candidates:
                # under skip_locked, rows other claimers are locking right now are invisible:
                # the queue is only empty when none is open at all
                return (not (skip and base.exists())), None
            for pk in candidates:
                taken = ScoringItem.objects.filter(pk=pk).filter(open_q).update(
                    scorer=user, claimed_at=now, lease_expires_at=until, draft=None)
                if taken == 1:
                    return True, ScoringItem.objects.get(pk=pk)
        return False, None  # every candidate went to someone else meanwhile: look again

    for i in range(50):
        done, item = _retry_locked(attempt)
        if done:
            return item
        time.sleep(0.002 * (i + 1))
    return None


def _held(user, item: ScoringItem) -> ScoringItem:
    item = ScoringItem.objects.select_related("record").get(pk=item.pk)
    if item.verdict_id:
        raise QueueError("this item was already submitted")
    if item.scorer_id != user.pk:
        raise QueueError("this item is not claimed by you (its lease may have expired and another scorer took it)")
    return item


@transaction.atomic
def save_draft(user, item: ScoringItem, draft: dict[str, Any]) -> ScoringItem:
    """Autosave the scorer's unfinished form on their item and renew the lease. ``draft`` is the
    form state as JSON (kept as given, at most 20,000 characters of JSON). Raises ``QueueError``
    when the user does not hold the item."""
    require(user, Action.QUEUE_CLAIM)
    import json

    if not isinstance(draft, dict) or len(json.dumps(draft)) > 20000:
        raise InvalidInput("draft: a JSON object of at most 20,000 characters")
    item = _held(user, item)
    now = timezone.now()
    ScoringItem.objects.filter(pk=item.pk, scorer=user, verdict__isnull=True).update(
        draft=draft, lease_expires_at=now + lease_duration())
    item.refresh_from_db()
    return item


@transaction.atomic
def release_item(user, item: ScoringItem) -> None:
    """Give a held item back to the queue (its draft is dropped)."""
    require(user, Action.QUEUE_CLAIM)
    item = _held(user, item)
    ScoringItem.objects.filter(pk=item.pk, scorer=user, verdict__isnull=True).update(
        scorer=None, claimed_at=None, lease_expires_at=None, draft=None)


def submit_item(user, item: ScoringItem, *, errors: dict, grade: float, reasons: dict | None = None,
                reasoning: str = "", is_correct: bool | None = None, override_reason: str = "",
                idempotency_key: str | None = None, seal: bool = True) -> Verdict:
    """Submit the verdict of a held item (see :func:`evaluation.services.verdicts.submit_human_verdict` for
    the checks; ``seal``: mark it final, else it stays revisable on the record page). A repeated
    submission with the same ``idempotency_key`` returns the first verdict
    and creates nothing. An item whose lease expired is still accepted while no one else took it.
    Raises ``QueueError`` (not yours, already submitted, or you were shown the record's other
    verdicts meanwhile) or ``ValueError`` (a bad field)."""
    require(user, Action.QUEUE_CLAIM)
    with transaction.atomic():
        locked = ScoringItem.objects.select_for_update().get(pk=item.pk)
        if locked.verdict_id and idempotency_key:
            first = Verdict.objects.filter(pk=locked.verdict_id, idempotency_key=str(idempotency_key)[:80]).first()
            if first is not None:
                return first
        held = _held(user, locked)
        refusal = seen_refusal(user, held.record)
        if refusal:
            raise QueueError(refusal)
        before = _disagreeing(held.record_id)
        verdict = submit_human_verdict(user, held.record, errors=errors, grade=grade, reasons=reasons,
                                       reasoning=reasoning, is_correct=is_correct, override_reason=override_reason,
                                       idempotency_key=idempotency_key, seal=seal)
        ScoringItem.objects.filter(pk=held.pk).update(verdict=verdict, draft=None, lease_expires_at=None)
        if not before:
            _announce_disagreement(held.record_id)
    return verdict


def submit_record_verdict(user, record: RunRecord, **fields) -> Verdict:
    """A person's verdict of ``record`` given outside the queue (the record page's form and
    ``POST /api/records/<id>/verdicts/``): :func:`evaluation.services.verdicts.submit_human_verdict` with
    ``fields``, then ``adjudication.needed`` when the record's verdicts disagree now and did not
    before, as :func:`submit_item` announces it. Raises what ``submit_human_verdict`` raises."""
    with transaction.atomic():
        before = _disagreeing(record.pk)
        verdict = submit_human_verdict(user, record, **fields)
        if not before:
            _announce_disagreement(record.pk)
    return verdict


def _disagreeing(record_id: int) -> list[dict]:
    """The disagreeing verdict pairs of record ``record_id`` now (``evaluation.services.adjudication``), read fresh."""
    record = RunRecord.objects.prefetch_related("verdicts").get(pk=record_id)
    return record_disagreements(record)


def _announce_disagreement(record_id: int) -> None:
    """Emit ``adjudication.needed`` when record ``record_id``'s verdicts disagree now (called when they
    did not before the verdict just saved; an adjudicated record needs nothing)."""
    record = (RunRecord.objects.select_related("run__agent").prefetch_related("verdicts").get(pk=record_id))
    pairs = record_disagreements(record)
    if not pairs or record.adjudications.exists():
        return
    reasons = sorted({r for p in pairs for r in p["reasons"]})
    emit("adjudication.needed", {"record_id": record.pk, "run_id": record.run_id, "agent": record.run.agent.name,
                                 "question_id": record.question_id, "reasons": reasons}, record=record)


def gold_result(item: ScoringItem, verdict: Verdict) -> dict[str, Any] | None:
    """How a submitted gold-check verdict compares with the expected one:
    ``{correct_ok, grade_diff, flags_ok}`` (None for an ordinary item)."""
    if not item.is_gold_check or not item.expected:
        return None
    exp = item.expected
    eflags = {c for c in E_CODES if (exp.get("errors") or {}).get(c)}
    vflags = {c for c in E_CODES if (verdict.errors or {}).get(c)}
    return {
        "correct_ok": exp.get("is_correct") == verdict.is_correct,
        "grade_diff": None if exp.get("grade") is None or verdict.grade is None else abs(exp["grade"] - verdict.grade),
        "flags_ok": eflags == vflags,
    }
