"""Agent runs, their per-question records with scores, and verdicts (human, judge, code)."""
from __future__ import annotations

from django.conf import settings
from django.db import models


class Agent(models.Model):
    name = models.CharField(max_length=200, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class AgentRun(models.Model):
    """An imported run folder (per-dimension benchmark.jsonl files) of one agent, scored in one mode."""

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="runs")
    name = models.CharField(max_length=200)
    source_dir = models.CharField(max_length=500, blank=True)
    scoring_mode = models.CharField(max_length=10, default="dora")
    tau_r = models.FloatField(default=0.2)
    tau_a = models.FloatField(default=1.0)
    dora_score = models.FloatField(null=True, blank=True)
    dimensions = models.JSONField(default=dict, blank=True, help_text="per dimension: dim_score and metrics")
    imported_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]


class RunRecord(models.Model):
    """One question of an agent run: the prediction and its scores."""

    run = models.ForeignKey(AgentRun, on_delete=models.CASCADE, related_name="records")
    task = models.ForeignKey("annotation.Task", null=True, blank=True, on_delete=models.SET_NULL, related_name="run_records")
    question_id = models.CharField(max_length=240)
    sample_id = models.CharField(max_length=200)
    task_index = models.IntegerField(default=0)
    dimension = models.CharField(max_length=2)
    predicted_answer = models.JSONField(null=True, blank=True)
    trajectory = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True)
    task_score = models.FloatField(null=True, blank=True)
    field_scores = models.JSONField(default=dict, blank=True)
    n_scored_fields = models.IntegerField(default=0)
    t_any = models.FloatField(null=True, blank=True)
    t_ord = models.FloatField(null=True, blank=True)
    t_em = models.FloatField(null=True, blank=True)
    par_acc = models.FloatField(null=True, blank=True)
    eff = models.FloatField(null=True, blank=True)
    step_matches = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["run_id", "dimension", "question_id"]
        constraints = [models.UniqueConstraint(fields=["run", "question_id"], name="unique_record_per_run")]


class Verdict(models.Model):
    """A judgement of one run record with the E1–E6 taxonomy, by a person, a judge model or the rule checker."""

    class Source(models.TextChoices):
        HUMAN = "human"
        JUDGE = "judge"
        CODE = "code"

    record = models.ForeignKey(RunRecord, on_delete=models.CASCADE, related_name="verdicts")
    source = models.CharField(max_length=6, choices=Source.choices)
    annotator = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    judge_name = models.CharField(max_length=200, blank=True, help_text="judge model + prompt version")
    status = models.CharField(max_length=10, default="ok", help_text="ok, or failed (raw text kept)")
    is_correct = models.BooleanField(null=True)
    grade = models.FloatField(null=True, blank=True)
    errors = models.JSONField(default=dict, blank=True, help_text='{"E1": bool, ..., "E6": bool}')
    reasons = models.JSONField(default=dict, blank=True, help_text='{"E4": "step 3 uses ..."}')
    reasoning = models.TextField(blank=True)
    prompt = models.TextField(blank=True)
    raw = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]
