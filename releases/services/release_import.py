"""Importing a release: ``import_release_dir`` reads a benchmark folder in the export's layout
(with or without the sidecar) into events, layers, tasks, revisions and gold replays; idempotent
and all-or-nothing. Robustness variants under ``variants/`` are read back linked to their base
tasks (``releases.services.release_variants``).

Permissions: ``data.import`` for an import by a user (the command line may import without one).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.text import slugify

from annotation.importers.errors import DataImportError
from annotation.models import Event, Layer, Task
from annotation.services import imports
from annotation.services.imports import staging_name as imports_staging_name
from annotation.services.review import approve_imported
from annotation.services.task_import import file_proposals, file_task_content
from annotation.services.tasks import TaskLockedError, content_problem, require_unreleased, write_imported_revision
from kernel.content import MAX_SAMPLE_ID, source_record
from kernel.golddiff import is_blank_obs
from kernel.inputs import entry_of, phase_of_key
from kernel.taskfile import (
    JSONNestingError,
    TaskFileError,
    bounded_loads,
    read_task_file,
    sample_label,
    source_text,
    to_storage,
)
from releases.models import Release, ReleaseTask
from releases.services import release_variants
from releases.services.export import (
    IMPORT_ARTIFACTS,
    MANIFEST_NAME,
    SOURCE_FILE,
    TASK_FILES,
    _validator,
    canonical,
    data_paths,
    dumps,
    find_layer,
    folder_digest,
    folder_files,
    gold_replay,
    import_source,
    json_path,
    layer_file_name,
    safe_relative,
    sample_and_task,
    sha256_file,
)
from releases.services.lifecycle import SEMVER_RE, ReleaseError, ReleaseImmutableError, _publish
from releases.services.pins import pin_layers
from replay.services.gold import record_imported_gold
from replay.services.paths import artifact_store
from studio.permissions import Action, require


class ReleaseImportError(Exception):
    """A file of a release folder cannot be imported. ``file``, ``sample``, ``field``, ``problem``
    say where and what; the message is ``<file>: sample <id>: <field>: <problem>``."""

    def __init__(self, file, problem: str, *, sample: str | None = None, field: str | None = None):
        self.file, self.problem, self.sample, self.field = str(file), problem, sample, field
        parts = [self.file]
        if sample is not None:
            parts.append(f"sample {sample}")
        if field:
            parts.append(field)
        super().__init__(": ".join(parts + [problem]))



@dataclass
class _Planned:
    dim: str
    file: str  # tasks/<name>
    sample_index: int
    task_index: int
    sample: dict
    task: dict
    question_id: str
    event: str = ""



@dataclass
class ImportReport:
    """What an import did: question ids by outcome, events created, layers by status, images
    not found, the release (version and whether it was created)."""

    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    events_created: list[str] = field(default_factory=list)
    layers: dict[str, str] = field(default_factory=dict)  # "<event>/<path>" → linked | created
    images_missing: list[dict] = field(default_factory=list)
    release: str | None = None
    release_created: bool = False
    #: question id → one row per blank answer field (``task_import.file_proposals``), written tasks only
    proposals: dict[str, list[dict]] = field(default_factory=dict)

    def summary(self) -> dict:
        return {"created": self.created, "updated": self.updated, "unchanged": self.unchanged,
                "events_created": self.events_created, "layers": self.layers,
                "images_missing": self.images_missing, "release": self.release,
                "release_created": self.release_created, "proposals": self.proposals}



@dataclass
class _Parsed:
    root: Path
    tasks_dir: Path
    sidecar: dict | None
    planned: list[_Planned]
    images: dict[tuple[str, str], Path]  # (event slug, path) → file
    missing: dict[str, dict]
    polygons: dict[str, Path]  # value as in final_answer → file



def _first_schema_problem(name: str, instance: Any):
    errors = sorted(_validator(name, None).iter_errors(instance), key=lambda e: list(map(str, e.absolute_path)))
    if not errors:
        return None
    err = errors[0]
    parts = list(err.absolute_path)
    if err.validator == "required" and "'" in err.message:
        parts.append(err.message.split("'")[1])
    return parts, err.message



def _load_json(path: Path, rel: str):
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ReleaseImportError(rel, f"cannot be read ({exc})") from exc
    try:
        return bounded_loads(text)
    except JSONNestingError as exc:
        raise ReleaseImportError(rel, exc.problem, field=f"line {exc.line}, column {exc.column}") from None
    except json.JSONDecodeError as exc:
        raise ReleaseImportError(rel, f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from exc



def _read_task_file(path: Path, rel: str) -> list:
    """The samples of a task file, checked as the benchmark's loader checks them
    (``kernel.taskfile.read_task_file``); ``ReleaseImportError`` naming file, sample, task, field."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ReleaseImportError(rel, f"cannot be read ({exc})") from exc
    try:
        return read_task_file(data, rel).samples
    except TaskFileError as exc:
        field = exc.field if exc.task is None else f"tasks[{exc.task}]" + (f".{exc.field}" if exc.field else "")
        raise ReleaseImportError(rel, exc.problem, sample=exc.sample, field=field) from exc



