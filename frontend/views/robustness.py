"""Display of the stored robustness outcomes (issue 21): the leaderboard's robustness section.

The numbers come from ``evaluation.selectors.robustness`` (``evaluation.robustness.robustness_table``);
this module only turns them into display strings with the leaderboard's own formatter.
"""
from __future__ import annotations

from collections.abc import Callable

from evaluation.robustness import OUTCOMES


def robustness_section(data: dict, pct: Callable) -> dict:
    """``{outcomes, extraneous, broken, unsolvable}`` for ``leaderboard_robustness.html``: the
    tables of ``evaluation.selectors.robustness.leaderboard_robustness`` (``data``, built with the
    rest of the leaderboard and cached with it) with ``*_pct`` strings made by ``pct`` (the
    leaderboard's percent formatter, ``frontend.views.leaderboard.pct``)."""
    return {
        "outcomes": list(OUTCOMES),
        "extraneous": [{**r, "use_rate_pct": pct(r["use_rate"]), "mean_score_pct": pct(r["mean_score"])}
                       for r in data["extraneous"]],
        "broken": [{**r, "shares_pct": [pct(r["shares"][o]) for o in OUTCOMES], "recovery_pct": pct(r["recovery_rate"])}
                   for r in data["broken"]],
        "unsolvable": [{**r, "pass_pct": pct(r["pass_rate"])} for r in data["unsolvable"]],
        "n_blind": data.get("n_blind", 0),
    }
