"""Read queries for agent runs, records and verdicts."""
from __future__ import annotations

from pathlib import Path

from releases.services.export import ExportError, dora_samples
from evaluation.scoring import get_gsd
from evaluation.scoring.config import ScoringConfig
from evaluation.scoring.explain import explain_answer
from evaluation.scoring.geometry import answer_geometries
from evaluation.scoring.trajectory import align_by_tool

from evaluation.models import AgentRun, RunImportJob, RunRecord
from replay.services import artifact_path, latest_successful_replay


def run_list():
    """Runs newest first with their agent and release (one query)."""
    return AgentRun.objects.select_related("agent", "release").order_by("-id")


def run_records(run: AgentRun):
    """A run's records without their large JSON (one query)."""
    return run.records.only(
        "id", "run_id", "question_id", "dimension", "task_score", "t_any", "t_ord", "t_em", "par_acc", "eff", "task_id",
        "in_gold_set", "has_robustness", "error", "elapsed_s",
    ).order_by("dimension", "question_id")


def record_gold(record: RunRecord) -> dict:
    """The gold of a record as a scorer compares it: ``{question, trajectory, final_answer,
    eval_spec, gsd_m}``. From the snapshot taken at import; what an older snapshot lacks comes
    from the record's studio task (its head revision with the newest succeeded replay, in the
    benchmark's layout), when it still has one."""
    gold = dict(record.gold or {})
    if (not gold.get("eval_spec") or not gold.get("trajectory")) and record.task_id:
        try:
            samples = dora_samples([record.task])
        except ExportError:  # no succeeded replay of the head revision: nothing more to show
            samples = {}
        for sample in samples.get(record.dimension, [])[:1]:
            t = sample["tasks"][0]  # one task asked, one task in the sample
            for k in ("question", "trajectory", "final_answer", "eval_spec"):
                if not gold.get(k):
                    gold[k] = t.get(k)
            gold.setdefault("gsd_m", get_gsd(sample))
    return gold


def polygon_roots(record: RunRecord) -> list[Path]:
    """Where a record's polygon files are looked for (:func:`evaluation.scoring.polygons.resolve_polygon_path`):
    the run folder (predicted files), then the tasks folder the run was scored against
    (``AgentRun.gold_dir``: its ``gold_polygons/``), then the artifacts of its task's gold replay
    (the gold files of a studio task)."""
    roots = [Path(record.run.source_dir)] if record.run.source_dir else []
    if record.run.gold_dir:
        roots.append(Path(record.run.gold_dir))
    replay = latest_successful_replay(record.task) if record.task_id else None
    if replay is not None and replay.artifact_dir:
        roots.append(artifact_path(replay, "."))
    return roots


def record_evidence(record: RunRecord) -> dict:
    """Everything a scorer needs to decide a record without reading JSON, the one source of the
    record page, the queue item, the adjudication page and the record API:
    ``{question, fields, parsed, raw, parsed_ok, steps, geometries, gsd_m, has_gold_answer}``.

    ``fields``: :func:`evaluation.scoring.explain.explain_answer` rows (gold, prediction as the
    evaluator parses it, type, tolerance, the operator's reason) whose ``score`` is the stored one
    from import (``recomputed`` holds today's value when it differs, e.g. a polygon file that
    moved). ``steps``: :func:`evaluation.scoring.trajectory.align_by_tool` rows (LCS by tool).
    ``geometries``: :func:`evaluation.scoring.geometry.answer_geometries` of the polygon and
    point fields (GeoJSON Features of gold and prediction, for the map)."""
    run = record.run
    gold = record_gold(record)
    cfg = ScoringConfig(run.tau_r, run.tau_a, run.scoring_mode if run.scoring_mode in ("dora", "paper") else "dora")
    roots = polygon_roots(record)
    ex = explain_answer(record.predicted_answer, gold.get("final_answer"), gold.get("eval_spec"), gold.get("gsd_m"),
                        roots, cfg)
    stored = record.field_scores or {}
    for row in ex["fields"]:
        if row["field"] in stored and row["score"] is not None and abs(stored[row["field"]] - row["score"]) > 1e-6:
            row["recomputed"], row["score"] = row["score"], stored[row["field"]]
            row["passed"] = row["score"] >= 1 - 1e-9
    steps = align_by_tool(record.trajectory or [], gold.get("trajectory") or [], cfg)
    return {"question": gold.get("question") or (record.task.head.question if record.task_id and record.task.head_id else ""),
            "fields": ex["fields"], "parsed": ex["parsed"], "raw": ex["raw"], "parsed_ok": ex["parsed_ok"],
            "steps": steps, "geometries": answer_geometries(ex["fields"], roots), "gsd_m": gold.get("gsd_m"),
            "has_gold_answer": bool(gold.get("eval_spec"))}


