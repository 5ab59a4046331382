"""``studio.settings_production`` passes ``manage.py check --deploy`` and refuses to start without
its required secrets (docs/security.md)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import REPO

STRONG_KEY = "k7Qw-2pL9xZr4Vb8Nc1Hs6Jt3Md5Fg0Ya7Ue2Io9Pw4Rx8Tq1Sv6Ln3Kj5Hb0Gm"  # 64 chars, many distinct


def _check(env_extra: dict, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           # DJANGO_ALLOW_ASYNC_UNSAFE is the browser tests' (conftest), never a deployment's (async.E001)
           if k not in ("STUDIO_SECRET_KEY", "STUDIO_ALLOWED_HOSTS", "STUDIO_DEBUG", "DJANGO_ALLOW_ASYNC_UNSAFE")}
    env.update(DJANGO_SETTINGS_MODULE="studio.settings_production", **env_extra)
    return subprocess.run([sys.executable, "manage.py", "check", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def deploy_check():
    return _check({"STUDIO_SECRET_KEY": STRONG_KEY, "STUDIO_ALLOWED_HOSTS": "studio.example.org"}, "--deploy")


def test_check_deploy_has_no_security_warning(deploy_check):
    out = deploy_check.stdout + deploy_check.stderr
    assert "security." not in out, out  # none of Django's security.W0xx / E0xx deployment checks
    assert "ImproperlyConfigured" not in out and "Traceback" not in out, out


def test_check_deploy_is_entirely_clean(deploy_check):
    assert deploy_check.returncode == 0, deploy_check.stdout + deploy_check.stderr
    assert "System check identified no issues" in deploy_check.stdout, deploy_check.stdout + deploy_check.stderr


@pytest.mark.parametrize("env, variable", [
    ({"STUDIO_ALLOWED_HOSTS": "studio.example.org"}, "STUDIO_SECRET_KEY must be set"),
    ({"STUDIO_SECRET_KEY": STRONG_KEY}, "STUDIO_ALLOWED_HOSTS must be set"),
    ({"STUDIO_SECRET_KEY": "short", "STUDIO_ALLOWED_HOSTS": "studio.example.org"}, "STUDIO_SECRET_KEY is too weak"),
    ({"STUDIO_SECRET_KEY": STRONG_KEY, "STUDIO_ALLOWED_HOSTS": "*"}, "no '*'"),
], ids=["no-secret-key", "no-allowed-hosts", "weak-secret-key", "wildcard-host"])
def test_missing_or_weak_settings_stop_with_a_clear_error(env, variable):
    result = _check(env)
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr and variable in result.stderr, result.stderr[-2000:]


def test_production_values():
    """The module's values, read in a subprocess (importing it here would need the secrets in this
    process's environment): DEBUG off, HTTPS-only cookies, HSTS one year with subdomains."""
    code = ("import json, studio.settings_production as s; print(json.dumps([s.DEBUG, s.SESSION_COOKIE_SECURE, "
            "s.CSRF_COOKIE_SECURE, s.SECURE_SSL_REDIRECT, s.SECURE_HSTS_SECONDS, s.SECURE_HSTS_INCLUDE_SUBDOMAINS, "
            "s.ALLOWED_HOSTS, s.INSTALLED_APPS == __import__('studio.settings').settings.INSTALLED_APPS]))")
    env = dict(os.environ, STUDIO_SECRET_KEY=STRONG_KEY, STUDIO_ALLOWED_HOSTS="a.example.org, b.example.org",
               STUDIO_DEBUG="1")  # STUDIO_DEBUG=1 must not turn debug back on
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    import json

    # 365 × 24 × 3600 = 31,536,000 s
    assert json.loads(out.stdout) == [False, True, True, True, 31536000, True, ["a.example.org", "b.example.org"], True]
