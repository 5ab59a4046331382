"""Perception tools (``seg.*``, 31 tools).

Modes (``ToolContext.perception_mode``)
    ``gt`` (default; annotation and replay): the tool returns the ground-truth mask that the
    caller's ``gt_lookup(tool, resolved_args)`` links to its input image, remapped to the tool's
    class convention by LABEL NAME (never by pixel value: datasets number their classes
    differently). No linked mask → ``GTMissingError`` naming the image; a mask whose labels do
    not fit the tool → ``GTLabelError`` listing the labels.
    ``model``: a torch model of the tool's family from ``<checkpoint_dir>/<file>.safetensors``
    (``perception_models``): the benchmark's network of the tool's model for the benchmark's
    file (SegFormer mit_b0, HRNet-W48, Swin-UperNet, DINOv3 ViT-L/16 DPT or bi-temporal DPT),
    or the studio's small reference net for a checkpoint that names it;
    ``_meta.architecture`` says which ran.
    No directory configured, or no file → ``ModelUnavailableError`` carrying the benchmark's
    stub observation (:func:`stub_observation`, ``status: "stub"``), which the MCP server
    answers to the agent as the benchmark's server does; an unreadable
    or mis-shaped checkpoint → ``ModelUnavailableError`` naming the file and tensors.
    ``classical``: a training-free baseline where one exists (``classical``): water by NDWI or SAR
    backscatter (``seg.flood``, ``seg.water_aerial``, ``seg.reservoir``), vegetation by NDVI
    (``seg.vegetation``). Other tools → ``ModelUnavailableError("no classical baseline ...")``.
    ``_meta.mode`` of every observation names the mode that produced the mask.

Outputs: uint8 masks written with ``_io.write_mask`` (class map, and pixel size when known,
embedded), named by ``ctx.output_path`` from the inputs' contents. GeoTIFF when the tool's
reference image is georeferenced (pre image of a bi-temporal tool, the image itself otherwise),
else PNG; the opt-SAR, iSAID, aerial and low-res building masks are always PNG, as in the
benchmark. ``_meta`` is deterministic (no pid, no timings).

Class conventions (catalogue ``returns``/``semantics``)
    damage tools: 0 background, 1 intact, 2 partially damaged, 3 totally destroyed;
    ``seg.road_damage``: 0 background, 1 intact, 2 flooded, 3 debris blocked;
    every other tool: binary {0, 255}.

GT label mapping (by normalised label: lower case, ``_``/``-``/spaces → ``-``)
    Each tool has a table label → class (its own classes and their usual dataset spellings,
    plus its explicit negatives such as ``non-lava``). ``background``-like labels (background,
    unlabeled, ignore, no-data, clutter, ...) map to 0, and so does ``non-X``/``not-X``/``no-X``
    for a positive label X. Labels of the other tools' classes ("foreign" labels) map to 0: a
    RescueNet mask serves ``seg.swimming_pool`` (pool → 255, every other class → 0), a xBD mask
    serves ``seg.building_lowres`` (every damage level is a building footprint → 255).
    Rules that make a mask unusable (``GTLabelError``):
    * a value present in the mask has no label in the class map;
    * a present label is unknown to the studio, or *ambiguous* for the tool (it overlaps the
      tool's classes without deciding between them: ``building`` for the damage tools,
      ``road`` for ``seg.road_damage``, ``vehicle`` for the trapped/free vehicle tools, ...);
    * the class map names none of the tool's own classes (e.g. a xBD damage mask given to
      ``seg.flood``), so nothing says it is that tool's ground truth.
    Damage (xBD): no-damage → 1; minor- and major-damage → 2; destroyed → 3; un-classified → 0.
    Road: intact/clear → 1, flooded → 2, debris-blocked/blocked/sand-covered → 3. In a class
    map that holds the dataset's road values 10, 11 and 12 (``dora/benchmark.py`` maps them to
    the road tool's 1/2/3), the labels of those three values are road labels: a bare
    ``intact`` there reads ``road-intact`` (so a combined building + road mask stays
    unambiguous for both the damage and the road tool).
    ``seg.flood`` GT: a flood mask (flood/flooded/inundation → 255; permanent water → 0), or,
    when the post image's mask is a water mask (``water`` → 1), water in the post mask and not
    in the pre image's water mask (the benchmark's definition); the pre mask is then required.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

# by full name: ``from . import classical`` would read as an import of the package, whose
# __init__ imports the registry, which imports this module
import kernel.tools.classical as _classical
import kernel.tools.perception_models as pm

from ._io import _quiet, raster_meta, read_mask, read_raster, write_mask
from .base import GTMask, GTMissingError, ModelUnavailableError, ToolContext, ToolError, ToolInputError, file_sha256
from .spec import register

__all__ = ["DAMAGE_CLASSES", "DAMAGE_LABELS", "ROAD_CLASSES", "TOOLS", "GTLabelError",
           "LabelScheme", "normalise_label", "remap_by_label", "remap_gt", "CHECKPOINTS"]

VERSION = 2


class GTLabelError(ToolError):
    """GT mode: the linked mask's labels cannot be mapped to the tool's class convention.
    ``labels``: the offending labels; ``class_map``: the mask's whole class map."""

    def __init__(self, message: str, *, labels=(), class_map=None, **kw):
        self.labels = [str(v) for v in labels]
        self.class_map = {int(k): str(v) for k, v in (class_map or {}).items()}
        super().__init__(message, **kw)


