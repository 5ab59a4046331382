"""Blind scoring: an adjudicated verdict is the reference, never a rater. Before this, a
re-adjudication set the earlier adjudicated verdict's ``is_final`` to false, which turned it into
its reviewer's person verdict (counted among agreement's raters). Restore ``is_final`` on every
verdict an adjudication recorded; ``evaluation.selectors.agreement_rows`` takes the newest one of a
record as its reference."""
from django.db import migrations


def restore(apps, schema_editor):
    Adjudication = apps.get_model("evaluation", "Adjudication")
    Verdict = apps.get_model("evaluation", "Verdict")
    ids = Adjudication.objects.values_list("final_verdict_id", flat=True)
    Verdict.objects.filter(pk__in=ids, is_final=False).update(is_final=True)


class Migration(migrations.Migration):

    dependencies = [
        ("evaluation", "0017_gold_set_of_runs"),
    ]

    operations = [migrations.RunPython(restore, migrations.RunPython.noop)]
