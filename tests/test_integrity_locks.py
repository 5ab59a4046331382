"""Released means immutable, publishing is the maintainer's, four eyes on the revision's author
(docs/security.md). Each test breaks the promise the way the attack's reproduction did and
asserts the refusal and that nothing was written."""
from __future__ import annotations

import io
import json
import shutil

import pytest
from conftest import SCORING_EXAMPLES, needs_shared
from django.core.exceptions import PermissionDenied
from django.core.management import CommandError, call_command

from annotation.models import AuditEvent, Task, TaskRevision
from annotation.services import review
from annotation.services import tasks as task_services
from releases.models import Release, ReleaseTask
from releases.services import lifecycle, release_import
from replay.models import ReplayRun
from replay.services import gold as replay_gold
from replay.services import runs as replay_runs
from studio.permissions import can

T1 = "t1_perception_and_assessment.json"


def _counts() -> dict:
    return {m.__name__: m.objects.count() for m in (Task, TaskRevision, ReplayRun, Release, ReleaseTask, AuditEvent)}


@pytest.fixture
def released(db, make_user):
    """The scoring examples (12 tasks, README: twelve) imported, released as 1.0.0 by a maintainer."""
    mia = make_user("mia", "maintainer", "author", "reviewer")
    release_import.import_release_dir(None, needs_shared(SCORING_EXAMPLES), make_release=False)
    lifecycle.publish_release(mia, lifecycle.create_release(mia, "1.0.0"))
    assert set(Task.objects.values_list("status", flat=True)) == {"released"}
    return mia


def test_import_release_over_a_released_task_is_refused(released, tmp_path):
    """The issue's reproduction: the exported files with one question edited and no sidecar. Before:
    "0 created, 1 updated" and the released task back to approved v2. Now: the import names the file,
    the sample and the task, and writes nothing."""
    d = tmp_path / "bench"
    shutil.copytree(needs_shared(SCORING_EXAMPLES / "tasks"), d / "tasks")
    data = json.loads((d / "tasks" / T1).read_text())
    data[0]["tasks"][0]["question"] = "An edited question."
    (d / "tasks" / T1).write_text(json.dumps(data))
    sample = data[0]["sample_id"]  # t1_s05, the file's first sample
    before = _counts()
    with pytest.raises(release_import.ReleaseImportError) as exc:
        release_import.import_release_dir(released, d)
    assert (exc.value.file, exc.value.sample, exc.value.field) == (f"tasks/{T1}", sample, "tasks[0]")
    assert f"task {sample}_task0 is released; an import with other content is refused" in str(exc.value)
    assert _counts() == before
    task = Task.objects.get(question_id=f"{sample}_task0")
    assert (task.status, task.version) == ("released", 1)
    # the command line says the same, as a CommandError (no traceback)
    with pytest.raises(CommandError, match=rf"tasks/{T1}: sample {sample}: tasks\[0\]: status: task {sample}_task0 is released"):
        call_command("import_release", str(d), stdout=io.StringIO())


def test_gold_replay_accept_and_edit_of_a_released_task_are_refused(released):
    task = Task.objects.select_related("head").get(question_id="t1_s05_task0")
    gold = ReplayRun.objects.get(task=task)
    before = _counts()
    with pytest.raises(task_services.TaskLockedError, match=r"^status: task t1_s05_task0 is released; a gold replay"):
        replay_runs.start_replay(released, task)
    with pytest.raises(task_services.TaskLockedError, match="accepting a new gold is refused"):
        replay_gold.accept_gold(released, gold)
    with pytest.raises(task_services.TaskLockedError, match="a content edit is refused"):
        task_services.save_revision(released, task, expected_version=1, content={"question": "changed"})
    with pytest.raises(task_services.TaskLockedError, match="a content edit is refused"):
        task_services.save_draft(released, task, base_version=1, content={"question": "changed"})
    assert _counts() == before
    # a model-perception run (the gold baseline, an agent run) is not gold: still allowed
    run = replay_runs.create_run(task, mode="model")
    assert run.mode == "model"


def test_replay_command_refuses_and_skips_released_tasks(released):
    with pytest.raises(CommandError, match=r"--task: status: task t1_s05_task0 is released; a gold replay is refused"):
        call_command("replay", "--task", "t1_s05_task0", stdout=io.StringIO())
    runs = ReplayRun.objects.count()
    call_command("replay", "--all", "--json", stdout=io.StringIO())
    assert ReplayRun.objects.count() == runs  # all 12 released: nothing replayed


