"""A person's verdict of a run record: record it, revise it until it is final, refuse it when the
person is not blind to the record's other verdicts (``evaluation.blind``) or the record was adjudicated.
The E1–E6 flags, the 0–1 grade scale in steps of 0.2 and "correct iff no flag" (judge.md, "The verdict")."""
from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.utils import timezone

from evaluation.blind import NotBlind, seen_refusal
from evaluation.models import Adjudication, RunRecord, Verdict, VerdictRevision
from kernel.errors import Conflict, InvalidInput
from kernel.taxonomy import E_CODES, plan_is_correct
from studio.permissions import Action, require

ERROR_CODES = E_CODES
GRADES = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)


def derive_correctness(errors: dict) -> bool:
    """Plan correctness is true exactly when no E1–E6 flag is set (judge.md, 'The verdict')."""
    return plan_is_correct(errors)


class VerdictLocked(Conflict):
    """A person's verdict that can no longer change: marked final (others' verdicts are visible to
    its author), or the record was adjudicated. The message says which and since when."""


def _check_fields(errors: dict, grade: float, is_correct: bool | None, override_reason: str) -> tuple[dict, bool]:
    unknown = set(errors) - set(ERROR_CODES)
    if unknown:
        raise InvalidInput(f"errors: unknown flag(s) {', '.join(sorted(unknown))}; use E1–E6")
    if not any(abs(float(grade) - g) < 1e-9 for g in GRADES):
        raise InvalidInput(f"grade: {grade} is not one of 0, 0.2, 0.4, 0.6, 0.8, 1.0")
    flags = {code: bool(errors.get(code, False)) for code in ERROR_CODES}
    derived = derive_correctness(flags)
    if is_correct is not None and is_correct != derived and not override_reason.strip():
        raise InvalidInput("is_correct: overriding the correctness the flags imply needs a reason")
    return flags, derived


def _by_token(idempotency_key: str, record: RunRecord, user) -> Verdict | None:
    """The verdict a form token already produced (its first save or a later revision), or None.
    Raises ``ValueError`` when the token belongs to another record or person."""
    existing = Verdict.objects.filter(idempotency_key=idempotency_key).first()
    if existing is None:
        rev = VerdictRevision.objects.filter(idempotency_key=idempotency_key).select_related("verdict").first()
        existing = rev.verdict if rev is not None else None
    if existing is not None and (existing.record_id != record.pk or existing.annotator_id != user.pk):
        raise InvalidInput("idempotency_key: this form token was already used for another verdict")
    return existing


def _require_blind(user, record: RunRecord) -> None:
    """Refuse a person verdict from someone who was shown the record's other verdicts or its judge
    outcome (``evaluation.blind.seen_refusal``): they never become one of its raters."""
    refusal = seen_refusal(user, record)
    if refusal:
        raise NotBlind(refusal)


