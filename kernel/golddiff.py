"""Gold diffs: the one format for "what changed in a gold trajectory" (pure, no Django).

Three places compared two trajectories, each in its own format: a replay against the accepted
gold (``replay.selectors.replay_diff``), a replay against the observations recorded in a task
file (``replay.selectors.recorded_diff``) and two releases (``releases.selectors.
release_diff``). All three now give the same rows::

    {"index": i, "call": "<tool name>", "state": "same" | "filled" | "changed" | "added" | "removed",
     "changes": [{"path": "(call/args)" | "<leaf path of the observation>", "before": …, "after": …}]}

``filled``: the earlier side did not record the step's observation (blank: ``{}``, ``null`` or no
``obs`` key, :func:`is_blank_obs`; how a benchmark task file is authored before its gold is
replayed) and the later side has one, with the same call and arguments: the replay filled it in,
nothing that was recorded changed. Its ``changes`` list the filled leaves (``before`` None). A
recorded observation that differs is ``changed``, never ``filled``; a recorded one replayed as
blank is ``changed`` too. :data:`DIFFERS` are the states that mean "the two sides disagree".

Steps are matched by position (the caller collapses loop expansions first). A step whose call or
arguments differ (by ``equal``) gets one ``(call/args)`` change with both ``{call, args}``; its observation is
compared leaf by leaf (:func:`leaves`: ``results[0].count``, ``mask_path``), at most ``limit``
changes a step. ``equal`` decides whether two leaves are the same (exact by default; the recorded
diff passes a relative tolerance), ``skip`` drops leaf paths (the recorded diff skips file names).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: the stand-in of a leaf that one side does not have
ABSENT = "<absent>"
#: lists longer than this are compared as one value
MAX_LIST_LEAVES = 200
#: every state a row can have, in the order pages list them (the recorded diff adds ``source``:
#: ``replay.selectors.recorded_diff``)
STATES = ("same", "filled", "changed", "added", "removed")
#: the states where the two sides disagree (``filled`` and ``same`` do not)
DIFFERS = ("changed", "added", "removed")


def is_blank_obs(value: Any) -> bool:
    """Whether a recorded observation is blank, i.e. not recorded: ``None`` (``null`` or a missing
    ``obs`` key) or an empty dict ``{}``. An empty list is an observation (a loop over nothing)."""
    return value is None or (isinstance(value, dict) and not value)


def leaves(value: Any, prefix: str = "") -> dict[str, Any]:
    """``{leaf path: value}`` of a JSON value: ``{"a": {"b": [1, 2]}}`` → ``{"a.b[0]": 1, "a.b[1]": 2}``
    (keys in order; empty containers and lists over :data:`MAX_LIST_LEAVES` items are leaves)."""
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for k in sorted(value, key=str):
            out.update(leaves(value[k], f"{prefix}.{k}" if prefix else str(k)))
        return out
    if isinstance(value, list) and value and len(value) <= MAX_LIST_LEAVES:
        out = {}
        for i, v in enumerate(value):
            out.update(leaves(v, f"{prefix}[{i}]"))
        return out
    return {prefix: value}


def leaf_changes(before: Any, after: Any, *, equal: Callable[[Any, Any], bool] | None = None,
                 skip: Callable[[str], bool] | None = None, limit: int = 50) -> list[dict]:
    """``[{path, before, after}]`` for the leaves that differ (path ``"(value)"`` for a scalar;
    a missing leaf is None in the row), in path order, at most ``limit``."""
    a, b = leaves(before), leaves(after)
    same = equal or (lambda x, y: x == y)
    out = []
    for path in sorted(set(a) | set(b)):
        if skip is not None and skip(path):
            continue
        x, y = a.get(path, ABSENT), b.get(path, ABSENT)
        if (x is ABSENT) != (y is ABSENT) or not same(x, y):
            out.append({"path": path or "(value)", "before": a.get(path), "after": b.get(path)})
            if len(out) >= limit:
                break
    return out


def step_diff(before: list, after: list, *, calls: bool = True, equal: Callable[[Any, Any], bool] | None = None,
              skip: Callable[[str], bool] | None = None, call_name: Callable[[Any], str] = str,
              limit: int = 50) -> list[dict]:
    """The rows of the module docstring for two lists of steps (``{call, args, obs}`` dicts;
    anything else is no step). ``calls=False`` compares observations only (the recorded diff:
    the task file and the replay name the same calls). ``call_name`` turns a step's ``call`` into
    the row's ``call`` (the recorded diff strips a paper-style ``tool(args)``)."""
    before = before if isinstance(before, list) else []
    after = after if isinstance(after, list) else []
    rows = []
    for i in range(max(len(before), len(after))):
        b = before[i] if i < len(before) and isinstance(before[i], dict) else None
        a = after[i] if i < len(after) and isinstance(after[i], dict) else None
        call = call_name((a or b or {}).get("call", ""))
        if b is None or a is None:
            rows.append({"index": i, "call": call, "state": "added" if b is None else "removed", "changes": []})
            continue
        was_obs, now_obs = b.get("obs"), a.get("obs")
        filled = is_blank_obs(was_obs) and not is_blank_obs(now_obs)
        if filled:
            changes = [{"path": path or "(value)", "before": None, "after": v} for path, v in leaves(now_obs).items()
                       if skip is None or not skip(path)][:limit]
        else:
            changes = leaf_changes(was_obs, now_obs, equal=equal, skip=skip, limit=limit)
        was, now = {"call": b.get("call"), "args": b.get("args")}, {"call": a.get("call"), "args": a.get("args")}
        if calls and not (equal or (lambda x, y: x == y))(was, now):
            changes = [{"path": "(call/args)", "before": was, "after": now}] + changes
            filled = False
        state = "filled" if filled else ("changed" if changes else "same")
        rows.append({"index": i, "call": call, "state": state, "changes": changes})
    return rows


__all__ = ["ABSENT", "DIFFERS", "STATES", "is_blank_obs", "leaves", "leaf_changes", "step_diff"]
