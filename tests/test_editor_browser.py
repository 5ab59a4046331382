"""The editor and the review workflow in a real browser (Debian Chromium through Playwright).

One T2 task on the Joplin tornado chips is authored from scratch with the manifest builder, the
tool picker, the reference picker and the JSON view; replayed from the editor; submitted; returned
by a reviewer with a comment on step 1; fixed by the author; approved. A second test makes a stale
save and checks that both versions are shown and nothing is lost.

Expected answer (see tests/test_review_workflow.py's docstring for the independent geopandas
check): with 20 m buffers around the 399 destroyed (dmg = 4) damage polygons, 60 of the 77
footprints intersect a buffer, so ``intersecting_a_count`` = 60.
"""
from __future__ import annotations

import json
import os
import re

import pytest
from support.browser import open_signed_in as _login
from support.joplin import T2_ANSWER, T2_TRAJECTORY, import_joplin, t2_payload

from annotation.models import AuditEvent, Task, TaskDraft

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists("/usr/bin/chromium"), reason="Debian chromium is not installed"),
]


def _pick_tool(page, query, name, *, keyboard=False):
    page.wait_for_selector("#tool-picker:not([hidden])")
    page.fill("#tool-search", query)
    if keyboard:
        page.keyboard.press("Enter")
    else:
        page.click(f'#tool-list [data-tool="{name}"]')
    page.wait_for_selector("#tool-picker", state="hidden")


def _pick_ref(page, button, ref):
    button.click()
    page.wait_for_selector("#ref-picker:not([hidden])")
    item = page.locator(f'#ref-list [data-ref="{ref}"]')
    text = item.text_content()
    item.click()
    return text


def _wait_saved(page):
    page.wait_for_function("() => document.querySelector('#save-state').dataset.state === 'saved'", timeout=15000)


def _replay_in_editor(page):
    page.keyboard.press("Control+Enter")
    page.wait_for_function("() => /^(succeeded|failed)/.test(document.querySelector('#replay-status').textContent)", timeout=60000)
    assert page.locator("#replay-status").text_content().startswith("succeeded"), page.locator("#replay-status").text_content()