def normalise_label(label: str) -> str:
    return "-".join(str(label).strip().lower().replace("_", " ").replace("-", " ").split())


def _norm_table(table: dict[str, int]) -> dict[str, int]:
    return {normalise_label(k): int(v) for k, v in table.items()}


# ============================================================================================
# Label vocabularies
# ============================================================================================
DAMAGE_CLASSES = {0: "background", 1: "intact", 2: "partially damaged", 3: "totally destroyed"}
ROAD_CLASSES = {0: "background", 1: "intact", 2: "flooded", 3: "debris blocked"}

#: labels that mean "none of the classes" for every tool
GENERIC_BACKGROUND = frozenset(normalise_label(s) for s in [
    "background", "bg", "unlabeled", "unlabelled", "ignore", "void", "no-data", "nodata",
    "no data", "clutter", "other", "others", "none", "nothing", "_background_"])

#: normalised label → building-damage class index
DAMAGE_LABELS = _norm_table({
    "background": 0, "bg": 0, "no-building": 0, "un-classified": 0, "unclassified": 0,
    "ignore": 0,
    "no-damage": 1, "intact": 1, "undamaged": 1, "building-no-damage": 1, "no-damaged": 1,
    "building-intact": 1,
    "minor-damage": 2, "major-damage": 2, "partially-damaged": 2, "partial-damage": 2,
    "damaged": 2, "building-damage": 2, "building-minor-damage": 2,
    "building-major-damage": 2, "partially damaged": 2,
    "destroyed": 3, "totally-destroyed": 3, "total-damage": 3, "building-total-damage": 3,
    "building-destroyed": 3, "building-total-destruction": 3, "totally destroyed": 3,
})

ROAD_LABELS = _norm_table({
    "background": 0, "no-road": 0, "non-road": 0,
    "intact": 1, "road-intact": 1, "intact-road": 1, "road-no-damage": 1, "road-clear": 1,
    "clear-road": 1, "road-undamaged": 1, "undamaged-road": 1, "road-not-damaged": 1,
    "flooded": 2, "road-flooded": 2, "flooded-road": 2, "road-flood": 2,
    "debris-blocked": 3, "debris blocked": 3, "blocked": 3, "road-blocked": 3,
    "blocked-road": 3, "road-debris-blocked": 3, "debris-blocked-road": 3,
    "road-debris-covered": 3, "road-debris": 3, "road-sand-covered": 3,
})

ISAID_NAMES = {1: "ship", 2: "roundabout", 3: "baseball_diamond", 4: "tennis_court",
               5: "basketball_court", 6: "ground_track_field", 7: "bridge", 8: "large_vehicle",
               9: "small_vehicle", 10: "helicopter", 11: "swimming_pool", 12: "storage_tank",
               13: "soccer_ball_field", 14: "plane", 15: "harbor"}

RESCUENET_NAMES = {1: "building_no_damage", 2: "building_damage", 3: "building_total_damage",
                   4: "pool", 5: "road_no_damage", 6: "road_debris_covered", 7: "tree_fallen",
                   8: "tree_not_fallen", 9: "vehicle_not_trapped", 10: "vehicle_trapped",
                   11: "water"}

#: synonyms of each RescueNet/aerial class (first entry: the benchmark's own name)
AERIAL_SYNONYMS = {
    1: ["building_no_damage", "building-intact", "intact-building", "no-damage"],
    2: ["building_damage", "building-minor-damage", "building-major-damage", "building-damaged",
        "minor-damage", "major-damage"],
    3: ["building_total_damage", "building-total-destruction", "building-destroyed",
        "destroyed", "totally-destroyed"],
    4: ["pool", "swimming-pool"],
    5: ["road_no_damage", "road-clear", "road-intact", "intact-road"],
    6: ["road_debris_covered", "road-sand-covered", "road-blocked", "road-debris"],
    7: ["tree_fallen", "fallen-tree", "tree-down"],
    8: ["tree_not_fallen", "tree-standing", "standing-tree"],
    9: ["vehicle_not_trapped", "vehicle-free", "free-vehicle"],
    10: ["vehicle_trapped", "trapped-vehicle"],
    11: ["water", "water-body", "flood-water", "floodwater"],
}

#: other dataset vocabularies the studio knows (all "foreign" to tools that do not claim them)
LANDCOVER_LABELS = ["building", "buildings", "road", "roads", "water", "barren", "bareland",
                    "bare-soil", "forest", "agriculture", "agricultural", "cropland", "farmland",
                    "rangeland", "grass", "grassland", "developed-space", "developed",
                    "impervious", "tree", "trees", "shrub", "shrubland", "woodland",
                    "vegetation", "low-vegetation", "wetland", "snow", "cloud-free"]
MISC_LABELS = ["vehicle", "vehicles", "car", "cars", "truck", "boat", "vessel", "airplane",
               "aircraft", "port", "harbour", "tank", "oil-tank", "sports-field", "playground",
               "soccer-field", "lava", "landslide", "reservoir", "flood", "flooded-area",
               "inundation", "permanent-water", "building-footprint", "building-under-reconstruction",
               "not-under-reconstruction", "building-damage-level"]


@dataclass(frozen=True)
class LabelScheme:
    """How GT labels map to one tool's classes.

    ``table``: normalised label → class (0 for the tool's explicit negatives);
    ``ambiguous``: labels that overlap the tool's classes without deciding them (error when
    present); ``positive_name``: for binary tools, the name of the 255 class.
    """

    table: dict[str, int]
    ambiguous: frozenset = frozenset()
    qualify_road_values: bool = True

    def positives(self) -> set[str]:
        return {k for k, v in self.table.items() if v}