def run_import_jobs(limit: int = 10):
    """The newest run-zip import jobs with their run (one query)."""
    return RunImportJob.objects.select_related("run").order_by("-id")[:limit]


def record_detail_qs():
    return RunRecord.objects.select_related("run__agent", "task__head").prefetch_related("verdicts__annotator")


# --------------------------------------------------------------------------------------------
# Verdicts, judges, the scoring queue, adjudication and agreement
# --------------------------------------------------------------------------------------------

from django.db.models import Count, Max, Prefetch, Q  # noqa: E402
from django.utils import timezone  # noqa: E402

from evaluation.judge.verdict import E_CODES  # noqa: E402
from evaluation.models import (Adjudication, JudgeCall, JudgeConfig, JudgeJob, ScoringItem, Verdict,  # noqa: E402
                               VerdictsSeen)


def is_decided(v: Verdict) -> bool:
    """A verdict that counts in adjudication and agreement: a person's only once marked final
    (a revisable one is still being made up), the judge's and the checker's always."""
    return v.source != Verdict.Source.HUMAN or v.sealed_at is not None or v.is_final


def record_verdicts(record: RunRecord, verdicts: list[Verdict] | None = None) -> dict[str, list[Verdict]]:
    """A record's verdicts (or the given ones, e.g. :func:`visible_verdicts`) split for display:
    ``{"people": [...], "judges": [...], "code": [...]}`` (final first, then newest first)."""
    out: dict[str, list[Verdict]] = {"people": [], "judges": [], "code": []}
    for v in sorted(record.verdicts.all() if verdicts is None else verdicts, key=lambda v: (not v.is_final, -v.pk)):
        out["people" if v.source == Verdict.Source.HUMAN else "judges" if v.source == Verdict.Source.JUDGE else "code"].append(v)
    return out


def judge_configs():
    """Judge configurations by name (one query)."""
    return JudgeConfig.objects.order_by("name")


def judge_jobs(limit: int | None = 50):
    """Newest judge jobs with their configuration (one query); ``limit=None``: all of them, an
    unsliced queryset (the API pages it)."""
    qs = JudgeJob.objects.select_related("config", "created_by").order_by("-id")
    return qs if limit is None else qs[:limit]


def queue_overview(by_agent: bool = True) -> list[dict]:
    """Scoring queues: one row per (release, agent, dimension) with item counts
    ``{release, agent, dimension, total, done, claimed, open, gold}`` (one query). ``by_agent``
    False (what a scorer is shown, ``evaluation.blind.sees_queue_agents``): one row per (release,
    dimension), ``agent`` None."""
    now = timezone.now()
    active = Q(verdict__isnull=True, scorer__isnull=False, lease_expires_at__gt=now)
    keys = ["record__run__release__version", *(["record__run__agent__name"] if by_agent else []), "record__dimension"]
    rows = (ScoringItem.objects.values(*keys)
            .annotate(total=Count("id"), done=Count("id", filter=Q(verdict__isnull=False)),
                      claimed=Count("id", filter=active), gold=Count("id", filter=Q(is_gold_check=True)))
            .order_by(*keys))
    return [{"release": r["record__run__release__version"], "agent": r.get("record__run__agent__name"),
             "dimension": r["record__dimension"], "total": r["total"], "done": r["done"], "claimed": r["claimed"],
             "open": r["total"] - r["done"] - r["claimed"], "gold": r["gold"]} for r in rows]


