"""Queues that explain themselves — a run imported (command line or a zip
uploaded on the runs page) queues a share of its records for human scoring; empty states say what
to do and who can; "n of m" while scoring and a summary at the end. A run's protocol is read
from the benchmark's ``<model>_<MODE>`` folder name.

Hand-worked: agent_a's run has 12 records; a share of 0.5 queues ceil(0.5·12) = 6 records, with 2
verdicts per record 12 slots.
"""
from __future__ import annotations

import io
import shutil

import pytest
from conftest import needs_shared
from django.core.management import call_command
from support.judging import AGENT_A, TASKS, flags, run_zip

from evaluation.models import AgentRun, ScoringItem
from evaluation.services.queue import claim_next, submit_item

pytestmark = pytest.mark.urls("support.judging")


@pytest.mark.django_db
def test_import_command_queues_a_share_and_reads_the_protocol(tmp_path, maintainer):
    run_dir = tmp_path / "gpt-4o_AP"
    shutil.copytree(needs_shared(AGENT_A), run_dir)
    out = io.StringIO()
    call_command("import_runs", str(run_dir), "--agent", "gpt-4o", "--tasks-dir", str(needs_shared(TASKS)), "--as-user", maintainer.username,
                 "--queue-share", "0.5", "--scaffold", "ReAct", stdout=out)
    run = AgentRun.objects.get()
    assert (run.protocol, run.scaffold) == ("AP", "ReAct")
    assert ScoringItem.objects.values("record_id").distinct().count() == 6 and ScoringItem.objects.count() == 12
    assert "6 records queued for human scoring (12 slots)" in out.getvalue()


@pytest.mark.django_db
def test_setting_queues_every_import(tmp_path, maintainer, settings):
    settings.STUDIO_QUEUE_ON_IMPORT_SHARE = 0.25  # ceil(0.25 * 12) = 3 records
    settings.STUDIO_HUMAN_VERDICTS_PER_RECORD = 3
    call_command("import_runs", str(needs_shared(AGENT_A)), "--agent", "a", "--tasks-dir", str(needs_shared(TASKS)), "--as-user", maintainer.username,
                 stdout=io.StringIO())
    assert ScoringItem.objects.values("record_id").distinct().count() == 3 and ScoringItem.objects.count() == 9
    assert AgentRun.objects.get().protocol == ""  # "agent_a": no _AP/_IF suffix


@pytest.mark.django_db
def test_upload_a_run_zip_from_the_runs_page(client, maintainer, settings, tmp_path, monkeypatch,
                                             django_capture_on_commit_callbacks):
    from evaluation.models import RunImportJob
    from evaluation.services import runs as services

    settings.STUDIO_JUDGE_RUNNER = "inline"  # the background job runs to its end after the commit

    # the uploaded run has no studio tasks: score it against the example task folder, as the
    # command's --tasks-dir does (the form's own choices are the studio's tasks or a release)
    real = services.import_run_dir
    monkeypatch.setattr(services, "import_run_dir", lambda *a, **kw: real(*a, tasks_dir=needs_shared(TASKS), **kw))
    client.force_login(maintainer)
    page = client.get("/runs/").content.decode()
    assert 'id="run-upload-form"' in page and "No run imported yet. Upload a run folder above" in page
    with django_capture_on_commit_callbacks() as after_commit:
        r = client.post("/runs/", {"archive": run_zip("qwen_IF"), "agent": "qwen", "queue_share": "0.5", "queue_n": "1",
                                   "scaffold": "ReWOO"})
    job = RunImportJob.objects.get()
    assert job.status == "queued" and not AgentRun.objects.exists()  # the request scored nothing
    (start,) = after_commit
    start()  # the job, as the runner starts it after the request's commit
    job.refresh_from_db()
    run = AgentRun.objects.get()
    assert r.status_code == 302 and r["Location"] == f"/runs/#import-{job.pk}"
    assert (job.status, job.run_id, job.queued) == ("done", run.pk, {"records": 6, "slots": 6})
    page = client.get("/runs/").content.decode()
    assert f'href="/runs/{run.pk}/">run {run.pk}</a>: done: 12 records scored' in page
    assert "6 records queued for human scoring (6 slots)" in page
    assert (run.protocol, run.scaffold, run.records.count()) == ("IF", "ReWOO", 12)
    assert ScoringItem.objects.count() == 6  # 6 records x 1 verdict
    # the run folder stays (predicted polygon files are read from it)
    assert (settings.STUDIO_DATA_ROOT / "runs").exists()


@pytest.mark.django_db
def test_hostile_zips_are_refused_and_leave_nothing(client, maintainer, settings):
    client.force_login(maintainer)
    evil = run_zip("x_AP", {"x_AP/../../escape.jsonl": "{}"})
    r = client.post("/runs/", {"archive": evil, "agent": "x"})
    assert r.status_code == 400 and "entry &#x27;x_AP/../../escape.jsonl&#x27;: paths must stay inside the run folder" in r.content.decode()
    not_zip = io.BytesIO(b"this is not a zip")
    not_zip.name = "run.zip"
    r = client.post("/runs/", {"archive": not_zip, "agent": "x"})
    assert r.status_code == 400 and "run.zip: not a zip archive" in r.content.decode()
    settings.STUDIO_RUN_UPLOAD_MAX_MB = 0.001  # about 1 kB: agent_a's files are larger
    r = client.post("/runs/", {"archive": run_zip("big"), "agent": "x"})
    assert r.status_code == 400 and "unpacks to more than" in r.content.decode()
    assert not AgentRun.objects.exists()
    for folder in ("runs", "uploads"):  # refused before anything is stored
        root = settings.STUDIO_DATA_ROOT / folder
        assert not root.exists() or not any(root.iterdir())
    assert client.post("/runs/", {"agent": "x"}).status_code == 400  # no file: the form says so


@pytest.mark.django_db
def test_empty_states_say_who_queues_runs_and_how(client, maintainer, make_user):
    client.force_login(make_user("sam", "scorer"))
    page = client.get("/scoring/").content.decode()
    assert "Reviewers and maintainers queue runs" in page
    client.force_login(maintainer)
    page = client.get("/scoring/").content.decode()
    assert "--queue-share" in page and "STUDIO_QUEUE_ON_IMPORT_SHARE" in page


@pytest.mark.django_db
def test_n_of_m_and_a_summary_at_the_end(client, run_a, maintainer, make_user):
    from evaluation.services.queue import enqueue_records

    ids = list(run_a.records.order_by("id").values_list("id", flat=True)[:3])
    enqueue_records(maintainer, ids, 1)  # 3 records, 1 slot each
    ana = make_user("ana", "scorer")
    client.force_login(ana)
    r = client.post("/scoring/next/")  # claiming is a POST (a GET claims nothing)
    page = client.get(r["Location"]).content.decode()
    assert 'id="queue-progress">item 1 of 3</span>' in page
    item = ScoringItem.objects.get(scorer=ana)
    submit_item(ana, item, errors=flags(), grade=1.0, seal=False)  # revisable
    page = client.get(client.post("/scoring/next/")["Location"]).content.decode()
    assert 'id="queue-progress">item 2 of 3</span>' in page
    for _ in range(2):
        submit_item(ana, claim_next(ana), errors=flags("E4"), grade=0.6)
    r = client.post("/scoring/next/")
    assert r.status_code == 302 and r["Location"] == "/scoring/done/"
    done = client.get(r["Location"]).content.decode()
    assert "You scored 3 items here" in done and "1 is still revisable" in done
    assert done.count("/records/") >= 3  # each verdict one click from its record page
