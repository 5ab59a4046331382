"""Raster and vector input/output shared by the tools.

Rasters
    Read with rasterio. A raster is *georeferenced* when it has a CRS. Masks written by the tools
    are uint8; they carry their class map (and pixel size when known) inside the file: GeoTIFF
    tags ``DORA_CLASSES`` / ``DORA_PIXEL_SIZE_M``, or PNG text chunks of the same names. Files are
    written without timestamps, so equal inputs give equal bytes.

Vectors
    GeoJSON is read with ``json`` + shapely (list-valued properties survive). As in the
    benchmark, a GeoJSON without a ``crs`` member is a pixel-space layer (x = column, y = row),
    unless ``ToolContext.geojson_default_crs`` says otherwise. GeoJSON is written by hand: a
    ``crs`` member only for georeferenced layers, properties in column order, NaN as null.
    Other formats (Shapefile, GeoPackage) are read with geopandas.
"""
from __future__ import annotations

import json
import math
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .base import ClassIndexError, ModalityError, ToolContext, ToolInputError, jsonable

CLASS_TAG = "DORA_CLASSES"
PIXEL_TAG = "DORA_PIXEL_SIZE_M"

#: GDAL drivers that cannot store a float32 band (their write refuses it: "PNG driver doesn't
#: support data type Float32"). The benchmark writes ras.slope / ras.focal_stats outputs with the
#: input's own profile, driver included, so a DEM or raster in one of these formats fails there
#: (checked with rasterio 1.4.4 / GDAL 3.10: PNG, JPEG, GIF and BMP refuse Float32, GTiff takes it).
FLOAT32_UNWRITABLE_DRIVERS = frozenset({"PNG", "JPEG", "GIF", "BMP"})


#: lossy GeoTIFF codecs: re-encoding changes pixel values
LOSSY_COMPRESSIONS = frozenset({"jpeg", "webp"})


def lossy_creation_options(path: Path) -> dict | None:
    """The creation options (compress, photometric, tiling, interleave) of a GeoTIFF stored
    with a lossy codec (:data:`LOSSY_COMPRESSIONS`), else None.

    ``ras.resample`` in the benchmark writes with the source's ``src.profile.copy()``, so a
    JPEG-compressed source is re-encoded as JPEG and its pixel values change by the codec's
    loss; writing with the same options reproduces those values (same GDAL encoder)."""
    import rasterio

    ctx = _quiet()
    try:
        with rasterio.open(path) as src:
            prof = src.profile
    finally:
        ctx.__exit__(None, None, None)
    if str(prof.get("compress") or "").lower() not in LOSSY_COMPRESSIONS:
        return None
    return {k: prof[k] for k in ("compress", "photometric", "tiled", "blockxsize", "blockysize",
                                 "interleave") if prof.get(k) is not None}


def source_profile_unwritable(meta: RasterMeta, *, float32: bool = False) -> str | None:
    """Why the benchmark's write of a one-band (or recompressed) result with ``meta``'s source
    profile fails, or None when it works.

    The benchmark's raster tools copy the input's rasterio profile for their output
    (``_safe_raster_profile`` and ``src.profile.copy()`` in ``dora/tools/analysis.py``@2b24be70),
    which keeps ``photometric``: a JPEG/YCbCr-compressed GeoTIFF then makes GDAL refuse the output
    ("PHOTOMETRIC=YCBCR requires COMPRESS=JPEG", "... not supported on a 1-band raster"), as it
    does for ras.threshold, ras.clip, ras.diff, mask.compose_multiclass, ras.slope, ras.hillshade
    and ras.focal_stats (checked with rasterio 1.4.4 / GDAL 3.10). ``float32``: the result is
    float32 and is written with the input's own driver (ras.slope, ras.focal_stats), which
    :data:`FLOAT32_UNWRITABLE_DRIVERS` refuse.
    """
    if float32 and meta.driver in FLOAT32_UNWRITABLE_DRIVERS:
        return f"{meta.driver} driver doesn't support data type Float32"
    if meta.photometric == "ycbcr":
        return "PHOTOMETRIC=YCBCR (JPEG-compressed source) cannot be written with this output"
    return None


# ============================================================================================
# Rasters
# ============================================================================================
@dataclass
class RasterMeta:
    path: Path
    width: int
    height: int
    count: int
    dtype: str
    crs: Any  # rasterio CRS or None
    transform: Any  # affine.Affine
    nodata: float | None
    driver: str
    #: the TIFF photometric interpretation ("ycbcr", "rgb", "minisblack", ...) or None
    photometric: str | None = None

    @property
    def georeferenced(self) -> bool:
        return self.crs is not None

    @property
    def shape(self) -> tuple[int, int]:
        return (self.height, self.width)


