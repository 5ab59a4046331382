"""Benchmark task files, in and out, without losing anything the benchmark's loader accepts.

Format (dora-format.md §(a); ``load_samples``/``load_questions`` in dora/benchmark.py, checked on
../shared/scoring-examples/tasks): a JSON array of samples ``{sample_id, …, tasks: [task, …]}``
written by Python's ``json`` with ``indent=1``, ``ensure_ascii=False`` and no trailing newline.
Python's reader accepts the tokens ``NaN``, ``Infinity`` and ``-Infinity`` and its writer emits
them, so the benchmark's gold answers may hold them (the official evaluator scores NaN against NaN
as a pass).

* :func:`read_task_file` parses bytes or text into plain data (non-finite floats as Python floats)
  and makes exactly the checks the benchmark's loader makes (a list of sample objects, each with
  ``sample_id`` and a ``tasks`` list of task objects with ``question``, ``task_category`` and
  ``task_category_code``); anything else is kept as written: odd ``args``, unknown keys, key order.
* :func:`dumps` / :func:`write_task_file` write the same layout back. For a file in the benchmark's
  layout (``is_benchmark_layout``) ``write_task_file(read_task_file(b).samples) == b``.
* :func:`to_storage` / :func:`from_storage` make a value safe for a JSON column: SQLite's
  ``JSON_VALID`` and PostgreSQL's ``jsonb`` refuse ``NaN``. A non-finite float becomes
  ``{"$float": "NaN"|"Infinity"|"-Infinity"}``; an object whose only key is ``$float`` or ``$json``
  is wrapped as ``{"$json": {…}}`` so that the tagging is a bijection.
* :func:`bounded_loads` is the one reader of JSON from an untrusted file (task files, release
  manifests, label files, prediction and run lines): nesting deeper than :data:`MAX_JSON_DEPTH`
  is a :class:`JSONNestingError` with line and column, found before parsing (never a
  ``RecursionError``). :func:`read_task_file` reads with it.
* :func:`same_value` compares two JSON values the way an unchanged file value must compare
  (numbers by value, ``true`` ≠ ``1``, NaN = NaN, key order ignored).
"""
from __future__ import annotations

import json
import math
import re
from itertools import accumulate
from typing import Any

JSON_INDENT = 1  # the benchmark files' indentation
FLOAT_TAG = "$float"
ESCAPE_TAG = "$json"
_TOKENS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
#: fields every task must have: the loader reads them with ``t[...]`` (load_questions)
REQUIRED_TASK_FIELDS = ("question", "task_category", "task_category_code")


class TaskFileError(ValueError):
    """The benchmark's loader would refuse this file. ``file``, ``sample`` (its id, or ``#<i>``),
    ``task`` (index), ``field`` and ``problem`` say where and what; the message is
    ``<file>: sample <id>: task <i>: <field>: <problem>`` with the parts that apply."""

    def __init__(self, file: str, problem: str, *, sample: str | None = None, task: int | None = None,
                 field: str | None = None):
        self.file, self.problem, self.sample, self.task, self.field = str(file), problem, sample, task, field
        parts = [self.file]
        if sample is not None:
            parts.append(f"sample {sample}")
        if task is not None:
            parts.append(f"task {task}")
        if field:
            parts.append(field)
        super().__init__(": ".join(parts + [problem]))


# ------------------------------------------------------------------ bounded reading


#: the deepest nesting of arrays and objects that JSON read from a file or a request may have
#: (``studio.api_views`` bounds request bodies with the same number). No benchmark file needs more
#: than a dozen levels (a GeoJSON polygon inside an answer is the deepest); Python's reader fails
#: with ``RecursionError`` near 1,000 and a few hundred levels crash later readers and writers.
MAX_JSON_DEPTH = 64

_JSON_STRING = re.compile(r'"[^"\\\n]*(?:\\.[^"\\\n]*)*"')
_BRACKET_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STRING_OR_BRACKET = re.compile(_JSON_STRING.pattern + r"|[\[\]{}]")


class JSONNestingError(ValueError):
    """JSON text nested deeper than ``limit`` levels. ``line`` and ``column`` (1-based) point at
    the bracket that opens level ``limit + 1``; ``problem`` says what, without the position."""

    def __init__(self, line: int, column: int, limit: int):
        self.line, self.column, self.limit = line, column, limit
        self.problem = f"nested deeper than {limit} levels of arrays and objects (the limit for JSON read from a file)"
        super().__init__(f"line {line}, column {column}: {self.problem}")


