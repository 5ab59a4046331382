"""PNG rendering of raster and mask layers for the map viewer.

Two delivery schemes, one per layer frame:

* **Geographic layers** are served as XYZ web-mercator tiles, ``render_tile(layer, z, x, y)``,
  read with rio-tiler's ``Reader`` from the layer's web-mercator COG (``layer.tiles_path``; the stored
  file ``layer.path`` is the fallback). A tile outside the raster is a *transparent* 256×256 PNG (HTTP
  200, not 404). Zooms far below the source's minimum zoom (more than ``MIN_ZOOM_SLACK`` levels
  below it, where the raster would be a few pixels wide and the read would be the whole overview) are
  *refused by returning the transparent tile* without reading pixels: the map never shows a broken
  tile, and the Leaflet layer is given the same ``minZoom`` so it does not ask for them anyway.
* **Pixel-frame layers** (non-georeferenced imagery such as xBD PNGs) are served as *one* PNG,
  ``render_image(layer)``, downsampled so its longest side is at most ``IMAGE_MAX_SIZE``; the viewer
  places it with ``L.imageOverlay`` in ``L.CRS.Simple`` over ``[[0, 0], [height, width]]``. For 1024²
  chips that is a single ~1–2 MB PNG, simpler and as fast as a pixel tile pyramid.
* **Pixel-frame layers with a display georeference** (``display_georeference(layer)``: the affine
  pixel → lon/lat fit the xBD importer stores in ``metadata["georeference"]``, fitted from the
  label's paired ``xy``/``lng_lat`` vertices) are *also* served as web-mercator tiles: the file is
  read through a ``WarpedVRT`` with that transform and CRS, exactly as rio-tiler reads a file with
  GCPs, so socal-fire's imagery and masks lie under its lon/lat vectors. The layer stays in the
  pixel frame for the tools (the benchmark reads the PNG's pixels); only the map places it.

Masks (single-band class indices) are coloured with ``class_colours(layer)``: the one palette by
index (``kernel.palette``, the benchmark's ``vis`` colours; ``CLASS_COLOURS``), overridden by
well-known labels of the layer's ``class_map`` (so "destroyed" is purple whatever its index); class
0 / background is transparent. Masks are never rescaled
and tiles use nearest-neighbour resampling (rio-tiler's default), so class values survive.

Nodata is deliberate: we never invent one. The nodata tag stored in the COG (the importer's
declaration) and any alpha band or internal mask are honoured by rio-tiler; ``layer.metadata["nodata"]``
overrides the tag when the layer declares it. So black pixels of an image without nodata stay black.

Non-``uint8`` rasters (uint16 optical, float DEM, SAR) are linearly stretched between the 2nd and 98th
percentile of each band (computed once per file and cached), or ``layer.metadata["rescale"]`` =
``[[min, max], ...]`` when set. Single-band DEM/slope layers get a colour ramp; other single bands are
grey.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import math
import threading
import warnings
from collections import OrderedDict
from pathlib import Path

import numpy as np
from django.conf import settings
from rasterio.errors import NotGeoreferencedWarning
from rio_tiler.errors import NoOverviewWarning

from kernel.palette import display_hex, label_hex
from kernel.paths import OutsideRoot, confine
from studio import storage

# Expected, harmless warnings of the readers, silenced once here rather than with
# ``warnings.catch_warnings`` per request (which is not thread-safe under a threaded server).
warnings.filterwarnings("ignore", category=PendingDeprecationWarning, module=r"rasterio\.windows")
warnings.filterwarnings("ignore", category=NoOverviewWarning)  # small files read whole anyway
warnings.filterwarnings("ignore", category=NotGeoreferencedWarning)  # pixel-frame images, by design

IMAGE_MAX_SIZE = 2048
TILE_SIZE = 256
MIN_ZOOM_SLACK = 3

# The palette by class index (kernel/palette.py: the benchmark's vis palette, 0 transparent,
# 1 gold/no-damage, 2 orange/minor, 3 crimson/major, 4 purple/destroyed, 5 blue/un-classified, ...).
CLASS_COLOURS: dict[int, str | None] = {i: display_hex(i) for i in (*range(12), 255)}


# Vector features by their damage label (xBD ``subtype``), the masks' colours.
VECTOR_COLOUR_MAP = {
    "no-damage": CLASS_COLOURS[1],
    "minor-damage": CLASS_COLOURS[2],
    "major-damage": CLASS_COLOURS[3],
    "destroyed": CLASS_COLOURS[4],
    "un-classified": CLASS_COLOURS[5],
}
#: numeric damage codes, read only from the properties that hold them: the xView2 model's vectorised
#: output (``dmg``: 1 no-damage … 4 destroyed, ../shared/realdata/xview2-deploy-joplin/SOURCE.md)
VECTOR_CODE_COLOURS = {"dmg": {str(k): CLASS_COLOURS[k] for k in (1, 2, 3, 4)}}
VECTOR_CODE_LABELS = {1: "no-damage", 2: "minor-damage", 3: "major-damage", 4: "destroyed"}
#: building boxes (xBD's ``_bounding_boxes.csv``): outlines in a colour of their own, not in the
#: damage class they carry (which was the major-damage orange of the mask under them); lime, which no
#: class of the palette (kernel/palette.py) uses
BUILDING_BOX_COLOUR = "#76ff03"
#: replay step outputs on the map, by step index (distinct from the layers' and the damage palette)
OVERLAY_COLOURS = ("#ff3d7f", "#ffb300", "#00c853", "#aa00ff", "#00b8d4", "#ff6d00", "#2962ff", "#c51162")


class LayerFileError(Exception):
    """The layer's file is missing or lies outside STUDIO_DATA_ROOT."""