@pytest.mark.django_db(transaction=True)
def test_author_replay_submit_return_fix_approve(live_server, browser, make_user):
    make_user("ada", "author", password="ada-pass-1")
    make_user("rey", "reviewer", password="rey-pass-1")
    import_joplin()
    actx, a = _login(browser, live_server, "ada", "ada-pass-1")
    rctx, r = _login(browser, live_server, "rey", "rey-pass-1")
    try:
        # ---- the author writes the task from scratch
        a.goto(f"{live_server.url}/tasks/new/?event=joplin-tornado")
        a.fill("#question", "How many building footprints lie within 20 m of a destroyed-building polygon?")
        a.select_option("#dimension", "t2")
        assert a.input_value("#task-category-code") == "T2"
        a.fill("#task-category", "spatial_relation")
        # manifest: drop the default post image, add the two vector layers; metadata comes from the layers
        a.locator("#manifest .input-row").nth(0).locator("button").click()
        for key, file_name in (("damage_data", "damage.geojson"), ("building_data", "bldg_polys.geojson")):
            a.click("#add-input")
            row = a.locator("#manifest .input-row").last
            row.locator(".input-key").fill(key)
            row.locator(".input-layer").select_option(label=file_name)
        assert "640 features" in a.locator("#manifest .input-row").nth(0).locator(".input-meta").text_content()
        preview = json.loads(a.locator("#manifest-preview").text_content())
        assert preview == {"damage_data": {"path": "damage.geojson"}, "building_data": {"path": "bldg_polys.geojson"}}

        # step 0 with the keyboard: "a" adds a step and opens the picker, Enter picks the first match
        a.locator("body").press("Escape")
        a.keyboard.press("a")
        _pick_tool(a, "vec filter_by_attr", "vec.filter_by_attribute", keyboard=True)
        s0 = a.locator("#steps > li").nth(0)
        assert "Keep features whose attribute" in s0.locator(".tool-desc").text_content()
        assert s0.locator(".arg-row.required").count() == 3  # vector_path, attribute_name, allowed_values
        s0.locator(".arg[data-name=vector_path]").fill("damage.geojson")
        s0.locator(".arg[data-name=attribute_name]").fill("dmg")
        s0.locator(".arg[data-name=allowed_values]").fill('"4"')
        assert "expects a JSON list" in s0.locator(".arg-row.invalid .field-error").text_content()
        s0.locator(".arg[data-name=allowed_values]").fill('["4"]')
        assert s0.locator(".arg-row.invalid").count() == 0

        # step 1: vec.buffer, its input bound with the reference picker (a mistake: 15 m)
        a.click("#add-step")
        _pick_tool(a, "buffer", "vec.buffer")
        s1 = a.locator("#steps > li").nth(1)
        shown = _pick_ref(a, s1.locator(".arg-row", has=a.locator(".arg[data-name=vector_path]")).locator(".ref-button"),
                          "<vector_path> from trajectory[0].obs")
        assert "vector_path" in shown and "str" in shown
        assert s1.locator(".arg[data-name=vector_path]").input_value() == "<vector_path> from trajectory[0].obs"
        s1.locator(".arg[data-name=meter]").fill("15")

        # step 2: vec.intersect; the picker lists step 1's keys with their types
        a.click("#add-step")
        _pick_tool(a, "intersect", "vec.intersect")
        s2 = a.locator("#steps > li").nth(2)
        s2.locator(".arg[data-name=vector_a_path]").fill("bldg_polys.geojson")
        shown = _pick_ref(a, s2.locator(".arg-row", has=a.locator(".arg[data-name=vector_b_path]")).locator(".ref-button"),
                          "<buffer_path> from trajectory[1].obs")
        assert "buffer_path" in shown and "str|null" in shown

        # the answer field, bound to step 2's output (the picker shows its type: int)
        ans = a.locator("#answers tbody tr").nth(0)
        ans.locator(".ans-name").fill("intersecting_a_count")
        ans.locator(".ans-type").select_option("scalar_count")
        shown = _pick_ref(a, ans.locator(".ref-button"), "<intersecting_a_count> from trajectory[2].obs")
        assert "int" in shown
        ans.locator(".ans-format").fill("an integer")

        # the JSON view round-trips with the form
        a.click("#view-json")
        text = json.loads(a.input_value("#trajectory-json"))
        expected = json.loads(json.dumps(T2_TRAJECTORY))
        expected[1]["args"]["meter"] = 15
        assert text == expected
        a.fill("#trajectory-json", a.input_value("#trajectory-json").replace('"meter": 15', '"meter": 16'))
        assert "valid: 3 step(s)" in a.locator("#json-errors").text_content()
        a.click("#view-form")
        assert a.locator("#steps > li").nth(1).locator(".arg[data-name=meter]").input_value() == "16"
        a.locator("#steps > li").nth(1).locator(".arg[data-name=meter]").fill("15")

        # save (Ctrl+S): a new task, the URL becomes its editor
        assert a.locator("#save-state").get_attribute("data-state") in ("dirty", "draft")
        a.keyboard.press("Control+s")
        a.wait_for_url(re.compile(r".*/tasks/\d+/edit/$"), timeout=15000)
        _wait_saved(a)
        tid = int(re.search(r"/tasks/(\d+)/edit/", a.url).group(1))
        assert "r1" in a.locator("#save-state").text_content()

        # replay from the editor: progress, values in the step cards, vectors on the map
        _replay_in_editor(a)
        assert a.locator("#replay-progress").get_attribute("value") == "3"
        assert a.locator("#steps > li.succeeded").count() == 3
        # the duplicate-step icon is drawn by CSS (no font glyph that may be missing): 11 px wide, masked
        dup = a.evaluate("""() => { const b = document.querySelector('#steps > li .duplicate-step');
            const s = getComputedStyle(b, '::before');
            return [b.textContent, b.getAttribute('aria-label'), s.width, s.maskImage.startsWith('url(')]; }""")
        assert dup == ["", "Duplicate step", "11px", True]
        assert "total_filtered" in a.locator("#steps > li").nth(0).locator(".obs-values").text_content()
        a.wait_for_function("() => [...document.querySelectorAll('#editor-map .studio-layer-name')].some(n => n.textContent === 'step 1 · buffer_path')",
                            timeout=15000)
        assert "on the map: intersection_path" in a.locator("#steps > li").nth(2).locator(".step-output").text_content()
        first_answer = a.locator("#answers tbody tr .ans-value").text_content()
        assert first_answer.isdigit()

        # submit
        a.click("#do-submit")
        a.wait_for_url(re.compile(rf".*/tasks/{tid}/$"))
        assert a.locator("#task-status").text_content() == "submitted"

        # ---- the reviewer: queue, start review, comment on step 1, return with a reason
        r.goto(f"{live_server.url}/review/")
        r.click(f"#task-table a[href='/tasks/{tid}/']")
        assert r.locator("#do-approve").count() == 0  # approve only once the review started
        r.click("#do-start_review")
        r.wait_for_function("() => document.querySelector('#task-status').textContent === 'in_review'")
        r.select_option("#comment-pin", "step:1")
        r.fill("#comment-body", "The question says 20 m, the buffer uses 15 m.")
        r.click("#comment-send")
        r.wait_for_selector("#trajectory li[data-index='1'] .comment")
        r.click("#do-return")
        assert "write the reason first" in r.locator("#errors").text_content()
        r.fill("#transition-reason", "Buffer distance does not match the question (step 1).")
        r.click("#do-return")
        r.wait_for_function("() => document.querySelector('#task-status').textContent === 'returned'")

        # ---- the author sees the reason and the pinned comment, fixes step 1, replays, resubmits
        a.goto(f"{live_server.url}/tasks/{tid}/edit/")
        assert "Buffer distance does not match" in a.locator(".banner.returned").text_content()
        s1 = a.locator("#steps > li").nth(1)
        assert "buffer uses 15 m" in s1.locator(".step-comments").text_content()
        s1.locator(".arg[data-name=meter]").fill("20")
        a.wait_for_function("() => document.querySelector('#save-state').dataset.state === 'draft'", timeout=10000)
        assert TaskDraft.objects.get(task_id=tid).content["trajectory"][1]["args"]["meter"] == 20  # autosaved
        s1.locator(".step-comments .resolve").click()
        a.wait_for_function("() => !document.querySelector('#steps > li:nth-child(2) .step-comments .comment')")
        a.keyboard.press("Control+s")
        a.wait_for_function("() => document.querySelector('#save-state').textContent.includes('r2')", timeout=15000)
        assert not TaskDraft.objects.filter(task_id=tid).exists()
        _replay_in_editor(a)
        assert a.locator("#answers tbody tr .ans-value").text_content() == "60"
        assert json.loads(a.locator("#final-answer").text_content()) == {"intersecting_a_count": 60}
        a.click("#do-submit")
        a.wait_for_url(re.compile(rf".*/tasks/{tid}/$"))
        assert a.locator("#do-approve").count() == 0 and a.locator("#do-start_review").count() == 0

        # ---- approval
        r.goto(f"{live_server.url}/review/?tab=submitted")
        r.click(f"#task-table a[href='/tasks/{tid}/']")
        r.click("#do-start_review")
        r.wait_for_selector("#do-approve")
        r.click("#do-approve")
        r.wait_for_function("() => document.querySelector('#task-status').textContent === 'approved'")
        assert "return" in r.locator("#audit").text_content() and "Buffer distance" in r.locator("#audit").text_content()
        r.goto(f"{live_server.url}/review/?tab=approved")
        assert r.locator(f"#task-table a[href='/tasks/{tid}/']").count() == 1

        task = Task.objects.get(pk=tid)
        assert task.status == "approved" and task.version == 2 and task.head.answer_spec == T2_ANSWER
        assert [e.action for e in AuditEvent.objects.filter(task=task)] == [
            "submit", "start_review", "return", "submit", "start_review", "approve"]
        assert not a._errors and not r._errors, (a._errors, r._errors)
    finally:
        actx.close()
        rctx.close()


