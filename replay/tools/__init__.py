"""Old import path of the tool library, kept for scripts outside the project.

The tools moved to :mod:`kernel.tools` (issue 19: the pure cores sit below annotation). Scripts
that are not part of this tree still import ``replay.tools.registry`` and ``replay.tools.base``
(``../shared/tools/check_tool_examples.py``), so this package makes every ``replay.tools.<name>``
the very module object ``kernel.tools.<name>`` — one registry, one ``ToolError`` class — rather
than a second copy. Project code imports ``kernel.tools``; nothing here is to be extended.
"""
import importlib
import sys

import kernel.tools as _tools

_MODULES = ("_io", "base", "classical", "logical", "perception", "perception_models", "poi",
            "quirks", "raster", "registry", "spec", "summarize", "testing", "vector", "vis")

for _name in _MODULES:
    sys.modules[f"{__name__}.{_name}"] = importlib.import_module(f"kernel.tools.{_name}")
sys.modules[__name__] = _tools
