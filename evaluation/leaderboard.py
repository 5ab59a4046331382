"""Leaderboard: the official Table 4 numbers of every run, breakdowns and labelled extras.

Pure functions over plain data (no Django). Two inputs:

* ``runs``: one dict per agent run, ``{run_id, agent, run_name, mode, dora_score, dimensions}``
  where ``dimensions`` is the run's stored official block ``{dim: {dim_score, n_tasks,
  n_scored_tasks, t_any, t_ord, t_em, par_acc, eff}}``.
* ``rows``: one dict per run record, ``{record_id, run_id, agent, run_name, mode, dimension,
  question_id, task_score, t_any, t_ord, t_em, par_acc, eff, gold_len, modality, ...extras}``
  (see :data:`ROW_COLUMNS`); ``gold_len``/``modality`` are None when the record has no studio task.

What is official and what is not
--------------------------------
*Official* (:func:`official_table`): per-dimension answer accuracy and the DORA score exactly as
stored from the scorer (the evaluator's numbers), and the five trajectory metrics averaged like the
evaluator's summary row (per dimension, then the plain mean of the dimensions that have tasks).

*Breakdowns* (:func:`bucket_breakdown`): the paper's Fig. 8/9 views. Accuracy of a group is the
pooled mean of the official per-task scores of the records in it (records whose task score is
None, i.e. no scored field, are left out, as the evaluator leaves them out of a dimension mean).
Records without a studio task have no gold length or modality and are in no group.

*Extras* (:func:`bootstrap_ci`, :func:`trajectory_extras`): never part of the official numbers.
"""
from __future__ import annotations

import io
import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from html import escape
from typing import Any

from evaluation.scoring.config import ScoringConfig
from evaluation.scoring.loaders import TASKS
from evaluation.scoring.normalize import normalize_tool_name
from evaluation.scoring.trajectory import _Context, flatten_trajectory, is_file_path, lcs_pairs, match_value, output_map
from kernel.inputs import modality_config as _modality_config

DIMENSIONS: tuple[str, ...] = tuple(TASKS)  # t1 … t5
METRICS: tuple[str, ...] = ("t_any", "t_ord", "t_em", "par_acc", "eff")
METRIC_LABELS = {"t_any": "T-Any", "t_ord": "T-Ord", "t_em": "T-EM", "par_acc": "ParAcc", "eff": "Eff"}
#: What each trajectory metric measures (the official evaluator's definitions, dora/evaluation.py), shown in place.
METRIC_HELP = {
    "t_any": "tool recall in any order: share of the gold tools the agent called",
    "t_ord": "tools in order: longest common subsequence of the tool sequences / gold steps",
    "t_em": "exact match: length of the common prefix of the tool sequences / gold steps",
    "par_acc": "argument accuracy: matching arguments of the gold and the predicted step at the same position, over gold steps",
    "eff": "efficiency: gold steps / max(predicted steps, gold steps)",
}
#: Fewest tasks of a dimension for a bootstrap interval: below it the percentile interval of a
#: handful of resampled values says little (n = 1 gives [x, x]); the page says "n too small". A
#: studio choice, not the paper's.
BOOTSTRAP_MIN_N = 5
GOLD_AGENT = "gold"

# Gold-trajectory length buckets. The paper's Fig. 9 starts at 2 steps; 1-step tasks get their own
# bucket "1" (listed first) rather than being folded into "2–3". A gold trajectory with 0 steps
# after flattening (e.g. only a loop wrapper) is in no bucket.
LENGTH_BUCKETS: tuple[str, ...] = ("1", "2–3", "4–5", "6–7", "8–10", "≥11")

ROW_COLUMNS: tuple[str, ...] = (
    "record_id", "run_id", "run_name", "agent", "mode", "gold_set", "dimension", "question_id", "task_id",
    "task_score", "t_any", "t_ord", "t_em", "par_acc", "eff",
    "gold_len", "length_bucket", "modality",
    "n_pred_steps", "lcs_par_acc", "multiset_recall", "extraneous_calls",
    "run_prompt_tokens", "run_completion_tokens", "run_cost", "run_seconds",
)
#: a run's accounting (``AgentRun`` fields, stored for the runs the studio ran itself: an
#: experiment's repeats): prompt and completion tokens, cost (the configuration's price currency)
#: and wall-clock seconds of its questions; None for an imported run (shown blank, never 0)
ACCOUNTING: tuple[str, ...] = ("prompt_tokens", "completion_tokens", "cost", "seconds")
#: rows a piece of a streamed CSV export holds (:func:`iter_csv_chunks`)
CSV_CHUNK_ROWS = 1000


# ── per-record helpers ───────────────────────────────────────────────────

def _tool_names(traj: Any) -> list[str]:
    names = (normalize_tool_name(s.get("call", "")) for s in flatten_trajectory(traj))
    return [n for n in names if n]


def gold_length(trajectory: Any) -> int | None:
    """|G| as the evaluator counts it: the flattened gold steps with a tool name (loop wrappers
    dropped). None when there is no trajectory (not a list)."""
    if not isinstance(trajectory, list):
        return None
    return len(_tool_names(trajectory))


def length_bucket(n: int | None) -> str | None:
    """``1``, ``2–3``, ``4–5``, ``6–7``, ``8–10``, ``≥11``; None for None or < 1."""
    if n is None or n < 1:
        return None
    if n == 1:
        return "1"
    if n <= 3:
        return "2–3"
    if n <= 5:
        return "4–5"
    if n <= 7:
        return "6–7"
    if n <= 10:
        return "8–10"
    return "≥11"


def modality_config(input_data: Any) -> str | None:
    """The modality configuration of a manifest (``optical+sar``, ``optical+vector``), the one
    rule of ``kernel.inputs.modality_config`` (also the release report's); None when it names no file."""
    return _modality_config(input_data) or None


#: Gold/pred index pairs of one LCS of two tool-name lists (see :func:`evaluation.scoring.trajectory.lcs_pairs`).
lcs_alignment = lcs_pairs


