"""Render a raster artifact (mask or image) to PNG bytes for the browser.

Masks (single band, integer, few values) are coloured with a fixed palette by class index;
other rasters are shown as they are (first three bands, 8-bit stretch for other dtypes).
"""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import rasterio
from PIL import Image

# Class index -> RGBA. 0 is transparent. 1–3 follow the damage convention of the tools
# (intact green, partially damaged orange, destroyed red); 4 xBD destroyed; 255 binary "selected".
PALETTE = {
    0: (0, 0, 0, 0),
    1: (46, 204, 113, 200),
    2: (243, 156, 18, 210),
    3: (231, 76, 60, 220),
    4: (142, 68, 173, 220),
    5: (149, 165, 166, 200),
    255: (0, 229, 255, 200),
}


def colour_for(index: int) -> tuple[int, int, int, int]:
    """RGBA of a class index: the palette, or a deterministic colour derived from the index."""
    if index in PALETTE:
        return PALETTE[index]
    rng = np.random.default_rng(index)
    r, g, b = (int(v) for v in rng.integers(40, 255, 3))
    return (r, g, b, 200)


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
