"""The gold set of a run: the one place that says which tasks a run is scored against.

Every agent run is pinned to one named gold set (``AgentRun.gold_set``, ``gold_set_digest``,
``gold_set_at``), resolved here by one of three readers:

``release_gold_set(release)``
    A release version: its pinned revisions and gold replays (``releases.services.export.
    release_samples``). Named ``release <version>`` (``(draft)`` while unpublished); digest: the
    published ``Release.manifest_sha256`` (the digest of its exported task files), else the digest
    of its pinned ``(question id, revision id, replay id)`` rows; dated by its publication.
``studio_gold_set(question_ids)``
    The studio's current tasks, explicit and unversioned: the studio tasks the run's records name,
    each at its head revision and that revision's gold replay as they are at the moment of
    scoring. Named ``studio tasks (unversioned) <UTC date>``; digest over the same rows.
``folder_gold_set(tasks_dir)``
    A task folder in the benchmark's layout (``import_runs --tasks-dir``): ``<tasks_dir>/t*.json``
    as the official evaluator reads them. Named ``folder <path>``; digest: SHA-256 over the task
    files' names and bytes.

What a set scores (the rule of ``evaluate_runs`` on a release's exported files): the benchmark
tasks only. Robustness variants (tasks with a ``TaskVariant`` row: the same rule as the release
export's ``releases.services.release_variants.split_entries``, which writes them under
``variants/``) are never part of the DORA score, the per-dimension table or the leaderboard's
breakdowns; their records are scored field by field against the variant's own gold (for the
robustness rules, :mod:`evaluation.robustness`) and kept apart (``RunRecord.in_gold_set`` False).
A record whose question is not a benchmark task of the set is likewise outside it.

Gold polygon files (``polygon_iou`` answers): a folder set has its ``gold_polygons/``. A release's
or the studio's task has the files its gold replay wrote, in the form the release export writes
them (``releases.services.export.GoldPolygons``: the answer value ``gold_polygons/<name>`` or the
imported path, ``dora_grid`` added when the file has none); the set resolves them per task, from
that task's own replay (two replays may write artifacts of one name with different polygons), and
keeps them in a folder of that task's own (:func:`polygon_folder`), looked in first when the task
is scored (``GoldSet.task_polygon_roots``), as the evaluator looks in the exported ``tasks/``. So a
run's stored field scores are the evaluator's on the exported files, and the record page
(:func:`task_polygon_folder`) re-scores with the same files. Only tasks with a ``polygon_iou``
field read any file.

The run importer (:func:`evaluation.services.runs.import_run_dir`), the re-scorer
(:func:`evaluation.services.runs.rescore_run`), the gold baseline and the step-wise import all read
their gold from here; the leaderboard's selectors read only records ``in_gold_set``.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from datetime import datetime
from pathlib import Path

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from annotation.models import Task, TaskVariant
from annotation.services.tasks import TASK_FILES
from evaluation.scoring import load_task_files
from releases.services.export import (
    ExportError,
    GoldPolygon,
    GoldPolygons,
    gold_replay,
    import_source,
    release_samples,
    sample_and_task,
)

__all__ = ["GoldSet", "release_gold_set", "studio_gold_set", "folder_gold_set", "GoldSetError", "variant_specs",
           "polygon_folder", "task_polygon_folder", "POLYGON_CACHE",
           "record_key", "ranking_key", "ranking_q", "is_studio_key", "perception_of_key", "PERCEPTION_KEY_SUFFIX", "STUDIO_LABEL", "STUDIO_KEY"]

STUDIO, RELEASE, FOLDER = "studio", "release", "folder"
#: the start of the name of every studio set (the date follows)
STUDIO_LABEL = "studio tasks (unversioned)"
#: the start of the ranking key of a studio set (``studio:<digest>``)
STUDIO_KEY = "studio"


#: the ranking-key suffix of runs whose perception was not the benchmark's: ``gt`` (oracle
#: perception, the GT masks) and ``classical`` runs rank only among themselves, never with runs
#: under the benchmark's protocol (``model``, and imported runs whose mode is ``unknown``)
PERCEPTION_KEY_SUFFIX = {"gt": "~oracle", "classical": "~classical"}


def ranking_key(label: str, digest: str, perception_mode: str = "") -> str:
    """Which runs a leaderboard ranks together, from a run's ``gold_set``, ``gold_set_digest`` and
    ``perception_mode``: the same digest, the same set. A release or a folder by its digest (the same files); a run on
    the studio's current tasks by ``studio:<digest>`` (the same questions at the same revisions and
    gold replays: runs read while the tasks did not change, over the same questions, rank together;
    a changed task or another selection of questions is another set, never ranked with it);
    ``""`` for runs scored before sets were named (a group of their own). A run with oracle (GT)
    or classical perception gets the suffix ``~oracle`` / ``~classical``
    (:data:`PERCEPTION_KEY_SUFFIX`): a group of its own beside its set's benchmark-protocol runs."""
    suffix = PERCEPTION_KEY_SUFFIX.get(perception_mode or "", "")
    if (label or "").startswith(STUDIO_LABEL):
        return (f"{STUDIO_KEY}:{digest}" if digest else STUDIO_KEY) + suffix
    return (digest or "") + suffix


