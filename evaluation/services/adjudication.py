"""Disagreements between verdicts of one record, and their adjudication by a reviewer.

A disagreement (judge.md, "People, disagreement, adjudication") exists between two verdicts
when any enabled rule fires:

* correctness differs (``STUDIO_DISAGREEMENT_ON_CORRECTNESS``, default on);
* the grades differ by at least ``STUDIO_DISAGREEMENT_GRADE_DELTA`` (default 0.4);
* the flag sets differ (``STUDIO_DISAGREEMENT_ON_FLAGS``, default on).

The verdicts compared are the successful holistic verdicts of the sources in
``STUDIO_DISAGREEMENT_SOURCES`` (default human and judge; the code checker is shown apart and a
step-wise judgement is about a different question, so neither takes part). A record with a
disagreement and no final verdict is in the reviewers' queue. The reviewer records the final
verdict (``Verdict.is_final``, a human verdict by the reviewer) and a rationale, required when the
final verdict disagrees with every verdict considered; the :class:`~evaluation.models.Adjudication`
row keeps which verdicts were considered (provenance). A re-adjudication adds a newer final verdict:
the newest is the record's reference; an earlier one stays adjudicated (``is_final``), with its
adjudication row, and is never counted as a rater (``evaluation.blind.is_rater``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import transaction

from evaluation.blind import is_rater
from evaluation.judge.stepwise import parse_protocol_label
from evaluation.judge.verdict import E_CODES
from kernel.taxonomy import plan_is_correct
from evaluation.errors import EvaluationInputError
from evaluation.models import Adjudication, RunRecord, ScoringItem, Verdict
from evaluation.services.verdicts import submit_human_verdict
from studio.permissions import require

_EPS = 1e-6


@dataclass(frozen=True)
class DisagreementRules:
    """The thresholds of a disagreement (see the module docstring for the settings)."""

    on_correctness: bool = True
    grade_delta: float | None = 0.4  # None: grades never disagree
    on_flags: bool = True
    sources: tuple[str, ...] = ("human", "judge")

    @classmethod
    def from_settings(cls) -> "DisagreementRules":
        delta = settings.STUDIO_DISAGREEMENT_GRADE_DELTA
        return cls(
            on_correctness=bool(settings.STUDIO_DISAGREEMENT_ON_CORRECTNESS),
            grade_delta=None if delta is None else float(delta),
            on_flags=bool(settings.STUDIO_DISAGREEMENT_ON_FLAGS),
            sources=tuple(settings.STUDIO_DISAGREEMENT_SOURCES),
        )


def _flags(v: Any) -> frozenset[str]:
    errors = v.get("errors") if isinstance(v, Mapping) else getattr(v, "errors", None)
    return frozenset(c for c in E_CODES if (errors or {}).get(c))


def _get(v: Any, name: str) -> Any:
    return v.get(name) if isinstance(v, Mapping) else getattr(v, name, None)


def disagreement_reasons(a: Any, b: Any, rules: DisagreementRules | None = None) -> list[str]:
    """Why verdicts ``a`` and ``b`` disagree (``[]``: they agree). Each is a mapping or object with
    ``is_correct``, ``grade`` and ``errors``. Reasons read e.g. ``"correctness: yes vs no"``,
    ``"grade: 1.0 vs 0.6 (Δ 0.4)"``, ``"flags: E4 vs none"``."""
    rules = rules or DisagreementRules.from_settings()
    out = []
    ca, cb = _get(a, "is_correct"), _get(b, "is_correct")
    if rules.on_correctness and ca is not None and cb is not None and bool(ca) != bool(cb):
        out.append(f"correctness: {'yes' if ca else 'no'} vs {'yes' if cb else 'no'}")
    ga, gb = _get(a, "grade"), _get(b, "grade")
    if rules.grade_delta is not None and ga is not None and gb is not None and abs(ga - gb) >= rules.grade_delta - _EPS:
        out.append(f"grade: {ga:.1f} vs {gb:.1f} (Δ {abs(ga - gb):.1f})")
    fa, fb = _flags(a), _flags(b)
    if rules.on_flags and fa != fb:
        out.append(f"flags: {','.join(sorted(fa)) or 'none'} vs {','.join(sorted(fb)) or 'none'}")
    return out


def considered(verdicts: Iterable[Verdict], rules: DisagreementRules | None = None) -> list[Verdict]:
    """The verdicts that take part: status ok, holistic or a case of the benchmark's step-wise
    protocol (``stepwise-gold-…``, the one protocol of such a record), of an enabled source, not
    adjudicated, and for a person's verdict marked final by them (a revisable one is not a decision
    yet): ``evaluation.blind.is_rater``."""
    rules = rules or DisagreementRules.from_settings()
    return [v for v in verdicts if v.status == "ok" and v.source in rules.sources and is_rater(v)
            and ((v.protocol or "holistic") == "holistic" or parse_protocol_label(v.protocol) is not None)]


def find_disagreements(verdicts: Sequence[Any], rules: DisagreementRules | None = None) -> list[dict[str, Any]]:
    """Every disagreeing pair among ``verdicts`` (already filtered): ``[{a, b, reasons}]`` with
    ``a``/``b`` the verdict objects, in input order."""
    rules = rules or DisagreementRules.from_settings()
    out = []
    for i, a in enumerate(verdicts):
        for b in verdicts[i + 1:]:
            reasons = disagreement_reasons(a, b, rules)
            if reasons:
                out.append({"a": a, "b": b, "reasons": reasons})
    return out


def record_disagreements(record: RunRecord, rules: DisagreementRules | None = None) -> list[dict[str, Any]]:
    """Disagreeing pairs among the considered verdicts of ``record`` (uses prefetched verdicts)."""
    rules = rules or DisagreementRules.from_settings()
    return find_disagreements(considered(record.verdicts.all(), rules), rules)


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
    require(user, "verdict.adjudicate")
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
        raise EvaluationInputError("rationale: required when the final verdict overrides every verdict considered")
    # an earlier adjudicated verdict stays ``is_final``: the newest one is the record's reference, an
    # older one is neither reference nor rater (it never turns back into its reviewer's person verdict)
    final = submit_human_verdict(user, record, errors=errors, grade=grade, reasons=reasons, reasoning=reasoning,
                                 is_correct=is_correct, override_reason=override_reason,
                                 idempotency_key=idempotency_key, is_final=True)
    adj = Adjudication.objects.create(record=record, reviewer=user, final_verdict=final,
                                      rationale=rationale.strip(), overrides_all=overrides_all)
    adj.considered.set(pool)
    return adj
