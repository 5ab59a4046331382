"""Reads for the judge's aggregate report (:mod:`evaluation.judge.report`)."""
from __future__ import annotations

from typing import Iterable

from evaluation.judge.stepwise import parse_protocol_label
from evaluation.judge.verdict import E_CODES, SETTING_PROTOCOLS
from evaluation.models import Verdict


def judge_report_rows(sources: Iterable[str] = ("judge", "code")) -> list[dict]:
    """Every judge (and rule-checker) verdict as a row for
    :func:`evaluation.judge.report.judge_report`; failed judgements are rows with
    ``status="failed"`` (counted apart, never as wrong).

    ``judge`` is the stored ``judge_name`` (``<model>@<prompt version>``, one configuration);
    ``tested_model`` the agent; ``protocol`` the stored label (so the benchmark's horizons and
    stages, ``stepwise-gold-middle-2`` …, are groups of their own); ``split`` is the benchmark's split
    name, except ``step_wise_own_cut`` for the studio's own-trajectory cut, which is not a
    benchmark split; a five-class tool-broken verdict has ``errors`` null (it judges no
    flags).  Where one judge judged one record under one protocol twice, the newest counts.  One query.
    """
    qs = (Verdict.objects.filter(source__in=list(sources)).select_related("record__run__agent").order_by("id"))
    rows: dict[tuple, dict] = {}
    for v in qs:
        details = v.details or {}
        protocol = v.protocol or "holistic"
        row = {"setting": v.setting or "holistic", "regime": v.regime or None, "judge": v.judge_name or v.source,
               "tested_model": v.record.run.agent.name, "protocol": protocol,
               "status": "ok" if v.status == "ok" else "failed"}
        if protocol not in SETTING_PROTOCOLS and protocol != "holistic" and parse_protocol_label(protocol) is None:
            row["split"] = "step_wise_own_cut"
        if row["status"] == "ok":
            if v.is_correct is None:
                continue
            row.update(is_correct=v.is_correct, judge_is_correct=v.judge_is_correct, grade=v.grade,
                       errors=None if v.outcome else {c: bool((v.errors or {}).get(c)) for c in E_CODES},
                       outcome=v.outcome or None, unsolvable_type=details.get("unsolvable_type"),
                       distractors_used=details.get("distractors_used"))
        rows[(row["judge"], v.record_id, v.protocol or "holistic")] = row
    return list(rows.values())
