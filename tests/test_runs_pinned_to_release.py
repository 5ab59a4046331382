"""An agent run scored on a release is pinned to it and scored against that release's gold (its
pinned revisions and gold replays). Values: the demo agent run scores 0.25 (worked out in
tests/test_skeleton_flow.py's docstring)."""
from __future__ import annotations

import pytest
from conftest import REPO, needs_demo_data
from django.core.management import call_command

from annotation.models import Task
from evaluation.services.runs import RunImportError, import_run_dir
from releases.services.lifecycle import create_release, publish_release


@pytest.mark.django_db
def test_run_pinned_to_release(tmp_path, make_user):
    needs_demo_data()
    call_command("demo", "--skip-osm", stdout=open(tmp_path / "demo.log", "w"))
    maint = make_user("mo", "maintainer")
    Task.objects.update(status=Task.Status.APPROVED)
    release = publish_release(maint, create_release(maint, "1.0.0", "first release"))
    t1 = Task.objects.get(question_id="hurricane-florence_demo01_task0")

    run = import_run_dir(maint, REPO / "fixtures" / "demo_run", "demo-agent", release=release)
    assert run.release == release
    assert run.dora_score == 0.25
    rec = run.records.get(question_id="hurricane-florence_demo01_task0")
    assert rec.gold["question"].startswith("How many buildings were totally destroyed")

    other = publish_release(maint, create_release(maint, "1.0.1", "", tasks=Task.objects.filter(pk=t1.pk)))
    with pytest.raises(RunImportError, match="not in release 1.0.1"):
        import_run_dir(maint, REPO / "fixtures" / "demo_run", "demo-agent", release=other)
