"""Replay runs: start a replay of a task revision, execute it, re-queue the stuck ones.

The engine (``kernel.engine``) is pure; this module binds it to the database: paths in a task's
arguments resolve to the event's layers (``replay.services.layers``, confined to
STUDIO_DATA_ROOT), perception tools in GT mode look up the mask layer that annotates their input
image, steps are cached (``replay.services.cache``) and finished steps are written by
``replay.services.progress``. The run, its layers and the task's robustness variant are read in
one round trip on PostgreSQL (issue 16: a warm replay there went from 13 round trips to 4, a cold
one from 17 to 7, and to 6 when the variant's row joined that read on 2026-12-03). On top of the
step cache, a replay whose ``input_fingerprint`` (trajectory, answer spec, layer file contents,
tool versions, mode) equals a succeeded replay's copies that run's steps
(``_reuse_identical_run``). The replay is handed to Celery by ``replay.jobs`` (imported here to
enqueue; the jobs import this module lazily, inside their bodies).

Crashes
    ``execute_replay`` on a run that a killed worker left ``running`` starts it over: its steps and
    folder are discarded, and the step cache answers whatever had finished, so the result (and
    its hash) is the same. ``resume_stuck_replays`` re-queues runs whose heartbeat is older than a
    timeout (``manage.py replay --resume-stuck``).
    On PostgreSQL a replay's own transactions (the new run row, progress, results, the whole-run
    copy) commit without waiting for the WAL flush (``replay.services.sql.commit_without_flush_wait``,
    sent with the transaction's last statement: ``relax_commit`` of ``replay.services.sql``; about 4 ms
    a commit here, half a warm replay's time): a crash of the database server (not of
    a worker) may lose the commits of its last 0.6 s or so. A lost result leaves its run
    ``queued`` or ``running`` for ``resume_stuck_replays`` to run again, with the same result; a
    lost new run is gone (its queued job finds no run and fails) and is requested again.
"""
from __future__ import annotations

import copy
import json
import logging
import shutil
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.db import router, transaction
from django.utils import timezone

from annotation.models import Layer, Task, TaskVariant
from annotation.services.tasks import require_unreleased
from annotation.variants import unsolvable_block
from kernel.engine import fill_answer, replay_hash, run_trajectory
from kernel.golddiff import leaf_changes
from kernel.taskfile import to_storage
from kernel.tools.base import ToolContext, ToolError
from kernel.tools.spec import get_tool
from replay.jobs import run_replay
from replay.models import ReplayRun, ReplayStep
from replay.selectors import GOLD_MODE, _close, _names_a_file
from replay.services.cache import DbStepCache, _WriteOnlyCache
from replay.services.layers import LAYER_FIELDS, LayerResolver, _checkpoint_fingerprint, input_fingerprint, task_layers
from replay.services.paths import artifact_root, artifact_store
from replay.services.progress import _finish_succeeded, _Progress
from replay.services.sql import (
    column_sql,
    copy_rows,
    copy_rows_sql,
    insert_instance,
    load_many,
    newest_row,
    one_statement_writes,
)
from replay.variant_tools import published_tools_for
from studio.events import emit
from studio.permissions import Action, can, require

log = logging.getLogger(__name__)


log = logging.getLogger(__name__)



def start_replay(user, task: Task, mode: str = "gt") -> ReplayRun:
    """Create a replay run of the task's head revision and dispatch it (in-process by default).

    Returns the run; with a broker configured it is still queued when this returns.
    """
    require(user, Action.TASK_REPLAY, task)
    run = create_run(task, mode=mode, user=user)
    run_replay.delay(run.pk)
    run.refresh_from_db()
    return run



def replay_new_variant(user, variant) -> ReplayRun | None:
    """Start the gold replay of a robustness variant just made (``annotation.services.variants``'
    hook, run after its commit), when ``user`` may replay it; None when they may not (the author
    starts it later, as for any task)."""
    if not can(user, Action.TASK_REPLAY, variant.task):
        return None
    return start_replay(user, variant.task)



