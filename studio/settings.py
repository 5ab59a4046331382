"""Settings of the studio, read from environment variables with embedded defaults.

| variable | default | meaning |
| --- | --- | --- |
| DATABASE_URL | sqlite:///<repo>/var/studio.sqlite3 | any dj-database-url URL (postgres://…) |
| CELERY_BROKER_URL | "" (tasks run in-process) | e.g. redis://127.0.0.1:6379/0 |
| CELERY_RESULT_BACKEND | same as broker, or none | |
| STUDIO_DATA_ROOT | <repo>/var/data | imported layers and replay artifacts |
| STUDIO_STORAGE_URL | "" (files under STUDIO_DATA_ROOT) | s3://BUCKET[/PREFIX]: release exports (zip and job state), uploaded run zips, unpacked run folders, imported layers and replay artifacts live in that bucket (studio/storage.py) |
| AWS_S3_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY | unset (AWS, boto3's credential chain) | django-storages' own settings: the S3 API and its keys |
| AWS_S3_REGION_NAME, AWS_S3_ADDRESSING_STYLE, AWS_S3_SIGNATURE_VERSION | unset, unset, s3v4 | region, "path" or "virtual" addressing (SeaweedFS, MinIO: us-east-1, path) |
| STUDIO_STORAGE_LINK_TTL_S | 300 | seconds a presigned download link of the bucket stays valid |
| STUDIO_DEMO_DATA | <repo>/../shared/realdata | the real sample data the demo reads |
| STUDIO_SECRET_KEY | a development key | set it in production |
| STUDIO_DEBUG | 0 | 1 turns Django's debug pages on (development only: they show settings) |
| CELERY_TASK_DEFAULT_QUEUE | celery | queue name (several studios or CI runs on one broker) |
| STUDIO_DB_CONN_MAX_AGE | 0 (a connection per request) | seconds a server thread keeps its database connection (docs/deployment.md: 600) |
| STUDIO_CACHE_URL | unset (per-process memory) | redis://… to share the page cache (rendered leaderboard plots) between processes |
| STUDIO_TEST_DB_NAME | unset (test_<NAME>) | fixed test database name, for a worker beside the tests |
| STUDIO_APP_SET | "" (every app) | "tool-server": only the apps a tool server reads (`TOOL_SERVER_APPS`), no Celery app; `manage.py mcp_serve` sets it for itself |
| STUDIO_LEADERBOARD_BOOTSTRAP_RUNNER | "" (a thread, or a Celery worker with a broker) | "inline" computes the leaderboard's bootstrap at once (tests) |
| STUDIO_TILE_CACHE_BYTES | 67108864 (64 MiB) | rendered map tiles kept per server process; 0 turns the cache off |
| STUDIO_JUDGE_RUNNER | celery with a broker, else thread | how background jobs (judge jobs, run zip imports) run: celery, thread (background, this process) or inline |
| STUDIO_QUEUE_ON_IMPORT_SHARE | 0 | share (0–1) of an imported run's records queued for human scoring |
| STUDIO_RUN_UPLOAD_MAX_MB | 200 | the most an uploaded run zip may unpack to |
| STUDIO_JOB_STALE_AFTER_S | 600 | seconds without a heartbeat after which a background job's worker is taken as dead and the sweep ends the job (studio/background.py) |
| STUDIO_JOB_HEARTBEAT_S | 15 | seconds between two heartbeats of a running background job |
| STUDIO_JOB_SWEEP_EVERY_S | 60 | a web process sweeps dead jobs at its first request and then at most this often (0: only manage.py sweep_jobs and worker start) |
| STUDIO_WARM_UP | 1 | a web process built on studio.wsgi (gunicorn) imports its views and compiles its templates before its first request (studio/warmup.py); 0 leaves them to the first request |
| STUDIO_RUN_UPLOAD_MAX_ENTRIES | 10000 | the most files and folders an uploaded run zip may hold |
| STUDIO_JUDGE_ALLOWED_HOSTS | api.openai.com and the host of STUDIO_JUDGE_BASE_URL | hosts a judge endpoint may name |
| STUDIO_JUDGE_KEY_VARIABLES | STUDIO_JUDGE_API_KEY,OPENAI_API_KEY | environment variables a judge configuration may name as its key |
| STUDIO_MAX_QUESTION_CHARS | 20000 | longest question text a task may hold |
| STUDIO_MAX_RASTER_PIXELS | 100000000 | most pixels (width × height, declared in the header) a raster import accepts |
| STUDIO_MAX_UPLOAD_BYTES | 2621440 (2.5 MiB) | largest request body |
| STUDIO_LOGIN_FAILURE_LIMIT | 5 | failed logins (one username from one address) before a lockout |
| STUDIO_LOGIN_COOLOFF_MINUTES | 15 | how long a lockout lasts |
| STUDIO_WEBHOOK_ALLOWED_HOSTS | * | hosts a webhook URL may name (".example.org": a domain) |
| STUDIO_WEBHOOK_PRIVATE_HOSTS | "" | hosts that may resolve to loopback, link-local or private addresses |
| STUDIO_WEBHOOK_TIMEOUT_S | 10 | seconds one webhook attempt waits |
| STUDIO_WEBHOOK_BACKOFF_S, STUDIO_WEBHOOK_BACKOFF_MAX_S | 30, 14400 | first retry wait (doubled per attempt) and its cap |
| STUDIO_WEBHOOK_RETRY_FOR_S | 93600 (26 h) | how long a webhook delivery is retried |
| STUDIO_WEBHOOK_DISABLE_AFTER | 50 | failed attempts in a row that disable a webhook (its owner is notified) |
| STUDIO_SMTP_HOST (…_PORT, _USER, _PASSWORD, _TLS), STUDIO_EMAIL_FROM | unset: console backend | notification e-mail |
"""
from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlparse

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("STUDIO_VAR_DIR", BASE_DIR / "var"))

