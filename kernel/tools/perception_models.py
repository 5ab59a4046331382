"""Model mode of the perception tools: checkpoint loading and CPU/GPU inference (torch).

Not a registering module: the ``seg.*`` tools in ``perception.py`` call :func:`predict_labels`.
torch is imported lazily, inside the functions, so that GT-mode replays never pay for it.

Model zoo
    One model per tool family, stored as ``<checkpoint_dir>/<file>`` with the file names of the
    benchmark's ``MODEL_ZOO`` (dora-format.md §e): ``seg_building_damage.safetensors``,
    ``seg_isaid.safetensors``, ... Several tools share a model (the nine iSAID tools share
    ``seg_isaid``, the eleven aerial tools ``seg_aerial``, ``seg.flood`` runs ``seg_water`` on both
    dates).

Reference architecture (``studio-segnet-v1``)
    The benchmark's networks (DINOv3 ViT-L + DPT, SegFormer, Swin-UperNet, HRNet) and their
    weights are not part of the studio. The studio's *reference architecture* is a small fully
    convolutional net, the same for every family, differing only in input channels and classes::

        x -> (x - mean) / std                      per-channel buffers stored in the checkpoint
          -> conv3x3(C->w) ReLU -> conv3x3 dil 2 (w->w) ReLU -> conv3x3 dil 4 (w->w) ReLU
          -> conv1x1(w->K)                         logits, argmax -> class index

    Its receptive field has a radius of 7 px, so inference runs on strips of rows with an 8 px
    halo and gives exactly the whole-image result in bounded memory. A checkpoint is a
    safetensors file with the tensors ``mean``, ``std``, ``body.{0,2,4}.{weight,bias}``,
    ``head.{weight,bias}`` and the metadata ``architecture=studio-segnet-v1``; it is loaded
    strictly (missing, unexpected or mis-shaped tensors fail with ``ModelUnavailableError``).
    :func:`init_checkpoint` writes a seeded, randomly initialised one (for tests and as a
    starting point for training); a trained checkpoint carries its own input statistics.

Inputs per family: ``rgb`` (3 channels, 0-255; 1-band images are repeated, extra bands
dropped, as the benchmark does), ``bitemporal`` (pre RGB then post RGB, 6 channels), ``ms14``
(the 14-band multi-spectral + DEM + slope stack).

Device: ``cpu`` unless the environment variable ``STUDIO_PERCEPTION_DEVICE`` names another
torch device. Results are deterministic for a given checkpoint, input and device.

safetensors files are read and written with the ``safetensors`` package (pinned in
requirements.txt), the library the benchmark loads its checkpoints with
(``safetensors.torch.load_model(..., strict=True)``, dora-format.md §e).
"""
from __future__ import annotations

import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .base import ModelUnavailableError, ToolInputError, file_sha256

__all__ = ["ARCHITECTURE", "MODEL_ZOO", "ModelSpec", "checkpoint_path", "load_model",
           "predict_labels", "init_checkpoint", "read_safetensors", "write_safetensors",
           "prepare_input", "device_name"]

ARCHITECTURE = "studio-segnet-v1"
#: receptive-field radius of the reference architecture (1 + 2 + 4) and the strip halo used
RADIUS = 7
HALO = 8
STRIP_ROWS = 256

IMAGENET_MEAN = (123.675, 116.28, 103.53)  # ImageNet statistics on the 0-255 scale
IMAGENET_STD = (58.395, 57.12, 57.375)


@dataclass(frozen=True)
class ModelSpec:
    name: str
    file: str
    input_kind: str  # "rgb" | "bitemporal" | "ms14"
    num_classes: int

    @property
    def in_channels(self) -> int:
        return {"rgb": 3, "bitemporal": 6, "ms14": 14}[self.input_kind]


