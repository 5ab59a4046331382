"""The pure kernel (kernel/): no Django, one vocabulary, lossless task files, the benchmark's rules.

Expected values come from the benchmark's documented behaviour (../shared/spec/dora-format.md,
dora/benchmark.py): Python's json reads and writes NaN/Infinity; the loader requires sample_id,
tasks, question, task_category and task_category_code; the files are written with indent 1,
ensure_ascii=False and no trailing newline.
"""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any, TypedDict

import pytest
from conftest import SCORING_EXAMPLES, SHARED, needs_shared
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernel import catalogue, content, inputs, steps, taskfile, taxonomy, vocabulary

REPO = Path(__file__).resolve().parents[1]


def test_kernel_imports_no_django():
    """In a fresh interpreter, importing every kernel module loads no django module."""
    code = ("import sys; import kernel.vocabulary, kernel.taskfile, kernel.steps, kernel.inputs, "
            "kernel.catalogue, kernel.taxonomy, kernel.content, kernel.references, kernel.engine, kernel.tools; "
            "kernel.tools.all_tools(); "
            "bad = sorted(m for m in sys.modules if m == 'django' or m.startswith('django.')); print(bad)")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_vocabulary_matches_the_benchmark_file_names():
    # TASKS in dora/benchmark.py
    assert vocabulary.TASK_FILES == {
        "t1": "t1_perception_and_assessment.json", "t2": "t2_spatial_relation_analysis.json",
        "t3": "t3_operational_planning.json", "t4": "t4_multi_temporal_reasoning.json",
        "t5": "t5_multi_modal_report_synthesis.json"}
    # the category of each file is the file stem without its t<N>_ prefix
    assert all(d.stem == f"{d.key}_{d.category}" for d in vocabulary.DIMENSIONS)
    assert sorted(p.name for p in needs_shared(SCORING_EXAMPLES / "tasks").glob("t*.json")) == sorted(vocabulary.TASK_FILES.values())


@pytest.mark.parametrize("code, dim", [("T1", "t1"), ("t3", "t3"), ("T1-1", "t1"), ("T1.2", "t1"), ("T5_a", "t5"),
                                       (" T2 ", "t2"), ("T12", None), ("T6", None), ("", None), (["T1"], None),
                                       (True, None), ("X1", None)])
def test_dimension_of_code(code, dim):
    assert vocabulary.dimension_of_code(code) == dim


def test_taxonomy_correct_iff_no_flag():
    assert taxonomy.E_CODES == ("E1", "E2", "E3", "E4", "E5", "E6")
    assert taxonomy.plan_is_correct({}) and taxonomy.plan_is_correct({c: False for c in taxonomy.E_CODES})
    assert not taxonomy.plan_is_correct({"E5": True})
    assert taxonomy.plan_is_correct({"E7": True})  # not a flag of the taxonomy


def _name_parts(name: str) -> frozenset:
    """A name compared without case, without a trailing "error" and with E2's two readings as a set."""
    return frozenset(p.strip().casefold().removesuffix(" error") for p in name.split("/"))


def test_taxonomy_names_are_the_planning_benchmarks():
    """E1–E6 names as the planning benchmark's paper gives them (Agent Planning Benchmark, section 3,
    /work/shared/seeds/001_*.txt): "E1: Goal Understanding Error ... E2: Premature Conclusion / Task
    Incompleteness ... E3: Constraint Violation ... E4: Logic Error ... E5: Tool Use Error ... E6:
    Hallucination"; its appendix names E2 by regime: "Error Taxonomy (Holistic) ... E2: Task
    Incompleteness", "Error Taxonomy (Step-wise) ... E2: Premature Conclusion". The studio's exact
    wording is ../shared/spec/judge.md's table ("goal understanding", "task incompleteness (holistic)
    / premature conclusion (step-wise)", "constraint violation", "logic error", "tool use error",
    "hallucination"), in sentence case: the paper's names up to case, E1's trailing "Error" and
    the order of E2's two readings."""
    paper = {"E1": "Goal Understanding Error", "E2": "Premature Conclusion / Task Incompleteness",
             "E3": "Constraint Violation", "E4": "Logic Error", "E5": "Tool Use Error", "E6": "Hallucination"}
    spec = {"E1": "Goal understanding", "E2": "Task incompleteness / premature conclusion",
            "E3": "Constraint violation", "E4": "Logic error", "E5": "Tool use error", "E6": "Hallucination"}
    assert taxonomy.E_NAMES == spec
    assert {c: _name_parts(n) for c, n in taxonomy.E_NAMES.items()} == \
        {c: _name_parts(n) for c, n in paper.items()}
    assert taxonomy.E2_SUBTYPE_NAMES == {"E2-H": "task incompleteness", "E2-S": "premature conclusion"}


