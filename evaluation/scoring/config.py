"""Scoring settings: tolerances and the scoring mode.

``dora`` (default) reproduces the official evaluator; ``paper`` applies the simpler operators of
the paper's Table 3 (see :mod:`evaluation.scoring.paper`).
"""
from __future__ import annotations

MODES = ("dora", "paper")

TAU_R = 0.2            # relative scalar tolerance
TAU_A = 1.0            # absolute scalar tolerance (dora mode only)
TAU_IOU = 0.5          # polygon IoU gate
TAU_PX = 20.0          # pixel distance gate
TAU_GEO_PX = 20        # geographic gate = TAU_GEO_PX * GSD metres
TAU_GEO_FALLBACK = 20.0  # metres, when the sample has no GSD
METRES_PER_DEGREE = 111_320.0  # scalar_dict lat/lon keys: metres → degrees
EARTH_RADIUS_M = 6_371_000


class ScoringConfig:
    """Tolerances of one evaluation. ``mode`` is ``"dora"`` or ``"paper"`` (else ``ValueError``).
    Immutable, compared and hashed by value."""

    # a plain immutable class, not a frozen dataclass: ``dataclasses`` imports ``inspect``, about
    # 9 ms of the scoring command's start-up (issue 16)
    __slots__ = ("tau_r", "tau_a", "mode")

    def __init__(self, tau_r: float = TAU_R, tau_a: float = TAU_A, mode: str = "dora"):
        if mode not in MODES:
            raise ValueError(f"mode: {mode!r} is not one of {', '.join(MODES)}")
        object.__setattr__(self, "tau_r", tau_r)
        object.__setattr__(self, "tau_a", tau_a)
        object.__setattr__(self, "mode", mode)

    def __setattr__(self, name, value):
        raise AttributeError(f"ScoringConfig is immutable: cannot set {name!r}")

    def __delattr__(self, name):
        raise AttributeError(f"ScoringConfig is immutable: cannot delete {name!r}")

    def __eq__(self, other):
        if type(other) is not ScoringConfig:
            return NotImplemented
        return (self.tau_r, self.tau_a, self.mode) == (other.tau_r, other.tau_a, other.mode)

    def __hash__(self):
        return hash((self.tau_r, self.tau_a, self.mode))

    def __reduce__(self):  # pickle and copy through __init__ (__setattr__ refuses)
        return ScoringConfig, (self.tau_r, self.tau_a, self.mode)

    def __repr__(self):
        return f"ScoringConfig(tau_r={self.tau_r!r}, tau_a={self.tau_a!r}, mode={self.mode!r})"

    def geo_threshold_m(self, gsd_m):
        """20·GSD metres, or 20 m when the GSD is unknown or 0 (the evaluator tests truthiness)."""
        return TAU_GEO_PX * gsd_m if gsd_m else TAU_GEO_FALLBACK
