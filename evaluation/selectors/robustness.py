"""Reads of the robustness outcomes stored on run records of variant tasks (issue 21, item 3).

``RunRecord.robustness`` is written once at import (``evaluation.services.runs.import_run_dir``,
``evaluation.robustness.record_robustness``); these selectors read it for the run page and the
leaderboard's robustness section. Step-wise planner runs are left out, as on the leaderboard.
"""
from __future__ import annotations

from evaluation import leaderboard as lb
from evaluation.blind import blind_record_ids
from evaluation.models import AgentRun, RunRecord
from evaluation.robustness import robustness_table
from evaluation.selectors.leaderboard import leaderboard_runs

__all__ = ["robustness_rows", "leaderboard_robustness", "run_robustness"]


def robustness_rows(runs: list[dict] | None = None) -> list[dict]:
    """One plain row per record with a stored outcome: ``{record_id, run_id, label, question_id,
    task_score, robustness}`` of the runs ``runs`` (the leaderboard's runs of one gold set; every
    run's ``leaderboard_runs()``, read here when not given); ``label`` as the leaderboard labels them. One query when ``runs`` is given, through the
    partial index of those records (``RunRecord.has_robustness``): its cost grows with them, not with
    all the records."""
    qs = (RunRecord.objects.filter(has_robustness=True).exclude(run__scoring_mode="stepwise")
          .order_by("run_id", "question_id")
          .values("id", "run_id", "question_id", "task_score", "robustness"))
    rows = list(qs)
    labels = lb.run_labels(runs if runs is not None else leaderboard_runs()) if rows else {}
    return [{"record_id": r["id"], "run_id": r["run_id"], "label": labels[r["run_id"]], "question_id": r["question_id"],
             "task_score": r["task_score"], "robustness": r["robustness"]} for r in rows if r["run_id"] in labels]


def leaderboard_robustness(runs: list[dict] | None = None, viewer=None) -> dict:
    """The per-kind tables of :func:`evaluation.robustness.robustness_table` over every run
    (``runs``: see :func:`robustness_rows`). With ``viewer``, the records they score blind are left
    out (``evaluation.blind``: an outcome the judge decided is a verdict they may not see, and a
    per-agent pass rate over one record shows it); ``n_blind`` counts them."""
    rows = robustness_rows(runs)
    hide = blind_record_ids(viewer, [r["record_id"] for r in rows]) if viewer is not None and rows else set()
    table = robustness_table([r for r in rows if r["record_id"] not in hide])
    table["n_blind"] = len(hide)
    return table


def run_robustness(run: AgentRun):
    """The run's records on variant tasks, with their stored outcome (one query)."""
    return (run.records.filter(has_robustness=True).only("id", "run_id", "question_id", "task_score", "robustness")
            .order_by("question_id"))
