"""Staging folders of imports under ``<data root>/tmp``: their names and the sweep of the ones a
killed process left behind.

Kept apart from ``annotation.services.imports`` (which re-exports these names) so that the sweep
``AnnotationConfig.ready`` runs at every start does not load the importers and their numpy,
shapely and rasterio: a tool server process (``manage.py mcp_serve``, one per tool call in the
benchmark's harness) pays for none of them.
"""
from __future__ import annotations

import shutil
import time
import uuid
from pathlib import Path

from django.conf import settings

from kernel.processes import process_gone, process_tag

__all__ = ["STAGING_PREFIXES", "staging_name", "sweep_staging"]

#: prefixes of the staging folders under ``<data root>/tmp`` (imports here, snapshots of
#: ``releases.services.release_import``); their names carry the owning process id
STAGING_PREFIXES = ("import-", "snapshot-")


def staging_name(prefix: str) -> str:
    """``<prefix><pid>.<host tag>-<random>``: a staging folder's name, so that a sweep can tell a
    folder of a live import from one a killed process left behind (:func:`sweep_staging`); the
    host tag (8 hex digits of the host name's SHA-256) keeps one host from judging the process ids
    of another on a shared data root."""
    return f"{prefix}{process_tag()}-{uuid.uuid4().hex[:12]}"


def sweep_staging(root: Path | None = None, *, max_age_s: float = 24 * 3600) -> list[str]:
    """Remove the staging folders under ``<root>/tmp`` (default: the data root) that no import is
    using any more: the owning process of this host (the pid and host tag in the name) is gone,
    or the folder is older than ``max_age_s`` (an owner on another host of a shared data root, or
    a name without pid). The
    import services remove their own on every exit path (``finally``); this takes what a SIGKILL
    or a power cut left. Runs at start-up (``AnnotationConfig.ready``) and before each import.
    Returns the names removed."""
    tmp = Path(root or settings.STUDIO_DATA_ROOT) / "tmp"
    removed = []
    try:
        entries = list(tmp.iterdir())
    except OSError:
        return removed
    now = time.time()
    for p in entries:
        if not p.name.startswith(STAGING_PREFIXES) or not p.is_dir() or p.is_symlink():
            continue
        owner = p.name.split("-", 2)[1] if p.name.count("-") >= 2 else ""
        try:
            old = now - p.stat().st_mtime > max_age_s
        except OSError:
            continue
        dead = process_gone(owner)
        if dead or old:
            shutil.rmtree(p, ignore_errors=True)
            removed.append(p.name)
    return removed