@pytest.mark.django_db(transaction=True)
def test_stale_edit_shows_both_versions_and_loses_nothing(live_server, browser, make_user):
    ada = make_user("ada", "author", password="ada-pass-1")
    make_user("max", "maintainer", password="max-pass-1")
    event = import_joplin()
    from annotation.services.tasks import build_input_data, create_task

    payload = t2_payload(event)
    task = create_task(ada, event, dimension="t2", content={
        **{k: payload[k] for k in ("question", "trajectory", "answer_spec", "task_category", "task_category_code")},
        "input_data": build_input_data(event, payload["input_layers"])})
    one, p1 = _login(browser, live_server, "ada", "ada-pass-1")
    two, p2 = _login(browser, live_server, "max", "max-pass-1")
    try:
        for p in (p1, p2):
            p.goto(f"{live_server.url}/tasks/{task.pk}/edit/")
            _wait_saved(p)
        # the maintainer saves first: r2
        p2.fill("#question", "Theirs: how many footprints touch a 20 m buffer around destroyed polygons?")
        p2.click("#save-task")
        p2.wait_for_function("() => document.querySelector('#save-state').textContent.includes('r2')")
        # the author, still on r1, edits the question and step 1, then saves: 409
        p1.fill("#question", "Mine: count the footprints within 20 m of destroyed buildings.")
        p1.locator("#steps > li").nth(1).locator(".arg[data-name=meter]").fill("21")
        p1.click("#save-task")
        p1.wait_for_selector("#conflict:not([hidden])")
        assert p1.locator("#save-state").get_attribute("data-state") == "conflict"
        assert "Theirs:" in p1.locator("#conflict-theirs").text_content()
        assert "Mine:" in p1.locator("#conflict-mine").text_content()
        assert '"meter":21' in p1.locator("#conflict-mine").text_content()
        assert p1.locator("#conflict-theirs .differs").count() >= 2 and p1.locator("#conflict-mine .differs").count() >= 2
        # nothing of mine was written, but it is kept: in the form and in the server draft
        assert Task.objects.get(pk=task.pk).version == 2
        assert p1.input_value("#question").startswith("Mine:")
        p1.wait_for_function("() => !!document.querySelector('#save-state').dataset.draftAt")
        draft = TaskDraft.objects.get(task=task, user=ada)
        assert draft.base_version == 1 and draft.content["question"].startswith("Mine:")
        # keeping mine writes r3 on top of theirs; theirs stays in the history
        p1.click("#conflict-keep-mine")
        p1.wait_for_function("() => document.querySelector('#save-state').textContent.includes('r3')")
        revs = {r.number: r.question for r in task.revisions.all()}
        assert revs[2].startswith("Theirs:") and revs[3].startswith("Mine:")
        p1.goto(f"{live_server.url}/tasks/{task.pk}/history/?a=2&b=3")
        assert "Theirs:" in p1.locator("#diff-fields").text_content() and "Mine:" in p1.locator("#diff-fields").text_content()
        assert not p1._errors and not p2._errors, (p1._errors, p2._errors)
    finally:
        one.close()
        two.close()


