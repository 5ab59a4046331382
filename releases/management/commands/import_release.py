"""manage.py import_release DIR [--event SLUG] [--release-version V] [--no-release] [--draft] [--accept-proposals]
[--as-user NAME] [--json]

``--accept-proposals``: as ``import_tasks --accept-proposals``, every blank answer field is bound
to its proposed source and said so per field (``--json``: ``proposals``); a task whose file
leaves its gold blank keeps its import replay only until the next ``manage.py replay`` of it
(with ``--no-release``: a released task's gold is frozen).
"""
import json

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = ("Import a benchmark folder in the release layout (tasks/t*.json, images/, optional studio_manifest.json): "
            "events, layers, tasks with their gold trajectories and answers. Idempotent; all or nothing.")

    def add_arguments(self, parser):
        parser.add_argument("dir")
        parser.add_argument("--event", default=None, help="event slug for every task (default: the sidecar's, "
                                                          "else the folder's name)")
        parser.add_argument("--release-version", default=None, help="create this release from the imported tasks")
        parser.add_argument("--no-release", action="store_true", help="do not create the sidecar's release")
        parser.add_argument("--draft", action="store_true", help="leave the created release a draft")
        parser.add_argument("--accept-proposals", action="store_true",
                            help="bind every blank answer field to its proposed source (as accepting each in the editor)")
        parser.add_argument("--as-user", default=None, help="username recorded as author (default: the first superuser)")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, **opts):
        # imported here: ``manage.py --help`` loads this module before Django starts (manage.py)
        from annotation.services.task_import import proposal_lines
        from releases.services.release_import import ReleaseImportError, import_release_dir

        User = get_user_model()
        if opts["as_user"]:
            user = User.objects.filter(username=opts["as_user"]).first()
            if user is None:
                raise CommandError(f"--as-user: no user '{opts['as_user']}'")
        else:
            user = User.objects.filter(is_superuser=True).order_by("id").first()
        try:
            report = import_release_dir(user, opts["dir"], event_slug=opts["event"],
                                        release_version=opts["release_version"], make_release=not opts["no_release"],
                                        publish=not opts["draft"], accept_proposals=opts["accept_proposals"])
        except ReleaseImportError as exc:
            raise CommandError(str(exc)) from exc
        except PermissionDenied as exc:
            raise CommandError(f"--as-user: {exc} (a maintainer imports releases)") from None
        s = report.summary()
        if opts["json"]:
            self.stdout.write(json.dumps(s, indent=2, ensure_ascii=False))
            return
        self.stdout.write(f"{len(s['created'])} created, {len(s['updated'])} updated, {len(s['unchanged'])} unchanged; "
                          f"layers: {sum(v == 'created' for v in s['layers'].values())} imported, "
                          f"{sum(v == 'linked' for v in s['layers'].values())} linked; "
                          f"{len(s['images_missing'])} image(s) missing"
                          + (f"; release {s['release']} {'created' if s['release_created'] else 'unchanged'}"
                             if s["release"] else ""))
        for m in s["images_missing"]:
            self.stdout.write(f"  missing: {m['path']} ({m['reason']}; {', '.join(m['question_ids'][:5])})")
        for qid, rows in s["proposals"].items():
            self.stdout.write(f"  {qid}")
            for line in proposal_lines(rows, opts["accept_proposals"]):
                self.stdout.write(f"      {line}")
        if opts["accept_proposals"]:
            ps = [p for rows in s["proposals"].values() for p in rows]
            self.stdout.write(f"{sum(p['bound'] for p in ps)} blank answer field(s) bound to their proposed source, "
                              f"{sum(not p['bound'] for p in ps)} left blank")
