"""Rules about a sample's ``input_data`` (the data manifest; dora-format.md §(a)).

* Data paths: every string at any depth whose lower-case form ends in one of
  :data:`PATH_SUFFIXES` is a file under ``images/`` (``resolve_paths`` and ``missing_input_files``
  in dora/benchmark.py use exactly this suffix rule).
* Phase of a key: ``pre…`` → ``pre``, ``post…`` → ``post``, ``t<N>``/``phase<N>``/``p<N>``
  (optionally ``_``/space before N) → ``t<N>``. The benchmark names temporal images ``t1``, ``t2``…
  and its evaluator treats ``phase1``/``p1``/``t1`` as the same key (key normalisation of
  ``scalar_dict`` in dora/evaluation.py), so the studio accepts the same spellings everywhere.
* Modality configuration: the sorted set of normalised modalities of the entries joined by ``+``
  (``optical+sar``); a vector file (``.geojson``/``.json``/``.shp``) is ``vector``; a raster
  entry without a modality is ``optical`` (the studio's manifest default); ``""`` when there is
  no entry.
"""
from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import PurePosixPath
from typing import Any

#: suffixes of strings the benchmark resolves under images/ (``PATH_SUFFIXES`` in dora/benchmark.py)
PATH_SUFFIXES: tuple[str, ...] = (".png", ".tif", ".tiff", ".jpg", ".jpeg", ".geojson", ".json", ".shp")
VECTOR_SUFFIXES: tuple[str, ...] = (".geojson", ".json", ".shp")

#: spellings of a modality → the studio's modality (values seen in the benchmark's and its
#: sources' manifests: "optical", "sar", "multispectral", "dem" …)
MODALITY_ALIASES: dict[str, str] = {
    "optical": "optical", "rgb": "optical", "vhr": "optical", "pan": "optical", "aerial": "optical",
    "uav": "optical", "drone": "optical", "satellite": "optical",
    "sar": "sar", "radar": "sar",
    "multispectral": "multispectral", "ms": "multispectral", "msi": "multispectral",
    "sentinel-2": "multispectral", "s2": "multispectral", "hyperspectral": "multispectral",
    "dem": "dem", "dsm": "dem", "elevation": "dem",
    "slope": "slope", "lst": "thermal", "thermal": "thermal",
    "vector": "vector", "osm": "vector", "geojson": "vector", "mask": "mask",
}

_PHASE = re.compile(r"(?:t|phase|p)[_ ]?(\d+)")


def is_data_path(value: Any) -> bool:
    """True for a string the benchmark treats as a file under images/ (suffix rule above)."""
    return isinstance(value, str) and value.strip().lower().endswith(PATH_SUFFIXES)


def walk_data_paths(value: Any, root: str = "input_data") -> Iterator[tuple[str, str]]:
    """``(location, string)`` for every data path at any depth of ``value``, in document order;
    locations read ``input_data.pre_image.image_path`` / ``input_data.layers[2]``."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from walk_data_paths(v, f"{root}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from walk_data_paths(v, f"{root}[{i}]")
    elif is_data_path(value):
        yield root, value


def data_paths(value: Any) -> list[str]:
    """Every distinct data path at any depth of ``value``, in document order."""
    return list(dict.fromkeys(v for _, v in walk_data_paths(value)))


def base_name(path: str) -> str:
    """The file name of a path string (``\\`` read as ``/``): how trajectories name layers."""
    return PurePosixPath(str(path).strip().replace("\\", "/")).name


def phase_of_key(key: str) -> str:
    """``pre``, ``post``, ``t<N>`` or ``""`` for an input_data key (rule in the module docstring)."""
    k = str(key).strip().lower()
    if k.startswith("pre"):
        return "pre"
    if k.startswith("post"):
        return "post"
    m = _PHASE.fullmatch(k)
    return f"t{m.group(1)}" if m else ""


def normalise_modality(value: Any) -> str | None:
    """The studio's modality for a manifest's ``modality`` value (aliases above), None if blank."""
    if not isinstance(value, str) or not value.strip():
        return None
    v = value.strip().lower()
    return MODALITY_ALIASES.get(v, v)


def input_entries(input_data: Any) -> list[tuple[str, str, dict]]:
    """``(location, path string, entry)`` for every layer entry of ``input_data``.

    An entry is a dict with ``image_path`` or ``path`` (its keys are kept in ``entry``), or a bare
    data-path string (entry ``{}``); dicts without a path are searched one level at a time
    (``temporal_images: {t1: {...}}``). ``entry["_phase"]`` is the entry's ``phase``, else the
    phase of the nearest key that has one (:func:`phase_of_key`).
    """
    out: list[tuple[str, str, dict]] = []
    if not isinstance(input_data, dict):
        return out

    def visit(key: str, entry: Any, loc: str, phase: str) -> None:
        if isinstance(entry, str):
            if is_data_path(entry):
                out.append((loc, entry, {"_phase": phase or phase_of_key(key)}))
            return
        if not isinstance(entry, dict):
            return
        path = entry.get("image_path") or entry.get("path")
        if isinstance(path, str) and path.strip():
            out.append((loc, path, {**entry, "_phase": entry.get("phase") or phase or phase_of_key(key)}))
            return
        for sub, value in entry.items():
            if isinstance(value, (dict, str)):
                visit(sub, value, f"{loc}.{sub}", phase_of_key(sub) or phase)

    for key, entry in input_data.items():
        visit(key, entry, f"input_data.{key}", phase_of_key(key))
    return out


def entry_of(input_data: Any, path: str) -> tuple[str, dict]:
    """``(key, entry)`` of the input_data entry that holds ``path``: the entry's own key
    (``post_image``, or ``t2`` inside ``temporal_images``) and its dict; ``("", {})`` if none."""
    for loc, p, entry in input_entries(input_data):
        if p == path:
            return loc.rsplit(".", 1)[-1], {k: v for k, v in entry.items() if k != "_phase"}
    return "", {}


def modality_config(input_data: Any) -> str:
    """The modality configuration of a manifest (rule in the module docstring): ``optical+sar``,
    ``optical+vector``…, ``""`` when it names nothing. An entry without a path but with a
    ``modality`` (``temporal_images: {t1: {modality: dem}}``) counts with that modality."""
    mods = set()
    seen = set()
    for loc, path, entry in input_entries(input_data):
        seen.add(loc)
        if str(path).lower().endswith(VECTOR_SUFFIXES):
            mods.add("vector")
        else:
            mods.add(normalise_modality(entry.get("modality")) or "optical")
    if isinstance(input_data, dict):
        for key, entry in input_data.items():
            group = entry.items() if key == "temporal_images" and isinstance(entry, dict) else [(None, entry)]
            for sub, e in group:
                loc = f"input_data.{key}" + (f".{sub}" if sub is not None else "")
                if isinstance(e, dict) and loc not in seen and normalise_modality(e.get("modality")):
                    mods.add(normalise_modality(e.get("modality")))
    return "+".join(sorted(mods))
