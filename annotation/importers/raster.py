"""Rasters: inspection, stored COG, web-mercator COG for tiles, masks and their class counts.

Georeferenced rasters are stored as a COG in their own CRS (``<stem>.tif``) plus a web-mercator
COG for the tile server (``tiles/<stem>.3857.tif``, GDAL's COG driver with
``TILING_SCHEME=GoogleMapsCompatible`` reprojects and adds an alpha band outside the data).
Rasters without georeferencing (xBD PNGs) are stored as one plain COG without CRS whose pixel
(x=col, y=row) frame is the one Leaflet's ``L.CRS.Simple`` shows; it also serves the tiles.
"""
from __future__ import annotations

import warnings
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from .common import clean_number
from .errors import DataImportError

_COLOR_NAMES = {"red": "R", "green": "G", "blue": "B", "alpha": "A", "gray": "gray", "grey": "gray"}


@contextmanager
def _quiet():
    from rasterio.errors import NotGeoreferencedWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NotGeoreferencedWarning)
        yield


def open_raster(path: str | Path):
    import rasterio
    from rasterio.errors import RasterioIOError

    try:
        with _quiet():
            return rasterio.open(path)
    except RasterioIOError as exc:
        raise DataImportError(path, "raster", f"cannot be opened as a raster ({exc})") from None


def _georef(src):
    """(crs, transform-or-None, gcps) of an open dataset; crs None when not georeferenced."""
    if src.crs is not None and not src.transform.is_identity:
        return src.crs, src.transform, None
    gcps, gcp_crs = src.gcps
    if gcps and gcp_crs is not None:
        return gcp_crs, None, gcps
    if src.crs is not None:  # a CRS with an identity transform: still usable
        return src.crs, src.transform, None
    return None, None, None


def _pixel_size_m(crs, transform, width, height, gcps=None) -> tuple[float, float] | None:
    from pyproj import Geod
    from rasterio.warp import calculate_default_transform

    if gcps is not None:
        dst_t, _, _ = calculate_default_transform(crs, crs, width, height, gcps=gcps)
        transform = dst_t
    rx = float(np.hypot(transform.a, transform.d))
    ry = float(np.hypot(transform.b, transform.e))
    if crs.is_geographic:
        cx, cy = transform @ (width / 2, height / 2)
        geod = Geod(ellps="WGS84")
        x1, y1 = transform @ (width / 2 + 1, height / 2)
        x2, y2 = transform @ (width / 2, height / 2 + 1)
        return float(geod.inv(cx, cy, x1, y1)[2]), float(geod.inv(cx, cy, x2, y2)[2])
    factor = crs.linear_units_factor[1] if crs.linear_units_factor else 1.0
    return rx * factor, ry * factor


# Semi-major axes (metres) accepted as the Earth's: every terrestrial ellipsoid in the EPSG
# registry lies between Everest 1830 modified-ish and Plessis 1817 (6,376,523–6,378,388 m); the
# margin also admits the spheres of web mercator (6,378,137 m) and of old Clarke/Airy variants.
EARTH_SEMI_MAJOR_M = (6_350_000.0, 6_400_000.0)


def check_earth_crs(path, crs) -> None:
    """Refuse a CRS whose ellipsoid is not the Earth's (a Mars or Moon CRS): its coordinates cannot
    be shown on the studio's web-mercator map nor compared with Earth layers.

    Raises :class:`DataImportError` (field ``crs``).
    """
    from pyproj import CRS

    try:
        ell = CRS.from_wkt(crs.to_wkt()).ellipsoid
    except Exception:  # noqa: BLE001 - a CRS pyproj cannot read is reported by the transform later
        return
    if ell is not None and not EARTH_SEMI_MAJOR_M[0] <= ell.semi_major_metre <= EARTH_SEMI_MAJOR_M[1]:
        name = CRS.from_wkt(crs.to_wkt()).name
        raise DataImportError(path, "crs", f"'{name}' is not an Earth CRS (ellipsoid '{ell.name}', semi-major "
                                           f"axis {ell.semi_major_metre:,.0f} m); only Earth rasters can be mapped")


def _normalised(bounds) -> tuple[float, float, float, float]:
    """(left, bottom, right, top) with left ≤ right and bottom ≤ top (south-up or mirrored rasters
    report ``bottom > top`` in ``src.bounds``)."""
    left, bottom, right, top = (float(v) for v in bounds)
    return min(left, right), min(bottom, top), max(left, right), max(bottom, top)


