"""Release and ReleaseTask leave ``annotation``'s state: they live in the ``releases`` app now
(``releases/migrations/0001_initial.py``, issue 19). State only: no table is dropped."""
from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('annotation', '0006_layer_audit'),
        ('releases', '0001_initial'),
        ('evaluation', '0011_agentrun_release_moved'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(name='ReleaseTask'),
                migrations.DeleteModel(name='Release'),
            ],
            database_operations=[],
        ),
    ]
