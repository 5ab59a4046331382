"""An import binds an answer field to a step's observation only through a key the reference check
takes, so that it never refuses the reference it derived itself (found by the hypothesis property
``test_import_tasks_never_ends_in_a_traceback`` with seed 1: a recorded ``ras.area`` obs that was a
list equal to the gold answer was bound as ``<results>``, which ``ras.area`` does not return, and the
import ended in ``BrokenReferenceError``)."""
from annotation.qc import check_task, reference_accepts
from annotation.services.task_import import file_task_content

SAMPLE = {"sample_id": "s1", "input_data": {}}


def _task(obs, gold, call="ras.area", args=None):
    return {"question": "q", "task_category": "c", "task_category_code": "T1",
            "trajectory": [{"call": call, "args": args or {"mask_path": "m.tif", "class_id": 1}, "obs": obs}],
            "final_answer": {"area": gold}, "eval_spec": {"area": "scalar"}}


def _source(task):
    content, _ = file_task_content(SAMPLE, task)
    return content["answer_spec"][0]["source"], content


def test_a_key_the_tool_returns_is_bound():
    # ras.area returns area_m2 (kernel/tools registry): the benchmark's own observation binds
    src, content = _source(_task({"area_m2": 12.5, "pixel_count": 50}, 12.5))
    assert src == "<area_m2> from trajectory[0].obs"
    assert not [f for f in check_task(content) if f.check == "references.key"]


def test_a_recorded_obs_the_tool_cannot_give_keeps_the_literal_gold():
    # a list obs (only a return_all tool.loop returns one) and a key ras.area does not return
    for obs in ([1, 2], {"results": [1, 2]}):
        src, content = _source(_task(obs, [1, 2]))
        assert src == [1, 2]
        assert not [f for f in check_task(content) if f.check == "references.key"]


def test_the_loop_rule_and_unknown_tools():
    steps = [{"call": "tool.loop", "args": {"loop_over": [1], "call": "ras.area", "args": {}}},
             {"call": "tool.loop", "args": {"loop_over": [1], "call": "ras.area", "args": {}, "return_all": False}},
             {"call": "no.such_tool", "args": {}}]
    accepts = reference_accepts(steps)
    assert accepts(0, "results") and not accepts(0, "area_m2")  # return_all (the default): a bare list
    # return_all false: the loop's own result keys (the registry's: iteration_count, results, ...)
    assert accepts(1, "iteration_count") and accepts(1, "results") and not accepts(1, "area_m2")
    assert accepts(2, "anything")  # an unknown tool's keys are not checked
