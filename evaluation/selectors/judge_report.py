"""Reads for the judge's aggregate report (:mod:`evaluation.judge.report`) and for agreement, under
either reading of the judge's answers (``studio`` or ``apb``, :data:`evaluation.judge.verdict.READINGS`).

Stored judge verdicts are always the studio's reading of the answer (the queue, adjudication and the
leaderboard rely on its invariants); they keep the raw answers (``Verdict.raw``,
``JudgeCall.raw_texts``), so the ``apb`` reading is computed here from those texts on demand,
without any judge call.
"""
from __future__ import annotations

from collections.abc import Iterable
from types import SimpleNamespace

from evaluation.judge.stepwise import parse_protocol_label, protocol_horizon
from evaluation.judge.verdict import (
    DEFAULT_READING,
    E_CODES,
    SETTING_PROTOCOLS,
    VerdictParseError,
    normalize_reading,
    parse_verdict,
    protocol_setting,
)
from evaluation.models import JudgeCall, Verdict
from evaluation.services.judge import RE_ASK_SEPARATOR


def first_answers(verdicts: Iterable[Verdict]) -> dict[int, str]:
    """The judge's first answer of each verdict's call, by verdict id: what the benchmark, which
    never re-asks, would have read.  ``JudgeCall.raw_texts[0]`` of the call that points at the
    verdict, or, for a verdict copied from a cached call (another record with the same inputs),
    of the call with its prompt and last answer; else the first part of ``Verdict.raw`` (a failed
    verdict keeps every answer, joined by :data:`evaluation.services.judge.RE_ASK_SEPARATOR`).
    One query, two when there are copies."""
    verdicts = list(verdicts)
    out: dict[int, str] = {}
    for vid, texts in JudgeCall.objects.filter(verdict_id__in=[v.pk for v in verdicts]).values_list(
            "verdict_id", "raw_texts"):
        if texts:
            out[vid] = str(texts[0])
    copies = [v for v in verdicts if v.pk not in out and v.status == "ok" and v.prompt]
    if copies:  # a verdict copied from a cached call: that call (same prompt, same last answer)
        first: dict[tuple[str, str], str] = {}
        for prompt, texts in JudgeCall.objects.filter(status="ok", prompt__in={v.prompt for v in copies}).values_list(
                "prompt", "raw_texts"):
            if texts:
                first[(prompt, str(texts[-1]))] = str(texts[0])
        for v in copies:
            if (v.prompt, v.raw) in first:
                out[v.pk] = first[(v.prompt, v.raw)]
    for v in verdicts:
        if v.pk not in out:
            out[v.pk] = (v.raw or "").split(RE_ASK_SEPARATOR)[0]
    return out


def reread(v: Verdict, raw: str, reading: str):
    """The verdict ``v``'s answer ``raw`` read under ``reading``: a
    :class:`evaluation.judge.verdict.Verdict`, or None where that reading cannot read it (a failed
    judgement under that reading).  The setting and regime come from the stored protocol, the
    step-wise horizon from its label, the distractor calls from the stored details."""
    setting, regime = protocol_setting(v.protocol)
    try:
        return parse_verdict(raw, setting=setting, regime=regime, reading=reading,
                             horizon=protocol_horizon(v.protocol),
                             distractors_used=(v.details or {}).get("distractors_used"))
    except (VerdictParseError, ValueError):
        return None


#: what a row reads of a verdict (its large texts, and the record's trajectories, stay unread)
_ROW_FIELDS = ("id", "record_id", "source", "setting", "regime", "judge_name", "protocol", "status", "is_correct",
               "judge_is_correct", "grade", "errors", "outcome", "details", "record__run__agent__name")


