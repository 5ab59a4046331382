"""Vector files (GeoJSON, Shapefile, GeoPackage, ...) → EPSG:4326 GeoJSON for the map.

The original file (with a shapefile's sidecars) is kept by the caller; this module writes the
reprojected RFC 7946 GeoJSON and reports what it found.
"""
from __future__ import annotations

import json
import warnings
from pathlib import Path

from .common import with_crs84, write_json
from .errors import DataImportError

SHAPEFILE_SIDECARS = (".shp", ".shx", ".dbf", ".prj", ".cpg", ".qix", ".sbn", ".sbx", ".shp.xml")


def source_files(path: str | Path) -> list[Path]:
    """The file and, for a shapefile, its sidecars that exist."""
    path = Path(path)
    if path.suffix.lower() != ".shp":
        return [path]
    base = path.with_suffix("")
    return [p for ext in SHAPEFILE_SIDECARS if (p := Path(str(base) + ext)).exists()]


def list_layers(path: str | Path) -> list[str]:
    import pyogrio

    try:
        return [str(name) for name, _ in pyogrio.list_layers(path)]
    except Exception as exc:
        raise DataImportError(path, "file", f"cannot be read as a vector file ({exc})") from None


def read_vector(path: str | Path, layer: str | None = None):
    """A GeoDataFrame in EPSG:4326 plus facts about the source: (gdf, info)."""
    import geopandas as gpd

    path = Path(path)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            gdf = gpd.read_file(path, layer=layer, engine="pyogrio")
    except Exception as exc:
        raise DataImportError(path, f"layer {layer}" if layer else "file",
                              f"cannot be read as a vector file ({exc})") from None
    if "geometry" not in gdf or gdf.geometry is None:
        raise DataImportError(path, "geometry", "no geometry column")
    source_crs = gdf.crs
    if source_crs is None:
        if len(gdf) and gdf.total_bounds is not None and _looks_lonlat(gdf.total_bounds):
            gdf = gdf.set_crs("EPSG:4326")
            assumed = True
        elif len(gdf):
            raise DataImportError(path, "crs", "no CRS and the coordinates are not longitude/latitude")
        else:
            gdf = gdf.set_crs("EPSG:4326")
            assumed = True
    else:
        assumed = False
    try:
        out = gdf.to_crs("EPSG:4326")
    except Exception as exc:
        raise DataImportError(path, "crs", f"cannot reproject to EPSG:4326 ({exc})") from None
    invalid = int((~out.geometry.is_valid & out.geometry.notna()).sum())
    info = {
        "source_crs": _crs_string(source_crs) if source_crs is not None else "",
        "crs_assumed": assumed,
        "feature_count": int(len(out)),
        "geometry_types": sorted({t for t in out.geometry.geom_type.dropna().unique()}),
        "fields": [c for c in out.columns if c != out.geometry.name],
        "invalid_geometries": invalid,
        "bounds": [float(v) for v in out.total_bounds] if len(out) and out.geometry.notna().any() else None,
    }
    return out, info


def _looks_lonlat(b) -> bool:
    return -180.0 <= b[0] <= 180.0 and -180.0 <= b[2] <= 180.0 and -90.0 <= b[1] <= 90.0 and -90.0 <= b[3] <= 90.0


def _crs_string(crs) -> str:
    epsg = crs.to_epsg()
    if epsg:
        return f"EPSG:{epsg}"
    if crs.to_string().upper() in ("OGC:CRS84", "CRS84"):
        return "OGC:CRS84"
    return crs.to_wkt()


def _iso_or_none(v):
    """ISO 8601 text of a date/time value; None for a missing one (NaT)."""
    import pandas as pd

    if v is None or (not isinstance(v, str) and pd.isna(v)):
        return None
    return v.isoformat() if hasattr(v, "isoformat") else v


def write_geojson_4326(gdf, path: str | Path) -> Path:
    """GeoJSON in lon/lat order with the CRS84 ``crs`` member (see ``common.CRS84_MEMBER``).

    Date and time columns are written as ISO 8601 strings (GeoJSON has no date type).
    """
    gdf = gdf.copy()
    for col in gdf.columns:
        if col != gdf.geometry.name and (str(gdf[col].dtype).startswith("datetime") or gdf[col].map(
                lambda v: hasattr(v, "isoformat")).any()):
            gdf[col] = gdf[col].map(_iso_or_none).astype(object)
    data = json.loads(gdf.to_json(na="null", drop_id=True, to_wgs84=False))
    return write_json(path, with_crs84(data))
