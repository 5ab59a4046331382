"""The scoring core's fast paths give the answers of the plain rules (faster, the same bytes).

* ``lcs_length`` counts a common prefix and suffix without its table: checked against the plain
  dynamic programme (the textbook recurrence, written out here) and on hand-worked pairs;
* ``match_value(..., reasons=False)`` and ``_match_ok`` (par_acc without a step table) give the
  same ``ok`` as with reasons, and ``parameter_accuracy`` (``_par_acc`` without its table) and
  ``trajectory_metrics`` the same values with and without the table;
* the per-text caches (``is_file_path``, observation path lists) answer like a fresh computation
  when the same text comes back;
* ``merge_predictions`` (a sample-id lookup, the record loop written out) fills the tasks the
  evaluator's (sample id, task index) lookup fills;
* ``score_answer`` without point fields (its own loop) gives the shared ``walk_answer``'s scores;
* ``round6`` (worked out in floating point away from ties) is ``round(value, 6)`` to the bit;
* ``output_map`` (obs dicts read in its own loop, values of JSON's non-text types skipped) is the
  plain rule: every top-level obs value whose ``str()`` is a file path, later steps winning.
"""
from __future__ import annotations

import json
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from evaluation.scoring.aggregate import round6
from evaluation.scoring.config import ScoringConfig
from evaluation.scoring.loaders import apply_record, merge_predictions, split_question_id
from evaluation.scoring.measures import walk_answer
from evaluation.scoring.operators import score_answer, score_field, score_point_pair
from evaluation.scoring.trajectory import (
    _Context,
    _match_ok,
    flatten_trajectory,
    is_file_path,
    lcs_length,
    match_value,
    output_map,
    parameter_accuracy,
    tool_sequence,
    trajectory_metrics,
)

SETTINGS = settings(max_examples=300, deadline=None, derandomize=True)
names = st.lists(st.sampled_from(["a", "b", "c", "d"]), max_size=7)
PATHS = ["/data/t1/pre.png", "/DATA/T1/PRE.PNG", "/runs/gold/t1/mask_aaaaaa01.png", "/runs/x/mask_bbbbbb02.png",
         "mask_aaaaaa01.png", "C:\\x\\y.tif", "./rel.tif", "<k> from trajectory[0].obs", "unknown", "north"]
values = st.recursive(st.sampled_from(PATHS) | st.integers(-5, 200) | st.floats(allow_nan=True, allow_infinity=False)
                      | st.booleans() | st.none(),
                      lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("xyz"), inner, max_size=3),
                      max_leaves=6)
obs = st.none() | st.builds(lambda p: [{"type": "text", "text": json.dumps({"path": p})}], st.sampled_from(PATHS)) \
    | st.builds(lambda p: {"out": p}, st.sampled_from(PATHS)) | st.just([{"type": "text", "text": "not json"}])
steps = st.fixed_dictionaries({"call": st.sampled_from(["seg.flood", "seg_flood(a)", "ras.area", "tool.loop", "(x)", ""]),
                               "args": st.dictionaries(st.sampled_from(["image_path", "output_path", "n", "zone"]),
                                                       values, max_size=3),
                               "obs": obs})
trajectories = st.lists(steps, max_size=5)


def _plain_lcs(a, b):
    # LCS length by the textbook recurrence, no shortcut
    table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i, x in enumerate(a):
        for j, y in enumerate(b):
            table[i + 1][j + 1] = table[i][j] + 1 if x == y else max(table[i][j + 1], table[i + 1][j])
    return table[-1][-1]


def test_lcs_hand_worked():
    assert lcs_length(["a", "b", "c", "d"], ["a", "b", "c", "d"]) == 4  # the same sequence
    assert lcs_length(["a", "b", "c", "d"], ["a", "c", "b", "d"]) == 3  # a, (b or c), d
    assert lcs_length(["a", "b"], ["a", "b", "b", "b"]) == 2  # prefix covers one side
    assert lcs_length(["x", "a"], ["a", "x"]) == 1
    assert lcs_length([], ["a"]) == 0


