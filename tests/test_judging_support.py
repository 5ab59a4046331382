"""Shared fixtures of the judging / scoring-queue / adjudication tests (no tests here).

Records come from ``../shared/scoring-examples/runs/agent_a`` imported against its task folder
(12 records, no images needed); the judge is a local OpenAI-compatible HTTP server on 127.0.0.1
(``FakeServer`` of ``test_judge_backend``), so no real model is ever called.
"""
from __future__ import annotations

import json

import pytest
from django.urls import include, path

from conftest import SCORING_EXAMPLES
from test_judge_backend import FakeServer, completion  # noqa: F401  (re-exported)

SECRET = "sk-test-SECRET-0123456789abcdefXYZ"
KEY_ENV = "STUDIO_TEST_JUDGE_KEY"
CODES = ("E1", "E2", "E3", "E4", "E5", "E6")

#: A well-formed studio-dialect answer: E4 set with a reason, grade 0.6.
GOOD = json.dumps({
    "errors": {c: {"present": c == "E4", "reason": "step 2 uses trajectory[3]" if c == "E4" else ""} for c in CODES},
    "grade": 0.6, "is_correct": False, "reasoning": "main flow right, one dependency broken",
})
#: A clean answer in the error_list dialect.
CLEAN = json.dumps({"is_correct": True, "grade": 1.0, "error_list": [0, 0, 0, 0, 0, 0], "reasoning": "ok"})

#: Page URLs of this area, for tests that run before frontend/urls.py includes them.
urlpatterns = [path("", include("frontend.urls_scoring")), path("", include("studio.urls"))]


def flags(*on: str) -> dict:
    return {c: c in on for c in CODES}


@pytest.fixture
def perms():
    """The judging, queue and adjudication rows are part of studio.permissions.PERMISSIONS."""


@pytest.fixture
def run_a(db, make_user, perms):
    """agent_a's run imported against the example task folder (12 records)."""
    from evaluation.services.runs import import_run_dir

    owner = make_user("importer", "maintainer")
    return import_run_dir(owner, SCORING_EXAMPLES / "runs" / "agent_a", "agent_a", tasks_dir=SCORING_EXAMPLES / "tasks")


@pytest.fixture
def judge_server():
    s = FakeServer()
    yield s
    s.close()


@pytest.fixture
def judge_config(db, judge_server, monkeypatch, settings):
    from evaluation.models import JudgeConfig

    monkeypatch.setenv(KEY_ENV, SECRET)
    settings.STUDIO_JUDGE_BACKOFF_S = 0.001
    settings.STUDIO_JUDGE_MAX_RETRIES = 1
    settings.STUDIO_JUDGE_TIMEOUT_S = 5
    settings.STUDIO_JUDGE_RUNNER = "inline"  # jobs run to their end in the test; the thread runner is tested apart
    return JudgeConfig.objects.create(name="local", base_url=judge_server.base_url, model="judge-m",
                                      api_key_env=KEY_ENV, max_concurrency=2, cost_per_1k_in=0.5, cost_per_1k_out=1.5)
