"""An experiment is scored like every run: at its end (``experiments.services.judge_and_queue``,
called by ``run_experiment`` after the import) its runs' records get a judge job with the chosen
judge configuration and a share of each run's records is queued for blind human scoring; the task
page shows an author "solved by N of M repeats" per experiment that ran the task. No model server:
the question rows get their records by hand (the harness's record of each question, the answer
written here) and ``run_experiment`` only imports, scores and queues (nothing is pending)."""
from __future__ import annotations

import pytest
from conftest import requires_shared
from django.db import connection
from django.test.utils import CaptureQueriesContext
from support.florence import FLORENCE
from support.mcp import GT_COUNTS, make_task

from evaluation.models import JudgeJob, RunRecord, ScoringItem, Verdict
from experiments import harness, services
from experiments.models import Experiment, ExperimentQuestion
from kernel.errors import InvalidInput

URL = "http://127.0.0.1:9/v1"  # an allowed test host (tests/conftest.py); nothing is called here
#: the Florence task's gold answer (tests/support/mcp.py: 26,492 + 274 = 26,766 pixels)
RIGHT = {"damaged_pixels": 26766, "pixels_by_class": GT_COUNTS}
WRONG = {"damaged_pixels": 5, "pixels_by_class": {"2": 5}}
Q1, Q2 = "florence_mcp01_task0", "florence_mcp02_task0"

needs_florence = requires_shared(FLORENCE)


def test_half_of_four_records_is_the_two_whose_question_hash_is_lowest():
    # SHA-256 of the question ids (`echo -n ID | sha256sum`): mcp01 bbdfd8fc…, mcp02 bf376883…,
    # mcp03 355e75b6…, mcp04 238bf50c…: ascending mcp04 < mcp03 < mcp01 < mcp02
    rows = [(11, "florence_mcp01_task0"), (12, "florence_mcp02_task0"), (13, "florence_mcp03_task0"),
            (14, "florence_mcp04_task0")]
    assert services.human_sample(rows, 0.5) == [13, 14]
    assert services.human_sample(list(reversed(rows)), 0.5) == [13, 14]  # the order given does not matter
    assert services.human_sample(rows, 0.1) == [14]  # ceil(0.4) = 1: at least one
    assert services.human_sample(rows, 0.75) == [11, 13, 14]  # ceil(3.0) = 3
    assert services.human_sample(rows, 1.0) == [11, 12, 13, 14]
    assert services.human_sample(rows, 0) == [] and services.human_sample([], 0.5) == []
    with pytest.raises(InvalidInput, match="human_share: between 0 and 1"):
        services.human_sample(rows, 1.5)


def _config(user):
    return services.save_config(user, name="smol", base_url=URL, model="smollm2-135m", protocol="IF")


def _two_tasks():
    """The Florence T1 task (``florence_mcp01_task0``) and a copy under ``florence_mcp02``, both replayed."""
    from annotation.services.content import revision_content
    from annotation.services.tasks import create_task
    from replay.services.runs import start_replay

    user, task = make_task()
    other = create_task(user, task.event, dimension="t1", content=revision_content(task.head), sample_id="florence_mcp02")
    assert start_replay(user, task).status == "succeeded" and start_replay(user, other).status == "succeeded"
    return user, task, other


def _finish(exp: Experiment, answer) -> None:
    """Give every question row its harness record (``answer(row)`` as the predicted answer) and
    write the repeats' folders, as ``run_experiment`` would have after the model answered."""
    questions = {q["question_id"]: q for _, q in services.questions_of(services.gold_of(exp))}
    for row in exp.questions.all():
        record = harness.record_of(questions[row.question_id], predicted_answer=answer(row), error=None,
                                   trajectory=[], elapsed_time=1.0, timestamp="2026-12-05T12:00:00")
        ExperimentQuestion.objects.filter(pk=row.pk).update(status="done", record=record)
    for rep in range(1, exp.repeats + 1):
        services.write_folder(exp, rep, "t1")


