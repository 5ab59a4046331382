"""QC checks for steps that rely on a benchmark tool behaviour the studio no longer refuses.

The studio's tools return what the benchmark's tools return (``replay/tools/quirks.py``), so
inputs the tools used to refuse by raising (an absent class index, layers in mixed pixel and
geographic frames, georeferencing without a CRS, a multi-band mask, an unknown field, a negative
volume, ...) now give the benchmark's observation. These checks tell the author instead, without
changing the gold: an ``error`` when the step relies on a meaningless value, a ``warning`` when it
relies on a documented quirk.

Each family section contributes its check ids to ``CHECKS`` (id → (severity, meaning)) and a
function over the QC analysis (``annotation.qc._Analysis``: ``a.tool_calls`` lists every
(nested) call as ``(location, ToolInfo, args, scope)``, ``a.layer(value)`` the layer a literal
file names, ``a.describe(value, scope)`` the sources of an argument; ``a.add(check, message,
location)`` records a finding). ``run(a)`` is called by ``annotation.qc`` after the step checks.
"""
from __future__ import annotations

from typing import Any

__all__ = ["CHECKS", "run"]


# ---------------------------------------------------------------------------------------------
# ras.*, mask.*, calc.*, logi.*, tool.*, report.*
# ---------------------------------------------------------------------------------------------
RASTER_AND_LOGIC_CHECKS: dict[str, tuple[str, str]] = {
}


def check_raster_and_logic(a: Any) -> None:
    """Findings for ras.*, mask.*, calc.*, logi.*, tool.* and report.* steps."""


# ---------------------------------------------------------------------------------------------
# vec.*
# ---------------------------------------------------------------------------------------------
VECTOR_CHECKS: dict[str, tuple[str, str]] = {
}


def check_vector(a: Any) -> None:
    """Findings for vec.* steps."""


# ---------------------------------------------------------------------------------------------
# poi.*, vis.*
# ---------------------------------------------------------------------------------------------
POI_AND_VIS_CHECKS: dict[str, tuple[str, str]] = {
}


def check_poi_and_vis(a: Any) -> None:
    """Findings for poi.* and vis.* steps."""


CHECKS: dict[str, tuple[str, str]] = {**RASTER_AND_LOGIC_CHECKS, **VECTOR_CHECKS, **POI_AND_VIS_CHECKS}


def run(a: Any) -> None:
    """Every tool-parity check over one QC analysis (see the module docstring)."""
    check_raster_and_logic(a)
    check_vector(a)
    check_poi_and_vis(a)