def test_steps_follow_the_benchmark_spellings():
    assert steps.step_call({"call": "seg_flood(pre, post)", "name": "x"}) == "seg_flood"
    assert steps.step_call({"name": "ras.area"}) == "ras.area"
    assert steps.step_call({"tool": "ras.area"}) == ""  # a top-level 'tool' key names no tool
    assert steps.step_args({"inputs": ["post.tif"]}) == ["post.tif"]  # kept as written
    assert steps.step_args({"args": "x", "inputs": {}}) == "x"
    loop = {"call": "tool.loop", "args": {"calls": [{"tool": "ras.clip"}, {"name": "seg.flood(a)"}]}}
    assert [steps.nested_call_name(c) for c in steps.nested_calls(loop)] == ["ras.clip", "seg.flood"]


def test_input_rules():
    assert inputs.data_paths({"a": {"image_path": "x.TIF"}, "b": ["y.geojson", "note"], "c": "x.TIF"}) == ["x.TIF", "y.geojson"]
    assert [inputs.phase_of_key(k) for k in ("pre_image", "post", "t2", "phase3", "p_4", "T1", "poi_data")] == \
        ["pre", "post", "t2", "t3", "t4", "t1", ""]
    manifest = {"pre_image": {"image_path": "a.tif", "modality": "RGB"}, "post_image": {"image_path": "b.tif", "modality": "SAR"},
                "poi_data": {"path": "poi.geojson"}, "temporal_images": {"t1": {"image_path": "c.tif"}}}
    assert inputs.modality_config(manifest) == "optical+sar+vector"  # RGB is optical; c.tif has no modality: optical
    assert inputs.modality_config({}) == ""
    assert inputs.entry_of(manifest, "c.tif") == ("t1", {"image_path": "c.tif"})


def test_catalogue_returns_are_parsed():
    needs_shared(catalogue.catalogue_path() or SHARED / "spec" / catalogue.CATALOGUE_NAME)
    types = catalogue.result_types()
    assert types, "no dora-tools.json found (../shared/spec/dora-tools.json)"
    assert len(types) == 108  # dora-format.md §0
    assert types["ras.vectorize"]["count"] == "int" and types["ras.area"]["area_m2"] == "float"


# ------------------------------------------------------------------ task files


def test_scoring_examples_round_trip_byte_for_byte():
    for p in sorted(needs_shared(SCORING_EXAMPLES / "tasks").glob("t*.json")):
        data = p.read_bytes()
        parsed = taskfile.read_task_file(data, p.name)
        assert parsed.layout == "benchmark"
        assert taskfile.write_task_file(parsed.samples).encode("utf-8") == data


def test_nan_tokens_survive_and_are_tagged_for_storage():
    text = '[\n {\n  "sample_id": "s",\n  "tasks": [\n   {\n    "question": "q",\n    "task_category": "c",\n' \
           '    "task_category_code": "T1",\n    "final_answer": {\n     "a": NaN,\n     "b": -Infinity\n    }\n   }\n  ]\n }\n]'
    parsed = taskfile.read_task_file(text.encode(), "t1.json")
    ans = parsed.samples[0]["tasks"][0]["final_answer"]
    assert math.isnan(ans["a"]) and ans["b"] == -math.inf
    assert taskfile.write_task_file(parsed.samples) == text
    stored = taskfile.to_storage(ans)
    assert stored == {"a": {"$float": "NaN"}, "b": {"$float": "-Infinity"}}
    json.dumps(stored, allow_nan=False)  # what a JSON column accepts
    back = taskfile.from_storage(stored)
    assert math.isnan(back["a"]) and back["b"] == -math.inf