def _sampled_lnglat_bounds(crs, transform, width: int, height: int, n: int = 101) -> list[float] | None:
    """[w, s, e, n] of the pixels that have a lon/lat: an ``n``×``n`` grid of pixel positions (edges
    included) transformed to EPSG:4326, non-finite results dropped. For sources whose corners are
    not on the Earth (geostationary full disks: the corners look at space); None when no point is."""
    from rasterio.warp import transform as warp_transform

    cols, rows = np.meshgrid(np.linspace(0, width, n), np.linspace(0, height, n))
    xs, ys = transform @ (cols.ravel(), rows.ravel())
    lons, lats = warp_transform(crs, "EPSG:4326", list(np.asarray(xs)), list(np.asarray(ys)))
    lons, lats = np.asarray(lons, dtype="float64"), np.asarray(lats, dtype="float64")
    ok = np.isfinite(lons) & np.isfinite(lats) & (np.abs(lons) <= 180.0) & (np.abs(lats) <= 90.0)
    if not ok.any():
        return None
    return [float(lons[ok].min()), float(lats[ok].min()), float(lons[ok].max()), float(lats[ok].max())]


def _lnglat_bounds(src, crs, gcps, path=None) -> list[float]:
    """[west, south, east, north] in degrees. ``west > east`` when the raster crosses the
    antimeridian (the RFC 7946 §5.2 bbox convention, as ``rasterio.warp.transform_bounds`` returns
    it). Raises :class:`DataImportError` (field ``crs``) when no pixel has a lon/lat."""
    from rasterio.warp import calculate_default_transform, transform_bounds

    if gcps is not None:
        t, w, h = calculate_default_transform(crs, "EPSG:4326", src.width, src.height, gcps=gcps)
        west, south, east, north = _normalised([*(t @ (0, 0)), *(t @ (w, h))])
        return [west, south, east, north]
    b = None
    try:
        b = [float(v) for v in transform_bounds(crs, "EPSG:4326", *_normalised(src.bounds), densify_pts=21)]
    except Exception:  # noqa: BLE001 - PROJ fails on points off the Earth: sample instead
        b = None
    if b is None or not all(np.isfinite(b)):
        b = _sampled_lnglat_bounds(crs, src.transform, src.width, src.height)
    if b is None:
        raise DataImportError(path or src.name, "crs", "no pixel of the raster has a longitude/latitude "
                                                       f"in its CRS ({crs_string(crs)[:120]})")
    return b


def band_names(src) -> list[str]:
    names = []
    for i, ci in enumerate(src.colorinterp, start=1):
        desc = src.descriptions[i - 1] if src.descriptions else None
        name = _COLOR_NAMES.get(ci.name)
        if desc:
            name = desc
        if name is None or (name == "gray" and src.count > 1):
            name = f"B{i}"
        names.append(name)
    return names


CRS_STRING_MAX = 500  # Layer.crs is a CharField(max_length=500)


def crs_string(crs) -> str:
    """A short text for ``Layer.crs`` that pyproj/rasterio read back: ``EPSG:<code>``, else another
    authority's code (``ESRI:102039``, ``IGNF:ETRS89LAEA``), else the PROJ string (a geostationary
    ``+proj=geos ...``), else the WKT; at most ``CRS_STRING_MAX`` characters (the full WKT is kept
    in ``raster_info()["crs_wkt"]``)."""
    if crs is None:
        return ""
    epsg = crs.to_epsg()
    if epsg:
        return f"EPSG:{epsg}"
    try:
        auth = crs.to_authority()
    except Exception:  # noqa: BLE001
        auth = None
    if auth:
        return f"{auth[0]}:{auth[1]}"
    for text in (crs.to_proj4(), crs.to_wkt()):
        if text and len(text) <= CRS_STRING_MAX:
            return text
    return crs.to_wkt()[:CRS_STRING_MAX]


def rgb_band_indexes(src) -> list[int] | None:
    """1-based band indexes of the red, green and blue bands by colour interpretation (``[3, 2, 1]``
    for a BGR(A) file), or None when the three are not all declared."""
    order = {ci.name: i + 1 for i, ci in reversed(list(enumerate(src.colorinterp)))}
    if all(c in order for c in ("red", "green", "blue")):
        return [order["red"], order["green"], order["blue"]]
    return None


def has_valid_pixels(src) -> bool:
    """Whether any pixel is valid per the dataset mask (nodata tag, NaN nodata, alpha band or
    internal mask). Reads block by block and stops at the first valid pixel, so a typical raster
    costs one block; an all-nodata one is read whole."""
    from rasterio.windows import Window

    bh, bw = src.block_shapes[0] if src.block_shapes else (256, 256)
    bh, bw = max(bh, 256), max(bw, 256)
    with _quiet():
        for row in range(0, src.height, bh):
            for col in range(0, src.width, bw):
                win = Window(col, row, min(bw, src.width - col), min(bh, src.height - row))
                if src.dataset_mask(window=win).any():
                    return True
    return False