#: model name → checkpoint file, input kind and number of classes (benchmark's MODEL_ZOO names)
MODEL_ZOO: dict[str, ModelSpec] = {m.name: m for m in [
    ModelSpec("building_damage", "seg_building_damage.safetensors", "bitemporal", 4),
    ModelSpec("building_damage_opt_sar", "seg_building_damage_opt_sar.safetensors", "bitemporal", 4),
    ModelSpec("road_damage", "seg_road_damage.safetensors", "bitemporal", 4),
    ModelSpec("isaid", "seg_isaid.safetensors", "rgb", 16),
    ModelSpec("landcover", "seg_landcover.safetensors", "rgb", 8),
    ModelSpec("water", "seg_water.safetensors", "rgb", 2),
    ModelSpec("aerial", "seg_aerial.safetensors", "rgb", 12),
    ModelSpec("landslide_ms", "seg_landslide_ms.safetensors", "ms14", 2),
    ModelSpec("landslide_bitemporal", "seg_landslide_bitemporal.safetensors", "bitemporal", 2),
    ModelSpec("building_lowres", "seg_building_lowres.safetensors", "rgb", 2),
    ModelSpec("lava", "seg_lava.safetensors", "bitemporal", 2),
    ModelSpec("reconstruction_building", "seg_reconstruction_building.safetensors", "bitemporal", 2),
    ModelSpec("reservoir", "seg_reservoir.safetensors", "ms14", 2),
]}


def device_name() -> str:
    return os.environ.get("STUDIO_PERCEPTION_DEVICE", "").strip() or "cpu"


# ============================================================================================
# safetensors (the ``safetensors`` package)
# ============================================================================================
def read_safetensors(path: Path) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """(tensors as numpy arrays keyed by name, the file's ``__metadata__`` map) of a
    safetensors file, read with the ``safetensors`` package (``safe_open``, numpy framework).

    Raises ``ValueError`` naming the file when it is not a readable safetensors file.
    """
    from safetensors import SafetensorError, safe_open

    path = Path(path)
    try:
        with safe_open(str(path), framework="numpy") as f:
            metadata = dict(f.metadata() or {})
            tensors = {k: f.get_tensor(k) for k in f.keys()}
    except (SafetensorError, OSError) as exc:
        raise ValueError(f"{path.name} is not a safetensors file: {exc}") from None
    return tensors, metadata


def write_safetensors(path: Path, tensors: dict[str, np.ndarray],
                      metadata: dict[str, str] | None = None) -> Path:
    """Write numpy arrays (name → array) and a string metadata map as a safetensors file with
    the ``safetensors`` package (``save_file``). The tensor table is deterministic; the order
    of the metadata keys in the header is not (the package keeps them in a hash map), so
    compare files by their tensors and metadata, not by their bytes."""
    from safetensors.numpy import save_file

    path = Path(path)
    arrays = {k: np.ascontiguousarray(v) for k, v in tensors.items()}
    save_file(arrays, str(path), metadata={str(k): str(v) for k, v in (metadata or {}).items()})
    return path


# ============================================================================================
# Architecture
# ============================================================================================
def _build(in_channels: int, num_classes: int, width: int):
    import torch
    from torch import nn

    class StudioSegNet(nn.Module):
        """studio-segnet-v1 (see the module docstring)."""

        def __init__(self):
            super().__init__()
            self.register_buffer("mean", torch.zeros(in_channels))
            self.register_buffer("std", torch.ones(in_channels))
            self.body = nn.Sequential(
                nn.Conv2d(in_channels, width, 3, padding=1), nn.ReLU(),
                nn.Conv2d(width, width, 3, padding=2, dilation=2), nn.ReLU(),
                nn.Conv2d(width, width, 3, padding=4, dilation=4), nn.ReLU())
            self.head = nn.Conv2d(width, num_classes, 1)

        def forward(self, x):
            x = (x - self.mean[None, :, None, None]) / self.std[None, :, None, None]
            return self.head(self.body(x))

    return StudioSegNet()


def _default_stats(spec: ModelSpec) -> tuple[np.ndarray, np.ndarray]:
    if spec.input_kind == "rgb":
        return np.array(IMAGENET_MEAN, np.float32), np.array(IMAGENET_STD, np.float32)
    if spec.input_kind == "bitemporal":
        return np.array(IMAGENET_MEAN * 2, np.float32), np.array(IMAGENET_STD * 2, np.float32)
    # ms14: Sentinel-2 digital numbers are roughly 0-10000; DEM/slope are of other units, so a
    # trained checkpoint must bring its own statistics. These only keep a random net in range.
    return np.full(14, 1000.0, np.float32), np.full(14, 1000.0, np.float32)


