"""Events, their layers, and tasks with immutable revisions.

Business rules live in ``annotation.services``; these models only hold state.
"""
from __future__ import annotations

from django.conf import settings
from django.db import models

from kernel.vocabulary import BY_KEY


class Event(models.Model):
    """A disaster event: the unit that owns layers and tasks."""

    slug = models.SlugField(max_length=120, unique=True)
    name = models.CharField(max_length=200)
    disaster_type = models.CharField(max_length=40, blank=True)
    source = models.CharField(max_length=500, blank=True, help_text="where the data came from")
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class Layer(models.Model):
    """A raster, mask or vector layer of an event, stored under STUDIO_DATA_ROOT."""

    class Kind(models.TextChoices):
        RASTER = "raster"
        MASK = "mask"
        VECTOR = "vector"

    class Frame(models.TextChoices):
        GEOGRAPHIC = "geographic"  # has a CRS and a geotransform
        PIXEL = "pixel"  # image frame: x = column, y = row, no CRS

    event = models.ForeignKey(Event, on_delete=models.CASCADE, related_name="layers")
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=10, choices=Kind.choices)
    modality = models.CharField(max_length=40, blank=True, help_text="optical, sar, multispectral, dem, ...")
    phase = models.CharField(max_length=20, blank=True, help_text="pre, post, t1, t2, ... or empty")
    file_name = models.CharField(max_length=255, help_text="file name used in input_data and trajectories")
    path = models.CharField(max_length=500, help_text="stored file, relative to STUDIO_DATA_ROOT")
    tiles_path = models.CharField(max_length=500, blank=True, help_text="web-mercator COG for tiles, relative")
    frame = models.CharField(max_length=12, choices=Frame.choices, default=Frame.GEOGRAPHIC)
    crs = models.CharField(max_length=500, blank=True)
    gsd_m = models.FloatField(null=True, blank=True, help_text="ground sample distance, m/pixel")
    width = models.IntegerField(null=True, blank=True)
    height = models.IntegerField(null=True, blank=True)
    band_count = models.IntegerField(null=True, blank=True)
    bands = models.JSONField(default=list, blank=True)
    dtype = models.CharField(max_length=20, blank=True)
    bounds = models.JSONField(null=True, blank=True, help_text="[west, south, east, north] lon/lat, or pixel")
    feature_count = models.IntegerField(null=True, blank=True)
    class_map = models.JSONField(default=dict, blank=True, help_text="{index: label} for masks")
    class_counts = models.JSONField(default=dict, blank=True, help_text="{index: pixel count} for masks")
    annotates = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="gt_masks",
        help_text="for a GT mask: the image layer it annotates",
    )
    sha256 = models.CharField(max_length=64, blank=True)
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["event_id", "id"]
        constraints = [models.UniqueConstraint(fields=["event", "file_name"], name="unique_layer_file_per_event")]

    def __str__(self) -> str:
        return f"{self.event.slug}/{self.file_name}"


class LayerVersion(models.Model):
    """One content of a layer: what a release pins (``releases.models.ReleaseLayerPin``).

    ``Layer`` is the layer as the event's current tasks see it (its newest version, edited in
    place as before); each content it had is a row here, numbered from 1. ``sha256`` is the
    content digest (``annotation.services.layer_versions.content_sha256``: the stored file and
    the originals), ``snapshot`` the layer row's fields at that version (paths relative to
    ``STUDIO_DATA_ROOT``), ``files`` the data-root-relative files it needs. When a re-import
    supersedes a version that a release pins, its files are copied to
    ``events/<slug>/versions/<layer id>/v<number>/`` and ``snapshot``/``files`` point there; an
    unpinned superseded version keeps its row with ``files`` empty (nothing reads it)."""

    layer = models.ForeignKey(Layer, on_delete=models.CASCADE, related_name="versions")
    number = models.IntegerField()
    sha256 = models.CharField(max_length=64, help_text="content digest of the version's files")
    snapshot = models.JSONField(default=dict, help_text="the Layer row's fields at this version")
    files = models.JSONField(default=list, blank=True, help_text="data-root-relative files kept for this version")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["layer_id", "number"]
        constraints = [models.UniqueConstraint(fields=["layer", "number"], name="unique_layer_version_number")]

    def __str__(self) -> str:
        return f"{self.layer_id} v{self.number}"


