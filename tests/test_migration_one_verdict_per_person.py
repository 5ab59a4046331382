"""Migrations 0007–0008 (one verdict per person per record): duplicates that the old rules allowed
(a scorer who peeked and posted again) collapse into one verdict whose earlier states are kept as
revisions; queue slots follow the verdict they pointed at."""
from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("evaluation", "0006_h20_judge_verdict_setting")]
AFTER = [("evaluation", "0008_scoring_one_verdict_per_person")]


@pytest.mark.django_db(transaction=True)
def test_duplicate_person_verdicts_become_revisions():
    try:
        _duplicates_become_revisions()
    finally:  # the test database goes back to the newest migrations (later tests need their tables)
        ex = MigrationExecutor(connection)
        ex.loader.build_graph()
        ex.migrate(ex.loader.graph.leaf_nodes())


def _duplicates_become_revisions():
    ex = MigrationExecutor(connection)
    ex.migrate(BEFORE)
    apps = ex.loader.project_state(BEFORE).apps
    User = apps.get_model("auth", "User")
    Agent, AgentRun, RunRecord = (apps.get_model("evaluation", m) for m in ("Agent", "AgentRun", "RunRecord"))
    Verdict, ScoringItem = apps.get_model("evaluation", "Verdict"), apps.get_model("evaluation", "ScoringItem")
    ana = User.objects.create(username="ana-mig")
    run = AgentRun.objects.create(agent=Agent.objects.create(name="a-mig"), name="r")
    rec = RunRecord.objects.create(run=run, question_id="q_task0", sample_id="q", dimension="t1")
    first = Verdict.objects.create(record=rec, source="human", annotator=ana, grade=0.4, is_correct=False,
                                   errors={"E4": True}, idempotency_key="k1")
    second = Verdict.objects.create(record=rec, source="human", annotator=ana, grade=1.0, is_correct=True, errors={})
    item = ScoringItem.objects.create(record=rec, slot=1, scorer=ana, verdict=first)
    Verdict.objects.create(record=rec, source="judge", judge_name="m", grade=0.6, is_correct=False)
    ex = MigrationExecutor(connection)
    ex.loader.build_graph()
    ex.migrate(AFTER)
    apps = ex.loader.project_state(AFTER).apps
    Verdict, VerdictRevision = apps.get_model("evaluation", "Verdict"), apps.get_model("evaluation", "VerdictRevision")
    mine = list(Verdict.objects.filter(record_id=rec.pk, source="human"))
    assert [v.pk for v in mine] == [second.pk]  # the newest stays the verdict
    assert mine[0].revision == 2 and mine[0].sealed_at is not None  # both were visible-final before
    revs = list(VerdictRevision.objects.filter(verdict_id=second.pk).order_by("number"))
    assert [(r.number, r.grade, r.idempotency_key) for r in revs] == [(1, 0.4, "k1"), (2, 1.0, None)]
    assert apps.get_model("evaluation", "ScoringItem").objects.get(pk=item.pk).verdict_id == second.pk
    assert Verdict.objects.filter(record_id=rec.pk, source="judge").count() == 1
