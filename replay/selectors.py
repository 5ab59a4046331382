"""Reads of the replay app: a task's gold and pending replays, and the diffs a person reviews (a
replay against the gold before it, against the observations recorded in a task file).

``latest_successful_replay`` (what export, QC and the run pages read) returns the accepted gold of
the head revision only; ``pending_replay`` the newest succeeded replay waiting for
``replay.services.gold.accept_gold``.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from annotation.models import Layer, Task
from annotation.services.task_import import TaskImportError
from kernel.engine import collapse_expanded
from kernel.golddiff import DIFFERS, step_diff
from kernel.taskfile import from_storage, same_value, source_from_text, to_storage
from kernel.tools.base import ToolError
from kernel.tools.spec import get_tool
from replay.models import ReplayRun

#: the perception mode whose replays give the gold (model/classical runs never become gold)
GOLD_MODE = "gt"



def current_gold(task: Task, *, exclude: int | None = None) -> ReplayRun | None:
    """The task's gold: its newest succeeded replay with ``gold_accepted`` (any revision)."""
    qs = ReplayRun.objects.filter(task=task, mode=GOLD_MODE, status=ReplayRun.Status.SUCCEEDED, gold_accepted=True)
    if exclude is not None:
        qs = qs.exclude(pk=exclude)
    # the big JSON columns load only when read
    return qs.defer("filled_trajectory", "artifact_manifest", "final_answer").order_by("-id").first()



def latest_successful_replay(task: Task) -> ReplayRun | None:
    """The gold of the task's head revision: its newest succeeded, accepted replay, or None
    (never replayed, or the newest replay's change is waiting for ``accept_gold``)."""
    return ReplayRun.objects.filter(task=task, revision_id=task.head_id, mode=GOLD_MODE,
                                    status=ReplayRun.Status.SUCCEEDED, gold_accepted=True).order_by("-id").first()



def succeeded_runs_of_head(task: Task):
    """The succeeded replays of ``task``'s head revision, newest first (a queryset): what QC reads
    as the task's replays (registered as ``annotation.services.qc.ReplaySource``)."""
    return ReplayRun.objects.filter(task=task, revision_id=task.head_id,
                                    status=ReplayRun.Status.SUCCEEDED).order_by("-id")



def pending_replay(task: Task) -> ReplayRun | None:
    """The newest succeeded replay newer than the gold that is waiting for acceptance, or None."""
    gold = current_gold(task)
    qs = ReplayRun.objects.filter(task=task, mode=GOLD_MODE, status=ReplayRun.Status.SUCCEEDED, gold_accepted=False)
    if gold is not None:
        qs = qs.filter(pk__gt=gold.pk)
    return qs.order_by("-id").first()



def replay_diff(run: ReplayRun, base: ReplayRun | None = None) -> dict:
    """What changed between ``base`` (default: the gold before ``run``) and ``run``.

    Returns ``{run, base, pending, changed, answer: [{field, before, after, changed}],
    steps: [{index, call, state: same|filled|changed|added|removed, changes: [{path, before, after}]}]}``;
    steps are compared on their authored index, observations leaf by leaf (``kernel.golddiff``:
    ``filled`` where the gold before had no observation of the step).
    """
    if base is None:
        base = (ReplayRun.objects.filter(task_id=run.task_id, mode=GOLD_MODE, status=ReplayRun.Status.SUCCEEDED, gold_accepted=True,
                                         pk__lt=run.pk).order_by("-id").first())
    answer_rows, step_rows = [], []
    before_answer = (base.final_answer or {}) if base else {}
    after_answer = run.final_answer or {}
    for name in sorted(set(before_answer) | set(after_answer)):
        b, a = before_answer.get(name), after_answer.get(name)
        answer_rows.append({"field": name, "before": b, "after": a, "changed": base is not None and a != b})
    if base is not None:
        step_rows = step_diff(collapse_expanded(base.filled_trajectory or [])[0],
                              collapse_expanded(run.filled_trajectory or [])[0])
    changed = base is not None and (base.replay_hash != run.replay_hash)
    return {"run": run.pk, "base": base.pk if base else None, "pending": run.status == ReplayRun.Status.SUCCEEDED
            and not run.gold_accepted, "changed": changed, "gold_accepted": run.gold_accepted,
            "accepted_by": run.accepted_by.username if run.accepted_by_id else None,
            "answer": answer_rows, "steps": step_rows}