def nesting_position(text: str, limit: int = MAX_JSON_DEPTH) -> tuple[int, int] | None:
    """``(line, column)`` of the bracket that opens nesting level ``limit + 1`` of JSON ``text``,
    or None when no array or object lies deeper than ``limit`` levels. Brackets inside strings do
    not count. Without recursion and without parsing: strings are cut out and the bracket steps
    summed in C (``itertools.accumulate``), a Python loop runs only over a text that is too deep."""
    bare = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))
    if not bare or max(accumulate(map(_BRACKET_STEP.__getitem__, bare))) <= limit:
        return None
    depth = 0
    for m in _STRING_OR_BRACKET.finditer(text):
        step = _BRACKET_STEP.get(m.group())
        if step is None:
            continue
        depth += step
        if depth > limit:
            pos = m.start()
            return text.count("\n", 0, pos) + 1, pos - (text.rfind("\n", 0, pos) + 1) + 1
    return None  # pragma: no cover - the two scans count the same brackets


#: bytes that :func:`_valid_json_within` keeps: quotes and brackets (``{}`` read as ``[]``)
_QUOTES_BRACKETS = bytes.maketrans(b"{}", b"[]")
_NOT_QUOTE_OR_BRACKET = bytes(b for b in range(256) if b not in b'"[]{}')
_QUOTED = re.compile(rb'"[^"]*"')


def _valid_json_within(data: bytes, limit: int) -> bool:
    """True when ``data``, *if it is valid JSON* (UTF-8), nests no array or object deeper than
    ``limit`` levels; False when it may (then :func:`nesting_position` decides). For valid JSON
    the answer is exact and :func:`nesting_position` would find nothing; for text that is not
    JSON it means nothing, which is why :func:`bounded_loads` trusts it only when ``json.loads``
    then succeeds.

    Everything runs in C over bytes (a tenth of :func:`nesting_position`'s time on a task file:
    0.15 s against 1.9 s for the 143 MB of 100,000 SYNTHETIC tasks, 2026-12-06): escape pairs
    ``\\\\`` then ``\\"`` are removed (in valid JSON a backslash occurs only in a string,
    where escapes pair from the left, as ``bytes.replace`` does), every byte but quotes and
    brackets is deleted (UTF-8 continuation bytes are never ASCII), empty strings ``""`` and then
    the rest of each string are cut (the quotes left pair up as strings' ends), and the innermost
    pairs ``[]`` are removed once per level: a balanced bracket text is empty after exactly as
    many passes as it has levels."""
    if b"\\" in data:
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    bare = data.translate(_QUOTES_BRACKETS, _NOT_QUOTE_OR_BRACKET).replace(b'""', b"")
    if b'"' in bare:
        bare = _QUOTED.sub(b"", bare)
    for _ in range(limit):
        if not bare:
            return True
        bare = bare.replace(b"[]", b"")
    return not bare


def _first_decode(text: str | bytes) -> Any:
    # msgspec is imported on the first call, not with this module: it costs about 16 ms of CPU at
    # start-up (it imports typing_extensions, inspect, datetime, decimal, uuid), which a process
    # that reads no JSON file (a tool server) does not pay
    import msgspec.json

    global _msgspec_decode
    _msgspec_decode = msgspec.json.Decoder().decode
    return _msgspec_decode(text)


_msgspec_decode = _first_decode


def decode_json(text: str | bytes) -> Any:
    """``json.loads(text)``: its value, or its error (for bytes: UTF-8 only, as ``json.loads`` of
    the decoded text). No nesting bound (see :func:`bounded_loads`).

    The value comes from msgspec's JSON decoder (``msgspec.json.Decoder``, in C, 30–40 % less
    CPU time than ``json.loads`` on task files and run lines: 0.83 s against 1.15 s on the task
    files of 100,000 SYNTHETIC tasks, 2026-12-06) whenever it accepts the text, else from
    ``json.loads`` itself. Where msgspec accepts a text its value is ``json.loads``' (the same
    objects: dict key order, a repeated key's last value, ints of any size, floats correctly
    rounded, strings; ``tests/test_kernel.py`` compares them on generated and hand-written
    texts); what it refuses and ``json.loads`` reads (NaN and infinity tokens, numbers beyond a
    double such as ``1e400``, escaped lone surrogates, nesting past its depth) or also refuses
    (the error message) is ``json.loads``'."""
    try:
        return _msgspec_decode(text)
    except Exception:  # noqa: BLE001 - json.loads below gives this text's value or error itself
        pass
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8")
    return json.loads(text)


