"""The studio's MCP server: every registry tool, bound to one task's data (``manage.py mcp_serve``).

``build_server(task, recorder=None)`` returns an ``mcp.server.mcpserver.MCPServer`` (mcp 2.x) that

* lists every tool of ``kernel.tools.registry`` (a robustness variant: its own tool set, see
  ``replay.variant_tools``) under its model-facing alias (``seg_flood``), in
  the benchmark's server order (Analysis, Calculate, Perception, Vis, Model, POI), with the tool's
  description and the JSON schema of its pydantic input model (so the schema is exactly what the
  tool validates; list/dict arguments may also arrive as JSON text, as in the benchmark). A plain
  task's list is read from ``kernel.tools.spec.tool_manifest`` (the registry's values, cached
  under ``STUDIO_VAR_DIR/cache``), so a server's start imports no tool module: the benchmark's
  harness starts a server per tool call, and the registry is filled by the first call;
* runs a call through ``registry.call_tool`` with a ``ToolContext`` bound to the task: paths
  resolve through ``LayerResolver`` over ``replay.services.layers.task_layers(task)`` (layer file names,
  or the stored file of a layer; a released task's layers at the versions its release pinned; artifacts of earlier calls by their bare name), artifacts go to
  ``STUDIO_ARTIFACT_ROOT/sessions/<session id>/``, perception in the mode given (``perception_mode``:
  ``gt`` by default here, ``model`` by default in ``manage.py mcp_serve``); a ``seg.*`` tool whose
  checkpoint is missing answers the benchmark's ``status: "stub"`` observation as a normal result;
* answers a call with one JSON text block (and ``structured_content`` when the observation is an
  object). A refused call (bad arguments, missing file, no GT mask ...) is an MCP error result
  (``is_error``) whose text is the tool's readable message; an unexpected exception is also an
  error result (``internal error: ...``), never a crash of the server;
* with a ``SessionRecorder``: records every call as a trajectory step (see ``replay.sessions``) and
  adds the studio extra ``studio_submit_answer(answer: dict)``, which is NOT a benchmark tool
  (not in the 108-tool catalogue, not recorded as a step): it sets the run record's
  ``predicted_answer``.

Everything the tools need from the database is read when the server is built (the layers of the
event and the GT mask of each layer), so a call never touches the database: tool calls run on a
worker thread and stay out of Django's async-safety checks.
"""
from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
from django.conf import settings
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import func_metadata
from mcp_types import CallToolResult, TextContent, ToolAnnotations

from kernel.tools.base import GTMask, ToolContext, ToolError
from kernel.tools.spec import SERVERS, ListedTool, ToolSpec, all_tools, call_tool, tool_manifest
from replay.services.layers import GT_IMAGE_ARGS, LayerResolver, task_layers
from replay.sessions import SessionRecorder, new_session_id
from replay.variant_tools import PublishedTool, published_tools_for, variant_tool_set

log = logging.getLogger(__name__)

__all__ = ["build_server", "registry_tools", "listed_tools", "TaskBinding", "SUBMIT_TOOL", "session_work_dir"]

#: name of the studio-only answer tool (present only when recording)
SUBMIT_TOOL = "studio_submit_answer"


def _server_order(specs: list) -> list:
    order = {s: i for i, s in enumerate(SERVERS)}
    return sorted(specs, key=lambda s: order.get(s.server, len(order)))  # stable


def registry_tools() -> list[ToolSpec]:
    """Registry tools in the benchmark's server order; registration order within a server."""
    return _server_order(list(all_tools().values()))


def listed_tools() -> list[ListedTool]:
    """What ``registry_tools()`` lists, in its order, without importing the tools: from
    ``kernel.tools.spec.tool_manifest``'s cache under ``<STUDIO_VAR_DIR>/cache`` (written from the
    registry when the tools' sources change)."""
    return _server_order(tool_manifest(Path(settings.VAR_DIR) / "cache"))


def session_work_dir(session_id: str) -> Path:
    return Path(settings.STUDIO_ARTIFACT_ROOT) / "sessions" / session_id


