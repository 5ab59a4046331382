"""Replay artifacts and the bucket: what a deployment runs once when it turns ``STUDIO_STORAGE_URL`` on
over replays made before (``manage.py push_artifacts``). Where artifacts live and how readers reach
them: ``replay.services.paths``."""
from __future__ import annotations

from kernel.engine import ArtifactStore
from kernel.hashing import file_sha256
from kernel.paths import confine
from replay.models import ReplayRun, StepCacheEntry
from replay.services.gold import IMPORT_MODE
from replay.services.paths import artifact_key, artifact_root
from studio import storage


def push_artifacts_to_bucket() -> dict:
    """Copy the artifacts of this machine's content store (``STUDIO_ARTIFACT_ROOT/cas/``) that the
    bucket lacks to their keys (``artifacts/cas/<sha[:2]>/<sha>``): every hash a run's
    ``artifact_manifest`` or a step cache entry's ``artifacts`` names, each once (the gold folders of
    releases imported before their files entered the content store are registered first:
    :func:`register_imported_gold_folders`); a local file is
    uploaded only when its SHA-256 is its name. An object already there is left alone, so a second
    run uploads nothing. Returns ``{"uploaded": [keys], "present": number already there, "missing":
    [keys with no usable local file]}`` (sorted by key). Raises ``ValueError`` without a bucket."""
    if not storage.uses_bucket():
        raise ValueError("STUDIO_STORAGE_URL names no bucket: there is nowhere to push the artifacts to")
    register_imported_gold_folders()
    wanted: set[str] = set()
    for manifest in ReplayRun.objects.exclude(artifact_manifest={}).values_list("artifact_manifest", flat=True) \
            .iterator():
        wanted.update(v for v in (manifest or {}).values() if isinstance(v, str))
    for arts in StepCacheEntry.objects.values_list("artifacts", flat=True).iterator():
        wanted.update(a["sha256"] for a in arts or [] if isinstance(a, dict) and isinstance(a.get("sha256"), str))
    cas = artifact_root() / "cas"
    report = {"uploaded": [], "present": 0, "missing": []}
    for sha in sorted(wanted):
        try:
            name = artifact_key(sha)
        except ValueError:  # not a hash: nothing names such an object
            continue
        if storage.exists(name):
            report["present"] += 1
            continue
        local = cas / sha[:2] / sha
        if not local.is_file() or file_sha256(local) != sha:
            report["missing"].append(name)
            continue
        storage.upload_file(name, local)
        report["uploaded"].append(name)
    return report


def register_imported_gold_folders() -> int:
    """Golds imported from a release before their folders' files entered the content store (an import
    run, ``mode`` ``"import"``, with an empty ``artifact_manifest``): each file of the run's folder on
    this machine (``source.json``, gold polygons) is put in the local store and the run's manifest
    recorded, so that the bucket and every other machine reach them as they reach a replay's
    artifacts. A run whose folder is missing here is left as it is. Returns how many runs got a
    manifest; a second call finds none."""
    store = ArtifactStore(artifact_root() / "cas")
    registered = 0
    runs = ReplayRun.objects.filter(mode=IMPORT_MODE, artifact_manifest={}).exclude(artifact_dir="")
    for pk, adir in runs.values_list("pk", "artifact_dir").iterator():
        folder = confine(artifact_root(), adir, what="the run's folder")
        if not folder.is_dir():
            continue
        manifest = {p.relative_to(folder).as_posix(): store.put(p)
                    for p in sorted(folder.rglob("*")) if p.is_file() and not p.is_symlink()}
        if manifest:
            registered += ReplayRun.objects.filter(pk=pk, artifact_manifest={}).update(artifact_manifest=manifest)
    return registered
