#!/usr/bin/env python
"""Django's command-line utility for the studio."""
import os
import sys


def main() -> None:
    if sys.argv[1:2] == ["evaluate_runs"]:
        # The official evaluator's computation needs no settings and no database: run it before
        # Django starts, so that scoring a run folder starts in tens of milliseconds.
        from evaluation.scoring.cli import main as evaluate_runs

        sys.exit(evaluate_runs(sys.argv[2:], prog="manage.py evaluate_runs"))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "studio.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
