"""Mask palettes: the one place for the colour of a class index (pure, no Django).

The convention is the **benchmark's**: the default palette of its ``vis`` tools (DORA
``dora/tools/vis.py``, ``_class_color``), which every mask overlay, damage map and legend an agent
sees is drawn with. By class index:

====  ==============  ================
 0    transparent     (background; the benchmark skips it)
 1    (255, 215, 0)   gold/yellow — xBD no-damage
 2    (255, 140, 0)   dark orange — xBD minor-damage
 3    (220, 20, 60)   crimson     — xBD major-damage
 4    (128, 0, 128)   purple      — xBD destroyed
 5    (30, 144, 255)  dodger blue — xBD un-classified
 6    (0, 191, 255)   deep sky blue
else  (255, 0, 0)     red (``OTHER_RGB``; 255 of a binary mask included)
====  ==============  ================

So class 2 is orange everywhere: on a map tile, on a replay's mask overlay, in ``vis.*`` output.
(Before issue 19 the tiles used a ColorBrewer damage scale, 2 yellow, and the overlays their own.)

The map (tiles, legends, vector features by damage label) uses the same colours, with two
documented extensions that the benchmark's tools never draw: indices 7 and above get distinct
colours (:data:`EXTRA_HEX`) instead of all red, so a land-cover mask with a dozen classes stays
readable (255, a binary mask's "selected" value, is cyan, :data:`SELECTED_HEX`); and a mask's class labels pick their colour by meaning (:func:`label_hex`: "destroyed"
is purple whatever its index; "water" blue), falling back to the index.

API: :func:`benchmark_rgb` (what ``vis.*`` draws), :func:`display_hex` / :func:`display_rgba` (the
map and overlays), :func:`label_hex`, :func:`hex_of`.
"""
from __future__ import annotations

#: the benchmark's palette (``vis._class_color``), class index → RGB
BENCHMARK_RGB: dict[int, tuple[int, int, int]] = {
    1: (255, 215, 0), 2: (255, 140, 0), 3: (220, 20, 60), 4: (128, 0, 128), 5: (30, 144, 255), 6: (0, 191, 255),
}
#: the benchmark's colour of every other non-zero value
OTHER_RGB: tuple[int, int, int] = (255, 0, 0)
#: the map's colours of indices past 6, in turn (the benchmark would paint them red)
EXTRA_HEX: tuple[str, ...] = ("#1b9e77", "#a6761d", "#e7298a", "#66a61e", "#7570b3", "#525252", "#b15928",
                              "#fb9a99")
#: the map's colour of 255, a binary mask's "selected" class (the tools' 0/255 outputs), not the
#: benchmark's red: on the map it must not read as a damage class
SELECTED_HEX = "#00e5ff"
#: the opacity of a mask drawn over imagery on the map (0–255)
OVERLAY_ALPHA = 200


def hex_of(rgb: tuple[int, int, int]) -> str:
    """``(255, 140, 0)`` → ``"#ff8c00"``."""
    return "#{:02x}{:02x}{:02x}".format(*rgb)


def benchmark_rgb(index: int) -> tuple[int, int, int]:
    """The benchmark's colour of a non-zero mask value (``BENCHMARK_RGB``, else ``OTHER_RGB``)."""
    return BENCHMARK_RGB.get(int(index), OTHER_RGB)


def display_hex(index: int) -> str | None:
    """The map's colour of a class index: None (transparent) for 0, the benchmark's for 1–6, then
    :data:`EXTRA_HEX` in turn."""
    index = int(index)
    if index == 0:
        return None
    if index == 255:
        return SELECTED_HEX
    if index in BENCHMARK_RGB:
        return hex_of(BENCHMARK_RGB[index])
    return EXTRA_HEX[index % len(EXTRA_HEX)]


def display_rgba(index: int, alpha: int = OVERLAY_ALPHA) -> tuple[int, int, int, int]:
    """:func:`display_hex` as RGBA (``(0, 0, 0, 0)`` for 0)."""
    colour = display_hex(index)
    if colour is None:
        return (0, 0, 0, 0)
    return (int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16), alpha)


#: label keywords → colour (matched on the lower-cased label, "_" and " " read as "-"); None: transparent
LABEL_HEX: list[tuple[tuple[str, ...], str | None]] = [
    (("background", "no-data", "nodata", "unlabeled", "unlabelled"), None),
    (("no-damage", "undamaged", "intact"), hex_of(BENCHMARK_RGB[1])),
    (("minor",), hex_of(BENCHMARK_RGB[2])),
    (("major", "partial"), hex_of(BENCHMARK_RGB[3])),  # the tools' "partially damaged" (xBD 2 and 3)
    (("destroyed",), hex_of(BENCHMARK_RGB[4])),
    (("un-classified", "unclassified", "unknown"), hex_of(BENCHMARK_RGB[5])),
    (("flood", "water", "inundat"), "#2c7fb8"),
    (("burn", "fire"), "#7f2704"),
    (("road",), "#525252"),
    (("building",), "#e6ab02"),
]


def label_hex(label: str) -> tuple[bool, str | None]:
    """``(True, colour)`` when a class label names a known meaning (colour None: transparent),
    else ``(False, None)``."""
    norm = str(label).strip().lower().replace("_", "-").replace(" ", "-")
    if norm.startswith(("non-", "not-")):
        return False, None  # "non-building", "not-under-reconstruction": the negative class goes by its index
    for keys, colour in LABEL_HEX:
        if any(k in norm for k in keys):
            return True, colour
    return False, None


__all__ = ["BENCHMARK_RGB", "OTHER_RGB", "EXTRA_HEX", "OVERLAY_ALPHA", "LABEL_HEX", "hex_of", "benchmark_rgb",
           "display_hex", "display_rgba", "label_hex", "SELECTED_HEX"]
