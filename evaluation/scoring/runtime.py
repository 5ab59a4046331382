"""Run-time helpers of the scoring core: the garbage collector and the eval.json writer.

Scoring a run allocates millions of small, long-lived objects (the parsed task files and run
records) and almost no reference cycles. CPython's cyclic collector walks every tracked object at
each full collection, and the number of full collections grows with the heap, so loading and
scoring with the collector on costs time that grows faster than the run: at 100,000 records,
loading the files took about 4× longer with it on (measured on this machine kind, 2026-12-01;
``bench/scoring.py`` prints the figure). ``paused_gc()`` switches the collector off for the span
of one evaluation and runs one collection at its end.

``dumps_indented(obj)`` writes JSON exactly as ``json.dumps(obj, ensure_ascii=False, indent=2)``
does (the official evaluator's eval.json), about three times faster: the standard library's
indented encoder is its pure-Python generator chain.
"""
from __future__ import annotations

import contextlib
import gc
import json
import json.encoder
from typing import Any, Iterator

__all__ = ["paused_gc", "dumps_indented"]


@contextlib.contextmanager
def paused_gc(*, freeze: bool = False) -> Iterator[None]:
    """The cyclic garbage collector off inside the block (if it was on), one collection after it.

    ``freeze``: instead of that collection, move every object alive at the end to the collector's
    permanent generation (``gc.freeze``), so that neither a later collection nor the interpreter's
    own at exit walks them again: for a process that exits after the block (the command line). A
    full collection after scoring 100,000 records walks every loaded record and task (about a
    tenth of the run's time, profiled on 30,000 records: 6.5 of 54.6 s).
    Re-entrant: an inner block leaves the collector as the outer one set it.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            if freeze:
                gc.freeze()
            gc.enable()
            if not freeze:
                gc.collect()


_encode_str = json.encoder.encode_basestring  # the C version where available (ensure_ascii=False)
_float_repr = float.__repr__
_int_repr = int.__repr__
_INF = float("inf")


def _float(value: float) -> str:
    # json's floatstr with allow_nan=True: NaN, Infinity, -Infinity, else repr
    if value != value:
        return "NaN"
    if value == _INF:
        return "Infinity"
    if value == -_INF:
        return "-Infinity"
    return _float_repr(value)


def _key(key: Any) -> str:
    # json's key coercion: str as is; float, bool, None and int to their JSON text
    if isinstance(key, str):
        return key
    if isinstance(key, float):
        return _float(key)
    if key is True:
        return "true"
    if key is False:
        return "false"
    if key is None:
        return "null"
    if isinstance(key, int):
        return _int_repr(key)
    raise TypeError(f"keys must be str, int, float, bool or None, not {key.__class__.__name__}")


def _scalar(value: Any) -> str | None:
    """The JSON text of a scalar, or None for a container (or an unsupported type)."""
    t = type(value)
    if t is str:
        return _encode_str(value)
    if t is float:
        return _float(value) if value != value or value in (_INF, -_INF) else _float_repr(value)
    if t is int:
        return _int_repr(value)
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return _encode_str(value)
    if isinstance(value, int):
        return _int_repr(value)
    if isinstance(value, float):
        return _float(value)
    return None


_INDENTS = ["\n" + "  " * i for i in range(64)]


def _indent(level: int) -> str:
    return _INDENTS[level] if level < len(_INDENTS) else "\n" + "  " * level


def _write(value: Any, out: list, level: int) -> None:
    text = _scalar(value)
    if text is not None:
        out.append(text)
        return
    if isinstance(value, dict):
        if not value:
            out.append("{}")
            return
        inner = _indent(level + 1)
        sep = "{" + inner
        for k, v in value.items():
            key = _encode_str(k) if type(k) is str else _encode_str(_key(k))
            text = _scalar(v)
            if text is not None:
                out.append(sep + key + ": " + text)
            else:
                out.append(sep + key + ": ")
                _write(v, out, level + 1)
            sep = "," + inner
        out.append(_indent(level) + "}")
    elif isinstance(value, (list, tuple)):
        if not value:
            out.append("[]")
            return
        inner = _indent(level + 1)
        sep = "[" + inner
        for v in value:
            text = _scalar(v)
            if text is not None:
                out.append(sep + text)
            else:
                out.append(sep)
                _write(v, out, level + 1)
            sep = "," + inner
        out.append(_indent(level) + "]")
    else:
        raise TypeError(f"Object of type {value.__class__.__name__} is not JSON serializable")


def dumps_indented(obj: Any) -> str:
    """``json.dumps(obj, ensure_ascii=False, indent=2)``, character for character.

    Supports what eval.json holds (dict, list, tuple, str, int, float including NaN and ±Infinity,
    bool, None); int and float subclasses are written like ``json`` writes them. Raises
    ``TypeError`` for any other type. No check for circular references (eval.json has none).
    """
    out: list[str] = []
    _write(obj, out, 0)
    return "".join(out)
