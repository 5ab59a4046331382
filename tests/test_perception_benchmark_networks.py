"""The benchmark's perception networks in the studio: strict loading of checkpoints in the
benchmark's format, and label parity with the benchmark's own code.

Expected labels come from the benchmark's code (Junjue-Wang/DORA at 7b96988:
``segmentation/segformer/`` ``WeTr(mit_b0, 14 bands)``, ``segmentation/inference.py:predict_probs``,
the preprocessing of ``perception.py:landslide4sense_sliding_infer``) run outside the repository
on CPU with torch 2.13.0 on the same seeded checkpoint (``write_benchmark_checkpoint``, seed 18,
loaded there with ``safetensors.torch.load_model(strict=True)``) and the seeded 14-band images of
:func:`image14`; only the resulting labels are kept here (``docs/perception.md`` says how to
rerun it). Near-ties: the largest logit difference between 1 and 2 torch threads there was
1.5e-6, so a pixel whose two logits are closer than ``NEAR_TIE`` = 1e-4 may flip.
"""
from __future__ import annotations

import base64
import hashlib
import zlib

import numpy as np
import pytest
from conftest import needs_shared

from kernel.tools import perception_models as pm
from kernel.tools.base import ModelUnavailableError

SEED = 18
NEAR_TIE = 1e-4
#: per image (rows, columns, image seed): sha256 of the benchmark's uint8 {0, 255} labels,
#: their landslide count, and the labels (np.packbits, zlib, base64) for the near-tie check
BENCHMARK = {
    (64, 64, 1): ("7cd8cb9d4560bd79e7f40ad6d044c63dfaad851a7518fcf8c7c717b3e0379bb8", 2317,
                  "eNqd0EsKwDAIBFDFhUuP4FE8Wi5eSGmZFDIghLp5G/8iNZ+QYxMG9OXlryJGemOQCQsOOHcVGvSfBkxY5IC4Tw9d+V990ZzO"
                  "aOS9jdRGa/609b8BaHgK6A=="),
    # two windows (rows 0-512 and 8-520): the overlap is averaged
    (520, 64, 1): ("3ba1d9beb92e0a34a74842c2f38d6b016e703da71aeca2bf833152679f2d5a92", 33139,
                   "eNrtzbERABAQAEGda00pXwIVECA0EjOS3eTCiz7FpWU3z6ZHPf3qausAAADAbwNlFCEn"),
}


