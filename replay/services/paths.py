"""Where a replay's files live: stored layer files under ``STUDIO_DATA_ROOT`` and artifacts under
``STUDIO_ARTIFACT_ROOT``, each confined to its root (``kernel.paths.confine``).

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
from replay.models import ReplayRun


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



def artifact_path(run: ReplayRun, name: str) -> Path:
    """Absolute path of an artifact of ``run``; ``kernel.paths.OutsideRoot`` (a ``ValueError``)
    if ``name`` escapes the run's folder."""
    return confine(Path(settings.STUDIO_ARTIFACT_ROOT) / run.artifact_dir, name, what="the run's folder")

