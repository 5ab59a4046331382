"""What a tool is and how one is found and called: ``ToolSpec``, the ``REGISTRY`` it is kept in,
the ``@register(...)`` decorator the tool modules put on their implementations, and the lookup
(``get_tool``) and calling (``call_tool``, ``validate_args``) that ``tool.loop`` also uses.

The parameter list and the pydantic input model are built from the Python signature of the
implementation (not from the catalogue), so what is published is what runs. This module imports
no tool module; ``kernel.tools.registry`` imports them all (the package's ``__init__`` imports it,
so any import from ``kernel.tools`` finds the registry filled).

``get_tool`` accepts the dotted name (``seg.building_damage``), the model-facing alias
(``seg_building_damage``), a call text (``"seg_flood(pre_image_path, post_image_path)"``), the
``functions.`` prefix some models add, and the paper's names (``logi.loop`` ...).
"""
from __future__ import annotations

import hashlib
import importlib
import inspect
import json
import os
import sys
import tempfile
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pydantic
from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from .base import ToolContext, ToolError, ToolInputError, UnknownToolError, gdal_scope, jsonable

__all__ = ["ParamSpec", "ToolSpec", "REGISTRY", "SERVERS", "PAPER_ALIASES", "register", "get_tool",
           "call_tool", "validate_args", "normalize_tool_name", "model_alias", "all_tools",
           "tool_manifest", "ListedTool"]

#: the paper's / README's names → the code's names
PAPER_ALIASES = {
    "logi.loop": "tool.loop",
    "logi.reduce": "tool.reduce",
    "m.extract_evidence": "report.extract_evidence",
    "m.summarize": "model.summarize",
    "vec.shortest_path": "vec.graph_shortest_path",
}

#: server of each dotted prefix (the benchmark's six MCP servers)
SERVERS = ("Analysis", "Calculate", "Perception", "Vis", "Model", "POI")


@dataclass
class ParamSpec:
    """One published parameter of a tool: its name, type string (``"float"``, ``"list[str]"``),
    whether it is required, its default and a note."""

    name: str
    type: str
    required: bool
    default: Any = None
    note: str = ""

    def as_dict(self) -> dict:
        return {"name": self.name, "type": self.type, "required": self.required,
                "default": self.default, "note": self.note}


@dataclass
class ToolSpec:
    """One registered tool: dotted ``name``, model-facing ``alias``, MCP ``server``, its parameters
    and pydantic ``input_model`` (built from ``func``'s signature by ``register``, on first use:
    ``model_fields_`` holds its fields until then, so registering 108 tools builds no model), the
    keys its observation carries, and ``func(ctx, **params)`` itself."""

    name: str
    alias: str
    server: str
    module: str
    version: int
    description: str
    params: list[ParamSpec]
    result_keys: list[str]
    func: Callable[..., Any]
    json_params: frozenset = field(default_factory=frozenset)
    #: optional parameters that refuse an explicit null (see ``register``)
    non_null: frozenset = field(default_factory=frozenset)
    #: the input model's fields, ``{name: (type, default or ...)}`` (pydantic ``create_model``'s)
    model_fields_: dict = field(default_factory=dict, repr=False)
    #: the input model once built (or given: a variant's renamed tool, ``replay.variant_tools``)
    model: type[BaseModel] | None = field(default=None, repr=False)

    @property
    def input_model(self) -> type[BaseModel]:
        """The pydantic model of the tool's arguments (``<alias>_input``, extra arguments
        forbidden), built on first use."""
        if self.model is None:
            self.model = create_model(f"{self.alias}_input",
                                      __config__=ConfigDict(extra="forbid", arbitrary_types_allowed=True),
                                      **self.model_fields_)
        return self.model

    def param(self, name: str) -> ParamSpec | None:
        return next((p for p in self.params if p.name == name), None)

    def input_schema(self) -> dict:
        return self.input_model.model_json_schema()


REGISTRY: dict[str, ToolSpec] = {}
_ALIASES: dict[str, str] = {}


def model_alias(name: str) -> str:
    """Model-facing name: dots become underscores (``seg.flood`` → ``seg_flood``)."""
    return name.replace(".", "_")