def check_has_data(path: str | Path) -> None:
    """Refuse a raster in which every pixel is nodata (field ``pixels``)."""
    with open_raster(path) as src:
        if not has_valid_pixels(src):
            nd = src.nodata
            why = f"the nodata value {nd:g}" if nd is not None else "masked (alpha band or internal mask)"
            raise DataImportError(path, "pixels", f"every pixel is nodata ({why}): nothing to show or measure")


def check_pixel_limit(path: str | Path, max_pixels: int) -> None:
    """Refuse a raster whose header declares more than ``max_pixels`` pixels (width × height),
    before any pixel is read (field ``size``): a small sparse GeoTIFF may declare 40000 × 40000,
    which takes minutes to scan and 1.5 GiB as a mask. Unreadable files pass (raster_info names
    them)."""
    try:
        with open_raster(path) as src:
            width, height = src.width, src.height
    except Exception:  # noqa: BLE001 - raster_info reports an unreadable file with its reason
        return
    if width * height > max_pixels:
        raise DataImportError(path, "size", f"declares {width} × {height} = {width * height:,} pixels, more than "
                                            f"the limit of {max_pixels:,} (STUDIO_MAX_RASTER_PIXELS)")


def raster_info(path: str | Path) -> dict:
    """What the Layer row needs to know about a raster file.

    Errors of the libraries (an unreadable CRS, a failed transform) become
    :class:`DataImportError` naming the file.
    """
    try:
        return _raster_info(path)
    except DataImportError:
        raise
    except Exception as exc:  # noqa: BLE001 - rasterio/PROJ errors: name the file and the problem
        raise DataImportError(path, "raster", f"cannot be read ({type(exc).__name__}: {exc})"[:1000]) from None


def _raster_info(path: str | Path) -> dict:
    with open_raster(path) as src:
        crs, transform, gcps = _georef(src)
        info = {
            "width": src.width,
            "height": src.height,
            "band_count": src.count,
            "dtype": src.dtypes[0],
            "bands": band_names(src),
            "band_details": [
                {"index": i + 1, "dtype": src.dtypes[i], "nodata": clean_number(src.nodatavals[i]),
                 "colorinterp": src.colorinterp[i].name, "description": src.descriptions[i] or ""}
                for i in range(src.count)
            ],
            "nodata": clean_number(src.nodata),
            "driver": src.driver,
        }
        rgb = rgb_band_indexes(src)
        if rgb is not None and rgb != [1, 2, 3]:
            info["rgb_bands"] = rgb  # what annotation.tiles shows as red, green, blue
        if crs is None:
            info.update(frame="pixel", crs="", gsd_m=None, pixel_size_m=None,
                        bounds=[0.0, 0.0, float(src.width), float(src.height)])
        else:
            check_earth_crs(path, crs)
            px = _pixel_size_m(crs, transform, src.width, src.height, gcps)
            bounds = _lnglat_bounds(src, crs, gcps, path)
            info.update(
                frame="geographic", crs=crs_string(crs),
                pixel_size_m=list(px) if px else None,
                gsd_m=float(np.sqrt(px[0] * px[1])) if px else None,
                bounds=bounds,
                georeferencing="gcps" if gcps is not None else "transform",
            )
            if bounds[0] > bounds[2]:
                info["crosses_antimeridian"] = True
            if not crs.to_epsg():
                info["crs_wkt"] = crs.to_wkt()
            if transform is not None:
                info["transform"] = list(transform)[:6]
        return info


def _cog_options(kind: str) -> dict:
    resampling = "NEAREST" if kind == "mask" else "BILINEAR"
    return {"COMPRESS": "DEFLATE", "RESAMPLING": resampling,
            "OVERVIEW_RESAMPLING": "NEAREST" if kind == "mask" else "AVERAGE", "BLOCKSIZE": 512}


def store_raster(src_path: str | Path, out_dir: str | Path, stem: str, *, kind: str = "raster",
                 band: int | None = None) -> dict:
    """Write ``out_dir/<stem>.tif`` (COG, source CRS or none) and, when georeferenced,
    ``out_dir/tiles/<stem>.3857.tif`` (web-mercator COG). ``band`` keeps one band only (masks).

    Returns :func:`raster_info` of the stored file plus ``path`` and ``tiles_path`` relative to
    ``out_dir``.
    """
    import rasterio
    import rasterio.shutil
    from rasterio.errors import RasterioError

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stored = out_dir / f"{stem}.tif"
    try:
        with open_raster(src_path) as src:
            crs, transform, gcps = _georef(src)
            if band is not None:
                if not 1 <= band <= src.count:
                    raise DataImportError(src_path, "band", f"band {band} does not exist ({src.count} bands)")
                data = src.read(band)
                write_array(stored, data, crs=crs, transform=transform, gcps=gcps,
                            nodata=src.nodatavals[band - 1], kind=kind)
            else:
                with _quiet():
                    src.read(1, window=((0, min(1, src.height)), (0, min(1, src.width))))  # fail early
                    rasterio.shutil.copy(src, stored, driver="COG", **_cog_options(kind))
    except RasterioError as exc:
        raise DataImportError(src_path, "raster", f"cannot be read ({exc})") from None
    return _finish(stored, out_dir, stem, kind)


