"""Replay services: start a replay of a task revision, execute it, diff it, accept its gold.

The engine (``kernel.engine``) is pure; this module binds it to the database: paths in a task's
arguments resolve to the event's layers (confined to STUDIO_DATA_ROOT), perception tools in GT mode
look up the mask layer that annotates their input image, and finished steps are stored every
``FLUSH_S`` seconds (``_Progress``) so that progress (steps done / total) is visible while a long
replay runs; a replay shorter than that is written once, in one transaction, when it ends (it shows
``queued`` until then). The statements per replay are few and pinned by a test
(``tests/test_replay_fast_paths.py``); the hot ones go through ``studio.fastsql``. On PostgreSQL
in autocommit (a worker) that last write is one statement (``WITH … INSERT … UPDATE``: the cache's
entries, the step rows or the copied ones, the gold decision and the run's fields) and so its own
transaction; the run, its layers and the task's robustness variant are read in one round trip
(issue 16: a warm replay there went from 13 round trips to 4, a cold one from 17 to 7, and to 6
when the variant's row joined that read on 2026-12-03).

Storage (all under ``STUDIO_ARTIFACT_ROOT``)
    ``cas/<sha256[:2]>/<sha256>``: every artifact, content-addressed (``ArtifactStore``).
    ``replays/<run id>/<name>``: the run's folder; each artifact a hard link into ``cas/`` (a copy
    across file systems). ``ReplayRun.artifact_manifest`` maps each name to its hash.
    The step cache is the table ``StepCacheEntry`` (``DbStepCache``), keyed by
    ``kernel.engine.step_key``: an unchanged step (same tool and version, same resolved
    arguments, same input-file contents, same GT mask / checkpoints) is never recomputed. On top,
    a replay whose ``input_fingerprint`` (trajectory, answer spec, layer file contents, tool
    versions, mode) equals a succeeded replay's copies that run's steps (``_reuse_identical_run``).

Gold answers
    A succeeded replay becomes the task's gold (``gold_accepted``) by itself only when nothing a
    person approved would change: the task has no gold yet, or its gold was never accepted by a
    person (``accepted_by`` empty), or the new replay has the gold's ``replay_hash``. Otherwise it
    stays pending until a person calls ``accept_gold``; ``replay_diff`` shows what changed.
    Only GT-mode replays take part (model and classical runs are measurements, never gold).
    ``latest_successful_replay`` (what export, QC and the run pages read) returns the accepted gold
    of the head revision only.

Crashes
    ``execute_replay`` on a run that a killed worker left ``running`` starts it over: its steps and
    folder are discarded, and the step cache answers whatever had finished, so the result (and
    its hash) is the same. ``resume_stuck_replays`` re-queues runs whose heartbeat is older than a
    timeout (``manage.py replay --resume-stuck``).
    On PostgreSQL a replay's own transactions (the new run row, progress, results, the whole-run
    copy) commit without waiting for the WAL flush (``studio.fastsql.commit_without_flush_wait``,
    sent with the transaction's last statement: ``relax_commit`` of ``studio.fastsql``; about 4 ms
    a commit here, half a warm replay's time): a crash of the database server (not of
    a worker) may lose the commits of its last 0.6 s or so. A lost result leaves its run
    ``queued`` or ``running`` for ``resume_stuck_replays`` to run again, with the same result; a
    lost new run is gone (its queued job finds no run and fails) and is requested again. The
    task, its revisions and ``accept_gold`` commit as every other write does.
"""
from __future__ import annotations

import copy
import functools
import json
import os
import math
import logging
import shutil
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import router, transaction
from django.utils import timezone

from annotation.models import AuditEvent, Layer, Task, TaskVariant
from annotation.services.layer_versions import pinned_layer, task_pins
from annotation.services.review import TransitionError
from annotation.services.task_import import TaskImportError
from annotation.services.tasks import require_unreleased
from kernel.engine import (ArtifactStore, CachedStep, collapse_expanded, fill_answer, replay_hash,
                           run_trajectory)
from replay.errors import ReplayConflict
from replay.models import ReplayRun, ReplayStep, StepCacheEntry
from kernel.tools.base import GTMask, ToolContext, ToolError, ToolInputError, file_sha256
from kernel.tools.registry import get_tool
from replay.variant_tools import published_tools_for
from annotation.variants import unsolvable_block
from kernel.golddiff import DIFFERS, leaf_changes, step_diff
from kernel.paths import confine
from kernel.content import answer_source  # noqa: F401  (re-exported)
from kernel.taskfile import from_storage, same_value, source_from_text, to_storage
from studio.fastsql import (column_sql, copy_rows, copy_rows_sql, existing_values, insert_instance, insert_rows_sql,
                            load_many, newest_row, newest_row_sql, one_statement_writes, update_by, update_in_sql,
                            update_rows)
from studio.events import emit
from studio.permissions import can, require
from kernel.engine import ENGINE_CACHE_VERSION, step_call
from kernel.tools.base import canonical_json

log = logging.getLogger(__name__)

# The image arguments a perception tool's GT lookup follows, most specific first.
GT_IMAGE_ARGS = ("post_image_path", "post_image", "image_path", "pre_image_path", "pre_image")
#: the permission that accepting a changed gold answer needs (see the report: a dedicated
#: ``gold.accept`` row would be stricter)
ACCEPT_ACTION = "task.replay"
#: the perception mode whose replays give the gold (model/classical runs never become gold)
GOLD_MODE = "gt"


class ReplayStateError(ReplayConflict):
    """A replay is not in a state that allows the operation; the message says why (HTTP 409)."""


def stored_path(relative: str) -> str:
    """The absolute path of a file stored under STUDIO_DATA_ROOT, normalised without touching the
    file system (symbolic links are not followed: ``data_path`` does that before a file is
    handed to a tool); ``kernel.paths.OutsideRoot`` (a ``ValueError``) if it lies outside.
    A pure function of the root and ``relative`` (for an absolute root): remembered for the
    last 4,096 of them (every replay asks for each layer of its event twice)."""
    root = os.fspath(settings.STUDIO_DATA_ROOT)
    if os.path.isabs(root) and isinstance(relative, str):
        return _stored_path(root, relative)
    return str(confine(root, relative, follow_links=False))


@functools.lru_cache(maxsize=4096)
def _stored_path(root: str, relative: str) -> str:
    return str(confine(root, relative, follow_links=False))


def data_path(relative: str) -> Path:
    """Absolute path of a file stored under STUDIO_DATA_ROOT (symbolic links resolved);
    ``kernel.paths.OutsideRoot`` (a ``ValueError``) if it escapes the root."""
    return confine(settings.STUDIO_DATA_ROOT, relative)


def artifact_root() -> Path:
    return Path(settings.STUDIO_ARTIFACT_ROOT)


def artifact_store() -> ArtifactStore:
    """The content-addressed store ``STUDIO_ARTIFACT_ROOT/cas``."""
    return ArtifactStore(artifact_root() / "cas")


#: the ``Layer`` fields that ``LayerResolver`` and ``input_fingerprint`` read
LAYER_FIELDS = ("id", "event_id", "file_name", "path", "kind", "class_map", "annotates_id", "gsd_m", "crs")


