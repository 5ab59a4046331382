"""Scoring settings: tolerances and the scoring mode.

``dora`` (default) reproduces the official evaluator; ``paper`` applies the simpler operators of
the paper's Table 3 (see :mod:`evaluation.scoring.paper`).
"""
from __future__ import annotations

from kernel.values import FrozenValue

MODES = ("dora", "paper")

TAU_R = 0.2            # relative scalar tolerance
TAU_A = 1.0            # absolute scalar tolerance (dora mode only)
TAU_IOU = 0.5          # polygon IoU gate
TAU_PX = 20.0          # pixel distance gate
TAU_GEO_PX = 20        # geographic gate = TAU_GEO_PX * GSD metres
TAU_GEO_FALLBACK = 20.0  # metres, when the sample has no GSD
METRES_PER_DEGREE = 111_320.0  # scalar_dict lat/lon keys: metres → degrees
EARTH_RADIUS_M = 6_371_000


class ScoringConfig(FrozenValue):
    """Tolerances of one evaluation. ``mode`` is ``"dora"`` or ``"paper"`` (else ``ValueError``).
    Immutable, compared and hashed by value."""

    # a FrozenValue, not a frozen dataclass: start-up (kernel.values)
    __slots__ = ("tau_r", "tau_a", "mode")

    def __init__(self, tau_r: float = TAU_R, tau_a: float = TAU_A, mode: str = "dora"):
        if mode not in MODES:
            raise ValueError(f"mode: {mode!r} is not one of {', '.join(MODES)}")
        self._set(tau_r=tau_r, tau_a=tau_a, mode=mode)

    def geo_threshold_m(self, gsd_m):
        """20·GSD metres, or 20 m when the GSD is unknown or 0 (the evaluator tests truthiness)."""
        return TAU_GEO_PX * gsd_m if gsd_m else TAU_GEO_FALLBACK
