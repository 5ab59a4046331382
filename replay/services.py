"""Replay services: start a replay of a task revision, execute it, diff it, accept its gold.

The engine (``replay.engine``) is pure; this module binds it to the database: paths in a task's
arguments resolve to the event's layers (confined to STUDIO_DATA_ROOT), perception tools in GT mode
look up the mask layer that annotates their input image, and finished steps are stored every
``FLUSH_S`` seconds (``_Progress``) so that progress (steps done / total) is visible while a long
replay runs; a replay shorter than that is written once, in one transaction, when it ends (it shows
``queued`` until then). The statements per replay are few and pinned by a test
(``tests/test_replay_fast_paths.py``); the hot ones go through ``studio.fastsql``.

Storage (all under ``STUDIO_ARTIFACT_ROOT``)
    ``cas/<sha256[:2]>/<sha256>``: every artifact, content-addressed (``ArtifactStore``).
    ``replays/<run id>/<name>``: the run's folder; each artifact a hard link into ``cas/`` (a copy
    across file systems). ``ReplayRun.artifact_manifest`` maps each name to its hash.
    The step cache is the table ``StepCacheEntry`` (``DbStepCache``), keyed by
    ``replay.engine.step_key``: an unchanged step (same tool and version, same resolved
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
    copy) commit without waiting for the WAL flush (``studio.fastsql.commit_without_flush_wait``:
    about 4 ms a commit here, half a warm replay's time): a crash of the database server (not of
    a worker) may lose the commits of its last 0.6 s or so. A lost result leaves its run
    ``queued`` or ``running`` for ``resume_stuck_replays`` to run again, with the same result; a
    lost new run is gone (its queued job finds no run and fails) and is requested again. The
    task, its revisions and ``accept_gold`` commit as every other write does.
"""
from __future__ import annotations

import functools
import json
import logging
import os
import shutil
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from annotation.models import AuditEvent, Layer, Task
from annotation.services.tasks import require_unreleased
from replay.engine import (ArtifactStore, CachedStep, authored_steps, collapse_expanded, fill_answer, replay_hash,
                           run_trajectory)
from replay.models import ReplayRun, ReplayStep, StepCacheEntry
from replay.tools.base import GTMask, ToolContext, ToolError, ToolInputError, file_sha256
from replay.tools.registry import get_tool
from kernel.catalogue import result_types
from kernel.content import answer_source  # noqa: F401  (re-exported)
from kernel.content import answer_proposals as _answer_proposals
from kernel.content import MAX_SAMPLE_ID, source_record, task_content
from kernel.inputs import base_name, walk_data_paths
from kernel.taskfile import TaskFileError, from_storage, read_task_file, source_text, to_storage
from kernel.vocabulary import dimension_of_code, dimension_of_file
from studio.fastsql import (commit_without_flush_wait, copy_rows, insert_instance, insert_rows, load_instances,
                            newest_row, update_by, update_rows)
from studio.permissions import require

log = logging.getLogger(__name__)

# The image arguments a perception tool's GT lookup follows, most specific first.
GT_IMAGE_ARGS = ("post_image_path", "post_image", "image_path", "pre_image_path", "pre_image")
#: the permission that accepting a changed gold answer needs (see the report: a dedicated
#: ``gold.accept`` row would be stricter)
ACCEPT_ACTION = "task.replay"
#: the perception mode whose replays give the gold (model/classical runs never become gold)
GOLD_MODE = "gt"


class ReplayStateError(Exception):
    """A replay is not in a state that allows the operation; the message says why."""


@functools.lru_cache(maxsize=8)
def _resolved_root(setting: str) -> Path:
    return Path(setting).resolve()


