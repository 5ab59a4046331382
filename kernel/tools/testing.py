"""Helpers to build tiny rasters, vector layers and contexts for tests (no Django)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .base import GTMask, ToolContext, directory_resolver


def make_ctx(tmp_path: Path, *, gt: dict | None = None, data_dir: Path | None = None,
             work: str = "work", **kw) -> ToolContext:
    """A context whose inputs live in ``tmp_path/data`` (or ``data_dir``) and whose artifacts
    go to ``tmp_path/<work>``. ``gt`` maps a post-image file name to a GTMask."""
    data = Path(data_dir) if data_dir else Path(tmp_path) / "data"
    data.mkdir(parents=True, exist_ok=True)

    def lookup(tool, args):
        post = args.get("post_image_path") or args.get("image_path")
        return (gt or {}).get(Path(post).name) if post else None

    return ToolContext(work_dir=Path(tmp_path) / work, resolve_path=directory_resolver(data),
                       gt_lookup=lookup, **kw)


def write_png(path: Path, arr: np.ndarray) -> Path:
    from PIL import Image

    Image.fromarray(np.asarray(arr, dtype=np.uint8)).save(path)
    return Path(path)


def write_tif(path: Path, arr: np.ndarray, *, crs: str | None = "EPSG:32615",
              origin: tuple[float, float] = (500000.0, 3300000.0), res: float = 1.0,
              nodata=None) -> Path:
    import rasterio
    from rasterio.transform import from_origin

    a = np.asarray(arr)
    if a.ndim == 2:
        a = a[None]
    profile = {"driver": "GTiff", "height": a.shape[1], "width": a.shape[2], "count": a.shape[0],
               "dtype": str(a.dtype)}
    if crs:
        profile["crs"] = crs
        profile["transform"] = from_origin(origin[0], origin[1], res, res)
    if nodata is not None:
        profile["nodata"] = nodata
    with rasterio.open(path, "w", **profile) as dst:
        dst.write(a)
    return Path(path)


def write_geojson(path: Path, features: list[dict], crs: str | None = None) -> Path:
    """``features``: [{"geometry": shapely geometry or GeoJSON dict, "properties": {...}}]."""
    from shapely.geometry import mapping

    feats = []
    for f in features:
        g = f["geometry"]
        feats.append({"type": "Feature", "properties": f.get("properties", {}),
                      "geometry": g if isinstance(g, dict) else mapping(g)})
    doc = {"type": "FeatureCollection", "features": feats}
    if crs:
        doc["crs"] = {"type": "name", "properties": {"name": crs}}
    Path(path).write_text(json.dumps(doc), encoding="utf-8")
    return Path(path)


XBD_CLASSES = {0: "background", 1: "no-damage", 2: "minor-damage", 3: "major-damage",
               4: "destroyed", 5: "un-classified"}

__all__ = ["make_ctx", "write_png", "write_tif", "write_geojson", "XBD_CLASSES", "GTMask"]
