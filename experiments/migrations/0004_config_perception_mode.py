"""Experiment configurations name their perception mode (default ``model``, the benchmark's
protocol). The versions saved before this ran their agents with GT masks (``build_server``'s
default then), so they get ``gt``, and the runs their experiments scored, recorded as ``unknown``,
get ``gt`` too: oracle perception, never ranked with the benchmark's."""
from django.db import migrations, models

HELP = ("how the seg.* tools answer the agent: model (the benchmark's protocol), gt (oracle "
        "perception, never ranked with it) or classical; the scored runs record it")
CHOICES = [('model', 'model'), ('gt', 'gt'), ('classical', 'classical')]


def runs_were_oracle(apps, schema_editor):
    Experiment = apps.get_model("experiments", "Experiment")
    AgentRun = apps.get_model("evaluation", "AgentRun")
    run_ids = Experiment.runs.through.objects.values_list("agentrun_id", flat=True)
    AgentRun.objects.filter(pk__in=run_ids, perception_mode="unknown").update(perception_mode="gt")


class Migration(migrations.Migration):

    dependencies = [
        ('experiments', '0003_judge_and_human_share'),
    ]

    operations = [
        migrations.AddField(  # the versions saved so far: what they ran with
            model_name='experimentconfig',
            name='perception_mode',
            field=models.CharField(choices=CHOICES, default='gt', help_text=HELP, max_length=10),
        ),
        migrations.AlterField(  # from now on: the benchmark's protocol unless a version says otherwise
            model_name='experimentconfig',
            name='perception_mode',
            field=models.CharField(choices=CHOICES, default='model', help_text=HELP, max_length=10),
        ),
        migrations.RunPython(runs_were_oracle, migrations.RunPython.noop),
    ]