def stored_path(relative: str) -> str:
    """The absolute path of a file stored under STUDIO_DATA_ROOT, normalised without touching the
    file system (symbolic links are not followed: ``data_path`` does that before a file is
    handed to a tool); ``ValueError`` if it lies outside the root."""
    root = str(_resolved_root(str(settings.STUDIO_DATA_ROOT)))
    p = os.path.normpath(os.path.join(root, relative))
    if p != root and not p.startswith(root + os.sep):
        raise ValueError(f"path '{relative}' lies outside the data root")
    return p


def data_path(relative: str) -> Path:
    """Absolute path of a file stored under STUDIO_DATA_ROOT (symbolic links resolved);
    ``ValueError`` if it escapes the root."""
    root = _resolved_root(str(settings.STUDIO_DATA_ROOT))
    p = (root / relative).resolve()
    if not p.is_relative_to(root):
        raise ValueError(f"path '{relative}' lies outside the data root")
    return p


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
                tool=None, argument="path", expected="a layer file name of this event",
                message=f"'{value}' is neither an output of an earlier step nor a layer of this event",
            )
        path = data_path(layer.path)
        self.by_stored_path.setdefault(str(path), layer)
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
            path=data_path(mask.path),
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
        return {"gt_sha256": file_sha256(data_path(mask.path)),
                "gt_classes": {str(k): v for k, v in sorted((mask.class_map or {}).items())},
                "gsd_m": mask.gsd_m}


def _checkpoint_fingerprint(directory: str | None) -> list:
    if not directory or not Path(directory).is_dir():
        return []
    return sorted([p.name, file_sha256(p)] for p in Path(directory).iterdir()
                  if p.is_file() and p.suffix in (".safetensors", ".pt", ".pth"))


class DbStepCache:
    """The step cache on the ``StepCacheEntry`` table (``replay.engine.StepCache``).

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

    def flush(self) -> None:
        if self.pending:
            now = timezone.now()
            insert_rows(StepCacheEntry, ["key", "tool", "tool_version", "obs", "artifacts", "hits", "created_at"],
                        ([key, tool, version, to_storage(e.obs), e.artifacts, 0, now]
                         for key, (tool, version, e) in self.pending.items()),
                        ignore_conflicts=True)
            self.pending.clear()
        if self.hit_keys:
            StepCacheEntry.objects.filter(key__in=set(self.hit_keys)).update(hits=F("hits") + 1,
                                                                           last_used_at=timezone.now())
            self.hit_keys.clear()


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
        with transaction.atomic():
            commit_without_flush_wait(ReplayRun)
            self._write()
            _save_fields(self.run, steps_done=self.done, heartbeat_at=timezone.now())
        self.last = _time.monotonic()

    def finish(self, **fields) -> None:
        """Write what is buffered and set the run's final ``fields``, in one transaction; a
        ``status`` of ``succeeded`` goes through ``_finish_succeeded`` (``final_answer`` and
        ``replay_hash`` given), which decides on the gold."""
        with transaction.atomic():
            commit_without_flush_wait(ReplayRun)
            if not self.inserted:  # one UPDATE of the run: its start fields, then the final ones
                fields = {**self.start, **fields}
            self._write(start=False)
            if fields.get("status") == ReplayRun.Status.SUCCEEDED:
                fields.pop("status")
                _finish_succeeded(self.run, fields.pop("final_answer"), fields.pop("replay_hash"), **fields)
            else:
                _save_fields(self.run, **fields)

    def _write(self, start: bool = True) -> None:
        """Write the cache's new entries and the buffered steps; on the first write also the step
        rows and (``start``) the run's start fields."""
        self.cache.flush()
        if not self.inserted:
            if self.restarted:
                ReplayStep.objects.filter(run=self.run).delete()
            if start:
                _save_fields(self.run, **self.start)
            insert_rows(ReplayStep, ["run", "index", "call", *self.FIELDS, "args"],
                        ([self.run.pk, r.index, r.call, *(getattr(r, f) for f in self.FIELDS), r.args]
                         for r in self.rows))
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
    from replay.tasks import run_replay

    run_replay.delay(run.pk)
    run.refresh_from_db()
    return run