def write_array(path: str | Path, data: np.ndarray, *, crs=None, transform=None, gcps=None,
                nodata=None, kind: str = "mask") -> Path:
    """Write a 2-D (or bands×rows×cols) array as a COG; no CRS when ``crs`` is None."""
    import rasterio
    import rasterio.shutil
    from rasterio.io import MemoryFile

    arr = data[np.newaxis] if data.ndim == 2 else data
    profile = {"driver": "GTiff", "width": arr.shape[2], "height": arr.shape[1], "count": arr.shape[0],
               "dtype": arr.dtype.name}
    if nodata is not None:
        profile["nodata"] = nodata
    if crs is not None and transform is not None:
        profile.update(crs=crs, transform=transform)
    with _quiet(), MemoryFile() as mem:
        with mem.open(**profile) as dst:
            dst.write(arr)
            if crs is not None and transform is None and gcps is not None:
                dst.gcps = (gcps, crs)
        with mem.open() as tmp:
            rasterio.shutil.copy(tmp, path, driver="COG", **_cog_options(kind))
    return Path(path)


def _finish(stored: Path, out_dir: Path, stem: str, kind: str) -> dict:
    import rasterio.shutil

    info = raster_info(stored)
    info["path"] = stored.relative_to(out_dir).as_posix()
    if info["frame"] == "geographic" and info.get("crosses_antimeridian"):
        # GDAL's GoogleMapsCompatible warp of a raster across 180° spans the whole world at a few
        # zoom levels below the source: rio-tiler reads web-mercator tiles on both sides of the
        # antimeridian straight from the stored COG (with its overviews) instead.
        info["tiles_path"] = info["path"]
    elif info["frame"] == "geographic":
        tiles = out_dir / "tiles" / f"{stem}.3857.tif"
        tiles.parent.mkdir(parents=True, exist_ok=True)
        with open_raster(stored) as src, _quiet():
            rasterio.shutil.copy(src, tiles, driver="COG", TILING_SCHEME="GoogleMapsCompatible",
                                 **_cog_options(kind))
        info["tiles_path"] = tiles.relative_to(out_dir).as_posix()
    else:
        info["tiles_path"] = info["path"]  # pixel frame: the plain COG is shown under L.CRS.Simple
    return info


def store_mask_array(data: np.ndarray, out_dir: str | Path, stem: str, *, crs=None, transform=None) -> dict:
    """Write a class mask array as ``<stem>.tif`` (+ tiles when georeferenced); returns its info."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stored = out_dir / f"{stem}.tif"
    write_array(stored, data.astype(np.uint8, copy=False), crs=crs, transform=transform, kind="mask")
    return _finish(stored, out_dir, stem, "mask")


def read_mask(path: str | Path, band: int = 1) -> np.ndarray:
    """Band ``band`` of a mask file; refuses colour images (a mask has one band of class indices)."""
    from rasterio.errors import RasterioError

    try:
        with open_raster(path) as src:
            if not 1 <= band <= src.count:
                raise DataImportError(path, "band", f"band {band} does not exist ({src.count} bands)")
            if not np.issubdtype(np.dtype(src.dtypes[band - 1]), np.integer):
                raise DataImportError(path, "dtype", f"a mask needs integer class indices, got {src.dtypes[band - 1]}")
            with _quiet():
                return src.read(band)
    except RasterioError as exc:
        raise DataImportError(path, "raster", f"cannot be read ({exc})") from None


def class_counts(mask: np.ndarray, class_map: dict[str, str] | None = None) -> dict[str, int]:
    """Pixel count per class index (string keys); every class of ``class_map`` appears, 0 if absent."""
    values, counts = np.unique(mask, return_counts=True)
    out = {str(k): 0 for k in (class_map or {})}
    for v, c in zip(values.tolist(), counts.tolist()):
        out[str(int(v))] = int(c)
    return dict(sorted(out.items(), key=lambda kv: int(kv[0])))


def check_mask_values(path, counts: dict[str, int], class_map: dict[str, str]) -> None:
    unknown = sorted(int(k) for k, c in counts.items() if c and k not in class_map)
    if unknown:
        raise DataImportError(path, "pixel values", f"values {unknown} are not in the class map "
                                                    f"{ {int(k): v for k, v in class_map.items()} }")