@SETTINGS
@given(names, names)
def test_lcs_shortcut_is_the_plain_recurrence(a, b):
    assert lcs_length(a, b) == _plain_lcs(a, b)


@SETTINGS
@given(trajectories, trajectories)
def test_par_acc_and_ok_are_the_same_with_and_without_reasons(gold, pred):
    cfg = ScoringConfig()
    fast, no_table = parameter_accuracy(pred, gold, cfg)
    full, table = parameter_accuracy(pred, gold, cfg, explain=True)
    assert no_table is None and fast == full
    assert trajectory_metrics(pred, gold, cfg)[0] == trajectory_metrics(pred, gold, cfg, explain=True)[0]
    ctx = _Context(flatten_trajectory(gold), flatten_trajectory(pred), cfg)
    for row in table:
        for arg in row["args"]:
            if row["name_ok"] and arg["why"] != "argument missing in the prediction":
                assert match_value(arg["gold"], arg["pred"], ctx, reasons=False)[0] == arg["ok"]
                assert match_value(arg["gold"], arg["pred"], ctx)[0] == arg["ok"]
                assert _match_ok(arg["gold"], arg["pred"], ctx) is arg["ok"]


def test_empty_tool_name_quirk_kept():
    # "(x)" normalises to "": the step counts in par_acc's |G| but not in the tool sequence
    gold = [{"call": "(x)", "args": {}}, {"call": "seg.flood", "args": {}}]
    assert len(flatten_trajectory(gold)) == 2 and tool_sequence(gold) == ["seg.flood"]
    assert parameter_accuracy([{"call": "seg.flood", "args": {}}], gold)[0] == 0.0  # positions differ: 0/2


def test_per_text_caches_answer_like_a_fresh_computation():
    for _ in range(2):  # the second round is answered from the caches
        assert is_file_path("/runs/a/b.tif") and not is_file_path("abc") and is_file_path("~/xy") and not is_file_path("~/x")  # at least 4 characters
        text = json.dumps({"mask": "/runs/a/m.png", "n": 3})
        flat = [{"call": "a.b", "obs": [{"type": "text", "text": text}], "args": {"output_path": "/o/x.png"}},
                {"call": "a.c", "obs": {"mask": "/runs/a/m.png"}}]
        assert output_map(flat) == {"/runs/a/m.png": (1, "mask"), "/o/x.png": (0, "output_path")}


def _plain_merge(gold_samples, records):
    """The evaluator's merge (load_predictions), written out: a (sample id, task index) lookup
    filled sample by sample, each record applied to the task its question id names."""
    preds, lookup = [], {}
    for sample in gold_samples:
        pred = {"tasks": [{"final_answer": {}, "trajectory": []} for _ in sample.get("tasks") or []]}
        if "sample_id" in sample:
            pred["sample_id"] = sample["sample_id"]
        for ti, task in enumerate(pred["tasks"]):
            lookup[(sample.get("sample_id", ""), ti)] = task
        preds.append(pred)
    matched = 0
    for record in records:
        sid, ti = split_question_id(record.get("question_id", ""), record.get("sample_id", ""))
        try:
            target = lookup.get((sid, ti))
        except TypeError:
            target = None
        if target is not None:
            apply_record(target, record)
            matched += 1
    return preds, f"  Loaded t1: {matched} predictions matched to {len(lookup)} tasks"


gold_samples = st.lists(st.builds(
    lambda sid, n: ({} if sid is None else {"sample_id": sid}) | {"tasks": [{"final_answer": {"k": i}} for i in range(n)]},
    st.sampled_from([None, "a", "b", "", "a_task1", 7]), st.integers(0, 3)), max_size=6)
run_records = st.lists(st.fixed_dictionaries(
    {"question_id": st.sampled_from(["a_task0", "a_task1", "a_task2", "b_task0", "b_task-1", "b_taskx", "_task0",
                                     "a_task1_task0", "a", "7_task0", "", 3]),
     "predicted_answer": st.sampled_from([None, {"k": 1}, '{"k": 2}', "text", ["k"]]),
     "trajectory": st.sampled_from([[], [{"call": "a.b"}]])},
    optional={"sample_id": st.sampled_from(["a", "b", "", 7, ["unhashable"]]), "final_answer": st.just({"k": 3})}),
    max_size=8)


