"""QC checks of the raster/logic tool family (annotation/qc/tool_parity.py): the branches the
one-file-per-check corpus (tests/qc_corpus/tool_*.json) does not reach, and the cases that must
stay silent. Each expectation follows the benchmark behaviour named in kernel/tools/quirks.py.
"""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from annotation import qc

CORPUS = Path(__file__).resolve().parent / "qc_corpus"
BASE = json.loads((CORPUS / "clean_area.json").read_text(encoding="utf-8"))[0]

LAYERS = {
    "pre_image": {"image_path": "pre.png", "modality": "optical", "pixel_size_m": 0.5,
                  "spatial_coordinate_system": "EPSG:32617", "band_info": ["R", "G", "B"]},
    "mask": {"image_path": "m.png", "modality": "mask", "spatial_coordinate_system": "pixel",
             "band_info": ["class"]},
    "dem_ll": {"image_path": "dem_ll.tif", "modality": "dem", "pixel_size_m": 30,
               "spatial_coordinate_system": "EPSG:4326", "band_info": ["z"]},
    "dem_px": {"image_path": "dem_px.tif", "modality": "dem", "spatial_coordinate_system": "pixel",
               "band_info": ["z"]},
    "dem_utm": {"image_path": "dem_utm.tif", "modality": "dem", "pixel_size_m": 30,
                "spatial_coordinate_system": "EPSG:32617", "band_info": ["z"]},
    "cells": {"path": "cells.geojson", "modality": "vector", "spatial_coordinate_system": "pixel"},
}


def findings(steps: list[dict]) -> set[tuple[str, str]]:
    sample = copy.deepcopy(BASE)
    sample["input_data"] = copy.deepcopy(LAYERS)
    task = sample["tasks"][0]
    task["trajectory"] = steps
    content = qc.content_from_dora_task(sample, task)
    return {(f.check, f.location) for f in qc.check_task(content)
            if f.check in qc.CHECKS and f.check.startswith("tool.")}


def step(call, **args):
    return {"call": call, "args": args, "obs": {"tool": call}}


@pytest.mark.parametrize("steps,expected", [
    # mask.compose_multiclass reads band 1 of an RGB image
    ([step("mask.compose_multiclass", mask_paths=["m.png", "pre.png"], class_values=[1, 2])],
     {("tool.multiband_mask", "trajectory[0].args.mask_paths[1]")}),
    # ras.area counts every band of the RGB image
    ([step("ras.area", mask_path="pre.png", pixel_size_m=0.5)],
     {("tool.multiband_mask", "trajectory[0].args.mask_path")}),
    # a DEM without CRS: 1 pixel taken as 1 metre
    ([step("ras.slope", dem_path="dem_px.tif")],
     {("tool.geographic_dem", "trajectory[0].args.dem_path")}),
    # ras.resample on a geographic raster: degrees as metres
    ([step("ras.resample", raster_path="dem_ll.tif", target_pixel_size_m=10)],
     {("tool.geographic_dem", "trajectory[0].args.raster_path")}),
    # ras.vectorize on a geographic mask: square degrees
    ([step("ras.vectorize", mask_path="dem_ll.tif", classes=[1])],
     {("tool.vectorize_area", "trajectory[0].args.mask_path")}),
    # an altitude outside 0..90 and the direction quirk of every hillshade
    ([step("ras.hillshade", dem_path="dem_utm.tif", altitude=120)],
     {("tool.unknown_option", "trajectory[0].args.altitude"),
      ("tool.hillshade_direction", "trajectory[0].args.azimuth")}),
    # an unknown resampling means bilinear
    ([step("ras.reproject", raster_path="dem_utm.tif", dst_crs="EPSG:4326", resampling="lanczos")],
     {("tool.unknown_option", "trajectory[0].args.resampling")}),
    # true_value equal to false_value
    ([step("ras.threshold", image_path="dem_utm.tif", threshold=1, true_value=0)],
     {("tool.threshold_values", "trajectory[0].args.true_value")}),
    # a zero pixel size nested in a loop is found at the nested call
    ([step("tool.loop", loop_over=[{"a": 1}], calls=[
        {"call": "calc.point_distance", "args": {"point_a": [0, 0], "point_b": [3, 4],
                                                 "pixel_size_m": 0}}])],
     {("tool.nonpositive_pixel_size", "trajectory[0].args.calls[0].args.pixel_size_m")}),
    # ras.focal_stats on a PNG: the benchmark's float32 write in the PNG format fails
    ([step("ras.focal_stats", raster_path="m.png", statistic="mean")],
     {("tool.float32_format", "trajectory[0].args.raster_path")}),
    # a .geojson loop_over is what the schema refuses
    ([step("tool.loop", loop_over="cells.geojson", calls=[
        {"call": "calc.add", "args": {"a": 1, "b": 2}}])],
     {("tool.loop_over_string", "trajectory[0].args.loop_over")}),
])
def test_branches(steps, expected):
    assert findings(steps) == expected


@pytest.mark.parametrize("steps", [
    [step("ras.count_pixels", mask_path="m.png", classes=[1])],          # single band
    [step("ras.slope", dem_path="dem_utm.tif", units="percent")],       # metric, known unit
    [step("ras.vectorize", mask_path="m.png", classes=[1], pixel_size_m=0.5)],
    [step("logi.truck_trips", volume_m3=10, capacity_m3=12)],
    [step("ras.threshold", image_path="dem_utm.tif", threshold=1, true_value=255)],
    [step("tool.reduce", values=[{"a": 1}], field="last_obs.total")],
    # the gold's trajectory-reference notation for a list is not a path string
    [step("ras.grid_windows", image_path="m.png", n=2),
     step("tool.loop", loop_over="<windows> from trajectory[0].obs",
          calls=[{"call": "calc.add", "args": {"a": "<item.x1>", "b": 1}}])],
])
def test_silent(steps):
    assert findings(steps) == set()


def test_every_family_check_has_a_corpus_file():
    from annotation.qc.tool_parity import RASTER_AND_LOGIC_CHECKS

    expected = json.loads((CORPUS / "expected.json").read_text(encoding="utf-8"))["files"]
    for check in RASTER_AND_LOGIC_CHECKS:
        name = check.replace(".", "_", 1) + ".json"
        # its own check, beside at most checks of other families the same input must trigger (a mask
        # given in input_data is also a ground-truth input: manifest.ground_truth_input)
        checks = expected.get(name, {}).get("checks") or []
        assert check in checks and all(not c.startswith("tool.") or c == check for c in checks), (check, checks)
