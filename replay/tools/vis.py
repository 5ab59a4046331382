"""Visualisation tools (``vis.*``): matplotlib (Agg canvas, no pyplot state) and numpy.

Every tool writes one PNG into the work dir under a hashed name and returns its name. Output is
deterministic: fixed figure sizes and dpi, a fixed palette, no timestamps or software tag in the
PNG metadata, so equal inputs give byte-identical files (on one matplotlib/FreeType build).

Images are read with rasterio: 3+ bands → the first three as RGB, 1 band → grey; non-uint8
data is stretched linearly between its 2nd and 98th percentiles. Masks are class-index rasters;
a mask of another size is resized to the image by nearest neighbour.
"""
from __future__ import annotations

import math
import textwrap
from pathlib import Path
from typing import Any

import numpy as np

from ._io import read_mask, read_mask_tags, read_raster
from .base import ToolContext, ToolInputError
from .registry import register

DPI = 100
#: overlay palette of the benchmark: 1 gold, 2 orange, 3 crimson, 4 purple, 5 dodger blue,
#: 6 deep sky blue, anything else (255 included) red
PALETTE = {1: (255, 215, 0), 2: (255, 165, 0), 3: (220, 20, 60), 4: (128, 0, 128),
           5: (30, 144, 255), 6: (0, 191, 255)}
OTHER = (255, 0, 0)
CHART_COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
                 "#7f7f7f", "#bcbd22", "#17becf"]


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------
def _figure(width_px: int, height_px: int):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width_px / DPI, height_px / DPI), dpi=DPI, facecolor="white")
    FigureCanvasAgg(fig)
    return fig


def _save(fig, path: Path) -> None:
    fig.savefig(path, format="png", dpi=DPI, metadata={"Software": None}, facecolor="white")


def _png(ctx: ToolContext, tool: str, key: dict) -> Path:
    return ctx.output_path(tool, key, ".png")


def _stretch(band: np.ndarray) -> np.ndarray:
    if band.dtype == np.uint8:
        return band
    b = band.astype(np.float64)
    ok = np.isfinite(b)
    if not ok.any():
        return np.zeros(b.shape, np.uint8)
    lo, hi = np.percentile(b[ok], [2, 98])
    if hi <= lo:
        hi = lo + 1.0
    out = np.clip((np.where(ok, b, lo) - lo) / (hi - lo), 0, 1) * 255.0
    return np.rint(out).astype(np.uint8)


def load_rgb(ctx: ToolContext, value: Any, tool: str, argument: str) -> tuple[np.ndarray, Path]:
    """(H×W×3 uint8, resolved path) of an image argument."""
    path = ctx.resolve(value, tool=tool, argument=argument)
    arr, _ = read_raster(path, tool=tool, argument=argument)
    if arr.shape[0] >= 3:
        bands = [arr[0], arr[1], arr[2]]
    else:
        bands = [arr[0]] * 3
    return np.dstack([_stretch(b) for b in bands]), path


