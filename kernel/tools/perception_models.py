"""Model mode of the perception tools: checkpoint loading and CPU/GPU inference (torch).

Not a registering module: the ``seg.*`` tools in ``perception.py`` call :func:`predict_labels`.
torch is imported lazily, inside the functions, so that GT-mode replays never pay for it.

Model zoo
    One model per tool family, stored as ``<checkpoint_dir>/<file>`` with the file names of the
    benchmark's ``MODEL_ZOO`` (dora-format.md §e): ``seg_building_damage.safetensors``,
    ``seg_isaid.safetensors``, ... Several tools share a model (the nine iSAID tools share
    ``seg_isaid``, the eleven aerial tools ``seg_aerial``, ``seg.flood`` runs ``seg_water`` on both
    dates).

The benchmark's networks
    A checkpoint without ``architecture=studio-segnet-v1`` metadata is the benchmark's file: it
    is loaded strictly into the benchmark's network of its model (:data:`BENCHMARK_NETWORKS`;
    every tensor name, shape and dtype checked) and run as the benchmark runs it. Implemented:
    SegFormer mit_b0 for ``landslide_ms`` and ``reservoir`` (``perception_segformer``; 14-band
    input statistics, 512 px windows every 256 px, raw logits averaged) and HRNet-W48 for
    ``building_lowres`` (``perception_hrnet``; 480 px windows every 240 px resized ×3 around
    the net, raw logits averaged, the mask inverted), Swin-T UPerNet for
    ``landslide_bitemporal`` (``perception_swin``; pre + post RGB ImageNet-normalised, 518 px
    windows, raw logits averaged), and the DINOv3 ViT-L/16 DPT models (``perception_dinov3``):
    ``BitemporalDPT`` for ``building_damage``, ``building_damage_opt_sar``, ``road_damage``,
    ``lava``, ``reconstruction_building`` (pre + post RGB as Swin's, not padded) and ``DPT`` for
    ``isaid``, ``landcover``, ``water``, ``aerial`` (RGB reflect-padded to a square multiple of
    518 px, cropped back); 518 px windows every 518 px, softmax probabilities averaged. Their
    300 M parameters are built on torch's ``meta`` device and the file's tensors assigned.
    :func:`write_benchmark_checkpoint` writes a seeded file in the benchmark's format (parity
    tests; ``docs/perception.md``).

Reference architecture (``studio-segnet-v1``)
    The studio's own small fully convolutional net, the same for every family, differing only
    in input channels and classes, for checkpoints that name it (tests, and a light stand-in
    for the benchmark's networks, whose ViT-L forward takes tens of seconds a window on CPU)::

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

import contextlib
import os
import threading
import zlib
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .base import ModelUnavailableError, ToolInputError, file_sha256
from .perception_dinov3 import build_bitemporal_dpt, build_dpt, fixed_tensor
from .perception_hrnet import build_hrnet
from .perception_segformer import build_segformer
from .perception_swin import SHARED_PREFIXES, build_swin_upernet

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
    #: the benchmark's network for this model (``dora/tools/segmentation/__init__.py``)
    benchmark_arch: str = ""

    @property
    def in_channels(self) -> int:
        return {"rgb": 3, "bitemporal": 6, "ms14": 14}[self.input_kind]


#: model name → checkpoint file, input kind and number of classes (benchmark's MODEL_ZOO names)
MODEL_ZOO: dict[str, ModelSpec] = {m.name: m for m in [
    ModelSpec("building_damage", "seg_building_damage.safetensors", "bitemporal", 4, "BitemporalDPT"),
    ModelSpec("building_damage_opt_sar", "seg_building_damage_opt_sar.safetensors", "bitemporal", 4, "BitemporalDPT"),
    ModelSpec("road_damage", "seg_road_damage.safetensors", "bitemporal", 4, "BitemporalDPT"),
    ModelSpec("isaid", "seg_isaid.safetensors", "rgb", 16, "DPT"),
    ModelSpec("landcover", "seg_landcover.safetensors", "rgb", 8, "DPT"),
    ModelSpec("water", "seg_water.safetensors", "rgb", 2, "DPT"),
    ModelSpec("aerial", "seg_aerial.safetensors", "rgb", 12, "DPT"),
    ModelSpec("landslide_ms", "seg_landslide_ms.safetensors", "ms14", 2, "SegFormer mit_b0"),
    ModelSpec("landslide_bitemporal", "seg_landslide_bitemporal.safetensors", "bitemporal", 2, "Swin-UperNet"),
    ModelSpec("building_lowres", "seg_building_lowres.safetensors", "rgb", 2, "HRNet-W48"),
    ModelSpec("lava", "seg_lava.safetensors", "bitemporal", 2, "BitemporalDPT"),
    ModelSpec("reconstruction_building", "seg_reconstruction_building.safetensors", "bitemporal", 2, "BitemporalDPT"),
    ModelSpec("reservoir", "seg_reservoir.safetensors", "ms14", 2, "SegFormer mit_b0"),
]}


def device_name() -> str:
    return os.environ.get("STUDIO_PERCEPTION_DEVICE", "").strip() or "cpu"


# ============================================================================================
# safetensors (the ``safetensors`` package)
# ============================================================================================
def read_safetensors(path: Path, *, framework: str = "numpy") -> tuple[dict, dict[str, str]]:
    """(tensors keyed by name, the file's ``__metadata__`` map) of a safetensors file, read with
    the ``safetensors`` package (``safe_open``): numpy arrays, or torch tensors with
    ``framework="pt"`` (the only way to read the bfloat16 tensors of the DINOv3 checkpoints,
    numpy having no bfloat16).

    Raises ``ValueError`` naming the file when it is not a readable safetensors file.
    """
    from safetensors import SafetensorError, safe_open

    path = Path(path)
    try:
        with safe_open(str(path), framework=framework) as f:
            metadata = dict(f.metadata() or {})
            tensors = {k: f.get_tensor(k) for k in f.keys()}
    except (SafetensorError, OSError) as exc:
        raise ValueError(f"{path.name} is not a safetensors file: {exc}") from None
    return tensors, metadata


def write_safetensors(path: Path, tensors: dict,
                      metadata: dict[str, str] | None = None) -> Path:
    """Write numpy arrays or torch tensors (name → value) and a string metadata map as a
    safetensors file with the ``safetensors`` package (``save_file``; its torch flavour when a
    value is a torch tensor, e.g. a bfloat16 one). The tensor table is deterministic; the order
    of the metadata keys in the header is not (the package keeps them in a hash map), so
    compare files by their tensors and metadata, not by their bytes."""
    path = Path(path)
    meta = {str(k): str(v) for k, v in (metadata or {}).items()}
    if any(type(v).__module__.startswith("torch") for v in tensors.values()):
        import torch
        from safetensors.torch import save_file as save_torch

        save_torch({k: (v.contiguous() if torch.is_tensor(v)
                        else torch.from_numpy(np.array(v, order="C")))
                    for k, v in tensors.items()}, str(path), metadata=meta)
        return path
    from safetensors.numpy import save_file

    arrays = {k: np.array(v, order="C") for k, v in tensors.items()}  # 0-d arrays stay 0-d
    save_file(arrays, str(path), metadata=meta)
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


_CACHE: OrderedDict[tuple, object] = OrderedDict()
_CACHE_LOCK = threading.Lock()
_CACHE_SIZE = 2


def load_model(name: str, checkpoint_dir: Path | None, *, tool: str | None = None,
               device: str | None = None):
    """(model in eval mode on ``device``, checkpoint path), cached per process (the two most
    recent models, by file path, content hash and device).

    A checkpoint whose metadata says ``architecture=studio-segnet-v1`` runs the studio's small
    reference net (:func:`init_checkpoint`). Any other file is taken as the benchmark's: it is
    loaded strictly into the benchmark's network for ``name`` (:data:`BENCHMARK_NETWORKS`), every
    tensor name, shape and dtype checked; a missing, unexpected or mis-shaped tensor is a
    ``ModelUnavailableError`` naming it. A model whose benchmark network the studio does not hold
    yet is a ``ModelUnavailableError`` saying so. The model's ``studio_architecture`` attribute
    names what runs."""
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
        tensors, meta = read_safetensors(path, framework="pt")
    except (ValueError, KeyError, OSError) as exc:
        raise ModelUnavailableError(f"cannot read checkpoint {path.name}: {exc}", tool=tool,
                                    expected="a safetensors file") from None
    if meta.get("architecture") == ARCHITECTURE:
        net = _load_segnet(spec, path, {k: v.float().numpy() for k, v in tensors.items()}, tool)
        net.studio_architecture = ARCHITECTURE
    else:
        net = _load_benchmark(spec, path, tensors, tool)
    try:
        net = net.to(dev).eval()
    except (RuntimeError, AssertionError) as exc:
        raise ModelUnavailableError(f"torch device {dev!r} is not available: {exc}", tool=tool,
                                    expected="STUDIO_PERCEPTION_DEVICE=cpu or a visible GPU") from exc
    with _CACHE_LOCK:
        _CACHE[key] = net
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return net, path


def _load_segnet(spec: ModelSpec, path: Path, tensors: dict, tool: str | None):
    import torch

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
            f"model {spec.name!r} needs {spec.in_channels} and {spec.num_classes}", tool=tool,
            expected=f"{spec.in_channels} channels, {spec.num_classes} classes")
    net = _build(spec.in_channels, spec.num_classes, width)
    state = {k: torch.from_numpy(np.asarray(v, dtype=np.float32)) for k, v in tensors.items()}
    missing, unexpected = net.load_state_dict(state, strict=False)
    bad_shape = [k for k, v in net.state_dict().items() if k in state and state[k].shape != v.shape]
    if missing or unexpected or bad_shape:
        raise ModelUnavailableError(
            f"checkpoint {path.name} does not fit {ARCHITECTURE}: missing {sorted(missing)}, "
            f"unexpected {sorted(unexpected)}, mis-shaped {sorted(bad_shape)}", tool=tool)
    return net


#: benchmark architecture → builder of the studio's implementation, (in_channels, classes) → Module
BENCHMARK_NETWORKS = {"SegFormer mit_b0": build_segformer, "HRNet-W48": build_hrnet,
                      "Swin-UperNet": build_swin_upernet, "DPT": build_dpt,
                      "BitemporalDPT": build_bitemporal_dpt}
#: networks built on torch's ``meta`` device before loading (the loaded tensors are assigned, not
#: copied): the DINOv3 ViT-L models, whose 300 M parameters would otherwise be allocated and
#: initialised only to be overwritten
META_BUILT = frozenset({"DPT", "BitemporalDPT"})


def benchmark_network(name: str, *, device=None):
    """A fresh (unloaded) instance of the benchmark's network for model ``name`` (its tensors on
    ``device``, e.g. ``"meta"`` for names, shapes and dtypes only), or ``ModelUnavailableError``
    when the studio does not implement it."""
    import torch

    spec = _spec(name)
    build = BENCHMARK_NETWORKS.get(spec.benchmark_arch)
    if build is None:
        raise ModelUnavailableError(
            f"the benchmark's {spec.benchmark_arch} network of model {name!r} is not implemented in "
            f"the studio yet (implemented: {', '.join(sorted(BENCHMARK_NETWORKS))}); a "
            f"{ARCHITECTURE} checkpoint runs instead", tool=None,
            expected=f"a checkpoint of {', '.join(sorted(BENCHMARK_NETWORKS))}")
    with torch.device(device) if device is not None else contextlib.nullcontext():
        return build(spec.in_channels, spec.num_classes)


def _dtype(t) -> str:
    return str(t.dtype).replace("torch.", "")


def _load_benchmark(spec: ModelSpec, path: Path, tensors: dict, tool: str | None):
    """Strict load, as the benchmark's ``safetensors.torch.load_model(model, path, strict=True)``:
    the file's tensors must be exactly the network's, each of its shape and dtype."""
    import torch

    on_meta = spec.benchmark_arch in META_BUILT
    try:
        net = benchmark_network(spec.name, device="meta" if on_meta else None)
    except ModelUnavailableError as exc:
        raise exc.with_context(tool) from exc
    want = net.state_dict()
    for alias, name in SHARED_PREFIXES.items():  # a shared module's second name (Swin-UperNet)
        if not any(k.startswith(name) for k in tensors):
            tensors = {(name + k[len(alias):] if k.startswith(alias) else k): v
                       for k, v in tensors.items()}
    missing = sorted(set(want) - set(tensors))
    unexpected = sorted(set(tensors) - set(want))
    bad = [f"{k} {tuple(tensors[k].shape)} {_dtype(tensors[k])} (want {tuple(want[k].shape)} "
           f"{_dtype(want[k])})"
           for k in sorted(set(want) & set(tensors))
           if tuple(tensors[k].shape) != tuple(want[k].shape) or _dtype(tensors[k]) != _dtype(want[k])]
    if missing or unexpected or bad:
        def some(xs):
            return ", ".join(xs[:5]) + (f" and {len(xs) - 5} more" if len(xs) > 5 else "")
        parts = [f"{label}: {some(xs)}" for label, xs in
                 (("missing", missing), ("unexpected", unexpected), ("mis-shaped", bad)) if xs]
        raise ModelUnavailableError(
            f"checkpoint {path.name} does not fit the benchmark's {spec.benchmark_arch} for "
            f"{spec.name!r}: {'; '.join(parts)}", tool=tool,
            expected=f"the benchmark's {spec.file}")
    net.load_state_dict({k: (v if torch.is_tensor(v) else torch.from_numpy(np.array(v)))
                         for k, v in tensors.items()}, strict=True, assign=on_meta)
    net.studio_architecture = spec.benchmark_arch
    return net


def seeded_value(name: str, shape: tuple, dtype: str, seed: int) -> np.ndarray:
    """The deterministic value of tensor ``name`` in a seeded test checkpoint: a generator seeded
    by ``(seed, crc32(name))``; ``num_batches_tracked`` 0; BatchNorm ``running_var`` in [1, 1.5),
    ``running_mean`` N(0, 0.1²); other 1-D ``weight`` 1 + N(0, 0.1²), other 1-D tensors
    N(0, 0.05²); the rest N(0, 1/fan_in) with fan_in the product of the trailing dimensions.
    The parity runs of the benchmark's own code use the same rule (``docs/perception.md``)."""
    rng = np.random.default_rng([int(seed), zlib.crc32(name.encode())])
    if name.endswith("num_batches_tracked"):
        return np.zeros(shape, np.dtype(dtype))
    if name.endswith("running_var"):
        return (1 + 0.5 * rng.random(shape)).astype(np.float32)
    if name.endswith("running_mean"):
        return (0.1 * rng.standard_normal(shape)).astype(np.float32)
    if len(shape) == 1 and name.endswith("weight"):
        return (1 + 0.1 * rng.standard_normal(shape)).astype(np.float32)
    if len(shape) == 1:
        return (0.05 * rng.standard_normal(shape)).astype(np.float32)
    fan_in = int(np.prod(shape[1:]))
    return (rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32)