def bounded_loads(text: str, limit: int = MAX_JSON_DEPTH, *, data: bytes | None = None) -> Any:
    """``json.loads(text)`` for JSON from an untrusted file (a task file, a release manifest, a
    label file, a prediction line): the one reader that bounds nesting. Raises
    :class:`JSONNestingError` (line, column) before parsing when an array or object lies deeper
    than ``limit`` levels (so never ``RecursionError``), ``json.JSONDecodeError`` as ``json.loads``
    does otherwise. NaN tokens are read as ``json.loads`` reads them.

    ``data``: the UTF-8 bytes ``text`` was decoded from, if the caller has them (else ``text`` is
    encoded). A text that is valid JSON within the limit (:func:`_valid_json_within`, then
    ``json.loads`` succeeding) is parsed without :func:`nesting_position`'s scan; any other text
    takes the checks below in their order, so its error is the same."""
    if data is None:
        data = text.encode("utf-8", "surrogatepass")
    if _valid_json_within(data, limit):
        try:
            return decode_json(text)
        except (ValueError, RecursionError):
            pass  # not JSON: the scan below decides which error comes first, as without this path
    where = nesting_position(text, limit)
    if where is not None:
        raise JSONNestingError(*where, limit)
    try:
        return json.loads(text)
    except RecursionError:  # pragma: no cover - the scan refuses far shallower text
        raise JSONNestingError(1, 1, limit) from None


def json_problem(value: Any, field: str) -> str | None:
    """The first value inside ``value`` that no database column of JSON can hold, as
    ``<field>.<path>: <problem>``: NaN or ±Infinity (not JSON numbers: PostgreSQL refuses them),
    a NUL character, nesting deeper than :data:`MAX_JSON_DEPTH`. Iterative. (Moved here from
    ``annotation.services.tasks``: the API's body parser, ``studio.api_views``, asks it too.)"""
    stack = [(value, field, 0)]
    while stack:
        v, where, depth = stack.pop()
        if isinstance(v, float) and not math.isfinite(v):
            return f"{where}: {v} is not a JSON number (NaN and infinities cannot be stored)"
        if isinstance(v, str) and "\x00" in v:
            return f"{where}: holds a NUL character (\\u0000), which cannot be stored"
        if isinstance(v, (dict, list)):
            if depth >= MAX_JSON_DEPTH:
                return f"{where}: nested deeper than {MAX_JSON_DEPTH} levels"
            items = v.items() if isinstance(v, dict) else enumerate(v)
            for k, child in items:
                if isinstance(k, str) and "\x00" in k:
                    return f"{where}: a key holds a NUL character (\\u0000), which cannot be stored"
                stack.append((child, f"{where}.{k}" if isinstance(v, dict) else f"{where}[{k}]", depth + 1))
    return None


# ------------------------------------------------------------------ text


def dumps(value: Any) -> str:
    """JSON text in the benchmark's layout (indent 1, UTF-8 kept, NaN tokens, no trailing newline)."""
    return json.dumps(value, indent=JSON_INDENT, ensure_ascii=False)


def loads(text: str | bytes) -> Any:
    """Parse JSON text as the benchmark does (Python's ``json``: NaN/Infinity accepted, a repeated
    key keeps its last value), nesting bounded (:func:`bounded_loads`). Bytes are decoded as
    UTF-8. Raises ``ValueError`` (:class:`JSONNestingError` for nesting too deep)."""
    if isinstance(text, (bytes, bytearray)):
        data = bytes(text)
        return _loads_bytes(data, _valid_json_within(data, MAX_JSON_DEPTH))
    return bounded_loads(text)


def _loads_bytes(data: bytes, within: bool) -> Any:
    """:func:`loads` of bytes, given ``within = _valid_json_within(data, MAX_JSON_DEPTH)``."""
    if within:
        try:  # valid UTF-8 and JSON within the limit: parsed from the bytes, never decoded to text
            return _msgspec_decode(data)
        except Exception:  # noqa: BLE001 - the reading below gives this text's value or error
            pass
    return bounded_loads(data.decode("utf-8"), data=data)


_TYPED_DECODERS: dict = {}