def input_fingerprint(task: Task, revision, mode: str, layers: list[Layer] | None = None) -> str:
    """SHA-256 of what a replay of ``revision`` reads: its trajectory and answer spec, the contents
    of the event's layers (their ``sha256``, else path, size and mtime) with their GSD and CRS
    (a maintainer may record them later: annotation.services.layers), the versions of the
    tools it names and the perception mode (``replay --changed-only`` compares it).
    ``layers``: the event's ``Layer`` rows when the caller has them already (saves the query)."""
    import hashlib

    from replay.engine import step_call
    from replay.tools.base import canonical_json
    from replay.tools.registry import get_tool

    from replay.engine import ENGINE_CACHE_VERSION

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
    # the WAL flush on PostgreSQL (see the module docstring: a queued run is redone from its task)
    with transaction.atomic():
        commit_without_flush_wait(ReplayRun)
        return insert_instance(ReplayRun(
            task=task, revision=rev, mode=mode, steps_total=len(rev.trajectory or []), requested_by=user,
            eval_spec={f["name"]: f["eval_type"] for f in rev.answer_spec},
            answer_format={f["name"]: f.get("answer_format", "") for f in rev.answer_spec if f.get("answer_format")},
        ))


def _save_fields(run: ReplayRun, *, filled_trajectory_of: int | None = None, **fields) -> None:
    """``UPDATE`` the run's row with ``fields`` (plain values, by field name or attname) and set them
    on ``run`` too, so that the caller's instance matches the row without reading it back.

    ``filled_trajectory_of``: copy ``filled_trajectory`` from that run inside the database (the
    instance then loads it when it is read). One statement, written here rather than through
    ``QuerySet.update`` because replays call it on their hot path (the ORM's compilation cost
    more than the statement)."""
    copied = ("filled_trajectory",) if filled_trajectory_of is not None else ()
    update_by(ReplayRun, {"id": run.pk}, fields, copy_fields=copied, copy_from={"id": filled_trajectory_of})
    for name, value in fields.items():
        setattr(run, name, value)
    if filled_trajectory_of is not None:
        run.__dict__.pop("filled_trajectory", None)  # a deferred field: Django loads it when read


def execute_replay(run_id: int, *, use_cache: bool = True) -> ReplayRun:
    """Run a replay to the end and store every step. Safe to call again on a crashed run:
    its old steps and folder are discarded and the run starts over (same inputs, same result).
    ``use_cache=False`` calls every tool (the cache is still filled).

    Returns the run as stored (its fields set from what was written, not read back)."""
    # the run with its revision and task, and below the event's layers: one SELECT each, built once
    # per process (``load_instances``; the ORM's compilation cost several times the statements)
    found = load_instances(ReplayRun, where={"id": run_id}, related=("revision", "task"))
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
    # the fields the fingerprint and the resolver read (``LAYER_FIELDS``), no more
    layers = load_instances(Layer, where={"event": run.task.event_id}, fields=LAYER_FIELDS, order_by=("id",))
    fp = input_fingerprint(run.task, rev, run.mode, layers)
    # a run that ran before (crashed, re-queued) may have step rows: they go
    restarted = run.started_at is not None or run.status != ReplayRun.Status.QUEUED
    start = dict(status=ReplayRun.Status.RUNNING, started_at=now, heartbeat_at=now, steps_done=0, error="",
                 artifact_dir=str(work_dir.relative_to(root)), steps_total=len(steps), tool_calls=0, cache_hits=0,
                 input_fingerprint=fp, final_answer=None, filled_trajectory=[], replay_hash="",
                 artifact_manifest={}, finished_at=None)
    if use_cache:
        done = _reuse_identical_run(run, fp, work_dir, start, restarted)
        if done is not None:
            return done
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
        return run
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
        return run
    try:
        answer = fill_answer(rev.answer_spec, result.trajectory)
    except Exception as exc:
        progress.finish(status=ReplayRun.Status.FAILED, error=f"answer: {exc}", **common)
        return run
    answer = to_storage(_jsonable(answer))
    progress.finish(status=ReplayRun.Status.SUCCEEDED, final_answer=answer,
                    replay_hash=replay_hash(common["filled_trajectory"], answer), **common)
    return run