def create_run(task: Task, *, mode: str = "gt", user=None) -> ReplayRun:
    """A queued replay run of the task's head revision (no permission check: callers check).

    Raises ``annotation.services.tasks.TaskLockedError`` for a GT-mode (gold) replay of a
    released task: its gold is frozen by the release. Model-perception runs (the gold baseline)
    stay possible: they are agent runs, not gold."""
    if mode == GOLD_MODE:
        require_unreleased(task, "a gold replay")
    rev = task.head
    # one INSERT (``insert_instance``: the ORM's ``create`` compiled it anew each time, at several
    # times the statement's cost; no signal listens to ReplayRun), committed without waiting for
    # the WAL flush on PostgreSQL (see the module docstring: a queued run is redone from its task).
    # In autocommit the statement is its own transaction: one round trip, where BEGIN, SET LOCAL,
    # INSERT and COMMIT were four; inside a caller's transaction a savepoint, as before
    run = ReplayRun(
        task=task, revision=rev, mode=mode, steps_total=len(rev.trajectory or []), requested_by=user,
        eval_spec={f["name"]: f["eval_type"] for f in rev.answer_spec},
        answer_format={f["name"]: f.get("answer_format", "") for f in rev.answer_spec if f.get("answer_format")},
    )
    if not transaction.get_connection(router.db_for_write(ReplayRun)).in_atomic_block:
        return insert_instance(run, relax_commit=True)
    with transaction.atomic():
        return insert_instance(run)



