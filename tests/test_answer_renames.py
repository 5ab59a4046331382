"""Renaming an answer field: the rule that tells a rename from a removal plus an addition
(``kernel.content.answer_renames``, the editor's ``answerRenames`` is the same and has its node
test in tests/js/state.test.mjs), comments pinned to the old name following the rename when
the revision is saved, and the revision diff showing it as one renamed field. Expected values worked out by hand from the rule's docstring."""
from __future__ import annotations

from support.joplin import T2_ANSWER, create_t2, post_json, t2_payload

from kernel.content import answer_renames


def _spec(*names):
    return [{"name": n, "eval_type": "scalar_count", "source": 1} for n in names]


def test_a_field_renamed_in_place_is_a_rename():
    assert answer_renames(_spec("count", "area"), _spec("total", "area")) == {"count": "total"}
    assert answer_renames(_spec("count", "area"), _spec("n", "km2")) == {"count": "n", "area": "km2"}


def test_removals_additions_and_swaps_are_not_renames():
    assert answer_renames(_spec("count", "area"), _spec("area")) == {}           # count removed, area shifted
    assert answer_renames(_spec("count", "area"), _spec("area", "extra")) == {}  # removed and added: names reappear
    assert answer_renames(_spec("count"), _spec("count", "extra")) == {}         # added at the end
    assert answer_renames(_spec("a", "b"), _spec("b", "a")) == {}                # swapped
    assert answer_renames(_spec("count"), _spec("")) == {}                       # cleared, not renamed
    assert answer_renames(None, _spec("x")) == {} and answer_renames(["junk"], _spec("x")) == {}


def test_comments_on_a_renamed_answer_field_follow_it(client, joplin_once, people):
    client.force_login(people["ada"])
    task = create_t2(client, joplin_once)
    tid = task["id"]
    client.force_login(people["rey"])
    post_json(client, f"/api/tasks/{tid}/comments/", {"body": "check the buffer", "answer_field": "intersecting_a_count"})
    post_json(client, f"/api/tasks/{tid}/comments/", {"body": "other field", "answer_field": "gone_before"})
    client.force_login(people["ada"])
    renamed = [{**T2_ANSWER[0], "name": "footprints_near_destroyed"}]
    put = client.put(f"/api/tasks/{tid}/", {**t2_payload(joplin_once, answer_spec=renamed), "expected_version": task["version"]},
                     content_type="application/json")
    assert put.status_code == 200, put.content
    fields = [(c["body"], c["answer_field"]) for c in client.get(f"/api/tasks/{tid}/comments/").json()["results"]]
    assert fields == [("check the buffer", "footprints_near_destroyed"), ("other field", "gone_before")]


def test_the_revision_diff_shows_a_rename_as_one_row(client, joplin_once, people):
    from annotation.models import Task
    from annotation.services.tasks import diff_revisions

    client.force_login(people["ada"])
    task = create_t2(client, joplin_once)
    renamed = [{**T2_ANSWER[0], "name": "footprints_near_destroyed"}]
    client.put(f"/api/tasks/{task['id']}/", {**t2_payload(joplin_once, answer_spec=renamed), "expected_version": 1},
               content_type="application/json")
    revs = {r.number: r for r in Task.objects.get(pk=task["id"]).revisions.all()}
    diff = diff_revisions(revs[1], revs[2])
    assert diff["answer"] == [{"key": "intersecting_a_count → footprints_near_destroyed", "change": "renamed",
                               "old": T2_ANSWER[0], "new": renamed[0]}]
    page = client.get(f"/tasks/{task['id']}/history/?a=1&b=2").content.decode()
    assert "intersecting_a_count → footprints_near_destroyed</th><td>renamed" in page
