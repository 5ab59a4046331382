"""Vector files (GeoJSON, Shapefile, GeoPackage, ...) → EPSG:4326 GeoJSON for the map.

The original file (with a shapefile's sidecars) is kept by the caller; this module writes the
reprojected RFC 7946 GeoJSON and reports what it found.
"""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np

from .common import confined_to, with_crs84, write_json
from .errors import DataImportError

SHAPEFILE_SIDECARS = (".shp", ".shx", ".dbf", ".prj", ".cpg", ".qix", ".sbn", ".sbx", ".shp.xml")


def source_files(path: str | Path) -> list[Path]:
    """The file and, for a shapefile, its sidecars that exist."""
    path = Path(path)
    if path.suffix.lower() != ".shp":
        return [path]
    base = path.with_suffix("")
    found = [p for ext in SHAPEFILE_SIDECARS if (p := Path(str(base) + ext)).exists()]
    for p in found:
        if p != path:  # the file named by the operator may live anywhere; its sidecars may not
            try:
                confined_to(p, path.parent)
            except DataImportError:
                confined_to(p, path.resolve().parent)  # beside the file a symlinked .shp points to
    return found


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
    out, split = _split_at_antimeridian(path, out)
    _refuse_invalid(path, out, split)
    invalid = int((~out.geometry.is_valid & out.geometry.notna()).sum())
    info = {
        "source_crs": _crs_string(source_crs) if source_crs is not None else "",
        "crs_assumed": assumed,
        "feature_count": int(len(out)),
        "geometry_types": sorted({t for t in out.geometry.geom_type.dropna().unique()}),
        "fields": [c for c in out.columns if c != out.geometry.name],
        "invalid_geometries": invalid,
        "bounds": _lnglat_bounds(out, split) if len(out) and out.geometry.notna().any() else None,
    }
    if split:
        info["antimeridian_split"] = split
    return out, info


# ---------------------------------------------------------------- antimeridian and validity


def _crosses_antimeridian(geom) -> bool:
    """Whether a line or ring of ``geom`` has a segment jumping more than 180° in longitude: read
    the short way round, it crosses the antimeridian (RFC 7946 §3.1.9 wants such geometries cut
    in two at 180°)."""
    import shapely

    if geom is None or geom.is_empty or geom.geom_type in ("Point", "MultiPoint"):
        return False
    parts = getattr(geom, "geoms", [geom])
    for part in parts:
        if part.geom_type in ("Polygon",):
            rings = [part.exterior, *part.interiors]
        elif part.geom_type in ("LineString", "LinearRing"):
            rings = [part]
        elif hasattr(part, "geoms"):
            if _crosses_antimeridian(part):
                return True
            continue
        else:
            continue
        for ring in rings:
            x = shapely.get_coordinates(ring)[:, 0]
            if len(x) > 1 and np.any(np.abs(np.diff(x)) > 180.0):
                return True
    return False


def _split_at_antimeridian(path, gdf):
    """``(gdf, n)``: geometries that cross the antimeridian cut at ±180° with the ``antimeridian``
    package (polygons that enclose a pole get the pole; clockwise exterior rings are read as
    RFC 7946 counter-clockwise ones), ``n`` how many were cut. Other geometries are untouched."""
    crossing = [i for i, g in enumerate(gdf.geometry) if _crosses_antimeridian(g)]
    if not crossing:
        return gdf, 0
    import antimeridian
    from shapely.geometry import shape

    geoms = list(gdf.geometry)
    for i in crossing:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                geoms[i] = shape(antimeridian.fix_shape(geoms[i], fix_winding=True, great_circle=False))
        except Exception as exc:  # noqa: BLE001 - the package's own errors: name the feature
            raise DataImportError(path, f"feature {i}", f"crosses the antimeridian and cannot be cut at 180° "
                                                        f"({type(exc).__name__}: {exc})") from None
    gdf = gdf.copy()
    gdf = gdf.set_geometry(_series(geoms, gdf.crs, gdf.index))
    return gdf, len(crossing)


def _series(geoms, crs, index):
    """A GeoSeries of ``geoms`` with ``crs`` on ``index``."""
    import geopandas as gpd

    return gpd.GeoSeries(geoms, crs=crs, index=index)