def _finish_succeeded(run: ReplayRun, answer, h: str, **fields) -> None:
    """Mark ``run`` succeeded and decide whether it is the gold (see the module docstring).
    Joins the caller's transaction when there is one; ``fields`` go to ``_save_fields``."""
    with transaction.atomic(savepoint=False):
        gold = newest_row(ReplayRun, ("accepted_by", "replay_hash"), exclude_pk=run.pk,
                          where=dict(task=run.task_id, mode=GOLD_MODE, status=ReplayRun.Status.SUCCEEDED,
                                     gold_accepted=True))
        accepted_by_id, gold_hash = gold if gold is not None else (None, None)
        auto = run.mode == GOLD_MODE and (gold is None or accepted_by_id is None or gold_hash == h)
        fields.update(status=ReplayRun.Status.SUCCEEDED, error="", final_answer=answer, replay_hash=h,
                      gold_accepted=auto,
                      accepted_by_id=accepted_by_id if auto and gold is not None and gold_hash == h else None)
        _save_fields(run, **fields)


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
                                  "cache_hits", "steps_done"), exclude_pk=run.pk,
                      where=dict(task=run.task_id, mode=run.mode, status=ReplayRun.Status.SUCCEEDED,
                                 input_fingerprint=fp))
    if prev is None:
        return None
    prev_id, manifest, answer, h, tool_calls, cache_hits, steps_done = prev
    store = artifact_store()
    manifest = manifest or {}
    if not all(store.has(sha) for sha in manifest.values()):
        return None
    for name, sha in manifest.items():
        store.materialize(sha, work_dir / name)
    finished = timezone.now()
    with transaction.atomic():
        commit_without_flush_wait(ReplayRun)
        if restarted:
            ReplayStep.objects.filter(run=run).delete()
        copy_rows(ReplayStep, list(_COPIED_STEP_FIELDS), where={"run": prev_id},
                  values={"run": run.pk, "duration_ms": 0, "cached": True})
        fields = {**start, "steps_done": steps_done, "tool_calls": 0, "cache_hits": tool_calls + cache_hits,
                  "artifact_manifest": manifest, "finished_at": finished, "heartbeat_at": finished}
        fields.pop("filled_trajectory")
        _finish_succeeded(run, answer, h, filled_trajectory_of=prev_id, **fields)
    return run


class _WriteOnlyCache(DbStepCache):
    """``use_cache=False``: every tool runs; the results are still stored."""

    def get(self, key):
        return None


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


def pending_replay(task: Task) -> ReplayRun | None:
    """The newest succeeded replay newer than the gold that is waiting for acceptance, or None."""
    gold = current_gold(task)
    qs = ReplayRun.objects.filter(task=task, mode=GOLD_MODE, status=ReplayRun.Status.SUCCEEDED, gold_accepted=False)
    if gold is not None:
        qs = qs.filter(pk__gt=gold.pk)
    return qs.order_by("-id").first()


def _leaves(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict) and value:
        out = {}
        for k in sorted(value, key=str):
            out.update(_leaves(value[k], f"{prefix}.{k}" if prefix else str(k)))
        return out
    if isinstance(value, list) and value and len(value) <= 200:
        out = {}
        for i, v in enumerate(value):
            out.update(_leaves(v, f"{prefix}[{i}]"))
        return out
    return {prefix: value}