@pytest.mark.django_db
@needs_florence
def test_the_end_of_a_pilot_queues_one_judge_job_and_half_of_each_run_for_human_scoring(
        client, make_user, django_capture_on_commit_callbacks):
    from evaluation.services.judge import save_judge_config
    from evaluation.services.queue import claim_next

    user, task, other = _two_tasks()
    save_judge_config(user, name="local", base_url=URL, model="smollm2-135m")
    with django_capture_on_commit_callbacks():  # stays queued: the experiment job is not run here
        exp = services.start_experiment(user, _config(user), question_ids=[Q1, Q2], repeats=2,
                                        judge_config="local", human_share=0.5)
    assert (exp.judge_config.name, exp.human_share) == ("local", 0.5)
    # repeat 1 answers both right; repeat 2 gets Q1 wrong
    _finish(exp, lambda row: WRONG if (row.repeat, row.question_id) == (2, Q1) else RIGHT)
    with django_capture_on_commit_callbacks() as hooks:  # the judge job's dispatch: queued, not run
        exp = services.run_experiment(exp.pk)
    exp.refresh_from_db()
    assert exp.status == "done" and exp.followup_note == "" and exp.runs.count() == 2
    records = RunRecord.objects.filter(run__in=exp.runs.all())
    # 2 repeats × 2 questions, task score 1 for the right answers only
    assert sorted((r.run.name[-5:], r.question_id, r.task_score == 1.0) for r in records) == [
        ("r1_IF", Q1, True), ("r1_IF", Q2, True), ("r2_IF", Q1, False), ("r2_IF", Q2, True)]
    # one judge job (the existing machinery: holistic + the rule checker) over all four records
    job = JudgeJob.objects.get()
    # after commit: the leaderboard's bootstrap of each imported run, then the judge job's dispatch
    assert exp.judge_job_id == job.pk and [h.__qualname__.split(".")[0] for h in hooks] == [
        "schedule_bootstrap", "schedule_bootstrap", "start_judge_job"]
    assert (job.config.name, job.status, job.protocol, job.with_code, job.total) == ("local", "queued", "holistic", True, 4)
    assert sorted(job.record_ids) == sorted(records.values_list("id", flat=True))
    # half of each run's 2 records: the one whose question id hashes lowest (Q1, bbdfd8fc… < bf376883…),
    # two human verdicts each (STUDIO_HUMAN_VERDICTS_PER_RECORD, default 2): 2 records, 4 slots
    assert exp.human_queued == {"records": 2, "slots": 4}
    queued = ScoringItem.objects.values_list("record__question_id", "record__run__name", "slot")
    assert sorted((q, n[-5:], s) for q, n, s in queued) == [(Q1, "r1_IF", 1), (Q1, "r1_IF", 2), (Q1, "r2_IF", 1),
                                                           (Q1, "r2_IF", 2)]
    # the API and the command line's status carry both
    client.force_login(user)
    body = client.get(f"/api/experiments/{exp.pk}/").json()
    assert (body["judge_config"], body["human_share"], body["judge_job"], body["human_queued"]) == (
        "local", 0.5, job.pk, {"records": 2, "slots": 4})
    page = client.get(f"/experiments/{exp.pk}/").content.decode()
    assert f'href="/judge/jobs/{job.pk}/"' in page and "2 records, 4 slots queued" in page

    # blind: the judge's verdict (stored as the judge job stores it) is not shown to the scorer
    # who claims the queued record; the record API shows them only their own (none yet)
    rec = records.get(run__name__endswith="r1_IF", question_id=Q1)
    Verdict.objects.create(record=rec, source=Verdict.Source.JUDGE, judge_name="local", is_correct=True, grade=1.0)
    sam = make_user("sam", "scorer")
    item = claim_next(sam)
    assert item.record.question_id == Q1
    client.force_login(sam)
    shown = client.get(f"/api/records/{item.record_id}/").json()
    assert shown["verdicts"] == [] and shown["verdicts_hidden"] == 1 and shown["run"] is None


@pytest.mark.django_db
@needs_florence
def test_a_judge_or_share_is_checked_at_the_start(make_user, django_capture_on_commit_callbacks):
    from evaluation.services.judge import pause_config, save_judge_config
    from replay.services.runs import start_replay

    user, task = make_task()
    assert start_replay(user, task).status == "succeeded"
    cfg = _config(user)
    with pytest.raises(InvalidInput, match="judge_config: no judge configuration 'nope'"):
        services.start_experiment(user, cfg, question_ids=[Q1], judge_config="nope")
    with pytest.raises(InvalidInput, match="human_share: between 0 and 1"):
        services.start_experiment(user, cfg, question_ids=[Q1], human_share=1.2)
    pause_config(save_judge_config(user, name="local", base_url=URL, model="m"), "out of credit")
    with pytest.raises(InvalidInput, match="judge_config: 'local' is paused: out of credit"):
        services.start_experiment(user, cfg, question_ids=[Q1], judge_config="local")
    assert not Experiment.objects.exists()


