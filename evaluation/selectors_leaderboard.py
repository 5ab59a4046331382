"""Queries that feed the leaderboard (:mod:`evaluation.leaderboard`) its plain rows.

Two queries in all, whatever the number of runs and records: one for the runs, one for the
records joined to their agent, run and studio task head revision.
"""
from __future__ import annotations

from evaluation import leaderboard as lb
from evaluation.models import AgentRun, RunRecord

_RECORD_FIELDS = (
    "id", "run_id", "run__name", "run__agent__name", "run__scoring_mode", "run__tau_r", "run__tau_a",
    "dimension", "question_id", "task_id", "task_score", "t_any", "t_ord", "t_em", "par_acc", "eff", "elapsed_s",
)


def leaderboard_runs() -> list[dict]:
    """Every run as ``{run_id, agent, run_name, mode, dora_score, dimensions, protocol, scaffold}``
    (one query). Planner runs of the step-wise protocol (``scoring_mode="stepwise"``) have no DORA
    score and are left out."""
    qs = AgentRun.objects.exclude(scoring_mode="stepwise").order_by("id").values(
        "id", "name", "agent__name", "scoring_mode", "dora_score", "dimensions", "protocol", "scaffold")
    return [{"run_id": r["id"], "agent": r["agent__name"], "run_name": r["name"], "mode": r["scoring_mode"],
             "dora_score": r["dora_score"], "dimensions": r["dimensions"] or {}, "protocol": r["protocol"],
             "scaffold": r["scaffold"]} for r in qs]


def leaderboard_rows(extras: bool = True) -> list[dict]:
    """One plain row per run record (one query; see :data:`evaluation.leaderboard.ROW_COLUMNS`).

    ``gold_len`` (flattened gold steps of the task's head revision), ``length_bucket`` and
    ``modality`` (from the head revision's ``input_data``) are None when the record has no studio
    task (or the task no head revision): such records are left out of those breakdowns. With
    ``extras`` the per-record extras are computed from the record's predicted trajectory and the
    head revision's gold trajectory (None without a task; ``n_pred_steps`` always).
    """
    fields = _RECORD_FIELDS + ("task__head__input_data", "task__head__trajectory")
    if extras:
        fields += ("trajectory",)
    qs = (RunRecord.objects.exclude(run__scoring_mode="stepwise")
          .order_by("run_id", "dimension", "question_id").values(*fields))
    per_task: dict = {}
    rows = []
    for r in qs.iterator(chunk_size=500):
        gold_traj = r["task__head__trajectory"] if r["task_id"] is not None else None
        if r["task_id"] is not None and r["task_id"] not in per_task:
            n = lb.gold_length(gold_traj)
            per_task[r["task_id"]] = (n, lb.length_bucket(n), lb.modality_config(r["task__head__input_data"]))
        gold_len, bucket, modality = per_task.get(r["task_id"], (None, None, None))
        row = {
            "record_id": r["id"], "run_id": r["run_id"], "run_name": r["run__name"], "agent": r["run__agent__name"],
            "mode": r["run__scoring_mode"], "dimension": r["dimension"], "question_id": r["question_id"],
            "task_id": r["task_id"], "task_score": r["task_score"], "elapsed_s": r["elapsed_s"],
            **{m: r[m] for m in lb.METRICS},
            "gold_len": gold_len, "length_bucket": bucket, "modality": modality,
            "n_pred_steps": None, "lcs_par_acc": None, "multiset_recall": None, "extraneous_calls": None,
        }
        if extras:
            row.update(lb.record_extras(r["trajectory"], gold_traj, r["run__tau_r"], r["run__tau_a"]))
        rows.append(row)
    return rows


def leaderboard_data(extras: bool = True) -> tuple[list[dict], list[dict]]:
    """``(runs, rows)`` for :func:`evaluation.leaderboard.build` (two queries)."""
    return leaderboard_runs(), leaderboard_rows(extras)


def leaderboard_version() -> str:
    """A fingerprint of everything the leaderboard reads (runs, records, task revisions, replays and
    gold acceptances), in five aggregate queries whatever the data's size: the newest id (and the
    number of rows where rows can be deleted). It changes whenever a run is imported or deleted or a
    task's gold changes (a new revision, replay, or an accepted gold, which writes an audit event)."""
    from django.db.models import Count, Max

    from annotation.models import AuditEvent, TaskRevision
    from replay.models import ReplayRun

    runs = AgentRun.objects.aggregate(n=Count("id"), m=Max("id"))
    recs = RunRecord.objects.aggregate(n=Count("id"), m=Max("id"))
    # revisions and replays only ever grow (never edited in place): their newest id suffices
    rev = TaskRevision.objects.aggregate(m=Max("id"))["m"]
    rep = ReplayRun.objects.filter(status="succeeded").aggregate(m=Max("id"))["m"]
    audit = AuditEvent.objects.aggregate(m=Max("id"))["m"]
    return f"r{runs['n']}-{runs['m']}.c{recs['n']}-{recs['m']}.v{rev}.p{rep}.a{audit}"
