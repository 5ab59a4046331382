"""The experiments' HTTP client of an OpenAI-compatible ``/chat/completions`` endpoint (no Django).

Standard library only (``http.client``), so what is retried is decided here, not by an SDK:

* **retried** with exponential backoff (``backoff_s`` doubled per try, jitter 50–100 %, capped at
  ``backoff_max_s``, a ``Retry-After`` header honoured up to the cap): HTTP 408, 425, 429, 500,
  502, 503, 504, 529, and a connection that could not be opened or was closed before any answer
  (refused, reset, DNS): the server did not start generating;
* **never re-sent**: a read timeout (the server may still be generating the first request: a
  second one would queue behind it) → :class:`EndpointTimeout`; any other 4xx → :class:`EndpointRefused`;
* redirects are not followed (the endpoint was checked against the allow-list, its target was not).

The key goes into the ``Authorization`` header only; no message built here contains it or the
response body's free text (only its ``error.type``/``error.code`` identifiers).
"""
from __future__ import annotations

import http.client
import json
import random
import re
import time
from collections.abc import Callable
from urllib.parse import urlsplit

__all__ = ["EndpointError", "EndpointTimeout", "EndpointRefused", "EndpointUnavailable", "RETRYABLE_STATUS",
           "post_chat"]

RETRYABLE_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504, 529})
_IDENT = re.compile(r"[A-Za-z0-9_.-]{1,64}")


class EndpointError(Exception):
    """A model request failed; ``status`` is the HTTP status when there was one, ``attempts`` the tries made."""

    def __init__(self, message: str, *, status: int | None = None, attempts: int = 1):
        super().__init__(message)
        self.status, self.attempts = status, attempts


class EndpointTimeout(EndpointError):
    """No answer within the read timeout; not re-sent (the server may still be generating)."""


class EndpointRefused(EndpointError):
    """A 4xx other than the retried ones (bad request, context too long, no such model, a bad key)."""


class EndpointUnavailable(EndpointError):
    """429 / 5xx / connection errors that outlasted the retries."""


def _identifiers(body: bytes) -> str:
    try:
        doc = json.loads(body.decode("utf-8", "replace"))
        err = doc.get("error", doc) if isinstance(doc, dict) else None
    except ValueError:
        return ""
    ids = [v for k in ("type", "code") if isinstance(err, dict) and isinstance(v := err.get(k), str)
           and _IDENT.fullmatch(v)]
    return f" ({', '.join(ids)})" if ids else ""


def _delay(attempt: int, base: float, cap: float, retry_after: str | None) -> float:
    delay = min(cap, base * (2 ** (attempt - 1))) * (0.5 + random.random() / 2)
    try:
        if retry_after is not None and float(retry_after) >= 0:
            delay = max(delay, min(float(retry_after), cap))
    except ValueError:
        pass
    return delay


def post_chat(base_url: str, body: dict, *, api_key: str | None = None, read_timeout_s: float = 1200.0,
              connect_timeout_s: float = 10.0, max_retries: int = 5, backoff_s: float = 1.0,
              backoff_max_s: float = 30.0, sleep: Callable[[float], None] = time.sleep) -> tuple[dict, float, int]:
    """POST ``body`` to ``<base_url>/chat/completions``; returns ``(response JSON, latency s of
    the successful try, tries made)``. Raises :class:`EndpointTimeout`, :class:`EndpointRefused`
    or :class:`EndpointUnavailable` (see the module docstring)."""
    parts = urlsplit(base_url.rstrip("/") + "/chat/completions")
    conn_cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    path = parts.path + (f"?{parts.query}" if parts.query else "")
    payload = json.dumps(body, ensure_ascii=False).encode("utf-8")
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    attempt = 0
    while True:
        attempt += 1
        conn = conn_cls(parts.hostname, parts.port, timeout=connect_timeout_s)
        t0 = time.monotonic()
        try:
            try:
                conn.connect()
            except OSError as exc:  # refused, unreachable, DNS: nothing was sent
                problem, status, retry_after = f"connection error ({type(exc).__name__})", None, None
            else:
                conn.sock.settimeout(read_timeout_s)
                try:
                    conn.request("POST", path, body=payload, headers=headers)
                    resp = conn.getresponse()
                    data = resp.read()
                except TimeoutError:
                    raise EndpointTimeout(f"no answer within {read_timeout_s:g} s (not re-sent: the server may still "
                                          "be generating)", attempts=attempt) from None
                except (ConnectionError, http.client.RemoteDisconnected, http.client.BadStatusLine) as exc:
                    problem, status, retry_after = f"connection closed ({type(exc).__name__})", None, None
                else:
                    latency = time.monotonic() - t0
                    status = resp.status
                    if 200 <= status < 300:
                        try:
                            return json.loads(data.decode("utf-8")), latency, attempt
                        except ValueError:
                            raise EndpointRefused(f"HTTP {status} with a body that is not JSON", status=status,
                                                  attempts=attempt) from None
                    problem, retry_after = f"HTTP {status}{_identifiers(data)}", resp.getheader("Retry-After")
                    if status not in RETRYABLE_STATUS and not status >= 500:
                        raise EndpointRefused(f"the endpoint refused the request: {problem}", status=status,
                                              attempts=attempt)
        finally:
            conn.close()
        if attempt > max_retries:
            raise EndpointUnavailable(f"the endpoint still failing after {attempt} tries: {problem}", status=status,
                                      attempts=attempt)
        sleep(_delay(attempt, backoff_s, backoff_max_s, retry_after))