@pytest.mark.parametrize("text, message", [
    ("{}", "t1.json: the file must hold a JSON list of samples, not dict"),
    ("[1]", "t1.json: sample #0: a sample must be an object, not int"),
    ('[{"tasks": []}]', "t1.json: sample #0: sample_id: missing"),
    ('[{"sample_id": "s"}]', "t1.json: sample s: tasks: missing or not a list"),
    ('[{"sample_id": "s", "tasks": [{"question": "q", "task_category": "c"}]}]', "t1.json: sample s: task 0: task_category_code: missing"),
    ('[{"sample_id": "s", "tasks": [3]}]', "t1.json: sample s: task 0: a task must be an object, not int"),
    ("[\n {\"sample_id\": ", "t1.json: not valid JSON: Expecting value (line 2, column 16)"),
    (b"\xff[]", "t1.json: not UTF-8 text"),
])
def test_what_the_loader_refuses_is_named(text, message):
    with pytest.raises(taskfile.TaskFileError) as exc:
        taskfile.read_task_file(text, "t1.json")
    assert str(exc.value).startswith(message)


# JSON values as the benchmark's files may hold them: NaN and infinities, unicode, keys that look
# like the storage tags
keys = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=6) | st.sampled_from(["$float", "$json", "tool"])
scalars = (st.none() | st.booleans() | st.integers(-10**18, 10**18) | st.floats(allow_nan=True, allow_infinity=True)
           | st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=8))
values = st.recursive(scalars, lambda c: st.lists(c, max_size=3) | st.dictionaries(keys, c, max_size=3), max_leaves=12)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values)
def test_storage_tagging_is_a_bijection_onto_finite_json(value):
    stored = taskfile.to_storage(value)
    json.dumps(stored, allow_nan=False)  # never a raw NaN for the database
    back = taskfile.from_storage(json.loads(json.dumps(stored)))
    assert taskfile.same_value(back, value)
    assert json.dumps(back) == json.dumps(value)  # same key order, same number spelling


@settings(max_examples=80, deadline=None)
@given(st.lists(st.fixed_dictionaries({"sample_id": st.text(max_size=5), "tasks": st.lists(
    st.fixed_dictionaries({"question": values, "task_category": values, "task_category_code": values},
                          optional={"trajectory": values, "final_answer": values, "x": values}), max_size=2)},
    optional={"input_data": values, "extra": values}), max_size=3))
def test_a_file_in_the_benchmark_layout_reads_and_writes_back_identically(samples):
    text = json.dumps(samples, indent=1, ensure_ascii=False)  # how the benchmark writes its files
    parsed = taskfile.read_task_file(text.encode("utf-8"), "t.json")
    assert parsed.layout == "benchmark" and taskfile.write_task_file(parsed.samples) == text


# ------------------------------------------------------------------ content and proposals


def test_answer_binding_and_blank_proposal():
    traj = [{"call": "seg.building_damage", "args": {}, "obs": {"mask_path": "m.png"}},
            {"call": "ras.vectorize", "args": {}, "obs": None}]
    task = {"question": "q", "task_category": "c", "task_category_code": "T1", "trajectory": traj,
            "final_answer": {"building_polygons": None, "mask": "m.png"},
            "eval_spec": {"building_polygons": "scalar_count", "mask": "exact_match"}}
    c = content.task_content({"sample_id": "s"}, task, traj)
    assert c["answer_spec"] == [
        {"name": "building_polygons", "eval_type": "scalar_count", "source": None},
        {"name": "mask", "eval_type": "exact_match", "source": "<mask_path> from trajectory[0].obs"}]
    # the example: an int result of ras.vectorize fits scalar_count; count comes first in its returns
    types = {"ras.vectorize": {"vector_path": "str", "count": "int", "total_pixels": "int"},
             "seg.building_damage": {"mask_path": "str", "classes": "dict"}}
    p = content.propose_source("building_polygons", "scalar_count", traj, types)
    assert p["source"] == "<count> from trajectory[1].obs" and p["tool"] == "ras.vectorize"
    # a name that shares words with a key wins over position
    p = content.propose_source("total_pixels", "scalar_count", traj, types)
    assert p["key"] == "total_pixels"
    assert content.propose_source("x", "set_f1", traj, types) is None  # no list result anywhere


