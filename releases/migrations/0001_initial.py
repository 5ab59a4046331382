"""Release and ReleaseTask move here from ``annotation`` without moving data (issue 19).

State only: the tables ``annotation_release`` and ``annotation_releasetask`` (named by
``db_table``), their rows, constraints and the immutability triggers of
``annotation/migrations/0003_release_immutability.py`` stay as they are. The models leave
``annotation``'s state in ``annotation/0007_release_models_moved``, after
``evaluation/0011_agentrun_release_moved`` points ``AgentRun.release`` here.
"""
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('annotation', '0006_layer_audit'),
        ('replay', '0003_replay_cache_cas'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='Release',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('version', models.CharField(help_text='semantic version, e.g. 1.2.0', max_length=40, unique=True)),
                        ('status', models.CharField(choices=[('draft', 'Draft'), ('published', 'Published')], default='draft', max_length=10)),
                        ('changelog', models.TextField(blank=True)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                        ('published_at', models.DateTimeField(blank=True, null=True)),
                        ('manifest_sha256', models.CharField(blank=True, max_length=64)),
                        ('created_by', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                    ],
                    options={
                        'db_table': 'annotation_release',
                        'ordering': ['-id'],
                    },
                ),
                migrations.CreateModel(
                    name='ReleaseTask',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('question_id', models.CharField(max_length=240)),
                        ('release', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='items', to='releases.release')),
                        ('replay', models.ForeignKey(null=True, on_delete=django.db.models.deletion.PROTECT, related_name='+', to='replay.replayrun')),
                        ('revision', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='+', to='annotation.taskrevision')),
                        ('task', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='release_items', to='annotation.task')),
                    ],
                    options={
                        'db_table': 'annotation_releasetask',
                        'ordering': ['release_id', 'question_id'],
                        'constraints': [models.UniqueConstraint(fields=('release', 'task'), name='task_once_per_release')],
                    },
                ),
            ],
            database_operations=[],
        ),
    ]