# --------------------------------------------------------------------------------------------
# Type strings
# --------------------------------------------------------------------------------------------
def _type_str(tp: Any) -> str:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Annotated:
        return _type_str(args[0])
    if origin in (typing.Union, types.UnionType):
        non_none = [a for a in args if a is not type(None)]
        inner = "|".join(_type_str(a) for a in non_none)
        return inner
    if tp is Any or tp is inspect.Parameter.empty:
        return "any"
    if origin in (list, list):
        return f"list[{_type_str(args[0])}]" if args else "list"
    if origin in (dict, dict):
        return f"dict[{_type_str(args[0])},{_type_str(args[1])}]" if args else "dict"
    if isinstance(tp, type):
        return {"str": "str", "int": "int", "float": "float", "bool": "bool",
                "dict": "dict", "list": "list"}.get(tp.__name__, tp.__name__)
    return str(tp)


def _is_container(tp: Any) -> bool:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Annotated:
        return _is_container(args[0])
    if origin in (typing.Union, types.UnionType):
        return any(_is_container(a) for a in args if a is not type(None))
    return origin in (list, dict, list, dict) or tp in (list, dict)


# --------------------------------------------------------------------------------------------
# Registration
# --------------------------------------------------------------------------------------------
def register(name: str, *, server: str, module: str, result_keys: list[str], version: int = 1,
             notes: dict[str, str] | None = None, types_: dict[str, str] | None = None,
             non_null: tuple[str, ...] = ()):
    """Decorator: register ``func(ctx, **params) -> dict | list`` as tool ``name``.

    The first parameter of ``func`` must be the ``ToolContext``; the others are the tool's
    parameters (type hints and defaults become the pydantic input model). ``types_`` overrides
    the published type string of a parameter where the Python hint is wider than the catalogue.
    ``non_null``: optional parameters whose benchmark annotation is not Optional (``pixel_size_m:
    float = None``): the MCP schema validation there refuses an explicit null while leaving the
    parameter out means its default; ``validate_args`` does the same.
    """
    if server not in SERVERS:
        raise ValueError(f"unknown server {server!r}")
    notes = notes or {}
    types_ = types_ or {}

    def deco(func: Callable[..., Any]) -> Callable[..., Any]:
        sig = inspect.signature(func)
        hints = typing.get_type_hints(func, include_extras=True)
        params_iter = list(sig.parameters.values())
        if not params_iter or params_iter[0].name != "ctx":
            raise TypeError(f"{name}: first parameter must be ctx")
        fields: dict[str, Any] = {}
        specs: list[ParamSpec] = []
        json_params = set()
        for p in params_iter[1:]:
            tp = hints.get(p.name, Any)
            required = p.default is inspect.Parameter.empty
            fields[p.name] = (tp, ... if required else p.default)
            specs.append(ParamSpec(name=p.name, type=types_.get(p.name, _type_str(tp)),
                                   required=required, default=None if required else p.default,
                                   note=notes.get(p.name, "")))
            if _is_container(tp):
                json_params.add(p.name)
        doc = inspect.getdoc(func) or ""
        spec = ToolSpec(name=name, alias=model_alias(name), server=server, module=module,
                        version=version, description=doc.split("\n\n")[0].strip(), params=specs,
                        result_keys=list(result_keys), func=func, json_params=frozenset(json_params),
                        non_null=frozenset(non_null), model_fields_=fields)
        if name in REGISTRY:
            raise ValueError(f"tool {name!r} registered twice")
        if spec.alias in _ALIASES:
            raise ValueError(f"alias {spec.alias!r} of {name!r} clashes with {_ALIASES[spec.alias]!r}")
        REGISTRY[name] = spec
        _ALIASES[spec.alias] = name
        return func

    return deco


# --------------------------------------------------------------------------------------------
# Lookup
# --------------------------------------------------------------------------------------------
#: the module that imports every tool module (its @register decorators fill ``REGISTRY``)
REGISTRY_MODULE = "kernel.tools.registry"


def registry_module() -> types.ModuleType:
    """``kernel.tools.registry``, imported by name if no one has yet (the one place the tool
    modules are loaded lazily: ``_filled`` and ``kernel.tools.__getattr__`` come here)."""
    return sys.modules.get(REGISTRY_MODULE) or importlib.import_module(REGISTRY_MODULE)