def test_file_task_keeps_unchanged_fields_and_replaces_changed_ones():
    sample = {"sample_id": "s", "zz": 1, "input_data": {}, "tasks": []}
    task = {"question": "q", "extra": [1], "task_category": "c", "task_category_code": "T1-1",
            "trajectory": [{"call": "a", "args": ["x"], "obs": 1}], "final_answer": {"n": math.nan},
            "eval_spec": {"n": "scalar_count"}}
    c = content.task_content(sample, task, task["trajectory"])
    src = content.source_record(sample, task, c)
    head, out = content.file_task(src, c, task["trajectory"], {"n": math.nan}, {})
    assert json.dumps(out) == json.dumps(task) and json.dumps(head) == json.dumps(sample)
    changed = dict(c, question="new q")
    head, out = content.file_task(src, changed, task["trajectory"], {"n": 3}, {"question": "new q"})
    assert list(out) == list(task) and out["question"] == "new q" and out["final_answer"] == {"n": 3}


def test_same_value_reads_numbers_as_jsonb_returns_them():
    # jsonb keeps a numeric's decimal digits: 2.3454945867710686e+210 comes back as a 211-digit integer
    big = 2.3454945867710686e+210
    assert taskfile.same_value(big, int("23454945867710686" + "0" * 194))
    assert taskfile.same_value(1, 1.0) and not taskfile.same_value(True, 1) and not taskfile.same_value(1, 2.0)
    assert taskfile.same_value(math.nan, math.nan) and not taskfile.same_value(math.nan, 0.0)
    assert not taskfile.same_value(10**400, 1.0)  # too large for a float: not equal, no OverflowError


def test_bounded_loads_refuses_nesting_over_the_limit_with_line_and_column():
    """kernel.taskfile.bounded_loads, the one reader of JSON from files: 64 levels read, the 65th
    bracket is refused where it stands (worked by hand: line 2, after 3 spaces and 64 brackets);
    brackets inside strings (with escaped quotes) do not count; NaN tokens read as json.loads does;
    200,000 levels are refused before parsing, never a RecursionError."""
    import math

    from kernel.taskfile import MAX_JSON_DEPTH, JSONNestingError, bounded_loads, loads

    assert MAX_JSON_DEPTH == 64
    assert bounded_loads("[" * 64 + "]" * 64) == json.loads("[" * 64 + "]" * 64)
    with pytest.raises(JSONNestingError) as exc:
        bounded_loads('{"a":\n   ' + "[" * 65 + "]" * 65 + "}")
    assert (exc.value.line, exc.value.column) == (2, 3 + 64)  # the object is level 1: its 64th "[" opens 65
    assert "nested deeper than 64 levels" in str(exc.value)
    assert bounded_loads('["[[[[\\"[[[[", "]]"]') == ['[[[["[[[[', "]]"]
    assert math.isnan(bounded_loads('[NaN]')[0])
    with pytest.raises(JSONNestingError):
        loads(("[" * 200_000 + "]" * 200_000).encode())


def _bounded_loads_plain(text):
    """bounded_loads as it was before its shortcut: the nesting scan first, then json.loads."""
    from kernel.taskfile import MAX_JSON_DEPTH, JSONNestingError, nesting_position

    where = nesting_position(text)
    if where is not None:
        raise JSONNestingError(*where, MAX_JSON_DEPTH)
    try:
        return json.loads(text)
    except RecursionError:
        raise JSONNestingError(1, 1, MAX_JSON_DEPTH) from None


def _outcome(read, text):
    try:
        return "value", json.dumps(read(text))
    except ValueError as exc:
        return type(exc).__name__, str(exc)


