"""The judge configuration form says what this server allows and warns on a key variable that is
not set (``frontend.views.scoring.JudgeConfigForm``, ``evaluation.services.judge.key_variable_unset``)."""
from __future__ import annotations

import pytest

from evaluation.models import JudgeConfig

FORM = {"name": "local", "base_url": "http://127.0.0.1:8080/v1", "model": "smollm2", "json_mode": "json_object",
        "api_key_env": "", "temperature": "0", "max_concurrency": "2", "cost_per_1k_in": "0", "cost_per_1k_out": "0"}


@pytest.mark.django_db
def test_the_form_names_the_allowed_hosts_and_key_variables(client, maintainer, settings):
    settings.STUDIO_JUDGE_ALLOWED_HOSTS = ["api.openai.com"]
    settings.STUDIO_JUDGE_KEY_VARIABLES = ["STUDIO_JUDGE_API_KEY", "OPENAI_API_KEY"]
    client.force_login(maintainer)
    html = client.get("/judge/configs/").content.decode()
    assert "Hosts this server allows: api.openai.com (STUDIO_JUDGE_ALLOWED_HOSTS; add 127.0.0.1" in html
    assert "allowed: STUDIO_JUDGE_API_KEY, OPENAI_API_KEY (STUDIO_JUDGE_KEY_VARIABLES)" in html
    # the example of the form is refused on this server, and the refusal is at the field
    response = client.post("/judge/configs/", FORM)
    assert response.status_code == 400 and not JudgeConfig.objects.exists()
    assert "127.0.0.1" in response.content.decode()


@pytest.mark.django_db
def test_saving_with_an_unset_key_variable_warns(client, maintainer, settings, monkeypatch):
    settings.STUDIO_JUDGE_ALLOWED_HOSTS = ["127.0.0.1"]
    settings.STUDIO_JUDGE_KEY_VARIABLES = ["STUDIO_JUDGE_API_KEY"]
    monkeypatch.delenv("STUDIO_JUDGE_API_KEY", raising=False)
    client.force_login(maintainer)
    page = client.post("/judge/configs/", dict(FORM, api_key_env="STUDIO_JUDGE_API_KEY"), follow=True)
    html = page.content.decode()
    assert JudgeConfig.objects.filter(name="local").exists()
    assert ("Judge configuration local saved, but the environment variable STUDIO_JUDGE_API_KEY "
            "(the judge&#x27;s API key) is not set in this server&#x27;s environment") in html


@pytest.mark.django_db
def test_saving_with_a_set_key_variable_or_none_says_saved(client, maintainer, settings, monkeypatch):
    settings.STUDIO_JUDGE_ALLOWED_HOSTS = ["127.0.0.1"]
    settings.STUDIO_JUDGE_KEY_VARIABLES = ["STUDIO_JUDGE_API_KEY"]
    monkeypatch.setenv("STUDIO_JUDGE_API_KEY", "sk-test-value")
    client.force_login(maintainer)
    for name, variable in (("with-key", "STUDIO_JUDGE_API_KEY"), ("no-key", "")):
        html = client.post("/judge/configs/", dict(FORM, name=name, api_key_env=variable), follow=True).content.decode()
        assert f"Judge configuration {name} saved." in html and "is not set" not in html