SECRET_KEY = os.environ.get("STUDIO_SECRET_KEY", "dev-only-insecure-key-change-me-in-production-0123456789")
DEBUG = os.environ.get("STUDIO_DEBUG", "0") == "1"
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
    "axes",
    "annotation",
    "replay",
    "releases",
    "evaluation",
    "experiments",
    "notifications",
    "frontend",
]

#: the apps a tool server process reads (``manage.py mcp_serve``, one process per tool call in the
#: benchmark's harness, so its start is paid on every step): a task, its event's layers and their
#: pinned versions (``releases`` registers the pin reader), and the users its rows point to. The
#: apps above these (evaluation, experiments, notifications, frontend) are never imported by them
#: (packages import downward only) and only register hooks the server does not use (sweeps,
#: release sidecars, event handlers); the admin, the API and the pages serve no request there.
#: replay and releases come with configurations that register only what a server reads (the pin
#: reader), not the QC, review, variant and sweep hooks, whose services load the QC suite and Celery.
#: ``manage.py`` sets ``STUDIO_APP_SET=tool-server`` for ``mcp_serve``; ``studio/__init__.py``
#: then leaves the Celery app unloaded (a tool server enqueues nothing).
TOOL_SERVER_APPS = ["django.contrib.auth", "django.contrib.contenttypes", "annotation",
                    "replay.apps.ReplayToolServerConfig", "releases.apps.ReleasesToolServerConfig"]