def _load_mask(ctx, value, tool, argument, shape):
    path = ctx.resolve(value, tool=tool, argument=argument)
    mask, _ = read_mask(path, tool=tool, argument=argument)
    if mask.shape != shape:
        rows = (np.arange(shape[0]) * mask.shape[0] // shape[0]).astype(int)
        cols = (np.arange(shape[1]) * mask.shape[1] // shape[1]).astype(int)
        mask = mask[rows][:, cols]
    class_map, _ = read_mask_tags(path)
    return mask, class_map, path


def colour_of(value: int) -> tuple[int, int, int]:
    return PALETTE.get(int(value), OTHER)


def blend(rgb: np.ndarray, mask: np.ndarray, alpha: float) -> np.ndarray:
    """Each non-zero mask value blended over the image with its palette colour."""
    out = rgb.astype(np.float64).copy()
    for v in np.unique(mask):
        if v == 0:
            continue
        sel = mask == v
        out[sel] = (1.0 - alpha) * out[sel] + alpha * np.array(colour_of(int(v)), np.float64)
    return np.rint(out).astype(np.uint8)


def _check_alpha(alpha, tool, argument="alpha"):
    if alpha is None:
        return
    if not (math.isfinite(alpha) and 0.0 <= alpha <= 1.0):
        raise ToolInputError(f"{alpha} is outside 0..1", tool=tool, argument=argument,
                             expected="an opacity between 0 and 1")


def _rgb_arg(value, tool, argument, default):
    if value is None:
        return tuple(default)
    try:
        rgb = tuple(int(v) for v in value)
    except (TypeError, ValueError):
        rgb = ()
    if len(rgb) != 3 or not all(0 <= v <= 255 for v in rgb):
        raise ToolInputError(f"colour {value!r} is not [r, g, b]", tool=tool, argument=argument,
                             expected="three integers 0..255")
    return rgb


def _mpl(rgb):
    return tuple(v / 255.0 for v in rgb)


def _labels_for(classes, class_labels, class_map):
    out = {}
    for v in classes:
        if class_labels and str(v) in class_labels:
            out[str(v)] = str(class_labels[str(v)])
        elif class_map and int(v) in class_map:
            out[str(v)] = str(class_map[int(v)])
        else:
            out[str(v)] = f"class_{v}"
    return out


def _nice_length(target: float) -> float:
    """1, 2 or 5 × 10^k not above ``target`` (scale bars)."""
    if target <= 0:
        return 0.0
    k = math.floor(math.log10(target))
    for m in (5, 2, 1):
        if m * 10 ** k <= target:
            return float(m * 10 ** k)
    return float(10 ** k)


def _marker_pos(m: dict, i: int, tool: str):
    row = next((m[k] for k in ("pixel_row", "row", "y") if k in m and m[k] is not None), None)
    col = next((m[k] for k in ("pixel_col", "col", "x") if k in m and m[k] is not None), None)
    if row is None or col is None:
        raise ToolInputError(f"marker {i} lacks a row/col: {m}", tool=tool,
                             argument="point_markers",
                             expected="[{pixel_row|row|y, pixel_col|col|x, label?, color?}]")
    try:
        return float(row), float(col)
    except (TypeError, ValueError):
        raise ToolInputError(f"marker {i} has a non-numeric position: {m}", tool=tool,
                             argument="point_markers") from None


def _map_figure(img: np.ndarray, *, title, legend, legend_alpha, markers, north_arrow,
                scale_bar, pixel_size_m, route=None):
    """A 1000×800 px map page: title, image, legend, markers, north arrow and scale bar.

    ``legend``: [(label, (r, g, b))]; ``markers``: [(row, col, label, (r, g, b), radius)];
    ``route``: (cols, rows, (r, g, b), width). Returns (figure, scale bar drawn?)."""
    from matplotlib.patches import Circle, Patch, Rectangle

    fig = _figure(1000, 800)
    ax = fig.add_axes([0.04, 0.05, 0.92, 0.85])
    ax.imshow(img, interpolation="nearest")
    ax.set_xlim(-0.5, img.shape[1] - 0.5)
    ax.set_ylim(img.shape[0] - 0.5, -0.5)
    ax.set_xticks([])
    ax.set_yticks([])
    if title:
        fig.suptitle(str(title), fontsize=16, y=0.97)
    if route is not None:
        cols, rows, colour, width = route
        if len(cols) >= 2:
            ax.plot(cols, rows, color=_mpl(colour), linewidth=width, solid_capstyle="round",
                    solid_joinstyle="round")
    h, w = img.shape[:2]
    scale = max(h, w) / 800.0
    for row, col, label, colour, radius in markers:
        ax.add_patch(Circle((col, row), radius=radius * scale, facecolor=_mpl(colour),
                            edgecolor="black", linewidth=1.0, zorder=5))
        if label:
            ax.annotate(str(label), (col, row), xytext=(6, 6), textcoords="offset points",
                        fontsize=10, color="black", zorder=6,
                        bbox={"boxstyle": "round,pad=0.2", "fc": "white", "alpha": 0.8,
                              "lw": 0})
    if legend:
        handles = [Patch(facecolor=_mpl(c), edgecolor="black", label=str(lbl))
                   for lbl, c in legend]
        ax.legend(handles=handles, loc="lower right", fontsize=9,
                  framealpha=legend_alpha if legend_alpha is not None else 0.8)
    if north_arrow:
        ax.annotate("N", xy=(0.95, 0.97), xytext=(0.95, 0.85), xycoords="axes fraction",
                    textcoords="axes fraction", ha="center", va="center", fontsize=14,
                    fontweight="bold",
                    arrowprops={"facecolor": "black", "width": 4, "headwidth": 12})
    drew_scale = False
    if scale_bar and pixel_size_m:
        length_m = _nice_length(w * float(pixel_size_m) / 5.0)
        if length_m > 0:
            bar_px = length_m / float(pixel_size_m)
            x0, y0 = 0.04 * w, 0.95 * h
            ax.add_patch(Rectangle((x0, y0 - 0.012 * h), bar_px, 0.012 * h, facecolor="black",
                                   edgecolor="white", linewidth=1.0, zorder=5))
            text = f"{length_m / 1000:g} km" if length_m >= 1000 else f"{length_m:g} m"
            ax.text(x0 + bar_px / 2, y0 - 0.02 * h, text, ha="center", va="bottom",
                    fontsize=10, zorder=6,
                    bbox={"boxstyle": "round,pad=0.2", "fc": "white", "alpha": 0.8, "lw": 0})
            drew_scale = True
    return fig, drew_scale


def _legend_items(items, tool):
    out = []
    for i, it in enumerate(items or []):
        if not isinstance(it, dict) or "label" not in it:
            raise ToolInputError(f"legend item {i} lacks a label: {it!r}", tool=tool,
                                 argument="legend_items", expected="[{label, color:[r,g,b]}]")
        out.append((str(it["label"]), _rgb_arg(it.get("color"), tool, "legend_items",
                                                (128, 128, 128))))
    return out


# --------------------------------------------------------------------------------------------
@register("vis.overlay_mask", server="Vis", module="visualization",
          result_keys=["tool", "output_path", "classes_present", "class_labels"])
def vis_overlay_mask(ctx: ToolContext, image_path: str, mask_path: str, alpha: float = 0.45,
                     class_labels: dict[str, str] | None = None) -> dict:
    """The image (same size, PNG) with every non-zero mask value blended over it:
    ``(1 − alpha)·pixel + alpha·colour`` with the fixed palette (1 gold, 2 orange, 3 crimson,
    4 purple, 5 dodger blue, 6 deep sky blue, others incl. 255 red). ``class_labels`` (mask value
    as a string → label) names the classes present; the mask's own class map, then
    ``class_<v>``, fill the gaps. Errors: alpha outside 0..1, unreadable files, a multi-band
    mask → ToolInputError / ModalityError.
    """
    from PIL import Image

    tool = "vis.overlay_mask"
    _check_alpha(alpha, tool)
    img, ipath = load_rgb(ctx, image_path, tool, "image_path")
    mask, class_map, mpath = _load_mask(ctx, mask_path, tool, "mask_path", img.shape[:2])
    out = blend(img, mask, float(alpha))
    present = [int(v) for v in np.unique(mask) if v != 0]
    dst = _png(ctx, tool, {"image": ipath, "mask": mpath, "alpha": float(alpha),
                           "labels": class_labels})
    Image.fromarray(out, mode="RGB").save(dst, format="PNG")
    return {"tool": tool, "output_path": ctx.artifact_name(dst), "classes_present": present,
            "class_labels": _labels_for(present, class_labels, class_map)}


@register("vis.add_map_elements", server="Vis", module="visualization",
          result_keys=["tool", "output_path", "title", "has_legend", "legend_alpha",
                       "point_marker_count", "point_marker_labels", "north_arrow", "scale_bar"],
          notes={"legend_items": "[{label, color:[r,g,b]}]",
                 "point_markers": "[{pixel_row|row|y, pixel_col|col|x, label?, "
                                  "color?=[0,255,255], radius?=7}]",
                 "pixel_size_m": "scale bar drawn only when given"})
def vis_add_map_elements(ctx: ToolContext, image_path: str, title: str | None = None,
                         legend_items: list[dict] | None = None,
                         legend_alpha: float | None = None,
                         point_markers: list[dict] | None = None, north_arrow: bool = True,
                         scale_bar: bool = True, pixel_size_m: float | None = None) -> dict:
    """A 1000×800 px map page around an image: title, legend, north arrow (the image is taken
    as north-up), a scale bar (a 1/2/5·10^k m length near a fifth of the image width; drawn
    only with ``pixel_size_m``) and labelled circular point markers (radius in pixels of an
    800 px image, default 7; colour default cyan). ``scale_bar`` in the result says whether a
    bar was drawn. Errors: a marker without row/col, a colour that is not [r, g, b], alpha
    outside 0..1, pixel size ≤ 0 → ToolInputError.
    """
    tool = "vis.add_map_elements"
    _check_alpha(legend_alpha, tool, "legend_alpha")
    if pixel_size_m is not None and not pixel_size_m > 0:
        raise ToolInputError(f"must be positive, got {pixel_size_m}", tool=tool,
                             argument="pixel_size_m", expected="metres per pixel > 0")
    img, ipath = load_rgb(ctx, image_path, tool, "image_path")
    legend = _legend_items(legend_items, tool)
    markers = []
    for i, m in enumerate(point_markers or []):
        if not isinstance(m, dict):
            raise ToolInputError(f"marker {i} is not an object", tool=tool,
                                 argument="point_markers")
        row, col = _marker_pos(m, i, tool)
        markers.append((row, col, m.get("label"), _rgb_arg(m.get("color"), tool,
                                                           "point_markers", (0, 255, 255)),
                        float(m.get("radius", 7) or 7)))
    fig, drew = _map_figure(img, title=title, legend=legend, legend_alpha=legend_alpha,
                            markers=markers, north_arrow=north_arrow, scale_bar=scale_bar,
                            pixel_size_m=pixel_size_m)
    dst = _png(ctx, tool, {"image": ipath, "title": title, "legend": legend_items,
                           "legend_alpha": legend_alpha, "markers": point_markers,
                           "north": bool(north_arrow), "scale": bool(scale_bar),
                           "px": pixel_size_m})
    _save(fig, dst)
    return {"tool": tool, "output_path": ctx.artifact_name(dst), "title": title,
            "has_legend": bool(legend), "legend_alpha": legend_alpha,
            "point_marker_count": len(markers),
            "point_marker_labels": [str(m[2]) for m in markers if m[2]],
            "north_arrow": bool(north_arrow), "scale_bar": drew}


@register("vis.damage_map", server="Vis", module="visualization",
          result_keys=["tool", "output_path", "title", "has_legend", "legend_alpha",
                       "point_marker_count", "point_marker_labels", "north_arrow", "scale_bar",
                       "layers"],
          types_={"overlay_mask_path": "str|null"},
          notes={"overlay_mask_path": "required but may be null (no overlay)",
                 "class_labels": "mask value (string) -> legend label; default 'class_<v>'"})
def vis_damage_map(ctx: ToolContext, base_image_path: str, overlay_mask_path: str | None,
                   title: str = "Damage Assessment Map", pixel_size_m: float | None = None,
                   class_labels: dict[str, str] | None = None, alpha: float = 0.45) -> dict:
    """Standard damage-assessment map: ``vis.overlay_mask`` blending (when a mask is given)
    plus the ``vis.add_map_elements`` page, with one legend entry per class present (palette
    colour; label from ``class_labels``, the mask's class map, else ``class_<v>``).
    ``layers`` lists what was drawn, in order. Errors as the two tools it combines.
    """
    tool = "vis.damage_map"
    _check_alpha(alpha, tool)
    if pixel_size_m is not None and not pixel_size_m > 0:
        raise ToolInputError(f"must be positive, got {pixel_size_m}", tool=tool,
                             argument="pixel_size_m", expected="metres per pixel > 0")
    img, ipath = load_rgb(ctx, base_image_path, tool, "base_image_path")
    layers = ["base_image"]
    legend = []
    mpath = None
    if overlay_mask_path:
        mask, class_map, mpath = _load_mask(ctx, overlay_mask_path, tool, "overlay_mask_path",
                                            img.shape[:2])
        img = blend(img, mask, float(alpha))
        present = [int(v) for v in np.unique(mask) if v != 0]
        labels = _labels_for(present, class_labels, class_map)
        legend = [(labels[str(v)], colour_of(v)) for v in present]
        layers.append("damage_overlay")
    fig, drew = _map_figure(img, title=title, legend=legend, legend_alpha=0.8, markers=[],
                            north_arrow=True, scale_bar=True, pixel_size_m=pixel_size_m)
    if legend:
        layers.append("legend")
    layers.append("north_arrow")
    if drew:
        layers.append("scale_bar")
    dst = _png(ctx, tool, {"image": ipath, "mask": mpath, "title": title, "px": pixel_size_m,
                           "labels": class_labels, "alpha": float(alpha)})
    _save(fig, dst)
    return {"tool": tool, "output_path": ctx.artifact_name(dst), "title": title,
            "has_legend": bool(legend), "legend_alpha": 0.8 if legend else None,
            "point_marker_count": 0, "point_marker_labels": [], "north_arrow": True,
            "scale_bar": drew, "layers": layers}


@register("vis.route_map", server="Vis", module="visualization",
          result_keys=["tool", "output_path", "path_point_count", "start_point", "end_point",
                       "point_marker_labels", "has_overlay", "legend_items"],
          notes={"path_pixels": "[[row,col],...] e.g. from vec.graph_shortest_path",
                 "start_point": "[row,col]; default first path pixel",
                 "route_color": "default [0,191,255]"})
def vis_route_map(ctx: ToolContext, base_image_path: str, path_pixels: list[list[int]],
                  title: str = "Intact Route Map", pixel_size_m: float | None = None,
                  start_point: list[int] | None = None, end_point: list[int] | None = None,
                  overlay_mask_path: str | None = None,
                  class_labels: dict[str, str] | None = None, alpha: float = 0.35,
                  route_color: list[int] | None = None, route_width: int = 5) -> dict:
    """A route polyline ([row, col] pixels) on the base image, with start (green) and end
    (red) markers (default: the first and last path pixel), optionally over a damage overlay,
    on the ``vis.add_map_elements`` page. An empty path (no route found) draws the markers
    only. Errors: a path point that is not [row, col], bad colour, width < 1, alpha outside
    0..1 → ToolInputError.
    """
    tool = "vis.route_map"
    _check_alpha(alpha, tool)
    colour = _rgb_arg(route_color, tool, "route_color", (0, 191, 255))
    if int(route_width) < 1:
        raise ToolInputError(f"must be >= 1, got {route_width}", tool=tool,
                             argument="route_width", expected="a line width in points >= 1")
    for name, pt in (("start_point", start_point), ("end_point", end_point)):
        if pt is not None and len(pt) != 2:
            raise ToolInputError(f"expected [row, col], got {pt}", tool=tool, argument=name)
    pts = []
    for i, p in enumerate(path_pixels):
        if len(p) != 2:
            raise ToolInputError(f"point {i} is {p}, not [row, col]", tool=tool,
                                 argument="path_pixels", expected="[[row, col], ...]")
        pts.append((int(p[0]), int(p[1])))
    img, ipath = load_rgb(ctx, base_image_path, tool, "base_image_path")
    legend = [("Route", colour)]
    mpath = None
    if overlay_mask_path:
        mask, class_map, mpath = _load_mask(ctx, overlay_mask_path, tool, "overlay_mask_path",
                                            img.shape[:2])
        img = blend(img, mask, float(alpha))
        present = [int(v) for v in np.unique(mask) if v != 0]
        labels = _labels_for(present, class_labels, class_map)
        legend += [(labels[str(v)], colour_of(v)) for v in present]
    start = [int(v) for v in start_point] if start_point is not None else (
        list(pts[0]) if pts else None)
    end = [int(v) for v in end_point] if end_point is not None else (
        list(pts[-1]) if pts else None)
    markers = []
    if start is not None:
        markers.append((start[0], start[1], "Start", (0, 200, 0), 9.0))
        legend.append(("Start", (0, 200, 0)))
    if end is not None:
        markers.append((end[0], end[1], "End", (230, 0, 0), 9.0))
        legend.append(("End", (230, 0, 0)))
    route = ([c for _r, c in pts], [r for r, _c in pts], colour, int(route_width))
    fig, _drew = _map_figure(img, title=title, legend=legend, legend_alpha=0.8,
                             markers=markers, north_arrow=True, scale_bar=True,
                             pixel_size_m=pixel_size_m, route=route)
    dst = _png(ctx, tool, {"image": ipath, "path": [list(p) for p in pts], "title": title,
                           "px": pixel_size_m, "start": start, "end": end, "mask": mpath,
                           "labels": class_labels, "alpha": float(alpha), "colour": list(colour),
                           "width": int(route_width)})
    _save(fig, dst)
    return {"tool": tool, "output_path": ctx.artifact_name(dst), "path_point_count": len(pts),
            "start_point": start, "end_point": end,
            "point_marker_labels": [m[2] for m in markers], "has_overlay": mpath is not None,
            "legend_items": [lbl for lbl, _c in legend]}


# --------------------------------------------------------------------------------------------
def _chart_data(data: dict, tool: str, *, non_negative: bool = False) -> tuple[list, list]:
    if not data:
        raise ToolInputError("is empty", tool=tool, argument="data",
                             expected="a dict of label -> number")
    labels, values = [], []
    for k, v in data.items():
        try:
            f = float(v)
        except (TypeError, ValueError):
            f = float("nan")
        if not math.isfinite(f):
            raise ToolInputError(f"value of {k!r} is {v!r}", tool=tool, argument="data",
                                 expected="finite numbers")
        if non_negative and f < 0:
            raise ToolInputError(f"value of {k!r} is negative ({f})", tool=tool, argument="data",
                                 expected="values >= 0 for a pie chart")
        labels.append(str(k))
        values.append(f)
    return labels, values


def _basic_stats(labels, values) -> dict:
    total = float(sum(values))
    imax = max(range(len(values)), key=lambda i: (values[i], -i))
    imin = min(range(len(values)), key=lambda i: (values[i], i))
    return {"count": len(values), "total": total, "mean": total / len(values),
            "max_label": labels[imax], "max_value": values[imax],
            "min_label": labels[imin], "min_value": values[imin]}


@register("vis.pie_chart", server="Vis", module="visualization",
          result_keys=["tool", "output_path", "chart_type", "statistics", "title"])
def vis_pie_chart(ctx: ToolContext, data: dict[str, float], title: str = "Pie Chart") -> dict:
    """800×600 px pie chart of category values (slices in the given order, percentages
    printed). ``statistics``: count, total, mean, max/min label and value, and ``percentages``
    per label (value / total · 100). Errors: empty data, non-numeric or negative values, a zero
    total → ToolInputError.
    """
    tool = "vis.pie_chart"
    labels, values = _chart_data(data, tool, non_negative=True)
    total = sum(values)
    if total <= 0:
        raise ToolInputError("all values are 0", tool=tool, argument="data",
                             expected="at least one positive value")
    fig = _figure(800, 600)
    ax = fig.add_axes([0.05, 0.05, 0.6, 0.82])
    colours = [CHART_COLOURS[i % len(CHART_COLOURS)] for i in range(len(values))]
    ax.pie(values, colors=colours, autopct="%1.1f%%", startangle=90, counterclock=False,
           wedgeprops={"edgecolor": "white"})
    ax.set_aspect("equal")
    fig.legend(handles=ax.patches, labels=[lbl[:24] for lbl in labels], loc="center right",
               fontsize=9)
    fig.suptitle(str(title), fontsize=14)
    dst = _png(ctx, tool, {"data": [[k, v] for k, v in zip(labels, values)], "title": title})
    _save(fig, dst)
    stats = _basic_stats(labels, values)
    stats["percentages"] = {k: v / total * 100.0 for k, v in zip(labels, values)}
    return {"tool": tool, "output_path": ctx.artifact_name(dst), "chart_type": "pie",
            "statistics": stats, "title": title}


@register("vis.bar_chart", server="Vis", module="visualization",
          result_keys=["tool", "output_path", "chart_type", "statistics", "title"])
def vis_bar_chart(ctx: ToolContext, data: dict[str, float], title: str = "Bar Chart") -> dict:
    """900×600 px bar chart in the given order, values printed on the bars; labels truncated to
    16 characters. ``statistics``: count, total, mean, max/min label and value. Errors: empty
    data, non-numeric values → ToolInputError.
    """
    tool = "vis.bar_chart"
    labels, values = _chart_data(data, tool)
    fig = _figure(900, 600)
    ax = fig.add_axes([0.08, 0.18, 0.88, 0.72])
    xs = list(range(len(values)))
    bars = ax.bar(xs, values, color=[CHART_COLOURS[i % len(CHART_COLOURS)] for i in xs])
    ax.set_xticks(xs)
    ax.set_xticklabels([lbl[:16] for lbl in labels], rotation=30, ha="right", fontsize=9)
    ax.bar_label(bars, fmt="%g", fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    ax.set_title(str(title), fontsize=14)
    dst = _png(ctx, tool, {"data": [[k, v] for k, v in zip(labels, values)], "title": title})
    _save(fig, dst)
    return {"tool": tool, "output_path": ctx.artifact_name(dst), "chart_type": "bar",
            "statistics": _basic_stats(labels, values), "title": title}


@register("vis.line_chart", server="Vis", module="visualization",
          result_keys=["tool", "output_path", "chart_type", "statistics", "title"],
          notes={"data": "ordered x-label -> y"})
def vis_line_chart(ctx: ToolContext, data: dict[str, float], title: str = "Line Chart") -> dict:
    """900×600 px line chart in insertion order (temporal trends). ``statistics``: count,
    total, mean, max/min label and value, first, last, change (last − first) and change_pct
    (null when first is 0). Errors: empty data, non-numeric values → ToolInputError.
    """
    tool = "vis.line_chart"
    labels, values = _chart_data(data, tool)
    fig = _figure(900, 600)
    ax = fig.add_axes([0.08, 0.15, 0.88, 0.75])
    xs = list(range(len(values)))
    ax.plot(xs, values, marker="o", color=CHART_COLOURS[0], linewidth=2)
    ax.set_xticks(xs)
    ax.set_xticklabels([lbl[:16] for lbl in labels], rotation=30, ha="right", fontsize=9)
    ax.grid(alpha=0.3)
    ax.set_title(str(title), fontsize=14)
    dst = _png(ctx, tool, {"data": [[k, v] for k, v in zip(labels, values)], "title": title})
    _save(fig, dst)
    stats = _basic_stats(labels, values)
    first, last = values[0], values[-1]
    stats.update({"first": first, "last": last, "change": last - first,
                  "change_pct": (last - first) / first * 100.0 if first else None})
    return {"tool": tool, "output_path": ctx.artifact_name(dst), "chart_type": "line",
            "statistics": stats, "title": title}


# --------------------------------------------------------------------------------------------
def _panel(ax, img, label):
    ax.imshow(img, interpolation="nearest")
    ax.set_xticks([])
    ax.set_yticks([])
    if label:
        ax.set_title(str(label), fontsize=12)


@register("vis.before_after_panel", server="Vis", module="visualization",
          result_keys=["tool", "output_path", "title"])
def vis_before_after_panel(ctx: ToolContext, pre_image_path: str, post_image_path: str,
                           title: str = "Before / After Comparison") -> dict:
    """1200×650 px side-by-side panel: the pre image ("Before") left, the post image
    ("After") right, each scaled to its panel. Errors: unreadable images → ToolInputError."""
    tool = "vis.before_after_panel"
    pre, ppre = load_rgb(ctx, pre_image_path, tool, "pre_image_path")
    post, ppost = load_rgb(ctx, post_image_path, tool, "post_image_path")
    fig = _figure(1200, 650)
    for i, (img, label) in enumerate(((pre, "Before"), (post, "After"))):
        _panel(fig.add_axes([0.02 + 0.5 * i, 0.03, 0.46, 0.82]), img, label)
    fig.suptitle(str(title), fontsize=16)
    dst = _png(ctx, tool, {"pre": ppre, "post": ppost, "title": title})
    _save(fig, dst)
    return {"tool": tool, "output_path": ctx.artifact_name(dst), "title": title}


@register("vis.temporal_panel", server="Vis", module="visualization",
          result_keys=["tool", "output_path", "labels", "title"],
          notes={"labels": "default t1..tn"})
def vis_temporal_panel(ctx: ToolContext, image_paths: list[str], labels: list[str] | None = None,
                       title: str = "Temporal Panel", columns: int = 2) -> dict:
    """Grid of time-step images (row-major, ``columns`` per row, 500×420 px per cell plus a
    title band), each captioned with its label (default t1..tn). Errors: no images, a label
    count that differs from the image count, columns < 1 → ToolInputError."""
    tool = "vis.temporal_panel"
    if not image_paths:
        raise ToolInputError("is empty", tool=tool, argument="image_paths",
                             expected="one or more image paths")
    if int(columns) < 1:
        raise ToolInputError(f"must be >= 1, got {columns}", tool=tool, argument="columns")
    n = len(image_paths)
    labels = list(labels) if labels else [f"t{i + 1}" for i in range(n)]
    if len(labels) != n:
        raise ToolInputError(f"{len(labels)} labels for {n} images", tool=tool,
                             argument="labels", expected="one label per image")
    imgs, paths = [], []
    for p in image_paths:
        img, rp = load_rgb(ctx, p, tool, "image_paths")
        imgs.append(img)
        paths.append(rp)
    cols = min(int(columns), n)
    rows = math.ceil(n / cols)
    cw, ch, top = 500, 420, 60
    W, H = cols * cw, rows * ch + top
    fig = _figure(W, H)
    for i, (img, lbl) in enumerate(zip(imgs, labels)):
        r, c = divmod(i, cols)
        left = (c * cw + 10) / W
        bottom = (H - top - (r + 1) * ch + 10) / H
        _panel(fig.add_axes([left, bottom, (cw - 20) / W, (ch - 45) / H]), img, lbl)
    fig.suptitle(str(title), fontsize=16, y=1 - 15 / H)
    dst = _png(ctx, tool, {"images": paths, "labels": labels, "title": title, "columns": cols})
    _save(fig, dst)
    return {"tool": tool, "output_path": ctx.artifact_name(dst), "labels": [str(x) for x in labels],
            "title": title}


@register("vis.report_page", server="Vis", module="visualization",
          result_keys=["tool", "output_path", "title", "components"],
          types_={"map_image_path": "str|null", "chart_image_path": "str|null"},
          notes={"map_image_path": "required but may be null",
                 "chart_image_path": "required but may be null"})
def vis_report_page(ctx: ToolContext, map_image_path: str | None, chart_image_path: str | None,
                    summary_text: str = "", key_statistics: dict[str, Any] | None = None,
                    title: str = "Disaster Situation Report") -> dict:
    """A 1400×1000 px one-page situation report: title, the map (top left) and the chart (top
    right), the summary text wrapped at 95 characters (bottom left, at most 18 lines) and the
    key statistics as "key: value" lines (bottom right, at most 16, numbers with up to 4
    significant decimals). A null image is left out; a path that cannot be found is an error
    (the benchmark skips it silently). ``components`` says what is on the page."""
    tool = "vis.report_page"
    fig = _figure(1400, 1000)
    fig.suptitle(str(title), fontsize=20, y=0.97)
    key = {"title": title, "summary": summary_text, "stats": key_statistics}
    components = {"map": False, "chart": False, "summary_text": bool(summary_text),
                  "key_statistics": bool(key_statistics)}
    for name, value, rect in (("map", map_image_path, [0.03, 0.40, 0.46, 0.50]),
                              ("chart", chart_image_path, [0.51, 0.40, 0.46, 0.50])):
        if not value:
            continue
        img, rp = load_rgb(ctx, value, tool, f"{name}_image_path")
        ax = fig.add_axes(rect)
        ax.imshow(img, interpolation="antialiased")
        ax.axis("off")
        components[name] = True
        key[name] = rp
    tax = fig.add_axes([0.03, 0.03, 0.55, 0.33])
    tax.axis("off")
    tax.set_title("Summary", loc="left", fontsize=13, fontweight="bold")
    if summary_text:
        lines = textwrap.wrap(str(summary_text), width=95)[:18]
        tax.text(0.0, 1.0, "\n".join(lines), va="top", ha="left", fontsize=10,
                 transform=tax.transAxes, family="DejaVu Sans")
    sax = fig.add_axes([0.61, 0.03, 0.36, 0.33])
    sax.axis("off")
    sax.set_title("Key statistics", loc="left", fontsize=13, fontweight="bold")
    if key_statistics:
        lines = []
        for k, v in list(key_statistics.items())[:16]:
            if isinstance(v, float):
                v = f"{v:,.4g}" if abs(v) < 1e6 else f"{v:,.0f}"
            lines.append(f"{k}: {v}"[:60])
        sax.text(0.0, 1.0, "\n".join(lines), va="top", ha="left", fontsize=11,
                 transform=sax.transAxes)
    dst = _png(ctx, tool, key)
    _save(fig, dst)
    return {"tool": tool, "output_path": ctx.artifact_name(dst), "title": title,
            "components": components}


# --------------------------------------------------------------------------------------------
@register("vis.heatmap", server="Vis", module="visualization",
          result_keys=["tool", "heatmap_path", "point_count", "stats"],
          notes={"points_path": "GeoJSON points/polygons (centroids used)",
                 "bandwidth": "Gaussian KDE bandwidth; default automatic"})
def vis_heatmap(ctx: ToolContext, points_path: str, base_image_path: str | None = None,
                bandwidth: float | None = None, colormap: str = "hot") -> dict:
    """Gaussian kernel-density heatmap of feature locations (centroids for non-points).

    Density ``f(g) = 1/(n·2πσ²) · Σ exp(−|g − p|²/(2σ²))`` on a grid of 256 cells along the
    longer side, in the layer's units⁻² (pixels⁻² over a base image). σ = ``bandwidth`` in the
    layer's units (pixels over a base image), else Scott's rule on the pooled spread:
    σ = n^(−1/6) · √((var x + var y)/2) (1 unit when that is 0). Without a base image the grid
    covers the points' bounds grown by 3σ; with one it covers the image (georeferenced points
    are projected into a georeferenced image's pixel grid; pixel-space points are used as
    col/row). ``stats``: kde_max, kde_mean (over the grid) and the grid extent
    [xmin, ymin, xmax, ymax]. Errors: fewer than 2 points, bandwidth ≤ 0, unknown colormap, a
    georeferenced layer over an image without CRS → ToolInputError.
    """
    import matplotlib

    from ._io import raster_meta, read_vector

    tool = "vis.heatmap"
    if bandwidth is not None and not (math.isfinite(bandwidth) and bandwidth > 0):
        raise ToolInputError(f"must be positive, got {bandwidth}", tool=tool,
                             argument="bandwidth", expected="a kernel width > 0 (or null)")
    if colormap not in matplotlib.colormaps:
        raise ToolInputError(f"unknown colormap {colormap!r}", tool=tool, argument="colormap",
                             expected="a matplotlib colormap name, e.g. 'hot', 'viridis'")
    gdf, vpath = read_vector(ctx, points_path, tool=tool, argument="points_path")
    img = None
    ipath = None
    if base_image_path:
        img, ipath = load_rgb(ctx, base_image_path, tool, "base_image_path")
        if gdf.crs is not None:
            meta = raster_meta(ipath, tool=tool, argument="base_image_path")
            if not meta.georeferenced:
                raise ToolInputError("the points are georeferenced but the image has no CRS",
                                     tool=tool, argument="base_image_path",
                                     expected="a georeferenced image, or pixel-space points")
            gdf = gdf.to_crs(meta.crs)
            inv = ~meta.transform
    xs, ys = [], []
    for g in gdf.geometry:
        if g is None or g.is_empty:
            continue
        p = g if g.geom_type == "Point" else g.centroid
        x, y = float(p.x), float(p.y)
        if img is not None and gdf.crs is not None:
            x, y = inv @ (x, y)
            x, y = x - 0.5, y - 0.5  # pixel-centre coordinates, as imshow draws them
        xs.append(x)
        ys.append(y)
    if len(xs) < 2:
        raise ToolInputError(f"{len(xs)} point(s); a density needs at least 2", tool=tool,
                             argument="points_path", expected="a layer with 2+ features")
    X, Y = np.array(xs), np.array(ys)
    n = len(X)
    if bandwidth is not None:
        sigma = float(bandwidth)
    else:
        spread = math.sqrt((X.var() + Y.var()) / 2.0)
        sigma = n ** (-1.0 / 6.0) * spread if spread > 0 else 1.0
    if img is not None:
        xmin, xmax, ymin, ymax = -0.5, img.shape[1] - 0.5, -0.5, img.shape[0] - 0.5
    else:
        xmin, xmax = X.min() - 3 * sigma, X.max() + 3 * sigma
        ymin, ymax = Y.min() - 3 * sigma, Y.max() + 3 * sigma
    span = max(xmax - xmin, ymax - ymin)
    gx = max(2, int(round(256 * (xmax - xmin) / span)))
    gy = max(2, int(round(256 * (ymax - ymin) / span)))
    cx = np.linspace(xmin, xmax, gx)
    cy = np.linspace(ymin, ymax, gy)
    ex = np.exp(-((cx[None, :] - X[:, None]) ** 2) / (2 * sigma ** 2))  # n × gx
    ey = np.exp(-((cy[None, :] - Y[:, None]) ** 2) / (2 * sigma ** 2))  # n × gy
    dens = (ey.T @ ex) / (n * 2 * math.pi * sigma ** 2)                 # gy × gx
    fig = _figure(1000, 800)
    ax = fig.add_axes([0.06, 0.06, 0.78, 0.86])
    if img is not None:
        ax.imshow(img, interpolation="nearest")
        ax.imshow(dens, cmap=colormap, alpha=0.55, extent=(xmin, xmax, ymax, ymin),
                  interpolation="bilinear")
    else:
        im = ax.imshow(dens, cmap=colormap, origin="lower" if gdf.crs is not None else "upper",
                       extent=(xmin, xmax, ymin, ymax) if gdf.crs is not None
                       else (xmin, xmax, ymax, ymin), interpolation="bilinear")
        ax.scatter(X, Y, s=6, c="cyan", edgecolors="none")
        fig.colorbar(im, cax=fig.add_axes([0.87, 0.1, 0.03, 0.78]))
    ax.set_title(f"Kernel density of {n} features (σ = {sigma:.3g})", fontsize=13)
    dst = _png(ctx, tool, {"points": vpath, "image": ipath, "bw": bandwidth, "cmap": colormap})
    _save(fig, dst)
    return {"tool": tool, "heatmap_path": ctx.artifact_name(dst), "point_count": n,
            "stats": {"kde_max": float(dens.max()), "kde_mean": float(dens.mean()),
                      "extent": [float(xmin), float(ymin), float(xmax), float(ymax)],
                      "bandwidth": sigma}}