def write_benchmark_checkpoint(name: str, path: Path, *, seed: int = 0) -> Path:
    """Write a checkpoint in the benchmark's format for model ``name`` (its network's tensor
    names, shapes and dtypes, no metadata), every floating-point value from :func:`seeded_value`
    and the integer buffers as the network builds them (``num_batches_tracked`` 0, Swin's
    ``relative_position_index``), DINOv3's rope ``periods`` (bfloat16) and qkv ``bias_mask`` as
    :func:`perception_dinov3.fixed_tensor` gives them: what the parity tests load in the studio
    and in the benchmark's own code. A DINOv3 ViT-L file is about 1.2 GB."""
    spec = _spec(name)
    on_meta = spec.benchmark_arch in META_BUILT
    net = benchmark_network(name, device="meta" if on_meta else None)
    tensors = {}
    for k, v in net.state_dict().items():
        fixed = fixed_tensor(k, tuple(v.shape)) if on_meta else None
        if fixed is not None:  # DINOv3's rope periods (bfloat16) and qkv bias mask
            tensors[k] = fixed
        elif v.is_floating_point() or k.endswith("num_batches_tracked"):
            tensors[k] = seeded_value(k, tuple(v.shape), _dtype(v), seed)
        else:  # integer buffers: their values
            tensors[k] = v.numpy().copy()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    return write_safetensors(path, tensors)


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