def records_scored_by(user) -> set[int]:
    """Ids of the records ``user`` gave a person verdict on or holds a queue slot of (one query):
    the records they may not adjudicate."""
    mine = Verdict.objects.filter(annotator=user, source=Verdict.Source.HUMAN, is_final=False).values_list("record_id", flat=True)
    slots = ScoringItem.objects.filter(scorer=user).values_list("record_id", flat=True)
    return set(mine.order_by().union(slots.order_by()))


def scorer_progress(user, queue) -> dict:
    """Where ``user`` stands in ``queue`` (a :class:`evaluation.services_queue.QueueFilter`):
    ``{done, revisable, left, position, of, slots, slots_done}`` — ``done`` items they submitted
    here (``revisable`` of them not final yet), ``left`` open records the queue would still hand
    them (``evaluation.services_queue.claim_next``'s exclusions: not the one they hold, nor a record
    they held a slot of, gave a verdict on or were shown the other verdicts of), ``position``/``of`` the "n of m" of the item in hand
    (``done + 1`` of ``done + held + left``), ``slots``/``slots_done`` the queue's totals.
    Three queries."""
    now = timezone.now()
    items = queue.apply(ScoringItem.objects.all())
    mine = items.filter(scorer=user)
    done = mine.filter(verdict__isnull=False).count()
    revisable = mine.filter(verdict__isnull=False, verdict__sealed_at__isnull=True).count()
    held = mine.filter(verdict__isnull=True).count()
    taken = ScoringItem.objects.filter(scorer=user).values("record_id")
    left = (items.filter(verdict__isnull=True).filter(Q(scorer__isnull=True) | Q(lease_expires_at__lte=now))
            .exclude(record_id__in=taken)
            .exclude(record_id__in=Verdict.objects.filter(annotator=user, source=Verdict.Source.HUMAN).values("record_id"))
            .exclude(record_id__in=VerdictsSeen.objects.filter(user=user).values("record_id"))
            .values("record_id").distinct().count())
    totals = items.aggregate(slots=Count("id"), slots_done=Count("id", filter=Q(verdict__isnull=False)))
    return {"done": done, "revisable": revisable, "left": left, "position": done + 1, "of": done + held + left,
            "held": held, **totals}


def my_queue_verdicts(user, queue, limit: int = 200) -> list[ScoringItem]:
    """The items ``user`` submitted in ``queue``, newest first, with record and verdict (one query)."""
    return list(queue.apply(ScoringItem.objects.filter(scorer=user, verdict__isnull=False))
                .select_related("record__run__agent", "verdict").order_by("-verdict__id")[:limit])


def scoring_item_qs():
    return ScoringItem.objects.select_related("record__run__agent", "record__task__head", "scorer")


def scorer_accuracy() -> list[dict]:
    """Each scorer's accuracy on silent gold checks: ``{scorer, n, correctness, grade_mae,
    flags_exact}`` (shares in [0, 1]; None without data), by scorer name (one query)."""
    items = (ScoringItem.objects.filter(is_gold_check=True, verdict__isnull=False)
             .select_related("verdict", "scorer").order_by("scorer__username", "id"))
    by: dict[str, list] = {}
    for it in items:
        by.setdefault(it.scorer.username if it.scorer else "?", []).append(it)
    out = []
    for name, its in by.items():
        corr, gd, fl = [], [], []
        for it in its:
            exp, v = it.expected or {}, it.verdict
            corr.append(1.0 if exp.get("is_correct") == v.is_correct else 0.0)
            if exp.get("grade") is not None and v.grade is not None:
                gd.append(abs(exp["grade"] - v.grade))
            ef = {c for c in E_CODES if (exp.get("errors") or {}).get(c)}
            vf = {c for c in E_CODES if (v.errors or {}).get(c)}
            fl.append(1.0 if ef == vf else 0.0)
        out.append({"scorer": name, "n": len(its), "correctness": sum(corr) / len(corr),
                    "grade_mae": sum(gd) / len(gd) if gd else None, "flags_exact": sum(fl) / len(fl)})
    return out