def _quiet():
    import rasterio.errors

    ctx = warnings.catch_warnings()
    ctx.__enter__()
    warnings.simplefilter("ignore", rasterio.errors.NotGeoreferencedWarning)
    return ctx


def raster_meta(path: Path, *, tool: str | None = None, argument: str | None = None) -> RasterMeta:
    import rasterio

    ctx = _quiet()
    try:
        with rasterio.open(path) as src:
            photometric = getattr(src.photometric, "name", None)
            return RasterMeta(Path(path), src.width, src.height, src.count, src.dtypes[0],
                              src.crs, src.transform, src.nodata, src.driver,
                              photometric.lower() if photometric else None)
    except rasterio.errors.RasterioIOError as exc:
        raise ToolInputError(f"cannot read {Path(path).name} as a raster: {exc}", tool=tool,
                             argument=argument, expected="a raster image (GeoTIFF, PNG, ...)") from exc
    finally:
        ctx.__exit__(None, None, None)


def read_raster(path: Path, *, bands: list[int] | None = None, tool: str | None = None,
                argument: str | None = None) -> tuple[np.ndarray, RasterMeta]:
    """(array of shape (bands, H, W), meta)."""
    import rasterio

    meta = raster_meta(path, tool=tool, argument=argument)
    ctx = _quiet()
    try:
        with rasterio.open(path) as src:
            if bands:
                for b in bands:
                    if b < 1 or b > src.count:
                        raise ToolInputError(f"band {b} is out of range: {Path(path).name} has "
                                             f"{src.count} band(s)", tool=tool, argument="band",
                                             expected=f"1..{src.count}")
                arr = src.read(bands)
            else:
                arr = src.read()
    finally:
        ctx.__exit__(None, None, None)
    return arr, meta


def read_band(path: Path, band: int = 1, *, tool: str | None = None,
              argument: str | None = None) -> tuple[np.ndarray, RasterMeta]:
    arr, meta = read_raster(path, bands=[int(band)], tool=tool, argument=argument)
    return arr[0], meta


def read_mask(path: Path, *, tool: str | None = None,
              argument: str | None = None) -> tuple[np.ndarray, RasterMeta]:
    """A single-band class-index mask as a 2-D array.

    A multi-band file is accepted only when all its bands are equal (a grey mask saved as RGB);
    otherwise ``ModalityError``.
    """
    arr, meta = read_raster(path, tool=tool, argument=argument)
    if arr.shape[0] == 1:
        return arr[0], meta
    first = arr[0]
    if all(np.array_equal(first, arr[i]) for i in range(1, arr.shape[0])):
        return first, meta
    raise ModalityError(f"{Path(path).name} has {arr.shape[0]} different bands; a class-index "
                        f"mask has one", tool=tool, argument=argument,
                        expected="a single-band class-index mask")


def read_mask_tags(path: Path) -> tuple[dict[int, str] | None, float | None]:
    """(class map, pixel size) stored in a mask written by these tools, else (None, None)."""
    path = Path(path)
    raw_classes = raw_px = None
    if path.suffix.lower() == ".png":
        try:
            from PIL import Image

            with Image.open(path) as im:
                text = getattr(im, "text", None) or {}
                raw_classes = text.get(CLASS_TAG)
                raw_px = text.get(PIXEL_TAG)
        except Exception:
            pass
    else:
        import rasterio

        ctx = _quiet()
        try:
            with rasterio.open(path) as src:
                tags = src.tags()
                raw_classes = tags.get(CLASS_TAG)
                raw_px = tags.get(PIXEL_TAG)
        except Exception:
            pass
        finally:
            ctx.__exit__(None, None, None)
    class_map = None
    if raw_classes:
        try:
            class_map = {int(k): str(v) for k, v in json.loads(raw_classes).items()}
        except (ValueError, TypeError):
            class_map = None
    px = None
    if raw_px:
        try:
            px = float(raw_px)
        except ValueError:
            px = None
    return class_map, px


def values_present(arr: np.ndarray) -> list[int]:
    if arr.dtype == np.uint8:
        counts = np.bincount(arr.ravel(), minlength=256)
        return [int(v) for v in np.flatnonzero(counts)]
    vals = np.unique(arr[np.isfinite(arr)] if arr.dtype.kind == "f" else arr)
    return [int(v) for v in vals if float(v).is_integer()]


def check_classes(classes: list[int], arr: np.ndarray, class_map: dict[int, str] | None, *,
                  mask_name: str, tool: str, argument: str = "classes") -> list[int]:
    """Raise ``ClassIndexError`` when ``classes`` holds indices the mask does not know.

    With a class map (masks written by these tools carry one), the known indices are the map's
    keys plus the values present; without one, only the values present. Returns the values
    present.
    """
    present = values_present(arr)
    known = set(present) | (set(class_map) if class_map else set())
    absent = [int(c) for c in classes if int(c) not in known]
    if absent:
        absent_u = sorted(set(absent))
        msg = (f"class indices {absent_u} are absent from mask {mask_name}, which holds "
               f"values {present}")
        if class_map:
            msg += f" and whose class map is {json.dumps({str(k): v for k, v in sorted(class_map.items())})}"
        raise ClassIndexError(msg, absent=absent_u, present=present, tool=tool, argument=argument,
                              expected=f"indices among {sorted(known)}")
    return present


