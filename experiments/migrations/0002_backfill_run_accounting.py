"""Store the accounting of the runs experiments scored before runs carried it
(``evaluation.AgentRun.prompt_tokens`` … ``seconds``, as ``experiments.services.score_experiment``
now stores them): the sums of each repeat's questions; cost left null when the configuration sets
no price. Runs that already have accounting are left as they are."""
from django.db import migrations
from django.db.models import Sum


def backfill(apps, schema_editor):
    Experiment = apps.get_model("experiments", "Experiment")
    AgentRun = apps.get_model("evaluation", "AgentRun")
    for exp in Experiment.objects.select_related("config").prefetch_related("runs"):
        priced = bool(exp.config.price_prompt_per_m or exp.config.price_completion_per_m)
        for run in exp.runs.all():
            tail = run.name.rsplit("-r", 1)[-1].split("_", 1)[0]  # <model>-r<k>_<AP|IF>
            if run.prompt_tokens is not None or not tail.isdigit():
                continue
            s = exp.questions.filter(repeat=int(tail)).aggregate(
                p=Sum("prompt_tokens"), c=Sum("completion_tokens"), cost=Sum("cost"), sec=Sum("seconds"))
            AgentRun.objects.filter(pk=run.pk).update(
                prompt_tokens=s["p"] or 0, completion_tokens=s["c"] or 0,
                cost=round(s["cost"] or 0.0, 6) if priced else None, seconds=round(s["sec"] or 0.0, 6))


class Migration(migrations.Migration):
    dependencies = [
        ("experiments", "0001_initial"),
        ("evaluation", "0021_run_accounting"),
    ]

    operations = [migrations.RunPython(backfill, migrations.RunPython.noop)]