index_colour = display_hex
_label_colour = label_hex


def class_colours(layer) -> dict[int, str | None]:
    """``{class index: "#rrggbb" or None (transparent)}`` for every class of a mask layer.

    Covers the class map's indices and the indices counted in ``class_counts``.
    """
    indices: dict[int, str] = {}
    for key, label in (layer.class_map or {}).items():
        try:
            indices[int(key)] = str(label)
        except (TypeError, ValueError):
            continue
    for key in (layer.class_counts or {}):
        try:
            indices.setdefault(int(key), "")
        except (TypeError, ValueError):
            continue
    return label_colours(indices)


def label_colours(labels: dict[int, str]) -> dict[int, str | None]:
    """``{class index: "#rrggbb" or None (transparent)}`` for a ``{index: label}`` class map: the
    label's colour when it names a known class (``kernel.palette.label_hex``: "destroyed" is purple at any
    index), else the index's (``index_colour``); an empty label goes by its index. Shared by the
    event's masks (``class_colours``) and the replay's mask artifacts (``replay.rendering``), so
    a tool's "totally destroyed" is drawn as xBD's "destroyed"."""
    out: dict[int, str | None] = {}
    for index, label in sorted(labels.items()):
        found, colour = _label_colour(label) if label else (False, None)
        out[index] = colour if found else index_colour(index)
    return out


def legend(layer) -> list[dict]:
    """Legend rows of a mask layer: ``[{"value", "label", "colour", "count"}]`` (colour None: transparent)."""
    colours = class_colours(layer)
    labels = {}
    for key, label in (layer.class_map or {}).items():
        try:
            labels[int(key)] = str(label)
        except (TypeError, ValueError):
            continue
    counts = {}
    for key, count in (layer.class_counts or {}).items():
        try:
            counts[int(key)] = count
        except (TypeError, ValueError):
            continue
    return [
        {"value": i, "label": labels.get(i, f"class {i}"), "colour": c, "count": counts.get(i)}
        for i, c in colours.items()
    ]


def rgba(hex_colour: str | None) -> tuple[int, int, int, int]:
    """``(r, g, b, 255)`` of ``"#rrggbb"``; ``(0, 0, 0, 0)`` for None (transparent)."""
    if not hex_colour:
        return (0, 0, 0, 0)
    h = hex_colour.lstrip("#")
    return (int(h[0:2], 16), int(h[2:4], 16), int(h[4:6], 16), 255)