def _changes(before: Any, after: Any, limit: int = 50) -> list[dict]:
    a, b = _leaves(before), _leaves(after)
    out = []
    for path in sorted(set(a) | set(b)):
        if a.get(path, "<absent>") != b.get(path, "<absent>"):
            out.append({"path": path or "(value)", "before": a.get(path), "after": b.get(path)})
            if len(out) >= limit:
                break
    return out


def replay_diff(run: ReplayRun, base: ReplayRun | None = None) -> dict:
    """What changed between ``base`` (default: the gold before ``run``) and ``run``.

    Returns ``{run, base, pending, changed, answer: [{field, before, after, changed}],
    steps: [{index, call, state: same|changed|added|removed, changes: [{path, before, after}]}]}``;
    steps are compared on their authored index, observations leaf by leaf.
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
        before_steps, _ = collapse_expanded(base.filled_trajectory or [])
        after_steps, _ = collapse_expanded(run.filled_trajectory or [])
        for i in range(max(len(before_steps), len(after_steps))):
            b = before_steps[i] if i < len(before_steps) else None
            a = after_steps[i] if i < len(after_steps) else None
            call = str((a or b or {}).get("call", ""))
            if b is None:
                step_rows.append({"index": i, "call": call, "state": "added", "changes": []})
            elif a is None:
                step_rows.append({"index": i, "call": call, "state": "removed", "changes": []})
            else:
                ch = _changes(b.get("obs"), a.get("obs"))
                if b.get("call") != a.get("call") or b.get("args") != a.get("args"):
                    ch = [{"path": "(call/args)", "before": {"call": b.get("call"), "args": b.get("args")},
                           "after": {"call": a.get("call"), "args": a.get("args")}}] + ch
                step_rows.append({"index": i, "call": call, "state": "changed" if ch else "same", "changes": ch})
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
        return abs(float(a) - float(b)) <= 1e-9 + rtol * max(abs(float(a)), abs(float(b)))
    return a == b


def _recorded_changes(recorded: Any, replayed: Any, rtol: float, limit: int = 50) -> list[dict]:
    a, b = _leaves(recorded), _leaves(replayed)
    out = []
    for path in sorted(set(a) | set(b)):
        if _names_a_file(path):
            continue
        before, after = a.get(path, "<absent>"), b.get(path, "<absent>")
        if not _close(before, after, rtol):
            out.append({"path": path or "(value)", "before": a.get(path), "after": b.get(path)})
            if len(out) >= limit:
                break
    return out


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
    the row's ``note`` says so. Other steps are ``same``, ``changed``, ``added`` or ``removed``.

    Returns ``{run, mode, steps: [{index, call, state, changes, note?}], changed}`` where
    ``changed`` is true when a non-perception step differs (a gold the benchmark's tools would
    not give), false when at most perception sources differ.
    """
    before_steps, _ = collapse_expanded(recorded or [])
    # stored tagged (NaN/inf as {"$float": ...}); the recorded file holds plain NaN floats
    after_steps, _ = collapse_expanded(from_storage(run.filled_trajectory or []))
    rows = []
    for i in range(max(len(before_steps), len(after_steps))):
        b = before_steps[i] if i < len(before_steps) else None
        a = after_steps[i] if i < len(after_steps) else None
        call = str((a or b or {}).get("call", "")).split("(", 1)[0].strip()
        if b is None or a is None:
            rows.append({"index": i, "call": call, "state": "added" if b is None else "removed",
                         "changes": []})
            continue
        changes = _recorded_changes(b.get("obs"), a.get("obs"), rtol)
        row = {"index": i, "call": call, "state": "changed" if changes else "same",
               "changes": changes}
        if changes and _is_perception(call):
            row["state"] = "source"
            row["note"] = (f"perception source: the studio replayed this step with "
                           f"{(run.mode or 'gt').upper()} perception, the file's observation came "
                           f"from the benchmark's model; the difference is the source of the "
                           f"masks, not a tool disagreement")
        rows.append(row)
    return {"run": run.pk, "mode": run.mode, "steps": rows,
            "changed": any(r["state"] in ("changed", "added", "removed") for r in rows)}


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


