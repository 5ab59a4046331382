"""The judge's answer cap, context fitting, bounded re-ask, raw answers and per-configuration names.

Hand-worked values:
- ``fit_prompt`` with context 4096 and max_tokens 1024: the budget is 4096 − 1024 − the re-ask
  reserve ((600 + 1000) / 1 + 2·16 = 1632) − one message's overhead (16) = 1424 tokens, i.e.
  1424 bytes at the bound of 1 byte a token.
- A 5000-character first answer is repeated in the re-ask as its first 600 characters plus
  `` …[4400 more characters not repeated]``.
"""
from __future__ import annotations

import json

import pytest
from support.judge_server import completion
from support.judging import GOOD

from evaluation.judge import OpenAICompatibleBackend, judge_run
from evaluation.judge.fit import REASK_RESERVE_TOKENS, PromptTooLong, fit_prompt, prompt_budget
from evaluation.judge.runner import LENGTH_NOTE
from evaluation.models import JudgeCall, Verdict
from evaluation.services.judge import judge_record, save_judge_config


def test_reask_reserve_and_budget_by_hand():
    assert REASK_RESERVE_TOKENS == 1632
    assert prompt_budget(4096, 1024) == 1424
    assert prompt_budget(0, 1024) is None  # 0: not checked


def test_fit_prompt_clips_observations_until_the_prompt_fits():
    obs = "x" * 3000

    def render(n: int) -> str:
        return "head " + obs[:n] + " tail"

    # whole: 1500 + 10 bytes → 1510 tokens, within a budget of 8192 − 1024 − 1632 − 16 = 5520: nothing trimmed
    assert fit_prompt(render, 8192, 1024) == ("head " + "x" * 1500 + " tail", {})
    # context 4096: budget 1424 tokens; 1510 is over, observations of 600 characters fit (610 tokens)
    text, trimmed = fit_prompt(render, 4096, 1024)
    assert text == "head " + "x" * 600 + " tail"
    assert trimmed == {"context_tokens": 4096, "max_tokens": 1024, "budget_tokens": 1424, "estimated_tokens_before": 1510,
                       "max_obs_chars": 600, "chars_removed": 900, "estimated_tokens": 610}
    with pytest.raises(PromptTooLong, match="does not fit the context of 4096 tokens with max_tokens 1024"):
        fit_prompt(lambda n: "y" * 5000, 4096, 1024)  # nothing can be cut from this prompt


def test_reask_repeats_a_clipped_answer_and_says_it_was_cut(judge_server):
    long_answer = '{"errors": {"E1": {"present": false, "reason": "' + "z" * 5000
    cut = completion(long_answer)
    cut["choices"][0]["finish_reason"] = "length"
    judge_server.script.append((200, cut, {}))
    judge_server.reply(GOOD)
    backend = OpenAICompatibleBackend(judge_server.base_url, "judge-m", timeout=5, max_retries=0, max_tokens=64)
    out = judge_run(backend, "judge this plan")
    assert out.ok and out.raw_texts == [long_answer, GOOD] and out.finish_reasons == ["length", "stop"]
    first, second = (r["body"] for r in judge_server.requests)
    assert first["max_tokens"] == 64 and second["max_tokens"] == 64
    assert [m["role"] for m in second["messages"]] == ["user", "assistant", "user"]
    assert second["messages"][1]["content"] == long_answer[:600] + f" …[{len(long_answer) - 600} more characters not repeated]"
    assert second["messages"][2]["content"].startswith(LENGTH_NOTE)


def test_a_reask_without_answer_keeps_the_first_answer(judge_server):
    judge_server.reply("not json at all")
    judge_server.fail(400, {"error": {"message": "bad"}})
    backend = OpenAICompatibleBackend(judge_server.base_url, "judge-m", timeout=5, max_retries=0)
    out = judge_run(backend, "judge this plan")
    assert out.status == "failed" and out.raw_texts == ["not json at all"] and out.calls == 1
    assert "the re-ask got no answer: judge endpoint rejected the request for model 'judge-m': HTTP 400" in out.error


@pytest.mark.django_db
def test_unreadable_answers_are_stored_and_shown_on_the_record_page_and_api(client, maintainer, run_a, judge_config,
                                                                          judge_server):
    judge_server.reply("first: no JSON")
    judge_server.reply("second: still none")
    rec = run_a.records.get(question_id="t1_s05_task0")
    v = judge_record(judge_config, rec)
    assert v.status == "failed"
    call = JudgeCall.objects.get(record=rec)
    assert call.raw_texts == ["first: no JSON", "second: still none"] and call.status == "failed"
    client.force_login(maintainer)
    page = client.get(f"/records/{rec.pk}/").content.decode()
    assert 'id="judge-calls"' in page and "first: no JSON" in page and "second: still none" in page
    api = client.get(f"/api/records/{rec.pk}/").json()
    assert [c["raw_texts"] for c in api["judge_calls"]] == [["first: no JSON", "second: still none"]]
    assert api["judge_calls"][0]["config"] == "local" and api["judge_calls"][0]["status"] == "failed"
    assert api["judge_calls"][0]["config_version"] == 1


@pytest.mark.django_db
def test_max_tokens_is_sent_and_two_configurations_of_one_model_are_two_judges(run_a, judge_config, judge_server,
                                                                               maintainer, settings):
    from evaluation.selectors.judge_report import judge_report_rows

    other = save_judge_config(maintainer, name="local-schema", base_url=judge_server.base_url, model="judge-m",
                              json_mode="json_object_schema", api_key_env=judge_config.api_key_env, max_tokens=300,
                              context_tokens=32768)
    rec = run_a.records.get(question_id="t1_s05_task0")
    judge_server.reply(GOOD)
    judge_server.reply(GOOD)
    a = judge_record(judge_config, rec)
    b = judge_record(other, rec)
    assert (a.judge_name, b.judge_name) == ("local v1@holistic_v2", "local-schema v1@holistic_v2")
    first, second = (r["body"] for r in judge_server.requests)
    assert first["max_tokens"] == 1024 and first["response_format"] == {"type": "json_object"}
    assert second["max_tokens"] == 300 and second["response_format"]["type"] == "json_object"
    assert json.dumps(second["response_format"]["schema"]).startswith("{")  # the verdict schema beside JSON mode
    judges = {r["judge"] for r in judge_report_rows(sources=("judge",))}
    assert judges == {"local v1@holistic_v2", "local-schema v1@holistic_v2"}

    # a saved change of what the judge is sent is a new version, named apart from the old verdicts
    again = save_judge_config(maintainer, name="local-schema", base_url=judge_server.base_url, model="judge-m",
                              json_mode="json_object_schema", api_key_env=judge_config.api_key_env, max_tokens=400,
                              context_tokens=32768, instance=other)
    assert again.version == 2
    judge_server.reply(GOOD)
    newest = judge_record(again, rec)
    assert newest.judge_name == "local-schema v2@holistic_v2"
    assert JudgeCall.objects.get(verdict=newest).config_version == 2 and JudgeCall.objects.get(verdict=b).config_version == 1
    assert Verdict.objects.filter(source="judge").count() == 3