def _binary(pos: list[str], neg: list[str] = (), ambiguous: list[str] = ()) -> LabelScheme:
    table = {normalise_label(p): 255 for p in pos}
    table.update({normalise_label(n): 0 for n in neg})
    return LabelScheme(table, frozenset(normalise_label(a) for a in ambiguous))


# ============================================================================================
# GT remapping
# ============================================================================================
_ROAD_VALUES = (10, 11, 12)


def _qualified(class_map: dict[int, str]) -> dict[int, str]:
    """Normalised labels; at the dataset's road values 10/11/12 (all three present in the map)
    a label that does not mention a road is read as ``road-<label>``."""
    out = {int(k): normalise_label(v) for k, v in class_map.items()}
    if all(v in out for v in _ROAD_VALUES):
        for v in _ROAD_VALUES:
            if "road" not in out[v].split("-"):
                out[v] = "road-" + out[v]
    return out


_FOREIGN_CACHE: set[str] | None = None


def _foreign_vocabulary() -> set[str]:
    global _FOREIGN_CACHE
    if _FOREIGN_CACHE is None:
        vocab = set(GENERIC_BACKGROUND)
        for t in TOOLS.values():
            vocab |= set(t.scheme.table)
        vocab |= set(DAMAGE_LABELS) | set(ROAD_LABELS)
        vocab |= {normalise_label(s) for s in ISAID_NAMES.values()}
        for syn in AERIAL_SYNONYMS.values():
            vocab |= {normalise_label(s) for s in syn}
        vocab |= {normalise_label(s) for s in LANDCOVER_LABELS + MISC_LABELS}
        _FOREIGN_CACHE = vocab
    return _FOREIGN_CACHE


def _label_class(key: str, scheme: LabelScheme) -> tuple[str, int | None]:
    """(kind, class): kind in own | negated | generic | ambiguous | foreign | unknown."""
    if key in scheme.table:
        return "own", scheme.table[key]
    if key in scheme.ambiguous:
        return "ambiguous", None
    if key in GENERIC_BACKGROUND:
        return "generic", 0
    for prefix in ("non-", "not-", "no-"):
        if key.startswith(prefix) and scheme.table.get(key[len(prefix):], 0):
            return "negated", 0
    if key in _foreign_vocabulary():
        return "foreign", 0
    return "unknown", None


def remap_gt(arr: np.ndarray, class_map: dict[int, str], scheme: LabelScheme, *, tool: str,
             mask_name: str) -> tuple[np.ndarray, dict[int, int]]:
    """Remap GT pixel values to a tool's classes through their label names (see the module
    docstring). Returns (uint8 array, {value present: tool class})."""
    class_map = {int(k): str(v) for k, v in class_map.items()}
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)) or not np.all(arr == np.round(arr)):
            raise GTLabelError(f"GT mask {mask_name} holds non-integer values", tool=tool,
                               class_map=class_map, expected="an integer class-index mask")
    if arr.size and arr.min() < 0:
        raise GTLabelError(f"GT mask {mask_name} holds negative values", tool=tool,
                           class_map=class_map, expected="non-negative class indices")
    a = arr.astype(np.int64)
    present = [int(v) for v in np.unique(a)]
    unnamed = [v for v in present if v not in class_map]
    shown = {k: v for k, v in sorted(class_map.items())}
    if unnamed:
        raise GTLabelError(f"GT mask {mask_name} holds values {unnamed} that its class map "
                           f"{shown} does not name", tool=tool, labels=[], class_map=class_map,
                           expected="a class map naming every value of the mask")
    keys = _qualified(class_map) if scheme.qualify_road_values else \
        {k: normalise_label(v) for k, v in class_map.items()}
    mapping: dict[int, int] = {}
    bad: list[str] = []
    ambiguous: list[str] = []
    owns = False
    for value, key in sorted(keys.items()):
        kind, cls = _label_class(key, scheme)
        if kind == "own" and cls:
            owns = True
        if cls is None:
            if value in present:
                (ambiguous if kind == "ambiguous" else bad).append(class_map[value])
            continue
        mapping[value] = cls
    if bad or ambiguous:
        parts = []
        if bad:
            parts.append(f"labels {bad} have no counterpart among the tool's classes")
        if ambiguous:
            parts.append(f"labels {ambiguous} are ambiguous for this tool (they do not say "
                         f"which of its classes a pixel is)")
        raise GTLabelError(f"GT mask {mask_name}: " + "; ".join(parts) + f" (class map {shown})",
                           tool=tool, labels=bad + ambiguous, class_map=class_map,
                           expected=f"labels among {sorted(scheme.table)}")
    if not owns:
        raise GTLabelError(f"GT mask {mask_name} names none of the tool's classes: its labels "
                           f"are {sorted(set(class_map.values()))}", tool=tool,
                           labels=sorted(set(class_map.values())), class_map=class_map,
                           expected=f"a mask labelling {sorted(scheme.positives())}")
    lut = np.zeros(max(present + list(mapping)) + 1, dtype=np.uint8)
    for v, c in mapping.items():
        lut[v] = c
    return lut[a], {v: mapping[v] for v in present}