#: the benchmark's 14-band input statistics (``dora/tools/perception.py``,
#: ``landslide4sense_sliding_infer``): the image is divided by ``MS14_BAND_MEAN`` per band, then
#: normalised as albumentations' ``Normalize(mean, std, max_pixel_value=1)`` does, in float32
MS14_BAND_MEAN = (1111.81236406, 824.63171476, 663.41636217, 445.17289745, 645.8582926,
                  1547.73508126, 1960.44401001, 1941.32229668, 674.07572865, 9.04787384,
                  1113.98338755, 519.90397929, 20.29228266, 772.83144788)
MS14_NORM_MEAN = (-0.4914, -0.3074, -0.1277, -0.0625, 0.0439, 0.0803, 0.0644, 0.0802, 0.3000,
                  0.4082, 0.0823, 0.0516, 0.3338, 0.7819)
MS14_NORM_STD = (0.9325, 0.8775, 0.8860, 0.8869, 0.8857, 0.8418, 0.8354, 0.8491, 0.9061, 1.6072,
                 0.8848, 0.9232, 0.9018, 1.2913)
#: window and stride of the 14-band models (px), and the benchmark's window batch size
MS14_WINDOW, MS14_STRIDE, WINDOW_BATCH = 512, 256, 2


def window_boxes(h: int, w: int, kernel: int, stride: int) -> list[tuple[int, int, int, int]]:
    """Windows ``(x0, y0, x1, y1)`` covering an ``h`` × ``w`` image, rows outer, columns inner:
    the window is clipped to the image, starts every ``stride`` px and the last one of a row or
    column is moved back to end at the border (the grid of the benchmark's
    ``segmentation/inference.py:sliding_window``, itself EVER's ``AutoPatchSegm``)."""
    def starts(n: int) -> tuple[int, list[int]]:
        k = min(kernel, n)
        return k, sorted(set(range(0, n - k, stride)) | {n - k})
    kh, ys = starts(h)
    kw, xs = starts(w)
    return [(x, y, x + kw, y + kh) for y in ys for x in xs]