APP_SET = os.environ.get("STUDIO_APP_SET", "")
if APP_SET == "tool-server":
    INSTALLED_APPS = TOOL_SERVER_APPS

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
    "axes.middleware.AxesMiddleware",  # last: it turns a lockout into the 429 page
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
        os.environ.get("DATABASE_URL", f"sqlite:///{VAR_DIR / 'studio.sqlite3'}"),
        conn_max_age=int(os.environ.get("STUDIO_DB_CONN_MAX_AGE", "0")),
        conn_health_checks=int(os.environ.get("STUDIO_DB_CONN_MAX_AGE", "0")) > 0,
    )
}
# STUDIO_DB_CONN_MAX_AGE > 0 keeps each server thread's database connection open across requests
# (Django's CONN_MAX_AGE, with CONN_HEALTH_CHECKS so a dropped connection is replaced, not reused):
# opening one costs a map tile more than the tile's three queries (2.5 ms of 4.5 on SQLite with its
# PRAGMAs, bench/tiles.py, issue 16). 0 (the default): a connection per request.
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # Concurrent writers on the embedded default wait instead of failing with "database is locked":
    # WAL lets readers run beside the one writer, and BEGIN IMMEDIATE takes the write lock when a
    # transaction starts, so a reader never has to upgrade to a writer midway (SQLite answers that
    # upgrade with SQLITE_BUSY at once, whatever the busy timeout). ``timeout`` is the busy timeout in
    # seconds (sqlite3.connect). Django 5.1+ options: "transaction_mode" and "init_command".
    DATABASES["default"].setdefault("OPTIONS", {}).update({
        "timeout": 20,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    })
# The test database's name (pytest-django), fixed so that a Celery worker started beside the test run
# can be pointed at it (CI: DATABASE_URL=<server>/$STUDIO_TEST_DB_NAME for the worker). Unset: Django's
# default (test_<NAME>; in-memory for SQLite).
if os.environ.get("STUDIO_TEST_DB_NAME"):
    DATABASES["default"]["TEST"] = {"NAME": os.environ["STUDIO_TEST_DB_NAME"]}
elif DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # SQLite's test database is a file, not Django's shared in-memory one: the tests run background
    # threads and live servers beside the test's own connection, and in shared-cache memory SQLite
    # answers a second writer "database table is locked" at once; a file in WAL mode waits (the
    # busy timeout above), as the deployed database does.
    import tempfile

    DATABASES["default"]["TEST"] = {"NAME": str(Path(tempfile.gettempdir()) / f"studio-test-{os.getpid()}.sqlite3")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# The cache holds derived pages that are expensive to build (the leaderboard), keyed by a fingerprint
# of their inputs, so a stale entry is never served. Per process by default; Redis to share it.
if os.environ.get("STUDIO_CACHE_URL"):
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                          "LOCATION": os.environ["STUDIO_CACHE_URL"]}}
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "studio"}}

AUTH_PASSWORD_VALIDATORS = []
# Login throttling (django-axes): after STUDIO_LOGIN_FAILURE_LIMIT failed logins for one username
# from one IP address, that pair is locked out for STUDIO_LOGIN_COOLOFF_MINUTES (HTTP 429), on
# the login page and for HTTP Basic on the API alike; a successful login resets the count.
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = int(os.environ.get("STUDIO_LOGIN_FAILURE_LIMIT", 5))
AXES_COOLOFF_TIME = timedelta(minutes=float(os.environ.get("STUDIO_LOGIN_COOLOFF_MINUTES", 15)))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_VERBOSE = False
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
    # domain errors (kernel.errors) -> 400/403/404/409/423 with one body: studio/errors.py
    "EXCEPTION_HANDLER": "studio.errors.exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Disaster-response benchmark studio API",
    "DESCRIPTION": "Events, layers, tasks, replays, agent runs and verdicts.",
    "VERSION": "0.1.0",
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # one name per choice set used by several fields: the step-wise protocol's cut positions
    # (early/middle/late) and the perception modes (replay's mode, an experiment configuration's)
    "ENUM_NAME_OVERRIDES": {"StepwisePositionEnum": "evaluation.judge.stepwise.POSITIONS",
                            "PerceptionModeEnum": "kernel.vocabulary.PERCEPTION_MODES"},
}

# Offline map: no base map from the internet; the studio's own tiles are the layers.
LEAFLET_CONFIG = {"TILES": [], "NO_GLOBALS": False, "RESET_VIEW": False}