def _refuse_invalid(path, gdf, split: int) -> None:
    """Raise :class:`DataImportError` (field ``feature <i>``, 0-based) for the first invalid
    geometry, with GEOS's reason: the studio measures areas and overlays on these geometries, and
    a silent repair would change the gold answers. Fix the source (e.g. ``shapely.make_valid``,
    QGIS "Fix geometries") and import it again."""
    import shapely

    geoms = gdf.geometry
    bad = geoms.notna() & ~geoms.is_valid
    if not bad.any():
        return
    n = int(bad.sum())
    pos = int(np.flatnonzero(bad.to_numpy())[0])
    reason = shapely.is_valid_reason(geoms.iloc[pos])
    after = " even after cutting it at the antimeridian" if _was_split(gdf, pos, split) else ""
    more = f" ({n} invalid geometries in all)" if n > 1 else ""
    raise DataImportError(path, f"feature {pos}", f"invalid {geoms.iloc[pos].geom_type}{after}: {reason}{more}; "
                                                   "repair it (e.g. shapely.make_valid) and import again")


def _was_split(gdf, pos: int, split: int) -> bool:
    return bool(split) and gdf.geometry.iloc[pos] is not None and (
        gdf.geometry.iloc[pos].bounds[0] <= -180.0 or gdf.geometry.iloc[pos].bounds[2] >= 180.0)


def _lnglat_bounds(gdf, split: int) -> list[float]:
    """[west, south, east, north] of the layer. When geometries were cut at the antimeridian, the
    smallest longitude range that holds every part is chosen around the circle, so a layer
    spanning 170°E–170°W reads ``[170, s, -170, n]`` (``west > east``: RFC 7946 §5.2's
    convention, the one raster bounds use) rather than ``[-180, s, 180, n]``."""
    b = [float(v) for v in gdf.total_bounds]
    if not split:
        return b
    import shapely

    intervals = []
    for g in gdf.geometry:
        if g is None or g.is_empty:
            continue
        for part in getattr(g, "geoms", [g]):
            x0, _, x1, _ = shapely.bounds(part)
            intervals.append((float(x0), float(x1)))
    intervals.sort()
    merged: list[list[float]] = []
    for lo, hi in intervals:
        if merged and lo <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    # the largest gap between consecutive merged ranges, the wrap-around one included
    gaps = [(merged[0][0] + 360.0 - merged[-1][1], len(merged) - 1)]
    gaps += [(merged[k + 1][0] - merged[k][1], k) for k in range(len(merged) - 1)]
    width, k = max(gaps)
    if k == len(merged) - 1:  # the largest gap wraps over ±180: ordinary bounds
        return b
    return [merged[k + 1][0], b[1], merged[k][1], b[3]]


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


def _json_native(v):
    """A property value as plain JSON types (numpy arrays → lists, numpy scalars → numbers)."""
    if isinstance(v, np.ndarray):
        return [_json_native(x) for x in v.tolist()]
    if isinstance(v, np.generic):
        return _json_native(v.item())
    if isinstance(v, float) and not np.isfinite(v):
        return None
    if isinstance(v, list):
        return [_json_native(x) for x in v]
    if isinstance(v, dict):
        return {k: _json_native(x) for k, x in v.items()}
    return v


def write_geojson_4326(gdf, path: str | Path) -> Path:
    """GeoJSON in lon/lat order with the CRS84 ``crs`` member (see ``common.CRS84_MEMBER``).

    Date and time columns are written as ISO 8601 strings (GeoJSON has no date type).
    """
    gdf = gdf.copy()
    for col in gdf.columns:
        if col == gdf.geometry.name:
            continue
        if str(gdf[col].dtype).startswith("datetime") or gdf[col].map(lambda v: hasattr(v, "isoformat")).any():
            gdf[col] = gdf[col].map(_iso_or_none).astype(object)
        elif gdf[col].dtype == object and gdf[col].map(lambda v: isinstance(v, (np.ndarray, np.generic))).any():
            # JSON arrays of a GeoJSON/STAC property come back from GDAL as numpy arrays
            gdf[col] = gdf[col].map(_json_native).astype(object)
    data = json.loads(gdf.to_json(na="null", drop_id=True, to_wgs84=False))
    return write_json(path, with_crs84(data))
