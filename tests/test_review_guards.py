"""Review and release guards, role-aware navigation and the 403 page.

The task is the Joplin T2 of tests/test_review_workflow.py; roles come from studio.permissions'
table, so the expected links and roles below are read off that table by hand: Review needs
task.review/task.return (reviewer, maintainer), Scoring queue.claim/queue.manage (scorer, reviewer,
maintainer), Adjudication verdict.adjudicate (reviewer, maintainer), Agreement and the Judge report
agreement.view (reviewer, maintainer), Judges judge.configure/run
(maintainer), a new task task.create (author, maintainer).
"""
from __future__ import annotations

import os
import re

import pytest
from conftest import drop_published_releases, sign_in
from support.joplin import import_joplin, t2_payload

from annotation.models import AuditEvent, Task
from annotation.services import review


def _approvable(client, people, event):
    """A submitted T2 task with a succeeded replay, in review by rey, with one open comment."""
    client.force_login(people["ada"])
    tid = client.post("/api/tasks/", t2_payload(event), content_type="application/json").json()["id"]
    assert client.post(f"/api/tasks/{tid}/replays/", {}, content_type="application/json").json()["status"] == "succeeded"
    assert client.post(f"/api/tasks/{tid}/transitions/", {"action": "submit"}, content_type="application/json").status_code == 200
    client.force_login(people["rey"])
    client.post(f"/api/tasks/{tid}/transitions/", {"action": "start_review"}, content_type="application/json")
    client.post(f"/api/tasks/{tid}/comments/", {"body": "Is 20 m the rule?", "step_index": 1}, content_type="application/json")
    return tid


@pytest.fixture
def people(make_user):
    return {"ada": make_user("ada", "author", password="ada-pass-1"), "rey": make_user("rey", "reviewer", password="rey-pass-1"),
            "sam": make_user("sam", "scorer", password="sam-pass-1"), "max": make_user("max", "maintainer", password="max-pass-1")}


@pytest.mark.django_db
def test_approve_with_an_open_comment_needs_a_recorded_confirmation(client, people):
    tid = _approvable(client, people, import_joplin(raster=False))
    task = Task.objects.get(pk=tid)
    with pytest.raises(review.OpenCommentsError) as exc:
        review.approve(people["rey"], task)
    assert exc.value.open_count == 1 and Task.objects.get(pk=tid).status == "in_review"
    resp = client.post(f"/api/tasks/{tid}/transitions/", {"action": "approve"}, content_type="application/json")
    assert resp.status_code == 409 and resp.json()["open_comments"] == 1
    assert [(c["author"], c["body"], c["step_index"]) for c in resp.json()["open_comment_threads"]] == \
        [("rey", "Is 20 m the rule?", 1)]
    resp = client.post(f"/api/tasks/{tid}/transitions/", {"action": "approve", "acknowledge_open_comments": True},
                       content_type="application/json")
    assert resp.status_code == 200 and resp.json()["status"] == "approved"
    last = AuditEvent.objects.filter(task_id=tid).last()
    assert (last.action, last.reason) == ("approve", "approved with 1 open comment(s), confirmed by rey")


@pytest.mark.django_db
def test_publish_through_the_api_with_an_open_comment_needs_a_recorded_confirmation(client, people):
    """The API asks as the page does: without ``acknowledge_open_comments`` a 409
    that lists the open thread (rey's one comment on step 1, from ``_approvable``); with it, the
    release is published and the task's audit trail records the confirmation."""
    from releases.models import Release
    from releases.services import lifecycle

    tid = _approvable(client, people, import_joplin(raster=False))
    task = review.approve(people["rey"], Task.objects.get(pk=tid), acknowledge_open_comments=True)
    lifecycle.create_release(people["max"], "1.0.0", "first", tasks=[task])
    with pytest.raises(lifecycle.ReleaseOpenCommentsError):
        lifecycle.publish_release(people["max"], Release.objects.get(version="1.0.0"))

    client.force_login(people["max"])
    url = "/api/releases/1.0.0/publish/"
    for body in ({}, {"acknowledge_open_comments": False}):
        resp = client.post(url, body, content_type="application/json")
        assert resp.status_code == 409, resp.content
        assert resp.json()["open_comments"] == 1
        threads = resp.json()["open_comment_threads"]
        assert [(c["task"], c["author"], c["body"], c["step_index"]) for c in threads] == \
            [(task.question_id, "rey", "Is 20 m the rule?", 1)]
        assert "1 review comment(s) are open" in resp.json()["detail"]
    assert Release.objects.get(version="1.0.0").status == "draft"
    assert not AuditEvent.objects.filter(action="publish_with_open_comments").exists()

    resp = client.post(url, {"acknowledge_open_comments": True}, content_type="application/json")
    assert resp.status_code == 200 and resp.json()["status"] == "published", resp.content
    event = AuditEvent.objects.get(task_id=tid, action="publish_with_open_comments")
    assert event.actor == people["max"] and event.reason == "release 1.0.0 published with 1 open comment(s), confirmed"


