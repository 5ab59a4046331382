"""User text is escaped on every page.

A hostile string is stored in every free-text field the pages show (task question, answer field
name, comment body, verdict reasoning and reasons, release changelog, event name, agent name,
judge configuration name, layer name); every page is rendered and must hold the text only in
escaped form — as HTML entities, or ``\\u003C``-escaped inside ``json_script`` blocks — never
the raw markup. A grep test keeps ``|safe`` / ``mark_safe`` / ``autoescape off`` away from user
text, and the map scripts never hand user text to Leaflet as HTML (tooltips and popups set
``innerHTML`` from a string).
"""
from __future__ import annotations

import re

import pytest
from conftest import REPO
from support.populated import pages, populate

SCRIPT = "<script>alert(1)</script>"
IMG = '"><img src=x onerror=alert(1)>'
PAYLOAD = f"{SCRIPT} {IMG}"
#: the forms the payload may take on a page: autoescaped HTML, or JSON inside json_script
ESCAPED = ("&lt;script&gt;alert(1)&lt;/script&gt;", "\\u003Cscript\\u003Ealert(1)\\u003C/script\\u003E")
RAW = (SCRIPT, "<img src=x onerror=alert(1)>", "<img src=x")


@pytest.fixture
def hostile(db, maintainer, client):
    """The populated studio with PAYLOAD in every user-text field; the second task submitted so
    that the review queue lists it; the client logged in as the maintainer."""
    from annotation.services import review

    ids = populate(maintainer, question=PAYLOAD, text=PAYLOAD)
    review.submit(maintainer, ids["draft_task"])
    client.force_login(maintainer)
    return ids


#: pages that show none of the stored text (they are checked for the raw payload all the same)
NO_USER_TEXT = {"agreement", "release diff", "releases", "task history"}


def test_every_page_escapes_user_text(hostile, client):
    shown = {}
    for what, url in pages(hostile).items():
        r = client.get(url)
        if r.status_code == 302:  # the scoring item opens the claimed item page
            r = client.get(r["Location"])
        assert r.status_code == 200, (what, url, r.status_code)
        html = r.content.decode()
        for raw in RAW:
            assert raw not in html, (what, url, raw, html[max(0, html.find(raw) - 300):html.find(raw) + 100])
        shown[what] = any(e in html for e in ESCAPED)
    assert {w for w, s in shown.items() if not s} == NO_USER_TEXT, shown


def test_pages_show_each_field_escaped(hostile, client):
    """Each field reaches a page (so the test above really checks it): the question on the task
    page, the answer name and the comment in the editor, the reasoning on the adjudication page,
    the changelog on the release page, the event, layer, agent and judge names on theirs."""
    ids = hostile
    esc_html, esc_json = ESCAPED

    def count(url):
        html = client.get(url).content.decode()
        return html.count(esc_html) + html.count(esc_json)

    assert count(f"/tasks/{ids['task'].pk}/") >= 2  # question + answer field name (+ comment)
    assert count(f"/adjudication/records/{ids['record'].pk}/") >= 2  # reasoning of two verdicts
    assert count(f"/releases/{ids['release'].version}/") >= 1  # changelog
    assert count(f"/events/{ids['event'].slug}/") >= 2  # event name + layer name
    assert count("/leaderboard/") >= 1 and count("/runs/") >= 1  # agent name
    assert count("/judge/configs/") >= 1  # configuration name


# ── no |safe on user text ─────────────────────────────────────────────────────────────────────

UNSAFE = re.compile(r"\|\s*safe\b|\bmark_safe\b|\bautoescape\s+off\b|\bSafeString\b|\bSafeText\b|\|\s*safeseq\b"
                    r"|\bformat_html\b|\bhtml_safe\b")
#: reviewed uses: (file relative to the repo, line text) — none so far
ALLOWED: set[tuple[str, str]] = set()