def _polygon_answers(task: dict) -> list[tuple[str, str]]:
    """``(field, value)`` of the task's polygon_iou answers whose value is a string (a gold file)."""
    spec, answer = task.get("eval_spec"), task.get("final_answer")
    if not isinstance(spec, dict) or not isinstance(answer, dict):
        return []
    return [(n, answer[n]) for n, t in spec.items() if t == "polygon_iou" and isinstance(answer.get(n), str)]



def refuse_symlinks(root: Path) -> None:
    """Raise :class:`ReleaseImportError` (field ``path``) for the first symbolic link anywhere
    under ``root``: an import reads only what the folder holds, never what a link points to
    (``/etc/passwd``, another user's data). The folder itself may be a link the operator named."""
    for dirpath, dirnames, filenames in os.walk(root):
        for name in sorted(dirnames + filenames):
            p = Path(dirpath) / name
            if p.is_symlink():
                raise ReleaseImportError(p.relative_to(root).as_posix(), "a symbolic link; release folders are "
                                         "read without following links (copy the file into the folder)", field="path")



def read_release_dir(path, *, event_slug: str | None = None) -> _Parsed:
    """Read and check a release folder without writing anything (the first phase of an import).

    Accepts ``DIR/tasks/t*.json`` (a release) or ``DIR/t*.json`` (a bare tasks folder). Task files
    are read as the benchmark's loader reads them (``kernel.taskfile``): every value it accepts is
    kept (NaN, list ``args``, extra keys). Raises :class:`ReleaseImportError` naming the file, the
    sample and the field of the first problem: what the loader refuses (invalid JSON, not a list,
    no ``sample_id``, no ``tasks``, a task without ``question``/``task_category``/
    ``task_category_code``), a symbolic link in the folder (:func:`refuse_symlinks`), a sample without tasks, a
    duplicate sample id, a sidecar checksum
    mismatch, an unreadable gold polygon.
    """
    root = Path(path)
    if not root.is_dir():
        raise ReleaseImportError(root, "not a directory")
    refuse_symlinks(root)
    tasks_dir = root / "tasks" if (root / "tasks").is_dir() else root
    base = root if tasks_dir != root else root.parent
    found = [(dim, tasks_dir / name, root / "images") for dim, name in TASK_FILES.items() if (tasks_dir / name).is_file()]
    if not found:
        raise ReleaseImportError(tasks_dir, f"no task file ({', '.join(TASK_FILES.values())})")
    # robustness variants beside the benchmark's files (release_variants), read the same way
    variants_dir = root / release_variants.VARIANTS_DIR
    if tasks_dir != root and (variants_dir / "tasks").is_dir():
        found += [(dim, variants_dir / "tasks" / name, variants_dir / "images") for dim, name in TASK_FILES.items()
                  if (variants_dir / "tasks" / name).is_file()]
    rel_of = lambda p: p.relative_to(base).as_posix()  # noqa: E731

    sidecar = None
    if (root / MANIFEST_NAME).is_file():
        sidecar = _load_json(root / MANIFEST_NAME, MANIFEST_NAME)
        prob = _first_schema_problem("manifest", sidecar)
        if prob:
            raise ReleaseImportError(MANIFEST_NAME, prob[1], field=json_path(prob[0]))
        for rel, info in sidecar["files"].items():
            p = root / rel
            if safe_relative(rel) is None:
                raise ReleaseImportError(MANIFEST_NAME, "path outside the release folder", field=f"files.{rel}")
            if not p.is_file():
                raise ReleaseImportError(rel, "listed in studio_manifest.json but missing")
            if sha256_file(p) != info["sha256"]:
                raise ReleaseImportError(rel, f"sha256 differs from studio_manifest.json ({info['sha256'][:12]}…): "
                                              "the file changed after the export")
        if sidecar.get("format_version", 1) >= 2:  # the digest covers the whole folder (folder_digest)
            for rel in folder_files(root):
                if rel != MANIFEST_NAME and rel not in sidecar["files"]:
                    raise ReleaseImportError(rel, "not listed in studio_manifest.json: a file added after the export")
            if folder_digest(sidecar["files"]) != sidecar["release"]["content_sha256"]:
                raise ReleaseImportError(MANIFEST_NAME, "the digest of the listed files is not the release's "
                                                        "content_sha256: the manifest was edited after the export",
                                         field="release.content_sha256")
    questions = (sidecar or {}).get("questions") or {}
    default_event = event_slug or slugify(root.resolve().name) or "imported"

    planned: list[_Planned] = []
    seen: dict[str, str] = {}
    images: dict[tuple[str, str], Path] = {}
    missing: dict[str, dict] = {}
    polygons: dict[str, Path] = {}
    for dim, fpath, images_dir in found:
        rel = rel_of(fpath)
        file_tasks_dir = fpath.parent
        samples = _read_task_file(fpath, rel)
        for si, sample in enumerate(samples):
            if not sample["tasks"]:
                raise ReleaseImportError(rel, "the sample has no task: the studio keeps tasks, so it could not write "
                                              "this sample back", sample=sample_label(sample, si), field="tasks")
            sid = str(sample["sample_id"])
            if len(sid) > MAX_SAMPLE_ID:
                raise ReleaseImportError(rel, f"longer than {MAX_SAMPLE_ID} characters (the studio's limit for question ids)",
                                         sample=sid[:40] + "…", field="sample_id")
            if "\x00" in sid:
                raise ReleaseImportError(rel, "holds a NUL character (\\u0000), which cannot be stored",
                                         sample=f"#{si}", field="sample_id")
            if sid in seen:
                raise ReleaseImportError(rel, f"sample id also used in {seen[sid]}: question ids would collide",
                                         sample=sid, field="sample_id")
            seen[sid] = rel
            for ti, task in enumerate(sample["tasks"]):
                qid = f"{sid}_task{ti}"
                ev = event_slug or (questions.get(qid) or {}).get("event") or default_event
                if slugify(ev) != ev:
                    raise ReleaseImportError(MANIFEST_NAME, f"event '{ev}' is not a slug", field=f"questions.{qid}.event")
                planned.append(_Planned(dim, rel, si, ti, sample, task, qid, ev))
                for _name, value in _polygon_answers(task):
                    if not value.strip():
                        continue
                    vrel = safe_relative(value)
                    cand = [file_tasks_dir / vrel.as_posix()] if vrel else []
                    cand.append(file_tasks_dir / "gold_polygons" / Path(value.replace("\\", "/")).name)
                    gp = next((c for c in cand if c.is_file()), None)
                    if gp is None:
                        missing.setdefault(value, {"path": value, "question_ids": [], "reason": "gold polygon not found"})["question_ids"].append(qid)
                        continue
                    doc = _load_json(gp, rel_of(gp))
                    gprob = _first_schema_problem("gold_polygon", doc)
                    if gprob:
                        raise ReleaseImportError(rel_of(gp), gprob[1], field=json_path(gprob[0]))
                    polygons[value] = gp
            ev0 = planned[-1].event
            for p in data_paths(sample.get("input_data") or {}):
                prel = safe_relative(p)
                f = images_dir / prel.as_posix() if prel else None
                if f is not None and f.is_file():
                    images[(ev0, p)] = f
                else:
                    m = missing.setdefault(p, {"path": p, "question_ids": [],
                                               "reason": "absolute path or outside images/" if prel is None
                                               else "not found under images/"})
                    m["question_ids"].extend(f"{sid}_task{ti}" for ti in range(len(sample["tasks"])))
    return _Parsed(root, tasks_dir, sidecar, planned, images, missing, polygons)



