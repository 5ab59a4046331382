"""The QC suite: which checks run on a task, in which order, and the list of every check.

``check_task`` runs the fast passes (on every save), ``full_qc`` adds those that need the data
root, a replay or saved sources. The order of the passes is the order of the findings within a
severity (errors first: ``annotation.qc.registry.sort_findings``); it is part of the suite's
contract (``tests/test_qc.py`` and the corpus pin it). :data:`CHECKS` lists every check of every
concern, in the order the docs and pages list them.
"""
from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from .answers import ALIGNMENT_CHECKS, EVAL_SPEC_CHECKS, check_alignment, check_eval_spec
from .derived import CHECKS as DERIVED_CHECKS
from .derived import check_derived
from .gold import CHECKS as GOLD_CHECKS
from .gold import check_determinism, check_sanity
from .hygiene import CHECKS as HYGIENE_CHECKS
from .hygiene import check_hygiene
from .manifest import CHECKS as MANIFEST_CHECKS
from .manifest import check_manifest
from .plan import Analysis
from .references import CHECKS as REFERENCE_CHECKS
from .references import check_malformed_references
from .registry import Check, Finding, registered, sort_findings
from .release import CHECKS as RELEASE_CHECKS
from .steps import CHECKS as STEP_CHECKS
from .steps import check_steps
from .structure import CHECKS as STRUCTURE_CHECKS
from .structure import check_structure
from .tool_info import known_tool_names
from .tool_parity import CHECKS as TOOL_PARITY_CHECKS
from .tool_parity import run as check_tool_parity
from .variants import CHECKS as VARIANT_CHECKS
from .variants import run as check_variants

__all__ = ["CHECKS", "checks", "check_task", "full_qc", "used_layer_files"]

#: every check id → (severity, meaning), concern by concern in the suite's order: structure, tools,
#: references, manifest and classes, eval spec, numerical sanity and determinism, alignment,
#: hygiene, derived values, release level, tool parity (``tool_parity``), robustness variants
CHECKS: dict[str, tuple[str, str]] = {
    **STRUCTURE_CHECKS, **STEP_CHECKS, **REFERENCE_CHECKS, **MANIFEST_CHECKS, **EVAL_SPEC_CHECKS, **GOLD_CHECKS,
    **ALIGNMENT_CHECKS, **HYGIENE_CHECKS, **DERIVED_CHECKS, **RELEASE_CHECKS, **TOOL_PARITY_CHECKS, **VARIANT_CHECKS,
}


def checks() -> list[Check]:
    """Every check as the registry declares it (id, severity, meaning, concern), in the order of
    :data:`CHECKS`: what a page or a document lists."""
    declared = registered()
    return [declared[check_id] for check_id in CHECKS]


def _analyse(content: dict, layers: dict | None, replay: dict | None = None) -> Analysis:
    """The fast passes over ``content``, in order (the order of their findings)."""
    a = Analysis(content, layers)
    check_structure(a)
    check_steps(a)
    check_malformed_references(a)
    check_tool_parity(a)
    check_variants(a, replay, frozenset(known_tool_names()))
    check_eval_spec(a, replay.get("final_answer") if isinstance(replay, dict) else None)
    check_alignment(a)
    check_hygiene(a, (replay or {}).get("trajectory") if isinstance(replay, dict) else None)
    return a


def check_task(content: dict, *, layers: dict | None = None) -> list[Finding]:
    """The fast checks (structure, tools, references, classes, eval-spec, alignment, hygiene).

    ``content`` holds ``question``, ``trajectory`` ([{call, args}]), ``answer_spec`` ([{name,
    eval_type, source, answer_format}]), ``input_data``, ``classes``; ``final_answer`` optionally.
    ``layers`` (file name → LayerInfo dict) adds the event's class maps. Errors come first.
    """
    return sort_findings(_analyse(content, layers).findings)


def full_qc(content: dict, *, layers: dict | None = None, replay: dict | None = None,
            data_root: str | Path | None = None, replay_hashes: Iterable[str] | None = None,
            polygons: dict | None = None, derived: dict | None = None) -> list[Finding]:
    """Every task-level check: the fast ones plus manifest (with files under ``data_root``),
    numerical sanity on ``replay`` ({trajectory: [{call, args, obs}], final_answer}), polygon
    golds (``polygons``: answer field → GeoJSON dict, or None when its file is missing),
    determinism (``replay_hashes``: the hashes of two replays) and derived values against their
    sources (``derived``: see ``annotation.qc.derived.check_derived``; None on content that has
    no saved sources, e.g. a task file)."""
    a = _analyse(content, layers, replay)
    if derived:
        a.findings.extend(check_derived(content, derived))
    check_manifest(a, data_root)
    if isinstance(replay, dict):
        check_sanity(a, replay, polygons)
    elif polygons:
        check_sanity(a, {"trajectory": [], "final_answer": {}}, polygons)
    hashes = [h for h in (replay_hashes or []) if h]
    if len(hashes) >= 2:
        a.findings.extend(check_determinism(hashes[0], hashes[1]))
    return sort_findings(a.findings)


def used_layer_files(content: dict) -> set[str]:
    """File names (base names) the task's steps use literally."""
    a = Analysis(content, None)
    check_steps(a)
    return a.used_files()
