"""Replay engine: run a symbolic gold trajectory and fill in its observations.

``run_trajectory(steps, ctx)`` takes ``[{"call": name, "args": {...}}, ...]`` (``name``/
``inputs`` are accepted too, as the benchmark does), and for each step resolves the references
of dora-format.md §b against the observations so far, calls the tool, and records a
``StepResult``. The first failure stops the run; later steps are ``skipped``.

``filled_trajectory`` keeps the args symbolic, exactly as the author wrote them, with the obs
filled in, which is the form the benchmark's gold trajectories take. Artifacts are named by file
name relative to the work dir, so two runs of the same steps in two work dirs give the same
filled trajectory and the same ``replay_hash``.

``tool.loop`` steps are handed the trajectory so far (its ``trajectory`` argument), and resolve
their own ``<item...>``, ``step[N]`` and ``trajectory[N]`` references per iteration.
"""
from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from .references import (format_path, get_obs_value, parse_reference, resolve_value,
                         unresolved_references)
from .tools.base import ToolContext, ToolError, UnknownToolError, canonical_json, jsonable
from .tools.registry import call_tool, get_tool

__all__ = ["StepResult", "ReplayResult", "run_trajectory", "fill_answer", "replay_hash",
           "step_call", "step_args"]

LOOP_TOOL = "tool.loop"


@dataclass
class StepResult:
    index: int
    call: str
    status: str  # "succeeded" | "failed" | "skipped"
    args: dict
    resolved_args: dict | None = None
    obs: Any = None
    error: str | None = None
    error_detail: dict | None = None
    duration_ms: int = 0
    artifacts: list[dict] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"index": self.index, "call": self.call, "status": self.status,
                "args": self.args, "resolved_args": self.resolved_args, "obs": self.obs,
                "error": self.error, "error_detail": self.error_detail,
                "duration_ms": self.duration_ms, "artifacts": self.artifacts}


@dataclass
class ReplayResult:
    steps: list[StepResult]
    filled_trajectory: list[dict]

    @property
    def ok(self) -> bool:
        return all(s.status == "succeeded" for s in self.steps)

    @property
    def failed_step(self) -> StepResult | None:
        return next((s for s in self.steps if s.status == "failed"), None)

    @property
    def error(self) -> str | None:
        f = self.failed_step
        return f.error if f else None


def step_call(step: dict) -> str:
    """The tool name of a step (``call`` or ``name``; text from the first ``(`` on dropped)."""
    name = step.get("call", step.get("name"))
    if not isinstance(name, str):
        return ""
    return name.split("(", 1)[0].strip()


def step_args(step: dict) -> dict:
    args = step.get("args", step.get("inputs"))
    return dict(args) if isinstance(args, dict) else ({} if args is None else args)


def _artifacts(obs: Any, ctx: ToolContext, args: Any = None) -> list[dict]:
    """Top-level obs values that name a file in the work dir, except echoes of the inputs."""
    if not isinstance(obs, dict):
        return []
    inputs = {v for v in (args or {}).values() if isinstance(v, str)} \
        if isinstance(args, dict) else set()
    out = []
    root = ctx.work_dir.resolve()
    for key, value in obs.items():
        if isinstance(value, str) and value and value not in inputs and "/" not in value \
                and "\\" not in value:
            p = root / value
            if p.is_file():
                out.append({"key": key, "name": value})
    return out


def _reference_problem(ref, trajectory: list[dict], index: int) -> str:
    if ref.kind != "trajectory":
        return (f"reference {ref.text!r} is only meaningful inside tool.loop calls")
    if ref.index >= index:
        return (f"reference {ref.text!r} points to step {ref.index}, which does not run before "
                f"step {index} (references must point to earlier steps)")
    obs = trajectory[ref.index].get("obs")
    if isinstance(obs, list):
        return (f"reference {ref.text!r}: step {ref.index} returned a list, whose only key is "
                f"'results'")
    keys = sorted(obs) if isinstance(obs, dict) else []
    if isinstance(obs, dict) and ref.key in obs and obs[ref.key] is None:
        return f"reference {ref.text!r}: '{ref.key}' of step {ref.index} is null"
    return f"reference {ref.text!r}: step {ref.index} has no '{ref.key}' (its keys: {keys})"


def _format_error(index: int, call: str, exc: BaseException) -> str:
    if isinstance(exc, ToolError):
        parts = [f"step {index} ({exc.tool or call})"]
        if exc.argument:
            parts.append(f"argument '{exc.argument}'")
        text = ", ".join(parts) + f": {exc.message}"
        if exc.expected:
            text += f" (expected: {exc.expected})"
        return text
    return f"step {index} ({call}): {type(exc).__name__}: {exc}"