def average_windows(net, image, kernel: int, stride: int, *, batch: int = WINDOW_BATCH,
                    forward=None):
    """(K, H, W) float32 torch tensor: the net's outputs on the windows of ``image`` (an
    (H, W, C) float32 array), ``batch`` windows a forward pass, summed per pixel and divided by
    the number of windows covering it (the benchmark's ``predict_probs``: raw logits for the
    SegFormer, Swin-UperNet and HRNet models). ``forward``: what runs on a (N, C, k, k) batch
    instead of ``net`` itself (the low-resolution building model's resize around the net)."""
    import torch

    h, w = image.shape[:2]
    dev = next(net.parameters()).device
    forward = forward or net
    boxes = window_boxes(h, w, kernel, stride)
    acc = counts = None
    with torch.inference_mode():
        for i in range(0, len(boxes), batch):
            part = boxes[i:i + batch]
            x = torch.stack([torch.from_numpy(np.ascontiguousarray(image[y0:y1, x0:x1]))
                             for x0, y0, x1, y1 in part]).to(dev).permute(0, 3, 1, 2).float()
            out = forward(x).cpu()
            if acc is None:
                acc = torch.zeros(out.shape[1], h, w, dtype=torch.float32)
                counts = torch.zeros(h, w, dtype=torch.float32)
            for o, (x0, y0, x1, y1) in zip(out, part):
                counts[y0:y1, x0:x1] += 1
                acc[:, y0:y1, x0:x1] += o
    return acc / counts.unsqueeze(0)