@pytest.mark.django_db
@needs_florence
def test_a_paused_judge_at_the_end_leaves_the_experiment_done_with_a_note(django_capture_on_commit_callbacks):
    from evaluation.services.judge import pause_config, save_judge_config
    from replay.services.runs import start_replay

    user, task = make_task()
    assert start_replay(user, task).status == "succeeded"
    judge = save_judge_config(user, name="local", base_url=URL, model="m")
    with django_capture_on_commit_callbacks():
        exp = services.start_experiment(user, _config(user), question_ids=[Q1], judge_config=judge, human_share=1.0)
    _finish(exp, lambda row: RIGHT)
    pause_config(judge, "out of credit")
    with django_capture_on_commit_callbacks():
        exp = services.run_experiment(exp.pk)
    exp.refresh_from_db()
    assert exp.status == "done" and exp.judge_job_id is None and not JudgeJob.objects.exists()
    assert exp.followup_note == "judge: judge configuration 'local' is paused: out of credit"
    assert exp.human_queued == {"records": 1, "slots": 2}  # share 1 of 1 record, 2 slots


@pytest.mark.django_db
@needs_florence
def test_the_api_and_command_line_start_with_a_judge_and_a_share(client, make_user, django_capture_on_commit_callbacks):
    from django.core.management import call_command

    from evaluation.services.judge import save_judge_config
    from replay.services.runs import start_replay

    user, task = make_task()
    assert start_replay(user, task).status == "succeeded"
    cfg = _config(user)
    save_judge_config(user, name="local", base_url=URL, model="m")
    client.force_login(user)
    with django_capture_on_commit_callbacks():
        r = client.post("/api/experiments/", {"config": cfg.pk, "question_ids": [Q1], "judge_config": "local",
                                              "human_share": 0.25}, content_type="application/json")
    assert r.status_code == 201 and (r.json()["judge_config"], r.json()["human_share"]) == ("local", 0.25)
    bad = client.post("/api/experiments/", {"config": cfg.pk, "question_ids": [Q1], "human_share": 2},
                      content_type="application/json")
    assert bad.status_code == 400 and "human_share" in bad.json()  # the serializer: at most 1
    # a reviewer may manage the queue but not run experiments (nor the judge): refused before anything
    client.force_login(make_user("rey", "reviewer"))
    assert client.post("/api/experiments/", {"config": cfg.pk, "question_ids": [Q1]},
                       content_type="application/json").status_code == 403
    # the start form (experiment list page) offers the judge configurations and the share
    client.force_login(user)
    page = client.get("/experiments/").content.decode()
    assert 'name="judge_config"' in page and '<option value="local">' in page and 'name="human_share"' in page
    with django_capture_on_commit_callbacks():
        resp = client.post("/experiments/start/", {"config": cfg.pk, "question_ids": Q1, "judge_config": "local",
                                                   "human_share": "0.5"})
    assert resp.status_code == 302
    assert Experiment.objects.order_by("-id").values_list("judge_config__name", "human_share").first() == ("local", 0.5)
    with django_capture_on_commit_callbacks():
        call_command("experiment", "--as-user", "ada", "start", "--config", "smol", "--tasks", Q1,
                     "--judge-config", "local", "--human-share", "0.1", stdout=open("/dev/null", "w"))
    newest = Experiment.objects.order_by("-id").first()
    assert (newest.judge_config.name, newest.human_share, newest.status) == ("local", 0.1, "queued")


def _task_page(client, user, task):
    client.force_login(user)
    resp = client.get(f"/tasks/{task.pk}/")
    assert resp.status_code == 200
    return resp