def _filled() -> dict[str, ToolSpec]:
    """``REGISTRY`` with every tool registered (``registry_module``); a dict lookup once filled."""
    if REGISTRY_MODULE not in sys.modules:
        registry_module()
    return REGISTRY


def all_tools() -> dict[str, ToolSpec]:
    """Every registered tool, dotted name → ``ToolSpec`` (the ``REGISTRY`` itself, filled)."""
    return _filled()


def normalize_tool_name(name: str) -> str:
    """Dotted code name for any accepted spelling; raises ``UnknownToolError``."""
    return get_tool(name).name


def get_tool(name: str) -> ToolSpec:
    """The ``ToolSpec`` of any accepted spelling of a tool name (see the module docstring); raises
    ``UnknownToolError``."""
    if not isinstance(name, str) or not name.strip():
        raise UnknownToolError(f"tool name must be a non-empty string, got {name!r}")
    text = name.strip()
    if "(" in text:
        text = text[: text.index("(")].strip()
    if text.startswith("functions."):
        text = text[len("functions."):]
    text = PAPER_ALIASES.get(text, text)
    _filled()
    if text in REGISTRY:
        return REGISTRY[text]
    if text in _ALIASES:
        return REGISTRY[_ALIASES[text]]
    alias = model_alias(text)
    if alias in _ALIASES:
        return REGISTRY[_ALIASES[alias]]
    paper = PAPER_ALIASES.get(text.replace("_", ".", 1)) if "." not in text else None
    if paper and paper in REGISTRY:
        return REGISTRY[paper]
    raise UnknownToolError(f"unknown tool {name!r} (no implementation registered under that name "
                           f"or alias)", tool=text, expected="a registered tool name")


# --------------------------------------------------------------------------------------------
# Calling
# --------------------------------------------------------------------------------------------
def _prepare_args(spec: ToolSpec, args: dict) -> dict:
    if args is None:
        args = {}
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError as exc:
            raise ToolInputError(f"arguments are not a JSON object: {exc}", tool=spec.name) from exc
    if not isinstance(args, dict):
        raise ToolInputError(f"arguments must be an object, got {type(args).__name__}",
                             tool=spec.name)
    prepared = {}
    for key, value in args.items():
        if key in spec.json_params and isinstance(value, str):
            s = value.strip()
            if (s.startswith("[") and s.endswith("]")) or (s.startswith("{") and s.endswith("}")):
                try:
                    value = json.loads(s)
                except ValueError:
                    pass
        prepared[key] = value
    return prepared


def validate_args(spec: ToolSpec, args: dict) -> dict:
    """Validated arguments with defaults applied; raises ``ToolInputError`` (also for an
    explicit null given to a ``non_null`` parameter)."""
    prepared = _prepare_args(spec, args)
    for name in sorted(spec.non_null):
        if name in prepared and prepared[name] is None:
            ps = spec.param(name)
            raise ToolInputError(f"null is not a valid {ps.type if ps else 'value'} (leave the "
                                 f"argument out for its default)", tool=spec.name,
                                 argument=name, expected=ps.type if ps else None)
    try:
        model = spec.input_model.model_validate(prepared)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = err.get("loc") or ()
        argument = str(loc[0]) if loc else None
        ps = spec.param(argument) if argument else None
        etype = err.get("type", "")
        if etype == "extra_forbidden":
            names = ", ".join(p.name for p in spec.params)
            raise ToolInputError(f"unexpected argument (parameters are: {names})",
                                 tool=spec.name, argument=argument) from None
        if etype == "missing":
            raise ToolInputError("required argument is missing", tool=spec.name,
                                 argument=argument, expected=ps.type if ps else None) from None
        where = "".join(f"[{x}]" for x in loc[1:])
        got = err.get("input")
        got_txt = repr(got)
        if len(got_txt) > 80:
            got_txt = got_txt[:77] + "..."
        raise ToolInputError(f"{err.get('msg', 'invalid value')}{(' at ' + where) if where else ''}"
                             f" (got {got_txt})", tool=spec.name, argument=argument,
                             expected=ps.type if ps else None) from None
    return {name: getattr(model, name) for name in spec.input_model.model_fields}


