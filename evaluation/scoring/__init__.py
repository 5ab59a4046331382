"""Scoring core of the studio: a faithful re-implementation of the official DORA evaluator.

Pure Python (numpy/shapely/pyproj only; no Django). Mode ``"dora"`` (default) reproduces
``dora/evaluation.py`` and ``scripts/evaluate.py`` of Junjue-Wang/DORA @ 2b24be70 number for
number; mode ``"paper"`` applies the paper's Table 3 operators (see
:mod:`evaluation.scoring.paper`). Every result carries the ``mode`` that produced it.

Public API
----------
``evaluate_run_dir(run_dir, tasks_dir, tau_r=0.2, tau_a=1.0, mode="dora", *, include_step_matches=False, log=None) -> dict``
    Score ``<run_dir>/<task name>/benchmark.jsonl`` against ``<tasks_dir>/<task name>.json``
    (polygon files resolved under ``tasks_dir`` then ``run_dir``).
``evaluate_sanity(tasks_dir, tau_r=0.2, tau_a=1.0, mode="dora", *, include_step_matches=False) -> dict``
    Gold against gold (every number is 1.0 on a consistent task set).
``evaluate_samples(samples_by_dim, records_by_dim, gold_polygons_dir=None, tau_r=0.2, tau_a=1.0, mode="dora", *, polygon_roots=(), task_polygon_roots=None, include_step_matches=False, log=None) -> dict``
    The same from memory. ``samples_by_dim``: ``{"t1": [DORA sample dict, ...], ...}``;
    ``records_by_dim``: ``{"t1": [run record dict, ...], ...}`` (records carry ``question_id``
    ``<sample_id>_task<i>``, optional ``sample_id``, ``predicted_answer``, ``trajectory``). A
    dimension is scored only when it is in both (an empty record list scores every task as
    unanswered); ``records_by_dim=None`` means gold against gold.
    Polygon roots: ``gold_polygons_dir``'s parent when the folder is named ``gold_polygons`` (so
    gold values like ``gold_polygons/x.geojson`` resolve as in the evaluator, whose root is the
    tasks folder), then ``gold_polygons_dir`` itself, then ``polygon_roots`` (e.g. the run folder,
    where predicted polygon files live); ``task_polygon_roots`` (``{dim: {(sample id, task index):
    (folder, ...)}}``) puts a task's own folders before all of them (a release's or the studio's
    task, its gold polygon files as the export writes them: ``evaluation.goldset``).

    All three return the eval.json dict: ``summary_table`` (text), ``dora_score``, ``dimensions``
    (``{dim: {dim_score, n_tasks, n_scored_tasks, t_any, t_ord, t_em, par_acc, eff}}``), ``full``
    (the same plus ``tasks: [{sample_id, task_idx, task_score|None, field_scores,
    n_scored_fields, t_any, t_ord, t_em, par_acc, eff}]``) and the extra key ``mode``. With
    ``include_step_matches`` each task also has ``step_matches`` (see :func:`score_task`).
``score_task(task, sample, record, gold_polygons_dir=None, tau_r=0.2, tau_a=1.0, mode="dora", *, polygon_roots=()) -> dict``
    One task: ``{sample_id, task_idx, task_score, field_scores, n_scored_fields, t_any, t_ord,
    t_em, par_acc, eff, step_matches, mode}`` with the evaluator's rounding. ``record`` may be
    None (unanswered). ``step_matches``: one row per flattened gold step
    ``{gold_index, gold_raw_index, gold_call, pred_index, pred_raw_index, pred_call, name_ok, score,
    args: [{name, gold, pred, ok, why}]}``.
``parse_prediction(value) -> dict``
    The answer dict the evaluator scores for a ``predicted_answer`` (string parsing included).
``load_task_files(tasks_dir)``, ``load_run_records(run_dir)``: the folder readers.

Command line: ``python -m evaluation.scoring`` (``cli``; ``manage.py evaluate_runs`` runs it before
Django starts). Speed: every evaluation runs with the cyclic garbage collector paused and eval.json
is written by ``runtime.dumps_indented`` (the same text as ``json.dumps(indent=2)``); see
``runtime`` and ``bench/scoring.py``. Work that depends on a text alone is cached per text
(``normalize``: strings, tool names, exact-match forms; ``trajectory``: file-path tests, file
names, the paths of an observation text), each step's tool name is normalised once, and par_acc
without a step table formats no reasons; ``tests/test_scoring_fast_paths.py`` checks these
against the plain rules.
"""
from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from .aggregate import format_results_table, get_gsd, official_document, run_evaluation, score_pair, task_entry
from .config import MODES, ScoringConfig
from .loaders import (
    TASKS,
    apply_record,
    check_task_samples,
    load_run_records,
    load_task_files,
    merge_predictions,
    split_question_id,
)
from .parsing import parse_prediction, parse_string_prediction
from .runtime import paused_gc