def lcs_parameter_accuracy(pred_traj: Any, gold_traj: Any, tau_r: float = 0.2, tau_a: float = 1.0) -> float:
    """EXTRA. Parameter accuracy with steps paired by an LCS of tool names instead of by position,
    so one inserted step does not shift every later comparison.

    For each gold step paired with a predicted step: the fraction of gold argument keys whose
    values match (a gold step without args counts 1); unpaired gold steps count 0; the sum is
    divided by the number of flattened gold steps. Values match with the evaluator's rules, except
    that a file-path argument also matches when both paths were produced by a pair of aligned
    steps (the evaluator compares producing step *indices*, which an insertion shifts).
    Empty gold: 1 if the prediction is empty too, else 0.
    """
    gold_flat, pred_flat = flatten_trajectory(gold_traj), flatten_trajectory(pred_traj)
    if not gold_flat:
        return 1.0 if not pred_flat else 0.0
    g_names = [normalize_tool_name(s.get("call", "")) for s in gold_flat]
    p_names = [normalize_tool_name(s.get("call", "")) for s in pred_flat]
    pairs = lcs_alignment(g_names, p_names)
    aligned = set(pairs)
    ctx = _Context(gold_flat, pred_flat, ScoringConfig(tau_r=tau_r, tau_a=tau_a))
    g_out = p_out = None
    total = 0.0
    for gi, pj in pairs:
        g_args = gold_flat[gi].get("args", {})
        p_args = pred_flat[pj].get("args", {})
        g_args = g_args if isinstance(g_args, dict) else {}
        p_args = p_args if isinstance(p_args, dict) else {}
        if not g_args:
            total += 1.0
            continue
        hits = 0
        for key, gv in g_args.items():
            if key not in p_args:
                continue
            pv = p_args[key]
            if isinstance(gv, str) and isinstance(pv, str) and (is_file_path(gv) or is_file_path(pv)):
                if g_out is None:
                    g_out, p_out = output_map(gold_flat), output_map(pred_flat)
                g_src, p_src = g_out.get(gv), p_out.get(pv)
                if g_src is not None and p_src is not None and (g_src[0], p_src[0]) in aligned:
                    hits += 1
                    continue
            ok, _ = match_value(gv, pv, ctx)
            hits += bool(ok)
        total += hits / len(g_args)
    return total / len(gold_flat)


def multiset_recall(pred_names: Sequence[str], gold_names: Sequence[str]) -> float:
    """EXTRA. |multiset(G) ∩ multiset(P)| / |G| (T-Any without collapsing repeated calls);
    empty G: 1 if P is empty, else 0."""
    if not gold_names:
        return 1.0 if not pred_names else 0.0
    common = Counter(gold_names) & Counter(pred_names)
    return sum(common.values()) / len(gold_names)


def extraneous_calls(pred_names: Sequence[str], gold_names: Sequence[str]) -> int:
    """EXTRA. Predicted calls left over once each gold call has consumed one predicted call of
    the same tool: |P| − |multiset(G) ∩ multiset(P)| (wrong tools and surplus repeats)."""
    common = Counter(gold_names) & Counter(pred_names)
    return len(pred_names) - sum(common.values())


def record_extras(pred_traj: Any, gold_traj: Any, tau_r: float = 0.2, tau_a: float = 1.0) -> dict[str, Any]:
    """The per-record extras: ``n_pred_steps`` (always), and ``lcs_par_acc``, ``multiset_recall``,
    ``extraneous_calls`` when a gold trajectory is known (``gold_traj`` a list), else None."""
    pred_names = _tool_names(pred_traj)
    out = {"n_pred_steps": len(pred_names), "lcs_par_acc": None, "multiset_recall": None, "extraneous_calls": None}
    if isinstance(gold_traj, list):
        gold_names = _tool_names(gold_traj)
        out["lcs_par_acc"] = round(lcs_parameter_accuracy(pred_traj, gold_traj, tau_r, tau_a), 6)
        out["multiset_recall"] = round(multiset_recall(pred_names, gold_names), 6)
        out["extraneous_calls"] = extraneous_calls(pred_names, gold_names)
    return out


# ── runs ─────────────────────────────────────────────────────────────────

def is_gold(run: dict) -> bool:
    return str(run.get("agent", "")).strip().lower() == GOLD_AGENT


def run_labels(runs: Sequence[dict]) -> dict[Any, str]:
    """``agent [mode]``, with `` #<run id>`` added where two runs would share a label."""
    base = {r["run_id"]: f"{r['agent']} [{r['mode']}]" for r in runs}
    counts = Counter(base.values())
    return {rid: (f"{lab} #{rid}" if counts[lab] > 1 else lab) for rid, lab in base.items()}


def order_runs(runs: Sequence[dict]) -> list[dict]:
    """Gold runs first (as in the paper's Table 4), then by DORA score, best first; ties by id."""
    def key(r):
        score = r.get("dora_score")
        return (0 if is_gold(r) else 1, -(score if score is not None else -math.inf), r["run_id"])
    return sorted(runs, key=key)


def gold_run_for(run: dict, runs: Sequence[dict]) -> dict | None:
    """The reference gold run of ``run``: the newest (highest id) run of agent ``gold`` scored in
    the same mode; None when there is none."""
    golds = [r for r in runs if is_gold(r) and r.get("mode") == run.get("mode")]
    return max(golds, key=lambda r: r["run_id"]) if golds else None


# ── official table ───────────────────────────────────────────────────────

def _mean(values: Iterable[float]) -> float | None:
    vals = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return sum(vals) / len(vals) if vals else None


def official_row(run: dict, rows: Sequence[dict] = (), dim_means: dict[tuple[str, str], float | None] | None = None) -> dict:
    """One Table 4 row: ``{run_id, agent, run_name, mode, label, avg, dims: {t1..t5: score|None},
    metrics: {t_any..eff}, source, prompt_tokens, completion_tokens, cost, seconds}`` (the last
    four: the run's :data:`ACCOUNTING`, None when it has none).

    ``avg`` is the stored DORA score; ``dims`` the stored ``dim_score`` of every dimension with
    tasks. A metric is the mean over those dimensions of the stored (rounded) dimension metric,
    as the evaluator's summary row computes it. Where the stored block lacks a metric it is
    recomputed from this run's records (mean of the record values per dimension, rounded to 6
    decimals, then the mean over dimensions) and ``source`` says ``recomputed``. ``dim_means``
    (``{(dimension, metric): record mean or None}``, from :func:`dim_means_from_aggregate`) stands
    in for the records when given.
    """
    stored = run.get("dimensions") or {}
    active = [d for d in DIMENSIONS if isinstance(stored.get(d), dict)
              and (stored[d].get("n_tasks") is None or stored[d]["n_tasks"] > 0)
              and stored[d].get("dim_score") is not None]
    by_dim = defaultdict(list)
    for r in rows:
        if r["run_id"] == run["run_id"]:
            by_dim[r["dimension"]].append(r)
    source = "stored"
    metrics = {}
    for m in METRICS:
        per_dim = []
        for d in active:
            value = stored[d].get(m)
            if value is None:
                value = (dim_means.get((d, m)) if dim_means is not None
                         else _mean(r.get(m) for r in by_dim.get(d, ())))
                value = None if value is None else round(value, 6)
                source = "recomputed"
            if value is not None:
                per_dim.append(value)
        metrics[m] = sum(per_dim) / len(per_dim) if per_dim else None
    return {
        "run_id": run["run_id"], "agent": run["agent"], "run_name": run.get("run_name", ""),
        "mode": run["mode"], "avg": run.get("dora_score"),
        "dims": {d: (stored[d]["dim_score"] if d in active else None) for d in DIMENSIONS},
        "n_tasks": {d: (stored[d].get("n_tasks") if d in active else None) for d in DIMENSIONS},
        "metrics": metrics, "source": source, **{k: run.get(k) for k in ACCOUNTING},
    }


