"""Releases: versioned snapshots of approved tasks, each pinning a revision and its gold replay.

The models moved here from ``annotation`` (issue 19); a state-only migration kept their tables
(``annotation_release``, ``annotation_releasetask``) and the database triggers that make a
published release immutable (``annotation/migrations/0003_release_immutability.py``). Business
rules live in ``releases.services``; these models only hold state.
"""
from __future__ import annotations

from django.conf import settings
from django.db import models

from annotation.models import Layer, LayerVersion, Task, TaskRevision


class Release(models.Model):
    """A versioned snapshot of approved tasks at given revisions. Published releases never change."""

    class Status(models.TextChoices):
        DRAFT = "draft"
        PUBLISHED = "published"

    version = models.CharField(max_length=40, unique=True, help_text="semantic version, e.g. 1.2.0")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.DRAFT)
    changelog = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    published_at = models.DateTimeField(null=True, blank=True)
    manifest_sha256 = models.CharField(max_length=64, blank=True)

    class Meta:
        db_table = "annotation_release"  # the table kept its name when the model moved (issue 19)
        ordering = ["-id"]

    def __str__(self) -> str:
        return self.version


class ReleaseTask(models.Model):
    """A task pinned in a release: its revision and the replay whose gold answer the release holds."""

    release = models.ForeignKey(Release, on_delete=models.PROTECT, related_name="items")
    task = models.ForeignKey(Task, on_delete=models.PROTECT, related_name="release_items")
    revision = models.ForeignKey(TaskRevision, on_delete=models.PROTECT, related_name="+")
    replay = models.ForeignKey("replay.ReplayRun", null=True, on_delete=models.PROTECT, related_name="+")
    question_id = models.CharField(max_length=240)

    class Meta:
        db_table = "annotation_releasetask"
        ordering = ["release_id", "question_id"]
        constraints = [models.UniqueConstraint(fields=["release", "task"], name="task_once_per_release")]


class ReleaseLayerPin(models.Model):
    """The version of a layer a release's tasks read: one row per layer of every event the release
    has tasks of, written when the tasks are pinned (``releases.services.lifecycle._pin_into``).
    Export and replay of the release's tasks read the pinned version's files; a pinned version's
    files are kept (``annotation.services.layer_versions``)."""

    release = models.ForeignKey(Release, on_delete=models.CASCADE, related_name="layer_pins")
    version = models.ForeignKey(LayerVersion, on_delete=models.PROTECT, related_name="release_pins")
    layer = models.ForeignKey(Layer, on_delete=models.PROTECT, related_name="+",
                              help_text="the version's layer (one pin per layer and release)")

    class Meta:
        ordering = ["release_id", "layer_id"]
        constraints = [models.UniqueConstraint(fields=["release", "layer"], name="one_pin_per_layer_per_release")]


class ReleaseFile(models.Model):
    """A file a published release ships (relative path under the release folder) and its SHA-256,
    recorded at publishing: a re-export must produce exactly these (``export_release`` refuses a
    difference and names the file). The sidecar ``studio_manifest.json`` is not among them."""

    release = models.ForeignKey(Release, on_delete=models.CASCADE, related_name="files")
    path = models.TextField(help_text="relative POSIX path under the release folder")
    sha256 = models.CharField(max_length=64)
    bytes = models.BigIntegerField()

    class Meta:
        ordering = ["release_id", "path"]
        constraints = [models.UniqueConstraint(fields=["release", "path"], name="one_row_per_release_file")]