__all__ = [
    "MODES", "TASKS", "ScoringConfig", "evaluate_run_dir", "evaluate_sanity", "evaluate_samples", "score_task",
    "parse_prediction", "parse_string_prediction", "load_task_files", "load_run_records", "format_results_table",
    "official_document", "get_gsd",
]


def _roots_for(gold_polygons_dir: Path | None, extra: Iterable[Path] = ()) -> tuple:
    roots = []
    if gold_polygons_dir is not None:
        d = Path(gold_polygons_dir)
        if d.name == "gold_polygons":
            roots.append(d.parent)
        roots.append(d)
    roots.extend(Path(r) for r in extra)
    return tuple(roots)


def evaluate_run_dir(run_dir, tasks_dir, tau_r: float = 0.2, tau_a: float = 1.0, mode: str = "dora", *,
                     include_step_matches: bool = False, log: list | None = None) -> dict:
    """Score a run folder like ``scripts/evaluate.py --run``; see the module docstring."""
    cfg = ScoringConfig(tau_r, tau_a, mode)
    with paused_gc():
        gold = load_task_files(Path(tasks_dir), scored_fields_only=True)
        preds = merge_predictions(gold, load_run_records(Path(run_dir)), log, Path(run_dir))
        results = run_evaluation(gold, preds, (Path(tasks_dir), Path(run_dir)), cfg, include_step_matches)
        return official_document(results, mode, keep_step_matches=include_step_matches)


def evaluate_sanity(tasks_dir, tau_r: float = 0.2, tau_a: float = 1.0, mode: str = "dora", *,
                    include_step_matches: bool = False) -> dict:
    """Gold against gold, like ``scripts/evaluate.py --sanity``."""
    cfg = ScoringConfig(tau_r, tau_a, mode)
    with paused_gc():
        gold = load_task_files(Path(tasks_dir), scored_fields_only=True)
        results = run_evaluation(gold, None, (Path(tasks_dir),), cfg, include_step_matches)
        return official_document(results, mode, keep_step_matches=include_step_matches)


def evaluate_samples(samples_by_dim: dict[str, list[dict]], records_by_dim: dict[str, list[dict]] | None,
                     gold_polygons_dir: Path | None = None, tau_r: float = 0.2, tau_a: float = 1.0,
                     mode: str = "dora", *, polygon_roots: Iterable[Path] = (), task_polygon_roots: dict | None = None,
                     include_step_matches: bool = False, log: list | None = None) -> dict:
    """Score in-memory gold samples and run records; see the module docstring."""
    cfg = ScoringConfig(tau_r, tau_a, mode)
    for d in TASKS:
        if d in samples_by_dim:
            check_task_samples(samples_by_dim[d], f"dimension {d}")
    gold = {d: samples_by_dim[d] for d in TASKS if d in samples_by_dim}
    with paused_gc():
        preds = None if records_by_dim is None else merge_predictions(gold, records_by_dim, log)
        results = run_evaluation(gold, preds, _roots_for(gold_polygons_dir, polygon_roots), cfg, include_step_matches,
                                 task_polygon_roots)
        return official_document(results, mode, keep_step_matches=include_step_matches)


def score_task(task: dict, sample: dict, record: dict | None, gold_polygons_dir: Path | None = None,
               tau_r: float = 0.2, tau_a: float = 1.0, mode: str = "dora", *,
               polygon_roots: Iterable[Path] = ()) -> dict:
    """Score one gold task (an item of ``sample["tasks"]``) against one run record; see the module
    docstring for the result. ``task_idx`` comes from the record's question id (None without one)."""
    cfg = ScoringConfig(tau_r, tau_a, mode)
    pred_task = {"final_answer": {}, "trajectory": []}
    task_idx = None
    if record is not None:
        apply_record(pred_task, record)
        if record.get("question_id"):
            task_idx = split_question_id(record.get("question_id"), record.get("sample_id", ""))[1]
    task_score, field_scores, metrics, table = score_pair(
        task, pred_task, get_gsd(sample), _roots_for(gold_polygons_dir, polygon_roots), cfg, explain=True)
    entry = task_entry(sample.get("sample_id") if isinstance(sample, dict) else None, task_idx,
                       task_score, field_scores, metrics)
    entry["step_matches"] = table
    entry["mode"] = mode
    return entry
