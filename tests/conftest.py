"""Shared fixtures: an isolated data root per test, users per role, one Chromium per session."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

# Playwright's sync API runs an event loop; Django's ORM refuses to be called from one otherwise.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

pytest_plugins = ["conftest_celery", "conftest_llm", "support.judging", "support.joplin", "support.florence", "support.replay",
                  "support.populated", "support.seaweedfs"]

# Property tests draw the same examples on every run (a red CI is then reproducible, never luck);
# HYPOTHESIS_PROFILE=explore searches afresh each time.
from hypothesis import settings as _hypothesis_settings  # noqa: E402

_hypothesis_settings.register_profile("studio", derandomize=True, print_blob=True)
_hypothesis_settings.register_profile("explore", derandomize=False, print_blob=True)
_hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "studio"))

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("STUDIO_SHARED", REPO.parent / "shared"))
REALDATA = SHARED / "realdata"
SCORING_EXAMPLES = SHARED / "scoring-examples"

#: Why a test that reads the sample data is skipped on a clone without it (``make test`` runs there too).
SHARED_MISSING = "needs ../shared (STUDIO_SHARED): {}"


def requires_shared(path: Path = SHARED) -> pytest.MarkDecorator:
    """A ``skipif`` mark for tests that need ``path`` of the sample data (by default all of
    ``../shared``) before they run, e.g. a module's constants read at collection time: skipped
    with :func:`needs_shared`'s reason when the path is missing."""
    return pytest.mark.skipif(not Path(path).exists(), reason=SHARED_MISSING.format(path))


def needs_shared(path: Path) -> Path:
    """``path`` (a file or folder of the sample data in ``../shared``) if it exists; else the test
    that needs it is skipped, its reason naming the path. The one rule for the sample data: fixtures,
    support helpers and tests call it before they read ``../shared``."""
    path = Path(path)
    if not path.exists():
        pytest.skip(SHARED_MISSING.format(path))
    return path


def needs_demo_data() -> Path:
    """The real sample events ``manage.py demo`` and the xBD imports read (the settings'
    ``STUDIO_DEMO_DATA``, by default ``../shared/realdata``), through :func:`needs_shared`: without
    them the demo builds its SYNTHETIC event instead, which the real-data tests do not check."""
    from django.conf import settings

    return needs_shared(Path(settings.STUDIO_DEMO_DATA))


CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]


class OneIterationPBKDF2PasswordHasher:
    """Django's PBKDF2-SHA256 password hasher at one iteration, for the tests' users (Django's own
    advice for test speed; about 0.3 s a hash at the default 1,000,000 iterations on this machine
    kind, and the suite creates thousands of users). Its hashes keep the algorithm name
    ``pbkdf2_sha256`` and state their iteration count, so a ``manage.py``/gunicorn child on the
    real settings verifies them with Django's own hasher."""

    def __new__(cls):
        from django.contrib.auth.hashers import PBKDF2PasswordHasher

        hasher = PBKDF2PasswordHasher()
        hasher.iterations = 1
        return hasher


@pytest.fixture(scope="session", autouse=True)
def _fast_password_hashing():
    from django.conf import settings as django_settings
    from django.contrib.auth import hashers

    before = django_settings.PASSWORD_HASHERS
    django_settings.PASSWORD_HASHERS = ["conftest.OneIterationPBKDF2PasswordHasher"]
    hashers.get_hashers.cache_clear()
    hashers.get_hashers_by_algorithm.cache_clear()
    yield
    django_settings.PASSWORD_HASHERS = before
    hashers.get_hashers.cache_clear()
    hashers.get_hashers_by_algorithm.cache_clear()


@pytest.fixture(autouse=True)
def _empty_cache():
    """Cache keys are built from row ids, which a rolled-back test database hands out again."""
    from django.core.cache import cache

    cache.clear()
    yield
    cache.clear()


#: the judge egress the tests need: their OpenAI-compatible servers listen on loopback, and their
#: key variables are these (a deployment allows api.openai.com and STUDIO_JUDGE_API_KEY only).
#: In the environment too, for the ``manage.py`` children some tests start.
TEST_JUDGE_HOSTS = "127.0.0.1,localhost"
TEST_JUDGE_KEY_VARIABLES = "STUDIO_JUDGE_API_KEY,OPENAI_API_KEY,STUDIO_TEST_JUDGE_KEY,STUDIO_TEST_CRASH_JUDGE_KEY,MY_KEY,VLLM_KEY"
os.environ.setdefault("STUDIO_JUDGE_ALLOWED_HOSTS", TEST_JUDGE_HOSTS)
os.environ.setdefault("STUDIO_JUDGE_KEY_VARIABLES", TEST_JUDGE_KEY_VARIABLES)


@pytest.fixture(autouse=True)
def _judge_egress_for_test_servers(settings):
    settings.STUDIO_JUDGE_ALLOWED_HOSTS = TEST_JUDGE_HOSTS.split(",")
    settings.STUDIO_JUDGE_KEY_VARIABLES = TEST_JUDGE_KEY_VARIABLES.split(",")