def _keep_ints(raw: Any, value: Any) -> Any:
    """``value`` with each int of ``raw`` that validation turned into an equal float put back
    (in lists and objects too)."""
    if isinstance(raw, int) and not isinstance(raw, bool) and isinstance(value, float) \
            and value == raw:
        return raw
    if isinstance(raw, list) and isinstance(value, list) and len(raw) == len(value):
        return [_keep_ints(r, v) for r, v in zip(raw, value)]
    if isinstance(raw, dict) and isinstance(value, dict):
        return {k: _keep_ints(raw[k], v) if k in raw else v for k, v in value.items()}
    return value


def call_tool(name: str, args: dict | None, ctx: ToolContext, *,
              direct: bool = False) -> dict | list:
    """Validate ``args``, run the tool, return its observation.

    The observation is a JSON-ready dict with ``"tool"`` set to the dotted name; the one
    exception is ``tool.loop`` with ``return_all=true``, which returns a bare list, as the
    benchmark does. Non-finite numbers stay NaN/inf floats, as in the benchmark's observations.
    Failures raise ``ToolError`` subclasses; nothing is returned as a stub.
    ``direct``: the call is the benchmark's direct Python call (a call nested in tool.loop,
    ``analysis.py:tool_loop``), where no schema converts an int given for a float parameter:
    it reaches the tool (and its echo in the observation) as an int.
    """
    spec = get_tool(name)
    values = validate_args(spec, args or {})
    if direct:
        raw = _prepare_args(spec, args or {})
        values = {k: _keep_ints(raw[k], v) if k in raw else v for k, v in values.items()}
    try:
        with gdal_scope():
            result = spec.func(ctx, **values)
    except ToolError as exc:
        raise exc.with_context(spec.name) from exc
    except (FileNotFoundError, IsADirectoryError) as exc:
        raise ToolInputError(f"file not found: {exc}", tool=spec.name) from exc
    except (ValueError, TypeError, KeyError, IndexError, ZeroDivisionError, OSError) as exc:
        raise ToolError(f"{type(exc).__name__}: {exc}", tool=spec.name) from exc
    except Exception as exc:  # rasterio / GDAL / shapely errors
        raise ToolError(f"{type(exc).__name__}: {exc}", tool=spec.name) from exc
    if isinstance(result, dict):
        if result.get("status") == "stub":
            raise ToolError("tool returned a stub result", tool=spec.name)
        result = dict(result)
        result["tool"] = spec.name
        result = {"tool": result.pop("tool"), **result}
    elif not isinstance(result, list):
        raise ToolError(f"tool returned {type(result).__name__}, not an object", tool=spec.name)
    # NaN / Infinity stay floats, as in the benchmark's observations (its servers json.dumps
    # them as NaN tokens and its harness json.loads them back)
    return jsonable(result, keep_non_finite=True)


# --------------------------------------------------------------------------------------------
# The tool list without the tools: a cache of what listing shows
# --------------------------------------------------------------------------------------------
#: bump when the manifest's layout changes (part of the cache key)
MANIFEST_VERSION = 1


@dataclass(frozen=True)
class ListedTool:
    """What a tool list shows of one registered tool, without its implementation: the fields of
    its ``ToolSpec`` that a listing reads and ``input_schema()`` (its input model's JSON schema,
    or None where pydantic could not build one). Read from ``tool_manifest``'s cache."""

    name: str
    alias: str
    server: str
    module: str
    version: int
    description: str
    params: tuple[ParamSpec, ...]
    result_keys: tuple[str, ...]
    schema: dict | None

    def input_schema(self) -> dict:
        """The cached JSON schema, not copied: one dict shared by every listing this process read
        from the same cache file (``tool_manifest``), so a caller must not change it; raises
        ``ValueError`` where none could be built (the caller publishes a loose schema, as for a
        ``ToolSpec`` whose ``input_schema`` raises)."""
        if self.schema is None:
            raise ValueError(f"{self.name}: no JSON schema from its input model")
        return self.schema


def _source_files() -> list[Path]:
    """The modules of this package, by name: what a listing depends on (:func:`_sources_key`)."""
    return sorted(Path(__file__).resolve().parent.glob("*.py"))


