"""Reads of verdicts: a record's verdicts for display, which count as decisions, and every decided
verdict as a row of the agreement report."""
from __future__ import annotations

from django.db.models import BooleanField, ExpressionWrapper, Max, Q, TextField
from django.db.models.functions import Cast

from evaluation.judge.verdict import E_CODES
from evaluation.models import RunRecord, Verdict
from kernel.taskfile import decode_json


def is_decided(v: Verdict) -> bool:
    """A verdict that counts in adjudication and agreement: a person's only once marked final
    (a revisable one is still being made up), the judge's and the checker's always."""
    return _decided(v.source, v.sealed_at, v.is_final)


def _decided(source: str, sealed_at, is_final: bool) -> bool:
    return source != Verdict.Source.HUMAN or sealed_at is not None or is_final


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

    Read for speed at scale (12,000 verdicts: the agreement page reads them on every request to
    key its stored report): ``errors`` comes as its JSON text, decoded by
    ``kernel.taskfile.decode_json`` (msgspec) rather than the JSON field's ``json.loads``, and
    ``sealed_at`` only as whether it is set (no timestamp parsed).
    """
    qs = (Verdict.objects.filter(status="ok").exclude(is_correct__isnull=True).order_by("id")
          .annotate(errors_text=Cast("errors", TextField()),
                    sealed=ExpressionWrapper(Q(sealed_at__isnull=False), output_field=BooleanField()))
          .values_list("id", "record_id", "source", "is_correct", "grade", "errors_text", "protocol", "is_final", "sealed",
                       "annotator_id", "annotator__username", "judge_name", "prompt_version", "record__dimension",
                       "record__run__agent__name"))
    newest_final = dict(Verdict.objects.filter(is_final=True, status="ok").values("record_id")
                        .annotate(last=Max("id")).values_list("record_id", "last"))
    rows: dict[tuple, dict] = {}
    for (pk, record_id, source, is_correct, grade, errors_text, protocol, is_final, sealed, annotator_id, username,
         judge_name, prompt_version, dimension, agent) in qs.iterator(chunk_size=2000):
        if not _decided(source, True if sealed else None, is_final):
            continue  # a person's verdict still being revised (blind, not final) is no decision yet
        if is_final and newest_final.get(record_id) != pk:
            continue  # an adjudicated verdict a re-adjudication replaced: neither the reference nor a rater
        protocol = protocol or "holistic"
        unit = f"{record_id}:{protocol}"
        errors = decode_json(errors_text) if errors_text else None
        row = {"run_id": unit, "source": source, "is_correct": is_correct, "grade": grade,
               "errors": {c: bool(errors.get(c)) for c in E_CODES} if errors else None,
               "dimension": dimension, "protocol": protocol, "tested_model": agent}
        if source == Verdict.Source.HUMAN:
            row["annotator"] = username if annotator_id is not None else f"person-{annotator_id}"
            if is_final:
                row["final"] = True
                row["annotator"] += " (final)"
        else:
            pv = prompt_version or ""
            model = judge_name[: -len(pv) - 1] if pv and judge_name.endswith("@" + pv) else judge_name
            row["annotator"] = model or source
            if source == Verdict.Source.JUDGE:
                row["judge_model"] = model
            row["prompt_version"] = pv or None
        rows[(row["source"], row["annotator"], row.get("prompt_version"), unit)] = row
    return list(rows.values())
