"""The benchmark's symbolic references in trajectory arguments (dora-format.md §b).

Forms, each matched against a WHOLE string value after trimming, case-insensitively (no
interpolation inside longer strings):

1. ``<key> from trajectory[N].obs`` — ``key`` of the obs of step N (0-based) of the trajectory.
   When that obs is a list (the bare output of a ``return_all`` loop) the only usable key is
   ``results``, which gives the whole list. Whitespace is required around ``from`` (the
   evaluator's pattern).
2. ``<key> from step[N].obs`` — inside ``tool.loop``'s ``calls``: the obs of the N-th call of
   the current iteration.
3. ``<item.a.b>`` — nested lookup on the current loop item (``<item.properties.pixel_row>``).
4. ``bind`` — {arg_name: item_key}: applied only when ``arg_name`` already appears in the
   call's args; the value is the item's top-level ``item_key``, or, when ``item_key`` is itself a
   form-1 reference, the value it resolves to.

Substitution recurses through lists and dicts. A reference that cannot be resolved (index out of
range, key absent, value null) stays the literal string; callers that need every reference
resolved use ``unresolved_references``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, NamedTuple

__all__ = [
    "TRAJECTORY_REF", "STEP_REF", "ITEM_REF", "Reference", "FoundReference", "parse_reference",
    "get_obs_value", "resolve_value", "resolve_args", "apply_bind", "find_references",
    "find_all_references", "unresolved_references", "format_path", "LOOP_OVER_REF", "loop_over_reference",
]

TRAJECTORY_REF = re.compile(r"<(\w+)>\s+from\s+trajectory\[(\d+)\]\.obs", re.IGNORECASE)
STEP_REF = re.compile(r"<(\w+)>\s+from\s+step\[(\d+)\]\.obs", re.IGNORECASE)
ITEM_REF = re.compile(r"<item\.([\w.]+)>", re.IGNORECASE)

_MISSING = object()


@dataclass(frozen=True)
class Reference:
    kind: str  # "trajectory" | "step" | "item"
    key: str  # obs key, or the dotted item path
    index: int | None  # step index for trajectory/step references
    text: str  # the original string

    @property
    def item_path(self) -> list[str]:
        return self.key.split(".") if self.kind == "item" else []


class FoundReference(NamedTuple):
    path: tuple  # keys / list indices from the top of args, e.g. ("calls", 0, "args", "mask_path")
    key: str
    step_index: int


def parse_reference(value: Any) -> Reference | None:
    """The reference a string value stands for, or None."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    m = TRAJECTORY_REF.fullmatch(text)
    if m:
        return Reference("trajectory", m.group(1), int(m.group(2)), value)
    m = STEP_REF.fullmatch(text)
    if m:
        return Reference("step", m.group(1), int(m.group(2)), value)
    m = ITEM_REF.fullmatch(text)
    if m:
        return Reference("item", m.group(1), None, value)
    return None


def _obs_of(step: Any) -> Any:
    if isinstance(step, dict) and "obs" in step:
        return step["obs"]
    return _MISSING


def get_obs_value(obs: Any, key: str) -> Any:
    """``key`` of an observation; a list obs only answers ``results`` (the whole list).
    Returns ``None`` when absent."""
    if isinstance(obs, list):
        return obs if key == "results" else None
    if isinstance(obs, dict):
        return obs.get(key)
    return None


def _nested(obj: Any, keys: list[str]) -> Any:
    cur = obj
    for k in keys:
        if isinstance(cur, dict):
            if k in cur:
                cur = cur[k]
                continue
            return None
        if isinstance(cur, list) and k.isdigit() and int(k) < len(cur):
            cur = cur[int(k)]
            continue
        return None
    return cur


def _resolve_ref(ref: Reference, trajectory, steps, item) -> Any:
    """Value of one reference, or ``_MISSING``."""
    if ref.kind in ("trajectory", "step"):
        seq = trajectory if ref.kind == "trajectory" else steps
        if seq is None or not 0 <= ref.index < len(seq):
            return _MISSING
        obs = _obs_of(seq[ref.index])
        if obs is _MISSING:
            return _MISSING
        v = get_obs_value(obs, ref.key)
        return _MISSING if v is None else v
    if ref.kind == "item":
        if not isinstance(item, dict):
            return _MISSING
        v = _nested(item, ref.item_path)
        return _MISSING if v is None else v
    return _MISSING  # pragma: no cover