def init_checkpoint(name: str, path: Path, *, seed: int = 0, width: int = 16) -> Path:
    """Write a randomly initialised ``studio-segnet-v1`` checkpoint for model ``name``.

    Seeded (``torch.manual_seed(seed)``), so the same call writes the same bytes.
    """
    import torch

    spec = _spec(name)
    gen_state = torch.random.get_rng_state()
    try:
        torch.manual_seed(int(seed))
        net = _build(spec.in_channels, spec.num_classes, int(width))
    finally:
        torch.random.set_rng_state(gen_state)
    mean, std = _default_stats(spec)
    tensors = {k: v.detach().cpu().numpy().astype(np.float32) for k, v in net.state_dict().items()}
    tensors["mean"], tensors["std"] = mean, std
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    return write_safetensors(path, tensors, {
        "architecture": ARCHITECTURE, "model": spec.name, "in_channels": str(spec.in_channels),
        "num_classes": str(spec.num_classes), "width": str(int(width)), "seed": str(int(seed))})


# ============================================================================================
# Loading
# ============================================================================================
def _spec(name: str) -> ModelSpec:
    try:
        return MODEL_ZOO[name]
    except KeyError:
        raise ModelUnavailableError(f"no model {name!r} in the model zoo",
                                    expected=f"one of {sorted(MODEL_ZOO)}") from None


def checkpoint_path(name: str, checkpoint_dir: Path | None, *, tool: str | None = None) -> Path:
    """``<checkpoint_dir>/<file>`` of model ``name``; ``ModelUnavailableError`` when no
    directory is configured or the file is missing (the message names the file)."""
    spec = _spec(name)
    if checkpoint_dir is None:
        raise ModelUnavailableError(
            f"perception mode 'model' needs a checkpoint directory, and none is configured "
            f"(expected {spec.file} in it)", tool=tool, expected="ToolContext.checkpoint_dir")
    path = Path(checkpoint_dir) / spec.file
    if not path.is_file():
        raise ModelUnavailableError(f"checkpoint not found: {path}", tool=tool,
                                    expected=f"{spec.file} in the checkpoint directory")
    return path


_CACHE: "OrderedDict[tuple, object]" = OrderedDict()
_CACHE_LOCK = threading.Lock()
_CACHE_SIZE = 2


def load_model(name: str, checkpoint_dir: Path | None, *, tool: str | None = None,
               device: str | None = None):
    """(model in eval mode on ``device``, checkpoint path). Strict: the checkpoint must hold
    exactly the reference architecture's tensors with the family's channel/class counts."""
    import torch

    spec = _spec(name)
    path = checkpoint_path(name, checkpoint_dir, tool=tool)
    dev = device or device_name()
    key = (str(path.resolve()), file_sha256(path), dev)
    with _CACHE_LOCK:
        hit = _CACHE.get(key)
        if hit is not None:
            _CACHE.move_to_end(key)
            return hit, path
    try:
        tensors, meta = read_safetensors(path)
    except (ValueError, KeyError, OSError) as exc:
        raise ModelUnavailableError(f"cannot read checkpoint {path.name}: {exc}", tool=tool,
                                    expected=f"a safetensors file of {ARCHITECTURE}") from None
    arch = meta.get("architecture", ARCHITECTURE)
    if arch != ARCHITECTURE:
        raise ModelUnavailableError(
            f"checkpoint {path.name} is for architecture {arch!r}; this studio runs "
            f"{ARCHITECTURE!r}", tool=tool, expected=f"a {ARCHITECTURE} checkpoint")
    w0 = tensors.get("body.0.weight")
    if w0 is None or w0.ndim != 4:
        raise ModelUnavailableError(f"checkpoint {path.name} has no tensor 'body.0.weight' of "
                                    f"{ARCHITECTURE}", tool=tool)
    width, in_ch = int(w0.shape[0]), int(w0.shape[1])
    head = tensors.get("head.weight")
    n_cls = int(head.shape[0]) if head is not None and head.ndim == 4 else -1
    if (in_ch, n_cls) != (spec.in_channels, spec.num_classes):
        raise ModelUnavailableError(
            f"checkpoint {path.name} takes {in_ch} input channels and predicts {n_cls} classes; "
            f"model {name!r} needs {spec.in_channels} and {spec.num_classes}", tool=tool,
            expected=f"{spec.in_channels} channels, {spec.num_classes} classes")
    net = _build(spec.in_channels, spec.num_classes, width)
    state = {k: torch.from_numpy(np.asarray(v, dtype=np.float32)) for k, v in tensors.items()}
    missing, unexpected = net.load_state_dict(state, strict=False)
    bad_shape = [k for k, v in net.state_dict().items() if k in state and state[k].shape != v.shape]
    if missing or unexpected or bad_shape:
        raise ModelUnavailableError(
            f"checkpoint {path.name} does not fit {ARCHITECTURE}: missing {sorted(missing)}, "
            f"unexpected {sorted(unexpected)}, mis-shaped {sorted(bad_shape)}", tool=tool)
    try:
        net = net.to(dev).eval()
    except (RuntimeError, AssertionError) as exc:
        raise ModelUnavailableError(f"torch device {dev!r} is not available: {exc}", tool=tool,
                                    expected="STUDIO_PERCEPTION_DEVICE=cpu or a visible GPU")
    with _CACHE_LOCK:
        _CACHE[key] = net
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return net, path