def execute_replay(run_id: int, *, use_cache: bool = True) -> ReplayRun:
    """Run a replay to the end and store every step. Safe to call again on a crashed run:
    its old steps and folder are discarded and the run starts over (same inputs, same result).

    A robustness variant's gold replay (``run.variant_check``): an unsolvable variant's plan runs up
    to the step ``annotation.variants.unsolvable_block`` finds and stops there, recorded as
    ``{kind: "unsolvable", blocked: {step, tool, reason}}``, its answer the refusal of its answer
    spec; a broken variant's broken step is run again with the alternative
    (:func:`alternative_check`). Both end ``succeeded``: that is the expected state.

    ``use_cache=False`` calls every tool (the cache is still filled).

    Returns the run as stored (its fields set from what was written, not read back)."""
    # the run with its revision and task, the event's layers and the task's robustness variant (if
    # any): one SELECT each, built once per process (``load_instances``; the ORM's compilation cost
    # several times the statements). The layers' event and the variant's task come from subqueries
    # over the run, so that on PostgreSQL the three SELECTs go in one round trip (``load_many``; the
    # variant was a round trip of its own before, 0.45 ms a replay there); a missing run finds no
    # layers and no variant either
    task_of_run = column_sql(ReplayRun, "task", {"id": run_id})
    found, layers, variants = load_many(
        dict(model=ReplayRun, where={"id": run_id}, related=("revision", "task")),
        # the fields the fingerprint and the resolver read (``LAYER_FIELDS``), no more
        dict(model=Layer, where={"event": column_sql(Task, "event", {"id": task_of_run})},
             fields=LAYER_FIELDS, order_by=("id",)),
        # at most one row: ``TaskVariant.task`` is one-to-one
        dict(model=TaskVariant, where={"task": task_of_run}, fields=("kind", "params", "tools")))
    if not found:
        raise ReplayRun.DoesNotExist("ReplayRun matching query does not exist.")
    run = found[0]
    rev = run.revision
    root = artifact_root()
    work_dir = root / "replays" / str(run.pk)
    if work_dir.exists():
        shutil.rmtree(work_dir)
    work_dir.mkdir(parents=True)
    steps = rev.trajectory or []
    now = timezone.now()
    layers = task_layers(run.task, layers)  # a released task reads the layer versions its release pinned
    fp = input_fingerprint(run.task, rev, run.mode, layers)
    # a run that ran before (crashed, re-queued) may have step rows: they go
    restarted = run.started_at is not None or run.status != ReplayRun.Status.QUEUED
    start = dict(status=ReplayRun.Status.RUNNING, started_at=now, heartbeat_at=now, steps_done=0, error="",
                 artifact_dir=str(work_dir.relative_to(root)), steps_total=len(steps), tool_calls=0, cache_hits=0,
                 input_fingerprint=fp, final_answer=None, filled_trajectory=[], replay_hash="",
                 artifact_manifest={}, finished_at=None, variant_check=None)
    if use_cache:  # an identical earlier run: its steps, answer and variant check are copied
        done = _reuse_identical_run(run, fp, work_dir, start, restarted)
        if done is not None:
            return done
    # a robustness variant's rules (the docstring)
    variant = {"kind": variants[0].kind, "params": variants[0].params, "tools": variants[0].tools} if variants else None
    blocked = unsolvable_block({"trajectory": steps, "input_data": rev.input_data}, variant) if variant else None
    if blocked is not None:  # the plan runs up to the step that cannot proceed (unsolvable_block's rule)
        steps = steps[:blocked["step"]]
        start.update(steps_total=len(steps), variant_check={"kind": "unsolvable", "blocked": blocked})
    resolver = LayerResolver(run.task.event_id, layers)
    checkpoint_dir = settings.STUDIO_CHECKPOINT_DIR or None
    ctx = ToolContext(work_dir=work_dir, resolve_path=resolver, gt_lookup=resolver.gt_lookup, perception_mode=run.mode,
                      checkpoint_dir=Path(checkpoint_dir) if checkpoint_dir else None)
    if run.mode == "model":
        ckpts = _checkpoint_fingerprint(checkpoint_dir)

        def fingerprint(tool, args):
            return {"checkpoints": ckpts}
    elif run.mode == "gt":
        fingerprint = resolver.fingerprint
    else:
        def fingerprint(tool, args):
            return None

    cache = DbStepCache() if use_cache else _WriteOnlyCache()
    progress = _Progress(run, cache, steps, start, restarted)
    try:
        result = run_trajectory(steps, ctx, on_step=progress, cache=cache, store=artifact_store(),
                                fingerprint=fingerprint)
    except Exception as exc:  # an engine bug, not a tool failure: record it, never leave the run "running"
        log.exception("replay %s crashed", run.pk)
        progress.flush()
        ReplayRun.objects.filter(pk=run.pk).update(status=ReplayRun.Status.FAILED, error=f"replay crashed: {exc}", finished_at=timezone.now())
        run.refresh_from_db()
        return _announce_failure(run)
    except BaseException:  # SystemExit / KeyboardInterrupt: what finished is kept (cache, progress)
        progress.flush()
        raise
    finished = timezone.now()
    common = dict(filled_trajectory=to_storage(result.filled_trajectory), finished_at=finished, heartbeat_at=finished,
                  tool_calls=result.tool_calls, cache_hits=result.cache_hits, artifact_manifest=result.manifest,
                  steps_done=progress.done)
    if not result.ok:
        failed = result.failed_step
        progress.finish(status=ReplayRun.Status.FAILED, error=failed.error if failed else "replay failed", **common)
        return _announce_failure(run)
    try:
        answer = fill_answer(rev.answer_spec, result.trajectory)
    except Exception as exc:
        progress.finish(status=ReplayRun.Status.FAILED, error=f"answer: {exc}", **common)
        return _announce_failure(run)
    answer = to_storage(_jsonable(answer))
    if variant is not None and variant["kind"] == TaskVariant.Kind.BROKEN:
        common["variant_check"] = to_storage(_jsonable(alternative_check(variant["tools"], result, ctx)))
    progress.finish(status=ReplayRun.Status.SUCCEEDED, final_answer=answer,
                    replay_hash=replay_hash(common["filled_trajectory"], answer), **common)
    return run