# Studio paths.
STUDIO_DATA_ROOT = Path(os.environ.get("STUDIO_DATA_ROOT", VAR_DIR / "data")).resolve()
STUDIO_DEMO_DATA = Path(os.environ.get("STUDIO_DEMO_DATA", BASE_DIR.parent / "shared" / "realdata")).resolve()
STUDIO_ARTIFACT_ROOT = Path(os.environ.get("STUDIO_ARTIFACT_ROOT", STUDIO_DATA_ROOT / "artifacts")).resolve()
STUDIO_CHECKPOINT_DIR = os.environ.get("STUDIO_CHECKPOINT_DIR", "")
# Object storage (studio/storage.py): "" keeps every file under STUDIO_DATA_ROOT (Django's FileSystemStorage);
# s3://BUCKET[/PREFIX] keeps release exports in that bucket through django-storages' S3Storage (boto3), read
# with django-storages' own AWS_* settings below. A presigned download link lives STUDIO_STORAGE_LINK_TTL_S s.
STUDIO_STORAGE_URL = os.environ.get("STUDIO_STORAGE_URL", "").strip()
AWS_S3_ENDPOINT_URL = os.environ.get("AWS_S3_ENDPOINT_URL") or None
AWS_ACCESS_KEY_ID = os.environ.get("AWS_ACCESS_KEY_ID") or None
AWS_SECRET_ACCESS_KEY = os.environ.get("AWS_SECRET_ACCESS_KEY") or None
AWS_S3_REGION_NAME = os.environ.get("AWS_S3_REGION_NAME") or None
AWS_S3_ADDRESSING_STYLE = os.environ.get("AWS_S3_ADDRESSING_STYLE") or None
AWS_S3_SIGNATURE_VERSION = os.environ.get("AWS_S3_SIGNATURE_VERSION") or "s3v4"
STUDIO_STORAGE_LINK_TTL_S = int(os.environ.get("STUDIO_STORAGE_LINK_TTL_S", "300"))
# How the leaderboard's bootstrap intervals are computed after an import: "" (a thread of the process
# when Celery runs in-process, else a Celery worker) or "inline" (at once, in the request; tests).
STUDIO_LEADERBOARD_BOOTSTRAP_RUNNER = os.environ.get("STUDIO_LEADERBOARD_BOOTSTRAP_RUNNER", "").strip()
# Rendered map tiles kept per server process (an LRU bounded by the PNGs' total bytes; 0: no cache).
STUDIO_TILE_CACHE_BYTES = int(os.environ.get("STUDIO_TILE_CACHE_BYTES", str(64 * 2**20)))


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name, "")
    try:
        return float(raw) if raw.strip() else default
    except ValueError:
        raise ValueError(f"environment variable {name}: {raw!r} is not a number") from None


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "")
    try:
        return int(raw) if raw.strip() else default
    except ValueError:
        raise ValueError(f"environment variable {name}: {raw!r} is not a whole number") from None


def _env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name, "").strip().lower()
    if not raw:
        return default
    if raw not in ("0", "1", "true", "false", "yes", "no"):
        raise ValueError(f"environment variable {name}: {raw!r} is not 0/1, true/false or yes/no")
    return raw in ("1", "true", "yes")


def _env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    return default if raw is None or not raw.strip() else [v.strip() for v in raw.split(",") if v.strip()]