def official_table(runs: Sequence[dict], rows: Sequence[dict] = (),
                   dim_means: dict[Any, dict[tuple[str, str], float | None]] | None = None) -> list[dict]:
    """Table 4 rows of every run, gold first, then by DORA score; each has a ``label``.
    ``dim_means``: ``{run_id: {(dimension, metric): mean}}`` in place of ``rows`` (aggregates)."""
    labels = run_labels(runs)
    out = []
    for run in order_runs(runs):
        row = official_row(run, rows, None if dim_means is None else dim_means.get(run["run_id"], {}))
        row["label"] = labels[run["run_id"]]
        out.append(row)
    return out


# ── breakdowns ───────────────────────────────────────────────────────────

def group_accuracy(rows: Sequence[dict], key: str) -> dict[Any, dict[str, tuple[float, int]]]:
    """``{run_id: {group: (pooled mean task score, n records)}}`` over records with a task score
    and a non-None ``key`` value."""
    sums: dict[Any, dict[str, list[float]]] = defaultdict(lambda: defaultdict(lambda: [0.0, 0]))
    for r in rows:
        group, score = r.get(key), r.get("task_score")
        if group is None or score is None or (isinstance(score, float) and math.isnan(score)):
            continue
        acc = sums[r["run_id"]][group]
        acc[0] += score
        acc[1] += 1
    return {rid: {g: (s / n, n) for g, (s, n) in groups.items()} for rid, groups in sums.items()}


def bucket_breakdown(runs: Sequence[dict], rows: Sequence[dict], key: str,
                     groups: Sequence[str] | None = None, with_gap: bool = False,
                     acc: dict[Any, dict[str, tuple[float, int]]] | None = None) -> dict:
    """Accuracy by group per run: ``{groups: [...], rows: [{run_id, label, mode, cells: [{group,
    acc, n, gap, gold}]}]}``.

    ``groups`` defaults to every value seen, sorted. With ``with_gap`` each cell has the agent-to-
    gold gap ``acc − gold`` where ``gold`` is the same group's accuracy of the run's reference gold
    run (:func:`gold_run_for`: agent ``gold``, same mode) or 1.0 when there is no such run (a gold
    replay scores 1.0 on every task by construction); ``gold`` is None (and so is the gap) when the
    reference gold run has no record in that group. ``acc`` (the :func:`group_accuracy` shape, e.g.
    from :func:`group_accuracy_from_aggregates`) replaces the records when given.
    """
    if acc is None:
        acc = group_accuracy(rows, key)
    if groups is None:
        groups = sorted({g for per_run in acc.values() for g in per_run})
    labels = run_labels(runs)
    out_rows = []
    for run in order_runs(runs):
        mine = acc.get(run["run_id"], {})
        ref = gold_run_for(run, runs) if with_gap else None
        cells = []
        for g in groups:
            a, n = mine.get(g, (None, 0))
            cell = {"group": g, "acc": a, "n": n}
            if with_gap:
                if ref is None:
                    gold, gold_source = 1.0, "1.0 (no gold run)"
                else:
                    gold = acc.get(ref["run_id"], {}).get(g, (None, 0))[0]
                    gold_source = labels[ref["run_id"]]
                cell["gold"] = gold
                cell["gold_source"] = gold_source
                cell["gap"] = (a - gold) if (a is not None and gold is not None) else None
            cells.append(cell)
        out_rows.append({"run_id": run["run_id"], "label": labels[run["run_id"]], "mode": run["mode"],
                         "agent": run["agent"], "cells": cells})
    return {"groups": list(groups), "rows": out_rows}


def length_breakdown(runs: Sequence[dict], rows: Sequence[dict], acc=None, seen=None) -> dict:
    """Fig. 9: accuracy by gold-trajectory length bucket with the agent-to-gold gap. Buckets with
    no record in any run are dropped. ``acc``/``seen`` (group accuracies and the buckets with a
    record, from aggregates) replace the records when given."""
    if seen is None:
        seen = {r.get("length_bucket") for r in rows if r.get("task_score") is not None}
    return bucket_breakdown(runs, rows, "length_bucket", [b for b in LENGTH_BUCKETS if b in seen], with_gap=True,
                            acc=acc)


def modality_breakdown(runs: Sequence[dict], rows: Sequence[dict], acc=None) -> dict:
    """Fig. 8: accuracy by input modality configuration (``acc``: see :func:`length_breakdown`)."""
    return bucket_breakdown(runs, rows, "modality", acc=acc)


# ── protocols and scaffolds (the paper's Tables 5 and 6) ─────────────────

