"""Queries that feed the leaderboard (:mod:`evaluation.leaderboard`).

From the records (exports, and the sums of one run): two queries in all, whatever the number of
runs and records: one for the runs, one for the records joined to their agent, run and studio task
head revision. For the page: the runs with their stored sums (:class:`~evaluation.models.RunAggregate`)
in one query, a few aggregate queries that tell whether those sums are still current, and the
stored bootstrap intervals (:class:`~evaluation.models.LeaderboardBootstrap`) under the state of the
runs and their stored record counts: no query of the page reads or counts every record.
"""
from __future__ import annotations

from django.db.models import Count, Max, Sum

from annotation.models import TaskRevision
from evaluation import leaderboard as lb
from evaluation.goldset import is_studio_key, perception_of_key, ranking_key, ranking_q
from evaluation.models import AgentRun, LeaderboardBootstrap, RunAggregate, RunRecord
from evaluation.paired import paired_comparison

_RECORD_FIELDS = (
    "id", "run_id", "run__name", "run__agent__name", "run__scoring_mode", "run__tau_r", "run__tau_a", "run__gold_set",
    "dimension", "question_id", "task_id", "task_score", "t_any", "t_ord", "t_em", "par_acc", "eff", "elapsed_s",
)


def leaderboard_runs(gold_set: str | None = None) -> list[dict]:
    """Every run as ``{run_id, agent, run_name, mode, dora_score, dimensions, protocol, scaffold,
    prompt_tokens, completion_tokens, cost, seconds}`` (one query; the last four:
    :data:`evaluation.leaderboard.ACCOUNTING`, None for a run without accounting); only the runs of gold set ``gold_set`` (its key, :func:`gold_set_key`) when given.
    Planner runs of the step-wise protocol (``scoring_mode="stepwise"``) have no DORA score and
    are left out."""
    qs = AgentRun.objects.exclude(scoring_mode="stepwise")
    if gold_set is not None:
        qs = qs.filter(ranking_q(gold_set))
    qs = qs.order_by("id").values(
        "id", "name", "agent__name", "scoring_mode", "dora_score", "dimensions", "protocol", "scaffold", *lb.ACCOUNTING)
    return [{"run_id": r["id"], "agent": r["agent__name"], "run_name": r["name"], "mode": r["scoring_mode"],
             "dora_score": r["dora_score"], "dimensions": r["dimensions"] or {}, "protocol": r["protocol"],
             "scaffold": r["scaffold"], **{k: r[k] for k in lb.ACCOUNTING}} for r in qs]


def leaderboard_records(run_ids=None, gold_set: str | None = None):
    """The records :func:`leaderboard_rows` reads, as a queryset (not yet narrowed to fields): each
    run's gold-set records (robustness variants and step-wise planner runs left out), of the runs
    ``run_ids`` and of gold set ``gold_set`` (its key) when given, ordered by run, dimension and
    question id. Lists and exports narrow it further (the blind rule) or count it."""
    qs = (RunRecord.objects.filter(in_gold_set=True).exclude(run__scoring_mode="stepwise")
          .order_by("run_id", "dimension", "question_id"))
    if run_ids is not None:
        qs = qs.filter(run_id__in=list(run_ids))
    if gold_set is not None:
        qs = qs.filter(ranking_q(gold_set, "run__"))
    return qs


def _fields(extras: bool) -> tuple[str, ...]:
    fields = _RECORD_FIELDS + ("task__head__input_data", "task__head__trajectory") + tuple(
        f"run__{k}" for k in lb.ACCOUNTING)
    return fields + (("trajectory",) if extras else ())


