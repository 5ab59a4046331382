"""Reads of judge configurations and judge jobs (the judge report's rows: ``evaluation.selectors.judge_report``)."""
from __future__ import annotations

from evaluation.models import JudgeConfig, JudgeJob


def judge_configs():
    """Judge configurations by name (one query)."""
    return JudgeConfig.objects.order_by("name")


def judge_jobs(limit: int | None = 50):
    """Newest judge jobs with their configuration (one query); ``limit=None``: all of them, an
    unsliced queryset (the API pages it)."""
    qs = JudgeJob.objects.select_related("config", "created_by").order_by("-id")
    return qs if limit is None else qs[:limit]