#: scenes above this many pixels are merged on disk (the benchmark's ``LARGE_IMAGE_PIXELS``,
#: ``segmentation/inference.py``, used by its DPT and Swin-UperNet tools)
LARGE_IMAGE_PIXELS = 4000 * 4000


def window_labels(net, image, kernel: int, stride: int, *,
                  out_of_core_above: int = LARGE_IMAGE_PIXELS) -> np.ndarray:
    """(H, W) uint8 argmax of :func:`average_windows`; above ``out_of_core_above`` pixels the sums
    and counts live in temporary memory-mapped files and the argmax is taken in 1024 px blocks
    (the benchmark's ``predict_labels_out_of_core``: the same float32 sums, so the same labels)."""
    import tempfile

    import torch

    h, w = image.shape[:2]
    if h * w <= out_of_core_above:
        return average_windows(net, image, kernel, stride).argmax(dim=0).numpy().astype(np.uint8)
    dev = next(net.parameters()).device
    boxes = window_boxes(h, w, kernel, stride)
    with tempfile.TemporaryFile() as fa, tempfile.TemporaryFile() as fc:
        acc = counts = None
        with torch.inference_mode():
            for i in range(0, len(boxes), WINDOW_BATCH):
                part = boxes[i:i + WINDOW_BATCH]
                x = torch.stack([torch.from_numpy(np.ascontiguousarray(image[y0:y1, x0:x1]))
                                 for x0, y0, x1, y1 in part]).to(dev).permute(0, 3, 1, 2).float()
                out = net(x).cpu().permute(0, 2, 3, 1).numpy()
                if acc is None:
                    acc = np.memmap(fa, shape=(h, w, out.shape[3]), dtype=np.float32, mode="w+")
                    counts = np.memmap(fc, shape=(h, w, 1), dtype=np.float32, mode="w+")
                for o, (x0, y0, x1, y1) in zip(out, part):
                    acc[y0:y1, x0:x1] += o
                    counts[y0:y1, x0:x1] += 1.0
        labels = np.empty((h, w), dtype=np.uint8)
        for x0, y0, x1, y1 in window_boxes(h, w, 1024, 1024):
            labels[y0:y1, x0:x1] = (np.asarray(acc[y0:y1, x0:x1]) /
                                    np.asarray(counts[y0:y1, x0:x1])).argmax(axis=2)
        del acc, counts
    return labels


