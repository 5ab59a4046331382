"""manage.py gold_baseline --agent gold-model [--event SLUG] [--mode model|classical|gt] [--out DIR] [--no-score] [--json]

The paper's "Gold Trajectory" baseline: every task's expert trajectory executed with model-backed
perception (checkpoints from ``STUDIO_CHECKPOINT_DIR``, not the GT masks), written as an agent run
in the benchmark's run layout (``DIR/<agent>_GT/<dimension>/benchmark.jsonl``, trajectories,
run_stats.json) and scored like any agent run. A perception step without a checkpoint fails:
that task's record carries the error (and scores 0), as an agent's would. The run records its
perception mode (``AgentRun.perception_mode``); ``--mode gt`` is oracle perception, ranked apart
from the benchmark's protocol.
"""
from __future__ import annotations

import json
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = "Run the gold trajectories with model perception as an agent run and score it."

    def add_arguments(self, parser):
        parser.add_argument("--agent", default="gold-model")
        parser.add_argument("--event", default=None)
        parser.add_argument("--mode", choices=["model", "classical", "gt"], default="model")
        parser.add_argument("--out", default=None, help="run folder parent (default: STUDIO_DATA_ROOT/runs)")
        parser.add_argument("--no-score", action="store_true")
        parser.add_argument("--as-user", default=None)
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, **o):
        # imported here: ``manage.py --help`` loads this module before Django starts (manage.py)
        from evaluation.services.baseline import gold_baseline

        User = get_user_model()
        user = (User.objects.filter(username=o["as_user"]).first() if o["as_user"]
                else User.objects.filter(is_superuser=True).order_by("id").first())
        if user is None:
            raise CommandError("no user: pass --as-user NAME (a maintainer) or create a superuser")
        if o["mode"] == "model" and not settings.STUDIO_CHECKPOINT_DIR:
            self.stderr.write("warning: STUDIO_CHECKPOINT_DIR is not set: every perception step will fail")
        out = Path(o["out"]) if o["out"] else Path(settings.STUDIO_DATA_ROOT) / "runs"
        out.mkdir(parents=True, exist_ok=True)
        run_dir, agent_run, summary = gold_baseline(user, out, agent=o["agent"], event_slug=o["event"],
                                                    mode=o["mode"], score=not o["no_score"])
        if agent_run is not None:
            summary["agent_run"] = agent_run.pk
            summary["dimensions"] = agent_run.dimensions
        if o["json"]:
            self.stdout.write(json.dumps(summary, indent=2, default=str))
            return
        label = {"gt": "gt (oracle perception)", "model": "model (the benchmark's networks)"}.get(o["mode"], o["mode"])
        self.stdout.write(f"perception: {label}; {summary['records']} record(s) in {run_dir}; {len(summary['failed'])} with errors; "
                          f"{len(summary['skipped_no_gold'])} task(s) without an accepted gold skipped")
        if agent_run is not None:
            self.stdout.write(f"agent run {agent_run.pk} ({o['agent']}): DORA score {agent_run.dora_score}")
