"""Judge egress (docs/security.md): a judge configuration names only an
allowed endpoint host (STUDIO_JUDGE_ALLOWED_HOSTS) and a declared key variable
(STUDIO_JUDGE_KEY_VARIABLES); errors never echo the endpoint's response body.

The reproduction: a configuration naming OTHER_SECRET as its key and a listener on 127.0.0.1 as its
endpoint; the listener received ``Authorization: Bearer <OTHER_SECRET's value>``."""
from __future__ import annotations

import pytest
from support.judge_server import FakeServer

from evaluation.judge.backends import JudgeConfigError, JudgeRequestError, OpenAICompatibleBackend
from evaluation.models import JudgeConfig
from evaluation.services.judge import backend_for, save_judge_config

OTHER = "other-secret-value-0123456789"


@pytest.fixture
def listener():
    s = FakeServer()
    yield s
    s.close()


@pytest.mark.django_db
def test_an_undeclared_key_variable_is_refused_and_nothing_is_sent(maintainer, listener, monkeypatch, settings):
    monkeypatch.setenv("OTHER_SECRET", OTHER)
    with pytest.raises(ValueError, match=r"^api_key_env: OTHER_SECRET is not a declared judge key variable"):
        save_judge_config(maintainer, name="x", base_url=listener.base_url, model="m", api_key_env="OTHER_SECRET")
    assert not JudgeConfig.objects.exists()
    # a row written before the setting (or by hand) is refused again when a backend is built
    cfg = JudgeConfig.objects.create(name="old", base_url=listener.base_url, model="m", api_key_env="OTHER_SECRET")
    with pytest.raises(JudgeConfigError, match="api_key_env: OTHER_SECRET is not a declared"):
        backend_for(cfg)
    assert listener.requests == []


@pytest.mark.django_db
def test_a_host_outside_the_allow_list_is_refused(maintainer, listener, settings, monkeypatch):
    settings.STUDIO_JUDGE_ALLOWED_HOSTS = ["api.openai.com"]  # a deployment's default: no loopback
    monkeypatch.setenv("STUDIO_JUDGE_API_KEY", "judge-key-abc")
    with pytest.raises(ValueError, match=r"^base_url: host '127.0.0.1' is not an allowed judge host"):
        save_judge_config(maintainer, name="x", base_url=listener.base_url, model="m", api_key_env="STUDIO_JUDGE_API_KEY")
    for url in ("http://169.254.169.254/v1", "http://api.openai.com.evil.example/v1", "http://[::1]:9/v1"):
        with pytest.raises(ValueError, match="^base_url: host"):
            save_judge_config(maintainer, name="x", base_url=url, model="m")
    cfg = JudgeConfig.objects.create(name="old", base_url=listener.base_url, model="m", api_key_env="STUDIO_JUDGE_API_KEY")
    with pytest.raises(JudgeConfigError, match="base_url: host '127.0.0.1'"):
        backend_for(cfg)
    assert listener.requests == []
    # the SDK's default endpoint (empty URL) is api.openai.com: allowed
    assert save_judge_config(maintainer, name="openai", base_url="", model="m").base_url == ""


def test_default_settings_allow_only_openai_and_the_declared_variables(monkeypatch):
    """The settings module's defaults, read in a subprocess without the tests' environment."""
    import json
    import os
    import subprocess
    import sys

    from conftest import REPO

    env = {k: v for k, v in os.environ.items() if not k.startswith("STUDIO_JUDGE_") and k != "STUDIO_DEBUG"}
    code = ("import json, studio.settings as s; "
            "print(json.dumps([s.STUDIO_JUDGE_ALLOWED_HOSTS, s.STUDIO_JUDGE_KEY_VARIABLES, s.DEBUG]))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert json.loads(out.stdout) == [["api.openai.com"], ["STUDIO_JUDGE_API_KEY", "OPENAI_API_KEY"], False]
    env["STUDIO_JUDGE_BASE_URL"] = "http://judge.internal:8080/v1"  # the operator's endpoint joins the list
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert json.loads(out.stdout)[0] == ["api.openai.com", "judge.internal"]


def test_errors_never_echo_the_response_body(listener):
    """A 400 and a 401 whose bodies carry text (an echoed key, an internal page): the messages
    hold the status and the error's type/code identifiers only."""
    body = {"error": {"message": "internal: DATABASE_URL=postgres://u:pw@db/x", "type": "invalid_request_error",
                      "code": "bad key!"}}
    b = OpenAICompatibleBackend(listener.base_url, "m", api_key="k-123", max_retries=0, timeout=5)
    listener.fail(400, body)
    with pytest.raises(JudgeRequestError) as exc:
        b.judge("hi")
    assert str(exc.value) == "judge endpoint rejected the request for model 'm': HTTP 400 (invalid_request_error)"
    listener.fail(401, "<html>an internal page with secrets</html>")
    with pytest.raises(JudgeConfigError) as exc:
        b.judge("hi")
    assert str(exc.value) == "judge endpoint refused model 'm': HTTP 401"


class RedirectingEndpoint:
    """A stdlib ``http.server`` on 127.0.0.1 answering every POST with ``status`` and ``Location:
    target``, beside a second one (the redirect's target) that records what reaches it."""

    def __init__(self, status: int):
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.hits: list[tuple[str, str, bytes]] = []  # (server, path, body) of every request received
        outer = self

        def handler(name: str, answer):
            class H(BaseHTTPRequestHandler):
                def log_message(self, *a):
                    pass

                def do_POST(self):
                    body = self.rfile.read(int(self.headers.get("content-length") or 0))
                    outer.hits.append((name, self.path, body))
                    answer(self)

                do_GET = do_POST

            return H

        def redirect(h):
            h.send_response(status)
            h.send_header("Location", f"{outer.target_url}/chat/completions")
            h.send_header("content-length", "0")
            h.end_headers()

        def ok(h):
            import json

            from support.judge_server import GOOD, completion

            data = json.dumps(completion(GOOD)).encode()
            h.send_response(200)
            h.send_header("content-type", "application/json")
            h.send_header("content-length", str(len(data)))
            h.end_headers()
            h.wfile.write(data)

        self.servers = []
        for name, answer in (("target", ok), ("endpoint", redirect)):
            srv = ThreadingHTTPServer(("127.0.0.1", 0), handler(name, answer))
            threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()
            self.servers.append(srv)
            setattr(self, f"{name}_url", f"http://127.0.0.1:{srv.server_address[1]}/v1")

    def close(self):
        for srv in self.servers:
            srv.shutdown()
            srv.server_close()


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_the_judge_never_follows_a_redirect(status):
    """The issue's attack: an allowed endpoint answers a redirect (there a 307 to
    ``http://2130706433:8199``, 127.0.0.1 written as one number) and the SDK's client re-POSTed the
    prompt to it. Here the target is a second local server: it must receive nothing, and the call
    ends in a configuration error naming the status and the location (no retry: one request)."""
    ep = RedirectingEndpoint(status)
    try:
        b = OpenAICompatibleBackend(ep.endpoint_url, "m", api_key="k-redirect-0123456789", max_retries=3, timeout=5)
        with pytest.raises(JudgeConfigError) as err:
            b.judge("SECRET PROMPT: judge this trajectory")
    finally:
        ep.close()
    assert [h[0] for h in ep.hits] == ["endpoint"]  # one request, to the endpoint only
    assert b"SECRET PROMPT" in ep.hits[0][2]
    msg = str(err.value)
    assert f"HTTP {status} redirecting to '{ep.target_url}/chat/completions'" in msg
    assert "redirects are not followed" in msg and err.value.status == status
