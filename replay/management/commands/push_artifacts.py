"""manage.py push_artifacts [--json]

With a bucket (``STUDIO_STORAGE_URL``): copies the replay artifacts of this machine's content store
that the bucket lacks to their keys (``replay.services.artifacts.push_artifacts_to_bucket``): run it
once on the machine that holds ``STUDIO_ARTIFACT_ROOT`` when turning the bucket on over replays made
before. Idempotent. Exits 1 when an artifact a run or a step cache entry names is neither in the
bucket nor here (replay its task again to make it anew).
"""
from __future__ import annotations

import json
import sys

from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = "Upload the replay artifacts the bucket lacks from this machine's artifact store (once, when turning the bucket on)."

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true", help="print one JSON document")

    def handle(self, *args, **opts):
        from replay.services.artifacts import push_artifacts_to_bucket

        try:
            report = push_artifacts_to_bucket()
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        if opts["json"]:
            self.stdout.write(json.dumps(report, indent=2))
        else:
            self.stdout.write(f"uploaded {len(report['uploaded'])}, already in the bucket {report['present']}, "
                              f"missing {len(report['missing'])}")
            for name in report["missing"]:
                self.stdout.write(f"  missing: {name}")
        if report["missing"]:
            sys.exit(1)
