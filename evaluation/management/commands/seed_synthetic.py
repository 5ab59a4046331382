"""manage.py seed_synthetic --tasks N --runs M: a large synthetic benchmark over the real scenes.

What it makes and how: ``evaluation.services.seeding`` (:func:`~evaluation.services.seeding.seed_synthetic`).
"""
from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = ("Create a synthetic benchmark of N tasks over the real scenes and M scored agent runs "
            "(everything named synthetic-*, questions prefixed [synthetic]).")

    def add_arguments(self, parser):
        parser.add_argument("--tasks", type=int, required=True, help="number of tasks")
        parser.add_argument("--runs", type=int, default=0, help="number of agent runs (one record per task each)")
        parser.add_argument("--batch", type=int, default=5000, help="tasks per transaction (default 5000)")
        parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
        parser.add_argument("--tasks-per-sample", type=int, default=2, help="tasks sharing one sample (default 2)")
        parser.add_argument("--status", default="approved", help="'approved' (default) or 'mix' of workflow states")
        parser.add_argument("--replace", action="store_true", help="delete earlier synthetic data first")
        parser.add_argument("--verdicts", type=int, default=0,
                            help="records of each run given a judge's and two people's verdicts (default 0)")

    def handle(self, *args, **opts):
        # imported here: ``manage.py seed_synthetic --help`` loads this module before Django starts (manage.py)
        from evaluation.services.seeding import seed_synthetic

        quiet = opts["verbosity"] == 0
        try:
            out = seed_synthetic(opts["tasks"], opts["runs"], batch=opts["batch"], seed=opts["seed"],
                                 tasks_per_sample=opts["tasks_per_sample"], status=opts["status"], replace=opts["replace"], verdicts=opts["verdicts"],
                                 log=(lambda m: None) if quiet else (lambda m: self.stdout.write(m)))
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        if not quiet:
            self.stdout.write(f"synthetic benchmark: {out['tasks']:,} tasks over {out['events']} synthetic events, "
                              f"{out['runs']} runs, {out['records']:,} records in {out['seconds']} s")
            for name, score in out["dora_scores"].items():
                self.stdout.write(f"  {name}: DORA score {score:.6f}")
