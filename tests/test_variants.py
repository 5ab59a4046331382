"""Robustness variants: making them from a task's content, and the rule scorers.

Expected values are worked out by hand from the definitions of the planning benchmark (seed 001,
§3.1 and Appendix B.4, C.4–C.6) as the module docstrings restate them.
"""
from __future__ import annotations

import pytest

from annotation.variants import (
    EXTRANEOUS_LEVELS,
    REFUSAL,
    VariantError,
    broken_variant,
    extraneous_variant,
    gold_tools,
    inert_observation,
    make_distractors,
    make_variant,
    unsolvable_variant,
)
from evaluation.robustness import broken_outcome, distractor_use, is_refusal_text, unsolvable_outcome

# A Florence-like task: count destroyed buildings from the damage mask, then their area.
CONTENT = {
    "question": "How many buildings were destroyed, and what area do they cover?",
    "input_data": {"post_image": {"image_path": "florence_post.png", "modality": "optical", "phase": "post"},
                   "pre_image": {"image_path": "florence_pre.png", "modality": "optical", "phase": "pre"},
                   "roads": {"path": "roads.geojson"}},
    "trajectory": [
        {"call": "seg.building_damage", "args": {"pre_image_path": "florence_pre.png", "post_image_path": "florence_post.png"}},
        {"call": "ras.count_pixels", "args": {"mask_path": "<mask_path> from trajectory[0].obs", "classes": [4]}},
        {"call": "ras.area", "args": {"mask_path": "<mask_path> from trajectory[0].obs", "classes": [4], "pixel_size_m": 0.5}},
    ],
    "answer_spec": [{"name": "destroyed_px", "eval_type": "scalar_count", "source": "<counts> from trajectory[1].obs"}],
    "final_answer": {"destroyed_px": 26766},
}
TOOLS = {
    "seg.building_damage": {"description": "Segment building damage from a pre/post pair.", "server": "Perception",
                            "params": [{"name": "pre_image_path", "type": "str", "required": True}]},
    "ras.count_pixels": {"description": "Count the pixels of each class of a mask.", "server": "Analysis",
                         "params": [{"name": "mask_path", "type": "str", "required": True}]},
    "ras.area": {"description": "Area in m2 of mask classes.", "server": "Calculate", "params": []},
    "ras.count_pixels_v2": {"description": "an existing tool", "params": []},  # a real name: never a distractor
}


@pytest.fixture
def joplin(joplin_once):
    """The Joplin vectors, imported once for this module (support.joplin.joplin_once)."""
    return joplin_once


def test_gold_tools_in_first_use_order_with_loop_calls():
    loop = {"trajectory": [{"call": "tool.loop", "args": {"calls": [{"call": "ras.area"}, {"call": "ras.clip"}]}},
                           {"call": "ras.area"}]}
    assert gold_tools(CONTENT) == ["seg.building_damage", "ras.count_pixels", "ras.area"]
    assert gold_tools(loop) == ["tool.loop", "ras.area", "ras.clip"]


def test_distractors_are_deterministic_near_duplicates_of_gold_tools():
    a = make_distractors(gold_tools(CONTENT), 6, seed=7, tools=TOOLS)
    b = make_distractors(gold_tools(CONTENT), 6, seed=7, tools=TOOLS)
    c = make_distractors(gold_tools(CONTENT), 6, seed=8, tools=TOOLS)
    assert a == b and [d["name"] for d in a] != [d["name"] for d in c]
    names = [d["name"] for d in a]
    assert len(set(names)) == 6  # never twice
    assert not set(names) & set(TOOLS)  # never a real tool (ras.count_pixels_v2 exists)
    for d in a:
        # each mimics a gold tool: same server prefix, its description narrowed, its parameters
        assert d["mirrors"] in gold_tools(CONTENT)
        assert d["name"].split(".")[0] == d["mirrors"].split(".")[0]
        assert d["description"].startswith(TOOLS[d["mirrors"]]["description"].rstrip("."))
        assert d["params"] == TOOLS[d["mirrors"]]["params"]
    # 6 distractors over 3 gold tools: each mimicked twice (in turn)
    assert sorted(d["mirrors"] for d in a) == sorted(gold_tools(CONTENT) * 2)
    obs = inert_observation(a[0])
    assert obs["status"] == "not_applicable" and a[0]["name"] in obs["explanation"]


