"""Reads of judge configurations and judge jobs (the judge report's rows: ``evaluation.selectors.judge_report``)."""
from __future__ import annotations

from evaluation.models import JudgeCall, JudgeConfig, JudgeJob


def judge_configs():
    """Judge configurations by name (one query)."""
    return JudgeConfig.objects.order_by("name")


def judge_jobs(limit: int | None = 50):
    """Newest judge jobs with their configuration (one query); ``limit=None``: all of them, an
    unsliced queryset (the API pages it)."""
    qs = JudgeJob.objects.select_related("config", "created_by").order_by("-id")
    return qs if limit is None else qs[:limit]


def record_judge_calls(record) -> list:
    """The judge calls of ``record``, newest first, with their configuration (one query): every
    raw answer each call received (``JudgeCall.raw_texts``, unreadable ones and those of a failed
    re-ask included), its status, error, tokens, latency and what was trimmed from its prompt.
    Callers show them only to a person who may see the record's verdicts
    (:func:`evaluation.blind.sees_verdicts`): a raw answer is a judge outcome."""
    return list(JudgeCall.objects.filter(record_id=record.pk).select_related("config").order_by("-id"))
