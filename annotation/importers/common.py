"""Small helpers shared by the importers (no Django)."""
from __future__ import annotations

import json
import math
import os
from pathlib import Path

from kernel.hashing import file_sha256 as sha256_file  # noqa: F401  (re-exported)
from kernel.hashing import sha256_files  # noqa: F401  (re-exported)
from kernel.paths import OutsideRoot, confine

from .errors import DataImportError

# Damage classes of the studio's GT masks (xBD targets use the same numbering; 5 is Microsoft's
# un-classified). Keys are strings, as JSON stores them.
DAMAGE_CLASS_MAP: dict[str, str] = {
    "0": "background",
    "1": "no-damage",
    "2": "minor-damage",
    "3": "major-damage",
    "4": "destroyed",
    "5": "un-classified",
}
DAMAGE_CLASS_INDEX: dict[str, int] = {v: int(k) for k, v in DAMAGE_CLASS_MAP.items() if k != "0"}
BUILDING_CLASS_MAP: dict[str, str] = {"0": "background", "1": "building"}


def confined_to(path: str | Path, folder: str | Path) -> Path:
    """``path`` if it (after following symlinks) lies inside ``folder``; otherwise raise
    :class:`~annotation.importers.errors.DataImportError` (field ``path``). Guards the files an
    importer picks up by itself (an xBD folder's members, a shapefile's sidecars): a symlink in
    the source folder must not smuggle in a file from elsewhere on the machine."""
    path, folder = Path(path), Path(folder)
    try:
        confine(folder, path)
    except OutsideRoot:
        what = "a symlink to" if path.is_symlink() else "resolves to"
        raise DataImportError(path, "path", f"{what} {path.resolve()}, outside the source folder {folder.resolve()}; "
                                            "refused") from None
    return path


# sha256_file / sha256_files (imported above, re-exported for the importers): kernel/hashing.py


# The old-style GeoJSON ``crs`` member naming lon/lat WGS 84. The benchmark's tools read a GeoJSON
# file without a ``crs`` member as a pixel-space layer (dora-tools.json, vec.* semantics), so every
# geographic layer the studio stores carries this member; pixel-frame layers carry none.
CRS84_MEMBER = {"type": "name", "properties": {"name": "urn:ogc:def:crs:OGC:1.3:CRS84"}}


def with_crs84(fc: dict) -> dict:
    """``fc`` with the CRS84 ``crs`` member placed after ``type`` (a new dict)."""
    out = {"type": fc.get("type", "FeatureCollection"), "crs": CRS84_MEMBER}
    out.update({k: v for k, v in fc.items() if k not in ("type", "crs")})
    return out


def write_json(path: str | Path, data) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".part")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    os.replace(tmp, path)
    return path


def clean_number(v):
    """JSON-safe float (NaN/inf become None)."""
    if v is None:
        return None
    v = float(v)
    return v if math.isfinite(v) else None


def normalize_class_map(raw) -> dict[str, str]:
    """``{index: label}`` with string keys; also accepts ``{label: index}``."""
    if not isinstance(raw, dict) or not raw:
        raise ValueError("class map must be a non-empty JSON object {index: label}")
    out: dict[str, str] = {}
    for k, v in raw.items():
        if isinstance(v, int) and not isinstance(v, bool):
            k, v = v, k
        try:
            idx = int(k)
        except (TypeError, ValueError):
            raise ValueError(f"class map key {k!r} is not an integer index") from None
        out[str(idx)] = str(v)
    return dict(sorted(out.items(), key=lambda kv: int(kv[0])))


# File-name keywords and xBD metadata values → the benchmark's ten disaster types.
_NAME_KEYWORDS = [
    ("wildfire", "wildfire"), ("fire", "wildfire"), ("hurricane", "hurricane"), ("typhoon", "hurricane"),
    ("cyclone", "hurricane"), ("tornado", "tornado"), ("volcano", "volcano"), ("eruption", "volcano"),
    ("earthquake", "earthquake"), ("quake", "earthquake"), ("tsunami", "tsunami"), ("flood", "flood"),
    ("landslide", "landslide"), ("mudslide", "landslide"), ("explosion", "explosion"), ("blast", "explosion"),
    ("heat", "urban heat"),
]
_METADATA_TYPES = {
    "fire": "wildfire", "wildfire": "wildfire", "flooding": "flood", "flood": "flood", "volcano": "volcano",
    "earthquake": "earthquake", "tsunami": "tsunami", "tornado": "tornado", "hurricane": "hurricane",
    "wind": "hurricane",  # xBD's "wind" covers hurricanes and tornadoes; the file name decides first
}


def disaster_type_for(name: str, metadata_type: str | None = None) -> str:
    """Disaster type from a file/event name (``socal-fire`` → wildfire), else from xBD metadata."""
    low = (name or "").lower()
    for key, dtype in _NAME_KEYWORDS:
        if key in low:
            return dtype
    if metadata_type:
        return _METADATA_TYPES.get(metadata_type.lower(), metadata_type.lower())
    return ""
