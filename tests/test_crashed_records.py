"""A question the agent crashed on is never mistaken for an answer: the record API carries the
stored ``error`` and ``elapsed_s``, the run page marks the row "crashed", the record page says so;
and two runs imported from folders of the same name stay apart on the leaderboard (each row names
its run id)."""
from __future__ import annotations

import json
import shutil

import pytest
from conftest import SCORING_EXAMPLES, needs_shared

from evaluation.services.runs import import_run_dir

pytestmark = pytest.mark.urls("support.judging")

CRASH = "GraphRecursionError: Recursion limit of 50 reached without hitting a stop condition"


def _crashed_copy(tmp_path, question_id: str = "t3_s09_task0"):
    """agent_a's run with ``question_id`` crashed as the benchmark's harness writes it: no answer,
    no steps, the error and the seconds it took (900.0: the harness's per-question limit)."""
    run = tmp_path / "agent_a"
    shutil.copytree(needs_shared(SCORING_EXAMPLES / "runs" / "agent_a"), run)
    path = run / "t3_operational_planning" / "benchmark.jsonl"
    lines = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    for rec in lines:
        if rec["question_id"] == question_id:
            rec.update(predicted_answer=None, trajectory=[], error=CRASH, elapsed_time=900.0)
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    return run


@pytest.mark.django_db
def test_a_crashed_record_is_marked_on_the_api_run_page_and_record_page(tmp_path, make_user, client):
    owner = make_user("importer", "maintainer")
    run = import_run_dir(owner, _crashed_copy(tmp_path), "agent_a", tasks_dir=needs_shared(SCORING_EXAMPLES / "tasks"))
    rec = run.records.get(question_id="t3_s09_task0")
    client.force_login(owner)
    body = client.get(f"/api/records/{rec.pk}/").json()
    assert body["error"] == CRASH and body["elapsed_s"] == 900.0
    answered = client.get(f"/api/records/{run.records.get(question_id='t3_s09_task1').pk}/").json()
    assert answered["error"] == ""
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert page.count("crashed-badge") == 1 and "crashed after 900 s" in page
    record_page = client.get(f"/records/{rec.pk}/").content.decode()
    assert 'id="record-error"' in record_page and "Recursion limit of 50 reached" in record_page


@pytest.mark.django_db
def test_the_gold_steps_a_crashed_agent_never_reached_are_not_called_skipped(tmp_path, make_user, client):
    """t3_s11_task0's gold plan has 5 steps; crashed, the record has none, so each gold step is
    unmatched: the record page says the agent crashed before them, not that it chose to skip them."""
    owner = make_user("importer", "maintainer")
    run = import_run_dir(owner, _crashed_copy(tmp_path, "t3_s11_task0"), "agent_a", tasks_dir=needs_shared(SCORING_EXAMPLES / "tasks"))
    client.force_login(owner)
    page = client.get(f"/records/{run.records.get(question_id='t3_s11_task0').pk}/").content.decode()
    assert page.count("not reached: the agent crashed") == 5 and "skipped by the agent" not in page


@pytest.mark.django_db
def test_two_runs_of_one_folder_name_are_told_apart_on_the_leaderboard(tmp_path, make_user, client):
    owner = make_user("importer", "maintainer")
    first = import_run_dir(owner, needs_shared(SCORING_EXAMPLES / "runs" / "agent_a"), "agent_a", tasks_dir=needs_shared(SCORING_EXAMPLES / "tasks"))
    second = import_run_dir(owner, needs_shared(SCORING_EXAMPLES / "runs" / "agent_a"), "agent_a", tasks_dir=needs_shared(SCORING_EXAMPLES / "tasks"))
    assert first.name == second.name
    client.force_login(owner)
    html = client.get("/leaderboard/").content.decode()
    assert f"#{first.pk}</small>" in html and f"#{second.pk}</small>" in html