class LayerResolver:
    """Maps path strings in a trajectory to the event's stored layer files.

    A string matches a layer whose ``file_name`` equals the string's base name (the benchmark's
    trajectories use bare file names). Unknown names raise ``ToolInputError``. ``layers``: the
    event's ``Layer`` rows when the caller has them already (saves the query). A row whose stored
    path escapes the data root makes the constructor raise ``ValueError`` (checked lexically
    here; ``__call__`` resolves symbolic links too, through ``data_path``).
    """

    def __init__(self, event_id: int, layers: list[Layer] | None = None):
        if layers is None:
            layers = list(Layer.objects.filter(event_id=event_id))
        self.layers = {l.file_name: l for l in layers}
        # the tools hand resolved paths to ``gt_lookup``: map stored files back to their layers too
        # (lexically normalised here; ``__call__`` adds the resolved path of every file it hands out)
        self.by_stored_path: dict[str, Layer] = {stored_path(l.path): l for l in layers}
        self.masks: dict[int, Layer] = {}
        self._files: dict[int, Path] = {}  # layer id -> its resolved file (``_file``)
        for l in sorted(layers, key=lambda l: l.pk):
            if l.kind == Layer.Kind.MASK and l.annotates_id and l.annotates_id not in self.masks:
                self.masks[l.annotates_id] = l

    def layer_for(self, value: str) -> Layer | None:
        """The layer a path string names: a layer file name, or the stored file of a layer."""
        return self.by_stored_path.get(str(value)) or self.layers.get(Path(str(value)).name)

    def __call__(self, value: str) -> Path:
        layer = self.layer_for(value)
        if layer is None:
            raise ToolInputError(
                tool=None, argument=None, expected="a layer file name of this event",
                message=f"'{value}' is neither an output of an earlier step nor a layer of this event",
            )
        path = self._file(layer)
        self.by_stored_path.setdefault(str(path), layer)
        return path

    def _file(self, layer: Layer) -> Path:
        """``data_path`` of the layer's file, resolved once per resolver (a resolver serves one
        replay: the engine asks for the same layers at every step's cache key)."""
        path = self._files.get(layer.pk)
        if path is None:
            path = self._files[layer.pk] = data_path(layer.path)
        return path

    def _mask_for(self, args: dict) -> tuple[Layer, Layer] | None:
        for arg in GT_IMAGE_ARGS:
            value = args.get(arg)
            if not value or not isinstance(value, (str, Path)):
                continue
            image = self.layer_for(value)
            if image is None:
                continue
            mask = self.masks.get(image.pk)
            if mask is not None:
                return mask, image
        return None

    def gt_lookup(self, tool_name: str, args: dict) -> GTMask | None:
        """The GT mask annotating the tool's input image (post image first), or None."""
        found = self._mask_for(args)
        if found is None:
            return None
        mask, image = found
        return GTMask(
            path=self._file(mask),
            class_map={int(k): v for k, v in (mask.class_map or {}).items()},
            pixel_size_m=mask.gsd_m or image.gsd_m,
        )

    def fingerprint(self, tool_name: str, args: dict) -> Any:
        """What a perception call reads besides its arguments (part of its cache key): the
        linked GT mask's checksum and class map, or None."""
        found = self._mask_for(args)
        if found is None:
            return None
        mask, _image = found
        return {"gt_sha256": file_sha256(self._file(mask)),
                "gt_classes": {str(k): v for k, v in sorted((mask.class_map or {}).items())},
                "gsd_m": mask.gsd_m}


def _checkpoint_fingerprint(directory: str | None) -> list:
    if not directory or not Path(directory).is_dir():
        return []
    return sorted([p.name, file_sha256(p)] for p in Path(directory).iterdir()
                  if p.is_file() and p.suffix in (".safetensors", ".pt", ".pth"))


class DbStepCache:
    """The step cache on the ``StepCacheEntry`` table (``kernel.engine.StepCache``).

    Lookups are one indexed SELECT each; new entries and hit counters are buffered and written by
    ``flush`` (``execute_replay`` flushes with its progress, at the latest every ``FLUSH_S``
    seconds, and in a ``finally`` — so a step that finished before a crash is not recomputed)."""

    def __init__(self):
        self.pending: dict[str, tuple[str, int, CachedStep]] = {}  # key -> (tool, version, entry)
        self.hit_keys: list[str] = []

    def get(self, key: str) -> CachedStep | None:
        if key in self.pending:
            return self.pending[key][2]
        row = newest_row(StepCacheEntry, ("obs", "artifacts"), where={"key": key})
        if row is None:
            return None
        self.hit_keys.append(key)
        return CachedStep(obs=from_storage(row[0]), artifacts=row[1] or [])

    def put(self, key: str, tool: str, version: int, entry: CachedStep) -> None:
        # ``entry.obs`` comes from ``call_tool``: plain JSON but for NaN/inf floats (the
        # benchmark's observations hold them), tagged by ``to_storage`` when flushed
        self.pending[key] = (tool, version, entry)

    @property
    def dirty(self) -> bool:
        """Something waits for ``flush``."""
        return bool(self.pending or self.hit_keys)

    def statements(self) -> list[tuple[str, list]]:
        """What ``flush`` writes, as statements not run (``(sql, params)``; ``_Progress`` may send
        them inside the run's UPDATE): the new entries (``INSERT … ON CONFLICT DO NOTHING``) and
        the hit counters of the entries read. The buffers are emptied."""
        out = []
        if self.pending:
            now = timezone.now()
            out += insert_rows_sql(StepCacheEntry, ["key", "tool", "tool_version", "obs", "artifacts", "hits",
                                                    "created_at"],
                                   ([key, tool, version, to_storage(e.obs), e.artifacts, 0, now]
                                    for key, (tool, version, e) in self.pending.items()),
                                   ignore_conflicts=True)
            self.pending.clear()
        if self.hit_keys:  # what ``filter(key__in=...).update(hits=F("hits") + 1, last_used_at=now)`` sends
            out.append(update_in_sql(StepCacheEntry, "key", sorted(set(self.hit_keys)),
                                     {"last_used_at": timezone.now()}, increments=("hits",)))
            self.hit_keys.clear()
        return out

    def flush(self) -> None:
        """Write the buffered entries and hit counters (``statements``)."""
        found = self.statements()
        if found:
            with transaction.get_connection(router.db_for_write(StepCacheEntry)).cursor() as cur:
                for sql, params in found:
                    cur.execute(sql, params)


#: longest time (s) between two progress writes of a running replay; a replay that ends sooner
#: is written once, when it ends. Below the replay page's polling interval (0.6 s,
#: ``replay_view.js``), so that every poll of a long replay still sees new progress; each write is
#: a transaction (0.25 s before: most no-cache replays of the benchmark's size then paid one)
FLUSH_S = 0.5


class _StepRow:
    """The values of one ``ReplayStep`` row before it is written (``_Progress``): a plain object
    with the model's defaults for a pending step (a model instance per step cost more to build
    than its row costs to write)."""

    __slots__ = ("index", "call", "args", "status", "duration_ms", "resolved_args", "obs", "error", "artifacts",
                 "cached", "expanded")

    def __init__(self, index: int, call: str, args: Any):
        self.index, self.call, self.args = index, call, args
        self.status, self.duration_ms, self.resolved_args = ReplayStep.Status.PENDING, None, {}
        self.obs, self.error, self.artifacts, self.cached, self.expanded = None, "", [], False, []


