"""The server console logs a refused request as one line, and a server error with its traceback
(``studio.logfilters.OneLineClientErrors`` on the ``django.request`` logger)."""
from __future__ import annotations

import logging
import subprocess
import sys

import pytest
from conftest import REPO

from studio.logfilters import OneLineClientErrors


@pytest.mark.django_db
def test_a_refused_page_is_logged_as_one_line_without_traceback(client, make_user, caplog):
    # a scorer may not view the judge report (permission table: agreement.view is maintainer's);
    # Django's log_response hands the PermissionDenied to the logger as exc_info
    client.force_login(make_user("sam", "scorer"))
    with caplog.at_level(logging.WARNING, logger="django.request"):
        assert client.get("/judge/report/").status_code == 403
    forbidden = [r for r in caplog.records if r.name == "django.request" and r.status_code == 403]
    assert len(forbidden) == 1
    record = forbidden[0]
    assert record.getMessage() == "Forbidden (Permission denied): /judge/report/"
    assert record.exc_info is None
    assert "Traceback" not in logging.Formatter().format(record)


def _record(status: int) -> logging.LogRecord:
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        exc_info = sys.exc_info()
    record = logging.LogRecord("django.request", logging.ERROR, __file__, 1, "x", (), exc_info)
    record.status_code = status
    return record


@pytest.mark.parametrize("status, keeps_traceback", [(400, False), (403, False), (404, False), (499, False),
                                                      (500, True), (503, True)])
def test_only_client_errors_lose_their_traceback(status, keeps_traceback):
    record = _record(status)
    assert OneLineClientErrors().filter(record) is True
    assert ("Traceback" in logging.Formatter().format(record)) is keeps_traceback


def test_a_record_without_status_passes_unchanged():
    record = _record(500)
    del record.status_code
    OneLineClientErrors().filter(record)
    assert record.exc_info is not None


def test_the_api_schema_generates_without_a_warning():
    """drf-spectacular warned on every ``/api/schema/`` request that one choice set (the step-wise
    positions early/middle/late) had several names; ``ENUM_NAME_OVERRIDES`` names it once."""
    done = subprocess.run([sys.executable, "manage.py", "spectacular", "--fail-on-warn", "--file", "/dev/null"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Warning" not in done.stderr, done.stderr
