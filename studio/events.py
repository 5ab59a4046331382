"""The studio's events: one list of event types with versioned payloads, and the registry every layer
emits through (``docs/notifications.md``).

Lower layers (annotation, replay, releases, evaluation) must not import the notifications app, so
they call :func:`emit` here (``studio`` is importable by every layer and imports no layer); the
notifications app registers its handler in ``AppConfig.ready`` (:func:`register_handler`).

:func:`emit` runs the handlers **at once, inside the caller's transaction**: what they write (the
in-app notifications, the webhook outbox) commits or rolls back with the event itself, so a
returned task never lacks its notification and a rolled-back publish never sends a webhook. What
leaves the process (e-mail, HTTP deliveries) the handlers start with ``transaction.on_commit``.

Each payload is a flat JSON object whose keys are listed in :data:`EVENT_TYPES` with the payload's
``version``; a new key is a compatible change (same version), a removed or renamed key a new
version. Every delivered event carries ``{"id", "type", "version", "occurred_at", "data"}``.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)


class EventType:
    """One event type: ``name`` (``"task.returned"``), payload ``version`` (int), ``keys`` (the
    payload's keys, in order), ``what`` (one sentence for docs, settings and the API schema)."""

    __slots__ = ("name", "version", "keys", "what")

    def __init__(self, name: str, version: int, keys: tuple[str, ...], what: str):
        self.name, self.version, self.keys, self.what = name, version, keys, what

    def __repr__(self) -> str:
        return f"EventType({self.name!r}, v{self.version})"


_EXPERIMENT = ("experiment_id", "status", "agent", "n_questions", "n_done", "n_errors", "run_ids", "reason", "actor")
_TASK = ("task_id", "question_id", "dimension", "event", "actor", "revision")

#: every event type the studio emits, by name (the one list: settings, webhooks and docs read it)
EVENT_TYPES: dict[str, EventType] = {e.name: e for e in (
    EventType("task.submitted", 1, _TASK, "an author submitted a task for review"),
    EventType("task.returned", 1, _TASK + ("reason",), "a reviewer returned a task to its author, with the reason"),
    EventType("task.approved", 1, _TASK + ("reason",), "a reviewer approved a task"),
    EventType("task.commented", 1, _TASK + ("comment_id", "body", "step_index", "answer_field"),
              "someone commented on a task"),
    EventType("replay.failed", 1, ("replay_id", "task_id", "question_id", "error"), "a task's replay failed"),
    EventType("gold.changed", 1, ("replay_id", "task_id", "question_id"),
              "a replay's gold answer differs from the accepted gold and waits for acceptance"),
    EventType("release.published", 1, ("version", "manifest_sha256", "n_tasks", "actor", "download_path"),
              "a maintainer published a release (its manifest digest and where to download it)"),
    EventType("run.scored", 1, ("run_id", "name", "agent", "n_records", "dora_score", "actor"),
              "an agent run was imported and scored"),
    EventType("adjudication.needed", 1, ("record_id", "run_id", "agent", "question_id", "reasons"),
              "the verdicts of a record disagree and wait for an adjudicator"),
    EventType("judge.finished", 1, ("job_id", "status", "n_ok", "n_failed", "config", "actor"),
              "a judge job finished"),
    EventType("judge.failed", 1, ("job_id", "status", "n_ok", "n_failed", "config", "actor"),
              "a judge job failed or stopped"),
    EventType("judge.paused", 1, ("job_id", "status", "n_ok", "n_failed", "config", "actor", "reason"),
              "a judge job paused because its configuration was paused (the reason: a refused key, a "
              "configuration error); resuming the configuration and running the job again finishes it"),
    EventType("experiment.finished", 1, _EXPERIMENT, "an experiment ran every question and its runs were scored"),
    EventType("experiment.stopped", 1, _EXPERIMENT,
              "an experiment stopped before its end: its budget was reached, it was cancelled or it failed (reason)"),
    EventType("webhook.disabled", 1, ("webhook_id", "url", "reason"),
              "a webhook kept failing and was disabled (to its owner only)"),
    EventType("webhook.ping", 1, ("webhook_id", "actor"), "a test delivery asked for from the webhook's page or API"),
)}

#: ``handler(event_type, payload, context)``; ``context`` carries objects the handler may need to
#: choose receivers (``{"task": Task}``, ``{"record": RunRecord}``, …), never serialised
Handler = Callable[[EventType, dict, dict], Any]
_handlers: list[Handler] = []


def register_handler(handler: Handler) -> None:
    """Add ``handler`` (called by :func:`emit`); called in ``AppConfig.ready``, again: not added twice."""
    if handler not in _handlers:
        _handlers.append(handler)


def unregister_handler(handler: Handler) -> None:
    """Remove ``handler`` (tests)."""
    if handler in _handlers:
        _handlers.remove(handler)


def emit(event_type: str, payload: dict[str, Any], **context: Any) -> None:
    """Emit event ``event_type`` (a key of :data:`EVENT_TYPES`, else ``KeyError``) with ``payload``
    (JSON values; keys not listed for the type raise ``ValueError``, missing ones are ``None``).
    Every registered handler runs now, in the caller's transaction (their writes commit with the
    event); ``context`` are objects for choosing receivers. A handler's exception propagates: the
    event and what it concerns roll back together rather than one without the other."""
    spec = EVENT_TYPES[event_type]
    extra = set(payload) - set(spec.keys)
    if extra:
        raise ValueError(f"{event_type}: keys not in its payload v{spec.version}: {', '.join(sorted(extra))}")
    data = {k: payload.get(k) for k in spec.keys}
    for handler in list(_handlers):
        handler(spec, data, context)
