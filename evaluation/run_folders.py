"""An imported run's unpacked folder on any machine: with a bucket (``STUDIO_STORAGE_URL``) the
folder a run import job unpacked (``STUDIO_DATA_ROOT/runs/<random>/``, on the worker that ran it) is
uploaded to the keys ``runs/<random>/…`` (``studio/storage.py``'s key scheme: the path below the data
root), and a reader on another machine (the record page, a re-score) gets this machine's copy of it,
filled from the bucket with the files it reads (the predicted polygon files).

``AgentRun.source_dir`` keeps the absolute path the importing machine wrote; :func:`folder_key`
finds the key in it (``…/runs/<12 hex>/<run folder>``). Without a bucket, or for a folder that no
import job unpacked (``manage.py import_runs`` of a folder on disk), the path is read as it is.
"""
from __future__ import annotations

import re
from pathlib import Path

from django.conf import settings

from studio import storage

#: under STUDIO_DATA_ROOT (and the keys' first part): where an import job unpacks a run zip
RUNS_DIR = "runs"
#: the files of a run folder a reader needs elsewhere: predicted polygon files (GeoJSON)
POLYGON_SUFFIXES = (".geojson", ".json")
_UNPACKED_RE = re.compile(r"/runs/([0-9a-f]{12})((?:/[^/]+)*)/?$")


def folder_key(source_dir: str) -> str | None:
    """The key below the data root (``runs/<random>[/<run folder>]``) of a folder an import job
    unpacked, from its absolute path on the machine that unpacked it, or None for any other path."""
    m = _UNPACKED_RE.search(str(source_dir or "").replace("\\", "/"))
    if not m:
        return None
    rest = [p for p in m.group(2).split("/") if p]
    try:
        return storage.key(RUNS_DIR, m.group(1), *rest)
    except ValueError:  # "." or ".." in the path: not a folder an import job made
        return None


def upload_run_folder(folder: Path) -> list[str]:
    """With a bucket, upload every file under ``folder`` (``STUDIO_DATA_ROOT/runs/<random>``, just
    unpacked) to its key; returns the keys (none without a bucket). Raises what ``storage`` raises,
    after deleting the objects it had uploaded."""
    if not storage.uses_bucket():
        return []
    root = Path(settings.STUDIO_DATA_ROOT)
    keys = []
    try:
        for path in sorted(Path(folder).rglob("*")):
            if path.is_file():
                name = storage.key(*path.relative_to(root).parts)
                keys.append(name)
                storage.upload_file(name, path)
    except BaseException:
        for name in keys:  # no half-uploaded folder: its import fails, and its re-run uploads anew
            try:
                storage.delete(name)
            except Exception:  # noqa: BLE001 — the upload's error is the one to report
                pass
        raise
    return keys


def _keys_under(prefix: str) -> list[str]:
    dirs, files = storage.list_dir(prefix)
    keys = [f"{prefix}/{f}" for f in files]
    for d in dirs:
        keys += _keys_under(f"{prefix}/{d}")
    return keys


def local_run_folder(source_dir: str, suffixes: tuple[str, ...] = POLYGON_SUFFIXES) -> Path:
    """The folder of a run (``AgentRun.source_dir``) on this machine. With a bucket and a folder an
    import job unpacked (:func:`folder_key`): ``STUDIO_DATA_ROOT/<key>``, where each file of the
    bucket's copy whose name ends in one of ``suffixes`` (lower-case; all for ``()``) that this
    machine lacks is downloaded first (``storage.local_copy``). Otherwise ``source_dir`` itself.
    The folder may not exist (a run imported before the bucket, on another machine)."""
    key = folder_key(source_dir) if storage.uses_bucket() else None
    if key is None:
        return Path(source_dir)
    local = Path(settings.STUDIO_DATA_ROOT) / key
    for name in _keys_under(key):
        if (not suffixes or name.lower().endswith(suffixes)) and not (Path(settings.STUDIO_DATA_ROOT) / name).is_file():
            storage.local_copy(name)
    return local
