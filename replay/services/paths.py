"""Where a replay's files live: stored layer files under ``STUDIO_DATA_ROOT`` and artifacts under
``STUDIO_ARTIFACT_ROOT``, each confined to its root (``kernel.paths.confine``).

With a bucket (``STUDIO_STORAGE_URL``) the layer files live there and ``STUDIO_DATA_ROOT`` is this
worker's cache of them: :func:`data_path` and :func:`layer_file_path` (the one place the replay asks
for a layer's local path) fill it on demand through ``studio.storage.local_copy`` (content checked
against the layer's SHA-256, written whole by an atomic rename), so a worker on any machine with an
empty data root replays a task whose layers were imported elsewhere.

Storage (all under ``STUDIO_ARTIFACT_ROOT``)
    ``cas/<sha256[:2]>/<sha256>``: every artifact, content-addressed (``ArtifactStore``).
    ``replays/<run id>/<name>``: the run's folder; each artifact a hard link into ``cas/`` (a copy
    across file systems). ``ReplayRun.artifact_manifest`` maps each name to its hash.

With a bucket the replay's artifacts live there too, content-addressed under
``artifacts/cas/<sha256[:2]>/<sha256>`` (:func:`artifact_key`), and both folders above are this
machine's cache: :class:`BucketArtifactStore` (what :func:`artifact_store` returns then) uploads each
artifact a replay stores unless its key is there already (identical outputs of any runs, on any
machine, are one object; a PUT publishes the object whole), answers ``has`` from the local store or
the bucket, and fills the local store from the bucket before linking an artifact into a work dir
(``storage.local_copy``: the object's SHA-256 checked against its name, written by an atomic
rename). So the step cache and the whole-run reuse of ``replay.services.runs`` reuse an earlier
run's outputs written on another machine, and every reader of a finished run's artifacts — the
replay pages (overlays, artifact PNGs and GeoJSON), QC through the registered replay source, the
release export's gold polygons, scoring's polygon roots — asks :func:`artifact_path` or
:func:`artifact_folder`, which link a missing artifact of the run's manifest into the run's folder
from the store (fetching it first when this machine lacks it). Without a bucket nothing of this
runs: ``artifact_store`` is the plain local ``ArtifactStore`` and the two readers only build paths.
"""
from __future__ import annotations

import functools
import os
import re
import uuid
from pathlib import Path

from django.conf import settings

from kernel.engine import ArtifactStore
from kernel.paths import confine
from kernel.tools.base import file_sha256
from replay.models import ReplayRun
from studio import storage


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



def data_path(relative: str, sha256: str = "") -> Path:
    """Absolute path of a file stored under STUDIO_DATA_ROOT (symbolic links resolved);
    ``kernel.paths.OutsideRoot`` (a ``ValueError``) if it escapes the root. With a bucket the file
    is first made present in this worker's cache (``storage.local_copy``: downloaded when missing
    or, given ``sha256``, when its content differs); ``FileNotFoundError`` when the bucket has no
    such object, ``ValueError`` when its content is not ``sha256``."""
    if storage.uses_bucket():
        stored_path(relative)  # lexically inside the root before anything is written
        storage.local_copy(Path(relative).as_posix(), sha256)
    return confine(settings.STUDIO_DATA_ROOT, relative)


def layer_content_sha256(relative: str, sha256: str = "") -> str:
    """The SHA-256 of a layer's stored file as a replay reads it. Without a bucket: the bytes of
    ``stored_path(relative)`` (``kernel.tools.base.file_sha256``, cached on path, inode, size and
    mtime). With a bucket: ``sha256`` (the row's) when given, since a replay reads only a copy checked
    against it (:func:`data_path`), the same value the bytes give, without fetching a layer the task
    does not use; else the bytes of the copy :func:`data_path` fills. Raises ``OSError`` for a file
    that cannot be read, ``ValueError`` as :func:`data_path`."""
    if not storage.uses_bucket():
        return file_sha256(stored_path(relative))
    return sha256 or file_sha256(data_path(relative))



def artifact_root() -> Path:
    return Path(settings.STUDIO_ARTIFACT_ROOT)



def artifact_key(sha: str) -> str:
    """The bucket key of the artifact with SHA-256 ``sha`` (64 lower-case hex digits):
    ``artifacts/cas/<sha[:2]>/<sha>``. Raises ``ValueError`` for anything else."""
    if not _SHA256_RE.fullmatch(sha or ""):
        raise ValueError(f"artifact hash {sha!r}: not a SHA-256 in hex")
    return storage.key("artifacts", "cas", sha[:2], sha)