def _verdict_prefetch():
    return Prefetch("verdicts", queryset=Verdict.objects.select_related("annotator").order_by("id"))


def adjudication_queue(limit: int = 500) -> list[dict]:
    """Records whose considered verdicts disagree and that have no final verdict yet, oldest
    record first: ``[{record, verdicts, pairs, reasons}]`` (three queries whatever the size)."""
    from evaluation.services_adjudication import DisagreementRules, considered, find_disagreements

    rules = DisagreementRules.from_settings()
    ok = Q(verdicts__status="ok", verdicts__source__in=rules.sources, verdicts__is_final=False,
           verdicts__protocol__in=["holistic", ""])
    records = (RunRecord.objects.annotate(n_considered=Count("verdicts", filter=ok),
                                          n_final=Count("verdicts", filter=Q(verdicts__is_final=True)))
               .filter(n_considered__gte=2, n_final=0).select_related("run__agent")
               .only("id", "question_id", "dimension", "run__id", "run__name", "run__agent__name")
               .prefetch_related(_verdict_prefetch()).order_by("id")[:limit])
    out = []
    for r in records:
        pool = considered(r.verdicts.all(), rules)
        pairs = find_disagreements(pool, rules)
        if pairs:
            reasons = sorted({x.split(":")[0] for p in pairs for x in p["reasons"]})
            out.append({"record": r, "verdicts": pool, "pairs": pairs, "reasons": reasons})
    return out


def adjudication_record_qs():
    return RunRecord.objects.select_related("run__agent", "task__head").prefetch_related(_verdict_prefetch())


def recent_adjudications(limit: int = 20):
    """Newest adjudications with their record and reviewer (one query)."""
    return Adjudication.objects.select_related("record__run__agent", "reviewer", "final_verdict").order_by("-id")[:limit]


def agreement_rows() -> list[dict]:
    """Every successful verdict as a row for :func:`evaluation.agreement.agreement_report`.

    The unit judged (``run_id``) is ``<record id>:<protocol>`` (a step-wise cut is a different
    question from the whole run); humans are the reference; a judge row carries
    ``judge_model`` and ``prompt_version``; ``tested_model`` is the agent; ``dimension`` the
    record's. Where one rater judged one unit twice (re-runs), the newest verdict counts. Of a
    record's adjudicated verdicts only the newest is a row (the reference, ``final``); raters are
    the verdicts of ``evaluation.blind.is_rater``. Two queries.
    """
    qs = (Verdict.objects.filter(status="ok").exclude(is_correct__isnull=True)
          .select_related("annotator", "record__run__agent").order_by("id"))
    newest_final = dict(Verdict.objects.filter(is_final=True, status="ok").values("record_id")
                        .annotate(last=Max("id")).values_list("record_id", "last"))
    rows: dict[tuple, dict] = {}
    for v in qs:
        if not is_decided(v):
            continue  # a person's verdict still being revised (blind, not final) is no decision yet
        if v.is_final and newest_final.get(v.record_id) != v.pk:
            continue  # an adjudicated verdict a re-adjudication replaced: neither the reference nor a rater
        protocol = v.protocol or "holistic"
        unit = f"{v.record_id}:{protocol}"
        row = {"run_id": unit, "source": v.source, "is_correct": v.is_correct, "grade": v.grade,
               "errors": {c: bool((v.errors or {}).get(c)) for c in E_CODES} if v.errors else None,
               "dimension": v.record.dimension, "protocol": protocol, "tested_model": v.record.run.agent.name}
        if v.source == Verdict.Source.HUMAN:
            row["annotator"] = v.annotator.username if v.annotator else f"person-{v.annotator_id}"
            if v.is_final:
                row["final"] = True
                row["annotator"] += " (final)"
        else:
            pv = v.prompt_version or ""
            model = v.judge_name[: -len(pv) - 1] if pv and v.judge_name.endswith("@" + pv) else v.judge_name
            row["annotator"] = model or v.source
            if v.source == Verdict.Source.JUDGE:
                row["judge_model"] = model
            row["prompt_version"] = pv or None
        rows[(row["source"], row["annotator"], row.get("prompt_version"), unit)] = row
    return list(rows.values())