@pytest.mark.django_db(transaction=True)
def test_answer_geometry_drawn_on_the_map(live_server, browser, make_user, client):
    """A polygon drawn with leaflet-geoman becomes a literal GeoJSON source in lon/lat (CRS84 member,
    the event's layers are geographic); a point fills the _lat/_lon pair of point_haversine fields."""
    ada = make_user("ada", "author", password="ada-pass-1")
    event = import_joplin()
    client.force_login(ada)
    tid = client.post("/api/tasks/", t2_payload(event), content_type="application/json").json()["id"]
    ctx, p = _login(browser, live_server, "ada", "ada-pass-1")
    try:
        p.goto(f"{live_server.url}/tasks/{tid}/edit/")
        _wait_saved(p)
        p.click("#add-answer")
        row = p.locator("#answers tbody tr").nth(1)
        row.locator(".ans-name").fill("damage_extent")
        row.locator(".ans-type").select_option("polygon_iou")
        row.locator(".draw-button").click()
        assert "polygon" in p.locator("#draw-hint").text_content()
        box = p.locator("#editor-map .leaflet-container").bounding_box()
        cx, cy = box["x"] + box["width"] * 0.3, box["y"] + box["height"] * 0.5
        for dx, dy in ((0, 0), (60, 0), (60, 50), (0, 50), (0, 0)):
            p.mouse.click(cx + dx, cy + dy)
            p.wait_for_timeout(100)
        p.wait_for_function("() => document.querySelectorAll('#answers tbody tr')[1].querySelector('.ans-source').value.startsWith('{')")
        geom = json.loads(row.locator(".ans-source").input_value())
        ring = geom["coordinates"][0]
        assert geom["type"] == "Polygon" and len(ring) == 5 and ring[0] == ring[-1]
        assert geom["crs"]["properties"]["name"].endswith("CRS84")
        # clicked inside the map around Joplin: lon/lat near the chip (SOURCE.md bounds -94.49985..-94.49282, 37.06889..37.07520)
        assert all(-94.6 < x < -94.4 and 37.0 < y < 37.2 for x, y in ring)
        p.click("#add-answer")
        pt = p.locator("#answers tbody tr").nth(2)
        pt.locator(".ans-name").fill("epicentre_lat")
        pt.locator(".ans-type").select_option("point_haversine")
        pt.locator(".draw-button").click()
        p.mouse.click(cx + 100, cy + 20)
        p.wait_for_function("() => document.querySelectorAll('#answers tbody tr').length === 4")
        rows = [(r.locator(".ans-name").input_value(), r.locator(".ans-type").input_value()) for r in p.locator("#answers tbody tr").all()]
        assert rows[2:] == [("epicentre_lat", "point_haversine"), ("epicentre_lon", "point_haversine")]
        p.keyboard.press("Control+s")
        p.wait_for_function("() => document.querySelector('#save-state').textContent.includes('r2')")
        spec = {f["name"]: f for f in Task.objects.get(pk=tid).head.answer_spec}
        assert spec["damage_extent"]["source"]["type"] == "Polygon"
        assert isinstance(spec["epicentre_lat"]["source"], float) and 37.0 < spec["epicentre_lat"]["source"] < 37.2
        assert not p._errors, p._errors
    finally:
        ctx.close()