class TaskBinding:
    """What a session may touch: the event's layers (read once) and a session work dir.

    ``resolve_path`` is ``LayerResolver(task.event_id)``; ``gt_lookup`` answers from the GT masks
    that ``LayerResolver.gt_lookup`` finds, looked up for every layer up front.
    """

    def __init__(self, task, *, session_id: str | None = None, work_dir: Path | None = None,
                 perception_mode: str = "gt"):
        self.task = task
        self.session_id = session_id or new_session_id()
        self.work_dir = Path(work_dir) if work_dir else session_work_dir(self.session_id)
        self.resolver = LayerResolver(task.event_id, task_layers(task))  # a released task: its pinned versions
        self._gt_args = GT_IMAGE_ARGS
        # the DB queries of gt_lookup, done now: layer pk → GTMask | None
        self._gt: dict[int, GTMask | None] = {
            layer.pk: self.resolver.gt_lookup("", {"image_path": name})
            for name, layer in self.resolver.layers.items()
        }
        self.ctx = ToolContext(work_dir=self.work_dir, resolve_path=self.resolver,
                               gt_lookup=self.gt_lookup, perception_mode=perception_mode,
                               checkpoint_dir=_checkpoint_dir())

    def gt_lookup(self, tool_name: str, args: dict) -> GTMask | None:
        """Same rule as ``LayerResolver.gt_lookup`` (first image argument, post image first, whose
        layer has a GT mask), from the table built at construction."""
        for arg in self._gt_args:
            value = args.get(arg)
            if not value:
                continue
            layer = self.resolver.layer_for(value)
            if layer is None:
                continue
            mask = self._gt.get(layer.pk)
            if mask is not None:
                return mask
        return None


def _checkpoint_dir() -> Path | None:
    value = settings.STUDIO_CHECKPOINT_DIR or ""
    return Path(value) if value else None


def _no_args() -> None:  # pragma: no cover - never called: only its (empty) metadata is used
    return None


class RegistryTool(Tool):
    """An MCP tool that hands the raw arguments to a handler (``handler(args) -> CallToolResult``).

    ``parameters`` is the registry's input schema; validation is the registry's own, so the
    error text the agent sees is the tool's readable message.
    """

    handler: Callable[[dict], CallToolResult]

    async def run(self, arguments: dict[str, Any], context: Any, convert_result: bool = False) -> Any:
        return await anyio.to_thread.run_sync(self.handler, dict(arguments or {}))


def _text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _error_result(message: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)


def _ok_result(obs: Any) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=_text(obs))],
                          structured_content=obs if isinstance(obs, dict) else None)


def _make_handler(spec: ToolSpec | ListedTool, ctx: ToolContext, recorder: SessionRecorder | None,
                  call: Callable[[dict, ToolContext], Any] | None = None):
    """``call(args, ctx)`` answers the tool (default: the registry's ``call_tool``; a variant's
    tool set brings its own, ``replay.variant_tools``). A ``ToolError`` carrying an
    ``observation`` (a variant's broken tool) is an error result with that observation."""
    call = call or (lambda args, ctx: call_tool(spec.name, args, ctx))

    def handle(args: dict) -> CallToolResult:
        try:
            obs = call(args, ctx)
        except ToolError as exc:
            message = str(exc)
            if not message.startswith(spec.name):  # e.g. a resolver error raised with tool=""
                message = f"{spec.name}: {message}"
            result = _error_result(message)
            if getattr(exc, "observation", None) is not None:  # the failure has an observation
                obs, message = exc.observation, None
                # a perception model without its checkpoint answers the benchmark's stub as a
                # normal observation (dora-format.md §e); a variant's broken tool is an error
                stub = isinstance(obs, dict) and obs.get("status") == "stub"
                result = CallToolResult(content=[TextContent(type="text", text=_text(obs))],
                                        structured_content=obs, is_error=not stub)
        except Exception as exc:  # a bug in a tool: report it, keep serving
            log.exception("tool %s crashed", spec.name)
            message = f"{spec.name}: internal error: {type(exc).__name__}: {exc}"
            result = _error_result(message)
        else:
            message = None
            result = _ok_result(obs)
        if recorder is not None:
            try:
                if message is None:
                    recorder.record_call(spec.alias, args, obs)
                else:
                    recorder.record_call(spec.alias, args, error=message)
            except Exception:  # recording must never take the call down
                log.exception("recording the call of %s failed", spec.name)
        return result

    return handle


def _input_schema(spec: ToolSpec | ListedTool) -> dict:
    """The pydantic input model's JSON schema; if pydantic cannot build one (an exotic type
    hint), a plain object schema naming the parameters, so one tool never takes the server down."""
    try:
        return spec.input_schema()
    except Exception as exc:
        log.warning("tool %s: no JSON schema from its input model (%s); publishing a loose one", spec.name, exc)
        return {"type": "object", "title": f"{spec.alias}_input",
                "properties": {p.name: {"title": p.name, "description": p.type} for p in spec.params},
                "required": [p.name for p in spec.params if p.required]}


def _tool_description(spec: ToolSpec | ListedTool) -> str:
    text = spec.description or spec.name
    return f"{text}\n\n[{spec.name}; server {spec.server}; returns {', '.join(spec.result_keys)}]"


