"""Logging filters of the studio's console log (wired in ``studio.settings.LOGGING``)."""
from __future__ import annotations

import logging


class OneLineClientErrors(logging.Filter):
    """Log a refused request (status 400–499) as one line, without its traceback.

    Django's ``log_response`` (``django/core/handlers/exception.py``) passes the exception of a
    ``PermissionDenied``, ``SuspiciousOperation`` or bad request as ``exc_info`` to the
    ``django.request`` logger, so every 403 printed a full traceback that reads as a crash in the
    server console. A refusal is the studio working as designed: the line
    ``Forbidden (Permission denied): /path`` stays; the traceback goes. A 5xx keeps its traceback.
    Records without a ``status_code`` (not from ``log_response``) pass unchanged.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        status = getattr(record, "status_code", None)
        if isinstance(status, int) and 400 <= status < 500:
            record.exc_info = None
            record.exc_text = None
        return True