def test_extraneous_variant_keeps_the_task_and_adds_n_distractors():
    for n in EXTRANEOUS_LEVELS:
        spec = extraneous_variant(CONTENT, n, 0, TOOLS)
        assert spec["content"] == CONTENT and spec["content"] is not CONTENT
        assert spec["variant"]["kind"] == "extraneous" and spec["variant"]["params"] == {"n": n, "seed": 0}
        assert len(spec["variant"]["tools"]["distractors"]) == n
    with pytest.raises(VariantError, match="n_e must be one of 2, 4, 6, 8, 10"):
        extraneous_variant(CONTENT, 3, 0, TOOLS)


def test_broken_variant_names_step_error_and_alternative():
    spec = broken_variant(CONTENT, 1, TOOLS)
    broken = spec["variant"]["tools"]["broken"]
    assert broken["step"] == 1 and broken["tool"] == "ras.count_pixels"
    assert broken["alternative"] == "ras.count_pixels_alt" and broken["alternative_params"] == TOOLS["ras.count_pixels"]["params"]
    assert "ras.count_pixels failed" in broken["error"]
    custom = broken_variant(CONTENT, 2, TOOLS, error="timeout", alternative="calc.mask_area")
    assert custom["variant"]["params"] == {"step": 2, "error": "timeout", "alternative": "calc.mask_area"}
    with pytest.raises(VariantError, match="step 3 is not a step"):
        broken_variant(CONTENT, 3, TOOLS)
    with pytest.raises(VariantError, match="already a tool"):
        broken_variant(CONTENT, 1, TOOLS, alternative="ras.area")


def test_unsolvable_strategies():
    removal = unsolvable_variant(CONTENT, "tool_removal", TOOLS)
    assert removal["variant"]["tools"]["removed"] == ["ras.area"]  # the last tool step by default
    assert removal["content"]["question"].endswith("Use the tool ras.area to obtain this result; no other tool may replace it.")
    assert removal["content"]["final_answer"] == {"answer": REFUSAL}
    assert removal["content"]["answer_spec"][0]["eval_type"] == "exact_match"
    missing = unsolvable_variant(CONTENT, "information_missing", TOOLS)
    # the plan reads both images, not the roads: both image entries go, roads stay
    assert missing["variant"]["params"]["removed_layers"] == ["post_image", "pre_image"]
    assert list(missing["content"]["input_data"]) == ["roads"]
    visual = unsolvable_variant(CONTENT, "visual_inaccessible", TOOLS)
    assert visual["content"]["input_data"]["post_image"]["image_path"] == "florence_post_unreadable.png"
    assert visual["variant"]["params"]["replaced"] == {"florence_post.png": "florence_post_unreadable.png",
                                                        "florence_pre.png": "florence_pre_unreadable.png"}
    conflict = unsolvable_variant(CONTENT, "contradictory_constraints", TOOLS,
                                  constraint="Do not use the post-event image.")
    assert conflict["content"]["question"].endswith("cover? Do not use the post-event image.")
    with pytest.raises(VariantError, match="written by the author"):
        unsolvable_variant(CONTENT, "contradictory_constraints", TOOLS)
    with pytest.raises(VariantError, match="strategy must be one of"):
        make_variant(CONTENT, "unsolvable", TOOLS, strategy="vibes")
    with pytest.raises(VariantError, match="needs the step"):
        make_variant(CONTENT, "broken", TOOLS)


# ---- rule scorers -------------------------------------------------------------------------------

def test_distractor_use_counts_calls_under_model_aliases():
    traj = [{"call": "ras_count_pixels_fast(mask)"}, {"call": "ras.count_pixels"}, {"call": "ras.count_pixels_fast"}]
    assert distractor_use(traj, ["ras.count_pixels_fast", "ras.area_v2"]) == \
        {"calls": 2, "used": ["ras.count_pixels_fast"], "e5": True}
    assert distractor_use([{"call": "ras.area"}], ["ras.area_v2"]) == {"calls": 0, "used": [], "e5": False}


BROKEN = {"step": 1, "tool": "ras.count_pixels", "alternative": "ras.count_pixels_alt"}


