"""Property tests (hypothesis) of the answer operators: bounds, symmetry where the rule is
symmetric, identity (gold against itself scores 1), invariance under key order, and the
evaluator's tolerance rule |p − g| ≤ τa + τr·|g| (scoring.md) checked at its boundary.

Symmetry holds for exact match, set F1 and the pixel/haversine point distances; it does NOT hold
for the scalar rule (the tolerance scales with |gold|) nor for scalar_dict (gold keys only), so
those are tested for bounds and identity only.
"""
from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from evaluation.scoring.operators import (
    score_answer,
    score_exact,
    score_point_field,
    score_ranking_kendall,
    score_scalar,
    score_scalar_dict,
    score_set_f1,
)

SETTINGS = settings(max_examples=150, deadline=None)
finite = st.floats(min_value=-1e9, max_value=1e9, allow_nan=False, allow_infinity=False)
words = st.text(alphabet="abcdefgh ,-_", min_size=0, max_size=12)
scalars = st.one_of(finite, st.integers(-10**6, 10**6), words, st.booleans(), st.none())


def _unit(x: float) -> bool:
    return 0.0 <= x <= 1.0


@SETTINGS
@given(p=scalars, g=scalars)
def test_scalar_is_zero_or_one_and_gold_matches_itself(p, g):
    assert score_scalar(p, g) in (0.0, 1.0)
    assert score_scalar(g, g) == 1.0


@SETTINGS
@given(g=finite, k=st.floats(min_value=0.0, max_value=0.999))
def test_scalar_tolerance_boundary(g, k):
    # inside the band |p − g| ≤ 1.0 + 0.2·|g| (scoring.md, the official defaults) passes
    tol = 1.0 + 0.2 * abs(g)
    assert score_scalar(g + k * tol, g) == 1.0
    # well outside it fails
    assert score_scalar(g + 1.01 * tol + 1.0, g) == 0.0


@SETTINGS
@given(p=scalars, g=scalars)
def test_exact_match_is_symmetric_and_binary(p, g):
    assert score_exact(p, g) == score_exact(g, p)
    assert score_exact(p, g) in (0.0, 1.0)


@SETTINGS
@given(p=st.lists(words, max_size=6), g=st.lists(words, max_size=6))
def test_set_f1_bounds_symmetry_and_order(p, g):
    s = score_set_f1(p, g)
    assert _unit(s)
    assert s == score_set_f1(g, p)
    assert score_set_f1(list(reversed(p)), g) == s
    assert score_set_f1(g, g) == 1.0


@SETTINGS
@given(g=st.lists(st.integers(0, 50), min_size=0, max_size=8, unique=True), data=st.data())
def test_kendall_bounds_identity_and_reversal(g, data):
    p = data.draw(st.permutations(g))
    assert _unit(score_ranking_kendall(p, g))
    assert score_ranking_kendall(g, g) == 1.0
    if len(g) >= 2:
        # the reversed ranking is fully discordant: τ = −1 → (τ + 1)/2 = 0
        assert score_ranking_kendall(list(reversed(g)), g) == 0.0


keys = st.sampled_from(["t1", "t2", "phase_3", "area_km2", "count", "name_id"])


@SETTINGS
@given(g=st.dictionaries(keys, finite, max_size=5), p=st.dictionaries(keys, finite, max_size=5))
def test_scalar_dict_bounds_identity_and_key_order(g, p):
    s = score_scalar_dict(p, g)
    assert _unit(s)
    if g:
        assert score_scalar_dict(g, g) == 1.0
    reordered = dict(reversed(list(p.items())))
    assert score_scalar_dict(reordered, g) == s


@SETTINGS
@given(a=st.tuples(st.floats(0, 2000), st.floats(0, 2000)), b=st.tuples(st.floats(0, 2000), st.floats(0, 2000)))
def test_pixel_points_symmetric_with_a_20_px_radius(a, b):
    s = score_point_field(list(a), list(b), "point_pixel")
    assert s == score_point_field(list(b), list(a), "point_pixel")
    assert s == (1.0 if math.dist(a, b) <= 20 else 0.0) or abs(math.dist(a, b) - 20) < 1e-9


@SETTINGS
@given(answer=st.dictionaries(st.sampled_from(["n", "share_pct", "label", "items"]),
                              st.one_of(finite, words, st.lists(words, max_size=3)), min_size=1, max_size=4))
def test_task_score_of_gold_against_itself_is_one_whatever_the_key_order(answer):
    spec_of = {"n": "scalar_count", "share_pct": "ratio_pct", "label": "exact_match", "items": "set_f1"}
    spec = {k: spec_of[k] for k in answer}
    score, fields = score_answer(answer, answer, spec)
    assert score == 1.0 and set(fields) == set(spec)
    shuffled = dict(reversed(list(answer.items())))
    assert score_answer(shuffled, answer, dict(reversed(list(spec.items()))))[1] == fields
