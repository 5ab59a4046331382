"""Judge backend + runner against a local OpenAI-compatible server (http.server, 127.0.0.1,
port 0) driven through the real ``openai`` client.  No network, no real model."""
from __future__ import annotations

import json
import logging
import pickle
import traceback

import pytest
from support.judge_server import GOOD, GOOD_CLEAN, SECRET, FakeServer

from evaluation.judge import (
    JudgeConfigError,
    JudgeRequestError,
    JudgeTransientError,
    OpenAICompatibleBackend,
    StudioJudgeConfig,
    judge_run,
)
from evaluation.judge.runner import JudgeOutcome


@pytest.fixture
def server():
    s = FakeServer()
    yield s
    s.close()


@pytest.fixture
def sleeps():
    return []


@pytest.fixture
def backend(server, sleeps):
    return OpenAICompatibleBackend(
        base_url=server.base_url, model="judge-m", api_key=SECRET, json_mode="json_object",
        timeout=5, max_retries=2, backoff_base=0.001, backoff_max=0.01, sleep=sleeps.append,
    )


def test_good_verdict(server, backend):
    server.reply(GOOD)
    out = judge_run(backend, "judge this")
    assert isinstance(out, JudgeOutcome) and out.status == "ok" and out.ok
    v = out.verdict
    assert v.flags == ["E4"] and v.grade == 0.6 and v.is_correct is False
    assert "trajectory[5]" in v.reasons["E4"]
    assert out.raw_texts == [GOOD] and out.calls == 1
    assert (out.tokens_in, out.tokens_out, out.tokens) == (100, 20, 120)
    assert out.model == "judge-m" and out.latency_s >= 0
    req = server.requests[0]
    assert req["path"] == "/v1/chat/completions"
    assert req["body"]["temperature"] == 0
    assert req["body"]["response_format"] == {"type": "json_object"}
    assert req["body"]["messages"] == [{"role": "user", "content": "judge this"}]
    assert req["headers"]["authorization"] == f"Bearer {SECRET}"


def test_json_schema_and_none_modes(server, sleeps):
    for mode in ("json_schema", "none"):
        b = OpenAICompatibleBackend(server.base_url, "judge-m", SECRET, json_mode=mode, timeout=5, max_retries=0)
        server.reply(GOOD_CLEAN)
        resp = b.judge("p")
        assert resp.text == GOOD_CLEAN and resp.tokens_in == 100 and resp.attempts == 1
    schema_req, none_req = server.requests
    rf = schema_req["body"]["response_format"]
    assert rf["type"] == "json_schema" and rf["json_schema"]["strict"] is True
    assert set(rf["json_schema"]["schema"]["required"]) == {"errors", "grade", "is_correct", "reasoning"}
    assert "response_format" not in none_req["body"]


def test_429_then_success(server, backend, sleeps):
    server.fail(429, headers={"retry-after": "0"})
    server.reply(GOOD_CLEAN)
    resp = backend.judge("p")
    assert resp.attempts == 2 and "error_list" in resp.text
    assert len(sleeps) == 1 and 0 <= sleeps[0] <= 0.01
    assert len(server.requests) == 2


def test_500_then_success(server, backend, sleeps):
    server.fail(500)
    server.reply(GOOD_CLEAN)
    out = judge_run(backend, "p")
    assert out.status == "ok" and out.verdict.is_correct and out.verdict.grade == 1.0
    assert len(sleeps) == 1 and len(server.requests) == 2


def test_retries_are_bounded(server, backend, sleeps):
    for _ in range(3):
        server.fail(503)
    with pytest.raises(JudgeTransientError) as ei:
        backend.judge("p")
    assert ei.value.status == 503
    assert len(server.requests) == 3 and len(sleeps) == 2  # 1 try + max_retries=2


def test_malformed_then_reask_succeeds(server, backend):
    server.reply("I think the plan is mostly fine, grade about 0.8.")
    server.reply("```json\n" + GOOD + "\n```")
    out = judge_run(backend, "judge this")
    assert out.status == "ok" and out.calls == 2
    assert out.verdict.flags == ["E4"]
    assert any("re-ask" in n for n in out.verdict.notes)
    assert len(out.raw_texts) == 2 and out.raw_texts[0].startswith("I think")
    assert (out.tokens_in, out.tokens_out) == (200, 40)
    msgs = server.requests[1]["body"]["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant", "user"]
    assert msgs[0]["content"] == "judge this" and msgs[1]["content"].startswith("I think")
    assert "could not be read" in msgs[2]["content"]


def test_malformed_twice_fails_with_both_raw_texts(server, backend):
    server.reply("no json here")
    server.reply('{"is_correct": true, "reasoning": "forgot the flags and grade"}')
    out = judge_run(backend, "judge this")
    assert out.status == "failed" and out.verdict is None and not out.ok
    assert out.raw_texts == ["no json here", '{"is_correct": true, "reasoning": "forgot the flags and grade"}']
    assert out.error and out.calls == 2
    assert len(server.requests) == 2  # exactly one re-ask
    assert out.to_dict()["verdict"] is None