_NESTING_TEXTS = [
    "", " ", "[]", "{}", "[NaN]", '"x"', "1", "[" * 64 + "]" * 64, "[" * 65 + "]" * 65, "[" * 63 + "]" * 63,
    "[{" * 32 + "}]" * 32, "[{" * 32 + "[]" + "}]" * 32, '{"a":' * 64 + "1" + "}" * 64, '{"a":' * 65 + "1" + "}" * 65,
    '["[[[[\\"[[[[", "]]"]', '["\\\\", "[", "\\\\\\"]", "]"]', '["]]]]", ' + "[" * 64 + "]" * 64 + "]",
    '["[[[[", ' + "[" * 62 + "]" * 62 + "]", '["\\u005b", "\\n[", "\\\\"]', '[1, "a\nb"]',
    '\\"[' + "[" * 70 + "]" * 70 + "]", "[" * 70 + '"]' + "]" * 70, '"' + "[" * 70 + "]" * 70,
    "[" * 80, "]" * 80, "[" * 65 + "]" * 64, '{"a": [1, 2}', "[1,]", '["é", "ü[", {"ß": ["]"]}]',
    "[" * 2000 + "]" * 2000, "[" * 1500 + "x" + "]" * 1500, '["\ud800"]', '["\\ud800"]',
]


@pytest.mark.parametrize("text", _NESTING_TEXTS)
def test_bounded_loads_shortcut_gives_what_the_scan_first_gave(text):
    """bounded_loads parses a valid JSON text within the limit without the nesting scan
    (_valid_json_within): for every text, valid or not, deep or not, with brackets, quotes and
    backslashes inside and outside strings, it returns or raises exactly what the scan-first
    reading did, from text and from bytes."""
    from kernel.taskfile import bounded_loads, loads

    expected = _outcome(_bounded_loads_plain, text)
    assert _outcome(bounded_loads, text) == expected
    if text.encode("utf-8", "surrogatepass").decode("utf-8", "replace") == text:  # a text UTF-8 can carry
        assert _outcome(lambda t: loads(t.encode()), text) == expected


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True)
    | st.text(alphabet='ab[]{}"\\/\n\t é', max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(alphabet='k[]{}"\\', max_size=4), inner,
                                                               max_size=4),
    max_leaves=40)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=_JSON_VALUES, wrap=st.integers(min_value=0, max_value=70), garble=st.sampled_from(["", "x", "]", '"', "\\"]),
       cut=st.integers(min_value=0, max_value=3))
def test_bounded_loads_shortcut_property(value, wrap, garble, cut):
    """The same on generated JSON: values with brackets, quotes and backslashes in strings and
    keys, wrapped in up to 70 arrays (around the limit of 64), sometimes made invalid (a stray
    character inserted, the end cut off)."""
    from kernel.taskfile import bounded_loads

    text = "[" * wrap + json.dumps(value, ensure_ascii=False) + "]" * wrap
    if garble:
        text = text[: len(text) // 2] + garble + text[len(text) // 2:]
    if cut:
        text = text[:-cut]
    assert _outcome(bounded_loads, text) == _outcome(_bounded_loads_plain, text)


def _json_outcome(read, text):
    try:
        value = read(text)
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        return type(exc).__name__, str(exc)
    return "value", repr(value), json.dumps(value)  # repr: types and key order; dumps: NaN, -0.0


_DECODE_TEXTS = [
    b'{"a":1,"b":2,"a":3}', b"[1e400]", b"[-1e400]", b"[1e-400]", b"[-0]", b"[-0.0]", b"[0e0]", b"[0E-0]", b"[-0e+0]",
    b"[1e05, 1.5E+3, 123456789.123456789e-5, 2.2250738585072011e-308, 4.9406564584124654e-324, 1.7976931348623157e308]",
    b"[123456789012345678901234567890, -9223372036854775809, 18446744073709551616, 1" + b"0" * 400 + b"]",
    b"[1." + b"1" * 800 + b"]", b"[NaN, Infinity, -Infinity]", b'["\\ud800", "\\udc00x"]', b'["a\x01b"]', b'["a\x7fb"]',
    b'["\\u0000", "\\/", "\\"\\\\"]', b"\xef\xbb\xbf[1]", b"[01]", b"[1.]", b"[.5]", b"[1e]", b'{"a":1,}', b"[1,]", b"",
    b"  ", b" [1] \n", b"[1]\r\n", b"[1,\x0c2]", b"[1,\x0b2]", b"[1] x", b"[1]\x00", b'{"\\u00e9": 1, "\xc3\xa9": 2}',
    b'["\xed\xa0\x80"]', b'["\xc0\xaf"]', b'["\xf4\x90\x80\x80"]', b'["\xe2\x82"]', b'["ok\xf0\x9f\x98\x80", "\xef\xbf\xbf"]',
    b'["\xe2\x80\xa8", "\xc2\x85"]', b"[" * 3000 + b"]" * 3000, b"[true, false, null, tru]",
]


@pytest.mark.parametrize("data", _DECODE_TEXTS)
def test_decode_json_is_json_loads(data):
    """kernel.taskfile.decode_json (msgspec's decoder where it accepts the text, else json.loads)
    gives json.loads' value or error on texts where the two decoders could part: number
    spellings, integers past 64 bits, NaN and infinity tokens, lone surrogates, control
    characters, invalid UTF-8, a BOM, trailing data, repeated keys, deep nesting; from text and
    from bytes; and loads (the task-file reader) gives what the scan-first reading gave."""
    from kernel.taskfile import decode_json, loads

    def plain(b):
        try:
            return json.loads(b.decode("utf-8"))
        except RecursionError:
            return "RecursionError"

    def fast(b):
        try:
            return decode_json(b)
        except RecursionError:
            return "RecursionError"

    expected = _json_outcome(plain, data)
    assert _json_outcome(fast, data) == expected
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None:
        assert _json_outcome(fast, text) == expected
    assert _json_outcome(loads, data) == _json_outcome(lambda b: _bounded_loads_plain(b.decode("utf-8")), data)


_ANY_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.integers(min_value=-(2 ** 80), max_value=2 ** 80)
    | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=5), inner, max_size=5),
    max_leaves=30)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=_ANY_JSON, ascii_only=st.booleans(), indent=st.sampled_from([None, 1, "\t"]))