def task_replay_diff(task: Task) -> dict | None:
    """The diff a task page shows: the pending replay against the gold, else the newest succeeded
    replay against the gold before it; None when the task has no succeeded replay."""
    run = pending_replay(task) or ReplayRun.objects.filter(task=task, mode=GOLD_MODE, status=ReplayRun.Status.SUCCEEDED).order_by("-id").first()
    return replay_diff(run) if run is not None else None


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
    from replay.tasks import run_replay

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


def artifact_path(run: ReplayRun, name: str) -> Path:
    """Absolute path of an artifact of ``run``; ``ValueError`` if ``name`` escapes the run's folder."""
    base = (Path(settings.STUDIO_ARTIFACT_ROOT) / run.artifact_dir).resolve()
    p = (base / name).resolve()
    if not p.is_relative_to(base):
        raise ValueError(f"artifact '{name}' lies outside the run's folder")
    return p


# ============================================================================================
# Importing a task file in the benchmark's layout
# ============================================================================================
class TaskImportError(Exception):
    """A task file cannot be imported; the message names the file, sample, task and field."""


def _dimension_of(path: Path, task: dict) -> str | None:
    return dimension_of_file(path.name) or dimension_of_code(task.get("task_category_code"))


def file_task_content(sample: dict, task: dict) -> tuple[dict, list]:
    """``(content, authored steps with obs)`` of a file's task: the one rule both importers use
    (``kernel.content.task_content``; answer fields bound to the step observation that holds their
    value when exactly one does)."""
    authored = authored_steps(task.get("trajectory"))
    return task_content(sample, task, authored), authored


def answer_proposals(content: dict, authored: list) -> list[dict]:
    """Proposed sources for the blank answer fields of ``content`` over the authored steps (their
    obs when the file has them, else the catalogue's result keys): ``kernel.content.answer_proposals``."""
    return _answer_proposals(content, authored, result_types())