class _Progress:
    """The database side of a running replay: buffers finished steps and writes them, with the
    run's progress and the cache's new entries, in one transaction at most every ``FLUSH_S``
    seconds, so fast (cached) steps cost no query each.

    The first write also marks the run ``running`` (``start``: the fields to set, its old step
    rows deleted when it ran before) and inserts every step row (finished ones with their result,
    the rest ``pending``); later writes update the finished rows. ``finish(**fields)`` writes what
    is left and the run's final fields in one transaction (a replay shorter than ``FLUSH_S``
    costs that one transaction)."""

    FIELDS = ["status", "duration_ms", "resolved_args", "obs", "error", "artifacts", "cached", "expanded"]

    def __init__(self, run: ReplayRun, cache: "DbStepCache", steps: list, start: dict, restarted: bool):
        import time as _time

        self.run = run
        self.cache = cache
        self.start = start
        self.restarted = restarted
        self.rows = [_StepRow(i, str(s.get("call", s.get("name", ""))) if isinstance(s, dict) else "",
                              (s.get("args", s.get("inputs")) or {}) if isinstance(s, dict) else {})
                     for i, s in enumerate(steps)]
        self.inserted = False
        self.buffer: list[_StepRow] = []
        self.done = 0
        self.last = _time.monotonic()

    def __call__(self, result) -> None:
        import time as _time

        if not 0 <= result.index < len(self.rows):
            return
        row = self.rows[result.index]
        row.status, row.duration_ms = result.status, result.duration_ms
        # the engine's values are plain JSON already, but an observation may hold NaN/inf
        # (as the benchmark's do): tagged for the JSON column (kernel.taskfile.to_storage)
        row.resolved_args = result.resolved_args or {}
        row.obs, row.error = to_storage(result.obs), result.error or ""
        row.artifacts = result.artifacts or []
        row.cached, row.expanded = result.cached, result.expanded or []
        self.buffer.append(row)
        if result.status == "succeeded":
            self.done = result.index + 1
        if _time.monotonic() - self.last >= FLUSH_S:
            self.flush()

    def flush(self) -> None:
        """Write what is buffered (a no-op when nothing is)."""
        import time as _time

        if self.inserted and not self.buffer and not self.cache.dirty:
            return
        with transaction.atomic():  # the last UPDATE relaxes the commit (module docstring)
            self._write()
            _save_fields(self.run, relax_commit=True, steps_done=self.done, heartbeat_at=timezone.now())
        self.last = _time.monotonic()

    def finish(self, **fields) -> None:
        """Write what is buffered and set the run's final ``fields``, in one transaction; a
        ``status`` of ``succeeded`` goes through ``_finish_succeeded`` (``final_answer`` and
        ``replay_hash`` given), which decides on the gold. On PostgreSQL in autocommit, a first
        run of a replay that wrote nothing yet is one statement: the cache's writes and the step
        rows ride in the run's UPDATE (``WITH … INSERT``; one round trip where a transaction was
        five)."""
        if not self.inserted and not self.restarted and one_statement_writes(ReplayRun) and \
                not transaction.get_connection(router.db_for_write(ReplayRun)).in_atomic_block:
            fields = {**self.start, **fields, "with_statements": self.cache.statements() + self._rows_sql()}
            self.inserted, self.buffer = True, []
            self._end(fields)
            return
        with transaction.atomic():  # the last UPDATE relaxes the commit (module docstring)
            if not self.inserted:  # one UPDATE of the run: its start fields, then the final ones
                fields = {**self.start, **fields}
            self._write(start=False)
            self._end(fields)

    def _end(self, fields: dict) -> None:
        if fields.get("status") == ReplayRun.Status.SUCCEEDED:
            fields.pop("status")
            _finish_succeeded(self.run, fields.pop("final_answer"), fields.pop("replay_hash"), **fields)
        else:
            _save_fields(self.run, relax_commit=True, **fields)

    def _rows_sql(self) -> list[tuple[str, list]]:
        """The INSERT of every step row (finished ones with their result, the rest pending)."""
        return insert_rows_sql(ReplayStep, ["run", "index", "call", *self.FIELDS, "args"],
                               ([self.run.pk, r.index, r.call, *(getattr(r, f) for f in self.FIELDS), r.args]
                                for r in self.rows))

    def _write(self, start: bool = True) -> None:
        """Write the cache's new entries and the buffered steps; on the first write also the step
        rows and (``start``) the run's start fields."""
        self.cache.flush()
        if not self.inserted:
            if self.restarted:
                ReplayStep.objects.filter(run=self.run).delete()
            if start:
                _save_fields(self.run, **self.start)
            with transaction.get_connection(router.db_for_write(ReplayStep)).cursor() as cur:
                for sql, params in self._rows_sql():
                    cur.execute(sql, params)
            self.inserted = True
            self.buffer = []
            return
        update_rows(ReplayStep, ["run", "index"], self.FIELDS,
                    (([self.run.pk, r.index], [getattr(r, f) for f in self.FIELDS]) for r in self.buffer))
        self.buffer = []


def start_replay(user, task: Task, mode: str = "gt") -> ReplayRun:
    """Create a replay run of the task's head revision and dispatch it (in-process by default).

    Returns the run; with a broker configured it is still queued when this returns.
    """
    require(user, "task.replay", task)
    run = create_run(task, mode=mode, user=user)
    from replay.jobs import run_replay

    run_replay.delay(run.pk)
    run.refresh_from_db()
    return run


def replay_new_variant(user, variant) -> ReplayRun | None:
    """Start the gold replay of a robustness variant just made (``annotation.services.variants``'
    hook, run after its commit), when ``user`` may replay it; None when they may not (the author
    starts it later, as for any task)."""
    if not can(user, "task.replay", variant.task):
        return None
    return start_replay(user, variant.task)


def task_layers(task: Task, layers: list[Layer] | None = None) -> list[Layer]:
    """The event's layers as ``task`` reads them: for a released task, each layer at the version
    its newest published release pinned (``annotation.services.layer_versions.pinned_layer``: an
    unsaved ``Layer`` with the pinned version's files and fields); for any other task, or a layer
    the release did not pin, the ``Layer`` row (the newest version). ``layers``: the event's rows
    when the caller has them (saves the query). One query more for a released task only."""
    if layers is None:
        layers = list(Layer.objects.filter(event_id=task.event_id))
    if task.status != Task.Status.RELEASED:
        return layers
    pins = task_pins(task.pk)
    return [pinned_layer(l, pins) for l in layers] if pins else layers


