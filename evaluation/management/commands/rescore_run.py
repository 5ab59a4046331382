"""manage.py rescore_run --run ID [--release VERSION | --studio] [--as-user NAME] [--json]"""
import json

from django.core.exceptions import PermissionDenied
from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = ("Score the stored predictions of an agent run again against another gold set (a release version, or the "
            "studio's current tasks) without re-running the agent: a new run, named by its set; the old run and its "
            "scores stay (evaluation.services.runs.rescore_run).")

    def add_arguments(self, parser):
        parser.add_argument("--run", type=int, required=True, help="the run whose predictions are re-scored")
        where = parser.add_mutually_exclusive_group(required=True)
        where.add_argument("--release", default=None, help="the release version to score against")
        where.add_argument("--studio", action="store_true", help="score against the studio's current tasks (unversioned)")
        parser.add_argument("--as-user", default=None, help="username recorded as importer (default: a superuser)")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, **opts):
        # imported here: ``manage.py --help`` loads this module before Django starts (manage.py)
        from django.contrib.auth import get_user_model

        from evaluation.models import AgentRun
        from evaluation.services.runs import RunImportError, rescore_run
        from releases.models import Release

        User = get_user_model()
        user = (User.objects.filter(username=opts["as_user"]).first() if opts["as_user"]
                else User.objects.filter(is_superuser=True).order_by("id").first())
        if user is None:
            raise CommandError("no importing user: pass --as-user NAME (a maintainer) or create a superuser")
        run = AgentRun.objects.select_related("agent").filter(pk=opts["run"]).first()
        if run is None:
            raise CommandError(f"--run: no run {opts['run']}")
        release = None
        if opts["release"]:
            release = Release.objects.filter(version=opts["release"]).first()
            if release is None:
                raise CommandError(f"--release: no release {opts['release']}")
        try:
            new = rescore_run(user, run, release=release)
        except (RunImportError, ValueError) as exc:
            raise CommandError(str(exc)) from exc
        except PermissionDenied as exc:
            raise CommandError(f"--as-user: {exc} (a maintainer re-scores runs)") from None
        summary = {"run_id": new.pk, "rescored_from": run.pk, "agent": new.agent.name, "gold_set": new.gold_set,
                   "gold_set_digest": new.gold_set_digest, "dora_score": new.dora_score, "dimensions": new.dimensions,
                   "previous": {"gold_set": run.gold_set, "dora_score": run.dora_score}}
        if opts["json"]:
            self.stdout.write(json.dumps(summary, indent=2, default=str))
        else:
            self.stdout.write(f"run {new.pk} (predictions of run {run.pk}, {new.agent.name}): DORA score {new.dora_score} "
                              f"on {new.gold_set}; run {run.pk} keeps {run.dora_score} on {run.gold_set or 'an unnamed set'}")
