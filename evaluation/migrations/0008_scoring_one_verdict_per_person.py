"""The constraints of one verdict per person per record, in their own migration: PostgreSQL cannot
create an index on a table with pending trigger events, which 0006's data step leaves behind."""
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("evaluation", "0007_scoring_verdict_revisions"),
    ]

    operations = [
        migrations.AddConstraint(
            model_name='verdict',
            constraint=models.UniqueConstraint(condition=models.Q(('is_final', False), ('source', 'human')), fields=('record', 'annotator'), name='one_human_verdict_per_person_record'),
        ),
        migrations.AddConstraint(
            model_name='verdictrevision',
            constraint=models.UniqueConstraint(fields=('verdict', 'number'), name='one_revision_number_per_verdict'),
        ),
    ]