def colormap_for(layer) -> dict[int, tuple[int, int, int, int]]:
    """A full 256-entry RGBA colormap for a uint8 mask: known classes coloured, the rest by index."""
    cmap = {i: rgba(index_colour(i)) for i in range(256)}
    for i, colour in class_colours(layer).items():
        if 0 <= i < 256:
            cmap[i] = rgba(colour)
    return cmap


# ---------------------------------------------------------------------------------------------
# files


def layer_file(layer, prefer_tiles: bool = True) -> Path:
    """The absolute file to read for a layer, confined to STUDIO_DATA_ROOT."""
    rel = (layer.tiles_path if prefer_tiles and layer.tiles_path else "") or layer.path
    if not rel:
        raise LayerFileError("layer has no stored file")
    try:
        path = confine(settings.STUDIO_DATA_ROOT, rel)
    except OutsideRoot:
        raise LayerFileError("layer file lies outside STUDIO_DATA_ROOT") from None
    if not path.is_file():
        raise LayerFileError("layer file is missing")
    return path


@functools.lru_cache(maxsize=1)
def _empty_png() -> bytes:
    from rio_tiler.utils import render

    data = np.zeros((1, TILE_SIZE, TILE_SIZE), dtype="uint8")
    mask = np.zeros((TILE_SIZE, TILE_SIZE), dtype="uint8")
    return render(data, mask, img_format="PNG")


def transparent_tile() -> bytes:
    """A fully transparent 256×256 PNG."""
    return _empty_png()


def _stamp(path) -> tuple[str, float, int]:
    """What identifies a tile source's content: ``(path, mtime, size)`` of a local file; a
    ``(/vsis3/… path, content, 0)`` bucket source (``_BucketFile``) is its own stamp."""
    if isinstance(path, _BucketFile):
        return (str(path), path.content, 0)
    st = path.stat()
    return (str(path), st.st_mtime, st.st_size)


class _BucketFile(str):
    """A layer file read from the bucket: its GDAL path (``/vsis3/BUCKET/[PREFIX/]key``,
    ``studio.storage.gdal_path``) carrying what names its content, ``"<Layer.sha256>:<import
    fingerprint>"`` (the tile file is built from the stored file by the import's options and
    importer version, both in ``metadata.fingerprint``), so the tiles need no HEAD per request and a
    re-import that changes either opens the new object afresh."""

    content: str = ""
    name: str = ""


def _source(layer, prefer_tiles: bool = True):
    """The tile source of a layer: its local file (``layer_file``) without a bucket, else a
    :class:`_BucketFile` that GDAL reads straight from the bucket (ranged GETs, inside
    ``storage.gdal_env()``); a missing object is said by GDAL when opened (``LayerFileError``)."""
    if not storage.uses_bucket():
        return layer_file(layer, prefer_tiles)
    rel = (layer.tiles_path if prefer_tiles and layer.tiles_path else "") or layer.path
    if not rel:
        raise LayerFileError("layer has no stored file")
    try:
        out = _BucketFile(storage.gdal_path(rel))
    except ValueError:
        raise LayerFileError("layer file lies outside STUDIO_DATA_ROOT") from None
    out.content = f"{layer.sha256 or ''}:{(layer.metadata or {}).get('fingerprint') or ''}"
    out.name = rel.rsplit("/", 1)[-1]
    return out


@contextlib.contextmanager
def _env():
    """GDAL's configuration for the layer's source: none for a local file; the bucket's
    (``storage.gdal_env``) otherwise, where an object GDAL cannot read (gone, refused) is a
    ``LayerFileError``, as a missing local file is."""
    if not storage.uses_bucket():
        yield
        return
    from rasterio.errors import RasterioIOError

    with storage.gdal_env():
        try:
            yield
        except RasterioIOError as exc:
            raise LayerFileError(f"cannot read the layer file from the bucket: {exc}") from exc


