"""``AgentRun.release`` points at ``releases.Release`` (moved from ``annotation``, issue 19).

State only: the column and its foreign key to ``annotation_release`` are unchanged.
"""
import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('evaluation', '0010_leaderboard_aggregates'),
        ('releases', '0001_initial'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name='agentrun',
                    name='release',
                    field=models.ForeignKey(blank=True, help_text="the release version the run was scored on (null: the studio's current tasks)", null=True, on_delete=django.db.models.deletion.PROTECT, related_name='runs', to='releases.release'),
                ),
            ],
            database_operations=[],
        ),
    ]
