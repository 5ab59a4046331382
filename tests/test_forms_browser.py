"""Forms a maintainer fills in, in a real browser: the run upload's gold set is a choice of the
releases and the studio's current tasks (it was a free-text box), and the judge configuration form
says which hosts and key variables the server allows and warns, once saved, when the key variable
is not set in the server's environment (its judge jobs would fail)."""
from __future__ import annotations

import os

import pytest
from support.browser import open_signed_in

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists("/usr/bin/chromium"), reason="Debian chromium is not installed"),
    pytest.mark.django_db(transaction=True),
]


def test_run_upload_offers_the_releases_and_the_current_tasks(live_server, browser, make_user):
    from releases.models import Release

    make_user("mona", "maintainer", password="mona-pass-1")
    Release.objects.create(version="1.0.0")  # setup shortcut: an empty draft release is enough for the choice
    ctx, page = open_signed_in(browser, live_server, "mona", "mona-pass-1", viewport=(1280, 800))
    try:
        page.goto(f"{live_server.url}/runs/")
        assert page.locator("input[name=release]").count() == 0
        options = page.locator("select[name=release] option").all_inner_texts()
        assert options == ["the studio's current tasks (unversioned, dated)", "release 1.0.0 (draft, 0 tasks)"]
        assert not page._errors, page._errors
    finally:
        ctx.close()


def test_judge_form_names_the_allowed_hosts_and_warns_of_an_unset_key(live_server, browser, make_user, settings,
                                                                       monkeypatch):
    monkeypatch.delenv("STUDIO_JUDGE_API_KEY", raising=False)
    settings.STUDIO_JUDGE_ALLOWED_HOSTS = ["api.openai.com", "127.0.0.1"]
    settings.STUDIO_JUDGE_KEY_VARIABLES = ["STUDIO_JUDGE_API_KEY"]
    make_user("mona", "maintainer", password="mona-pass-1")
    ctx, page = open_signed_in(browser, live_server, "mona", "mona-pass-1", viewport=(1280, 800))
    try:
        page.goto(f"{live_server.url}/judge/configs/")
        form = page.locator("#judge-config-form")
        assert "Hosts this server allows: api.openai.com, 127.0.0.1" in form.inner_text()
        assert "allowed: STUDIO_JUDGE_API_KEY" in form.inner_text()
        page.fill("input[name=name]", "local-judge")
        page.fill("input[name=base_url]", "http://127.0.0.1:8080/v1")  # the form's own example, allowed here
        page.fill("input[name=model]", "smollm2")
        page.fill("input[name=api_key_env]", "STUDIO_JUDGE_API_KEY")
        page.click("#judge-config-form button[type=submit]")
        page.wait_for_selector(".messages .message")
        message = page.locator(".messages .message").first
        assert "warning" in message.get_attribute("class")
        assert message.inner_text() == ("Judge configuration local-judge saved, but the environment variable "
                                        "STUDIO_JUDGE_API_KEY (the judge's API key) is not set in this server's "
                                        "environment: its judge jobs fail until it is.")
        assert not page._errors, page._errors
    finally:
        ctx.close()