def display_georeference(layer) -> tuple[str, tuple[float, ...]] | None:
    """``(crs, (a, b, c, d, e, f))`` that places a pixel-frame raster or mask on the globe, or None.

    Read from ``layer.metadata["georeference"]`` (written by the xBD importer,
    ``annotation.importers.xbd.fit_affine``): ``transform`` is the affine pixel (column, row;
    corner origin) → (lon, lat) map in rasterio's ``Affine`` order (lon = a·col + b·row + c,
    lat = d·col + e·row + f) and ``crs`` its target (EPSG:4326). Only for display: geographic
    layers, vectors and pixel layers without a fit return None.
    """
    if layer.kind not in ("raster", "mask") or layer.frame != "pixel":
        return None
    geo = (layer.metadata or {}).get("georeference") or {}
    transform, crs = geo.get("transform"), geo.get("crs")
    if not crs or not isinstance(transform, (list, tuple)) or len(transform) != 6:
        return None
    try:
        values = tuple(float(v) for v in transform)
    except (TypeError, ValueError):
        return None
    if not all(math.isfinite(v) for v in values) or values[0] * values[4] - values[1] * values[3] == 0:
        return None  # a degenerate fit places nothing
    return str(crs), values


def has_tiles(layer) -> bool:
    """Whether ``render_tile`` serves the layer: a geographic raster/mask, or a pixel-frame one
    with a display georeference."""
    if layer.kind not in ("raster", "mask"):
        return False
    return layer.frame == "geographic" or display_georeference(layer) is not None


#: open tile files kept per server thread (``_kept_dataset``); a map pans over a few layers at a time
DATASETS_PER_THREAD = 8
_DATASETS = threading.local()


def _kept_dataset(path: Path):
    """The rasterio dataset of ``path``, opened once per thread and kept open for the next tiles.

    Opening a COG (the header, its IFDs and overviews) was 1–2 ms of a 12–15 ms tile when every
    request opened it (bench/tiles.py, issue 16); a kept dataset also keeps its decoded blocks in
    GDAL's block cache for neighbouring tiles. The pixels read are the same (same file, same
    reader): the tile's PNG bytes do not change. rasterio datasets are not thread-safe, so each
    thread keeps its own, at most ``DATASETS_PER_THREAD`` (least recently used closed first),
    keyed by path, inode, size and modification time, so a replaced file is opened afresh.
    Raises ``rasterio.errors.RasterioIOError`` when the file cannot be opened.
    """
    import rasterio

    if isinstance(path, _BucketFile):
        key = (str(path), path.content)
    else:
        st = path.stat()
        key = (str(path), st.st_ino, st.st_size, st.st_mtime_ns)
    kept = getattr(_DATASETS, "open", None)
    if kept is None:
        kept = _DATASETS.open = OrderedDict()
    ds = kept.get(key)
    if ds is not None and not ds.closed:
        kept.move_to_end(key)
        return ds
    ds = kept[key] = rasterio.open(path)
    while len(kept) > DATASETS_PER_THREAD:
        _, old = kept.popitem(last=False)
        old.close()
    return ds


@contextlib.contextmanager
def _tile_reader(path: Path, georef: tuple[str, tuple[float, ...]] | None):
    """rio-tiler's ``Reader`` on the file, or on a ``WarpedVRT`` that gives it ``georef``'s transform
    and CRS (rio-tiler's own way with GCP files: an alpha band, or the file's nodata, marks the
    outside of the image)."""
    import rasterio
    from affine import Affine
    from rasterio.vrt import WarpedVRT
    from rio_tiler.io import Reader

    if georef is None:
        with Reader(None, dataset=_kept_dataset(path)) as src:
            yield src
        return
    crs, t = georef
    src_transform = Affine(*t)
    with rasterio.open(path) as ds:
        # The target grid is given in full (north-up, in the fit's CRS, at the fit's pixel size),
        # else GDAL would build it from the file itself, which has no transform.
        corners = [src_transform @ (c, r) for c, r in ((0, 0), (ds.width, 0), (ds.width, ds.height), (0, ds.height))]
        west, east = min(p[0] for p in corners), max(p[0] for p in corners)
        south, north = min(p[1] for p in corners), max(p[1] for p in corners)
        res = math.sqrt(abs(src_transform.determinant))
        options = {"src_crs": crs, "src_transform": src_transform, "crs": crs, "add_alpha": True,
                   "transform": Affine(res, 0, west, 0, -res, north),
                   "width": max(1, math.ceil((east - west) / res)), "height": max(1, math.ceil((north - south) / res))}
        if ds.nodata is not None:
            options.update(nodata=ds.nodata, src_nodata=ds.nodata, add_alpha=False)
        with WarpedVRT(ds, **options) as vrt, Reader(None, dataset=vrt) as src:
            yield src


