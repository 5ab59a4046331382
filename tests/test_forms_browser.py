"""Forms a maintainer fills in, in a real browser: the run upload's gold set is a choice of the
releases and the studio's current tasks (it was a free-text box), and the judge configuration form
says which hosts and key variables the server allows and warns, once saved, when the key variable
is not set in the server's environment (its judge jobs would fail); the experiments form says and
warns the same; the upload's layout hint shows its placeholders (they were eaten as HTML tags), and
the runs page leads to the experiments page, which no menu named."""
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


def test_experiment_form_names_the_allowed_hosts_and_warns_of_an_unset_key(live_server, browser, make_user, settings,
                                                                            monkeypatch):
    """The experiments page's configuration form, as the judge's: it names the hosts and key
    variables this server allows (its example endpoint was 127.0.0.1, refused by the defaults), and a
    configuration whose key variable is unset saves with a warning (its experiments would fail)."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    settings.STUDIO_JUDGE_ALLOWED_HOSTS = ["api.openai.com"]
    settings.STUDIO_JUDGE_KEY_VARIABLES = ["STUDIO_JUDGE_API_KEY", "OPENAI_API_KEY"]
    make_user("mona", "maintainer", password="mona-pass-1")
    ctx, page = open_signed_in(browser, live_server, "mona", "mona-pass-1", viewport=(1280, 800))
    try:
        page.goto(f"{live_server.url}/runs/")
        page.click("#experiments-link")
        page.wait_for_url(f"{live_server.url}/experiments/")
        assert page.locator(".mainnav a.active").inner_text() == "Runs"  # experiments are runs the studio makes
        hint = page.locator("#config-hosts").inner_text()
        assert "this server allows api.openai.com (STUDIO_JUDGE_ALLOWED_HOSTS;" in hint
        assert "one of STUDIO_JUDGE_API_KEY, OPENAI_API_KEY (STUDIO_JUDGE_KEY_VARIABLES)" in hint
        # each field is one box, its label over its input: an inline label wrapped over two lines put
        # "max tokens per call" at a line's end and its input at the next line's start, beside another label
        split = page.evaluate("""() => [...document.querySelectorAll('#save-config label, #start-experiment label')]
            .filter(l => { const rects = l.getClientRects(); const i = l.querySelector('input, select').getBoundingClientRect();
                           const t = rects[0]; return rects.length !== 1 || i.top < t.top || i.bottom > t.bottom + 0.5; })
            .map(l => l.textContent.trim())""")
        assert split == [], split
        placeholder = page.get_attribute("#save-config input[name=base_url]", "placeholder")
        assert placeholder == "https://api.openai.com/v1"  # an example the defaults accept
        page.fill("#save-config input[name=name]", "gpt-mini")
        page.fill("#save-config input[name=base_url]", placeholder)
        page.fill("#save-config input[name=model]", "gpt-4o-mini")
        page.fill("#save-config input[name=api_key_env]", "OPENAI_API_KEY")
        page.click("#save-config button[type=submit]")
        page.wait_for_selector(".messages .message")
        message = page.locator(".messages .message").first
        assert "warning" in message.get_attribute("class")
        assert message.inner_text() == ("saved configuration gpt-mini v1, but the environment variable OPENAI_API_KEY "
                                        "(the model endpoint's API key) is not set in this server's environment: "
                                        "its experiments fail until it is.")
        assert not page._errors, page._errors
    finally:
        ctx.close()


def test_run_upload_hint_shows_the_folder_layout(live_server, browser, make_user):
    """The upload's help text names the layout with its placeholders, as text (Django renders a
    field's help text as HTML: "<dimension task name>" vanished as an unknown tag)."""
    make_user("mona", "maintainer", password="mona-pass-1")
    ctx, page = open_signed_in(browser, live_server, "mona", "mona-pass-1", viewport=(1280, 800))
    try:
        page.goto(f"{live_server.url}/runs/")
        form = page.locator("#run-upload-form").inner_text()
        assert "the benchmark's run layout: <model>_<AP|IF>/<dimension>/benchmark.jsonl" in form
        assert not page._errors, page._errors
    finally:
        ctx.close()