def write_mask(path: Path, arr: np.ndarray, *, like: RasterMeta | None = None,
               class_map: dict[int, str] | None = None, pixel_size_m: float | None = None,
               nodata: int | None = None) -> Path:
    """Write a uint8 mask: GeoTIFF (georeferencing of ``like`` kept) for ``.tif``, PNG for
    ``.png``. The class map and pixel size travel inside the file."""
    path = Path(path)
    arr = np.ascontiguousarray(arr.astype(np.uint8))
    tags = {}
    if class_map:
        tags[CLASS_TAG] = json.dumps({str(k): v for k, v in sorted(class_map.items())},
                                     separators=(",", ":"))
    if pixel_size_m is not None:
        tags[PIXEL_TAG] = repr(float(pixel_size_m))
    if path.suffix.lower() == ".png":
        from PIL import Image
        from PIL.PngImagePlugin import PngInfo

        info = PngInfo()
        for k, v in tags.items():
            info.add_text(k, v)
        Image.fromarray(arr, mode="L").save(path, format="PNG", pnginfo=info)
        return path
    import rasterio

    profile = {"driver": "GTiff", "height": arr.shape[0], "width": arr.shape[1], "count": 1,
               "dtype": "uint8", "compress": "deflate"}
    if like is not None and like.georeferenced:
        profile["crs"] = like.crs
        profile["transform"] = like.transform
    if nodata is not None:
        profile["nodata"] = nodata
    ctx = _quiet()
    try:
        with rasterio.open(path, "w", **profile) as dst:
            dst.write(arr, 1)
            if tags:
                dst.update_tags(**tags)
    finally:
        ctx.__exit__(None, None, None)
    return path


def write_raster(path: Path, arr: np.ndarray, *, like: RasterMeta | None = None,
                 nodata: float | None = None, transform=None, crs=None,
                 creation: dict | None = None) -> Path:
    """Write a (bands, H, W) or (H, W) array as GeoTIFF, keeping ``like``'s georeferencing.
    ``creation``: GTiff creation options that replace the default deflate compression (see
    :func:`lossy_creation_options`)."""
    import rasterio

    if arr.ndim == 2:
        arr = arr[None]
    profile = {"driver": "GTiff", "height": arr.shape[1], "width": arr.shape[2],
               "count": arr.shape[0], "dtype": str(arr.dtype), "compress": "deflate"}
    if like is not None and like.georeferenced:
        profile["crs"] = like.crs
        profile["transform"] = like.transform
    if crs is not None:
        profile["crs"] = crs
    if transform is not None:
        profile["transform"] = transform
    if nodata is not None:
        profile["nodata"] = nodata
    if creation:
        profile.update(creation)
    ctx = _quiet()
    try:
        with rasterio.open(path, "w", **profile) as dst:
            dst.write(arr)
    finally:
        ctx.__exit__(None, None, None)
    return path


# ============================================================================================
# Vectors
# ============================================================================================
def _crs_from_member(member: Any):
    from pyproj import CRS

    if not member:
        return None
    if isinstance(member, dict):
        props = member.get("properties") or {}
        name = props.get("name") or props.get("href")
        if name:
            return CRS.from_user_input(name)
        return None
    return CRS.from_user_input(member)


def read_vector(ctx: ToolContext, value: Any, *, tool: str, argument: str):
    """GeoDataFrame of the layer named by ``value`` (resolved through ``ctx``)."""
    path = ctx.resolve(value, tool=tool, argument=argument)
    return read_vector_path(path, ctx=ctx, tool=tool, argument=argument), path


