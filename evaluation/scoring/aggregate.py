"""Dimension and benchmark aggregation, and the evaluator's summary table.

Rounding follows the evaluator: per-task values are rounded to 6 decimals, dimension means are
taken over those *rounded* values and rounded again, and the DORA score is the mean of the rounded
dimension scores, rounded. The summary table's DORA row averages the rounded dimension metrics
(formatted, not rounded, to 6 decimals).
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .config import ScoringConfig
from .loaders import _NO_ANSWER, _NO_STEPS, TASKS
from .operators import score_answer
from .trajectory import METRICS, metric_values, trajectory_metrics

#: the official evaluator's settings (an immutable value: one instance serves every default argument)
DEFAULT_CONFIG = ScoringConfig()


def get_gsd(sample: Any) -> float | None:
    """``pixel_size_m`` of ``input_data.pre_image``, else ``post_image``, else the first
    ``temporal_images`` entry that has one; None when absent."""
    data = sample.get("input_data", {}) if isinstance(sample, dict) else {}
    if not isinstance(data, dict):
        return None
    for key in ("pre_image", "post_image"):
        image = data.get(key, {})
        if isinstance(image, dict) and "pixel_size_m" in image:
            return _gsd_value(image["pixel_size_m"])
    temporal = data.get("temporal_images", {})
    if isinstance(temporal, dict):
        for image in temporal.values():
            if isinstance(image, dict) and "pixel_size_m" in image:
                return _gsd_value(image["pixel_size_m"])
    return None


def _gsd_value(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):  # the evaluator raises here; an unreadable GSD counts as unknown
        return None


def round6(value: float) -> float:
    """``round(value, 6)``, the evaluator's rounding of every written value, to the last bit.

    ``round`` of a float to some digits rounds its exact value to that many decimals (half to
    even) through a decimal conversion and returns the double nearest to the result: about 1,700
    machine instructions a call (callgrind, 2026-12-07), 7 or 8 calls a task, 4 % of scoring one.
    For a float of magnitude under 4,000 (every score) this is worked out in floating point: with
    ``y = value * 1e6`` and ``c = round(y)``, the nearest integer, ``y`` lies within half an ulp
    (under 4.8e-7 below 2**32) of the exact value × 10**6; where ``y`` is more than 1e-6 from a
    half-integer (``abs(y - c) < 0.499999``) the exact product has the same nearest integer and is
    no tie, so ``round`` gives the double nearest to c/10**6, which is ``c / 1e6`` (both exact, the
    division correctly rounded). 0.0 and 1.0 (most scores) are returned at once. Where ``c`` is 0
    (|value| under 5e-7) ``round`` keeps the sign of a tiny negative value, so it is asked; so is
    anything else (ints, bools, NaN, infinities, larger floats, the near-ties).
    ``tests/test_scoring_fast_paths.py`` compares the two."""
    if type(value) is float:
        if value == 1.0 or value == 0.0:
            return value
        y = value * 1e6
        if -4e9 < y < 4e9:
            c = round(y)
            if c and -0.499999 < y - c < 0.499999:
                return c / 1e6
    return round(value, 6)


def task_entry(sample_id: Any, task_idx: int, task_score: float, field_scores: dict[str, float],
               metrics: dict[str, float]) -> dict:
    """One ``full.<dim>.tasks[]`` item, rounded like the evaluator (NaN task score → None)."""
    entry = {
        "sample_id": sample_id,
        "task_idx": task_idx,
        "task_score": None if math.isnan(task_score) else round6(task_score),
        "field_scores": {k: round6(v) for k, v in field_scores.items()},
        "n_scored_fields": len(field_scores),
    }
    for m in METRICS:
        entry[m] = round6(metrics[m])
    return entry


def score_pair(gold_task: dict, pred_task: dict, gsd: float | None, roots: tuple, cfg: ScoringConfig,
               explain: bool = False):
    """Answer and trajectory scores of one gold task against one prediction task (unrounded)."""
    task_score, field_scores = score_answer(pred_task.get("final_answer", {}), gold_task.get("final_answer", {}),
                                            gold_task.get("eval_spec", {}), gsd, roots, cfg)
    metrics, table = trajectory_metrics(pred_task.get("trajectory", []), gold_task.get("trajectory", []), cfg, explain)
    return task_score, field_scores, metrics, table


def evaluate_dimension(gold_samples: list[dict], pred_samples: list[dict] | None, roots: tuple = (),
                       cfg: ScoringConfig = DEFAULT_CONFIG, explain: bool = False,
                       task_roots: dict | None = None) -> dict:
    """One dimension; ``pred_samples=None`` scores gold against itself.

    ``task_roots``: ``{(sample id, task index): (folder, ...)}``, polygon roots of one task looked
    in before ``roots`` (a task's own gold polygon files, as a tasks folder holds them).

    Prediction samples are matched to gold by ``sample_id`` (the last one with an id wins), else by
    position, else an empty stub. With ``explain`` each task entry also has ``step_matches``.
    """
    results = []
    by_id = {}
    for ps in pred_samples or []:
        sid = ps.get("sample_id", "")
        if sid:
            by_id[sid] = ps
    for s_idx, gold in enumerate(gold_samples):
        gold_sid = gold["sample_id"] if "sample_id" in gold else f"sample_{s_idx}"  # .get(), no default built
        if pred_samples is None:
            pred = gold
        elif _lookup(by_id, gold_sid) is not None:
            pred = by_id[gold_sid]
        elif s_idx < len(pred_samples):
            pred = pred_samples[s_idx]
        else:
            pred = {"sample_id": gold_sid, "tasks": []}
        gsd = get_gsd(gold)
        pred_tasks = pred.get("tasks", []) or []
        for t_idx, gold_task in enumerate(gold.get("tasks", []) or []):
            if pred_samples is None:
                pred_task = gold_task
            else:
                pred_task = pred_tasks[t_idx] if t_idx < len(pred_tasks) else {}
            own = task_roots.get((gold_sid, t_idx)) if task_roots else None
            if explain:
                task_score, field_scores, metrics, table = score_pair(gold_task, pred_task, gsd,
                                                                      own + roots if own else roots, cfg, explain)
                entry = task_entry(gold_sid, t_idx, task_score, field_scores, metrics)
                entry["step_matches"] = table
                results.append(entry)
                continue
            # score_pair and task_entry written out (this runs once per task): the same values; the
            # defaults are shared empty values (nothing here changes what it scores), not built per task
            task_score, field_scores = score_answer(pred_task.get("final_answer", _NO_ANSWER),
                                                    gold_task.get("final_answer", _NO_ANSWER),
                                                    gold_task.get("eval_spec", _NO_ANSWER), gsd,
                                                    own + roots if own else roots, cfg)
            t_any, t_ord, t_em, par_acc, eff = metric_values(pred_task.get("trajectory", _NO_STEPS),
                                                             gold_task.get("trajectory", _NO_STEPS), cfg)
            results.append({
                "sample_id": gold_sid,
                "task_idx": t_idx,
                "task_score": None if math.isnan(task_score) else round6(task_score),
                "field_scores": {k: round6(v) for k, v in field_scores.items()},
                "n_scored_fields": len(field_scores),
                # metric_values gives floats, mostly 1.0 or 0.0: round6's first test, before the call
                "t_any": t_any if t_any == 1.0 or t_any == 0.0 else round6(t_any),
                "t_ord": t_ord if t_ord == 1.0 or t_ord == 0.0 else round6(t_ord),
                "t_em": t_em if t_em == 1.0 or t_em == 0.0 else round6(t_em),
                "par_acc": par_acc if par_acc == 1.0 or par_acc == 0.0 else round6(par_acc),
                "eff": eff if eff == 1.0 or eff == 0.0 else round6(eff),
            })
    n = len(results)
    if n == 0:
        return {"tasks": [], "n_tasks": 0, "n_scored_tasks": 0}
    scored = [r["task_score"] for r in results if r["task_score"] is not None]
    dim_score = sum(scored) / len(scored) if scored else 0.0
    out = {"dim_score": round6(dim_score), "n_tasks": n, "n_scored_tasks": len(scored)}
    for m in METRICS:
        out[m] = round6(sum([r[m] for r in results]) / n)  # the same additions, in the same order
    out["tasks"] = results
    return out


def _lookup(mapping: dict, key: Any):
    try:
        return mapping.get(key)
    except TypeError:
        return None


def run_evaluation(gold_data: dict[str, list[dict]], pred_data: dict[str, list[dict]] | None,
                   roots: Iterable[Path] = (), cfg: ScoringConfig = DEFAULT_CONFIG, explain: bool = False,
                   task_roots: dict | None = None) -> dict:
    """``{dora_score, dimensions, full}`` over the dimensions in gold (and in predictions unless
    ``pred_data`` is None, i.e. sanity). Dimensions with no task are listed but not averaged.
    ``task_roots``: ``{dim: {(sample id, task index): (folder, ...)}}`` (see :func:`evaluate_dimension`)."""
    roots = tuple(roots)
    full, dim_scores = {}, []
    for dim in TASKS:
        if dim not in gold_data or (pred_data is not None and dim not in pred_data):
            continue
        full[dim] = evaluate_dimension(gold_data[dim], None if pred_data is None else pred_data[dim], roots, cfg, explain,
                                       (task_roots or {}).get(dim))
        if full[dim]["n_tasks"] > 0:
            dim_scores.append(full[dim]["dim_score"])
    dora = sum(dim_scores) / len(dim_scores) if dim_scores else 0.0
    return {
        "dora_score": round6(dora),
        "dimensions": {d: {k: v for k, v in r.items() if k != "tasks"} for d, r in full.items()},
        "full": full,
    }


def format_results_table(results: dict, mode: str = "dora") -> str:
    """The evaluator's plain-text table (6 decimals). In ``paper`` mode a line naming the mode is
    appended; in ``dora`` mode the text is exactly the official one. A dimension with no task has
    no row (the official script raises a KeyError there)."""
    dims = results["dimensions"]
    header = (f"{'Dim':<6} {'Tasks':>6} {'Answer':>10} {'T-Any':>9} {'T-Ord':>9} "
              f"{'T-EM':>9} {'ParAcc':>9} {'Eff':>9}")
    rule = "-" * len(header)
    lines = [rule, header, rule]

    def row(label, n, answer, m):
        return (f"{label:<6} {n:>6} {answer:>10.6f} " + " ".join(f"{m[k]:>9.6f}" for k in METRICS))

    active = []
    for dim in TASKS:
        d = dims.get(dim)
        if d is None or d.get("n_tasks", 0) == 0 or "dim_score" not in d:
            continue
        active.append(d)
        lines.append(row(dim, d["n_tasks"], d["dim_score"], d))
    lines.append(rule)
    if active:
        mean = {m: sum(d[m] for d in active) / len(active) for m in METRICS}
        lines.append(row("DORA", sum(d["n_tasks"] for d in active), results["dora_score"], mean))
    lines.append(rule)
    lines.append("")
    lines.append(f"  DORA Score: {results['dora_score']:.6f}")
    if mode != "dora":
        lines.append(f"  Mode: {mode} (paper Table 3 operators; not the official DORA evaluator's numbers)")
    return "\n".join(lines)


def official_document(results: dict, mode: str = "dora", keep_step_matches: bool = False) -> dict:
    """The eval.json document: ``summary_table``, ``dora_score``, ``dimensions``, ``full`` in the
    official order, then one documented extra key, ``mode``. ``step_matches`` entries (present only
    when asked for) are dropped unless ``keep_step_matches``."""
    full = results["full"]
    if not keep_step_matches:
        full = {}
        for dim, block in results["full"].items():
            block = dict(block)
            # an entry without step_matches is taken as it is (a copy would be equal)
            block["tasks"] = [{k: v for k, v in t.items() if k != "step_matches"} if "step_matches" in t else t
                              for t in block.get("tasks", [])]
            full[dim] = block
    return {
        "summary_table": format_results_table(results, mode),
        "dora_score": results["dora_score"],
        "dimensions": results["dimensions"],
        "full": full,
        "mode": mode,
    }
