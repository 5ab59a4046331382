"""What a replay reads: the event's layers as a task sees them (``task_layers``), path strings of a
trajectory resolved to them and the GT mask of a perception call (``LayerResolver``), and the
fingerprint of all of it (``input_fingerprint``: a replay whose fingerprint equals a succeeded
replay's copies that run, ``replay.services.runs``)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings

from annotation.models import Layer, Task
from annotation.services.layer_versions import pinned_layer, task_pins
from kernel.engine import ENGINE_CACHE_VERSION, step_call
from kernel.tools.base import GTMask, ToolInputError, canonical_json, file_sha256
from kernel.tools.spec import get_tool
from replay.services.paths import data_path, layer_content_sha256, stored_path

# The image arguments a perception tool's GT lookup follows, most specific first.
GT_IMAGE_ARGS = ("post_image_path", "post_image", "image_path", "pre_image_path", "pre_image")



#: the ``Layer`` fields that ``LayerResolver`` and ``input_fingerprint`` read
LAYER_FIELDS = ("id", "event_id", "file_name", "path", "kind", "class_map", "annotates_id", "gsd_m", "crs", "sha256")



class LayerResolver:
    """Maps path strings in a trajectory to the event's stored layer files.

    A string matches a layer whose ``file_name`` equals the string's base name (the benchmark's
    trajectories use bare file names). Unknown names raise ``ToolInputError``. ``layers``: the
    event's ``Layer`` rows when the caller has them already (saves the query). A row whose stored
    path escapes the data root makes the constructor raise ``ValueError`` (checked lexically
    here; ``__call__`` resolves symbolic links too, through ``data_path``).
    """

    def __init__(self, event_id: int, layers: list[Layer] | None = None):
        if layers is None:
            layers = list(Layer.objects.filter(event_id=event_id))
        self.layers = {l.file_name: l for l in layers}
        # the tools hand resolved paths to ``gt_lookup``: map stored files back to their layers too
        # (lexically normalised here; ``__call__`` adds the resolved path of every file it hands out)
        self.by_stored_path: dict[str, Layer] = {stored_path(l.path): l for l in layers}
        self.masks: dict[int, Layer] = {}
        self._files: dict[int, Path] = {}  # layer id -> its resolved file (``_file``)
        for l in sorted(layers, key=lambda l: l.pk):
            if l.kind == Layer.Kind.MASK and l.annotates_id and l.annotates_id not in self.masks:
                self.masks[l.annotates_id] = l

    def layer_for(self, value: str) -> Layer | None:
        """The layer a path string names: a layer file name, or the stored file of a layer."""
        return self.by_stored_path.get(str(value)) or self.layers.get(Path(str(value)).name)

    def __call__(self, value: str) -> Path:
        layer = self.layer_for(value)
        if layer is None:
            raise ToolInputError(
                tool=None, argument=None, expected="a layer file name of this event",
                message=f"'{value}' is neither an output of an earlier step nor a layer of this event",
            )
        path = self._file(layer)
        self.by_stored_path.setdefault(str(path), layer)
        return path

    def _file(self, layer: Layer) -> Path:
        """``data_path`` of the layer's file, resolved once per resolver (a resolver serves one
        replay: the engine asks for the same layers at every step's cache key)."""
        path = self._files.get(layer.pk)
        if path is None:
            path = self._files[layer.pk] = data_path(layer.path, layer.sha256 or "")
        return path

    def _mask_for(self, args: dict) -> tuple[Layer, Layer] | None:
        for arg in GT_IMAGE_ARGS:
            value = args.get(arg)
            if not value or not isinstance(value, (str, Path)):
                continue
            image = self.layer_for(value)
            if image is None:
                continue
            mask = self.masks.get(image.pk)
            if mask is not None:
                return mask, image
        return None

    def gt_lookup(self, tool_name: str, args: dict) -> GTMask | None:
        """The GT mask annotating the tool's input image (post image first), or None."""
        found = self._mask_for(args)
        if found is None:
            return None
        mask, image = found
        return GTMask(
            path=self._file(mask),
            class_map={int(k): v for k, v in (mask.class_map or {}).items()},
            pixel_size_m=mask.gsd_m or image.gsd_m,
        )

    def fingerprint(self, tool_name: str, args: dict) -> Any:
        """What a perception call reads besides its arguments (part of its cache key): the
        linked GT mask's checksum and class map, or None."""
        found = self._mask_for(args)
        if found is None:
            return None
        mask, _image = found
        return {"gt_sha256": file_sha256(self._file(mask)),
                "gt_classes": {str(k): v for k, v in sorted((mask.class_map or {}).items())},
                "gsd_m": mask.gsd_m}



def _checkpoint_fingerprint(directory: str | None) -> list:
    if not directory or not Path(directory).is_dir():
        return []
    return sorted([p.name, file_sha256(p)] for p in Path(directory).iterdir()
                  if p.is_file() and p.suffix in (".safetensors", ".pt", ".pth"))



def task_layers(task: Task, layers: list[Layer] | None = None) -> list[Layer]:
    """The event's layers as ``task`` reads them: for a released task, each layer at the version
    its newest published release pinned (``annotation.services.layer_versions.pinned_layer``: an
    unsaved ``Layer`` with the pinned version's files and fields); for any other task, or a layer
    the release did not pin, the ``Layer`` row (the newest version). ``layers``: the event's rows
    when the caller has them (saves the query). One query more for a released task only."""
    if layers is None:
        layers = list(Layer.objects.filter(event_id=task.event_id))
    if task.status != Task.Status.RELEASED:
        return layers
    pins = task_pins(task.pk)
    return [pinned_layer(l, pins) for l in layers] if pins else layers



def input_fingerprint(task: Task, revision, mode: str, layers: list[Layer] | None = None) -> str:
    """SHA-256 of what a replay of ``revision`` reads: its trajectory and answer spec, the contents
    of the event's layers (their ``sha256``, else path, size and mtime) with their GSD and CRS
    (a maintainer may record them later: annotation.services.layers), the versions of the
    tools it names and the perception mode (``replay --changed-only`` compares it).
    ``layers``: the event's ``Layer`` rows when the caller has them already (saves the query)."""
    import hashlib

    if layers is None:
        layers = list(Layer.objects.filter(event_id=task.event_id))
    rows = []
    for l in sorted(layers, key=lambda l: (l.file_name, l.pk)):
        try:  # the file's bytes (cached on path, inode, size and mtime), not the import-time checksum
            ident = layer_content_sha256(l.path, l.sha256 or "")  # (with a bucket: the checked row's)
        except (OSError, ValueError):
            ident = f"{l.path}:missing"
        rows.append([l.file_name, ident, l.class_map or {}, l.annotates_id, l.gsd_m, l.crs or ""])
    names = set()

    def collect(steps):
        for st in steps or []:
            if isinstance(st, dict):
                names.add(step_call(st))
                calls = (st.get("args") or {}).get("calls") if isinstance(st.get("args"), dict) else None
                if isinstance(calls, list):
                    collect(calls)

    collect(revision.trajectory)
    versions = {}
    for n in sorted(x for x in names if x):
        try:
            spec = get_tool(n)
            versions[spec.name] = spec.version
        except Exception:
            versions[n] = None
    payload = {"engine": ENGINE_CACHE_VERSION, "trajectory": revision.trajectory,
               "answer_spec": revision.answer_spec, "layers": rows,
               "tools": versions, "mode": mode,
               "checkpoints": _checkpoint_fingerprint(settings.STUDIO_CHECKPOINT_DIR) if mode == "model" else None}
    return hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()

