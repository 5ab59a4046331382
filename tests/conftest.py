"""Shared fixtures: an isolated data root per test, users per role, one Chromium per session."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

# Playwright's sync API runs an event loop; Django's ORM refuses to be called from one otherwise.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

pytest_plugins = ["conftest_celery"]

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

CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]


@pytest.fixture(autouse=True)
def _empty_cache():
    """Cache keys are built from row ids, which a rolled-back test database hands out again."""
    from django.core.cache import cache

    cache.clear()
    yield
    cache.clear()


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
