"""Classical (training-free) baselines behind perception mode ``classical``.

Not a registering module: the ``seg.*`` tools in ``perception.py`` call these functions. Only
water and vegetation have a classical baseline; every other tool raises
``ModelUnavailableError("no classical baseline for seg.X")``.

Band roles
    A band's role (green, red, nir, sar) is taken from the raster's band descriptions when they
    name it (``green``/``B3``/``B03``, ``red``/``B4``/``B04``, ``nir``/``B8``/``B08``/``B8A``,
    ``VV``/``VH``/``HH``/``HV``/``sar``/``sigma0``). Otherwise from the band count:
    4 bands = blue, green, red, NIR (PlanetScope / NAIP-style order); 12 or more bands =
    Sentinel-2 order starting at B1 (green = band 3, red = band 4, NIR = band 8; this also covers
    the 14-band Landslide4Sense-style stack of 12 Sentinel-2 bands + DEM + slope). A 3-band RGB
    image has no NIR band, hence no classical baseline.

Water from multi-spectral input: NDWI = (green − NIR) / (green + NIR), water where NDWI > 0
    (McFeeters, S. K. 1996, "The use of the Normalized Difference Water Index (NDWI) in the
    delineation of open water features", Int. J. Remote Sensing 17(7):1425–1432; the index is
    positive over open water, zero or negative over soil and vegetation). Pixels with
    green + NIR = 0 or non-finite values are not water.

Water from SAR backscatter: open water is a specular reflector and appears dark. Backscatter is
    used in dB (linear σ0 ≥ 0 is converted with 10·log10; an image already holding negative
    values is taken to be in dB). Water where σ0_dB < T, with T chosen by Otsu's method on a
    256-bin histogram of the image's finite dB values (Otsu, N. 1979, "A threshold selection
    method from gray-level histograms", IEEE Trans. Systems, Man, and Cybernetics 9(1):62–66):
    the split that maximises the between-class variance, ties to the lowest split, T = the
    upper edge of the last bin of the dark class. A SAR image is one whose band descriptions
    name a polarisation or SAR, or a 1- or 2-band floating-point raster; of two bands the one
    described VV (else the first) is used.

Flood (bi-temporal): water after but not before, as the benchmark's ``seg.flood`` does with its
    water model. For SAR the Otsu threshold is computed on the post image, whose flood water
    makes the histogram bimodal, and applied to both dates.

Vegetation: NDVI = (NIR − red) / (NIR + red) (Rouse et al. 1974; Tucker, C. J. 1979, Remote
    Sensing of Environment 8(2):127–150), vegetation where NDVI > 0.2, the soil/vegetation limit
    of the NDVI threshold method (Sobrino, J. A., Jiménez-Muñoz, J. C. & Paolini, L. 2004,
    Remote Sensing of Environment 90(4):434–440: NDVI < 0.2 bare soil).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from .base import ModelUnavailableError

__all__ = ["NDWI_THRESHOLD", "NDVI_THRESHOLD", "Image", "band_roles", "ndwi", "ndvi",
           "otsu_threshold", "to_db", "is_sar", "water_mask", "flood_mask", "vegetation_mask",
           "no_baseline"]

NDWI_THRESHOLD = 0.0  # McFeeters 1996: water where NDWI > 0
NDVI_THRESHOLD = 0.2  # Sobrino et al. 2004: NDVI < 0.2 is bare soil
OTSU_BINS = 256


@dataclass
class Image:
    """A raster's bands ((bands, H, W) array), their descriptions and dtype, as read."""

    data: np.ndarray
    descriptions: list[str | None] = field(default_factory=list)
    name: str = ""

    @property
    def count(self) -> int:
        return int(self.data.shape[0])


def no_baseline(tool: str, why: str = "") -> ModelUnavailableError:
    msg = f"no classical baseline for {tool}"
    if why:
        msg += f": {why}"
    return ModelUnavailableError(msg, tool=tool, expected="perception mode 'gt' or 'model'")


_ROLE_PATTERNS = {
    "green": re.compile(r"^(green|g|b0?3|band ?0?3 ?\(?green\)?)$"),
    "red": re.compile(r"^(red|r|b0?4)$"),
    "nir": re.compile(r"^(nir|near[- _]?infra[- _]?red|b0?8a?|nir ?\(b0?8\))$"),
    "sar": re.compile(r"^(vv|vh|hh|hv|sar|sigma0.*|s1.*|backscatter.*)$"),
}


def band_roles(img: Image) -> dict[str, int]:
    """{role: 0-based band index} from descriptions, else from the band-count convention."""
    roles: dict[str, int] = {}
    for i, desc in enumerate(img.descriptions or []):
        if not desc:
            continue
        text = str(desc).strip().lower()
        for role, pat in _ROLE_PATTERNS.items():
            if role not in roles and pat.match(text):
                roles[role] = i
                if role == "sar" and text == "vv":
                    roles["sar_vv"] = i
    if any(r in roles for r in ("green", "red", "nir", "sar")):
        return roles
    n = img.count
    if n == 4:
        return {"blue": 0, "green": 1, "red": 2, "nir": 3}
    if n >= 12:
        return {"green": 2, "red": 3, "nir": 7}
    return roles


def is_sar(img: Image) -> bool:
    roles = band_roles(img)
    if "sar" in roles:
        return True
    if any(r in roles for r in ("green", "red", "nir")):
        return False
    return img.count in (1, 2) and img.data.dtype.kind == "f"


