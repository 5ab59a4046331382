"""Layer pins and published files of a release (ReleaseLayerPin, ReleaseFile): what a release reads and ships never changes."""

import django.db.models.deletion
from django.db import migrations, models

MESSAGE = "release is published and cannot be changed (release pins and files immutability trigger)"
TABLES = ("releases_releaselayerpin", "releases_releasefile")
# as annotation/migrations/0003_release_immutability.py for annotation_releasetask: no INSERT, UPDATE
# or DELETE of a row of a published release (publishing writes the files while the release is a draft)
SQLITE_FORWARD = [sql for t in TABLES for sql in (
    f"""CREATE TRIGGER {t}_published_no_insert BEFORE INSERT ON {t}
    FOR EACH ROW WHEN (SELECT status FROM annotation_release WHERE id = NEW.release_id) = 'published'
    BEGIN SELECT RAISE(ABORT, '{MESSAGE}'); END;""",
    f"""CREATE TRIGGER {t}_published_no_update BEFORE UPDATE ON {t}
    FOR EACH ROW WHEN (SELECT status FROM annotation_release WHERE id = OLD.release_id) = 'published'
                   OR (SELECT status FROM annotation_release WHERE id = NEW.release_id) = 'published'
    BEGIN SELECT RAISE(ABORT, '{MESSAGE}'); END;""",
    f"""CREATE TRIGGER {t}_published_no_delete BEFORE DELETE ON {t}
    FOR EACH ROW WHEN (SELECT status FROM annotation_release WHERE id = OLD.release_id) = 'published'
    BEGIN SELECT RAISE(ABORT, '{MESSAGE}'); END;""")]
SQLITE_BACKWARD = [f"DROP TRIGGER IF EXISTS {t}_published_no_{op};" for t in TABLES for op in ("insert", "update", "delete")]
POSTGRES_FORWARD = [
    f"""CREATE OR REPLACE FUNCTION releases_pinned_row_immutable() RETURNS trigger AS $$
    BEGIN
        IF TG_OP IN ('UPDATE', 'DELETE') AND EXISTS (
            SELECT 1 FROM annotation_release WHERE id = OLD.release_id AND status = 'published') THEN
            RAISE EXCEPTION '{MESSAGE}: row %', OLD.id USING ERRCODE = '23000';
        END IF;
        IF TG_OP IN ('UPDATE', 'INSERT') AND EXISTS (
            SELECT 1 FROM annotation_release WHERE id = NEW.release_id AND status = 'published') THEN
            RAISE EXCEPTION '{MESSAGE}: new row of release %', NEW.release_id USING ERRCODE = '23000';
        END IF;
        IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
        RETURN NEW;
    END;
    $$ LANGUAGE plpgsql;""",
    *(f"""CREATE TRIGGER {t}_immutable BEFORE INSERT OR UPDATE OR DELETE ON {t}
    FOR EACH ROW EXECUTE FUNCTION releases_pinned_row_immutable();""" for t in TABLES),
]
POSTGRES_BACKWARD = [*(f"DROP TRIGGER IF EXISTS {t}_immutable ON {t};" for t in TABLES),
                     "DROP FUNCTION IF EXISTS releases_pinned_row_immutable();"]


def _run(statements_by_vendor):
    def run(apps, schema_editor):
        statements = statements_by_vendor.get(schema_editor.connection.vendor)
        if statements is None:  # another database: the services still refuse the edits
            return
        for sql in statements:
            schema_editor.execute(sql, params=None)
    return run


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
        migrations.RunPython(
            _run({"sqlite": SQLITE_FORWARD, "postgresql": POSTGRES_FORWARD}),
            _run({"sqlite": SQLITE_BACKWARD, "postgresql": POSTGRES_BACKWARD}),
        ),
    ]
