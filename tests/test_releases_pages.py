"""Release API and pages: list (pinned query count), create, publish, export job with zip, diff."""
from __future__ import annotations

import io
import zipfile

import pytest
from conftest import SCORING_EXAMPLES, needs_shared
from django.urls import include, path
from support.stored import downloaded

from releases.services import lifecycle, release_import

# The lead includes these in studio/api_urls.py and frontend/urls.py; until then the tests mount them here.
urlpatterns = [
    path("api/", include("releases.api")),
    path("", include("frontend.urls_releases")),
    path("", include("studio.urls")),
]
pytestmark = pytest.mark.urls(__name__)


@pytest.fixture
def maint(db, make_user, client):
    user = make_user("mia", "maintainer")
    release_import.import_release_dir(None, needs_shared(SCORING_EXAMPLES), make_release=False)
    client.force_login(user)
    return user


def test_api_create_publish_export_diff(maint, client):
    r = client.post("/api/releases/", {"version": "1.0", "changelog": ""}, content_type="application/json")
    assert r.status_code == 400 and r.json()["detail"].startswith("version: '1.0' is not a semantic version")
    r = client.post("/api/releases/", {"version": "1.0.0", "changelog": "first"}, content_type="application/json")
    assert r.status_code == 201
    body = r.json()
    assert (body["status"], len(body["items"]), body["counts"]) == ("draft", 12, {"t1": 2, "t2": 3, "t3": 3, "t4": 2, "t5": 2})  # tasks per file, counted in the files
    r = client.post("/api/releases/1.0.0/publish/")
    assert r.status_code == 200 and r.json()["status"] == "published" and len(r.json()["content_sha256"]) == 64
    assert client.post("/api/releases/1.0.0/publish/").status_code == 409
    r = client.patch("/api/releases/1.0.0/", {"changelog": "x"}, content_type="application/json")
    assert r.status_code == 409 and "published and cannot be changed" in r.json()["detail"]
    r = client.post("/api/releases/1.0.0/exports/")
    assert r.status_code == 202
    job = r.json()
    assert (job["status"], job["done"], job["total"]) == ("succeeded", 12, 12)
    r = client.get(f"/api/releases/1.0.0/exports/{job['id']}/")
    assert r.status_code == 200 and r.json()["zip"] == "dora-1.0.0.zip"
    ids = [i["task_id"] for i in body["items"]][:3]
    r = client.post("/api/releases/", {"version": "1.1.0", "task_ids": ids}, content_type="application/json")
    assert r.status_code == 201
    r = client.get("/api/releases/diff/", {"a": "1.0.0", "b": "1.1.0"})
    assert r.status_code == 200
    d = r.json()
    assert (len(d["added"]), len(d["removed"]), len(d["changed"]), d["unchanged"]) == (0, 9, 0, 3)
    assert client.get("/api/releases/diff/", {"a": "1.0.0", "b": "7.0.0"}).status_code == 400
    assert [x["version"] for x in client.get("/api/releases/").json()["results"]] == ["1.1.0", "1.0.0"]


def test_api_refuses_a_scorer(db, make_user, client):
    client.force_login(make_user("sam", "scorer"))
    assert client.post("/api/releases/", {"version": "1.0.0"}, content_type="application/json").status_code == 403


def test_pages_list_detail_publish_export_download_diff(maint, client):
    r = client.post("/releases/", {"version": "1.0.0", "changelog": "<b>first</b>"})
    assert r.status_code == 302 and r["Location"] == "/releases/1.0.0/"
    page = client.get("/releases/1.0.0/").content.decode()
    assert "&lt;b&gt;first&lt;/b&gt;" in page and 'id="publish-form"' in page  # changelog escaped
    # Publish is confirmed (the form's dialog sets confirm=1): without it nothing is published
    assert client.post("/releases/1.0.0/publish/").status_code == 302
    assert "not published: confirm it" in client.get("/releases/1.0.0/").content.decode()
    assert client.post("/releases/1.0.0/publish/", {"confirm": "1"}).status_code == 302
    page = client.get("/releases/1.0.0/").content.decode()
    assert 'id="publish-form"' not in page and "can no longer be changed" in page
    client.post("/releases/1.0.0/export/")
    from releases.selectors import export_jobs

    job = export_jobs("1.0.0")[0]
    page = client.get("/releases/1.0.0/").content.decode()
    assert f"/releases/1.0.0/exports/{job['id']}/download/" in page
    r = client.get(f"/releases/1.0.0/exports/{job['id']}/download/")
    if r.status_code == 200:  # without a bucket the view streams the zip (with one, a presigned link)
        assert r["Content-Type"] == "application/zip"
    names = zipfile.ZipFile(io.BytesIO(downloaded(r))).namelist()
    assert "dora-1.0.0/tasks/t5_multi_modal_report_synthesis.json" in names
    page = client.get("/releases/diff/", {"a": "1.0.0", "b": "1.0.0"}).content.decode()
    assert "0 added, 0 removed, 0 changed, 12 unchanged." in page


def test_release_list_query_count_is_constant(maint, client, django_assert_max_num_queries):
    from annotation.models import Task

    tasks = list(Task.objects.all())
    for i in range(6):
        lifecycle.create_release(maint, f"1.{i}.0", tasks=tasks)
    # session + user + groups (permission check), the releases with their counts, the releasable count
    with django_assert_max_num_queries(6):
        r = client.get("/releases/")
    assert r.status_code == 200
    assert r.content.decode().count('data-version="') == 6
