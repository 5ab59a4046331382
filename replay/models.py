"""Replay runs of a task revision and their steps (the filled gold trajectory)."""
from __future__ import annotations

from django.conf import settings
from django.db import models


class ReplayRun(models.Model):
    """One replay of one task revision. Re-running creates a new row; nothing is overwritten."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    task = models.ForeignKey("annotation.Task", on_delete=models.CASCADE, related_name="replays")
    revision = models.ForeignKey("annotation.TaskRevision", on_delete=models.CASCADE, related_name="replays")
    mode = models.CharField(max_length=12, default="gt", help_text="perception mode: gt, model or classical")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    steps_total = models.IntegerField(default=0)
    steps_done = models.IntegerField(default=0)
    error = models.TextField(blank=True)
    final_answer = models.JSONField(null=True, blank=True)
    eval_spec = models.JSONField(default=dict, blank=True)
    answer_format = models.JSONField(default=dict, blank=True)
    filled_trajectory = models.JSONField(default=list, blank=True, help_text="[{call, args, obs}] as the benchmark stores it")
    replay_hash = models.CharField(max_length=64, blank=True)
    gold_accepted = models.BooleanField(default=False, help_text="a person accepted this replay's answer as the gold")
    accepted_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    artifact_dir = models.CharField(max_length=500, blank=True)
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]


class ReplayStep(models.Model):
    """One executed step of a replay run."""

    class Status(models.TextChoices):
        PENDING = "pending"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        SKIPPED = "skipped"

    run = models.ForeignKey(ReplayRun, on_delete=models.CASCADE, related_name="steps")
    index = models.IntegerField()
    call = models.CharField(max_length=200)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    duration_ms = models.FloatField(null=True, blank=True)
    args = models.JSONField(default=dict, blank=True, help_text="symbolic arguments as authored")
    resolved_args = models.JSONField(default=dict, blank=True)
    obs = models.JSONField(null=True, blank=True)
    artifacts = models.JSONField(default=list, blank=True, help_text="[{key, path, kind}] relative to the artifact root")
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["run_id", "index"]
        constraints = [models.UniqueConstraint(fields=["run", "index"], name="unique_replay_step")]
