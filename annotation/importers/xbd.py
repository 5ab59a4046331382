"""xBD labels: parsing, the pixel↔lon/lat affine fit, damage rasterisation, footprint GeoJSON.

An xBD label JSON holds ``features.xy`` (pixel WKT: x = column, y = row) and ``features.lng_lat``
(WGS84 WKT) with the same buildings in the same order (matched here by ``uid``), each with
``properties.subtype`` (post-disaster damage; absent on pre-disaster labels), and a ``metadata``
block (sensor, gsd, capture_date, width, height, disaster, disaster_type, img_name, ...).
"""
from __future__ import annotations

import csv
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import shapely
from shapely import wkt as shapely_wkt
from shapely.geometry import box, mapping

from kernel.taskfile import JSONNestingError, bounded_loads

from .common import DAMAGE_CLASS_INDEX, confined_to, write_json
from .errors import DataImportError


@dataclass
class Building:
    uid: str
    subtype: str | None  # None on pre-disaster labels
    feature_type: str
    xy: object  # shapely Polygon in pixels, or None
    lng_lat: object  # shapely Polygon in lon/lat, or None


@dataclass
class XbdLabel:
    path: Path
    metadata: dict
    buildings: list[Building] = field(default_factory=list)

    @property
    def width(self) -> int:
        return int(self.metadata.get("width") or self.metadata.get("original_width") or 1024)

    @property
    def height(self) -> int:
        return int(self.metadata.get("height") or self.metadata.get("original_height") or 1024)

    @property
    def has_lng_lat(self) -> bool:
        return any(b.lng_lat is not None for b in self.buildings)


def _parse_wkt(path, where: str, text):
    if not isinstance(text, str):
        raise DataImportError(path, where, "missing 'wkt' string")
    try:
        geom = shapely_wkt.loads(text)
    except Exception as exc:  # shapely raises GEOSException / WKTReadingError
        raise DataImportError(path, where, f"invalid WKT ({exc})") from None
    if geom.is_empty:
        raise DataImportError(path, where, "empty geometry")
    return geom