def _instructions(task) -> str:
    rev = task.head
    parts = [
        "DORA studio tool server, bound to one task. Tools take the file names of the task's",
        "input_data (a bare file name or any path ending in it) and the artifact names returned",
        "by earlier calls.",
        f"question_id: {task.question_id}",
    ]
    if rev is not None:
        parts.append(f"question: {rev.question}")
        parts.append("input_data: " + _text(rev.input_data or {}))
        if rev.classes:
            parts.append("classes: " + _text(rev.classes))
    return "\n".join(parts)


def _answer_fields(task) -> list[dict]:
    rev = task.head
    return [f for f in (rev.answer_spec if rev else []) or [] if isinstance(f, dict) and f.get("name")]


def build_server(task, *, recorder: SessionRecorder | None = None, session_id: str | None = None,
                 work_dir: Path | None = None, perception_mode: str = "gt",
                 tool_names: str = "alias") -> MCPServer:
    """The MCP server of one task (``annotation.models.Task``); see the module docstring.

    ``recorder``: record the session (and offer ``studio_submit_answer``). ``session_id`` /
    ``work_dir`` default to the recorder's session id and
    ``STUDIO_ARTIFACT_ROOT/sessions/<session id>/``. ``tool_names``: ``"alias"`` lists tools
    under their model-facing aliases (``seg_flood``), ``"dotted"`` under the benchmark servers'
    own dotted names (``seg.flood``), which the benchmark's harness renames to the aliases
    itself (``dora/agent/mcp_tools.py``, ``_alias_for_model``). The server object exposes
    ``binding`` (the :class:`TaskBinding`) and ``recorder``.
    """
    if tool_names not in ("alias", "dotted"):
        raise ValueError(f"tool_names must be 'alias' or 'dotted', not {tool_names!r}")
    if task.head is None:
        raise ValueError(f"task {task.question_id} has no revision")
    sid = session_id or (recorder.session_id if recorder is not None else None)
    binding = TaskBinding(task, session_id=sid, work_dir=work_dir, perception_mode=perception_mode)
    meta_fn = func_metadata(_no_args, structured_output=False)
    tools: list[Tool] = []
    tool_set = variant_tool_set(task)
    if tool_set:  # a variant's own tool set, over the registry's tools
        published = published_tools_for(tool_set, registry_tools())
    else:  # every registry tool, listed from the manifest: no tool module is imported until a call
        published = [PublishedTool(spec, None) for spec in listed_tools()]
    for entry in published:
        spec = entry.spec
        tools.append(RegistryTool(
            fn=_no_args, name=spec.alias if tool_names == "alias" else spec.name, title=spec.name,
            description=_tool_description(spec),
            parameters=_input_schema(spec), fn_metadata=meta_fn, is_async=True,
            meta={"dora": {"name": spec.name, "server": spec.server, "module": spec.module,
                           "version": spec.version, "result_keys": list(spec.result_keys)}},
            handler=_make_handler(spec, binding.ctx, recorder, entry.call),
        ))
    server = MCPServer(
        name="dora-studio", title=f"DORA studio tools: {task.question_id}",
        instructions=_instructions(task), tools=tools, log_level="WARNING",
    )
    if recorder is not None:
        _add_submit_tool(server, task, recorder)
    server.binding = binding  # type: ignore[attr-defined]
    server.recorder = recorder  # type: ignore[attr-defined]
    server.tool_count = len(tools)  # type: ignore[attr-defined]  (the task's tools, the submit tool not counted)
    return server


def _add_submit_tool(server: MCPServer, task, recorder: SessionRecorder) -> None:
    fields = _answer_fields(task)
    lines = [
        "STUDIO EXTRA, not a benchmark tool (not in the DORA catalogue, not recorded as a "
        "trajectory step): submit the final answer of this task. `answer` is an object with one "
        "key per answer field; calling it again replaces the answer."
    ]
    if fields:
        lines.append("Answer fields:")
        for f in fields:
            note = f.get("answer_format") or ""
            lines.append(f"- {f['name']} ({f.get('eval_type', '')}){': ' + note if note else ''}")

    def studio_submit_answer(answer: dict[str, Any]) -> str:
        rec = recorder.finish(answer)
        return _text({"tool": SUBMIT_TOOL, "question_id": rec["question_id"],
                      "predicted_answer": rec["predicted_answer"], "steps": len(rec["trajectory"])})

    server.add_tool(studio_submit_answer, name=SUBMIT_TOOL, description="\n".join(lines),
                    annotations=ToolAnnotations(idempotent_hint=True), structured_output=False)