def _nd(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(a − b) / (a + b) in float64, NaN where undefined."""
    a = a.astype(np.float64)
    b = b.astype(np.float64)
    s = a + b
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(s != 0, (a - b) / s, np.nan)
    out[~np.isfinite(out)] = np.nan
    return out


def ndwi(green: np.ndarray, nir: np.ndarray) -> np.ndarray:
    """McFeeters (1996) NDWI = (green − NIR) / (green + NIR); NaN where green + NIR = 0."""
    return _nd(green, nir)


def ndvi(red: np.ndarray, nir: np.ndarray) -> np.ndarray:
    """NDVI = (NIR − red) / (NIR + red); NaN where NIR + red = 0."""
    return _nd(nir, red)


def to_db(arr: np.ndarray) -> np.ndarray:
    """Backscatter in dB: values are taken as dB when any finite value is negative, else as
    linear σ0 and converted with 10·log10 (zero → NaN)."""
    a = arr.astype(np.float64)
    finite = a[np.isfinite(a)]
    if finite.size and finite.min() < 0:
        return a
    with np.errstate(divide="ignore", invalid="ignore"):
        out = 10.0 * np.log10(a)
    out[~np.isfinite(out)] = np.nan
    return out


def otsu_threshold(values: np.ndarray, bins: int = OTSU_BINS) -> float:
    """Otsu (1979) threshold of the finite ``values``: the upper edge of the last bin of the
    lower class of the split that maximises the between-class variance (first maximum).
    A constant (or empty) input gives its value (nothing lies below it)."""
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return float("nan")
    lo, hi = float(v.min()), float(v.max())
    if hi <= lo:
        return lo
    hist, edges = np.histogram(v, bins=bins, range=(lo, hi))
    p = hist.astype(np.float64) / v.size
    centers = (edges[:-1] + edges[1:]) / 2.0
    w0 = np.cumsum(p)
    m0 = np.cumsum(p * centers)
    mt = m0[-1]
    w1 = 1.0 - w0
    with np.errstate(divide="ignore", invalid="ignore"):
        between = (mt * w0 - m0) ** 2 / (w0 * w1)
    between[~np.isfinite(between)] = -1.0
    k = int(np.argmax(between[:-1]))  # the split lies after bin k (never after the last bin)
    return float(edges[k + 1])


def _sar_band(img: Image) -> np.ndarray:
    roles = band_roles(img)
    idx = roles.get("sar_vv", roles.get("sar", 0))
    return img.data[idx]


def _water_ms(img: Image, tool: str) -> tuple[np.ndarray, dict]:
    roles = band_roles(img)
    if "green" not in roles or "nir" not in roles:
        raise no_baseline(tool, f"NDWI needs a green and a NIR band, and {img.name or 'the image'} "
                                f"({img.count} band(s)) has none named or implied by its band "
                                f"count")
    index = ndwi(img.data[roles["green"]], img.data[roles["nir"]])
    water = np.nan_to_num(index, nan=-np.inf) > NDWI_THRESHOLD
    return water, {"method": "NDWI (McFeeters 1996)", "rule": "NDWI > 0",
                   "threshold": NDWI_THRESHOLD,
                   "bands": {"green": roles["green"] + 1, "nir": roles["nir"] + 1}}


def _water_sar(img: Image, threshold: float | None = None) -> tuple[np.ndarray, dict]:
    db = to_db(_sar_band(img))
    t = otsu_threshold(db) if threshold is None else float(threshold)
    water = np.nan_to_num(db, nan=np.inf) < t
    return water, {"method": "SAR backscatter threshold, Otsu (1979) on dB", "rule": "dB < T",
                   "threshold_db": round(float(t), 6)}


def water_mask(img: Image, tool: str) -> tuple[np.ndarray, dict]:
    """(bool water mask, method info) of one image: SAR threshold or NDWI."""
    if is_sar(img):
        return _water_sar(img)
    return _water_ms(img, tool)


def flood_mask(pre: Image, post: Image, tool: str) -> tuple[np.ndarray, dict]:
    """(bool flood mask = water(post) & ~water(pre), method info)."""
    sar_pre, sar_post = is_sar(pre), is_sar(post)
    if sar_pre != sar_post:
        raise no_baseline(tool, "pre and post images must both be SAR or both multi-spectral")
    if sar_post:
        post_w, info = _water_sar(post)
        pre_w, _ = _water_sar(pre, threshold=info["threshold_db"])
        info = {**info, "threshold_from": "post image"}
    else:
        post_w, info = _water_ms(post, tool)
        pre_w, pre_info = _water_ms(pre, tool)
        info = {**info, "bands_pre": pre_info["bands"]}
    info["rule"] = info["rule"] + " after and not before"
    return post_w & ~pre_w, info


def vegetation_mask(img: Image, tool: str) -> tuple[np.ndarray, dict]:
    """(bool vegetation mask NDVI > 0.2, method info)."""
    roles = band_roles(img)
    if "red" not in roles or "nir" not in roles:
        raise no_baseline(tool, f"NDVI needs a red and a NIR band, and {img.name or 'the image'} "
                                f"({img.count} band(s)) has none named or implied by its band "
                                f"count")
    index = ndvi(img.data[roles["red"]], img.data[roles["nir"]])
    veg = np.nan_to_num(index, nan=-np.inf) > NDVI_THRESHOLD
    return veg, {"method": "NDVI threshold (Tucker 1979; Sobrino et al. 2004)",
                 "rule": "NDVI > 0.2", "threshold": NDVI_THRESHOLD,
                 "bands": {"red": roles["red"] + 1, "nir": roles["nir"] + 1}}
