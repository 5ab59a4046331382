"""The paired comparison of two runs on one gold set (evaluation/paired.py), against a hand-worked
example.

Run A and run B on a set with four T1 tasks and two T2 tasks (task scores):

    T1  a = 0,   0.5, 1, 0      b = 0.5, 1, 1, 1      d = b - a = +0.5, +0.5, 0, +1.0   mean +0.5
    T2  a = 1,   1               b = 0,   0.5          d = -1, -0.5                      mean -0.75

Wins for B: 3 (T1), losses 2 (T2), ties 1. Overall (macro mean, as the DORA score): mean A =
(0.375 + 1.0) / 2 = 0.6875, mean B = (0.875 + 0.25) / 2 = 0.5625, diff = (0.5 - 0.75) / 2 = -0.125.

Sign-flip p-values, exact (every assignment):
- T1: the zero's sign does not matter; over the 8 signings of (0.5, 0.5, 1.0) the sums are 2.0 (1),
  1.0 (2), 0 (2), -1.0 (2), -2.0 (1); |sum| >= 2.0 in 2 of 8: p = 0.25.
- T2: sums of (±1, ±0.5): -1.5, -0.5, +0.5, +1.5; |sum| >= 1.5 in 2 of 4: p = 0.5.
- Overall: the T1 mean m1 takes 0.5, 0.25, 0, -0.25, -0.5 with weights 1, 2, 2, 2, 1 (of 8) and the
  T2 mean m2 takes -0.75, -0.25, 0.25, 0.75 (1 each of 4); the statistic |m1 + m2| / 2 reaches the
  observed 0.125 unless m1 + m2 = 0, which happens for (0.25, -0.25) and (-0.25, 0.25): weight
  2 + 2 = 4 of 32, so p = 28 / 32 = 0.875.
A constant difference 0.2 on five tasks: the bootstrap interval is [0.2, 0.2] and only the all-plus
and all-minus signings reach |mean| 0.2: p = 2 / 32 = 0.0625.
"""
from __future__ import annotations

import pytest

from evaluation.paired import EXACT_MAX, paired_comparison, sign_flip_p

A = {"s1_task0": ("t1", 0.0), "s2_task0": ("t1", 0.5), "s3_task0": ("t1", 1.0), "s4_task0": ("t1", 0.0),
     "s5_task0": ("t2", 1.0), "s6_task0": ("t2", 1.0), "only_a_task0": ("t1", 1.0)}
B = {"s1_task0": ("t1", 0.5), "s2_task0": ("t1", 1.0), "s3_task0": ("t1", 1.0), "s4_task0": ("t1", 1.0),
     "s5_task0": ("t2", 0.0), "s6_task0": ("t2", 0.5), "none_task0": ("t2", None)}


def test_paired_comparison_equals_the_hand_worked_example():
    res = paired_comparison(A, B, n_boot=500, seed=1)
    t1, t2 = res["dims"]
    assert (t1["dimension"], t1["n"], t1["mean_a"], t1["mean_b"], t1["diff"]) == ("t1", 4, 0.375, 0.875, 0.5)
    assert (t1["wins"], t1["losses"], t1["ties"], t1["p_value"], t1["exact"]) == (3, 0, 1, 0.25, True)
    assert (t2["n"], t2["mean_a"], t2["mean_b"], t2["diff"], t2["p_value"]) == (2, 1.0, 0.25, -0.75, 0.5)
    o = res["overall"]
    assert (o["n"], o["mean_a"], o["mean_b"], o["diff"], o["p_value"]) == (6, 0.6875, 0.5625, -0.125, 0.875)
    assert (res["wins"], res["losses"], res["ties"]) == (3, 2, 1)
    assert [(t["question_id"], t["outcome"]) for t in res["tasks"]] == [
        ("s1_task0", "win"), ("s2_task0", "win"), ("s3_task0", "tie"), ("s4_task0", "win"),
        ("s5_task0", "loss"), ("s6_task0", "loss")]
    assert res["only_a"] == ["only_a_task0"] and res["only_b"] == ["none_task0"]
    # the bootstrap interval of a mean of resampled differences lies within their range and holds
    # the observed mean; T2's resampled means are -1, -0.75 or -0.5
    assert 0.0 <= t1["ci_lo"] <= 0.5 <= t1["ci_hi"] <= 1.0
    assert -1.0 <= t2["ci_lo"] <= -0.75 <= t2["ci_hi"] <= -0.5
    assert o["ci_lo"] <= -0.125 <= o["ci_hi"]
    assert paired_comparison(A, B, n_boot=500, seed=1) == res  # seeded: the same numbers again


def test_constant_difference_has_a_point_interval_and_p_of_two_signings():
    a = {f"s{i}_task0": ("t3", 0.4) for i in range(5)}
    b = {q: ("t3", 0.6) for q in a}
    row = paired_comparison(a, b, n_boot=200)["dims"][0]
    assert row["diff"] == pytest.approx(0.2) and row["ci_lo"] == pytest.approx(0.2) == row["ci_hi"]
    assert row["p_value"] == 2 / 32 and row["exact"] is True


def test_large_sets_use_random_signings_with_the_plus_one_estimate():
    diffs = [[1.0] * (EXACT_MAX + 4)]  # every signing but all-plus/all-minus is less extreme
    p, exact = sign_flip_p(diffs, n_perm=999, seed=0)
    assert exact is False
    # k random signings reach |mean| 1 (an all-plus or all-minus draw: chance 2 / 2^20), so almost
    # surely k = 0 and p = (0 + 1) / (999 + 1)
    assert p == pytest.approx(1 / 1000)
    assert sign_flip_p([]) == (None, True)
