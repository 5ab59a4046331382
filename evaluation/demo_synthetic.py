"""A SYNTHETIC demo event, generated when the real sample data (``STUDIO_DEMO_DATA``) is missing.

Nothing here shows a real place or a real disaster: the imagery, the damage mask and the
building footprints are drawn by :func:`write_synthetic_event` from a fixed layout and a fixed
random seed, so every run writes the same bytes (the importers then see an unchanged layer and
re-running ``manage.py demo`` changes nothing). Every file name starts with ``SYNTHETIC_``. The
files are only written here; ``manage.py demo`` imports them through the studio's importers like
any other data.

The scene (a made-up hurricane aftermath) is 512 × 512 px at 0.5 m ground sampling distance
(256 m × 256 m) in UTM zone 15 N (EPSG:32615), its upper-left corner at easting 500 000 m,
northing 3 300 000 m. 24 buildings of 40 × 30 px (20 m × 15 m, 300 m²) stand on a grid of
4 rows × 6 columns: 16 px (8 m) between neighbours in a row, 60 px (30 m) between rows, a
road in each gap between rows.

The damage mask uses the xBD classes (``annotation.importers.common.DAMAGE_CLASS_MAP``, the
benchmark's damage scale; colours in ``kernel/palette.py``):

=====  ==============  ==============================================================
value  class           meaning
=====  ==============  ==============================================================
0      background      not a building
1      no-damage       building intact
2      minor-damage    partially burnt or water-damaged roof, elements missing
3      major-damage    partial wall or roof collapse, encroaching water or mud
4      destroyed       scorched, completely collapsed, or no longer present
5      un-classified   building whose damage cannot be told from the imagery
=====  ==============  ==============================================================

(the descriptions are xBD's joint damage scale). :data:`DAMAGE_GRID` gives each building's
class; the footprints (GeoJSON polygons in EPSG:32615, one per building) carry the same class
as ``subtype`` (xBD's label name) and ``damage_class`` (the mask value), so the footprints and
the mask agree pixel for pixel. Facts the demo tasks rely on (worked out from the layout):

* 4 destroyed buildings, 4 separate regions of class 4 in the mask (the two side by side in
  row 2 are 8 m apart);
* the mask annotates the post image, so a replay fills ``seg.building_damage`` from it in the
  damage tools' classes (``kernel/tools/perception.py``: minor and major → 2 partially damaged,
  destroyed → 3, un-classified → 0): 9 damaged or destroyed buildings, 10 800 px = 2 700 m²;
* 9 footprints lie within 10 m of a destroyed one (the 4 destroyed ones and their 5 other
  neighbours in a row, 8 m away; rows are 30 m apart); a 10 m buffer covers the destroyed
  footprints wholly (4 × 300 m²) and a 2 m × 15 m strip of each of the 5 neighbours
  (5 × 30 m²): 1 350 m².
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from annotation.importers.common import DAMAGE_CLASS_MAP

__all__ = [
    "CRS", "GSD_M", "SIZE", "SEED", "DAMAGE_GRID", "SUBTYPES", "FILES", "EVENT_SLUG", "EVENT_NAME",
    "buildings", "damage_mask", "images", "footprints", "write_synthetic_event",
]

CRS = "EPSG:32615"
GSD_M = 0.5
SIZE = 512
ORIGIN = (500000.0, 3300000.0)  # easting, northing of the upper-left corner (m)
SEED = 20261205

#: the event these files make (``manage.py demo``); both say SYNTHETIC
EVENT_SLUG = "synthetic-demo-hurricane"
EVENT_NAME = "SYNTHETIC demo event (generated data, not a real disaster)"

#: xBD damage class of each building, row by row (4 rows × 6 columns)
DAMAGE_GRID = (
    (1, 1, 2, 4, 1, 1),
    (4, 1, 3, 1, 1, 5),
    (1, 2, 1, 4, 4, 1),
    (3, 1, 1, 1, 2, 1),
)
#: mask value → xBD ``subtype`` (the names of ``DAMAGE_CLASS_MAP``, background left out)
SUBTYPES = {int(k): v for k, v in DAMAGE_CLASS_MAP.items() if k != "0"}

BUILDING_W, BUILDING_H = 40, 30  # px
GAP_X, GAP_Y = 16, 60  # px between buildings in a row / between rows
ROAD_H = 16  # px, a road centred in each gap between rows

#: role → file name of the generated files (all start with SYNTHETIC_)
FILES = {
    "pre": "SYNTHETIC_pre_disaster.tif",
    "post": "SYNTHETIC_post_disaster.tif",
    "mask": "SYNTHETIC_damage_mask.tif",
    "buildings": "SYNTHETIC_building_footprints.geojson",
}


def _grid_origin() -> tuple[int, int]:
    rows, cols = len(DAMAGE_GRID), len(DAMAGE_GRID[0])
    width = cols * BUILDING_W + (cols - 1) * GAP_X
    height = rows * BUILDING_H + (rows - 1) * GAP_Y
    return (SIZE - width) // 2, (SIZE - height) // 2


def buildings() -> list[dict]:
    """The 24 buildings: ``[{"row", "col", "class", "x0", "y0", "x1", "y1"}]`` in pixels
    (columns x0..x1-1, rows y0..y1-1), row by row."""
    left, top = _grid_origin()
    out = []
    for r, classes in enumerate(DAMAGE_GRID):
        for c, cls in enumerate(classes):
            x0 = left + c * (BUILDING_W + GAP_X)
            y0 = top + r * (BUILDING_H + GAP_Y)
            out.append({"row": r, "col": c, "class": cls, "x0": x0, "y0": y0,
                        "x1": x0 + BUILDING_W, "y1": y0 + BUILDING_H})
    return out


def _roads() -> list[tuple[int, int]]:
    """(first row, end row) in pixels of each road band between building rows."""
    _, top = _grid_origin()
    out = []
    for r in range(len(DAMAGE_GRID) - 1):
        gap_top = top + r * (BUILDING_H + GAP_Y) + BUILDING_H
        y0 = gap_top + (GAP_Y - ROAD_H) // 2
        out.append((y0, y0 + ROAD_H))
    return out


def damage_mask() -> np.ndarray:
    """The (SIZE, SIZE) uint8 mask: 0 background, each building's xBD class on its pixels."""
    mask = np.zeros((SIZE, SIZE), dtype=np.uint8)
    for b in buildings():
        mask[b["y0"]:b["y1"], b["x0"]:b["x1"]] = b["class"]
    return mask


