"""Reads of adjudication: which verdicts of a record take part in a disagreement, the reviewers' queue (records
whose verdicts disagree, :mod:`evaluation.disagreement`), recent adjudications, and the adjudication summary of a
release's tasks (a sidecar field of the release export)."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import Count, Prefetch

from evaluation.blind import is_rater
from evaluation.disagreement import DisagreementRules, find_disagreements
from evaluation.judge.stepwise import parse_protocol_label
from evaluation.models import Adjudication, RunRecord, Verdict


def considered(verdicts: Iterable[Verdict], rules: DisagreementRules | None = None) -> list[Verdict]:
    """The verdicts that take part: status ok, holistic or a case of the benchmark's step-wise
    protocol (``stepwise-gold-…``, the one protocol of such a record), of an enabled source, not
    adjudicated, and for a person's verdict marked final by them (a revisable one is not a decision
    yet): ``evaluation.blind.is_rater``."""
    rules = rules or DisagreementRules.from_settings()
    return [v for v in verdicts if v.status == "ok" and v.source in rules.sources and is_rater(v)
            and ((v.protocol or "holistic") == "holistic" or parse_protocol_label(v.protocol) is not None)]


def record_disagreements(record: RunRecord, rules: DisagreementRules | None = None) -> list[dict[str, Any]]:
    """Disagreeing pairs among the considered verdicts of ``record`` (uses prefetched verdicts)."""
    rules = rules or DisagreementRules.from_settings()
    return find_disagreements(considered(record.verdicts.all(), rules), rules)


def _verdict_prefetch():
    return Prefetch("verdicts", queryset=Verdict.objects.select_related("annotator").order_by("id"))


def adjudication_queue(limit: int = 500) -> list[dict]:
    """Records whose considered verdicts disagree and that have no final verdict yet, oldest
    record first: ``[{record, verdicts, pairs, reasons}]`` (three queries whatever the size), from
    the first ``limit`` records that have two considered verdicts or more."""
    return adjudication_page(limit)[0]


def adjudication_page(limit: int = 100, after: int = 0) -> tuple[list[dict], int | None]:
    """One page of :func:`adjudication_queue`: its items among the ``limit`` oldest candidate
    records (two considered verdicts or more, no final verdict) whose id is above ``after``, and the
    id to ask the next page after (the last candidate's), None when no candidate is left. A page
    may list fewer than ``limit`` records: candidates whose verdicts agree are not shown. Three
    queries whatever the size."""
    rules = DisagreementRules.from_settings()
    # counted from the verdicts' side (the records that have verdicts), not by grouping every record
    finals = Verdict.objects.filter(is_final=True).values("record_id")
    candidates = (Verdict.objects.filter(status="ok", source__in=rules.sources, is_final=False,
                                         protocol__in=["holistic", ""], record_id__gt=after)
                  .exclude(record_id__in=finals).values("record_id").annotate(n=Count("id")).filter(n__gte=2)
                  .values("record_id"))
    records = list(RunRecord.objects.filter(pk__in=candidates).select_related("run__agent")
                   .only("id", "question_id", "dimension", "run__id", "run__name", "run__agent__name")
                   .prefetch_related(Prefetch("verdicts", queryset=Verdict.objects.select_related("annotator")
                                              .defer("prompt", "raw").order_by("id")))
                   .order_by("id")[:limit])
    out = []
    for r in records:
        pool = considered(r.verdicts.all(), rules)
        pairs = find_disagreements(pool, rules)
        if pairs:
            reasons = sorted({x.split(":")[0] for p in pairs for x in p["reasons"]})
            out.append({"record": r, "verdicts": pool, "pairs": pairs, "reasons": reasons})
    return out, (records[-1].pk if len(records) == limit else None)


def adjudication_record_qs():
    return RunRecord.objects.select_related("run__agent", "task__head").prefetch_related(_verdict_prefetch())


def recent_adjudications(limit: int = 20):
    """Newest adjudications with their record and reviewer (one query)."""
    return Adjudication.objects.select_related("record__run__agent", "reviewer", "final_verdict").order_by("-id")[:limit]


def release_adjudication(task, release_id: int | None) -> dict:
    """The sidecar's ``adjudication`` of ``task`` in release ``release_id``: ``{records, adjudicated,
    overrides_all}`` over the records of the runs scored on that release (all 0 for an export of the
    tasks' heads, ``release_id`` None). Registered as a ``releases.services.export`` sidecar field."""
    if not release_id:
        return {"records": 0, "adjudicated": 0, "overrides_all": 0}
    ids = list(RunRecord.objects.filter(task=task, run__release_id=release_id).values_list("pk", flat=True))
    if not ids:  # one query per task when no run was scored on the release (issue 16: 100,000-task exports)
        return {"records": 0, "adjudicated": 0, "overrides_all": 0}
    adj = Adjudication.objects.filter(record_id__in=ids)
    return {"records": len(ids), "adjudicated": adj.values("record_id").distinct().count(),
            "overrides_all": adj.filter(overrides_all=True).count()}


def release_adjudications(task_ids: list[int], release_id: int | None) -> dict[int, dict]:
    """``{task id: release_adjudication(task, release_id)}`` for every id in ``task_ids``, in two
    queries (the records of the runs scored on the release, then their adjudications; the second
    only when there are records): the batched form of the sidecar field, which an export uses."""
    out = {pk: {"records": 0, "adjudicated": 0, "overrides_all": 0} for pk in task_ids}
    if not release_id or not task_ids:
        return out
    task_of = dict(RunRecord.objects.filter(task_id__in=task_ids, run__release_id=release_id).values_list("pk", "task_id"))
    if not task_of:
        return out
    adjudicated: dict[int, set] = {}
    for record_id, overrides_all in Adjudication.objects.filter(record_id__in=list(task_of)).values_list(
            "record_id", "overrides_all"):
        summary = out[task_of[record_id]]
        adjudicated.setdefault(task_of[record_id], set()).add(record_id)
        summary["overrides_all"] += bool(overrides_all)
    for task_id in task_of.values():
        out[task_id]["records"] += 1
    for task_id, records in adjudicated.items():
        out[task_id]["adjudicated"] = len(records)
    return out
