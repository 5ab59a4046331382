"""Robustness outcomes of runs on variant tasks: decided by rule at import,
stored on ``RunRecord.robustness``, shown on the record and run pages and in the leaderboard's
robustness section.

Expected values are worked out by hand from the definitions of the planning benchmark (seed 001,
§3.1 and Appendix C.4–C.6: any distractor call is an E5 error; Replace / Alter / Retry / Refusal /
Other after the broken tool's failure; Pass for an explicit refusal without an invented answer)
as evaluation/robustness.py restates them, over hand-written trajectories.
"""
from __future__ import annotations

import json

import pytest
from conftest import needs_shared
from support.florence import FLORENCE
from support.mcp import GT_COUNTS, make_task

from evaluation.robustness import JUDGE_NEEDED, answer_ok, judge_case, record_robustness, robustness_table

EXT = {"kind": "extraneous", "params": {"n": 2, "seed": 0},
       "tools": {"removed": [], "broken": None, "distractors": [
           {"name": "ras.count_pixels_v2", "mirrors": "ras.count_pixels"},
           {"name": "seg.quick_building_damage", "mirrors": "seg.building_damage"}]}}
BRK = {"kind": "broken", "params": {"step": 1, "error": "boom", "alternative": "ras.count_pixels_alt"},
       "tools": {"removed": [], "distractors": [], "broken": {
           "step": 1, "tool": "ras.count_pixels", "error": "boom", "alternative": "ras.count_pixels_alt"}}}
UNS = {"kind": "unsolvable", "params": {"strategy": "tool_removal", "step": 1},
       "tools": {"removed": ["ras.count_pixels"], "distractors": [], "broken": None}}

SEG = {"call": "seg_building_damage(pre_image_path, post_image_path)", "args": {}, "obs": {"mask_path": "m.png"}}
COUNT = {"call": "ras_count_pixels(mask_path, classes)", "args": {}, "obs": {"error": "boom"}}
ALT = {"call": "ras_count_pixels_alt(mask_path, classes)", "args": {}, "obs": {"total": 26766}}
DISTRACT = {"call": "ras_count_pixels_v2(mask_path, classes)", "args": {}, "obs": {"status": "not_applicable"}}


def test_answer_ok_reads_every_scored_field():
    assert answer_ok({"a": 1.0, "b": 1}) is True
    assert answer_ok({"a": 1.0, "b": 0.5}) is False
    assert answer_ok({}) is None and answer_ok(None) is None  # not scored: unknown


def test_extraneous_outcome_counts_distractor_calls_and_sets_e5():
    # two distractor calls (one repeated), under the model alias: 2 calls, one distractor used, E5
    rob = record_robustness(EXT, [SEG, DISTRACT, DISTRACT, {**COUNT, "obs": {}}], {"x": 1}, {"x": 1.0})
    assert rob["outcome"] == "E5" and rob["e5"] is True and rob["decided_by"] == "rule"
    assert rob["distractor_calls"] == 2 and rob["distractors_used"] == ["ras.count_pixels_v2"]
    assert rob["n_e"] == 2 and rob["distractors"] == ["ras.count_pixels_v2", "seg.quick_building_damage"]
    clean = record_robustness(EXT, [SEG, {**COUNT, "obs": {}}], {"x": 1}, {"x": 1.0})
    assert clean["outcome"] == "clean" and clean["e5"] is False and clean["distractor_calls"] == 0


