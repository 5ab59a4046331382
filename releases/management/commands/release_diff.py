"""manage.py release_diff A B [--json]: tasks added, removed and changed between releases A and B."""
import json

from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = "Print the diff between two releases: tasks added, removed, changed (query, trajectory, answer, eval spec)."

    def add_arguments(self, parser):
        parser.add_argument("a")
        parser.add_argument("b")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, **opts):
        # imported here: ``manage.py --help`` loads this module before Django starts (manage.py)
        from releases.models import Release
        from releases.selectors import format_diff, release_diff

        rels = {r.version: r for r in Release.objects.filter(version__in=[opts["a"], opts["b"]])}
        for v in (opts["a"], opts["b"]):
            if v not in rels:
                raise CommandError(f"no release {v}")
        diff = release_diff(rels[opts["a"]], rels[opts["b"]])
        self.stdout.write(json.dumps(diff, indent=2, ensure_ascii=False) if opts["json"] else format_diff(diff))