def ms14_input(image: np.ndarray) -> np.ndarray:
    """The (H, W, 14) float32 network input of the 14-band models from a (14, H, W) array:
    ``image / MS14_BAND_MEAN`` (float64), then ``(x - MS14_NORM_MEAN) * (1 / MS14_NORM_STD)`` in
    float32 (albumentations' Normalize with ``max_pixel_value=1``)."""
    x = np.moveaxis(np.asarray(image, dtype=np.float64), 0, -1) / np.asarray(MS14_BAND_MEAN)
    x = x.astype(np.float32)
    return (x - np.asarray(MS14_NORM_MEAN, np.float32)) * np.reciprocal(
        np.asarray(MS14_NORM_STD, np.float32))


#: the bi-temporal models (``perception.py:model_sliding_infer``): pre and post RGB stacked (6
#: channels), ImageNet-normalised on the 0-255 scale, 518 px windows every 518 px
BITEMPORAL_WINDOW = 518


def bitemporal_input(pre: np.ndarray, post: np.ndarray) -> np.ndarray:
    """(H, W, 6) float32: pre then post RGB ((bands, H, W) arrays; a 1-band image repeated, extra
    bands dropped), ``(x - mean) * (1 / std)`` with the ImageNet statistics twice, as
    albumentations' ``Normalize(mean*2, std*2, max_pixel_value=1)``."""
    x = np.concatenate([np.moveaxis(_rgb(np.asarray(pre)), 0, -1),
                        np.moveaxis(_rgb(np.asarray(post)), 0, -1)], axis=-1).astype(np.float32)
    return (x - np.asarray(IMAGENET_MEAN * 2, np.float32)) * np.reciprocal(
        np.asarray(IMAGENET_STD * 2, np.float32))