def judge_report_rows(sources: Iterable[str] = ("judge", "code"), reading: str = DEFAULT_READING) -> list[dict]:
    """Every judge (and rule-checker) verdict as a row for
    :func:`evaluation.judge.report.judge_report`, read under ``reading`` (each row says which);
    failed judgements are rows with ``status="failed"`` (counted apart, never as wrong).

    ``studio``: the stored verdicts as they are.  ``apb``: each judge verdict's first raw answer
    re-read by :func:`evaluation.judge.verdict.parse_verdict_apb` (no judge call; an answer the
    benchmark drops is a failed row, one the studio refused may be read); rule-checker verdicts
    are left out (the benchmark has no rule checker, and they have no judge answer to read).

    ``judge`` is the stored ``judge_name`` (``<model>@<prompt version>``, one configuration);
    ``tested_model`` the agent; ``protocol`` the stored label (so the benchmark's horizons and
    stages, ``stepwise-gold-middle-2`` …, are groups of their own); ``split`` is the benchmark's split
    name, except ``step_wise_own_cut`` for the studio's own-trajectory cut, which is not a
    benchmark split; a five-class tool-broken verdict has ``errors`` null (it judges no
    flags).  Where one judge judged one record under one protocol twice, the newest counts.  One
    query in the studio reading; two or three in the apb reading (:func:`first_answers`).
    ``ValueError`` for an unknown reading.
    """
    reading = normalize_reading(reading)
    if reading == "apb":
        sources = [s for s in sources if s == Verdict.Source.JUDGE]
    fields = _ROW_FIELDS + (("prompt", "raw") if reading == "apb" else ())  # first_answers reads those two
    # plain values, not model instances (four per verdict with its record, run and agent): what a
    # row, :func:`reread` and :func:`first_answers` read of a verdict, by the same attribute names
    qs = [SimpleNamespace(pk=d["id"], agent=d.pop("record__run__agent__name"), **d)
          for d in Verdict.objects.filter(source__in=list(sources)).order_by("id").values(*fields)]
    answers = first_answers(qs) if reading == "apb" else {}
    rows: dict[tuple, dict] = {}
    for v in qs:
        details = v.details or {}
        protocol = v.protocol or "holistic"
        row = {"setting": v.setting or "holistic", "regime": v.regime or None, "judge": v.judge_name or v.source,
               "tested_model": v.agent, "protocol": protocol, "reading": reading,
               "status": "ok" if v.status == "ok" else "failed"}
        if protocol not in SETTING_PROTOCOLS and protocol != "holistic" and parse_protocol_label(protocol) is None:
            row["split"] = "step_wise_own_cut"
        if reading == "apb":
            read = reread(v, answers[v.pk], reading)
            row["status"] = "ok" if read is not None else "failed"
            if read is not None:
                row.update(regime=read.regime, is_correct=read.is_correct, judge_is_correct=read.model_is_correct,
                           grade=read.grade, errors=None if read.outcome else dict(read.errors),
                           outcome=read.outcome, unsolvable_type=details.get("unsolvable_type"),
                           distractors_used=details.get("distractors_used"), apb_path=read.apb_path)
        elif row["status"] == "ok":
            if v.is_correct is None:
                continue
            row.update(is_correct=v.is_correct, judge_is_correct=v.judge_is_correct, grade=v.grade,
                       errors=None if v.outcome else {c: bool((v.errors or {}).get(c)) for c in E_CODES},
                       outcome=v.outcome or None, unsolvable_type=details.get("unsolvable_type"),
                       distractors_used=details.get("distractors_used"))
        rows[(row["judge"], v.record_id, v.protocol or "holistic")] = row
    return list(rows.values())


def reread_agreement_rows(rows: list[dict], reading: str = DEFAULT_READING) -> list[dict]:
    """Agreement rows (:func:`evaluation.selectors.verdicts.agreement_rows`) ready for
    :func:`evaluation.agreement.agreement_report` under ``reading``: in the ``apb`` reading each
    judge row gets its verdict's first raw answer (``raw``) and its ``setting``/``regime``, which
    :func:`evaluation.agreement.read_rows` re-reads (no judge call); people's and the rule
    checker's rows are unchanged.  An answer the studio could not read has no agreement row in
    either reading.  Two or three queries in the apb reading, none in the studio's."""
    reading = normalize_reading(reading)
    if reading != "apb":
        return rows
    verdicts: dict[tuple, Verdict] = {}
    for v in Verdict.objects.filter(source=Verdict.Source.JUDGE, status="ok").order_by("id"):
        verdicts[(f"{v.record_id}:{v.protocol or 'holistic'}", v.judge_name)] = v
    answers = first_answers(list(verdicts.values()))
    out = []
    for row in rows:
        if row.get("source") == Verdict.Source.JUDGE:
            pv = row.get("prompt_version")
            name = f"{row['annotator']}@{pv}" if pv else row["annotator"]
            v = verdicts.get((row["run_id"], name))
            if v is not None:
                row = {**row, "raw": answers[v.pk], "setting": v.setting, "regime": v.regime}
        out.append(row)
    return out