class Task(models.Model):
    """A benchmark task (Q, D, T*, A*). Its content lives in immutable ``TaskRevision`` rows."""

    class Dimension(models.TextChoices):
        # labels from the benchmark's task-file names (kernel.vocabulary)
        T1 = "t1", BY_KEY["t1"].label
        T2 = "t2", BY_KEY["t2"].label
        T3 = "t3", BY_KEY["t3"].label
        T4 = "t4", BY_KEY["t4"].label
        T5 = "t5", BY_KEY["t5"].label

    class Status(models.TextChoices):
        DRAFT = "draft"
        SUBMITTED = "submitted"
        IN_REVIEW = "in_review"
        RETURNED = "returned"
        APPROVED = "approved"
        RELEASED = "released"

    event = models.ForeignKey(Event, on_delete=models.PROTECT, related_name="tasks")
    sample_id = models.CharField(max_length=200)
    task_index = models.IntegerField(default=0)
    question_id = models.CharField(max_length=240, unique=True, help_text="<sample_id>_task<i>")
    dimension = models.CharField(max_length=2, choices=Dimension.choices)
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.DRAFT)
    version = models.IntegerField(default=0, help_text="number of the head revision (optimistic locking)")
    head = models.ForeignKey("TaskRevision", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return self.question_id


class TaskRevision(models.Model):
    """One immutable saved state of a task, in the benchmark's vocabulary.

    ``answer_spec`` is the studio's declaration of A*: a list of
    ``{"name", "eval_type", "source", "answer_format"}`` where ``source`` is a reference in the
    benchmark's syntax (``<count> from trajectory[2].obs``) or a literal JSON value.
    """

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="revisions")
    number = models.IntegerField()
    question = models.TextField()
    task_category = models.CharField(max_length=200, blank=True)
    task_category_code = models.CharField(max_length=40, blank=True)
    disaster_type = models.CharField(max_length=40, blank=True)
    input_data = models.JSONField(default=dict)
    classes = models.JSONField(default=dict, blank=True)
    tools = models.JSONField(default=list, blank=True)
    trajectory = models.JSONField(default=list, help_text="symbolic gold steps [{call, args}]")
    answer_spec = models.JSONField(default=list)
    source = models.TextField(blank=True, default="", help_text=(
        "the task as its file had it, for a lossless export: JSON text of {sample (without tasks), task, "
        "content (what the importer derived)} (kernel.taskfile.source_text); text, not a JSON column, because "
        "jsonb reorders keys and refuses NaN; carried to later revisions"))
    author = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    message = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["task_id", "number"]
        constraints = [models.UniqueConstraint(fields=["task", "number"], name="unique_revision_number")]

    def __str__(self) -> str:
        return f"{self.task.question_id}@r{self.number}"


class TaskDraft(models.Model):
    """An autosaved, not yet saved editor state of one user on one task (never a revision)."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="drafts")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    base_version = models.IntegerField(help_text="the head version the draft started from")
    content = models.JSONField(default=dict)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["task", "user"], name="one_draft_per_user_and_task")]


class AuditEvent(models.Model):
    """One state change of a task (submitted, returned, approved, ...): who, when, why."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="audit_events")
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    action = models.CharField(max_length=40)
    from_status = models.CharField(max_length=12, blank=True)
    to_status = models.CharField(max_length=12, blank=True)
    revision_number = models.IntegerField(null=True, blank=True)
    reason = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["task_id", "id"]


class LayerAuditEvent(models.Model):
    """A maintainer's change of a layer's georeferencing metadata (GSD, CRS): who, when, why,
    the old and new values, and the tasks whose replays it made stale (their question ids)."""

    layer = models.ForeignKey(Layer, on_delete=models.CASCADE, related_name="audit_events")
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    action = models.CharField(max_length=40, default="set_georeferencing")
    changes = models.JSONField(default=dict, help_text='{field: {"old": value, "new": value}}')
    reason = models.TextField()
    stale_tasks = models.JSONField(default=list, help_text="question ids of the tasks whose replays read the layer")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["layer_id", "id"]


class TaskComment(models.Model):
    """A reviewer's (or author's) comment pinned to a step, an answer field or a map location; threaded."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="comments")
    revision_number = models.IntegerField(null=True, blank=True)
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.CASCADE, related_name="replies")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    step_index = models.IntegerField(null=True, blank=True)
    answer_field = models.CharField(max_length=200, blank=True)
    location = models.JSONField(null=True, blank=True, help_text='{"frame": "pixel"|"geographic", "x", "y"} or GeoJSON')
    body = models.TextField()
    resolved = models.BooleanField(default=False)
    resolved_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["task_id", "id"]


class QcAcknowledgement(models.Model):
    """A person's acknowledgement, with a reason, of a QC warning on a revision."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="qc_acknowledgements")
    revision_number = models.IntegerField()
    check_id = models.CharField(max_length=80)
    location = models.CharField(max_length=300, blank=True)
    reason = models.TextField()
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["task", "revision_number", "check_id", "location"], name="one_ack_per_finding")]


class TaskVariant(models.Model):
    """A robustness variant: a task made from an approved base task's revision (``annotation.variants``).

    The variant is a task of its own (own revisions, QC and review); this row says what it was made
    from and how: ``kind`` (extraneous, broken, unsolvable), ``params`` (n_e and seed; step, error
    and alternative; strategy) and ``tools``, the tool set its agent is given (``removed`` names,
    inert ``distractors``, the ``broken`` step with its alternative).
    """

    class Kind(models.TextChoices):
        EXTRANEOUS = "extraneous"
        BROKEN = "broken"
        UNSOLVABLE = "unsolvable"

    task = models.OneToOneField(Task, on_delete=models.CASCADE, related_name="variant")
    base_task = models.ForeignKey(Task, on_delete=models.PROTECT, related_name="variants")
    base_revision = models.ForeignKey(TaskRevision, on_delete=models.PROTECT, related_name="+")
    kind = models.CharField(max_length=12, choices=Kind.choices)
    params = models.JSONField(default=dict)
    tools = models.JSONField(default=dict)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.kind} variant of {self.base_task_id}"
