"""Scratch studios and buckets for the benchmarks.

:func:`scratch_studio`, for the tool server benchmarks (``bench/mcp_start.py``, ``bench/perception.py``):
a SQLite database and data root in a scratch folder, one xBD folder imported and one T1 task on it.
Both benchmarks time ``manage.py mcp_serve`` children, which read this database; the environment this
returns is theirs (and this process's, which it also sets up as a Django process).

:func:`scratch_bucket`, for the benchmarks that put the data root in an S3 bucket (``bench/scale.py``,
``bench/tiles.py --bucket``, ``bench/export.py --bucket``): the tests' own SeaweedFS server
(``tests/support/seaweedfs.py``, :func:`seaweedfs`), started in a scratch folder and stopped by its PID.

:func:`scratch_postgres` / :func:`drop_postgres`: a scratch database on the local PostgreSQL server
(``bench/replay.py --postgres``, ``bench/scale.py``, ``bench/experiments.py``).
"""
from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def scratch_studio(scratch: Path, xbd_folder: Path, *, question_id: str, sample_id: str,
                   content: Callable[[dict], dict], checkpoint_dir: str = "", db_url: str = "") -> dict[str, str]:
    """Set up a studio in ``scratch`` (``bench.sqlite3``, ``data/``) and return its environment.
    ``db_url``: another database (e.g. :func:`scratch_postgres`'s) instead of ``bench.sqlite3``.

    ``content(layers)`` gets ``{file name: Layer}`` of the imported ``xbd_folder`` and returns the task's
    content without ``input_data``, which is built from its ``input_layers`` entry (``{"pre_image":
    file name, "post_image": file name}``). The task is made once, keyed by ``question_id``; a second
    call on the same scratch folder reuses it. ``checkpoint_dir``: ``STUDIO_CHECKPOINT_DIR`` ("" for no
    network weights).
    """
    env = {
        "DATABASE_URL": db_url or f"sqlite:///{scratch / 'bench.sqlite3'}",
        "STUDIO_VAR_DIR": str(scratch),
        "STUDIO_DATA_ROOT": str(scratch / "data"),
        "STUDIO_ARTIFACT_ROOT": str(scratch / "data" / "artifacts"),
        "DJANGO_SETTINGS_MODULE": "studio.settings",
        "STUDIO_DEBUG": "0",
        "STUDIO_CHECKPOINT_DIR": checkpoint_dir,
        "PYTHONPATH": str(ROOT),
    }
    os.environ.update(env)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from annotation.models import Layer, Task
    from annotation.services.imports import import_xbd_folder
    from annotation.services.tasks import build_input_data, create_task
    from studio.accounts import upsert_user

    if not Task.objects.filter(question_id=question_id).exists():
        user = upsert_user("bench", "pw-bench-123", ["author", "maintainer"])
        event = import_xbd_folder(xbd_folder).event
        layers = {layer.file_name: layer for layer in Layer.objects.filter(event=event)}
        body = content(layers)
        inputs = body.pop("input_layers")
        body["input_data"] = build_input_data(event, {role: layers[name].pk for role, name in inputs.items()})
        task = create_task(user, event, dimension="t1", content=body, sample_id=sample_id)
        Task.objects.filter(pk=task.pk).update(question_id=question_id)
    from django.db import connections

    connections.close_all()
    return env


def scratch_postgres(name: str) -> str:
    """Create database ``name`` on the local PostgreSQL server (trust auth); returns its URL."""
    import psycopg

    with psycopg.connect("postgresql://postgres@127.0.0.1:5432/postgres", autocommit=True) as c:
        c.execute(f'DROP DATABASE IF EXISTS "{name}"')
        c.execute(f'CREATE DATABASE "{name}"')
    return f"postgres://postgres@127.0.0.1:5432/{name}"


def drop_postgres(name: str) -> None:
    import psycopg
    from django.db import connections

    connections.close_all()
    with psycopg.connect("postgresql://postgres@127.0.0.1:5432/postgres", autocommit=True) as c:
        c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def support(name: str):
    """``tests/support/<name>.py`` as a module, loaded from its file (``tests`` is no package) once:
    the tests' own servers (``seaweedfs``, ``llm_server``) started the same way for a benchmark."""
    key = f"bench_support_{name}"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, ROOT / "tests" / "support" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module
        spec.loader.exec_module(module)
    return sys.modules[key]


def seaweedfs():
    """``tests/support/seaweedfs.py`` (``start_seaweedfs``, ``stop_seaweedfs``, ``storage_env``)."""
    return support("seaweedfs")


@contextlib.contextmanager
def scratch_bucket(folder: Path, bucket: str) -> Iterator[tuple[object, dict[str, str]]]:
    """A SeaweedFS ``weed mini`` with its data in ``folder`` (on free ports of 127.0.0.1) and an
    empty bucket ``bucket`` on it: yields ``(server, env)``, ``env`` being the variables that make a
    studio process keep its files in that bucket (``storage_env``: ``STUDIO_STORAGE_URL=s3://<bucket>``
    and django-storages' ``AWS_*``). The server is stopped by its PID on the way out (and dies with
    this process if it is killed outright)."""
    weed = seaweedfs()
    server = weed.start_seaweedfs(Path(folder))
    try:
        server.client().create_bucket(Bucket=bucket)
        yield server, weed.storage_env(server, bucket)
    finally:
        weed.stop_seaweedfs(server)