def input_fingerprint(task: Task, revision, mode: str, layers: list[Layer] | None = None) -> str:
    """SHA-256 of what a replay of ``revision`` reads: its trajectory and answer spec, the contents
    of the event's layers (their ``sha256``, else path, size and mtime) with their GSD and CRS
    (a maintainer may record them later: annotation.services.layers), the versions of the
    tools it names and the perception mode (``replay --changed-only`` compares it).
    ``layers``: the event's ``Layer`` rows when the caller has them already (saves the query)."""
    import hashlib

    if layers is None:
        layers = list(Layer.objects.filter(event_id=task.event_id))
    rows = []
    for l in sorted(layers, key=lambda l: (l.file_name, l.pk)):
        try:  # the file's bytes (cached on path, inode, size and mtime), not the import-time checksum
            ident = file_sha256(stored_path(l.path))
        except (OSError, ValueError):
            ident = f"{l.path}:missing"
        rows.append([l.file_name, ident, l.class_map or {}, l.annotates_id, l.gsd_m, l.crs or ""])
    names = set()

    def collect(steps):
        for st in steps or []:
            if isinstance(st, dict):
                names.add(step_call(st))
                calls = (st.get("args") or {}).get("calls") if isinstance(st.get("args"), dict) else None
                if isinstance(calls, list):
                    collect(calls)

    collect(revision.trajectory)
    versions = {}
    for n in sorted(x for x in names if x):
        try:
            spec = get_tool(n)
            versions[spec.name] = spec.version
        except Exception:
            versions[n] = None
    payload = {"engine": ENGINE_CACHE_VERSION, "trajectory": revision.trajectory,
               "answer_spec": revision.answer_spec, "layers": rows,
               "tools": versions, "mode": mode,
               "checkpoints": _checkpoint_fingerprint(settings.STUDIO_CHECKPOINT_DIR) if mode == "model" else None}
    return hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()


def create_run(task: Task, *, mode: str = "gt", user=None) -> ReplayRun:
    """A queued replay run of the task's head revision (no permission check: callers check).

    Raises ``annotation.services.tasks.TaskLockedError`` for a GT-mode (gold) replay of a
    released task: its gold is frozen by the release. Model-perception runs (the gold baseline)
    stay possible: they are agent runs, not gold."""
    if mode == GOLD_MODE:
        require_unreleased(task, "a gold replay")
    rev = task.head
    # one INSERT (``insert_instance``: the ORM's ``create`` compiled it anew each time, at several
    # times the statement's cost; no signal listens to ReplayRun), committed without waiting for
    # the WAL flush on PostgreSQL (see the module docstring: a queued run is redone from its task).
    # In autocommit the statement is its own transaction: one round trip, where BEGIN, SET LOCAL,
    # INSERT and COMMIT were four; inside a caller's transaction a savepoint, as before
    run = ReplayRun(
        task=task, revision=rev, mode=mode, steps_total=len(rev.trajectory or []), requested_by=user,
        eval_spec={f["name"]: f["eval_type"] for f in rev.answer_spec},
        answer_format={f["name"]: f.get("answer_format", "") for f in rev.answer_spec if f.get("answer_format")},
    )
    if not transaction.get_connection(router.db_for_write(ReplayRun)).in_atomic_block:
        return insert_instance(run, relax_commit=True)
    with transaction.atomic():
        return insert_instance(run)


def _save_fields(run: ReplayRun, *, filled_trajectory_of: int | None = None, relax_commit: bool = False,
                 expressions: dict | None = None, returning: tuple[str, ...] = (), with_statements=(),
                 **fields) -> tuple | None:
    """``UPDATE`` the run's row with ``fields`` (plain values, by field name or attname) and set them
    on ``run`` too, so that the caller's instance matches the row without reading it back.

    ``filled_trajectory_of``: copy ``filled_trajectory`` from that run inside the database (the
    instance then loads it when it is read). One statement, written here rather than through
    ``QuerySet.update`` because replays call it on their hot path (the ORM's compilation cost
    more than the statement). ``relax_commit``, ``expressions``, ``returning`` (whose values it
    returns; not set on ``run``: the caller converts them) and ``with_statements``: as
    ``studio.fastsql.update_by`` takes them."""
    copied = ("filled_trajectory",) if filled_trajectory_of is not None else ()
    back = update_by(ReplayRun, {"id": run.pk}, fields, copy_fields=copied, copy_from={"id": filled_trajectory_of},
                     expressions=expressions, returning=returning, relax_commit=relax_commit,
                     with_statements=with_statements)
    for name, value in fields.items():
        setattr(run, name, value)
    if filled_trajectory_of is not None:
        run.__dict__.pop("filled_trajectory", None)  # a deferred field: Django loads it when read
    return back