@SETTINGS
@given(gold_samples, run_records)
def test_merge_is_the_evaluators_lookup(gold, records):
    """merge_predictions (a sample-id lookup of task lists, the record loop written out) fills
    the same prediction tasks as the evaluator's (sample id, task index) lookup, with repeated,
    missing and falsy sample ids, out-of-range, negative and unreadable task indices, a record's
    own sample id (unhashable too) and answers of every kind; and logs the same counts."""
    log = []
    preds = merge_predictions({"t1": gold}, {"t1": records}, log)["t1"]
    expected, line = _plain_merge(gold, records)
    assert preds == expected and log == [line]


answer_values = st.one_of(st.none(), st.booleans(), st.integers(-3, 300), st.floats(allow_nan=True),
                          st.sampled_from(["12%", "0.4", "phase 2", "North", "a,b", ""]),
                          st.lists(st.sampled_from(["a", "b", "c"]), max_size=3),
                          st.dictionaries(st.sampled_from(["p1", "phase_1", "zone_id", "lat", "n"]),
                                          st.integers(0, 9) | st.floats(0, 2), max_size=3))
field_types = st.sampled_from(["scalar_count", "scalar_continuous", "ratio_pct", "exact_match", "scalar_dict", "set_f1",
                               "ranking_kendall", "ignore", "text_bleu"])
field_names = st.sampled_from(["count", "flooded_pct", "share", "zone", "classes", "order", "stats"])


@SETTINGS
@given(st.dictionaries(field_names, field_types, max_size=4), st.dictionaries(field_names, answer_values, max_size=4),
       st.dictionaries(field_names, answer_values, max_size=4), st.sampled_from([None, 0.5]))
def test_answer_without_point_fields_is_the_shared_walk(spec, pred, gold, gsd):
    """score_answer's loop for an eval_spec without point fields (no pairs to detect) gives
    walk_answer's task score and field scores, field for field, in the same order."""
    cfg = ScoringConfig()
    fast = score_answer(pred, gold, spec, gsd, (), cfg)
    plain = walk_answer(pred, gold, spec, lambda f, t, p, g: score_field(f, t, p, g, gsd, (), cfg),
                        lambda p, g, info: score_point_pair(p, g, info, gsd, cfg))
    assert list(fast[1].items()) == list(plain[1].items())
    assert fast[0] == plain[0] or (math.isnan(fast[0]) and math.isnan(plain[0]))


def _same_float(a, b) -> bool:
    return type(a) is type(b) and (a == b or (a != a and b != b)) and (
        not isinstance(a, float) or math.copysign(1.0, a) == math.copysign(1.0, b))


# values already of 6 decimals and their neighbours (one ulp off: not their own rounding), around
# 2**32, where the fast path's half-ulp bound stops holding, and the signed zero
ROUND6_CASES = [0.0, -0.0, 1.0, -1.0, 0.5, 0.1, 0.3, 1e-06, 5e-07, 4.5e-07, 1 / 3, 2 / 3, 0.123456, 4294967.295,
                4294967295.5, 3999999999.999999, 4000000000.000001, 1e15 / 1e6, 9e15 / 1e6, 1e300, 5e-324,
                float("nan"), float("inf"), float("-inf"), True, False, 0, 1, 7, -3]
ROUND6_CASES += [math.nextafter(v, d) for v in (0.1, 0.5, 0.123456, 1e-06) for d in (0.0, 2.0)]
# one ulp from a 6-decimal value, yet value * 1e6 is an integer (found by search): only the
# fast path's k / 1e6 == value test tells them from the 6-decimal value itself
ROUND6_CASES += [476.76813500000003, 184.01073399999999, 793.4565699999999]
# halfway between two 6-decimal values (ties and near-ties: round's own decision), tiny negatives
# (round keeps their sign: -0.0), and both sides of the fast path's 4,000 bound
ROUND6_CASES += [0.0000005, 0.0000015, 0.0000025, 2.5e-06, 0.1234565, -0.1234565, -1e-09, -4.9e-07, 3999.9999995,
                 4000.0000005, 3999.999999, 4000.000001]
