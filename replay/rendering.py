"""Render a raster artifact (mask or image) to PNG bytes for the browser.

Masks (single band, integer, few values) are coloured with the studio's one palette
(``annotation.tiles`` over ``kernel/palette.py``: by class label, else by index); other rasters are shown as they are
(first three bands, 8-bit stretch for other dtypes).
"""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import rasterio
from PIL import Image

from annotation import tiles
from kernel.palette import OVERLAY_ALPHA
from kernel.tools.base import gdal_scope


def class_labels(obs) -> dict[int, str] | None:
    """``{class index: label}`` a step's observation gives its mask output (the perception tools'
    ``classes``, e.g. seg.building_damage ``{"1": "intact", "2": "partially damaged", "3": "totally
    destroyed"}``), or None when it names none (a list of counted classes is not a class map)."""
    classes = obs.get("classes") if isinstance(obs, dict) else None
    if not isinstance(classes, dict):
        return None
    out = {}
    for key, label in classes.items():
        try:
            out[int(key)] = str(label)
        except (TypeError, ValueError):
            continue
    return out or None


def class_rgba(index: int, labels: dict[int, str] | None = None) -> tuple[int, int, int, int]:
    """RGBA of a mask artifact's class index, from the studio's one palette
    (``annotation.tiles.label_colours``: by the class's label when ``labels`` names it, else by
    index), at the overlay opacity ``kernel.palette.OVERLAY_ALPHA``; 0 / background transparent."""
    colours = tiles.label_colours(labels or {})
    r, g, b, a = tiles.rgba(colours[index] if index in colours else tiles.index_colour(index))
    return (r, g, b, OVERLAY_ALPHA if a else 0)  # drawn over imagery: kernel.palette's overlay opacity


def raster_png(path: Path, labels: dict[int, str] | None = None) -> bytes:
    """PNG bytes of the raster at ``path``; a single-band integer raster is drawn as a class mask
    (colours: ``class_rgba``, by ``labels`` — the tool's ``{class: label}`` — where given)."""
    with gdal_scope(), rasterio.open(path) as src:
        data = src.read()
    if data.shape[0] == 1 and np.issubdtype(data.dtype, np.integer):
        band = data[0]
        rgba = np.zeros(band.shape + (4,), dtype=np.uint8)
        for value in np.unique(band):
            rgba[band == value] = class_rgba(int(value), labels)
        img = Image.fromarray(rgba, "RGBA")
    else:
        bands = data[:3] if data.shape[0] >= 3 else np.repeat(data[:1], 3, axis=0)
        if bands.dtype != np.uint8:
            finite = bands[np.isfinite(bands)] if np.issubdtype(bands.dtype, np.floating) else bands
            lo, hi = (float(np.percentile(finite, 2)), float(np.percentile(finite, 98))) if finite.size else (0.0, 1.0)
            bands = np.clip((bands.astype("float64") - lo) / max(hi - lo, 1e-9) * 255, 0, 255).astype(np.uint8)
        img = Image.fromarray(np.moveaxis(bands, 0, -1), "RGB")
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()
