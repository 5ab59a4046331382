"""One place each: path confinement (``kernel.paths``), file SHA-256 with a
bounded cache (``kernel.hashing``) and the mask palette (``kernel.palette``), and every former copy
now goes through them.

Expected values: the palette is the benchmark's ``vis`` default (DORA ``dora/tools/vis.py``,
``_class_color``: 1 (255, 215, 0), 2 (255, 140, 0), 3 (220, 20, 60), 4 (128, 0, 128),
5 (30, 144, 255), 6 (0, 191, 255), any other value (255, 0, 0)); the digests are ``hashlib``'s of
the bytes written here (``sha256(b"abc")`` is the FIPS 180-2 test vector ba7816bf…15ad).
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from PIL import Image

from kernel import hashing, palette
from kernel.paths import OutsideRoot, confine, is_inside

ROOT = Path(__file__).resolve().parents[1]
ABC = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


# --- path confinement ---------------------------------------------------------------------------

def test_confine_accepts_names_under_the_root_and_refuses_escapes(tmp_path):
    root = tmp_path / "root"
    (root / "ev").mkdir(parents=True)
    (root / "ev" / "a.tif").write_bytes(b"x")
    assert confine(root, "ev/a.tif") == (root / "ev" / "a.tif").resolve()
    assert confine(root, "ev/../ev/a.tif") == (root / "ev" / "a.tif").resolve()
    assert confine(root, str(root / "ev" / "a.tif")) == (root / "ev" / "a.tif").resolve()  # absolute, inside
    for bad in ("../secret", "ev/../../secret", "/etc/passwd"):
        with pytest.raises(OutsideRoot) as info:
            confine(root, bad)
        assert info.value.field == "path" and isinstance(info.value, ValueError)
    # a prefix is not a parent: /x/root-other is not under /x/root
    with pytest.raises(OutsideRoot):
        confine(root, str(tmp_path / "root-other" / "f"))


def test_confine_follows_links_unless_told_not_to(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (tmp_path / "secret").write_text("s")
    (root / "link").symlink_to(tmp_path / "secret")
    with pytest.raises(OutsideRoot):
        confine(root, "link")  # the link points outside: refused before a file is opened
    # the text-only variant (no file-system access) normalises but does not follow the link
    assert confine(root, "link", follow_links=False) == Path(os.path.normpath(root / "link"))
    with pytest.raises(OutsideRoot):
        confine(root, "a/../../x", follow_links=False)
    assert is_inside(root / "a" / "b", root) and not is_inside(tmp_path / "database", tmp_path / "data")


def test_the_former_copies_of_confinement_call_kernel_paths():
    """``resolve()`` + ``is_relative_to`` on a root lived in about nine places; what is left in the
    apps is the kernel's (and the importers' wrapper around it, which names the source folder)."""
    hits = []
    for app in ("annotation", "replay", "evaluation", "frontend", "studio"):
        for path in (ROOT / app).rglob("*.py"):
            for i, line in enumerate(path.read_text().splitlines(), 1):
                if re.search(r"\.is_relative_to\(", line):
                    hits.append(f"{path.relative_to(ROOT)}:{i}")
    assert hits == []


@pytest.mark.django_db
def test_the_services_refuse_paths_outside_the_data_root(settings):
    from replay.services.paths import data_path, stored_path

    # the local data root's rule (with a bucket, data_path first fetches the file: tests/test_layers_bucket.py)
    settings.STUDIO_STORAGE_URL = ""
    assert data_path("ev/a.tif") == (Path(settings.STUDIO_DATA_ROOT) / "ev" / "a.tif").resolve()
    for fn in (data_path, stored_path):
        with pytest.raises(OutsideRoot, match="lies outside the data root"):
            fn("../../etc/passwd")


# --- hashing ------------------------------------------------------------------------------------

def test_file_sha256_is_hashlibs_and_reads_an_unchanged_file_once(tmp_path):
    hashing.cache_clear()
    f = tmp_path / "a.bin"
    f.write_bytes(b"abc")
    assert hashing.file_sha256(f) == ABC
    assert hashing.file_sha256(str(f)) == ABC
    assert hashing.cache_info()["misses"] == 1 and hashing.cache_info()["hits"] == 1
    f.write_bytes(b"abcd")  # a new size: read again
    assert hashing.file_sha256(f) == "88d4266fd4e6338d13b845fcf289579d209c897823b9217da3e161936f031589"


def test_the_digest_cache_is_bounded(tmp_path, monkeypatch):
    hashing.cache_clear()
    monkeypatch.setattr(hashing, "CACHE_SIZE", 3)
    files = []
    for i in range(5):
        files.append(tmp_path / f"{i}.bin")
        files[-1].write_bytes(bytes([i]))
        hashing.file_sha256(files[-1])
    assert hashing.cache_info()["size"] == 3
    hashing.file_sha256(files[0])  # the oldest was evicted: read again
    assert hashing.cache_info()["misses"] == 6


def test_every_former_hasher_is_the_kernels():
    from annotation.importers import common
    from kernel.tools import base
    from releases.services import export

    assert common.sha256_file is export.sha256_file is base.file_sha256 is hashing.file_sha256
    assert common.sha256_files is hashing.sha256_files


def test_sha256_files_digests_names_and_contents_in_path_order(tmp_path):
    import hashlib

    (tmp_path / "b.dbf").write_bytes(b"abc")
    (tmp_path / "a.shp").write_bytes(b"abc")
    by_hand = hashlib.sha256(b"a.shp" + ABC.encode() + b"b.dbf" + ABC.encode()).hexdigest()
    assert hashing.sha256_files([tmp_path / "b.dbf", tmp_path / "a.shp"]) == by_hand


# --- the palette --------------------------------------------------------------------------------

def test_the_palette_is_the_benchmarks_and_tiles_overlays_and_vis_share_it(tmp_path):
    from annotation import tiles
    from kernel.tools import vis
    from replay import rendering

    assert palette.BENCHMARK_RGB == {1: (255, 215, 0), 2: (255, 140, 0), 3: (220, 20, 60), 4: (128, 0, 128),
                                     5: (30, 144, 255), 6: (0, 191, 255)}
    assert palette.benchmark_rgb(255) == (255, 0, 0) == palette.benchmark_rgb(9)
    # class 2 (xBD minor-damage) is orange on a tile, on a replay overlay and in vis.* output
    assert tiles.CLASS_COLOURS[2] == "#ff8c00" == palette.hex_of(vis.PALETTE[2])
    assert rendering.class_rgba(2)[:3] == (255, 140, 0) and rendering.class_rgba(0) == (0, 0, 0, 0)
    assert vis.colour_of(2) == (255, 140, 0) and vis.colour_of(255) == (255, 0, 0)
    # the map by label: "destroyed" is the benchmark's class-4 purple whatever its index
    layer = SimpleNamespace(class_map={"0": "background", "1": "destroyed", "2": "minor-damage"}, class_counts={})
    assert tiles.class_colours(layer) == {0: None, 1: "#800080", 2: "#ff8c00"}
    # and a rendered overlay PNG has exactly those pixels
    mask = np.zeros((4, 4), np.uint8)
    mask[0, :] = 2
    path = tmp_path / "m.tif"
    import rasterio

    with rasterio.open(path, "w", driver="GTiff", width=4, height=4, count=1, dtype="uint8") as dst:
        dst.write(mask, 1)
    import io

    rgba = np.asarray(Image.open(io.BytesIO(rendering.raster_png(path))).convert("RGBA"))
    assert tuple(rgba[0, 0]) == (255, 140, 0, palette.OVERLAY_ALPHA) and rgba[1, 0, 3] == 0


def test_past_six_classes_the_map_keeps_them_apart_where_the_benchmark_paints_red():
    colours = [palette.display_hex(i) for i in range(7, 15)]
    assert len(set(colours)) == 8 and "#ff0000" not in colours


# --- gold diffs ---------------------------------------------------------------------------------

STEPS_A = [{"call": "vec.buffer", "args": {"meter": 20}, "obs": {"buffer_path": "a.geojson", "count": 60}},
           {"call": "calc.sum", "args": {"x": [1, 2]}, "obs": {"result": 3}}]
STEPS_B = [{"call": "vec.buffer", "args": {"meter": 30}, "obs": {"buffer_path": "b.geojson", "count": 61}},
           {"call": "calc.sum", "args": {"x": [1, 2]}, "obs": {"result": 3.0000001}},
           {"call": "calc.round", "args": {"x": 3}, "obs": {"result": 3}}]


def test_step_diff_rows_worked_out_by_hand():
    from kernel.golddiff import step_diff

    rows = step_diff(STEPS_A, STEPS_B)
    assert [(r["index"], r["call"], r["state"]) for r in rows] == [
        (0, "vec.buffer", "changed"), (1, "calc.sum", "changed"), (2, "calc.round", "added")]
    assert rows[0]["changes"] == [
        {"path": "(call/args)", "before": {"call": "vec.buffer", "args": {"meter": 20}},
         "after": {"call": "vec.buffer", "args": {"meter": 30}}},
        {"path": "buffer_path", "before": "a.geojson", "after": "b.geojson"},
        {"path": "count", "before": 60, "after": 61}]
    assert rows[1]["changes"] == [{"path": "result", "before": 3, "after": 3.0000001}]
    # the recorded diff's options: observations only, a relative tolerance, file names skipped
    close = step_diff(STEPS_A, STEPS_B, calls=False, skip=lambda p: p.endswith("_path"),
                      equal=lambda x, y: x == y or (isinstance(x, (int, float)) and abs(x - y) <= 1e-6 * abs(x)))
    assert [(r["state"], [c["path"] for c in r["changes"]]) for r in close] == [
        ("changed", ["count"]), ("same", []), ("added", [])]


def test_the_release_diff_gives_the_replays_gold_diff_rows():
    """Release diffs said {index, change, parts, call_a, call_b, args}; they now give the rows of
    kernel.golddiff (only the steps that differ), with values compared as canonical JSON, so
    3 → 3.0 is a change there (a task file would be rewritten) although 3 == 3.0 in Python."""
    from releases.selectors import _step_changes

    rows = _step_changes(STEPS_A, [STEPS_A[0], {**STEPS_A[1], "obs": {"result": 3.0}}])
    assert rows == [{"index": 1, "call": "calc.sum", "state": "changed",
                     "changes": [{"path": "result", "before": 3, "after": 3.0}]}]
