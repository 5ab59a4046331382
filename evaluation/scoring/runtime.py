"""Run-time helpers of the scoring core: the garbage collector and the eval.json writer.

Scoring a run allocates millions of small, long-lived objects (the parsed task files and run
records) and almost no reference cycles. CPython's cyclic collector walks every tracked object at
each full collection, and the number of full collections grows with the heap, so loading and
scoring with the collector on costs time that grows faster than the run: at 100,000 records,
loading the files took about 4× longer with it on (measured on this machine kind, 2026-12-01;
``bench/scoring.py`` prints the figure). ``paused_gc()`` switches the collector off for the span
of one evaluation and runs one collection at its end.

``dumps_indented(obj)`` writes JSON exactly as ``json.dumps(obj, ensure_ascii=False, indent=2)``
does (the official evaluator's eval.json), in about 40 % of its CPU time (0.45 s against 1.13 s
for the eval.json of 100,000 SYNTHETIC records, measured 2026-12-01): the standard library's
indented encoder is its pure-Python generator chain. Flat objects (all values scalars) and tables
(lists of objects with the same keys, like ``full.<dim>.tasks``) are handed to the standard
library's C encoder, which has no indentation but writes every scalar the same way; the line
breaks and indentation around them are put in here (``_flat_encoder``).
"""
from __future__ import annotations

import contextlib
import gc
import json
import json.encoder
from collections.abc import Iterator
from itertools import chain
from operator import itemgetter
from typing import Any

__all__ = ["paused_gc", "dumps_indented", "leave_to_exit"]


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


def leave_to_exit(*objects: Any) -> None:
    """Keep ``objects`` alive until the process ends and let the operating system reclaim them.

    For a process that exits right after scoring (the command line), inside
    ``paused_gc(freeze=True)``: freeing the parsed task files, run records and results one object
    at a time when they go out of scope costs several percent of a large run (millions of
    objects) and changes nothing the process writes. They are held by a reference cycle that the
    block's ``gc.freeze()`` then moves to the permanent generation, which neither a later
    collection nor the interpreter's own at exit examines; outside such a block the cycle is freed
    by the next full collection like any garbage.
    """
    holder: list = [objects]
    holder.append(holder)


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


#: exact types whose JSON text the C encoder writes exactly like ``json.dumps(indent=2)`` does
_SCALAR_TYPES = frozenset((str, int, float, bool, type(None)))
#: lists of at least this many objects are tried as a table (``_write_records``)
_RECORDS_MIN = 8
_ENCODERS: dict = {}


def _refuse(value: Any) -> Any:
    raise TypeError(f"Object of type {value.__class__.__name__} is not JSON serializable")


def _flat_encoder(item_separator: str):
    """``encode(value) -> str``: JSON text of ``value`` with no indentation, this item separator and
    ``": "`` after keys (``ensure_ascii=False``, NaN allowed), written by the standard library's C
    encoder where there is one (built once per separator), else by ``json.JSONEncoder``.

    Used only on a list or dict whose items are all of ``_SCALAR_TYPES``: the encoder formats
    every scalar and key as the indenting encoder does (``float.__repr__``, ``int.__repr__``, the
    same string escaping and key coercion), and the text of a scalar never holds a raw newline
    (strings escape it). So a flat object encoded with the separator ``",\n" + indentation`` is
    its indented text without the first and last line breaks, and a list of scalars encoded with
    ``"\n"`` splits into the texts of its items."""
    encode = _ENCODERS.get(item_separator)
    if encode is None:
        c_make = getattr(json.encoder, "c_make_encoder", None)
        slow = json.JSONEncoder(ensure_ascii=False, check_circular=False, separators=(item_separator, ": ")).encode
        encode = slow
        if c_make is not None:
            try:
                c_encode = c_make(None, _refuse, _encode_str, None, ": ", item_separator, False, False, True)
                probe = {"a": [1, 2.5, None, True], "é": "x\n"}
                if "".join(c_encode(probe, 0)) == slow(probe):
                    def encode(value, _c=c_encode):
                        return "".join(_c(value, 0))
            except TypeError:  # another signature: keep json.JSONEncoder's
                pass
        _ENCODERS[item_separator] = encode
    return encode


def _flat_dict(value: dict, level: int) -> str:
    """The indented text of a non-empty dict whose values are all of ``_SCALAR_TYPES``."""
    return "{" + _indent(level + 1) + _flat_encoder("," + _indent(level + 1))(value)[1:-1] + _indent(level) + "}"


def _flat_dict_column(column: list, level: int) -> list:
    """Indented texts of flat dicts (values all of ``_SCALAR_TYPES``, maybe empty) at ``level``,
    from one call of the encoder on the whole list: with the separator S = ``",\n" + indent``
    between list items and dict items alike, ``"}" + S + "{"`` occurs only between two dicts
    (inside a dict, S is always followed by a key's opening quote)."""
    inner = _indent(level + 1)
    bodies = _flat_encoder("," + inner)(column)[2:-2].split("}," + inner + "{")
    close = _indent(level) + "}"
    return ["{" + inner + body + close if body else "{}" for body in bodies]


def _write_records(value: list, out: list, level: int) -> bool:
    """A list of objects with the same keys in the same order, each value a scalar or a flat
    object (eval.json's ``full.<dim>.tasks``), written column by column: each column in one call
    of the C encoder, each row by one ``%`` template. False (nothing written) when the list is
    not such a table."""
    first = value[0]
    if type(first) is not dict or not first:
        return False
    keys = tuple(first)
    # every row a dict with these keys in this order, and its values by column: tested and
    # transposed by C iterators (map, zip), not a Python loop per row
    if set(map(type, value)) != {dict} or list(map(tuple, value)).count(keys) != len(value):
        return False
    columns = []
    by_column = zip(*map(itemgetter(*keys), value)) if len(keys) > 1 else [list(map(itemgetter(keys[0]), value))]
    for values in by_column:
        column = list(values)
        kinds = set(map(type, column))
        if kinds <= _SCALAR_TYPES:
            columns.append(_flat_encoder("\n")(column)[1:-1].split("\n"))
        elif kinds == {dict} and _SCALAR_TYPES.issuperset(map(type, chain.from_iterable(map(dict.values, column)))):
            columns.append(_flat_dict_column(column, level + 2))
        else:
            return False
    inner = _indent(level + 2)
    template = "{" + ",".join(inner + (_encode_str(k) if type(k) is str else _encode_str(_key(k))).replace("%", "%%")
                              + ": %s" for k in keys) + _indent(level + 1) + "}"
    between = "," + _indent(level + 1)
    out.append("[" + _indent(level + 1) + between.join([template % row for row in zip(*columns)]) + _indent(level) + "]")
    return True


def _write(value: Any, out: list, level: int) -> None:
    text = _scalar(value)
    if text is not None:
        out.append(text)
        return
    if type(value) is dict and value and _SCALAR_TYPES.issuperset(map(type, value.values())):
        out.append(_flat_dict(value, level))
        return
    if type(value) is list and len(value) >= _RECORDS_MIN and _write_records(value, out, level):
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
