"""Settings of the studio, read from environment variables with embedded defaults.

| variable | default | meaning |
| --- | --- | --- |
| DATABASE_URL | sqlite:///<repo>/var/studio.sqlite3 | any dj-database-url URL (postgres://…) |
| CELERY_BROKER_URL | "" (tasks run in-process) | e.g. redis://127.0.0.1:6379/0 |
| CELERY_RESULT_BACKEND | same as broker, or none | |
| STUDIO_DATA_ROOT | <repo>/var/data | imported layers and replay artifacts |
| STUDIO_DEMO_DATA | <repo>/../shared/realdata | the real sample data the demo reads |
| STUDIO_SECRET_KEY | a development key | set it in production |
| STUDIO_DEBUG | 1 | 0 in production |
| CELERY_TASK_DEFAULT_QUEUE | celery | queue name (several studios or CI runs on one broker) |
| STUDIO_CACHE_URL | unset (per-process memory) | redis://… to share the page cache (rendered leaderboard plots) between processes |
| STUDIO_TEST_DB_NAME | unset (test_<NAME>) | fixed test database name, for a worker beside the tests |
| STUDIO_TILE_CACHE_BYTES | 67108864 (64 MiB) | rendered map tiles kept per server process; 0 turns the cache off |
"""
from __future__ import annotations

import os
from pathlib import Path

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("STUDIO_VAR_DIR", BASE_DIR / "var"))

SECRET_KEY = os.environ.get("STUDIO_SECRET_KEY", "dev-only-insecure-key-change-me-in-production-0123456789")
DEBUG = os.environ.get("STUDIO_DEBUG", "1") == "1"
ALLOWED_HOSTS = [h for h in os.environ.get("STUDIO_ALLOWED_HOSTS", "127.0.0.1,localhost,testserver").split(",") if h]

INSTALLED_APPS = [
    "django.contrib.admin.apps.SimpleAdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI's files, served by the studio (no CDN: /api/docs/ works offline)
    "leaflet",
    "annotation",
    "replay",
    "evaluation",
    "frontend",
]

MIDDLEWARE = [
    "studio.middleware.RejectNulMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "studio.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "frontend" / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]
WSGI_APPLICATION = "studio.wsgi.application"

VAR_DIR.mkdir(parents=True, exist_ok=True)
DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL", f"sqlite:///{VAR_DIR / 'studio.sqlite3'}"), conn_max_age=0
    )
}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    DATABASES["default"].setdefault("OPTIONS", {})["timeout"] = 20
# The test database's name (pytest-django), fixed so that a Celery worker started beside the test run
# can be pointed at it (CI: DATABASE_URL=<server>/$STUDIO_TEST_DB_NAME for the worker). Unset: Django's
# default (test_<NAME>; in-memory for SQLite).
if os.environ.get("STUDIO_TEST_DB_NAME"):
    DATABASES["default"]["TEST"] = {"NAME": os.environ["STUDIO_TEST_DB_NAME"]}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# The cache holds derived pages that are expensive to build (the leaderboard), keyed by a fingerprint
# of their inputs, so a stale entry is never served. Per process by default; Redis to share it.
if os.environ.get("STUDIO_CACHE_URL"):
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                          "LOCATION": os.environ["STUDIO_CACHE_URL"]}}
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "studio"}}

AUTH_PASSWORD_VALIDATORS = []
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "frontend" / "static"]
STATIC_ROOT = BASE_DIR / "staticfiles"

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.BasicAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Disaster-response benchmark studio API",
    "DESCRIPTION": "Events, layers, tasks, replays, agent runs and verdicts.",
    "VERSION": "0.1.0",
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# Offline map: no base map from the internet; the studio's own tiles are the layers.
LEAFLET_CONFIG = {"TILES": [], "NO_GLOBALS": False, "RESET_VIEW": False}

# Studio paths.
STUDIO_DATA_ROOT = Path(os.environ.get("STUDIO_DATA_ROOT", VAR_DIR / "data")).resolve()
STUDIO_DEMO_DATA = Path(os.environ.get("STUDIO_DEMO_DATA", BASE_DIR.parent / "shared" / "realdata")).resolve()
STUDIO_ARTIFACT_ROOT = Path(os.environ.get("STUDIO_ARTIFACT_ROOT", STUDIO_DATA_ROOT / "artifacts")).resolve()
STUDIO_CHECKPOINT_DIR = os.environ.get("STUDIO_CHECKPOINT_DIR", "")
# Rendered map tiles kept per server process (an LRU bounded by the PNGs' total bytes; 0: no cache).
STUDIO_TILE_CACHE_BYTES = int(os.environ.get("STUDIO_TILE_CACHE_BYTES", str(64 * 2**20)))

# Celery: with no broker configured, tasks run in-process (eager), so the embedded defaults need no server.
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "")
# Result backend: the broker when it can hold results (Redis), else none. The studio never waits on a
# Celery result (a replay's state lives in its ReplayRun row); results expire after a day.
CELERY_RESULT_BACKEND = os.environ.get(
    "CELERY_RESULT_BACKEND", CELERY_BROKER_URL if CELERY_BROKER_URL.startswith(("redis://", "rediss://")) else None
) or None
CELERY_RESULT_EXPIRES = 24 * 3600
# The queue tasks are sent to and a worker consumes by default: separate studios (or CI runs) may share
# one broker with different queue names.
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("CELERY_TASK_DEFAULT_QUEUE", "celery")
CELERY_TASK_ALWAYS_EAGER = not CELERY_BROKER_URL
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("STUDIO_LOG_LEVEL", "WARNING")},
}