@pytest.fixture(autouse=True)
def _replays_settle_before_teardown(request):
    """A browser test's last save can leave a replay running (in a real Celery worker, CI's
    PostgreSQL configuration, or in a live-server request thread) when the test ends; the live server's teardown then
    empties the tables under the worker's row locks (PostgreSQL answered with a deadlock). Tests
    with a live server wait, after their body and before that teardown, for their replays to end
    (at most 60 s). Depending on ``live_server`` here makes this teardown run before its own."""
    import time

    # the embedded default too: there a replay runs inside a live-server request thread, which can
    # outlive the test's last assertion (SQLite then failed the next writes)
    waits = "live_server" in request.fixturenames
    if waits:
        request.getfixturevalue("live_server")
    yield
    if not waits:
        return
    from replay.models import ReplayRun

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and ReplayRun.objects.filter(
            status__in=(ReplayRun.Status.QUEUED, ReplayRun.Status.RUNNING)).exists():
        time.sleep(0.2)


@pytest.fixture(autouse=True)
def _inline_leaderboard_bootstrap(settings):
    """The leaderboard's bootstrap after an import runs at once, not on a second thread that would
    share the test's database (tests of the background path set the runner back to "")."""
    settings.STUDIO_LEADERBOARD_BOOTSTRAP_RUNNER = "inline"


@pytest.fixture(autouse=True)
def _isolated_data_root(settings, tmp_path):
    """Every test writes layers and artifacts under its own temporary folder."""
    settings.STUDIO_DATA_ROOT = tmp_path / "data"
    settings.STUDIO_ARTIFACT_ROOT = tmp_path / "data" / "artifacts"
    settings.STUDIO_DATA_ROOT.mkdir(parents=True, exist_ok=True)


@pytest.fixture
def make_user(db):
    from studio.accounts import upsert_user

    def make(username: str, *roles: str, password: str = "pw-test-123"):
        return upsert_user(username, password, list(roles))

    return make


@pytest.fixture
def maintainer(make_user):
    return make_user("mia", "maintainer", "author", "reviewer", "scorer")


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=os.environ.get("STUDIO_CHROMIUM", "/usr/bin/chromium"),
                               headless=True, args=CHROMIUM_FLAGS)
        yield b
        b.close()


def sign_in(page, base_url: str, username: str, password: str) -> None:
    """Log in through the login form in a Playwright ``page`` and wait until the browser has left
    the login page (the POST's redirect). Waiting for the load state alone returned at once, on the
    login page still loaded; a ``goto`` right after then aborted the POST before its session cookie
    was set, and the next page was anonymous (test_review_guards timed out on ``.username`` once
    in four full runs, 2026-12-02)."""
    page.goto(f"{base_url}/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/accounts/login/" not in url)

class ChildDatabase:
    """The database a child process (``manage.py ...`` run by a test) uses to see this test's
    committed rows (tests marked ``django_db(transaction=True)``).

    SQLite: the test database is in memory, private to this process, so it is copied to a file
    with SQLite's online backup API; PostgreSQL: the test database itself, which a child can open.
    ``url`` goes into the child's ``DATABASE_URL``; ``rows(sql, *args)`` reads what the child wrote
    (``%s`` placeholders) from that same database.
    """

    def __init__(self, tmp_path: Path, name: str = "child.sqlite3"):
        from django.db import connection

        connection.ensure_connection()
        self.vendor = connection.vendor
        if self.vendor == "sqlite":
            import sqlite3

            self.file = tmp_path / name
            dst = sqlite3.connect(self.file)
            try:
                connection.connection.backup(dst)  # the test database, tables and rows
            finally:
                dst.close()
            self.url = f"sqlite:///{self.file}"
        elif self.vendor == "postgresql":
            from conftest_celery import _database_url

            self.url = _database_url(connection.settings_dict)
        else:
            raise NotImplementedError(f"no child database for {self.vendor}")

    def rows(self, sql: str, *args) -> list[tuple]:
        if self.vendor == "sqlite":
            import sqlite3

            con = sqlite3.connect(self.file)
            try:
                return con.execute(sql.replace("%s", "?"), args).fetchall()
            finally:
                con.close()
        from django.db import connection

        with connection.cursor() as cur:
            cur.execute(sql, args)
            return [tuple(r) for r in cur.fetchall()]


#: the migrations whose triggers make a published release immutable in the database (the release
#: row and its tasks; its layer pins and recorded files)
RELEASE_TRIGGER_MIGRATIONS = ("annotation.migrations.0003_release_immutability",
                              "releases.migrations.0002_release_layer_pins_and_files")


def drop_published_releases() -> None:
    """Delete every release, published ones too, for a transactional test's flush (which the
    database's immutability triggers refuse for a published release): lift each migration's
    triggers, delete the releases with their tasks, pins and files, put the triggers back."""
    import importlib

    from django.db import connection

    from releases.models import Release, ReleaseTask

    migrations = [importlib.import_module(m) for m in RELEASE_TRIGGER_MIGRATIONS]
    vendor = "SQLITE" if connection.vendor == "sqlite" else "POSTGRES"
    with connection.cursor() as cur:
        for mig in migrations:
            for sql in getattr(mig, f"{vendor}_BACKWARD"):
                cur.execute(sql)
        try:
            ReleaseTask.objects.all().delete()  # protected from a release's deletion
            Release.objects.all().delete()  # its layer pins and files cascade
        finally:
            for mig in migrations:
                for sql in getattr(mig, f"{vendor}_FORWARD"):
                    cur.execute(sql)
