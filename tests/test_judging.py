"""Judge jobs end to end against a local OpenAI-compatible server (no real model).

Hand-worked values:
- The server answers 100 prompt and 20 completion tokens per call (``completion`` of
  test_judge_backend); at $0.5 / $1.5 per 1k tokens a call costs 0.1·0.5 + 0.02·1.5 = $0.08.
- agent_a's first record (t1_s05_task0) has 3 predicted steps: perception.detect_buildings,
  perception.classify_damage, analysis.summarize_damage. Step-wise "middle" cuts at
  floor(0.5·3 + 0.5) = 2, so the judge sees steps 0–1 with their observations and judges step 2.
"""
from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from support.judging import CLEAN, GOOD, SECRET

from evaluation.judge import JudgeConfigError, JudgeTransientError
from evaluation.models import JudgeCall, JudgeJob, Verdict
from evaluation.services.judge import (
    JudgeInputError,
    JudgePaused,
    cut_index,
    judge_record,
    rerun_job,
    run_judge_job,
    save_judge_config,
    start_judge_job,
)


def _first(run):
    return run.records.get(question_id="t1_s05_task0")


@pytest.mark.django_db
def test_good_verdict_stored_with_provenance_then_cached(run_a, judge_config, judge_server):
    judge_server.reply(GOOD)
    rec = _first(run_a)
    v = judge_record(judge_config, rec)
    assert (v.source, v.status, v.protocol, v.prompt_version) == ("judge", "ok", "holistic", "holistic_v2")
    assert v.judge_name == "local v1@holistic_v2"
    assert v.errors == {"E1": False, "E2": False, "E3": False, "E4": True, "E5": False, "E6": False}
    assert v.is_correct is False and v.grade == 0.6 and v.reasons == {"E4": "step 2 uses trajectory[3]"}
    assert v.raw == GOOD
    req = judge_server.requests[0]
    assert req["headers"]["authorization"] == f"Bearer {SECRET}"
    assert req["body"]["temperature"] == 0
    assert v.prompt == req["body"]["messages"][0]["content"]  # the exact prompt text sent
    assert "Which land-use classes contain damaged buildings?" in v.prompt  # the gold snapshot's question
    call = JudgeCall.objects.get(verdict=v)
    assert (call.tokens_in, call.tokens_out, call.status) == (100, 20, "ok")
    assert call.cost_usd == pytest.approx(0.08)
    assert len(call.cache_key) == 64

    # the same judgement again: a cache hit returns the stored verdict and makes no HTTP call
    again = judge_record(judge_config, rec)
    assert again.pk == v.pk and len(judge_server.requests) == 1
    assert Verdict.objects.filter(source="judge").count() == 1


@pytest.mark.django_db
def test_cache_hit_for_another_record_with_the_same_inputs_copies_the_verdict(run_a, judge_config, judge_server,
                                                                              maintainer):
    from conftest import SCORING_EXAMPLES

    from evaluation.services.runs import import_run_dir

    twin = import_run_dir(maintainer, SCORING_EXAMPLES / "runs" / "agent_a", "agent_a_again",
                          tasks_dir=SCORING_EXAMPLES / "tasks")
    judge_server.reply(GOOD)
    first = judge_record(judge_config, _first(run_a))
    second = judge_record(judge_config, _first(twin))  # same question, trajectory and answer
    assert len(judge_server.requests) == 1
    assert second.pk != first.pk and second.record_id == _first(twin).pk
    assert (second.errors, second.grade, second.raw) == (first.errors, first.grade, first.raw)
    assert judge_record(judge_config, _first(twin)).pk == second.pk  # and it is found again, not copied twice
    assert JudgeCall.objects.get().verdict_id == first.pk


@pytest.mark.django_db
def test_401_pauses_the_config_without_showing_the_key(run_a, judge_config, judge_server):
    judge_server.fail(401, {"error": {"message": f"Incorrect API key provided: {SECRET}"}})
    with pytest.raises(JudgeConfigError):
        judge_record(judge_config, _first(run_a))
    judge_config.refresh_from_db()
    assert judge_config.paused and "401" in judge_config.paused_reason
    assert SECRET not in judge_config.paused_reason and SECRET[:8] not in judge_config.paused_reason
    assert not Verdict.objects.exists()  # no default verdict
    n = len(judge_server.requests)
    with pytest.raises(JudgePaused):
        judge_record(judge_config, _first(run_a))
    assert len(judge_server.requests) == n  # a paused configuration calls nothing


@pytest.mark.django_db
def test_missing_key_variable_pauses(run_a, judge_config, judge_server, monkeypatch):
    monkeypatch.delenv("STUDIO_TEST_JUDGE_KEY")
    with pytest.raises(JudgeConfigError):
        judge_record(judge_config, _first(run_a))
    judge_config.refresh_from_db()
    assert judge_config.paused and "STUDIO_TEST_JUDGE_KEY" in judge_config.paused_reason
    assert judge_server.requests == []


@pytest.mark.django_db
def test_malformed_twice_is_a_failed_verdict_with_the_raw_text(run_a, judge_config, judge_server):
    judge_server.reply("I think the plan is fine.")
    judge_server.reply("Still prose, no JSON")
    v = judge_record(judge_config, _first(run_a))
    assert v.status == "failed" and v.is_correct is None and v.grade is None and v.errors == {}
    assert "I think the plan is fine." in v.raw and "Still prose, no JSON" in v.raw
    assert len(judge_server.requests) == 2  # the first answer plus one bounded re-ask
    call = JudgeCall.objects.get(verdict=v)
    assert call.status == "failed" and call.raw_texts == ["I think the plan is fine.", "Still prose, no JSON"]
    # a failed judgement is not cached: running again calls again
    judge_server.reply(CLEAN)
    v2 = judge_record(judge_config, _first(run_a))
    assert v2.status == "ok" and v2.is_correct is True and len(judge_server.requests) == 3


