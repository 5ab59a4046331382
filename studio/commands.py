"""What several management commands share: the shape of a command that uploads to the bucket what
it lacks (``push_layers``, ``push_artifacts``).

Importing this module touches no app or model, so a command built on it still answers ``--help``
before Django is set up (``manage.py``'s ``HELP_WITHOUT_DJANGO``).
"""
from __future__ import annotations

import json
import sys
from importlib import import_module

from django.core.management.base import BaseCommand, CommandError


class PushToBucketCommand(BaseCommand):
    """``manage.py <name> [--json]``: run :attr:`push`, print its report, exit 1 when it names a file
    found neither in the bucket nor on this machine.

    :attr:`push` is ``"package.module:function"``, imported when the command runs; the function
    takes no argument, raises ``ValueError`` when there is no bucket, and returns
    ``{"uploaded": [name, ...], "present": int, "missing": [name, ...]}``.
    """

    push = ""

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true", help="print one JSON document")

    def handle(self, *args, **opts):
        module, _, function = self.push.partition(":")
        try:
            report = getattr(import_module(module), function)()
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
