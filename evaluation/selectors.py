"""Read queries for agent runs, records and verdicts."""
from __future__ import annotations

from evaluation.models import AgentRun, RunRecord


def run_list():
    """Runs newest first with their agent (one query)."""
    return AgentRun.objects.select_related("agent").order_by("-id")


def run_records(run: AgentRun):
    """A run's records without their large JSON (one query)."""
    return run.records.only(
        "id", "run_id", "question_id", "dimension", "task_score", "t_any", "t_ord", "t_em", "par_acc", "eff", "task_id",
    ).order_by("dimension", "question_id")


def record_detail_qs():
    return RunRecord.objects.select_related("run__agent", "task__head").prefetch_related("verdicts__annotator")