def execute_replay(run_id: int, *, use_cache: bool = True) -> ReplayRun:
    """Run a replay to the end and store every step. Safe to call again on a crashed run:
    its old steps and folder are discarded and the run starts over (same inputs, same result).

    A robustness variant's gold replay (``run.variant_check``): an unsolvable variant's plan runs up
    to the step ``annotation.variants.unsolvable_block`` finds and stops there, recorded as
    ``{kind: "unsolvable", blocked: {step, tool, reason}}``, its answer the refusal of its answer
    spec; a broken variant's broken step is run again with the alternative
    (:func:`alternative_check`). Both end ``succeeded``: that is the expected state.

    ``use_cache=False`` calls every tool (the cache is still filled).

    Returns the run as stored (its fields set from what was written, not read back)."""
    # the run with its revision and task, the event's layers and the task's robustness variant (if
    # any): one SELECT each, built once per process (``load_instances``; the ORM's compilation cost
    # several times the statements). The layers' event and the variant's task come from subqueries
    # over the run, so that on PostgreSQL the three SELECTs go in one round trip (``load_many``; the
    # variant was a round trip of its own before, 0.45 ms a replay there); a missing run finds no
    # layers and no variant either
    task_of_run = column_sql(ReplayRun, "task", {"id": run_id})
    found, layers, variants = load_many(
        dict(model=ReplayRun, where={"id": run_id}, related=("revision", "task")),
        # the fields the fingerprint and the resolver read (``LAYER_FIELDS``), no more
        dict(model=Layer, where={"event": column_sql(Task, "event", {"id": task_of_run})},
             fields=LAYER_FIELDS, order_by=("id",)),
        # at most one row: ``TaskVariant.task`` is one-to-one
        dict(model=TaskVariant, where={"task": task_of_run}, fields=("kind", "params", "tools")))
    if not found:
        raise ReplayRun.DoesNotExist("ReplayRun matching query does not exist.")
    run = found[0]
    rev = run.revision
    root = artifact_root()
    work_dir = root / "replays" / str(run.pk)
    if work_dir.exists():
        shutil.rmtree(work_dir)
    work_dir.mkdir(parents=True)
    steps = rev.trajectory or []
    now = timezone.now()
    layers = task_layers(run.task, layers)  # a released task reads the layer versions its release pinned
    fp = input_fingerprint(run.task, rev, run.mode, layers)
    # a run that ran before (crashed, re-queued) may have step rows: they go
    restarted = run.started_at is not None or run.status != ReplayRun.Status.QUEUED
    start = dict(status=ReplayRun.Status.RUNNING, started_at=now, heartbeat_at=now, steps_done=0, error="",
                 artifact_dir=str(work_dir.relative_to(root)), steps_total=len(steps), tool_calls=0, cache_hits=0,
                 input_fingerprint=fp, final_answer=None, filled_trajectory=[], replay_hash="",
                 artifact_manifest={}, finished_at=None, variant_check=None)
    if use_cache:  # an identical earlier run: its steps, answer and variant check are copied
        done = _reuse_identical_run(run, fp, work_dir, start, restarted)
        if done is not None:
            return done
    # a robustness variant's rules (the docstring)
    variant = {"kind": variants[0].kind, "params": variants[0].params, "tools": variants[0].tools} if variants else None
    blocked = unsolvable_block({"trajectory": steps, "input_data": rev.input_data}, variant) if variant else None
    if blocked is not None:  # the plan runs up to the step that cannot proceed (unsolvable_block's rule)
        steps = steps[:blocked["step"]]
        start.update(steps_total=len(steps), variant_check={"kind": "unsolvable", "blocked": blocked})
    resolver = LayerResolver(run.task.event_id, layers)
    checkpoint_dir = settings.STUDIO_CHECKPOINT_DIR or None
    ctx = ToolContext(work_dir=work_dir, resolve_path=resolver, gt_lookup=resolver.gt_lookup, perception_mode=run.mode,
                      checkpoint_dir=Path(checkpoint_dir) if checkpoint_dir else None)
    if run.mode == "model":
        ckpts = _checkpoint_fingerprint(checkpoint_dir)

        def fingerprint(tool, args):
            return {"checkpoints": ckpts}
    elif run.mode == "gt":
        fingerprint = resolver.fingerprint
    else:
        def fingerprint(tool, args):
            return None

    cache = DbStepCache() if use_cache else _WriteOnlyCache()
    progress = _Progress(run, cache, steps, start, restarted)
    try:
        result = run_trajectory(steps, ctx, on_step=progress, cache=cache, store=artifact_store(),
                                fingerprint=fingerprint)
    except Exception as exc:  # an engine bug, not a tool failure: record it, never leave the run "running"
        log.exception("replay %s crashed", run.pk)
        progress.flush()
        ReplayRun.objects.filter(pk=run.pk).update(status=ReplayRun.Status.FAILED, error=f"replay crashed: {exc}", finished_at=timezone.now())
        run.refresh_from_db()
        return _announce_failure(run)
    except BaseException:  # SystemExit / KeyboardInterrupt: what finished is kept (cache, progress)
        progress.flush()
        raise
    finished = timezone.now()
    common = dict(filled_trajectory=to_storage(result.filled_trajectory), finished_at=finished, heartbeat_at=finished,
                  tool_calls=result.tool_calls, cache_hits=result.cache_hits, artifact_manifest=result.manifest,
                  steps_done=progress.done)
    if not result.ok:
        failed = result.failed_step
        progress.finish(status=ReplayRun.Status.FAILED, error=failed.error if failed else "replay failed", **common)
        return _announce_failure(run)
    try:
        answer = fill_answer(rev.answer_spec, result.trajectory)
    except Exception as exc:
        progress.finish(status=ReplayRun.Status.FAILED, error=f"answer: {exc}", **common)
        return _announce_failure(run)
    answer = to_storage(_jsonable(answer))
    if variant is not None and variant["kind"] == TaskVariant.Kind.BROKEN:
        common["variant_check"] = to_storage(_jsonable(alternative_check(variant["tools"], result, ctx)))
    progress.finish(status=ReplayRun.Status.SUCCEEDED, final_answer=answer,
                    replay_hash=replay_hash(common["filled_trajectory"], answer), **common)
    return run


def alternative_check(tool_set: dict, result, ctx: ToolContext) -> dict | None:
    """The broken step of a broken variant run again with its alternative (issue 21: "an
    alternative computes the same observation on replay"; QC's ``variant.alternative_differs``).

    ``tool_set``: the variant's ``TaskVariant.tools``; ``result``: the gold replay's
    ``ReplayResult`` (authored steps, each with its resolved arguments and observation); ``ctx``:
    the replay's tool context (the same work dir, so references to earlier outputs resolve). The
    alternative is the one an agent is served (``replay.variant_tools.published_tools_for``) and
    is called with the original step's resolved arguments. Returns ``{kind: "broken", step,
    tool, alternative, same, changes: [{path, before, after}], error}``: observations compared
    leaf by leaf as ``recorded_diff`` does (numbers to 1e-6 relative, file-name leaves and the
    ``tool`` key, which names the alternative, skipped); ``error`` is the alternative's failure.
    None when the step is not in the replay (QC's ``variant.broken_step`` reports that)."""
    broken = (tool_set or {}).get("broken") or {}
    j = broken.get("step")
    try:
        spec = get_tool(str(broken.get("tool") or ""))
    except ToolError:
        return None
    if not isinstance(j, int) or not 0 <= j < len(result.steps):
        return None
    step = result.steps[j]
    try:
        if get_tool(step.call).name != spec.name:  # the step calls another tool now
            return None
    except ToolError:
        return None
    alt = next((p for p in published_tools_for(tool_set, [spec]) if p.role == "alternative"), None)
    out = {"kind": "broken", "step": j, "tool": broken["tool"], "alternative": broken.get("alternative"),
           "same": False, "changes": [], "error": None}
    if alt is None:
        out["error"] = "the variant names no alternative"
        return out
    try:
        obs = alt.call(copy.deepcopy(step.resolved_args or {}), ctx)
    except ToolError as exc:
        out["error"] = str(exc)
        return out

    def strip(o):
        return {k: v for k, v in o.items() if k != "tool"} if isinstance(o, dict) else o

    out["changes"] = leaf_changes(_jsonable(strip(step.obs)), _jsonable(strip(obs)),
                                  equal=lambda x, y: _close(x, y, 1e-6), skip=_names_a_file)
    out["same"] = not out["changes"]
    return out


def _finish_succeeded(run: ReplayRun, answer, h: str, **fields) -> None:
    """Mark ``run`` succeeded and decide whether it is the gold (see the module docstring), in the
    run's one ``UPDATE``: the newest other accepted gold of the task is read by two scalar
    subqueries of that statement and the decision returned (``RETURNING``), so that it costs no
    round trip of its own. The rule (unchanged): a GT-mode run is accepted when the task has no
    gold, or its gold was accepted automatically (``accepted_by`` null), or it has the gold's
    hash (then it takes the gold's ``accepted_by``); other modes never are.
    Joins the caller's transaction when there is one; ``fields`` go to ``_save_fields`` (and
    ``relax_commit`` is set: the replay's own transactions end with this statement)."""
    fields.update(status=ReplayRun.Status.SUCCEEDED, error="", final_answer=answer, replay_hash=h)
    if run.mode != GOLD_MODE:
        _save_fields(run, relax_commit=True, gold_accepted=False, accepted_by_id=None, **fields)
        return
    q = transaction.get_connection(router.db_for_write(ReplayRun)).ops.quote_name
    meta = ReplayRun._meta
    by, hsh = q(meta.get_field("accepted_by").column), q(meta.get_field("replay_hash").column)
    gold = dict(where=dict(task=run.task_id, mode=GOLD_MODE, status=ReplayRun.Status.SUCCEEDED, gold_accepted=True),
                exclude_pk=run.pk, select_params=[h])
    auto_sql, auto_params = newest_row_sql(ReplayRun, f"NOT ({by} IS NOT NULL AND {hsh} <> %s)", **gold)
    by_sql, by_params = newest_row_sql(ReplayRun, f"CASE WHEN {hsh} = %s THEN {by} END", **gold)
    back = _save_fields(run, relax_commit=True, returning=("gold_accepted", "accepted_by"),
                        expressions={"gold_accepted": (f"COALESCE(({auto_sql}), TRUE)", auto_params),
                                     "accepted_by": (f"({by_sql})", by_params)}, **fields)
    if back is not None:
        run.gold_accepted, run.accepted_by_id = bool(back[0]), back[1]
        if not run.gold_accepted:  # a changed gold answer waits for a person (rare: the hot path pays nothing)
            task = run.task
            emit("gold.changed", {"replay_id": run.pk, "task_id": task.pk, "question_id": task.question_id}, task=task)


