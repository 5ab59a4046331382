"""Judge backends: a tiny interface and one OpenAI-compatible chat implementation.

Works with any OpenAI-compatible chat completions endpoint (OpenAI, vLLM, Ollama, llama.cpp
server).  The ``openai`` SDK is imported lazily.  The SDK's own retries are switched off and
replaced by a bounded retry loop on 429 / 5xx / connection errors with exponential backoff
(honouring ``Retry-After``, capped), whose sleep function is injectable for tests.

Errors:

* :class:`JudgeConfigError`: 401 / 403 / 404 or a missing model; the caller should pause that
  judge configuration, retrying will not help;
* :class:`JudgeRequestError`: any other 4xx (bad request, context too long...): this prompt
  fails, others may work;
* :class:`JudgeTransientError`: 429 / 5xx / connection errors still failing after the retries,
  or a read timeout, which is never retried: the server may still be generating the first
  answer, and a second request would queue behind it (the message gives the seconds waited).

A JSON mode the server refuses (llama.cpp's server answers ``json_schema`` with HTTP 500) is a
:class:`JudgeConfigError` naming the mode (:func:`json_mode_refusal`), never retried.

The API key is never put into an exception message, a repr or a log line: messages are built
here from the status code, the model name and the error body's ``type``/``code`` identifiers
(never its text: an endpoint may echo anything), and the SDK exception is not chained.
"""
from __future__ import annotations

import abc
import logging
import os
import random
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .verdict import VERDICT_JSON_SCHEMA

logger = logging.getLogger(__name__)

#: ``json_schema``: OpenAI's structured output (``response_format.json_schema``); ``json_object``:
#: OpenAI's JSON mode; ``json_object_schema``: JSON mode with the verdict schema beside it
#: (``{"type": "json_object", "schema": ...}``, what llama.cpp / llama-cpp-python's server reads
#: as a grammar); ``none``: no ``response_format``.
JSON_MODES = ("json_schema", "json_object", "json_object_schema", "none")
RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 520, 522, 524, 529})
CONFIG_STATUS = frozenset({401, 403, 404})
_IDENTIFIER = re.compile(r"[A-Za-z0-9_.-]{1,64}")  # an error body's type / code, not free text
_PLACEHOLDER_KEY = "not-needed"  # sent when no key is configured (local servers)


class JudgeError(Exception):
    """Base class of judge backend errors.  ``status`` is the HTTP status when there was one."""

    def __init__(self, message: str, *, status: int | None = None):
        super().__init__(message)
        self.status = status


class JudgeConfigError(JudgeError):
    """Authentication / permission / not-found / missing settings: pause this configuration."""


class JudgeRequestError(JudgeError):
    """The endpoint rejected this request (4xx other than 401/403/404/429)."""


class JudgeTransientError(JudgeError):
    """Rate limits, server errors or timeouts that outlasted the retries."""


@dataclass(frozen=True)
class JudgeResponse:
    text: str
    tokens_in: int | None
    tokens_out: int | None
    latency_s: float  # wall time of the successful call (excluding earlier failed tries)
    model: str  # model name reported by the endpoint (or the configured one)
    attempts: int = 1  # HTTP attempts made, retries included
    finish_reason: str | None = None


class JudgeBackend(abc.ABC):
    """Interface: ``judge(prompt) -> JudgeResponse``.

    ``judge_messages`` takes a whole chat (used for the one re-ask after a malformed answer);
    the default implementation flattens the chat into one prompt.
    """

    model: str = "?"

    @abc.abstractmethod
    def judge(self, prompt: str) -> JudgeResponse:
        """Send ``prompt`` to the judge model; the raw answer with tokens and latency."""

    def judge_messages(self, messages: Sequence[Mapping[str, str]]) -> JudgeResponse:
        parts = []
        for m in messages:
            role = m.get("role", "user")
            parts.append(m["content"] if role == "user" and not parts else f"[{role}]\n{m['content']}")
        return self.judge("\n\n".join(parts))

    def parameters(self) -> dict[str, Any]:
        """Provenance parameters (no secrets), for records and cache keys."""
        return {"model": self.model}


# --------------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------------