def import_task_file(user, path: str | Path, event) -> list[dict]:
    """Create (or revise) the studio tasks of a task file in the benchmark's layout.

    The file is read by ``kernel.taskfile.read_task_file`` (the benchmark loader's own checks:
    a list of samples with ``sample_id`` and ``tasks``, tasks with ``question``,
    ``task_category``, ``task_category_code``); every value it accepts is kept. Every input-file
    string of a sample's ``input_data`` (the benchmark's suffix rule) must name a layer of
    ``event`` by file name; paths are kept as written (the replay matches layers by file name).
    The content is :func:`file_task_content`, the same rule ``import_release`` uses; the file's own
    sample and task are kept as the revision's ``source`` so that an export writes them back
    unchanged. Values are stored tagged (``kernel.taskfile.to_storage``: NaN never reaches a JSON
    column).

    Returns ``[{question_id, status: created|updated|unchanged, proposals}]``; ``proposals`` lists
    a proposed source for each answer field whose gold is blank (:func:`answer_proposals`; never
    bound here: the author accepts it in the editor). Raises ``TaskImportError`` listing every
    problem (file, sample, task, field) before anything is written.
    """
    from annotation.services.tasks import content_problem, create_task, revision_content, save_revision

    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TaskImportError(f"{path}: cannot read: {exc}")
    try:
        parsed = read_task_file(data, path.name)
    except TaskFileError as exc:
        raise TaskImportError(str(exc))
    except RecursionError:
        raise TaskImportError(f"{path}: not valid JSON: nested too deeply to read") from None
    layer_names = set(Layer.objects.filter(event=event).values_list("file_name", flat=True))
    errors: list[str] = []
    plans: list[tuple[str, str, int, dict, dict, list]] = []
    seen: dict[str, int] = {}
    for si, sample in enumerate(parsed.samples):
        sid = str(sample["sample_id"])
        where = f"{path.name}: sample '{sid}'"
        if len(sid) > MAX_SAMPLE_ID:
            errors.append(f"{path.name}: sample #{si}: sample_id: longer than {MAX_SAMPLE_ID} characters "
                          "(the studio's limit for question ids)")
            continue
        if sid in seen:
            errors.append(f"{where}: sample_id: also used by sample {seen[sid]}: question ids would collide")
            continue
        seen[sid] = si
        for loc, value in walk_data_paths(sample.get("input_data"), "input_data"):
            name = base_name(value)
            if name not in layer_names:
                known = ", ".join(sorted(layer_names)[:8]) + (" …" if len(layer_names) > 8 else "")
                errors.append(f"{where}: {loc}: '{value}' names no layer of event '{event.slug}' "
                              f"(match by file name '{name}'; its layers: {known or 'none'})")
        for ti, task in enumerate(sample["tasks"]):
            dim = _dimension_of(path, task)
            if dim is None:
                errors.append(f"{where}, task {ti}: cannot tell the dimension (file name is not t1_…t5_… and "
                              f"task_category_code is {task.get('task_category_code')!r})")
                continue
            content, authored = file_task_content(sample, task)
            problem = content_problem(to_storage(content))
            if problem:
                errors.append(f"{where}, task {ti}: {problem}")
                continue
            source = source_record(sample, task, content, file=path.name, sample_index=si, task_index=ti)
            plans.append((sid, dim, ti, to_storage(content), source_text(source), answer_proposals(content, authored)))
    qids = [f"{sid}_task{ti}" for sid, _, ti, *_ in plans]
    for t in Task.objects.filter(question_id__in=qids).exclude(event=event).select_related("event"):
        errors.append(f"{path.name}: {t.question_id} already exists in event '{t.event.slug}'")
    if errors:
        raise TaskImportError("\n".join(errors))
    out = []
    with transaction.atomic():
        existing = {t.question_id: t for t in Task.objects.filter(question_id__in=qids).select_related("head")}
        for sid, dim, ti, content, source, proposals in plans:
            qid = f"{sid}_task{ti}"
            task = existing.get(qid)
            if task is None:
                create_task(user, event, dimension=dim, content=content, sample_id=sid, task_index=ti,
                            message=f"imported from {path.name}", source=source)
                status = "created"
            elif (task.head and _jsonable(revision_content(task.head)) == _jsonable(content)
                  and task.head.source == source):
                status = "unchanged"
            else:
                save_revision(user, task, expected_version=task.version, content=content,
                              message=f"re-imported from {path.name}", source=source)
                status = "updated"
            out.append({"question_id": qid, "status": status, "proposals": proposals})
    return out


# ============================================================================================
# The paper's "Gold Trajectory" baseline
# ============================================================================================
def _runner_call(name: str, args: Any) -> str:
    """The runner's call text: ``"<model alias>(<comma-separated arg names>)"``."""
    from replay.tools.registry import get_tool, model_alias

    try:
        alias = get_tool(name).alias
    except Exception:
        alias = model_alias(str(name))
    return f"{alias}({', '.join(args) if isinstance(args, dict) else ''})"


