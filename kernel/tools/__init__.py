"""The studio's implementation of the DORA tool library (pure Python, no Django).

Public API::

    from kernel.tools import ToolContext, GTMask, call_tool, get_tool, REGISTRY
    ctx = ToolContext(work_dir=..., resolve_path=directory_resolver(sample_dir), gt_lookup=...)
    obs = call_tool("seg_building_damage", {"pre_image_path": "pre.png",
                                            "post_image_path": "post.png"}, ctx)

Modules: ``raster`` (ras.*, mask.*), ``vector`` (vec.*), ``poi`` (poi.*), ``logical`` (tool.*,
calc.*, logi.*), ``perception`` (seg.*), ``vis`` (vis.*), ``summarize`` (report.*, model.*).
Every tool registers itself in ``spec.REGISTRY`` with ``spec.register``; ``registry`` imports
every tool module, and this package imports ``registry``, so any import from ``kernel.tools`` finds
the registry filled (the tools' heavy dependencies, such as GDAL, torch and matplotlib, load only
when a tool runs).
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
from .registry import (
                   PAPER_ALIASES,
                   REGISTRY,
                   ParamSpec,
                   ToolSpec,
                   all_tools,
                   call_tool,
                   get_tool,
                   model_alias,
                   normalize_tool_name,
                   validate_args,
)

__all__ = [
    "ToolContext", "GTMask", "ToolError", "ToolInputError", "ClassIndexError", "ModalityError",
    "GTMissingError", "ModelUnavailableError", "UnknownToolError", "directory_resolver",
    "file_sha256", "canonical_json", "jsonable", "REGISTRY", "ParamSpec", "ToolSpec",
    "PAPER_ALIASES", "all_tools", "call_tool", "get_tool", "model_alias", "normalize_tool_name",
    "validate_args",
]