def release_runs(release):
    """Agent runs scored on ``release`` (``AgentRun.release``), newest first (moved from
    ``releases.selectors``: runs are evaluation's, above releases)."""
    return AgentRun.objects.filter(release=release).select_related("agent").order_by("-id")


def release_adjudication(task, release_id: int | None) -> dict:
    """The sidecar's ``adjudication`` of ``task`` in release ``release_id``: ``{records, adjudicated,
    overrides_all}`` over the records of the runs scored on that release (all 0 for an export of the
    tasks' heads, ``release_id`` None). Registered as a ``releases.services.export`` sidecar field."""
    if not release_id:
        return {"records": 0, "adjudicated": 0, "overrides_all": 0}
    ids = list(RunRecord.objects.filter(task=task, run__release_id=release_id).values_list("pk", flat=True))
    if not ids:  # one query per task when no run was scored on the release (issue 16: 100,000-task exports)
        return {"records": 0, "adjudicated": 0, "overrides_all": 0}
    adj = Adjudication.objects.filter(record_id__in=ids)
    return {"records": len(ids), "adjudicated": adj.values("record_id").distinct().count(),
            "overrides_all": adj.filter(overrides_all=True).count()}


def release_adjudications(task_ids: list[int], release_id: int | None) -> dict[int, dict]:
    """``{task id: release_adjudication(task, release_id)}`` for every id in ``task_ids``, in two
    queries (the records of the runs scored on the release, then their adjudications; the second
    only when there are records): the batched form of the sidecar field, which an export uses."""
    out = {pk: {"records": 0, "adjudicated": 0, "overrides_all": 0} for pk in task_ids}
    if not release_id or not task_ids:
        return out
    task_of = dict(RunRecord.objects.filter(task_id__in=task_ids, run__release_id=release_id).values_list("pk", "task_id"))
    if not task_of:
        return out
    adjudicated: dict[int, set] = {}
    for record_id, overrides_all in Adjudication.objects.filter(record_id__in=list(task_of)).values_list(
            "record_id", "overrides_all"):
        summary = out[task_of[record_id]]
        adjudicated.setdefault(task_of[record_id], set()).add(record_id)
        summary["overrides_all"] += bool(overrides_all)
    for record_id, task_id in task_of.items():
        out[task_id]["records"] += 1
    for task_id, records in adjudicated.items():
        out[task_id]["adjudicated"] = len(records)
    return out


def record_judge_calls(record) -> list:
    """The judge calls of ``record``, newest first, with their configuration (one query): every
    raw answer each call received (``JudgeCall.raw_texts``, unreadable ones and those of a failed
    re-ask included), its status, error, tokens, latency and what was trimmed from its prompt.
    Callers show them only to a person who may see the record's verdicts
    (:func:`evaluation.blind.sees_verdicts`): a raw answer is a judge outcome."""
    return list(JudgeCall.objects.filter(record_id=record.pk).select_related("config").order_by("-id"))
