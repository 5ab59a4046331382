"""Experiment configurations say how many questions run at once (``max_concurrency``, 1–16):
the versions saved before this ran one at a time, which the default 1 keeps."""
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('experiments', '0004_config_perception_mode'),
    ]

    operations = [
        migrations.AddField(
            model_name='experimentconfig',
            name='max_concurrency',
            field=models.PositiveSmallIntegerField(
                default=1, help_text='questions in flight at once in the job (1-16; threads of the worker)'),
        ),
    ]