six_decimals = st.integers(-10**12, 10**12).map(lambda k: k / 1e6)
halfway = st.integers(-4 * 10**9, 4 * 10**9).map(lambda k: (k + 0.5) / 1e6)


@SETTINGS
@given(st.floats() | six_decimals | halfway | st.tuples(six_decimals | halfway, st.sampled_from([-math.inf, math.inf])).map(
    lambda vd: math.nextafter(*vd)) | st.sampled_from(ROUND6_CASES))
def test_round6_is_round_to_six_decimals(value):
    assert _same_float(round6(value), round(value, 6))


def test_round6_on_hand_picked_values():
    for value in ROUND6_CASES:
        assert _same_float(round6(value), round(value, 6)), value
    assert round6(0.1 + 0.2) == 0.3 and round6(1 / 3) == 0.333333 and math.copysign(1.0, round6(-0.0)) == -1.0
    assert round6(True) == 1 and type(round6(True)) is int  # round(True, 6): the int 1, written 1 (not true)


def _plain_output_map(flat):
    """The rule output_map reads, written the plain way: each step's obs items (a dict, or the JSON
    object in an MCP text block or a string), every top-level value whose text is a file path,
    then the step's ``output*`` arguments; a later producer of the same path wins."""
    produced = {}
    for idx, step in enumerate(flat):
        obs = step.get("obs", [])
        for item in obs if isinstance(obs, list) else [obs]:
            if isinstance(item, dict) and item.get("text", ""):
                item = item["text"]  # an MCP text block: its text is read as JSON, whatever its type
                if not isinstance(item, (str, bytes)):
                    continue
            if isinstance(item, (str, bytes)):
                try:
                    item = json.loads(item)
                except ValueError:
                    continue
            if isinstance(item, dict):
                for k, v in item.items():
                    if is_file_path(str(v)):
                        produced[str(v)] = (idx, k)
        args = step.get("args", {})
        if isinstance(args, dict):
            for k, v in args.items():
                if isinstance(k, str) and k.startswith("output") and is_file_path(str(v)):
                    produced[str(v)] = (idx, k)
    return produced


obs_values = st.dictionaries(st.sampled_from(["mask", "n", "out", "xs", "text"]), values, max_size=4)


@SETTINGS
@given(st.lists(st.fixed_dictionaries({"obs": obs_values | st.lists(obs_values, max_size=2) | obs,
                                       "args": st.dictionaries(st.sampled_from(["output_path", "n"]), values,
                                                               max_size=2)}), max_size=4))
def test_output_map_is_the_plain_rule(flat):
    assert output_map(flat) == _plain_output_map(flat)


_GOLD_T1 = [
    {"sample_id": "s1", "disaster_type": "flood", "classes": {"buildings": {"1": "no-damage"}},
     "input_data": {"pre_image": {"path": "pre.png", "pixel_size_m": 0.5}},
     "tasks": [{"question": "How many?", "task_category": "perception_and_assessment", "task_category_code": "T1",
                "tools": ["seg.flood"], "final_answer": {"count": 10, "area_m2": 100.0},
                "eval_spec": {"count": "scalar_count", "area_m2": "scalar_continuous"},
                "trajectory": [{"call": "seg.flood", "args": {"image_path": "/data/s1/pre.png"},
                                "obs": {"mask_path": "/runs/gold/s1/mask_aaaaaa01.png"}},
                               {"call": "ras.area", "args": {"mask_path": "/runs/gold/s1/mask_aaaaaa01.png"}}]}]},
    {"sample_id": "s2", "input_data": {"post_image": {"pixel_size_m": 2}}, "note": "dropped",
     "tasks": [{"question": "Where?", "final_answer": {"zone": "north"}, "eval_spec": {"zone": "exact_match"},
                "trajectory": []}, {"question": "unused", "tools": []}]},
]
_RECORDS_T1 = [
    {"question_id": "s1_task0", "predicted_answer": {"count": 11, "area_m2": 130.0}, "messages": ["dropped?"],
     "trajectory": [{"call": "seg_flood(x)", "args": {"image_path": "/DATA/S1/PRE.PNG"},
                     "obs": [{"type": "text", "text": "{\"mask_path\": \"/runs/p/mask_bbbbbb02.png\"}"}]},
                    {"call": "ras.area", "args": {"mask_path": "/runs/p/mask_bbbbbb02.png"}}]},
    {"question_id": "s2_task0", "final_answer": "{\"zone\": \"North\"}"},
]