@pytest.mark.parametrize("trajectory, answer_ok, answer, expected", [
    # the alternative after the failure → Replace (even if another tool came first)
    ([{"call": "seg.building_damage"}, {"call": "ras.count_pixels"}, {"call": "ras_count_pixels_alt"}], True, None, "Replace"),
    # another tool reaches the gold answer → Alter
    ([{"call": "seg.building_damage"}, {"call": "ras.count_pixels"}, {"call": "ras.area"}], True, {"x": 1}, "Alter"),
    # the broken tool again, answer wrong → Retry
    ([{"call": "ras.count_pixels"}, {"call": "ras.count_pixels"}], False, {"x": 9}, "Retry"),
    # gives up explicitly → Refusal
    ([{"call": "ras.count_pixels"}], False, "I cannot count the pixels: the tool is unavailable.", "Refusal"),
    # an irrelevant tool and a wrong answer → Other
    ([{"call": "ras.count_pixels"}, {"call": "vis.pie_chart"}], False, {"x": 3}, "Other"),
    # not scored and nothing the rule can read → the judge decides
    ([{"call": "ras.count_pixels"}, {"call": "vis.pie_chart"}], None, {"x": 3}, None),
])
def test_broken_outcome_one_per_class(trajectory, answer_ok, answer, expected):
    assert broken_outcome(trajectory, BROKEN, answer_ok=answer_ok, answer=answer) == expected


@pytest.mark.parametrize("answer, trajectory, expected", [
    ("REJECT", [], "Pass"),
    ({"answer": "REJECT"}, [], "Pass"),
    ("The task cannot be done: the post-event image is unreadable. Could you provide a readable image?", [], "Pass"),
    ({"destroyed_px": 26766}, [{"call": "ras.count_pixels"}], "Fail"),   # invents an answer
    ("About 120 buildings were destroyed.", [], "Fail"),
    (None, [{"call": "ras.count_pixels"}], "Fail"),                     # blind execution, no answer
    ({"destroyed_px": 10, "note": "the mask is missing, so this is a guess"}, [], None),  # both: the judge
    (None, [], None),
])
def test_unsolvable_outcome(answer, trajectory, expected):
    assert unsolvable_outcome(answer, trajectory) == expected


def test_refusal_text():
    assert is_refusal_text("Unable to proceed: the required tool was removed.")
    assert is_refusal_text({"answer": "information not provided"})
    assert not is_refusal_text("The flood covers 42% of the roads.")


# ---- the service and the command, on the Joplin T2 task of test_review_workflow -------------------


@pytest.mark.django_db
def test_variants_are_tasks_linked_to_their_base(approved_t2, people):
    from annotation.models import TaskVariant
    from annotation.services.variants import create_variant

    variant, created = create_variant(people["ada"], approved_t2, "extraneous", n=4, seed=0)
    assert created and variant.task.question_id == f"{approved_t2.sample_id}_ext4s0_task0"
    assert variant.task.status == "draft" and variant.task.dimension == "t2"
    assert variant.base_task == approved_t2 and variant.base_revision == approved_t2.head
    assert len(variant.tools["distractors"]) == 4
    assert {d["mirrors"] for d in variant.tools["distractors"]} <= {"vec.filter_by_attribute", "vec.buffer", "vec.intersect"}
    assert variant.task.head.trajectory == approved_t2.head.trajectory  # the plan is the base's
    again, created_again = create_variant(people["ada"], approved_t2, "extraneous", n=4, seed=0)
    assert not created_again and again.pk == variant.pk  # the same variant is not made twice
    broken, _ = create_variant(people["ada"], approved_t2, "broken", step=1)
    assert broken.tools["broken"]["tool"] == "vec.buffer" and broken.tools["broken"]["alternative"] == "vec.buffer_alt"
    missing, _ = create_variant(people["ada"], approved_t2, "unsolvable", strategy="information_missing")
    assert missing.task.head.input_data == {}  # both layers the plan reads are gone
    assert missing.task.head.answer_spec[0]["source"] == "REJECT"
    assert TaskVariant.objects.filter(base_task=approved_t2).count() == 3


@pytest.mark.django_db
def test_variants_need_an_approved_base_and_the_role(approved_t2, people):
    from django.core.exceptions import PermissionDenied

    from annotation.models import Task
    from annotation.services.variants import VariantError, create_variant

    with pytest.raises(PermissionDenied):
        create_variant(people["rey"], approved_t2, "extraneous", n=2)  # a reviewer creates no task
    Task.objects.filter(pk=approved_t2.pk).update(status=Task.Status.DRAFT)
    with pytest.raises(VariantError, match="approved or released"):
        create_variant(people["ada"], approved_t2, "extraneous", n=2)