def _redact(text: str, secret: str | None) -> str:
    if not text:
        return ""
    out = text
    if secret:
        out = out.replace(secret, "***")
        # also partial echoes such as "sk-abc...xyz" or the last characters of the key
        if len(secret) >= 12:
            out = out.replace(secret[:8], "***").replace(secret[-6:], "***")
    out = re.sub(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]+", r"\1***", out)
    out = re.sub(r"\b(sk|pk|rk)-[A-Za-z0-9_-]{6,}", r"\1-***", out)
    return out


@dataclass
class StudioJudgeConfig:
    """Judge endpoint settings.  ``api_key`` is excluded from repr and :meth:`parameters`."""

    model: str
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    json_mode: str = "json_object"
    timeout: float = 120.0
    max_retries: int = 3
    temperature: float = 0.0
    max_tokens: int | None = None

    def __post_init__(self) -> None:
        if not self.model:
            raise JudgeConfigError("judge model is not set")
        if self.json_mode not in JSON_MODES:
            raise JudgeConfigError(f"json_mode must be one of {JSON_MODES}, got {self.json_mode!r}")

    @classmethod
    def from_env(cls, prefix: str = "STUDIO_JUDGE_", environ: Mapping[str, str] | None = None) -> StudioJudgeConfig:
        """Read ``<prefix>BASE_URL``, ``MODEL``, ``API_KEY``, ``JSON_MODE`` (and optionally
        ``TIMEOUT``, ``MAX_RETRIES``, ``MAX_TOKENS``).  Missing MODEL -> :class:`JudgeConfigError`."""
        env = os.environ if environ is None else environ

        def get(name: str) -> str | None:
            v = env.get(prefix + name)
            return v.strip() if v and v.strip() else None

        def num(name: str, conv: Callable[[str], Any], default: Any) -> Any:
            v = get(name)
            if v is None:
                return default
            try:
                return conv(v)
            except ValueError:
                raise JudgeConfigError(f"{prefix}{name} is not a number") from None

        model = get("MODEL")
        if not model:
            raise JudgeConfigError(f"{prefix}MODEL is not set")
        return cls(
            model=model,
            base_url=get("BASE_URL"),
            api_key=get("API_KEY"),
            json_mode=(get("JSON_MODE") or "json_object").lower(),
            timeout=num("TIMEOUT", float, 120.0),
            max_retries=num("MAX_RETRIES", int, 3),
            max_tokens=num("MAX_TOKENS", int, None),
        )

    def parameters(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "base_url": self.base_url,
            "json_mode": self.json_mode,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }

    def build_backend(self, **kwargs: Any) -> OpenAICompatibleBackend:
        return OpenAICompatibleBackend(
            base_url=self.base_url,
            model=self.model,
            api_key=self.api_key,
            json_mode=self.json_mode,
            timeout=self.timeout,
            max_retries=self.max_retries,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            **kwargs,
        )


# --------------------------------------------------------------------------------------------
# OpenAI-compatible backend
# --------------------------------------------------------------------------------------------


