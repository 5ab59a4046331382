"""Scoring after a zip upload never runs in the request: the upload stores the
zip and starts a background job (evaluation.background, here the in-process "inline" runner
started as the request's on-commit hook starts it); the runs page and the API show its progress,
result or first error (styled failed), and a crashed job is re-run from its stored zip.

Hand-worked: agent_a's example run has 12 records (the example set's twelve tasks); with no
studio tasks the upload's records name no known task, so the import fails
with the evaluator's "question ids with no task in the studio" message.
"""
from __future__ import annotations

from pathlib import Path

import pytest
from support.judging import TASKS, run_zip

from evaluation.models import AgentRun, RunImportJob
from evaluation.services import runs as services
from studio import storage

pytestmark = pytest.mark.urls("support.judging")


@pytest.fixture
def inline(settings):
    settings.STUDIO_JUDGE_RUNNER = "inline"


def _stored(archive: str) -> bool:
    """Whether the uploaded zip is kept: a key of the bucket with one, else a local file."""
    return storage.exists(archive) if storage.uses_bucket() else Path(archive).is_file()


def _upload(client, capture, name="qwen_AP", records=True, **extra):
    with capture() as after_commit:
        r = client.post("/runs/", {"archive": run_zip(name, records=records), "agent": "qwen", **extra})
    assert r.status_code == 302, r.content.decode()[:2000]
    job = RunImportJob.objects.order_by("-id").first()
    assert job.status == "queued" and _stored(job.archive)
    return job, after_commit


@pytest.mark.django_db
def test_a_failed_import_shows_its_first_error_styled_failed(client, maintainer, inline,
                                                             django_capture_on_commit_callbacks):
    client.force_login(maintainer)
    job, after_commit = _upload(client, django_capture_on_commit_callbacks)
    for cb in after_commit:
        cb()
    job.refresh_from_db()
    assert job.status == "failed" and "question ids with no task in the studio" in job.error
    assert not AgentRun.objects.exists() and _stored(job.archive)  # kept for a re-run
    page = client.get("/runs/").content.decode()
    assert f'id="import-{job.pk}" class="import-job status-row-failed"' in page
    assert 'class="import-status status-failed">failed</b><div class="progress failed">' in page
    assert "question ids with no task in the studio" in page and 'class="import-rerun"' in page
    api = client.get(f"/api/run-imports/{job.pk}/").json()
    assert api["status"] == "failed" and api["run"] is None and "no task in the studio" in api["error"]


@pytest.mark.django_db
def test_a_crashed_job_is_rerun_from_its_stored_zip(client, maintainer, inline, monkeypatch,
                                                    django_capture_on_commit_callbacks):
    real = services.import_run_dir
    calls = []

    def flaky(*a, **kw):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("disk vanished")  # not an import error: a crash
        return real(*a, tasks_dir=TASKS, **kw)

    monkeypatch.setattr(services, "import_run_dir", flaky)
    client.force_login(maintainer)
    job, after_commit = _upload(client, django_capture_on_commit_callbacks, queue_share="0")
    after_commit[0]()
    job.refresh_from_db()
    assert (job.status, job.error, job.attempts) == ("failed", "the job crashed: RuntimeError: disk vanished", 1)
    # the page re-runs it; the stored zip is imported this time and then removed
    with django_capture_on_commit_callbacks() as again:
        r = client.post(f"/runs/imports/{job.pk}/rerun/")
    assert r.status_code == 302 and r["Location"] == f"/runs/#import-{job.pk}"
    job.refresh_from_db()
    assert job.status == "queued" and job.error == ""
    again[0]()
    job.refresh_from_db()
    run = AgentRun.objects.get()
    assert (job.status, job.run_id, job.attempts, run.protocol) == ("done", run.pk, 2, "AP")
    assert run.records.count() == 12 and job.queued == {"records": 0, "slots": 0}
    assert not _stored(job.archive)
    # a done job is not re-run
    r = client.post(f"/api/run-imports/{job.pk}/rerun/")
    assert r.status_code == 409 and "is done: only a failed job" in r.json()["detail"]


@pytest.mark.django_db
def test_import_jobs_need_the_import_role(client, maintainer, make_user, inline, django_capture_on_commit_callbacks):
    client.force_login(maintainer)
    job, _ = _upload(client, django_capture_on_commit_callbacks, records=False)
    client.force_login(make_user("sam", "scorer"))
    assert client.get(f"/api/run-imports/{job.pk}/").status_code == 403
    assert client.post(f"/runs/imports/{job.pk}/rerun/").status_code == 403
    assert 'id="run-imports"' not in client.get("/runs/").content.decode()


@pytest.mark.django_db
def test_a_lost_job_is_offered_again_once_its_worker_is_known_dead(client, maintainer, inline, monkeypatch, settings,
                                                                   django_capture_on_commit_callbacks):
    """A job left ``running`` by a dead worker never ends by itself. While its worker may be alive
    (another host's process, heartbeat 10 s old) a re-run is refused (409); once its heartbeat is
    older than STUDIO_JOB_STALE_AFTER_S (600 s) the page says it was lost and a re-run is taken at
    once (no hour's wait), ending with the run's 12 records."""
    from datetime import timedelta

    from django.utils import timezone

    real = services.import_run_dir
    monkeypatch.setattr(services, "import_run_dir", lambda *a, **kw: real(*a, tasks_dir=TASKS, **kw))
    client.force_login(maintainer)
    job, _ = _upload(client, django_capture_on_commit_callbacks)  # its start is never run: the worker "died"
    now = timezone.now()
    other_host = "4242.0000beef"  # a process of another host: its pid says nothing here
    RunImportJob.objects.filter(pk=job.pk).update(status="running", started_at=now - timedelta(minutes=59),
                                                  heartbeat_at=now - timedelta(seconds=10), worker=other_host)
    r = client.post(f"/api/run-imports/{job.pk}/rerun/")
    assert r.status_code == 409 and "only a failed job (or one whose worker was lost)" in r.json()["detail"]
    RunImportJob.objects.filter(pk=job.pk).update(heartbeat_at=now - timedelta(seconds=settings.STUDIO_JOB_STALE_AFTER_S + 1))
    page = client.get("/runs/").content.decode()
    assert 'data-stale="1"' in page and "its worker was lost" in page and 'class="import-rerun"' in page
    with django_capture_on_commit_callbacks() as again:
        assert client.post(f"/runs/imports/{job.pk}/rerun/").status_code == 302
    again[0]()
    job.refresh_from_db()
    assert job.status == "done" and job.run.records.count() == 12