def alternative_check(tool_set: dict, result, ctx: ToolContext) -> dict | None:
    """The broken step of a broken variant run again with its alternative (issue 21: "an
    alternative computes the same observation on replay"; QC's ``variant.alternative_differs``).

    ``tool_set``: the variant's ``TaskVariant.tools``; ``result``: the gold replay's
    ``ReplayResult`` (authored steps, each with its resolved arguments and observation); ``ctx``:
    the replay's tool context (the same work dir, so references to earlier outputs resolve). The
    alternative is the one an agent is served (``replay.variant_tools.published_tools_for``) and
    is called with the original step's resolved arguments. Returns ``{kind: "broken", step,
    tool, alternative, same, changes: [{path, before, after}], error}``: observations compared
    leaf by leaf as ``recorded_diff`` does (numbers to 1e-6 relative, file-name leaves and the
    ``tool`` key, which names the alternative, skipped); ``error`` is the alternative's failure.
    None when the step is not in the replay (QC's ``variant.broken_step`` reports that)."""
    broken = (tool_set or {}).get("broken") or {}
    j = broken.get("step")
    try:
        spec = get_tool(str(broken.get("tool") or ""))
    except ToolError:
        return None
    if not isinstance(j, int) or not 0 <= j < len(result.steps):
        return None
    step = result.steps[j]
    try:
        if get_tool(step.call).name != spec.name:  # the step calls another tool now
            return None
    except ToolError:
        return None
    alt = next((p for p in published_tools_for(tool_set, [spec]) if p.role == "alternative"), None)
    out = {"kind": "broken", "step": j, "tool": broken["tool"], "alternative": broken.get("alternative"),
           "same": False, "changes": [], "error": None}
    if alt is None:
        out["error"] = "the variant names no alternative"
        return out
    try:
        obs = alt.call(copy.deepcopy(step.resolved_args or {}), ctx)
    except ToolError as exc:
        out["error"] = str(exc)
        return out

    def strip(o):
        return {k: v for k, v in o.items() if k != "tool"} if isinstance(o, dict) else o

    out["changes"] = leaf_changes(_jsonable(strip(step.obs)), _jsonable(strip(obs)),
                                  equal=lambda x, y: _close(x, y, 1e-6), skip=_names_a_file)
    out["same"] = not out["changes"]
    return out



#: the ``ReplayStep`` columns a reused run copies from the run it reuses (``duration_ms`` and
#: ``cached`` are set: nothing ran)
_COPIED_STEP_FIELDS = ("index", "call", "status", "args", "resolved_args", "obs", "artifacts", "error", "expanded")