def run_trajectory(steps: list[dict], ctx: ToolContext,
                   on_step: Callable[[StepResult], None] | None = None) -> ReplayResult:
    """Replay ``steps`` in ``ctx``; see the module docstring."""
    results: list[StepResult] = []
    filled: list[dict] = []
    failed = False
    for index, step in enumerate(steps):
        raw_call = step.get("call", step.get("name")) if isinstance(step, dict) else None
        args = step_args(step) if isinstance(step, dict) else {}
        call = step_call(step) if isinstance(step, dict) else ""
        if failed:
            res = StepResult(index=index, call=call, status="skipped", args=args)
            results.append(res)
            filled.append({"call": raw_call if raw_call is not None else call, "args": args,
                           "obs": None})
            if on_step:
                on_step(res)
            continue
        t0 = time.perf_counter()
        res = StepResult(index=index, call=call, status="failed", args=args)
        try:
            if not isinstance(step, dict):
                raise ToolError(f"step is {type(step).__name__}, not an object")
            if not isinstance(args, dict):
                raise ToolError("args are not an object", argument="args")
            spec = get_tool(call) if call else None
            if spec is None:
                raise UnknownToolError("step names no tool", expected="a 'call' field")
            res.call = spec.name
            if spec.name == LOOP_TOOL:
                resolved = dict(args)
                problems = [(p, r) for p, r in unresolved_references(resolved, ("trajectory",))
                            if resolve_value(r.text, trajectory=filled) == r.text]
                if problems:
                    path, ref = problems[0]
                    raise ToolError(_reference_problem(ref, filled, index),
                                    argument=format_path(path))
                call_args = dict(resolved)
                call_args["trajectory"] = [{"call": f["call"], "obs": f["obs"]} for f in filled]
            else:
                resolved = resolve_value(args, trajectory=filled)
                left = unresolved_references(resolved)
                if left:
                    path, ref = left[0]
                    raise ToolError(_reference_problem(ref, filled, index),
                                    argument=format_path(path))
                call_args = resolved
            res.resolved_args = jsonable(resolved)
            obs = call_tool(spec.name, call_args, ctx)
            res.obs = obs
            res.status = "succeeded"
            res.artifacts = _artifacts(obs, ctx, resolved)
        except ToolError as exc:
            if exc.tool is None and res.call:
                exc.tool = res.call
            res.error = _format_error(index, res.call or call, exc)
            res.error_detail = exc.to_dict()
        except Exception as exc:  # a bug, not an input problem: still a readable failure
            res.error = _format_error(index, res.call or call, exc)
            res.error_detail = {"type": type(exc).__name__, "message": str(exc)}
        res.duration_ms = int(round((time.perf_counter() - t0) * 1000))
        if res.status == "failed":
            failed = True
        results.append(res)
        filled.append({"call": raw_call if raw_call is not None else call, "args": args,
                       "obs": res.obs})
        if on_step:
            on_step(res)
    return ReplayResult(steps=results, filled_trajectory=filled)


def fill_answer(answer_spec: list[dict], filled_trajectory: list[dict]) -> dict:
    """Final answer from ``[{"name", "source"}, ...]``.

    ``source`` is a reference string (``<key> from trajectory[N].obs``) resolved against the
    filled trajectory, or a literal value (kept as is). A reference that does not resolve
    raises ``ToolError`` naming the field.
    """
    answer: dict[str, Any] = {}
    for i, fieldspec in enumerate(answer_spec or []):
        name = fieldspec.get("name")
        if not isinstance(name, str) or not name:
            raise ToolError(f"answer field {i} has no name", argument="answer_spec")
        source = fieldspec.get("source")
        ref = parse_reference(source)
        if ref is None:
            answer[name] = source
            continue
        if ref.kind != "trajectory":
            raise ToolError(f"answer field '{name}': {ref.text!r} is not a trajectory reference",
                            argument=name)
        value = resolve_value(source, trajectory=filled_trajectory)
        if value == source and parse_reference(value) is not None:
            if ref.index >= len(filled_trajectory):
                raise ToolError(f"answer field '{name}': {ref.text!r} points past the last step "
                                f"({len(filled_trajectory) - 1})", argument=name)
            obs = filled_trajectory[ref.index].get("obs")
            keys = sorted(obs) if isinstance(obs, dict) else []
            got = get_obs_value(obs, ref.key)
            raise ToolError(f"answer field '{name}': step {ref.index} has no '{ref.key}'"
                            + (" (it is null)" if got is None and ref.key in keys else
                               f" (its keys: {keys})"), argument=name)
        answer[name] = value
    return answer


def replay_hash(filled_trajectory: list[dict], final_answer: Any) -> str:
    """SHA-256 of the canonical JSON (sorted keys, no whitespace) of trajectory + answer."""
    payload = {"trajectory": filled_trajectory, "final_answer": final_answer}
    return hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()