def baseline_record(task: Task, run: ReplayRun, elapsed_s: float) -> dict:
    """One ``benchmark.jsonl`` record (dora-format.md §c) of a replay run used as an agent run.

    The trajectory is what an agent executing the gold plan sends: per step the runner's call text,
    the resolved arguments and the obs; a loop is its wrapper followed by its nested calls.
    """
    from annotation.services.export import CATEGORY_BY_DIM

    rev = run.revision
    category = rev.task_category or CATEGORY_BY_DIM[task.dimension][0]
    code = rev.task_category_code or CATEGORY_BY_DIM[task.dimension][1]
    traj = []
    for st in run.steps.all().order_by("index"):
        if st.status == ReplayStep.Status.SKIPPED:
            break
        args = st.resolved_args or st.args or {}
        traj.append({"call": _runner_call(st.call, args), "args": args, "obs": st.obs})
        for e in st.expanded or []:
            traj.append({"call": _runner_call(e.get("call"), e.get("args")), "args": e.get("args") or {},
                         "obs": e.get("obs")})
    ok = run.status == ReplayRun.Status.SUCCEEDED
    return {
        "question_id": task.question_id, "task_scoped_question_id": f"{category}::{task.question_id}",
        "task_category": category, "task_category_code": code, "sample_id": task.sample_id, "worker_id": 0,
        "question": rev.question, "predicted_answer": run.final_answer if ok else f"Error: {run.error}",
        "error": None if ok else run.error, "trajectory": traj, "elapsed_time": round(elapsed_s, 3),
        "timestamp": (run.finished_at or timezone.now()).isoformat(),
    }


def gold_baseline(user, out_dir: str | Path, *, agent: str = "gold-model", event_slug: str | None = None,
                  mode: str = "model", score: bool = True):
    """Replay every task's gold trajectory with ``mode`` perception (default: the checkpoints in
    ``STUDIO_CHECKPOINT_DIR``), write the records in the benchmark's run layout under
    ``out_dir/<agent>_GT/`` and, with ``score``, import and score them like any agent run
    (``evaluation.services.import_run_dir``). Returns ``(run_dir, AgentRun | None, summary)``.
    Tasks without an accepted gold are skipped (listed in the summary)."""
    import time as _time
    from datetime import datetime, timezone as _tz

    from annotation.services.tasks import TASK_FILES

    require(user, "run.import")
    tasks = Task.objects.select_related("head", "event").order_by("sample_id", "task_index")
    if event_slug:
        tasks = tasks.filter(event__slug=event_slug)
    run_dir = Path(out_dir) / f"{agent}_GT"
    by_dim: dict[str, list[dict]] = {}
    skipped, failed = [], []
    for task in tasks:
        if task.head_id is None or latest_successful_replay(task) is None:
            skipped.append(task.question_id)
            continue
        t0 = _time.perf_counter()
        run = execute_replay(create_run(task, mode=mode, user=user).pk)
        rec = baseline_record(task, run, _time.perf_counter() - t0)
        if rec["error"]:
            failed.append(task.question_id)
        by_dim.setdefault(task.dimension, []).append(rec)
    for dim, records in by_dim.items():
        d = run_dir / TASK_FILES[dim][:-5]
        (d / "trajectories").mkdir(parents=True, exist_ok=True)
        with open(d / "benchmark.jsonl", "w", encoding="utf-8") as fh:
            for rec in records:
                fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
                traj = {k: v for k, v in rec.items() if k != "predicted_answer"}
                traj["final_answer"] = rec["predicted_answer"]
                name = f"{rec['task_scoped_question_id'].replace('::', '__')}_trajectory.json".replace("/", "_")
                (d / "trajectories" / name).write_text(json.dumps(traj, ensure_ascii=False, indent=1), encoding="utf-8")
        n_ok = sum(1 for r in records if not r["error"])
        (d / "run_stats.json").write_text(json.dumps({
            "total": len(records), "success": n_ok, "failed": len(records) - n_ok,
            "avg_time": round(sum(r["elapsed_time"] for r in records) / len(records), 3),
            "timestamp": datetime.now(_tz.utc).isoformat()}, indent=2), encoding="utf-8")
    summary = {"run_dir": str(run_dir), "records": sum(len(v) for v in by_dim.values()),
               "failed": failed, "skipped_no_gold": skipped}
    agent_run = None
    if score and summary["records"]:
        from evaluation.services import import_run_dir

        agent_run = import_run_dir(user, run_dir, agent)
        summary["dora_score"] = agent_run.dora_score
    return run_dir, agent_run, summary
