"""The judge against real servers: llama-cpp-python's OpenAI-compatible server with SmolLM2-135M
(``tests/conftest_llm.py``; ``make llm``) and a slow HTTP server of our own on a socket.

A 135M model judges badly: these tests assert the pipeline, never the model's verdicts — every
record of the job gets a stored raw answer and a verdict or a recorded parse failure, the answer
cap is honoured (the server's own ``usage.completion_tokens``), the job ends within a bound; a read
timeout is sent once; llama.cpp's HTTP 500 to ``json_schema`` is not retried and names the mode.

Bounds: a holistic prompt of the scoring examples is at most 2298 of SmolLM2's tokens (8121
bytes). Unloaded (stack-notes, 2 threads: prompt 304 tokens/s, generation 122 tokens/s) a call
takes 2298/304 + 48/122 ≈ 8 s and the two-record job, re-asks included, about half a minute;
measured here under a load average of 10 on 2 cores (2026-12-05), the prompt went at 20 tokens/s,
about 115 s a call, and the job took 9 minutes. It is given 15; without an answer cap SmolLM2 generated until
its context was full (173–188 s *per call* in the demo, at a 2048-token context).
"""
from __future__ import annotations

import json
import socket
import threading
import time

import pytest
from conftest_llm import count_tokens, start_llm_server

from evaluation.judge import JudgeConfigError, JudgeTransientError, OpenAICompatibleBackend
from evaluation.judge.fit import estimate_tokens
from evaluation.models import JudgeCall, JudgeConfig, JudgeJob, Verdict
from evaluation.services.judge import prepare_judgement, run_judge_job, select_records, start_judge_job

#: the answer cap of the end-to-end job (tokens); small, so that a 135M model's answer is often cut
CAP = 48
#: the server's context (tokens): at the bound of 1 byte a token an 8.1 kB prompt needs 8121 + the cap + a
#: re-ask's 1632; SmolLM2 was trained on 8192, which the prompts' real 1600–2300 tokens stay far below
N_CTX = 16384
JOB_BOUND_S = 900


@pytest.fixture(scope="module")
def smollm():
    """The real model server with a context that holds the example prompts: ``(base_url, model_name)``."""
    with start_llm_server(n_ctx=N_CTX) as served:
        yield served


@pytest.fixture
def llm_config(db, smollm, settings):
    base_url, model = smollm
    settings.STUDIO_JUDGE_ALLOWED_HOSTS = ["127.0.0.1"]
    settings.STUDIO_JUDGE_RUNNER = "inline"
    settings.STUDIO_JUDGE_MAX_RETRIES = 2
    settings.STUDIO_JUDGE_BACKOFF_S = 0.01
    settings.STUDIO_JUDGE_TIMEOUT_S = 300
    # no response_format: llama.cpp's grammar sampling of the verdict schema generated 0.8 tokens/s here
    # (json_object_schema works, a 96-token answer took 120 s); the pipeline is what is tested
    return JudgeConfig.objects.create(name="smollm2-plain", base_url=base_url, model=model,
                                      json_mode="none", max_tokens=CAP, context_tokens=N_CTX, max_concurrency=1)


@pytest.mark.django_db
def test_judge_job_with_the_real_model_stores_every_answer_within_the_cap(run_a, llm_config, smollm):
    ids = select_records(run_id=run_a.pk, sample=2, seed=1)
    job = start_judge_job(None, llm_config, ids, protocol="holistic", enqueue=False)
    started = time.monotonic()
    job = run_judge_job(job.pk)
    took = time.monotonic() - started
    assert job.status == JudgeJob.Status.DONE, job.errors
    assert took < JOB_BOUND_S
    assert (job.done, job.n_ok + job.n_failed) == (2, 2)
    for rid in ids:
        call = JudgeCall.objects.get(record_id=rid, config=llm_config)
        assert call.raw_texts and all(isinstance(t, str) for t in call.raw_texts)  # every answer kept
        assert 1 <= len(call.raw_texts) <= 2  # the answer, and at most one re-ask
        assert 0 < call.tokens_out <= CAP * len(call.raw_texts)  # the server's usage: each answer within the cap
        assert call.tokens_in > 0
        verdict = Verdict.objects.get(record_id=rid, source="judge")
        assert verdict.judge_name == "smollm2-plain v1@holistic_v2"
        if verdict.status == "ok":
            assert call.status == "ok" and verdict.grade is not None
        else:  # a recorded parse failure: every answer in the verdict, the reason in the call
            assert call.status == "failed" and call.error
            assert all(t in verdict.raw for t in call.raw_texts)


