"""Replay services: start a replay of a task revision and execute it (the Celery task's body).

The engine (``replay.engine``) is pure; this module binds it to the database: paths in a task's
arguments resolve to the event's layers (confined to STUDIO_DATA_ROOT), perception tools in GT mode
look up the mask layer that annotates their input image, and every step is stored as it finishes so
that progress (steps done / total) is visible while the replay runs.
"""
from __future__ import annotations

import logging
import shutil
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from annotation.models import Layer, Task
from replay.engine import fill_answer, replay_hash, run_trajectory
from replay.models import ReplayRun, ReplayStep
from replay.tools.base import GTMask, ToolContext, ToolInputError
from studio.permissions import require

log = logging.getLogger(__name__)

# The image arguments a perception tool's GT lookup follows, most specific first.
GT_IMAGE_ARGS = ("post_image_path", "post_image", "image_path", "pre_image_path", "pre_image")


def data_path(relative: str) -> Path:
    """Absolute path of a file stored under STUDIO_DATA_ROOT; ``ValueError`` if it escapes the root."""
    root = Path(settings.STUDIO_DATA_ROOT).resolve()
    p = (root / relative).resolve()
    if not p.is_relative_to(root):
        raise ValueError(f"path '{relative}' lies outside the data root")
    return p


class LayerResolver:
    """Maps path strings in a trajectory to the event's stored layer files.

    A string matches a layer whose ``file_name`` equals the string's base name (the benchmark's
    trajectories use bare file names). Unknown names raise ``ToolInputError``.
    """

    def __init__(self, event_id: int):
        layers = list(Layer.objects.filter(event_id=event_id))
        self.layers = {l.file_name: l for l in layers}
        # the tools hand resolved paths to ``gt_lookup``: map stored files back to their layers too
        self.by_stored_path = {str(data_path(l.path)): l for l in layers}

    def layer_for(self, value: str) -> Layer | None:
        """The layer a path string names: a layer file name, or the stored file of a layer."""
        return self.by_stored_path.get(str(value)) or self.layers.get(Path(str(value)).name)

    def __call__(self, value: str) -> Path:
        layer = self.layer_for(value)
        if layer is None:
            raise ToolInputError(
                tool=None, argument="path", expected="a layer file name of this event",
                message=f"'{value}' is neither an output of an earlier step nor a layer of this event",
            )
        return data_path(layer.path)

    def gt_lookup(self, tool_name: str, args: dict) -> GTMask | None:
        """The GT mask annotating the tool's input image (post image first), or None."""
        for arg in GT_IMAGE_ARGS:
            value = args.get(arg)
            if not value:
                continue
            image = self.layer_for(value)
            if image is None:
                continue
            mask = Layer.objects.filter(annotates=image, kind=Layer.Kind.MASK).order_by("id").first()
            if mask is not None:
                return GTMask(
                    path=data_path(mask.path),
                    class_map={int(k): v for k, v in (mask.class_map or {}).items()},
                    pixel_size_m=mask.gsd_m or image.gsd_m,
                )
        return None


def start_replay(user, task: Task, mode: str = "gt") -> ReplayRun:
    """Create a replay run of the task's head revision and dispatch it (in-process by default).

    Returns the run; with a broker configured it is still queued when this returns.
    """
    require(user, "task.replay", task)
    rev = task.head
    with transaction.atomic():
        run = ReplayRun.objects.create(
            task=task, revision=rev, mode=mode, steps_total=len(rev.trajectory or []), requested_by=user,
            eval_spec={f["name"]: f["eval_type"] for f in rev.answer_spec},
            answer_format={f["name"]: f.get("answer_format", "") for f in rev.answer_spec if f.get("answer_format")},
        )
    from replay.tasks import run_replay

    run_replay.delay(run.pk)
    run.refresh_from_db()
    return run


