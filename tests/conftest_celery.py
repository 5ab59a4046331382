"""Background jobs under test: eager by default, a real Celery worker for tests marked ``celery_worker``.

Loaded from ``tests/conftest.py`` through ``pytest_plugins``.

* Every test runs Celery tasks eagerly (in-process), even when ``CELERY_BROKER_URL`` is set: most
  tests create their data inside a test transaction that no worker process could see.
* A test marked ``@pytest.mark.celery_worker`` gets the :func:`celery_worker` fixture and a
  transactional database (``django_db(transaction=True)``: rows are committed, so another process
  sees them). With ``CELERY_BROKER_URL`` set, the fixture sends the test's tasks to a real worker:
  it turns ``task_always_eager`` off for the test's duration and points ``STUDIO_DATA_ROOT`` at the
  worker's data root. Without a broker the same test runs its tasks eagerly and asserts the same
  results (no skip).

A real worker must see the test's database and files. CI (``.ci/run``) arranges it: it sets
``STUDIO_TEST_DB_NAME`` (the test database's fixed name, see ``studio/settings.py``),
``STUDIO_DATA_ROOT``, ``STUDIO_QUEUE_PREFIX`` and ``CELERY_TASK_DEFAULT_QUEUE``, and starts
``celery -A studio worker -X <prefix>experiments`` with ``DATABASE_URL`` naming that test database
and the same data root and queues: it consumes every queue of the run but the experiments queue,
whose test starts a worker of its own. :meth:`CeleryWorker.start_own_worker` starts a further worker
that a test owns (and may kill) on one queue, optionally under a queue prefix of its own (queues no
other worker consumes); it derives the database URL from the test's live connection.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

import pytest

REPO = Path(__file__).resolve().parents[1]
TERMINAL = ("succeeded", "failed")


def broker_url() -> str:
    return os.environ.get("CELERY_BROKER_URL", "")


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "celery_worker: runs its background jobs on a real Celery worker when CELERY_BROKER_URL is set "
        "(eagerly otherwise); implies django_db(transaction=True)",
    )


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("celery_worker") and not item.get_closest_marker("django_db"):
            item.add_marker(pytest.mark.django_db(transaction=True))


@pytest.fixture(scope="session", autouse=True)
def _celery_eager_by_default():
    """Eager for the whole session, whatever the broker settings say (see the module docstring)."""
    from studio.celery import app

    before = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = before


@pytest.fixture(autouse=True)
def _celery_worker_marker(request):
    if request.node.get_closest_marker("celery_worker"):
        request.getfixturevalue("celery_worker")


class CeleryWorker:
    """What a ``celery_worker`` test needs: dispatch mode, polling, and workers of its own.

    ``real`` is True when tasks go to a real worker (a broker is set). ``dispatched`` lists the
    ``AsyncResult`` of every ``run_replay`` task sent during the test (``EagerResult`` when eager).
    """

    def __init__(self, real: bool, data_root: Path | None):
        self.real = real
        self.data_root = data_root
        self.dispatched: list = []
        self._own: list[subprocess.Popen] = []
        self._queues: list[str] = []
        self.logs: list[Path] = []

    @contextmanager
    def eager(self):
        """Run the tasks sent inside the block in-process (a reference run beside a worker run)."""
        from studio.celery import app

        before = app.conf.task_always_eager
        app.conf.task_always_eager = True
        try:
            yield
        finally:
            app.conf.task_always_eager = before

    def wait_replay(self, run, timeout: float = 120.0, until=None):
        """Poll the database until the replay run is finished (or ``until(run)`` holds); returns it.

        Fails the test after ``timeout`` seconds, quoting the tail of the worker logs it knows.
        """
        deadline = time.monotonic() + timeout
        while True:
            run.refresh_from_db()
            if (until(run) if until else run.status in TERMINAL):
                return run
            if time.monotonic() > deadline:
                pytest.fail(f"replay run {run.pk} still {run.status} ({run.steps_done}/{run.steps_total} steps) "
                            f"after {timeout:.0f} s{self._log_tail()}")
            time.sleep(0.02)

    def _log_tail(self) -> str:
        tails = []
        for log in self.logs:
            if log.exists():
                tails.append(f"\n--- {log}:\n" + "\n".join(log.read_text(errors="replace").splitlines()[-30:]))
        return "".join(tails)

    # --- a worker the test owns -------------------------------------------------------------------
    def start_own_worker(self, queue: str, concurrency: int = 1, timeout: float = 60.0, *,
                         env: dict | None = None, log_dir: Path | None = None,
                         queue_prefix: str | None = None) -> subprocess.Popen:
        """Start ``celery -A studio worker -Q queue`` on the test's database and data root; wait until
        it answers a ping. The fixture stops it (SIGTERM, then SIGKILL) at the end of the test and
        deletes the Redis keys of ``queue`` (and of every queue under ``queue_prefix``).

        ``env``: variables laid over that environment, e.g. another machine's own data root and the
        bucket (``support.seaweedfs.machine_env``); ``log_dir``: where its log ``<queue>.log`` goes
        (default beside the data root); ``queue_prefix``: the worker's ``STUDIO_QUEUE_PREFIX``
        (default: this process's)."""
        if not self.real:
            raise RuntimeError("start_own_worker needs CELERY_BROKER_URL")
        from django.db import connection

        env = {**os.environ, "DATABASE_URL": _database_url(connection.settings_dict),
               "STUDIO_DATA_ROOT": str(self.data_root), "STUDIO_ARTIFACT_ROOT": str(self.data_root / "artifacts"),
               **(env or {}), "CELERY_TASK_DEFAULT_QUEUE": queue}
        env.pop("STUDIO_TEST_DB_NAME", None)
        if queue_prefix is not None:
            env["STUDIO_QUEUE_PREFIX"] = queue_prefix
        hostname = f"{queue}@%h"
        log = (log_dir or self.data_root.parent) / f"{queue}.log"
        self.logs.append(log)
        with open(log, "wb") as fh:
            proc = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "studio", "worker", "--pool", "prefork",
                 "--concurrency", str(concurrency), "-Q", queue, "-n", hostname, "--without-gossip",
                 "--without-mingle", "--loglevel", "INFO"],
                cwd=REPO, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True,
            )
        self._own.append(proc)
        self._queues.append(queue)
        if queue_prefix:
            self._queues.append(queue_prefix)
        from studio.celery import app

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"worker for queue {queue} exited with {proc.returncode}{self._log_tail()}")
            replies = app.control.ping(destination=[hostname.replace("%h", _hostname())], timeout=0.5)
            if replies:
                return proc
        pytest.fail(f"worker for queue {queue} did not answer a ping in {timeout:.0f} s{self._log_tail()}")

    @staticmethod
    def pool_children(proc: subprocess.Popen) -> list[int]:
        """PIDs of the pool processes (the ones that execute tasks) of a prefork worker we started."""
        pids = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except OSError:  # the process ended while we looked
                continue
            if int(fields[1]) == proc.pid:  # field 4 of /proc/PID/stat: the parent's PID
                pids.append(int(stat.parent.name))
        return sorted(pids)

    def _stop_own(self) -> None:
        for queue in self._queues:  # the broker's bookkeeping of the private queues (Redis keys)
            _forget_queue(queue)
        for proc in self._own:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)  # its own session: the main process and its pool
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=15)