def _reuse_identical_run(run: ReplayRun, fp: str, work_dir: Path, start: dict, restarted: bool) -> ReplayRun | None:
    """The whole-run level of the cache: when a succeeded replay with the same input fingerprint
    (same trajectory and answer spec, same layer contents, same tool versions and mode) exists
    and its artifacts are all in the content store, its steps are copied (``cached``: no tool
    runs) and its artifacts linked into ``work_dir``. Returns the finished run, or None.

    The step rows and the filled trajectory are copied inside the database (``INSERT … SELECT``
    and a subquery), never decoded here; the returned run loads ``filled_trajectory`` when read."""
    prev = newest_row(ReplayRun, ("id", "artifact_manifest", "final_answer", "replay_hash", "tool_calls",
                                  "cache_hits", "steps_done", "variant_check"), exclude_pk=run.pk,
                      where=dict(task=run.task_id, mode=run.mode, status=ReplayRun.Status.SUCCEEDED,
                                 input_fingerprint=fp))
    if prev is None:
        return None
    prev_id, manifest, answer, h, tool_calls, cache_hits, steps_done, variant_check = prev
    store = artifact_store()
    manifest = manifest or {}
    if not all(store.has(sha) for sha in manifest.values()):
        return None
    for name, sha in manifest.items():
        store.materialize(sha, work_dir / name)
    finished = timezone.now()
    fields = {**start, "steps_done": steps_done, "steps_total": steps_done,  # a succeeded run did them all
              "tool_calls": 0, "cache_hits": tool_calls + cache_hits,
              "artifact_manifest": manifest, "finished_at": finished, "heartbeat_at": finished,
              "variant_check": variant_check}
    fields.pop("filled_trajectory")
    copied = dict(where={"run": prev_id}, values={"run": run.pk, "duration_ms": 0, "cached": True})
    if not restarted and one_statement_writes(ReplayRun) and \
            not transaction.get_connection(router.db_for_write(ReplayRun)).in_atomic_block:
        # PostgreSQL in autocommit: the steps' copy rides in the run's UPDATE (``WITH … INSERT``),
        # one statement and one transaction (one round trip, where a transaction was six)
        _finish_succeeded(run, answer, h, filled_trajectory_of=prev_id,
                          with_statements=[copy_rows_sql(ReplayStep, list(_COPIED_STEP_FIELDS), **copied)], **fields)
        return run
    with transaction.atomic():  # the last UPDATE relaxes the commit (the module docstring, "Crashes")
        if restarted:
            ReplayStep.objects.filter(run=run).delete()
        copy_rows(ReplayStep, list(_COPIED_STEP_FIELDS), **copied)
        _finish_succeeded(run, answer, h, filled_trajectory_of=prev_id, **fields)
    return run



def _jsonable(value):
    """Round-trip through JSON so that stored values equal what the API returns."""
    return json.loads(json.dumps(value, default=str))



def resume_stuck_replays(timeout_s: float = 900.0) -> list[int]:
    """Re-queue runs left ``running`` (no progress for ``timeout_s``) or ``queued`` for longer
    than that; returns their ids. Each is executed again from the start (``execute_replay``)."""
    cutoff = timezone.now() - timedelta(seconds=timeout_s)
    stuck = []
    for run in ReplayRun.objects.filter(status__in=[ReplayRun.Status.RUNNING, ReplayRun.Status.QUEUED]).order_by("id"):
        last = run.heartbeat_at or run.started_at or run.created_at
        if last is not None and last < cutoff:
            stuck.append(run.pk)
    for pk in stuck:
        ReplayRun.objects.filter(pk=pk).update(status=ReplayRun.Status.QUEUED, heartbeat_at=timezone.now())
        run_replay.delay(pk)
    return stuck



#: the replay's kind in :mod:`studio.background`; its sweep never waits less than this for a
#: replay's heartbeat (written per step), however short ``STUDIO_JOB_STALE_AFTER_S`` is
REPLAY_KIND, REPLAY_STUCK_AFTER_S = "replay", 900.0



def sweep_replays(stale_after: float | None = None) -> list[dict]:
    """The sweeper of replays (:func:`studio.background.register_sweeper`): re-queue the runs
    without progress for ``max(stale_after, REPLAY_STUCK_AFTER_S)`` seconds
    (:func:`resume_stuck_replays`; without a broker they run again in the sweeping thread).
    Returns ``{kind, id, action: "requeued", why, removed: []}`` per run."""
    limit = max(float(stale_after or 0.0), REPLAY_STUCK_AFTER_S)
    return [{"kind": REPLAY_KIND, "id": pk, "action": "requeued", "why": f"no progress for {limit:g} s", "removed": []}
            for pk in resume_stuck_replays(limit)]



def _announce_failure(run: ReplayRun) -> ReplayRun:
    """Emit ``replay.failed`` for ``run`` (its task's owners hear of it, ``docs/notifications.md``); returns it."""
    run.refresh_from_db(fields=["status", "error"])
    task = run.task
    emit("replay.failed", {"replay_id": run.pk, "task_id": task.pk, "question_id": task.question_id,
                           "error": (run.error or "")[:300]}, task=task)
    return run