def test_no_safe_filter_or_mark_safe_on_user_text():
    """No template or Python module of the studio turns autoescaping off (grep; allow-list above)."""
    files = [p for d in ("frontend", "annotation", "evaluation", "replay", "studio")
             for p in (REPO / d).rglob("*") if p.suffix in (".html", ".py", ".txt") and "vendor" not in p.parts
             and "migrations" not in p.parts]
    assert len(files) > 50
    hits = []
    for p in files:
        for line in p.read_text(encoding="utf-8").splitlines():
            if UNSAFE.search(line) and not line.strip().startswith("#") and (str(p.relative_to(REPO)), line.strip()) not in ALLOWED:
                hits.append(f"{p.relative_to(REPO)}: {line.strip()}")
    assert hits == []


def test_grep_catches_what_it_should():
    """The pattern itself (a test of the test): each form is found, ordinary text is not."""
    for bad in ("{{ x|safe }}", "{{ x | safe }}", "mark_safe(x)", "{% autoescape off %}", "{{ xs|safeseq }}",
                "format_html('<b>{}</b>', x)"):
        assert UNSAFE.search(bad), bad
    for ok in ("{{ x }}", "{{ x|json_script:'id' }}", "safely", "a safe default"):
        assert not UNSAFE.search(ok), ok


# ── Leaflet tooltips and popups: a string is HTML ────────────────────────────────────────────

LEAFLET_HTML = re.compile(r"\.(bindTooltip|bindPopup|setTooltipContent|setPopupContent)\(")


def test_map_scripts_never_hand_user_text_to_leaflet_as_html():
    """Leaflet sets a tooltip's or popup's ``innerHTML`` from a string: every call in the studio's
    scripts passes either an escaped HTML string (``popupHtml`` escapes with ``esc``) or a DOM
    node built with ``textContent`` (``textTip``). Before, comment bodies and answer field names
    went in as strings: a pinned comment ``<img src=x onerror=…>`` ran its script on hover."""
    reviewed = {"return popupHtml(spec, feature)"}  # popupHtml escapes every value (map.js: esc)
    hits = []
    for p in sorted((REPO / "frontend" / "static" / "studio").rglob("*.js")):  # the editor's modules too
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
            for m in LEAFLET_HTML.finditer(line):
                arg = line[m.end():]
                if arg.startswith("textTip(") or any(r in line for r in reviewed):
                    continue
                hits.append(f"{p.name}:{n}: {line.strip()}")
    assert hits == []


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_pinned_comment_tooltip_does_not_run_markup(browser, live_server, maintainer):
    """In Chromium: a map-pinned comment whose body is markup shows as text in its tooltip on the
    task page and in the editor; no ``onerror`` handler runs."""
    from annotation.services import review

    ids = populate(maintainer)
    task = ids["draft_task"]
    layer = ids["layer"]
    west, south, east, north = layer.bounds  # the xBD tile's layers are in the pixel frame: [0, 0, 1024, 1024]
    loc = {"frame": layer.frame, "x": (west + east) / 2, "y": (south + north) / 2}
    body = '<img src=x onerror="window.__xss=1">pinned'
    review.add_comment(maintainer, task, body, location=loc)
    ctx = browser.new_context()
    page = ctx.new_page()
    try:
        page.goto(f"{live_server.url}/accounts/login/")
        page.fill("input[name=username]", "mia")
        page.fill("input[name=password]", "pw-test-123")
        page.click("button[type=submit], input[type=submit]")
        for url in (f"/tasks/{task.pk}/", f"/tasks/{task.pk}/edit/"):
            page.goto(live_server.url + url)
            marker = page.locator("path.studio-comment-pin").first
            marker.wait_for(timeout=15000)
            marker.dispatch_event("mouseover")
            tip = page.locator(".leaflet-tooltip").first
            tip.wait_for(timeout=5000)
            assert body in tip.inner_text(), (url, tip.inner_html())
            assert page.locator(".leaflet-tooltip img").count() == 0, url
            assert page.evaluate("window.__xss") is None, url
    finally:
        ctx.close()
