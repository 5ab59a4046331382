"""Judge egress (issue 15, promise 5; docs/security.md): a judge configuration names only an
allowed endpoint host (STUDIO_JUDGE_ALLOWED_HOSTS) and a declared key variable
(STUDIO_JUDGE_KEY_VARIABLES); errors never echo the endpoint's response body.

The reproduction: a configuration naming OTHER_SECRET as its key and a listener on 127.0.0.1 as its
endpoint; the listener received ``Authorization: Bearer <OTHER_SECRET's value>``."""
from __future__ import annotations

import pytest

from evaluation.judge.backends import JudgeConfigError, JudgeRequestError, OpenAICompatibleBackend
from evaluation.models import JudgeConfig
from evaluation.services_judge import backend_for, save_judge_config
from test_judge_backend import FakeServer

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