@pytest.mark.django_db
@pytest.mark.parametrize("who, links", [
    ("ada", ["Events", "Tasks", "Runs", "Leaderboard", "Releases", "API"]),
    ("sam", ["Events", "Tasks", "Runs", "Leaderboard", "Releases", "Scoring", "API"]),
    ("rey", ["Events", "Tasks", "Review", "Runs", "Leaderboard", "Releases", "Scoring", "Adjudication", "Agreement", "Judge report", "API"]),
    ("max", ["Events", "Tasks", "Review", "Runs", "Leaderboard", "Releases", "Scoring", "Adjudication", "Agreement", "Judge report", "Judges", "API"]),
])
def test_navigation_offers_the_pages_of_the_role(client, people, who, links):
    client.force_login(people[who])
    html = client.get("/tasks/").content.decode()
    nav = re.search(r'<nav class="mainnav".*?</nav>', html, re.S).group(0)
    assert re.findall(r">([^<]+)</a>", nav) == links
    assert ('id="new-task"' in html) == (who in ("ada", "max"))


@pytest.mark.django_db
def test_403_page_names_the_missing_role(client, people):
    import_joplin(raster=False)
    client.force_login(people["ada"])
    resp = client.get("/adjudication/")
    assert resp.status_code == 403
    text = re.sub(r"\s+", " ", resp.content.decode())
    assert "It needs the roles <b>reviewer</b> or <b>maintainer</b> (to verdict.adjudicate)" in text
    assert "with the role author" in text and "<nav" in text  # the site's frame, not a bare "403 Forbidden"
    for who in ("rey", "sam"):
        client.force_login(people[who])
        resp = client.get("/tasks/new/")
        assert resp.status_code == 403
        assert "<b>author</b> or <b>maintainer</b> (to task.create)" in re.sub(r"\s+", " ", resp.content.decode())


@pytest.mark.browser
@pytest.mark.skipif(not os.path.exists("/usr/bin/chromium"), reason="Debian chromium is not installed")
@pytest.mark.django_db(transaction=True)
def test_approve_and_publish_ask_first_in_the_browser(live_server, browser, client, people):
    from releases.services.lifecycle import create_release

    tid = _approvable(client, people, import_joplin(raster=False))
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    p = ctx.new_page()
    errors, dialogs = [], []
    p.on("pageerror", lambda e: errors.append(str(e)))
    answer = {"accept": False}

    def on_dialog(d):
        dialogs.append(d.message)
        d.accept() if answer["accept"] else d.dismiss()
    p.on("dialog", on_dialog)
    try:
        for user, pw in (("rey", "rey-pass-1"),):
            sign_in(p, live_server.url, user, pw)
        # the nav stays on one line at 1280 px
        heights = p.evaluate("() => [...document.querySelectorAll('.mainnav a')].map(a => a.getBoundingClientRect().top)")
        assert len(set(heights)) == 1, heights
        p.goto(f"{live_server.url}/tasks/{tid}/")
        p.click("#do-approve")
        for _ in range(50):  # the dialog follows the API's 409
            if dialogs:
                break
            p.wait_for_timeout(100)
        assert dialogs and "1 review comment(s) are still open" in dialogs[-1]
        assert Task.objects.get(pk=tid).status == "in_review"  # dismissed: nothing happened
        answer["accept"] = True
        p.click("#do-approve")
        p.wait_for_function("() => document.querySelector('#task-status').textContent === 'approved'")
        assert "confirmed by rey" in AuditEvent.objects.filter(task_id=tid).last().reason

        # publish: the maintainer is asked, and told about the open comment
        create_release(people["max"], "1.0.0", "first", tasks=[Task.objects.get(pk=tid)])
        p.context.clear_cookies()
        sign_in(p, live_server.url, "max", "max-pass-1")
        p.goto(f"{live_server.url}/releases/1.0.0/")
        assert p.locator(".username").text_content() == "max", p.content()[:2000]
        assert "Open review comments" in p.locator("#publish-open-comments").text_content()
        answer["accept"] = False
        n = len(dialogs)
        p.click("#publish-form button[type=submit]")
        assert len(dialogs) == n + 1  # a dialog blocks the click until it is answered
        assert "can never be changed" in dialogs[-1] and "still open" in dialogs[-1]
        from releases.models import Release
        assert Release.objects.get(version="1.0.0").status == "draft"
        answer["accept"] = True
        with p.expect_navigation():
            p.click("#publish-form button[type=submit]")
        assert Release.objects.get(version="1.0.0").status == "published"
        assert AuditEvent.objects.filter(task_id=tid, action="publish_with_open_comments").count() == 1
        assert not errors, errors
    finally:
        ctx.close()
        _drop_published_releases()


def _drop_published_releases():
    """The transactional test's flush cannot delete a published release (the database refuses it):
    conftest's ``drop_published_releases`` lifts the triggers, deletes, puts them back."""
    drop_published_releases()