@pytest.mark.django_db
def test_make_variants_command_prints_the_variant(approved_t2, people):
    import io
    import json

    from django.core.management import CommandError, call_command

    out = io.StringIO()
    call_command("make_variants", "--task", approved_t2.question_id, "--kind", "broken", "--step", "2",
                 "--as-user", "ada", "--json", stdout=out)
    doc = json.loads(out.getvalue())
    assert doc["kind"] == "broken" and doc["base_task"] == approved_t2.question_id and doc["created"] is True
    assert doc["params"]["step"] == 2 and doc["tools"]["broken"]["tool"] == "vec.intersect"
    with pytest.raises(CommandError, match="step 7 is not a step"):
        call_command("make_variants", "--task", approved_t2.question_id, "--kind", "broken", "--step", "7",
                     "--as-user", "ada")


@pytest.mark.django_db
def test_qc_checks_what_each_variant_kind_promises(approved_t2, people):
    from annotation.services import tasks as task_services
    from annotation.services.qc import qc_for_task
    from annotation.services.variants import create_variant

    def checks(task):
        task.refresh_from_db()
        return {f.check for f in qc_for_task(task) if f.check.startswith("variant.")}

    broken, _ = create_variant(people["ada"], approved_t2, "broken", step=2)
    ext, _ = create_variant(people["ada"], approved_t2, "extraneous", n=2, seed=3)
    uns, _ = create_variant(people["ada"], approved_t2, "unsolvable", strategy="tool_removal")
    # as made, each variant is clean
    assert checks(broken.task) == set() and checks(ext.task) == set() and checks(uns.task) == set()
    # the author edits them so that they no longer test their kind: the broken step deleted (the
    # answer given as a literal, 60: the hand count of test_review_workflow) ...
    task_services.save_revision(people["ada"], broken.task, expected_version=1, content={
        "trajectory": broken.task.head.trajectory[:2],
        "answer_spec": [{**approved_t2.head.answer_spec[0], "source": 60}]})
    assert checks(broken.task) == {"variant.broken_step"}
    plan = [dict(s) for s in ext.task.head.trajectory]
    plan[0] = {"call": ext.tools["distractors"][0]["name"], "args": plan[0]["args"]}
    task_services.save_revision(people["ada"], ext.task, expected_version=1, content={"trajectory": plan})
    assert checks(ext.task) == {"variant.distractor_in_plan"}
    task_services.save_revision(people["ada"], uns.task, expected_version=1,
                                content={"answer_spec": approved_t2.head.answer_spec})
    assert checks(uns.task) == {"variant.refusal_gold"}


def test_qc_variant_checks_on_plain_content():
    from annotation import qc

    def checks(variant):
        return {f.check for f in qc.check_task({**CONTENT, "variant": variant}) if f.check.startswith("variant.")}

    assert checks({"kind": "sideways", "params": {}, "tools": {}}) == {"variant.unknown_kind"}
    broken = broken_variant(CONTENT, 1, TOOLS)["variant"]
    assert checks(broken) == set()
    broken["tools"]["broken"]["alternative"] = "ras.area"  # an existing tool's name
    assert checks(broken) == {"variant.alternative_name"}
    assert checks(None) == set()  # a plain task


def test_qc_flags_an_unsolvable_variant_whose_replayed_answer_is_any_json_but_the_refusal():
    """The replayed gold answer of an unsolvable variant must be the refusal ``REJECT`` in every
    field (``unsolvable_variant``'s docstring); a replay may return any JSON value, lists and
    objects included, and the check names it instead of failing on an unhashable value."""
    from annotation.qc.suite import full_qc

    made = unsolvable_variant(CONTENT, "tool_removal", TOOLS)
    content = {**made["content"], "variant": made["variant"]}

    def refusal_findings(final_answer):
        found = full_qc(content, replay={"final_answer": final_answer})
        return [f.message for f in found if f.check == "variant.refusal_gold"]

    assert refusal_findings({"answer": "REJECT"}) == []
    assert refusal_findings("REJECT") == []
    assert refusal_findings(None) == []  # no replay answer yet: nothing to compare
    for wrong in ({"answer": ["REJECT", 3]}, {"answer": {"count": 3}}, {"answer": "REJECT", "n": [1]},
                  ["REJECT"], 42):
        (message,) = refusal_findings(wrong)
        assert "not the refusal REJECT" in message, wrong
