"""Services for agent runs and verdicts: import and score a run folder, record verdicts.

Scoring itself is ``evaluation.scoring`` (pure functions identical to the official evaluator);
this module feeds it the gold samples — from the studio's own tasks (their newest succeeded
replay) or from a task folder in the benchmark's layout — and stores the results.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

from django.db import IntegrityError, connection, transaction

from annotation.models import Task
from annotation.services.export import dora_samples
from annotation.services.tasks import TASK_FILES
from evaluation import leaderboard as lb
from evaluation.models import Agent, AgentRun, RunAggregate, RunRecord, Verdict
from evaluation.scoring import evaluate_samples, load_run_records, load_task_files, score_task
from evaluation.selectors_leaderboard import leaderboard_rows, newest_revision_id, stale_aggregates
from evaluation.services_leaderboard import schedule_bootstrap
from studio.permissions import require

ERROR_CODES = ("E1", "E2", "E3", "E4", "E5", "E6")
GRADES = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)


class RunImportError(Exception):
    """A run folder cannot be imported; the message names the file and the problem."""


def _studio_gold(question_ids: set[str]) -> tuple[dict, dict]:
    tasks = list(Task.objects.filter(question_id__in=question_ids).select_related("event", "head"))
    return dora_samples(tasks), {t.question_id: t for t in tasks}


def _finite(value):
    """``value`` as a JSON column can store it: NaN and ±Infinity become None and NUL characters in
    strings and keys become U+FFFD. Python's json module — and so the official evaluator — reads
    all of them in run files (the run is scored from the original values); PostgreSQL refuses them."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, dict):
        return {_finite(k) if isinstance(k, str) else k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def _check_records(run_dir: Path, records_by_dim: dict) -> None:
    for dim, records in records_by_dim.items():
        for i, rec in enumerate(records):
            qid = rec.get("question_id")
            if not isinstance(qid, str) or not qid or "\x00" in qid:
                raise RunImportError(
                    f"{run_dir}/{TASK_FILES[dim][:-5]}/benchmark.jsonl: record {i}: field 'question_id' must be a "
                    f"non-empty string like '<sample_id>_task0', not {qid!r}")


@transaction.atomic
def import_run_dir(user, run_dir: Path, agent_name: str, *, tasks_dir: Path | None = None,
                   mode: str = "dora", tau_r: float = 0.2, tau_a: float = 1.0, release=None) -> AgentRun:
    """Import and score a run folder (``<dim task name>/benchmark.jsonl`` per dimension).

    Gold comes from ``tasks_dir`` (benchmark layout, with ``gold_polygons/``) when given; else from
    ``release`` (an ``annotation.Release``: its pinned revisions and gold replays), and the run is
    pinned to that release; else from the studio's tasks with the same question ids (their
    accepted gold). Raises ``RunImportError`` when the folder has no record, a record has no
    string question id, or a record names no known task.
    """
    _claim_sqlite_write_lock()  # before any read of this transaction (the permission check reads roles)
    require(user, "run.import")
    run_dir = Path(run_dir)
    records_by_dim = load_run_records(run_dir)
    n_records = sum(len(v) for v in records_by_dim.values())
    if n_records == 0:
        raise RunImportError(f"{run_dir}: no benchmark.jsonl with records under {', '.join(f[:-5] for f in TASK_FILES.values())}")
    _check_records(run_dir, records_by_dim)
    qids = {r["question_id"] for rs in records_by_dim.values() for r in rs}
    polygons, missing = None, None  # missing: how to name question ids the gold does not hold
    if tasks_dir is None and release is not None:
        from annotation.services.export import release_samples

        samples_by_dim, task_by_qid = release_samples(release)
        missing = f"question ids not in release {release.version}"
    elif tasks_dir is not None:
        samples_by_dim = load_task_files(Path(tasks_dir))
        polygons = Path(tasks_dir) / "gold_polygons"
        task_by_qid = {t.question_id: t for t in Task.objects.filter(question_id__in=qids)}
    else:
        samples_by_dim, task_by_qid = _studio_gold(qids)
        missing = "question ids with no task in the studio"
    unknown = sorted(qids - set(task_by_qid)) if missing else []
    if unknown:
        raise RunImportError(f"{run_dir}: {missing}: {', '.join(unknown[:10])}")
    result = evaluate_samples(samples_by_dim, records_by_dim, polygons, tau_r=tau_r, tau_a=tau_a, mode=mode,
                              polygon_roots=[run_dir])
    agent, _ = Agent.objects.get_or_create(name=agent_name)
    run = AgentRun.objects.create(
        agent=agent, name=run_dir.name, source_dir=str(run_dir), scoring_mode=mode, tau_r=tau_r, tau_a=tau_a,
        dora_score=result.get("dora_score"), dimensions=result.get("dimensions", {}), imported_by=user,
        release=release,
    )
    sample_index = {(d, s["sample_id"]): s for d, ss in samples_by_dim.items() for s in ss}
    rows = []
    for dim, records in records_by_dim.items():
        scored = {(t["sample_id"], t["task_idx"]): t for t in result.get("full", {}).get(dim, {}).get("tasks", [])}
        for rec in records:
            qid = rec["question_id"]
            sample_id, _, idx = qid.rpartition("_task")
            sample_id = rec.get("sample_id") or sample_id
            task_idx = int(idx) if idx.isdigit() else 0
            s = scored.get((sample_id, task_idx), {})
            sample = sample_index.get((dim, sample_id))
            step_matches = []
            gold = {}
            if sample is not None and task_idx < len(sample["tasks"]):
                gold = gold_snapshot(sample["tasks"][task_idx])
                detail = score_task(sample["tasks"][task_idx], sample, rec, polygons, tau_r=tau_r, tau_a=tau_a, mode=mode,
                                    polygon_roots=[run_dir])
                step_matches = detail.get("step_matches", [])
            rows.append(RunRecord(
                run=run, task=task_by_qid.get(qid), question_id=qid, sample_id=_finite(str(sample_id)), task_index=task_idx,
                dimension=dim, predicted_answer=_finite(rec.get("predicted_answer")),
                trajectory=_finite(rec.get("trajectory") or []),
                error=_finite(str(rec.get("error") or "")), task_score=s.get("task_score"), field_scores=s.get("field_scores", {}),
                n_scored_fields=s.get("n_scored_fields", 0), t_any=s.get("t_any"), t_ord=s.get("t_ord"),
                t_em=s.get("t_em"), par_acc=s.get("par_acc"), eff=s.get("eff"), step_matches=_finite(json.loads(json.dumps(step_matches, default=str))),
                gold=_finite(gold),
            ))
    RunRecord.objects.bulk_create(rows)
    write_run_aggregate(run.pk)  # the leaderboard's sums, in this transaction
    schedule_bootstrap()  # after the commit: the intervals of the new state, in the background
    return run


def write_run_aggregate(run_id: int) -> RunAggregate | None:
    """Store the leaderboard sums of run ``run_id`` (:func:`evaluation.leaderboard.run_aggregate`
    over the run's rows as :func:`~evaluation.selectors_leaderboard.leaderboard_rows` reads them,
    extras included), stamped with the newest task revision id read *before* the rows (a head
    that changes meanwhile makes the sums stale, never wrongly current). Replaces earlier sums.
    Inside the caller's transaction when there is one (an import: the sums commit with the run).
    Cost: reading and scoring the extras of the run's records once (about the time the page took
    per run before the sums existed)."""
    newest = newest_revision_id()
    sums = lb.run_aggregate(leaderboard_rows(run_ids=[run_id]))
    return _store_aggregate(run_id, newest, sums)


def _store_aggregate(run_id: int, newest: int, sums: dict) -> RunAggregate:
    # single-statement writes (an UPDATE, else an INSERT): outside an import they run in autocommit,
    # so a page that rebuilds sums beside an import never holds a read lock it must upgrade (SQLite
    # refuses such an upgrade at once, busy timeout or not)
    fields = {"gold_revision": newest, "n_records": sums["n_records"], "n_no_task": sums["n_no_task"], "sums": sums}
    if not RunAggregate.objects.filter(run_id=run_id).update(**fields):
        try:
            with transaction.atomic():
                return RunAggregate.objects.create(run_id=run_id, **fields)
        except IntegrityError:  # a concurrent writer stored them first (ours are as new), or the run is gone
            RunAggregate.objects.filter(run_id=run_id).update(**fields)
    return RunAggregate.objects.filter(run_id=run_id).first()


def refresh_run_aggregates(run_ids, state: dict) -> set:
    """Make the stored sums of ``run_ids`` current (``state`` as
    :func:`~evaluation.selectors_leaderboard.aggregated_runs` returns it): rebuild the stale ones
    (:func:`~evaluation.selectors_leaderboard.stale_aggregates`: no sums yet, a task deleted, or a
    newer head revision of a task the run has a record on) and move the stamp of the others up.
    Returns the ids of the rebuilt runs (usually none: an import writes its sums itself). A run
    deleted meanwhile is skipped."""
    stale, behind, newest = stale_aggregates(run_ids, state)
    for run_id in sorted(stale):
        write_run_aggregate(run_id)  # a run deleted meanwhile stores nothing
    if behind:
        RunAggregate.objects.filter(run_id__in=behind, gold_revision__lt=newest).update(gold_revision=newest)
    return stale


def _claim_sqlite_write_lock() -> None:
    """On SQLite, take the database's write lock now, at the start of the current transaction.

    SQLite refuses at once ("database is locked", whatever the busy timeout) to turn a transaction
    that has read into one that writes while another connection is writing — e.g. the leaderboard's
    background bootstrap storing its intervals during an import. A transaction that writes first
    waits for the other writer instead (busy timeout, studio/settings.py). A write statement that
    matches no row takes the lock; on other databases this does nothing."""
    if connection.vendor == "sqlite" and connection.in_atomic_block:
        with connection.cursor() as cursor:
            cursor.execute(f"UPDATE {RunAggregate._meta.db_table} SET n_records = n_records WHERE 0")


def gold_snapshot(task: dict) -> dict:
    """What a judge needs of a gold task (benchmark layout): ``{question, tools, trajectory,
    final_answer}``, JSON-safe. Stored on the record at import so judging never depends on a
    task folder or a task that changed since."""
    keep = {k: task.get(k) for k in ("question", "tools", "trajectory", "final_answer") if task.get(k) is not None}
    return json.loads(json.dumps(keep, default=str))


def derive_correctness(errors: dict) -> bool:
    """Plan correctness is true exactly when no E1–E6 flag is set (judge.md, 'The verdict')."""
    return not any(bool(errors.get(code)) for code in ERROR_CODES)


@transaction.atomic
def submit_human_verdict(user, record: RunRecord, *, errors: dict, grade: float, reasons: dict | None = None,
                         reasoning: str = "", is_correct: bool | None = None, override_reason: str = "",
                         idempotency_key: str | None = None, is_final: bool = False) -> Verdict:
    """Record a person's verdict. Correctness follows the flags unless overridden with a reason.

    ``idempotency_key`` (the hidden token of the form that was submitted): a second submission
    with the same key returns the verdict the first one created and creates nothing (a double
    click, a resent request). ``is_final``: an adjudicated verdict (set by
    :func:`evaluation.services_adjudication.adjudicate`, which checks the reviewer's permission).

    Raises ``ValueError`` naming the field for a grade off the 0–1 step-0.2 scale, an unknown flag,
    an override without a reason, or a key already used for another record or person.
    """
    require(user, "verdict.create")
    if idempotency_key:
        idempotency_key = str(idempotency_key)[:80]
        existing = Verdict.objects.filter(idempotency_key=idempotency_key).first()
        if existing is not None:
            if existing.record_id != record.pk or existing.annotator_id != user.pk:
                raise ValueError("idempotency_key: this form token was already used for another verdict")
            return existing
    unknown = set(errors) - set(ERROR_CODES)
    if unknown:
        raise ValueError(f"errors: unknown flag(s) {', '.join(sorted(unknown))}; use E1–E6")
    if not any(abs(float(grade) - g) < 1e-9 for g in GRADES):
        raise ValueError(f"grade: {grade} is not one of 0, 0.2, 0.4, 0.6, 0.8, 1.0")
    flags = {code: bool(errors.get(code, False)) for code in ERROR_CODES}
    derived = derive_correctness(flags)
    if is_correct is not None and is_correct != derived and not override_reason.strip():
        raise ValueError("is_correct: overriding the correctness the flags imply needs a reason")
    final = derived if is_correct is None else is_correct
    text = reasoning
    if is_correct is not None and is_correct != derived:
        text = f"{reasoning}\n[correctness overridden: {override_reason.strip()}]".strip()
    fields = dict(
        record=record, source=Verdict.Source.HUMAN, annotator=user, is_correct=final, grade=float(grade),
        errors=flags, reasons={k: str(v).strip() for k, v in (reasons or {}).items() if k in ERROR_CODES and str(v or "").strip()},
        reasoning=text, protocol="holistic", is_final=is_final, idempotency_key=idempotency_key or None,
    )
    if not idempotency_key:
        return Verdict.objects.create(**fields)
    try:
        with transaction.atomic():  # a savepoint: a concurrent twin may win the unique key
            return Verdict.objects.create(**fields)
    except IntegrityError:
        existing = Verdict.objects.filter(idempotency_key=idempotency_key).first()
        if existing is None or existing.record_id != record.pk or existing.annotator_id != user.pk:
            raise ValueError("idempotency_key: this form token was already used for another verdict") from None
        return existing
