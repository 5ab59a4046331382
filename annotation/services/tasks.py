"""Service functions for tasks: the one place where a task is created or a revision saved.

Every save is a new immutable ``TaskRevision``; a save against a stale version raises
:class:`StaleVersionError` (HTTP 409 in the API). Fast QC runs on every save; errors block
submission (``submit_task``), not saving: work is never lost.
"""
from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from annotation import qc
from annotation.models import Event, Layer, Task, TaskRevision
from studio.permissions import require

# DORA's task-file names per dimension (dora-format.md §(a), ``TASKS`` in dora/benchmark.py).
TASK_FILES = {
    "t1": "t1_perception_and_assessment.json",
    "t2": "t2_spatial_relation_analysis.json",
    "t3": "t3_operational_planning.json",
    "t4": "t4_multi_temporal_reasoning.json",
    "t5": "t5_multi_modal_report_synthesis.json",
}

CONTENT_FIELDS = (
    "question", "task_category", "task_category_code", "disaster_type", "input_data", "classes",
    "tools", "trajectory", "answer_spec",
)


class StaleVersionError(Exception):
    """A save named a version that is no longer the head. ``current`` is the head revision."""

    def __init__(self, task: Task, expected: int):
        self.task = task
        self.expected = expected
        self.current = task.head
        super().__init__(f"task {task.question_id} is at version {task.version}, the save was based on {expected}")


class TaskValidationError(Exception):
    """The task cannot move on (submission) because QC found errors. ``findings`` lists them."""

    def __init__(self, findings: list[qc.Finding]):
        self.findings = findings
        super().__init__("; ".join(f.message for f in findings if f.severity == "error"))


def layer_manifest_entry(layer: Layer) -> dict:
    """The benchmark's ``input_data`` entry for a layer (dora-format.md §(a)).

    Rasters: ``{image_path, modality, pixel_size_m, spatial_coordinate_system, band_info}``;
    vectors: ``{path}``. Paths are the layer's file name, as the benchmark's release stores them
    under ``images/``.
    """
    if layer.kind == Layer.Kind.VECTOR:
        return {"path": layer.file_name}
    entry = {
        "image_path": layer.file_name,
        "modality": layer.modality or "optical",
        "pixel_size_m": layer.gsd_m,
        "spatial_coordinate_system": layer.crs or "pixel",
        "band_info": list(layer.bands or []),
    }
    return entry


def build_input_data(event: Event, layer_keys: dict[str, int]) -> dict:
    """Build ``input_data`` from ``{input_data key: layer id}``; every layer must belong to ``event``.

    Raises ``ValueError`` naming the key whose layer is not in the event.
    """
    layers = {l.pk: l for l in event.layers.filter(pk__in=list(layer_keys.values()))}
    out = {}
    for key, layer_id in layer_keys.items():
        layer = layers.get(int(layer_id))
        if layer is None:
            raise ValueError(f"input_data.{key}: layer {layer_id} is not a layer of event {event.slug}")
        out[key] = layer_manifest_entry(layer)
    return out


def _next_sample_id(event: Event) -> str:
    n = event.tasks.count() + 1
    while True:
        candidate = f"{event.slug}_{n:04d}"
        if not Task.objects.filter(sample_id=candidate).exists():
            return candidate
        n += 1


def _content(data: dict) -> dict:
    return {k: data[k] for k in CONTENT_FIELDS if k in data}


@transaction.atomic
def create_task(user, event: Event, *, dimension: str, content: dict, sample_id: str | None = None,
                task_index: int = 0, message: str = "created") -> Task:
    """Create a task with its first revision. ``content`` holds the fields of ``CONTENT_FIELDS``.

    Raises ``PermissionDenied`` (role), ``ValueError`` (unknown dimension).
    """
    require(user, "task.create")
    if dimension not in TASK_FILES:
        raise ValueError(f"dimension: '{dimension}' is not one of {', '.join(TASK_FILES)}")
    sample_id = sample_id or _next_sample_id(event)
    task = Task.objects.create(
        event=event, sample_id=sample_id, task_index=task_index,
        question_id=f"{sample_id}_task{task_index}", dimension=dimension, created_by=user,
    )
    _write_revision(user, task, _content(content), message)
    return task


def _write_revision(user, task: Task, content: dict, message: str) -> TaskRevision:
    number = task.version + 1
    rev = TaskRevision.objects.create(task=task, number=number, author=user, message=message, **content)
    task.version = number
    task.head = rev
    task.save(update_fields=["version", "head", "updated_at"])
    return rev


@transaction.atomic
def save_revision(user, task: Task, *, expected_version: int, content: dict, message: str = "") -> TaskRevision:
    """Save new content as the next revision, if ``expected_version`` is still the head.

    Fields absent from ``content`` are carried over from the head. Raises ``StaleVersionError``
    when someone saved in between (nothing is written), ``PermissionDenied`` for the role.
    """
    locked = Task.objects.select_for_update(of=("self",)).select_related("head").get(pk=task.pk)
    require(user, "task.edit", locked)
    if locked.version != expected_version:
        raise StaleVersionError(locked, expected_version)
    head = locked.head
    merged = {k: getattr(head, k) for k in CONTENT_FIELDS} if head else {}
    merged.update(_content(content))
    return _write_revision(user, locked, merged, message or "edited")


def revision_content(rev: TaskRevision) -> dict:
    """The plain content dict of a revision (what QC and the exporters read)."""
    return {k: getattr(rev, k) for k in CONTENT_FIELDS}


def run_fast_qc(rev: TaskRevision) -> list[qc.Finding]:
    """The fast QC checks of a revision."""
    return qc.check_task(revision_content(rev))


@transaction.atomic
def submit_task(user, task: Task) -> Task:
    """Move a draft (or returned) task to ``submitted``; QC errors block it (``TaskValidationError``)."""
    locked = Task.objects.select_for_update(of=("self",)).select_related("head").get(pk=task.pk)
    require(user, "task.edit", locked)
    findings = run_fast_qc(locked.head)
    if qc.has_errors(findings):
        raise TaskValidationError(findings)
    if locked.status not in (Task.Status.DRAFT, Task.Status.RETURNED):
        raise ValueError(f"status: a {locked.status} task cannot be submitted")
    locked.status = Task.Status.SUBMITTED
    locked.updated_at = timezone.now()
    locked.save(update_fields=["status", "updated_at"])
    return locked