def _task_with_answer_comment(author):
    """The T2 task on the Joplin chips (r1, by ``author``) and a comment of ``author`` pinned to its
    answer field ``intersecting_a_count``: (event, task, comment)."""
    from annotation.services.review import add_comment
    from annotation.services.tasks import build_input_data, create_task

    event = import_joplin()
    payload = t2_payload(event)
    task = create_task(author, event, dimension="t2", content={
        **{k: payload[k] for k in ("question", "trajectory", "answer_spec", "task_category", "task_category_code")},
        "input_data": build_input_data(event, payload["input_layers"])})
    return event, task, add_comment(author, task, "Is 20 m the benchmark's buffer?", answer_field="intersecting_a_count")


def _pin_labels(page, comment):
    """For ``comment`` in the editor on ``page``: labels() -> the texts of its pin in the comment
    list and on the answer fields; wait_label(text) waits until both read ``text``."""
    listed = f'#comment-list [data-comment="{comment.pk}"] .pin'
    on_field = f'#answer-comments [data-comment="{comment.pk}"] .pin'

    def labels():
        return [page.locator(listed).text_content(), page.locator(on_field).text_content()]

    def wait_label(text):
        page.wait_for_function("""([a, b, text]) => [a, b].every((s) => document.querySelector(s)
                                  && document.querySelector(s).textContent === text)""", arg=[listed, on_field, text])
    return labels, wait_label