def parse_label(path: str | Path) -> XbdLabel:
    """Read one xBD label JSON. Zero buildings is valid. Raises ``DataImportError`` naming the
    file, the field (or line and column) and the problem: unreadable, not JSON, nested deeper than
    ``kernel.taskfile.MAX_JSON_DEPTH`` (``bounded_loads``), a building without valid WKT."""
    path = Path(path)
    try:
        data = bounded_loads(path.read_text(encoding="utf-8"))
    except JSONNestingError as exc:
        raise DataImportError(path, f"line {exc.line}, column {exc.column}", exc.problem) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataImportError(path, "json", f"cannot be read as JSON ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("features"), dict):
        raise DataImportError(path, "features", "expected an object with 'xy' and/or 'lng_lat' lists")
    feats = data["features"]
    xy_list = feats.get("xy") or []
    ll_list = feats.get("lng_lat") or []
    if not isinstance(xy_list, list) or not isinstance(ll_list, list):
        raise DataImportError(path, "features", "'xy' and 'lng_lat' must be lists")
    if not xy_list and not ll_list and not ("xy" in feats or "lng_lat" in feats):
        raise DataImportError(path, "features", "neither 'xy' nor 'lng_lat' present")
    metadata = data.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise DataImportError(path, "metadata", "must be an object")

    by_uid: dict[str, Building] = {}
    order: list[str] = []
    for key, items in (("xy", xy_list), ("lng_lat", ll_list)):
        for i, feat in enumerate(items):
            where = f"features.{key}[{i}]"
            if not isinstance(feat, dict):
                raise DataImportError(path, where, "must be an object")
            props = feat.get("properties") or {}
            uid = str(props.get("uid") or f"{i}")
            geom = _parse_wkt(path, f"{where}.wkt", feat.get("wkt"))
            if geom.geom_type not in ("Polygon", "MultiPolygon"):
                raise DataImportError(path, f"{where}.wkt", f"expected a polygon, got {geom.geom_type}")
            b = by_uid.get(uid)
            if b is None:
                b = by_uid[uid] = Building(uid=uid, subtype=props.get("subtype"),
                                           feature_type=props.get("feature_type", "building"), xy=None, lng_lat=None)
                order.append(uid)
            if b.subtype is None and props.get("subtype") is not None:
                b.subtype = props.get("subtype")
            setattr(b, key, geom)
    for uid in order:
        st = by_uid[uid].subtype
        if st is not None and st not in DAMAGE_CLASS_INDEX:
            raise DataImportError(path, f"subtype of building {uid}", f"unknown damage subtype {st!r}")
    return XbdLabel(path=path, metadata=metadata, buildings=[by_uid[u] for u in order])


# ---------------------------------------------------------------- affine fit


@dataclass
class AffineFit:
    """Least-squares affine pixel (x=col, y=row) → lon/lat, with residuals in pixels.

    ``transform`` is rasterio/affine order ``(a, b, c, d, e, f)``: lon = a·x + b·y + c,
    lat = d·x + e·y + f. ``gsd_m`` is the pixel size on the ground from a second fit in the
    local UTM zone (square root of the determinant; ``pixel_size_m`` gives x and y separately).
    """

    transform: tuple[float, float, float, float, float, float]
    n_points: int
    rms_px: float
    max_px: float
    gsd_m: float
    pixel_size_m: tuple[float, float]
    utm_crs: str

    def to_lnglat(self, x, y):
        a, b, c, d, e, f = self.transform
        return a * x + b * y + c, d * x + e * y + f

    def as_dict(self) -> dict:
        return {
            "transform": list(self.transform),
            "crs": "EPSG:4326",
            "n_points": self.n_points,
            "residual_rms_px": self.rms_px,
            "residual_max_px": self.max_px,
            "gsd_m": self.gsd_m,
            "pixel_size_m": list(self.pixel_size_m),
            "utm_crs": self.utm_crs,
        }


def _ring_pairs(xy_geom, ll_geom):
    """Vertex pairs of matching polygons (exteriors and holes), or [] when the vertex counts differ."""
    def rings(g):
        polys = list(g.geoms) if g.geom_type == "MultiPolygon" else [g]
        out = []
        for p in polys:
            out.append(np.asarray(p.exterior.coords)[:, :2])
            out.extend(np.asarray(r.coords)[:, :2] for r in p.interiors)
        return out
    a, b = rings(xy_geom), rings(ll_geom)
    if len(a) != len(b) or any(len(r) != len(s) for r, s in zip(a, b)):
        return []
    return list(zip(a, b))


def fit_affine(label: XbdLabel) -> AffineFit | None:
    """Fit pixel → lon/lat from the label's paired vertices; None when there are too few pairs."""
    from pyproj import CRS, Transformer

    px_list, ll_list = [], []
    for b in label.buildings:
        if b.xy is None or b.lng_lat is None:
            continue
        for r, s in _ring_pairs(b.xy, b.lng_lat):
            px_list.append(r)
            ll_list.append(s)
    if not px_list:
        return None
    P = np.vstack(px_list)
    G = np.vstack(ll_list)
    A = np.c_[P, np.ones(len(P))]
    if len(P) < 3 or np.linalg.matrix_rank(A) < 3:
        return None
    cx, *_ = np.linalg.lstsq(A, G[:, 0], rcond=None)
    cy, *_ = np.linalg.lstsq(A, G[:, 1], rcond=None)

    lon0, lat0 = float(G[:, 0].mean()), float(G[:, 1].mean())
    zone = int((lon0 + 180) // 6) % 60 + 1
    utm = CRS.from_epsg((32600 if lat0 >= 0 else 32700) + zone)
    east, north = Transformer.from_crs("EPSG:4326", utm, always_xy=True).transform(G[:, 0], G[:, 1])
    ux, *_ = np.linalg.lstsq(A, east, rcond=None)
    uy, *_ = np.linalg.lstsq(A, north, rcond=None)
    M = np.array([ux[:2], uy[:2]])
    # residuals: metres in UTM, mapped back through the linear part into pixels
    res_m = np.c_[east - A @ ux, north - A @ uy]
    res_px = np.linalg.solve(M, res_m.T).T
    dist = np.hypot(res_px[:, 0], res_px[:, 1])
    return AffineFit(
        transform=(float(cx[0]), float(cx[1]), float(cx[2]), float(cy[0]), float(cy[1]), float(cy[2])),
        n_points=int(len(P)),
        rms_px=float(np.sqrt((dist ** 2).mean())),
        max_px=float(dist.max()),
        gsd_m=float(np.sqrt(abs(np.linalg.det(M)))),
        pixel_size_m=(float(np.hypot(*M[:, 0])), float(np.hypot(*M[:, 1]))),
        utm_crs=utm.to_string(),
    )


def lnglat_bounds(fit: AffineFit, width: int, height: int) -> list[float]:
    """[west, south, east, north] of the image rectangle under the fit."""
    xs = np.array([0, width, width, 0], dtype=float)
    ys = np.array([0, 0, height, height], dtype=float)
    lon, lat = fit.to_lnglat(xs, ys)
    return [float(lon.min()), float(lat.min()), float(lon.max()), float(lat.max())]


# ---------------------------------------------------------------- rasterising and vectors

# Drawing order where polygons overlap: the more severe class wins; un-classified loses to all.
_DRAW_ORDER = {5: 0, 1: 1, 2: 2, 3: 3, 4: 4}


def rasterize_damage(label: XbdLabel, width: int | None = None, height: int | None = None) -> np.ndarray:
    """uint8 class mask from post-disaster ``xy`` polygons: 0 background, 1–4 damage, 5 un-classified.

    Buildings without a subtype (pre-disaster labels) are drawn as 1 (a building, no damage known).
    A pixel belongs to a polygon when its centre is inside (GDAL's default rule).
    """
    from rasterio.features import rasterize

    w = int(width or label.width)
    h = int(height or label.height)
    shapes = []
    for b in label.buildings:
        if b.xy is None:
            continue
        cls = DAMAGE_CLASS_INDEX.get(b.subtype or "no-damage", 1)
        shapes.append((_DRAW_ORDER[cls], b.xy, cls))
    shapes.sort(key=lambda t: t[0])
    if not shapes:
        return np.zeros((h, w), dtype=np.uint8)
    return rasterize([(g, v) for _, g, v in shapes], out_shape=(h, w), fill=0, dtype="uint8")


def _props(b: Building) -> dict:
    return {"uid": b.uid, "subtype": b.subtype, "feature_type": b.feature_type}


def footprints_pixel(label: XbdLabel) -> dict:
    """Buildings as a GeoJSON FeatureCollection in the image's pixel frame ([x=col, y=row])."""
    feats = [
        {"type": "Feature", "geometry": mapping(b.xy), "properties": _props(b)}
        for b in label.buildings if b.xy is not None
    ]
    return {"type": "FeatureCollection", "frame": "pixel", "features": feats}


def footprints_lnglat(label: XbdLabel, fit: AffineFit | None = None) -> dict | None:
    """Buildings in EPSG:4326 (the label's own ``lng_lat``; through ``fit`` where it lacks one)."""
    feats = []
    for b in label.buildings:
        geom = b.lng_lat
        if geom is None and fit is not None and b.xy is not None:
            a, bb, c, d, e, f = fit.transform
            geom = shapely.transform(b.xy, lambda p: np.c_[a * p[:, 0] + bb * p[:, 1] + c,  # noqa: B023 (called now)
                                                            d * p[:, 0] + e * p[:, 1] + f])  # noqa: B023
        if geom is None:
            continue
        feats.append({"type": "Feature", "geometry": mapping(geom), "properties": _props(b)})
    if not feats:
        return None
    return {"type": "FeatureCollection", "features": feats}


def write_geojson(path: str | Path, fc: dict) -> dict:
    """Write a FeatureCollection; returns ``{feature_count, bounds}``."""
    write_json(path, fc)
    geoms = [shapely.geometry.shape(f["geometry"]) for f in fc["features"] if f.get("geometry")]
    bounds = list(map(float, shapely.total_bounds(geoms))) if geoms else None
    return {"feature_count": len(fc["features"]), "bounds": bounds}


# ---------------------------------------------------------------- CSV sidecars (mask-PNG folders)


def read_bounding_boxes(path: str | Path) -> dict:
    """``damage_class,xmin,ymin,xmax,ymax`` rows → FeatureCollection of pixel boxes with ``subtype``."""
    path = Path(path)
    feats = []
    try:
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            need = {"damage_class", "xmin", "ymin", "xmax", "ymax"}
            if not reader.fieldnames or not need <= set(reader.fieldnames):
                raise DataImportError(path, "header", f"expected columns {sorted(need)}, got {reader.fieldnames}")
            for i, row in enumerate(reader, start=2):
                try:
                    x0, y0, x1, y1 = (float(row[k]) for k in ("xmin", "ymin", "xmax", "ymax"))
                except (TypeError, ValueError):
                    raise DataImportError(path, f"line {i}", "xmin/ymin/xmax/ymax must be numbers") from None
                cls = row["damage_class"]
                if cls not in DAMAGE_CLASS_INDEX:
                    raise DataImportError(path, f"line {i}: damage_class", f"unknown damage class {cls!r}")
                feats.append({"type": "Feature", "geometry": mapping(box(x0, y0, x1, y1)),
                              "properties": {"uid": f"bbox-{i - 1}", "subtype": cls, "feature_type": "building"}})
    except OSError as exc:
        raise DataImportError(path, "file", str(exc)) from None
    return {"type": "FeatureCollection", "frame": "pixel", "features": feats}


def read_damage_statistics(path: str | Path) -> dict[str, int]:
    """``damage_class,count`` rows → {class: building count}."""
    path = Path(path)
    out = {}
    with open(path, newline="", encoding="utf-8") as f:
        for i, row in enumerate(csv.DictReader(f), start=2):
            try:
                out[row["damage_class"]] = int(row["count"])
            except (KeyError, TypeError, ValueError):
                raise DataImportError(path, f"line {i}", "expected damage_class,count") from None
    return out


# ---------------------------------------------------------------- folder discovery

TILE_RE = re.compile(r"^(?P<tile>(?P<disaster>[A-Za-z0-9-]+)_(?P<num>\d{8}))_(?P<rest>.+)$")
ROLES = {
    ("pre_disaster", ".json"): "pre_label",
    ("post_disaster", ".json"): "post_label",
    ("pre_disaster", ".png"): "pre_image",
    ("post_disaster", ".png"): "post_image",
    ("pre_disaster", ".tif"): "pre_image",
    ("post_disaster", ".tif"): "post_image",
    ("pre_original", ".png"): "pre_image",
    ("post_original", ".png"): "post_image",
    ("pre_disaster_target", ".png"): "pre_target",
    ("post_disaster_target", ".png"): "post_target",
    ("post_disaster_b1", ".png"): "post_mask_b1",
    ("mask", ".png"): "mask",
    ("mask_color", ".png"): "mask_color",
    ("bounding_boxes", ".csv"): "bounding_boxes",
    ("damage_statistics", ".csv"): "damage_statistics",
}


@dataclass
class XbdTile:
    tile: str  # e.g. socal-fire_00000031
    disaster: str  # e.g. socal-fire
    files: dict[str, Path] = field(default_factory=dict)  # role → path


def discover_tiles(folder: str | Path) -> tuple[dict[str, XbdTile], list[str]]:
    """Group an xBD-style folder's files by tile. Returns (tiles by id, names of files not used)."""
    folder = Path(folder)
    tiles: dict[str, XbdTile] = {}
    skipped: list[str] = []
    for p in sorted(folder.iterdir()):
        if not p.is_file():
            continue
        m = TILE_RE.match(p.stem)
        if m and p.is_symlink():
            confined_to(p, folder)  # a tile file linked in from outside the folder is refused
        role = ROLES.get((m.group("rest"), p.suffix.lower())) if m else None
        if role is None:
            skipped.append(p.name)
            continue
        t = tiles.setdefault(m.group("tile"), XbdTile(tile=m.group("tile"), disaster=m.group("disaster")))
        t.files[role] = p
    return tiles, skipped
