"""``manage.py experiment``: agent configurations and experiments from the command line.

    manage.py experiment config --name N --base-url URL --model M [--api-key-env VAR] [--protocol AP|IF]
                                [--temperature T] [--max-tokens N] [--max-steps 50] [--question-timeout 900]
                                [--budget-tokens N] [--budget-cost X] [--price-prompt X] [--price-completion X]
                                [--tool-results tool|user] [--perception model|gt|classical]
                                [--max-concurrency 1..16]
    manage.py experiment start --config N[:VERSION] (--release V | --tasks QID,QID) [--repeats 1] [--agent A]
                               [--judge-config NAME] [--human-share 0..1]
    manage.py experiment status ID        (JSON: the experiment, its questions and accounting)
    manage.py experiment list
    manage.py experiment cancel ID
    manage.py experiment resume ID [--config N[:VERSION]]   (e.g. a version with a raised budget)

``--as-user NAME`` acts as that user (default: the first superuser). Without a Celery broker,
``start`` and ``resume`` run the experiment in this process to its end; with one they queue it on
the ``experiments`` queue and return.
"""
from __future__ import annotations

import json

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.core.management.base import BaseCommand, CommandError

from kernel.errors import DomainError
from kernel.vocabulary import PERCEPTION_MODES, SERVING_PERCEPTION_MODE


