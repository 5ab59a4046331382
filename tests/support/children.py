"""Child processes of the crash-safety tests: a ``manage.py`` child on a :class:`conftest.ChildDatabase`
(the test's committed rows) and the test's data root, so a test can kill it mid-job and look at
what the database kept."""
from __future__ import annotations

import os
import sys
from pathlib import Path

from conftest import REPO, ChildDatabase
from django.conf import settings


def child_env(db: ChildDatabase, tmp_path: Path) -> dict:
    """The environment of a ``manage.py`` child that works on ``db`` and this test's data root, with
    this test's storage (``STUDIO_STORAGE_URL`` and the ``AWS_*`` settings as the test has them: a
    bucket, or none where the test turned CI's off)."""
    return {**os.environ, "DATABASE_URL": db.url, "STUDIO_DATA_ROOT": str(settings.STUDIO_DATA_ROOT),
            "STUDIO_ARTIFACT_ROOT": str(settings.STUDIO_ARTIFACT_ROOT), "STUDIO_VAR_DIR": str(tmp_path / "var"),
            "DJANGO_SETTINGS_MODULE": "studio.settings", "PYTHONPATH": str(REPO), "CELERY_BROKER_URL": "",
            **storage_env()}


def storage_env() -> dict[str, str]:
    """The environment variables of this test's storage: ``STORAGE_SETTINGS`` as its settings have
    them now ("" for unset), for a child process that must keep its files where this one does."""
    return {name: str(getattr(settings, name, None) or "") for name in STORAGE_SETTINGS}


#: the settings that say where the studio keeps its files (``studio/settings.py``, read from the environment)
STORAGE_SETTINGS = ("STUDIO_STORAGE_URL", "AWS_S3_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                    "AWS_S3_REGION_NAME", "AWS_S3_ADDRESSING_STYLE")


def manage(*args: str, env: dict) -> list[str]:
    """The command line of ``manage.py *args`` run by this interpreter. ``env`` (the child's, from
    :func:`child_env`) is not read here: the caller passes it to ``subprocess`` as well."""
    return [sys.executable, str(REPO / "manage.py"), *args]