_SHA256_RE = re.compile(r"[0-9a-f]{64}")



class BucketArtifactStore(ArtifactStore):
    """The content store of a machine whose studio keeps its files in a bucket: the local
    ``STUDIO_ARTIFACT_ROOT/cas`` (``kernel.engine.ArtifactStore``) as this machine's cache of the
    bucket's ``artifacts/cas/`` (:func:`artifact_key`).

    ``put(file)``: stored locally as before, then uploaded to its key unless an object is there
    already (``storage.upload_file_once``: a HEAD, then one PUT, the object appearing whole;
    identical outputs are one object; a key this process has put or seen is not asked again).
    ``has(sha)``: in the local store or in the bucket. ``materialize(sha, dest)``: the local file is
    filled from the bucket first when missing (:meth:`fetch`). Raises what ``storage`` raises
    (``FileNotFoundError`` for an object the bucket lost, ``ValueError`` for one whose content is not
    its hash, botocore's errors for an unreachable server)."""

    def has(self, sha: str) -> bool:
        return super().has(sha) or storage.exists(artifact_key(sha))

    def put(self, file, sha: str | None = None) -> str:
        sha = super().put(file, sha)
        storage.upload_file_once(artifact_key(sha), self.path_for(sha))
        return sha

    def fetch(self, sha: str) -> Path:
        """The local store's file of ``sha``, downloaded from the bucket (checked against ``sha``,
        renamed into place whole) when this machine lacks it."""
        path = self.path_for(sha)
        if not path.is_file():
            storage.local_copy(artifact_key(sha), sha, path=path)
        return path

    def materialize(self, sha: str, dest) -> Path:
        self.fetch(sha)
        return super().materialize(sha, dest)



def artifact_store() -> ArtifactStore:
    """The content-addressed store ``STUDIO_ARTIFACT_ROOT/cas``; with a bucket a
    :class:`BucketArtifactStore` over it."""
    if storage.uses_bucket():
        return BucketArtifactStore(artifact_root() / "cas")
    return ArtifactStore(artifact_root() / "cas")



def artifact_path(run: ReplayRun, name: str) -> Path:
    """Absolute path of an artifact of ``run``; ``kernel.paths.OutsideRoot`` (a ``ValueError``)
    if ``name`` escapes the run's folder. With a bucket, an artifact of the run's manifest
    (``ReplayRun.artifact_manifest``) that the folder lacks is linked into it from the content
    store first, fetched from the bucket when this machine lacks it too (the path stays missing
    when the bucket lost the object; ``ValueError`` when the object's content is not its hash).
    The one place a reader gets a finished run's artifact: the replay pages, QC, the export."""
    path = confine(Path(settings.STUDIO_ARTIFACT_ROOT) / run.artifact_dir, name, what="the run's folder")
    if storage.uses_bucket() and not path.is_file():
        sha = (run.artifact_manifest or {}).get(name)
        if isinstance(sha, str):
            _link_from_store(sha, path)
    return path



def artifact_folder(run: ReplayRun, suffixes: tuple[str, ...] = ()) -> Path:
    """The absolute path of ``run``'s folder, for readers that look files up in it by name (scoring's
    polygon roots). With a bucket, each artifact of the run's manifest whose name ends in one of
    ``suffixes`` (lower-case, e.g. ``(".geojson", ".json")``; all of them for ``()``) is made present
    in it first, as :func:`artifact_path` does for one."""
    folder = confine(Path(settings.STUDIO_ARTIFACT_ROOT) / run.artifact_dir, ".", what="the run's folder")
    if storage.uses_bucket():
        for name, sha in (run.artifact_manifest or {}).items():
            if isinstance(sha, str) and (not suffixes or name.lower().endswith(suffixes)):
                path = confine(folder, name, what="the run's folder")
                if not path.is_file():
                    _link_from_store(sha, path)
    return folder



def _link_from_store(sha: str, path: Path) -> None:
    """Link artifact ``sha`` from the content store to ``path`` (fetched from the bucket when
    missing here); nothing when the bucket has no such object either. Linked under a name of its
    own, then renamed onto ``path``: two requests filling the same artifact at once (two threads of a
    web process) each put a whole link in place, and neither writes through the other's."""
    tmp = path.with_name(f".{path.name}.link-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        artifact_store().materialize(sha, tmp)
        os.replace(tmp, path)
    except FileNotFoundError:
        pass
    finally:
        tmp.unlink(missing_ok=True)