#: the ``ReplayStep`` columns a reused run copies from the run it reuses (``duration_ms`` and
#: ``cached`` are set: nothing ran)
_COPIED_STEP_FIELDS = ("index", "call", "status", "args", "resolved_args", "obs", "artifacts", "error", "expanded")


def _reuse_identical_run(run: ReplayRun, fp: str, work_dir: Path, start: dict, restarted: bool) -> ReplayRun | None:
    """The whole-run level of the cache: when a succeeded replay with the same input fingerprint
    (same trajectory and answer spec, same layer contents, same tool versions and mode) exists
    and its artifacts are all in the content store, its steps are copied (``cached``: no tool
    runs) and its artifacts linked into ``work_dir``. Returns the finished run, or None.

    The step rows and the filled trajectory are copied inside the database (``INSERT … SELECT``
    and a subquery), never decoded here; the returned run loads ``filled_trajectory`` when read."""
    prev = newest_row(ReplayRun, ("id", "artifact_manifest", "final_answer", "replay_hash", "tool_calls",
                                  "cache_hits", "steps_done", "variant_check"), exclude_pk=run.pk,
                      where=dict(task=run.task_id, mode=run.mode, status=ReplayRun.Status.SUCCEEDED,
                                 input_fingerprint=fp))
    if prev is None:
        return None
    prev_id, manifest, answer, h, tool_calls, cache_hits, steps_done, variant_check = prev
    store = artifact_store()
    manifest = manifest or {}
    if not all(store.has(sha) for sha in manifest.values()):
        return None
    for name, sha in manifest.items():
        store.materialize(sha, work_dir / name)
    finished = timezone.now()
    fields = {**start, "steps_done": steps_done, "steps_total": steps_done,  # a succeeded run did them all
              "tool_calls": 0, "cache_hits": tool_calls + cache_hits,
              "artifact_manifest": manifest, "finished_at": finished, "heartbeat_at": finished,
              "variant_check": variant_check}
    fields.pop("filled_trajectory")
    copied = dict(where={"run": prev_id}, values={"run": run.pk, "duration_ms": 0, "cached": True})
    if not restarted and one_statement_writes(ReplayRun) and \
            not transaction.get_connection(router.db_for_write(ReplayRun)).in_atomic_block:
        # PostgreSQL in autocommit: the steps' copy rides in the run's UPDATE (``WITH … INSERT``),
        # one statement and one transaction (one round trip, where a transaction was six)
        _finish_succeeded(run, answer, h, filled_trajectory_of=prev_id,
                          with_statements=[copy_rows_sql(ReplayStep, list(_COPIED_STEP_FIELDS), **copied)], **fields)
        return run
    with transaction.atomic():  # the last UPDATE relaxes the commit (module docstring)
        if restarted:
            ReplayStep.objects.filter(run=run).delete()
        copy_rows(ReplayStep, list(_COPIED_STEP_FIELDS), **copied)
        _finish_succeeded(run, answer, h, filled_trajectory_of=prev_id, **fields)
    return run


class _WriteOnlyCache(DbStepCache):
    """``use_cache=False``: every tool runs; the results are still stored.

    A replay without the cache mostly recomputes steps whose entries exist already (the point is
    to re-run them), and an entry is never replaced (``ON CONFLICT DO NOTHING``): so
    ``statements`` (and so ``flush``) first asks which keys are stored (one indexed SELECT) and sends only the others,
    which spares encoding (and on PostgreSQL parsing as ``jsonb``) observations that would be
    dropped as conflicts. (On PostgreSQL, sending every entry with the last statement instead, to
    save that SELECT's round trip, was measured on 2026-12-03: no change of the bench's overhead
    beyond its noise, docs/benchmarks.md.)"""

    def get(self, key):
        return None

    def statements(self) -> list[tuple[str, list]]:
        if self.pending:
            for key in existing_values(StepCacheEntry, "key", self.pending):
                self.pending.pop(key, None)
        return super().statements()


def _jsonable(value):
    """Round-trip through JSON so that stored values equal what the API returns."""
    return json.loads(json.dumps(value, default=str))


# ============================================================================================
# Gold answers: current gold, diff, acceptance
# ============================================================================================
def current_gold(task: Task, *, exclude: int | None = None) -> ReplayRun | None:
    """The task's gold: its newest succeeded replay with ``gold_accepted`` (any revision)."""
    qs = ReplayRun.objects.filter(task=task, mode=GOLD_MODE, status=ReplayRun.Status.SUCCEEDED, gold_accepted=True)
    if exclude is not None:
        qs = qs.exclude(pk=exclude)
    # the big JSON columns load only when read
    return qs.defer("filled_trajectory", "artifact_manifest", "final_answer").order_by("-id").first()


def latest_successful_replay(task: Task) -> ReplayRun | None:
    """The gold of the task's head revision: its newest succeeded, accepted replay, or None
    (never replayed, or the newest replay's change is waiting for ``accept_gold``)."""
    return ReplayRun.objects.filter(task=task, revision_id=task.head_id, mode=GOLD_MODE,
                                    status=ReplayRun.Status.SUCCEEDED, gold_accepted=True).order_by("-id").first()


def succeeded_runs_of_head(task: Task):
    """The succeeded replays of ``task``'s head revision, newest first (a queryset): what QC reads
    as the task's replays (registered as ``annotation.services.qc.ReplaySource``)."""
    return ReplayRun.objects.filter(task=task, revision_id=task.head_id,
                                    status=ReplayRun.Status.SUCCEEDED).order_by("-id")


def require_succeeded_replay(task: Task) -> None:
    """Review's submission check "a succeeded replay of the head revision exists" (registered by
    ``replay.apps.ReplayConfig.ready``): reviewers judge the filled gold answer, so it must exist.
    Raises ``annotation.services.review.TransitionError``."""
    if latest_successful_replay(task) is None:
        raise TransitionError(f"replay: revision r{task.version} of {task.question_id} has no succeeded replay; "
                              "replay it so that the reviewer sees the filled answer")


def pending_replay(task: Task) -> ReplayRun | None:
    """The newest succeeded replay newer than the gold that is waiting for acceptance, or None."""
    gold = current_gold(task)
    qs = ReplayRun.objects.filter(task=task, mode=GOLD_MODE, status=ReplayRun.Status.SUCCEEDED, gold_accepted=False)
    if gold is not None:
        qs = qs.filter(pk__gt=gold.pk)
    return qs.order_by("-id").first()


