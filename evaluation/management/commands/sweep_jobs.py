"""``manage.py sweep_jobs``: end the background jobs whose worker died (``studio.background``).

Every kind of job registers its sweeper at start-up: run zip imports and judge jobs (evaluation),
release exports (releases), replays (replay). A job ``queued`` or ``running`` whose worker process
on this host is gone, or without a heartbeat for ``--stale-after`` seconds (default
``STUDIO_JOB_STALE_AFTER_S``), is marked failed with the reason and its files are removed (a run
import's unpacked ``runs/`` folder, an export's staging and spool files), so it can be re-run at
once; a queued one that no worker took is sent again; a replay without progress is re-queued.
For cron or ``celery beat`` (docs/deployment.md); web processes and workers also sweep.
"""
from __future__ import annotations

import json

from django.core.management.base import BaseCommand

from studio.background import stale_after_s, sweep_jobs


class Command(BaseCommand):
    help = "End (fail, files removed) or re-queue background jobs whose worker died."

    def add_arguments(self, parser):
        parser.add_argument("--stale-after", type=float, default=None,
                            help="seconds without a heartbeat after which a job is lost "
                                 "(default STUDIO_JOB_STALE_AFTER_S)")
        parser.add_argument("--json", action="store_true", help="print what was done as JSON")

    def handle(self, *args, **opts):
        rows = sweep_jobs(opts["stale_after"])
        if opts["json"]:
            self.stdout.write(json.dumps(rows, indent=1, default=str))
            return
        limit = opts["stale_after"] if opts["stale_after"] is not None else stale_after_s()
        if not rows:
            self.stdout.write(f"no lost job (stale after {limit:g} s)")
        for row in rows:
            removed = f"; removed {len(row['removed'])} files or folders" if row["removed"] else ""
            self.stdout.write(f"{row['kind']} {row['id']}: {row['action']} ({row['why']}){removed}")