def _row(r: dict, extras: bool, per_task: dict) -> dict:
    """The plain row of one record's values (see :func:`leaderboard_rows`); ``per_task`` caches a
    task's gold length, bucket and modality across its records."""
    gold_traj = r["task__head__trajectory"] if r["task_id"] is not None else None
    if r["task_id"] is not None and r["task_id"] not in per_task:
        n = lb.gold_length(gold_traj)
        per_task[r["task_id"]] = (n, lb.length_bucket(n), lb.modality_config(r["task__head__input_data"]))
    gold_len, bucket, modality = per_task.get(r["task_id"], (None, None, None))
    row = {
        "record_id": r["id"], "run_id": r["run_id"], "run_name": r["run__name"], "agent": r["run__agent__name"],
        "mode": r["run__scoring_mode"], "gold_set": r["run__gold_set"], "dimension": r["dimension"],
        "question_id": r["question_id"],
        "task_id": r["task_id"], "task_score": r["task_score"], "elapsed_s": r["elapsed_s"],
        **{m: r[m] for m in lb.METRICS},
        "gold_len": gold_len, "length_bucket": bucket, "modality": modality,
        "n_pred_steps": None, "lcs_par_acc": None, "multiset_recall": None, "extraneous_calls": None,
        **{f"run_{k}": r[f"run__{k}"] for k in lb.ACCOUNTING},
    }
    if extras:
        row.update(lb.record_extras(r["trajectory"], gold_traj, r["run__tau_r"], r["run__tau_a"]))
    return row


def _run_dimensions(qs):
    """The (run id, dimension) pairs of ``qs``'s records in order, each found by one seek of the
    index (run, dimension, question id) past the last (a skip scan: a handful of small queries,
    where a DISTINCT would read every record)."""
    run_id = None
    while True:
        nxt = qs if run_id is None else qs.filter(run_id__gt=run_id)
        run_id = nxt.order_by("run_id").values_list("run_id", flat=True).first()
        if run_id is None:
            return
        dimension = None
        while True:
            of_run = qs.filter(run_id=run_id) if dimension is None else qs.filter(run_id=run_id, dimension__gt=dimension)
            dimension = of_run.order_by("dimension").values_list("dimension", flat=True).first()
            if dimension is None:
                break
            yield run_id, dimension


def iter_leaderboard_rows(extras: bool = True, run_ids=None, gold_set: str | None = None, *, exclude=None,
                          first_chunk: int = 1000, chunk: int = 10_000):
    """:func:`leaderboard_rows` one row at a time, for an export that streams; ``exclude``: a
    condition on the records (e.g. ``evaluation.blind.blind_filter``) whose rows are left out.

    Read in the same order a range of the index (run, dimension, question id) at a time: the
    (run, dimension) pairs by :func:`_run_dimensions`, then per pair ``chunk`` records after the last question id read
    (keyset; the very first query reads ``first_chunk``). Each query starts where its rows are, so
    the first rows come at once whatever the size; one query over every record would have the
    database sort them all first (PostgreSQL chose that: 1.7 s before the first of 200,000 records)."""
    fields = _fields(extras)
    qs = leaderboard_records(run_ids, gold_set)
    if exclude is not None:
        qs = qs.exclude(exclude)
    per_task: dict = {}
    size = first_chunk
    for run_id, dimension in _run_dimensions(qs):
        after = None
        while True:
            part = qs.filter(run_id=run_id, dimension=dimension)
            if after is not None:
                part = part.filter(question_id__gt=after)
            batch = list(part.order_by("question_id").values(*fields)[:size])
            for r in batch:
                yield _row(r, extras, per_task)
            if len(batch) < size:
                break
            after, size = batch[-1]["question_id"], chunk


def leaderboard_rows(extras: bool = True, run_ids=None, gold_set: str | None = None) -> list[dict]:
    """One plain row per run record of the run's gold set (``RunRecord.in_gold_set``: robustness
    variants have their own table, :mod:`evaluation.selectors.robustness`) (one query; see
    :data:`evaluation.leaderboard.ROW_COLUMNS`), ordered by run, dimension and question id; only
    the runs ``run_ids`` when given, only the runs of gold set ``gold_set`` (its key,
    :func:`gold_set_key`) when given; every row names its run's set (``gold_set``).

    ``gold_len`` (flattened gold steps of the task's head revision), ``length_bucket`` and
    ``modality`` (from the head revision's ``input_data``) are None when the record has no studio
    task (or the task no head revision): such records are left out of those breakdowns. With
    ``extras`` the per-record extras are computed from the record's predicted trajectory and the
    head revision's gold trajectory (None without a task; ``n_pred_steps`` always). ``run_prompt_tokens``,
    ``run_completion_tokens``, ``run_cost`` and ``run_seconds`` are the run's accounting
    (:data:`evaluation.leaderboard.ACCOUNTING`; the same on every record of a run, None for a run
    without it).
    """
    per_task: dict = {}
    qs = leaderboard_records(run_ids, gold_set).values(*_fields(extras))
    return [_row(r, extras, per_task) for r in qs.iterator(chunk_size=500)]


