#!/usr/bin/env python
"""Django's command-line utility for the studio."""
import os
import sys

#: commands whose module imports without Django's app registry (project imports in ``handle``, or
#: in a service module that ``handle`` imports; at module top only pure modules such as
#: ``kernel.vocabulary`` or ``evaluation.judge.*``): their ``--help`` is printed without starting
#: Django, nearly as fast as ``evaluate_runs``'s (tests/test_mcp.py runs each). Every command of
#: the project is listed; ``evaluate_runs`` runs before Django starts below.
HELP_WITHOUT_DJANGO = {"mcp_serve": "replay.management.commands.mcp_serve",
                       "qc": "annotation.management.commands.qc",
                       "agreement": "evaluation.management.commands.agreement",
                       "sweep_jobs": "evaluation.management.commands.sweep_jobs",
                       "tools": "replay.management.commands.tools",
                       "gold_baseline": "evaluation.management.commands.gold_baseline",
                       "send_webhooks": "notifications.management.commands.send_webhooks",
                       "release_diff": "releases.management.commands.release_diff",
                       "import_release": "releases.management.commands.import_release",
                       "import_xbd": "annotation.management.commands.import_xbd",
                       "import_osm": "annotation.management.commands.import_osm",
                       "import_raster": "annotation.management.commands.import_raster",
                       "import_vector": "annotation.management.commands.import_vector",
                       "export_release": "releases.management.commands.export_release",
                       "export_tasks": "releases.management.commands.export_tasks",
                       "import_runs": "evaluation.management.commands.import_runs",
                       "import_tasks": "annotation.management.commands.import_tasks",
                       "judge_robustness": "evaluation.management.commands.judge_robustness",
                       "rescore_run": "evaluation.management.commands.rescore_run",
                       "demo": "evaluation.management.commands.demo",
                       "experiment": "experiments.management.commands.experiment",
                       "judge": "evaluation.management.commands.judge",
                       "judge_report": "evaluation.management.commands.judge_report",
                       "make_variants": "annotation.management.commands.make_variants",
                       "replay": "replay.management.commands.replay",
                       "seed_synthetic": "evaluation.management.commands.seed_synthetic",
                       "stepwise_cases": "evaluation.management.commands.stepwise_cases",
                       "push_layers": "annotation.management.commands.push_layers",
                       "push_artifacts": "replay.management.commands.push_artifacts"}


def main() -> None:
    command, rest = (sys.argv[1:2] or [""])[0], sys.argv[2:]
    if command in HELP_WITHOUT_DJANGO and rest and set(rest) <= {"-h", "--help"}:
        from importlib import import_module

        import_module(HELP_WITHOUT_DJANGO[command]).Command().print_help("manage.py", command)
        sys.exit(0)
    if sys.argv[1:2] == ["evaluate_runs"]:
        # The official evaluator's computation needs no settings and no database: run it before
        # Django starts, so that scoring a run folder starts in tens of milliseconds.
        from evaluation.scoring.cli import main as evaluate_runs

        sys.exit(evaluate_runs(sys.argv[2:], prog="manage.py evaluate_runs"))
    if command == "mcp_serve":
        # a tool server (a process per tool call in the benchmark's harness) loads only the apps
        # it reads and no Celery app (studio/settings.py, TOOL_SERVER_APPS)
        os.environ.setdefault("STUDIO_APP_SET", "tool-server")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "studio.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