# Scoring and judging (see README): the runner of judge jobs and run zip imports (blank: celery with a broker, else a thread),
# the share of an import queued for human scoring, the size and entry limits of an uploaded run zip.
STUDIO_JUDGE_RUNNER = os.environ.get("STUDIO_JUDGE_RUNNER", "").strip()
STUDIO_QUEUE_ON_IMPORT_SHARE = _env_float("STUDIO_QUEUE_ON_IMPORT_SHARE", 0.0)
STUDIO_RUN_UPLOAD_MAX_MB = _env_float("STUDIO_RUN_UPLOAD_MAX_MB", 200.0)
# Background jobs (studio/background.py): a job's worker writes a heartbeat every STUDIO_JOB_HEARTBEAT_S
# seconds; the sweep ends a job whose worker process of this host is gone at once, and one without a
# heartbeat for STUDIO_JOB_STALE_AFTER_S seconds (another host's worker, a hung one, a queued job no
# worker took). 600 s: forty missed beats, longer than SQLite's 20 s busy wait many times over.
STUDIO_JOB_STALE_AFTER_S = _env_float("STUDIO_JOB_STALE_AFTER_S", 600.0)
STUDIO_JOB_HEARTBEAT_S = _env_float("STUDIO_JOB_HEARTBEAT_S", 15.0)
STUDIO_JOB_SWEEP_EVERY_S = _env_float("STUDIO_JOB_SWEEP_EVERY_S", 60.0)
STUDIO_WARM_UP = _env_bool("STUDIO_WARM_UP", True)
STUDIO_RUN_UPLOAD_MAX_ENTRIES = _env_int("STUDIO_RUN_UPLOAD_MAX_ENTRIES", 10000)
# The human scoring queue (evaluation/services/queue.py): verdicts wanted per record, and how long a
# claimed item stays with its scorer before it returns to the queue.
STUDIO_HUMAN_VERDICTS_PER_RECORD = _env_int("STUDIO_HUMAN_VERDICTS_PER_RECORD", 2)
STUDIO_SCORING_LEASE_MINUTES = _env_float("STUDIO_SCORING_LEASE_MINUTES", 30.0)
# When verdicts disagree (evaluation/disagreement.py, DisagreementRules): correctness differs;
# grades differ by at least the delta ("none": grades never disagree); an E1–E6 flag differs; and
# whose verdicts are compared.
STUDIO_DISAGREEMENT_ON_CORRECTNESS = _env_bool("STUDIO_DISAGREEMENT_ON_CORRECTNESS", True)
STUDIO_DISAGREEMENT_GRADE_DELTA = (None if os.environ.get("STUDIO_DISAGREEMENT_GRADE_DELTA", "").strip().lower() == "none"
                                   else _env_float("STUDIO_DISAGREEMENT_GRADE_DELTA", 0.4))
STUDIO_DISAGREEMENT_ON_FLAGS = _env_bool("STUDIO_DISAGREEMENT_ON_FLAGS", True)
STUDIO_DISAGREEMENT_SOURCES = tuple(_env_list("STUDIO_DISAGREEMENT_SOURCES", ["human", "judge"]))
# Calls to a judge endpoint (evaluation/services/judge.py): the wait before a retry (doubling each
# time), a request's timeout, retries of a failed request, re-asks of an answer that does not parse.
STUDIO_JUDGE_BACKOFF_S = _env_float("STUDIO_JUDGE_BACKOFF_S", 1.0)
STUDIO_JUDGE_TIMEOUT_S = _env_float("STUDIO_JUDGE_TIMEOUT_S", 120.0)
STUDIO_JUDGE_MAX_RETRIES = _env_int("STUDIO_JUDGE_MAX_RETRIES", 3)
STUDIO_JUDGE_MAX_REASKS = _env_int("STUDIO_JUDGE_MAX_REASKS", 1)
# Model requests of experiments (experiments/services.py, experiments/client.py): retries of a request
# answered 429/5xx or refused at connect (a read timeout is never re-sent), the first wait (doubling, at most 30 s).
STUDIO_EXPERIMENT_MAX_RETRIES = _env_int("STUDIO_EXPERIMENT_MAX_RETRIES", 6)
STUDIO_EXPERIMENT_BACKOFF_S = _env_float("STUDIO_EXPERIMENT_BACKOFF_S", 1.0)
# Several questions of one experiment at once in processes forked by the job (PostgreSQL only; SQLite
# keeps threads) rather than threads of the job's process: on unless set to 0 (docs/experiments.md).
STUDIO_EXPERIMENT_WORKER_PROCESSES = _env_bool("STUDIO_EXPERIMENT_WORKER_PROCESSES", True)
# Read by the pure cores from the environment itself (they import no Django, so not from here; see
# the README): STUDIO_PERCEPTION_DEVICE (kernel/tools/perception_models.py), STUDIO_TOOL_CATALOGUE and
# STUDIO_SHARED (kernel/catalogue.py), DORA_DATA (evaluation/scoring/cli.py, the evaluator's CLI).

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
# A queue per workload (docs/deployment.md, "Queues"), each named <STUDIO_QUEUE_PREFIX><workload>, so that
# studios or CI runs sharing one broker never meet. The one table of routes: a task not named here
# (webhook sends, the leaderboard's bootstrap, replay resume sweeps) goes to the default queue.
STUDIO_QUEUE_PREFIX = os.environ.get("STUDIO_QUEUE_PREFIX", "")
CELERY_TASK_ROUTES = {
    "replay.tasks.run_replay": {"queue": f"{STUDIO_QUEUE_PREFIX}replay"},                  # replay/jobs.py
    "evaluation.judge_batch": {"queue": f"{STUDIO_QUEUE_PREFIX}judge"},                    # evaluation/jobs.py
    "experiments.run": {"queue": f"{STUDIO_QUEUE_PREFIX}experiments"},                     # experiments/jobs.py
    "annotation.tasks.export_release_job": {"queue": f"{STUDIO_QUEUE_PREFIX}exports"},     # releases/jobs.py
    "evaluation.run_import": {"queue": f"{STUDIO_QUEUE_PREFIX}imports"},                   # evaluation/jobs.py
}
# Every queue declared: a worker started without -Q consumes all six (one machine runs everything); a
# worker of one workload is started with -Q <prefix><workload>. Exchange and routing key named after the
# queue, as Celery declares a queue it creates on demand; as {name: options} (Celery's mapping form), not
# kombu Queue objects, so that loading the settings imports no kombu (a tool server's start pays for it).
CELERY_TASK_QUEUES = {name: {"exchange": name, "routing_key": name} for name in dict.fromkeys(
    [CELERY_TASK_DEFAULT_QUEUE, *(route["queue"] for route in CELERY_TASK_ROUTES.values())])}