def remap_by_label(arr: np.ndarray, class_map: dict[int, str], table: dict[str, int], *,
                   tool: str, mask_name: str) -> tuple[np.ndarray, dict[int, int]]:
    """``remap_gt`` with a bare label table (kept for callers of version 1)."""
    return remap_gt(arr, class_map, LabelScheme(_norm_table(table)), tool=tool,
                    mask_name=mask_name)


# ============================================================================================
# Tool definitions
# ============================================================================================
@dataclass(frozen=True)
class SegTool:
    name: str
    inputs: str  # "bitemporal" | "post" | "image"
    scheme: LabelScheme
    file_classes: dict[int, str]  # class map embedded in the mask file
    model: str  # perception_models.MODEL_ZOO name
    select: Callable[[np.ndarray], np.ndarray]  # model labels → tool mask (uint8)
    doc: str
    result_classes: dict[int, str] | None = None
    mask_value: bool = False
    note: str | None = None
    always_png: bool = False
    classical: str | None = None  # "water" | "flood" | "vegetation"
    bands: int | None = None  # required band count of the (post) image
    result_keys: list[str] = field(default_factory=list)

    @property
    def binary(self) -> bool:
        return set(self.file_classes) == {0, 255}


def _identity(labels: np.ndarray) -> np.ndarray:
    return labels.astype(np.uint8)


def _nonzero(labels: np.ndarray) -> np.ndarray:
    return (labels > 0).astype(np.uint8) * 255


def _isin(ids) -> Callable[[np.ndarray], np.ndarray]:
    ids = sorted(int(i) for i in ids)

    def sel(labels: np.ndarray) -> np.ndarray:
        return np.isin(labels, ids).astype(np.uint8) * 255

    return sel


TOOLS: dict[str, SegTool] = {}


def _add(tool: SegTool) -> None:
    keys = ["tool", "mask_path"]
    if tool.result_classes is not None:
        keys.append("classes")
    if tool.mask_value:
        keys.append("mask_value")
    if tool.note:
        keys.append("note")
    keys.append("_meta")
    TOOLS[tool.name] = SegTool(**{**tool.__dict__, "result_keys": keys})


_DAMAGE_SCHEME = LabelScheme(DAMAGE_LABELS, frozenset({"building", "buildings",
                                                       "building-footprint"}))
_ROAD_SCHEME = LabelScheme(ROAD_LABELS, frozenset({"road", "roads"}))
_DAMAGE_RESULT = {1: "intact", 2: "partially damaged", 3: "totally destroyed"}

_add(SegTool(
    "seg.building_damage", "bitemporal", _DAMAGE_SCHEME, DAMAGE_CLASSES, "building_damage",
    _identity, result_classes=_DAMAGE_RESULT,
    doc="Bi-temporal building damage map: uint8 class indices 0 background, 1 intact, "
        "2 partially damaged, 3 totally destroyed."))
_add(SegTool(
    "seg.building_damage_opt_sar", "bitemporal", _DAMAGE_SCHEME, DAMAGE_CLASSES,
    "building_damage_opt_sar", _identity, result_classes=_DAMAGE_RESULT, always_png=True,
    doc="Optical-pre / SAR-post building damage map, same classes and GT remapping as "
        "seg.building_damage; the mask is always a PNG, as in the benchmark."))
_add(SegTool(
    "seg.lava", "bitemporal",
    _binary(["lava", "lava-flow", "lava-flows", "lava-area"], ["non-lava", "no-lava"]),
    {0: "non-lava", 255: "lava"}, "lava", _nonzero, result_classes={0: "non-lava", 255: "lava"},
    doc="Bi-temporal lava-flow extent: binary {0, 255} mask (255 = lava)."))
_add(SegTool(
    "seg.reconstruction_building", "bitemporal",
    _binary(["building_under_reconstruction", "under-reconstruction", "reconstruction",
             "reconstruction-building", "building-reconstruction", "rebuilt-building"],
            ["not_under_reconstruction", "not-reconstructed"]),
    {0: "not_under_reconstruction", 255: "building_under_reconstruction"},
    "reconstruction_building", _nonzero,
    result_classes={0: "not_under_reconstruction", 255: "building_under_reconstruction"},
    doc="Bi-temporal change detection of buildings under reconstruction (pre image vs a "
        "recovery-phase image): binary {0, 255} mask."))
_LANDSLIDE = _binary(["landslide", "landslides", "landslide-area", "mass-movement"],
                     ["non-landslide", "no-landslide"])
_add(SegTool(
    "seg.landslide_ms", "post", _LANDSLIDE, {0: "non-landslide", 255: "landslide"},
    "landslide_ms", _nonzero, result_classes={0: "non-landslide", 255: "landslide"}, bands=14,
    doc="Landslide segmentation from a 14-band stack (12-band Sentinel-2 + DEM + slope, "
        "10 m): binary {0, 255} mask."))
_add(SegTool(
    "seg.landslide_bitemporal", "bitemporal", _LANDSLIDE, {0: "non-landslide", 255: "landslide"},
    "landslide_bitemporal", _nonzero, result_classes={0: "non-landslide", 255: "landslide"},
    doc="Bi-temporal optical landslide detection (~0.59 m): binary {0, 255} mask."))
_add(SegTool(
    "seg.reservoir", "post", _binary(["reservoir", "reservoirs", "reservoir-water"],
                                     ["non-reservoir"]),
    {0: "background", 255: "reservoir"}, "reservoir", _nonzero,
    result_classes={0: "background", 255: "reservoir"}, bands=14, classical="water",
    doc="Reservoir / water-body segmentation from a 14-band stack (multi-spectral + DEM + "
        "slope, 10 m): binary {0, 255} mask."))
