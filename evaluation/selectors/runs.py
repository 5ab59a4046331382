"""Reads of agent runs and their records: lists, a record's gold and what a scorer sees of it, run import jobs,
the runs scored on a release."""
from __future__ import annotations

from pathlib import Path

from evaluation.goldset import task_polygon_folder
from evaluation.models import AgentRun, RunImportJob, RunRecord
from evaluation.run_folders import local_run_folder
from evaluation.scoring import get_gsd
from evaluation.scoring.config import ScoringConfig
from evaluation.scoring.explain import explain_answer
from evaluation.scoring.geometry import answer_geometries
from evaluation.scoring.trajectory import align_by_tool
from releases.services.export import ExportError, dora_samples
from replay.selectors import latest_successful_replay
from replay.services.paths import artifact_folder


def run_list():
    """Runs newest first with their agent and release (one query)."""
    return AgentRun.objects.select_related("agent", "release").order_by("-id")


def run_records(run: AgentRun):
    """A run's records without their large JSON (one query)."""
    return run.records.only(
        "id", "run_id", "question_id", "dimension", "task_score", "t_any", "t_ord", "t_em", "par_acc", "eff", "task_id",
        "in_gold_set", "has_robustness", "error", "elapsed_s",
    ).order_by("dimension", "question_id")


def record_gold(record: RunRecord) -> dict:
    """The gold of a record as a scorer compares it: ``{question, trajectory, final_answer,
    eval_spec, gsd_m}``. From the snapshot taken at import; what an older snapshot lacks comes
    from the record's studio task (its head revision with the newest succeeded replay, in the
    benchmark's layout), when it still has one."""
    gold = dict(record.gold or {})
    if (not gold.get("eval_spec") or not gold.get("trajectory")) and record.task_id:
        try:
            samples = dora_samples([record.task])
        except ExportError:  # no succeeded replay of the head revision: nothing more to show
            samples = {}
        for sample in samples.get(record.dimension, [])[:1]:
            t = sample["tasks"][0]  # one task asked, one task in the sample
            for k in ("question", "trajectory", "final_answer", "eval_spec"):
                if not gold.get(k):
                    gold[k] = t.get(k)
            gold.setdefault("gsd_m", get_gsd(sample))
    return gold


#: the artifacts of a gold replay that may be polygon files (GeoJSON), made present for scoring
POLYGON_SUFFIXES = (".geojson", ".json")


def polygon_roots(record: RunRecord) -> list[Path]:
    """Where a record's polygon files are looked for (:func:`evaluation.scoring.polygons.resolve_polygon_path`):
    for a run on a release or the studio's tasks whose gold has a ``polygon_iou`` field, first
    its task's gold polygon files as the gold set scored them and the export writes them
    (:func:`evaluation.goldset.task_polygon_folder`: of the replay the run's release pins, else of
    the head revision's gold replay); then the run folder (predicted files; with a bucket this
    machine's copy of it, its polygon files fetched first: :func:`evaluation.run_folders.local_run_folder`),
    then the tasks folder the run was scored against (``AgentRun.gold_dir``: its ``gold_polygons/``),
    then the artifacts of its task's newest succeeded replay (a record stored before its gold
    values were in the export's form; with a bucket its vector artifacts, ``POLYGON_SUFFIXES``,
    are fetched into this machine's copy of that folder first: ``replay.services.paths.artifact_folder``)."""
    run = record.run
    roots = []
    if not run.gold_dir and record.task_id and _has_polygon_field(record):
        folder = task_polygon_folder(record.task, run.release)
        if folder is not None:
            roots.append(folder)
    if run.source_dir:
        roots.append(local_run_folder(run.source_dir))
    if run.gold_dir:
        roots.append(Path(run.gold_dir))
    replay = latest_successful_replay(record.task) if record.task_id else None
    if replay is not None and replay.artifact_dir:
        roots.append(artifact_folder(replay, POLYGON_SUFFIXES))
    return roots


def _has_polygon_field(record: RunRecord) -> bool:
    spec = (record.gold or {}).get("eval_spec") or record_gold(record).get("eval_spec")
    return isinstance(spec, dict) and "polygon_iou" in spec.values()


def record_evidence(record: RunRecord) -> dict:
    """Everything a scorer needs to decide a record without reading JSON, the one source of the
    record page, the queue item, the adjudication page and the record API:
    ``{question, fields, parsed, raw, parsed_ok, steps, geometries, gsd_m, has_gold_answer}``.

    ``fields``: :func:`evaluation.scoring.explain.explain_answer` rows (gold, prediction as the
    evaluator parses it, type, tolerance, the operator's reason) whose ``score`` is the stored one
    from import (``recomputed`` holds today's value when it differs, e.g. a polygon file that
    moved). ``steps``: :func:`evaluation.scoring.trajectory.align_by_tool` rows (LCS by tool).
    ``geometries``: :func:`evaluation.scoring.geometry.answer_geometries` of the polygon and
    point fields (GeoJSON Features of gold and prediction, for the map)."""
    run = record.run
    gold = record_gold(record)
    cfg = ScoringConfig(run.tau_r, run.tau_a, run.scoring_mode if run.scoring_mode in ("dora", "paper") else "dora")
    roots = polygon_roots(record)
    ex = explain_answer(record.predicted_answer, gold.get("final_answer"), gold.get("eval_spec"), gold.get("gsd_m"),
                        roots, cfg)
    stored = record.field_scores or {}
    for row in ex["fields"]:
        if row["field"] in stored and row["score"] is not None and abs(stored[row["field"]] - row["score"]) > 1e-6:
            row["recomputed"], row["score"] = row["score"], stored[row["field"]]
            row["passed"] = row["score"] >= 1 - 1e-9
    steps = align_by_tool(record.trajectory or [], gold.get("trajectory") or [], cfg)
    return {"question": gold.get("question") or (record.task.head.question if record.task_id and record.task.head_id else ""),
            "fields": ex["fields"], "parsed": ex["parsed"], "raw": ex["raw"], "parsed_ok": ex["parsed_ok"],
            "steps": steps, "geometries": answer_geometries(ex["fields"], roots), "gsd_m": gold.get("gsd_m"),
            "has_gold_answer": bool(gold.get("eval_spec"))}


def run_import_jobs(limit: int = 10):
    """The newest run-zip import jobs with their run (one query)."""
    return RunImportJob.objects.select_related("run").order_by("-id")[:limit]


def record_detail_qs():
    return RunRecord.objects.select_related("run__agent", "task__head").prefetch_related("verdicts__annotator")


def release_runs(release):
    """Agent runs scored on ``release`` (``AgentRun.release``), newest first (moved from
    ``releases.selectors``: runs are evaluation's, above releases)."""
    return AgentRun.objects.filter(release=release).select_related("agent").order_by("-id")
