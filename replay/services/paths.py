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
"""
from __future__ import annotations

import functools
import os
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



def artifact_store() -> ArtifactStore:
    """The content-addressed store ``STUDIO_ARTIFACT_ROOT/cas``."""
    return ArtifactStore(artifact_root() / "cas")



def artifact_path(run: ReplayRun, name: str) -> Path:
    """Absolute path of an artifact of ``run``; ``kernel.paths.OutsideRoot`` (a ``ValueError``)
    if ``name`` escapes the run's folder."""
    return confine(Path(settings.STUDIO_ARTIFACT_ROOT) / run.artifact_dir, name, what="the run's folder")

