"""QC glue: build the plain data ``annotation.qc`` reads from the database and from task files.

* ``qc_for_task(task, replay=None)``: the full suite on a task's head revision, with the event's
  layers, the newest succeeded replay of that revision (or ``replay``: a ``ReplayRun`` or a dict
  ``{trajectory, final_answer, hash?}``), its polygon golds, the data root, and determinism over
  the two newest succeeded replays of the revision.
* ``qc_for_task_file(path, data_root=None)``: no database. A benchmark task file (a list of
  samples with tasks) checked as a file (layout, ids) and task by task; the gold trajectory's
  ``obs`` and ``final_answer`` serve as the replay. Layers come from ``input_data``; files are
  looked up under ``<data_root>/images/`` (default: the folder above ``tasks/`` when it has an
  ``images/`` folder; without a data root the files are not looked for).
* ``derived_sources(task, revision, run=None)`` / ``derived_findings(...)``: what a revision
  copied from other records (its manifest's GSD/CRS from the layers, its gold replay's inputs)
  against those records now (``annotation.qc.derived.check_derived``); part of ``qc_for_task`` and the
  check a release's publishing runs on the revisions it pins.
* ``release_qc(tasks)``: release-level findings (near-duplicate questions) and the distribution
  report over several tasks.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings

from annotation import qc
from annotation.models import TaskVariant
from annotation.services.content import derived_manifest, revision_content
from kernel.content import CONTENT_FIELDS
from kernel.engine import collapse_expanded
from kernel.inputs import base_name, input_entries
from kernel.paths import OutsideRoot, confine
from kernel.taskfile import loads
from kernel.tools.base import gdal_scope
from studio import storage

__all__ = ["layer_info", "fill_layer_cache", "derived_sources", "derived_findings", "qc_for_task", "qc_for_content", "qc_for_task_file", "release_qc", "release_items"]


def layer_info(layer) -> dict:
    """The LayerInfo dict of a ``Layer`` row (what ``annotation.qc`` reads)."""
    frame = layer.frame or ""
    geo = bool(layer.crs) if frame == "geographic" else (False if frame == "pixel" else None)
    return {
        "file_name": layer.file_name, "kind": layer.kind, "modality": layer.modality or "",
        "phase": layer.phase or "", "path": layer.path, "crs": layer.crs or None, "frame": frame,
        "georeferenced": geo, "gsd_m": layer.gsd_m, "width": layer.width, "height": layer.height,
        "class_map": layer.class_map or {}, "band_count": layer.band_count,
        "bounds": layer.bounds if frame == "geographic" else None,
    }


@dataclass(frozen=True)
class ReplaySource:
    """How QC reads a task's gold replays, which live in the replay app above annotation.

    ``succeeded_runs(task)``: the succeeded replay runs of ``task``'s head revision, newest first
    (objects with ``pk``, ``replay_hash``, ``filled_trajectory``, ``final_answer``);
    ``artifact_path(run, name)``: the file of artifact ``name`` of ``run`` (``ValueError`` when the
    name is not one of its artifacts); ``input_fingerprint(task, revision, mode, layers)``: what a
    replay of ``revision`` would read now (``replay.services.layers.input_fingerprint``), compared with a
    run's stored ``input_fingerprint`` (``derived.gold_stale``). The replay app registers it in
    ``ReplayConfig.ready``; without one, QC runs without replays (as on unsaved content).
    """

    succeeded_runs: Callable[[Any], Iterable[Any]]
    artifact_path: Callable[[Any, str], Path]
    input_fingerprint: Callable[..., str] | None = None


_REPLAY_SOURCE: list[ReplaySource] = []


def register_replay_source(source: ReplaySource) -> None:
    """Make ``source`` the one QC reads replays from (a later registration replaces it)."""
    _REPLAY_SOURCE[:] = [source]


def _replay_dict(run) -> dict:
    """The replay as QC reads it: one step per authored step (loop expansions folded back)."""
    authored = collapse_expanded(run.filled_trajectory or [])[0]
    return {"trajectory": authored, "final_answer": run.final_answer or {}, "hash": run.replay_hash, "run": run,
            "variant_check": run.variant_check}


def _load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _polygon_golds(content: dict, replay: dict) -> dict:
    """Answer field → gold GeoJSON (None when its file cannot be read) for polygon_iou fields."""
    out = {}
    answer = replay.get("final_answer") or {}
    run = replay.get("run")
    for f in content.get("answer_spec") or []:
        if not isinstance(f, dict) or f.get("eval_type") != "polygon_iou" or f.get("name") not in answer:
            continue
        value = answer[f["name"]]
        if isinstance(value, dict):
            out[f["name"]] = value
        elif isinstance(value, str) and run is not None and _REPLAY_SOURCE:
            try:
                out[f["name"]] = _load_json(_REPLAY_SOURCE[0].artifact_path(run, value))
            except ValueError:
                out[f["name"]] = None
        else:
            out[f["name"]] = None
    return out


def derived_sources(task, revision, run=None, *, layers=None) -> dict:
    """The ``derived`` argument of ``qc.check_derived`` for ``revision`` of ``task``: its
    manifest's derived values as the event's layers give them now
    (``annotation.services.content.derived_manifest``, the derivation a save uses) and, for a
    replay ``run`` that recorded its input fingerprint, ``{"run", "stored", "current"}`` (the
    fingerprint then and now, through the registered ``ReplaySource``). ``layers``: the event's
    ``Layer`` rows when the caller has them.

    The fingerprint covers every layer of the event, so "now" counts the layers that existed when
    the run started (``created_at`` not after the run's ``started_at``, else ``created_at``): a layer
    added to the event since (a variant's files, another image) does not make every gold stale,
    while a changed file, GSD or CRS of a layer it had, or a removed layer, does. Not seen: a GT
    mask added later for an image the task reads (its replay would now find it)."""
    layers = list(task.event.layers.all()) if layers is None else list(layers)
    gold = None
    if run is not None and getattr(run, "input_fingerprint", "") and _REPLAY_SOURCE \
            and _REPLAY_SOURCE[0].input_fingerprint is not None:
        since = getattr(run, "started_at", None) or getattr(run, "created_at", None)
        then = [l for l in layers if since is None or l.created_at is None or l.created_at <= since]
        gold = {"run": run.pk, "stored": run.input_fingerprint,
                "current": _REPLAY_SOURCE[0].input_fingerprint(task, revision, run.mode, then)}
    return {"manifest": derived_manifest(revision.input_data, layers), "gold": gold}


#: the revision fields ``qc.check_derived`` and ``input_fingerprint`` read (a caller may load only these)
DERIVED_CONTENT_FIELDS = ("input_data", "trajectory", "answer_spec")
#: the replay run's fields :func:`derived_sources` reads
DERIVED_RUN_FIELDS = ("mode", "input_fingerprint", "started_at", "created_at")


def derived_findings(task, revision, run=None, *, layers=None) -> list[qc.Finding]:
    """The ``derived.*`` findings of ``revision`` (and its replay ``run``): the same check as in
    :func:`qc_for_task`, on any revision (a release checks the one it pins). Reads only the
    revision's :data:`DERIVED_CONTENT_FIELDS` and ``number``, and the run's :data:`DERIVED_RUN_FIELDS`."""
    content = {k: getattr(revision, k) for k in DERIVED_CONTENT_FIELDS}
    return qc.check_derived(content, derived_sources(task, revision, run, layers=layers))


def _with_variant(task, content: dict) -> dict:
    """``content`` with ``task``'s robustness variant record (``{kind, params, tools}``) under
    ``"variant"`` when it is one (annotation.qc.variants and the variant-aware checks read it)."""
    variant = TaskVariant.objects.filter(task=task).values("kind", "params", "tools").first()
    if variant is not None:
        content["variant"] = variant
    return content


def qc_for_task(task, replay=None, *, data_root=None) -> list[qc.Finding]:
    """The full QC suite on ``task``'s head revision (see the module docstring)."""
    rev = task.head
    content = _with_variant(task, revision_content(rev))
    layer_rows = list(task.event.layers.all())
    layers = {l.file_name: layer_info(l) for l in layer_rows}
    runs = list(_REPLAY_SOURCE[0].succeeded_runs(task))[:2] if _REPLAY_SOURCE else []
    if replay is None and runs:
        replay = runs[0]
    derived = derived_sources(task, rev, replay if replay is not None and not isinstance(replay, dict) else None,
                              layers=layer_rows)
    hashes: list[str] = []
    if replay is not None and not isinstance(replay, dict):  # a replay run
        hashes = [replay.replay_hash] + [r.replay_hash for r in runs if r.pk != replay.pk][:1]
        replay = _replay_dict(replay)
    elif isinstance(replay, dict):
        hashes = [h for h in (replay.get("hash"), *(r.replay_hash for r in runs)) if h][:2]
        if len(set(hashes)) == 1 and len(runs) >= 2:
            hashes = [r.replay_hash for r in runs]
    polygons = _polygon_golds(content, replay) if isinstance(replay, dict) else None
    if data_root is None:
        fill_layer_cache(layer_rows, content)
    return qc.full_qc(content, layers=layers, replay=replay, data_root=data_root or settings.STUDIO_DATA_ROOT,
                      replay_hashes=hashes if len(hashes) >= 2 else None, polygons=polygons, derived=derived)


def fill_layer_cache(layer_rows, content: dict) -> None:
    """With a bucket (``STUDIO_STORAGE_URL``): the stored files of the layers ``content``'s
    ``input_data`` names made present in this machine's data root, its cache of the bucket
    (``storage.local_copy``, checked against ``Layer.sha256``), so the manifest check finds a file
    the bucket holds and reports one it lacks as missing, as on a local data root. Nothing without
    a bucket."""
    if not storage.uses_bucket():
        return
    named = {base_name(p) for _, p, _ in input_entries(content.get("input_data") or {})}
    for layer in layer_rows:
        if layer.file_name in named and layer.path:
            try:
                storage.local_copy(layer.path, layer.sha256 or "")
            except (FileNotFoundError, ValueError):
                pass


def qc_for_content(event, content: dict, *, task=None, data_root=None) -> list[qc.Finding]:
    """The full QC suite on content that is not saved yet (the editor's live QC, ``POST /api/qc/``).

    ``content`` holds fields of ``CONTENT_FIELDS`` (``input_data`` already built from the layers);
    with ``task``, absent fields are taken from its head revision, as a save would merge them, and a
    robustness variant is checked as the variant it is (as :func:`qc_for_task` does). The
    event's layers and files are checked as for a saved task; there is no replay of unsaved
    content, so the sanity and determinism checks wait for a save and a replay. A saved revision is
    checked with :func:`qc_for_task` (the task page and ``manage.py qc`` use that one), so the two
    agree on the same revision.
    """
    merged = revision_content(task.head) if task is not None and task.head_id else {}
    merged.update({k: v for k, v in content.items() if k in CONTENT_FIELDS})
    if task is not None:  # a variant's edit is checked as the variant it stays (no alignment.* on a refusal)
        merged = _with_variant(task, merged)
    layer_rows = list(event.layers.all())
    layers = {l.file_name: layer_info(l) for l in layer_rows}
    derived = {"manifest": derived_manifest(merged.get("input_data"), layer_rows), "gold": None}
    if data_root is None:
        fill_layer_cache(layer_rows, merged)
    return qc.full_qc(merged, layers=layers, replay=None, data_root=data_root or settings.STUDIO_DATA_ROOT,
                      derived=derived)


def release_items(tasks) -> list[dict]:
    """``{question_id, content, dimension}`` of tasks (their head revisions), for release checks."""
    return [{"question_id": t.question_id, "content": revision_content(t.head), "dimension": t.dimension}
            for t in tasks if t.head_id]


def release_qc(tasks) -> tuple[list[qc.Finding], dict]:
    """Release-level findings and the distribution report over ``tasks``."""
    items = release_items(tasks)
    return qc.release_findings(items), qc.release_report(items)


# ---- task files (no database) ----------------------------------------------------------------
def _probe_sizes(layers: dict, root: Path | None) -> None:
    """Fill width/height of raster layers from their files, where readable (rasterio header)."""
    if root is None:
        return
    try:
        import rasterio
    except ImportError:  # pragma: no cover
        return
    for layer in layers.values():
        if layer.get("kind") == "vector" or (layer.get("width") and layer.get("height")):
            continue
        try:
            p = confine(root, str(layer.get("path", "")))
        except OutsideRoot:
            continue
        if not p.is_file() or p.stat().st_size == 0:
            continue
        try:
            with gdal_scope(), rasterio.open(p) as ds:
                layer["width"], layer["height"] = ds.width, ds.height
        except Exception:  # unreadable: the manifest check reports missing files, not this
            continue


def _file_polygons(content: dict, tasks_dir: Path, data_root: Path | None) -> dict:
    out = {}
    final = content.get("final_answer") or {}
    for f in content.get("answer_spec") or []:
        if f.get("eval_type") != "polygon_iou" or f.get("name") not in final:
            continue
        value = final[f["name"]]
        if isinstance(value, dict):
            out[f["name"]] = value
            continue
        gold = None
        if isinstance(value, str) and value.strip():
            name = Path(value).name
            candidates = [tasks_dir / value, tasks_dir / "gold_polygons" / name]
            if data_root is not None:
                candidates += [data_root / "tasks" / "gold_polygons" / name]
            for c in candidates:
                if c.is_file():
                    gold = _load_json(c)
                    break
        out[f["name"]] = gold
    return out


def qc_for_task_file(path, data_root=None) -> dict:
    """QC of a benchmark task file, without the database.

    Returns ``{"file", "findings" (file level), "tasks": [{question_id, findings}],
    "release": {"findings", "report"}}`` with findings as ``Finding`` objects.
    """
    path = Path(path)
    samples = loads(path.read_bytes())  # kernel.taskfile's reader; structure problems are findings here
    if data_root is None and path.parent.name == "tasks" and (path.parent.parent / "images").is_dir():
        data_root = path.parent.parent  # the benchmark's layout: <root>/tasks, <root>/images
    root = Path(data_root) if data_root is not None else None
    file_findings = qc.check_task_file(samples, path.name)
    results, items = [], []
    for sample in samples if isinstance(samples, list) else []:
        if not isinstance(sample, dict) or not isinstance(sample.get("tasks"), list):
            continue
        sid = str(sample.get("sample_id", ""))
        contents = [qc.content_from_dora_task(sample, t) if isinstance(t, dict) else None for t in sample["tasks"]]
        used_by = [qc.used_layer_files(c) if c else set() for c in contents]
        for t, content in enumerate(contents):
            if content is None:
                continue
            qid = f"{sid}_task{t}"
            layers = qc.layers_from_input_data(content["input_data"], content["classes"])
            _probe_sizes(layers, root)
            traj = content["trajectory"]
            # the gold trajectory's obs (when it has them) and final_answer stand for the replay
            has_obs = any(isinstance(s, dict) and "obs" in s for s in traj)
            replay = {"trajectory": traj if has_obs else [], "final_answer": content.get("final_answer") or {}}
            polygons = _file_polygons(content, path.parent, root)
            findings = qc.full_qc(_with_sizes(content, layers), replay=replay, data_root=root,
                                  polygons=polygons or None)
            # a layer unused by this task but used by another task of the sample is shared input
            others = set().union(*(u for k, u in enumerate(used_by) if k != t)) if len(used_by) > 1 else set()
            files_at = {loc: Path(str(p)).name for loc, p, _ in input_entries(content["input_data"])}
            findings = [f for f in findings
                        if not (f.check == "hygiene.unused_layer" and files_at.get(f.location) in others)]
            results.append({"question_id": qid, "findings": findings})
            items.append({"question_id": qid, "content": content, "dimension": str(content.get("task_category_code") or "").lower()})
    return {"file": str(path), "findings": file_findings, "tasks": results,
            "release": {"findings": qc.release_findings(items), "report": qc.release_report(items)}}


def _with_sizes(content: dict, layers: dict) -> dict:
    """A copy of ``content`` whose input_data entries carry the probed width/height (extra keys
    that ``layers_from_input_data`` reads), so the layers stay the task's own declared ones."""
    out = json.loads(json.dumps(content))
    _attach_sizes(out.get("input_data") or {}, layers)
    return out


def _attach_sizes(input_data: dict, layers: dict) -> None:
    for entry in _entries(input_data):
        path = entry.get("image_path") or entry.get("path")
        info = layers.get(Path(str(path)).name) if path else None
        if info and info.get("width") and info.get("height"):
            entry.setdefault("width", info["width"])
            entry.setdefault("height", info["height"])


def _entries(value):
    if isinstance(value, dict):
        if value.get("image_path") or value.get("path"):
            yield value
        else:
            for v in value.values():
                yield from _entries(v)