def perception_of_key(key: str) -> tuple[str, str | None]:
    """``(key without its perception suffix, the perception mode it names or None)``."""
    for mode, suffix in PERCEPTION_KEY_SUFFIX.items():
        if key.endswith(suffix):
            return key[:-len(suffix)], mode
    return key, None


def is_studio_key(key: str) -> bool:
    """Whether ``key`` (:func:`ranking_key`) is a set of the studio's current tasks."""
    key = perception_of_key(key)[0]
    return key == STUDIO_KEY or key.startswith(STUDIO_KEY + ":")


def ranking_q(key: str, prefix: str = "") -> Q:
    """The ``Q`` that selects the ``AgentRun`` rows of ranking key ``key`` (``prefix``: the path to
    the run, e.g. ``"run__"`` from a record)."""
    key, mode = perception_of_key(key)
    perception = (Q(**{f"{prefix}perception_mode": mode}) if mode is not None
                  else ~Q(**{f"{prefix}perception_mode__in": list(PERCEPTION_KEY_SUFFIX)}))
    if is_studio_key(key):
        digest = key[len(STUDIO_KEY) + 1:]
        return Q(**{f"{prefix}gold_set__startswith": STUDIO_LABEL, f"{prefix}gold_set_digest": digest}) & perception
    return Q(**{f"{prefix}gold_set_digest": key}) & ~Q(**{f"{prefix}gold_set__startswith": STUDIO_LABEL}) & perception


class GoldSetError(ValueError):
    """The gold of a set cannot be read (a task without a succeeded replay, a release pinning no
    gold replay); the message names the question."""


def record_key(dimension: str, sample_id, task_index: int) -> tuple:
    """The key a record and a gold task share: ``(dimension, sample id, task index)``."""
    return (dimension, str(sample_id), int(task_index))


def variant_specs(tasks) -> dict[int, dict]:
    """``{task pk: {kind, params, tools}}`` of the robustness variants among ``tasks`` (one query)."""
    pks = [t.pk for t in tasks if t is not None]
    rows = TaskVariant.objects.filter(task_id__in=pks).values("task_id", "kind", "params", "tools")
    return {r["task_id"]: {"kind": r["kind"], "params": r["params"], "tools": r["tools"]} for r in rows}


class GoldSet:
    """A resolved gold set.

    ``kind``: ``release``, ``studio`` or ``folder``; ``label``: its name as stored on the run and
    shown on every page (``release 1.0.0``); ``digest``: 64 hex characters; ``as_of``: when the
    set was fixed (a release's publication, the moment the studio's tasks were read; None for a
    folder); ``release``: the ``Release`` or None.
    ``samples``: ``{dim: [benchmark sample]}``, what the evaluator scores (the exported ``tasks/``);
    ``variant_samples``: the robustness variants' samples (``variants/tasks/``), scored per record
    only; ``task_by_qid``: the studio tasks by question id (both kinds); ``variants``: ``{task pk:
    spec}`` (:func:`variant_specs`); ``polygons``: the folder's ``gold_polygons`` (a folder set) or
    None; ``task_polygon_roots``: ``{dim: {(sample id, task index): (folder,)}}``, the folder of
    each release or studio task's gold polygon files (:func:`polygon_folder`; tasks with a
    ``polygon_iou`` field and a file only); ``missing``: how to name a record's question id the
    set does not hold (None: such records are allowed, outside the set)."""

    __slots__ = ("kind", "label", "digest", "as_of", "release", "samples", "variant_samples", "task_by_qid",
                 "variants", "polygons", "task_polygon_roots", "missing", "_keys")

    def __init__(self, *, kind: str, label: str, digest: str, as_of: datetime | None, release=None,
                 samples: dict, variant_samples: dict | None = None, task_by_qid: dict | None = None,
                 variants: dict | None = None, polygons: Path | None = None,
                 task_polygon_roots: dict | None = None, missing: str | None = None):
        self.kind, self.label, self.digest, self.as_of, self.release = kind, label, digest, as_of, release
        self.samples, self.variant_samples = samples, variant_samples or {}
        self.task_by_qid, self.variants = task_by_qid or {}, variants or {}
        self.polygons, self.missing = polygons, missing
        self.task_polygon_roots = task_polygon_roots or {}
        self._keys = {record_key(d, s.get("sample_id"), i) for d, ss in samples.items() for s in ss
                      for i in range(len(s.get("tasks") or []))}

    def holds(self, dimension: str, sample_id, task_index: int) -> bool:
        """Whether the question is a benchmark task of the set (counted in its scores)."""
        return record_key(dimension, sample_id, task_index) in self._keys

    def polygon_roots_of(self, dimension: str, sample_id, task_index: int) -> tuple:
        """The task's own gold polygon folder(s), looked in before the run's folder (``()``: none)."""
        return self.task_polygon_roots.get(dimension, {}).get((str(sample_id), int(task_index)), ())

    def n_tasks(self) -> int:
        """The number of benchmark tasks in the set (variants not counted)."""
        return len(self._keys)

    def run_fields(self) -> dict:
        """The ``AgentRun`` fields that name the set: ``{release, gold_set, gold_set_digest, gold_set_at}``."""
        return {"release": self.release, "gold_set": self.label[:200], "gold_set_digest": self.digest,
                "gold_set_at": self.as_of}


