"""When two verdicts of one record disagree: the rules, on plain values (no database, no models).

A disagreement (judge.md, "People, disagreement, adjudication") exists between two verdicts
when any enabled rule fires:

* correctness differs (``STUDIO_DISAGREEMENT_ON_CORRECTNESS``, default on);
* the grades differ by at least ``STUDIO_DISAGREEMENT_GRADE_DELTA`` (default 0.4);
* the flag sets differ (``STUDIO_DISAGREEMENT_ON_FLAGS``, default on).

The verdicts compared are the successful holistic verdicts of the sources in
``STUDIO_DISAGREEMENT_SOURCES`` (default human and judge; the code checker is shown apart and a
step-wise judgement is about a different question, so neither takes part): which verdicts of a
record take part is :func:`evaluation.selectors.adjudication.considered`. A record with a
disagreement and no final verdict is in the reviewers' queue
(:func:`evaluation.selectors.adjudication.adjudication_queue`); its adjudication is
:func:`evaluation.services.adjudication.adjudicate`.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from evaluation.judge.verdict import E_CODES

_EPS = 1e-6


@dataclass(frozen=True)
class DisagreementRules:
    """The thresholds of a disagreement (see the module docstring for the settings)."""

    on_correctness: bool = True
    grade_delta: float | None = 0.4  # None: grades never disagree
    on_flags: bool = True
    sources: tuple[str, ...] = ("human", "judge")

    @classmethod
    def from_settings(cls) -> DisagreementRules:
        """The rules the studio's settings set (``STUDIO_DISAGREEMENT_*``, ``studio/settings.py``)."""
        from django.conf import settings  # read when asked: the rules themselves need no Django

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
