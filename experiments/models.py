"""Experiments: a gold set × an agent configuration × repeats, run by the studio as the benchmark's
harness runs them (``docs/experiments.md``).

* :class:`ExperimentConfig` — a versioned agent configuration (endpoint, model, sampling, protocol,
  limits, budget, prices). A saved version never changes: editing a configuration saves version
  ``n + 1`` under the same name, and an experiment points at the version it ran with.
* :class:`Experiment` — what runs: its gold set (a release, or studio tasks for a pilot), the
  configuration version, the repeats, its status and totals.
* :class:`ExperimentQuestion` — one question of one repeat: status, steps so far, tokens, seconds,
  cost, error, the live trajectory and, once finished, the benchmark record written to the folder.
* :class:`ModelCall` — every model request and its response, keyed by the SHA-256 of the whole
  request (endpoint URL and JSON body; never the key): the cache that makes a re-run free and
  reproducible.
"""
from __future__ import annotations

from django.conf import settings
from django.db import models

from kernel.vocabulary import PERCEPTION_MODES, SERVING_PERCEPTION_MODE


class ExperimentConfig(models.Model):
    """One version of an agent configuration. The API key is never stored: ``api_key_env`` names
    the environment variable that holds it (one of ``STUDIO_JUDGE_KEY_VARIABLES``)."""

    class Protocol(models.TextChoices):
        AP = "AP", "auto-planning"
        IF = "IF", "instruction-following"

    name = models.CharField(max_length=100)
    version = models.PositiveIntegerField(default=1)
    base_url = models.CharField(max_length=500, help_text="OpenAI-compatible endpoint, ending in /v1")
    model = models.CharField(max_length=200)
    api_key_env = models.CharField(max_length=100, blank=True, help_text="environment variable with the key")
    protocol = models.CharField(max_length=2, choices=Protocol.choices, default=Protocol.AP)
    temperature = models.FloatField(default=0.1, help_text="the harness's default (dora/agent/llm.py)")
    top_p = models.FloatField(null=True, blank=True)
    max_tokens = models.PositiveIntegerField(null=True, blank=True, help_text="completion tokens per model call")
    seed = models.IntegerField(default=0, help_text="sent as the request's seed (+ the repeat index)")
    tool_results = models.CharField(
        max_length=4, choices=[("tool", "tool messages (OpenAI, the harness's)"),
                               ("user", "user messages (servers whose template drops tool messages)")],
        default="tool", help_text="how a tool's answer goes back to the model (docs/experiments.md, Measured)")
    perception_mode = models.CharField(
        max_length=10, choices=[(m, m) for m in PERCEPTION_MODES], default=SERVING_PERCEPTION_MODE,
        help_text="how the seg.* tools answer the agent: model (the benchmark's protocol), gt (oracle "
                  "perception, never ranked with it) or classical; the scored runs record it")
    max_steps = models.PositiveIntegerField(default=50, help_text="LangGraph recursion limit per question")
    question_timeout_s = models.FloatField(default=900.0, help_text="wall-clock seconds per question")
    request_timeout_s = models.FloatField(default=1200.0, help_text="read timeout of one model request")
    max_concurrency = models.PositiveSmallIntegerField(
        default=1, help_text="questions in flight at once in the job (1-16; threads of the worker)")
    budget_tokens = models.BigIntegerField(null=True, blank=True, help_text="prompt + completion tokens, all repeats")
    budget_cost = models.FloatField(null=True, blank=True, help_text="in the prices' currency, all repeats")
    price_prompt_per_m = models.FloatField(default=0.0, help_text="price per million prompt tokens")
    price_completion_per_m = models.FloatField(default=0.0, help_text="price per million completion tokens")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name", "-version"]
        constraints = [models.UniqueConstraint(fields=["name", "version"], name="one_experiment_config_version")]

    def __str__(self) -> str:
        return f"{self.name} v{self.version}"