# ============================================================================================
# Inference
# ============================================================================================
def _rgb(arr: np.ndarray) -> np.ndarray:
    """(C, H, W) → 3 channels: a 1-band image is repeated, extra bands are dropped."""
    if arr.shape[0] == 1:
        return np.repeat(arr, 3, axis=0)
    if arr.shape[0] == 2:
        return np.concatenate([arr, arr[:1]], axis=0)
    return arr[:3]


def prepare_input(name: str, images: list[np.ndarray], *, tool: str | None = None) -> np.ndarray:
    """The float32 (C, H, W) network input of model ``name`` from (bands, H, W) arrays:
    one image for ``rgb``/``ms14``, [pre, post] for ``bitemporal``."""
    spec = _spec(name)
    if spec.input_kind == "bitemporal":
        pre, post = images
        x = np.concatenate([_rgb(pre), _rgb(post)], axis=0)
    elif spec.input_kind == "rgb":
        x = _rgb(images[0])
    else:
        x = images[0]
        if x.shape[0] != 14:
            raise ToolInputError(f"model {name!r} needs a 14-band image (12-band multi-spectral + "
                                 f"DEM + slope), got {x.shape[0]} band(s); merge them with "
                                 f"ras.concat first", tool=tool, argument="post_image_path",
                                 expected="a 14-band raster")
    x = np.nan_to_num(np.asarray(x, dtype=np.float32), nan=0.0, posinf=0.0, neginf=0.0)
    return x


def predict_labels(name: str, images: list[np.ndarray], checkpoint_dir: Path | None, *,
                   tool: str | None = None, device: str | None = None
                   ) -> tuple[np.ndarray, Path]:
    """(uint8 (H, W) class-index map = argmax of the logits, checkpoint path).

    Runs on strips of ``STRIP_ROWS`` rows with a ``HALO``-row margin, which equals the
    whole-image result because the net's receptive-field radius is ``RADIUS`` < ``HALO``.
    """
    import torch

    net, path = load_model(name, checkpoint_dir, tool=tool, device=device)
    x = prepare_input(name, images, tool=tool)
    _, h, w = x.shape
    dev = next(net.parameters()).device
    out = np.empty((h, w), dtype=np.uint8)
    with torch.inference_mode():
        for r0 in range(0, h, STRIP_ROWS):
            r1 = min(h, r0 + STRIP_ROWS)
            a0, a1 = max(0, r0 - HALO), min(h, r1 + HALO)
            t = torch.from_numpy(np.ascontiguousarray(x[:, a0:a1]))[None].to(dev)
            logits = net(t)[0]
            labels = logits.argmax(dim=0).to("cpu").numpy().astype(np.uint8)
            out[r0:r1] = labels[r0 - a0:r0 - a0 + (r1 - r0)]
    return out, path