def execute_replay(run_id: int) -> ReplayRun:
    """Run a replay to the end and store every step. Safe to call again on a crashed run:
    its old steps and artifacts are discarded and the run starts over (same inputs, same result).
    """
    run = ReplayRun.objects.select_related("revision", "task").get(pk=run_id)
    rev = run.revision
    work_dir = Path(settings.STUDIO_ARTIFACT_ROOT) / "replays" / str(run.pk)
    if work_dir.exists():
        shutil.rmtree(work_dir)
    work_dir.mkdir(parents=True)
    ReplayStep.objects.filter(run=run).delete()
    steps = rev.trajectory or []
    ReplayStep.objects.bulk_create(
        [ReplayStep(run=run, index=i, call=s.get("call", ""), args=s.get("args") or {}) for i, s in enumerate(steps)]
    )
    ReplayRun.objects.filter(pk=run.pk).update(
        status=ReplayRun.Status.RUNNING, started_at=timezone.now(), steps_done=0, error="",
        artifact_dir=str(work_dir.relative_to(settings.STUDIO_ARTIFACT_ROOT)), steps_total=len(steps),
    )
    resolver = LayerResolver(run.task.event_id)
    ctx = ToolContext(work_dir=work_dir, resolve_path=resolver, gt_lookup=resolver.gt_lookup, perception_mode=run.mode)

    def on_step(result) -> None:
        ReplayStep.objects.filter(run=run, index=result.index).update(
            status=result.status, duration_ms=result.duration_ms, resolved_args=_jsonable(result.resolved_args or {}),
            obs=_jsonable(result.obs), error=result.error or "", artifacts=_jsonable(result.artifacts or []),
        )
        if result.status == "succeeded":
            ReplayRun.objects.filter(pk=run.pk).update(steps_done=result.index + 1)

    try:
        result = run_trajectory(steps, ctx, on_step=on_step)
    except Exception as exc:  # an engine bug, not a tool failure: record it, never leave the run "running"
        log.exception("replay %s crashed", run.pk)
        ReplayRun.objects.filter(pk=run.pk).update(status=ReplayRun.Status.FAILED, error=f"replay crashed: {exc}", finished_at=timezone.now())
        run.refresh_from_db()
        return run
    for r in result.steps:  # the engine reports skipped steps too; store them all
        on_step(r)
    if not result.ok:
        failed = next((r for r in result.steps if r.status == "failed"), None)
        ReplayRun.objects.filter(pk=run.pk).update(
            status=ReplayRun.Status.FAILED, error=failed.error if failed else "replay failed",
            filled_trajectory=_jsonable(result.filled_trajectory), finished_at=timezone.now(),
        )
    else:
        try:
            answer = fill_answer(rev.answer_spec, result.filled_trajectory)
        except Exception as exc:
            ReplayRun.objects.filter(pk=run.pk).update(
                status=ReplayRun.Status.FAILED, error=f"answer: {exc}",
                filled_trajectory=_jsonable(result.filled_trajectory), finished_at=timezone.now(),
            )
        else:
            ReplayRun.objects.filter(pk=run.pk).update(
                status=ReplayRun.Status.SUCCEEDED, final_answer=_jsonable(answer),
                filled_trajectory=_jsonable(result.filled_trajectory),
                replay_hash=replay_hash(result.filled_trajectory, answer), finished_at=timezone.now(),
            )
    run.refresh_from_db()
    return run


def _jsonable(value):
    """Round-trip through JSON so that stored values equal what the API returns."""
    import json

    return json.loads(json.dumps(value, default=str))


def latest_successful_replay(task: Task) -> ReplayRun | None:
    """The newest succeeded replay of the task's head revision, or None."""
    return ReplayRun.objects.filter(task=task, revision_id=task.head_id, status=ReplayRun.Status.SUCCEEDED).order_by("-id").first()


def artifact_path(run: ReplayRun, name: str) -> Path:
    """Absolute path of an artifact of ``run``; ``ValueError`` if ``name`` escapes the run's folder."""
    base = (Path(settings.STUDIO_ARTIFACT_ROOT) / run.artifact_dir).resolve()
    p = (base / name).resolve()
    if not p.is_relative_to(base):
        raise ValueError(f"artifact '{name}' lies outside the run's folder")
    return p
