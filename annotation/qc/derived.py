"""Derived-data staleness: what a saved revision copied from other records (its manifest's GSD and
CRS from the layers, its gold replay's inputs) against those records now (``derived.*``).
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from kernel.inputs import input_entries

from .gold import AREA_NAME, DIST_NAME
from .layers import CRS_TOOLS, GSD_RTOL, METRIC_TOOLS, as_number, norm_crs
from .plan import args_of, call_of
from .registry import Finding, declare, finding
from .tool_info import resolve_tool

__all__ = ["CHECKS", "DERIVED_MANIFEST_FIELDS", "stale_manifest_values", "answer_in_metres", "check_derived"]

#: the checks of this concern: id → (severity, meaning)
CHECKS: dict[str, tuple[str, str]] = declare("derived", {
    "derived.manifest_stale": ("error", "a GSD/CRS the manifest copied from its layer differs from the layer's now, and the answer is in metres"),
    "derived.manifest_outdated": ("warning", "a GSD/CRS the manifest copied from its layer differs from the layer's now"),
    "derived.gold_stale": ("warning", "the gold replay read inputs (layer files, GSD/CRS, tool versions) that changed since"),
})


#: the manifest fields a revision copies from its layer when it is saved
#: (``annotation.services.content.layer_manifest_entry``) that a maintainer may change afterwards
#: (``annotation.services.layers.set_layer_georeferencing``): the georeferencing
DERIVED_MANIFEST_FIELDS = ("pixel_size_m", "spatial_coordinate_system")
_AUTHORITY_CODE = re.compile(r"[A-Za-z]+:\d+")
#: answer-field names and format notes in metric units (besides ``AREA_NAME``/``DIST_NAME``)
_METRIC_TEXT = re.compile(r"(?:^|[_\s(])(?:m|m2|m3|km|km2|ha|metres?|meters?|kilometres?|kilometers?|hectares?"
                          r"|length|perimeter)(?:$|[_\s).,;])|m²|km²")


def _same_derived(field_name: str, stored: Any, current: Any) -> bool:
    """Whether a stored manifest value still equals its layer's ``current`` one. The layer having
    no value says nothing (an imported manifest may carry its file's own value): the same.
    GSD: equal within :data:`GSD_RTOL`, a stored null differs. CRS: a stored pixel/blank frame
    differs from a layer CRS; two authority codes (``EPSG:32617``) compare case-blind; other
    spellings (WKT, ``WGS84``) are not compared."""
    if field_name == "pixel_size_m":
        cur = as_number(current)
        if cur is None:
            return True
        old = as_number(stored)
        return old is not None and abs(old - cur) <= GSD_RTOL * abs(cur)
    _cur, geo_cur = norm_crs(current)
    if not geo_cur:
        return True
    old, geo_old = norm_crs(stored)
    if not geo_old:
        return False
    if _AUTHORITY_CODE.fullmatch(old) and _AUTHORITY_CODE.fullmatch(_cur):
        return old.upper() == _cur.upper()
    return True


def stale_manifest_values(input_data: Any, manifest: dict) -> list[dict]:
    """The stored manifest values that differ from their layer's now.

    ``manifest``: ``{location: {"file_name", "values": {field: the layer's value now}}}`` for the
    entries of ``input_data`` that name a layer (``annotation.services.content.derived_manifest``
    builds it with the derivation a save uses). Only the fields of
    :data:`DERIVED_MANIFEST_FIELDS` that the entry states are compared (:func:`_same_derived`).
    Returns ``[{location, field, file_name, stored, current}]`` in document order; ``location``
    is the entry's (``input_data.post_image``)."""
    out = []
    for loc, _path, entry in input_entries(input_data):
        expected = manifest.get(loc)
        if not expected:
            continue
        for name, current in (expected.get("values") or {}).items():
            if name in entry and not _same_derived(name, entry[name], current):
                out.append({"location": loc, "field": name, "file_name": expected.get("file_name", ""),
                            "stored": entry[name], "current": current})
    return out


def _all_calls(steps: Any) -> Iterable[tuple[str, dict]]:
    for st in steps if isinstance(steps, list) else []:
        if not isinstance(st, dict):
            continue
        args = args_of(st)
        yield str(call_of(st) or ""), args if isinstance(args, dict) else {}
        if isinstance(args, dict) and isinstance(args.get("calls"), list):
            yield from _all_calls(args["calls"])


def answer_in_metres(content: dict) -> bool:
    """Whether the task's answer depends on its inputs' GSD or CRS: a step (or a ``tool.loop``
    call) measures in metres (:data:`METRIC_TOOLS`; or passes a ``pixel_size_m`` to a tool that
    takes one, but those of the Vis server, whose scale bars draw on a picture: ``ras.vectorize``
    counting polygons without one measures nothing) or maps pixels to the world
    (:data:`CRS_TOOLS`), or an answer field is metric by its name or format note (area/distance
    names as numerical sanity reads them; ``m``, ``m²``, ``km``, ``ha``, length, perimeter)."""
    for call, args in _all_calls((content or {}).get("trajectory")):
        info, _alias = resolve_tool(call) if call else (None, None)
        name = info.name if info else call
        passes_gsd = args.get("pixel_size_m") not in (None, "")
        if name in METRIC_TOOLS or name in CRS_TOOLS or (info is not None and info.param("pixel_size_m")
                                                          and info.server != "Vis" and passes_gsd):
            return True
    for f in (content or {}).get("answer_spec") or []:
        if not isinstance(f, dict):
            continue
        name = str(f.get("name") or "").lower()
        note = str(f.get("answer_format") or "").lower()
        if "px" in name or "pixel" in name:
            continue
        if AREA_NAME.search(name) or DIST_NAME.search(name) or _METRIC_TEXT.search(name) or _METRIC_TEXT.search(note):
            return True
    return False


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def check_derived(content: dict, derived: dict) -> list[Finding]:
    """Derived values of a saved revision against their sources.

    ``derived``: ``{"manifest": {location: {file_name, values}}`` (see
    :func:`stale_manifest_values`), ``"gold": {"run", "stored", "current"}`` or None (the input
    fingerprints of the gold replay: ``replay.services.layers.input_fingerprint`` when it ran and now)}``.
    A stale manifest value is ``derived.manifest_stale`` (error) when :func:`answer_in_metres`,
    else ``derived.manifest_outdated`` (warning); each names the field, the stored and the current
    value. A gold replay whose inputs changed is ``derived.gold_stale`` (warning). Answer-source
    proposals are never stored (worked out from the trajectory when read), so they cannot be stale."""
    out: list[Finding] = []
    stale = stale_manifest_values((content or {}).get("input_data"), derived.get("manifest") or {})
    metric = bool(stale) and answer_in_metres(content)
    for s in stale:
        where = f"{s['location']}.{s['field']}"
        if metric:
            out.append(finding("derived.manifest_stale", f"{where} is {_json(s['stored'])} in this revision but its layer {s['file_name']} now has {_json(s['current'])}; the answer is measured in metres, so it depends on it: refresh the derived values (task page), then replay.", where))
        else:
            out.append(finding("derived.manifest_outdated", f"{where} is {_json(s['stored'])} in this revision but its layer {s['file_name']} now has {_json(s['current'])}; refresh the derived values (task page).", where))
    gold = derived.get("gold")
    if isinstance(gold, dict) and gold.get("stored") and gold.get("current") and gold["stored"] != gold["current"]:
        out.append(finding("derived.gold_stale", f"gold replay {gold.get('run')} read inputs that changed since (input fingerprint {str(gold['stored'])[:12]}… then, {str(gold['current'])[:12]}… now: a layer's file, GSD or CRS, or a tool's version); replay the task and accept the new gold.", "gold"))
    return out
