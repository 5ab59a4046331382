"""Paired comparison of two runs scored on one gold set, over plain data (no Django).

Both runs answered the same tasks of one set, so their task scores pair up task by task: the
comparison is of the differences ``d_i = score_B(i) - score_A(i)``, which removes the variation
between tasks (an easy task is easy for both runs) that an unpaired comparison would count as noise.

``paired_comparison(a, b, n_boot=2000, n_perm=10000, seed=0)``
    ``a``, ``b``: ``{question_id: (dimension, task score)}`` of each run (records outside the gold
    set left out by the caller; a score of None, a task without a scored field, is left out).
    Pairs: the questions both runs scored. Returns ``{dims: [row], overall: row, tasks: [...],
    wins, losses, ties, n_boot, n_perm, seed, test}`` where a row is ``{dimension, n, mean_a,
    mean_b, diff, ci_lo, ci_hi, p_value, exact, wins, losses, ties}``; ``overall`` is the macro mean
    over the dimensions with pairs (as the DORA score is the mean of the dimension scores).

The interval: the **paired bootstrap** (Efron & Tibshirani, *An Introduction to the Bootstrap*,
1993, ch. 13, percentile interval; resampling the tasks, i.e. the pairs, with replacement, within
each dimension for the overall row). 95 % percentile interval of ``n_boot`` resamples, drawn by
``numpy.random.default_rng(seed)``.

The test: the **paired sign-flip permutation test** (Fisher, *The Design of Experiments*, 1935,
§21; Good, *Permutation, Parametric and Bootstrap Tests of Hypotheses*, 3rd ed. 2005, §3.6.2).
Under the null hypothesis that the two runs are exchangeable on every task, each difference is as
likely to have either sign; the two-sided p-value is the share of the ``2^n`` sign assignments whose
mean difference (the macro mean for the overall row) is at least as far from 0 as the observed one.
Exact (every assignment enumerated) for n <= ``EXACT_MAX`` pairs; else ``n_perm`` random
assignments with the ``(k + 1) / (n_perm + 1)`` estimate (Phipson & Smyth, "Permutation P-values
should never be zero", *Stat. Appl. Genet. Mol. Biol.* 9(1), 2010). Chosen over the Wilcoxon
signed-rank test because it tests the mean difference itself (the quantity the leaderboard ranks),
keeps ties and zero differences without a correction, and is exact on the small sets of a study.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence

import numpy as np

__all__ = ["paired_comparison", "sign_flip_p", "paired_bootstrap_ci", "EXACT_MAX", "CI_LEVEL"]

#: up to this many pairs the sign-flip test enumerates every assignment (2^16 = 65,536)
EXACT_MAX = 16
#: the bootstrap interval's coverage
CI_LEVEL = 0.95
_EPS = 1e-12  # "at least as extreme": floating sums of the same values may differ in the last bit


def _signs(n: int, exact: bool, n_perm: int, rng) -> np.ndarray:
    """Sign assignments, one per row: every one of the ``2^n`` (exact) or ``n_perm`` random ones."""
    if exact:
        return np.array(list(itertools.product((1.0, -1.0), repeat=n)), dtype=float).reshape(-1, n)
    return rng.choice((1.0, -1.0), size=(n_perm, n))


def _macro(diffs_by_dim: Sequence[np.ndarray], signs: np.ndarray) -> np.ndarray:
    """Macro mean over dimensions of the signed mean differences, one value per sign row (the
    columns of ``signs`` run over the dimensions' differences in order)."""
    out, start = np.zeros(signs.shape[0]), 0
    for d in diffs_by_dim:
        out += (signs[:, start:start + len(d)] * d).mean(axis=1)
        start += len(d)
    return out / len(diffs_by_dim)


def sign_flip_p(diffs_by_dim: Sequence[Sequence[float]], n_perm: int = 10000, seed: int = 0) -> tuple[float | None, bool]:
    """Two-sided p-value of the paired sign-flip permutation test on the macro mean of the
    per-dimension mean differences (one dimension: its mean difference), and whether it is exact.
    ``(None, True)`` without a pair. See the module docstring for the method and its sources."""
    groups = [np.asarray(d, dtype=float) for d in diffs_by_dim if len(d)]
    n = sum(len(d) for d in groups)
    if n == 0:
        return None, True
    observed = abs(_macro(groups, np.ones((1, n)))[0])
    exact = n <= EXACT_MAX
    stats = np.abs(_macro(groups, _signs(n, exact, n_perm, np.random.default_rng(seed))))
    k = int(np.sum(stats >= observed - _EPS))
    return (k / len(stats) if exact else (k + 1) / (n_perm + 1)), exact


def paired_bootstrap_ci(diffs_by_dim: Sequence[Sequence[float]], n_boot: int = 2000,
                        seed: int = 0) -> tuple[float | None, float | None]:
    """The 95 % percentile interval of the macro mean difference over ``n_boot`` paired bootstrap
    resamples (pairs drawn with replacement within each dimension); ``(None, None)`` without a pair."""
    groups = [np.asarray(d, dtype=float) for d in diffs_by_dim if len(d)]
    if not groups:
        return None, None
    rng = np.random.default_rng(seed)
    stats = np.zeros(n_boot)
    for d in groups:
        idx = rng.integers(0, len(d), size=(n_boot, len(d)))
        stats += d[idx].mean(axis=1)
    stats /= len(groups)
    alpha = (1 - CI_LEVEL) / 2
    lo, hi = np.quantile(stats, [alpha, 1 - alpha])
    return float(lo), float(hi)


def _row(dimension: str, pairs: list[tuple[str, float, float, str]], per_dim: list[list[float]], n_boot: int,
         n_perm: int, seed: int) -> dict:
    diffs = [p[2] - p[1] for p in pairs]
    groups = [g for g in per_dim if g]
    p, exact = sign_flip_p(groups, n_perm, seed)
    lo, hi = paired_bootstrap_ci(groups, n_boot, seed)

    def macro(values_by_dim: Iterable[list[float]]) -> float | None:
        means = [sum(v) / len(v) for v in values_by_dim if v]
        return sum(means) / len(means) if means else None

    return {
        "dimension": dimension, "n": len(pairs),
        "mean_a": macro(_by_dim_values(pairs, 1)), "mean_b": macro(_by_dim_values(pairs, 2)),
        "diff": macro(groups), "ci_lo": lo, "ci_hi": hi, "p_value": p, "exact": exact,
        "wins": sum(d > 0 for d in diffs), "losses": sum(d < 0 for d in diffs), "ties": sum(d == 0 for d in diffs),
    }


def _by_dim_values(pairs, which: int) -> list[list[float]]:
    """The A (``which`` 1) or B (2) scores of ``(question id, a, b, dimension)`` pairs, per dimension."""
    groups: dict[str, list[float]] = {}
    for item in pairs:
        groups.setdefault(item[3], []).append(item[which])
    return list(groups.values())


def paired_comparison(a: dict[str, tuple[str, float | None]], b: dict[str, tuple[str, float | None]],
                      n_boot: int = 2000, n_perm: int = 10000, seed: int = 0) -> dict:
    """The paired comparison of run B against run A (``diff`` = B - A); see the module docstring.
    ``tasks``: one entry per pair ``{question_id, dimension, a, b, diff, outcome}`` (``outcome``:
    ``win`` for B, ``loss`` for B, ``tie``), sorted by dimension then question id; ``only_a`` /
    ``only_b``: question ids scored by one run only (not compared)."""
    tasks, by_dim = [], {}
    for qid in sorted(set(a) & set(b), key=lambda q: (a[q][0], q)):
        (dim, sa), (_dim_b, sb) = a[qid], b[qid]
        if sa is None or sb is None or (isinstance(sa, float) and math.isnan(sa)) or \
                (isinstance(sb, float) and math.isnan(sb)):
            continue
        d = float(sb) - float(sa)
        tasks.append({"question_id": qid, "dimension": dim, "a": float(sa), "b": float(sb), "diff": d,
                      "outcome": "win" if d > 0 else "loss" if d < 0 else "tie"})
        by_dim.setdefault(dim, []).append((qid, float(sa), float(sb), dim))
    dims = [_row(dim, pairs, [[p[2] - p[1] for p in pairs]], n_boot, n_perm, seed)
            for dim, pairs in sorted(by_dim.items())]
    all_pairs = [p for dim in sorted(by_dim) for p in by_dim[dim]]
    overall = _row("overall", all_pairs, [[p[2] - p[1] for p in by_dim[d]] for d in sorted(by_dim)],
                   n_boot, n_perm, seed)
    return {
        "dims": dims, "overall": overall, "tasks": tasks,
        "wins": overall["wins"], "losses": overall["losses"], "ties": overall["ties"],
        "only_a": sorted(set(a) - set(b)), "only_b": sorted(set(b) - set(a)),
        "n_boot": n_boot, "n_perm": n_perm, "seed": seed, "ci_level": CI_LEVEL,
        "test": "paired sign-flip permutation test (Fisher 1935), two-sided, on the mean difference",
        "interval": "paired bootstrap, 95 % percentile interval (Efron & Tibshirani 1993), tasks resampled",
    }