#: the low-resolution building model (``perception.py:seg_building_lowres``): 480 px windows of
#: the native image every 240 px, each resized ×3 to the 1440 px network input, the logits
#: resized back to 480 px (bilinear, ``align_corners=False`` both ways)
LOWRES_SCALE, LOWRES_NET_INPUT = 3, 1440
LOWRES_WINDOW = LOWRES_NET_INPUT // LOWRES_SCALE
LOWRES_STRIDE = LOWRES_WINDOW // 2


def lowres_building_logits(net, image: np.ndarray):
    """(2, H', W') float32 torch tensor: the benchmark's HRNet logits on a (bands, H, W) image,
    averaged over its windows (``perception.py:seg_building_lowres``): the first three bands,
    zero-padded at the bottom/right to at least ``LOWRES_WINDOW`` px (H' = max(H, 480), W' the
    same), normalised as albumentations' ``Normalize(0.5, 0.5, max_pixel_value=255)``
    (``(v - 127.5) / 127.5`` in float32), windows :data:`LOWRES_WINDOW`/:data:`LOWRES_STRIDE`
    resized to :data:`LOWRES_NET_INPUT` px before the net and the raw logits back after it."""
    import torch.nn.functional as F

    x = np.moveaxis(_rgb(np.asarray(image)), 0, -1)
    h, w = x.shape[:2]
    ph, pw = max(LOWRES_WINDOW - h, 0), max(LOWRES_WINDOW - w, 0)
    if ph or pw:
        x = np.pad(x, ((0, ph), (0, pw), (0, 0)), mode="constant", constant_values=0)
    x = ((x.astype(np.float32) - np.float32(127.5)) * np.float32(1 / 127.5)).astype(np.float32)

    def forward(t):
        up = F.interpolate(t, size=(LOWRES_NET_INPUT, LOWRES_NET_INPUT), mode="bilinear",
                           align_corners=False)
        return F.interpolate(net(up), size=(LOWRES_WINDOW, LOWRES_WINDOW), mode="bilinear",
                             align_corners=False)

    return average_windows(net, x, LOWRES_WINDOW, LOWRES_STRIDE, forward=forward)


def lowres_building_labels(net, image: np.ndarray) -> np.ndarray:
    """(H, W) uint8, 1 = building, of the benchmark's HRNet on a (bands, H, W) image: the argmax
    of :func:`lowres_building_logits`, cropped back, then **inverted**: the benchmark's mask is
    ``(1 - argmax) * 255``, so the network's class 0 is the building."""
    h, w = np.asarray(image).shape[1:3]
    logits = lowres_building_logits(net, image)
    return (1 - logits.argmax(dim=0).numpy()).astype(np.uint8)[:h, :w]


#: the DPT models' window and stride (px; the benchmark's ``DPT_PATCH``)
DPT_WINDOW = 518


def dpt_padding(h: int, w: int) -> tuple[int, int]:
    """(rows, columns) the single-image DPT tools add at the bottom/right of an ``h`` × ``w`` image
    (``perception.py:single_temporal_model_sliding_infer``): ``max(0, 518 - n) + (518 - n % 518)
    % 518`` per axis (so an image smaller than a window is padded by twice its shortfall: 100 px
    become 936), then the shorter side padded further to make the result square."""
    k = DPT_WINDOW
    ph = max(0, k - h) + (k - h % k) % k
    pw = max(0, k - w) + (k - w % k) % k
    if h + ph != w + pw:
        side = max(h + ph, w + pw)
        ph, pw = side - h, side - w
    return ph, pw


