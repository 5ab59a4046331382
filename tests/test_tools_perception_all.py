"""All 31 seg.* tools: GT remapping by label, model mode with test-made checkpoints, classical
baselines (NDWI, SAR/Otsu, NDVI) on hand-worked rasters, and the error cases."""
import json
from pathlib import Path

import numpy as np
import pytest
import rasterio
from conftest import SHARED, requires_shared

from kernel.tools import (
    GTMask,
    GTMissingError,
    ModelUnavailableError,
    ToolError,
    ToolInputError,
    all_tools,
    call_tool,
    classical,
)
from kernel.tools._io import read_mask_tags
from kernel.tools.perception import TOOLS, GTLabelError
from kernel.tools.testing import XBD_CLASSES, make_ctx, write_png, write_tif

# the tiny test rasters are PNGs / GeoTIFFs without a transform on purpose
pytestmark = [pytest.mark.filterwarnings("ignore::rasterio.errors.NotGeoreferencedWarning"),
              pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")]

CATALOGUE = SHARED / "spec" / "dora-tools.json"
RESCUENET = {0: "background", 1: "building_no_damage", 2: "building_damage",
             3: "building_total_damage", 4: "pool", 5: "road_no_damage", 6: "road_sand_covered",
             7: "tree_fallen", 8: "tree_not_fallen", 9: "vehicle_not_trapped",
             10: "vehicle_trapped", 11: "water", 255: "ignore"}


def _read(path):
    with rasterio.open(path) as src:
        return src.read(1), src.crs


def _args(tool, pre="pre.png", post="post.png"):
    t = TOOLS[tool]
    if t.inputs == "bitemporal":
        return {"pre_image_path": pre, "post_image_path": post}
    if t.inputs == "post":
        return {"post_image_path": post}
    return {"image_path": post}


def _images(tmp_path, shape=(2, 3), bands=3, georef=False):
    d = tmp_path / "data"
    d.mkdir(parents=True, exist_ok=True)
    if georef or bands not in (1, 3):
        for n in ("pre", "post"):
            write_tif(d / f"{n}.tif", np.zeros((bands, *shape), np.uint16),
                      crs="EPSG:32615" if georef else None)
        return "pre.tif", "post.tif"
    for n in ("pre", "post"):
        write_png(d / f"{n}.png", np.zeros((*shape, 3), np.uint8))
    return "pre.png", "post.png"


def _gt_ctx(tmp_path, gt_arr, class_map, *, key="post", bands=3, georef=False, **kw):
    pre, post = _images(tmp_path, gt_arr.shape, bands=bands, georef=georef)
    write_png(tmp_path / "data" / "gt.png", gt_arr.astype(np.uint8))
    gt = {(post if key == "post" else pre): GTMask(tmp_path / "data" / "gt.png", class_map, 0.5)}
    return make_ctx(tmp_path, gt=gt, **kw), pre, post


# --------------------------------------------------------------------------------------------
# every tool in GT mode: its own label names → its own classes
# --------------------------------------------------------------------------------------------
OWN_LABEL = {"seg.building_damage": ("destroyed", 3), "seg.building_damage_opt_sar": ("destroyed", 3),
             "seg.road_damage": ("flooded", 2)}


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_gt_mode_every_tool(tmp_path, tool):
    t = TOOLS[tool]
    label, value = OWN_LABEL.get(tool, (next(k for k, v in t.scheme.table.items() if v), 255))
    gt = np.array([[0, 1, 1], [0, 0, 1]], np.uint8)
    ctx, pre, post = _gt_ctx(tmp_path, gt, {0: "background", 1: label}, bands=t.bands or 3)
    obs = call_tool(tool.replace(".", "_"), _args(tool, pre, post), ctx)
    assert list(obs) == t.result_keys
    assert set(obs) <= set(all_tools()[tool].result_keys)
    assert obs["_meta"]["mode"] == "gt" and obs["_meta"]["gt_mask"] == "gt.png"
    assert obs["_meta"]["class_remap"] == {"0": 0, "1": value}
    arr, _ = _read(ctx.work_dir / obs["mask_path"])
    assert arr.tolist() == (gt * value).tolist()
    cmap, px = read_mask_tags(ctx.work_dir / obs["mask_path"])
    assert cmap == t.file_classes and px == 0.5
    if t.mask_value:
        assert obs["mask_value"] == 255


@requires_shared(CATALOGUE)
def test_all_31_seg_tools_match_catalogue():
    cat = {e["name"]: e for e in json.loads(CATALOGUE.read_text()) if e["name"].startswith("seg.")}
    assert set(cat) == set(TOOLS) and len(TOOLS) == 31
    for name, entry in cat.items():
        keys = [r.split(":")[0] for r in entry["returns"]]
        assert TOOLS[name].result_keys == keys, name  # same keys, catalogue order


# --------------------------------------------------------------------------------------------
# hand-worked label remaps
# --------------------------------------------------------------------------------------------
def test_combined_building_and_road_mask(tmp_path):
    # dataset convention: roads at 10/11/12 with bare condition words
    cmap = {0: "background", 1: "no-damage", 4: "destroyed", 10: "intact", 11: "flooded",
            12: "blocked"}
    gt = np.array([[0, 1, 4], [10, 11, 12]], np.uint8)
    ctx, pre, post = _gt_ctx(tmp_path, gt, cmap)
    road = call_tool("seg.road_damage", _args("seg.road_damage", pre, post), ctx)
    assert _read(ctx.work_dir / road["mask_path"])[0].tolist() == [[0, 0, 0], [1, 2, 3]]
    assert road["classes"] == {"1": "intact", "2": "flooded", "3": "debris blocked"}
    dmg = call_tool("seg.building_damage", _args("seg.building_damage", pre, post), ctx)
    # the road "intact" at 10 is not a building: 0, not 1
    assert _read(ctx.work_dir / dmg["mask_path"])[0].tolist() == [[0, 1, 3], [0, 0, 0]]


@pytest.mark.parametrize("tool,expected", [
    ("seg.water_aerial", [[0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 255], [0, 0, 0, 0]]),
    ("seg.swimming_pool", [[0, 0, 0, 0], [255, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]]),
    ("seg.vehicle", [[0, 0, 0, 0], [0, 0, 0, 0], [0, 255, 255, 0], [0, 0, 0, 0]]),
    ("seg.road_debris_aerial", [[0, 0, 0, 0], [0, 0, 255, 0], [0, 0, 0, 0], [0, 0, 0, 0]]),
    ("seg.building_damage", [[0, 1, 2, 3], [0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]]),
    ("seg.building_lowres", [[0, 255, 255, 255], [0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]]),
    ("seg.vegetation", [[0, 0, 0, 0], [0, 0, 0, 255], [255, 0, 0, 0], [0, 0, 0, 0]]),
])
def test_rescuenet_mask_serves_tools_by_label(tmp_path, tool, expected):
    gt = np.array([[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [255, 0, 0, 0]], np.uint8)
    ctx, pre, post = _gt_ctx(tmp_path, gt, RESCUENET)
    obs = call_tool(tool, _args(tool, pre, post), ctx)
    assert _read(ctx.work_dir / obs["mask_path"])[0].tolist() == expected


def test_isaid_and_landcover_merges(tmp_path):
    isaid = {0: "background", 1: "ship", 2: "roundabout", 3: "baseball_diamond",
             4: "tennis_court", 5: "basketball_court", 6: "ground_track_field", 7: "bridge",
             13: "soccer_ball_field", 15: "harbor"}
    gt = np.array([[0, 1, 2, 3, 4], [5, 6, 7, 13, 15]], np.uint8)
    ctx, pre, post = _gt_ctx(tmp_path, gt, isaid)
    obs = call_tool("seg.playground", {"post_image_path": post}, ctx)
    assert _read(ctx.work_dir / obs["mask_path"])[0].tolist() == [[0, 0, 0, 255, 255],
                                                                   [255, 255, 0, 255, 0]]
    assert obs["note"] and obs["mask_value"] == 255 and "classes" not in obs
    obs = call_tool("seg.harbor", {"post_image_path": post}, ctx)
    assert _read(ctx.work_dir / obs["mask_path"])[0].tolist() == [[0] * 5, [0, 0, 0, 0, 255]]
    # LoveDA-style land cover: forest and agriculture are vegetation
    loveda = {0: "no-data", 1: "background", 2: "building", 3: "road", 4: "water", 5: "barren",
              6: "forest", 7: "agriculture"}
    gt2 = np.array([[0, 1, 2, 3], [4, 5, 6, 7]], np.uint8)
    ctx2, _, post2 = _gt_ctx(tmp_path / "lc", gt2, loveda)
    obs = call_tool("seg.vegetation", {"image_path": post2}, ctx2)
    assert _read(ctx2.work_dir / obs["mask_path"])[0].tolist() == [[0, 0, 0, 0], [0, 0, 255, 255]]
    assert obs["classes"] == {"5": "forest", "6": "agriculture"}


def test_xbd_mask_is_building_footprint_for_lowres(tmp_path):
    gt = np.array([[0, 1, 2], [3, 4, 5]], np.uint8)
    ctx, pre, post = _gt_ctx(tmp_path, gt, XBD_CLASSES)
    obs = call_tool("seg.building_lowres", {"image_path": post}, ctx)
    assert _read(ctx.work_dir / obs["mask_path"])[0].tolist() == [[0, 255, 255], [255, 255, 255]]


def test_flood_gt_from_flood_mask_and_from_water_masks(tmp_path):
    gt = np.array([[0, 1, 2]], np.uint8)
    ctx, pre, post = _gt_ctx(tmp_path, gt, {0: "background", 1: "flooded", 2: "permanent water"})
    obs = call_tool("seg.flood", _args("seg.flood", pre, post), ctx)
    assert _read(ctx.work_dir / obs["mask_path"])[0].tolist() == [[0, 255, 0]]
    assert obs["mask_value"] == 255 and "classes" not in obs
    # water masks on both dates: flood = water after and not before
    d = tmp_path / "w" / "data"
    pre, post = _images(tmp_path / "w", (1, 4))
    write_png(d / "pre_w.png", np.array([[1, 1, 0, 0]], np.uint8))
    write_png(d / "post_w.png", np.array([[1, 0, 1, 0]], np.uint8))
    wmap = {0: "land", 1: "water"}
    ctx = make_ctx(tmp_path / "w", gt={post: GTMask(d / "post_w.png", wmap),
                                       pre: GTMask(d / "pre_w.png", wmap)})
    obs = call_tool("seg.flood", _args("seg.flood", pre, post), ctx)
    assert _read(ctx.work_dir / obs["mask_path"])[0].tolist() == [[0, 0, 255, 0]]
    assert obs["_meta"]["gt_mask_pre"] == "pre_w.png"
    ctx = make_ctx(tmp_path / "w", work="w2", gt={post: GTMask(d / "post_w.png", wmap)})
    with pytest.raises(GTMissingError) as ei:
        call_tool("seg.flood", _args("seg.flood", pre, post), ctx)
    assert "pre.png" in str(ei.value) and ei.value.argument == "pre_image_path"


def test_georeferenced_inputs(tmp_path):
    gt = np.array([[0, 1], [1, 0]], np.uint8)
    ctx, pre, post = _gt_ctx(tmp_path, gt, {0: "background", 1: "lava"}, georef=True)
    obs = call_tool("seg.lava", _args("seg.lava", pre, post), ctx)
    arr, crs = _read(ctx.work_dir / obs["mask_path"])
    assert obs["mask_path"].endswith(".tif") and crs.to_epsg() == 32615
    ctx, pre, post = _gt_ctx(tmp_path / "v", gt, {0: "background", 1: "ship"}, georef=True)
    assert call_tool("seg.ship", {"post_image_path": post}, ctx)["mask_path"].endswith(".png")


# --------------------------------------------------------------------------------------------
# GT errors
# --------------------------------------------------------------------------------------------
def test_gt_errors(tmp_path):
    gt = np.array([[0, 1], [2, 0]], np.uint8)
    # no GT linked to the post image (only to the pre image) → names the image
    ctx, pre, post = _gt_ctx(tmp_path, gt, {0: "background", 1: "ship", 2: "plane"}, key="pre")
    with pytest.raises(GTMissingError) as ei:
        call_tool("seg.ship", {"post_image_path": post}, ctx)
    assert "post.png" in str(ei.value)
    # unknown label
    ctx, pre, post = _gt_ctx(tmp_path / "a", gt, {0: "background", 1: "ship", 2: "cloud"})
    with pytest.raises(GTLabelError) as ei:
        call_tool("seg.ship", {"post_image_path": post}, ctx)
    assert ei.value.labels == ["cloud"] and "'cloud'" in str(ei.value)
    assert isinstance(ei.value, ToolError) and ei.value.tool == "seg.ship"
    # a xBD damage mask is not a flood GT: none of the tool's classes, labels listed
    ctx, pre, post = _gt_ctx(tmp_path / "b", gt, XBD_CLASSES)
    with pytest.raises(GTLabelError) as ei:
        call_tool("seg.flood", _args("seg.flood", pre, post), ctx)
    assert "none of the tool's classes" in str(ei.value) and "destroyed" in ei.value.labels
    # ambiguous: 'building' says nothing about damage; 'vehicle' nothing about being trapped
    ctx, pre, post = _gt_ctx(tmp_path / "c", gt, {0: "background", 1: "no-damage", 2: "building"})
    with pytest.raises(GTLabelError) as ei:
        call_tool("seg.building_damage", _args("seg.building_damage", pre, post), ctx)
    assert ei.value.labels == ["building"] and "ambiguous" in str(ei.value)
    ctx, pre, post = _gt_ctx(tmp_path / "d", gt, {0: "background", 1: "vehicle_trapped",
                                                   2: "vehicle"})
    with pytest.raises(GTLabelError):
        call_tool("seg.vehicle_trapped_aerial", {"post_image_path": post}, ctx)
    # values without a label
    ctx, pre, post = _gt_ctx(tmp_path / "e", gt, {0: "background", 1: "ship"})
    with pytest.raises(GTLabelError) as ei:
        call_tool("seg.ship", {"post_image_path": post}, ctx)
    assert "does not name" in str(ei.value)
    # GT on another grid
    ctx, pre, post = _gt_ctx(tmp_path / "f", gt, {0: "background", 1: "ship", 2: "plane"})
    write_png(tmp_path / "f" / "data" / "post.png", np.zeros((3, 3, 3), np.uint8))
    with pytest.raises(ToolError) as ei:
        call_tool("seg.ship", {"post_image_path": post}, ctx)
    assert "grid" in str(ei.value)


def test_fourteen_band_tools_need_14_bands(tmp_path):
    ctx, pre, post = _gt_ctx(tmp_path, np.zeros((2, 2), np.uint8), {0: "background"})
    for tool in ("seg.landslide_ms", "seg.reservoir"):
        with pytest.raises(ToolInputError) as ei:
            call_tool(tool, {"post_image_path": post}, ctx)
        assert "ras.concat" in str(ei.value) and ei.value.argument == "post_image_path"


def test_unknown_mode(tmp_path):
    ctx, pre, post = _gt_ctx(tmp_path, np.zeros((2, 2), np.uint8), {0: "background"},
                             perception_mode="magic")
    with pytest.raises(ToolError) as ei:
        call_tool("seg.ship", {"post_image_path": post}, ctx)
    assert "magic" in str(ei.value)


# --------------------------------------------------------------------------------------------
# model mode
# --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    from kernel.tools import perception_models as pm

    d = tmp_path_factory.mktemp("ckpt")
    for name in ("building_damage", "lava", "isaid", "water", "landslide_ms"):
        pm.init_checkpoint(name, d / pm.MODEL_ZOO[name].file, seed=7)
    return d


def _rgb_inputs(tmp_path, h=20, w=13):
    d = tmp_path / "data"
    d.mkdir(parents=True, exist_ok=True)
    rng = np.random.RandomState(3)
    pre = rng.randint(0, 256, (h, w, 3)).astype(np.uint8)
    post = rng.randint(0, 256, (h, w, 3)).astype(np.uint8)
    write_png(d / "pre.png", pre)
    write_png(d / "post.png", post)
    return pre, post


def test_model_mode_without_checkpoints(tmp_path):
    _rgb_inputs(tmp_path)
    ctx = make_ctx(tmp_path, perception_mode="model")
    with pytest.raises(ModelUnavailableError) as ei:
        call_tool("seg.vehicle", {"post_image_path": "post.png"}, ctx)
    assert "checkpoint directory" in str(ei.value) and "seg_isaid.safetensors" in str(ei.value)
    ctx.checkpoint_dir = tmp_path / "empty"
    with pytest.raises(ModelUnavailableError) as ei:
        call_tool("seg.water_aerial", {"post_image_path": "post.png"}, ctx)
    assert "seg_aerial.safetensors" in str(ei.value) and "not found" in str(ei.value)


def test_model_mode_matches_direct_forward(tmp_path, checkpoints, monkeypatch):
    import torch

    from kernel.tools import perception_models as pm

    pre, post = _rgb_inputs(tmp_path)
    monkeypatch.setattr(pm, "STRIP_ROWS", 6)  # 20 rows → 4 strips with halos
    ctx = make_ctx(tmp_path, perception_mode="model", checkpoint_dir=checkpoints)
    args = {"pre_image_path": "pre.png", "post_image_path": "post.png"}
    obs = call_tool("seg.building_damage", args, ctx)
    assert obs["_meta"]["mode"] == "model" and obs["_meta"]["architecture"] == pm.ARCHITECTURE
    assert obs["_meta"]["checkpoint"] == "seg_building_damage.safetensors"
    arr, _ = _read(ctx.work_dir / obs["mask_path"])
    assert arr.shape == (20, 13) and arr.dtype == np.uint8 and set(np.unique(arr)) <= {0, 1, 2, 3}
    net, _ = pm.load_model("building_damage", checkpoints)
    x = np.concatenate([pre, post], axis=2).transpose(2, 0, 1).astype(np.float32)
    with torch.inference_mode():
        direct = net(torch.from_numpy(x)[None])[0].argmax(0).numpy()
    assert arr.tolist() == direct.tolist()
    # deterministic: a fresh context (and a cold cache) gives the same bytes and name
    pm._CACHE.clear()
    ctx2 = make_ctx(tmp_path, work="again", perception_mode="model", checkpoint_dir=checkpoints)
    obs2 = call_tool("seg.building_damage", args, ctx2)
    assert obs2 == obs
    assert (ctx2.work_dir / obs2["mask_path"]).read_bytes() == \
        (ctx.work_dir / obs["mask_path"]).read_bytes()
    lava = call_tool("seg.lava", args, ctx)
    assert set(np.unique(_read(ctx.work_dir / lava["mask_path"])[0])) <= {0, 255}
    assert lava["_meta"]["checkpoint"] == "seg_lava.safetensors"
    ship = call_tool("seg.ship", {"post_image_path": "post.png"}, ctx)
    assert set(np.unique(_read(ctx.work_dir / ship["mask_path"])[0])) <= {0, 255}
    assert ship["mask_path"] != obs["mask_path"]


def test_model_mode_14_band(tmp_path, checkpoints):
    d = tmp_path / "data"
    d.mkdir(parents=True, exist_ok=True)
    write_tif(d / "s2.tif", np.random.RandomState(0).randint(0, 3000, (14, 5, 6)).astype(np.uint16))
    ctx = make_ctx(tmp_path, perception_mode="model", checkpoint_dir=checkpoints)
    obs = call_tool("seg.landslide_ms", {"post_image_path": "s2.tif"}, ctx)
    arr, crs = _read(ctx.work_dir / obs["mask_path"])
    assert obs["mask_path"].endswith(".tif") and crs is not None and arr.shape == (5, 6)
    assert set(np.unique(arr)) <= {0, 255}


def test_model_flood_is_water_after_not_before(tmp_path, checkpoints, monkeypatch):
    from kernel.tools import perception_models as pm

    _rgb_inputs(tmp_path, 1, 4)
    water = {0: np.array([[1, 1, 0, 0]], np.uint8), 1: np.array([[1, 0, 1, 0]], np.uint8)}
    calls = []

    def fake(name, images, checkpoint_dir, *, tool=None, device=None):
        calls.append(name)
        return water[len(calls) - 1], Path(checkpoint_dir) / pm.MODEL_ZOO[name].file

    monkeypatch.setattr(pm, "predict_labels", fake)
    ctx = make_ctx(tmp_path, perception_mode="model", checkpoint_dir=checkpoints)
    obs = call_tool("seg.flood", {"pre_image_path": "pre.png", "post_image_path": "post.png"}, ctx)
    assert calls == ["water", "water"]
    assert _read(ctx.work_dir / obs["mask_path"])[0].tolist() == [[0, 0, 255, 0]]


def test_bad_checkpoints(tmp_path, checkpoints):
    import shutil

    from kernel.tools import perception_models as pm

    _rgb_inputs(tmp_path)
    d = tmp_path / "bad"
    d.mkdir()
    # an iSAID checkpoint (16 classes) under the water model's name (2 classes)
    shutil.copy(checkpoints / "seg_isaid.safetensors", d / "seg_water.safetensors")
    (d / "seg_aerial.safetensors").write_bytes(b"not a checkpoint")
    ctx = make_ctx(tmp_path, perception_mode="model", checkpoint_dir=d)
    with pytest.raises(ModelUnavailableError) as ei:
        call_tool("seg.flood", {"pre_image_path": "pre.png", "post_image_path": "post.png"}, ctx)
    assert "16 classes" in str(ei.value)
    with pytest.raises(ModelUnavailableError) as ei:
        call_tool("seg.pool_aerial", {"post_image_path": "post.png"}, ctx)
    assert "cannot read checkpoint seg_aerial.safetensors" in str(ei.value)
    # a missing tensor fails the strict load
    tensors, meta = pm.read_safetensors(checkpoints / "seg_isaid.safetensors")
    del tensors["body.2.bias"]
    pm.write_safetensors(d / "seg_isaid.safetensors", tensors, meta)
    with pytest.raises(ModelUnavailableError) as ei:
        call_tool("seg.ship", {"post_image_path": "post.png"}, ctx)
    assert "body.2.bias" in str(ei.value)


def test_checkpoint_round_trip_through_the_safetensors_package(tmp_path, checkpoints):
    from safetensors.numpy import load_file

    from kernel.tools import perception_models as pm

    ref, meta = pm.read_safetensors(checkpoints / "seg_lava.safetensors")
    assert meta["architecture"] == pm.ARCHITECTURE and meta["seed"] == "7"
    pm.write_safetensors(tmp_path / "x.safetensors", ref, meta)
    back = load_file(tmp_path / "x.safetensors")  # the package's own reader
    assert sorted(back) == sorted(ref) and all(np.array_equal(back[k], ref[k]) for k in ref)
    # seeded init writes the same tensors and metadata twice
    pm.init_checkpoint("lava", tmp_path / "a.safetensors", seed=7)
    again, meta2 = pm.read_safetensors(tmp_path / "a.safetensors")
    assert meta2 == meta and all(np.array_equal(again[k], ref[k]) for k in ref)
    with pytest.raises(ValueError, match="not a safetensors file"):
        pm.read_safetensors(tmp_path / "nothing.safetensors")


# --------------------------------------------------------------------------------------------
# classical mode
# --------------------------------------------------------------------------------------------
def _bgrn(green, nir, red=None):
    """4-band (blue, green, red, NIR) uint16 2x2 image."""
    g = np.array(green, np.uint16)
    n = np.array(nir, np.uint16)
    r = np.array(red, np.uint16) if red is not None else np.zeros_like(g)
    return np.stack([np.zeros_like(g), g, r, n])


def test_classical_ndwi_water_and_flood(tmp_path):
    d = tmp_path / "data"
    d.mkdir(parents=True, exist_ok=True)
    # post: NDWI = (100-50)/150 = +1/3 water; (50-100)/150 = -1/3 land; (80-80)/160 = 0 not
    # water (NDWI > 0 is strict); 0/0 undefined → not water
    write_tif(d / "post.tif", _bgrn([[100, 50], [80, 0]], [[50, 100], [80, 0]]))
    # pre: (0,0) land (50 vs 100), (0,1) water (90 vs 10): receding water is no flood
    write_tif(d / "pre.tif", _bgrn([[50, 90], [80, 0]], [[100, 10], [80, 0]]))
    ctx = make_ctx(tmp_path, perception_mode="classical")
    w = call_tool("seg.water_aerial", {"post_image_path": "post.tif"}, ctx)
    assert _read(ctx.work_dir / w["mask_path"])[0].tolist() == [[255, 0], [0, 0]]
    assert w["_meta"]["mode"] == "classical" and "McFeeters" in w["_meta"]["method"]
    assert w["_meta"]["bands"] == {"green": 2, "nir": 4}
    f = call_tool("seg.flood", {"pre_image_path": "pre.tif", "post_image_path": "post.tif"}, ctx)
    assert _read(ctx.work_dir / f["mask_path"])[0].tolist() == [[255, 0], [0, 0]]
    assert f["mask_path"].endswith(".tif")


def test_classical_band_descriptions_and_rgb(tmp_path):
    d = tmp_path / "data"
    d.mkdir(parents=True, exist_ok=True)
    with rasterio.open(d / "gnr.tif", "w", driver="GTiff", width=2, height=1, count=3,
                       dtype="uint16") as dst:
        dst.write(np.array([[[100, 10]], [[0, 0]], [[20, 90]]], np.uint16))
        dst.descriptions = ("green", "red", "nir")
    write_png(d / "rgb.png", np.zeros((1, 2, 3), np.uint8))
    ctx = make_ctx(tmp_path, perception_mode="classical")
    obs = call_tool("seg.water_aerial", {"post_image_path": "gnr.tif"}, ctx)
    assert _read(ctx.work_dir / obs["mask_path"])[0].tolist() == [[255, 0]]
    assert obs["_meta"]["bands"] == {"green": 1, "nir": 3}
    with pytest.raises(ModelUnavailableError) as ei:
        call_tool("seg.water_aerial", {"post_image_path": "rgb.png"}, ctx)
    assert "no classical baseline for seg.water_aerial" in str(ei.value) and "NIR" in str(ei.value)


def test_classical_sar_otsu(tmp_path):
    d = tmp_path / "data"
    d.mkdir(parents=True, exist_ok=True)
    # linear sigma0: 0.01 = -20 dB, 10**-2.2 = -22 dB, 10**-0.4 = -4 dB, 10**-0.2 = -2 dB
    lin = np.array([[0.01, 10 ** -2.2], [10 ** -0.4, 10 ** -0.2]], np.float32)
    write_tif(d / "s1_post.tif", lin)
    # pre in dB already: only (0,1) is as dark as water
    write_tif(d / "s1_pre.tif", np.array([[-5, -22], [-4, -3]], np.float32))
    ctx = make_ctx(tmp_path, perception_mode="classical")
    obs = call_tool("seg.water_aerial", {"post_image_path": "s1_post.tif"}, ctx)
    assert _read(ctx.work_dir / obs["mask_path"])[0].tolist() == [[255, 255], [0, 0]]
    # 256 bins over [-22, -2]: -20 dB falls in bin 25; every split between the two clusters
    # has the same between-class variance, the first one (after bin 25) wins:
    # T = -22 + 26 * 20/256 = -19.96875
    assert obs["_meta"]["threshold_db"] == pytest.approx(-19.96875, abs=1e-4)
    f = call_tool("seg.flood", {"pre_image_path": "s1_pre.tif", "post_image_path": "s1_post.tif"},
                  ctx)
    assert _read(ctx.work_dir / f["mask_path"])[0].tolist() == [[255, 0], [0, 0]]
    assert f["_meta"]["threshold_from"] == "post image"
    assert classical.otsu_threshold(np.full(4, -7.0)) == -7.0


def test_classical_ndvi_and_reservoir(tmp_path):
    d = tmp_path / "data"
    d.mkdir(parents=True, exist_ok=True)
    # NDVI: (150-50)/200 = 0.5 veg; (120-100)/220 = 0.09 no; (90-60)/150 = 0.2 no (strict); 0/0
    write_tif(d / "ms.tif", _bgrn([[0, 0], [0, 0]], [[150, 120], [90, 0]],
                                  red=[[50, 100], [60, 0]]))
    # 14-band stack: Sentinel-2 order, green = band 3, NIR = band 8
    stack = np.full((14, 1, 2), 500, np.uint16)
    stack[2] = [[900, 100]]
    stack[7] = [[300, 800]]
    write_tif(d / "stack.tif", stack)
    ctx = make_ctx(tmp_path, perception_mode="classical")
    obs = call_tool("seg.vegetation", {"image_path": "ms.tif"}, ctx)
    assert _read(ctx.work_dir / obs["mask_path"])[0].tolist() == [[255, 0], [0, 0]]
    assert obs["_meta"]["threshold"] == 0.2
    obs = call_tool("seg.reservoir", {"post_image_path": "stack.tif"}, ctx)
    assert _read(ctx.work_dir / obs["mask_path"])[0].tolist() == [[255, 0]]
    assert obs["_meta"]["bands"] == {"green": 3, "nir": 8}


@pytest.mark.parametrize("tool", ["seg.building_damage", "seg.ship", "seg.lava",
                                  "seg.tree_fallen_aerial"])
def test_no_classical_baseline(tmp_path, tool):
    _rgb_inputs(tmp_path, 2, 2)
    ctx = make_ctx(tmp_path, perception_mode="classical")
    with pytest.raises(ModelUnavailableError) as ei:
        call_tool(tool, _args(tool), ctx)
    assert f"no classical baseline for {tool}" in str(ei.value)
