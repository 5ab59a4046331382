"""The benchmark's own layout, out and in (dora-format.md §(a)); the writer behind every export.

Layout of a release folder::

    tasks/t1_perception_and_assessment.json … t5_multi_modal_report_synthesis.json
    tasks/gold_polygons/<name>.geojson      gold of polygon_iou answers, with dora_grid {transform, crs}
    images/<path>                           every raster and vector that input_data names
    schemas/*.schema.json                   the JSON Schemas of the files (copied from releases/schemas)
    studio_manifest.json                    the sidecar (provenance, sha256 of every file, counts)
    variants/tasks/…, variants/images/…     robustness variants, when the release has some
                                            (``release_variants``; ``variants`` in the sidecar)

Task files are JSON arrays of samples ``{sample_id, disaster_type, input_data, classes, tasks}``;
each task ``{task_category, task_category_code, question, tools, trajectory: [{call, args, obs}],
final_answer, eval_spec, answer_format}``. They are written with ``indent=1``, ``ensure_ascii=False``
and no trailing newline: the formatting of the benchmark's files (checked on
../shared/scoring-examples/tasks), so that a file read in and written out again is the same bytes.

Gold of a task = its revision plus a succeeded replay of that revision (a replay a person accepted as
gold first, else the newest). A task imported from a task file has an *import replay*: a ReplayRun
whose ``artifact_dir`` is ``imports/<key>`` under STUDIO_ARTIFACT_ROOT and holds ``source.json`` —
the sample and the task exactly as the file had them (key order, extra keys). Such a task is written
back from that source, with ``trajectory``/``final_answer`` taken from the pinned replay where they
differ, so that a file imported and exported again is byte for byte the same.

Memory: samples are built, validated and written one at a time; a release's per-question metadata
(for the sidecar) is validated and spooled to a file as each question is written
(``LayoutWriter(question_sink=...)``) and the manifest streamed from it; the release's entries (ids
of each task) are read in keyset chunks and merged back in export order from sorted runs on disk
(:class:`SortedEntries`), so an export's peak memory does not grow with the number of tasks
(bench/export.py measures it at two sizes).
"""
from __future__ import annotations

import hashlib
import heapq
import json
import os
import re
import shutil
import tempfile
import uuid
import weakref
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import cache
from itertools import groupby
from pathlib import Path, PurePosixPath
from typing import Any

from django.conf import settings

from annotation import qc
from annotation.models import AuditEvent, Layer, Task, TaskRevision, TaskVariant
from annotation.services.content import revision_content
from annotation.services.layer_versions import pinned_layer
from annotation.services.qc import fill_layer_cache, layer_info
from kernel.content import CONTENT_FIELDS, file_task
from kernel.hashing import file_sha256 as sha256_file
from kernel.hashing import tree_digest
from kernel.inputs import PATH_SUFFIXES, data_paths  # noqa: F401  (data_paths is re-exported)
from kernel.steps import step_call
from kernel.taskfile import JSON_INDENT, dumps, from_storage, same_value, source_from_text  # noqa: F401
from kernel.vocabulary import CATEGORY_BY_DIM, TASK_FILES
from releases.services.pins import release_layer_pins
from replay.models import ReplayRun
from replay.services.paths import artifact_path
from studio import storage

DIM_BY_FILE = {name: dim for dim, name in TASK_FILES.items()}
IMPORT_ARTIFACTS = "imports"
SOURCE_FILE = "source.json"
MANIFEST_NAME = "studio_manifest.json"
SCHEMA_DIR = Path(__file__).resolve().parents[1] / "schemas"
SCHEMA_FILES = {
    "task_file": "dora_task_file.schema.json",
    "gold_polygon": "dora_gold_polygon.schema.json",
    "manifest": "studio_manifest.schema.json",
}
IDENTITY_GRID = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0]


class ExportError(Exception):
    """A task or file cannot be exported; the message names the question id or file and the reason."""


# ------------------------------------------------------------------ JSON text, hashes, schemas


def public_source(source: str) -> str:
    """An event's ``source`` as a shipped manifest names it: the last part of a server path
    (``/srv/data/xview2-deploy-joplin`` → ``xview2-deploy-joplin``: where the data came from,
    without the server's folders), anything else (a URL, a citation) as it is."""
    text = str(source or "")
    if text.startswith("/") or re.match(r"^[A-Za-z]:[\\/]", text):
        return PurePosixPath(text.replace("\\", "/")).name
    return text