_add(SegTool(
    "seg.road_damage", "bitemporal", _ROAD_SCHEME, ROAD_CLASSES, "road_damage", _identity,
    result_classes={1: "intact", 2: "flooded", 3: "debris blocked"},
    doc="Bi-temporal road condition map: uint8 0 background, 1 intact road, 2 flooded road, "
        "3 debris-blocked road (dataset road labels 10/11/12 correspond to 1/2/3)."))

_ISAID_TOOLS = [
    ("seg.vehicle", {8, 9}, "vehicle",
     ["large_vehicle", "small_vehicle", "vehicle", "vehicles", "car", "cars", "truck",
      "vehicle_not_trapped", "vehicle_trapped"],
     "Binary mask: the large_vehicle (8) and small_vehicle (9) classes merged into 255."),
    ("seg.playground", {3, 4, 5, 6, 13}, "playground",
     ["baseball_diamond", "tennis_court", "basketball_court", "ground_track_field",
      "soccer_ball_field", "soccer-field", "playground", "sports-field"],
     "Binary mask: the sports-field classes (3, 4, 5, 6, 13) merged into 255."),
    ("seg.swimming_pool", {11}, "swimming_pool", ["swimming_pool", "pool"], None),
    ("seg.storage_tank", {12}, "storage_tank", ["storage_tank", "tank", "oil-tank"], None),
    ("seg.bridge", {7}, "bridge", ["bridge", "bridges"], None),
    ("seg.harbor", {15}, "harbor", ["harbor", "harbour", "port"], None),
    ("seg.roundabout", {2}, "roundabout", ["roundabout"], None),
    ("seg.ship", {1}, "ship", ["ship", "ships", "boat", "vessel"], None),
    ("seg.plane", {14}, "plane", ["plane", "planes", "airplane", "aircraft"], None),
]
for _name, _ids, _pos, _labels, _note in _ISAID_TOOLS:
    _add(SegTool(
        _name, "post", _binary(_labels), {0: "background", 255: _pos}, "isaid", _isin(_ids),
        mask_value=True, note=_note, always_png=True,
        doc=f"{_pos.replace('_', ' ').capitalize()} mask from a post-event optical image "
            f"(0.5-1 m; iSAID classes {sorted(_ids)}): binary {{0, 255}} PNG, no classes key."))

_add(SegTool(
    "seg.flood", "bitemporal",
    _binary(["flood", "flooded", "flooding", "flood-water", "floodwater", "flooded-area",
             "inundation", "inundated"],
            ["non-flood", "non-flooded", "not-flooded", "dry", "no-flood", "permanent-water",
             "permanent-water-body"]),
    {0: "background", 255: "flood"}, "water", _identity, mask_value=True, classical="flood",
    doc="Flood map: pixels that are water after but not before, binary {0, 255} (255 = "
        "flood), no classes key."))
_add(SegTool(
    "seg.vegetation", "image",
    _binary(["forest", "agriculture", "agricultural", "agriculture-land", "cropland",
             "farmland", "crop", "crops", "tree", "trees", "woodland", "shrub", "shrubland",
             "vegetation", "tree_not_fallen", "tree_fallen"],
            ["non-vegetation", "barren", "bareland", "rangeland", "grass", "grassland"]),
    {0: "non-vegetation", 255: "vegetation"}, "landcover", _isin({5, 6}),
    result_classes={5: "forest", 6: "agriculture"}, mask_value=True, classical="vegetation",
    doc="Vegetation mask from a single optical image: land-cover forest (5) and agriculture "
        "(6) merged into 255."))
_add(SegTool(
    "seg.building_lowres", "image",
    _binary(["building", "buildings", "building-footprint", "no-damage", "minor-damage",
             "major-damage", "destroyed", "un-classified", "building_no_damage",
             "building_damage", "building_total_damage", "building-minor-damage",
             "building-major-damage", "building-destroyed", "building-total-destruction"],
            ["non-building", "no-building"]),
    {0: "non-building", 255: "building"}, "building_lowres", _isin({1}),
    result_classes={0: "non-building", 255: "building"}, mask_value=True, always_png=True,
    doc="Building footprints on low-resolution imagery (~3.46 m): binary {0, 255} PNG."))

_AERIAL_TOOLS = [
    ("seg.building_intact_aerial", 1, ["building", "buildings"]),
    ("seg.building_damage_aerial", 2, ["building", "buildings"]),
    ("seg.building_destroyed_aerial", 3, ["building", "buildings"]),
    ("seg.pool_aerial", 4, []),
    ("seg.road_intact_aerial", 5, ["road", "roads"]),
    ("seg.road_debris_aerial", 6, ["road", "roads"]),
    ("seg.tree_fallen_aerial", 7, ["tree", "trees"]),
    ("seg.tree_standing_aerial", 8, ["tree", "trees"]),
    ("seg.vehicle_free_aerial", 9, ["vehicle", "vehicles", "car", "cars"]),
    ("seg.vehicle_trapped_aerial", 10, ["vehicle", "vehicles", "car", "cars"]),
    ("seg.water_aerial", 11, []),
]
for _name, _cid, _amb in _AERIAL_TOOLS:
    _cname = RESCUENET_NAMES[_cid]
    _add(SegTool(
        _name, "post", _binary(AERIAL_SYNONYMS[_cid], ambiguous=_amb),
        {0: "background", 255: _cname}, "aerial", _isin({_cid}),
        result_classes={_cid: _cname}, mask_value=True, always_png=True,
        classical="water" if _cid == 11 else None,
        doc=f"RescueNet-style aerial class {_cid} ({_cname}) from a post-event UAV/airborne "
            f"image: binary {{0, 255}} PNG (255 = {_cname})."))