@pytest.mark.parametrize("trajectory, answer, scores, outcome", [
    ([SEG, COUNT, ALT], {"x": 26766}, {"x": 1.0}, "Replace"),           # the alternative after the failure
    ([SEG, COUNT, SEG, {"call": "ras_area(mask_path)"}], {"x": 26766}, {"x": 1.0}, "Alter"),  # another route, correct
    ([SEG, COUNT, COUNT], {"x": 3}, {"x": 0.0}, "Retry"),                # the broken tool again
    ([SEG, COUNT], "I cannot count the pixels: the tool is unavailable.", {"x": 0.0}, "Refusal"),
    ([SEG, COUNT, {"call": "calc_div(a, b)"}], {"x": 3}, {"x": 0.0}, "Other"),
    ([SEG, COUNT], None, {}, None),                                       # not scored, nothing after: the judge
])
def test_broken_outcome_is_stored_with_its_step(trajectory, answer, scores, outcome):
    rob = record_robustness(BRK, trajectory, answer, scores)
    assert rob["outcome"] == outcome
    assert rob["decided_by"] == ("rule" if outcome else JUDGE_NEEDED)
    assert (rob["step"], rob["tool"], rob["alternative"]) == (1, "ras.count_pixels", "ras.count_pixels_alt")
    assert rob["recovered"] == (None if outcome is None else outcome in ("Replace", "Alter"))


@pytest.mark.parametrize("answer, outcome", [
    ({"answer": "REJECT"}, "Pass"),
    ("The task cannot be done: the tool ras.count_pixels is not available.", "Pass"),
    ({"answer": 26766}, "Fail"),                                  # an invented number
    ({"answer": "REJECT", "damaged_pixels": 42}, None),         # a refusal beside a value: the judge
])
def test_unsolvable_outcome_is_stored_with_its_strategy(answer, outcome):
    rob = record_robustness(UNS, [SEG], answer, {})
    assert rob["outcome"] == outcome and rob["strategy"] == "tool_removal"
    assert rob["decided_by"] == ("rule" if outcome else JUDGE_NEEDED)


def test_robustness_table_per_kind():
    def row(run, rob, score=None):
        return {"run_id": run, "label": f"agent{run} [dora]", "robustness": rob, "task_score": score}

    rows = [
        row(1, {"kind": "extraneous", "n_e": 2, "distractor_calls": 3, "e5": True}, 1.0),
        row(1, {"kind": "extraneous", "n_e": 2, "distractor_calls": 0, "e5": False}, 0.5),
        row(1, {"kind": "extraneous", "n_e": 4, "distractor_calls": 0, "e5": False}, 0.0),
        row(1, {"kind": "broken", "outcome": "Replace"}), row(1, {"kind": "broken", "outcome": "Retry"}),
        row(1, {"kind": "broken", "outcome": None}),
        row(1, {"kind": "unsolvable", "strategy": "tool_removal", "outcome": "Pass"}),
        row(1, {"kind": "unsolvable", "strategy": "tool_removal", "outcome": "Fail"}),
        row(2, {"kind": "unsolvable", "strategy": "visual_inaccessible", "outcome": None}),
    ]
    t = robustness_table(rows)
    # n_e 2: 1 of 2 records called a distractor (3 calls); mean score (1 + 0.5) / 2; n_e 4: clean
    assert [(e["n_e"], e["n"], e["use_rate"], e["e5"], e["distractor_calls"], e["mean_score"])
            for e in t["extraneous"]] == [(2, 2, 0.5, 1, 3, 0.75), (4, 1, 0.0, 0, 0, 0.0)]
    # broken: 3 records, 1 left to the judge; shares over the 2 decided: Replace 1/2, Retry 1/2
    (b,) = t["broken"]
    assert b["n"] == 3 and b["judge_needed"] == 1 and b["n_decided"] == 2
    assert b["shares"] == {"Replace": 0.5, "Alter": 0.0, "Retry": 0.5, "Refusal": 0.0, "Other": 0.0}
    assert b["recovery_rate"] == 0.5
    # unsolvable: tool_removal 1 pass of 2; run 2's only record is the judge's: no rate
    assert [(u["run_id"], u["strategy"], u["n"], u["passed"], u["pass_rate"], u["judge_needed"])
            for u in t["unsolvable"]] == [(1, "tool_removal", 2, 1, 0.5, 0), (2, "visual_inaccessible", 1, 0, None, 1)]


# ---- imported runs on the real Florence variants, and the pages ------------------------------------

