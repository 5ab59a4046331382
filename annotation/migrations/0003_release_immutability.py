"""Published releases never change, enforced by the database itself.

Triggers refuse UPDATE and DELETE of an ``annotation_release`` row whose status is ``published``,
and INSERT, UPDATE and DELETE of ``annotation_releasetask`` rows that belong to a published
release. A draft release stays editable; the UPDATE that publishes it (draft → published) passes
because the trigger looks at the row's old status. SQLite raises ``RAISE(ABORT, …)`` and
PostgreSQL ``RAISE EXCEPTION … USING ERRCODE = '23000'`` (integrity_constraint_violation), so
Django raises ``django.db.IntegrityError`` on both. The services refuse the same edits earlier,
with a clearer message (``annotation.services.releases.ReleaseImmutableError``).
"""
from django.db import migrations

MESSAGE = "release is published and cannot be changed (annotation_release immutability trigger)"

SQLITE_FORWARD = [
    f"""CREATE TRIGGER annotation_release_published_no_update BEFORE UPDATE ON annotation_release
    FOR EACH ROW WHEN OLD.status = 'published'
    BEGIN SELECT RAISE(ABORT, '{MESSAGE}'); END;""",
    f"""CREATE TRIGGER annotation_release_published_no_delete BEFORE DELETE ON annotation_release
    FOR EACH ROW WHEN OLD.status = 'published'
    BEGIN SELECT RAISE(ABORT, '{MESSAGE}'); END;""",
    f"""CREATE TRIGGER annotation_releasetask_published_no_insert BEFORE INSERT ON annotation_releasetask
    FOR EACH ROW WHEN (SELECT status FROM annotation_release WHERE id = NEW.release_id) = 'published'
    BEGIN SELECT RAISE(ABORT, '{MESSAGE}'); END;""",
    f"""CREATE TRIGGER annotation_releasetask_published_no_update BEFORE UPDATE ON annotation_releasetask
    FOR EACH ROW WHEN (SELECT status FROM annotation_release WHERE id = OLD.release_id) = 'published'
                   OR (SELECT status FROM annotation_release WHERE id = NEW.release_id) = 'published'
    BEGIN SELECT RAISE(ABORT, '{MESSAGE}'); END;""",
    f"""CREATE TRIGGER annotation_releasetask_published_no_delete BEFORE DELETE ON annotation_releasetask
    FOR EACH ROW WHEN (SELECT status FROM annotation_release WHERE id = OLD.release_id) = 'published'
    BEGIN SELECT RAISE(ABORT, '{MESSAGE}'); END;""",
]
SQLITE_BACKWARD = [
    "DROP TRIGGER IF EXISTS annotation_release_published_no_update;",
    "DROP TRIGGER IF EXISTS annotation_release_published_no_delete;",
    "DROP TRIGGER IF EXISTS annotation_releasetask_published_no_insert;",
    "DROP TRIGGER IF EXISTS annotation_releasetask_published_no_update;",
    "DROP TRIGGER IF EXISTS annotation_releasetask_published_no_delete;",
]

POSTGRES_FORWARD = [
    f"""CREATE OR REPLACE FUNCTION annotation_release_immutable() RETURNS trigger AS $$
    BEGIN
        IF OLD.status = 'published' THEN
            RAISE EXCEPTION '{MESSAGE}: %', OLD.version USING ERRCODE = '23000';
        END IF;
        IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
        RETURN NEW;
    END;
    $$ LANGUAGE plpgsql;""",
    f"""CREATE OR REPLACE FUNCTION annotation_releasetask_immutable() RETURNS trigger AS $$
    BEGIN
        IF TG_OP IN ('UPDATE', 'DELETE') AND EXISTS (
            SELECT 1 FROM annotation_release WHERE id = OLD.release_id AND status = 'published') THEN
            RAISE EXCEPTION '{MESSAGE}: item %', OLD.id USING ERRCODE = '23000';
        END IF;
        IF TG_OP IN ('UPDATE', 'INSERT') AND EXISTS (
            SELECT 1 FROM annotation_release WHERE id = NEW.release_id AND status = 'published') THEN
            RAISE EXCEPTION '{MESSAGE}: new item of release %', NEW.release_id USING ERRCODE = '23000';
        END IF;
        IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
        RETURN NEW;
    END;
    $$ LANGUAGE plpgsql;""",
    """CREATE TRIGGER annotation_release_immutable BEFORE UPDATE OR DELETE ON annotation_release
    FOR EACH ROW EXECUTE FUNCTION annotation_release_immutable();""",
    """CREATE TRIGGER annotation_releasetask_immutable BEFORE INSERT OR UPDATE OR DELETE ON annotation_releasetask
    FOR EACH ROW EXECUTE FUNCTION annotation_releasetask_immutable();""",
]
POSTGRES_BACKWARD = [
    "DROP TRIGGER IF EXISTS annotation_releasetask_immutable ON annotation_releasetask;",
    "DROP TRIGGER IF EXISTS annotation_release_immutable ON annotation_release;",
    "DROP FUNCTION IF EXISTS annotation_releasetask_immutable();",
    "DROP FUNCTION IF EXISTS annotation_release_immutable();",
]


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
        ("annotation", "0002_auditevent_release_taskcomment_qcacknowledgement_and_more"),
    ]

    operations = [
        migrations.RunPython(
            _run({"sqlite": SQLITE_FORWARD, "postgresql": POSTGRES_FORWARD}),
            _run({"sqlite": SQLITE_BACKWARD, "postgresql": POSTGRES_BACKWARD}),
        ),
    ]