@pytest.mark.django_db
def test_the_token_estimate_over_counts_the_real_tokenizer(run_a, llm_config, smollm):
    # the bound of evaluation.judge.fit (CHARS_PER_TOKEN = 2): every holistic prompt of the example
    # run, counted by SmolLM2's own tokenizer, is below the estimate the context fitting uses
    llm_config.context_tokens = 0
    for record in run_a.records.all():
        prompt = prepare_judgement(llm_config, record).prompt
        real = count_tokens(smollm[0], prompt)
        assert real < estimate_tokens(prompt), (record.question_id, real, estimate_tokens(prompt))
    # numbers are where a looser bound fails: SmolLM2 splits digits one by one (1.0–1.14 bytes a token)
    coordinates = json.dumps([[round(-95.3 + i * 0.000137, 6), round(29.7 + i * 0.000071, 6)] for i in range(300)])
    integers = json.dumps(list(range(10000, 10600)))
    for text in (coordinates, integers):
        assert count_tokens(smollm[0], text) <= estimate_tokens(text)
        assert count_tokens(smollm[0], text) > len(text.encode()) / 2  # a 2-bytes-a-token bound would under-count them


def test_json_schema_mode_on_llama_cpp_is_refused_once_naming_the_mode(smollm):
    base_url, model = smollm
    sleeps: list[float] = []
    backend = OpenAICompatibleBackend(base_url, model, json_mode="json_schema", timeout=60, max_retries=3,
                                      max_tokens=16, sleep=sleeps.append)
    with pytest.raises(JudgeConfigError) as ei:
        backend.judge('Reply with {"ok": true}')
    assert str(ei.value).startswith("judge endpoint refused json_mode 'json_schema' (HTTP 500): this server does not "
                                    "support it; choose another JSON mode")
    assert ei.value.status == 500 and sleeps == []  # not retried


class SlowServer:
    """A real HTTP server on 127.0.0.1 that reads each request and answers only after ``delay``
    seconds (a server still generating); it counts the requests it received."""

    def __init__(self, delay: float):
        self.delay, self.requests = delay, 0
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn):
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            head, _, body = data.partition(b"\r\n\r\n")
            length = int(next((ln.split(b":")[1] for ln in head.split(b"\r\n") if ln.lower().startswith(b"content-length")), 0))
            while len(body) < length:
                body += conn.recv(65536)
            self.requests += 1
            self.stop.wait(self.delay)
            try:
                conn.sendall(b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n")
            except OSError:
                pass

    def close(self):
        self.stop.set()
        self.sock.close()


def test_a_read_timeout_is_not_sent_again():
    slow = SlowServer(delay=5.0)
    sleeps: list[float] = []
    try:
        backend = OpenAICompatibleBackend(f"http://127.0.0.1:{slow.port}/v1", "m", timeout=1.0, max_retries=3,
                                          sleep=sleeps.append)
        started = time.monotonic()
        with pytest.raises(JudgeTransientError) as ei:
            backend.judge("judge this")
        assert time.monotonic() - started < 4.0  # gave up after the one timeout, did not wait for the server
        time.sleep(0.5)  # a retry, had there been one, would have arrived by now
        assert slow.requests == 1 and sleeps == []
        assert str(ei.value) == ("judge endpoint did not answer within 1 s for model 'm' (read timeout, attempt 1; "
                                 "not retried: the server may still be generating)")
    finally:
        slow.close()