def test_api_answers_423_for_a_released_task(released, client):
    task = Task.objects.get(question_id="t1_s05_task0")
    client.force_login(released)
    r = client.post(f"/api/tasks/{task.pk}/replays/", {"mode": "gt"}, content_type="application/json")
    assert r.status_code == 423 and "is released" in r.json()["detail"]
    run = ReplayRun.objects.get(task=task)
    r = client.post(f"/api/replays/{run.pk}/accept/", content_type="application/json")
    assert r.status_code == 423


def test_only_maintainers_publish(db, make_user):
    """A reviewer may draft a release (release.export) but publishing sets tasks released, which is
    task.release's, the maintainer's: release.publish."""
    rex = make_user("rex", "reviewer")
    mia = make_user("mia", "maintainer")
    release_import.import_release_dir(None, needs_shared(SCORING_EXAMPLES), make_release=False)
    draft = lifecycle.create_release(rex, "1.0.0")
    with pytest.raises(PermissionDenied, match="rex may not release.publish"):
        lifecycle.publish_release(rex, draft)
    assert set(Task.objects.values_list("status", flat=True)) == {"approved"}
    assert Release.objects.get().status == "draft"
    lifecycle.publish_release(mia, draft)
    assert set(Task.objects.values_list("status", flat=True)) == {"released"}


def test_reviewer_publish_through_the_api_is_403(db, make_user, client):
    rex = make_user("rex", "reviewer")
    release_import.import_release_dir(None, needs_shared(SCORING_EXAMPLES), make_release=False)
    lifecycle.create_release(rex, "1.0.0")
    client.force_login(rex)
    r = client.post("/api/releases/1.0.0/publish/", content_type="application/json")
    assert r.status_code == 403
    assert Release.objects.get().status == "draft"


def test_four_eyes_hold_on_the_author_of_the_revision_under_review(db, make_user):
    """The issue's reproduction: a maintainer rewrites another author's task and approves it alone.
    The revision under review is the maintainer's, so approval is refused; once the author saves a
    new head, the maintainer reviews someone else's revision and may approve it."""
    ada = make_user("ada", "author")
    max_ = make_user("max", "maintainer", "reviewer")
    release_import.import_release_dir(None, needs_shared(SCORING_EXAMPLES), make_release=False)
    task = Task.objects.get(question_id="t1_s05_task0")
    Task.objects.filter(pk=task.pk).update(created_by=ada, status=Task.Status.DRAFT)
    task.refresh_from_db()
    task_services.save_revision(max_, task, expected_version=1, content={"question": "Rewritten by max?"})
    Task.objects.filter(pk=task.pk).update(status=Task.Status.IN_REVIEW)  # submitted and taken (test setup)
    task = Task.objects.select_related("head").get(pk=task.pk)
    assert task.created_by_id == ada.pk and task.head.author_id == max_.pk
    assert not can(max_, "task.approve", task)
    with pytest.raises(PermissionDenied, match="max may not task.approve"):
        review.approve(max_, task)
    assert Task.objects.get(pk=task.pk).status == "in_review"
    # the creator is an owner too: ada never approves her own task (she is no reviewer anyway)
    assert not can(ada, "task.approve", task)
    # ada saves the next revision: the head is hers, max may now review it
    Task.objects.filter(pk=task.pk).update(status=Task.Status.DRAFT)
    task_services.save_revision(ada, Task.objects.get(pk=task.pk), expected_version=2, content={"question": "Ada's?"})
    Task.objects.filter(pk=task.pk).update(status=Task.Status.IN_REVIEW)
    task = Task.objects.select_related("head").get(pk=task.pk)
    assert review.approve(max_, task).status == "approved"


def test_import_tasks_over_a_released_task_is_a_clear_error(released, tmp_path):
    """import_tasks re-importing a released task's file with a change: a CommandError naming the
    file and the task, not a TaskLockedError traceback."""
    from annotation.models import Event

    ev = Event.objects.first()
    data = json.loads(needs_shared(SCORING_EXAMPLES / "tasks" / T1).read_text())
    data = [s for s in data if s["sample_id"] == "t1_s05"]
    data[0]["tasks"][0]["question"] = "changed"
    data[0]["input_data"] = {}
    f = tmp_path / T1
    f.write_text(json.dumps(data))
    Task.objects.filter(question_id="t1_s05_task0").update(event=ev)
    before = _counts()
    with pytest.raises(CommandError, match=rf"^{T1}: status: task t1_s05_task0 is released"):
        call_command("import_tasks", str(f), "--event", ev.slug, "--as-user", "mia", stdout=io.StringIO())
    assert _counts() == before