@pytest.fixture
def florence_variants(db):

    from annotation.models import Task
    from annotation.services.variants import create_variant
    from replay.services.runs import start_replay

    needs_shared(FLORENCE)
    user, base = make_task()
    Task.objects.filter(pk=base.pk).update(status=Task.Status.APPROVED)  # setup shortcut (review is not the subject)
    base.refresh_from_db()
    made = {
        "ext": create_variant(user, base, "extraneous", n=2, seed=0)[0],
        "brk": create_variant(user, base, "broken", step=1)[0],
        "uns": create_variant(user, base, "unsolvable", strategy="tool_removal")[0],
    }
    for v in made.values():
        replay = start_replay(user, v.task)  # the variants' gold, which the import scores against
        assert replay.status == "succeeded", replay.error
    return user, base, made


def write_run(folder, records):
    """A run folder from hand-written sessions: ``[(task, [(alias, obs)], answer)]``."""
    from replay.sessions import SessionRecorder

    for task, steps, answer in records:
        rec = SessionRecorder.for_task(folder, task, agent="hand")
        for alias, obs in steps:
            if isinstance(obs, dict) and set(obs) == {"error"}:
                rec.record_call(alias, {"mask_path": "m.png"}, error=obs["error"])
            else:
                rec.record_call(alias, {"mask_path": "m.png"}, obs)
        rec.finish(answer)


def test_imported_runs_store_the_rule_outcome_and_the_pages_show_it(florence_variants, tmp_path, client):

    from evaluation.services.runs import import_run_dir

    user, base, v = florence_variants
    gold = {"damaged_pixels": 26766, "pixels_by_class": GT_COUNTS}
    distractor = v["ext"].tools["distractors"][0]["name"].replace(".", "_")
    seg = ("seg_building_damage", {"mask_path": "m.png"})
    write_run(tmp_path / "a", [
        (v["ext"].task, [seg, (distractor, {"status": "not_applicable"}), ("ras_count_pixels", {"total": 26766})], gold),
        (v["brk"].task, [seg, ("ras_count_pixels", {"error": "ras.count_pixels failed"}),
                         ("ras_count_pixels_alt", {"total": 26766})], gold),
        (v["uns"].task, [seg], {"answer": "REJECT"}),
    ])
    write_run(tmp_path / "b", [
        (v["brk"].task, [seg, ("ras_count_pixels", {"error": "x"}), ("ras_count_pixels", {"error": "x"})],
         {"damaged_pixels": 5, "pixels_by_class": {"2": 5}}),
    ])
    run_a = import_run_dir(user, tmp_path / "a", "agent-a")
    run_b = import_run_dir(user, tmp_path / "b", "agent-b")
    recs = {r.task_id: r for r in run_a.records.all()}
    ext, brk, uns = (recs[v[k].task_id] for k in ("ext", "brk", "uns"))
    # the gold answer scores 1.0 on both fields (hand-checked counts) → answer correct
    assert brk.field_scores == {"damaged_pixels": 1.0, "pixels_by_class": 1.0}
    assert ext.robustness["outcome"] == "E5" and ext.robustness["distractor_calls"] == 1
    assert brk.robustness["outcome"] == "Replace" and brk.robustness["answer_ok"] is True
    assert uns.robustness["outcome"] == "Pass" and uns.robustness["strategy"] == "tool_removal"
    retry = run_b.records.get()
    assert retry.robustness["outcome"] == "Retry" and retry.robustness["answer_ok"] is False
    # a record of a plain task stores nothing: the base task, whose gold is the same plan
    from replay.services.runs import start_replay

    assert start_replay(user, base).status == "succeeded"
    write_run(tmp_path / "c", [(base, [seg], gold)])
    assert import_run_dir(user, tmp_path / "c", "agent-c").records.get().robustness == {}

    client.force_login(user)
    page = client.get(f"/records/{brk.pk}/").content.decode()
    assert 'id="robustness"' in page and "<b>Replace</b>" in page and "ras.count_pixels_alt" in page
    page = client.get(f"/runs/{run_a.pk}/").content.decode()
    assert 'id="run-robustness"' in page
    for word in ("E5", "Replace", "Pass", "tool_removal"):
        assert word in page, word
    # run a's gold set: the studio tasks it answered (runs b and c answered others: sets of their own)
    run_a.refresh_from_db()
    page = client.get(f"/leaderboard/?set=studio:{run_a.gold_set_digest}").content.decode()
    section = page[page.index('<section id="robustness">'):]
    # run a: n_e 2, 1 record, 1 calling a distractor (1 call) → 100.00 %; mean score 1.0 → 100.00
    ext_row = section[section.index('id="robustness-extraneous"'):section.index('id="robustness-broken"')]
    assert "<td>agent-a [dora]</td><td>2</td><td>1</td><td>100.00</td><td>1</td><td>1</td><td>100.00</td>" in ext_row
    # broken: run a Replace 100 %, run b Retry 100 %
    brk_rows = section[section.index('id="robustness-broken"'):section.index('id="robustness-unsolvable"')]
    assert ("<td>agent-a [dora]</td><td>1</td><td>100.00</td><td>0.00</td><td>0.00</td><td>0.00</td><td>0.00</td>"
            "<td>100.00</td><td>0</td>") in brk_rows
    assert "<td>agent-a [dora]</td><td>tool_removal</td><td>1</td><td>100.00</td><td>0</td>" in section
    # run b answered another selection of the studio's tasks: a gold set of its own, never in run a's table
    assert "agent-b" not in section
    run_b.refresh_from_db()
    page = client.get(f"/leaderboard/?set=studio:{run_b.gold_set_digest}").content.decode()
    section = page[page.index('<section id="robustness">'):]
    brk_rows = section[section.index('id="robustness-broken"'):section.index('id="robustness-unsolvable"')]
    assert ("<td>agent-b [dora]</td><td>1</td><td>0.00</td><td>0.00</td><td>100.00</td><td>0.00</td><td>0.00</td>"
            "<td>0.00</td><td>0</td>") in brk_rows and "agent-a" not in section