def _rows_digest(rows) -> str:
    """SHA-256 of sorted ``(question id, revision id, replay id, variant?)`` rows as JSON."""
    return hashlib.sha256(json.dumps(sorted(rows), separators=(",", ":")).encode()).hexdigest()


def _split(samples_by_dim: dict, task_by_qid: dict) -> tuple[dict, dict, dict]:
    """``(benchmark samples, variant samples, variant specs)``: a sample goes to the variants when
    its tasks are robustness variants (one variant per sample, as the export writes them)."""
    specs = variant_specs(task_by_qid.values())
    variant_qids = {q for q, t in task_by_qid.items() if t is not None and t.pk in specs}
    plain, var = {}, {}
    for dim, samples in samples_by_dim.items():
        plain[dim], var[dim] = [], []
        for s in samples:
            qids = {f"{s['sample_id']}_task{i}" for i in range(len(s.get("tasks") or []))}
            if qids & variant_qids:
                var[dim].append(s)
            else:
                plain[dim].append(s)
    return plain, {d: ss for d, ss in var.items() if ss}, specs


def release_gold_set(release) -> GoldSet:
    """The gold set of release ``release`` (see the module docstring). Raises
    :class:`GoldSetError` when a pinned task has no gold replay, or a gold polygon file is not
    JSON or not a gold polygon (as the export would)."""
    polygons = GoldPolygons(release.pk)
    try:
        samples, task_by_qid = release_samples(release, polygons)
    except ExportError as exc:
        raise GoldSetError(str(exc)) from None
    plain, var, specs = _split(samples, task_by_qid)
    published = release.status == "published" and release.manifest_sha256
    digest = release.manifest_sha256 if published else _rows_digest(
        [list(r) for r in release.items.values_list("question_id", "revision_id", "replay_id")])
    label = f"release {release.version}" + ("" if published else " (draft)")
    return GoldSet(kind=RELEASE, label=label, digest=digest, as_of=release.published_at if published else timezone.now(),
                   release=release, samples=plain, variant_samples=var, task_by_qid=task_by_qid, variants=specs,
                   task_polygon_roots=_polygon_roots(samples, polygons),
                   missing=f"question ids not in release {release.version}")


def studio_gold_set(question_ids) -> GoldSet:
    """The studio's current tasks named by ``question_ids``, each at its head revision's gold
    replay, as of now (see the module docstring). Raises :class:`GoldSetError` for a task whose
    head revision has no succeeded replay, or whose gold polygon file is not JSON or not a gold
    polygon (as the export would)."""
    tasks = sorted(Task.objects.filter(question_id__in=set(question_ids)).select_related("event", "head"),
                   key=lambda t: (t.sample_id, t.task_index))
    by_dim: dict[str, dict[str, dict]] = {d: {} for d in TASK_FILES}
    rows = []
    polygons = GoldPolygons()
    for task in tasks:
        run = gold_replay(task.pk, task.head_id)
        if run is None:
            raise GoldSetError(f"{task.question_id}: no succeeded replay of revision {task.head.number}; replay it first")
        source = import_source(task.head)
        head, tdict = sample_and_task(task, task.head, run, source)
        sample = by_dim[task.dimension].setdefault(task.sample_id, head)
        try:
            polygons.add(task.question_id, tdict, run, sample, task.event, bool(source))
        except ExportError as exc:
            raise GoldSetError(str(exc)) from None
        sample["tasks"].append(tdict)
        rows.append([task.question_id, task.head_id, run.pk])
    task_by_qid = {t.question_id: t for t in tasks}
    plain, var, specs = _split({d: list(s.values()) for d, s in by_dim.items()}, task_by_qid)
    now = timezone.now()
    return GoldSet(kind=STUDIO, label=f"{STUDIO_LABEL} {now:%Y-%m-%d %H:%M} UTC", digest=_rows_digest(rows),
                   as_of=now, samples=plain, variant_samples=var, task_by_qid=task_by_qid, variants=specs,
                   task_polygon_roots=_polygon_roots(by_dim, polygons),
                   missing="question ids with no task in the studio")