class Command(BaseCommand):
    help = "Configure, start, follow, cancel and resume experiments (agents run on a release by the studio)."

    def add_arguments(self, parser):
        parser.add_argument("--as-user", default=None, help="act as this user (default: the first superuser)")
        sub = parser.add_subparsers(dest="action", required=True)
        c = sub.add_parser("config", help="save a new version of an agent configuration")
        c.add_argument("--name", required=True)
        c.add_argument("--base-url", required=True)
        c.add_argument("--model", required=True)
        c.add_argument("--api-key-env", default="")
        c.add_argument("--protocol", default="AP", choices=["AP", "IF"])
        c.add_argument("--temperature", type=float, default=0.1)
        c.add_argument("--top-p", type=float, default=None)
        c.add_argument("--max-tokens", type=int, default=None)
        c.add_argument("--seed", type=int, default=0)
        c.add_argument("--tool-results", default="tool", choices=["tool", "user"],
                       help="tool answers as tool messages (OpenAI) or user messages (docs/experiments.md)")
        c.add_argument("--perception", default=SERVING_PERCEPTION_MODE, choices=list(PERCEPTION_MODES),
                       help="how the seg.* tools answer: model (the benchmark's protocol; its stub without a "
                            "checkpoint), gt (oracle perception, never ranked with it) or classical")
        c.add_argument("--max-steps", type=int, default=50)
        c.add_argument("--question-timeout", type=float, default=900.0)
        c.add_argument("--request-timeout", type=float, default=1200.0)
        c.add_argument("--max-concurrency", type=int, default=1,
                       help="questions in flight at once (1-16; more only where the endpoint serves requests "
                            "side by side)")
        c.add_argument("--budget-tokens", type=int, default=None)
        c.add_argument("--budget-cost", type=float, default=None)
        c.add_argument("--price-prompt", type=float, default=0.0, help="price per million prompt tokens")
        c.add_argument("--price-completion", type=float, default=0.0, help="price per million completion tokens")
        s = sub.add_parser("start", help="start an experiment")
        s.add_argument("--config", required=True, help="NAME (its newest version) or NAME:VERSION")
        s.add_argument("--release", default="")
        s.add_argument("--tasks", default="", help="comma-separated question ids of studio tasks (a pilot)")
        s.add_argument("--repeats", type=int, default=1)
        s.add_argument("--agent", default="")
        s.add_argument("--judge-config", default="", help="a judge configuration's name: the runs get a judge job at the end")
        s.add_argument("--human-share", type=float, default=0.0,
                       help="0 to 1: share of each run's records queued for human E1-E6 scoring at the end")
        for name in ("status", "cancel"):
            sub.add_parser(name).add_argument("id", type=int)
        r = sub.add_parser("resume", help="run what errored or never finished (answers received come from the cache)")
        r.add_argument("id", type=int)
        r.add_argument("--config", default="", help="go on with this version of the same configuration (NAME[:VERSION])")
        sub.add_parser("list")

    def _user(self, name):
        from django.contrib.auth import get_user_model  # a tenth of a second of imports: not for --help

        User = get_user_model()
        user = (User.objects.filter(username=name).first() if name
                else User.objects.filter(is_superuser=True).order_by("id").first())
        if user is None:
            raise CommandError("no user: pass --as-user NAME (a maintainer) or create a superuser")
        return user

    def _config(self, spec: str):
        """The configuration ``NAME`` (its newest version) or ``NAME:VERSION`` (an ExperimentConfig)."""
        from experiments.models import ExperimentConfig

        name, _, version = spec.partition(":")
        rows = ExperimentConfig.objects.filter(name=name)
        cfg = rows.filter(version=int(version)).first() if version.isdigit() else rows.order_by("-version").first()
        if cfg is None:
            raise CommandError(f"--config: no configuration {spec!r}")
        return cfg

    def _experiment(self, pk: int):
        """The Experiment ``pk``; CommandError when there is none."""
        from experiments.models import Experiment

        exp = Experiment.objects.filter(pk=pk).first()
        if exp is None:
            raise CommandError(f"no experiment {pk}")
        return exp

    def _status(self, exp) -> dict:
        from experiments import selectors

        exp = selectors.experiment(exp.pk)
        return {"id": exp.pk, "status": exp.status, "stop_reason": exp.stop_reason, "error": exp.error,
                "config": str(exp.config), "done": exp.done, "total": exp.total,
                "runs": sorted(r.pk for r in exp.runs.all()), "folder": exp.folder,
                "judge_config": exp.judge_config.name if exp.judge_config_id else None,
                "human_share": exp.human_share, "judge_job": exp.judge_job_id, "human_queued": exp.human_queued,
                "followup_note": exp.followup_note,
                "questions": list(exp.questions.order_by("repeat", "id").values(
                    "repeat", "question_id", "status", "steps", "prompt_tokens", "completion_tokens", "cost",
                    "seconds", "error")),
                "accounting": selectors.accounting(exp)}

    def handle(self, *args, **o):
        # imported here (and in the helpers above): ``manage.py experiment --help`` loads this module
        # before Django starts (manage.py)
        from experiments import selectors, services

        user = self._user(o["as_user"])
        if not settings.CELERY_BROKER_URL:
            settings.STUDIO_JUDGE_RUNNER = "inline"  # no worker: run it here, to its end
        try:
            action = o["action"]
            if action == "config":
                cfg = services.save_config(
                    user, name=o["name"], base_url=o["base_url"], model=o["model"], api_key_env=o["api_key_env"],
                    protocol=o["protocol"], temperature=o["temperature"], top_p=o["top_p"], max_tokens=o["max_tokens"],
                    seed=o["seed"], max_steps=o["max_steps"], question_timeout_s=o["question_timeout"],
                    request_timeout_s=o["request_timeout"], budget_tokens=o["budget_tokens"],
                    budget_cost=o["budget_cost"], price_prompt_per_m=o["price_prompt"],
                    price_completion_per_m=o["price_completion"], tool_results=o["tool_results"],
                    perception_mode=o["perception"], max_concurrency=o["max_concurrency"])
                self.stdout.write(f"configuration {cfg} (id {cfg.pk})")
            elif action == "start":
                tasks = [t for t in o["tasks"].split(",") if t.strip()]
                exp = services.start_experiment(user, self._config(o["config"]), release=o["release"] or None,
                                                question_ids=tasks, repeats=o["repeats"], agent_name=o["agent"],
                                                judge_config=o["judge_config"] or None, human_share=o["human_share"])
                self.stdout.write(json.dumps(self._status(exp), indent=2, default=str))
            elif action == "resume":
                exp = services.resume_experiment(user, self._experiment(o["id"]),
                                                 self._config(o["config"]) if o["config"] else None)
                self.stdout.write(json.dumps(self._status(exp), indent=2, default=str))
            elif action == "cancel":
                exp = services.cancel_experiment(user, self._experiment(o["id"]))
                self.stdout.write(f"experiment {exp.pk}: {exp.status}{' (cancel asked for)' if exp.cancel_requested else ''}")
            elif action == "status":
                self.stdout.write(json.dumps(self._status(self._experiment(o["id"])), indent=2, default=str))
            else:
                for exp in selectors.experiment_list()[:100]:
                    self.stdout.write(f"{exp.pk}\t{exp.status}\t{exp.done}/{exp.total}\t{exp.config}\t{exp.agent_name}")
        except (DomainError, PermissionDenied) as exc:
            raise CommandError(str(exc)) from None