def replay_diff(run: ReplayRun, base: ReplayRun | None = None) -> dict:
    """What changed between ``base`` (default: the gold before ``run``) and ``run``.

    Returns ``{run, base, pending, changed, answer: [{field, before, after, changed}],
    steps: [{index, call, state: same|filled|changed|added|removed, changes: [{path, before, after}]}]}``;
    steps are compared on their authored index, observations leaf by leaf (``kernel.golddiff``:
    ``filled`` where the gold before had no observation of the step).
    """
    if base is None:
        base = (ReplayRun.objects.filter(task_id=run.task_id, mode=GOLD_MODE, status=ReplayRun.Status.SUCCEEDED, gold_accepted=True,
                                         pk__lt=run.pk).order_by("-id").first())
    answer_rows, step_rows = [], []
    before_answer = (base.final_answer or {}) if base else {}
    after_answer = run.final_answer or {}
    for name in sorted(set(before_answer) | set(after_answer)):
        b, a = before_answer.get(name), after_answer.get(name)
        answer_rows.append({"field": name, "before": b, "after": a, "changed": base is not None and a != b})
    if base is not None:
        step_rows = step_diff(collapse_expanded(base.filled_trajectory or [])[0],
                              collapse_expanded(run.filled_trajectory or [])[0])
    changed = base is not None and (base.replay_hash != run.replay_hash)
    return {"run": run.pk, "base": base.pk if base else None, "pending": run.status == ReplayRun.Status.SUCCEEDED
            and not run.gold_accepted, "changed": changed, "gold_accepted": run.gold_accepted,
            "accepted_by": run.accepted_by.username if run.accepted_by_id else None,
            "answer": answer_rows, "steps": step_rows}


#: the tool server whose observations depend on the perception source (GT masks or a model)
PERCEPTION_SERVER = "Perception"


def _names_a_file(path: str) -> bool:
    """True for an observation leaf that names an artifact (``mask_path``, ``results[0].
    output_path``, ``path``): two runs name their files differently (the benchmark's absolute
    temp paths, the studio's content-hashed names), so such leaves are not compared."""
    last = path.rsplit(".", 1)[-1].split("[", 1)[0]
    return last == "path" or last.endswith("_path")


def _close(a: Any, b: Any, rtol: float) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        fa, fb = float(a), float(b)
        if fa == fb or (math.isnan(fa) and math.isnan(fb)):  # equal infinities; NaN recorded and replayed
            return True
        return abs(fa - fb) <= 1e-9 + rtol * max(abs(fa), abs(fb))
    return a == b


def _is_perception(call: str) -> bool:
    try:
        return get_tool(str(call).split("(", 1)[0].strip()).server == PERCEPTION_SERVER
    except ToolError:
        return False


def recorded_diff(run: ReplayRun, recorded: list[dict], *, rtol: float = 1e-6) -> dict:
    """A replay against the observations recorded in a benchmark-layout task file.

    ``recorded``: the task's ``trajectory`` as the file holds it (calls, args and the ``obs`` the
    benchmark's tools returned; loop expansions allowed). Both sides are compared on authored
    indices (``collapse_expanded``), observations leaf by leaf: numbers within ``rtol``
    (relative; the issue's 1e-6), leaves that name files skipped (``_names_a_file``).

    A perception step (server ``Perception``) whose observation differs gets state ``source``:
    the studio replays with GT masks (``run.mode``), the file's observation came from the
    benchmark's model, so the difference is the perception source and not a tool disagreement;
    the row's ``note`` says so. A step whose recorded observation is blank (``{}``, ``null`` or
    no ``obs``: not recorded, how a file is authored before its gold is replayed) is ``filled``
    (``kernel.golddiff``). Other steps are ``same``, ``changed``, ``added`` or ``removed``.

    Returns ``{run, mode, steps: [{index, call, state, changes, note?}], changed, filled}`` where
    ``changed`` is true when a non-perception step differs (a gold the benchmark's tools would
    not give: a state in ``kernel.golddiff.DIFFERS``), false when at most perception sources
    differ or blank observations were filled; ``filled`` counts the filled steps.
    """
    rows = step_diff(collapse_expanded(recorded or [])[0], collapse_expanded(from_storage(run.filled_trajectory or []))[0],
                     calls=False, equal=lambda x, y: _close(x, y, rtol), skip=_names_a_file,
                     call_name=lambda c: str(c).split("(", 1)[0].strip())
    for row in rows:
        if row["state"] == "changed" and _is_perception(row["call"]):
            row["state"] = "source"
            row["note"] = (f"perception source: the studio replayed this step with "
                           f"{(run.mode or 'gt').upper()} perception, the file's observation came "
                           f"from the benchmark's model; the difference is the source of the "
                           f"masks, not a tool disagreement")
    return {"run": run.pk, "mode": run.mode, "steps": rows,
            "changed": any(r["state"] in DIFFERS for r in rows),
            "filled": sum(r["state"] == "filled" for r in rows)}