# Redis holds a delivered, not yet acknowledged job for this long before it delivers it again (jobs are
# acknowledged when they end: CELERY_TASK_ACKS_LATE). It must exceed the longest job, or a job still
# running is delivered a second time: 24 h, since an experiment can run for hours (Redis's own default is
# 1 h). A job whose worker died is re-run sooner by the studio's sweep (studio/background.py, heartbeat).
STUDIO_BROKER_VISIBILITY_TIMEOUT_S = _env_float("STUDIO_BROKER_VISIBILITY_TIMEOUT_S", 24 * 3600.0)
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": STUDIO_BROKER_VISIBILITY_TIMEOUT_S}
CELERY_TASK_ALWAYS_EAGER = not CELERY_BROKER_URL
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1

# Judge egress: a judge configuration (a maintainer's, in the database) may only name an endpoint
# on these hosts and a key held in one of these variables, so that no configuration can send
# another secret of the environment (STUDIO_SECRET_KEY, DATABASE_URL ...) to a host of its choice.
_judge_hosts = ["api.openai.com"]
if urlparse(os.environ.get("STUDIO_JUDGE_BASE_URL", "")).hostname:
    _judge_hosts.append(urlparse(os.environ["STUDIO_JUDGE_BASE_URL"]).hostname)
STUDIO_JUDGE_ALLOWED_HOSTS = [h.strip().lower() for h in os.environ.get(
    "STUDIO_JUDGE_ALLOWED_HOSTS", ",".join(_judge_hosts)).split(",") if h.strip()]
STUDIO_JUDGE_KEY_VARIABLES = [v.strip() for v in os.environ.get(
    "STUDIO_JUDGE_KEY_VARIABLES", "STUDIO_JUDGE_API_KEY,OPENAI_API_KEY").split(",") if v.strip()]

