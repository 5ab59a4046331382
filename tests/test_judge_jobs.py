"""The judge as a background job everywhere — starting a job never blocks the
request (the embedded default runs it in a thread), the job page follows it, failed jobs look
failed with their first error, and a configuration can be tested with one tiny request."""
from __future__ import annotations

import threading
import time

import pytest
from support.judging import GOOD

from evaluation.models import JudgeJob, Verdict
from evaluation.services import judge as services_judge

pytestmark = pytest.mark.urls("support.judging")


@pytest.mark.django_db(transaction=True)
def test_starting_a_judge_job_returns_before_the_judge_answers(client, maintainer, run_a, judge_config, judge_server,
                                                               settings, monkeypatch):
    settings.STUDIO_JUDGE_RUNNER = "thread"  # the embedded default (no broker)
    gate = threading.Event()
    real = services_judge._call_backend

    def held_call(backend, prompt, *args, **kwargs):  # the judge "thinks" until the test lets it answer
        assert gate.wait(20), "the test never released the judge"
        return real(backend, prompt, *args, **kwargs)

    monkeypatch.setattr(services_judge, "_call_backend", held_call)
    judge_server.reply(GOOD)
    judge_server.reply(GOOD)
    client.force_login(maintainer)
    t0 = time.monotonic()
    r = client.post(f"/runs/{run_a.pk}/judge/", {"config": "local", "protocol": "holistic", "sample": "2"})
    elapsed = time.monotonic() - t0
    job = JudgeJob.objects.get()
    # the request came back while the judge was still held: it did not wait for a single call
    assert r.status_code == 302 and r["Location"] == f"/judge/jobs/{job.pk}/" and not gate.is_set()
    assert elapsed < 5.0
    assert JudgeJob.objects.get(pk=job.pk).status in ("queued", "running")
    page = client.get(r["Location"]).content.decode()
    assert 'id="job-live"' in page  # the page polls while the job runs
    gate.set()
    for _ in range(200):
        job.refresh_from_db()
        if job.status not in ("queued", "running"):
            break
        time.sleep(0.05)
    assert (job.status, job.done, job.n_ok) == ("done", 2, 2)
    assert Verdict.objects.filter(source="judge", status="ok").count() == 2


@pytest.mark.django_db
def test_a_failed_job_looks_failed_with_its_first_error(client, maintainer, judge_config):
    job = JudgeJob.objects.create(config=judge_config, record_ids=[1, 2], total=2, done=2, n_ok=1,
                                  status=JudgeJob.Status.FAILED,
                                  errors=[{"record": 2, "protocol": "holistic", "error": "HTTP 500 after 2 tries",
                                           "kind": "transient"}])
    client.force_login(maintainer)
    html = client.get(f"/judge/jobs/{job.pk}/").content.decode()
    assert 'class="progress failed"' in html and 'class="status-failed">failed' in html
    assert 'id="job-first-error">First error: record 2 holistic: HTTP 500 after 2 tries' in html
    assert 'id="job-live"' not in html


def test_a_paused_job_says_why_once_even_after_the_configuration_is_resumed(client, maintainer, judge_config):
    """A job paused on a refused key keeps its reason in its own errors (the configuration's
    ``paused_reason`` is cleared when it is resumed): the page says it once, in the pause line,
    and lists only the further errors (here none)."""
    reason = "judge endpoint refused model 'm': HTTP 401"
    job = JudgeJob.objects.create(config=judge_config, record_ids=[1], total=1, done=0, status=JudgeJob.Status.PAUSED,
                                  errors=[{"record": None, "protocol": None, "error": reason, "kind": "config"}])
    client.force_login(maintainer)
    html = client.get(f"/judge/jobs/{job.pk}/").content.decode()
    assert f'id="job-paused">The job paused: {reason} — fix the configuration' in html.replace("&#x27;", "'")
    assert html.replace("&#x27;", "'").count(reason) == 1
    assert 'id="job-first-error"' not in html and '<ul id="job-errors"></ul>' in html


@pytest.mark.django_db(transaction=True)
def test_a_crashed_background_job_ends_failed(judge_config, monkeypatch, settings):
    settings.STUDIO_JUDGE_RUNNER = "thread"
    job = JudgeJob.objects.create(config=judge_config, record_ids=[1], total=1)

    def boom(job_id, **kw):
        raise RuntimeError("disk full")

    monkeypatch.setattr(services_judge, "run_judge_job", boom)
    thread = services_judge.dispatch_judge_job(job.pk)  # the real runner: a thread of its own
    thread.join(20)
    assert not thread.is_alive()
    job.refresh_from_db()
    assert job.status == "failed" and job.errors[0]["error"] == "the job crashed: RuntimeError: disk full"


@pytest.mark.django_db
def test_testing_a_configuration_reports_latency_model_and_json_mode(client, maintainer, judge_config, judge_server,
                                                                       make_user):
    client.force_login(maintainer)
    assert "Test this configuration" in client.get("/judge/configs/").content.decode()
    judge_server.reply('{"ok": true}')
    page = client.post(f"/judge/configs/{judge_config.pk}/test/", follow=True).content.decode()
    assert "local: answered in" in page and "by model judge-m" in page and "JSON mode works" in page
    assert len(judge_server.requests) == 1  # one tiny request
    assert services_judge.CONFIG_TEST_PROMPT in judge_server.requests[0]["body"]["messages"][-1]["content"]
    judge_server.reply("Sure! Here you go: ok")
    page = client.post(f"/judge/configs/{judge_config.pk}/test/", follow=True).content.decode()
    assert "JSON mode does NOT work" in page
    judge_server.fail(401)
    page = client.post(f"/judge/configs/{judge_config.pk}/test/", follow=True).content.decode()
    assert "local: no answer after" in page and "JudgeConfigError" in page
    judge_config.refresh_from_db()
    assert not judge_config.paused and not Verdict.objects.exists()  # a test stores nothing
    client.force_login(make_user("sam", "scorer"))
    assert client.post(f"/judge/configs/{judge_config.pk}/test/").status_code == 403
