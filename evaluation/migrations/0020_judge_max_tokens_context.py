"""Judge configurations cap the answer (``max_tokens``, sent with every request), say their
endpoint's context size (``context_tokens``; prompts are trimmed to fit) and carry a ``version``
that names their verdicts (and is kept on each call); ``json_mode`` gains ``json_object_schema`` (llama.cpp's JSON mode with
its schema). A judge call records what was trimmed. Existing configurations get the defaults
(1024, 32768, version 1)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('evaluation', '0019_perception_mode_of_runs'),
    ]

    operations = [
        migrations.AddField(
            model_name='judgecall',
            name='config_version',
            field=models.IntegerField(default=1, help_text="the configuration's version when the call was made"),
        ),
        migrations.AddField(
            model_name='judgecall',
            name='trimmed',
            field=models.JSONField(blank=True, default=dict, help_text='what was cut from the prompt to fit the context: max_obs_chars, chars_removed, estimated tokens, budget'),
        ),
        migrations.AddField(
            model_name='judgeconfig',
            name='context_tokens',
            field=models.IntegerField(default=32768, help_text="the endpoint's context size in tokens; prompts are trimmed to fit (0: not checked)"),
        ),
        migrations.AddField(
            model_name='judgeconfig',
            name='max_tokens',
            field=models.IntegerField(default=1024, help_text="cap on the judge's answer, sent as max_tokens"),
        ),
        migrations.AddField(
            model_name='judgeconfig',
            name='version',
            field=models.IntegerField(default=1, help_text='bumped when a saved change alters what the judge is sent'),
        ),
        migrations.AlterField(
            model_name='judgeconfig',
            name='json_mode',
            field=models.CharField(default='json_object', help_text='json_schema, json_object, json_object_schema (llama.cpp) or none', max_length=20),
        ),
    ]