#: checkpoint file of each perception tool (benchmark's MODEL_ZOO)
CHECKPOINTS = {name: f"seg_{t.model}.safetensors" for name, t in TOOLS.items()}


# ============================================================================================
# Running a tool
# ============================================================================================
def _read_image(path: Path, tool: str, argument: str) -> _classical.Image:
    import rasterio

    arr, _meta = read_raster(path, tool=tool, argument=argument)
    quiet = _quiet()
    try:
        with rasterio.open(path) as src:
            desc = list(src.descriptions or [])
    except Exception:  # pragma: no cover - read_raster already opened it
        desc = []
    finally:
        quiet.__exit__(None, None, None)
    return _classical.Image(arr, desc, Path(path).name)


def _gt(ctx: ToolContext, tool: str, args: dict, shape, *, image_name: str, argument: str,
        required: bool = True):
    """(GTMask, array) linked to the image, or raise GTMissingError."""
    gt = ctx.gt_lookup(tool, args) if ctx.gt_lookup else None
    if gt is None:
        if not required:
            return None, None
        raise GTMissingError(f"no ground-truth mask is linked to image {image_name}", tool=tool,
                             argument=argument,
                             expected="a GT mask linked to the image in the sample manifest")
    if not isinstance(gt, GTMask):
        raise ToolError(f"gt_lookup returned {type(gt).__name__}, not GTMask", tool=tool)
    gt_path = Path(gt.path)
    if not gt_path.is_file():
        raise GTMissingError(f"linked ground-truth mask {gt_path.name} of image {image_name} "
                             f"does not exist", tool=tool, argument=argument)
    arr, gt_meta = read_mask(gt_path, tool=tool, argument=argument)
    if arr.shape != tuple(shape):
        raise ToolError(f"GT mask {gt_path.name} is {arr.shape[0]}x{arr.shape[1]} but the image "
                        f"{image_name} is {shape[0]}x{shape[1]}", tool=tool, argument=argument,
                        expected="a GT mask on the image's grid")
    return gt, (arr, gt_meta)


def _gt_classes(gt: GTMask) -> dict:
    return {str(k): v for k, v in sorted(gt.class_map.items())}


def _run_gt(ctx: ToolContext, t: SegTool, paths: dict[str, Path], names: dict[str, str],
            shape) -> tuple[np.ndarray, dict, dict, float | None]:
    """(mask, _meta, extra hash inputs, pixel size)."""
    main_arg = "image_path" if t.inputs == "image" else "post_image_path"
    gt, (arr, _gm) = _gt(ctx, t.name, dict(paths), shape, image_name=names[main_arg],
                         argument=main_arg)
    gt_path = Path(gt.path)
    cmap = {int(k): v for k, v in gt.class_map.items()}
    if t.name == "seg.flood" and not _names_own_class(cmap, t.scheme) \
            and _names_own_class(cmap, _WATER_SCHEME):
        return _flood_from_water(ctx, t, paths, names, shape, gt, arr)
    mask, used = remap_gt(arr, cmap, t.scheme, tool=t.name, mask_name=gt_path.name)
    meta = {"mode": "gt", "gt_mask": gt_path.name,
            "class_remap": {str(k): int(v) for k, v in sorted(used.items())}}
    if gt.pixel_size_m is not None:
        meta["pixel_size_m"] = float(gt.pixel_size_m)
    return mask, meta, {"gt": gt_path, "gt_classes": _gt_classes(gt)}, gt.pixel_size_m


_WATER_SCHEME = _binary(["water", "water-body", "open-water"], ["non-water", "land", "no-water"])


def _names_own_class(cmap: dict[int, str], scheme: LabelScheme) -> bool:
    keys = _qualified(cmap)
    return any(scheme.table.get(k, 0) for k in keys.values())


def _flood_from_water(ctx, t, paths, names, shape, post_gt, post_arr):
    tool = t.name
    post_path = Path(post_gt.path)
    pre_gt, pre = _gt(ctx, tool, {"image_path": paths["pre_image_path"]}, shape,
                      image_name=names["pre_image_path"], argument="pre_image_path",
                      required=False)
    if pre_gt is None or Path(pre_gt.path).resolve() == post_path.resolve():
        raise GTMissingError(
            f"the GT mask {post_path.name} of post image {names['post_image_path']} is a water "
            f"mask; seg.flood marks water after but not before, so the pre image "
            f"{names['pre_image_path']} needs a linked water mask too", tool=tool,
            argument="pre_image_path", expected="a GT water mask linked to the pre image")
    pre_path = Path(pre_gt.path)
    post_w, used_post = remap_gt(post_arr, {int(k): v for k, v in post_gt.class_map.items()},
                                 _WATER_SCHEME, tool=tool, mask_name=post_path.name)
    pre_w, used_pre = remap_gt(pre[0], {int(k): v for k, v in pre_gt.class_map.items()},
                               _WATER_SCHEME, tool=tool, mask_name=pre_path.name)
    mask = ((post_w > 0) & (pre_w == 0)).astype(np.uint8) * 255
    px = post_gt.pixel_size_m if post_gt.pixel_size_m is not None else pre_gt.pixel_size_m
    meta = {"mode": "gt", "gt_mask": post_path.name, "gt_mask_pre": pre_path.name,
            "derived": "water in the post mask and not in the pre mask",
            "class_remap": {str(k): int(v) for k, v in sorted(used_post.items())},
            "class_remap_pre": {str(k): int(v) for k, v in sorted(used_pre.items())}}
    if px is not None:
        meta["pixel_size_m"] = float(px)
    extra = {"gt": post_path, "gt_classes": _gt_classes(post_gt), "gt_pre": pre_path,
             "gt_pre_classes": _gt_classes(pre_gt)}
    return mask, meta, extra, px