def single_image_dpt_input(image: np.ndarray) -> np.ndarray:
    """(H', W', 3) float32 input of the single-image DPT models from a (bands, H, W) array: the
    first three bands (one band repeated), reflect-padded by :func:`dpt_padding` (numpy's
    ``reflect``, the edge pixel not repeated), ``(x - mean) * (1 / std)`` with the ImageNet
    statistics on the 0-255 scale (albumentations' ``Normalize(max_pixel_value=1)``)."""
    x = np.moveaxis(_rgb(np.asarray(image)), 0, -1)
    ph, pw = dpt_padding(*x.shape[:2])
    if ph or pw:
        x = np.pad(x, ((0, ph), (0, pw), (0, 0)), mode="reflect")
    x = x.astype(np.float32)
    return (x - np.asarray(IMAGENET_MEAN, np.float32)) * np.reciprocal(
        np.asarray(IMAGENET_STD, np.float32))


def _dpt_labels(net, x: np.ndarray, tool: str | None) -> np.ndarray:
    try:
        return window_labels(net, x, DPT_WINDOW, DPT_WINDOW)
    except ValueError as exc:
        if "square grid of tokens" not in str(exc):
            raise
        raise ToolInputError(f"{exc} (this image is {x.shape[0]} x {x.shape[1]} px)", tool=tool,
                             argument="pre_image_path",
                             expected="images at least 518 px on each side, or square") from None


def predict_labels(name: str, images: list[np.ndarray], checkpoint_dir: Path | None, *,
                   tool: str | None = None, device: str | None = None
                   ) -> tuple[np.ndarray, Path]:
    """(uint8 (H, W) class-index map, checkpoint path) of model ``name`` on ``images``
    ((bands, H, W) arrays: one image, or [pre, post] for the bi-temporal models).

    The benchmark's SegFormer (``landslide_ms``, ``reservoir``): :func:`ms14_input`, windows of
    512 px every 256 px, raw logits averaged (:func:`average_windows`), argmax. Its DPT models:
    bi-temporal ones on :func:`bitemporal_input` (no padding), single-image ones on
    :func:`single_image_dpt_input` (reflect-padded, the labels cropped back), windows of 518 px
    every 518 px, the networks' softmax probabilities averaged (:func:`window_labels`, out of core
    above 4000 × 4000 px); a window smaller than 518 px that is not square is a
    ``ToolInputError`` (the benchmark's decoder refuses it). The studio's
    reference net: strips of ``STRIP_ROWS`` rows with a ``HALO``-row margin, which equals the
    whole-image result because its receptive-field radius is ``RADIUS`` < ``HALO``.
    """
    import torch

    net, path = load_model(name, checkpoint_dir, tool=tool, device=device)
    if getattr(net, "studio_architecture", ARCHITECTURE) == "SegFormer mit_b0":
        x = prepare_input(name, images, tool=tool)  # the 14-band check
        logits = average_windows(net, ms14_input(x), MS14_WINDOW, MS14_STRIDE)
        return logits.argmax(dim=0).numpy().astype(np.uint8), path
    if getattr(net, "studio_architecture", ARCHITECTURE) == "Swin-UperNet":
        pre, post = images
        return window_labels(net, bitemporal_input(pre, post), BITEMPORAL_WINDOW,
                             BITEMPORAL_WINDOW), path
    if getattr(net, "studio_architecture", ARCHITECTURE) == "HRNet-W48":
        return lowres_building_labels(net, images[0]), path
    if getattr(net, "studio_architecture", ARCHITECTURE) == "BitemporalDPT":
        pre, post = images
        return _dpt_labels(net, bitemporal_input(pre, post), tool), path
    if getattr(net, "studio_architecture", ARCHITECTURE) == "DPT":
        h, w = np.asarray(images[0]).shape[1:3]
        return _dpt_labels(net, single_image_dpt_input(images[0]), tool)[:h, :w], path
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