def loads_fields(data: bytes, schema: Any) -> tuple[Any, bool]:
    """:func:`loads` of ``data`` where only some fields are read: ``(value, of the schema)``.

    ``schema`` is a type msgspec decodes to plain data, typically a list of ``TypedDict`` classes
    (``total=False``) naming the fields a reader uses and their shapes. Where msgspec decodes
    ``data`` as ``schema`` (valid JSON, nesting within :data:`MAX_JSON_DEPTH`, no NaN token, every
    named field of the schema's type), the value is :func:`loads`' value with every other field
    of those objects left out, and True: the others are parsed but never built (less than
    :func:`loads`' time and memory: 0.73 s and 576 MB against 0.85 s and 719 MB for the task
    files of 100,000 SYNTHETIC tasks, 2026-12-07). The fields it keeps hold :func:`loads`' values
    (the same decoder; a repeated key keeps its last value and its first place). Anything else (a
    NaN token, another shape, deep nesting, invalid JSON) is read by :func:`loads` itself: its
    full value and False, or its error. So a caller reads the schema's fields of the value,
    whichever path gave it, knows whether the schema's shape holds, and gets :func:`loads`'
    errors unchanged.

    ``data``: the file's bytes (UTF-8). Raises what :func:`loads` raises."""
    within = _valid_json_within(data, MAX_JSON_DEPTH)
    if within:
        decode = _TYPED_DECODERS.get(schema)
        if decode is None:
            import msgspec.json

            decode = _TYPED_DECODERS[schema] = msgspec.json.Decoder(schema).decode
        try:
            return decode(data), True
        except Exception:  # noqa: BLE001 - loads below gives this text's value or error itself
            pass
    return _loads_bytes(data, within), False  # loads, its nesting scan not made twice


class TaskFile:
    """A parsed task file: ``samples`` (plain data), ``layout`` (``"benchmark"`` when writing the
    samples back gives the same text, else ``"other"``: same values, different whitespace or
    number spelling — an export writes the benchmark's layout)."""

    # a plain class, not a dataclass: ``dataclasses`` imports ``inspect``, about 9 ms of the
    # scoring command's start-up (issue 16)
    __slots__ = ("samples", "layout")

    def __init__(self, samples: list, layout: str):
        self.samples, self.layout = samples, layout

    def __eq__(self, other):
        if type(other) is not TaskFile:
            return NotImplemented
        return (self.samples, self.layout) == (other.samples, other.layout)

    __hash__ = None  # mutable, compared by value (as a dataclass)

    def __reduce__(self):  # pickle and copy at every protocol
        return TaskFile, (self.samples, self.layout)

    def __repr__(self):
        return f"TaskFile(samples={self.samples!r}, layout={self.layout!r})"