@pytest.mark.django_db(transaction=True)
def test_comments_follow_an_answer_field_renamed_in_the_editor(live_server, browser, make_user, client):
    """A comment pinned to answer field ``intersecting_a_count`` follows its rename in the editor at
    once: listed under the new name as the author types it (no save), back under the old one on
    undo, the new one again on redo; saved, the server moved its pin (an undo past the save shows
    the old name again, a redo the new one), so a reload shows the new name, and the
    task page too.
    A rename done and undone before a save leaves no trace: the pin keeps its name, and that
    revision's diff has no answer row. Each label is the editor's "answer <field name>" (comments.js)."""
    from annotation.models import TaskComment

    ada = make_user("ada", "author", password="ada-pass-1")
    event, task, comment = _task_with_answer_comment(ada)
    payload = t2_payload(event)
    ctx, page = _login(browser, live_server, "ada", "ada-pass-1")
    labels, wait_label = _pin_labels(page, comment)
    try:
        page.goto(f"{live_server.url}/tasks/{task.pk}/edit/")
        _wait_saved(page)
        assert labels() == ["answer intersecting_a_count"] * 2
        name = page.locator("#answers .ans-name").first
        # ---- renamed: the pin follows as the name is typed, nothing saved yet
        name.fill("footprints_near_destroyed")
        wait_label("answer footprints_near_destroyed")
        assert page.locator("#save-state").get_attribute("data-state") in ("dirty", "draft")
        # ---- undo: the old name, in the field and on the pin; redo: the new one
        page.click("#undo")
        wait_label("answer intersecting_a_count")
        assert name.input_value() == "intersecting_a_count"
        page.click("#redo")
        wait_label("answer footprints_near_destroyed")
        assert name.input_value() == "footprints_near_destroyed"
        # ---- saved: the server moved the pin; the label stays, and after a reload too
        page.click("#save-task")
        page.wait_for_function("() => document.querySelector('#save-state').textContent.includes('r2')")
        assert labels() == ["answer footprints_near_destroyed"] * 2
        assert TaskComment.objects.get(pk=comment.pk).answer_field == "footprints_near_destroyed"
        # ---- undo past the save: the saved revision's field would be renamed back, the pin says so
        page.click("#undo")
        wait_label("answer intersecting_a_count")
        page.click("#redo")
        wait_label("answer footprints_near_destroyed")
        _wait_saved(page)
        page.reload()
        _wait_saved(page)
        assert labels() == ["answer footprints_near_destroyed"] * 2
        page.goto(f"{live_server.url}/tasks/{task.pk}/")  # the task page's comment list (task_comment.html)
        assert page.locator(f'[data-comment="{comment.pk}"] .pin').text_content() == "answer footprints_near_destroyed"
        page.goto(f"{live_server.url}/tasks/{task.pk}/edit/")
        _wait_saved(page)
        # ---- renamed again and undone before the save: nothing of it stays
        name.fill("buildings_near_destroyed")
        wait_label("answer buildings_near_destroyed")
        page.click("#undo")
        wait_label("answer footprints_near_destroyed")
        page.fill("#question", payload["question"] + " Count each footprint once.")
        page.click("#save-task")
        page.wait_for_function("() => document.querySelector('#save-state').textContent.includes('r3')")
        assert labels() == ["answer footprints_near_destroyed"] * 2
        assert TaskComment.objects.get(pk=comment.pk).answer_field == "footprints_near_destroyed"
        client.force_login(ada)
        history = client.get(f"/tasks/{task.pk}/history/?a=2&b=3").content.decode()
        assert "buildings_near_destroyed" not in history and "renamed" not in history
        assert not page._errors, page._errors
    finally:
        ctx.close()


@pytest.mark.django_db(transaction=True)
def test_taking_theirs_over_a_conflict_shows_the_servers_answer_pins(live_server, browser, make_user, client):
    """The author edits r1 while two revisions are saved elsewhere: r2 adds field ``w_count`` after
    ``intersecting_a_count``, r3 removes ``intersecting_a_count``. Neither is a rename (the rule:
    a removal or an addition is none), so the server left the comment on ``intersecting_a_count``.
    Taking theirs (r3, fields [w_count]) in the editor must show that pin, "answer
    intersecting_a_count", though from r1's fields to r3's the position rule alone reads a rename
    to w_count: the editor reads the server's pins after loading their revision."""
    from annotation.models import TaskComment

    ada = make_user("ada", "author", password="ada-pass-1")
    event, task, comment = _task_with_answer_comment(ada)
    ctx, page = _login(browser, live_server, "ada", "ada-pass-1")
    labels, wait_label = _pin_labels(page, comment)
    try:
        page.goto(f"{live_server.url}/tasks/{task.pk}/edit/")
        _wait_saved(page)
        assert labels() == ["answer intersecting_a_count"] * 2
        w = {**T2_ANSWER[0], "name": "w_count"}
        client.force_login(ada)
        for version, spec in ((1, [T2_ANSWER[0], w]), (2, [w])):
            put = client.put(f"/api/tasks/{task.pk}/", {**t2_payload(event, answer_spec=spec), "expected_version": version},
                             content_type="application/json")
            assert put.status_code == 200, put.content
        assert TaskComment.objects.get(pk=comment.pk).answer_field == "intersecting_a_count"
        page.fill("#question", "Mine: count the footprints within 20 m of destroyed buildings.")
        page.click("#save-task")
        page.wait_for_selector("#conflict:not([hidden])")
        page.click("#conflict-take-theirs")
        page.wait_for_function("() => document.querySelector('#save-state').textContent.includes('r3')")
        assert page.locator("#answers .ans-name").evaluate_all("xs => xs.map((x) => x.value)") == ["w_count"]
        wait_label("answer intersecting_a_count")
        assert not page._errors, page._errors
    finally:
        ctx.close()
