"""manage.py make_variants --task QID --kind extraneous|broken|unsolvable [options] [--as-user NAME] [--json]

Makes a robustness variant of an approved or released task (``annotation.services.variants``):

* ``--kind extraneous [--n 4] [--seed 0]``: n_e ∈ {2, 4, 6, 8, 10} inert distractor tools;
* ``--kind broken --step J [--error TEXT] [--alternative NAME]``: gold step J (0-based) fails,
  an alternative tool computes what it computes;
* ``--kind unsolvable [--strategy tool_removal|information_missing|visual_inaccessible|contradictory_constraints]
  [--step J] [--constraint TEXT]``: the right answer is a refusal.

Prints the variant made (or the identical one made before): question id, kind, parameters, base
task and revision; with ``--json`` as one JSON object.
"""
from __future__ import annotations

import json

from django.core.exceptions import PermissionDenied
from django.core.management.base import BaseCommand, CommandError

from annotation.variants import EXTRANEOUS_LEVELS, KINDS, STRATEGIES


class Command(BaseCommand):
    help = "Make a robustness variant (extraneous tools, a broken tool, an unsolvable task) of an approved task."

    def add_arguments(self, parser):
        parser.add_argument("--task", required=True, help="question id of the base task")
        parser.add_argument("--kind", required=True, choices=KINDS)
        parser.add_argument("--n", type=int, default=4, choices=EXTRANEOUS_LEVELS, help="distractors (extraneous)")
        parser.add_argument("--seed", type=int, default=0, help="seed of the distractor draw (extraneous)")
        parser.add_argument("--step", type=int, default=None, help="0-based gold step (broken; unsolvable tool_removal)")
        parser.add_argument("--error", default="", help="the error the broken tool returns (broken)")
        parser.add_argument("--alternative", default="", help="name of the alternative tool (broken)")
        parser.add_argument("--strategy", default="tool_removal", choices=STRATEGIES, help="how the task is made unsolvable")
        parser.add_argument("--constraint", default="", help="the contradictory constraint (unsolvable)")
        parser.add_argument("--as-user", default=None, help="author of the variant (default: a superuser)")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, **o):
        # imported here: ``manage.py make_variants --help`` loads this module before Django starts
        # (manage.py; django.contrib.auth too, a tenth of a second of imports)
        from django.contrib.auth import get_user_model

        from annotation.api_variants import VariantIn, variant_params
        from annotation.models import Task
        from annotation.services.variants import VariantError, create_variant

        base = Task.objects.filter(question_id=o["task"]).first()
        if base is None:
            raise CommandError(f"--task: no task '{o['task']}'")
        User = get_user_model()
        user = (User.objects.filter(username=o["as_user"]).first() if o["as_user"]
                else User.objects.filter(is_superuser=True).order_by("id").first())
        if user is None:
            raise CommandError("no author: pass --as-user NAME (an author or maintainer) or create a superuser")
        # the options go through the serializer of the task page's endpoint (POST /api/tasks/<id>/variants/)
        data = VariantIn(data={k: o[k] for k in ("kind", "n", "seed", "step", "error", "alternative", "strategy",
                                                 "constraint")})
        if not data.is_valid():
            field, problems = next(iter(data.errors.items()))
            raise CommandError(f"--{field}: {' '.join(str(p) for p in problems)}")
        try:
            variant, created = create_variant(user, base, o["kind"], **variant_params(data.validated_data))
        except VariantError as exc:
            raise CommandError(f"--kind {o['kind']}: {exc}") from exc
        except PermissionDenied as exc:
            raise CommandError(f"--as-user {user.username}: may not create tasks ({exc})") from exc
        out = {"question_id": variant.task.question_id, "kind": variant.kind, "params": variant.params,
               "base_task": base.question_id, "base_revision": variant.base_revision.number, "created": created,
               "tools": {"removed": variant.tools.get("removed", []),
                         "distractors": [d["name"] for d in variant.tools.get("distractors", [])],
                         "broken": variant.tools.get("broken")}}
        if o["json"]:
            self.stdout.write(json.dumps(out, ensure_ascii=False))
        else:
            verb = "created" if created else "exists"
            self.stdout.write(f"{verb}: {out['question_id']} ({out['kind']} {json.dumps(out['params'])}) "
                              f"from {out['base_task']} revision {out['base_revision']}")
