"""Layer versions (LayerVersion): each content a layer had; a release pins one (releases 0002)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('annotation', '0007_release_models_moved'),
    ]

    operations = [
        migrations.CreateModel(
            name='LayerVersion',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('number', models.IntegerField()),
                ('sha256', models.CharField(help_text="content digest of the version's files", max_length=64)),
                ('snapshot', models.JSONField(default=dict, help_text="the Layer row's fields at this version")),
                ('files', models.JSONField(blank=True, default=list, help_text='data-root-relative files kept for this version')),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('layer', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='versions', to='annotation.layer')),
            ],
            options={
                'ordering': ['layer_id', 'number'],
                'constraints': [models.UniqueConstraint(fields=('layer', 'number'), name='unique_layer_version_number')],
            },
        ),
    ]