@transaction.atomic
def submit_human_verdict(user, record: RunRecord, *, errors: dict, grade: float, reasons: dict | None = None,
                         reasoning: str = "", is_correct: bool | None = None, override_reason: str = "",
                         idempotency_key: str | None = None, is_final: bool = False, seal: bool = True) -> Verdict:
    """Record or revise a person's verdict of ``record``; return it (``revision == 1``: just created).

    One verdict per person per record (a partial unique constraint): a second save by the same
    person revises it — the row holds the newest state, every state is kept as a
    :class:`~evaluation.models.VerdictRevision`. ``seal`` marks it final for its author: only
    then are the record's other verdicts shown to them (:func:`evaluation.blind.sees_verdicts`),
    and from then on it cannot change. Correctness follows the flags unless overridden with a reason.

    ``idempotency_key`` (the hidden token of the submitted form): a second submission with the same
    key returns the verdict and changes nothing (a double click, a resent request).
    ``is_final``: the adjudicated verdict (only :func:`evaluation.services.adjudication.adjudicate`
    passes it, having checked the reviewer): always a new row, never a revision.

    Raises ``ValueError`` naming the field for a grade off the 0–1 step-0.2 scale, an unknown flag,
    an override without a reason, or a key already used for another record or person;
    :class:`VerdictLocked` when the person's verdict is final or the record was adjudicated,
    :class:`~evaluation.blind.NotBlind` (409) when the person was shown the record's other verdicts
    or its judge outcome (blind scoring: they never become one of its raters), and
    ``PermissionDenied`` when the person adjudicated this record (they cannot also score it).
    """
    require(user, Action.VERDICT_CREATE)
    if idempotency_key:
        idempotency_key = str(idempotency_key)[:80]
        existing = _by_token(idempotency_key, record, user)
        if existing is not None:
            return existing
    flags, derived = _check_fields(errors, grade, is_correct, override_reason)
    final = derived if is_correct is None else is_correct
    text = reasoning
    if is_correct is not None and is_correct != derived:
        text = f"{reasoning}\n[correctness overridden: {override_reason.strip()}]".strip()
    state = dict(is_correct=final, grade=float(grade), errors=flags, reasoning=text,
                 reasons={k: str(v).strip() for k, v in (reasons or {}).items() if k in ERROR_CODES and str(v or "").strip()})
    stepwise = (record.gold or {}).get("stepwise")  # a case of the benchmark's step-wise protocol
    kind = dict(protocol=(stepwise or {}).get("protocol") or "holistic",
                setting="step-wise" if stepwise else "holistic", regime="step-wise" if stepwise else "holistic")
    now = timezone.now()
    if is_final:
        return Verdict.objects.create(record=record, source=Verdict.Source.HUMAN, annotator=user, **kind,
                                      is_final=True, idempotency_key=idempotency_key or None, sealed_at=now, **state)
    if Adjudication.objects.filter(record=record, reviewer=user).exists():
        raise PermissionDenied("you adjudicated this record, so you cannot also score it")
    adjudicated = Adjudication.objects.filter(record=record).order_by("id").first()
    mine = (Verdict.objects.select_for_update()
            .filter(record=record, annotator=user, source=Verdict.Source.HUMAN, is_final=False).first())
    if mine is not None:
        if mine.sealed_at is not None:
            raise VerdictLocked(f"your verdict of {record.question_id} is final since {mine.sealed_at:%Y-%m-%d %H:%M} UTC "
                                f"(the other verdicts became visible to you then), so it cannot change")
        if adjudicated is not None:
            raise VerdictLocked(f"{record.question_id} was adjudicated on {adjudicated.created_at:%Y-%m-%d %H:%M} UTC; "
                                f"its verdicts no longer change")
        _require_blind(user, record)
        for k, v in state.items():
            setattr(mine, k, v)
        mine.revision += 1
        mine.updated_at = now
        mine.sealed_at = now if seal else None
        mine.save(update_fields=[*state, "revision", "updated_at", "sealed_at"])
        VerdictRevision.objects.create(verdict=mine, number=mine.revision, sealed=seal,
                                       idempotency_key=idempotency_key or None, **state)
        return mine
    if adjudicated is not None:
        raise VerdictLocked(f"{record.question_id} was adjudicated on {adjudicated.created_at:%Y-%m-%d %H:%M} UTC; "
                            f"it takes no new verdicts")
    _require_blind(user, record)
    try:
        with transaction.atomic():  # a savepoint: a concurrent twin may win the unique key or constraint
            verdict = Verdict.objects.create(record=record, source=Verdict.Source.HUMAN, annotator=user,
                                             **kind, idempotency_key=idempotency_key or None,
                                             sealed_at=now if seal else None, **state)
    except IntegrityError:
        existing = _by_token(idempotency_key, record, user) if idempotency_key else None
        if existing is not None:
            return existing
        raise VerdictLocked("another save of your verdict of this record happened at the same moment; reload it") from None
    VerdictRevision.objects.create(verdict=verdict, number=1, sealed=seal, **state)
    return verdict