def images() -> tuple[np.ndarray, np.ndarray]:
    """(pre, post): (3, SIZE, SIZE) uint8 RGB arrays drawn from :data:`SEED`.

    Pre: grass with noise, grey roads, roofs in a few colours. Post: the same scene after the
    storm: muddy water over part of the ground; minor damage leaves brown patches on the roof,
    major damage a dark half, destroyed buildings a field of debris; the un-classified building
    lies under a cloud."""
    rng = np.random.default_rng(SEED)
    noise = rng.normal(0.0, 10.0, size=(SIZE, SIZE, 3))
    pre = np.empty((SIZE, SIZE, 3), dtype=float)
    pre[:] = (86, 122, 64)  # grass
    for y0, y1 in _roads():
        pre[y0:y1, :] = (128, 128, 124)
    roofs = [(176, 92, 72), (150, 150, 158), (196, 180, 150), (112, 116, 128)]
    blds = buildings()
    for _i, b in enumerate(blds):
        pre[b["y0"]:b["y1"], b["x0"]:b["x1"]] = roofs[int(rng.integers(len(roofs)))]
    post = pre.copy()
    # muddy water over the lower-left ground (not over roofs: drawn before the damage below)
    yy, xx = np.mgrid[0:SIZE, 0:SIZE]
    water = (xx + (SIZE - yy)) < SIZE * 0.55
    post[water & (damage_mask() == 0)] = (112, 96, 70)
    debris = rng.integers(40, 170, size=(SIZE, SIZE, 1)).repeat(3, axis=2) * np.array([1.0, 0.85, 0.7])
    for b in blds:
        ys, xs = slice(b["y0"], b["y1"]), slice(b["x0"], b["x1"])
        cls = b["class"]
        if cls == 2:
            post[b["y0"]:b["y0"] + 10, b["x0"]:b["x0"] + 14] = (120, 84, 50)
        elif cls == 3:
            post[ys, b["x0"]:b["x0"] + BUILDING_W // 2] = (60, 52, 46)
        elif cls == 4:
            post[ys, xs] = debris[ys, xs]
        elif cls == 5:
            cy, cx = (b["y0"] + b["y1"]) // 2, (b["x0"] + b["x1"]) // 2
            cloud = (yy - cy) ** 2 + (xx - cx) ** 2 < 36 ** 2
            post[cloud] = (236, 236, 238)
    as_bands = lambda a: np.clip(a + noise, 0, 255).astype(np.uint8).transpose(2, 0, 1)  # noqa: E731
    return as_bands(pre), as_bands(post)


def _transform():
    from affine import Affine

    return Affine(GSD_M, 0.0, ORIGIN[0], 0.0, -GSD_M, ORIGIN[1])


def footprints() -> dict:
    """The building footprints as a GeoJSON FeatureCollection in EPSG:32615 (metres, with a
    ``crs`` member), one rectangle per building along its pixel edges; properties ``uid``
    (``SYNTHETIC-r<row>c<col>``), ``subtype`` (xBD class name), ``damage_class`` (mask value)."""
    t = _transform()
    feats = []
    for b in buildings():
        corners = [(b["x0"], b["y0"]), (b["x1"], b["y0"]), (b["x1"], b["y1"]), (b["x0"], b["y1"]), (b["x0"], b["y0"])]
        ring = [[float(v) for v in t @ xy] for xy in corners]
        feats.append({"type": "Feature",
                      "properties": {"uid": f"SYNTHETIC-r{b['row']}c{b['col']}", "subtype": SUBTYPES[b["class"]],
                                     "damage_class": b["class"]},
                      "geometry": {"type": "Polygon", "coordinates": [ring]}})
    return {"type": "FeatureCollection", "name": "SYNTHETIC_building_footprints",
            "crs": {"type": "name", "properties": {"name": "urn:ogc:def:crs:EPSG::32615"}}, "features": feats}


def _write_tif(path: Path, data: np.ndarray, **extra) -> None:
    import rasterio

    profile = {"driver": "GTiff", "width": SIZE, "height": SIZE, "count": data.shape[0], "dtype": "uint8",
               "crs": CRS, "transform": _transform(), "compress": "deflate", **extra}
    with rasterio.open(path, "w", **profile) as dst:
        dst.write(data)
        dst.update_tags(SYNTHETIC="generated by evaluation.demo_synthetic; not real data")


def write_synthetic_event(folder: str | Path) -> dict[str, Path]:
    """Write the four SYNTHETIC files into ``folder`` (created if needed) and return
    ``{role: path}`` for the roles of :data:`FILES` (pre, post: 3-band RGB GeoTIFFs; mask:
    1-band GeoTIFF of xBD classes; buildings: GeoJSON). The same bytes on every call."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = {role: folder / name for role, name in FILES.items()}
    pre, post = images()
    _write_tif(paths["pre"], pre, photometric="RGB")
    _write_tif(paths["post"], post, photometric="RGB")
    _write_tif(paths["mask"], damage_mask()[np.newaxis])
    paths["buildings"].write_text(json.dumps(footprints(), indent=1) + "\n", encoding="utf-8")
    return paths