def read_vector_path(path: Path, *, ctx: ToolContext | None = None, tool: str | None = None,
                     argument: str | None = None):
    import geopandas as gpd
    from shapely.geometry import shape

    path = Path(path)
    if path.suffix.lower() in (".geojson", ".json"):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            raise ToolInputError(f"{path.name} is not valid JSON: {exc}", tool=tool,
                                 argument=argument, expected="a GeoJSON file") from exc
        crs = None
        if isinstance(data, dict):
            if data.get("type") == "Feature":
                features = [data]
            else:
                features = data.get("features")
            if "crs" in data:
                try:
                    crs = _crs_from_member(data["crs"])
                except Exception as exc:
                    raise ToolInputError(f"{path.name}: unreadable crs member: {exc}", tool=tool,
                                         argument=argument) from exc
        elif isinstance(data, list):
            features = data
        else:
            features = None
        if not isinstance(features, list):
            raise ToolInputError(f"{path.name} is not a GeoJSON FeatureCollection", tool=tool,
                                 argument=argument, expected="a GeoJSON FeatureCollection")
        if crs is None and ctx is not None and ctx.geojson_default_crs:
            from pyproj import CRS

            crs = CRS.from_user_input(ctx.geojson_default_crs)
        rows, geoms = [], []
        for i, feat in enumerate(features):
            if not isinstance(feat, dict):
                raise ToolInputError(f"{path.name}: feature {i} is not an object", tool=tool,
                                     argument=argument)
            props = feat.get("properties") or {}
            geom = feat.get("geometry")
            try:
                geoms.append(shape(geom) if geom else None)
            except Exception as exc:
                raise ToolInputError(f"{path.name}: feature {i} has an invalid geometry: {exc}",
                                     tool=tool, argument=argument) from exc
            rows.append(dict(props))
        import pandas as pd

        df = pd.DataFrame(rows) if rows else pd.DataFrame()
        if "geometry" in df.columns:
            df = df.rename(columns={"geometry": "geometry_property"})
        return gpd.GeoDataFrame(df, geometry=gpd.GeoSeries(geoms, crs=crs), crs=crs)
    try:
        gdf = gpd.read_file(path)
    except Exception as exc:
        raise ToolInputError(f"cannot read {path.name} as a vector layer: {exc}", tool=tool,
                             argument=argument, expected="GeoJSON, Shapefile or GeoPackage") from exc
    return gdf


def _crs_name(crs) -> str:
    text = crs.to_string()
    if text == "OGC:CRS84":
        return "urn:ogc:def:crs:OGC:1.3:CRS84"
    epsg = crs.to_epsg()
    if epsg:
        return f"urn:ogc:def:crs:EPSG::{epsg}"
    return text


def _prop_value(v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, float) and math.isnan(v):
        return None
    try:
        import pandas as pd

        if v is pd.NA or v is pd.NaT:
            return None
    except Exception:  # pragma: no cover
        pass
    if isinstance(v, np.ndarray):
        return jsonable(v)
    try:
        return jsonable(v)
    except TypeError:
        return str(v)


def write_vector(path: Path, gdf) -> Path:
    """Write ``gdf`` as GeoJSON (a ``crs`` member only when it has a CRS that an authority
    names). As GDAL's GeoJSON driver does for the benchmark's ``_save_gdf``
    (``dora/tools/analysis.py``@2b24be70, pyogrio), a CRS without an authority code
    (pyproj ``to_authority()`` None: a Mars or geostationary CRS) is left out, so the layer
    reads back as pixel space; an equivalent of an EPSG code is written as that code."""
    from shapely.geometry import mapping

    geom_col = gdf.geometry.name
    cols = [c for c in gdf.columns if c != geom_col]
    features = []
    for idx in range(len(gdf)):
        row = gdf.iloc[idx]
        geom = row[geom_col]
        props = {str(c): _prop_value(row[c]) for c in cols}
        features.append({"type": "Feature", "properties": props,
                         "geometry": jsonable(mapping(geom)) if geom is not None and not geom.is_empty
                         else None})
    doc: dict[str, Any] = {"type": "FeatureCollection"}
    if gdf.crs is not None and gdf.crs.to_authority() is not None:
        doc["crs"] = {"type": "name", "properties": {"name": _crs_name(gdf.crs)}}
    doc["features"] = features
    Path(path).write_text(json.dumps(doc, ensure_ascii=False, separators=(",", ":")),
                          encoding="utf-8")
    return Path(path)


def metric_frame(gdf, pixel_size_m: float | None = None):
    """(layer, metres per coordinate unit).

    Pixel-space layers (no CRS) are scaled by ``pixel_size_m`` (None when unknown); projected
    layers are measured in their own unit; geographic layers are projected to their UTM zone.
    """
    if gdf.crs is None:
        return gdf, (float(pixel_size_m) if pixel_size_m is not None else None)
    if gdf.crs.is_geographic:
        if len(gdf) == 0:
            return gdf, 1.0
        return gdf.to_crs(gdf.estimate_utm_crs()), 1.0
    factor = gdf.crs.axis_info[0].unit_conversion_factor if gdf.crs.axis_info else 1.0
    return gdf, float(factor or 1.0)


def layer_pixel_size(gdf) -> float | None:
    """First non-null ``pixel_size_m`` property of a layer, if any."""
    if "pixel_size_m" not in gdf.columns:
        return None
    for v in gdf["pixel_size_m"]:
        try:
            f = float(v)
        except (TypeError, ValueError):
            continue
        if math.isfinite(f) and f > 0:
            return f
    return None
