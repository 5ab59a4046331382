"""Shared runtime of the tool library: context, typed errors, deterministic artifact names.

No Django here: the tools are plain Python so that the replay engine, the MCP server and the
tests all run the very same code.

Artifacts
---------
Every file a tool writes goes into ``ToolContext.work_dir`` under a name derived from a hash of
the tool name, its inputs and the *contents* of its input files (``ToolContext.output_path``).
Observations name artifacts by that bare file name, never by an absolute path, so two replays of
one trajectory in two different work dirs give byte-identical observations.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernel.hashing import file_sha256  # noqa: F401  (re-exported: kernel.tools.base.file_sha256)
from kernel.paths import is_inside

__all__ = [
    "ToolContext",
    "GTMask",
    "ToolError",
    "ToolInputError",
    "ClassIndexError",
    "ModalityError",
    "GTMissingError",
    "ModelUnavailableError",
    "UnknownToolError",
    "directory_resolver",
    "resolve_or_missing",
    "file_sha256",
    "canonical_json",
    "jsonable",
    "gdal_scope",
]


# --------------------------------------------------------------------------------------------
# GDAL environment of a tool call
# --------------------------------------------------------------------------------------------

#: the variables whose presence makes rasterio build a cloud session for each GDAL environment it
#: opens implicitly (``rasterio.env.Env.__init__``, rasterio 1.4.4: both set, no session given)
CLOUD_CREDENTIAL_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")


def gdal_scope() -> contextlib.AbstractContextManager:
    """A context manager to run one tool call in: one GDAL environment (``rasterio.Env`` with
    rasterio's defaults and no cloud session) for every GDAL operation inside it.

    Why: each ``rasterio.open``, ``warp.reproject``, ``features.rasterize`` … outside an ``Env``
    opens one of its own, and when :data:`CLOUD_CREDENTIAL_VARIABLES` are in the process
    environment (as on a studio whose files are in a bucket: django-storages reads them there) each
    of those builds a boto3 session: 6–12 ms of CPU per operation, 61 % of a replay worker's time
    (py-spy, bench/scale.py's bucket pass, 2026-12-06). The tools read local files only (a bucket's
    objects are fetched to this machine first: ``replay.services.paths``), so they need no session.

    Nothing (a ``nullcontext``) when an ``Env`` is active already (the caller's, e.g.
    ``studio.storage.gdal_env``), when those variables are not both set (no session is built
    then), or when rasterio is not loaded yet: the scope never imports it (a call that needs no
    raster stays free of its 0.2 s import), so the first call of a process that loads it runs
    as before."""
    rasterio = sys.modules.get("rasterio")
    if rasterio is None or not all(v in os.environ for v in CLOUD_CREDENTIAL_VARIABLES):
        return contextlib.nullcontext()
    from rasterio.env import hasenv
    from rasterio.session import DummySession

    if hasenv():
        return contextlib.nullcontext()
    return rasterio.Env.from_defaults(session=DummySession())


# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------
class ToolError(Exception):
    """Base class of every tool failure.

    ``tool``: dotted tool name; ``argument``: the offending argument (or None);
    ``expected``: what would have been accepted; ``message``: what was wrong.
    ``str(err)`` reads ``"<tool>: argument '<argument>': <message> (expected: <expected>)"``.
    """

    def __init__(self, message: str, *, tool: str | None = None, argument: str | None = None,
                 expected: str | None = None):
        self.message = str(message)
        self.tool = tool
        self.argument = argument
        self.expected = expected
        super().__init__(self.message)

    def __str__(self) -> str:  # readable, one line
        parts = []
        if self.tool:
            parts.append(f"{self.tool}:")
        if self.argument:
            parts.append(f"argument '{self.argument}':")
        parts.append(self.message)
        text = " ".join(parts)
        if self.expected:
            text += f" (expected: {self.expected})"
        return text

    def with_context(self, tool: str | None = None, argument: str | None = None) -> ToolError:
        """Fill in tool/argument when they are still unknown; returns self."""
        if self.tool is None and tool:
            self.tool = tool
        if self.argument is None and argument:
            self.argument = argument
        return self

    def to_dict(self) -> dict:
        return {"type": type(self).__name__, "tool": self.tool, "argument": self.argument,
                "expected": self.expected, "message": self.message, "text": str(self)}


class ToolInputError(ToolError):
    """An argument is missing, of the wrong type, out of range, or names an unknown file."""


class ClassIndexError(ToolError):
    """Class indices requested from a mask that the mask does not hold (stale class indices)."""

    def __init__(self, message: str, *, absent: Iterable[int] = (), present: Iterable[int] = (),
                 **kw):
        self.absent = sorted(int(v) for v in absent)
        self.present = sorted(int(v) for v in present)
        super().__init__(message, **kw)


class ModalityError(ToolError):
    """The input has the wrong kind (multi-band where a single-band mask is needed, multi-class
    where a binary mask is needed, ...)."""


class GTMissingError(ToolError):
    """Perception in GT mode: no ground-truth mask is linked to the input image."""


class ModelUnavailableError(ToolError):
    """Perception in model mode: no checkpoint directory / checkpoint / backend available."""


class UnknownToolError(ToolError):
    """No tool of that name (or alias) is registered."""


# --------------------------------------------------------------------------------------------
# Context
# --------------------------------------------------------------------------------------------
@dataclass
class GTMask:
    """A ground-truth mask linked to an input image.

    ``class_map`` maps the pixel values of the file to label names, e.g. for xBD
    ``{0: "background", 1: "no-damage", 2: "minor-damage", 3: "major-damage", 4: "destroyed"}``.
    """

    path: Path
    class_map: dict[int, str]
    pixel_size_m: float | None = None


@dataclass
class ToolContext:
    """What a tool may touch.

    * ``work_dir``: where tools write their artifacts (created on demand).
    * ``resolve_path``: the caller's resolver, mapping a path string of the arguments to a real
      file; it raises ``ToolInputError`` for unknown paths or paths outside its roots. The tools
      never call it directly: ``ToolContext.resolve`` first looks a relative name up in
      ``work_dir`` (the artifacts of earlier steps) and only then asks ``resolve_path``.
    * ``gt_lookup(tool_name, resolved_args) -> GTMask | None``: perception in GT mode.
    * ``perception_mode``: ``"gt"`` (default), ``"model"`` or ``"classical"``.
    * ``checkpoint_dir``: model mode only; where ``<model>.safetensors`` checkpoints live.
    * ``geojson_default_crs``: CRS assumed for a GeoJSON file without a ``crs`` member. ``None``
      (the default, as the benchmark does) reads such files as pixel-space layers.
    """

    work_dir: Path
    resolve_path: Callable[[str], Path] | None = None
    gt_lookup: Callable[[str, dict], GTMask | None] | None = None
    perception_mode: str = "gt"
    checkpoint_dir: Path | None = None
    geojson_default_crs: str | None = None

    def __post_init__(self):
        self.work_dir = Path(self.work_dir)

    # -- input files --------------------------------------------------------------------------
    def resolve(self, value: Any, *, tool: str | None = None, argument: str | None = None) -> Path:
        """Map a path string from the arguments to an existing file.

        Order: a relative name inside ``work_dir``; then the caller's ``resolve_path``.
        Raises ``ToolInputError`` (with tool and argument filled in) when nothing matches.
        """
        if isinstance(value, Path):
            value = str(value)
        if not isinstance(value, str) or not value.strip():
            raise ToolInputError(f"expected a file path, got {value!r}", tool=tool,
                                 argument=argument, expected="a path string")
        text = value.strip()
        p = Path(text)
        if not p.is_absolute():
            wd = self.work_dir.resolve()
            cand = (wd / p).resolve()
            if cand.is_file() and _is_within(cand, wd):
                return cand
        if self.resolve_path is not None:
            try:
                found = Path(self.resolve_path(text))
            except ToolError as exc:
                raise exc.with_context(tool, argument) from exc
            except (OSError, ValueError, KeyError) as exc:
                raise ToolInputError(f"cannot resolve path {text!r}: {exc}", tool=tool,
                                     argument=argument) from exc
            if not found.is_file():
                raise ToolInputError(f"file not found: {text!r}", tool=tool, argument=argument,
                                     expected="an existing file")
            return found
        where = "in the work dir" if not p.is_absolute() else "(no path resolver configured)"
        raise ToolInputError(f"file not found: {text!r} {where}", tool=tool, argument=argument,
                             expected="an artifact of an earlier step or a sample input file")

    # -- output files -------------------------------------------------------------------------
    def output_path(self, tool_name: str, inputs: dict, suffix: str) -> Path:
        """Deterministic artifact path inside ``work_dir``.

        The name is ``<tool alias>_<12 hex>.<suffix>``; the hash covers the tool name and
        ``inputs``. ``Path`` values (and lists of them) stand for input files and are hashed by
        file name plus SHA-256 of their content, never by their absolute location, so the
        same inputs in another work dir give the same name.
        """
        payload = {"tool": tool_name, "inputs": _hash_inputs(inputs)}
        digest = hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()[:12]
        if suffix and not suffix.startswith("."):
            suffix = "." + suffix
        self.work_dir.mkdir(parents=True, exist_ok=True)
        return self.work_dir / f"{tool_name.replace('.', '_')}_{digest}{suffix}"

    def artifact_name(self, path: Path) -> str:
        """The name by which observations refer to an artifact (relative to work_dir)."""
        path = Path(path)
        try:
            return path.resolve().relative_to(self.work_dir.resolve()).as_posix()
        except ValueError:
            return path.name


def _is_within(path: Path, root: Path) -> bool:
    return is_inside(path, root)


def directory_resolver(*roots: str | os.PathLike) -> Callable[[str], Path]:
    """A ``resolve_path`` that accepts files under ``roots`` only.

    A relative path is looked up under each root in turn; an absolute path must lie inside one of
    them. Anything else raises ``ToolInputError``.
    """
    root_paths = [Path(r).resolve() for r in roots]

    def resolve(text: str) -> Path:
        p = Path(text)
        if p.is_absolute():
            rp = p.resolve()
            if not any(_is_within(rp, r) for r in root_paths):
                raise ToolInputError(f"path {text!r} is outside the allowed data roots",
                                     expected="a file inside the sample's data")
            if not rp.is_file():
                raise ToolInputError(f"file not found: {text!r}", expected="an existing file")
            return rp
        for r in root_paths:
            cand = (r / p).resolve()
            if _is_within(cand, r) and cand.is_file():
                return cand
        raise ToolInputError(f"file not found: {text!r}",
                             expected="an artifact of an earlier step or a sample input file")

    return resolve


# --------------------------------------------------------------------------------------------
# Hashing and JSON helpers
# --------------------------------------------------------------------------------------------
# file_sha256 (imported above, re-exported): kernel/hashing.py, the one implementation (bounded cache)


def _hash_inputs(value: Any) -> Any:
    if isinstance(value, Path):
        return {"file": value.name, "sha256": file_sha256(value)}
    if isinstance(value, dict):
        return {str(k): _hash_inputs(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_hash_inputs(v) for v in value]
    return jsonable(value)


def jsonable(value: Any, *, keep_non_finite: bool = False) -> Any:
    """Plain-JSON copy of ``value``: numpy scalars/arrays to Python, tuples to lists,
    ``Path`` to its name, dict keys to strings; NaN/inf to None unless ``keep_non_finite``.

    ``keep_non_finite=True`` keeps NaN, inf and -inf as Python floats: what a tool observation
    holds in the benchmark, whose tool servers answer with ``json.dumps`` (``allow_nan``: the
    tokens ``NaN``/``Infinity``) and whose harness parses them back with ``json.loads``. Such a
    value must be tagged (``kernel.taskfile.to_storage``) before it reaches a JSON column.
    Raises ``TypeError`` for a value that has no JSON form.
    """
    try:
        import numpy as np
    except Exception:  # pragma: no cover
        np = None
    keep = keep_non_finite
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return value if keep or math.isfinite(value) else None
    if np is not None:
        if isinstance(value, np.bool_):
            return bool(value)
        if isinstance(value, np.integer):
            return int(value)
        if isinstance(value, np.floating):
            f = float(value)
            return f if keep or math.isfinite(f) else None
        if isinstance(value, np.ndarray):
            return [jsonable(v, keep_non_finite=keep) for v in value.tolist()]
    if isinstance(value, Path):
        return value.name
    if isinstance(value, dict):
        return {str(k): jsonable(v, keep_non_finite=keep) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        seq = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return [jsonable(v, keep_non_finite=keep) for v in seq]
    raise TypeError(f"value of type {type(value).__name__} is not JSON serialisable")


def _str_keys_only(value: Any) -> bool:
    """True when every dict in ``value`` (any depth, through lists and tuples) has only ``str``
    keys. Scalars are not looked at: only dicts and sequences are descended into."""
    stack = [value]
    pop, push = stack.pop, stack.append
    while stack:
        v = pop()
        t = type(v)
        if t is dict:
            for k, item in v.items():
                if type(k) is not str:
                    return False
                ti = type(item)
                if ti is dict or ti is list or ti is tuple:
                    push(item)
        elif t is list or t is tuple:
            for item in v:
                ti = type(item)
                if ti is dict or ti is list or ti is tuple:
                    push(item)
        elif isinstance(v, (dict, list, tuple)):  # a subclass: let the general path decide
            return False
    return True


def canonical_json(value: Any) -> str:
    """Canonical JSON text of ``jsonable(value)``: sorted keys, no whitespace, UTF-8 kept.

    A value that is plain JSON already (dicts with ``str`` keys, lists, tuples, strings, numbers,
    booleans, None) is encoded as it is, without ``jsonable``'s copy: ``json.dumps`` gives it the
    same text (tuples as lists, ``int``/``float`` subclasses by their number). Anything else
    (NaN or infinities, which ``jsonable`` turns into null; numpy values; paths; sets; non-string
    keys, which ``jsonable`` turns into strings before sorting) falls back to the ``jsonable``
    copy. Raises ``TypeError`` as ``jsonable`` does."""
    if _str_keys_only(value):
        try:
            return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                              allow_nan=False)
        except (TypeError, ValueError):  # a non-JSON leaf or a non-finite float
            pass
    return json.dumps(jsonable(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False)


def resolve_or_missing(ctx: ToolContext, value, *, tool: str, argument: str,
                       empty_is_missing: bool = False) -> Path | None:
    """The file ``value`` names, or None when no such file exists (the benchmark answers a
    missing mask with an empty, non-error result in ``ras.count_pixels`` and
    ``ras.vectorize``). A blank name ("   ") is missing too; the empty string only with
    ``empty_is_missing`` (``ras.vectorize`` tests ``os.path.exists("")``, False, while
    ``ras.count_pixels``' imread("") reads the working directory and fails). A path outside
    the data roots or a non-string still raises ToolInputError."""
    if isinstance(value, str) and not value.strip() and (value or empty_is_missing):
        return None
    try:
        return ctx.resolve(value, tool=tool, argument=argument)
    except ToolError as exc:
        if isinstance(value, str) and value.strip() and exc.message.startswith("file not found"):
            return None
        raise