def test_decode_json_property(value, ascii_only, indent):
    """The same on generated values (floats of every kind, integers past 64 bits, any text)
    written by json.dumps in several styles: decode_json's value is json.loads', from text and
    from bytes."""
    from kernel.taskfile import decode_json

    text = json.dumps(value, ensure_ascii=ascii_only, indent=indent)
    assert _json_outcome(decode_json, text) == _json_outcome(json.loads, text)
    data = text.encode("utf-8", "surrogatepass")
    assert _json_outcome(decode_json, data) == _json_outcome(lambda b: json.loads(b.decode("utf-8")), data)


class _FieldTask(TypedDict, total=False):
    final_answer: Any
    trajectory: Any


class _FieldSample(TypedDict, total=False):
    sample_id: Any
    tasks: list[_FieldTask] | None


def _projected(samples):
    """The fields of _FieldSample / _FieldTask of a value of the same shape, worked out on plain data."""
    out = []
    for sample in samples:
        kept = {k: v for k, v in sample.items() if k in ("sample_id", "tasks")}
        if isinstance(kept.get("tasks"), list):
            kept["tasks"] = [{k: v for k, v in t.items() if k in ("final_answer", "trajectory")} for t in kept["tasks"]]
        out.append(kept)
    return out


def _fields_outcome(read, data):
    try:
        value = read(data)
    except (ValueError, RecursionError) as exc:
        return type(exc).__name__, str(exc)
    if isinstance(value, list) and all(isinstance(s, dict) and (not isinstance(s.get("tasks"), list) or all(
            isinstance(t, dict) for t in s["tasks"])) for s in value):
        value = _projected(value)
    return "value", repr(value), json.dumps(value)  # repr: types and key order


_TASK_FILE_TEXTS = [
    # repeated fields (kept and dropped), dropped fields of every kind, key order
    b'[{"tasks": [{"question": "q", "trajectory": [1], "final_answer": {"a": 1, "a": 2}, "trajectory": [2]}],'
    b' "sample_id": "s1", "sample_id": "s2", "classes": {"x": [1, {"y": null}]}}]',
    # NaN tokens in a dropped field and in a kept one (json.loads reads both)
    b'[{"sample_id": "s", "note": NaN, "tasks": []}]', b'[{"sample_id": "s", "tasks": [{"final_answer": {"v": NaN}}]}]',
    # shapes check_task_samples refuses, and the ones it accepts
    b'[{"sample_id": 1, "tasks": null}]', b'[{"sample_id": "s", "tasks": "x"}]', b'[{"tasks": [1, {"trajectory": []}]}]',
    b'[1, {"sample_id": "s"}]', b'{"sample_id": "s"}', b'[{"sample_id": true}]', b"[]",
    # nesting over the limit of 64, in a dropped field and in a kept one; invalid JSON; numbers past a double
    b'[{"sample_id": "s", "deep": ' + b"[" * 70 + b"]" * 70 + b"}]",
    b'[{"tasks": [{"trajectory": ' + b"[" * 70 + b"]" * 70 + b"}]}]",
    b'[{"sample_id": "s", "tasks": [}]', b'[{"sample_id": 1e400, "x": 123456789012345678901234567890}]',
    b'[{"sample_id": "\\ud800", "tasks": [{"final_answer": "\\u00e9\\n"}]}]', b'\xef\xbb\xbf[]', b"",
]


