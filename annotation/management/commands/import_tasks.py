"""manage.py import_tasks FILE --event SLUG [--accept-proposals] [--as-user NAME] [--json]

Reads a task file in the benchmark's layout (a JSON list of samples with ``tasks``) and creates
the studio's tasks in event SLUG (``annotation.services.task_import.import_task_file``): every ``input_data`` path
must name a layer of the event by file name; trajectories are stored symbolically; answer fields
get their eval_spec type and, as source, the reference to the step whose obs holds the value when
exactly one does (else the literal). Nothing is written when any sample has a problem; the error
lists each one (file, sample, task, field).

An answer field whose gold is blank (``null`` or missing) gets a proposed source, listed per task
(``--json``: ``proposals``, each with ``bound``). ``--accept-proposals`` binds every such field to
its proposal in the imported revision (the editor's one-by-one rule, ``kernel.content.
accept_proposals``) and says so per field; a field with no proposal is reported and left blank.
Then ``manage.py replay --all --event SLUG`` fills the gold.
"""
from __future__ import annotations

import json
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = "Import tasks from a task file in the benchmark's layout into an event."

    def add_arguments(self, parser):
        parser.add_argument("file")
        parser.add_argument("--event", required=True)
        parser.add_argument("--as-user", default=None, help="author of the revisions (default: a superuser)")
        parser.add_argument("--accept-proposals", action="store_true",
                            help="bind every blank answer field to its proposed source (as accepting each in the editor)")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, **o):
        # imported here: ``manage.py --help`` loads this module before Django starts (manage.py)
        from annotation.models import Event
        from annotation.services.task_import import TaskImportError, import_task_file, proposal_lines
        from annotation.services.tasks import TaskLockedError

        event = Event.objects.filter(slug=o["event"]).first()
        if event is None:
            raise CommandError(f"--event: no event '{o['event']}' (import its layers first)")
        User = get_user_model()
        user = (User.objects.filter(username=o["as_user"]).first() if o["as_user"]
                else User.objects.filter(is_superuser=True).order_by("id").first())
        if user is None:
            raise CommandError("no author: pass --as-user NAME (an author or maintainer) or create a superuser")
        path = Path(o["file"])
        if not path.is_file():
            raise CommandError(f"{path}: no such file")
        try:
            rows = import_task_file(user, path, event, accept_proposals=o["accept_proposals"])
        except TaskImportError as exc:
            raise CommandError(str(exc)) from exc
        except TaskLockedError as exc:  # a re-import over a released (or reviewed) task
            raise CommandError(f"{path.name}: {exc}") from None
        except PermissionDenied as exc:
            raise CommandError(f"--as-user: {exc} (an author or maintainer imports tasks)") from None
        if o["json"]:
            self.stdout.write(json.dumps(rows, indent=2))
            return
        for r in rows:
            self.stdout.write(f"  [{r['status']}] {r['question_id']}")
            for line in proposal_lines(r["proposals"], o["accept_proposals"]):
                self.stdout.write(f"      {line}")
        self.stdout.write(f"{len(rows)} task(s) from {path.name} in event {event.slug}")
        if o["accept_proposals"]:
            ps = [p for r in rows for p in r["proposals"]]
            self.stdout.write(f"{sum(p['bound'] for p in ps)} blank answer field(s) bound to their proposed source, "
                              f"{sum(not p['bound'] for p in ps)} left blank")