@functools.lru_cache(maxsize=256)
def _source_info(stamp: tuple[str, float, int], georef: tuple | None = None) -> dict:
    """Zoom range, band layout, dtype and per-band p2/p98 of one file (cached by path+mtime+size
    and the display georeference, if any)."""
    from rio_tiler.utils import non_alpha_indexes

    path = _bucket_file(stamp) if isinstance(stamp[1], str) else Path(stamp[0])
    with _env(), _tile_reader(path, georef) as src:
        indexes = list(non_alpha_indexes(src.dataset))
        info = {
            "minzoom": int(src.minzoom),
            "maxzoom": int(src.maxzoom),
            "indexes": indexes,
            "dtype": src.dataset.dtypes[0],
            "nodata": src.dataset.nodata,
            "stretch": None,
        }
        if info["dtype"] != "uint8":
            stats = src.statistics(max_size=1024, indexes=indexes)
            info["stretch"] = {
                idx: (float(s.percentile_2), float(s.percentile_98))
                for idx, s in zip(indexes, stats.values())
            }
    return info


def _bucket_file(stamp: tuple) -> _BucketFile:
    out = _BucketFile(stamp[0])
    out.content, out.name = stamp[1], stamp[0].rsplit("/", 1)[-1]
    return out


def _tile_source(layer) -> tuple[Path, tuple | None]:
    """The file ``render_tile`` reads and the display georeference it reads it through."""
    georef = display_georeference(layer)
    # a pixel-frame layer's tiles_path is a pixel-frame COG, as good as the stored file
    return _source(layer), georef


def tile_zoom_range(layer) -> tuple[int, int]:
    """``(minzoom, maxzoom)`` of a layer's tile source (geographic, or placed by its display
    georeference), as rio-tiler computes them."""
    path, georef = _tile_source(layer)
    info = _source_info(_stamp(path), georef)
    return info["minzoom"], info["maxzoom"]


def min_served_zoom(layer) -> int:
    """The lowest zoom for which ``render_tile`` reads pixels (lower zooms get a transparent tile)."""
    return max(0, tile_zoom_range(layer)[0] - MIN_ZOOM_SLACK)


def _band_indexes(layer, available: list[int]) -> list[int]:
    """1 or 3 band indexes (1-based) to display."""
    meta = layer.metadata or {}
    chosen = meta.get("rgb_bands") or meta.get("display_bands")
    if chosen:
        chosen = [int(b) for b in chosen if int(b) in available]
        if len(chosen) in (1, 3):
            return chosen
    names = [str(b).lower() for b in (layer.bands or [])]
    if names and len(names) >= 3:
        wanted = []
        for colour in ("red", "green", "blue"):
            hits = [i + 1 for i, n in enumerate(names) if n == colour or n.startswith(colour)]
            if hits and hits[0] in available:
                wanted.append(hits[0])
        if len(wanted) == 3:
            return wanted
    if len(available) >= 3:
        return available[:3]
    return available[:1]


def _ramp_for(layer) -> dict | None:
    modality = (layer.modality or "").lower()
    if modality not in ("dem", "slope", "elevation", "dsm", "dtm"):
        return None
    from rio_tiler.colormap import cmap

    name = "terrain" if modality != "slope" else "magma"
    try:
        return cmap.get(name)
    except Exception:  # pragma: no cover - the named ramps ship with rio-tiler
        return None


