"""The registry of QC checks and the findings they make (no database, no HTTP).

Every check is declared once, in the module of its concern, as a row ``id → (severity, meaning)``
of that module's ``CHECKS`` table passed to :func:`declare`; the registry knows each id's
:class:`Check` (id, severity, meaning, concern) from there, and :func:`finding` makes a finding
with the declared severity. ``annotation.qc.CHECKS`` lists every table in the suite's order (what
the docs and pages list). Severities are fixed per id: ``error`` blocks submission, ``warning``
informs.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

__all__ = ["SEVERITIES", "Check", "Finding", "declare", "registered", "finding", "has_errors", "sort_findings"]

#: the severities a check may have: an error blocks submission, a warning informs
SEVERITIES = ("error", "warning")


@dataclass(frozen=True)
class Check:
    """One QC check: its stable ``id`` (``<family>.<name>``), its ``severity`` (one of
    :data:`SEVERITIES`), its ``meaning`` (what a finding of it says is wrong, one line) and its
    ``concern``: the module of ``annotation.qc`` that declares it (``structure``, ``steps``,
    ``references``, …)."""

    id: str
    severity: str
    meaning: str
    concern: str


_REGISTRY: dict[str, Check] = {}


def declare(concern: str, table: dict[str, tuple[str, str]]) -> dict[str, tuple[str, str]]:
    """Register the checks of ``concern`` (``table``: id → (severity, meaning)) and return the
    table unchanged. Raises ``ValueError`` for a severity not in :data:`SEVERITIES` or an id that
    another concern declared already."""
    for check_id, (severity, meaning) in table.items():
        if severity not in SEVERITIES:
            raise ValueError(f"QC check {check_id}: severity {severity!r} is not one of {', '.join(SEVERITIES)}")
        known = _REGISTRY.get(check_id)
        if known is not None and known.concern != concern:
            raise ValueError(f"QC check {check_id} is declared by both {known.concern} and {concern}")
        _REGISTRY[check_id] = Check(check_id, severity, meaning, concern)
    return table


def registered() -> dict[str, Check]:
    """Every declared check by id (a copy), in the order the concern modules were imported."""
    return dict(_REGISTRY)


@dataclass(frozen=True)
class Finding:
    """One finding of a check: its id, severity, message (the problem and the fix) and location."""
    check: str
    severity: str  # "error" or "warning"
    message: str
    location: str

    def as_dict(self) -> dict:
        """``{check, severity, message, location}``."""
        return asdict(self)


def has_errors(findings: list[Finding]) -> bool:
    """Whether any of ``findings`` is an error (what blocks submission)."""
    return any(f.severity == "error" for f in findings)


def finding(check: str, message: str, location: str) -> Finding:
    """A finding of the declared check ``check`` (its severity from the registry; ``KeyError``
    for an id no concern declared)."""
    return Finding(check, _REGISTRY[check].severity, message, location)


def sort_findings(findings: list[Finding]) -> list[Finding]:
    """``findings`` without repeats (same check, location and message: the first kept), errors
    first, each severity in the order the checks found them (a stable sort)."""
    seen, out = set(), []
    for f in findings:
        key = (f.check, f.location, f.message)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return sorted(out, key=lambda f: f.severity != "error")