def _sources_stat() -> tuple:
    """``(name, mtime in ns, size)`` of every module of this package: a change to any of them
    (what :func:`_sources_key` hashes) changes this; about 20 ``stat`` calls, ~0.1 ms."""
    return tuple((path.name, st.st_mtime_ns, st.st_size) for path in _source_files() for st in (path.stat(),))


#: listings read from a cache file in this process, by cache folder: ``(sources' stat, file,
#: the file's (inode, mtime in ns, size), listing)`` (``tool_manifest``)
_READ: dict[str, tuple] = {}


def _sources_key() -> str:
    """SHA-256 of what a listing depends on: the source of every module of this package (the tools'
    signatures, docstrings and registrations), the pydantic and Python versions and the manifest
    layout. About 0.4 MB read and hashed: ~1 ms."""
    h = hashlib.sha256(f"{MANIFEST_VERSION}|{pydantic.VERSION}|{sys.version}".encode())
    for path in _source_files():
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def _manifest_entries(specs: list[ToolSpec]) -> list[dict]:
    out = []
    for spec in specs:
        try:
            schema = spec.input_schema()
        except Exception:  # an exotic hint: the listing publishes a loose schema (replay.mcp_server)
            schema = None
        out.append({"name": spec.name, "alias": spec.alias, "server": spec.server, "module": spec.module,
                    "version": spec.version, "description": spec.description,
                    "params": [p.as_dict() for p in spec.params], "result_keys": list(spec.result_keys),
                    "schema": schema})
    return out


def _listed(entries: list[dict]) -> list[ListedTool]:
    return [ListedTool(name=e["name"], alias=e["alias"], server=e["server"], module=e["module"],
                       version=e["version"], description=e["description"],
                       params=tuple(ParamSpec(**p) for p in e["params"]),
                       result_keys=tuple(e["result_keys"]), schema=e["schema"]) for e in entries]


def tool_manifest(cache_dir: str | os.PathLike | None = None) -> list[ListedTool]:
    """Every registered tool as a ``ListedTool``, in registration order (``REGISTRY``'s).

    With ``cache_dir``: read from ``<cache_dir>/tool-manifest-<key>.json``, ``key`` the SHA-256 of
    this package's sources and the pydantic and Python versions (``_sources_key``), so the tools
    are not imported and no input model is built; a missing or unreadable file is written from
    the filled registry (atomically; a cache that cannot be written is skipped). What is listed is
    the same either way: the cache holds the registry's own values, written as JSON and read
    back (``tests/test_mcp.py`` compares a listing from the cache with one from the registry).
    Without ``cache_dir``: from the registry.

    A listing read from a cache file is kept in this process and given again (a new list of the
    same frozen entries, their schemas shared) while neither the package's sources
    (:func:`_sources_stat`) nor that file changed: a long-running process (an experiment's worker
    builds a task's server per question) lists in ~0.2 ms instead of ~4 ms of hashing and JSON.
    """
    if cache_dir is None:
        return _listed(_manifest_entries(list(all_tools().values())))
    sources = _sources_stat()
    kept = _READ.get(str(cache_dir))
    if kept is not None and kept[0] == sources:
        try:
            st = kept[1].stat()
            if (st.st_ino, st.st_mtime_ns, st.st_size) == kept[2]:
                return list(kept[3])
        except OSError:
            pass
    path = Path(cache_dir) / f"tool-manifest-{_sources_key()}.json"
    try:
        st = path.stat()
        listing = _listed(json.loads(path.read_text(encoding="utf-8"))["tools"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    else:
        _READ[str(cache_dir)] = (sources, path, (st.st_ino, st.st_mtime_ns, st.st_size), tuple(listing))
        return listing
    entries = _manifest_entries(list(all_tools().values()))
    try:
        text = json.dumps({"key": path.stem, "tools": entries}, ensure_ascii=False)
    except (TypeError, ValueError):  # not JSON-able (a parameter default of an odd type): no cache
        return _listed(entries)
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tool-manifest-", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
        tmp = None
        for old in path.parent.glob("tool-manifest-*.json"):  # the manifests of earlier sources
            if old != path:
                old.unlink(missing_ok=True)
    except OSError:  # a read-only or full disk: list from the registry, uncached
        pass
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
    return _listed(json.loads(text)["tools"])