def _forget_queue(queue: str) -> None:
    """Delete a private test queue's keys from a Redis broker (nothing for other brokers)."""
    if not broker_url().startswith(("redis://", "rediss://")):
        return
    from studio.celery import app

    try:
        with app.connection_for_write() as conn:
            client = conn.default_channel.client
            for key in client.scan_iter(match=f"*{queue}*"):
                client.delete(key)
    except Exception:  # bookkeeping only: never fail a test over it
        pass


def _hostname() -> str:
    import socket

    return socket.gethostname()


def _database_url(sd: dict) -> str:
    """A dj-database-url URL for the live (test) database connection ``sd``."""
    engine = sd["ENGINE"]
    if engine.endswith("sqlite3"):
        name = str(sd["NAME"])
        if name == ":memory:" or "mode=memory" in name:
            raise RuntimeError("a real worker cannot see an in-memory SQLite test database: set STUDIO_TEST_DB_NAME "
                               "to a file path, or use PostgreSQL")
        return f"sqlite:///{name}"
    if "postgresql" in engine:
        auth = quote(sd.get("USER") or "")
        if sd.get("PASSWORD"):
            auth += ":" + quote(sd["PASSWORD"])
        host = sd.get("HOST") or "127.0.0.1"
        port = f":{sd['PORT']}" if sd.get("PORT") else ""
        return f"postgres://{auth + '@' if auth else ''}{host}{port}/{sd['NAME']}"
    raise RuntimeError(f"no worker URL for database engine {engine}")


@pytest.fixture
def celery_worker(request, settings, _isolated_data_root):
    """The test's background jobs on a real worker (broker set) or eagerly (no broker); see the module docstring."""
    from replay.jobs import run_replay
    from studio.celery import app

    real = bool(broker_url())
    data_root = None
    if real:
        root = os.environ.get("STUDIO_DATA_ROOT")
        if not root:
            pytest.fail("celery_worker tests with CELERY_BROKER_URL need STUDIO_DATA_ROOT: the data root the "
                        "worker uses (a scratch folder, shared by the test run and the worker)")
        data_root = Path(root).resolve()
        data_root.mkdir(parents=True, exist_ok=True)
        settings.STUDIO_DATA_ROOT = data_root
        settings.STUDIO_ARTIFACT_ROOT = data_root / "artifacts"
    worker = CeleryWorker(real, data_root)
    if os.environ.get("STUDIO_CI_WORKER_LOG"):
        worker.logs.append(Path(os.environ["STUDIO_CI_WORKER_LOG"]))

    original_delay = run_replay.delay

    def recording_delay(*args, **kwargs):
        result = original_delay(*args, **kwargs)
        worker.dispatched.append(result)
        return result

    run_replay.delay = recording_delay
    before = app.conf.task_always_eager
    app.conf.task_always_eager = not real
    try:
        yield worker
    finally:
        app.conf.task_always_eager = before
        run_replay.delay = original_delay
        worker._stop_own()