def protocol_deltas(runs: Sequence[dict], rows: Sequence[dict] = (),
                    dim_means: dict[Any, dict] | None = None) -> list[dict]:
    """Table 5: per agent and scoring mode with both an AP (auto-planning) and an IF
    (instruction-following) run, the newest of each and ``IF − AP`` for the answer accuracy (AVG)
    and every trajectory metric. Rows ``{agent, mode, ap, if, delta}``; ``ap``/``if`` are
    :func:`official_row` results, ``delta`` ``{avg, t_any, …}`` with None where a side has no data.
    Agents without both protocols are left out. ``dim_means`` (``{run_id: …}`` of
    :func:`dim_means_from_aggregate`) stands in for the records, as in :func:`official_row`."""
    newest: dict[tuple, dict[str, dict]] = defaultdict(dict)
    for run in sorted(runs, key=lambda r: r["run_id"]):
        if run.get("protocol") in ("AP", "IF") and not is_gold(run):
            newest[(run["agent"], run["mode"])][run["protocol"]] = run
    out = []
    for (agent, mode), pair in sorted(newest.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
        if set(pair) != {"AP", "IF"}:
            continue
        means = dim_means or {}
        ap = official_row(pair["AP"], rows, means.get(pair["AP"]["run_id"], {}) if dim_means is not None else None)
        if_ = official_row(pair["IF"], rows, means.get(pair["IF"]["run_id"], {}) if dim_means is not None else None)

        def diff(a, b):
            return None if a is None or b is None else b - a
        delta = {"avg": diff(ap["avg"], if_["avg"]), **{m: diff(ap["metrics"][m], if_["metrics"][m]) for m in METRICS}}
        out.append({"agent": agent, "mode": mode, "ap": ap, "if": if_, "delta": delta})
    return out


def scaffold_table(runs: Sequence[dict], rows: Sequence[dict] = (), dim_means: dict[Any, dict] | None = None,
                   elapsed: dict[Any, list[float]] | None = None) -> list[dict]:
    """Table 6: per scaffold (runs that name one) and scoring mode, the mean over its runs of the
    answer accuracy (the DORA score), T-EM and ParAcc (:func:`official_row`), and the latency in
    seconds per task: the mean ``elapsed_s`` of its records that carry one (None without).
    Rows ``{scaffold, mode, n_runs, avg, t_em, par_acc, latency_s, n_timed}``, by scaffold name.
    ``dim_means`` and ``elapsed`` (``{run_id: [latency sum, n]}`` of :func:`run_aggregate`) stand in
    for the records (the latency's sum is then added per run: equal to the record-by-record mean up
    to float rounding)."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for run in runs:
        if run.get("scaffold") and not is_gold(run):
            groups[(run["scaffold"], run["mode"])].append(run)
    out = []
    for (scaffold, mode), members in sorted(groups.items(), key=lambda kv: (kv[0][0].lower(), kv[0][1])):
        ids = {r["run_id"] for r in members}
        if dim_means is not None:
            table = [official_row(r, (), dim_means.get(r["run_id"], {})) for r in members]
        else:
            table = [official_row(r, rows) for r in members]
        if elapsed is not None:
            total = sum(elapsed.get(rid, [0.0, 0])[0] for rid in sorted(ids))
            n_timed = sum(elapsed.get(rid, [0.0, 0])[1] for rid in sorted(ids))
            latency = total / n_timed if n_timed else None
        else:
            times = [float(r["elapsed_s"]) for r in rows if r["run_id"] in ids and r.get("elapsed_s") is not None]
            latency, n_timed = _mean(times), len(times)
        out.append({"scaffold": scaffold, "mode": mode, "n_runs": len(members),
                    "avg": _mean(t["avg"] for t in table if t["avg"] is not None),
                    "t_em": _mean(t["metrics"]["t_em"] for t in table if t["metrics"]["t_em"] is not None),
                    "par_acc": _mean(t["metrics"]["par_acc"] for t in table if t["metrics"]["par_acc"] is not None),
                    "latency_s": latency, "n_timed": n_timed})
    return out


# ── extras ───────────────────────────────────────────────────────────────

def bootstrap_ci(runs: Sequence[dict], rows: Sequence[dict], n_boot: int = 1000, seed: int = 0,
                 level: float = 0.95, min_n: int = BOOTSTRAP_MIN_N) -> list[dict]:
    """EXTRA. Percentile bootstrap intervals of each dimension's accuracy and of the macro score.

    Per run, tasks are resampled with replacement within each dimension (stratified, so every
    replicate has every dimension); a replicate's dimension accuracy is the mean of its resampled
    task scores and its macro score the mean of its dimension accuracies. Only records with a
    task score are resampled, as only they enter the official mean. The point estimates are those
    record means (equal to the official scores when the run's records cover all its tasks).
    ``numpy.random.default_rng(seed)`` drives everything; dimensions are drawn in t1…t5 order, runs
    in id order, so the same input and seed give the same intervals. A dimension with fewer than
    ``min_n`` tasks gets no interval (``lo``/``hi`` None, ``too_small`` True; it is still drawn, so
    the other intervals do not depend on ``min_n``), nor does the macro score then.
    """
    import numpy as np

    rng = np.random.default_rng(seed)
    lo_q, hi_q = (1 - level) / 2 * 100, (1 + level) / 2 * 100
    by_run: dict[Any, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        s = r.get("task_score")
        if s is not None and not (isinstance(s, float) and math.isnan(s)):
            by_run[r["run_id"]][r["dimension"]].append(float(s))
    labels = run_labels(runs)
    order = {r["run_id"]: i for i, r in enumerate(order_runs(runs))}
    out = []
    for run in sorted(runs, key=lambda r: r["run_id"]):
        dims = by_run.get(run["run_id"], {})
        res = {"run_id": run["run_id"], "label": labels[run["run_id"]], "mode": run["mode"], "n_boot": n_boot,
               "seed": seed, "level": level, "dims": {}, "macro": None}
        reps = []
        for d in DIMENSIONS:
            scores = np.asarray(dims.get(d, []), dtype=float)
            if scores.size == 0:
                res["dims"][d] = None
                continue
            idx = rng.integers(0, scores.size, size=(n_boot, scores.size))
            means = scores[idx].mean(axis=1)
            reps.append(means)
            if scores.size < min_n:
                res["dims"][d] = {"mean": float(scores.mean()), "lo": None, "hi": None, "n": int(scores.size),
                                  "too_small": True}
            else:
                res["dims"][d] = {"mean": float(scores.mean()), "lo": float(np.percentile(means, lo_q)),
                                  "hi": float(np.percentile(means, hi_q)), "n": int(scores.size), "too_small": False}
        if reps:
            macro = np.mean(np.vstack(reps), axis=0)
            point = float(np.mean([res["dims"][d]["mean"] for d in DIMENSIONS if res["dims"][d]]))
            small = any(res["dims"][d]["too_small"] for d in DIMENSIONS if res["dims"][d])
            res["macro"] = {"mean": point, "lo": None if small else float(np.percentile(macro, lo_q)),
                            "hi": None if small else float(np.percentile(macro, hi_q)), "too_small": small}
        out.append(res)
    out.sort(key=lambda r: order[r["run_id"]])
    return out


def trajectory_extras(runs: Sequence[dict], rows: Sequence[dict]) -> list[dict]:
    """EXTRA, per run over the records that have a studio gold trajectory: mean LCS-aligned
    parameter accuracy, mean multiset tool recall (record means, pooled over dimensions), and the
    extraneous-call rate = Σ extraneous calls / Σ predicted calls (pooled over calls, None when no
    call was made). ``n`` is the number of records used; records without a gold are skipped."""
    labels = run_labels(runs)
    out = []
    for run in order_runs(runs):
        mine = [r for r in rows if r["run_id"] == run["run_id"] and r.get("lcs_par_acc") is not None]
        calls = sum(r.get("n_pred_steps") or 0 for r in mine)
        extra = sum(r.get("extraneous_calls") or 0 for r in mine)
        out.append({
            "run_id": run["run_id"], "label": labels[run["run_id"]], "mode": run["mode"], "n": len(mine),
            "lcs_par_acc": _mean(r["lcs_par_acc"] for r in mine),
            "par_acc": _mean(r.get("par_acc") for r in mine),
            "multiset_recall": _mean(r.get("multiset_recall") for r in mine),
            "extraneous_rate": (extra / calls) if calls else None,
            "extraneous_calls": extra, "pred_calls": calls,
        })
    return out


# ── aggregates (maintained at scoring time) ──────────────────────────────
#
# The page is rebuilt from a few sums per run instead of every record. Each sum is accumulated over
# the run's rows in the order the from-records functions above see them (the selector's order:
# dimension, question id) and with the same filters, so ``sum / n`` is the very float those
# functions compute: the tables built by :func:`build_from_aggregates` equal :func:`build`'s.

_TRAJ_MEANS = ("lcs_par_acc", "par_acc", "multiset_recall")


def _valid(value: Any) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def run_aggregate(rows: Iterable[dict]) -> dict:
    """The sums of one run's rows (see :data:`ROW_COLUMNS`; in the selector's order) that the page
    needs, JSON-safe: ``{n_records, n_no_task, dims: {dim: {metric: [sum, n]}}, length_bucket:
    {bucket: [score sum, n scored, n with a score]}, modality: {…same…}, traj: {n, calls,
    extraneous, lcs_par_acc: [sum, n], par_acc: [sum, n], multiset_recall: [sum, n]}}``.

    ``dims`` feeds a stored block's missing metric (:func:`official_row`), ``length_bucket`` and
    ``modality`` the breakdowns (:func:`group_accuracy`: None and NaN task scores left out; "with
    a score" also counts NaN, as :func:`length_breakdown` does when it lists buckets), ``traj`` the
    trajectory extras (records with a studio gold, :func:`trajectory_extras`), ``elapsed``
    ``[sum, n]`` of the records' latencies in seconds (:func:`scaffold_table`).
    """
    dims: dict[str, dict[str, list[float]]] = {}
    groups: dict[str, dict[str, list[float]]] = {"length_bucket": {}, "modality": {}}
    traj: dict[str, Any] = {"n": 0, "calls": 0, "extraneous": 0, **{m: [0.0, 0] for m in _TRAJ_MEANS}}
    elapsed = [0.0, 0]
    n_records = n_no_task = 0
    for r in rows:
        n_records += 1
        n_no_task += r.get("task_id") is None
        if r.get("elapsed_s") is not None:
            elapsed[0] += float(r["elapsed_s"])
            elapsed[1] += 1
        per_dim = dims.setdefault(r["dimension"], {m: [0.0, 0] for m in METRICS})
        for m in METRICS:
            value = r.get(m)
            if _valid(value):
                per_dim[m][0] += value
                per_dim[m][1] += 1
        score = r.get("task_score")
        for key, cells in groups.items():
            group = r.get(key)
            if group is None:
                continue
            cell = cells.setdefault(group, [0.0, 0, 0])
            if score is not None:
                cell[2] += 1
            if _valid(score):
                cell[0] += score
                cell[1] += 1
        if r.get("lcs_par_acc") is not None:
            traj["n"] += 1
            traj["calls"] += r.get("n_pred_steps") or 0
            traj["extraneous"] += r.get("extraneous_calls") or 0
            for m in _TRAJ_MEANS:
                value = r.get(m)
                if _valid(value):
                    traj[m][0] += value
                    traj[m][1] += 1
    return {"n_records": n_records, "n_no_task": n_no_task, "dims": dims, **groups, "traj": traj, "elapsed": elapsed}


def _ratio(pair: Sequence[float]) -> float | None:
    return pair[0] / pair[1] if pair[1] else None


def dim_means_from_aggregate(agg: dict) -> dict[tuple[str, str], float | None]:
    """``{(dimension, metric): mean of the run's record values or None}`` from a
    :func:`run_aggregate` (what :func:`official_row` recomputes a missing stored metric from)."""
    return {(d, m): _ratio(pair) for d, per_dim in (agg.get("dims") or {}).items() for m, pair in per_dim.items()}


def group_accuracy_from_aggregates(aggs: dict[Any, dict], key: str) -> dict[Any, dict[str, tuple[float, int]]]:
    """:func:`group_accuracy`'s ``{run_id: {group: (mean, n)}}`` from ``{run_id: run_aggregate}``;
    ``key`` is ``length_bucket`` or ``modality``."""
    out = {}
    for rid, agg in aggs.items():
        cells = {g: (c[0] / c[1], c[1]) for g, c in (agg.get(key) or {}).items() if c[1]}
        if cells:
            out[rid] = cells
    return out


def trajectory_extras_from_aggregates(runs: Sequence[dict], aggs: dict[Any, dict]) -> list[dict]:
    """:func:`trajectory_extras` from ``{run_id: run_aggregate}`` (same keys and values)."""
    labels = run_labels(runs)
    out = []
    for run in order_runs(runs):
        traj = (aggs.get(run["run_id"]) or {}).get("traj") or {}
        calls, extra = traj.get("calls", 0), traj.get("extraneous", 0)
        out.append({
            "run_id": run["run_id"], "label": labels[run["run_id"]], "mode": run["mode"], "n": traj.get("n", 0),
            **{m: _ratio(traj.get(m, (0.0, 0))) for m in _TRAJ_MEANS},
            "extraneous_rate": (extra / calls) if calls else None,
            "extraneous_calls": extra, "pred_calls": calls,
        })
    return out


def build_from_aggregates(runs: Sequence[dict], aggs: dict[Any, dict]) -> dict:
    """What :func:`build` returns, except ``bootstrap`` (None: computed apart, in the background),
    from the runs and ``{run_id: run_aggregate}``; with ``n_records`` and ``n_no_task``."""
    seen = {g for agg in aggs.values() for g, c in (agg.get("length_bucket") or {}).items() if c[2]}
    means = {rid: dim_means_from_aggregate(a) for rid, a in aggs.items()}
    return {
        "official": official_table(runs, dim_means=means),
        "length": length_breakdown(runs, (), acc=group_accuracy_from_aggregates(aggs, "length_bucket"), seen=seen),
        "modality": modality_breakdown(runs, (), acc=group_accuracy_from_aggregates(aggs, "modality")),
        "bootstrap": None,
        "traj_extras": trajectory_extras_from_aggregates(runs, aggs),
        "protocols": protocol_deltas(runs, dim_means=means),
        "scaffolds": scaffold_table(runs, dim_means=means,
                                    elapsed={rid: a.get("elapsed") or [0.0, 0] for rid, a in aggs.items()}),
        "modes": sorted({r["mode"] for r in runs}),
        "n_records": sum(a.get("n_records", 0) for a in aggs.values()),
        "n_no_task": sum(a.get("n_no_task", 0) for a in aggs.values()),
    }


# ── exports ──────────────────────────────────────────────────────────────

def records_frame(rows: Sequence[dict]):
    """The per-record rows as a pandas DataFrame with the :data:`ROW_COLUMNS` columns."""
    import pandas as pd

    frame = pd.DataFrame([{c: r.get(c) for c in ROW_COLUMNS} for r in rows], columns=list(ROW_COLUMNS))
    for c in ("task_score", "t_any", "t_ord", "t_em", "par_acc", "eff", "lcs_par_acc", "multiset_recall"):
        frame[c] = pd.to_numeric(frame[c], errors="coerce").astype("float64")
    for c in ("run_cost", "run_seconds"):
        frame[c] = pd.to_numeric(frame[c], errors="coerce").astype("float64")
    for c in ("gold_len", "n_pred_steps", "extraneous_calls", "task_id", "run_prompt_tokens", "run_completion_tokens"):
        frame[c] = frame[c].astype("Int64")
    return frame


#: first characters that make a spreadsheet read a cell as a formula (OWASP, "CSV Injection"):
#: = + - @, and tab and carriage return, which some spreadsheets skip before looking
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value):
    """``value`` safe for a spreadsheet: a string starting with one of :data:`FORMULA_PREFIXES`
    gets a leading apostrophe (OWASP's recommendation), so ``=HYPERLINK(...)`` stays text. Other
    values (numbers, ``None``) are returned as they are."""
    if isinstance(value, str) and value.startswith(FORMULA_PREFIXES):
        return "'" + value
    return value


def iter_csv_chunks(rows: Iterable[dict], chunk_rows: int = CSV_CHUNK_ROWS) -> Iterator[bytes]:
    """UTF-8 CSV of :func:`records_frame` in pieces of ``chunk_rows`` rows (the header with the
    first), for a download that streams; joined, the pieces are :func:`to_csv_bytes` of the same
    rows byte for byte (each column's type is fixed by :func:`records_frame`, not by the values of a
    piece). A header only when there is no row."""
    piece: list[dict] = []
    header = True
    for row in rows:
        piece.append(row)
        if len(piece) >= chunk_rows:
            yield _csv_piece(piece, header)
            piece, header = [], False
    if piece or header:
        yield _csv_piece(piece, header)


def _csv_piece(rows: Sequence[dict], header: bool) -> bytes:
    from pandas.api.types import is_numeric_dtype

    frame = records_frame(rows)
    for c in frame.columns:
        if not is_numeric_dtype(frame[c]):
            frame[c] = frame[c].map(csv_cell)
    return frame.to_csv(index=False, header=header).encode("utf-8")


def to_csv_bytes(rows: Sequence[dict]) -> bytes:
    """UTF-8 CSV of :func:`records_frame` (empty cells for missing values); text cells pass through
    :func:`csv_cell` (numbers stay numbers: a negative score is no formula)."""
    return _csv_piece(rows, True)


def to_parquet_bytes(rows: Sequence[dict]) -> bytes:
    """Parquet (pyarrow) of :func:`records_frame`."""
    buf = io.BytesIO()
    records_frame(rows).to_parquet(buf, index=False, engine="pyarrow")
    return buf.getvalue()


# ── plots ────────────────────────────────────────────────────────────────

def plot_text(value) -> str:
    """``value`` as literal text for a matplotlib label: every ``$`` escaped as ``\\$``, so that a
    name such as ``x$\\undefinedcmd{$y`` is never parsed as mathtext (matplotlib's documented
    escape for a literal dollar sign; an unescaped pair starts math mode, and a bad expression
    makes the whole figure fail to render)."""
    return str(value).replace("$", r"\$")


def _figure(width: float = 8.0, height: float = 4.2):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure  # no pyplot: no global backend state, safe in threads

    fig = Figure(figsize=(width, height), dpi=100)
    FigureCanvasAgg(fig)  # the Agg canvas renders the PNG
    return fig


def figure_png(fig, gold_set: str = "") -> bytes:
    """PNG bytes of a matplotlib ``Figure`` (laid out tight first): every plot of the studio's pages.
    ``gold_set``: the name of the gold set the plotted runs were scored on, written above the plot."""
    if gold_set:
        fig.suptitle(f"gold set: {plot_text(gold_set)}", fontsize=8, color="0.3")
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def figure_svg(fig, gold_set: str = "", *, title: str, desc: str) -> bytes:
    """SVG bytes of a matplotlib ``Figure`` laid out as :func:`figure_png` lays it out (same
    ``gold_set`` line), for a plot whose words must stay text: text is written as SVG text, not
    paths (``svg.fonttype`` none: readable by a screen reader and searchable), the document gets a
    ``<title>`` and a ``<desc>`` (``title``, ``desc``) and ``role="img"`` with ``aria-labelledby``
    naming both, and its ids are fixed (``svg.hashsalt``, no date) so the same figures give the
    same bytes. No script, no external reference: it renders offline."""
    import matplotlib

    if gold_set:
        fig.suptitle(f"gold set: {plot_text(gold_set)}", fontsize=8, color="0.3")
    buf = io.BytesIO()
    fig.tight_layout()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "studio-plot"}):
        fig.savefig(buf, format="svg", metadata={"Title": title, "Date": None, "Creator": None})
    text = buf.getvalue().decode("utf-8")
    text = re.sub(r"<title>.*?</title>", "", text, count=1, flags=re.S)  # matplotlib's, written again below
    opening = re.search(r"<svg\b[^>]*>", text)
    tag = opening.group(0).replace("<svg", '<svg role="img" aria-labelledby="plot-title plot-desc"', 1)
    text = (text[:opening.start()] + tag + f'\n <title id="plot-title">{escape(title)}</title>'
            f'\n <desc id="plot-desc">{escape(desc)}</desc>' + text[opening.end():])
    return text.encode("utf-8")


def _mark_missing(ax, xs: Sequence[float], values: Sequence[float | None]) -> None:
    """Tell "no data" from 0 in a bar plot: a value of None gets the words "no data" at its
    position; a 0 gets a short visible stroke on the axis (a bar of height 0 is invisible)."""
    for x, v in zip(xs, values):
        if v is None:
            ax.text(x, 2, "no data", rotation=90, ha="center", va="bottom", fontsize=6, color="0.45")
        elif v == 0:
            ax.plot([x - 0.03, x + 0.03], [0.4, 0.4], color="black", linewidth=2)


def _empty(ax, text: str = "no data") -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="0.4")
    ax.set_axis_off()


def plot_dimensions(table: Sequence[dict], gold_set: str = "") -> bytes:
    """Grouped bars: official answer accuracy (%) per dimension and AVG, one bar per run."""
    fig = _figure(9.0)
    ax = fig.add_subplot()
    if not table:
        _empty(ax)
        return figure_png(fig, gold_set)
    cats = list(DIMENSIONS) + ["avg"]
    width = 0.8 / len(table)
    for k, row in enumerate(table):
        values = [row["dims"].get(d) for d in DIMENSIONS] + [row["avg"]]
        xs = [i + (k - (len(table) - 1) / 2) * width for i in range(len(cats))]
        ax.bar(xs, [100 * v if v is not None else math.nan for v in values], width, label=plot_text(row["label"]))
        _mark_missing(ax, xs, values)
    ax.set_xticks(range(len(cats)), [c.upper() for c in cats])
    ax.set_ylabel("answer accuracy (%)")
    ax.set_ylim(0, 100)
    ax.set_title("Official answer accuracy per dimension")
    ax.legend(fontsize=7, ncol=2)
    return figure_png(fig, gold_set)


def plot_length(breakdown: dict, gold_set: str = "") -> bytes:
    """Lines: accuracy (%) by gold-trajectory length bucket, one line per run."""
    fig = _figure()
    ax = fig.add_subplot()
    groups = breakdown.get("groups", [])
    if not groups or not breakdown.get("rows"):
        _empty(ax)
        return figure_png(fig, gold_set)
    for row in breakdown["rows"]:
        ys = [100 * c["acc"] if c["acc"] is not None else math.nan for c in row["cells"]]
        ax.plot(range(len(groups)), ys, marker="o", label=plot_text(row["label"]),
                linestyle="--" if str(row["agent"]).lower() == GOLD_AGENT else "-")
        for x, c in enumerate(row["cells"]):  # a gap in a line is "no data", a point on 0 is 0
            if c["acc"] is None:
                ax.text(x, 2, "no data", rotation=90, ha="center", va="bottom", fontsize=6, color="0.45")
    ax.set_xticks(range(len(groups)), [plot_text(g) for g in groups])
    ax.set_xlabel("gold trajectory length (steps)")
    ax.set_ylabel("answer accuracy (%)")
    ax.set_ylim(0, 105)
    ax.set_title("Accuracy by gold-trajectory length")
    ax.legend(fontsize=7)
    return figure_png(fig, gold_set)


def plot_modality(breakdown: dict, gold_set: str = "") -> bytes:
    """Grouped bars: accuracy (%) by input modality configuration, one bar per run."""
    fig = _figure()
    ax = fig.add_subplot()
    groups, rows = breakdown.get("groups", []), breakdown.get("rows", [])
    if not groups or not rows:
        _empty(ax)
        return figure_png(fig, gold_set)
    width = 0.8 / len(rows)
    for k, row in enumerate(rows):
        xs = [i + (k - (len(rows) - 1) / 2) * width for i in range(len(groups))]
        ax.bar(xs, [100 * c["acc"] if c["acc"] is not None else math.nan for c in row["cells"]], width,
               label=plot_text(row["label"]))
        _mark_missing(ax, xs, [c["acc"] for c in row["cells"]])
    ax.set_xticks(range(len(groups)), [plot_text(g) for g in groups], rotation=20, ha="right")
    ax.set_ylabel("answer accuracy (%)")
    ax.set_ylim(0, 100)
    ax.set_title("Accuracy by input modality configuration")
    ax.legend(fontsize=7)
    return figure_png(fig, gold_set)


def plot_protocols(deltas: Sequence[dict], gold_set: str = "") -> bytes:
    """Grouped bars: IF − AP (percentage points) of AVG and each trajectory metric, one bar per agent."""
    fig = _figure(9.0)
    ax = fig.add_subplot()
    if not deltas:
        _empty(ax, "no agent with both an AP and an IF run")
        return figure_png(fig, gold_set)
    cats = ["avg", *METRICS]
    width = 0.8 / len(deltas)
    for k, d in enumerate(deltas):
        values = [d["delta"][c] for c in cats]
        xs = [i + (k - (len(deltas) - 1) / 2) * width for i in range(len(cats))]
        ax.bar(xs, [100 * v if v is not None else math.nan for v in values], width, label=plot_text(f"{d['agent']} [{d['mode']}]"))
        for x, v in zip(xs, values):
            if v is None:
                ax.text(x, 0, "no data", rotation=90, ha="center", va="bottom", fontsize=6, color="0.45")
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(cats)), ["AVG", *[METRIC_LABELS[m] for m in METRICS]])
    ax.set_ylabel("IF − AP (percentage points)")
    ax.set_title("Instruction-following minus auto-planning (Table 5)")
    ax.legend(fontsize=7)
    return figure_png(fig, gold_set)


def plot_scaffolds(table: Sequence[dict], gold_set: str = "") -> bytes:
    """Two panels per scaffold: accuracy, T-EM and ParAcc (%) as bars; latency (s per task) as bars."""
    fig = _figure(10.0)
    if not table:
        _empty(fig.add_subplot(), "no run names a scaffold")
        return figure_png(fig, gold_set)
    ax, ax2 = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    labels = [plot_text(f"{t['scaffold']} [{t['mode']}]") for t in table]
    keys = (("avg", "accuracy"), ("t_em", "T-EM"), ("par_acc", "ParAcc"))
    width = 0.8 / len(keys)
    for k, (key, name) in enumerate(keys):
        xs = [i + (k - 1) * width for i in range(len(table))]
        vals = [t[key] for t in table]
        ax.bar(xs, [100 * v if v is not None else math.nan for v in vals], width, label=name)
        _mark_missing(ax, xs, vals)
    ax.set_xticks(range(len(table)), labels, rotation=20, ha="right", fontsize=7)
    ax.set_ylim(0, 100)
    ax.set_ylabel("%")
    ax.legend(fontsize=7)
    ax.set_title("Per scaffold (Table 6)")
    lat = [t["latency_s"] for t in table]
    ax2.bar(range(len(table)), [v if v is not None else math.nan for v in lat], 0.6, color="0.5")
    for x, v in enumerate(lat):
        if v is None:
            ax2.text(x, 0, "no data", rotation=90, ha="center", va="bottom", fontsize=6, color="0.45")
    ax2.set_xticks(range(len(table)), labels, rotation=20, ha="right", fontsize=7)
    ax2.set_ylabel("latency (s per task)")
    return figure_png(fig, gold_set)


PLOTS = ("dimensions", "length", "modality", "protocols", "scaffolds")


def plot_paired(comparison: dict, gold_set: str = "") -> bytes:
    """Horizontal bars: the paired difference B - A (percentage points) per dimension and overall,
    with the paired bootstrap interval as error bars and the sign-flip p-value written beside each
    (:func:`evaluation.paired.paired_comparison`'s result)."""
    fig = _figure(8.0, 3.6)
    ax = fig.add_subplot()
    rows = [r for r in comparison.get("dims", []) if r["diff"] is not None]
    if comparison.get("overall", {}).get("diff") is not None:
        rows.append(comparison["overall"])
    if not rows:
        _empty(ax, "no task scored by both runs")
        return figure_png(fig, gold_set)
    ys = list(range(len(rows)))[::-1]
    diffs = [100 * r["diff"] for r in rows]
    lo = [100 * (r["diff"] - r["ci_lo"]) for r in rows]
    hi = [100 * (r["ci_hi"] - r["diff"]) for r in rows]
    colors = ["#2b7bba" if d >= 0 else "#c0392b" for d in diffs]
    ax.barh(ys, diffs, xerr=[lo, hi], color=colors, capsize=3)
    ax.axvline(0, color="black", linewidth=0.8)
    for y, r, d in zip(ys, rows, diffs):
        ax.text(d, y + 0.3, f"p = {r['p_value']:.3g}" + ("" if r["exact"] else " (MC)"), fontsize=7, ha="center")
    ax.set_yticks(ys, [f"{r['dimension'].upper()} (n = {r['n']})" for r in rows])
    ax.set_xlabel("B − A, answer score (percentage points), 95 % paired bootstrap interval")
    a, b = comparison.get("a", {}), comparison.get("b", {})
    ax.set_title(plot_text(f"{b.get('agent', 'B')} #{b.get('id', '')} vs {a.get('agent', 'A')} #{a.get('id', '')}"))
    return figure_png(fig, gold_set)


def cost_points(table: Sequence[dict]) -> dict:
    """What :func:`plot_cost` draws, from :func:`official_table` rows (no query): ``{"x": "cost" |
    "tokens", "points": [{run_id, label, x, y}], "left_out": [labels]}``. A point per run with a
    DORA score and accounting (:data:`ACCOUNTING`); ``y`` the DORA score in %; ``x`` the run's cost
    when every such run has one (a price set on its configuration), else its prompt + completion
    tokens for all (one axis, one unit). Runs without accounting (imported) or without a DORA score
    are ``left_out``."""
    placed = [r for r in table if r.get("prompt_tokens") is not None and r.get("avg") is not None]
    by_cost = bool(placed) and all(r.get("cost") is not None for r in placed)
    points = [{"run_id": r["run_id"], "label": r["label"], "y": 100 * r["avg"],
               "x": r["cost"] if by_cost else r["prompt_tokens"] + (r.get("completion_tokens") or 0)} for r in placed]
    kept = {p["run_id"] for p in points}
    return {"x": "cost" if by_cost else "tokens", "points": points,
            "left_out": [r["label"] for r in table if r["run_id"] not in kept]}


def plot_cost(table: Sequence[dict], gold_set: str = "") -> bytes:
    """Scatter (SVG, :func:`figure_svg`): DORA score (%) against cost (or tokens when a run has no
    price; :func:`cost_points`), one labelled point per run of ``table`` (:func:`official_table`
    rows) that has accounting."""
    data = cost_points(table)
    fig = _figure(8.0, 4.6)
    ax = fig.add_subplot()
    unit = "cost per run (the configuration's price currency; requests sent)" if data["x"] == "cost" else \
        "tokens per run (prompt + completion; no price set)"
    title = "DORA score against cost per run" if data["x"] == "cost" else "DORA score against tokens per run"
    points = data["points"]
    if not points:
        _empty(ax, "no run with accounting (runs of experiments) in this set")
        desc = "No point: no run of this gold set was run by an experiment, so none has a cost."
    else:
        xs, ys = [p["x"] for p in points], [p["y"] for p in points]
        ax.scatter(xs, ys, color="#2b7bba", zorder=3)
        for p in points:
            ax.annotate(plot_text(f"{p['label']}"), (p["x"], p["y"]), textcoords="offset points", xytext=(4, 4),
                        fontsize=7)
        ax.set_xlabel(unit)
        ax.set_ylabel("DORA score (%)")
        ax.set_ylim(0, 105)
        ax.set_xlim(left=0, right=max(xs) * 1.15 if max(xs) > 0 else 1)
        ax.grid(alpha=0.3)
        ax.set_title(title)
        fmt = (lambda v: f"{v:.6f}") if data["x"] == "cost" else (lambda v: f"{int(v)} tokens")
        desc = "; ".join(f"{p['label']}: DORA {p['y']:.2f} %, {fmt(p['x'])}" for p in points) + "."
    if data["left_out"]:
        n = len(data["left_out"])
        desc += f" {n} run{'s' if n != 1 else ''} not plotted (no accounting or no DORA score)."
    return figure_svg(fig, gold_set, title=title, desc=desc)


#: plots drawn as SVG (``/leaderboard/plot/<name>.svg``)
SVG_PLOTS = ("cost",)


def build(runs: Sequence[dict], rows: Sequence[dict], n_boot: int = 1000, seed: int = 0) -> dict:
    """Everything the page shows: ``official``, ``length``, ``modality``, ``bootstrap``,
    ``traj_extras``, ``protocols`` (Table 5), ``scaffolds`` (Table 6), ``modes``."""
    return {
        "official": official_table(runs, rows),
        "length": length_breakdown(runs, rows),
        "modality": modality_breakdown(runs, rows),
        "bootstrap": bootstrap_ci(runs, rows, n_boot=n_boot, seed=seed),
        "traj_extras": trajectory_extras(runs, rows),
        "protocols": protocol_deltas(runs, rows),
        "scaffolds": scaffold_table(runs, rows),
        "modes": sorted({r["mode"] for r in runs}),
    }



def json_ready(value: Any) -> Any:
    """``value`` (a leaderboard table or comparison) as strict JSON can carry it: NaN and ±Infinity
    become None (a metric with no data), dates ISO 8601 strings, tuples lists; the API's renderer
    refuses NaN (DRF's ``STRICT_JSON``)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k) if not isinstance(k, str) else k: json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(v) for v in value]
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return value