def _write_new(path: Path, data: bytes) -> None:
    """Write ``path`` as a new file (a temporary name, then a rename), never through an existing one:
    the file there may be a hard link of the snapshot's backup or of the content store
    (``ArtifactStore.put``), whose bytes must not change."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.part")
    tmp.write_bytes(data)
    os.replace(tmp, path)


class _DataRootSnapshot:
    """Hard-link snapshot of folders under the data root, to undo file changes of a failed import."""

    def __init__(self, dirs: list[Path]):
        self.dirs = [Path(d) for d in dict.fromkeys(dirs)]
        tmp_root = Path(settings.STUDIO_DATA_ROOT) / "tmp"
        tmp_root.mkdir(parents=True, exist_ok=True)
        self.backup = tmp_root / imports_staging_name("snapshot-")
        self.existed: dict[Path, set[str]] = {}

    def take(self) -> None:
        for i, d in enumerate(self.dirs):
            if not d.is_dir():
                continue
            files = set()
            for p in d.rglob("*"):
                if p.is_file() and not p.is_symlink():
                    rel = p.relative_to(d).as_posix()
                    dst = self.backup / str(i) / rel
                    dst.parent.mkdir(parents=True, exist_ok=True)
                    try:
                        os.link(p, dst)
                    except OSError:
                        shutil.copy2(p, dst)
                    files.add(rel)
            self.existed[d] = files

    def restore(self) -> None:
        for i, d in enumerate(self.dirs):
            if d not in self.existed:
                shutil.rmtree(d, ignore_errors=True)
                continue
            keep = self.existed[d]
            if d.is_dir():
                for p in sorted(d.rglob("*"), reverse=True):
                    rel = p.relative_to(d).as_posix()
                    if p.is_file() and rel not in keep:
                        p.unlink()
                    elif p.is_dir() and not any(p.iterdir()):
                        p.rmdir()
            for rel in keep:
                src, dst = self.backup / str(i) / rel, d / rel
                dst.parent.mkdir(parents=True, exist_ok=True)
                os.replace(src, dst)

    def discard(self) -> None:
        shutil.rmtree(self.backup, ignore_errors=True)
        try:
            self.backup.parent.rmdir()
        except OSError:
            pass



def _layer_shas(layer: Layer) -> set[str]:
    return {*((layer.metadata or {}).get("source_sha256") or {}).values(), layer.sha256} - {""}



def _comparable(sample: dict, task: dict) -> str:
    """Canonical text of a (sample without tasks, task) pair; polygon answers compared by base name
    (an export moves them to gold_polygons/)."""
    head = {k: v for k, v in sample.items() if k != "tasks"}
    t = dict(task)
    spec, answer = t.get("eval_spec"), t.get("final_answer")
    if isinstance(spec, dict) and isinstance(answer, dict):
        answer = dict(answer)
        for name, typ in spec.items():
            if typ == "polygon_iou" and isinstance(answer.get(name), str):
                answer[name] = Path(answer[name].replace("\\", "/")).name
        t["final_answer"] = answer
    return canonical({"sample": head, "task": t})



def _blank_gold(task: dict) -> bool:
    """Whether a file's task leaves its gold blank: an answer ``null`` or missing from
    ``final_answer``, or a step's observation blank (``kernel.golddiff.is_blank_obs``)."""
    final = task.get("final_answer") if isinstance(task.get("final_answer"), dict) else {}
    spec = task.get("eval_spec") if isinstance(task.get("eval_spec"), dict) else {}
    traj = task.get("trajectory") if isinstance(task.get("trajectory"), list) else []
    return (any(final.get(name) is None for name in spec)
            or any(isinstance(st, dict) and is_blank_obs(st.get("obs")) for st in traj))