def _stretch(layer, data: np.ndarray, indexes: list[int], info: dict) -> np.ndarray:
    """uint8 data for display: identity for uint8, linear stretch otherwise."""
    if data.dtype == np.uint8:
        return data
    ranges = (layer.metadata or {}).get("rescale")
    out = np.zeros(data.shape, dtype="uint8")
    for band, idx in enumerate(indexes):
        if ranges and band < len(ranges):
            lo, hi = (float(v) for v in ranges[band])
        elif info.get("stretch") and idx in info["stretch"]:
            lo, hi = info["stretch"][idx]
        else:
            finite = data[band][np.isfinite(data[band])]
            lo, hi = (float(v) for v in np.percentile(finite, [2, 98])) if finite.size else (0.0, 1.0)
        if not np.isfinite(lo) or not np.isfinite(hi) or hi <= lo:
            hi = lo + 1.0
        scaled = (data[band].astype("float64") - lo) / (hi - lo) * 255.0
        out[band] = np.clip(np.nan_to_num(scaled, nan=0.0), 0, 255).astype("uint8")
    return out


def _render(layer, data: np.ndarray, mask: np.ndarray, indexes: list[int], info: dict) -> bytes:
    from rio_tiler.utils import render

    if layer.kind == "mask":
        band = data[:1]
        if band.dtype != np.uint8:
            band = np.clip(np.nan_to_num(band.astype("float64")), 0, 255).astype("uint8")
        return render(band, mask, img_format="PNG", colormap=colormap_for(layer))
    data = _stretch(layer, data, indexes, info)
    ramp = _ramp_for(layer) if data.shape[0] == 1 else None
    if ramp:
        return render(data, mask, img_format="PNG", colormap=ramp)
    return render(data, mask, img_format="PNG")


def _read_kwargs(layer) -> dict:
    meta = layer.metadata or {}
    if "nodata" in meta and meta["nodata"] is not None:
        return {"nodata": meta["nodata"]}
    return {}


def render_tile(layer, z: int, x: int, y: int) -> bytes:
    """A 256×256 PNG web-mercator tile of a geographic raster or mask layer.

    Transparent outside the raster and for zooms more than ``MIN_ZOOM_SLACK`` below the source's
    minimum zoom. A pixel-frame layer is placed by its display georeference
    (``display_georeference``). Raises ``LayerFileError`` when the file is missing, ``ValueError``
    for a layer that has no tiles (vectors, pixel-frame layers without a georeference).
    """
    if layer.kind not in ("raster", "mask"):
        raise ValueError("only raster and mask layers have tiles")
    if not has_tiles(layer):
        raise ValueError("pixel-frame layers without a georeference have no web-mercator tiles; use the layer image")
    if z < 0 or x < 0 or y < 0 or x >= 2**z or y >= 2**z:
        return transparent_tile()
    path, georef = _tile_source(layer)
    info = _source_info(_stamp(path), georef)
    if z < info["minzoom"] - MIN_ZOOM_SLACK:
        return transparent_tile()

    from rio_tiler.errors import TileOutsideBounds

    indexes = [1] if layer.kind == "mask" else _band_indexes(layer, info["indexes"])
    # the PNG is encoded inside the bucket's environment too: rio-tiler's encoder opens a GDAL
    # dataset, and outside any environment rasterio makes one from the process's AWS_* variables
    # (a boto3 session, 10–25 ms, per call: bench/tiles.py --bucket)
    with _env():
        with _tile_reader(path, georef) as src:
            if not src.tile_exists(x, y, z):
                return transparent_tile()
            try:
                img = src.tile(x, y, z, tilesize=TILE_SIZE, indexes=indexes, **_read_kwargs(layer))
            except TileOutsideBounds:
                return transparent_tile()
        # rio-tiler's ``ImageData.mask`` is in the data's dtype (float rasters: ±FLT_MAX, signed ints:
        # min/max, an alpha band as stored): cast straight to uint8 it turned every float tile fully
        # transparent. Valid is > 0 in all of these cases.
        mask = np.where(np.asarray(img.mask) > 0, 255, 0).astype("uint8")
        if not mask.any():
            return transparent_tile()
        return _render(layer, np.asarray(img.data), mask, indexes, info)


