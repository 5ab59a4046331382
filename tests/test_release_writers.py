"""One writer per model: the release import writes tasks and revisions through the task
service and their status through the review service, and publishing releases tasks through the
review transition ``release`` and its permission ``task.release`` (maintainers only).

The release is the shared scoring examples (``../shared/scoring-examples``: twelve tasks, README),
imported as release 0.1.0. The permission table is widened in two tests to give a reviewer
``data.import`` and ``release.publish`` but not ``task.release``: publishing must still refuse, so
a reviewer cannot release tasks through a release whatever the release rows allow.
"""
from __future__ import annotations

import pytest
from conftest import SCORING_EXAMPLES, needs_shared
from django.core.exceptions import PermissionDenied

from annotation.models import AuditEvent, Task
from annotation.services import review
from releases.models import Release
from releases.services import lifecycle, release_import
from studio import permissions
from studio.permissions import Rule

N_TASKS = 12  # the scoring examples' README: ten samples, t2_s04 has two tasks


def _trail(task: Task) -> list[tuple]:
    return list(AuditEvent.objects.filter(task=task).order_by("id")
                .values_list("action", "from_status", "to_status", "actor__username"))


@pytest.fixture
def reviewer_may_import_and_publish(monkeypatch):
    monkeypatch.setattr(permissions, "PERMISSIONS", permissions.PERMISSIONS + (
        Rule("reviewer", "data.import", "any"), Rule("reviewer", "release.publish", "any")))


def test_import_approves_and_publish_releases_through_review(maintainer):
    """A published release imported by a maintainer: each task has one revision by them, arrives
    approved (audit ``imported``, from nothing) and is released by the review transition (audit
    ``release``, approved → released), both recorded with the maintainer as actor."""
    report = release_import.import_release_dir(maintainer, needs_shared(SCORING_EXAMPLES), release_version="0.1.0")
    assert len(report.created) == N_TASKS and report.release_created
    assert Release.objects.get(version="0.1.0").status == Release.Status.PUBLISHED
    for task in Task.objects.filter(question_id__in=report.created).select_related("head"):
        assert (task.status, task.version, task.head.number, task.head.author_id) == (
            Task.Status.RELEASED, 1, 1, maintainer.pk)
        assert _trail(task) == [("imported", "", "approved", "mia"), ("release", "approved", "released", "mia")]


def test_a_reviewer_cannot_release_tasks_through_a_release(make_user, maintainer, reviewer_may_import_and_publish):
    rey = make_user("rey", "reviewer")
    assert permissions.can(rey, "release.publish") and not permissions.can(rey, "task.release")
    # importing a published release would release its tasks: refused, and nothing is written
    with pytest.raises(PermissionDenied, match="task.release"):
        release_import.import_release_dir(rey, needs_shared(SCORING_EXAMPLES), release_version="0.1.0")
    assert not Task.objects.exists() and not Release.objects.exists()
    # as a draft it imports: the tasks arrive approved, by rey
    report = release_import.import_release_dir(rey, needs_shared(SCORING_EXAMPLES), release_version="0.1.0", publish=False)
    release = Release.objects.get(version="0.1.0")
    assert len(report.created) == N_TASKS and release.status == Release.Status.DRAFT
    assert set(Task.objects.values_list("status", flat=True)) == {Task.Status.APPROVED}
    # publishing it is the maintainer's: rey is refused by the task transition, nothing changes
    with pytest.raises(PermissionDenied, match="task.release"):
        lifecycle.publish_release(rey, release)
    release.refresh_from_db()
    assert release.status == Release.Status.DRAFT
    assert set(Task.objects.values_list("status", flat=True)) == {Task.Status.APPROVED}
    assert not AuditEvent.objects.filter(action="release").exists()
    lifecycle.publish_release(maintainer, release)
    assert set(Task.objects.values_list("status", flat=True)) == {Task.Status.RELEASED}
    assert set(AuditEvent.objects.filter(action="release").values_list("actor__username", flat=True)) == {"mia"}


def test_publishing_leaves_a_task_returned_since_it_was_pinned(maintainer):
    """The release transition starts from approved only: a pinned task returned to its author after
    the release was drafted stays returned when the release is published."""
    release_import.import_release_dir(maintainer, needs_shared(SCORING_EXAMPLES), release_version="0.1.0", publish=False)
    release = Release.objects.get(version="0.1.0")
    returned = Task.objects.order_by("question_id").first()
    review.return_task(maintainer, returned, "the buffer distance is wrong")
    lifecycle.publish_release(maintainer, release)
    returned.refresh_from_db()
    assert returned.status == Task.Status.RETURNED
    assert Task.objects.filter(status=Task.Status.RELEASED).count() == N_TASKS - 1