def leaderboard_data(extras: bool = True, gold_set: str | None = None) -> tuple[list[dict], list[dict]]:
    """``(runs, rows)`` for :func:`evaluation.leaderboard.build` (two queries); of one gold set
    (its key) when given."""
    return leaderboard_runs(gold_set), leaderboard_rows(extras, gold_set=gold_set)


# ── the page: stored sums and bootstrap ─────────────────────────────────

def newest_revision_id() -> int:
    """The newest ``TaskRevision`` id (0 when there is none): the gold stamp of run sums."""
    return TaskRevision.objects.aggregate(m=Max("id"))["m"] or 0


def aggregated_runs() -> tuple[list[dict], dict, dict]:
    """``(runs, sums, state)`` in one query: the runs as :func:`leaderboard_runs` gives them (planner
    runs of the step-wise protocol left out),
    ``{run_id: run_aggregate dict}`` of the runs that have stored sums, and ``{run_id:
    (gold_revision, n_no_task, n_records, newest_record)}`` of the same runs (what
    :func:`stale_aggregates` checks)."""
    qs = AgentRun.objects.exclude(scoring_mode="stepwise").order_by("id").values(
        "id", "name", "agent__name", "scoring_mode", "dora_score", "dimensions", "protocol", "scaffold",
        "gold_set", "gold_set_digest", "perception_mode", "release__version", "release__status", "release__published_at", "aggregate__id", "aggregate__sums", "aggregate__gold_revision", "aggregate__n_no_task",
        "aggregate__n_records", "aggregate__newest_record", *lb.ACCOUNTING)
    runs, sums, state = [], {}, {}
    for r in qs:
        runs.append({"run_id": r["id"], "agent": r["agent__name"], "run_name": r["name"], "mode": r["scoring_mode"],
                     "dora_score": r["dora_score"], "dimensions": r["dimensions"] or {}, "protocol": r["protocol"],
                     "scaffold": r["scaffold"], "gold_set": r["gold_set"], "gold_set_key": ranking_key(r["gold_set"], r["gold_set_digest"], r["perception_mode"]),
                     "perception_mode": r["perception_mode"],
                     "published": r["release__published_at"] if r["release__status"] == "published" else None,
                     **{k: r[k] for k in lb.ACCOUNTING}})
        if r["aggregate__id"] is not None:
            sums[r["id"]] = r["aggregate__sums"] or {}
            state[r["id"]] = (r["aggregate__gold_revision"], r["aggregate__n_no_task"], r["aggregate__n_records"],
                              r["aggregate__newest_record"])
    return runs, sums, state


def gold_set_key(run: dict) -> str:
    """The ranking key of a run's gold set (a run dict of :func:`aggregated_runs`;
    :func:`evaluation.goldset.ranking_key`): a release's or folder's digest, ``studio:<digest>`` for
    the studio's current tasks, ``""`` for runs scored before sets were named."""
    return run.get("gold_set_key") or ""


#: what a set's label adds for runs outside the benchmark's perception protocol
PERCEPTION_LABEL = {"gt": " · oracle perception", "classical": " · classical perception"}


