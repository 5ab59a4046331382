"""Replay engine: run a symbolic gold trajectory and fill in its observations.

Pure Python (no Django): ``replay.services`` binds it to the database.

``run_trajectory(steps, ctx, on_step=None, cache=None, store=None, fingerprint=None)`` takes the
authored steps ``[{"call": name, "args": {...}}, ...]`` (``name``/``inputs`` are accepted too, as
the benchmark does), and for each step resolves the references of dora-format.md §b against the
observations so far, calls the tool (or takes its result from the step cache), and records a
``StepResult``. The first failure stops the run; later steps are ``skipped``.

Two views of the result
    ``ReplayResult.trajectory`` — the *authored* view: one ``{call, args, obs}`` per authored step,
    args symbolic as written. Answer sources (``fill_answer``) and the studio's QC index into it.

    ``ReplayResult.filled_trajectory`` — the benchmark's stored form: every ``tool.loop`` step is a
    *wrapper* (its symbolic args and its whole output) followed by its expanded per-item calls
    ``{call: <dotted nested tool>, args: <resolved args of that item>, obs}``, in iteration order
    (item 0 call 0, item 0 call 1, ..., item 1 call 0, ...); the evaluator skips the wrappers
    (``_flatten_trajectory`` in dora/evaluation.py). ``<k> from trajectory[N].obs`` references in
    later steps are renumbered to the position of step N in this list, so the file is
    self-consistent. ``collapse_expanded`` turns such a list back into the authored view (it is
    what ``import_tasks`` uses on the benchmark's own files).

``tool.loop`` is executed by the engine through the same plan, iteration and output helpers as
``logical.tool_loop`` (``loop_plan``, ``run_loop_items``, ``loop_output``), with each nested call
going through the engine's cache so that it is visible (expanded steps), cached, and counted
(a test checks the two give the same output).

Step cache and artifact store
    ``step_key`` = SHA-256 of the canonical JSON of (engine cache version, tool name, tool version,
    resolved args, the SHA-256 of every input file the args name, the perception mode and, for
    perception tools, ``fingerprint(tool, args)`` — the GT mask's checksum and class map in GT mode,
    the checkpoint files in model mode). ``cache.get(key)`` returning a ``CachedStep`` (obs plus the
    artifacts it names, by content hash) means the tool is not called: the artifacts are linked
    from the content-addressed ``ArtifactStore`` into the work dir and the stored obs is used.
    Observations name artifacts by bare file name (``ToolContext.output_path`` derives names from
    the inputs' content), so a cached obs is valid in any work dir.

Artifacts are named by file name relative to the work dir, so two runs of the same steps in two
work dirs give the same filled trajectory and the same ``replay_hash``.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from glob import escape as glob_escape
from pathlib import Path
from typing import Any, Protocol

from kernel.steps import step_args as _kernel_step_args
from kernel.steps import step_call  # noqa: F401  (re-exported: kernel.engine.step_call)

from .references import format_path, get_obs_value, parse_reference, resolve_value, unresolved_references
from .tools.base import ToolContext, ToolError, UnknownToolError, canonical_json, file_sha256, jsonable
from .tools.logical import LOOP_TOOL, _loop_items, loop_output, loop_plan, run_loop_items
from .tools.spec import call_tool, get_tool, validate_args

__all__ = ["StepResult", "ReplayResult", "CachedStep", "StepCache", "MemoryStepCache",
           "ArtifactStore", "run_trajectory", "fill_answer", "replay_hash", "step_call", "authored_steps",
           "step_args", "step_key", "collapse_expanded", "renumber_references",
           "ENGINE_CACHE_VERSION", "WRAPPER_TOOLS"]

#: steps the evaluator skips when it builds tool sequences (``_flatten_trajectory``)
WRAPPER_TOOLS = ("tool.loop", "tool.reduce")
#: bump when the engine's notion of a step result changes (invalidates every cache entry)
ENGINE_CACHE_VERSION = 1
_FILE_LIKE = re.compile(r"\.[A-Za-z0-9]{1,8}$")
_TRAJ_INDEX = re.compile(r"(trajectory\[)(\d+)(\])", re.IGNORECASE)


# ============================================================================================
# Results
# ============================================================================================
@dataclass
class StepResult:
    """One authored step. ``expanded``: for ``tool.loop``, the nested calls that ran
    ([{call, args, obs}] in iteration order); ``cached``: the obs came from the step cache (for a
    loop: every nested call did)."""
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
    cached: bool = False
    expanded: list[dict] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"index": self.index, "call": self.call, "status": self.status,
                "args": self.args, "resolved_args": self.resolved_args, "obs": self.obs,
                "error": self.error, "error_detail": self.error_detail,
                "duration_ms": self.duration_ms, "artifacts": self.artifacts,
                "cached": self.cached, "expanded": self.expanded}


@dataclass
class ReplayResult:
    steps: list[StepResult]
    filled_trajectory: list[dict]
    trajectory: list[dict] = field(default_factory=list)
    tool_calls: int = 0
    cache_hits: int = 0
    manifest: dict[str, str] = field(default_factory=dict)  # artifact name -> sha256 (with a store)

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


# ============================================================================================
# Step cache and content-addressed artifacts
# ============================================================================================
@dataclass
class CachedStep:
    """A stored step result: ``obs`` and the artifacts it names ([{name, sha256}])."""
    obs: Any
    artifacts: list[dict]


class StepCache(Protocol):
    def get(self, key: str) -> CachedStep | None: ...

    def put(self, key: str, tool: str, version: int, entry: CachedStep) -> None: ...


class MemoryStepCache:
    """A dict-backed ``StepCache`` (tests, benchmarks of the engine alone)."""

    def __init__(self):
        self.entries: dict[str, CachedStep] = {}

    def get(self, key: str) -> CachedStep | None:
        return self.entries.get(key)

    def put(self, key: str, tool: str, version: int, entry: CachedStep) -> None:
        self.entries[key] = entry


class ArtifactStore:
    """Content-addressed files: ``<root>/<sha256[:2]>/<sha256>``.

    ``put(file)`` hard-links (or copies, across file systems) a file into the store and returns
    its SHA-256; ``materialize(sha, dest)`` links it back under a run's artifact name. Files in
    the store are never modified (a tool writes new files; a same-named output has the same
    inputs and therefore the same bytes).
    """

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)

    def path_for(self, sha: str) -> Path:
        return self.root / sha[:2] / sha

    def has(self, sha: str) -> bool:
        return self.path_for(sha).is_file()

    def put(self, file: str | os.PathLike, sha: str | None = None) -> str:
        src = Path(file)
        sha = sha or file_sha256(src)
        dest = self.path_for(sha)
        if not dest.is_file():
            dest.parent.mkdir(parents=True, exist_ok=True)
            tmp = dest.with_name(f".{sha}.{os.getpid()}.tmp")
            try:
                os.link(src, tmp)
            except OSError:
                shutil.copy2(src, tmp)
            os.replace(tmp, dest)
        return sha

    def materialize(self, sha: str, dest: str | os.PathLike) -> Path:
        dest = Path(dest)
        src = self.path_for(sha)
        if dest.exists():
            try:
                if os.path.samefile(src, dest):
                    return dest
            except OSError:
                pass
            dest.unlink()
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(src, dest)
        except OSError:
            shutil.copy2(src, dest)
        return dest


# ============================================================================================
# Small helpers
# ============================================================================================
def step_args(step: dict) -> dict:
    """The step's arguments (``kernel.steps.step_args``): a dict is copied, a missing one is ``{}``,
    anything else (a list, a string) is returned as written."""
    args = _kernel_step_args(step)
    return dict(args) if isinstance(args, dict) else ({} if args is None else args)


def _artifacts(obs: Any, ctx: ToolContext, args: Any = None, known: dict | None = None) -> list[dict]:
    """Top-level obs values that name a file in the work dir, except echoes of the inputs.
    ``known``: names already seen as work-dir files (the run's artifact manifest), not stat'ed."""
    if not isinstance(obs, dict):
        return []
    inputs = {v for v in (args or {}).values() if isinstance(v, str)} \
        if isinstance(args, dict) else set()
    out = []
    root = os.fspath(ctx.work_dir)  # names are bare (no separators): no resolving needed
    isfile = os.path.isfile
    for key, value in obs.items():
        if isinstance(value, str) and value and value not in inputs and "/" not in value \
                and "\\" not in value:
            if (known is not None and value in known) or isfile(os.path.join(root, value)):
                out.append({"key": key, "name": value})
    return out


def _strings(value: Any, out: list[str] | None = None) -> list[str]:
    """Every string in ``value`` (dict values, list and tuple items, any depth), depth first in
    order. Numbers and other leaves are skipped in the loop, without a call each."""
    if out is None:
        out = []
    if isinstance(value, str):
        out.append(value)
        return out
    if isinstance(value, dict):
        items = value.values()
    elif isinstance(value, (list, tuple)):
        items = value
    else:
        return out
    for v in items:
        t = type(v)
        if t is str:
            out.append(v)
        elif t is int or t is float or t is bool or v is None:
            continue
        else:
            _strings(v, out)
    return out


def _work_file_path(root: str, name: str) -> str | None:
    """The path (a string) of the work-dir file a bare (relative) name stands for, or None.
    ``root``: the work dir as a string (``os.fspath(ctx.work_dir)``; string paths, not
    ``pathlib``, on the engine's per-call path)."""
    if not name or "\\" in name or name.startswith("/") or ".." in name.split("/"):
        return None
    p = os.path.join(root, name)
    return p if os.path.isfile(p) else None


def _named_files(obs: Any, ctx: ToolContext) -> list[str]:
    """Every string in ``obs`` (any depth) naming a file of the work dir, plus files sharing its
    stem (shapefile sidecars), sorted."""
    names: set[str] = set()
    root = os.fspath(ctx.work_dir)
    search = _FILE_LIKE.search
    for s in _strings(obs):
        if s in names or not search(s) or _work_file_path(root, s) is None:
            continue
        names.add(s)
        if os.path.splitext(s)[1].lower() != ".shp":
            continue
        p = Path(root) / s
        for side in p.parent.glob(glob_escape(p.stem) + ".*"):
            if side.is_file() and side.name != p.name:
                names.add(str(Path(s).parent / side.name) if "/" in s else side.name)
    return sorted(names)


def renumber_references(value: Any, index_map: dict[int, int]) -> Any:
    """``value`` with the N of every whole-string ``<k> from trajectory[N].obs`` replaced by
    ``index_map[N]`` (recursively; other strings untouched; unknown N kept)."""
    if isinstance(value, dict):
        return {k: renumber_references(v, index_map) for k, v in value.items()}
    if isinstance(value, list):
        return [renumber_references(v, index_map) for v in value]
    ref = parse_reference(value)
    if ref is None or ref.kind != "trajectory" or ref.index not in index_map:
        return value
    return _TRAJ_INDEX.sub(lambda m: f"{m.group(1)}{index_map[ref.index]}{m.group(3)}", value, count=1)


def _renumbered(args: Any, index: int, index_map: dict[int, int]) -> Any:
    """``renumber_references`` for step ``index``; unchanged ``args`` while no loop has expanded
    before it (the map is the identity then)."""
    return args if index_map.get(index) == index else renumber_references(args, index_map)


def collapse_expanded(trajectory: list[dict]) -> tuple[list[dict], dict[int, int]]:
    """The authored view of a stored (expanded) trajectory, and the map stored index → authored
    index of the steps kept.

    After a ``tool.loop`` wrapper, the following steps whose tool names follow the wrapper's
    ``calls`` in order, cyclically, at most (items × calls) of them (items: the length of a list
    obs, or ``iteration_count`` of a dict obs), are its expansion and are dropped. References in
    the kept steps are renumbered to authored indices. A trajectory without loops comes back
    unchanged.
    """
    kept: list[dict] = []
    index_map: dict[int, int] = {}
    i = 0
    n = len(trajectory or [])
    while i < n:
        step = trajectory[i]
        index_map[i] = len(kept)
        kept.append(step)
        i += 1
        if not isinstance(step, dict):
            continue
        try:
            name = get_tool(step_call(step)).name if step_call(step) else ""
        except ToolError:
            name = step_call(step)
        if name != LOOP_TOOL:
            continue
        args = step_args(step)
        calls = args.get("calls") if isinstance(args, dict) else None
        if not isinstance(calls, list) or not calls:
            continue
        names = []
        for c in calls:
            cname = (c.get("call") or c.get("tool") or c.get("name")) if isinstance(c, dict) else None
            try:
                names.append(get_tool(cname).name)
            except ToolError:
                names.append(str(cname).split("(", 1)[0].strip())
        obs = step.get("obs")
        if isinstance(obs, list):
            n_items = len(obs)
        elif isinstance(obs, dict) and isinstance(obs.get("iteration_count"), int):
            n_items = obs["iteration_count"]
        else:
            n_items = 0
        limit = n_items * len(names)
        taken = 0
        while taken < limit and i < n:
            nxt = trajectory[i]
            want = names[taken % len(names)]
            try:
                got = get_tool(step_call(nxt)).name if isinstance(nxt, dict) else None
            except ToolError:
                got = step_call(nxt) if isinstance(nxt, dict) else None
            if got != want:
                break
            taken += 1
            i += 1
    out = []
    for step in kept:
        if isinstance(step, dict):
            s = dict(step)
            key = "args" if "args" in s else ("inputs" if "inputs" in s else None)
            if key:
                s[key] = renumber_references(s[key], index_map)
            out.append(s)
        else:
            out.append(step)
    return out, index_map


# ============================================================================================
# Cache keys
# ============================================================================================
def _input_digests(value: Any, ctx: ToolContext, known: dict[str, str]) -> dict[str, str]:
    """{string: sha256} for every string in ``value`` that names an existing input file (an
    artifact of the work dir, or a file the context's resolver accepts)."""
    out: dict[str, str] = {}
    root = os.fspath(ctx.work_dir)
    for s in _strings(value):
        if s in out or not _FILE_LIKE.search(s.strip()):
            continue
        text = s.strip()
        if text in known:
            out[s] = known[text]
            continue
        p = _work_file_path(root, text)
        if p is None and ctx.resolve_path is not None:
            try:
                p = Path(ctx.resolve_path(text))
            except Exception:  # not an input file: a literal string
                p = None
            if p is not None and not p.is_file():
                p = None
        if p is not None:
            out[s] = file_sha256(p)
    return out


def authored_steps(trajectory: Any) -> list:
    """The authored view of a file's trajectory (``collapse_expanded``: loop expansions dropped,
    references renumbered), each step's call as the registry's dotted name where the tool is known
    (kept as written otherwise: QC names the unknown tool), args and obs as written."""
    if not isinstance(trajectory, list):
        return []
    authored, _ = collapse_expanded(trajectory)
    out = []
    for st in authored:
        if not isinstance(st, dict):
            out.append(st)
            continue
        call = step_call(st)
        try:
            call = get_tool(call).name
        except ToolError:
            pass
        s = {"call": call, "args": _kernel_step_args(st, {})}
        if "obs" in st:
            s["obs"] = st["obs"]
        out.append(s)
    return out


def step_key(tool: str, version: int, resolved_args: Any, ctx: ToolContext,
             known: dict[str, str] | None = None, extra: Any = None) -> str:
    """SHA-256 of (engine cache version, tool, tool version, resolved args, input-file
    checksums, perception mode, ``extra``) in canonical JSON. See the module docstring."""
    payload = {"v": ENGINE_CACHE_VERSION, "tool": tool, "version": int(version),
               "args": resolved_args,  # canonical_json makes it plain JSON
               "files": _input_digests(resolved_args, ctx, known or {}),
               "mode": ctx.perception_mode if tool.startswith("seg.") else None,
               "extra": extra}
    return hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()


# ============================================================================================
# The run
# ============================================================================================
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


class _Runner:
    """State of one run: cache, artifact store, known checksums, counters."""

    def __init__(self, ctx: ToolContext, cache: StepCache | None, store: ArtifactStore | None,
                 fingerprint: Callable[[str, dict], Any] | None):
        self.ctx = ctx
        self.cache = cache if store is not None else None
        self.store = store
        self.fingerprint = fingerprint
        self.known: dict[str, str] = {}  # work-dir artifact name -> sha256
        self.tool_calls = 0
        self.cache_hits = 0

    def execute(self, spec, args: dict, *, direct: bool = False) -> tuple[Any, bool]:
        """(obs, cached) of one non-loop call with resolved ``args`` (``direct``: a call nested
        in tool.loop, see ``call_tool``)."""
        key = None
        if self.cache is not None:
            extra = None
            if spec.name.startswith("seg.") and self.fingerprint is not None:
                extra = self.fingerprint(spec.name, args)
            if direct:  # a nested call's obs keeps int echoes: not the same entry as a step's
                extra = {"direct": True, "fingerprint": extra}
            key = step_key(spec.name, spec.version, args, self.ctx, self.known, extra)
            hit = self.cache.get(key)
            if hit is not None and all(self.store.has(a["sha256"]) for a in hit.artifacts):
                for a in hit.artifacts:
                    self.store.materialize(a["sha256"], self.ctx.work_dir / a["name"])
                    self.known[a["name"]] = a["sha256"]
                self.cache_hits += 1
                return hit.obs, True
        self.tool_calls += 1
        obs = call_tool(spec.name, args, self.ctx, direct=direct)
        if self.cache is not None:
            arts = []
            for name in _named_files(obs, self.ctx):
                sha = self.known.get(name) or self.store.put(self.ctx.work_dir / name)
                self.known[name] = sha
                arts.append({"name": name, "sha256": sha})
            self.cache.put(key, spec.name, spec.version, CachedStep(obs=obs, artifacts=arts))
        return obs, False

    def run_loop(self, args: dict, authored: list[dict]) -> tuple[Any, list[dict], bool]:
        """Execute ``tool.loop`` with ``logical.tool_loop``'s plan, iteration and output
        (``loop_plan``, ``run_loop_items``, ``loop_output``), each nested call going through
        ``execute`` (cache, artifacts, counters); returns (obs, expanded, all cached)."""
        loop_spec = get_tool(LOOP_TOOL)
        call_args = dict(args)
        call_args["trajectory"] = [{"call": f["call"], "obs": f["obs"]} for f in authored]
        values = validate_args(loop_spec, call_args)
        traj = list(values["trajectory"] or [])
        plan = loop_plan(values["calls"], values["grid_n"])
        try:
            items = _loop_items(self.ctx, values["loop_over"], traj, LOOP_TOOL)
        except ToolError as exc:
            raise exc.with_context(LOOP_TOOL) from exc
        cached_flags: list[bool] = []

        def call(spec, a):
            obs, cached = self.execute(spec, a, direct=True)
            cached_flags.append(cached)
            return obs

        ran = run_loop_items(plan, items, bind=values["bind"], grid_n=values["grid_n"], trajectory=traj,
                             call=call)
        # items come from JSON observations / arguments and obs from call_tool: plain JSON already
        expanded = [{"call": st["tool"], "args": st["args"], "obs": st["obs"]} for _, steps in ran for st in steps]
        return loop_output(ran, values["return_all"]), expanded, bool(cached_flags) and all(cached_flags)


def run_trajectory(steps: list[dict], ctx: ToolContext,
                   on_step: Callable[[StepResult], None] | None = None, *,
                   cache: StepCache | None = None, store: ArtifactStore | None = None,
                   fingerprint: Callable[[str, dict], Any] | None = None) -> ReplayResult:
    """Replay ``steps`` in ``ctx``; see the module docstring.

    ``cache`` + ``store`` enable the step cache (both or neither); ``fingerprint(tool, args)``
    adds what a perception tool reads besides its arguments to its cache key.
    ``on_step`` is called with each ``StepResult`` as it finishes (skipped ones included).
    Exceptions that are not ``Exception`` (``SystemExit``, ``KeyboardInterrupt``) propagate: a
    killed worker leaves its run to be re-run.
    """
    runner = _Runner(ctx, cache, store, fingerprint)
    results: list[StepResult] = []
    authored: list[dict] = []
    filled: list[dict] = []
    index_map: dict[int, int] = {}
    failed = False
    for index, step in enumerate(steps):
        raw_call = step.get("call", step.get("name")) if isinstance(step, dict) else None
        args = step_args(step) if isinstance(step, dict) else {}
        call = step_call(step) if isinstance(step, dict) else ""
        call_text = raw_call if raw_call is not None else call
        if failed:
            res = StepResult(index=index, call=call, status="skipped", args=args)
            results.append(res)
            authored.append({"call": call_text, "args": args, "obs": None})
            index_map[index] = len(filled)
            filled.append({"call": call_text, "args": _renumbered(args, index, index_map), "obs": None})
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
                # the benchmark's loop passes a reference to an earlier step that does not
                # resolve (a missing or null key) on as its literal string (loop_over: no
                # items; QC tool.loop_over_unresolved); one to a step that has not run is an
                # authoring error here
                problems = [(p, r) for p, r in unresolved_references(resolved, ("trajectory",))
                            if resolve_value(r.text, trajectory=authored) == r.text
                            and not 0 <= r.index < index]
                if problems:
                    path, ref = problems[0]
                    raise ToolError(_reference_problem(ref, authored, index),
                                    argument=format_path(path))
                res.resolved_args = jsonable(resolved)
                obs, res.expanded, res.cached = runner.run_loop(resolved, authored)
            else:
                resolved = resolve_value(args, trajectory=authored)
                left = unresolved_references(resolved)
                if left:
                    path, ref = left[0]
                    raise ToolError(_reference_problem(ref, authored, index),
                                    argument=format_path(path))
                res.resolved_args = jsonable(resolved)
                obs, res.cached = runner.execute(spec, resolved)
            res.obs = obs
            res.status = "succeeded"
            res.artifacts = _artifacts(obs, ctx, resolved, runner.known)
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
        authored.append({"call": call_text, "args": args, "obs": res.obs})
        index_map[index] = len(filled)
        filled.append({"call": call_text, "args": _renumbered(args, index, index_map), "obs": res.obs})
        if res.status == "succeeded":
            filled.extend(res.expanded)
        if on_step:
            on_step(res)
    return ReplayResult(steps=results, filled_trajectory=filled, trajectory=authored,
                        tool_calls=runner.tool_calls, cache_hits=runner.cache_hits,
                        manifest=dict(sorted(runner.known.items())))


def fill_answer(answer_spec: list[dict], trajectory: list[dict]) -> dict:
    """Final answer from ``[{"name", "source"}, ...]``.

    ``trajectory`` is the *authored* view (``ReplayResult.trajectory``; for a trajectory without
    ``tool.loop`` steps it equals the filled one). ``source`` is a reference string
    (``<key> from trajectory[N].obs``) resolved against it, or a literal value (kept as is). A
    reference that does not resolve raises ``ToolError`` naming the field.
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
        value = resolve_value(source, trajectory=trajectory)
        if value == source and parse_reference(value) is not None:
            if ref.index >= len(trajectory):
                raise ToolError(f"answer field '{name}': {ref.text!r} points past the last step "
                                f"({len(trajectory) - 1})", argument=name)
            obs = trajectory[ref.index].get("obs")
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
