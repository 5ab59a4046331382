"""Production settings: everything of :mod:`studio.settings` plus HTTPS-only cookies, HSTS and
no debug. Select with ``DJANGO_SETTINGS_MODULE=studio.settings_production``; it passes
``manage.py check --deploy`` with no warning (``tests/test_security_settings.py``).

Required environment (a missing or weak value stops the process with ``ImproperlyConfigured``
naming the variable):

| variable | meaning |
| --- | --- |
| STUDIO_SECRET_KEY | at least 50 characters, 5 distinct (Django's own test, security.W009) |
| STUDIO_ALLOWED_HOSTS | comma-separated host names the studio answers to, e.g. ``studio.example.org`` |

Optional: ``STUDIO_CSRF_TRUSTED_ORIGINS`` (comma-separated ``https://host`` origins, when the
studio sits behind a proxy on another origin), ``STUDIO_SECURE_PROXY_SSL_HEADER=1`` (trust
``X-Forwarded-Proto: https`` from the reverse proxy that terminates TLS), ``STUDIO_HSTS_SECONDS``
(default one year). See ``docs/security.md``.
"""
from __future__ import annotations

import os

from django.core.exceptions import ImproperlyConfigured

from studio.settings import *  # noqa: F401,F403 - the base settings, then the overrides below


def _required(name: str) -> str:
    value = os.environ.get(name, "").strip()
    if not value:
        raise ImproperlyConfigured(f"{name} must be set in production (see docs/security.md)")
    return value


SECRET_KEY = _required("STUDIO_SECRET_KEY")
if len(SECRET_KEY) < 50 or len(set(SECRET_KEY)) < 5 or SECRET_KEY.startswith("django-insecure-") \
        or SECRET_KEY.startswith("dev-only-insecure-key"):
    raise ImproperlyConfigured("STUDIO_SECRET_KEY is too weak: use at least 50 random characters, e.g. "
                               "python -c 'import secrets; print(secrets.token_urlsafe(64))'")

ALLOWED_HOSTS = [h.strip() for h in _required("STUDIO_ALLOWED_HOSTS").split(",") if h.strip()]
if not ALLOWED_HOSTS or "*" in ALLOWED_HOSTS:
    raise ImproperlyConfigured("STUDIO_ALLOWED_HOSTS must name the studio's host names (no '*')")

DEBUG = False

# HTTPS everywhere (Django's deployment checklist, security.W004–W012, W016, W021)
SECURE_SSL_REDIRECT = True
SECURE_HSTS_SECONDS = int(os.environ.get("STUDIO_HSTS_SECONDS", str(365 * 24 * 3600)))
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
SECURE_HSTS_PRELOAD = True
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
SESSION_COOKIE_SECURE = True
SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_SECURE = True
X_FRAME_OPTIONS = "DENY"

if os.environ.get("STUDIO_SECURE_PROXY_SSL_HEADER", "") == "1":
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
CSRF_TRUSTED_ORIGINS = [o.strip() for o in os.environ.get("STUDIO_CSRF_TRUSTED_ORIGINS", "").split(",") if o.strip()]