#: the tool server whose observations depend on the perception source (GT masks or a model)
PERCEPTION_SERVER = "Perception"



def _names_a_file(path: str) -> bool:
    """True for an observation leaf that names an artifact (``mask_path``, ``results[0].
    output_path``, ``path``): two runs name their files differently (the benchmark's absolute
    temp paths, the studio's content-hashed names), so such leaves are not compared."""
    last = path.rsplit(".", 1)[-1].split("[", 1)[0]
    return last == "path" or last.endswith("_path")



def _close(a: Any, b: Any, rtol: float) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        fa, fb = float(a), float(b)
        if fa == fb or (math.isnan(fa) and math.isnan(fb)):  # equal infinities; NaN recorded and replayed
            return True
        return abs(fa - fb) <= 1e-9 + rtol * max(abs(fa), abs(fb))
    return a == b



def _is_perception(call: str) -> bool:
    try:
        return get_tool(str(call).split("(", 1)[0].strip()).server == PERCEPTION_SERVER
    except ToolError:
        return False



def recorded_diff(run: ReplayRun, recorded: list[dict], *, rtol: float = 1e-6) -> dict:
    """A replay against the observations recorded in a benchmark-layout task file.

    ``recorded``: the task's ``trajectory`` as the file holds it (calls, args and the ``obs`` the
    benchmark's tools returned; loop expansions allowed). Both sides are compared on authored
    indices (``collapse_expanded``), observations leaf by leaf: numbers within ``rtol``
    (relative; the issue's 1e-6), leaves that name files skipped (``_names_a_file``).

    A perception step (server ``Perception``) whose observation differs gets state ``source``:
    the studio replays with GT masks (``run.mode``), the file's observation came from the
    benchmark's model, so the difference is the perception source and not a tool disagreement;
    the row's ``note`` says so. A step whose recorded observation is blank (``{}``, ``null`` or
    no ``obs``: not recorded, how a file is authored before its gold is replayed) is ``filled``
    (``kernel.golddiff``). Other steps are ``same``, ``changed``, ``added`` or ``removed``.

    Returns ``{run, mode, steps: [{index, call, state, changes, note?}], changed, filled}`` where
    ``changed`` is true when a non-perception step differs (a gold the benchmark's tools would
    not give: a state in ``kernel.golddiff.DIFFERS``), false when at most perception sources
    differ or blank observations were filled; ``filled`` counts the filled steps.
    """
    rows = step_diff(collapse_expanded(recorded or [])[0], collapse_expanded(from_storage(run.filled_trajectory or []))[0],
                     calls=False, equal=lambda x, y: _close(x, y, rtol), skip=_names_a_file,
                     call_name=lambda c: str(c).split("(", 1)[0].strip())
    for row in rows:
        if row["state"] == "changed" and _is_perception(row["call"]):
            row["state"] = "source"
            row["note"] = (f"perception source: the studio replayed this step with "
                           f"{(run.mode or 'gt').upper()} perception, the file's observation came "
                           f"from the benchmark's model; the difference is the source of the "
                           f"masks, not a tool disagreement")
    return {"run": run.pk, "mode": run.mode, "steps": rows,
            "changed": any(r["state"] in DIFFERS for r in rows),
            "filled": sum(r["state"] == "filled" for r in rows)}



