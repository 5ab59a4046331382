"""The filled tool registry: every implemented benchmark tool, one ``ToolSpec`` each.

The tool modules ``raster``, ``vector``, ``logical``, ``perception``, ``poi``, ``vis`` and
``summarize`` register their tools with ``@register(...)`` from ``kernel.tools.spec``; this module
imports them all (``from kernel.tools import <a name of this module>`` imports it too, through the
package's ``__getattr__``). Their heavy third-party dependencies (GDAL, geopandas, torch,
matplotlib) load only when a tool runs. What a tool is and how it is looked up and called lives in
``spec`` and is re-exported here, where the project imports it from. Importing this module loads
every tool module; the lookups of ``spec`` load it on first use (a module that only looks tools
up when it runs imports ``spec`` and starts without them).
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
    ListedTool,
    ParamSpec,
    ToolSpec,
    all_tools,
    call_tool,
    get_tool,
    model_alias,
    normalize_tool_name,
    register,
    tool_manifest,
    validate_args,
)

__all__ = ["ParamSpec", "ToolSpec", "REGISTRY", "SERVERS", "register", "get_tool", "call_tool",
           "validate_args", "normalize_tool_name", "PAPER_ALIASES", "model_alias", "all_tools",
           "catalogue_params", "UnknownToolError", "tool_manifest", "ListedTool"]


#: the order of the tool modules' registrations when this module is the first to import them
#: (``logical`` imports ``raster``): ``REGISTRY`` is put in this order below, whichever tool module
#: was imported first (``annotation.qc.tool_parity`` imports ``logical`` itself), so the tool list's
#: order never depends on what a process happened to import before
MODULE_ORDER = ("kernel.tools.raster", "kernel.tools.logical", "kernel.tools.perception", "kernel.tools.poi",
                "kernel.tools.summarize", "kernel.tools.vector", "kernel.tools.vis")


def _in_module_order() -> None:
    rank = {m: i for i, m in enumerate(MODULE_ORDER)}
    specs = sorted(REGISTRY.values(), key=lambda s: rank.get(s.func.__module__, len(rank)))  # stable
    REGISTRY.clear()
    REGISTRY.update((s.name, s) for s in specs)


_in_module_order()


def catalogue_params(name: str, catalogue_path) -> list[dict]:
    """Parameter metadata of ``name`` as listed in a catalogue JSON file (for comparison)."""
    data = json.loads(open(catalogue_path, encoding="utf-8").read())
    spec_name = PAPER_ALIASES.get(name, name)
    for entry in data:
        if entry["name"] == spec_name or entry.get("alias") == spec_name:
            return entry["params"]
    raise UnknownToolError(f"{name!r} is not in the catalogue {catalogue_path}")