def _run_model(ctx: ToolContext, t: SegTool, paths: dict[str, Path]):
    arg_main = "image_path" if t.inputs == "image" else "post_image_path"
    pm.checkpoint_path(t.model, ctx.checkpoint_dir, tool=t.name)  # fail before reading images
    if t.name == "seg.flood":
        pre = _read_image(paths["pre_image_path"], t.name, "pre_image_path").data
        post = _read_image(paths["post_image_path"], t.name, "post_image_path").data
        pre_l, ckpt = pm.predict_labels("water", [pre], ctx.checkpoint_dir, tool=t.name)
        post_l, _ = pm.predict_labels("water", [post], ctx.checkpoint_dir, tool=t.name)
        mask = ((post_l == 1) & (pre_l != 1)).astype(np.uint8) * 255
    elif t.inputs == "bitemporal":
        pre = _read_image(paths["pre_image_path"], t.name, "pre_image_path").data
        post = _read_image(paths["post_image_path"], t.name, "post_image_path").data
        labels, ckpt = pm.predict_labels(t.model, [pre, post], ctx.checkpoint_dir, tool=t.name)
        mask = t.select(labels)
    else:
        img = _read_image(paths[arg_main], t.name, arg_main).data
        labels, ckpt = pm.predict_labels(t.model, [img], ctx.checkpoint_dir, tool=t.name)
        mask = t.select(labels)
    net, _ = pm.load_model("water" if t.name == "seg.flood" else t.model, ctx.checkpoint_dir,
                           tool=t.name)  # cached: the network that just ran
    meta = {"mode": "model", "model": t.model, "checkpoint": ckpt.name,
            "checkpoint_sha256": _sha(ckpt),
            "architecture": getattr(net, "studio_architecture", pm.ARCHITECTURE),
            "device": pm.device_name()}
    return mask, meta, {"checkpoint": ckpt, "device": pm.device_name()}, None


def _sha(path: Path) -> str:
    return file_sha256(path)[:16]


def _run_classical(ctx: ToolContext, t: SegTool, paths: dict[str, Path]):
    if t.classical is None:
        raise _classical.no_baseline(t.name)
    if t.classical == "flood":
        pre = _read_image(paths["pre_image_path"], t.name, "pre_image_path")
        post = _read_image(paths["post_image_path"], t.name, "post_image_path")
        m, info = _classical.flood_mask(pre, post, t.name)
    else:
        arg = "image_path" if t.inputs == "image" else "post_image_path"
        img = _read_image(paths[arg], t.name, arg)
        fn = _classical.vegetation_mask if t.classical == "vegetation" else _classical.water_mask
        m, info = fn(img, t.name)
    return m.astype(np.uint8) * 255, {"mode": "classical", **info}, {"method": info}, None


#: the benchmark's text of a perception tool's answer when its model cannot be loaded
STUB_NOTE = "Replace this stub with a real model backend."


def stub_observation(tool: str, error: str, inputs: dict[str, str]) -> dict:
    """The observation a benchmark ``seg.*`` tool returns when its checkpoint is missing:
    ``{tool, status: "stub", note, inputs, error}`` (``dora/tools/perception.py``,
    ``_stub_result``; dora-format.md §e "Without checkpoints"), plus ``_meta`` naming the mode.
    ``inputs`` holds the call's path arguments under their parameter names (the benchmark's
    keys vary by tool: ``pre_image``/``post_image`` for some, the parameter names for others).
    The kernel never returns a stub (``call_tool`` refuses them): a missing checkpoint raises
    ``ModelUnavailableError`` carrying this dict as ``observation``, and whoever serves an
    agent (``replay.mcp_server``) answers it as a normal observation, as the benchmark does.
    """
    return {"tool": tool, "status": "stub", "note": STUB_NOTE, "inputs": dict(inputs),
            "error": error, "_meta": {"mode": "model", "stub": True}}


