"""``manage.py stepwise_cases``: the planning benchmark's step-wise protocol (gold prefix).

    python manage.py stepwise_cases export --run ID [--positions middle] [--horizons 1,2,3] --out FILE.jsonl
    python manage.py stepwise_cases import --run ID --planner NAME --predictions FILE.jsonl [--positions ...] [--horizons ...] --user NAME

``export`` writes one planner case per line (question, tools, the expert prefix, the horizon;
never the expected steps) and lists the questions too short for a case.  ``import`` reads the
planner's ``{case_id, predicted_steps}`` lines for the same cases and stores them as a new agent
run whose records are judged under ``stepwise-gold-<position>-<k>``.
"""
from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from evaluation.judge.stepwise import (
    HORIZONS,
    POSITIONS,
    StepwiseCaseError,
    export_jsonl,
)


class Command(BaseCommand):
    help = "Export step-wise planning cases (gold prefix) for a planner, or import its predictions as a run."

    def add_arguments(self, parser):
        parser.add_argument("action", choices=["export", "import"])
        parser.add_argument("--run", type=int, required=True, help="the run whose records' gold trajectories are cut")
        parser.add_argument("--positions", default="middle", help=f"comma-separated, of {', '.join(POSITIONS)}")
        parser.add_argument("--horizons", default="1", help="comma-separated, of 1, 2, 3")
        parser.add_argument("--out", help="export: the JSON-lines file to write")
        parser.add_argument("--planner", help="import: the planner's name (the agent)")
        parser.add_argument("--predictions", help="import: the planner's JSON-lines file")
        parser.add_argument("--user", help="import: the studio user recorded as importer (needs run.import)")

    def handle(self, *args, **o):
        # imported here: ``manage.py stepwise_cases --help`` loads this module before Django starts
        # (manage.py; django.contrib.auth too, a tenth of a second of imports)
        from django.contrib.auth import get_user_model

        from evaluation.models import AgentRun
        from evaluation.services.stepwise import import_stepwise_predictions, stepwise_cases

        run = AgentRun.objects.filter(pk=o["run"]).first()
        if run is None:
            raise CommandError(f"--run: no run {o['run']}")
        positions = [p.strip() for p in o["positions"].split(",") if p.strip()]
        try:
            horizons = [int(h) for h in o["horizons"].split(",") if h.strip()]
        except ValueError:
            raise CommandError(f"--horizons: {o['horizons']!r} is not a list of 1, 2, 3") from None
        bad = [h for h in horizons if h not in HORIZONS]
        if bad:
            raise CommandError(f"--horizons: {bad[0]} is not one of 1, 2, 3")
        try:
            if o["action"] == "export":
                if not o["out"]:
                    raise CommandError("export needs --out FILE.jsonl")
                cases, skipped = stepwise_cases(run, positions, horizons)
                Path(o["out"]).write_text(export_jsonl(cases), encoding="utf-8")
                self.stdout.write(f"{len(cases)} case(s) written to {o['out']}; {len(skipped)} skipped")
                for line in skipped:
                    self.stdout.write(f"  skipped {line}")
                return
            for need in ("planner", "predictions", "user"):
                if not o[need]:
                    raise CommandError(f"import needs --{need}")
            path = Path(o["predictions"])
            if not path.is_file():
                raise CommandError(f"--predictions: no file {path}")
            user = get_user_model().objects.filter(username=o["user"]).first()
            if user is None:
                raise CommandError(f"--user: no user {o['user']!r}")
            new = import_stepwise_predictions(user, run, o["planner"], path.read_text(encoding="utf-8"),
                                              positions=positions, horizons=horizons, source=str(path))
        except StepwiseCaseError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"run {new.pk} ({new.name}): {new.records.count()} step-wise case(s)")