def gold_sets(runs: list[dict]) -> list[dict]:
    """The gold sets of ``runs`` (:func:`aggregated_runs`' runs; no query), newest first (by their
    newest run): ``{key, label, n_runs, newest_run, published}``; ``label`` is the newest run's
    name of the set (a studio set's: the date its newest run read it and its digest), with
    " · oracle perception" for the group of oracle-perception runs (:data:`PERCEPTION_LABEL`);
    ``published`` the publication time of a published release's set (benchmark-protocol runs
    only, so the default set is never an oracle one), else None."""
    sets: dict[str, dict] = {}
    for r in runs:
        key = gold_set_key(r)
        entry = sets.setdefault(key, {"key": key, "n_runs": 0, "newest_run": 0, "label": "", "published": None})
        entry["n_runs"] += 1
        if r["run_id"] >= entry["newest_run"]:
            entry["newest_run"] = r["run_id"]
            entry["label"] = (f"{r.get('gold_set')} · digest {key.split(':', 1)[1][:12]}" if is_studio_key(key) and ":" in key
                              else r.get("gold_set") or "not named (scored before gold sets were named)")
            entry["label"] += PERCEPTION_LABEL.get(perception_of_key(key)[1], "")
        if key and r.get("published") is not None and perception_of_key(key)[1] is None:
            entry["published"] = r["published"]
    return sorted(sets.values(), key=lambda e: -e["newest_run"])


def default_gold_set(sets: list[dict]) -> str | None:
    """The set a leaderboard shows when none is asked for (no query): the newest published release
    that has runs (by publication time), else the set of the newest run; None without runs."""
    published = [e for e in sets if e["published"] is not None]
    if published:
        return max(published, key=lambda e: (e["published"], e["newest_run"]))["key"]
    return sets[0]["key"] if sets else None


def stale_aggregates(run_ids, state: dict) -> tuple[set, set, int]:
    """Which stored run sums no longer describe the records: ``(stale, behind, newest)``.

    ``stale``: runs of ``run_ids`` without sums, sums stored before their ``newest_record`` was (records
    but no newest record id), runs whose number of records without a studio task changed (a task
    was deleted), and runs with a record on a task whose head revision is newer than the run's
    ``gold_revision``. ``behind``: the other runs whose ``gold_revision`` is older
    than ``newest`` (:func:`newest_revision_id`) — still right, their stamp may move up. Two
    queries, three when some sums are behind; none per run or per record.
    """
    run_ids = set(run_ids)
    newest = newest_revision_id()
    stale = run_ids - set(state)
    no_task = dict(RunRecord.objects.filter(task__isnull=True, in_gold_set=True).values("run_id").annotate(n=Count("id"))
                   .values_list("run_id", "n"))
    for rid, (_rev, n_no_task, n_records, newest_record) in state.items():
        if rid in run_ids and (no_task.get(rid, 0) != n_no_task or (n_records and not newest_record)):
            stale.add(rid)
    behind = {rid for rid, (rev, *_n) in state.items() if rid in run_ids and rid not in stale and rev < newest}
    if behind:
        oldest = min(state[rid][0] for rid in behind)
        newest_head = dict(RunRecord.objects.filter(run_id__in=behind, task__head_id__gt=oldest, in_gold_set=True)
                           .values("run_id").annotate(h=Max("task__head_id")).values_list("run_id", "h"))
        changed = {rid for rid, head in newest_head.items() if head > state[rid][0]}
        stale |= changed
        behind -= changed
    return stale, behind, newest


def records_state() -> str:
    """``c<count>-<newest id>`` of the records of the leaderboard's runs (planner runs of the
    step-wise protocol left out): with the runs, the state the bootstrap intervals are computed for.

    Read from the runs' stored sums (``RunAggregate.n_records`` and ``newest_record``: one aggregate
    query over one row per run, none over the records), which describe the records exactly: records
    are written only with their run (an import, in the transaction that stores its sums), deleted
    only with it, and never re-scored in place. A run without sums counts no record here until the
    page stores them (:func:`stale_aggregates`); :func:`bootstrap_inputs` gives the same string from
    the records it reads."""
    agg = RunAggregate.objects.exclude(run__scoring_mode="stepwise").aggregate(n=Sum("n_records"), m=Max("newest_record"))
    return f"c{agg['n'] or 0}-{agg['m'] or None}"


def bootstrap_version(runs: list[dict], records: str) -> str:
    """The state key of :class:`~evaluation.models.LeaderboardBootstrap`: the runs (count and
    newest id) and :func:`records_state`."""
    newest = max((r["run_id"] for r in runs), default=None)
    return f"r{len(runs)}-{newest}.{records}"