def resolve_value(value: Any, *, trajectory: list | None = None, steps: list | None = None,
                  item: Any = None, kinds: tuple[str, ...] = ("trajectory", "step", "item")) -> Any:
    """``value`` with every resolvable reference replaced (recursively through lists and
    dicts). ``trajectory`` / ``steps`` are lists of ``{..., "obs": ...}``; ``kinds`` limits
    which reference forms are substituted. Unresolvable references stay literal."""
    if isinstance(value, list):
        return [resolve_value(v, trajectory=trajectory, steps=steps, item=item, kinds=kinds)
                for v in value]
    if isinstance(value, dict):
        return {k: resolve_value(v, trajectory=trajectory, steps=steps, item=item, kinds=kinds)
                for k, v in value.items()}
    ref = parse_reference(value)
    if ref is None or ref.kind not in kinds:
        return value
    got = _resolve_ref(ref, trajectory, steps, item)
    return value if got is _MISSING else got


def resolve_args(args: dict, *, trajectory: list | None = None, steps: list | None = None,
                 item: Any = None) -> dict:
    """``resolve_value`` for an args dict (returns a new dict)."""
    return resolve_value(dict(args or {}), trajectory=trajectory, steps=steps, item=item)


def apply_bind(args: dict, bind: dict | None, item: Any, trajectory: list | None = None) -> dict:
    """Apply a ``tool.loop`` ``bind`` mapping to one call's args (new dict).

    Only arg names already present in ``args`` are bound. The value is ``item[item_key]``, or,
    when ``item_key`` is a trajectory reference, its resolved value (left unchanged when it does
    not resolve).
    """
    out = dict(args or {})
    for arg_name, item_key in (bind or {}).items():
        if arg_name not in out:
            continue
        ref = parse_reference(item_key)
        if ref is not None and ref.kind == "trajectory":
            got = _resolve_ref(ref, trajectory, None, None)
            out[arg_name] = item_key if got is _MISSING else got
        elif isinstance(item, dict) and isinstance(item_key, str) and item_key in item:
            out[arg_name] = item[item_key]
    return out


def _walk(value: Any, path: tuple):
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _walk(v, path + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _walk(v, path + (i,))
    else:
        ref = parse_reference(value)
        if ref is not None:
            yield path, ref


def find_all_references(args: Any) -> list[tuple[tuple, Reference]]:
    """Every reference (any form) in ``args`` with its path."""
    return list(_walk(args, ()))


def find_references(args: Any) -> list[FoundReference]:
    """Trajectory references in ``args`` (for QC): ``(path_in_args, key, step_index)``; the
    path is a tuple of dict keys and list indices, e.g. ``("calls", 0, "args", "mask_path")``
    (``format_path`` renders it as ``calls[0].args.mask_path``). References inside a
    ``tool.loop`` ``bind`` value are included."""
    return [FoundReference(p, r.key, r.index) for p, r in _walk(args, ()) if r.kind == "trajectory"]


def unresolved_references(value: Any, kinds: tuple[str, ...] = ("trajectory", "step", "item")
                          ) -> list[tuple[tuple, Reference]]:
    """References still present in (already resolved) ``value``."""
    return [(p, r) for p, r in _walk(value, ()) if r.kind in kinds]


def format_path(path: tuple) -> str:
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


#: how ``analysis.py:tool_loop`` reads a string ``loop_over`` as a reference: whitespace around
#: ``from`` optional (``\s*``), unlike the task files' reference syntax (this module's,
#: ``\s+``, as the evaluator's ParAcc reads it); so ``"<k>from trajectory[0].obs"`` is a reference here
LOOP_OVER_REF = re.compile(r"<(\w+)>\s*from\s*trajectory\[(\d+)\]\.obs", re.IGNORECASE)


def loop_over_reference(value: Any) -> tuple[str, int] | None:
    """``(key, step index)`` when a string ``loop_over`` is a trajectory reference as the
    benchmark's tool_loop reads one (:data:`LOOP_OVER_REF`), else None."""
    match = LOOP_OVER_REF.fullmatch(value.strip()) if isinstance(value, str) else None
    return (match.group(1), int(match.group(2))) if match else None
