"""The benchmark's tool catalogue (``dora-tools.json``: one entry per tool, 108 in all; see
../shared/spec/dora-format.md §0), and the one list of places it is looked for."""
from __future__ import annotations

import json
import os
import re
from functools import lru_cache
from pathlib import Path

CATALOGUE_NAME = "dora-tools.json"
_REPO = Path(__file__).resolve().parents[1]


def catalogue_candidates() -> list[Path]:
    """Where the catalogue is looked for, in order: ``$STUDIO_TOOL_CATALOGUE``,
    ``$STUDIO_SHARED/spec/dora-tools.json``, ``<repo>/../shared/spec/dora-tools.json``,
    ``<repo>/docs/dora-tools.json``."""
    out = []
    if os.environ.get("STUDIO_TOOL_CATALOGUE"):
        out.append(Path(os.environ["STUDIO_TOOL_CATALOGUE"]))
    if os.environ.get("STUDIO_SHARED"):
        out.append(Path(os.environ["STUDIO_SHARED"]) / "spec" / CATALOGUE_NAME)
    out += [_REPO.parent / "shared" / "spec" / CATALOGUE_NAME, _REPO / "docs" / CATALOGUE_NAME]
    return out


def catalogue_path() -> Path | None:
    """The first catalogue file that exists (:func:`catalogue_candidates`), or None."""
    return next((p for p in catalogue_candidates() if p.is_file()), None)


@lru_cache(maxsize=4)
def _load(path: str) -> tuple[dict, ...]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ()
    return tuple(e for e in data if isinstance(e, dict) and "name" in e) if isinstance(data, list) else ()


def catalogue_entries() -> list[dict]:
    """The catalogue's entries (``{name, server, module, description, params, returns, …}``), in
    file order; ``[]`` when no catalogue is found or it cannot be read."""
    path = catalogue_path()
    return list(_load(str(path))) if path is not None else []


def catalogue_by_name() -> dict[str, dict]:
    """The catalogue's entries by dotted tool name."""
    return {e["name"]: e for e in catalogue_entries()}


_RETURN_KEY = re.compile(r"([A-Za-z_]\w*(?:/[A-Za-z_]\w*)*)\s*:\s*([A-Za-z]+)")


def parse_returns(returns) -> dict[str, str]:
    """``{key: base type word}`` from catalogue ``returns`` strings (``"count:int (number of
    polygons)"`` → ``{"count": "int"}``), top nesting level only; ``a/b:str`` names two keys."""
    out: dict[str, str] = {}
    for text in returns or ():
        depth_at, depth = [], 0
        for ch in str(text):
            depth_at.append(depth)
            if ch in "[{(":
                depth += 1
            elif ch in "]})":
                depth = max(0, depth - 1)
        for m in _RETURN_KEY.finditer(str(text)):
            if depth_at[m.start()] != 0:
                continue
            for key in m.group(1).split("/"):
                out.setdefault(key, m.group(2).lower())
    return out


def result_types() -> dict[str, dict[str, str]]:
    """``{tool: {result key: type word}}`` for every catalogue entry (``tool`` key left out)."""
    return {e["name"]: {k: v for k, v in parse_returns(e.get("returns")).items() if k != "tool"}
            for e in catalogue_entries()}