@pytest.mark.django_db
@needs_florence
def test_the_task_page_shows_an_author_how_many_repeats_solved_it_and_hides_it_from_blind_scorers(
        client, make_user, django_capture_on_commit_callbacks):
    from evaluation.services.queue import claim_next

    user, task, other = _two_tasks()
    with django_capture_on_commit_callbacks():
        exp = services.start_experiment(user, _config(user), question_ids=[Q1, Q2], repeats=3, human_share=0.5)
    # Q1: right in repeat 2 only; Q2: never right
    _finish(exp, lambda row: RIGHT if (row.repeat, row.question_id) == (2, Q1) else WRONG)
    with django_capture_on_commit_callbacks():
        services.run_experiment(exp.pk)
    writer = make_user("writer", "author")
    ctx = _task_page(client, writer, task).context["experiments"]
    assert ctx["hidden"] == 0 and len(ctx["rows"]) == 1
    row = ctx["rows"][0]
    assert (row["experiment"], row["pilot"], row["repeats"], row["scored"], row["solved"]) == (exp.pk, True, 3, 3, 1)
    recs = {r.run.name[-5:]: r.pk for r in RunRecord.objects.filter(question_id=Q1)}
    assert [(r["repeat"], r["record"], r["solved"]) for r in row["by_repeat"]] == [
        (1, recs["r1_IF"], False), (2, recs["r2_IF"], True), (3, recs["r3_IF"], False)]
    html = _task_page(client, writer, task).content.decode()
    assert "solved by 1 of 3 repeats" in html and f'href="/records/{recs["r2_IF"]}/"' in html
    assert "solved by 0 of 3 repeats" in _task_page(client, writer, other).content.decode()
    assert "no repeat solved it" in _task_page(client, writer, other).content.decode()
    # a scorer (verdict.create without verdict.view_all) is blind on every record: no block at all
    sam = make_user("sam", "scorer")
    html = _task_page(client, sam, task).content.decode()
    assert 'id="task-experiments"' not in html and "solved by" not in html
    # a maintainer sees it until they hold a queue slot of one of its records, then it is hidden
    mia = make_user("mia", "maintainer")
    assert "solved by 1 of 3 repeats" in _task_page(client, mia, task).content.decode()
    item = claim_next(mia)
    assert item.record.question_id == Q1  # half of 2 per run: Q1 (its hash is the lower)
    html = _task_page(client, mia, task).content.decode()
    assert "solved by" not in html and 'id="task-experiments-hidden"' in html
    assert "1 experiment hidden: you score its records blind" in html


@pytest.mark.django_db
@needs_florence
def test_the_experiment_pages_and_api_are_not_shown_to_whom_scores_their_records_blind(
        client, make_user, django_capture_on_commit_callbacks):
    from evaluation.services.queue import claim_next
    from replay.services.runs import start_replay

    user, task = make_task()
    assert start_replay(user, task).status == "succeeded"
    with django_capture_on_commit_callbacks():
        exp = services.start_experiment(user, _config(user), question_ids=[Q1], repeats=2, human_share=1.0)
    _finish(exp, lambda row: RIGHT)
    with django_capture_on_commit_callbacks():
        services.run_experiment(exp.pk)
    q = exp.questions.first()
    urls = [f"/experiments/{exp.pk}/", f"/api/experiments/{exp.pk}/", f"/api/experiment-questions/{q.pk}/"]

    def seen(person) -> tuple[list[int], list[int]]:
        client.force_login(person)
        listed = [e["id"] for e in client.get("/api/experiments/").json()["results"]]
        on_page = f'id="experiment-{exp.pk}"' in client.get("/experiments/").content.decode()
        return listed + ([exp.pk] if on_page else []), [client.get(u).status_code for u in urls]

    # an author (no verdict.create) sees it all; a scorer (blind on every record) nothing
    assert seen(make_user("writer", "author")) == ([exp.pk, exp.pk], [200, 200, 200])
    assert seen(make_user("sam", "scorer")) == ([], [404, 404, 404])
    # a maintainer until they hold a queue slot of one of its records, then not
    mia = make_user("mia", "maintainer")
    assert seen(mia) == ([exp.pk, exp.pk], [200, 200, 200])
    claim_next(mia)
    assert seen(mia) == ([], [404, 404, 404])


@pytest.mark.django_db
@needs_florence
def test_the_task_page_query_count_is_pinned_and_does_not_grow_with_experiments_or_repeats(
        client, make_user, django_capture_on_commit_callbacks):
    user, task = make_task()
    from replay.services.runs import start_replay

    assert start_replay(user, task).status == "succeeded"
    writer = make_user("writer", "author")
    client.force_login(writer)

    def count() -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert client.get(f"/tasks/{task.pk}/").status_code == 200
        return len(ctx.captured_queries)

    count()  # warm the per-process caches (catalogue, tools)
    none = count()
    cfg = _config(user)
    with django_capture_on_commit_callbacks():
        exp = services.start_experiment(user, cfg, question_ids=[Q1], repeats=1)
    _finish(exp, lambda row: RIGHT)
    with django_capture_on_commit_callbacks():
        services.run_experiment(exp.pk)
    one = count()
    # with experiments: the question rows, the records, and the blind check's two (held slots, open verdicts)
    assert one == none + 3
    for repeats in (3, 5):
        with django_capture_on_commit_callbacks():
            exp = services.start_experiment(user, cfg, question_ids=[Q1], repeats=repeats)
        _finish(exp, lambda row: RIGHT)
        with django_capture_on_commit_callbacks():
            services.run_experiment(exp.pk)
    assert count() == one
    assert "solved by 5 of 5 repeats" in client.get(f"/tasks/{task.pk}/").content.decode()
