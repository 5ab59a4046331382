"""The filled tool registry: every implemented benchmark tool, one ``ToolSpec`` each.

The tool modules ``raster``, ``vector``, ``logical``, ``perception``, ``poi``, ``vis`` and
``summarize`` register their tools with ``@register(...)`` from ``kernel.tools.spec``; this module
imports them all (the package's ``__init__`` imports this module, so the registry is filled by any
import from ``kernel.tools``). Their heavy third-party dependencies (GDAL, geopandas, torch,
matplotlib) load only when a tool runs. What a tool is and how it is looked up and called lives in
``spec`` and is re-exported here, where the project imports it from.
"""
from __future__ import annotations

import json

# importing a tool module runs its @register decorators. Each is imported by its full name:
# ``from . import raster`` would read as an import of the package, whose __init__ imports this module.
import kernel.tools.logical  # noqa: F401
import kernel.tools.perception  # noqa: F401
import kernel.tools.poi  # noqa: F401
import kernel.tools.raster  # noqa: F401
import kernel.tools.summarize  # noqa: F401
import kernel.tools.vector  # noqa: F401
import kernel.tools.vis  # noqa: F401

from .base import UnknownToolError
from .spec import (
    PAPER_ALIASES,
    REGISTRY,
    SERVERS,
    ParamSpec,
    ToolSpec,
    call_tool,
    get_tool,
    model_alias,
    normalize_tool_name,
    register,
    validate_args,
)

__all__ = ["ParamSpec", "ToolSpec", "REGISTRY", "SERVERS", "register", "get_tool", "call_tool",
           "validate_args", "normalize_tool_name", "PAPER_ALIASES", "model_alias", "all_tools",
           "catalogue_params", "UnknownToolError"]


def all_tools() -> dict[str, ToolSpec]:
    """Every registered tool, dotted name → ``ToolSpec`` (the ``REGISTRY`` itself)."""
    return REGISTRY


def catalogue_params(name: str, catalogue_path) -> list[dict]:
    """Parameter metadata of ``name`` as listed in a catalogue JSON file (for comparison)."""
    data = json.loads(open(catalogue_path, encoding="utf-8").read())
    spec_name = PAPER_ALIASES.get(name, name)
    for entry in data:
        if entry["name"] == spec_name or entry.get("alias") == spec_name:
            return entry["params"]
    raise UnknownToolError(f"{name!r} is not in the catalogue {catalogue_path}")