def read_task_file(data: str | bytes, where: str = "task file") -> TaskFile:
    """Read a task file (bytes or text) and check what the benchmark's loader checks.

    Raises :class:`TaskFileError` naming ``where``, the sample, the task and the field: not UTF-8,
    not JSON (with line and column), not a list, a sample that is not an object or lacks
    ``sample_id`` or a ``tasks`` list, a task that is not an object or lacks one of
    :data:`REQUIRED_TASK_FIELDS`. Every value the loader accepts passes unchanged.
    """
    try:
        text = bytes(data).decode("utf-8") if isinstance(data, (bytes, bytearray)) else str(data)
    except UnicodeDecodeError as exc:
        raise TaskFileError(where, f"not UTF-8 text ({exc})") from exc
    try:
        samples = bounded_loads(text)
    except JSONNestingError as exc:
        raise TaskFileError(where, exc.problem, field=f"line {exc.line}, column {exc.column}") from None
    except json.JSONDecodeError as exc:
        raise TaskFileError(where, f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from exc
    check_samples(samples, where)
    return TaskFile(samples, "benchmark" if dumps(samples) == text else "other")


def sample_label(sample: Any, index: int) -> str:
    """How errors name a sample: its ``sample_id``, else ``#<index>``."""
    if isinstance(sample, dict) and isinstance(sample.get("sample_id"), (str, int)) and not isinstance(sample.get("sample_id"), bool):
        return str(sample["sample_id"])
    return f"#{index}"


def check_samples(samples: Any, where: str) -> None:
    """The loader's own checks (see :func:`read_task_file`); raises :class:`TaskFileError`."""
    if not isinstance(samples, list):
        raise TaskFileError(where, f"the file must hold a JSON list of samples, not {type(samples).__name__}")
    for i, sample in enumerate(samples):
        label = sample_label(sample, i)
        if not isinstance(sample, dict):
            raise TaskFileError(where, f"a sample must be an object, not {type(sample).__name__}", sample=label)
        if "sample_id" not in sample:
            raise TaskFileError(where, "missing (the loader builds question ids <sample_id>_task<i> from it)",
                                sample=label, field="sample_id")
        sid = sample["sample_id"]
        if isinstance(sid, bool) or not isinstance(sid, (str, int)):
            raise TaskFileError(where, f"must be a string, not {type(sid).__name__}", sample=label, field="sample_id")
        tasks = sample.get("tasks")
        if not isinstance(tasks, list):
            raise TaskFileError(where, "missing or not a list" if tasks is None else f"must be a list, not {type(tasks).__name__}",
                                sample=label, field="tasks")
        for j, task in enumerate(tasks):
            if not isinstance(task, dict):
                raise TaskFileError(where, f"a task must be an object, not {type(task).__name__}", sample=label, task=j)
            for name in REQUIRED_TASK_FIELDS:
                if name not in task:
                    raise TaskFileError(where, "missing (the benchmark's loader requires it)", sample=label, task=j,
                                        field=name)


def write_task_file(samples: list) -> str:
    """The text of a task file holding ``samples`` (plain data, not storage-tagged)."""
    return dumps(samples)


# ------------------------------------------------------------------ storage tagging


def _token(x: float) -> str:
    return "NaN" if math.isnan(x) else ("Infinity" if x > 0 else "-Infinity")


#: leaf types that ``to_storage`` returns as they are (exact types; a finite ``float`` too)
_PLAIN_LEAVES = frozenset((str, int, bool, type(None)))


def to_storage(value: Any) -> Any:
    """``value`` with every non-finite float tagged (module docstring); finite values unchanged.
    Dicts, lists and tuples are copied (as a dict and lists), other values returned as they are."""
    t = type(value)
    # exact dicts and lists (what JSON gives) first, their plain leaves without a call each
    if t is dict:
        out = {k: v if type(v) in _PLAIN_LEAVES or (type(v) is float and math.isfinite(v)) else to_storage(v)
               for k, v in value.items()}
        if len(value) == 1 and next(iter(value)) in (FLOAT_TAG, ESCAPE_TAG):
            return {ESCAPE_TAG: out}
        return out
    if t is list or t is tuple:
        return [v if type(v) in _PLAIN_LEAVES or (type(v) is float and math.isfinite(v)) else to_storage(v)
                for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return {FLOAT_TAG: _token(value)}
    if isinstance(value, dict):
        out = {k: to_storage(v) for k, v in value.items()}
        if len(value) == 1 and next(iter(value)) in (FLOAT_TAG, ESCAPE_TAG):
            return {ESCAPE_TAG: out}
        return out
    if isinstance(value, (list, tuple)):
        return [to_storage(v) for v in value]
    return value


def from_storage(value: Any) -> Any:
    """The inverse of :func:`to_storage`: ``from_storage(to_storage(v))`` equals ``v``."""
    t = type(value)
    # exact lists and dicts that cannot be a tag (not one key) first, their leaves without a call each
    if t is list:
        return [v if type(v) in _PLAIN_LEAVES or type(v) is float else from_storage(v) for v in value]
    if t is dict and len(value) != 1:
        return {k: v if type(v) in _PLAIN_LEAVES or type(v) is float else from_storage(v) for k, v in value.items()}
    if isinstance(value, dict):
        if len(value) == 1:
            (k, v), = value.items()
            if k == FLOAT_TAG and isinstance(v, str) and v in _TOKENS:
                return _TOKENS[v]
            if k == ESCAPE_TAG and isinstance(v, dict):
                return {kk: from_storage(vv) for kk, vv in v.items()}
        return {k: from_storage(v) for k, v in value.items()}
    if isinstance(value, list):
        return [from_storage(v) for v in value]
    return value


def has_non_finite(value: Any) -> bool:
    """True when a non-finite float occurs anywhere in ``value`` (plain data)."""
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(has_non_finite(v) for v in value.values())
    if isinstance(value, list):
        return any(has_non_finite(v) for v in value)
    return False


def source_text(record: Any) -> str:
    """The JSON text a kept source is stored as (a text column: key order and NaN tokens survive
    where PostgreSQL's jsonb would sort keys and refuse NaN); ``""`` for None."""
    return "" if record is None else json.dumps(record, ensure_ascii=False, separators=(",", ":"))


def source_from_text(text: Any) -> Any:
    """The inverse of :func:`source_text` (None for ``""``/None); a dict is returned as it is."""
    if isinstance(text, (dict, list)):
        return text
    if not text:
        return None
    return json.loads(text)


def same_value(a: Any, b: Any) -> bool:
    """Equal as JSON values: numbers by value (``1 == 1.0``; an integer and a float compare as
    floats, since PostgreSQL's jsonb returns ``2.5e+210`` as an integer literal), booleans only to
    booleans, NaN equal to NaN, objects regardless of key order, lists element by element."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
            return True
        if isinstance(a, float) != isinstance(b, float):  # PostgreSQL's jsonb gives 1e210 back as an integer
            try:
                return float(a) == float(b)
            except OverflowError:
                return False
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b
