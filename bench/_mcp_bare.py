"""The baseline of ``bench/mcp_start.py``: a bare MCP server of the studio's ``mcp`` SDK with one tool.

    python bench/_mcp_bare.py DATA_DIR WORK_DIR

Served over stdio as ``manage.py mcp_serve`` is. Its one tool, ``ras_count_pixels(mask_path,
classes)``, is the tool's direct call: ``kernel.tools.call_tool("ras.count_pixels", ...)`` with a
``ToolContext`` over DATA_DIR (imported when the tool runs, as a bare server written for that one
tool would), its observation returned as JSON text.
"""
from __future__ import annotations

import json
import sys

from mcp.server.mcpserver import MCPServer

DATA_DIR, WORK_DIR = sys.argv[1], sys.argv[2]
server = MCPServer(name="bare")


@server.tool()
def ras_count_pixels(mask_path: str, classes: list[int]) -> str:
    """Count the pixels of each class of a mask (the registry's ras.count_pixels, called directly)."""
    from kernel.tools import ToolContext, call_tool
    from kernel.tools.base import directory_resolver

    ctx = ToolContext(work_dir=WORK_DIR, resolve_path=directory_resolver(DATA_DIR))
    return json.dumps(call_tool("ras.count_pixels", {"mask_path": mask_path, "classes": classes}, ctx))


if __name__ == "__main__":
    server.run("stdio")
