"""The judge decides the robustness outcomes the rule leaves open (issue 21, item 3).

``RunRecord.robustness`` is written at import by rule (``evaluation.robustness.record_robustness``);
where the rule returns None it says ``decided_by: "judge needed"``. :func:`judge_robustness` asks
the judge in the record's robustness setting (``evaluation.services.judge_settings.judge_setting_case``:
the benchmark's tool-broken five classes, or its unsolvable criteria) and stores the judge's
decision on the record (``decided_by: "judge"``, ``judge_verdict``: the verdict's id).
"""
from __future__ import annotations

from django.db import transaction

from evaluation.models import JudgeConfig, RunRecord
from evaluation.robustness import JUDGE_NEEDED, judge_case, settle_by_judge
from evaluation.services.judge_settings import judge_setting_case
from studio.permissions import Action, require

__all__ = ["judge_robustness"]


def judge_robustness(user, config: JudgeConfig, record: RunRecord, *, backend=None) -> RunRecord:
    """Let the judge decide ``record``'s robustness outcome when the rule could not; returns the
    record (unchanged when the rule decided it). The judge call runs outside any transaction; the
    outcome is written under a row lock on a fresh read. Raises ``ValueError`` for a record of no
    variant task, a broken record that never calls the broken tool, or a verdict that does not
    decide (a failed answer); ``PermissionDenied`` without ``judge.run``; the judge's own errors
    (paused configuration, transport) as ``judge_setting_case`` raises them."""
    require(user, Action.JUDGE_RUN)
    rob = record.robustness or {}
    if not rob.get("kind"):
        raise ValueError(f"record {record.pk} ({record.question_id}) is not a record of a variant task")
    if rob.get("decided_by") != JUDGE_NEEDED:
        return record
    setting, case = judge_case(rob, record.trajectory)
    verdict = judge_setting_case(config, record, setting, case, backend=backend)
    if verdict.status != "ok":
        raise ValueError(f"the judge's verdict {verdict.pk} on record {record.pk} failed: {verdict.reasoning[:200]}")
    with transaction.atomic():
        fresh = RunRecord.objects.select_for_update().get(pk=record.pk)
        if (fresh.robustness or {}).get("decided_by") == JUDGE_NEEDED:
            fresh.robustness = settle_by_judge(fresh.robustness, outcome=verdict.outcome,
                                               is_correct=verdict.is_correct, verdict_id=verdict.pk)
            fresh.save(update_fields=["robustness"])
    return fresh
