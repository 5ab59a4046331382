"""The studio's implementation of the DORA tool library (pure Python, no Django).

Public API::

    from kernel.tools import ToolContext, GTMask, call_tool, get_tool, REGISTRY
    ctx = ToolContext(work_dir=..., resolve_path=directory_resolver(sample_dir), gt_lookup=...)
    obs = call_tool("seg_building_damage", {"pre_image_path": "pre.png",
                                            "post_image_path": "post.png"}, ctx)

Modules: ``raster`` (ras.*, mask.*), ``vector`` (vec.*), ``poi`` (poi.*), ``logical`` (tool.*,
calc.*, logi.*), ``perception`` (seg.*), ``vis`` (vis.*), ``summarize`` (report.*, model.*).
Every tool registers itself in ``spec.REGISTRY`` with ``spec.register``; ``registry`` imports
every tool module. The names of ``registry`` re-exported here are resolved when first used
(``__getattr__``), so ``from kernel.tools import call_tool`` finds the registry filled while an
import of ``kernel.tools.base`` (or ``spec``) alone loads no tool module and no numpy: a tool
server lists its tools without them (``spec.tool_manifest``). The tools' heavy dependencies, such
as GDAL, torch and matplotlib, load only when a tool runs.
"""

from .base import (
                   ClassIndexError,
                   GTMask,
                   GTMissingError,
                   ModalityError,
                   ModelUnavailableError,
                   ToolContext,
                   ToolError,
                   ToolInputError,
                   UnknownToolError,
                   canonical_json,
                   directory_resolver,
                   file_sha256,
                   jsonable,
)
from .spec import registry_module

#: names re-exported from ``kernel.tools.registry``, which is imported when one is first used
_FROM_REGISTRY = frozenset({"PAPER_ALIASES", "REGISTRY", "ParamSpec", "ToolSpec", "all_tools", "call_tool",
                            "get_tool", "model_alias", "normalize_tool_name", "validate_args"})


def __getattr__(name: str):
    if name in _FROM_REGISTRY:
        return getattr(registry_module(), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ToolContext", "GTMask", "ToolError", "ToolInputError", "ClassIndexError", "ModalityError",
    "GTMissingError", "ModelUnavailableError", "UnknownToolError", "directory_resolver",
    "file_sha256", "canonical_json", "jsonable", "REGISTRY", "ParamSpec", "ToolSpec",
    "PAPER_ALIASES", "all_tools", "call_tool", "get_tool", "model_alias", "normalize_tool_name",
    "validate_args",
]
