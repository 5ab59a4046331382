"""Blind scoring: the one rule every page, template, API endpoint, CSV and plot asks before it shows a
person a record's verdicts, its judge outcome (robustness outcomes the judge decided included) or the
agent (model) that produced it.

The rule (README, "Human scoring is blind"; ``docs/security.md``). A person is **blind** on a record
while they must still score it blind:

1. they have a person verdict of the record (not an adjudicated one) that is not marked final
   (``Verdict.sealed_at`` unset) — with a final one they are not blind;
2. else, they hold an unsubmitted queue slot of the record (``ScoringItem.scorer``, no verdict);
3. else, they may give verdicts (``verdict.create``) but lack ``verdict.view_all`` (a scorer: any
   record may still come to them).

While blind (:func:`is_blind`), a person is shown only their own verdict: no judge's, checker's or
other person's verdict, no robustness outcome (by rule or by the judge), and not the agent —
neither its name nor a link from the record to its run, nor the record among its run's records or
in a per-record export. Lists ask :func:`blind_record_ids` once for all their records. Verdicts
need more than not being blind (:func:`sees_verdicts`): the person's own final verdict of the
record, or ``verdict.view_all``.

Seeing is remembered (:class:`~evaluation.models.VerdictsSeen`, written by
``evaluation.services.queue.note_verdicts_seen`` wherever other verdicts were shown): a person who
was shown a record's other verdicts or its judge outcome never becomes one of its raters — the queue
does not hand it to them, a claim and a verdict (queue, record page, ``POST /api/records/<id>/verdicts/``)
are refused with the reason (:func:`seen_refusal`, HTTP 409). The adjudicated verdict is the reference,
never a rater (:func:`is_rater`).
"""
from __future__ import annotations

from collections.abc import Iterable

from django.db.models import Exists, OuterRef, Q

from evaluation.models import RunRecord, ScoringItem, Verdict, VerdictsSeen
from kernel.errors import Conflict
from studio.permissions import Action, can

__all__ = [
    "own_verdict", "is_blind", "sees_verdicts", "visible_verdicts", "blind_filter", "blind_record_ids", "visible_rows", "shows_agent", "agent_name",
    "robustness_for", "seen_refusal", "is_rater", "queue_params", "sees_queue_agents", "HIDDEN_ROBUSTNESS_KEYS", "NotBlind",
]

#: the keys of ``RunRecord.robustness`` that are an outcome (by rule or by the judge): hidden while blind
HIDDEN_ROBUSTNESS_KEYS = ("outcome", "decided_by", "judge_verdict", "recovered", "e5", "answer_ok")
#: record ids per query of :func:`blind_record_ids`
_ID_CHUNK = 10_000



class NotBlind(Conflict):
    """409: the person was shown the record's other verdicts or its judge outcome, so they cannot
    score it blind and never become one of its raters (:func:`seen_refusal` says where and when;
    ``evaluation.services.verdicts.submit_human_verdict`` raises it). Body: ``"blind": false``."""

    def context(self) -> dict:
        return {"blind": False}


def own_verdict(user, record: RunRecord) -> Verdict | None:
    """``user``'s own person verdict of ``record`` (never an adjudicated one), or None; uses the
    prefetched verdicts."""
    for v in record.verdicts.all():
        if v.source == Verdict.Source.HUMAN and not v.is_final and v.annotator_id == user.pk:
            return v
    return None


def _holds_slot(user, record_id: int) -> bool:
    return ScoringItem.objects.filter(record_id=record_id, scorer_id=user.pk, verdict__isnull=True).exists()


def is_blind(user, record: RunRecord) -> bool:
    """Whether ``user`` must score ``record`` blind (the rule of the module docstring): a person
    verdict of theirs not yet final, a queue slot of it they hold, or — with neither — they may give
    verdicts (``verdict.create``) without ``verdict.view_all``. Uses the prefetched verdicts; one
    query for the slot check when the person has no verdict of the record. Anonymous users: True."""
    if not getattr(user, "is_authenticated", False):
        return True
    mine = own_verdict(user, record)
    if mine is not None:
        return mine.sealed_at is None
    if _holds_slot(user, record.pk):
        return True
    return can(user, Action.VERDICT_CREATE) and not can(user, Action.VERDICT_VIEW_ALL)


def sees_verdicts(user, record: RunRecord) -> bool:
    """Whether ``user`` may be shown ``record``'s other verdicts (the judge's, the checker's, other
    people's, the adjudication): never while :func:`is_blind`; then with their own final verdict of
    the record, or with ``verdict.view_all`` (reviewers, maintainers)."""
    if is_blind(user, record):
        return False
    mine = own_verdict(user, record)
    return (mine is not None and mine.sealed_at is not None) or can(user, Action.VERDICT_VIEW_ALL)


def visible_verdicts(user, record: RunRecord) -> tuple[list[Verdict], int]:
    """``(verdicts user may see, how many the blind rule hides)``: all of them, or only the user's
    own while they are blind on the record (:func:`sees_verdicts`)."""
    allv = list(record.verdicts.all())
    if sees_verdicts(user, record):
        return allv, 0
    mine = [v for v in allv if v.source == Verdict.Source.HUMAN and not v.is_final and v.annotator_id == user.pk]
    return mine, len(allv) - len(mine)


