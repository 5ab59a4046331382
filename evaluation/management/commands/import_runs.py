"""manage.py import_runs DIR --agent NAME [--tasks-dir DIR] [--mode dora|paper] [--protocol AP|IF] [--scaffold S]
[--queue-share F] [--queue-n N] [--json]"""
import json
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = ("Import an agent run folder (per-dimension benchmark.jsonl, the benchmark's run layout) and score it "
            "with the official rules. Gold: the studio's tasks, or --tasks-dir in the benchmark's layout.")

    def add_arguments(self, parser):
        parser.add_argument("run_dir")
        parser.add_argument("--agent", required=True)
        parser.add_argument("--tasks-dir", default=None)
        parser.add_argument("--release", default=None, help="score against this release version's gold and pin the run to it")
        parser.add_argument("--mode", choices=["dora", "paper"], default="dora")
        parser.add_argument("--tau-r", type=float, default=0.2)
        parser.add_argument("--tau-a", type=float, default=1.0)
        parser.add_argument("--as-user", default=None, help="username recorded as importer (default: a superuser)")
        parser.add_argument("--protocol", choices=["AP", "IF"], default=None,
                            help="planning protocol (default: from a folder named <model>_AP or <model>_IF)")
        parser.add_argument("--scaffold", default="", help="agent scaffold: ReAct, Plan-then-Execute, Reflexion, ReWOO, ...")
        parser.add_argument("--queue-share", type=float, default=None,
                            help="share 0-1 of the records to queue for human scoring (default: STUDIO_QUEUE_ON_IMPORT_SHARE)")
        parser.add_argument("--queue-n", type=int, default=None,
                            help="human verdicts per queued record (default: STUDIO_HUMAN_VERDICTS_PER_RECORD)")
        parser.add_argument("--perception", choices=["model", "gt", "classical", "unknown"], default=None,
                            help="how the run's seg.* calls were answered (default: the records' "
                                 "studio_session.perception_mode, else unknown); gt = oracle perception")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, **opts):
        # imported here: ``manage.py --help`` loads this module before Django starts (manage.py)
        from evaluation.services.queue import queue_share_of_run
        from evaluation.services.runs import RunImportError, import_run_dir
        from releases.models import Release

        User = get_user_model()
        user = (User.objects.filter(username=opts["as_user"]).first() if opts["as_user"]
                else User.objects.filter(is_superuser=True).order_by("id").first())
        if user is None:
            raise CommandError("no importing user: pass --as-user NAME (a maintainer) or create a superuser")
        run_dir = Path(opts["run_dir"])
        if not run_dir.is_dir():
            raise CommandError(f"{run_dir}: not a directory")
        release = None
        if opts["release"]:
            release = Release.objects.filter(version=opts["release"]).first()
            if release is None:
                raise CommandError(f"--release: no release {opts['release']}")
        try:
            run = import_run_dir(user, run_dir, opts["agent"], tasks_dir=Path(opts["tasks_dir"]) if opts["tasks_dir"] else None,
                                 mode=opts["mode"], tau_r=opts["tau_r"], tau_a=opts["tau_a"], release=release,
                                 protocol=opts["protocol"], scaffold=opts["scaffold"], perception_mode=opts["perception"])
            queued = queue_share_of_run(user, run, opts["queue_share"], opts["queue_n"])
        except (RunImportError, ValueError) as exc:
            raise CommandError(str(exc)) from exc
        except PermissionDenied as exc:
            raise CommandError(f"--as-user: {exc} (a maintainer imports runs)") from None
        summary = {"run_id": run.pk, "agent": run.agent.name, "mode": run.scoring_mode, "dora_score": run.dora_score,
                   "dimensions": run.dimensions, "gold_set": run.gold_set, "gold_set_digest": run.gold_set_digest,
                   "records": run.records.count(), "protocol": run.protocol,
                   "scaffold": run.scaffold, "queued_records": queued["records"], "queued_slots": queued["slots"]}
        if opts["json"]:
            self.stdout.write(json.dumps(summary, indent=2))
        else:
            self.stdout.write(f"run {run.pk} of {run.agent.name}: {summary['records']} records, DORA score {run.dora_score} ({run.scoring_mode}) "
                              f"on {run.gold_set}"
                              + (f"; {queued['records']} records queued for human scoring ({queued['slots']} slots)" if queued["records"] else ""))
