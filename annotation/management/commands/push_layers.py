"""manage.py push_layers [--json]

With a bucket (``STUDIO_STORAGE_URL``): copies the layer files of this machine's data root that the
bucket lacks to their keys (``annotation.services.imports.push_layers_to_bucket``): run it once on
the machine that holds the data root when turning the bucket on over layers imported before.
Idempotent. Exits 1 when a layer's file is neither in the bucket nor here.
"""
from __future__ import annotations

import json
import sys

from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = "Upload the layer files the bucket lacks from this machine's data root (once, when turning the bucket on)."

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true", help="print one JSON document")

    def handle(self, *args, **opts):
        from annotation.services.imports import push_layers_to_bucket

        try:
            report = push_layers_to_bucket()
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
