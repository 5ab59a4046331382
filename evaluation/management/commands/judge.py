"""``manage.py judge``: run an LLM judge over agent-run records, with a progress bar.

    python manage.py judge --config NAME (--release V | --run ID) [--agent NAME] [--dimension t1]
        [--protocol holistic|stepwise] [--cut early,middle,late] [--next 1,2,3] [--sample N]
        [--seed S] [--blind] [--no-code] [--as-user NAME] [--stuck-after S] [--json]

Runs in this process (not through Celery) with the configuration's ``max_concurrency``; cached
judgements are not called again, so a failed or interrupted job can simply be run again. A job an
earlier run left ``running`` without progress for ``--stuck-after`` seconds (its process was
killed) is marked failed first. The progress bar goes to stderr; the summary to stdout. Exit status
1 (CommandError) when the job ends failed or paused (the configuration's pause reason is printed;
it never holds the key).
"""
from __future__ import annotations

import json
import sys

from django.core.management.base import BaseCommand, CommandError

from evaluation.judge.options import STUCK_AFTER_S


def _bar(done: int, total: int, width: int = 30) -> str:
    frac = done / total if total else 1.0
    fill = int(round(frac * width))
    return f"[{'#' * fill}{'.' * (width - fill)}] {done}/{total}"


class Command(BaseCommand):
    help = "Judge agent-run records with an LLM judge configuration (holistic or step-wise), with a progress bar."

    def add_arguments(self, parser):
        parser.add_argument("--config", required=True, help="judge configuration name (see /judge/configs/)")
        parser.add_argument("--release", default=None, help="release version of the runs (AgentRun.release)")
        parser.add_argument("--run", type=int, default=None, help="one run id (runs need not belong to a release)")
        parser.add_argument("--agent", default=None, help="agent name")
        parser.add_argument("--dimension", default=None, help="t1 … t5")
        parser.add_argument("--protocol", choices=["holistic", "stepwise"], default="holistic")
        parser.add_argument("--cut", default="early,middle,late", help="step-wise cut points, comma-separated")
        parser.add_argument("--next", default="1", help="step-wise numbers of next steps, comma-separated (1,2,3)")
        parser.add_argument("--sample", type=int, default=None, help="judge a seeded random sample of N records")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--blind", action="store_true", help="no reference trajectory (for the blind comparison)")
        parser.add_argument("--no-code", action="store_true", help="skip the rule checker")
        parser.add_argument("--as-user", default=None, help="record the job as started by this user (checks judge.run)")
        parser.add_argument("--stuck-after", type=float, default=STUCK_AFTER_S,
                            help="first mark failed the jobs left running with no progress for this many seconds "
                                 f"(a killed worker; default {STUCK_AFTER_S:g})")
        parser.add_argument("--json", action="store_true", help="print the summary as JSON")

    def handle(self, *args, **opts):
        # imported here: ``manage.py judge --help`` loads this module before Django starts (manage.py;
        # django.contrib.auth too, a tenth of a second of imports)
        from django.contrib.auth import get_user_model

        from evaluation.models import JudgeConfig
        from evaluation.services.judge import (
            CUTS,
            STORED_READING,
            JudgePaused,
            run_judge_job,
            select_records,
            start_judge_job,
            sweep_judge_jobs,
        )

        if opts["run"] is None and not opts["release"]:
            raise CommandError("give --release VERSION or --run ID")
        config = JudgeConfig.objects.filter(name=opts["config"]).first()
        if config is None:
            names = ", ".join(JudgeConfig.objects.values_list("name", flat=True)) or "none yet"
            raise CommandError(f"--config: no judge configuration named {opts['config']!r} (known: {names})")
        cuts = [c.strip() for c in opts["cut"].split(",") if c.strip()]
        bad = [c for c in cuts if c not in CUTS]
        if bad:
            raise CommandError(f"--cut: {', '.join(bad)} — use early, middle, late")
        try:
            horizons = [int(h) for h in opts["next"].split(",") if h.strip()]
        except ValueError:
            raise CommandError("--next: comma-separated numbers among 1, 2, 3") from None
        user = None
        if opts["as_user"]:
            user = get_user_model().objects.filter(username=opts["as_user"]).first()
            if user is None:
                raise CommandError(f"--as-user: no user {opts['as_user']!r}")
        for row in sweep_judge_jobs(opts["stuck_after"], queued=False):
            self.stderr.write(f"job {row['id']}: its worker was lost ({row['why']}): marked failed")
        try:
            ids = select_records(run_id=opts["run"], release=opts["release"], agent=opts["agent"],
                                 dimension=opts["dimension"], sample=opts["sample"], seed=opts["seed"])
            job = start_judge_job(user, config, ids, protocol=opts["protocol"], cuts=cuts, horizons=horizons,
                                  blind=opts["blind"], with_code=not opts["no_code"], enqueue=False)
        except (ValueError, JudgePaused) as exc:
            raise CommandError(str(exc)) from exc

        err = self.stderr._out if hasattr(self.stderr, "_out") else sys.stderr
        tty = hasattr(err, "isatty") and err.isatty()

        def progress(j):
            line = f"judging {_bar(j.done, j.total)} ok {j.n_ok} (cached {j.n_cached}) failed {j.n_failed}"
            err.write(("\r" + line) if tty else line + "\n")
            err.flush()

        progress(job)
        job = run_judge_job(job.pk, progress=progress)
        if tty:
            err.write("\n")
        summary = {"job": job.pk, "status": job.status, "records": len(job.record_ids), "judgements": job.total,
                   "ok": job.n_ok, "cached": job.n_cached, "failed": job.n_failed, "cost_usd": round(job.cost_usd, 6),
                   "errors": job.errors, "reading": STORED_READING}
        if job.status == "paused":
            config.refresh_from_db()
            summary["paused_reason"] = config.paused_reason
        if opts["json"]:
            self.stdout.write(json.dumps(summary, indent=2))
        else:
            self.stdout.write(f"job {job.pk} {job.status}: {job.n_ok} ok ({job.n_cached} cached), {job.n_failed} unreadable, "
                              f"{len(job.errors)} not judged, of {job.total}; cost ${job.cost_usd:.4f}; "
                              f"read under the {STORED_READING} reading (judge_report --reading apb re-reads "
                              "the stored answers, no new call)")
            for e in job.errors[:20]:
                self.stdout.write(f"  record {e.get('record')} {e.get('protocol') or ''}: {e.get('error')}")
            if summary.get("paused_reason"):
                self.stdout.write(f"configuration {config.name} paused: {summary['paused_reason']}")
        if job.status in ("failed", "paused"):
            raise CommandError(f"job {job.pk} ended {job.status}; run the command again to retry (cached judgements are kept)")
