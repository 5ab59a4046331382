"""``manage.py evaluate_runs``: the official ``scripts/evaluate.py`` of DORA, in the studio.

    python manage.py evaluate_runs --run DIR [--tasks-dir DIR] [--output FILE] [--tau-r 0.2] [--tau-a 1.0] [--mode dora|paper]
    python manage.py evaluate_runs --sanity [--tasks-dir DIR] [--output FILE] ...

The computation and the command line are ``evaluation.scoring.cli``'s: from a shell,
``manage.py`` hands ``evaluate_runs`` to it before Django starts (no settings, no database, a start
in tens of milliseconds); this Django command is the same code for ``call_command``. Writes FILE
(default ``<run>/eval.json``, or ``outputs/eval_sanity.json`` with ``--sanity``) exactly as the
official script does, plus one extra top-level key ``mode``, and the table alone in FILE.txt.
"""
from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from evaluation.scoring.cli import CommandLineError, add_arguments, run


class Command(BaseCommand):
    help = "Score a DORA run folder (answers + trajectories) exactly like the official scripts/evaluate.py."
    requires_system_checks = []
    requires_migrations_checks = False

    def add_arguments(self, parser):
        add_arguments(parser)  # the one command line, declared in evaluation.scoring.cli

    def handle(self, *args, **opts):
        try:
            run(opts["run"], opts["sanity"], opts["tasks_dir"], opts["output"], opts["tau_r"], opts["tau_a"],
                opts["mode"], stdout=self.stdout, stderr=self.stderr)
        except CommandLineError as exc:
            raise CommandError(str(exc)) from exc