def canonical(value: Any) -> str:
    """Canonical JSON (sorted keys, no whitespace): equal text ⇔ equal JSON values, 1 ≠ 1.0 ≠ true."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def copy_hashed(src: Path, dst: Path) -> dict:
    """Copy ``src`` to ``dst`` in 1 MiB chunks; returns ``{bytes, sha256}`` of the copy."""
    h, n = hashlib.sha256(), 0
    dst.parent.mkdir(parents=True, exist_ok=True)
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        for chunk in iter(lambda: fin.read(1 << 20), b""):
            h.update(chunk)
            n += len(chunk)
            fout.write(chunk)
    return {"bytes": n, "sha256": h.hexdigest()}


def write_text_hashed(path: Path, text: str) -> dict:
    data = text.encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


@cache
def load_schema(name: str) -> dict:
    """The JSON Schema ``name`` (a key of :data:`SCHEMA_FILES`) from ``releases/schemas/``."""
    return json.loads((SCHEMA_DIR / SCHEMA_FILES[name]).read_text(encoding="utf-8"))


@cache
def _validator(name: str, ref: str | None):
    from jsonschema import Draft202012Validator

    schema = load_schema(name)
    if ref and ref.startswith("#/"):  # a JSON pointer to a subschema, resolved against the whole schema
        sub = schema
        for part in ref[2:].split("/"):
            sub = sub[part]
        return Draft202012Validator(schema).evolve(schema=sub)
    if ref:
        schema = {"$schema": schema["$schema"], "$defs": schema["$defs"], "$ref": f"#/$defs/{ref}"}
    return Draft202012Validator(schema)


def json_path(parts: Iterable, root: str = "") -> str:
    """``["tasks", 0, "eval_spec"]`` → ``tasks[0].eval_spec``."""
    out = root
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(root)"


def schema_problems(name: str, instance: Any, *, ref: str | None = None, root: str = "") -> list[tuple[str, str]]:
    """Violations of schema ``name`` (or of its ``$defs/ref``, or of the subschema at the JSON pointer
    ``ref="#/properties/..."``): ``[(field path, message)]``, by path, under ``root``.

    A missing required property is reported at the property's own path.
    """
    out = []
    for err in _validator(name, ref).iter_errors(instance):
        parts = list(err.absolute_path)
        if err.validator == "required" and "'" in err.message:
            parts.append(err.message.split("'")[1])
        out.append((json_path(parts, root), err.message))
    return sorted(out)


class SampleArrayWriter:
    """Writes a JSON array one element at a time, byte-identical to ``dumps(list_of_elements)``.

    Tracks the byte count and sha256 of what it wrote (``info`` after ``close``).
    """

    def __init__(self, path: Path):
        self.path = path
        self._fh = open(path, "wb")
        self._h = hashlib.sha256()
        self._bytes = 0
        self.count = 0
        self.info: dict | None = None

    def _write(self, text: str) -> None:
        data = text.encode("utf-8")
        self._h.update(data)
        self._bytes += len(data)
        self._fh.write(data)

    def write(self, element: Any) -> None:
        body = "\n".join(" " * JSON_INDENT + line for line in dumps(element).split("\n"))
        self._write(("[\n" if self.count == 0 else ",\n") + body)
        self.count += 1

    def close(self) -> dict:
        if self.info is None:
            self._write("\n]" if self.count else "[]")
            self._fh.close()
            self.info = {"bytes": self._bytes, "sha256": self._h.hexdigest()}
        return self.info

    def abort(self) -> None:
        if not self._fh.closed:
            self._fh.close()


# ------------------------------------------------------------------ paths


def safe_relative(path: str) -> PurePosixPath | None:
    """``path`` as a relative POSIX path inside images/, or None if absolute or escaping (``..``)."""
    p = str(path).replace("\\", "/")
    if not p or p.startswith("/") or (len(p) > 1 and p[1] == ":"):
        return None
    rel = PurePosixPath(p)
    if any(part in ("..", "") for part in rel.parts) or not rel.parts:
        return None
    return rel


def layer_file_name(path: str) -> str:
    """The layer file name an images/ path is stored under: the path, with ``/`` as ``__``."""
    return str(path).replace("\\", "/").replace("/", "__")


def find_layer(layers: dict[str, Layer], path: str) -> Layer | None:
    """The layer of an event (``{file_name: layer}``) that an input_data path names."""
    for name in (str(path), layer_file_name(path), PurePosixPath(str(path).replace("\\", "/")).name):
        if name in layers:
            return layers[name]
    return None


def layer_source_file(layer: Layer, path: str) -> Path | None:
    """The file to ship as ``images/<path>``: the layer's stored original with the same base name,
    else its only original of the same suffix, else the stored file (``Layer.path``)."""
    root = Path(settings.STUDIO_DATA_ROOT)
    base = PurePosixPath(str(path).replace("\\", "/")).name
    if storage.uses_bucket():  # the data root is this machine's cache of the bucket: fill it
        shas = (layer.metadata or {}).get("source_sha256") or {}
        wanted = [(p, shas.get(PurePosixPath(p).name, "")) for p in (layer.metadata or {}).get("original_paths") or []]
        for rel, sha in wanted + ([(layer.path, layer.sha256 or "")] if layer.path else []):
            try:
                storage.local_copy(rel, sha)
            except (FileNotFoundError, ValueError):
                pass  # missing here as on a local data root
    originals = [root / p for p in ((layer.metadata or {}).get("original_paths") or [])]
    for o in originals:
        if o.name == base and o.is_file():
            return o
    same_suffix = [o for o in originals if o.suffix.lower() == Path(base).suffix.lower() and o.is_file()]
    if len(same_suffix) == 1:
        return same_suffix[0]
    stored = root / layer.path if layer.path else None
    return stored if stored is not None and stored.is_file() else None


# ------------------------------------------------------------------ gold of a task


#: the rule that picks a revision's gold replay among its succeeded replays, as an ordering (first
#: wins): the newest one accepted as gold, else the newest one. ``gold_replay`` (one revision) and
#: ``releases.services.lifecycle._gold_replays`` (a batch) both order by it.
GOLD_REPLAY_ORDER = ("-gold_accepted", "-id")


def gold_replay(task_id: int, revision_id: int):
    """The replay whose answer is the gold of a revision (``GOLD_REPLAY_ORDER``: the newest
    succeeded replay accepted as gold, else the newest succeeded one); None when there is none."""

    qs = ReplayRun.objects.filter(task_id=task_id, revision_id=revision_id, status=ReplayRun.Status.SUCCEEDED)
    return qs.order_by(*GOLD_REPLAY_ORDER).first()


def import_source(revision) -> dict | None:
    """The file's own sample and task behind a revision (a ``TaskRevision`` or its id), plain data
    (NaN as floats): ``TaskRevision.source`` (both importers set it, later revisions carry it),
    else the ``source.json`` of the revision's import replay (releases imported before that field
    existed), else None."""

    if isinstance(revision, TaskRevision):
        return import_sources([revision])[revision.pk]
    stored = TaskRevision.objects.filter(pk=revision).values_list("source", flat=True).first()
    if stored:
        return source_from_text(stored)
    run = (ReplayRun.objects.filter(revision_id=revision, artifact_dir__startswith=f"{IMPORT_ARTIFACTS}/")
           .order_by("id").only("artifact_dir").first())
    return read_source(run.artifact_dir) if run else None


def import_sources(revisions: Iterable[TaskRevision]) -> dict[int, dict | None]:
    """``{revision id: import_source(revision)}`` for loaded ``TaskRevision`` rows, with one query
    for the import replays of all those without a stored ``source`` (none when every one has it)."""
    revisions = list(revisions)
    out: dict[int, dict | None] = {r.pk: source_from_text(r.source) for r in revisions if r.source}
    rest = [r.pk for r in revisions if r.pk not in out]
    firsts: dict[int, str] = {}
    if rest:
        for rev_id, adir in (ReplayRun.objects.filter(revision_id__in=rest, artifact_dir__startswith=f"{IMPORT_ARTIFACTS}/")
                             .order_by("id").values_list("revision_id", "artifact_dir")):
            firsts.setdefault(rev_id, adir)
    for rev_id in rest:
        out[rev_id] = read_source(firsts[rev_id]) if rev_id in firsts else None
    return out


def read_source(artifact_dir: str) -> dict | None:
    p = Path(settings.STUDIO_ARTIFACT_ROOT) / artifact_dir / SOURCE_FILE
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def dora_task(task: Task, rev: TaskRevision, filled_trajectory: list, final_answer: dict) -> dict:
    """One task entry of a sample, in the benchmark's field order, from the studio's own fields
    (storage tags undone: NaN answers are written as the benchmark's NaN token)."""
    default_cat, default_code = CATEGORY_BY_DIM[task.dimension]
    spec = [f for f in from_storage(rev.answer_spec or []) if isinstance(f, dict)]
    steps = from_storage(rev.trajectory or [])
    names = from_storage(rev.tools) or sorted({step_call(s) for s in steps if isinstance(s, dict)})
    return {
        "task_category": rev.task_category or default_cat,
        "task_category_code": rev.task_category_code or default_code,
        "question": rev.question,
        "tools": names,
        "trajectory": from_storage(filled_trajectory),
        "final_answer": from_storage(final_answer),
        "eval_spec": {f.get("name"): f.get("eval_type") for f in spec},
        "answer_format": {f.get("name"): f.get("answer_format") or f.get("eval_type") for f in spec},
    }


def dora_sample_head(task: Task, rev: TaskRevision) -> dict:
    """The sample-level fields of a task (``tasks`` left empty)."""
    return {"sample_id": task.sample_id, "disaster_type": rev.disaster_type or task.event.disaster_type,
            "input_data": from_storage(rev.input_data), "classes": from_storage(rev.classes) or {}, "tasks": []}


def sample_and_task(task: Task, rev: TaskRevision, run, source: dict | None = None) -> tuple[dict, dict]:
    """``(sample head with tasks=[], task dict)`` as written to the task file, plain data.

    From ``source`` (an imported revision, :func:`import_source`) when given: the file's own dicts,
    each field the studio changed since the import replaced in place (``kernel.content.file_task``),
    ``trajectory`` and ``final_answer`` replaced by the replay's where they differ as JSON values.
    """
    trajectory, final = from_storage(run.filled_trajectory), from_storage(run.final_answer)
    if source and isinstance(source.get("sample"), dict) and isinstance(source.get("task"), dict):
        if isinstance(source.get("content"), dict):
            content = {k: from_storage(getattr(rev, k)) for k in CONTENT_FIELDS}
            return file_task(source, content, trajectory, final, dora_task(task, rev, trajectory, final))
        head = dict(source["sample"])
        head["tasks"] = []
        tdict = dict(source["task"])
        for key, cur in (("trajectory", trajectory), ("final_answer", final)):
            if key in tdict:
                if not same_value(tdict[key], cur):
                    tdict[key] = cur
            elif cur:
                tdict[key] = cur
        return head, tdict
    return dora_sample_head(task, rev), dora_task(task, rev, trajectory, final)


def dora_samples(tasks, polygons: GoldPolygons | None = None) -> dict[str, list[dict]]:
    """Group tasks (their head revisions) into samples per dimension: ``{"t1": [sample, ...], ...}``.

    In memory (for scoring a few questions); the release writer streams instead. With
    ``polygons`` (:class:`GoldPolygons`), each ``polygon_iou`` answer is in the export's form and
    its gold files are added there. Raises ``ExportError`` for a task whose head revision has no
    succeeded replay, or a gold polygon file that is not one.
    """
    by_dim: dict[str, dict[str, dict]] = {d: {} for d in TASK_FILES}
    for task in sorted(tasks, key=lambda t: (t.sample_id, t.task_index)):
        rev = task.head
        run = gold_replay(task.pk, task.head_id)
        if run is None:
            raise ExportError(f"{task.question_id}: no succeeded replay of revision {rev.number}; replay it first")
        source = import_source(rev)
        head, tdict = sample_and_task(task, rev, run, source)
        sample = by_dim[task.dimension].setdefault(task.sample_id, head)
        if polygons is not None:
            polygons.add(task.question_id, tdict, run, sample, task.event, bool(source))
        sample["tasks"].append(tdict)
    return {d: list(s.values()) for d, s in by_dim.items()}


def release_samples(release, polygons: GoldPolygons | None = None) -> tuple[dict[str, list[dict]], dict[str, Task]]:
    """The gold of a release as samples per dimension (its pinned revisions and replays), and the
    release's tasks by question id. In memory, for scoring runs pinned to the release. With
    ``polygons`` (:class:`GoldPolygons` of the release), each ``polygon_iou`` answer is in the
    export's form and its gold files are added there (``ExportError`` as the export)."""
    by_dim: dict[str, dict[str, dict]] = {d: {} for d in TASK_FILES}
    tasks = {}
    items = release.items.select_related("task__event", "revision", "replay").order_by("task__sample_id", "task__task_index")
    for item in items:
        task, rev, run = item.task, item.revision, item.replay
        if run is None:
            raise ExportError(f"{item.question_id}: release {release.version} pins no gold replay")
        source = import_source(rev)
        head, tdict = sample_and_task(task, rev, run, source)
        sample = by_dim[task.dimension].setdefault(task.sample_id, head)
        if polygons is not None:
            polygons.add(item.question_id, tdict, run, sample, task.event, bool(source))
        sample["tasks"].append(tdict)
        tasks[item.question_id] = task
    return {d: list(s.values()) for d, s in by_dim.items()}, tasks


# ------------------------------------------------------------------ gold polygon files


@dataclass(frozen=True)
class GoldPolygon:
    """One gold polygon file of a task, as the release export writes it: ``field`` (the
    ``polygon_iou`` answer field), ``target`` (its path under the export's ``tasks/`` folder, and
    the answer's value in the exported task file: the imported path, else ``gold_polygons/<name>``),
    ``src`` (the gold replay's artifact it comes from) and ``text`` (the file's text when the
    export rewrites it, ``dora_grid`` added; None: ``src``'s bytes as they are)."""
    field: str
    target: str
    src: Path
    text: str | None = None

    def data(self) -> bytes:
        """The bytes the export writes to ``tasks/<target>``."""
        return self.text.encode("utf-8") if self.text is not None else self.src.read_bytes()


class GoldPolygons:
    """The gold polygon files of tasks in the release export's form: the one place that resolves a
    ``polygon_iou`` answer's gold file from its gold replay's artifacts (``replay.services.paths.
    artifact_path``: with a bucket, fetched to this machine first), names it (``target``) and adds
    ``dora_grid`` when the file has none. The export (:class:`LayoutWriter`) writes what it gives;
    ``evaluation.goldset`` scores a release's or the studio's tasks with it, so a run's stored scores
    are the official evaluator's on the exported files. ``release_id``: the release whose layer
    pins give the georeferencing (None: the layers as they are). Resolved per task, from that
    task's own replay: two replays may write artifacts of one name with different polygons.
    ``by_question``: ``{question id: [GoldPolygon]}`` of the tasks passed to :meth:`add`."""

    def __init__(self, release_id: int | None = None):
        self.release_id = release_id
        self._pins = None
        self._layers: dict[int, dict[str, Layer]] = {}
        self.by_question: dict[str, list[GoldPolygon]] = {}

    def event_layers(self, event) -> dict[str, Layer]:
        """The event's layers by file name, each at the version the release pins
        (``releases.services.pins``), loaded once per event."""
        if event.pk not in self._layers:
            if self._pins is None:
                self._pins = release_layer_pins(self.release_id)
            self._layers[event.pk] = {l.file_name: pinned_layer(l, self._pins) for l in Layer.objects.filter(event=event)}
        return self._layers[event.pk]

    def grid(self, sample: dict, event) -> dict:
        """dora_grid of the sample's first georeferenced raster (post image first); identity pixel grid otherwise."""
        layers = self.event_layers(event)
        inputs = sample.get("input_data") or {}
        for part in (inputs.get("post_image"), inputs.get("pre_image"), inputs):
            for p in data_paths(part):
                layer = find_layer(layers, p)
                if layer is not None and layer.kind != Layer.Kind.VECTOR and (layer.metadata or {}).get("transform"):
                    return {"transform": [float(x) for x in layer.metadata["transform"][:6]], "crs": layer.crs or None}
        return {"transform": IDENTITY_GRID, "crs": None}

    def resolve(self, question_id: str, tdict: dict, run, sample: dict, event,
                from_source: bool) -> tuple[list[GoldPolygon], list[str]]:
        """``(files, missing values)`` of one task dict (``sample_and_task``'s, of replay ``run``;
        ``sample``: its sample head, for the grid; ``from_source``: an imported revision, whose
        answers keep their paths and files their bytes). Rewrites ``tdict["final_answer"]``'s
        polygon values to their ``target`` (a new dict). A value whose file is not among the
        replay's artifacts is returned in ``missing`` and left as it is. Raises ``ExportError``
        when a gold file is not JSON or not a gold polygon (``dora_gold_polygon.schema.json``)."""
        spec, answer = tdict.get("eval_spec"), tdict.get("final_answer")
        files: list[GoldPolygon] = []
        missing: list[str] = []
        if not isinstance(spec, dict) or not isinstance(answer, dict):
            return files, missing
        for name, typ in spec.items():
            value = answer.get(name)
            if typ != "polygon_iou" or not isinstance(value, str) or not value.strip():
                continue
            base = PurePosixPath(value.replace("\\", "/")).name
            src = None
            for cand in (value, base, f"gold_polygons/{base}"):
                try:
                    p = artifact_path(run, cand) if run.artifact_dir else None
                except ValueError:
                    p = None
                if p is not None and p.is_file():
                    src = p
                    break
            if src is None:
                missing.append(value)
                continue
            rel = safe_relative(value)
            if rel is not None and (from_source or (rel.parts[0] == "gold_polygons" and len(rel.parts) == 2)):
                target = value  # an imported answer keeps its path; the file goes to tasks/<path>
            else:
                target = f"gold_polygons/{base}"
            if target != value:
                answer = dict(answer)
                answer[name] = target
                tdict["final_answer"] = answer
            try:
                doc = json.loads(src.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise ExportError(f"{question_id}: final_answer.{name}: gold polygon {src.name} is not JSON ({exc})") from exc
            text = None
            if not from_source and isinstance(doc, dict) and "dora_grid" not in doc:
                doc["dora_grid"] = self.grid(sample, event)
                text = dumps(doc)
            problems = schema_problems("gold_polygon", doc)
            if problems:
                raise ExportError(f"tasks/{target}: {problems[0][0]}: {problems[0][1]} (question {question_id})")
            files.append(GoldPolygon(name, target, src, text))
        return files, missing

    def add(self, question_id: str, tdict: dict, run, sample: dict, event, from_source: bool) -> None:
        """:meth:`resolve`, keeping the files in ``by_question`` (only tasks with a ``polygon_iou``
        field and a file found)."""
        files, _ = self.resolve(question_id, tdict, run, sample, event, from_source)
        if files:
            self.by_question[question_id] = files


# ------------------------------------------------------------------ the streaming writer


@dataclass(slots=True)
class Entry:
    """One question to write: ids only (the heavy rows are loaded sample by sample). A release's
    entries are spooled to disk in export order (:class:`SortedEntries`), not held all at once."""

    task_id: int
    revision_id: int
    replay_id: int | None
    question_id: str
    dimension: str
    sample_id: str
    task_index: int
    position: tuple = ()  # (sample index in its source file,) for imported tasks: keeps the file's order

    def order(self) -> tuple:
        return ((0, *self.position) if self.position else (1,)) + (self.sample_id, self.task_index)


def attach_positions(entries: list[Entry]) -> list[Entry]:
    """Set ``position`` of entries whose revision was imported (sample order of the source file)."""

    by_rev = {e.revision_id: e for e in entries}
    ids = list(by_rev)
    # in batches: one statement with 100,000 parameters held the whole id list three times over
    chunks = [ids[i:i + 2000] for i in range(0, len(ids), 2000)]
    for chunk in chunks:
        for rev_id, text in TaskRevision.objects.filter(pk__in=chunk).exclude(source="").values_list("pk", "source"):
            src = source_from_text(text)
            if isinstance(src, dict) and isinstance(src.get("sample_index"), int):
                by_rev[rev_id].position = (src["sample_index"],)
    rows = sorted(row for chunk in chunks for row in ReplayRun.objects.filter(
        revision_id__in=chunk, artifact_dir__startswith=f"{IMPORT_ARTIFACTS}/").values_list("id", "revision_id", "artifact_dir"))
    seen = set()
    for _, rev_id, adir in rows:
        if rev_id in seen:
            continue
        seen.add(rev_id)
        if by_rev[rev_id].position:
            continue
        src = read_source(adir)
        if src and isinstance(src.get("sample_index"), int):
            by_rev[rev_id].position = (src["sample_index"],)
    return entries


#: rank of each dimension in the export: the order of ``TASK_FILES`` (unknown dimensions last, not written)
DIM_RANK = {dim: i for i, dim in enumerate(TASK_FILES)}


def export_order(e: Entry) -> tuple:
    """The key an export writes entries in: dimension (``TASK_FILES`` order), then ``Entry.order``
    (imported samples in their file's order first, then sample id, task index)."""
    return (DIM_RANK.get(e.dimension, len(DIM_RANK)), *e.order())


class SortedEntries:
    """A release's entries in :func:`export_order`, spooled to disk instead of held in memory.

    Built from ``rows`` (entries without positions, any order) read in chunks of ``chunk``: each
    chunk gets its positions (:func:`attach_positions`), is sorted by :func:`export_order` and
    written as one sorted run (JSON lines) to a temporary folder; iterating merges the runs
    (``heapq.merge``, earlier run first on equal keys: the same order as one stable sort of all
    rows). Re-iterable; ``len`` is the number of entries. Memory: one chunk while building, one
    line and one file buffer per run while iterating (issue 16: 100,000 entries held at once were
    about 45 MB of an export's peak). The folder is made in ``dir`` (the system's temporary folder
    if None) named ``prefix`` + random; ``close()`` removes it (also when garbage-collected or at
    exit; a killed process leaves it, as it leaves an export's staging folder).
    """

    def __init__(self, rows: Iterable[Entry], *, chunk: int = 5000, dir: Path | str | None = None,
                 prefix: str = "export-entries-", _runs: list[Path] | None = None,
                 _exclude: frozenset = frozenset(), _count: int = 0, _dir: str | None = None):
        if _runs is not None:  # a view of another instance's runs (``without``)
            self._dir, self._runs, self._exclude, self._count = _dir, _runs, _exclude, _count
            return
        if dir is not None:
            Path(dir).mkdir(parents=True, exist_ok=True)
        self._dir = tempfile.mkdtemp(prefix=prefix, dir=dir)
        self._finalizer = weakref.finalize(self, shutil.rmtree, self._dir, True)
        self._runs, self._exclude, self._count = [], frozenset(), 0
        batch: list[Entry] = []
        for e in rows:
            batch.append(e)
            if len(batch) >= chunk:
                self._spill(batch)
                batch = []
        if batch:
            self._spill(batch)

    def _spill(self, batch: list[Entry]) -> None:
        attach_positions(batch)
        path = Path(self._dir) / f"run-{len(self._runs):05d}.jsonl"
        with open(path, "w", encoding="utf-8") as fh:
            for e in sorted(batch, key=export_order):
                fh.write(json.dumps([e.task_id, e.revision_id, e.replay_id, e.question_id, e.dimension,
                                     e.sample_id, e.task_index, list(e.position)]) + "\n")
        self._runs.append(path)
        self._count += len(batch)

    @staticmethod
    def _read(path: Path) -> Iterator[Entry]:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                *ids, position = json.loads(line)
                yield Entry(*ids, position=tuple(position))

    def __iter__(self) -> Iterator[Entry]:
        merged = heapq.merge(*(self._read(p) for p in self._runs), key=export_order)
        if self._exclude:
            return (e for e in merged if e.task_id not in self._exclude)
        return merged

    def __len__(self) -> int:
        return self._count

    def chunks(self, size: int = 2000) -> Iterator[list[Entry]]:
        """The entries in lists of at most ``size``, in order."""
        batch: list[Entry] = []
        for e in self:
            batch.append(e)
            if len(batch) >= size:
                yield batch
                batch = []
        if batch:
            yield batch

    def without(self, task_ids: set[int], count: int) -> SortedEntries:
        """A view of these entries without those of ``task_ids`` (``count`` of them are here);
        it shares the runs (this instance must outlive it)."""
        return SortedEntries((), _runs=self._runs, _exclude=self._exclude | frozenset(task_ids),
                             _count=self._count - count, _dir=self._dir)

    def close(self) -> None:
        finalizer = getattr(self, "_finalizer", None)
        if finalizer is not None:
            finalizer()

    def __enter__(self) -> SortedEntries:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


ProgressFn = Callable[[str, int, int], None]


@dataclass
class LayoutResult:
    files: dict[str, dict] = field(default_factory=dict)  # relative path → {bytes, sha256}
    questions: dict[str, dict] = field(default_factory=dict)
    missing: dict[str, dict] = field(default_factory=dict)  # path → {path, question_ids, reason}
    counts: dict = field(default_factory=dict)
    events: dict[str, dict] = field(default_factory=dict)
    samples: int = 0
    content_sha256: str = ""


def folder_digest(files: dict[str, dict]) -> str:
    """A release's ``content_sha256`` (sidecar ``format_version`` 2): ``kernel.hashing.tree_digest``
    of every file the release folder ships (``{relative path: {sha256, ...}}``: ``tasks/``,
    ``images/``, ``schemas/``, ``variants/`` and anything else) except the sidecar
    ``studio_manifest.json``, which holds the digest. Stable: SHA-256 over the lines
    ``"<file sha256>  <path>\n"`` sorted by path (``docs/security.md``)."""
    return tree_digest({p: i["sha256"] for p, i in files.items() if p != MANIFEST_NAME})


def folder_files(folder: Path) -> list[str]:
    """The relative POSIX paths of the regular files under ``folder`` (sorted; what it ships)."""
    folder = Path(folder)
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def content_digest(files: dict[str, dict]) -> str:
    """The legacy digest (sidecar ``format_version`` 1, releases published before the digest
    covered the whole folder): sha256 of the canonical JSON ``{path: sha256}`` of the task files
    and gold polygons only (``tasks/``, and the robustness variants' ``variants/tasks/``)."""
    return hashlib.sha256(canonical({p: i["sha256"] for p, i in files.items()
                                     if p.startswith(("tasks/", "variants/tasks/"))})
                          .encode("utf-8")).hexdigest()


class LayoutWriter:
    """Writes entries into ``out`` (an empty folder). ``images``: copy input files to images/;
    ``sidecar``: collect per-question provenance (authors, reviewers, QC, …) for the manifest;
    ``release_id``: the release whose agent runs the adjudication summary counts;
    ``question_sink``: with ``sidecar``, called ``(question_id, metadata)`` for each question as it
    is written instead of keeping it in ``result.questions`` (a streamed manifest: memory does not
    grow with the number of questions)."""

    def __init__(self, out: Path, *, images: bool = True, sidecar: bool = True, release_id: int | None = None,
                 progress: ProgressFn | None = None, question_sink: Callable[[str, dict], None] | None = None):
        self.out = Path(out)
        self.images = images
        self.sidecar = sidecar
        self.release_id = release_id
        self.progress = progress or (lambda stage, done, total: None)
        self.question_sink = question_sink or self._keep_question
        self.result = LayoutResult()
        self._gold = GoldPolygons(release_id)  # the gold polygon files, and the event layers as the release pins them
        self._layer_infos: dict[int, dict] = {}
        self._image_src: dict[str, Path] = {}
        self._people: dict[int, tuple[list, list]] = {}  # task id → (revision (number, author) rows, approvers)
        # the current batch's rows (``_prefetch``)
        self._tasks: dict[int, Task] = {}
        self._revs: dict[int, TaskRevision] = {}
        self._runs: dict[int, ReplayRun] = {}
        self._sources: dict[int, dict | None] = {}
        self._variants: dict[int, dict] = {}
        self._fields: dict[str, dict[int, Any]] = {}
        self._counts = {"by_dimension": Counter(), "by_disaster_type": Counter(), "by_modality": Counter()}

    # -- public
    def write(self, entries: Iterable[Entry]) -> LayoutResult:
        """Write ``entries`` (a list, or :class:`SortedEntries`: streamed in its order) dimension by
        dimension (``TASK_FILES`` order), each dimension's in ``Entry.order``."""
        tasks_dir = self.out / "tasks"
        tasks_dir.mkdir(parents=True, exist_ok=True)
        if isinstance(entries, SortedEntries):
            total, ordered = len(entries), iter(entries)
        else:
            entries = list(entries)
            total, ordered = len(entries), iter(sorted(entries, key=export_order))
        done = 0
        dims = list(TASK_FILES)
        for rank, dim_entries in groupby(ordered, key=lambda e: DIM_RANK.get(e.dimension, len(dims))):
            if rank == len(dims):  # a dimension without a task file: counted, not written
                continue
            file_name = TASK_FILES[dims[rank]]
            writer = SampleArrayWriter(tasks_dir / file_name)
            try:
                for sample_id, group in self._batches(dim_entries):
                    writer.write(self._sample(file_name, sample_id, group))
                    self.result.samples += 1
                    done += len(group)
                    self.progress("tasks", done, total)
            except BaseException:
                writer.abort()
                raise
            self.result.files[f"tasks/{file_name}"] = writer.close()
        self.result.counts = {"tasks": total, "samples": self.result.samples,
                              **{k: dict(sorted(v.items())) for k, v in self._counts.items()}}
        self.result.content_sha256 = content_digest(self.result.files)
        return self.result

    # -- a batch of samples
    def _batches(self, dim_entries: Iterable[Entry]) -> Iterator[tuple[str, list[Entry]]]:
        """``(sample id, its entries)`` in order, the rows of each run of samples holding about
        ``EXPORT_BATCH`` tasks loaded first (``_prefetch``): a few queries per batch instead of
        several per sample and task, and memory bounded by the batch."""
        chunk: list[tuple[str, list[Entry]]] = []
        size = 0
        for sample_id, group in groupby(dim_entries, key=lambda e: e.sample_id):
            group = list(group)
            chunk.append((sample_id, group))
            size += len(group)
            if size >= EXPORT_BATCH:
                self._prefetch([e for _, g in chunk for e in g])
                yield from chunk
                chunk, size = [], 0
        if chunk:
            self._prefetch([e for _, g in chunk for e in g])
            yield from chunk

    def _prefetch(self, entries: list[Entry]) -> None:
        """Load the rows ``_sample`` needs for ``entries`` (the previous batch's are dropped): tasks
        with their event, revisions, replays, import sources, and for the sidecar the authors and
        approvers, robustness-variant rows and the batched sidecar fields."""
        task_ids = [e.task_id for e in entries]
        self._tasks = Task.objects.select_related("event").in_bulk(task_ids)
        self._revs = TaskRevision.objects.in_bulk([e.revision_id for e in entries])
        self._runs = ReplayRun.objects.in_bulk([e.replay_id for e in entries if e.replay_id])
        self._sources = import_sources(self._revs.values())
        if self.sidecar:
            self._people = {}
            self._load_people(task_ids)
            self._variants = {row.pop("task_id"): row for row in TaskVariant.objects.filter(task_id__in=task_ids)
                              .values("task_id", "kind", "params", "tools")}
            self._fields = {name: batch(task_ids, self.release_id) for name, batch in SIDECAR_BATCH_FIELDS.items()}

    # -- one sample
    def _sample(self, file_name: str, sample_id: str, group: list[Entry]) -> dict:
        idxs = [e.task_index for e in group]
        if idxs != list(range(len(group))):
            raise ExportError(
                f"tasks/{file_name}: sample {sample_id}: the release holds tasks {idxs} of this sample, but question "
                f"ids are positional (<sample_id>_task<i> = i-th task): include tasks 0..{max(idxs)} or none")
        tasks, revs, runs = self._tasks, self._revs, self._runs
        sample = None
        for e in group:
            task, rev, run = tasks[e.task_id], revs[e.revision_id], runs.get(e.replay_id)
            if run is None or run.status != ReplayRun.Status.SUCCEEDED:
                raise ExportError(f"{e.question_id}: no succeeded replay of revision {rev.number}; replay it first")
            source = self._sources[rev.pk]
            head, tdict = sample_and_task(task, rev, run, source)
            if sample is None:
                sample = head
                event = task.event
            self._gold_polygons(e, tdict, run, sample, event, bool(source))
            sample["tasks"].append(tdict)
            self._count(e, sample, tdict)
            if self.sidecar:
                self.question_sink(e.question_id, self._question_meta(e, task, rev, run, file_name, source))
            self.result.events.setdefault(event.slug, {"name": event.name, "disaster_type": event.disaster_type,
                                                       "source": public_source(event.source)})
        problems = schema_problems("task_file", sample, ref="sample")
        if problems:
            where, msg = problems[0]
            raise ExportError(f"tasks/{file_name}: sample {sample_id}: {where}: {msg}")
        if self.images:
            self._copy_images(sample, event, [e.question_id for e in group])
        return sample

    def _count(self, e: Entry, sample: dict, tdict: dict) -> None:
        content = {"disaster_type": sample.get("disaster_type") or "", "input_data": sample.get("input_data") or {},
                   "task_category_code": tdict.get("task_category_code")}
        rep = qc.release_report([{"question_id": e.question_id, "content": content, "dimension": e.dimension}])
        for key in self._counts:
            self._counts[key].update(rep[key])

    # -- images
    def _event_layers(self, event) -> dict[str, Layer]:
        """The event's layers by file name; for a release, each at the version the release pins
        (``releases.services.pins``: its files, georeferencing and metadata), so a re-import after
        the release changes nothing it ships (:meth:`GoldPolygons.event_layers`)."""
        return self._gold.event_layers(event)

    def _missing(self, path: str, qids: list[str], reason: str) -> None:
        m = self.result.missing.setdefault(path, {"path": path, "question_ids": [], "reason": reason})
        m["question_ids"].extend(q for q in qids if q not in m["question_ids"])

    def _copy_images(self, sample: dict, event, qids: list[str]) -> None:
        layers = self._event_layers(event)
        refs = data_paths(sample.get("input_data") or {})
        for t in sample.get("tasks") or []:  # bare layer names in trajectory arguments
            for step in t.get("trajectory") or []:
                for p in data_paths(step.get("args") if isinstance(step, dict) else None):
                    if p not in refs and safe_relative(p) is not None and find_layer(layers, p) is not None:
                        refs.append(p)
        for p in refs:
            rel = safe_relative(p)
            if rel is None:
                self._missing(p, qids, "absolute path or outside images/: not shipped")
                continue
            layer = find_layer(layers, p)
            if layer is None:
                self._missing(p, qids, f"no layer of event {event.slug} has this file")
                continue
            src = layer_source_file(layer, p)
            if src is None:
                self._missing(p, qids, f"the stored file of layer {layer.file_name} is missing")
                continue
            key = f"images/{rel.as_posix()}"
            if key in self.result.files:
                if self._image_src[key] != src and sha256_file(src) != self.result.files[key]["sha256"]:
                    raise ExportError(f"{key}: two different files would share this path ({self._image_src[key]} "
                                      f"and {src}, questions {', '.join(qids)})")
                continue
            self.result.files[key] = copy_hashed(src, self.out / key)
            self._image_src[key] = src

    # -- polygon golds
    def _gold_polygons(self, e: Entry, tdict: dict, run, sample: dict, event, from_source: bool) -> None:
        """Write the task's gold polygon files (:meth:`GoldPolygons.resolve`: the answer values
        rewritten to their paths under ``tasks/``); two different files of one path are an error."""
        files, missing = self._gold.resolve(e.question_id, tdict, run, sample, event, from_source)
        for value in missing:
            self._missing(value, [e.question_id], "gold polygon file not found among the replay's artifacts")
        for gp in files:
            key = f"tasks/{gp.target}"
            info = write_text_hashed(self.out / key, gp.text) if gp.text is not None else None
            if key in self.result.files:
                new_sha = info["sha256"] if info else sha256_file(gp.src)
                if new_sha != self.result.files[key]["sha256"]:
                    raise ExportError(f"{key}: two different gold polygons would share this name (question {e.question_id})")
                continue
            self.result.files[key] = info or copy_hashed(gp.src, self.out / key)

    # -- sidecar
    def _keep_question(self, question_id: str, meta: dict) -> None:
        self.result.questions[question_id] = meta

    def _question_meta(self, e: Entry, task: Task, rev: TaskRevision, run, file_name: str, source: dict | None) -> dict:
        if task.pk not in self._people:  # a batch's tasks in two queries (_prefetch fills them first)
            self._load_people([task.pk])
        revisions, approvers = self._people.pop(task.pk)
        authors = list(dict.fromkeys(name for number, name in revisions if number <= rev.number))
        reviewers = list(dict.fromkeys(approvers))
        return {
            "task_id": task.pk, "event": task.event.slug, "dimension": e.dimension, "file": f"tasks/{file_name}",
            "sample_id": e.sample_id, "task_index": e.task_index, "revision": rev.number,
            "authors": authors, "reviewers": reviewers, "qc": self._qc(task, rev, run),
            "replay_id": run.pk, "replay_hash": run.replay_hash or "", "gold_accepted": bool(run.gold_accepted),
            **{name: (self._fields[name][task.pk] if name in self._fields else field(task, self.release_id))
               for name, field in SIDECAR_FIELDS.items()},
            "imported_from": ({k: source.get(k) for k in ("file", "sample_index", "task_index", "release", "source_dir", "provenance")}
                              if source else None),
        }

    def _load_people(self, task_ids: list[int]) -> None:
        """Authors of each task's revisions (by number) and approvers (by audit order), for ``_question_meta``."""
        people = {pk: ([], []) for pk in task_ids}
        for task_id, number, name in (TaskRevision.objects.filter(task_id__in=task_ids, author__isnull=False)
                                      .order_by("task_id", "number").values_list("task_id", "number", "author__username")):
            people[task_id][0].append((number, name))
        for task_id, name in (AuditEvent.objects.filter(task_id__in=task_ids, to_status=Task.Status.APPROVED,
                                                        actor__isnull=False)
                              .order_by("id").values_list("task_id", "actor__username")):
            people[task_id][1].append(name)
        self._people.update(people)

    def _qc(self, task: Task, rev: TaskRevision, run) -> dict:
        if task.event_id not in self._layer_infos:
            self._layer_infos[task.event_id] = {l.file_name: layer_info(l) for l in self._event_layers(task.event).values()}
        content = revision_content(rev)
        variant = self._variants.get(task.pk)
        if variant is not None:  # a robustness variant: its own checks, as on the task page
            content["variant"] = variant
        try:
            fill_layer_cache(self._event_layers(task.event).values(), content)  # with a bucket: its files here
            findings = qc.full_qc(content, layers=self._layer_infos[task.event_id],
                                  replay={"trajectory": run.filled_trajectory or [], "final_answer": run.final_answer or {},
                                          "hash": run.replay_hash, "variant_check": run.variant_check},
                                  data_root=settings.STUDIO_DATA_ROOT)
            found = [f.as_dict() for f in findings]
        except Exception as exc:  # QC must not stop an export: record that it could not run
            found = [{"check": "qc.failed", "severity": "warning", "message": f"QC could not run: {exc}", "location": ""}]
        return {"errors": sum(f["severity"] == "error" for f in found),
                "warnings": sum(f["severity"] == "warning" for f in found), "findings": found}



#: Fields that apps above releases add to each question of the sidecar
#: (``studio_manifest.json``), in registration order: ``name -> field(task, release_id)`` returning
#: a JSON value (``release_id`` is None for an export of the tasks' heads). The evaluation app
#: registers ``adjudication`` (``evaluation.selectors.adjudication.release_adjudication``) in its ``ready()``;
#: releases does not import evaluation, which sits above it (issue 19).
SIDECAR_FIELDS: dict[str, Callable[[Task, int | None], Any]] = {}
#: the same fields for a batch of tasks where the app gave one: ``name -> batch(task_ids,
#: release_id)`` returning ``{task id: value}`` for every id, equal to ``field`` task by task
SIDECAR_BATCH_FIELDS: dict[str, Callable[[list[int], int | None], dict[int, Any]]] = {}
#: tasks whose rows an export loads at once (``LayoutWriter._batches``; whole samples, so a batch
#: may hold a few more). bench/export.py at 4,000 tasks: peak RSS 178 MB with 200, 185 MB with 500
#: (173 MB one sample at a time); about 0.05 queries per task either way
EXPORT_BATCH = 200


def register_sidecar_field(name: str, field: Callable[[Task, int | None], Any],
                           batch: Callable[[list[int], int | None], dict[int, Any]] | None = None) -> None:
    """Add (or replace) sidecar field ``name`` computed by ``field(task, release_id)``; ``batch``,
    if given, computes it for a list of task ids at once (``{task id: value}``, one entry per id,
    the same values as ``field``), which the export uses (a few queries per batch, not per task)."""
    SIDECAR_FIELDS[name] = field
    SIDECAR_BATCH_FIELDS.pop(name, None)
    if batch is not None:
        SIDECAR_BATCH_FIELDS[name] = batch


def copy_schemas(out: Path, files: dict[str, dict]) -> dict[str, str]:
    """Copy the JSON Schemas into ``out/schemas/``; returns ``{kind: relative path}``."""
    rels = {}
    for kind, name in SCHEMA_FILES.items():
        rel = f"schemas/{name}"
        files[rel] = copy_hashed(SCHEMA_DIR / name, out / rel)
        rels[kind] = rel
    return rels


def staging_dir_for(target: Path) -> Path:
    """A fresh temporary folder beside ``target`` (same file system, so the final rename is atomic)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{target.name}.tmp-{uuid.uuid4().hex[:10]}"
    tmp.mkdir()
    return tmp


# ------------------------------------------------------------------ export_tasks (heads of tasks)


def head_entries(tasks) -> list[Entry]:
    """Entries for tasks at their head revision and its gold replay; ``ExportError`` names a task without one."""
    entries = []
    for task in tasks:
        run = gold_replay(task.pk, task.head_id) if task.head_id else None
        if run is None:
            number = task.head.number if task.head_id else 0
            raise ExportError(f"{task.question_id}: no succeeded replay of revision {number}; replay it first")
        entries.append(Entry(task.pk, task.head_id, run.pk, task.question_id, task.dimension, task.sample_id,
                             task.task_index))
    return attach_positions(entries)


def write_task_files(tasks, out_dir: Path) -> tuple[list[Path], list[dict]]:
    """Write the benchmark's layout of ``tasks`` at their head revision and gold replay:
    ``out_dir/tasks/t*.json`` (and ``tasks/gold_polygons/``) for the dimensions that have tasks,
    and ``out_dir/images/<path>`` for every input file they name (the event's layers, as a release
    ships them: the benchmark's harness shows the model these paths). Returns ``(task file paths,
    missing)``: ``missing`` lists the named files not shipped, ``[{path, question_ids, reason}]``.

    Everything is written into a temporary folder first and moved into place at the end, so a
    partial file is never visible under its final name.
    """
    out_dir = Path(out_dir)
    entries = head_entries(list(tasks))
    staging = staging_dir_for(out_dir / "tasks")
    try:
        result = LayoutWriter(staging, images=True, sidecar=False).write(entries)
        written = []
        for rel in sorted(result.files):
            dst = out_dir / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            os.replace(staging / rel, dst)
            if rel.startswith("tasks/") and rel.count("/") == 1:
                written.append(dst)
        return written, sorted(result.missing.values(), key=lambda m: m["path"])
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _tempdir_digest(entries: list[Entry]) -> str:
    """The content digest of the task files ``entries`` would produce (written to a temp folder)."""
    with tempfile.TemporaryDirectory(dir=Path(settings.STUDIO_DATA_ROOT)) as tmp:
        return LayoutWriter(Path(tmp), images=False, sidecar=False).write(entries).content_sha256
