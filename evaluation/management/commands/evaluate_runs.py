"""``manage.py evaluate_runs``: the official ``scripts/evaluate.py`` of DORA, in the studio.

    python manage.py evaluate_runs --run DIR [--tasks-dir DIR] [--output FILE] [--tau-r 0.2] [--tau-a 1.0] [--mode dora|paper]
    python manage.py evaluate_runs --sanity [--tasks-dir DIR] [--output FILE] ...

Writes FILE (default ``<run>/eval.json``, or ``outputs/eval_sanity.json`` with ``--sanity``) with
``summary_table``, ``dora_score``, ``dimensions`` and ``full`` exactly as the official script
does, plus one extra top-level key ``mode``; and the table alone in FILE with suffix ``.txt``.
In ``dora`` mode the table text is the official one; in ``paper`` mode it ends with a line naming
the mode. Touches no database.
"""
from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from evaluation.scoring import MODES
from evaluation.scoring.aggregate import official_document, run_evaluation
from evaluation.scoring.config import ScoringConfig
from evaluation.scoring.loaders import TASKS, load_run_records, load_task_files, merge_predictions


def _default_tasks_dir() -> Path:
    data = os.environ.get("DORA_DATA")
    return Path(data) / "tasks" if data else Path("data") / "tasks"


class Command(BaseCommand):
    help = "Score a DORA run folder (answers + trajectories) exactly like the official scripts/evaluate.py."
    requires_system_checks = []
    requires_migrations_checks = False

    def add_arguments(self, parser):
        group = parser.add_mutually_exclusive_group(required=True)
        group.add_argument("--run", type=Path, help="run folder holding <task name>/benchmark.jsonl per dimension")
        group.add_argument("--sanity", action="store_true", help="score the gold trajectories against themselves")
        parser.add_argument("--tasks-dir", type=Path, default=None,
                            help="gold task files (default: $DORA_DATA/tasks, else ./data/tasks)")
        parser.add_argument("--output", type=Path, default=None, help="result JSON (default: <run>/eval.json)")
        parser.add_argument("--tau-r", type=float, default=0.2, help="relative tolerance for scalar fields")
        parser.add_argument("--tau-a", type=float, default=1.0, help="absolute tolerance for scalar fields (dora mode)")
        parser.add_argument("--mode", choices=MODES, default="dora",
                            help="dora: the official evaluator (default); paper: the paper's Table 3 operators")

    def handle(self, *args, **opts):
        run_dir, sanity = opts["run"], opts["sanity"]
        tasks_dir = opts["tasks_dir"] or _default_tasks_dir()
        if run_dir is not None and not run_dir.is_dir():
            raise CommandError(f"run directory not found: {run_dir}")
        if not tasks_dir.is_dir():
            raise CommandError(f"tasks directory not found: {tasks_dir}")
        cfg = ScoringConfig(opts["tau_r"], opts["tau_a"], opts["mode"])
        gold = load_task_files(tasks_dir)
        log: list = []
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if sanity:
                results = run_evaluation(gold, None, (tasks_dir,), cfg)
            else:
                preds = merge_predictions(gold, load_run_records(run_dir), log, run_dir)
                results = run_evaluation(gold, preds, (tasks_dir, run_dir), cfg)
        for line in log:
            self.stdout.write(line)
        for w in caught:
            self.stderr.write(f"warning: {w.message}")
        if len(results["full"]) < len(TASKS):
            self.stderr.write(f"warning: only {sorted(results['full'])} evaluated: "
                              "the DORA score averages these dimensions only")
        document = official_document(results, cfg.mode)
        table = document["summary_table"]
        self.stdout.write(table)
        output = opts["output"] or (Path("outputs/eval_sanity.json") if sanity else run_dir / "eval.json")
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(document, ensure_ascii=False, indent=2), encoding="utf-8")
        output.with_suffix(".txt").write_text(table + "\n", encoding="utf-8")
        self.stdout.write(f"\nresults: {output}")
