"""One handler per write operation: where a page form and an API endpoint
write the same thing, the page reads its form with the API's input serializer and calls the same
service, so both accept and refuse the same input.

Three operations are covered: starting a judge job over a run (the run page's button,
``frontend.views.scoring.run_judge``, and ``POST /api/judge/jobs/``; serializer
``evaluation.api.JudgeJobIn``), creating a release (the releases page and ``POST /api/releases/``;
``releases.api.ReleaseCreateIn``) and adjudicating a record (the adjudication page and
``POST /api/records/<id>/adjudication/``; ``evaluation.api.AdjudicationIn``). The refusals are
the serializers' documented bounds: ``horizons`` 1–3, ``version`` at most 40 characters, ``grade``
a number in [0, 1].
"""
from __future__ import annotations

import pytest
from django.contrib.messages import get_messages

from evaluation.models import JudgeJob
from releases.models import Release

pytestmark = pytest.mark.urls("support.judging")


@pytest.mark.django_db
def test_the_run_page_and_the_api_refuse_the_same_bad_judge_job(client, maintainer, run_a, judge_config):
    client.force_login(maintainer)
    page = client.post(f"/runs/{run_a.pk}/judge/", {"config": "local", "protocol": "holistic", "horizons": "4"})
    assert page.status_code == 302 and page["Location"] == f"/runs/{run_a.pk}/"
    assert any("horizons" in str(m) for m in get_messages(page.wsgi_request))
    api = client.post("/api/judge/jobs/", {"config": "local", "run": run_a.pk, "horizons": [4]},
                      content_type="application/json")
    assert api.status_code == 400 and "horizons" in api.json()
    assert not JudgeJob.objects.exists()


@pytest.mark.django_db
def test_the_run_page_and_the_api_hand_the_service_the_same_arguments(client, maintainer, run_a, judge_config,
                                                                       monkeypatch):
    """The serializer's defaults apply on the page too: no cuts ticked means all three (early,
    middle, late), an empty sample means every record; a ticked checkbox is ``blind=True``."""
    from evaluation import api as evaluation_api
    from frontend.views import scoring as scoring_views

    calls = []

    def record(user, config, ids, **kw):
        calls.append((config.name, list(ids), kw))
        return JudgeJob.objects.create(config=config)

    monkeypatch.setattr(evaluation_api, "start_judge_job", record)  # both modules import it by name
    monkeypatch.setattr(scoring_views, "start_judge_job", record)
    client.force_login(maintainer)
    page = client.post(f"/runs/{run_a.pk}/judge/", {"config": "local", "protocol": "stepwise", "horizons": ["1", "2"],
                                                    "sample": "", "blind": "on"})
    assert page.status_code == 302 and page["Location"].startswith("/judge/jobs/")
    api = client.post("/api/judge/jobs/", {"config": "local", "run": run_a.pk, "protocol": "stepwise",
                                           "horizons": [1, 2], "blind": True}, content_type="application/json")
    assert api.status_code == 201, api.content
    assert len(calls) == 2 and calls[0] == calls[1]
    name, ids, kw = calls[0]
    assert name == "local" and len(ids) == run_a.records.count() == 12
    assert kw == {"protocol": "stepwise", "cuts": ["early", "middle", "late"], "horizons": [1, 2], "blind": True}


@pytest.mark.django_db
def test_the_releases_page_and_the_api_refuse_the_same_bad_version(client, maintainer, perms):
    client.force_login(maintainer)
    long = "1.0.0-" + "x" * 40  # 46 characters: over ReleaseCreateIn's max_length of 40
    page = client.post("/releases/", {"version": long, "changelog": ""})
    assert page.status_code == 302
    assert any("version" in str(m) and "40" in str(m) for m in get_messages(page.wsgi_request))
    api = client.post("/api/releases/", {"version": long}, content_type="application/json")
    assert api.status_code == 400 and "version" in api.json()
    assert not Release.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("grade", ["abc", "1.5"])
def test_the_adjudication_page_and_the_api_refuse_the_same_grade(grade, disputed_records, make_user, client):
    """The adjudication form goes through ``evaluation.api.AdjudicationIn`` (grade a number in
    [0, 1]) like ``POST /api/records/<id>/adjudication/``; nothing is written on either side."""
    from evaluation.models import Adjudication

    rec = disputed_records["recs"][0]
    client.force_login(make_user("rita", "reviewer"))
    page = client.post(f"/adjudication/records/{rec.pk}/", {"E6": "on", "grade": grade, "rationale": "r", "token": "t"})
    assert page.status_code == 400 and "grade:" in page.content.decode()
    api = client.post(f"/api/records/{rec.pk}/adjudication/", {"errors": {"E6": True}, "grade": grade, "rationale": "r"},
                      content_type="application/json")
    assert api.status_code == 400 and "grade" in api.json()
    assert not Adjudication.objects.exists()
