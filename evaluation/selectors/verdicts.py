"""Reads of verdicts: a record's verdicts for display, which count as decisions, and every decided
verdict as a row of the agreement report."""
from __future__ import annotations

from django.db.models import Max

from evaluation.judge.verdict import E_CODES
from evaluation.models import RunRecord, Verdict


def is_decided(v: Verdict) -> bool:
    """A verdict that counts in adjudication and agreement: a person's only once marked final
    (a revisable one is still being made up), the judge's and the checker's always."""
    return v.source != Verdict.Source.HUMAN or v.sealed_at is not None or v.is_final


def record_verdicts(record: RunRecord, verdicts: list[Verdict] | None = None) -> dict[str, list[Verdict]]:
    """A record's verdicts (or the given ones, e.g. :func:`visible_verdicts`) split for display:
    ``{"people": [...], "judges": [...], "code": [...]}`` (final first, then newest first)."""
    out: dict[str, list[Verdict]] = {"people": [], "judges": [], "code": []}
    for v in sorted(record.verdicts.all() if verdicts is None else verdicts, key=lambda v: (not v.is_final, -v.pk)):
        out["people" if v.source == Verdict.Source.HUMAN else "judges" if v.source == Verdict.Source.JUDGE else "code"].append(v)
    return out


def agreement_rows() -> list[dict]:
    """Every successful verdict as a row for :func:`evaluation.agreement.agreement_report`.

    The unit judged (``run_id``) is ``<record id>:<protocol>`` (a step-wise cut is a different
    question from the whole run); humans are the reference; a judge row carries
    ``judge_model`` and ``prompt_version``; ``tested_model`` is the agent; ``dimension`` the
    record's. Where one rater judged one unit twice (re-runs), the newest verdict counts. Of a
    record's adjudicated verdicts only the newest is a row (the reference, ``final``); raters are
    the verdicts of ``evaluation.blind.is_rater``. Two queries.
    """
    qs = (Verdict.objects.filter(status="ok").exclude(is_correct__isnull=True)
          .select_related("annotator", "record__run__agent").order_by("id"))
    newest_final = dict(Verdict.objects.filter(is_final=True, status="ok").values("record_id")
                        .annotate(last=Max("id")).values_list("record_id", "last"))
    rows: dict[tuple, dict] = {}
    for v in qs:
        if not is_decided(v):
            continue  # a person's verdict still being revised (blind, not final) is no decision yet
        if v.is_final and newest_final.get(v.record_id) != v.pk:
            continue  # an adjudicated verdict a re-adjudication replaced: neither the reference nor a rater
        protocol = v.protocol or "holistic"
        unit = f"{v.record_id}:{protocol}"
        row = {"run_id": unit, "source": v.source, "is_correct": v.is_correct, "grade": v.grade,
               "errors": {c: bool((v.errors or {}).get(c)) for c in E_CODES} if v.errors else None,
               "dimension": v.record.dimension, "protocol": protocol, "tested_model": v.record.run.agent.name}
        if v.source == Verdict.Source.HUMAN:
            row["annotator"] = v.annotator.username if v.annotator else f"person-{v.annotator_id}"
            if v.is_final:
                row["final"] = True
                row["annotator"] += " (final)"
        else:
            pv = v.prompt_version or ""
            model = v.judge_name[: -len(pv) - 1] if pv and v.judge_name.endswith("@" + pv) else v.judge_name
            row["annotator"] = model or v.source
            if v.source == Verdict.Source.JUDGE:
                row["judge_model"] = model
            row["prompt_version"] = pv or None
        rows[(row["source"], row["annotator"], row.get("prompt_version"), unit)] = row
    return list(rows.values())
