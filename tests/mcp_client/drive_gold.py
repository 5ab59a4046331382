"""Drive a gold trajectory through the studio's MCP server the way the benchmark's harness does.

Runs in its own venv (``.venv-mcp-client``, ``requirements-mcp-client.txt``): the benchmark's
client ``langchain_mcp_adapters.client.MultiServerMCPClient`` needs ``mcp<2``, the studio pins
mcp 2.x. As in ``dora/agent/mcp_tools.py`` (Junjue-Wang/DORA): a stdio server spec per server,
``get_tools(server_name=...)`` without a session, so that every tool call starts a fresh server
process; dotted tool names renamed to underscore aliases; list/dict arguments given as JSON text
turned back into values; the JSON text result parsed (an error result's text, which is no JSON, kept as ``{"error": text}``).

Input (JSON on stdin): ``{"server": {command, args, env, cwd}, "steps": [{"call", "args"}]}``.
A string argument ``"<key> from trajectory[N].obs"`` is replaced by that key of step N's parsed
result, as an agent following the gold plan would fill it in. Output (JSON on stdout):
``{"tools": {alias: {"name": dotted name, "args_schema": {...}}}, "observations": [...]}``; a
failed call's observation is ``{"error": text}``.
"""
from __future__ import annotations

import asyncio
import json
import re
import sys

from langchain_mcp_adapters.client import MultiServerMCPClient

REFERENCE = re.compile(r"^<([A-Za-z0-9_]+)> from trajectory\[(\d+)\]\.obs$")


def model_name(name: str) -> str:
    """The harness's model-facing name: dots become underscores."""
    return name.replace(".", "_")


def fill(value, observations):
    """References to earlier observations replaced by their values (recursively)."""
    if isinstance(value, str):
        m = REFERENCE.match(value.strip())
        if m:
            return observations[int(m.group(2))][m.group(1)]
        return value
    if isinstance(value, list):
        return [fill(v, observations) for v in value]
    if isinstance(value, dict):
        return {k: fill(v, observations) for k, v in value.items()}
    return value


def as_json_text(value) -> str:
    """The text of a tool result: a plain string, or the text blocks of a content list."""
    if isinstance(value, str):
        return value
    if isinstance(value, tuple):  # (content, artifact) of response_format="content_and_artifact"
        value = value[0]
    if isinstance(value, list):
        return "".join(b.get("text", "") if isinstance(b, dict) else getattr(b, "text", str(b))
                       for b in value)
    return str(value)


async def main() -> None:
    spec = json.load(sys.stdin)
    server = dict(spec["server"], transport="stdio")
    client = MultiServerMCPClient({"DORA": server})
    tools = await client.get_tools(server_name="DORA")
    by_alias = {}
    for tool in tools:
        alias = model_name(tool.name)
        if alias in by_alias:
            raise SystemExit(f"tool name alias collision: {tool.name} -> {alias}")
        by_alias[alias] = tool
    listing = {alias: {"name": t.name, "args_schema": t.args_schema if isinstance(t.args_schema, dict)
                       else t.args_schema.model_json_schema()} for alias, t in by_alias.items()}
    observations = []
    for step in spec["steps"]:
        tool = by_alias[model_name(step["call"])]
        args = fill(step.get("args") or {}, observations)
        try:
            text = as_json_text(await tool.ainvoke(args))
        except Exception as exc:  # an adapter or transport failure
            observations.append({"error": f"{type(exc).__name__}: {exc}"})
            continue
        try:
            observations.append(json.loads(text))
        except ValueError:  # an error result: the server's readable message, not JSON
            observations.append({"error": text})
    json.dump({"tools": listing, "observations": observations}, sys.stdout)


if __name__ == "__main__":
    asyncio.run(main())
