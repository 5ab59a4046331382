"""Browser sessions of the Playwright tests (the session's one Chromium is ``conftest.browser``)."""
from __future__ import annotations

from conftest import sign_in


def open_signed_in(browser, live_server, username, password, viewport=(1500, 1000)):
    """A new browser context of ``viewport`` (width, height) and its page, signed in as
    ``username``; the page's JavaScript errors are collected in ``page._errors``. Returns
    (context, page)."""
    ctx = browser.new_context(viewport={"width": viewport[0], "height": viewport[1]})
    page = ctx.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    sign_in(page, live_server.url, username, password)
    page._errors = errors
    return ctx, page