def bootstrap_inputs() -> tuple[list[dict], list[dict], str]:
    """``(runs, rows, version)`` for :func:`evaluation.leaderboard.bootstrap_ci`: rows are
    ``{run_id, dimension, task_score}`` of the runs' records (step-wise planner runs left out, as
    ``bootstrap_ci`` ignores them) in the order of :func:`leaderboard_rows` (the resampling draws
    depend on it); ``version`` describes exactly what was read (two queries)."""
    runs = leaderboard_runs()
    qs = (RunRecord.objects.filter(in_gold_set=True).exclude(run__scoring_mode="stepwise")
          .order_by("run_id", "dimension", "question_id").values_list("id", "run_id", "dimension", "task_score"))
    rows, newest = [], None
    for rid, run_id, dim, score in qs.iterator(chunk_size=5000):
        rows.append({"run_id": run_id, "dimension": dim, "task_score": score})
        newest = rid if newest is None or rid > newest else newest
    return runs, rows, bootstrap_version(runs, f"c{len(rows)}-{newest}")


def bootstrap_row(version: str, n_boot: int, seed: int):
    """The stored :class:`~evaluation.models.LeaderboardBootstrap` of that state, or None."""
    return LeaderboardBootstrap.objects.filter(version=version, n_boot=n_boot, seed=seed).first()


# ── the paired comparison of two runs ───────────────────────────────────

def compare_runs(run_a: int, run_b: int, n_boot: int = 2000, seed: int = 0) -> dict:
    """The paired comparison of run ``run_b`` against run ``run_a`` (:func:`evaluation.paired.
    paired_comparison` over their records in the gold set, ``diff`` = B - A), with ``a`` and
    ``b`` (``{id, agent, name, mode, gold_set, dora_score}``) and ``gold_set``. Two queries.
    ``{"error": text}`` instead when a run is missing, a step-wise planner run, or the two runs
    were scored on different gold sets, in different modes or thresholds (never compared)."""
    runs = {r["id"]: r for r in AgentRun.objects.filter(pk__in=[run_a, run_b]).values(
        "id", "agent__name", "name", "scoring_mode", "tau_r", "tau_a", "gold_set", "gold_set_digest", "perception_mode",
        "dora_score")}
    missing = [str(i) for i in (run_a, run_b) if i not in runs]
    if missing:
        return {"error": f"no run {', '.join(missing)}"}
    a, b = runs[run_a], runs[run_b]
    if "stepwise" in (a["scoring_mode"], b["scoring_mode"]):
        return {"error": "a step-wise planner run has no task scores to compare"}
    key = ranking_key(a["gold_set"], a["gold_set_digest"], a["perception_mode"])
    if (a["perception_mode"] == "gt") != (b["perception_mode"] == "gt"):
        return {"error": f"run {run_a} and run {run_b}: one ran with oracle perception (GT masks), the other under the "
                         f"benchmark's protocol: they are never compared"}
    if key != ranking_key(b["gold_set"], b["gold_set_digest"], b["perception_mode"]):
        return {"error": f"run {run_a} was scored on {a['gold_set'] or 'an unnamed set'} and run {run_b} on "
                         f"{b['gold_set'] or 'an unnamed set'}: runs on different gold sets are never compared "
                         f"(re-score one of them on the other's set first)"}
    if (a["scoring_mode"], a["tau_r"], a["tau_a"]) != (b["scoring_mode"], b["tau_r"], b["tau_a"]):
        return {"error": f"runs {run_a} and {run_b} were scored in different modes or thresholds"}
    scores: dict[int, dict] = {run_a: {}, run_b: {}}
    for run_id, qid, dim, score in (RunRecord.objects.filter(run_id__in=[run_a, run_b], in_gold_set=True)
                                    .values_list("run_id", "question_id", "dimension", "task_score")):
        scores[run_id][qid] = (dim, score)
    out = paired_comparison(scores[run_a], scores[run_b], n_boot=n_boot, seed=seed)

    def named(r):
        return {"id": r["id"], "agent": r["agent__name"], "name": r["name"], "mode": r["scoring_mode"],
                "gold_set": r["gold_set"], "dora_score": r["dora_score"]}

    return {**out, "a": named(a), "b": named(b), "gold_set": a["gold_set"], "gold_set_key": key}