def render_image(layer, max_size: int = IMAGE_MAX_SIZE) -> bytes:
    """The whole raster or mask as one PNG (longest side ≤ ``max_size``), in its own pixel frame.

    Used for pixel-frame layers with ``L.imageOverlay``; works for any raster file. Reads the stored
    file in its own grid (no reprojection): the pixel-frame COG in ``tiles_path`` when present, else
    ``path``.
    """
    if layer.kind not in ("raster", "mask"):
        raise ValueError("only raster and mask layers have an image")
    import rasterio
    from rasterio.enums import Resampling
    from rio_tiler.utils import non_alpha_indexes

    path = _source(layer, prefer_tiles=layer.frame == "pixel")
    info = {"stretch": None}  # stretch, when needed, from the percentiles of this read
    with _env(), rasterio.open(path) as src:
        available = list(non_alpha_indexes(src))
        indexes = [1] if layer.kind == "mask" else _band_indexes(layer, available)
        scale = min(1.0, max_size / max(src.width, src.height))
        out_h, out_w = max(1, round(src.height * scale)), max(1, round(src.width * scale))
        resampling = Resampling.nearest if layer.kind == "mask" or scale == 1.0 else Resampling.average
        data = src.read(indexes, out_shape=(len(indexes), out_h, out_w), resampling=resampling)
        nodata = (layer.metadata or {}).get("nodata")
        if nodata is None:
            # dataset mask: honours a declared nodata tag, an alpha band or an internal mask;
            # all-valid when the file declares none.
            mask = src.dataset_mask(out_shape=(out_h, out_w), resampling=Resampling.nearest)
        else:
            mask = np.where(np.all(data == nodata, axis=0), 0, 255).astype("uint8")
        return _render(layer, data, mask.astype("uint8"), indexes, info)  # in the environment: render_tile



# ---------------------------------------------------------------------------------------------
# the tile cache
#
# Layers are immutable once imported (a new file is a new layer); what can change is how a layer
# is drawn (its metadata: nodata, rescale, bands; its class map) and the renderer itself. So a tile
# is identified by ``tile_signature(layer)`` (renderer version, the tile source file's identity and
# every drawing input) plus z/x/y: that identity is both the cache key and the strong ETag.

#: bump when a change to the rendering code changes the PNG of an unchanged layer
RENDERER_VERSION = "1"


class TileCache:
    """A bounded, thread-safe LRU of rendered tiles, by total PNG bytes.

    ``max_bytes`` bounds the sum of the cached PNGs' sizes (0 disables the cache); the least
    recently used tiles are evicted first. One per process (``tile_cache()``): under several
    server workers each holds its own, so the bound is per worker.
    """

    def __init__(self, max_bytes: int):
        self.max_bytes = max(0, int(max_bytes))
        self._items: OrderedDict[str, bytes] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> bytes | None:
        with self._lock:
            data = self._items.get(key)
            if data is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return data

    def put(self, key: str, data: bytes) -> None:
        if len(data) > self.max_bytes:
            return
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= len(old)
            self._items[key] = data
            self._bytes += len(data)
            while self._bytes > self.max_bytes and self._items:
                _, evicted = self._items.popitem(last=False)
                self._bytes -= len(evicted)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._bytes = 0
            self.hits = self.misses = 0

    @property
    def size_bytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._items)


_CACHE: TileCache | None = None
_CACHE_LOCK = threading.Lock()


def tile_cache() -> TileCache:
    """This process's tile cache, bounded by ``settings.STUDIO_TILE_CACHE_BYTES``."""
    global _CACHE
    limit = int(settings.STUDIO_TILE_CACHE_BYTES)
    if _CACHE is None or _CACHE.max_bytes != max(0, limit):
        with _CACHE_LOCK:
            if _CACHE is None or _CACHE.max_bytes != max(0, limit):
                _CACHE = TileCache(limit)
    return _CACHE


