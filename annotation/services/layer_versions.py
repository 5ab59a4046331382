"""Layer versions: a layer's content is versioned, and a release keeps the version it pinned.

Model (``docs/architecture.md``, "Layer versions"): ``Layer`` stays the layer as the event's
current tasks see it (the newest version; the importers edit it in place as before) and
``LayerVersion`` holds each content it had: ``number`` (1, 2, …), ``sha256`` (:func:`content_sha256`),
``snapshot`` (the row's fields at that version) and ``files`` (what must stay on disk for it).
A release pins one version per layer of its tasks' events (``releases.models.ReleaseLayerPin``,
written by ``releases.services.lifecycle``); the release's export and a replay of a released task
read the pinned version (:func:`pinned_layer`), the current tasks the ``Layer`` row.

A re-import that changes a layer's content (``annotation.services.imports``) makes a new version;
when the superseded version is pinned, :func:`archive_version` copies its files to
``events/<slug>/versions/<layer id>/v<number>/`` first (and points its snapshot there), so the new
files can take the old ones' place. An unpinned superseded version keeps its row, with no files.

Releases sit above annotation: the question "which versions are pinned, and which does this
released task read" is answered by the functions releases registers at start-up
(:func:`register_pin_reader`, in ``ReleasesConfig.ready``).
"""
from __future__ import annotations

import hashlib
import shutil
from collections.abc import Callable
from pathlib import Path

from django.conf import settings
from django.db import IntegrityError, transaction

from annotation.models import Layer, LayerVersion
from kernel.hashing import file_sha256

__all__ = [
    "SNAPSHOT_FIELDS", "content_sha256", "snapshot", "version_files", "ensure_version", "archive_version",
    "is_current", "supersede", "drop_version_files", "as_layer", "pinned_layer", "register_pin_reader", "is_pinned", "task_pins",
]

#: the ``Layer`` fields a version keeps (all but identity, event, links and timestamps)
SNAPSHOT_FIELDS = ("name", "kind", "modality", "phase", "file_name", "path", "tiles_path", "frame", "crs", "gsd_m",
                   "width", "height", "band_count", "bands", "dtype", "bounds", "feature_count", "class_map",
                   "class_counts", "sha256", "metadata")
#: metadata keys that are bookkeeping of the import, not content (a changed option whose result is
#: the same bytes makes no new version)
_VOLATILE_METADATA = ("fingerprint",)

_pin_reader: dict[str, Callable] = {}


def register_pin_reader(*, is_pinned: Callable[[int], bool], task_pins: Callable[[int], dict[int, LayerVersion]]) -> None:
    """Called by ``releases`` at start-up. ``is_pinned(version id) -> bool``: some release pins it;
    ``task_pins(task id) -> {layer id: LayerVersion}``: the versions the task's newest published
    release pinned (empty when it is in none)."""
    _pin_reader["is_pinned"] = is_pinned
    _pin_reader["task_pins"] = task_pins


def is_pinned(version: LayerVersion) -> bool:
    """Whether a release pins ``version`` (False before releases registered its reader)."""
    reader = _pin_reader.get("is_pinned")
    return bool(reader and reader(version.pk))


def task_pins(task_id: int) -> dict[int, LayerVersion]:
    """``{layer id: LayerVersion}`` a released task reads (its newest published release's pins)."""
    reader = _pin_reader.get("task_pins")
    return reader(task_id) if reader else {}


def _root() -> Path:
    return Path(settings.STUDIO_DATA_ROOT)


def version_files(fields: dict) -> list[str]:
    """The data-root-relative files a layer version needs: the stored file and the originals
    (``metadata.original_paths``), in that order, without duplicates. The web-mercator tile file is
    derived from the stored file for the map only and is not part of a version."""
    out = [fields.get("path") or ""] + list((fields.get("metadata") or {}).get("original_paths") or [])
    return [p for p in dict.fromkeys(out) if p]


def content_sha256(fields: dict, root: Path | None = None) -> str:
    """The content digest of a layer version: SHA-256 over the UTF-8 lines ``"<role> <name>
    <file sha256>\\n"`` of its stored file (role ``stored``, name = ``file_name``) and of each
    original (role ``original``, its base name), the originals sorted by name. A file that cannot
    be read counts as ``missing``. Paths in ``fields`` are relative to ``root`` (the data root)."""
    root = Path(root or _root())
    lines = []

    def sha(rel: str) -> str:
        try:
            return file_sha256(root / rel)
        except OSError:
            return "missing"

    if fields.get("path"):
        lines.append(f"stored {fields.get('file_name', '')} {sha(fields['path'])}\n")
    originals = (fields.get("metadata") or {}).get("original_paths") or []
    for rel in sorted(originals, key=lambda r: (Path(r).name, r)):
        lines.append(f"original {Path(rel).name} {sha(rel)}\n")
    return hashlib.sha256("".join(lines).encode("utf-8")).hexdigest()


def snapshot(layer: Layer) -> dict:
    """The layer row's :data:`SNAPSHOT_FIELDS` as JSON values."""
    return {f: getattr(layer, f) for f in SNAPSHOT_FIELDS}


