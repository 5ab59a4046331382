"""Hygiene checks: every step's output is used and every manifest layer is read.

A step is used when a later step or an answer source refers to it; in a task file, whose
answers are literal values, a step whose observation holds an answer value counts as feeding the
answer, and when some value cannot be traced no step is called unused.
"""
from __future__ import annotations

import math
from typing import Any

from kernel.inputs import input_entries
from kernel.references import find_all_references

from .gold import is_nan
from .layers import basename, is_file_string
from .plan import Analysis
from .registry import declare

__all__ = ["CHECKS", "check_hygiene"]

#: the checks of this concern: id → (severity, meaning)
CHECKS: dict[str, tuple[str, str]] = declare("hygiene", {
    "hygiene.unused_step": ("warning", "nothing uses the step's output"),
    "hygiene.unused_layer": ("warning", "a manifest layer no step uses"),
})


def check_hygiene(a: Analysis, replay_trajectory: list | None = None):
    """``hygiene.*``: steps whose output nothing uses and manifest layers no step reads (see the
    module docstring); ``replay_trajectory`` gives the observations a task file's literal answers
    are traced through."""
    n = len(a.steps)
    used = set(a.refs_to)
    fields = a.answer_fields()
    answer_refs = any(find_all_references(f.get("source")) for f in fields if isinstance(f, dict))
    if not answer_refs and n:
        # answers are literal values (a task file): trace them through the observations; when
        # a value cannot be traced, no leaf step can be called unused
        values = [f.get("source") for f in fields if isinstance(f, dict)]
        traj = replay_trajectory if replay_trajectory else a.steps
        untraced = 0
        for v in values:
            hit = [i for i, st in enumerate(traj[:n]) if isinstance(st, dict) and st.get("obs") is not None
                   and not is_nan(v) and _holds(st.get("obs"), v)]
            used.update(hit)
            untraced += not hit
        if untraced or not values:
            used.update(range(n))
    for i, out in enumerate(a.outs):
        if out is None or out.info is None or i in used:
            continue
        a.add("hygiene.unused_step", f"Step {i} ({out.info.name}): nothing uses its output (no later step or answer field refers to trajectory[{i}]); remove it or refer to it.", f"trajectory[{i}]")
    used_files = a.used_files()
    for loc, path, _entry in input_entries(a.content.get("input_data") or {}):
        if basename(path) not in used_files:
            a.add("hygiene.unused_layer", f"{loc} ('{basename(path)}') is in the manifest but no step uses it; remove it or use it (the agent sees every manifest layer).", loc)


def _holds(obs: Any, value: Any, depth: int = 0) -> bool:
    """Whether an observation holds ``value`` (numbers to 1e-9, path strings by base name)."""
    if _same(obs, value):
        return True
    if depth > 3:
        return False
    if isinstance(obs, dict):
        return any(_holds(v, value, depth + 1) for v in obs.values())
    if isinstance(obs, list):
        return any(_holds(v, value, depth + 1) for v in obs[:200])
    return False


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
    if isinstance(a, str) and isinstance(b, str):
        return a == b or (is_file_string(a) and is_file_string(b) and basename(a) == basename(b))
    return a == b and a is not None
