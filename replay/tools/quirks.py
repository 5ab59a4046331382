"""The benchmark's tool behaviours the studio reproduces on purpose: one list.

The studio's tools return, for every input, the observation the benchmark's own tool servers
return (Junjue-Wang/DORA, ``dora/tools/*.py``), because agents are run with those servers and the
benchmark's gold was filled with them. Where that behaviour is physically wrong or surprising
(a light direction, degrees used as metres, a constant pixel size, a value computed from layers in
two unrelated frames), the studio reproduces it anyway and lists it here, with the benchmark file
and function it follows and the QC check that tells an author a step relies on it.

``QUIRKS`` is read by ``docs/tool-parity.md``'s table and by tests that assert every QC check
named here exists. The sections below are kept apart by tool family.
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Quirk", "QUIRKS", "quirks_of"]


@dataclass(frozen=True)
class Quirk:
    """One deliberate reproduction of the benchmark's behaviour.

    ``tool``: dotted tool name; ``behaviour``: what the benchmark's tool does (and so the studio's);
    ``instead``: what a physically correct tool would do; ``reference``: ``file:function@commit`` of
    the benchmark's code it follows; ``qc_check``: the QC check id that flags a step relying on it
    (``None`` when the quirk changes no gold an author could avoid).
    """

    tool: str
    behaviour: str
    instead: str
    reference: str
    qc_check: str | None = None


# ---------------------------------------------------------------------------------------------
# ras.*, mask.*, calc.*, logi.*, tool.*, report.*
# ---------------------------------------------------------------------------------------------
_RASTER_AND_LOGIC: tuple[Quirk, ...] = (
)


# ---------------------------------------------------------------------------------------------
# vec.*
# ---------------------------------------------------------------------------------------------
_VECTOR: tuple[Quirk, ...] = (
)


# ---------------------------------------------------------------------------------------------
# poi.*, vis.*
# ---------------------------------------------------------------------------------------------
_POI_AND_VIS: tuple[Quirk, ...] = (
)


QUIRKS: tuple[Quirk, ...] = _RASTER_AND_LOGIC + _VECTOR + _POI_AND_VIS


def quirks_of(tool: str) -> list[Quirk]:
    """The quirks of one tool (dotted name), in list order."""
    return [q for q in QUIRKS if q.tool == tool]
