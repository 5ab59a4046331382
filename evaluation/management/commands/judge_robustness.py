"""``manage.py judge_robustness --run ID --config NAME [--as-user NAME] [--json]``

Lets the judge decide the robustness outcomes of a run's records on variant tasks that the rule
left open ("judge needed", ``RunRecord.robustness``): one judge call per such record through
``evaluation.services.robustness.judge_robustness`` (the tool-broken five classes or the
unsolvable criteria). Records the rule decided are not sent. Prints what was decided and what is
still open (with the reason, e.g. a failed judge answer); ``--json`` as one object.
"""
from __future__ import annotations

import json

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = "Let the judge decide the robustness outcomes of a run that the rule left open."

    def add_arguments(self, parser):
        parser.add_argument("--run", type=int, required=True, help="agent run id")
        parser.add_argument("--config", required=True, help="judge configuration name (see /judge/configs/)")
        parser.add_argument("--as-user", default=None, help="who asks (needs judge.run; default: a superuser)")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, **o):
        # imported here: ``manage.py --help`` loads this module before Django starts (manage.py)
        from evaluation.judge import JudgeConfigError, JudgeRequestError, JudgeTransientError
        from evaluation.models import AgentRun, JudgeConfig
        from evaluation.robustness import JUDGE_NEEDED
        from evaluation.services.judge import JudgeInputError, JudgePaused
        from evaluation.services.robustness import judge_robustness

        run = AgentRun.objects.filter(pk=o["run"]).first()
        if run is None:
            raise CommandError(f"--run: no run {o['run']}")
        config = JudgeConfig.objects.filter(name=o["config"]).first()
        if config is None:
            names = ", ".join(JudgeConfig.objects.values_list("name", flat=True)) or "none yet"
            raise CommandError(f"--config: no judge configuration named {o['config']!r} (known: {names})")
        User = get_user_model()
        user = (User.objects.filter(username=o["as_user"]).first() if o["as_user"]
                else User.objects.filter(is_superuser=True).order_by("id").first())
        if user is None:
            raise CommandError("--as-user: no such user (and no superuser to default to)")
        decided, still_open = [], []
        for record in run.records.filter(robustness__decided_by=JUDGE_NEEDED).order_by("question_id"):
            try:
                done = judge_robustness(user, config, record)
            except PermissionDenied as exc:
                raise CommandError(f"--as-user {user.username}: may not run the judge ({exc})") from exc
            except (JudgePaused, JudgeConfigError) as exc:
                raise CommandError(f"--config {config.name}: {exc}") from exc
            except (ValueError, JudgeInputError, JudgeRequestError, JudgeTransientError) as exc:
                still_open.append({"question_id": record.question_id, "reason": str(exc)})
                continue
            decided.append({"question_id": record.question_id, "kind": done.robustness.get("kind"),
                            "outcome": done.robustness.get("outcome")})
        out = {"run": run.pk, "decided": decided, "open": still_open}
        if o["json"]:
            self.stdout.write(json.dumps(out, ensure_ascii=False))
            return
        for d in decided:
            self.stdout.write(f"{d['question_id']}: {d['kind']} → {d['outcome']} (judge)")
        for d in still_open:
            self.stdout.write(f"{d['question_id']}: still open — {d['reason']}")
        self.stdout.write(f"{len(decided)} decided by the judge, {len(still_open)} still open")