class Experiment(models.Model):
    """A gold set × a configuration version × ``repeats``; its progress and totals."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SCORING = "scoring"
        DONE = "done"
        FAILED = "failed"
        CANCELLED = "cancelled"
        STOPPED = "stopped"  # the budget was reached

    config = models.ForeignKey(ExperimentConfig, on_delete=models.PROTECT, related_name="experiments")
    release = models.ForeignKey("releases.Release", null=True, blank=True, on_delete=models.PROTECT,
                                related_name="experiments", help_text="null: a pilot on studio tasks")
    question_ids = models.JSONField(default=list, blank=True, help_text="a pilot's studio tasks (question ids)")
    repeats = models.PositiveIntegerField(default=1)
    agent_name = models.CharField(max_length=200)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    stop_reason = models.TextField(blank=True)
    error = models.TextField(blank=True)
    folder = models.CharField(max_length=500, blank=True, help_text="the run folders' parent")
    total = models.IntegerField(default=0)
    done = models.IntegerField(default=0)
    prompt_tokens = models.BigIntegerField(default=0)
    completion_tokens = models.BigIntegerField(default=0)
    cost = models.FloatField(default=0.0, help_text="of requests sent (cache hits cost nothing)")
    model_seconds = models.FloatField(default=0.0)
    runs = models.ManyToManyField("evaluation.AgentRun", blank=True, related_name="experiments")
    judge_config = models.ForeignKey(
        "evaluation.JudgeConfig", null=True, blank=True, on_delete=models.PROTECT, related_name="experiments",
        help_text="when set, the scored runs' records get a judge job with it at the end")
    human_share = models.FloatField(
        default=0.0, help_text="0 to 1: the share of each run's records queued for human E1-E6 scoring at the end")
    judge_job = models.ForeignKey("evaluation.JudgeJob", null=True, blank=True, on_delete=models.SET_NULL,
                                  related_name="+", help_text="the judge job queued at the end (the newest)")
    human_queued = models.JSONField(default=dict, blank=True,
                                    help_text="{records, slots} queued for human scoring at the end")
    followup_note = models.TextField(blank=True, help_text="why no judge job or human queue came at the end")
    worker = models.CharField(max_length=100, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    cancel_requested = models.BooleanField(default=False)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]


class ExperimentQuestion(models.Model):
    """One question of one repeat of an experiment."""

    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        DONE = "done"
        ERROR = "error"

    experiment = models.ForeignKey(Experiment, on_delete=models.CASCADE, related_name="questions")
    repeat = models.PositiveIntegerField(default=1)
    dimension = models.CharField(max_length=4)
    question_id = models.CharField(max_length=240)
    task = models.ForeignKey("annotation.Task", null=True, on_delete=models.SET_NULL, related_name="+")
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.PENDING)
    attempts = models.IntegerField(default=0)
    steps = models.IntegerField(default=0, help_text="tool calls so far")
    model_calls = models.IntegerField(default=0)
    cached_calls = models.IntegerField(default=0)
    prompt_tokens = models.IntegerField(default=0)
    completion_tokens = models.IntegerField(default=0)
    cost = models.FloatField(default=0.0)
    seconds = models.FloatField(default=0.0)
    error = models.TextField(blank=True)
    trajectory = models.JSONField(default=list, blank=True, help_text="the steps so far (live)")
    record = models.JSONField(null=True, blank=True, help_text="the benchmark.jsonl record once finished")
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["experiment_id", "repeat", "id"]
        constraints = [models.UniqueConstraint(fields=["experiment", "repeat", "question_id"],
                                               name="one_experiment_question_per_repeat")]


class ModelCall(models.Model):
    """One model request and its response, cached by the SHA-256 of the whole request."""

    key = models.CharField(max_length=64, unique=True)
    request = models.JSONField(help_text="{url, body}: the whole request but its Authorization header")
    response = models.JSONField()
    prompt_tokens = models.IntegerField(default=0)
    completion_tokens = models.IntegerField(default=0)
    latency_s = models.FloatField(default=0.0)
    attempts = models.IntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)