def tile_signature(layer) -> str:
    """What a layer's tiles depend on, as a hex digest (32 characters).

    The renderer version; the tile source file's path, size and modification time (plus the
    stored file's SHA-256 when known); and every drawing input: kind, frame, modality, dtype,
    bands, class map and metadata. Raises ``LayerFileError`` when the file is missing.
    """
    path = _source(layer)
    if isinstance(path, _BucketFile):  # the bucket's object is named by its key and content
        file = [str(path), path.content]
    else:
        st = path.stat()
        file = [str(path), st.st_size, st.st_mtime_ns]
    parts = {
        "renderer": RENDERER_VERSION,
        "file": file,
        "sha256": layer.sha256 or "",
        "kind": layer.kind, "frame": layer.frame, "modality": layer.modality, "dtype": layer.dtype,
        "bands": layer.bands, "class_map": layer.class_map, "metadata": layer.metadata,
    }
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def tile_etag(signature: str, z: int, x: int, y: int) -> str:
    """The strong ETag of one tile (quoted, as HTTP writes it)."""
    return f'"{signature}-{z}-{x}-{y}"'


def cached_tile(layer, z: int, x: int, y: int, signature: str | None = None) -> bytes:
    """``render_tile`` through the process's bounded tile cache (key: signature and z/x/y)."""
    signature = signature or tile_signature(layer)
    key = f"{signature}/{z}/{x}/{y}"
    cache = tile_cache()
    data = cache.get(key)
    if data is None:
        data = render_tile(layer, z, x, y)
        cache.put(key, data)
    return data


def pixel_values(layer, x: float, y: float, lnglat: bool = False) -> dict:
    """What a raster/mask holds at a point, for click-to-identify on the map.

    ``x, y``: column and row (pixels, origin top-left) for a pixel-frame layer; longitude and
    latitude (EPSG:4326) for a geographic one, and for a pixel-frame one when ``lnglat`` (the
    point is taken back through the layer's display georeference; without one it is outside the
    raster). Returns ``{"col", "row", "values": [one per band]
    or None outside the raster, "label": the class map's label of a mask's value or None}``.
    Raises ``LayerFileError`` when the file cannot be read.
    """
    import rasterio
    from rasterio._err import CPLE_BaseError  # GDAL's errors (rasterio.errors does not name them)
    from rasterio.warp import transform as warp_transform

    def from_lnglat(crs):
        """The point in ``crs``; None where PROJ refuses it ("Point outside of projection
        domain": lon 0, lat 0 for a UTM zone 93° away), which is off the raster too."""
        try:
            xs, ys = warp_transform("EPSG:4326", crs, [x], [y])
        except CPLE_BaseError:
            return None
        return xs[0], ys[0]

    outside = {"col": None, "row": None, "values": None, "label": None}
    path = _source(layer, prefer_tiles=False)
    try:
        with _env(), rasterio.open(path) as src:
            georef = display_georeference(layer) if lnglat else None
            if layer.frame == "geographic" and src.crs is not None:
                point = from_lnglat(src.crs)
                if point is None:
                    return outside
                row, col = src.index(*point)
            elif georef is not None:
                from affine import Affine

                point = from_lnglat(georef[0])
                if point is None:
                    return outside
                c, r = ~Affine(*georef[1]) @ point
                col, row = int(math.floor(c)), int(math.floor(r))
            elif lnglat:
                return outside
            else:
                col, row = int(math.floor(x)), int(math.floor(y))
            if not (0 <= row < src.height and 0 <= col < src.width):
                return {"col": col, "row": row, "values": None, "label": None}
            window = rasterio.windows.Window(col, row, 1, 1)
            data = src.read(window=window)[:, 0, 0]
    except rasterio.errors.RasterioIOError as exc:
        raise LayerFileError(f"cannot read {path.name}: {exc}") from exc
    except (OverflowError, ValueError):  # a point far off the globe: its transform is not finite
        return outside
    values = [v.item() for v in data]
    cmap = {str(k): v for k, v in (layer.class_map or {}).items()}
    label = cmap.get(str(values[0])) if layer.kind == "mask" and values else None
    return {"col": col, "row": row, "values": values, "label": label}
