"""Layer pins and published files of a release (ReleaseLayerPin, ReleaseFile): what a release reads and ships never changes."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('annotation', '0008_layer_versions'),
        ('releases', '0001_initial'),
    ]

    operations = [
        migrations.CreateModel(
            name='ReleaseFile',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('path', models.TextField(help_text='relative POSIX path under the release folder')),
                ('sha256', models.CharField(max_length=64)),
                ('bytes', models.BigIntegerField()),
                ('release', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='files', to='releases.release')),
            ],
            options={
                'ordering': ['release_id', 'path'],
                'constraints': [models.UniqueConstraint(fields=('release', 'path'), name='one_row_per_release_file')],
            },
        ),
        migrations.CreateModel(
            name='ReleaseLayerPin',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('layer', models.ForeignKey(help_text="the version's layer (one pin per layer and release)", on_delete=django.db.models.deletion.PROTECT, related_name='+', to='annotation.layer')),
                ('release', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='layer_pins', to='releases.release')),
                ('version', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='release_pins', to='annotation.layerversion')),
            ],
            options={
                'ordering': ['release_id', 'layer_id'],
                'constraints': [models.UniqueConstraint(fields=('release', 'layer'), name='one_pin_per_layer_per_release')],
            },
        ),
    ]