# Webhooks (notifications app, docs/notifications.md): the hosts a webhook URL may name ("*" every
# host, ".example.org" a domain), the hosts that may resolve to loopback, link-local or private
# addresses (none by default: kernel/egress.py), the timeout of one attempt, the retry backoff
# (doubled per attempt, at most STUDIO_WEBHOOK_BACKOFF_MAX_S) and for how long a delivery is
# retried, and after how many failed attempts in a row a webhook is disabled.
STUDIO_WEBHOOK_ALLOWED_HOSTS = [h.lower() for h in _env_list("STUDIO_WEBHOOK_ALLOWED_HOSTS", ["*"])]
STUDIO_WEBHOOK_PRIVATE_HOSTS = [h.lower() for h in _env_list("STUDIO_WEBHOOK_PRIVATE_HOSTS", [])]
STUDIO_WEBHOOK_TIMEOUT_S = _env_float("STUDIO_WEBHOOK_TIMEOUT_S", 10.0)
STUDIO_WEBHOOK_BACKOFF_S = _env_float("STUDIO_WEBHOOK_BACKOFF_S", 30.0)
STUDIO_WEBHOOK_BACKOFF_MAX_S = _env_float("STUDIO_WEBHOOK_BACKOFF_MAX_S", 4 * 3600.0)
STUDIO_WEBHOOK_RETRY_FOR_S = _env_float("STUDIO_WEBHOOK_RETRY_FOR_S", 26 * 3600.0)
STUDIO_WEBHOOK_DISABLE_AFTER = _env_int("STUDIO_WEBHOOK_DISABLE_AFTER", 50)
# Retention (the sweep prunes): read notifications older than STUDIO_NOTIFICATION_RETENTION_DAYS
# (unread ones are kept however old), and finished webhook deliveries (succeeded or given up, with
# their attempt log) older than STUDIO_WEBHOOK_LOG_RETENTION_DAYS. 0 keeps everything.
STUDIO_NOTIFICATION_RETENTION_DAYS = _env_int("STUDIO_NOTIFICATION_RETENTION_DAYS", 90)
STUDIO_WEBHOOK_LOG_RETENTION_DAYS = _env_int("STUDIO_WEBHOOK_LOG_RETENTION_DAYS", 30)

# E-mail for notifications: Django's SMTP backend when STUDIO_SMTP_HOST is set, else the console
# backend (the embedded default: mails are printed to the log).
if os.environ.get("STUDIO_SMTP_HOST", "").strip():
    EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    EMAIL_HOST = os.environ["STUDIO_SMTP_HOST"].strip()
    EMAIL_PORT = _env_int("STUDIO_SMTP_PORT", 587)
    EMAIL_HOST_USER = os.environ.get("STUDIO_SMTP_USER", "")
    EMAIL_HOST_PASSWORD = os.environ.get("STUDIO_SMTP_PASSWORD", "")
    EMAIL_USE_TLS = _env_bool("STUDIO_SMTP_TLS", True)
else:
    EMAIL_BACKEND = "django.core.mail.backends.console.EmailBackend"
DEFAULT_FROM_EMAIL = os.environ.get("STUDIO_EMAIL_FROM", "studio@localhost")

# Size limits (issue 15): a question's length in characters, a raster's declared pixels (its
# header's width × height, checked before any pixel is read: a 50 KB sparse GeoTIFF may declare
# 40000 × 40000), and a request body in bytes (Django's own setting, 2.5 MiB by default).
STUDIO_MAX_QUESTION_CHARS = int(os.environ.get("STUDIO_MAX_QUESTION_CHARS", 20_000))
STUDIO_MAX_RASTER_PIXELS = int(os.environ.get("STUDIO_MAX_RASTER_PIXELS", 100_000_000))
DATA_UPLOAD_MAX_MEMORY_SIZE = int(os.environ.get("STUDIO_MAX_UPLOAD_BYTES", 2_621_440))

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"one_line_client_errors": {"()": "studio.logfilters.OneLineClientErrors"}},
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("STUDIO_LOG_LEVEL", "WARNING")},
    # a refused request (403, 400, 404) is one line, not a traceback that reads as a crash
    "loggers": {"django.request": {"filters": ["one_line_client_errors"]}},
}