def blind_filter(user):
    """The rule of the module docstring as one condition on ``RunRecord`` rows (a filter keeps the
    records ``user`` is blind on, an exclude those they may be shown), so a list can count and page
    them in the database: a person verdict of theirs not final, else a held queue slot, else the
    scorer case. Anonymous users: every record (``Q(pk__isnull=False)``); a person who is no scorer
    and has neither a verdict still open nor a held slot: no record (``Q(pk__in=[])``, which the ORM
    answers without scanning)."""
    if not getattr(user, "is_authenticated", False):
        return Q(pk__isnull=False)
    own = Verdict.objects.filter(annotator_id=user.pk, source=Verdict.Source.HUMAN, is_final=False)
    mine = own.filter(record_id=OuterRef("pk"))
    open_own = Exists(mine.filter(sealed_at__isnull=True))
    no_own = ~Exists(mine)
    if can(user, Action.VERDICT_CREATE) and not can(user, Action.VERDICT_VIEW_ALL):
        return open_own | no_own
    held_slots = ScoringItem.objects.filter(scorer_id=user.pk, verdict__isnull=True)
    if not own.filter(sealed_at__isnull=True).exists() and not held_slots.exists():
        return Q(pk__in=[])  # no open verdict, no held slot: blind on no record (two small queries, no scan)
    held = Exists(held_slots.filter(record_id=OuterRef("pk")))
    return open_own | (no_own & held)


def blind_record_ids(user, record_ids: Iterable[int]) -> set[int]:
    """The ids among ``record_ids`` that ``user`` must score blind (:func:`blind_filter`, one query):
    lists drop these rows, or mask their outcome and agent. Anonymous users: all."""
    ids = set(record_ids)
    if not ids or not getattr(user, "is_authenticated", False):
        return ids
    out: set[int] = set()
    chunk = sorted(ids)
    for at in range(0, len(chunk), _ID_CHUNK):  # SQLite takes at most 32,766 parameters a query
        out.update(RunRecord.objects.filter(pk__in=chunk[at:at + _ID_CHUNK]).filter(blind_filter(user))
                   .values_list("pk", flat=True))
    return out


def visible_rows(user, rows: list[dict], key: str = "record_id") -> tuple[list[dict], int]:
    """``(rows user may be shown, how many were left out)`` of a per-record export (the leaderboard's
    CSV and parquet: one row per record with its agent, ``key`` its record id): the rows of records
    ``user`` is blind on are left out, so no export ties such a record to its agent. Two queries."""
    hide = blind_record_ids(user, [r[key] for r in rows])
    if not hide:
        return rows, 0
    return [r for r in rows if r[key] not in hide], sum(1 for r in rows if r[key] in hide)


def shows_agent(user, record: RunRecord) -> bool:
    """Whether ``user`` may be shown which agent (model) produced ``record`` and its run: exactly
    when they need not score it blind (the agent biases a blind scorer as much as a verdict does)."""
    return not is_blind(user, record)


def agent_name(user, record: RunRecord) -> str | None:
    """The record's agent name for ``user``, or None while they are blind on it."""
    return record.run.agent.name if shows_agent(user, record) else None


def robustness_for(user, record: RunRecord) -> dict | None:
    """``record.robustness`` as ``user`` may see it: as stored, or — blind — without its outcome
    (:data:`HIDDEN_ROBUSTNESS_KEYS`: the rule's or the judge's decision, the judge verdict's id) and
    with ``"hidden": True``. None for a record of no variant task."""
    rob = record.robustness
    if not rob:
        return None
    if not is_blind(user, record):
        return rob
    return {**{k: v for k, v in rob.items() if k not in HIDDEN_ROBUSTNESS_KEYS}, "hidden": True}


def seen_refusal(user, record: RunRecord) -> str | None:
    """Why ``user`` cannot score ``record`` blind (they were shown its other verdicts or its judge
    outcome, see :class:`~evaluation.models.VerdictsSeen`), or None. One query."""
    seen = VerdictsSeen.objects.filter(user_id=user.pk, record=record).first()
    if seen is None:
        return None
    return (f"You saw the other verdicts of {record.question_id} (on the {seen.via}, {seen.at:%Y-%m-%d %H:%M} UTC), "
            f"so you cannot score it blind; the item goes to another scorer.")


def is_rater(v: Verdict) -> bool:
    """Whether ``v`` counts as a rater's verdict in agreement and adjudication: the judge's and the
    checker's always, a person's once they marked it final; an adjudicated verdict (``is_final``,
    also one a later adjudication replaced) never — it is the reference."""
    if v.is_final:
        return False
    return v.source != Verdict.Source.HUMAN or v.sealed_at is not None


def sees_queue_agents(user) -> bool:
    """Whether the scoring queue names agents to ``user`` (its list's agent column, a queue per
    agent): only to those who manage queues (``queue.manage``) and are scoring nothing blind
    themselves (no queue slot held, no verdict still revisable); a scorer's queue never does.
    Up to two queries."""
    if not can(user, Action.QUEUE_MANAGE):
        return False
    if ScoringItem.objects.filter(scorer_id=user.pk, verdict__isnull=True).exists():
        return False
    return not Verdict.objects.filter(annotator_id=user.pk, source=Verdict.Source.HUMAN, is_final=False,
                                      sealed_at__isnull=True).exists()


def queue_params(user, params) -> dict:
    """The queue filter parameters (``release``, ``agent``, ``dimension``) ``user`` may use: without
    :func:`sees_queue_agents` the ``agent`` one is dropped (choosing a queue by agent would tell the
    scorer the agent of every item in it). ``params``: a mapping (a QueryDict or the API's data)."""
    out = {k: params.get(k) or "" for k in ("release", "agent", "dimension")}
    if not sees_queue_agents(user):
        out["agent"] = ""
    return out
