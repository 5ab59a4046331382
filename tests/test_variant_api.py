"""Making a robustness variant from the task page:
``POST /api/tasks/<id>/variants/`` (annotation.api_variants, the serializer the command's options
go through too), the task page's block, and the form in a real browser.

Data: the approved Joplin T2 task of tests/test_variants.py (vec.filter_by_attribute → vec.buffer
→ vec.intersect); its question id is ``<sample id>_task0``, a variant's
``<sample id>_<kind suffix>_task0`` (annotation.services.variants: ext<n>s<seed>, brk<step>,
uns<initials of the strategy>).
"""
from __future__ import annotations

import os

import pytest

from annotation.models import Task, TaskVariant


def post(client, task, **body):
    return client.post(f"/api/tasks/{task.pk}/variants/", body, content_type="application/json")


@pytest.mark.django_db
def test_post_makes_a_variant_once_and_names_the_field_of_bad_parameters(approved_t2, people, client):
    client.force_login(people["ada"])
    r = post(client, approved_t2, kind="extraneous", n=2, seed=5)
    assert r.status_code == 201, r.content
    body = r.json()
    assert body["question_id"] == f"{approved_t2.sample_id}_ext2s5_task0" and body["created"] is True
    assert body["kind"] == "extraneous" and body["params"] == {"n": 2, "seed": 5}
    assert body["base_question_id"] == approved_t2.question_id and body["base_revision"] == 1
    assert body["status"] == "draft" and len(body["tools"]["distractors"]) == 2
    again = post(client, approved_t2, kind="extraneous", n=2, seed=5)
    assert again.status_code == 200 and again.json()["created"] is False and again.json()["id"] == body["id"]
    # broken at step 1: vec.buffer (the Joplin plan's second step), alternative vec.buffer_alt
    broken = post(client, approved_t2, kind="broken", step=1, error="buffer service down")
    assert broken.status_code == 201
    assert broken.json()["tools"]["broken"]["tool"] == "vec.buffer"
    assert broken.json()["params"] == {"step": 1, "error": "buffer service down", "alternative": "vec.buffer_alt"}
    listed = client.get(f"/api/tasks/{approved_t2.pk}/variants/").json()["results"]
    assert [v["kind"] for v in listed] == ["extraneous", "broken"]
    # bad input: each answer names the field, nothing is made
    cases = [
        (dict(kind="broken"), "step"),                     # no step
        (dict(kind="extraneous", n=3), "n"),               # not one of the benchmark's levels
        (dict(kind="sideways"), "kind"),
        (dict(kind="unsolvable", strategy="vibes"), "strategy"),
        (dict(kind="broken", step=1, alternative="rm -rf /"), "alternative"),
        (dict(kind="broken", step=10**30), "step"),
    ]
    for payload, field in cases:
        r = post(client, approved_t2, **payload)
        assert r.status_code == 400 and field in r.json(), (payload, r.content)
    r = post(client, approved_t2, kind="broken", step=7)  # the plan has 3 steps
    assert r.status_code == 400 and "step 7 is not a step of the gold trajectory (it has 3)" in r.json()["detail"]
    r = post(client, approved_t2, kind="unsolvable", strategy="contradictory_constraints")
    assert r.status_code == 400 and "written by the author" in r.json()["detail"]
    assert TaskVariant.objects.filter(base_task=approved_t2).count() == 2


@pytest.mark.django_db
def test_post_needs_the_role_and_an_approved_base(approved_t2, people, client):
    client.force_login(people["rey"])  # a reviewer creates no task (task.create: author, maintainer)
    assert post(client, approved_t2, kind="extraneous").status_code == 403
    client.force_login(people["max"])  # a maintainer may
    assert post(client, approved_t2, kind="extraneous").status_code == 201
    Task.objects.filter(pk=approved_t2.pk).update(status=Task.Status.DRAFT)
    r = post(client, approved_t2, kind="extraneous", n=6)
    assert r.status_code == 400 and "approved or released" in r.json()["detail"]
    client.logout()
    assert post(client, approved_t2, kind="extraneous").status_code in (401, 403)


@pytest.mark.django_db
def test_task_page_shows_the_form_to_who_may_use_it_and_links_variants(approved_t2, people, client):
    client.force_login(people["ada"])
    page = client.get(f"/tasks/{approved_t2.pk}/").content.decode()
    assert 'id="variant-form"' in page and 'value="contradictory_constraints"' in page
    client.force_login(people["rey"])
    assert 'id="variant-form"' not in client.get(f"/tasks/{approved_t2.pk}/").content.decode()
    client.force_login(people["ada"])
    made = post(client, approved_t2, kind="unsolvable", strategy="tool_removal").json()
    page = client.get(f"/tasks/{approved_t2.pk}/").content.decode()
    assert 'id="variant-list"' in page and made["question_id"] in page
    variant_page = client.get(f"/tasks/{made['id']}/").content.decode()
    assert 'id="variant-of"' in variant_page and approved_t2.question_id in variant_page
    # the variant is a draft: no form on its page (variants are made from approved tasks)
    assert 'id="variant-form"' not in variant_page
    # an author's text is shown as text: a hostile error message stays escaped
    post(client, approved_t2, kind="broken", step=0, error="<script>alert(1)</script>")
    page = client.get(f"/tasks/{approved_t2.pk}/").content.decode()
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


@pytest.mark.browser
@pytest.mark.skipif(not os.path.exists("/usr/bin/chromium"), reason="Debian chromium is not installed")
@pytest.mark.django_db(transaction=True)
def test_make_a_variant_form_in_a_browser(approved_t2, people, live_server, browser):
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = ctx.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(f"{live_server.url}/accounts/login/")
        page.fill("input[name=username]", "ada")
        page.fill("input[name=password]", "pw-test-123")
        page.click("button[type=submit]")
        page.wait_for_load_state()
        page.goto(f"{live_server.url}/tasks/{approved_t2.pk}/")
        form = page.locator("#variant-form")
        # only the chosen kind's parameters are shown
        assert form.locator("select[name=n]").is_visible() and not form.locator("input[name=error]").is_visible()
        form.locator("#variant-kind").select_option("broken")
        assert form.locator("input[name=error]").is_visible() and not form.locator("select[name=n]").is_visible()
        # a step outside the plan: the API's message, no variant
        form.locator("input[name=step]").fill("9")
        form.locator("#variant-make").click()
        page.wait_for_function("document.querySelector('#variant-result').textContent.includes('step 9')")
        assert "is not a step of the gold trajectory" in page.locator("#variant-result").text_content()
        assert not TaskVariant.objects.filter(base_task=approved_t2).exists()
        form.locator("input[name=step]").fill("2")
        form.locator("input[name=alternative]").fill("vec.intersect_backup")
        form.locator("#variant-make").click()
        base_url = f"{live_server.url}/tasks/{approved_t2.pk}/"
        page.wait_for_url(lambda url: url != base_url and url.rstrip("/").split("/")[-2] == "tasks")
        variant = TaskVariant.objects.get(base_task=approved_t2)
        assert page.url.endswith(f"/tasks/{variant.task_id}/")
        assert variant.kind == "broken" and variant.params["step"] == 2
        assert variant.tools["broken"] == {**variant.tools["broken"], "tool": "vec.intersect",
                                           "alternative": "vec.intersect_backup"}
        assert "variant of" in page.locator("#variant-of").text_content()
        assert errors == []
    finally:
        ctx.close()