def recorded_trajectory(task: Task, path: str | Path) -> list[dict]:
    """The recorded trajectory of ``task`` in a benchmark-layout task file (its sample by
    ``sample_id``, its task by ``task_index``). Raises ``TaskImportError`` naming the file and
    what is missing."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise TaskImportError(f"{path}: cannot read a task file: {exc}") from exc
    for sample in data if isinstance(data, list) else []:
        if isinstance(sample, dict) and str(sample.get("sample_id")) == task.sample_id:
            tasks = sample.get("tasks") or []
            if 0 <= task.task_index < len(tasks) and isinstance(tasks[task.task_index], dict):
                traj = tasks[task.task_index].get("trajectory")
                if isinstance(traj, list):
                    return traj
                raise TaskImportError(f"{path.name}: sample '{task.sample_id}', task "
                                      f"{task.task_index}: field 'trajectory' is not a list")
            raise TaskImportError(f"{path.name}: sample '{task.sample_id}' has no task "
                                  f"{task.task_index}")
    raise TaskImportError(f"{path.name}: no sample '{task.sample_id}' (task {task.question_id})")



def kept_recorded_trajectory(revision) -> list[dict] | None:
    """The observations recorded in the file ``revision`` was imported from (issue 17 item 4).

    An imported revision keeps the file's own sample and task (``TaskRevision.source``,
    ``kernel.content.source_record``: ``{"task": the task as written, "content": what the importer
    derived, ...}``). Returns the written task's ``trajectory`` (calls, args, ``obs``; loop
    expansions as written) when the revision's gold plan is still the one imported (its
    ``trajectory`` equal, as JSON values, to the kept ``content.trajectory``): after an author
    edits the plan the file's observations belong to another plan and are not compared. A step
    with a blank observation (``{}``, ``null``, no ``obs``: an authored file) is not recorded and
    the diff says ``filled`` (``kernel.golddiff``). None otherwise (no source, no trajectory, an
    edited plan)."""
    if revision is None:
        return None
    try:
        record = source_from_text(revision.source)
    except ValueError:
        return None
    if not isinstance(record, dict) or not isinstance(record.get("task"), dict):
        return None
    written = record["task"].get("trajectory")
    if not isinstance(written, list) or not written:
        return None
    imported = (record.get("content") or {}).get("trajectory") if isinstance(record.get("content"), dict) else None
    if imported is None or not same_value(to_storage(imported), revision.trajectory):
        return None
    return written



def task_recorded_diff(run: ReplayRun) -> dict | None:
    """``recorded_diff`` of ``run`` against the observations kept on its revision
    (:func:`kept_recorded_trajectory`), with ``against`` = the imported file's name; None when the
    revision keeps none."""
    recorded = kept_recorded_trajectory(run.revision)
    if recorded is None:
        return None
    record = source_from_text(run.revision.source)
    return {**recorded_diff(run, recorded), "against": str(record.get("file") or "the imported task file")}



def task_replay_diff(task: Task) -> dict | None:
    """The diff a task page shows: the pending replay against the gold, else the newest succeeded
    replay against the gold before it; None when the task has no succeeded replay. ``recorded``:
    the same replay against the observations of the file the revision was imported from
    (:func:`task_recorded_diff`), or None; ``variant_check``: a robustness variant's
    ``ReplayRun.variant_check`` (where an unsolvable plan stopped, the broken step replayed
    with the alternative), or None."""
    run = pending_replay(task) or ReplayRun.objects.filter(task=task, mode=GOLD_MODE, status=ReplayRun.Status.SUCCEEDED).order_by("-id").first()
    if run is None:
        return None
    return {**replay_diff(run), "recorded": task_recorded_diff(run), "variant_check": run.variant_check}


def task_of_question(question_id: str) -> Task | None:
    """The task whose question id is ``question_id`` (its head revision loaded), or None
    (``manage.py replay --task``)."""
    return Task.objects.select_related("head").filter(question_id=question_id).first()


def tasks_to_replay(event_slug: str | None, mode: str) -> list[Task]:
    """The tasks ``manage.py replay`` replays, by id: those with a head revision, of one event
    (its slug) or all; in ``GOLD_MODE`` not the released ones (their gold is frozen:
    ``annotation.services.tasks.require_unreleased``)."""
    tasks = Task.objects.select_related("head", "event").order_by("id")
    if event_slug:
        tasks = tasks.filter(event__slug=event_slug)
    tasks = [t for t in tasks if t.head_id]
    if mode == GOLD_MODE:
        tasks = [t for t in tasks if t.status != Task.Status.RELEASED]
    return tasks


def layers_by_event(event_ids, fields) -> dict[int, list[Layer]]:
    """``{event id: [Layer]}`` of the events ``event_ids``, only ``fields`` loaded: one query."""
    out: dict[int, list[Layer]] = {}
    for layer in Layer.objects.filter(event_id__in=set(event_ids)).only(*fields):
        out.setdefault(layer.event_id, []).append(layer)
    return out

