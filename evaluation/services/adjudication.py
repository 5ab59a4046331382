"""The adjudication of a record whose verdicts disagree (the rules: :mod:`evaluation.disagreement`).

A record with a disagreement and no final verdict is in the reviewers' queue
(:func:`evaluation.selectors.adjudication.adjudication_queue`). The reviewer records the final
verdict (``Verdict.is_final``, a human verdict by the reviewer) and a rationale, required when the
final verdict disagrees with every verdict considered; the :class:`~evaluation.models.Adjudication`
row keeps which verdicts were considered (provenance). A re-adjudication adds a newer final verdict:
the newest is the record's reference; an earlier one stays adjudicated (``is_final``), with its
adjudication row, and is never counted as a rater (``evaluation.blind.is_rater``).
"""
from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.db import transaction

from evaluation.disagreement import DisagreementRules, disagreement_reasons
from evaluation.judge.verdict import E_CODES
from evaluation.models import Adjudication, RunRecord, ScoringItem, Verdict
from evaluation.selectors.adjudication import considered
from evaluation.services.verdicts import submit_human_verdict
from kernel.errors import InvalidInput
from kernel.taxonomy import plan_is_correct
from studio.permissions import Action, require


def scored_by(user, record: RunRecord) -> str:
    """How ``user`` took part in scoring ``record`` (a conflict of interest for adjudicating it):
    ``"scored"`` (a person verdict of theirs), ``"hold a scoring slot of"`` (a queue item claimed),
    or ``""`` (none)."""
    if Verdict.objects.filter(record=record, annotator=user, source=Verdict.Source.HUMAN, is_final=False).exists():
        return "scored"
    if ScoringItem.objects.filter(record=record, scorer=user).exists():
        return "hold a scoring slot of"
    return ""


@transaction.atomic
def adjudicate(user, record: RunRecord, *, errors: dict, grade: float, reasons: dict | None = None,
               reasoning: str = "", is_correct: bool | None = None, override_reason: str = "",
               rationale: str = "", idempotency_key: str | None = None) -> Adjudication:
    """Record the reviewer's final verdict of ``record`` with a rationale; return the Adjudication.

    The final verdict is a human verdict by the reviewer with ``is_final=True`` (correctness
    follows its flags unless overridden with a reason, as for any human verdict). It "overrides
    everyone" when it disagrees (:func:`disagreement_reasons`) with every considered verdict; then a
    rationale is required. Raises ``PermissionDenied`` without ``verdict.adjudicate`` and
    ``ValueError`` naming the field (``rationale``, ``grade``, ``errors``, ``is_correct``).
    A resubmitted form (same ``idempotency_key``) returns the first adjudication.
    """
    require(user, Action.VERDICT_ADJUDICATE)
    conflict = scored_by(user, record)
    if conflict:
        raise PermissionDenied(f"you {conflict} {record.question_id}, so you cannot adjudicate it; another reviewer must")
    if idempotency_key:
        prior = Verdict.objects.filter(idempotency_key=str(idempotency_key)[:80], record=record, is_final=True).first()
        if prior is not None:
            adj = Adjudication.objects.filter(final_verdict=prior).first()
            if adj is not None:
                return adj
    rules = DisagreementRules.from_settings()
    pool = considered(record.verdicts.all(), rules)
    flags = {c: bool((errors or {}).get(c)) for c in E_CODES}
    derived = plan_is_correct(flags)
    probe = {"is_correct": derived if is_correct is None else is_correct, "grade": float(grade), "errors": flags}
    overrides_all = bool(pool) and all(disagreement_reasons(probe, v, rules) for v in pool)
    if overrides_all and not rationale.strip():
        raise InvalidInput("rationale: required when the final verdict overrides every verdict considered")
    # an earlier adjudicated verdict stays ``is_final``: the newest one is the record's reference, an
    # older one is neither reference nor rater (it never turns back into its reviewer's person verdict)
    final = submit_human_verdict(user, record, errors=errors, grade=grade, reasons=reasons, reasoning=reasoning,
                                 is_correct=is_correct, override_reason=override_reason,
                                 idempotency_key=idempotency_key, is_final=True)
    adj = Adjudication.objects.create(record=record, reviewer=user, final_verdict=final,
                                      rationale=rationale.strip(), overrides_all=overrides_all)
    adj.considered.set(pool)
    return adj
