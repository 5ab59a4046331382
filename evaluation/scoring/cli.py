"""The official ``scripts/evaluate.py`` of DORA as a command line, with no Django and no database.

    python -m evaluation.scoring --run DIR [--tasks-dir DIR] [--output FILE] [--tau-r 0.2] [--tau-a 1.0] [--mode dora|paper]
    python -m evaluation.scoring --sanity [--tasks-dir DIR] [--output FILE] ...

``manage.py evaluate_runs ...`` runs this same code before Django starts (``manage.py`` hands the
command line over), so scoring starts in tens of milliseconds; the Django command of the same name
(for ``call_command``) calls ``run`` too.

Writes FILE (default ``<run>/eval.json``, or ``outputs/eval_sanity.json`` with ``--sanity``) with
``summary_table``, ``dora_score``, ``dimensions`` and ``full`` exactly as the official script does,
plus one extra top-level key ``mode``; and the table alone in FILE with suffix ``.txt``. In ``dora``
mode the table text is the official one; in ``paper`` mode it ends with a line naming the mode.
Exit status 0, or 2 with a message for a missing folder or an unreadable task file.
"""
from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from .aggregate import official_document, run_evaluation
from .config import MODES, ScoringConfig
from .loaders import TASKS, load_run_records, load_task_files, merge_predictions
from .runtime import dumps_indented, leave_to_exit, paused_gc

__all__ = ["add_arguments", "build_parser", "run", "main", "CommandLineError"]


class CommandLineError(Exception):
    """A folder or file named on the command line cannot be used (the message says which)."""


def _default_tasks_dir() -> Path:
    data = os.environ.get("DORA_DATA")
    return Path(data) / "tasks" if data else Path("data") / "tasks"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The command line of ``scripts/evaluate.py`` (``--run`` or ``--sanity``, tolerances, mode)."""
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


def build_parser(prog: str = "python -m evaluation.scoring") -> argparse.ArgumentParser:
    """A parser with ``add_arguments``' options."""
    parser = argparse.ArgumentParser(
        prog=prog, description="Score a DORA run folder (answers + trajectories) exactly like the official scripts/evaluate.py.")
    add_arguments(parser)
    return parser


def run(run_dir: Path | None, sanity: bool, tasks_dir: Path | None, output: Path | None,
        tau_r: float = 0.2, tau_a: float = 1.0, mode: str = "dora", *,
        stdout: TextIO = sys.stdout, stderr: TextIO = sys.stderr, exiting: bool = False) -> Path:
    """Score, write eval.json and its .txt table, print the log, warnings and table; return the JSON path.

    ``exiting``: the process ends after this call (``main``): the objects left are frozen for the
    garbage collector instead of collected (``paused_gc(freeze=True)``), and the scored data is
    not freed at all (``leave_to_exit``).

    Raises ``CommandLineError`` for a missing run or tasks folder and for a task file the scorer
    cannot read (``ValueError`` of the loaders, which names the file).
    """
    tasks_dir = tasks_dir or _default_tasks_dir()
    if run_dir is not None and not run_dir.is_dir():
        raise CommandLineError(f"run directory not found: {run_dir}")
    if not tasks_dir.is_dir():
        raise CommandLineError(f"tasks directory not found: {tasks_dir}")
    cfg = ScoringConfig(tau_r, tau_a, mode)
    log: list = []
    with paused_gc(freeze=exiting), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            gold = load_task_files(tasks_dir, scored_fields_only=True)
            if sanity:
                results = run_evaluation(gold, None, (tasks_dir,), cfg)
            else:
                preds = merge_predictions(gold, load_run_records(run_dir), log, run_dir)
                results = run_evaluation(gold, preds, (tasks_dir, run_dir), cfg)
        except ValueError as exc:
            raise CommandLineError(str(exc)) from exc
        document = official_document(results, cfg.mode)
        text = dumps_indented(document)
        if exiting:  # the process ends after this call: its data is left to the operating system
            leave_to_exit(gold, None if sanity else preds, results, document, text)
    for line in log:
        print(line, file=stdout)
    for w in caught:
        print(f"warning: {w.message}", file=stderr)
    if len(results["full"]) < len(TASKS):
        print(f"warning: only {sorted(results['full'])} evaluated: the DORA score averages these dimensions only",
              file=stderr)
    table = document["summary_table"]
    print(table, file=stdout)
    output = output or (Path("outputs/eval_sanity.json") if sanity else run_dir / "eval.json")
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text, encoding="utf-8")
    output.with_suffix(".txt").write_text(table + "\n", encoding="utf-8")
    print(f"\nresults: {output}", file=stdout)
    return output


def main(argv: Sequence[str] | None = None, prog: str = "python -m evaluation.scoring") -> int:
    """Parse ``argv`` (default ``sys.argv[1:]``) and ``run``; the exit status."""
    args = build_parser(prog).parse_args(argv)
    try:
        run(args.run, args.sanity, args.tasks_dir, args.output, args.tau_r, args.tau_a, args.mode, exiting=True)
    except CommandLineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0
