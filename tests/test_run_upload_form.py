"""The runs page's upload form offers the gold sets to score against — the releases, newest first,
and the studio's current tasks — instead of a free-text release box."""
from __future__ import annotations

import re

import pytest
from support.judging import run_zip

from evaluation.models import RunImportJob
from releases.models import Release


@pytest.mark.django_db
def test_the_upload_form_offers_the_releases_and_the_current_tasks(client, maintainer, django_capture_on_commit_callbacks):
    # setup shortcut: two empty draft releases (the form reads only their versions, states and sizes)
    Release.objects.create(version="1.0.0", changelog="first", created_by=maintainer)
    Release.objects.create(version="1.1.0", changelog="second", created_by=maintainer)
    client.force_login(maintainer)
    html = client.get("/runs/").content.decode()
    select = re.search(r'<select name="release"[^>]*>(.*?)</select>', html, re.S)
    assert select, "the gold set is a select"
    options = re.findall(r'<option value="([^"]*)"[^>]*>([^<]*)</option>', select.group(1))
    assert options == [("", "the studio&#x27;s current tasks (unversioned, dated)"),
                       ("1.1.0", "release 1.1.0 (draft, 0 tasks)"), ("1.0.0", "release 1.0.0 (draft, 0 tasks)")]
    # a version that is not offered is refused at the field, nothing stored
    r = client.post("/runs/", {"archive": run_zip("qwen_AP", records=False), "agent": "qwen", "release": "9.9.9"})
    assert r.status_code == 400 and "Select a valid choice" in r.content.decode()
    assert not RunImportJob.objects.exists()
    # an offered one goes to the job's options
    with django_capture_on_commit_callbacks():
        r = client.post("/runs/", {"archive": run_zip("qwen_AP", records=False), "agent": "qwen", "release": "1.0.0"})
    assert r.status_code == 302, r.content.decode()[:2000]
    assert RunImportJob.objects.get().options["release"] == "1.0.0"


@pytest.mark.django_db
def test_the_upload_form_preselects_the_newest_published_release(client, maintainer):
    """With releases published, the gold set a run is usually scored on is the newest published one:
    1.1.0 is published, 1.2.0 a newer draft, so 1.1.0 is selected; without a published release the
    studio's current tasks are (the first test's page). Setup shortcut: statuses set directly."""
    Release.objects.create(version="1.0.0", changelog="first", created_by=maintainer, status=Release.Status.PUBLISHED)
    Release.objects.create(version="1.1.0", changelog="second", created_by=maintainer, status=Release.Status.PUBLISHED)
    Release.objects.create(version="1.2.0", changelog="draft", created_by=maintainer)
    client.force_login(maintainer)
    html = client.get("/runs/").content.decode()
    select = re.search(r'<select name="release"[^>]*>(.*?)</select>', html, re.S).group(1)
    assert re.findall(r'<option value="([^"]*)" selected>', select) == ["1.1.0"]
