"""manage.py export_tasks --out DIR [--event SLUG]: the task set in the benchmark's layout (tasks/ and
the images/ its input_data and trajectories name)."""
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from annotation.models import Task
from releases.services.export import ExportError, write_task_files


class Command(BaseCommand):
    help = ("Write tasks/t1_…json … t5_…json (the benchmark's layout) from each task's newest succeeded replay, "
            "and images/ with every input file they name.")

    def add_arguments(self, parser):
        parser.add_argument("--out", required=True)
        parser.add_argument("--event", default=None)

    def handle(self, *args, **opts):
        qs = Task.objects.select_related("event", "head")
        if opts["event"]:
            qs = qs.filter(event__slug=opts["event"])
        if not qs.exists():
            raise CommandError("no task to export")
        try:
            paths, missing = write_task_files(list(qs), Path(opts["out"]))
        except ExportError as exc:
            raise CommandError(str(exc))
        for p in paths:
            self.stdout.write(str(p))
        for m in missing:  # a named input the studio has no file for: said, never silently left out
            self.stderr.write(f"images/{m['path']}: not shipped ({m['reason']}; {', '.join(m['question_ids'])})")