def run_seg_tool(ctx: ToolContext, name: str, **args: str) -> dict:
    """Run perception tool ``name`` on its path arguments (see the module docstring)."""
    t = TOOLS[name]
    tool = t.name
    order = {"bitemporal": ["pre_image_path", "post_image_path"], "post": ["post_image_path"],
             "image": ["image_path"]}[t.inputs]
    paths = {a: ctx.resolve(args[a], tool=tool, argument=a) for a in order}
    names = {a: Path(str(args[a])).name for a in order}
    metas = {a: raster_meta(paths[a], tool=tool, argument=a) for a in order}
    ref = metas[order[0]]
    if t.inputs == "bitemporal":
        pre_m, post_m = metas["pre_image_path"], metas["post_image_path"]
        if pre_m.shape != post_m.shape:
            raise ToolInputError(f"pre image is {pre_m.height}x{pre_m.width} but post image is "
                                 f"{post_m.height}x{post_m.width}", tool=tool,
                                 argument="post_image_path", expected="pre and post of one size")
    main = order[-1]
    if t.bands is not None and metas[main].count != t.bands:
        raise ToolInputError(f"{names[main]} has {metas[main].count} band(s); {tool} needs a "
                             f"{t.bands}-band image (12-band multi-spectral + DEM + slope); "
                             f"merge them with ras.concat first", tool=tool, argument=main,
                             expected=f"a {t.bands}-band raster")
    mode = ctx.perception_mode or "gt"
    if mode == "gt":
        mask, meta, extra, px = _run_gt(ctx, t, paths, names, metas[main].shape)
    elif mode == "model":
        try:
            pm.checkpoint_path(t.model, ctx.checkpoint_dir, tool=tool)
        except ModelUnavailableError as exc:
            exc.observation = stub_observation(tool, str(exc), {a: str(args[a]) for a in order})
            raise
        mask, meta, extra, px = _run_model(ctx, t, paths)
    elif mode == "classical":
        mask, meta, extra, px = _run_classical(ctx, t, paths)
    else:
        raise ToolError(f"unknown perception mode {mode!r}", tool=tool,
                        expected="'gt', 'model' or 'classical'")
    like = None if t.always_png else (ref if ref.georeferenced else None)
    if like is None and not t.always_png and mode == "gt" and "gt" in extra:
        gt_meta = raster_meta(extra["gt"], tool=tool)
        like = gt_meta if gt_meta.georeferenced else None
    suffix = ".tif" if like is not None else ".png"
    if name in ("seg.building_damage", "seg.building_damage_opt_sar") and mode == "gt":
        # version-1 hash payload, so the damage masks keep their file names
        hash_inputs = {"pre": paths["pre_image_path"], "post": paths["post_image_path"],
                       "gt": extra["gt"], "gt_classes": extra["gt_classes"], "mode": "gt"}
    else:
        hash_inputs = {"images": [paths[a] for a in order], "mode": mode, **extra}
    out_path = ctx.output_path(tool, hash_inputs, suffix)
    write_mask(out_path, mask, like=like, class_map=t.file_classes, pixel_size_m=px)
    result: dict = {"tool": tool, "mask_path": ctx.artifact_name(out_path)}
    if t.result_classes is not None:
        result["classes"] = {str(k): v for k, v in t.result_classes.items()}
    if t.mask_value:
        result["mask_value"] = 255
    if t.note:
        result["note"] = t.note
    result["_meta"] = meta
    return result


# ============================================================================================
# Registration (signatures from the catalogue: every seg.* parameter is a required str path)
# ============================================================================================
_MODE_DOC = """

Modes: ``gt`` returns the linked GT mask remapped by label name (see the ``perception``
module docstring; no GT → GTMissingError, unmappable labels → GTLabelError); ``model`` runs
the network from ``<checkpoint_dir>/{ckpt}`` (ModelUnavailableError carrying the
benchmark's ``status: "stub"`` observation when the directory or file is missing); ``classical``: {classical}.
Output: uint8 mask, {fmt}; the class map travels inside the file. ``_meta.mode`` names the
mode; ``_meta`` holds no run-time fields, so replays are byte-identical."""

_CLASSICAL_DOC = {
    None: "no classical baseline (ModelUnavailableError)",
    "water": "water by NDWI > 0 (McFeeters 1996) on multi-spectral input or an Otsu (1979) "
             "threshold of SAR backscatter in dB",
    "flood": "water after and not before, water by NDWI > 0 (McFeeters 1996) or by an Otsu "
             "(1979) threshold of SAR backscatter in dB chosen on the post image",
    "vegetation": "NDVI > 0.2 (Tucker 1979; Sobrino et al. 2004) on red + NIR bands",
}


def _make(t: SegTool):
    if t.inputs == "bitemporal":
        def fn(ctx: ToolContext, pre_image_path: str, post_image_path: str) -> dict:
            return run_seg_tool(ctx, t.name, pre_image_path=pre_image_path,
                                post_image_path=post_image_path)
        notes = {"pre_image_path": "pre-event image",
                 "post_image_path": "post-event image, same size as pre"}
    elif t.inputs == "post":
        def fn(ctx: ToolContext, post_image_path: str) -> dict:
            return run_seg_tool(ctx, t.name, post_image_path=post_image_path)
        notes = {"post_image_path": "post-event image" + (
            f" ({t.bands} bands)" if t.bands else "")}
    else:
        def fn(ctx: ToolContext, image_path: str) -> dict:
            return run_seg_tool(ctx, t.name, image_path=image_path)
        notes = {"image_path": "single-date image"}
    fmt = ("always PNG" if t.always_png else
           "GeoTIFF when the " + ("pre " if t.inputs == "bitemporal" else "") +
           "image is georeferenced, else PNG")
    fn.__name__ = t.name.replace(".", "_")
    fn.__qualname__ = fn.__name__
    fn.__doc__ = t.doc + _MODE_DOC.format(ckpt=CHECKPOINTS[t.name],
                                          classical=_CLASSICAL_DOC[t.classical], fmt=fmt)
    return register(t.name, server="Perception", module="perception", result_keys=t.result_keys,
                    version=VERSION, notes=notes)(fn)


for _t in TOOLS.values():
    globals()[_t.name.replace(".", "_")] = _make(_t)