def import_release_dir(user, path, *, event_slug: str | None = None, release_version: str | None = None,
                       make_release: bool = True, publish: bool = True, accept_proposals: bool = False) -> ImportReport:
    """Import a benchmark folder in the release layout (see :func:`read_release_dir`).

    * Events: the sidecar's event per question, else ``event_slug``, else the folder's name.
    * Layers: each input_data path found under ``images/`` is linked to the event's layer of that
      file when its sha256 matches, else imported (``import_raster_file`` / ``import_vector_file``);
      a path not found is recorded (``images_missing``), not fatal. A different file under an
      existing layer's name is an error.
    * Tasks: a question whose task already exports exactly this sample and task is ``unchanged``;
      otherwise a new revision (``updated``) or task (``created``) is written with the symbolic
      trajectory (call + args), plus an import replay (succeeded, gold accepted) holding the file's
      trajectory with obs, final answer, eval spec and answer format, and ``source.json``.
      Imported tasks are ``approved``.
    * Variants: ``variants/tasks/`` is read like ``tasks/``; each question the sidecar's
      ``variants`` describes gets its ``TaskVariant`` row, linked to its base task
      (``release_variants.link_imported_variants``; a base found nowhere is an error at
      ``variants.<question id>``).
    * Blank answers: each written task's blank answer fields get proposed sources
      (``report.proposals``, each with ``bound``); ``accept_proposals`` binds them as
      ``import_tasks --accept-proposals`` does (``task_import.file_proposals``), and a
      task whose file leaves its gold blank (an answer null, an observation ``{}``/``null``/
      missing) gets its import replay recorded as accepted automatically (``accepted_by`` empty),
      so that the next ``manage.py replay`` of it becomes the gold by itself (use ``--no-release``:
      a released task's gold is frozen).
    * Release: ``release_version``, or the sidecar's release version when ``make_release``, is
      created with the imported tasks and published (``publish``; the sidecar's status when it
      names one); an existing release of that version must hold exactly these revisions.

    All or nothing: the database rows and the files under the data root are restored on any
    error. Raises :class:`ReleaseImportError` (file, sample, field) and ``PermissionDenied``.
    """

    if user is not None:
        require(user, Action.DATA_IMPORT)
    parsed = read_release_dir(path, event_slug=event_slug)
    report = ImportReport(images_missing=sorted(parsed.missing.values(), key=lambda m: m["path"]))
    sidecar = parsed.sidecar or {}
    side_release = sidecar.get("release") or {}
    version = release_version or (side_release.get("version") if make_release else None)
    if version and not SEMVER_RE.match(version):
        raise ReleaseImportError("--release-version", f"'{version}' is not a semantic version")

    # read-only checks of the images against existing layers (before anything is written)
    for (slug, p), f in parsed.images.items():
        ev = Event.objects.filter(slug=slug).first()
        layer = find_layer({l.file_name: l for l in ev.layers.all()}, p) if ev else None
        if layer is not None and sha256_file(f) not in _layer_shas(layer):
            raise ReleaseImportError(f"images/{p}", f"differs from layer {layer.file_name} of event {slug} already "
                                                    "in the studio; import into another event (--event)")

    data_root = Path(settings.STUDIO_DATA_ROOT)
    art_root = Path(settings.STUDIO_ARTIFACT_ROOT)
    slugs = sorted({pl.event for pl in parsed.planned})
    snapshot = _DataRootSnapshot([data_root / "events" / s for s in slugs] + [art_root / IMPORT_ARTIFACTS])
    # the gold folders' files also enter the content store (with a bucket, uploaded there), as a replay's
    # artifacts do: a rolled-back import leaves them there unnamed, as a failed replay leaves its outputs
    store = artifact_store()
    snapshot.take()
    try:
        with transaction.atomic():
            events = {}
            side_events = sidecar.get("events") or {}
            for slug in slugs:
                info = side_events.get(slug) or {}
                types = {str(pl.sample.get("disaster_type") or "") for pl in parsed.planned if pl.event == slug}
                ev, created = Event.objects.get_or_create(slug=slug, defaults={
                    "name": info.get("name") or slug, "source": (info.get("source") or str(parsed.root.resolve()))[:500],
                    "disaster_type": (info.get("disaster_type") or (types.pop() if len(types) == 1 else ""))[:40]})
                events[slug] = ev
                if created:
                    report.events_created.append(slug)
            for (slug, p), f in sorted(parsed.images.items()):
                layers = {l.file_name: l for l in events[slug].layers.all()}
                if find_layer(layers, p) is not None:
                    report.layers[f"{slug}/{p}"] = "linked"
                    continue
                if release_variants.is_unreadable_file(f):  # made again with its variant (release_variants)
                    report.layers[f"{slug}/{p}"] = "unreadable"
                    continue
                sample = next(pl.sample for pl in parsed.planned if pl.event == slug and p in data_paths(pl.sample.get("input_data") or {}))
                key, entry = entry_of(sample.get("input_data") or {}, p)
                try:
                    if p.lower().endswith((".geojson", ".json", ".shp")):
                        imports.import_vector_file(f, event_slug=slug)
                    else:
                        imports.import_raster_file(f, event_slug=slug, file_name=layer_file_name(p),
                                                   modality=entry.get("modality") or None, phase=phase_of_key(key))
                except DataImportError as exc:
                    raise ReleaseImportError(f"images/{p}", str(exc)) from exc
                report.layers[f"{slug}/{p}"] = "created"

            now = timezone.now()
            pinned: list[tuple[Task, int, int]] = []
            for pl in parsed.planned:
                task = Task.objects.select_related("event", "head").filter(question_id=pl.question_id).first()
                if task is not None and task.head_id:
                    run = gold_replay(task.pk, task.head_id)
                    if run is not None:
                        head, tdict = sample_and_task(task, task.head, run, import_source(task.head))
                        if _comparable(head, tdict) == _comparable(pl.sample, pl.task):
                            report.unchanged.append(pl.question_id)
                            pinned.append((task, task.head_id, run.pk))
                            continue
                if task is not None:
                    try:
                        require_unreleased(task, "an import with other content")
                    except TaskLockedError as exc:
                        raise ReleaseImportError(pl.file, str(exc), sample=pl.sample["sample_id"],
                                                 field=f"tasks[{pl.task_index}]") from None
                old_status = task.status if task else ""
                (report.created if task is None else report.updated).append(pl.question_id)
                trajectory = pl.task.get("trajectory") if isinstance(pl.task.get("trajectory"), list) else []
                content, authored = file_task_content(pl.sample, pl.task)
                bound_content, proposals = file_proposals(content, authored, accept=accept_proposals)
                blank_gold = accept_proposals and _blank_gold(pl.task)
                if proposals:
                    report.proposals[pl.question_id] = proposals
                provenance = {k: v for k, v in ((sidecar.get("questions") or {}).get(pl.question_id) or {}).items()
                              if k in ("authors", "reviewers", "revision", "replay_hash", "task_id")} or None
                record = source_record(pl.sample, pl.task, content, file=pl.file, sample_index=pl.sample_index,
                                       task_index=pl.task_index, release=side_release.get("version"),
                                       source_dir=str(parsed.root.resolve()), provenance=provenance)
                problem = content_problem(to_storage(bound_content))
                if problem:
                    raise ReleaseImportError(pl.file, problem, sample=pl.sample["sample_id"])
                bound = sum(bool(p["bound"]) for p in proposals)
                task, rev = write_imported_revision(
                    user, task, event=events[pl.event], sample_id=str(pl.sample["sample_id"]),
                    task_index=pl.task_index, question_id=pl.question_id, dimension=pl.dim,
                    content=to_storage(bound_content), source=source_text(record),
                    message=f"imported from {pl.file}" + (f"; accepted the proposed sources of {bound} blank "
                                                          f"answer field(s)" if bound else ""))
                approve_imported(user, task, from_status=old_status,
                                 reason=f"imported from {parsed.root}/{pl.file} (sample {pl.sample_index}, "
                                        f"task {pl.task_index})")
                source = {k: v for k, v in record.items() if k != "content"}
                key = hashlib.sha256(canonical(source).encode("utf-8")).hexdigest()[:32]
                adir = f"{IMPORT_ARTIFACTS}/{key}"
                (art_root / adir).mkdir(parents=True, exist_ok=True)
                _write_new(art_root / adir / SOURCE_FILE, dumps(source).encode("utf-8"))
                manifest = {SOURCE_FILE: store.put(art_root / adir / SOURCE_FILE)}
                for _name, value in _polygon_answers(pl.task):
                    if value in parsed.polygons:
                        vrel = safe_relative(value)
                        name = vrel.as_posix() if vrel else f"gold_polygons/{Path(value).name}"
                        dst = art_root / adir / name
                        _write_new(dst, Path(parsed.polygons[value]).read_bytes())
                        manifest[name] = store.put(dst)
                final = to_storage(pl.task.get("final_answer"))
                stored_trajectory = to_storage(trajectory)
                run = record_imported_gold(
                    user, task, rev, filled_trajectory=stored_trajectory, final_answer=final,
                    eval_spec=to_storage(pl.task.get("eval_spec") or {}),
                    answer_format=to_storage(pl.task.get("answer_format") or {}), artifact_dir=adir, at=now,
                    auto_accepted=blank_gold, artifact_manifest=manifest)
                pinned.append((task, rev.pk, run.pk))

            variant_questions = {pl.question_id: pin for pl, pin in zip(parsed.planned, pinned)
                                 if pl.file.startswith(f"{release_variants.VARIANTS_DIR}/")}
            try:
                release_variants.link_imported_variants(user, sidecar.get("variants") or {}, variant_questions)
            except release_variants.VariantReleaseError as exc:
                raise ReleaseImportError(MANIFEST_NAME, exc.problem, field=f"variants.{exc.question_id}") from exc
            if version:
                _import_release(user, version, side_release, pinned, report, publish)
    except BaseException:
        snapshot.restore()
        raise
    finally:
        snapshot.discard()
    return report



def _import_release(user, version: str, side_release: dict, pinned, report: ImportReport, publish: bool) -> None:
    want = {(t.pk, rev_id) for t, rev_id, _ in pinned}
    existing = Release.objects.filter(version=version).first()
    report.release = version
    if existing is not None:
        have = set(ReleaseTask.objects.filter(release=existing).values_list("task_id", "revision_id"))
        if have != want:
            raise ReleaseImportError(MANIFEST_NAME, f"release {version} already exists in the studio with other "
                                                    "task revisions; import with another --release-version",
                                     field="release.version")
        return
    release = Release.objects.create(version=version, changelog=side_release.get("changelog") or "",
                                     created_by=user)
    ReleaseTask.objects.bulk_create([
        ReleaseTask(release=release, task=t, revision_id=rev_id, replay_id=run_id, question_id=t.question_id)
        for t, rev_id, run_id in pinned])
    pin_layers(release)
    report.release_created = True
    if publish and side_release.get("status", "published") == "published":
        try:
            _publish(user, release)
        except (ReleaseError, ReleaseImmutableError) as exc:
            raise ReleaseImportError(MANIFEST_NAME, str(exc), field="release") from exc

