"""Shared fixtures of the judging / scoring-queue / adjudication tests (no tests here), and the
URLconf those tests name with ``pytest.mark.urls("support.judging")``.

Records come from ``../shared/scoring-examples/runs/agent_a`` imported against its task folder
(12 records, no images needed); the judge is a local OpenAI-compatible HTTP server on 127.0.0.1
(:class:`support.judge_server.FakeServer`), so no real model is ever called.
"""
from __future__ import annotations

import io
import json
import zipfile

import pytest
from conftest import SCORING_EXAMPLES, needs_shared
from django.urls import include, path

from evaluation.models import Verdict
from evaluation.services.verdicts import submit_human_verdict
from support.judge_server import GOOD_CLEAN as CLEAN  # noqa: F401  (re-exported)
from support.judge_server import SECRET, FakeServer

#: agent_a's run of the scoring examples (12 records) and the task folder it is scored against.
AGENT_A = SCORING_EXAMPLES / "runs" / "agent_a"
TASKS = SCORING_EXAMPLES / "tasks"
KEY_ENV = "STUDIO_TEST_JUDGE_KEY"
CODES = ("E1", "E2", "E3", "E4", "E5", "E6")

#: A well-formed studio-dialect answer: E4 set with a reason, grade 0.6.
GOOD = json.dumps({
    "errors": {c: {"present": c == "E4", "reason": "step 2 uses trajectory[3]" if c == "E4" else ""} for c in CODES},
    "grade": 0.6, "is_correct": False, "reasoning": "main flow right, one dependency broken",
})

#: Page URLs of this area, for tests that run before frontend/urls.py includes them.
urlpatterns = [path("", include("frontend.urls_scoring")), path("", include("studio.urls"))]


def flags(*on: str) -> dict:
    """The human verdict's error flags, ``{"E1": bool, …, "E6": bool}``, with the codes ``on`` set."""
    return {c: c in on for c in CODES}


@pytest.fixture
def perms():
    """The judging, queue and adjudication rows are part of studio.permissions.PERMISSIONS."""


@pytest.fixture
def run_a(db, make_user, perms):
    """agent_a's run imported against the example task folder (12 records)."""
    from evaluation.services.runs import import_run_dir

    owner = make_user("importer", "maintainer")
    return import_run_dir(owner, needs_shared(AGENT_A), "agent_a", tasks_dir=needs_shared(TASKS))


@pytest.fixture
def judge_server():
    """A local judge server (:class:`support.judge_server.FakeServer`), closed after the test."""
    s = FakeServer()
    yield s
    s.close()


@pytest.fixture
def judge_config(db, judge_server, monkeypatch, settings):
    """A judge configuration pointed at ``judge_server`` (key in the environment, fast retries,
    jobs run inline)."""
    from evaluation.models import JudgeConfig

    monkeypatch.setenv(KEY_ENV, SECRET)
    settings.STUDIO_JUDGE_BACKOFF_S = 0.001
    settings.STUDIO_JUDGE_MAX_RETRIES = 1
    settings.STUDIO_JUDGE_TIMEOUT_S = 5
    settings.STUDIO_JUDGE_RUNNER = "inline"  # jobs run to their end in the test; the thread runner is tested apart
    return JudgeConfig.objects.create(name="local", base_url=judge_server.base_url, model="judge-m",
                                      api_key_env=KEY_ENV, max_concurrency=2, cost_per_1k_in=0.5, cost_per_1k_out=1.5)


def _judge(rec, ok, grade, *on, protocol="holistic", source="judge"):
    return Verdict.objects.create(record=rec, source=source, judge_name="judge-m@holistic_v1", status="ok",
                                  is_correct=ok, grade=grade, errors=flags(*on), protocol=protocol,
                                  prompt_version="holistic_v1")


@pytest.fixture
def disputed_records(run_a, make_user):
    """Verdicts on run_a's first five records, one case each (scorers ana and bo): returns
    ``{"recs": [r0..r4], "ana": user, "bo": user}``."""
    ana, bo = make_user("ana", "scorer"), make_user("bo", "scorer")
    recs = list(run_a.records.order_by("id")[:5])
    h = lambda u, r, *on, grade: submit_human_verdict(u, r, errors=flags(*on), grade=grade)  # noqa: E731
    # r0: two humans disagree on the flags (E4 vs E5)
    h(ana, recs[0], "E4", grade=0.6), h(bo, recs[0], "E5", grade=0.6)
    # r1: two humans agree (Δ 0.2, same flag)
    h(ana, recs[1], "E4", grade=0.6), h(bo, recs[1], "E4", grade=0.4)
    # r2: a human and the judge disagree on correctness
    h(ana, recs[2], grade=1.0)
    _judge(recs[2], False, 0.6, "E5")
    # r3: one human; the rule checker and a step-wise judgement disagree with it but take no part
    h(ana, recs[3], grade=1.0)
    _judge(recs[3], False, 0.2, "E6", source="code")
    _judge(recs[3], False, 0.6, "E4", protocol="stepwise-middle-1")
    # r4: a failed judge verdict does not count
    h(ana, recs[4], grade=1.0)
    Verdict.objects.create(record=recs[4], source="judge", judge_name="judge-m@holistic_v1", status="failed", raw="?")
    return {"recs": recs, "ana": ana, "bo": bo}


def run_zip(folder_name: str, extra: dict | None = None, *, records: bool = True) -> io.BytesIO:
    """agent_a's run zipped under the top folder ``folder_name`` (the benchmark names it
    ``<model>_<MODE>``), with ``extra`` entries (name → text) added; named ``<folder_name>.zip``.
    ``records`` false: for tests that check the form or the job only, never the records, which then
    run on a clone without ../shared too (with an empty run folder there)."""
    src = needs_shared(AGENT_A) if records else AGENT_A
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for f in src.rglob("*"):
            if f.is_file():
                zf.write(f, f"{folder_name}/{f.relative_to(AGENT_A)}")
        for name, data in (extra or {}).items():
            zf.writestr(name, data)
    buf.seek(0)
    buf.name = f"{folder_name}.zip"
    return buf