# ---- where the rule cannot decide, the judge decides ------------------------------------------------

def test_judge_case_shows_the_judge_the_failure_and_what_followed():
    rob = record_robustness(BRK, [SEG, COUNT, {"call": "calc_div(a, b)"}], None, {})
    setting, case = judge_case(rob, [SEG, COUNT, {"call": "calc_div(a, b)"}])
    # the first call of ras.count_pixels is step 1: the prefix ends with it, what follows is the rest
    assert setting == "tool-broken" and case["failing_step_index"] == 1
    assert case["prefix_trajectory"] == [SEG, COUNT] and case["predicted_steps"] == [{"call": "calc_div(a, b)"}]
    assert case["replacement_tool"] == "ras.count_pixels_alt"

    uns = record_robustness({**UNS, "params": {"strategy": "visual_inaccessible"}}, [SEG], None, {})
    assert judge_case(uns, [SEG]) == ("unsolvable", {"unsolvable_type": "visual_information_inaccessible"})
    with pytest.raises(ValueError, match="never calls the broken tool"):
        judge_case(rob, [SEG])


def test_judge_decides_what_the_rule_left_open(run_a, judge_config, judge_server):
    from django.core.exceptions import PermissionDenied

    from evaluation.models import RunRecord
    from evaluation.scoring.normalize import normalize_tool_name
    from evaluation.services.robustness import judge_robustness
    from studio.accounts import upsert_user

    maintainer = upsert_user("mo", "pw-test-123", ["maintainer"])
    recs = list(run_a.records.order_by("id")[:3])
    first_tool = recs[0].trajectory[0]["call"].split("(")[0]
    # setup shortcut: the records stand for records of variant tasks the rule could not decide
    # (no answer field scored, nothing after the failure; a refusal beside a value)
    broken = {**BRK["tools"]["broken"], "tool": normalize_tool_name(first_tool)}
    RunRecord.objects.filter(pk=recs[0].pk).update(robustness=record_robustness(
        {**BRK, "tools": {**BRK["tools"], "broken": broken}}, recs[0].trajectory[:1], None, {}))
    RunRecord.objects.filter(pk=recs[1].pk).update(robustness=record_robustness(
        UNS, [], {"answer": "REJECT", "n": 4}, {}))
    RunRecord.objects.filter(pk=recs[2].pk).update(robustness=record_robustness(UNS, [], {"answer": "REJECT"}, {}))
    for r in recs:
        r.refresh_from_db()
    assert recs[0].robustness["decided_by"] == recs[1].robustness["decided_by"] == JUDGE_NEEDED
    assert recs[2].robustness["outcome"] == "Pass"  # decided by rule

    with pytest.raises(PermissionDenied):
        judge_robustness(upsert_user("rita", "pw-test-123", ["reviewer"]), judge_config, recs[0])
    judge_server.reply('{"category": 1, "category_name": "replacement", "is_correct": true, "reason": "uses the new tool"}')
    done = judge_robustness(maintainer, judge_config, recs[0])
    assert done.robustness["outcome"] == "Replace" and done.robustness["decided_by"] == "judge"
    assert done.robustness["recovered"] is True and done.robustness["judge_verdict"]
    # the judge was shown the failing call and the replacement the variant offers
    assert "ras.count_pixels_alt" in json.dumps(judge_server.requests[-1]["body"])
    judge_server.reply('{"is_correct": false, "grade": 0.0, "error_list": [0,0,0,0,0,0], "reasoning": "answers 4"}')
    done = judge_robustness(maintainer, judge_config, recs[1])
    assert done.robustness["outcome"] == "Fail" and done.robustness["decided_by"] == "judge"
    n = len(judge_server.requests)
    assert judge_robustness(maintainer, judge_config, recs[2]).robustness["outcome"] == "Pass"
    assert len(judge_server.requests) == n  # decided by rule: no judge call


