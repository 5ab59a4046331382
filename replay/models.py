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
    artifact_manifest = models.JSONField(default=dict, blank=True, help_text="{artifact name: sha256} of the files in the run's folder (content store: cas/<sha[:2]>/<sha>)")
    variant_check = models.JSONField(null=True, blank=True, help_text=(
        "a robustness variant's gold replay (replay.services.execute_replay): unsolvable "
        "{kind, blocked: {step, tool, reason}} where the plan stopped; broken {kind, step, tool, "
        "alternative, same, changes, error}: the broken step run again with the alternative; null otherwise"))
    tool_calls = models.IntegerField(default=0, help_text="tools actually called (cache misses)")
    cache_hits = models.IntegerField(default=0, help_text="calls answered from the step cache")
    heartbeat_at = models.DateTimeField(null=True, blank=True, help_text="last progress of a running replay")
    input_fingerprint = models.CharField(max_length=64, blank=True, help_text="SHA-256 of revision, layer contents, tool versions and mode (replay --changed-only)")
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
    cached = models.BooleanField(default=False, help_text="the obs came from the step cache (no tool ran)")
    expanded = models.JSONField(default=list, blank=True, help_text="tool.loop: the nested calls [{call, args, obs}]")

    class Meta:
        ordering = ["run_id", "index"]
        constraints = [models.UniqueConstraint(fields=["run", "index"], name="unique_replay_step")]


class StepCacheEntry(models.Model):
    """One cached step result: the obs of ``tool`` (at ``tool_version``) for one cache key.

    ``key`` = SHA-256 over (engine cache version, tool, tool version, resolved arguments, SHA-256
    of every input file the arguments name, perception mode and GT-mask/checkpoint fingerprint);
    see ``kernel.engine.step_key``. ``artifacts`` lists the files the obs names with their content
    hashes ([{name, sha256}]); the files live in the content store
    ``STUDIO_ARTIFACT_ROOT/cas/<sha[:2]>/<sha>``. Rows are never updated but for ``hits`` /
    ``last_used_at``; deleting rows is always safe (the step is recomputed).
    """

    key = models.CharField(max_length=64, unique=True)
    tool = models.CharField(max_length=120)
    tool_version = models.IntegerField(default=1)
    obs = models.JSONField(null=True)
    artifacts = models.JSONField(default=list, blank=True)
    hits = models.IntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["tool", "tool_version"], name="replay_cache_tool_idx")]
