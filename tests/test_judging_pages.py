"""Judge pages: configurations (the key is never stored or shown), starting a job from the run
page (runs eagerly against the local fake server), the job's progress page and the job list."""
from __future__ import annotations

import pytest
from support.judging import GOOD, SECRET

from evaluation.models import JudgeConfig, JudgeJob, Verdict

pytestmark = pytest.mark.urls("support.judging")


@pytest.mark.django_db
def test_config_page_creates_and_never_takes_a_key(client, maintainer, perms):
    client.force_login(maintainer)
    base = {"name": "vllm", "base_url": "http://127.0.0.1:8000/v1", "model": "qwen", "json_mode": "json_object",
            "temperature": "0", "max_concurrency": "2", "cost_per_1k_in": "0", "cost_per_1k_out": "0"}
    bad = client.post("/judge/configs/", {**base, "api_key_env": SECRET})
    assert bad.status_code == 400 and not JudgeConfig.objects.exists()
    assert SECRET not in bad.content.decode().split('id="judge-config-form"')[0]  # not echoed in the list
    ok = client.post("/judge/configs/", {**base, "api_key_env": "VLLM_KEY"})
    assert ok.status_code == 302 and JudgeConfig.objects.get().api_key_env == "VLLM_KEY"
    page = client.get("/judge/configs/").content.decode()
    assert "VLLM_KEY" in page and "qwen" in page


@pytest.mark.django_db
def test_run_page_button_starts_a_job(client, maintainer, run_a, judge_config, judge_server, make_user,
                                      django_capture_on_commit_callbacks, django_assert_max_num_queries):
    client.force_login(maintainer)
    page = client.get(f"/runs/{run_a.pk}/").content.decode()
    assert 'id="judge-run-form"' in page and "local (judge-m)" in page
    judge_server.reply(GOOD)
    judge_server.reply(GOOD)
    with django_capture_on_commit_callbacks(execute=True):
        r = client.post(f"/runs/{run_a.pk}/judge/", {"config": "local", "protocol": "holistic", "sample": "2"})
    job = JudgeJob.objects.get()
    assert r.status_code == 302 and r["Location"] == f"/judge/jobs/{job.pk}/"
    job.refresh_from_db()
    assert (job.status, job.done, job.n_ok) == ("done", 2, 2)
    html = client.get(r["Location"]).content.decode()
    assert 'id="job-status" class="status-done">done' in html and 'id="job-done">2</span>/2' in html
    api = client.get(f"/api/judge/jobs/{job.pk}/").json()
    assert api["done"] == 2 and api["status"] == "done"
    with django_assert_max_num_queries(6):
        assert client.get("/judge/jobs/").status_code == 200
    # a judge verdict on a record page is shown to a maintainer, the rule checker apart
    rec_id = job.record_ids[0]
    rec_page = client.get(f"/records/{rec_id}/").content.decode()
    assert "local v1@holistic_v2" in rec_page and 'id="code-verdicts"' in rec_page
    # scorers see no judge button
    client.force_login(make_user("sam", "scorer"))
    assert 'id="judge-run-form"' not in client.get(f"/runs/{run_a.pk}/").content.decode()
    assert client.post(f"/runs/{run_a.pk}/judge/", {"config": "local", "protocol": "holistic"}).status_code == 403
    assert Verdict.objects.filter(source="judge").count() == 2