@pytest.mark.parametrize("data", _TASK_FILE_TEXTS)
def test_loads_fields_reads_the_named_fields_as_loads_does(data):
    """kernel.taskfile.loads_fields: the fields its schema names hold loads' values (repeated keys,
    key order, NaN tokens, big numbers, lone surrogates), or it raises loads' error (invalid JSON,
    nesting over 64 levels even inside a field it leaves out), and a value of another shape
    (tasks not a list, a sample not an object) comes back whole, as loads gives it."""
    from kernel.taskfile import loads, loads_fields

    assert _fields_outcome(lambda b: loads_fields(b, list[_FieldSample])[0], data) == _fields_outcome(loads, data)


def test_loads_fields_leaves_the_other_fields_out():
    """Where msgspec reads the schema, the fields it does not name are not built at all."""
    from kernel.taskfile import loads_fields

    data = b'[{"sample_id": "s", "question": "q", "tasks": [{"tools": ["a"], "final_answer": 1}]}]'
    assert loads_fields(data, list[_FieldSample]) == ([{"sample_id": "s", "tasks": [{"final_answer": 1}]}], True)
    assert loads_fields(data.replace(b'"q"', b"NaN"), list[_FieldSample])[1] is False  # read whole by loads


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(samples=st.lists(st.dictionaries(st.sampled_from(["sample_id", "tasks", "question", "input_data"]),
                                        _ANY_JSON | st.lists(st.dictionaries(
                                            st.sampled_from(["final_answer", "trajectory", "tools"]), _ANY_JSON,
                                            max_size=3), max_size=3), max_size=4), max_size=4),
       indent=st.sampled_from([None, 1]))
def test_loads_fields_property(samples, indent):
    """The same on generated sample lists (any JSON in kept and dropped fields, tasks of every shape)."""
    from kernel.taskfile import loads, loads_fields

    data = json.dumps(samples, indent=indent).encode()
    assert _fields_outcome(lambda b: loads_fields(b, list[_FieldSample])[0], data) == _fields_outcome(loads, data)


def test_value_sha256_is_the_digest_of_canonical_json():
    """kernel.hashing.value_sha256: SHA-256 of each value as JSON with sorted keys and no spaces,
    one after another: for {"b": 1, "a": [1, 2]} and "x" the bytes {"a":[1,2],"b":1}"x" (worked
    out by hand); key order does not matter, list order and any value do; a dict msgspec cannot
    sort (int keys) is written by json.dumps with the same rule."""
    import hashlib

    from kernel.hashing import value_sha256

    assert value_sha256({"b": 1, "a": [1, 2]}, "x") == hashlib.sha256(b'{"a":[1,2],"b":1}"x"').hexdigest()
    assert value_sha256({"b": 1, "a": [1, 2]}) == value_sha256({"a": [1, 2], "b": 1})
    assert value_sha256({"a": [1, 2]}) != value_sha256({"a": [2, 1]})
    assert value_sha256([{"e": {"E1": True}}]) != value_sha256([{"e": {"E1": False}}])
    assert value_sha256({"é": "ü"}) == hashlib.sha256('{"é":"ü"}'.encode()).hexdigest()
    assert value_sha256({2: "b", 1: "a"}) == hashlib.sha256(b'{"1":"a","2":"b"}').hexdigest()
    with pytest.raises(TypeError):
        value_sha256({1: "a", "b": 2})  # json.dumps cannot order 1 and "b" either