def folder_gold_set(tasks_dir: Path, question_ids=()) -> GoldSet:
    """The task files of ``tasks_dir`` (benchmark layout, with ``gold_polygons/``) as the
    evaluator reads them; the studio tasks named by ``question_ids`` are linked (their variant
    specs too), but only the folder's tasks are scored."""
    tasks_dir = Path(tasks_dir)
    h = hashlib.sha256()
    for name in sorted(TASK_FILES.values()):
        p = tasks_dir / name
        if p.is_file():
            h.update(name.encode() + b"\0" + p.read_bytes() + b"\0")
    task_by_qid = {t.question_id: t for t in Task.objects.filter(question_id__in=set(question_ids))}
    return GoldSet(kind=FOLDER, label=f"folder {tasks_dir.resolve()}", digest=h.hexdigest(), as_of=None,
                   samples=load_task_files(tasks_dir), task_by_qid=task_by_qid,
                   variants=variant_specs(task_by_qid.values()), polygons=tasks_dir / "gold_polygons")


#: the folder under ``STUDIO_DATA_ROOT`` that keeps the tasks' gold polygon folders (:func:`polygon_folder`)
POLYGON_CACHE = "gold-polygons"


def polygon_folder(files: list[GoldPolygon]) -> Path:
    """A folder holding one task's gold polygon files at their paths under the export's
    ``tasks/`` (``GoldPolygon.target``, e.g. ``gold_polygons/vectorize_1.geojson``) with the bytes
    the export writes: a tasks folder of that task alone, for the polygon roots. Named by its
    content (``STUDIO_DATA_ROOT/gold-polygons/<aa>/<SHA-256 over the paths and the files'
    SHA-256>``), written once on this machine (into a folder of its own, then renamed: two
    processes writing it at once leave one whole copy) and reused by every set that needs it."""
    datas = [(f.target, f.data()) for f in files]
    h = hashlib.sha256()
    for target, data in sorted(datas):
        h.update(target.encode("utf-8") + b"\0" + hashlib.sha256(data).digest())
    key = h.hexdigest()
    folder = Path(settings.STUDIO_DATA_ROOT) / POLYGON_CACHE / key[:2] / key
    if folder.is_dir():
        return folder
    tmp = folder.with_name(f".{key}-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        for target, data in datas:
            path = tmp / target
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        os.rename(tmp, folder)
    except OSError:
        if not folder.is_dir():
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder


def _polygon_roots(samples_by_dim: dict, polygons: GoldPolygons) -> dict:
    """``{dim: {(sample id, task index): (folder,)}}`` of the tasks of ``samples_by_dim`` (samples
    or ``{sample id: sample}``) that ``polygons`` holds files of (:func:`polygon_folder`)."""
    out: dict = {}
    if not polygons.by_question:
        return out
    for dim, samples in samples_by_dim.items():
        for sample in (samples.values() if isinstance(samples, dict) else samples):
            for i in range(len(sample.get("tasks") or [])):
                files = polygons.by_question.get(f"{sample['sample_id']}_task{i}")
                if files:
                    out.setdefault(dim, {})[(str(sample["sample_id"]), i)] = (polygon_folder(files),)
    return out


def task_polygon_folder(task, release=None) -> Path | None:
    """The folder of ``task``'s gold polygon files (:func:`polygon_folder`) as a gold set scores
    it: of the replay ``release`` pins for it, else of its head revision's gold replay (the studio
    set's rule, ``releases.services.export.gold_replay``). None when that replay is missing, the
    task has no ``polygon_iou`` answer with a file, or a file is not a gold polygon (the record
    page then shows what the other roots give). A few queries; reads only this task's files."""
    if release is not None:
        item = release.items.select_related("revision", "replay").filter(task_id=task.pk).first()
        rev, run = (item.revision, item.replay) if item is not None else (None, None)
    else:
        rev = task.head
        run = gold_replay(task.pk, task.head_id) if task.head_id else None
    if rev is None or run is None:
        return None
    source = import_source(rev)
    head, tdict = sample_and_task(task, rev, run, source)
    try:
        files, _ = GoldPolygons(release.pk if release is not None else None).resolve(
            task.question_id, tdict, run, head, task.event, bool(source))
    except ExportError:
        return None
    return polygon_folder(files) if files else None
