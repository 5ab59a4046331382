"""``manage.py send_webhooks``: make every due webhook delivery's attempt now, in this process
(``notifications.services.send_due``: a first send whose after-commit hand-off never ran, and every
retry whose time has come). ``manage.py sweep_jobs`` does the same through the job runner."""
from __future__ import annotations

import json

from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Send every due webhook delivery now (retries included)."

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true", help="print the counts as JSON")

    def handle(self, *args, **opts):
        # imported here: ``manage.py --help`` loads this module before Django starts (manage.py)
        from notifications.models import WebhookDelivery
        from notifications.services import send_due

        n = send_due()
        pending = WebhookDelivery.objects.filter(status=WebhookDelivery.Status.PENDING).count()
        if opts["json"]:
            self.stdout.write(json.dumps({"attempts": n, "pending": pending}))
        else:
            self.stdout.write(f"{n} attempt(s) made; {pending} delivery(ies) still pending")