@pytest.mark.parametrize("status", [401, 403, 404])
def test_auth_errors_raise_config_error_without_key(server, backend, sleeps, status, caplog):
    # the server echoes the key back, as some providers do
    server.fail(status, {"error": {"message": f"Incorrect API key provided: {SECRET}", "code": "invalid_api_key"}})
    with caplog.at_level(logging.DEBUG):
        with pytest.raises(JudgeConfigError) as ei:
            backend.judge("p")
    exc = ei.value
    assert exc.status == status and len(server.requests) == 1 and sleeps == []
    text = str(exc) + repr(exc) + "".join(traceback.format_exception(exc))
    assert SECRET not in text and SECRET[:12] not in text and SECRET[-8:] not in text
    assert exc.__cause__ is None and exc.__suppress_context__
    assert SECRET not in caplog.text


def test_bad_request_is_request_error(server, backend):
    server.fail(400, {"error": {"message": "messages[0] is malformed: <echoed text>"}})
    with pytest.raises(JudgeRequestError) as ei:
        backend.judge("p")
    # the body's text is never echoed (an endpoint may put anything there)
    assert str(ei.value) == "judge endpoint rejected the request for model 'judge-m': HTTP 400"
    assert len(server.requests) == 1


def test_context_overflow_names_the_context_setting(server, backend):
    # OpenAI's code for a prompt longer than the context; the message points at the setting to change
    server.fail(400, {"error": {"message": "maximum context length is 2048 tokens", "code": "context_length_exceeded"}})
    with pytest.raises(JudgeRequestError) as ei:
        backend.judge("p")
    assert str(ei.value) == (
        "judge endpoint refused the prompt for model 'judge-m': HTTP 400 (context_length_exceeded): prompt and "
        "max_tokens (None) exceed the model's context; lower the configuration's context size so that prompts "
        "are trimmed to fit")
    assert len(server.requests) == 1


def test_unreachable_is_transient(sleeps):
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    b = OpenAICompatibleBackend(f"http://127.0.0.1:{port}/v1", "m", SECRET, timeout=2, max_retries=1,
                                backoff_base=0.001, sleep=sleeps.append)
    with pytest.raises(JudgeTransientError) as ei:
        b.judge("p")
    assert SECRET not in str(ei.value) and len(sleeps) == 1


def test_key_not_in_repr_or_pickle(backend):
    assert SECRET not in repr(backend) and SECRET not in str(backend)
    assert SECRET.encode() not in pickle.dumps(backend)
    cfg = StudioJudgeConfig(model="m", api_key=SECRET)
    assert SECRET not in repr(cfg) and SECRET not in json.dumps(cfg.parameters())


def test_config_from_env(server):
    env = {
        "STUDIO_JUDGE_BASE_URL": server.base_url, "STUDIO_JUDGE_MODEL": "judge-m",
        "STUDIO_JUDGE_API_KEY": SECRET, "STUDIO_JUDGE_JSON_MODE": "JSON_SCHEMA", "STUDIO_JUDGE_TIMEOUT": "7",
    }
    cfg = StudioJudgeConfig.from_env(environ=env)
    assert (cfg.base_url, cfg.model, cfg.api_key, cfg.json_mode, cfg.timeout) == (server.base_url, "judge-m", SECRET, "json_schema", 7.0)
    assert cfg.parameters() == {"model": "judge-m", "base_url": server.base_url, "json_mode": "json_schema",
                                "temperature": 0.0, "max_tokens": None}
    server.reply(GOOD_CLEAN)
    assert judge_run(cfg.build_backend(), "p").status == "ok"
    other = StudioJudgeConfig.from_env(prefix="X_", environ={"X_MODEL": "m2"})
    assert other.base_url is None and other.api_key is None and other.json_mode == "json_object"
    with pytest.raises(JudgeConfigError):
        StudioJudgeConfig.from_env(environ={})
    with pytest.raises(JudgeConfigError):
        StudioJudgeConfig.from_env(environ={"STUDIO_JUDGE_MODEL": "m", "STUDIO_JUDGE_JSON_MODE": "xml"})


def test_no_key_never_falls_back_to_openai_env(server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    b = OpenAICompatibleBackend(server.base_url, "m", api_key=None, max_retries=0)
    server.reply(GOOD_CLEAN)
    b.judge("p")
    assert SECRET not in server.requests[0]["headers"].get("authorization", "")


def test_tool_broken_reask_asks_for_the_class(server, backend):
    # a tool-broken answer without a category is refused; the re-ask names the five-class format
    server.reply('{"is_correct": false, "reason": "it retried"}')
    server.reply('{"category": 3, "category_name": "retry", "is_correct": false, "reason": "it retried"}')
    out = judge_run(backend, "classify this", setting="tool_broken")
    assert out.status == "ok" and out.calls == 2 and out.verdict.outcome == "retry" and out.verdict.is_correct is False
    reask = server.requests[1]["body"]["messages"][-1]["content"]
    assert "no category" in reask and '"category" (1 replacement' in reask
