"""Release and ReleaseTask moved from ``annotation`` to ``releases`` with a state-only migration:
the rows, the tables' names, the foreign keys into them and the published-release
triggers of ``annotation/0003_release_immutability`` must survive the move unchanged."""
from __future__ import annotations

import importlib

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor

#: the newest migrations before the move (the ``releases`` app not yet applied)
BEFORE = [("annotation", "0006_layer_audit"), ("evaluation", "0010_leaderboard_aggregates"), ("releases", None)]
AFTER = [("annotation", "0007_release_models_moved"), ("evaluation", "0011_agentrun_release_moved"),
         ("releases", "0001_initial")]


@pytest.mark.django_db(transaction=True)
def test_releases_survive_the_move_to_their_own_app():
    try:
        _releases_survive()
    finally:  # the test database goes back to the newest migrations (later tests need their tables)
        ex = MigrationExecutor(connection)
        ex.loader.build_graph()
        ex.migrate(ex.loader.graph.leaf_nodes())
        _remove_published_release()


def _remove_published_release():
    """The flush after a transactional test cannot delete a published release (the triggers refuse):
    drop the triggers with 0003's own statements, delete the test's rows, put the triggers back."""
    m = importlib.import_module("annotation.migrations.0003_release_immutability")
    backward, forward = {"sqlite": (m.SQLITE_BACKWARD, m.SQLITE_FORWARD),
                         "postgresql": (m.POSTGRES_BACKWARD, m.POSTGRES_FORWARD)}[connection.vendor]
    with connection.cursor() as cur:
        for sql in backward:
            cur.execute(sql)
        cur.execute("DELETE FROM evaluation_agentrun WHERE release_id IN "
                    "(SELECT id FROM annotation_release WHERE version = '9.9.0')")
        cur.execute("DELETE FROM annotation_releasetask WHERE release_id IN "
                    "(SELECT id FROM annotation_release WHERE version = '9.9.0')")
        cur.execute("DELETE FROM annotation_release WHERE version = '9.9.0'")
        for sql in forward:
            cur.execute(sql)


def _releases_survive():
    ex = MigrationExecutor(connection)
    ex.migrate(BEFORE)
    old = ex.loader.project_state([n for n in BEFORE if n[1]]).apps
    Event, Task, TaskRevision = (old.get_model("annotation", m) for m in ("Event", "Task", "TaskRevision"))
    Release, ReleaseTask = old.get_model("annotation", "Release"), old.get_model("annotation", "ReleaseTask")
    Agent, AgentRun = old.get_model("evaluation", "Agent"), old.get_model("evaluation", "AgentRun")
    event = Event.objects.create(slug="mig-ev", name="mig")
    task = Task.objects.create(event=event, sample_id="s", task_index=0, question_id="s_task0", dimension="t1")
    rev = TaskRevision.objects.create(task=task, number=1, question="how many?")
    release = Release.objects.create(version="9.9.0", changelog="before the move")
    item = ReleaseTask.objects.create(release=release, task=task, revision=rev, question_id="s_task0")
    Release.objects.filter(pk=release.pk).update(status="published", manifest_sha256="ab" * 32)
    run = AgentRun.objects.create(agent=Agent.objects.create(name="mig-agent"), name="r", release_id=release.pk)

    ex = MigrationExecutor(connection)
    ex.loader.build_graph()
    ex.migrate(AFTER)
    new = ex.loader.project_state(AFTER).apps
    with pytest.raises(LookupError):  # the models left annotation's state
        new.get_model("annotation", "Release")
    Release, ReleaseTask = new.get_model("releases", "Release"), new.get_model("releases", "ReleaseTask")
    assert Release._meta.db_table == "annotation_release"
    tables = set(connection.introspection.table_names())
    assert {"annotation_release", "annotation_releasetask"} <= tables
    assert not {"releases_release", "releases_releasetask"} & tables  # no table was created or copied
    moved = Release.objects.get(pk=release.pk)
    assert (moved.version, moved.status, moved.changelog) == ("9.9.0", "published", "before the move")
    assert list(ReleaseTask.objects.filter(release=moved).values_list("pk", "task_id", "revision_id")) == [
        (item.pk, task.pk, rev.pk)]
    assert new.get_model("evaluation", "AgentRun").objects.get(pk=run.pk).release.version == "9.9.0"
    # the database still refuses to change a published release: the triggers stayed on the table
    with pytest.raises(IntegrityError), transaction.atomic():
        Release.objects.filter(pk=release.pk).update(changelog="rewritten")
    with pytest.raises(IntegrityError), transaction.atomic():
        ReleaseTask.objects.filter(pk=item.pk).delete()