def image14(h: int, w: int, seed: int) -> np.ndarray:
    """(h, w, 14) float64: the benchmark's band means times a smooth field per band (so the
    labels form regions) and 10 % log-normal noise; the parity run used the same function."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    phase = rng.uniform(0, 2 * np.pi, (2, 14))
    field = np.sin(yy[..., None] / 23.0 + phase[0]) * np.cos(xx[..., None] / 17.0 + phase[1])
    return np.asarray(pm.MS14_BAND_MEAN) * np.exp(0.8 * field) * rng.lognormal(0.0, 0.1, (h, w, 14))


@pytest.fixture(scope="module")
def segformer_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("bench_ckpt")
    pm.write_benchmark_checkpoint("landslide_ms", d / "seg_landslide_ms.safetensors", seed=SEED)
    return d


def test_window_grid_is_the_benchmarks():
    # the benchmark's sliding_window((600, 300), 512, 256): rows start at 0 and 88 (600 - 512),
    # the 300 px wide window is clipped to the image; (1030, 512): 0, 256, 512 and 768 moved back
    # to 518 (the border); values printed by the benchmark's function
    assert pm.window_boxes(600, 300, 512, 256) == [(0, 0, 300, 512), (0, 88, 300, 600)]
    assert [b[1] for b in pm.window_boxes(1030, 512, 512, 256)] == [0, 256, 512, 518]
    assert pm.window_boxes(40, 30, 512, 256) == [(0, 0, 30, 40)]


@pytest.mark.parametrize("shape", list(BENCHMARK))
def test_segformer_labels_equal_the_benchmarks(segformer_dir, shape):
    import torch

    h, w, seed = shape
    sha, n_pos, packed = BENCHMARK[shape]
    labels, _ = pm.predict_labels("landslide_ms", [np.moveaxis(image14(h, w, seed), -1, 0)],
                                  segformer_dir)
    assert labels.shape == (h, w) and labels.dtype == np.uint8
    if hashlib.sha256((labels * 255).tobytes()).hexdigest() == sha:
        assert int(labels.sum()) == n_pos
        return
    # a different label may only sit on a near-tie
    ref = np.unpackbits(np.frombuffer(zlib.decompress(base64.b64decode(packed)), np.uint8))[:h * w]
    net, _ = pm.load_model("landslide_ms", segformer_dir)
    logits = pm.average_windows(net, pm.ms14_input(np.moveaxis(image14(h, w, seed), -1, 0)),
                                512, 256)
    margin = (logits[1] - logits[0]).abs().numpy().reshape(-1)
    differ = ref != labels.reshape(-1)
    assert torch.is_tensor(logits) and differ.any()
    assert margin[differ].max() < NEAR_TIE, f"{int(differ.sum())} labels differ off near-ties"


def test_seg_landslide_ms_runs_the_benchmarks_segformer(segformer_dir, tmp_path):
    from kernel.tools.registry import call_tool
    from kernel.tools.testing import make_ctx, write_tif

    d = tmp_path / "data"
    d.mkdir(exist_ok=True)
    img = image14(64, 64, 1)
    write_tif(d / "s2.tif", np.moveaxis(img, -1, 0).astype(np.float32))
    ctx = make_ctx(tmp_path, perception_mode="model", checkpoint_dir=segformer_dir)
    obs = call_tool("seg.landslide_ms", {"post_image_path": "s2.tif"}, ctx)
    assert obs["_meta"]["architecture"] == "SegFormer mit_b0"
    assert obs["_meta"]["checkpoint"] == "seg_landslide_ms.safetensors"
    import rasterio

    with rasterio.open(ctx.work_dir / obs["mask_path"]) as src:
        mask = src.read(1)
    labels, _ = pm.predict_labels("landslide_ms", [np.moveaxis(img, -1, 0).astype(np.float32)],
                                  segformer_dir)
    assert set(np.unique(mask)) == {0, 255} and (mask == labels * 255).all()
    # the loaded model is kept between calls of one process
    assert pm.load_model("landslide_ms", segformer_dir)[0] is pm.load_model("landslide_ms", segformer_dir)[0]


def test_strict_load_names_the_missing_unexpected_and_misshaped_tensors(segformer_dir, tmp_path):
    tensors, _ = pm.read_safetensors(segformer_dir / "seg_landslide_ms.safetensors")
    assert len(tensors) == 193  # WeTr(mit_b0, 14 bands).state_dict() in the benchmark's code
    assert tensors["encoder.patch_embed1.proj.weight"].shape == (32, 14, 7, 7)
    assert tensors["decoder.linear_fuse.1.num_batches_tracked"].shape == ()
    bad = dict(tensors)
    del bad["encoder.block2.1.attn.kv.bias"]
    bad["decoder.extra.weight"] = np.zeros(3, np.float32)
    bad["decoder.linear_pred.weight"] = np.zeros((3, 256, 1, 1), np.float32)
    pm.write_safetensors(tmp_path / "seg_reservoir.safetensors", bad)
    with pytest.raises(ModelUnavailableError) as ei:
        pm.load_model("reservoir", tmp_path)
    text = str(ei.value)
    assert "missing: encoder.block2.1.attn.kv.bias" in text
    assert "unexpected: decoder.extra.weight" in text
    assert "mis-shaped: decoder.linear_pred.weight (3, 256, 1, 1) float32 (want (2, 256, 1, 1) float32)" in text
    # a float64 tensor is refused too (the benchmark's strict load copies into float32 params)
    bad = dict(tensors, **{"classifier.weight": tensors["classifier.weight"].astype(np.float64)})
    pm.write_safetensors(tmp_path / "seg_reservoir.safetensors", bad)
    with pytest.raises(ModelUnavailableError, match="classifier.weight .* float64"):
        pm.load_model("reservoir", tmp_path)


def test_every_model_of_the_zoo_has_the_benchmarks_network():
    # the benchmark's MODEL_ZOO (segmentation/__init__.py): 13 models, five architectures
    assert {m.benchmark_arch for m in pm.MODEL_ZOO.values()} == set(pm.BENCHMARK_NETWORKS) == {
        "SegFormer mit_b0", "HRNet-W48", "Swin-UperNet", "DPT", "BitemporalDPT"}


#: HRNet-W48 (``building_lowres``): the benchmark's ``HRNetSeg`` (timm 1.0.29 ``hrnet_w48``
#: modules) loaded the seed-0 checkpoint strictly and gave these logits (class 0, class 1) on the
#: 64 × 64 image of :func:`rgb64` at (row, column); over the whole image the studio's logits
#: equalled them exactly there, and 1 vs 2 threads differed by at most 1e-4
HRNET_LOGITS = {(0, 0): (-28.116416931152344, 8.435230255126953),
                (10, 50): (-39.737728118896484, 6.467960357666016),
                (31, 32): (-58.14833068847656, -5.44676399230957),
                (63, 63): (-116.90868377685547, -0.3048114776611328)}


def rgb64() -> np.ndarray:
    """(64, 64, 3) uint8 stripes, seeded; the parity run used the same function."""
    rng = np.random.default_rng(5)
    yy, xx = np.mgrid[0:64, 0:64]
    return (127.5 + 100 * np.sin(yy[..., None] / 7.0 + rng.uniform(0, 6, 3))
            * np.cos(xx[..., None] / 5.0)).clip(0, 255).astype(np.uint8)


def test_hrnet_w48_loads_the_benchmarks_format_and_gives_its_logits(tmp_path):
    import torch

    pm.write_benchmark_checkpoint("building_lowres", tmp_path / "seg_building_lowres.safetensors", seed=0)
    tensors, _ = pm.read_safetensors(tmp_path / "seg_building_lowres.safetensors")
    assert len(tensors) == 1837  # HRNetSeg(num_classes=2).state_dict() in the benchmark's code
    assert tensors["seg_head.3.weight"].shape == (2, 720, 1, 1)
    assert tensors["stage4.2.fuse_layers.3.0.2.0.weight"].shape == (384, 48, 3, 3)
    net, _ = pm.load_model("building_lowres", tmp_path)
    assert net.studio_architecture == "HRNet-W48"
    img = rgb64()
    assert img[0, 0].tolist() == [28, 28, 132]  # the same image as the parity run
    x = torch.from_numpy(((img.astype(np.float32) - 127.5) / 127.5).transpose(2, 0, 1)[None].copy())
    with torch.inference_mode():
        out = net(x)[0].numpy()
    for (r, c), want in HRNET_LOGITS.items():
        assert out[:, r, c] == pytest.approx(want, abs=1e-3)


#: ``seg.building_lowres`` on a real tile: the benchmark's whole pipeline
#: (``perception.py:seg_building_lowres`` with its ``HRNetSeg`` on timm 1.0.29's ``hrnet_w48``
#: code, ``inference.py:predict_probs``; albumentations' ``Normalize`` written out as
#: ``(v - 127.5) * (1 / 127.5)`` in float32), seed-1 checkpoint, on the 480 × 480 crop at row 192,
#: column 384 of the real xBD socal-fire_00000031 pre tile (one 480 px window, resized to 1,440 px
#: around the net, the logits back to 480 px; the mask inverted): sha256 of its {0, 255} mask,
#: the building count, the mask (np.packbits of ``mask == 255``, zlib, base64). The studio's
#: averaged logits equalled the benchmark's to the last bit (max difference 0.0); the
#: benchmark's own logits differed by at most 4.4e-4 between 1 and 2 torch threads (the smallest
#: logit margin on the crop was 1.2e-3), so a pixel may differ only where its two logits are
#: within ``HRNET_NEAR_TIE``. (Seed 1 was chosen for mixed labels: seed 0 and 3 give almost no
#: building, seed 2 all building.)
HRNET_NEAR_TIE = 5e-3
BUILDING_LOWRES = (
    "3e691850995e0da5cc8268489cebc4bb322554a18b08cae41012300ecd771228", 22047,
    "eNrt3U1Og0AUwPFHMbKTCxjnEC5trMdw2YOYQOJBPIrcwCNI4sKNMSxprDPSDjRt2ibtGw02/N+ikIHfzAAzw1cTnDu9eA6wNwE2"
    "6sleq+VHprel0e+ruTFaWk1Nqq6ymERtRyYOKFdtq+RVbevMqe2368dWtwH7+UptK0m1thIZBVh12ygPtu++NUw09s1bc3ydm/VW"
    "66e7y02Lzb78sla/rLPd0FhsWJsU7Xzt88gvsm0r0my0Nev20ec0aVdZTOtmobfSznkrSSmJlZWdy7lPl+WGSOysnzSL0rItbZn7"
    "eqSx25G6I+62kw62ss/memtFb+/V9ktZ7MLO5npb92XHAfYswMrp2WpINhmerbHYP7D0QcYNLP0Xi8VisVgsFovFYrFYLBaLxWKx"
    "2FXw/heLxWKxWCz21y3/hcDSF7BYLHY451+OERaLxWKxWCwWi8VisTxn4DkDFovFYrFYLBbLNT/3GlgsFovFcs3AuRuLxXKfgqU9"
    "Y7H/0MYDsxIwXg3RPgRYe3p2FlLupdZGAe05ctOA41v2YqNP0dtCTUchVvRWJBeC2NOglX0/GrffSzoqZsvfJ6ux3Uee5Ae9W2/5")


def test_seg_building_lowres_gives_the_benchmarks_mask_on_an_xbd_crop(tmp_path):
    import rasterio
    from conftest import REALDATA

    from kernel.tools.registry import call_tool
    from kernel.tools.testing import make_ctx, write_tif

    ckpt = tmp_path / "ckpt"
    pm.write_benchmark_checkpoint("building_lowres", ckpt / "seg_building_lowres.safetensors", seed=1)
    with rasterio.open(needs_shared(REALDATA / "xbd-socal-fire" / "socal-fire_00000031_pre_disaster.png")) as src:
        crop = src.read()[:3, 192:672, 384:864]
    ctx = make_ctx(tmp_path, perception_mode="model", checkpoint_dir=ckpt)  # inputs in tmp_path/data
    write_tif(tmp_path / "data" / "planet.tif", crop)
    obs = call_tool("seg.building_lowres", {"image_path": "planet.tif"}, ctx)
    assert obs["_meta"]["architecture"] == "HRNet-W48"
    assert obs["mask_path"].endswith(".png")  # always PNG, as the benchmark's tool
    with rasterio.open(ctx.work_dir / obs["mask_path"]) as src:
        mask = src.read(1)
    assert mask.shape == (480, 480) and set(np.unique(mask)) <= {0, 255}
    sha, n_building, packed = BUILDING_LOWRES
    if hashlib.sha256(mask.tobytes()).hexdigest() == sha:
        assert int((mask == 255).sum()) == n_building
        return
    ref = np.unpackbits(np.frombuffer(zlib.decompress(base64.b64decode(packed)), np.uint8))[:480 * 480]
    net, _ = pm.load_model("building_lowres", ckpt)
    logits = pm.lowres_building_logits(net, crop)
    margin = (logits[1] - logits[0]).abs().numpy().reshape(-1)
    differ = ref != (mask == 255).reshape(-1)
    assert differ.any() and margin[differ].max() < HRNET_NEAR_TIE, f"{int(differ.sum())} labels differ off near-ties"


#: Swin-UperNet (``landslide_bitemporal``): the benchmark's ``SwinUperNet`` (on torchvision's
#: ``swin_t`` code), rebuilt per call as the benchmark does, seed-6 checkpoint, its bi-temporal
#: pipeline (ImageNet normalisation, 518 px windows) on crops (row, column, rows, columns) of the
#: real xBD Guatemala volcano pre/post tiles: sha256 of the {0, 255} labels, landslide count,
#: packed labels. The studio's logits equalled the benchmark's exactly (max difference 0.0;
#: 1 vs 2 threads: 6e-7); the 96 × 80 crop turns stage 3's shift off (its map is 6 × 5), the
#: 530 × 40 one averages two windows (rows 0 and 12)
SWIN = {
    (100, 200, 96, 80): ("de7254cfb8d2c088a9f03fc04d11f6c8548fa0b3eee9bee255f97f9e80478d31", 2959,
                         "eNq10s0NwyAMBWBHPeTICBklHaWblNEYhWxAb0Qg3JDglz+aqody+gT4WVgQM0eaF9RMYmdFzFaJmA3kIL9qgF6ieFKABtzTi"
                         "3zH+rlIMRW1WWNu3ibRLVFfFKl3ou4gajyprPlpyk7ykIMsZLLaLL3XbaNQ1EC0lznoHkqPgwxGryE6K1X2NhVriq2onIaKvtY6"
                         "yB8+ySf5Su11Xi05/ZxszhOKkL+Uq8hCuqICGhMkceQkhOxDZOhf6w0EZ5rh"),
    (0, 0, 530, 40): ("7d80a8d55615e511dc3eb456386171ffbdb478c0df398153c09e428e34b70ad3", 10561,
                      "eNrt1lFuhCAQBuBxfdi39gg9ilfpQZouR/Mo7g3wbYjUKb9dSXABIe4+bFITvwcdGCTjhNMbEZ3AWRQQoXdHD4YPBy+4W+wGhOgF"
                      "hGhZ4TyTx+wwgavwKD1QHWtRZ9CuUJLmn5C5Jq6K2kntPpFEVIUOaGKkv4hDTBVyEE4SWRAXYp5GQY7SRZYWXG4WKs62Jbv3saK"
                      "uH/Gy8KE4hRcK5f1k1l/oSIdLF4itRRcRdK5vz5fH7jMfQNAi70ntH0WL/0EdLhucmTRWDP2GdmUI0Qudgy8Ahw7zh8VBJMCETJ"
                      "GQPJMfO4JryCD2B8iNC+gcfetpFjgH6RsKEH3KnMXVEAl7tGf2WE/4bETcQPfXL/kXeM4="),
}


@pytest.fixture(scope="module")
def volcano():
    import rasterio
    from conftest import REALDATA

    base = needs_shared(REALDATA / "xbd-guatemala-volcano") / "guatemala-volcano_00000000_"
    with rasterio.open(f"{base}pre_original.png") as pre, rasterio.open(f"{base}post_original.png") as post:
        return pre.read(), post.read()


@pytest.mark.parametrize("crop", list(SWIN))
def test_swin_upernet_labels_equal_the_benchmarks_on_xbd_crops(tmp_path_factory, volcano, crop):
    d = tmp_path_factory.getbasetemp() / "swin_ckpt"
    if not (d / "seg_landslide_bitemporal.safetensors").is_file():
        pm.write_benchmark_checkpoint("landslide_bitemporal", d / "seg_landslide_bitemporal.safetensors", seed=6)
    r, c, h, w = crop
    pre, post = (a[:3, r:r + h, c:c + w] for a in volcano)
    labels, _ = pm.predict_labels("landslide_bitemporal", [pre, post], d)
    sha, n_pos, packed = SWIN[crop]
    if hashlib.sha256((labels * 255).tobytes()).hexdigest() == sha:
        assert int(labels.sum()) == n_pos
        return
    ref = np.unpackbits(np.frombuffer(zlib.decompress(base64.b64decode(packed)), np.uint8))[:h * w]
    net, _ = pm.load_model("landslide_bitemporal", d)
    logits = pm.average_windows(net, pm.bitemporal_input(pre, post), 518, 518)
    margin = (logits[1] - logits[0]).abs().numpy().reshape(-1)
    differ = ref != labels.reshape(-1)
    assert margin[differ].max() < NEAR_TIE, f"{int(differ.sum())} labels differ off near-ties"


def test_swin_checkpoint_names_the_backbone_once_and_accepts_its_twin(tmp_path):
    pm.write_benchmark_checkpoint("landslide_bitemporal", tmp_path / "a" / "seg_landslide_bitemporal.safetensors", seed=6)
    tensors, _ = pm.read_safetensors(tmp_path / "a" / "seg_landslide_bitemporal.safetensors")
    # SwinUperNet.state_dict() has 450 names, the backbone twice; safetensors' save_model keeps 265
    assert len(tensors) == 265 and tensors["backbone_model.features.0.0.weight"].shape == (96, 6, 4, 4)
    assert tensors["backbone_model.features.1.0.attn.relative_position_index"].dtype == np.int64
    twin = {k.replace("backbone_model.", "feature_extractor.swin_model.", 1): v for k, v in tensors.items()}
    (tmp_path / "b").mkdir()
    pm.write_safetensors(tmp_path / "b" / "seg_landslide_bitemporal.safetensors", twin)
    net, _ = pm.load_model("landslide_bitemporal", tmp_path / "b")
    assert net.studio_architecture == "Swin-UperNet"


def test_out_of_core_merge_gives_the_in_memory_labels(tmp_path_factory, volcano):
    d = tmp_path_factory.getbasetemp() / "swin_ckpt"
    if not (d / "seg_landslide_bitemporal.safetensors").is_file():
        pm.write_benchmark_checkpoint("landslide_bitemporal", d / "seg_landslide_bitemporal.safetensors", seed=6)
    net, _ = pm.load_model("landslide_bitemporal", d)
    pre, post = (a[:3, :530, :40] for a in volcano)
    x = pm.bitemporal_input(pre, post)
    on_disk = pm.window_labels(net, x, 518, 518, out_of_core_above=0)
    assert hashlib.sha256((on_disk * 255).tobytes()).hexdigest() == SWIN[(0, 0, 530, 40)][0]


def _cuda_visible() -> bool:
    import torch

    return torch.cuda.is_available()


@pytest.mark.skipif(_cuda_visible(), reason="a GPU is visible: STUDIO_PERCEPTION_DEVICE=cuda works there")
def test_an_absent_torch_device_is_a_clear_error(tmp_path, monkeypatch):
    pm.write_benchmark_checkpoint("reservoir", tmp_path / "seg_reservoir.safetensors", seed=1)
    monkeypatch.setenv("STUDIO_PERCEPTION_DEVICE", "cuda")
    with pytest.raises(ModelUnavailableError, match="torch device 'cuda' is not available"):
        pm.load_model("reservoir", tmp_path)


# ============================================================================================
# DINOv3 ViT-L/16 DPT models
# ============================================================================================
#: the largest difference of the benchmark's window-averaged softmax probabilities between 1 and
#: 2 torch threads in the parity runs was 2.7e-7 (building damage) and 4.8e-7 (water); a pixel
#: whose two largest probabilities are closer than this tolerance may flip
DPT_NEAR_TIE = 1e-5


def test_dpt_strict_load_names_the_missing_unexpected_and_misshaped_tensors(tmp_path):
    # the benchmark's DPT(num_classes=2).state_dict() has 457 tensors: the file below holds three
    # of them (two wrong) and one the network lacks, so 454 are missing
    pm.write_safetensors(tmp_path / "seg_water.safetensors", {
        "encoder.cls_token": np.zeros((1, 1, 1024), np.float32),
        "encoder.rope_embed.periods": np.ones(16, np.float32),  # bfloat16 in the benchmark's file
        "decoder.dpt.output_conv.4.weight": np.zeros((3, 256, 1, 1), np.float32),
        "encoder.storage_tokens": np.zeros((1, 4, 1024), np.float32),  # a DINOv3 with registers
    })
    with pytest.raises(ModelUnavailableError) as ei:
        pm.load_model("water", tmp_path)
    text = str(ei.value)
    assert "benchmark's DPT for 'water'" in text
    assert "missing: decoder.dpt.output_conv.0.weight, " in text and "and 449 more" in text
    assert "unexpected: encoder.storage_tokens" in text
    assert ("mis-shaped: decoder.dpt.output_conv.4.weight (3, 256, 1, 1) float32 (want (2, 256, 1, 1) "
            "float32), encoder.rope_embed.periods (16,) float32 (want (16,) bfloat16)") in text


def test_single_image_dpt_padding_is_the_benchmarks():
    # perception.py:single_temporal_model_sliding_infer, worked by hand: per axis
    # max(0, 518 - n) + (518 - n % 518) % 518, then the shorter side padded to a square
    assert pm.dpt_padding(518, 518) == (0, 0)
    assert pm.dpt_padding(100, 100) == (836, 836)  # 418 + 418: twice the shortfall, 936 px
    assert pm.dpt_padding(1024, 600) == (12, 436)  # 1036 x 1036
    assert pm.dpt_padding(300, 1036) == (736, 0)  # 736 x 1036 -> 1036 x 1036
    img = np.arange(3 * 5 * 4, dtype=np.uint8).reshape(3, 5, 4)
    x = pm.single_image_dpt_input(img)
    assert x.shape == (1032, 1032, 3)  # rows 5 + 2 * 513 = 1031, columns 4 + 2 * 514 = 1032
    # reflect without repeating the edge: row 5 is row 3, column 4 is column 2
    assert (x[5, :4] == x[3, :4]).all() and (x[:5, 4] == x[:5, 2]).all()
    # ImageNet normalisation on the 0-255 scale: (0 - 123.675) / 58.395, (20 - 116.28) / 57.12
    assert x[0, 0].tolist()[:2] == pytest.approx([-2.117904, -1.685574], abs=1e-6)


@pytest.fixture(scope="session")
def dpt_checkpoints(tmp_path_factory):
    """A directory for the seeded DINOv3 DPT checkpoints (about 1.4 GB each), written once per
    session by the tests that need them and removed at its end, with the models they loaded."""
    d = tmp_path_factory.mktemp("dpt_ckpt")
    yield d
    pm._CACHE.clear()
    for path in d.glob("*.safetensors"):
        path.unlink()


def _dpt_checkpoint(d, model: str, seed: int):
    path = d / pm.MODEL_ZOO[model].file
    if not path.is_file():
        pm.write_benchmark_checkpoint(model, path, seed=seed)
    return d


#: BitemporalDPT (``building_damage``, 4 classes): the benchmark's ``BitemporalDPT`` on its vendored
#: DINOv3 code, seed-7 checkpoint, its bi-temporal pipeline (``model_sliding_infer``: ImageNet
#: normalisation, 518 px windows, softmax probabilities averaged, no padding) on the 112 x 112 crop
#: at row 100, column 200 of the real xBD Guatemala volcano pre/post tiles (one window, 7 x 7
#: tokens, so the DPT head resizes 8 x 8 to 7 x 7): sha256 of the uint8 class labels, the count of
#: each class, the labels (zlib, base64). The studio's probabilities equalled the benchmark's to
#: the last bit (max difference 0.0)
BUILDING_DAMAGE = (
    "1ea952b69ede9db63b5ff3b4e248f382b2af54e321731d78921fd52972b81ae6", [9434, 2233, 505, 372],
    "eNrtmo2ynCAMhTnw/u/cvatifgkgMm3nOtNppZpPMOQkcVPaeQCbcb+8f5n39Ze8Ffjh5d28z1HKbl75X3lpIw8n7x0c5H6r"
    "52twcjdDALF4v+vZfAEXBnt4YH+/wiPzqTys5wmw5L0Zr+l8yMze1QfGu/f7Ft4meT2B2+R8ewJhj2/V+EMhNuPKz7EQKyxR"
    "y/kNnp6Snl5pvsdhzbLcEwfwxDWPEjqfo0ealzpwOtga6o0u3mQyvp/XuZ5kHM9jRewvU7w5HKZVaDzyPgzXu4GbeRP3PsrI"
    "MDk/bJteYz1jYfjcOVPUwNO/LCJo4SG8iPNx77H1z+GVIoED65td/bsHq/0seOQJgnB9usuVqzCeXK0kzNs4Xd1Bp/Q8N4L1"
    "svT7+v6bGrxO4Xs/bqDyHy23/AGKtH+dTvLC/EHa1/WcwxcNJYzFipDn3jDIC3Geu6RHvNbDd/HSX8pLkXe8zDPM4YUF3cxL"
    "i3hx/Tc+vQbvK0jZKIgKv1nIUXP70fhi4rKlf+dzfP7zwNVLwuhJwyeZDyrvti54menRMUDCqXyAzAc8XuE8bj4xXCZyVOWt"
    "RoAsgIqX7/RF6zvjfZb05hUhp4A9wJyjLojUP4679Zbwhbw1eUnyUtM7yQJePNz2uWJU6x5vJsDoBiqU+6sXuoTnCgbM/Ye5"
    "gKb0Fogj0EQ+EfHCYgVz8fp9Xmq7Sy/w6Xo2gK/kZ6MO8zA/m+SFeutZj9Prfr1t5QZj6by0X8/pKEALbSFvaj0zuCDmrPQv"
    "k/7ncSpCK5ISsyrAgKN/xwU/f3xesudHY62Uu9Lmaf27rvK/CzAxI3rE6zO48gOjwG3pA3v7spx1eVjDS7J8Ll58kXpL39JA"
    "uh1ur77tPqkPs+n8GG+ifEhLeUMXTOhfGq43F+m7FY3N+miWFwfstFTfY0FyCsBeXlA82usZt3fRuLbl/h04YSOHvA7B7eZx"
    "PXJ6pQvWMx36WwUQ3ovsC5c9/nK2d9n8dAEYAFX/s/ZjmRqQ+ozrbSnteKLarXyA9H8FT7Q/YfRWb4HT/V1pHrT4Zmp339BZ"
    "j8Ho7yanfX3i4k8y6FXdqN2y/tMQHn9PenLr09bmloec5T37cVfnvZ3FzzJgpLf9yVAXL67uMAZsZ24YzZdGeVP96waDf7Z6"
    "xPuKGyx5tVrk+teLcoT/whFZnOac5bnRMLmeCHuPP8d3EQg=")


def _near_ties_only(net, x, labels, ref, window=518):
    """Assert that ``labels`` differ from ``ref`` only where the two largest window-averaged
    probabilities are closer than :data:`DPT_NEAR_TIE`."""
    probs = pm.average_windows(net, x, window, window).numpy()[:, :labels.shape[0], :labels.shape[1]]
    top2 = np.sort(probs, axis=0)[-2:]
    margin = (top2[1] - top2[0]).reshape(-1)
    differ = ref.reshape(-1) != labels.reshape(-1)
    assert differ.any() and margin[differ].max() < DPT_NEAR_TIE, \
        f"{int(differ.sum())} labels differ off near-ties"


def test_seg_building_damage_runs_the_benchmarks_bitemporal_dpt(dpt_checkpoints, volcano, tmp_path):
    import rasterio

    from kernel.tools.registry import call_tool
    from kernel.tools.testing import make_ctx, write_tif

    d = _dpt_checkpoint(dpt_checkpoints, "building_damage", seed=7)
    pre, post = (a[:3, 100:212, 200:312] for a in volcano)
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    write_tif(data / "pre.tif", pre)
    write_tif(data / "post.tif", post)
    ctx = make_ctx(tmp_path, perception_mode="model", checkpoint_dir=d)
    obs = call_tool("seg.building_damage", {"pre_image_path": "pre.tif", "post_image_path": "post.tif"}, ctx)
    assert obs["_meta"]["architecture"] == "BitemporalDPT"
    assert obs["mask_path"].endswith(".tif")  # the pre image is georeferenced
    with rasterio.open(ctx.work_dir / obs["mask_path"]) as src:
        labels = src.read(1)
    sha, counts, packed = BUILDING_DAMAGE
    if hashlib.sha256(labels.tobytes()).hexdigest() == sha:
        assert np.bincount(labels.ravel(), minlength=4).tolist() == counts
    else:
        ref = np.frombuffer(zlib.decompress(base64.b64decode(packed)), np.uint8).reshape(112, 112)
        net, _ = pm.load_model("building_damage", d)
        _near_ties_only(net, pm.bitemporal_input(pre, post), labels, ref)
    # a window under 518 px that is not square has no square token grid: the benchmark's
    # decoder asserts, the studio says why
    from kernel.tools.base import ToolInputError

    with pytest.raises(ToolInputError, match="square grid of tokens, got 2"):
        pm.predict_labels("building_damage", [pre[:, :32, :16], post[:, :32, :16]], d)


#: DPT (``water``, 2 classes): the benchmark's ``DPT`` on its vendored DINOv3 code, seed-3
#: checkpoint, its single-image pipeline (``single_temporal_model_sliding_infer``: reflect padding,
#: ImageNet normalisation, 518 px windows, softmax probabilities averaged, cropped back) on the
#: 518 x 518 crop at the origin of the real xBD Guatemala volcano post tile (one window, no
#: padding): sha256 of the uint8 {0, 1} labels, the water count, the labels (np.packbits, zlib,
#: base64). The studio's probabilities equalled the benchmark's to the last bit (max difference 0.0)
WATER = ("d8532f2140bcb076ca4a15d49bed6240926c3808925a6b1795ec0e15969521e6", 267497,
         "eNrt2TFqAkEYBeALJKdJYenRLKxzBg9hYRuwFo9gwFZhwcKAGzeQzlLewK4/33QWM8jHvMfM7Hx4cqwef56GcFzTBQ7pAvNw"
         "fp/+gUu6wB5BTLAI5/++fhAQCAKCEgS6QBcIAgJdoAsEoQyBOwICQUAgCAgaEegCBIKAQBCcCwQBQTMCXaALBAHBJAhevwvs"
         "AgQInAu8FwgCAgQIECBwRyh2NBIEBLpAF0yCQBAQCAICQfgfm3D+PSW4pQS7lGAtCKN3wS0lOI29CwoEYRbO/0kJtinBexqk"
         "lKCLCdIgvKUEH+EC32kXLEOCPiXoUoKvdBcc0yB8jt0F/eh1eEYQE/iy7I6AAEETAtckn1IEYfB8qgt0gS5AUOaOoAsEAYEu"
         "qHE0sgsQINAFdgGCMgTeC3SBICBwLihSh4KAwLlAFwgCAkFA4JpUqAsEAQECBAgQIECAAAECdwQEbQl0gfcCQUDQhEAX6ALD"
         "mMTo/gDDIRcU")


def test_dpt_water_labels_equal_the_benchmarks_on_an_xbd_crop(dpt_checkpoints, volcano):
    d = _dpt_checkpoint(dpt_checkpoints, "water", seed=3)
    post = volcano[1][:3, :518, :518]
    labels, _ = pm.predict_labels("water", [post], d)
    assert labels.shape == (518, 518) and labels.dtype == np.uint8
    net, _ = pm.load_model("water", d)
    assert net.studio_architecture == "DPT"
    sha, n_water, packed = WATER
    if hashlib.sha256(labels.tobytes()).hexdigest() == sha:
        assert int(labels.sum()) == n_water
        return
    ref = np.unpackbits(np.frombuffer(zlib.decompress(base64.b64decode(packed)), np.uint8))[:518 * 518]
    _near_ties_only(net, pm.single_image_dpt_input(post), labels, ref.reshape(518, 518))
