"""Render a raster artifact (mask or image) to PNG bytes for the browser.

Masks (single band, integer, few values) are coloured with the one palette by class index
(``kernel.palette.display_rgba``: the benchmark's ``vis`` colours, as on the map tiles);
other rasters are shown as they are (first three bands, 8-bit stretch for other dtypes).
"""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import rasterio
from PIL import Image

from kernel.palette import display_rgba

colour_for = display_rgba  # RGBA of a class index (kernel/palette.py); 0 transparent


def raster_png(path: Path) -> bytes:
    """PNG bytes of the raster at ``path``; a single-band integer raster is drawn as a class mask."""
    with rasterio.open(path) as src:
        data = src.read()
    if data.shape[0] == 1 and np.issubdtype(data.dtype, np.integer):
        band = data[0]
        rgba = np.zeros(band.shape + (4,), dtype=np.uint8)
        for value in np.unique(band):
            rgba[band == value] = colour_for(int(value))
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
