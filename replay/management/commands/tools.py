"""``manage.py tools``: the tool registry, as JSON or as a readable table.

    python manage.py tools [--json] [--module raster|vector|logical|perception|...] [--server NAME]

``--json`` prints a list with, for each tool: ``name``, ``alias`` (model-facing name),
``server``, ``module``, ``version``, ``description``, ``parameters`` (``name``, ``type``,
``required``, ``default``) and ``result_keys``. Tools are listed in the benchmark's server order
(Analysis, Calculate, Perception, Vis, Model, POI), registration order within a server.
Without ``--json``: one table per module. Touches no database.
"""
from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from kernel.tools.base import jsonable


def tool_entries(module: str | None = None, server: str | None = None) -> list[dict]:
    """The registry as plain dicts (what ``--json`` prints)."""
    from replay.mcp_server import registry_tools

    out = []
    for spec in registry_tools():
        if module and spec.module != module:
            continue
        if server and spec.server.lower() != server.lower():
            continue
        out.append({
            "name": spec.name,
            "alias": spec.alias,
            "server": spec.server,
            "module": spec.module,
            "version": spec.version,
            "description": spec.description,
            "parameters": [{"name": p.name, "type": p.type, "required": p.required,
                            "default": _default(p)} for p in spec.params],
            "result_keys": list(spec.result_keys),
        })
    return out


def _default(p):
    if p.required:
        return None
    try:
        return jsonable(p.default)
    except TypeError:
        return repr(p.default)


def _param_text(p: dict) -> str:
    if p["required"]:
        return f"{p['name']}: {p['type']}"
    return f"{p['name']}: {p['type']} = {json.dumps(p['default'], ensure_ascii=False)}"


class Command(BaseCommand):
    help = "List the tool registry (name, alias, server, module, version, parameters, result keys)."

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true", help="print the registry as a JSON list")
        parser.add_argument("--module", help="only tools of this module (raster, vector, logical, perception, ...)")
        parser.add_argument("--server", help="only tools of this benchmark server (Analysis, Calculate, ...)")

    def handle(self, *args, **opts):
        entries = tool_entries(opts.get("module"), opts.get("server"))
        if not entries and (opts.get("module") or opts.get("server")):
            raise CommandError("no tool matches the given --module/--server")
        if opts["json"]:
            self.stdout.write(json.dumps(entries, indent=2, ensure_ascii=False))
            return
        by_module: dict[str, list[dict]] = {}
        for e in entries:
            by_module.setdefault(e["module"], []).append(e)
        lines = [f"{len(entries)} tools in {len(by_module)} modules"]
        for module in sorted(by_module):
            tools = by_module[module]
            w_name = max(len(t["name"]) for t in tools)
            w_alias = max(len(t["alias"]) for t in tools)
            w_server = max(len(t["server"]) for t in tools)
            lines += ["", f"== {module} ({len(tools)}) ==",
                      f"{'name'.ljust(w_name)}  {'alias'.ljust(w_alias)}  {'server'.ljust(w_server)}  v  "
                      f"parameters -> result keys"]
            for t in tools:
                params = ", ".join(_param_text(p) for p in t["parameters"])
                lines.append(f"{t['name'].ljust(w_name)}  {t['alias'].ljust(w_alias)}  "
                             f"{t['server'].ljust(w_server)}  {t['version']}  ({params}) -> "
                             f"{', '.join(t['result_keys'])}")
        self.stdout.write("\n".join(lines))
