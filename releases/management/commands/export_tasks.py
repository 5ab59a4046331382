"""manage.py export_tasks --out DIR [--event SLUG]: the task set in the benchmark's layout (tasks/ and
the images/ its input_data and trajectories name).

Robustness variants (tasks with a ``TaskVariant``) are written apart, under ``DIR/variants/tasks/``
(and ``DIR/variants/images/``), as a release export writes them (``releases.services.release_variants``):
the benchmark's loader and the official evaluator read ``DIR/tasks/`` as the benchmark tasks only,
the set the studio scores a run on (``evaluation.goldset``: variants are never part of the DORA score)."""
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = ("Write tasks/t1_…json … t5_…json (the benchmark's layout) from each task's newest succeeded replay, "
            "and images/ with every input file they name; robustness variants under variants/.")

    def add_arguments(self, parser):
        parser.add_argument("--out", required=True)
        parser.add_argument("--event", default=None)

    def handle(self, *args, **opts):
        # imported here: ``manage.py --help`` loads this module before Django starts (manage.py)
        from annotation.models import Task, TaskVariant
        from releases.services.export import ExportError, write_task_files
        from releases.services.release_variants import VARIANTS_DIR

        qs = Task.objects.select_related("event", "head")
        if opts["event"]:
            qs = qs.filter(event__slug=opts["event"])
        if not qs.exists():
            raise CommandError("no task to export")
        tasks = list(qs)
        variant_ids = set(TaskVariant.objects.filter(task__in=tasks).values_list("task_id", flat=True))
        plain = [t for t in tasks if t.pk not in variant_ids]
        variants = [t for t in tasks if t.pk in variant_ids]
        out = Path(opts["out"])
        try:
            paths, missing = write_task_files(plain, out) if plain else ([], [])
            if variants:
                variant_paths, variant_missing = write_task_files(variants, out / VARIANTS_DIR)
                paths, missing = paths + variant_paths, missing + variant_missing
        except ExportError as exc:
            raise CommandError(str(exc)) from exc
        for p in paths:
            self.stdout.write(str(p))
        for m in missing:  # a named input the studio has no file for: said, never silently left out
            self.stderr.write(f"input file {m['path']}: not shipped ({m['reason']}; {', '.join(m['question_ids'])})")