def recorded_trajectory(task: Task, path: str | Path) -> list[dict]:
    """The recorded trajectory of ``task`` in a benchmark-layout task file (its sample by
    ``sample_id``, its task by ``task_index``). Raises ``TaskImportError`` naming the file and
    what is missing."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise TaskImportError(f"{path}: cannot read a task file: {exc}")
    for sample in data if isinstance(data, list) else []:
        if isinstance(sample, dict) and str(sample.get("sample_id")) == task.sample_id:
            tasks = sample.get("tasks") or []
            if 0 <= task.task_index < len(tasks) and isinstance(tasks[task.task_index], dict):
                traj = tasks[task.task_index].get("trajectory")
                if isinstance(traj, list):
                    return traj
                raise TaskImportError(f"{path.name}: sample '{task.sample_id}', task "
                                      f"{task.task_index}: field 'trajectory' is not a list")
            raise TaskImportError(f"{path.name}: sample '{task.sample_id}' has no task "
                                  f"{task.task_index}")
    raise TaskImportError(f"{path.name}: no sample '{task.sample_id}' (task {task.question_id})")


def kept_recorded_trajectory(revision) -> list[dict] | None:
    """The observations recorded in the file ``revision`` was imported from (issue 17 item 4).

    An imported revision keeps the file's own sample and task (``TaskRevision.source``,
    ``kernel.content.source_record``: ``{"task": the task as written, "content": what the importer
    derived, ...}``). Returns the written task's ``trajectory`` (calls, args, ``obs``; loop
    expansions as written) when the revision's gold plan is still the one imported (its
    ``trajectory`` equal, as JSON values, to the kept ``content.trajectory``): after an author
    edits the plan the file's observations belong to another plan and are not compared. A step
    with a blank observation (``{}``, ``null``, no ``obs``: an authored file) is not recorded and
    the diff says ``filled`` (``kernel.golddiff``). None otherwise (no source, no trajectory, an
    edited plan)."""
    if revision is None:
        return None
    try:
        record = source_from_text(revision.source)
    except ValueError:
        return None
    if not isinstance(record, dict) or not isinstance(record.get("task"), dict):
        return None
    written = record["task"].get("trajectory")
    if not isinstance(written, list) or not written:
        return None
    imported = (record.get("content") or {}).get("trajectory") if isinstance(record.get("content"), dict) else None
    if imported is None or not same_value(to_storage(imported), revision.trajectory):
        return None
    return written


def task_recorded_diff(run: ReplayRun) -> dict | None:
    """``recorded_diff`` of ``run`` against the observations kept on its revision
    (:func:`kept_recorded_trajectory`), with ``against`` = the imported file's name; None when the
    revision keeps none."""
    recorded = kept_recorded_trajectory(run.revision)
    if recorded is None:
        return None
    record = source_from_text(run.revision.source)
    return {**recorded_diff(run, recorded), "against": str(record.get("file") or "the imported task file")}


def task_replay_diff(task: Task) -> dict | None:
    """The diff a task page shows: the pending replay against the gold, else the newest succeeded
    replay against the gold before it; None when the task has no succeeded replay. ``recorded``:
    the same replay against the observations of the file the revision was imported from
    (:func:`task_recorded_diff`), or None; ``variant_check``: a robustness variant's
    ``ReplayRun.variant_check`` (where an unsolvable plan stopped, the broken step replayed
    with the alternative), or None."""
    run = pending_replay(task) or ReplayRun.objects.filter(task=task, mode=GOLD_MODE, status=ReplayRun.Status.SUCCEEDED).order_by("-id").first()
    if run is None:
        return None
    return {**replay_diff(run), "recorded": task_recorded_diff(run), "variant_check": run.variant_check}


@transaction.atomic
def record_imported_gold(user, task: Task, revision, *, filled_trajectory: list, final_answer, eval_spec: dict,
                         answer_format: dict, artifact_dir: str, at, auto_accepted: bool = False) -> ReplayRun:
    """The gold of a task imported from a release: a succeeded replay run of ``revision`` in mode
    ``import``, accepted, holding the file's trajectory with its observations (stored form), final
    answer, eval spec and answer format, and ``artifact_dir`` (relative to the artifact root: the
    file's own sample and task and its gold polygons). Nothing is executed; ``replay_hash`` is the
    engine's hash of trajectory and answer, so a later replay of the same content compares equal.
    ``at``: the import's time (started and finished). Accepted by ``user``, or with
    ``auto_accepted`` by nobody (accepted automatically), so that the next replay takes its place
    by itself (a file whose gold is blank: ``import_release --accept-proposals``)."""
    steps = len(filled_trajectory)
    return ReplayRun.objects.create(
        task=task, revision=revision, mode="import", status=ReplayRun.Status.SUCCEEDED,
        steps_total=steps, steps_done=steps, final_answer=final_answer, eval_spec=eval_spec,
        answer_format=answer_format, filled_trajectory=filled_trajectory,
        replay_hash=replay_hash(filled_trajectory, final_answer), gold_accepted=True,
        accepted_by=None if auto_accepted else user, requested_by=user, artifact_dir=artifact_dir, started_at=at, finished_at=at)


@transaction.atomic
def accept_gold(user, run: ReplayRun) -> ReplayRun:
    """A person accepts ``run``'s observations and answer as the task's gold.

    Raises ``PermissionDenied`` (role), ``ReplayStateError`` when the run did not succeed or an
    accepted gold newer than it exists. Writes an audit event ``gold.accept``.
    """
    locked = ReplayRun.objects.select_for_update().select_related("task", "revision").get(pk=run.pk)
    require(user, ACCEPT_ACTION, locked.task)
    require_unreleased(locked.task, "accepting a new gold")
    if locked.mode != GOLD_MODE:
        raise ReplayStateError(f"replay {locked.pk} ran with {locked.mode} perception; the gold comes from GT-mode replays")
    if locked.status != ReplayRun.Status.SUCCEEDED:
        raise ReplayStateError(f"replay {locked.pk} is {locked.status}; only a succeeded replay can become the gold")
    gold = current_gold(locked.task)
    if gold is not None and gold.pk > locked.pk:
        raise ReplayStateError(f"replay {locked.pk} is older than the current gold (replay {gold.pk})")
    locked.gold_accepted = True
    locked.accepted_by = user
    locked.save(update_fields=["gold_accepted", "accepted_by"])
    AuditEvent.objects.create(task=locked.task, actor=user, action="gold.accept",
                              revision_number=locked.revision.number,
                              reason=f"replay {locked.pk} ({locked.replay_hash[:12]}) accepted as gold")
    return locked


# ============================================================================================
# Bulk and recovery
# ============================================================================================
def resume_stuck_replays(timeout_s: float = 900.0) -> list[int]:
    """Re-queue runs left ``running`` (no progress for ``timeout_s``) or ``queued`` for longer
    than that; returns their ids. Each is executed again from the start (``execute_replay``)."""
    from replay.jobs import run_replay

    cutoff = timezone.now() - timedelta(seconds=timeout_s)
    stuck = []
    for run in ReplayRun.objects.filter(status__in=[ReplayRun.Status.RUNNING, ReplayRun.Status.QUEUED]).order_by("id"):
        last = run.heartbeat_at or run.started_at or run.created_at
        if last is not None and last < cutoff:
            stuck.append(run.pk)
    for pk in stuck:
        ReplayRun.objects.filter(pk=pk).update(status=ReplayRun.Status.QUEUED, heartbeat_at=timezone.now())
        run_replay.delay(pk)
    return stuck


#: the replay's kind in :mod:`studio.background`; its sweep never waits less than this for a
#: replay's heartbeat (written per step), however short ``STUDIO_JOB_STALE_AFTER_S`` is
REPLAY_KIND, REPLAY_STUCK_AFTER_S = "replay", 900.0


def sweep_replays(stale_after: float | None = None) -> list[dict]:
    """The sweeper of replays (:func:`studio.background.register_sweeper`): re-queue the runs
    without progress for ``max(stale_after, REPLAY_STUCK_AFTER_S)`` seconds
    (:func:`resume_stuck_replays`; without a broker they run again in the sweeping thread).
    Returns ``{kind, id, action: "requeued", why, removed: []}`` per run."""
    limit = max(float(stale_after or 0.0), REPLAY_STUCK_AFTER_S)
    return [{"kind": REPLAY_KIND, "id": pk, "action": "requeued", "why": f"no progress for {limit:g} s", "removed": []}
            for pk in resume_stuck_replays(limit)]


def artifact_path(run: ReplayRun, name: str) -> Path:
    """Absolute path of an artifact of ``run``; ``kernel.paths.OutsideRoot`` (a ``ValueError``)
    if ``name`` escapes the run's folder."""
    return confine(Path(settings.STUDIO_ARTIFACT_ROOT) / run.artifact_dir, name, what="the run's folder")


def _announce_failure(run: ReplayRun) -> ReplayRun:
    """Emit ``replay.failed`` for ``run`` (its task's owners hear of it, ``docs/notifications.md``); returns it."""
    run.refresh_from_db(fields=["status", "error"])
    task = run.task
    emit("replay.failed", {"replay_id": run.pk, "task_id": task.pk, "question_id": task.question_id,
                           "error": (run.error or "")[:300]}, task=task)
    return run