def _write_tasks_folder(folder, samples_text: str):
    from evaluation.scoring.loaders import TASKS

    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{TASKS['t1']}.json").write_text(samples_text, encoding="utf-8")
    return folder


def test_scoring_reads_the_scored_fields_of_task_files_with_the_same_result(tmp_path):
    """load_task_files(scored_fields_only=True), which leaves out what scoring never reads
    (questions, tool lists, class maps) and lets msgspec check the shapes, gives the same eval.json
    as the full reading, on a file holding those fields and a NaN token in one (read by json.loads
    then, whole); the same error, naming the file and sample, for every shape check_task_samples
    refuses (tasks not a list, a task or sample not an object, a sample id neither text nor a
    number); and a sample id past 64 bits, which check_task_samples accepts, is read whole."""
    from evaluation.scoring import official_document, run_evaluation
    from evaluation.scoring.loaders import TASKS, load_run_records, load_task_files
    from evaluation.scoring.runtime import dumps_indented

    run = tmp_path / "run"
    (run / TASKS["t1"]).mkdir(parents=True)
    (run / TASKS["t1"] / "benchmark.jsonl").write_text("\n".join(json.dumps(r) for r in _RECORDS_T1), encoding="utf-8")
    plain = json.dumps(_GOLD_T1, indent=1)
    with_nan = plain.replace('"dropped"', "NaN")
    for i, text in enumerate((plain, with_nan)):
        folder = _write_tasks_folder(tmp_path / f"tasks{i}", text)
        docs = []
        for lean in (False, True):
            gold = load_task_files(folder, scored_fields_only=lean)
            preds = merge_predictions(gold, load_run_records(run))
            docs.append(dumps_indented(official_document(run_evaluation(gold, preds, (folder, run)), "dora")))
        assert docs[0] == docs[1]
    lean_gold = load_task_files(_write_tasks_folder(tmp_path / "tasks0", plain), scored_fields_only=True)
    assert "question" not in lean_gold["t1"][0]["tasks"][0] and "classes" not in lean_gold["t1"][0]
    big_id = json.dumps([{"sample_id": 2 ** 70, "tasks": [{"final_answer": {}}]}])  # past msgspec's int: read whole
    assert load_task_files(_write_tasks_folder(tmp_path / "big", big_id), scored_fields_only=True)["t1"][0]["sample_id"] == 2 ** 70
    # the hand-worked scores: count 11 vs 10 within 1.0 + 0.2 × 10 (pass), area 130 vs 100 beyond
    # 1.0 + 0.2 × 100 (fail): task score 0.5; "North" vs "north" equal after normalisation: 1.0
    tasks = json.loads(docs[1])["full"]["t1"]["tasks"]
    assert [t["task_score"] for t in tasks] == [0.5, 1.0, None]
    tasks_text = json.dumps([_GOLD_T1[0], {**_GOLD_T1[1], "tasks": "x"}], indent=1)
    for bad, problem in ((tasks_text, "sample 1: field 'tasks' must be a list, not str"),
                         ('[{"sample_id": "s", "tasks": [1]}]', "sample 0: tasks[0] must be an object, not int"),
                         ('[1]', "sample 0: a sample must be an object, not int"),
                         ('[{"sample_id": "s"}, {"sample_id": true}]', "sample 1: field 'sample_id' must be a string, not bool"),
                         ('[{"sample_id": 1.5}]', "sample 0: field 'sample_id' must be a string, not float")):
        folder = _write_tasks_folder(tmp_path / "bad", bad)
        errors = []
        for lean in (False, True):
            try:
                load_task_files(folder, scored_fields_only=lean)
            except ValueError as exc:
                errors.append(str(exc))
        assert len(errors) == 2 and errors[0] == errors[1] and errors[0].endswith(problem), errors
