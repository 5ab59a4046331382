"""Visualisation tools (``vis.*``): PIL pages and charts, a matplotlib heatmap.

Every tool returns the observation of the benchmark's Vis server (Junjue-Wang/DORA
``dora/tools/vis.py`` at 7b96988): the same keys, echoed arguments and flags, the same classes
present, the same canvas sizes; its quirks (an echoed ``class_labels`` that names nothing, a
``scale_bar`` flag that is true without a bar, a report page that counts a missing file as a
component, charts that accept empty or negative data) are listed in ``kernel/tools/quirks.py``.

Images are read as the benchmark reads them: PIL, converted to RGB (a file PIL cannot read is an
error); masks with PIL, the first channel of a multi-channel file. The overlay's pixels are the
benchmark's: ``uint8((1 − alpha)·pixel + alpha·colour)`` (truncated). The page layouts (title
band, paddings, legend column, north arrow, scale bar) follow the benchmark's geometry so the
canvases have its sizes; the drawing itself is the studio's. Output is deterministic: PIL's PNG
writer adds no time stamp, so equal inputs give byte-identical files.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from kernel.palette import BENCHMARK_RGB, OTHER_RGB

from .base import ToolContext, ToolError, ToolInputError
from .spec import register

#: overlay palette of the benchmark (``_class_color``): 1 gold, 2 dark orange, 3 crimson,
#: 4 purple, 5 dodger blue, 6 deep sky blue; every other value (255 included) red — the one
#: palette of the studio, kernel/palette.py (tiles and replay overlays use it too)
PALETTE = BENCHMARK_RGB
OTHER = OTHER_RGB
BLACK, WHITE = (0, 0, 0), (255, 255, 255)
#: route-map colours of the benchmark: the route (default), the start and the end markers
ROUTE_RGB, START_RGB, END_RGB = (0, 191, 255), (46, 204, 113), (231, 76, 60)
#: the grey a legend swatch is blended over when a legend alpha is given
LEGEND_BACKGROUND = (240, 240, 240)


# --------------------------------------------------------------------------------------------
# reading
# --------------------------------------------------------------------------------------------
def _open_image(path: Path, tool: str, argument: str):
    from PIL import Image, UnidentifiedImageError

    try:
        img = Image.open(path)
        img.load()
        return img
    except (UnidentifiedImageError, OSError, ValueError) as exc:
        raise ToolInputError(f"{path.name} cannot be read as an image: {exc}", tool=tool,
                             argument=argument, expected="an image PIL reads (PNG, JPEG, "
                             "8-bit TIFF)") from None


def load_rgb_image(ctx: ToolContext, value: Any, tool: str, argument: str):
    """(PIL RGB image, resolved path) of an image argument."""
    path = ctx.resolve(value, tool=tool, argument=argument)
    try:
        return _open_image(path, tool, argument).convert("RGB"), path
    except (ValueError, OSError) as exc:
        raise ToolInputError(f"{path.name} cannot be converted to RGB: {exc}", tool=tool,
                             argument=argument) from None


def load_rgb(ctx: ToolContext, value: Any, tool: str, argument: str) -> tuple[np.ndarray, Path]:
    """(H×W×3 uint8 array, resolved path) of an image argument, read as ``load_rgb_image``."""
    img, path = load_rgb_image(ctx, value, tool, argument)
    return np.asarray(img, dtype=np.uint8), path


def _load_mask(ctx: ToolContext, value: Any, tool: str, argument: str,
               shape: tuple[int, int]) -> tuple[np.ndarray, Path]:
    """The mask as PIL gives it (first channel of a multi-channel file). A mask of another size
    is cast to uint8 (values above 255 wrap, as in the benchmark) and resized to ``shape`` by
    nearest neighbour."""
    from PIL import Image

    path = ctx.resolve(value, tool=tool, argument=argument)
    arr = np.array(_open_image(path, tool, argument))
    if arr.ndim == 3:
        arr = arr[..., 0]
    if arr.shape[:2] != tuple(shape):
        small = Image.fromarray(arr.astype(np.uint8))
        arr = np.array(small.resize((shape[1], shape[0]), Image.NEAREST))
    return arr, path


def colour_of(value: int) -> tuple[int, int, int]:
    """Palette colour of a mask value (``PALETTE``, else red)."""
    return PALETTE.get(int(value), OTHER)


def blend(rgb: np.ndarray, mask: np.ndarray, alpha: float) -> np.ndarray:
    """Each non-zero mask value blended over the image with its palette colour:
    ``uint8((1 − alpha)·pixel + alpha·colour)``, truncated (the benchmark's overlay)."""
    out = rgb.copy()
    for v in classes_present(mask):
        sel = mask == v
        colour = np.array(colour_of(v), dtype=np.uint8)
        out[sel] = ((1 - alpha) * out[sel] + alpha * colour).astype(np.uint8)
    return out


def classes_present(mask: np.ndarray) -> list[int]:
    """The non-zero values of a mask, ascending, as ints."""
    return sorted(int(v) for v in np.unique(mask).tolist() if int(v) != 0)


# --------------------------------------------------------------------------------------------
# drawing
# --------------------------------------------------------------------------------------------
def _font(size: int):
    from PIL import ImageFont

    try:
        return ImageFont.truetype("DejaVuSans.ttf", size)
    except OSError:
        return ImageFont.load_default()


def _text_size(draw, text: str, font) -> tuple[int, int]:
    x0, y0, x1, y1 = draw.textbbox((0, 0), text, font=font)
    return x1 - x0, y1 - y0


def _centred_title(draw, width: int, text: str, size: int, y: int = 15) -> None:
    font = _font(size)
    tw, _ = _text_size(draw, text, font)
    draw.text(((width - tw) // 2, y), text, fill=BLACK, font=font)


def _north_arrow(draw, x: int, y: int, size: int = 60) -> None:
    draw.line((x, y + size, x, y), fill=BLACK, width=3)
    draw.polygon([(x, y), (x - size // 6, y + size // 4), (x + size // 6, y + size // 4)],
                 fill=BLACK)
    font = _font(max(14, size // 4))
    tw, _ = _text_size(draw, "N", font)
    draw.text((x - tw // 2, y + size + 4), "N", fill=BLACK, font=font)


def _scale_bar(draw, x: int, y: int, pixel_size_m: float, width_px: int = 120) -> None:
    """A 120 px bar, half white half black, labelled with its ground length."""
    length = pixel_size_m * width_px
    label = f"{length / 1000:.1f} km" if length >= 1000 else f"{int(round(length))} m"
    draw.rectangle((x, y, x + width_px, y + 10), fill=BLACK)
    draw.rectangle((x, y, x + width_px // 2, y + 10), fill=WHITE, outline=BLACK)
    draw.rectangle((x, y, x + width_px, y + 10), outline=BLACK)
    font = _font(14)
    tw, _ = _text_size(draw, label, font)
    draw.text((x + width_px // 2 - tw // 2, y + 14), label, fill=BLACK, font=font)


def _legend(draw, items, x: int, y: int, box: int = 16, gap: int = 8) -> None:
    font = _font(16)
    for label, colour in items:
        draw.rectangle((x, y, x + box, y + box), fill=colour, outline=BLACK)
        draw.text((x + box + 8, y - 1), label, fill=BLACK, font=font)
        y += box + gap


def _legend_colour(colour, alpha: float | None) -> tuple:
    """A legend swatch: the colour itself, or blended over light grey with ``alpha``."""
    if alpha is None:
        return tuple(int(c) for c in colour)
    base = np.array(LEGEND_BACKGROUND, dtype=np.float32)
    mixed = (1 - float(alpha)) * base + float(alpha) * np.array(colour, dtype=np.float32)
    return tuple(int(v) for v in np.clip(mixed, 0, 255).astype(np.uint8).tolist())


def _marker_position(marker: dict) -> tuple[Any, Any]:
    """(row, col) of a marker: ``pixel_row``/``row``/``y`` and ``pixel_col``/``col``/``x``, the
    first key present wins even when its value is null (the benchmark's nested ``get``)."""
    def pick(*keys):
        for k in keys:
            if k in marker:
                return marker[k]
        return None
    return pick("pixel_row", "row", "y"), pick("pixel_col", "col", "x")


def _draw_markers(draw, markers: list[dict], dx: int, dy: int, canvas: tuple[int, int]) -> list[str]:
    """Draw the markers that have a position; return the non-blank labels of those drawn
    (``str(label)``, so a null label reads "None")."""
    font = _font(16)
    cw, ch = canvas
    labels = []
    for m in markers:
        row, col = _marker_position(m)
        if row is None or col is None:
            continue
        x = int(round(float(col))) + dx
        y = int(round(float(row))) + dy
        r = int(m.get("radius", 7))
        colour = tuple(m.get("color", [0, 255, 255]))
        draw.line((x - r - 4, y, x + r + 4, y), fill=BLACK, width=2)
        draw.line((x, y - r - 4, x, y + r + 4), fill=BLACK, width=2)
        draw.ellipse((x - r, y - r, x + r, y + r), fill=colour, outline=BLACK, width=2)
        label = str(m.get("label", "")).strip()
        if not label:
            continue
        labels.append(label)
        tw, th = _text_size(draw, label, font)
        lx = min(x + r + 10, max(4, cw - tw - 8))
        ly = min(max(4, y - th - 6), max(4, ch - th - 8))
        draw.rectangle((lx - 4, ly - 2, lx + tw + 4, ly + th + 2), fill=WHITE, outline=BLACK)
        draw.text((lx, ly), label, fill=BLACK, font=font)
    return labels


def _fit(img, w: int, h: int):
    """``img`` scaled to fit a w×h white box, centred."""
    from PIL import Image

    box = Image.new("RGB", (w, h), WHITE)
    scale = min(w / img.size[0], h / img.size[1])
    nw, nh = max(1, int(img.size[0] * scale)), max(1, int(img.size[1] * scale))
    box.paste(img.resize((nw, nh)), ((w - nw) // 2, (h - nh) // 2))
    return box


def _save(ctx: ToolContext, tool: str, key: dict, img) -> str:
    dst = ctx.output_path(tool, key, ".png")
    img.save(dst, format="PNG")
    return ctx.artifact_name(dst)


def _map_page(img, *, title, legend, markers, north_arrow, pixel_size_m, right_pad,
              bottom_pad, route=None, markers_last=True):
    """The benchmark's map page: the image at (20, top) on a white canvas grown by a title band
    (60 px with a title, else 20), a right column (``right_pad``) and a bottom band
    (``bottom_pad``); north arrow at the top of the right column, scale bar under the image when
    the pixel size is > 0, legend below "Legend" in the right column; markers over the legend
    (``markers_last``, the map page's order) or under it (the route map's). Returns (canvas,
    labels of the markers drawn)."""
    from PIL import Image, ImageDraw

    w, h = img.size
    top, left = (60 if title else 20), 20
    canvas = Image.new("RGB", (w + left + right_pad, h + top + bottom_pad), WHITE)
    canvas.paste(img, (left, top))
    draw = ImageDraw.Draw(canvas)
    if title:
        _centred_title(draw, canvas.size[0], str(title), 24)
    if route is not None:
        pts, colour, width = route
        if len(pts) >= 2:
            xy = [(left + c, top + r) for r, c in pts]
            draw.line(xy, fill=BLACK, width=max(1, width + 2))
            draw.line(xy, fill=colour, width=max(1, width))
    if north_arrow:
        _north_arrow(draw, canvas.size[0] - right_pad + 60, top + 20)
    if pixel_size_m is not None and pixel_size_m > 0:
        _scale_bar(draw, left + 20, top + h + 15, float(pixel_size_m))
    labels = [] if markers_last or not markers else _draw_markers(draw, markers, left, top,
                                                                  canvas.size)
    if legend:
        draw.text((w + left + 20, top + 110), "Legend", fill=BLACK, font=_font(18))
        _legend(draw, legend, w + left + 20, top + 140)
    if markers_last and markers:
        labels = _draw_markers(draw, markers, left, top, canvas.size)
    return canvas, labels


# --------------------------------------------------------------------------------------------
@register("vis.overlay_mask", server="Vis", module="visualization",
          result_keys=["tool", "output_path", "classes_present", "class_labels"],
          notes={"class_labels": "echoed as given ({} when absent); names nothing"})
def vis_overlay_mask(ctx: ToolContext, image_path: str, mask_path: str, alpha: float = 0.45,
                     class_labels: dict[str, str] | None = None) -> dict:
    """The image (RGB PNG of its size) with every non-zero mask value blended over it
    (``blend``). ``classes_present``: the non-zero mask values after resizing, ascending;
    ``class_labels``: the argument echoed (``{}`` when absent), not filled in (quirk). No range
    check on ``alpha`` (the benchmark has none). Errors: a file PIL cannot read."""
    from PIL import Image

    tool = "vis.overlay_mask"
    img, ipath = load_rgb(ctx, image_path, tool, "image_path")
    mask, mpath = _load_mask(ctx, mask_path, tool, "mask_path", img.shape[:2])
    out = blend(img, mask, float(alpha))
    name = _save(ctx, tool, {"image": ipath, "mask": mpath, "alpha": float(alpha),
                             "labels": class_labels}, Image.fromarray(out, mode="RGB"))
    return {"tool": tool, "output_path": name, "classes_present": classes_present(mask),
            "class_labels": class_labels or {}}


@register("vis.add_map_elements", server="Vis", module="visualization",
          result_keys=["tool", "output_path", "title", "has_legend", "legend_alpha",
                       "point_marker_count", "point_marker_labels", "north_arrow", "scale_bar"],
          notes={"legend_items": "[{label, color:[r,g,b]}]",
                 "point_markers": "[{pixel_row|row|y, pixel_col|col|x, label?, "
                                  "color?=[0,255,255], radius?=7}]",
                 "pixel_size_m": "scale bar drawn only when > 0"})
def vis_add_map_elements(ctx: ToolContext, image_path: str, title: str | None = None,
                         legend_items: list[dict] | None = None,
                         legend_alpha: float | None = None,
                         point_markers: list[dict] | None = None, north_arrow: bool = True,
                         scale_bar: bool = True, pixel_size_m: float | None = None) -> dict:
    """A map page around an image (canvas (w + 40 or w + 240 with a legend) × (h + top +
    bottom), top 60 with a title else 20, bottom 60 with ``scale_bar`` else 20): title, legend
    (label default "item", colour default red, blended over grey with ``legend_alpha``), north
    arrow, scale bar (120 px, drawn when ``pixel_size_m`` > 0), point markers.
    ``point_marker_count`` counts every marker given, ``point_marker_labels`` the labels of
    those drawn; ``scale_bar`` is ``scale_bar and pixel_size_m is not None`` (true for a pixel
    size ≤ 0 that draws nothing: quirk). Errors: a marker position that is not a number."""
    tool = "vis.add_map_elements"
    img, ipath = load_rgb_image(ctx, image_path, tool, "image_path")
    legend = [(str(it.get("label", "item")),
               _legend_colour(tuple(it.get("color", [255, 0, 0])), legend_alpha))
              for it in (legend_items or [])]
    canvas, labels = _map_page(img, title=title, legend=legend, markers=point_markers or [],
                               north_arrow=north_arrow,
                               pixel_size_m=pixel_size_m if scale_bar else None,
                               right_pad=220 if legend_items else 20,
                               bottom_pad=60 if scale_bar else 20)
    name = _save(ctx, tool, {"image": ipath, "title": title, "legend": legend_items,
                             "legend_alpha": legend_alpha, "markers": point_markers,
                             "north": north_arrow, "scale": scale_bar, "px": pixel_size_m},
                 canvas)
    return {"tool": tool, "output_path": name, "title": title,
            "has_legend": bool(legend_items), "legend_alpha": legend_alpha,
            "point_marker_count": len(point_markers or []), "point_marker_labels": labels,
            "north_arrow": north_arrow, "scale_bar": bool(scale_bar and pixel_size_m is not None)}


def _overlay_for_page(ctx, tool, base_image_path, overlay_mask_path, alpha, class_labels):
    """(page image, classes present, mask path or None) for the damage and route maps."""
    from PIL import Image

    img, ipath = load_rgb(ctx, base_image_path, tool, "base_image_path")
    if not overlay_mask_path:
        return Image.fromarray(img, mode="RGB"), [], ipath, None
    mask, mpath = _load_mask(ctx, overlay_mask_path, tool, "overlay_mask_path", img.shape[:2])
    return (Image.fromarray(blend(img, mask, float(alpha)), mode="RGB"), classes_present(mask),
            ipath, mpath)


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
    """``vis.overlay_mask`` (when a mask is given) laid out by ``vis.add_map_elements`` with one
    legend entry per class present (label from ``class_labels``, else ``class_<v>``), north
    arrow and scale bar on. The observation is ``vis.add_map_elements``'s: ``has_legend`` true
    when a class is present, ``legend_alpha`` = ``alpha`` whenever a mask is given (null
    without), ``scale_bar`` true whenever ``pixel_size_m`` is given; ``layers`` is
    ["base_image"] plus "overlay_mask" with a mask."""
    tool = "vis.damage_map"
    page, present, ipath, mpath = _overlay_for_page(ctx, tool, base_image_path,
                                                    overlay_mask_path, alpha, class_labels)
    legend_alpha = alpha if overlay_mask_path else None
    legend = [((class_labels or {}).get(str(v), f"class_{v}"),
               _legend_colour(colour_of(v), legend_alpha)) for v in present]
    canvas, _labels = _map_page(page, title=title, legend=legend, markers=[], north_arrow=True,
                                pixel_size_m=pixel_size_m, right_pad=220 if legend else 20,
                                bottom_pad=60)
    name = _save(ctx, tool, {"image": ipath, "mask": mpath, "title": title, "px": pixel_size_m,
                             "labels": class_labels, "alpha": float(alpha)}, canvas)
    return {"tool": tool, "output_path": name, "title": title, "has_legend": bool(legend),
            "legend_alpha": legend_alpha, "point_marker_count": 0, "point_marker_labels": [],
            "north_arrow": True, "scale_bar": pixel_size_m is not None,
            "layers": ["base_image"] + (["overlay_mask"] if overlay_mask_path else [])}


def _pixel_point(p) -> tuple[int, int] | None:
    if not p or len(p) < 2:
        return None
    return int(round(float(p[0]))), int(round(float(p[1])))


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
    """A route polyline ([row, col] pixels; points with fewer than 2 numbers are skipped) on the
    base image, optionally over a damage overlay, with "Route start"/"Route end" markers at
    ``start_point``/``end_point`` (empty or null: the first/last path point). Canvas: w + 280 ×
    h + top + (60 with a truthy pixel size, else 20). ``legend_items``: the classes present
    (``class_labels`` or ``class_<v>``), then always "intact route", "route start", "route
    end"."""
    tool = "vis.route_map"
    pts = [(int(round(float(p[0]))), int(round(float(p[1])))) for p in path_pixels or []
           if isinstance(p, (list, tuple)) and len(p) >= 2]
    colour = tuple(int(v) for v in (route_color or ROUTE_RGB))
    page, present, ipath, mpath = _overlay_for_page(ctx, tool, base_image_path,
                                                    overlay_mask_path, alpha, class_labels)
    start = _pixel_point(start_point) or (pts[0] if pts else None)
    end = _pixel_point(end_point) or (pts[-1] if pts else None)
    markers = []
    if start:
        markers.append({"pixel_row": start[0], "pixel_col": start[1], "label": "Route start",
                        "radius": 8, "color": list(START_RGB)})
    if end:
        markers.append({"pixel_row": end[0], "pixel_col": end[1], "label": "Route end",
                        "radius": 8, "color": list(END_RGB)})
    legend = [((class_labels or {}).get(str(v), f"class_{v}"), _legend_colour(colour_of(v), alpha))
              for v in present]
    legend += [("intact route", colour), ("route start", START_RGB), ("route end", END_RGB)]
    canvas, labels = _map_page(page, title=title, legend=legend, markers=markers,
                               north_arrow=True, pixel_size_m=pixel_size_m, right_pad=260,
                               bottom_pad=60 if pixel_size_m else 20,
                               route=(pts, colour, int(route_width)), markers_last=False)
    name = _save(ctx, tool, {"image": ipath, "path": [list(p) for p in pts], "title": title,
                             "px": pixel_size_m, "start": start, "end": end, "mask": mpath,
                             "labels": class_labels, "alpha": float(alpha),
                             "colour": list(colour), "width": int(route_width)}, canvas)
    return {"tool": tool, "output_path": name, "path_point_count": len(pts),
            "start_point": list(start) if start else None,
            "end_point": list(end) if end else None, "point_marker_labels": labels,
            "has_overlay": bool(overlay_mask_path), "legend_items": [lbl for lbl, _c in legend]}


# --------------------------------------------------------------------------------------------
def _chart_canvas(w: int, h: int, title: str):
    from PIL import Image, ImageDraw

    img = Image.new("RGB", (w, h), WHITE)
    draw = ImageDraw.Draw(img)
    _centred_title(draw, w, str(title), 28, y=20)
    return img, draw


def _chart_result(tool: str, kind: str, name: str, data: dict, title: str) -> dict:
    return {"tool": tool, "output_path": name, "chart_type": kind, "statistics": data,
            "title": title}


@register("vis.pie_chart", server="Vis", module="visualization",
          result_keys=["tool", "output_path", "chart_type", "statistics", "title"])
def vis_pie_chart(ctx: ToolContext, data: dict[str, float], title: str = "Pie Chart") -> dict:
    """800×600 px pie chart (slices in the given order, palette colours 1, 2, ...; legend
    "label: value"). ``statistics`` is ``data`` itself with float values (the benchmark echoes
    its validated argument); empty data, zeros and negative values draw what they draw and are
    no error (quirk)."""
    tool = "vis.pie_chart"
    img, draw = _chart_canvas(800, 600, title)
    values = [float(v) for v in data.values()]
    total = sum(values) if sum(values) > 0 else 1.0
    cx, cy, r = 280, 330, 180
    start, legend = 0.0, []
    for i, (label, value) in enumerate(zip(data, values)):
        end = start + value / total * 360.0
        draw.pieslice((cx - r, cy - r, cx + r, cy + r), start=start, end=end,
                      fill=colour_of(i + 1), outline=WHITE)
        legend.append((f"{label}: {value}", colour_of(i + 1)))
        start = end
    draw.text((540, 140), "Legend", fill=BLACK, font=_font(20))
    _legend(draw, legend, 540, 180, box=18, gap=12)
    name = _save(ctx, tool, {"data": [[k, v] for k, v in data.items()], "title": title}, img)
    return _chart_result(tool, "pie", name, dict(data), title)


def _axes(draw, w: int, h: int):
    left, top, right, bottom = 90, 100, w - 40, h - 100
    draw.line((left, bottom, right, bottom), fill=BLACK, width=2)
    draw.line((left, bottom, left, top), fill=BLACK, width=2)
    return left, top, right, bottom


@register("vis.bar_chart", server="Vis", module="visualization",
          result_keys=["tool", "output_path", "chart_type", "statistics", "title"])
def vis_bar_chart(ctx: ToolContext, data: dict[str, float], title: str = "Bar Chart") -> dict:
    """900×600 px bar chart in the given order (heights relative to the largest value, values
    printed over the bars, labels cut to 16 characters). ``statistics`` is ``data`` with float
    values; empty data is no error."""
    tool = "vis.bar_chart"
    img, draw = _chart_canvas(900, 600, title)
    left, top, right, bottom = _axes(draw, 900, 600)
    values = [float(v) for v in data.values()]
    top_value = max(values) if values else 1.0
    top_value = top_value if top_value > 0 else 1.0
    step = (right - left) / max(1, len(values))
    bar_w = int(step * 0.55)
    font = _font(16)
    for i, (label, value) in enumerate(zip(data, values)):
        x0 = int(left + i * step + (step - bar_w) / 2)
        y0 = bottom - int(value / top_value * (bottom - top - 20))
        draw.rectangle((x0, y0, x0 + bar_w, bottom), fill=colour_of(i + 1), outline=BLACK)
        vw, vh = _text_size(draw, str(value), font)
        draw.text((x0 + (bar_w - vw) // 2, y0 - vh - 4), str(value), fill=BLACK, font=font)
        lw, _ = _text_size(draw, label[:16], font)
        draw.text((x0 + (bar_w - lw) // 2, bottom + 8), label[:16], fill=BLACK, font=font)
    name = _save(ctx, tool, {"data": [[k, v] for k, v in data.items()], "title": title}, img)
    return _chart_result(tool, "bar", name, dict(data), title)


@register("vis.line_chart", server="Vis", module="visualization",
          result_keys=["tool", "output_path", "chart_type", "statistics", "title"],
          notes={"data": "ordered x-label -> y"})
def vis_line_chart(ctx: ToolContext, data: dict[str, float], title: str = "Line Chart") -> dict:
    """900×600 px line chart in insertion order (values relative to the largest, points marked
    and labelled). ``statistics`` is ``data`` with float values; empty data is no error."""
    tool = "vis.line_chart"
    img, draw = _chart_canvas(900, 600, title)
    left, top, right, bottom = _axes(draw, 900, 600)
    values = [float(v) for v in data.values()]
    top_value = max(values) if values else 1.0
    top_value = top_value if top_value > 0 else 1.0
    n = max(1, len(values))
    pts = [(int(left + i * (right - left) / max(1, n - 1)),
            int(bottom - v / top_value * (bottom - top - 10))) for i, v in enumerate(values)]
    if len(pts) >= 2:
        draw.line(pts, fill=PALETTE[5], width=3)
    font = _font(16)
    for (px, py), label, value in zip(pts, data, values):
        draw.ellipse((px - 5, py - 5, px + 5, py + 5), fill=PALETTE[3], outline=BLACK)
        draw.text((px - 10, py - 24), str(value), fill=BLACK, font=font)
        lw, _ = _text_size(draw, label, font)
        draw.text((px - lw // 2, bottom + 8), label, fill=BLACK, font=font)
    name = _save(ctx, tool, {"data": [[k, v] for k, v in data.items()], "title": title}, img)
    return _chart_result(tool, "line", name, dict(data), title)


# --------------------------------------------------------------------------------------------
@register("vis.before_after_panel", server="Vis", module="visualization",
          result_keys=["tool", "output_path", "title"])
def vis_before_after_panel(ctx: ToolContext, pre_image_path: str, post_image_path: str,
                           title: str = "Before / After Comparison") -> dict:
    """1460×620 px panel: the pre image ("Pre") left and the post image ("Post") right, each
    fitted into 700×500 px."""
    from PIL import Image, ImageDraw

    tool = "vis.before_after_panel"
    pre, ppre = load_rgb_image(ctx, pre_image_path, tool, "pre_image_path")
    post, ppost = load_rgb_image(ctx, post_image_path, tool, "post_image_path")
    pw, ph = 700, 500
    canvas = Image.new("RGB", (pw * 2 + 60, ph + 120), WHITE)
    draw = ImageDraw.Draw(canvas)
    _centred_title(draw, canvas.size[0], str(title), 28, y=20)
    canvas.paste(_fit(pre, pw, ph), (20, 80))
    canvas.paste(_fit(post, pw, ph), (40 + pw, 80))
    font = _font(20)
    draw.text((20 + pw // 2 - 20, 50), "Pre", fill=BLACK, font=font)
    draw.text((40 + pw + pw // 2 - 25, 50), "Post", fill=BLACK, font=font)
    name = _save(ctx, tool, {"pre": ppre, "post": ppost, "title": title}, canvas)
    return {"tool": tool, "output_path": name, "title": title}


@register("vis.temporal_panel", server="Vis", module="visualization",
          result_keys=["tool", "output_path", "labels", "title"],
          notes={"labels": "default t1..tn; extra labels or images are left out"})
def vis_temporal_panel(ctx: ToolContext, image_paths: list[str], labels: list[str] | None = None,
                       title: str = "Temporal Panel", columns: int = 2) -> dict:
    """Grid of 420×320 px cells, ``max(1, columns)`` per row, each image fitted and captioned
    with its label (default t1..tn when ``labels`` is empty or null). Images and labels are
    paired in order and the longer list is cut (no error, quirk); ``labels`` in the observation
    is the list used before cutting. No images draw a title-only canvas."""
    from PIL import Image, ImageDraw

    tool = "vis.temporal_panel"
    labels = labels or [f"t{i + 1}" for i in range(len(image_paths))]
    cols = max(1, int(columns))
    rows = math.ceil(len(image_paths) / cols)
    pw, ph = 420, 320
    canvas = Image.new("RGB", (cols * pw + (cols + 1) * 20, rows * ph + (rows + 1) * 40 + 60),
                       WHITE)
    draw = ImageDraw.Draw(canvas)
    _centred_title(draw, canvas.size[0], str(title), 28, y=20)
    font = _font(18)
    paths = []
    for i, (value, label) in enumerate(zip(image_paths, labels)):
        img, rp = load_rgb_image(ctx, value, tool, "image_paths")
        paths.append(rp)
        r, c = divmod(i, cols)
        x, y = 20 + c * (pw + 20), 70 + r * (ph + 40)
        canvas.paste(_fit(img, pw, ph), (x, y))
        draw.rectangle((x, y, x + pw, y + ph), outline=BLACK, width=1)
        draw.text((x + 8, y + 8), str(label), fill=BLACK, font=font)
    name = _save(ctx, tool, {"images": paths, "labels": labels, "title": title, "columns": cols},
                 canvas)
    return {"tool": tool, "output_path": name, "labels": labels, "title": title}


def _wrap(text: str, width: int) -> list[str]:
    """Words of ``text`` in lines of at most ``width`` characters, the benchmark's greedy rule:
    a word that does not fit closes the current line, even an empty one (so a first word
    longer than ``width`` leaves an empty first line)."""
    lines, cur, used = [], [], 0
    for word in text.split():
        extra = len(word) + (1 if cur else 0)
        if used + extra <= width:
            cur.append(word)
            used += extra
        else:
            lines.append(" ".join(cur))
            cur, used = [word], len(word)
    if cur:
        lines.append(" ".join(cur))
    return lines


@register("vis.report_page", server="Vis", module="visualization",
          result_keys=["tool", "output_path", "title", "components"],
          types_={"map_image_path": "str|null", "chart_image_path": "str|null"},
          notes={"map_image_path": "required but may be null",
                 "chart_image_path": "required but may be null"})
def vis_report_page(ctx: ToolContext, map_image_path: str | None, chart_image_path: str | None,
                    summary_text: str = "", key_statistics: dict[str, Any] | None = None,
                    title: str = "Disaster Situation Report") -> dict:
    """A 1400×1000 px one-page report: title, map box (40, 90)–(840, 620), chart box
    (880, 90)–(1360, 440), summary box (880, 470)–(1360, 760, text wrapped at 48 characters)
    and key-statistics box (40, 660)–(1360, 940, "key: value" lines in columns). An image
    path that names no file is skipped silently; ``components`` says which arguments were
    given (truthy), not what was drawn (quirk: a missing map still reads ``map: true``)."""
    from PIL import Image, ImageDraw

    tool = "vis.report_page"
    canvas = Image.new("RGB", (1400, 1000), WHITE)
    draw = ImageDraw.Draw(canvas)
    _centred_title(draw, 1400, str(title), 34, y=20)
    boxes = {"map": (40, 90, 840, 620), "chart": (880, 90, 1360, 440),
             "summary": (880, 470, 1360, 760), "stats": (40, 660, 1360, 940)}
    captions = {"map": "Map", "chart": "Chart", "summary": "Summary", "stats": "Key Statistics"}
    section = _font(22)
    for k, (x0, y0, x1, y1) in boxes.items():
        draw.rectangle((x0, y0, x1, y1), outline=BLACK, width=2)
        draw.text((x0 + 10, y0 + 8), captions[k], fill=BLACK, font=section)
    key: dict[str, Any] = {"title": title, "summary": summary_text, "stats": key_statistics}
    for k, value in (("map", map_image_path), ("chart", chart_image_path)):
        if not value:
            continue
        try:
            img, rp = load_rgb_image(ctx, value, tool, f"{k}_image_path")
        except ToolInputError as exc:
            if "file not found" in exc.message or "outside" in exc.message:
                continue  # the benchmark draws only paths that exist
            raise
        x0, y0, x1, y1 = boxes[k]
        canvas.paste(_fit(img, x1 - x0 - 20, y1 - y0 - 50), (x0 + 10, y0 + 40))
        key[k] = rp
    body = _font(18)
    y = boxes["summary"][1] + 45
    for line in _wrap(summary_text or "", 48):
        draw.text((boxes["summary"][0] + 12, y), line, fill=BLACK, font=body)
        y += 28
    sx, sy = boxes["stats"][0] + 14, boxes["stats"][1] + 45
    for k, v in (key_statistics or {}).items():
        draw.text((sx, sy), f"{k}: {v}", fill=BLACK, font=body)
        sy += 28
        if sy > boxes["stats"][3] - 30:
            sx, sy = sx + 420, boxes["stats"][1] + 45
    name = _save(ctx, tool, key, canvas)
    return {"tool": tool, "output_path": name, "title": title,
            "components": {"map": bool(map_image_path), "chart": bool(chart_image_path),
                           "summary_text": bool(summary_text),
                           "key_statistics": bool(key_statistics)}}


# --------------------------------------------------------------------------------------------
def heatmap_points(gdf) -> np.ndarray:
    """n×2 array of the layer's feature positions in its own coordinates: points as they are,
    each point of a multipoint, the centroid of a (multi)polygon or (multi)line; other or empty
    geometries skipped."""
    coords = []
    for g in gdf.geometry:
        if g is None or g.is_empty:
            continue
        if g.geom_type == "Point":
            coords.append((g.x, g.y))
        elif g.geom_type in ("Polygon", "MultiPolygon", "LineString", "MultiLineString"):
            c = g.centroid
            coords.append((c.x, c.y))
        elif g.geom_type == "MultiPoint":
            coords.extend((p.x, p.y) for p in g.geoms)
    return np.asarray(coords, dtype=float).reshape(-1, 2)


@register("vis.heatmap", server="Vis", module="visualization",
          result_keys=["tool", "heatmap_path", "point_count", "stats"],
          notes={"points_path": "GeoJSON points/polygons (centroids used)",
                 "bandwidth": "scipy gaussian_kde bw_method: a factor on the data's covariance "
                              "(default Scott's rule)"})
def vis_heatmap(ctx: ToolContext, points_path: str, base_image_path: str | None = None,
                bandwidth: float | None = None, colormap: str = "hot") -> dict:
    """Gaussian kernel density of feature positions (``heatmap_points``) in the layer's own
    coordinates, as the benchmark's ``vis_heatmap``: scipy's ``gaussian_kde`` with
    ``bw_method=bandwidth`` (a factor on the data covariance, Scott's rule when null), evaluated
    on a 200×200 grid spanning the points' bounds (a span under 1e-6 is widened to 1 unit).
    ``stats``: kde_max, kde_mean over the grid, extent [xmin, ymin, xmax, ymax]. The base image
    only decorates the figure (an unreadable one is ignored). Errors: an empty layer, fewer
    than 2 positions, a singular covariance (collinear points), an unknown colormap."""
    import geopandas as gpd
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from scipy.stats import gaussian_kde

    tool = "vis.heatmap"
    vpath = ctx.resolve(points_path, tool=tool, argument="points_path")
    try:
        gdf = gpd.read_file(vpath)
    except Exception as exc:
        raise ToolInputError(f"{Path(points_path).name} cannot be read: {exc}", tool=tool,
                             argument="points_path") from None
    if gdf.empty:
        raise ToolInputError("empty input", tool=tool, argument="points_path",
                             expected="a layer with 2+ features")
    pts = heatmap_points(gdf)
    if len(pts) < 2:
        raise ToolInputError(f"{len(pts)} position(s); need at least 2 points/polygons",
                             tool=tool, argument="points_path")
    (xmin, ymin), (xmax, ymax) = pts.min(axis=0), pts.max(axis=0)
    if xmax - xmin < 1e-6:
        xmax = xmin + 1.0
    if ymax - ymin < 1e-6:
        ymax = ymin + 1.0
    if colormap not in matplotlib.colormaps:
        raise ToolInputError(f"unknown colormap {colormap!r}", tool=tool, argument="colormap",
                             expected="a matplotlib colormap name, e.g. 'hot'")
    try:
        kde = gaussian_kde(pts.T, bw_method=bandwidth)
    except (np.linalg.LinAlgError, ValueError) as exc:
        raise ToolError(f"kernel density failed: {exc}", tool=tool,
                        argument="points_path") from None
    gx, gy = np.mgrid[xmin:xmax:200j, ymin:ymax:200j]
    zz = kde(np.vstack([gx.ravel(), gy.ravel()])).reshape(gx.shape)
    fig = Figure(figsize=(8, 8), dpi=120)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    extent = [xmin, xmax, ymin, ymax]
    ipath = None
    if base_image_path:
        try:
            base, ipath = load_rgb(ctx, base_image_path, tool, "base_image_path")
            ax.imshow(base, extent=extent, alpha=0.6)
        except ToolError:
            ipath = None
    ax.imshow(np.rot90(zz), extent=extent, cmap=colormap, alpha=0.7)
    ax.scatter(pts[:, 0], pts[:, 1], s=5, c="white", alpha=0.4)
    ax.set_title("Damage Density Heatmap")
    ax.set_axis_off()
    dst = ctx.output_path(tool, {"points": vpath, "image": ipath, "bw": bandwidth,
                                 "cmap": colormap}, ".png")
    fig.savefig(dst, format="png", bbox_inches="tight", metadata={"Software": None})
    return {"tool": tool, "heatmap_path": ctx.artifact_name(dst), "point_count": int(len(pts)),
            "stats": {"kde_max": float(zz.max()), "kde_mean": float(zz.mean()),
                      "extent": [float(xmin), float(ymin), float(xmax), float(ymax)]}}