class OpenAICompatibleBackend(JudgeBackend):
    def __init__(
        self,
        base_url: str | None,
        model: str,
        api_key: str | None = None,
        json_mode: str = "json_object",
        timeout: float = 120.0,
        max_retries: int = 3,
        *,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        backoff_base: float = 1.0,
        backoff_max: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
        system_prompt: str | None = None,
    ):
        if not model:
            raise JudgeConfigError("judge model is not set")
        if json_mode not in JSON_MODES:
            raise JudgeConfigError(f"json_mode must be one of {JSON_MODES}, got {json_mode!r}")
        self.base_url = base_url
        self.model = model
        self.__api_key = api_key or None  # name-mangled: not in vars() dumps by accident
        self.json_mode = json_mode
        self.timeout = float(timeout)
        self.max_retries = max(0, int(max_retries))
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self._sleep = sleep
        self.system_prompt = system_prompt
        self._client = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return (
            f"OpenAICompatibleBackend(base_url={self.base_url!r}, model={self.model!r}, "
            f"json_mode={self.json_mode!r}, api_key={'***' if self.__api_key else None})"
        )

    __str__ = __repr__

    def __getstate__(self) -> dict[str, Any]:  # never pickle the key or the client
        state = dict(self.__dict__)
        state.pop("_OpenAICompatibleBackend__api_key", None)  # rebuild from config after unpickling
        state["_client"] = None
        state.pop("_lock", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.__dict__.setdefault("_OpenAICompatibleBackend__api_key", None)
        self._lock = threading.Lock()

    def parameters(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "base_url": self.base_url,
            "json_mode": self.json_mode,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }

    # -- client ------------------------------------------------------------------------------

    def _get_client(self) -> Any:
        with self._lock:
            if self._client is None:
                try:
                    import openai  # lazy: the studio imports this module without the SDK in reach
                except ImportError:  # pragma: no cover
                    raise JudgeConfigError("the openai package is not installed") from None
                kwargs: dict[str, Any] = {
                    # an explicit placeholder so the SDK never falls back to OPENAI_API_KEY and
                    # sends that key to a foreign base URL
                    "api_key": self.__api_key or _PLACEHOLDER_KEY,
                    "timeout": self.timeout,
                    "max_retries": 0,
                }
                # never follow a redirect: the endpoint was checked against the allow-list
                # (STUDIO_JUDGE_ALLOWED_HOSTS), its redirect target was not; the SDK's own client
                # follows them (re-POSTing the prompt and key on a 307/308)
                kwargs["http_client"] = openai.DefaultHttpxClient(follow_redirects=False, timeout=self.timeout)
                if self.base_url:
                    kwargs["base_url"] = self.base_url
                try:
                    self._client = openai.OpenAI(**kwargs)
                except Exception as exc:  # noqa: BLE001 - SDK construction errors vary
                    raise JudgeConfigError(
                        f"cannot create the judge client: {_redact(str(exc), self.__api_key)[:300]}"
                    ) from None
            return self._client

    def _request(self, messages: Sequence[Mapping[str, str]]) -> dict[str, Any]:
        req: dict[str, Any] = {
            "model": self.model,
            "messages": [dict(m) for m in messages],
            "temperature": self.temperature,
        }
        if self.max_tokens:
            req["max_tokens"] = self.max_tokens
        if self.json_mode == "json_object":
            req["response_format"] = {"type": "json_object"}
        elif self.json_mode == "json_object_schema":
            req["response_format"] = {"type": "json_object", "schema": VERDICT_JSON_SCHEMA}
        elif self.json_mode == "json_schema":
            req["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "judge_verdict", "schema": VERDICT_JSON_SCHEMA, "strict": True},
            }
        return req

    # -- calls -------------------------------------------------------------------------------

    def judge(self, prompt: str) -> JudgeResponse:
        return self.judge_messages([{"role": "user", "content": prompt}])

    def judge_messages(self, messages: Sequence[Mapping[str, str]]) -> JudgeResponse:
        msgs = list(messages)
        if self.system_prompt:
            msgs = [{"role": "system", "content": self.system_prompt}, *msgs]
        client = self._get_client()
        request = self._request(msgs)
        import openai

        attempt = 0
        while True:
            attempt += 1
            t0 = time.monotonic()
            try:
                completion = client.chat.completions.create(**request)
            except openai.APIStatusError as exc:
                status = getattr(exc, "status_code", None)
                body = self._body_excerpt(exc)
                if status is not None and 300 <= status < 400:
                    raise JudgeConfigError(
                        f"judge endpoint answered HTTP {status} redirecting to {self._location(exc)}: redirects are "
                        "not followed (give the configuration the final address, on an allowed host)", status=status
                    ) from None
                if status in CONFIG_STATUS:
                    raise JudgeConfigError(
                        f"judge endpoint refused model {self.model!r}: HTTP {status}{body}", status=status
                    ) from None
                refusal = json_mode_refusal(self.json_mode, status, getattr(exc, "body", None),
                                            _response_text(exc))
                if refusal:
                    raise JudgeConfigError(f"{refusal} (model {self.model!r}){body}", status=status) from None
                if status == 400 and _is_context_overflow(getattr(exc, "body", None), _response_text(exc)):
                    raise JudgeRequestError(
                        f"judge endpoint refused the prompt for model {self.model!r}: HTTP 400{body}: prompt and "
                        f"max_tokens ({self.max_tokens}) exceed the model's context; lower the configuration's "
                        "context size so that prompts are trimmed to fit", status=status) from None
                if status is not None and (status in RETRYABLE_STATUS or status >= 500):
                    if attempt <= self.max_retries:
                        delay = self._delay(attempt, exc)
                        logger.warning(
                            "judge %s: HTTP %s, retry %d/%d in %.2fs", self.model, status, attempt, self.max_retries, delay
                        )
                        self._sleep(delay)
                        continue
                    raise JudgeTransientError(
                        f"judge endpoint still failing for model {self.model!r} after {attempt} attempts: HTTP {status}{body}",
                        status=status,
                    ) from None
                raise JudgeRequestError(
                    f"judge endpoint rejected the request for model {self.model!r}: HTTP {status}{body}", status=status
                ) from None
            except (openai.APIConnectionError, openai.APITimeoutError) as exc:
                if isinstance(exc, openai.APITimeoutError) and not _connect_timeout(exc):
                    # the request reached the server, which is still working on it: sending it
                    # again would queue a second generation behind the first (never retried)
                    raise JudgeTransientError(
                        f"judge endpoint did not answer within {self.timeout:g} s for model {self.model!r} "
                        f"(read timeout, attempt {attempt}; not retried: the server may still be generating)"
                    ) from None
                kind = "connect timeout" if isinstance(exc, openai.APITimeoutError) else "connection error"
                if attempt <= self.max_retries:
                    delay = self._delay(attempt, None)
                    logger.warning("judge %s: %s, retry %d/%d in %.2fs", self.model, kind, attempt, self.max_retries, delay)
                    self._sleep(delay)
                    continue
                raise JudgeTransientError(
                    f"judge endpoint unreachable for model {self.model!r} after {attempt} attempts ({kind})"
                ) from None
            except openai.OpenAIError as exc:  # its text may carry the response: only its type
                raise JudgeRequestError(
                    f"judge call failed for model {self.model!r}: {type(exc).__name__}"
                ) from None
            latency = time.monotonic() - t0
            return self._response(completion, latency, attempt)

    def _response(self, completion: Any, latency: float, attempts: int) -> JudgeResponse:
        choices = getattr(completion, "choices", None) or []
        text = ""
        finish = None
        if choices:
            msg = getattr(choices[0], "message", None)
            text = (getattr(msg, "content", None) or "") if msg is not None else ""
            if not text and msg is not None:
                refusal = getattr(msg, "refusal", None)
                text = refusal or ""
            finish = getattr(choices[0], "finish_reason", None)
        usage = getattr(completion, "usage", None)
        tin = getattr(usage, "prompt_tokens", None) if usage is not None else None
        tout = getattr(usage, "completion_tokens", None) if usage is not None else None
        return JudgeResponse(
            text=text,
            tokens_in=tin,
            tokens_out=tout,
            latency_s=latency,
            model=getattr(completion, "model", None) or self.model,
            attempts=attempts,
            finish_reason=finish,
        )

    def _delay(self, attempt: int, exc: Any) -> float:
        delay = min(self.backoff_max, self.backoff_base * (2 ** (attempt - 1)))
        delay *= 0.5 + random.random() / 2  # jitter in [50 %, 100 %]
        retry_after = None
        try:
            headers = exc.response.headers if exc is not None else None
            if headers is not None:
                ra = headers.get("retry-after")
                if ra is not None:
                    retry_after = float(ra)
        except (AttributeError, TypeError, ValueError):
            retry_after = None
        if retry_after is not None and retry_after >= 0:
            delay = max(delay, min(retry_after, self.backoff_max))
        return delay

    def _location(self, exc: Any) -> str:
        """The ``Location`` header of a redirect answer, quoted and cut to 200 characters (the key
        redacted should an endpoint echo it), or ``(no location)``."""
        try:
            loc = exc.response.headers.get("location")
        except AttributeError:
            loc = None
        if not loc:
            return "(no location)"
        return repr(_redact(str(loc), self.__api_key)[:200])

    def _body_excerpt(self, exc: Any) -> str:
        """The error's ``type`` and ``code`` identifiers from an OpenAI-style JSON error body, e.g.
        ``" (invalid_request_error, invalid_api_key)"``; never the body's text: an endpoint may
        echo anything (a key it was sent, an internal page), and the message reaches pages and
        logs."""
        ids = []
        try:
            body = getattr(exc, "body", None)
            err = body.get("error", body) if isinstance(body, Mapping) else None
            if isinstance(err, Mapping):
                for k in ("type", "code"):
                    v = err.get(k)
                    if isinstance(v, str) and _IDENTIFIER.fullmatch(v) and v != self.__api_key:
                        ids.append(v)
        except Exception:  # noqa: BLE001 - best effort only
            ids = []
        return f" ({', '.join(ids)})" if ids else ""


# --------------------------------------------------------------------------------------------
# Error classification (deterministic refusals are not retried)
# --------------------------------------------------------------------------------------------


def _connect_timeout(exc: BaseException) -> bool:
    """Whether an ``openai.APITimeoutError`` was a timeout before the request reached the server
    (httpx's ``ConnectTimeout`` / ``PoolTimeout``, the SDK's cause), which is safe to retry; a
    read or write timeout is not."""
    cause = exc.__cause__ or exc.__context__
    return type(cause).__name__ in ("ConnectTimeout", "PoolTimeout")


def _response_text(exc: Any) -> str:
    """The error response's body text (at most 4000 characters), for classification only: it is
    never put into a message (an endpoint may echo anything)."""
    try:
        return str(exc.response.text or "")[:4000]
    except Exception:  # noqa: BLE001 - best effort only (a streamed or absent body)
        return ""


_JSON_MODE_WORDS = re.compile(r"response_format|json_schema|json_object|\bschema\b|grammar", re.I)
_CONTEXT_WORDS = re.compile(r"context[_ ]length|context window|maximum context|n_ctx|too many tokens|"
                            r"exceeds? the (?:model'?s )?context", re.I)


def json_mode_refusal(json_mode: str, status: int | None, body: Any, text: str = "") -> str | None:
    """Why an error answer means the server does not support ``json_mode``, or None.

    A 4xx/5xx answer to a request that carried a ``response_format`` whose error body (its
    ``message``/``type``/``code`` or the raw text) mentions ``response_format``, ``json_schema``,
    ``json_object``, ``schema`` or ``grammar`` is deterministic: llama-cpp-python's server answers
    ``json_schema`` with HTTP 500 (stack-notes: it wants ``json_object`` plus its own ``schema``),
    and retrying changes nothing. The sentence names the mode and the alternatives, e.g.
    ``judge endpoint refused json_mode 'json_schema' (HTTP 500): this server does not support it;
    choose another JSON mode (json_object, json_object_schema, none)``."""
    if json_mode == "none" or status is None or status < 400 or status in CONFIG_STATUS or status == 429:
        return None
    words = [text or ""]
    err = body.get("error", body) if isinstance(body, Mapping) else body
    if isinstance(err, Mapping):
        words += [str(err.get(k) or "") for k in ("message", "type", "code", "param", "detail")]
    elif isinstance(err, str):
        words.append(err)
    if not any(_JSON_MODE_WORDS.search(w) for w in words):
        return None
    others = ", ".join(m for m in JSON_MODES if m != json_mode)
    return (f"judge endpoint refused json_mode {json_mode!r} (HTTP {status}): this server does not support it; "
            f"choose another JSON mode ({others})")


def _is_context_overflow(body: Any, text: str = "") -> bool:
    """Whether a 400 answer says the prompt does not fit the model's context (OpenAI's
    ``context_length_exceeded`` code, or the words llama.cpp and vLLM use)."""
    words = [text or ""]
    err = body.get("error", body) if isinstance(body, Mapping) else body
    if isinstance(err, Mapping):
        words += [str(err.get(k) or "") for k in ("message", "type", "code")]
    elif isinstance(err, str):
        words.append(err)
    return any(_CONTEXT_WORDS.search(w) for w in words)