def _comparable(snap: dict) -> dict:
    meta = {k: v for k, v in (snap.get("metadata") or {}).items() if k not in _VOLATILE_METADATA}
    return {**snap, "metadata": meta}


def ensure_version(layer: Layer) -> LayerVersion:
    """The version the layer row is now: the newest ``LayerVersion`` when its content digest and
    snapshot (less import bookkeeping) equal the row's, else a new version numbered one more
    (the first for a layer made before versions existed, or edited in place since, e.g. its
    georeferencing recorded by a maintainer). Call inside the caller's transaction. Two writers
    making the same version number at once (two releases created together on PostgreSQL): the
    loser's savepoint rolls back and it reads again, taking the winner's row when it is the same
    content (three tries, then the ``IntegrityError``)."""
    snap = snapshot(layer)
    sha = content_sha256(snap)
    for attempt in range(3):
        latest = LayerVersion.objects.filter(layer=layer).order_by("-number").first()
        if latest is not None and latest.sha256 == sha and _comparable(latest.snapshot) == _comparable(snap):
            return latest
        try:
            with transaction.atomic():  # a savepoint: a concurrent writer may take the same number
                return LayerVersion.objects.create(layer=layer, number=(latest.number + 1) if latest else 1,
                                                   sha256=sha, snapshot=snap, files=version_files(snap))
        except IntegrityError:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def is_current(version: LayerVersion, layer: Layer, sha: str) -> bool:
    """Whether ``layer`` (its row as it is now, its files' content digest ``sha``) is still
    ``version``: the same content digest and the same snapshot, less import bookkeeping."""
    return version.sha256 == sha and _comparable(version.snapshot) == _comparable(snapshot(layer))


def archive_version(version: LayerVersion, event_slug: str) -> list[Path]:
    """Copy a superseded version's files to ``events/<slug>/versions/<layer id>/v<number>/`` (the
    same relative layout as under ``events/<slug>/``) and point its snapshot and ``files`` there;
    returns the absolute paths written (the caller removes them if its transaction rolls back).
    A file already missing is left out (the version then reads as missing, and an export of a
    release pinning it refuses). The row is saved; call inside the caller's transaction."""
    root = _root()
    event_rel = Path("events") / event_slug
    target = event_rel / "versions" / str(version.layer_id) / f"v{version.number}"
    mapping: dict[str, str] = {}
    written: list[Path] = []
    for rel in version.files or version_files(version.snapshot):
        src = root / rel
        try:
            inner = Path(rel).relative_to(event_rel)
        except ValueError:
            inner = Path(Path(rel).name)
        new_rel = (target / inner).as_posix()
        if not src.is_file():
            continue
        dst = root / new_rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)
        written.append(dst)
        mapping[rel] = new_rel
    snap = dict(version.snapshot)
    snap["path"] = mapping.get(snap.get("path") or "", snap.get("path") or "")
    snap["tiles_path"] = ""  # tiles are the map's, rebuilt from the current version only
    meta = dict(snap.get("metadata") or {})
    if meta.get("original_paths"):
        meta["original_paths"] = [mapping.get(p, p) for p in meta["original_paths"]]
    snap["metadata"] = meta
    version.snapshot = snap
    version.files = list(mapping.values())
    version.save(update_fields=["snapshot", "files"])
    return written


def supersede(layer: Layer, event_slug: str) -> list[Path]:
    """Before an import moves ``layer``'s new files into place (``layer``: the row with the new
    fields, so its paths are those about to be replaced): each version with a file at one of those
    paths (not archived yet: the newest, and older ones that only differ in fields, e.g.
    georeferencing recorded since) has its files archived when a release pins it
    (:func:`archive_version`), else is marked without files. Returns the absolute paths written
    (for the caller's rollback)."""
    current = set(version_files(snapshot(layer)))
    written: list[Path] = []
    for version in LayerVersion.objects.filter(layer=layer).order_by("number"):
        if not current & set(version.files or []):
            continue
        if is_pinned(version):
            written += archive_version(version, event_slug)
        else:
            drop_version_files(version)
    return written


def drop_version_files(version: LayerVersion) -> None:
    """Record that a superseded, unpinned version keeps no files (its row stays, for the history)."""
    if version.files:
        version.files = []
        version.save(update_fields=["files"])


def as_layer(layer: Layer, version: LayerVersion) -> Layer:
    """An unsaved ``Layer`` equal to ``layer`` (same id, event and links) with ``version``'s
    snapshot fields: what export and replay read for a pinned version."""
    copy = Layer(pk=layer.pk, event_id=layer.event_id, annotates_id=layer.annotates_id)
    for f in SNAPSHOT_FIELDS:
        setattr(copy, f, version.snapshot.get(f, getattr(layer, f, None)))
    return copy


def pinned_layer(layer: Layer, pins: dict[int, LayerVersion]) -> Layer:
    """``layer`` as ``pins`` (``{layer id: LayerVersion}``) has it: the pinned version, else the
    row itself (a layer made after the release, or a release pinned before versions existed)."""
    version = pins.get(layer.pk)
    return as_layer(layer, version) if version is not None else layer