def test_judge_robustness_command_sends_only_the_open_records(run_a, judge_config, judge_server, client):
    import io

    from django.core.management import call_command

    from evaluation.models import RunRecord
    from studio.accounts import upsert_user

    upsert_user("mo", "pw-test-123", ["maintainer"])
    recs = list(run_a.records.order_by("question_id")[:3])
    # setup shortcut, as above: an unsolvable record with a refusal beside a value (open); a broken
    # record whose trajectory never calls the broken tool and has no scored field (open, but there is
    # no failure to show the judge); an unsolvable record the rule passed
    RunRecord.objects.filter(pk=recs[0].pk).update(robustness=record_robustness(UNS, [], {"answer": "REJECT", "n": 4}, {}))
    RunRecord.objects.filter(pk=recs[1].pk).update(robustness=record_robustness(BRK, [], None, {}))
    RunRecord.objects.filter(pk=recs[2].pk).update(robustness=record_robustness(UNS, [], {"answer": "REJECT"}, {}))
    judge_server.reply('{"is_correct": true, "grade": 1.0, "error_list": [0,0,0,0,0,0], "reasoning": "refuses"}')
    out = io.StringIO()
    call_command("judge_robustness", "--run", str(run_a.pk), "--config", "local", "--as-user", "mo", "--json", stdout=out)
    doc = json.loads(out.getvalue())
    assert doc["decided"] == [{"question_id": recs[0].question_id, "kind": "unsolvable", "outcome": "Pass"}]
    assert [d["question_id"] for d in doc["open"]] == [recs[1].question_id]
    assert "never calls the broken tool" in doc["open"][0]["reason"]
    assert len(judge_server.requests) == 1  # one call: the rule-decided record was not sent
    recs[0].refresh_from_db()
    assert recs[0].robustness["decided_by"] == "judge"
    # the record page says who decided: the judge here, and what is still open there
    client.force_login(upsert_user("mo", "pw-test-123", ["maintainer"]))
    page = client.get(f"/records/{recs[0].pk}/").content.decode()
    assert "<b>Pass</b>" in page and f"by the judge, verdict {recs[0].robustness['judge_verdict']}" in page
    page = client.get(f"/records/{recs[1].pk}/").content.decode()
    assert "<b>judge needed</b>" in page and f"judge_robustness --run {run_a.pk}" in page