@pytest.mark.django_db
def test_transient_errors_retry_then_fail_and_can_be_rerun(run_a, judge_config, judge_server):
    judge_server.fail(503)
    judge_server.fail(503)  # max_retries = 1: two attempts in all
    with pytest.raises(JudgeTransientError):
        judge_record(judge_config, _first(run_a))
    assert not Verdict.objects.exists()
    assert JudgeCall.objects.get().status == "error"
    judge_server.reply(GOOD)
    assert judge_record(judge_config, _first(run_a)).status == "ok"
    assert JudgeCall.objects.count() == 1  # the error row became the cached call


def test_cut_points():
    # floor(share·n + 0.5) clamped to [1, n−1]
    assert [cut_index(4, c) for c in ("early", "middle", "late")] == [1, 2, 3]
    assert [cut_index(3, c) for c in ("early", "middle", "late")] == [1, 2, 2]
    assert [cut_index(8, c) for c in ("early", "middle", "late")] == [2, 4, 6]
    assert [cut_index(2, c) for c in ("early", "middle", "late")] == [1, 1, 1]
    with pytest.raises(JudgeInputError):
        cut_index(1, "early")


@pytest.mark.django_db
def test_stepwise_prompt_and_label(run_a, judge_config, judge_server):
    judge_server.reply(CLEAN)
    v = judge_record(judge_config, _first(run_a), "stepwise", cut="middle", n_next=1)
    assert v.protocol == "stepwise-middle-1" and v.prompt_version == "stepwise_v1"
    prompt = judge_server.requests[0]["body"]["messages"][0]["content"]
    head, _, tail = prompt.partition("### Agent's predicted next step(s)")
    assert "[1] call: perception.classify_damage" in head  # the prefix: steps 0-1
    assert "[2] call: analysis.summarize_damage" in tail  # the judged step
    assert "[2] call" not in head.split("### Reference next step")[0]


@pytest.mark.django_db
def test_job_end_to_end_with_code_checker_then_cached_rerun(run_a, judge_config, judge_server, maintainer,
                                                            django_capture_on_commit_callbacks):
    ids = list(run_a.records.order_by("id").values_list("id", flat=True)[:4])
    for _ in ids:
        judge_server.reply(GOOD)
    with django_capture_on_commit_callbacks(execute=True):
        job = start_judge_job(maintainer, judge_config, ids)  # the Celery task runs eagerly on commit
    job.refresh_from_db()
    assert (job.status, job.total, job.done, job.n_ok, job.n_cached, job.n_failed) == ("done", 4, 4, 4, 0, 0)
    assert job.cost_usd == pytest.approx(4 * 0.08)
    assert Verdict.objects.filter(source="judge", status="ok").count() == 4
    assert Verdict.objects.filter(source="code").count() == 4  # the rule checker, shown apart
    assert len(judge_server.requests) == 4

    again = rerun_job(maintainer, job, enqueue=False)
    again = run_judge_job(again.pk)
    assert (again.status, again.n_ok, again.n_cached) == ("done", 4, 4)
    assert len(judge_server.requests) == 4  # all cache hits
    assert Verdict.objects.filter(source="code").count() == 4  # one per record and rules version


@pytest.mark.django_db
def test_job_paused_by_401_and_skips_short_trajectories(run_a, judge_config, judge_server, maintainer):
    judge_config.max_concurrency = 1
    judge_config.save()
    judge_server.fail(401)
    # t3_s09_task0 has an empty trajectory: step-wise cannot cut it (skipped, not failed)
    ids = list(run_a.records.filter(question_id__in=["t1_s05_task0", "t3_s09_task0"]).values_list("id", flat=True))
    job = start_judge_job(maintainer, judge_config, ids, protocol="stepwise", cuts=["early"], horizons=[1],
                          enqueue=False)
    job = run_judge_job(job.pk)
    assert job.status == JudgeJob.Status.PAUSED and job.total == 2
    kinds = sorted(e.get("kind") for e in job.errors)
    assert kinds == ["config", "skipped"]
    judge_config.refresh_from_db()
    assert judge_config.paused


@pytest.mark.django_db
def test_judge_command_with_progress(run_a, judge_config, judge_server):
    judge_server.reply(GOOD)
    judge_server.reply(CLEAN)
    out, err = io.StringIO(), io.StringIO()
    call_command("judge", "--config", "local", "--run", str(run_a.pk), "--sample", "2", "--no-code",
                 stdout=out, stderr=err)
    assert "done: 2 ok (0 cached)" in out.getvalue()
    assert "2/2" in err.getvalue()  # the progress bar
    assert Verdict.objects.filter(source="judge").count() == 2 and not Verdict.objects.filter(source="code").exists()
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="--config"):
        call_command("judge", "--config", "nope", "--run", str(run_a.pk), stdout=out, stderr=err)
    with pytest.raises(CommandError, match="release"):
        call_command("judge", "--config", "local", stdout=out, stderr=err)


@pytest.mark.django_db
def test_config_refuses_a_key_and_needs_the_role(maintainer, make_user, perms):
    with pytest.raises(ValueError, match="api_key_env"):
        save_judge_config(maintainer, name="x", base_url="http://127.0.0.1:1/v1", model="m", api_key_env=SECRET)
    cfg = save_judge_config(maintainer, name="x", base_url="http://127.0.0.1:1/v1", model="m", api_key_env="MY_KEY")
    assert cfg.api_key_env == "MY_KEY"
    from django.core.exceptions import PermissionDenied

    with pytest.raises(PermissionDenied):
        save_judge_config(make_user("sam", "scorer"), name="y", base_url="", model="m")
