"""Writes of the notifications app: the event handler (in-app notifications, e-mail, the webhook
outbox), webhooks and their deliveries (``docs/notifications.md``).

* :func:`handle_event` is registered with ``studio.events`` and runs in the emitting service's
  transaction: it writes one :class:`Notification` per receiver and one :class:`WebhookDelivery` per
  subscribed webhook (the outbox), and asks for the e-mails and the sends after commit.
* :func:`send_delivery` is the background job (``STUDIO_JUDGE_RUNNER``: celery, thread or inline;
  ``notifications/jobs.py``): it claims one due delivery (worker tag and heartbeat,
  ``studio.background``), makes one signed attempt, logs it and schedules the next one.
* :func:`sweep_deliveries` is this app's sweeper (``studio.background.sweep_jobs``): deliveries
  whose worker died go back to pending, and due ones are sent — so a killed worker loses none;
  then :func:`prune` deletes what the retention settings let go.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import http.client
import json
import logging
import secrets
import socket
import time
import uuid
from collections.abc import Iterable
from datetime import timedelta
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from annotation.models import TaskComment
from evaluation.background import dispatch
from evaluation.blind import sees_verdicts, shows_agent
from kernel.egress import resolve_checked, url_problem
from kernel.errors import InvalidInput
from notifications import jobs
from notifications.models import Notification, NotificationSetting, Webhook, WebhookAttempt, WebhookDelivery
from studio.background import job_running, worker_lost, worker_tag
from studio.events import EVENT_TYPES, EventType, emit
from studio.permissions import Action, owner_ids, require, roles_for

logger = logging.getLogger(__name__)

KIND = "webhook-delivery"  # the job kind (studio.background)
EXCERPT_CHARS = 300  # the most characters of a response body an attempt keeps
RETRY_STATUSES = frozenset({408, 429})  # and every 5xx: the Standard Webhooks / CVAT retry rule
USER_AGENT = "BenchmarkStudio-Webhooks/1"


# ------------------------------------------------------------------ receivers and what they see

def _users_with_roles(roles: Iterable[str]):
    return list(get_user_model().objects.filter(is_active=True, groups__name__in=list(roles)).distinct())


def _users(ids: Iterable[int]):
    ids = {i for i in ids if i is not None}
    return list(get_user_model().objects.filter(is_active=True, pk__in=ids)) if ids else []


def receivers(event_type: str, data: dict, context: dict) -> list:
    """The people event ``event_type`` concerns (active users; the actor is dropped later):

    - ``task.submitted``: the reviewers (roles granted ``task.review``/``task.return``) but the task's owners;
    - ``task.returned``/``task.approved``: the task's owners (creator, author of the head revision);
    - ``task.commented``: its owners and everyone who commented on it;
    - ``replay.failed``/``gold.changed``: the task's owners and who started the replay (``context["user"]``);
    - ``release.published``: the maintainers (``release.publish``);
    - ``run.scored``: the maintainers (``run.import``) and who imported it;
    - ``adjudication.needed``: the adjudicators (``verdict.adjudicate``);
    - ``judge.finished``/``judge.failed``/``judge.paused``, ``experiment.finished``/``experiment.stopped``: who started
      the job or experiment; ``webhook.disabled``: its owner.
    """
    task = context.get("task")
    if event_type == "task.submitted":
        owners = owner_ids(task)
        return [u for u in _users_with_roles(set(roles_for(Action.TASK_REVIEW)) | set(roles_for(Action.TASK_RETURN)))
                if u.pk not in owners]
    if event_type in ("task.returned", "task.approved"):
        return _users(owner_ids(task))
    if event_type == "task.commented":
        commenters = TaskComment.objects.filter(task_id=task.pk).values_list("author_id", flat=True)
        return _users(set(owner_ids(task)) | set(commenters))
    if event_type in ("replay.failed", "gold.changed"):
        user = context.get("user")
        return _users(set(owner_ids(task) if task is not None else ()) | {getattr(user, "pk", None)})
    if event_type == "release.published":
        return _users_with_roles(roles_for(Action.RELEASE_PUBLISH))
    if event_type == "run.scored":
        extra = _users([getattr(context.get("user"), "pk", None)])
        return list({u.pk: u for u in _users_with_roles(roles_for(Action.RUN_IMPORT)) + extra}.values())
    if event_type == "adjudication.needed":
        return _users_with_roles(roles_for(Action.VERDICT_ADJUDICATE))
    if event_type in ("judge.finished", "judge.failed", "judge.paused", "webhook.disabled", "experiment.finished",
                      "experiment.stopped"):
        return _users([getattr(context.get("user"), "pk", None)])
    return []


def visible_data(user, event_type: str, data: dict, context: dict) -> dict:
    """``data`` as ``user`` may see it (blind scoring, ``evaluation.blind`` is the one rule): for an
    event about a record (``context["record"]``) the ``agent`` is None unless
    :func:`evaluation.blind.shows_agent`, and the disagreement ``reasons`` (they tell the verdicts)
    None unless :func:`evaluation.blind.sees_verdicts`. Other events carry nothing blind."""
    record = context.get("record")
    if record is None:
        return dict(data)
    out = dict(data)
    if "agent" in out and not shows_agent(user, record):
        out["agent"] = None
    if "reasons" in out and not sees_verdicts(user, record):
        out["reasons"] = None
    return out


def describe(event_type: str, d: dict) -> tuple[str, str]:
    """``(text, url)`` of a notification of ``event_type`` with payload ``d`` (already cut to what its
    receiver sees): one sentence for the bell's list and the e-mail subject, and the page it opens."""
    q = d.get("question_id") or f"task {d.get('task_id')}"
    task_url = f"/tasks/{d['task_id']}/" if d.get("task_id") else ""
    if event_type == "task.submitted":
        return f"{d.get('actor')} submitted {q} for review", task_url
    if event_type == "task.returned":
        return f"{d.get('actor')} returned {q}: {d.get('reason')}", task_url
    if event_type == "task.approved":
        return f"{d.get('actor')} approved {q}", task_url
    if event_type == "task.commented":
        return f"{d.get('actor')} commented on {q}: {d.get('body')}", task_url
    if event_type == "replay.failed":
        return f"the replay of {q} failed: {d.get('error')}", task_url
    if event_type == "gold.changed":
        return f"the replay of {q} changed its gold answer: the change waits for acceptance", task_url
    if event_type == "release.published":
        return (f"{d.get('actor')} published release {d.get('version')} ({d.get('n_tasks')} tasks, "
                f"digest {str(d.get('manifest_sha256') or '')[:12]})", f"/releases/{d.get('version')}/")
    if event_type == "run.scored":
        return f"run {d.get('name')} of {d.get('agent')} was imported and scored", f"/runs/{d.get('run_id')}/"
    if event_type == "adjudication.needed":
        why = f": {'; '.join(d['reasons'])}" if d.get("reasons") else ""
        return f"the verdicts of {d.get('question_id')} disagree and wait for adjudication{why}", "/adjudication/"
    if event_type in ("judge.finished", "judge.failed"):
        return (f"judge job {d.get('job_id')} ({d.get('config')}) {d.get('status')}: {d.get('n_ok')} ok, "
                f"{d.get('n_failed')} failed", f"/judge/jobs/{d.get('job_id')}/")
    if event_type == "judge.paused":
        return (f"judge job {d.get('job_id')} ({d.get('config')}) paused after {d.get('n_ok')} ok: "
                f"{d.get('reason')}; resume the configuration, then run the job again", f"/judge/jobs/{d.get('job_id')}/")
    if event_type in ("experiment.finished", "experiment.stopped"):
        why = f": {d.get('reason')}" if d.get("reason") else ""
        return (f"experiment {d.get('experiment_id')} ({d.get('agent')}) {d.get('status')}{why}: {d.get('n_done')} of "
                f"{d.get('n_questions')} questions, {d.get('n_errors')} errors", f"/experiments/{d.get('experiment_id')}/")
    if event_type == "webhook.disabled":
        return f"your webhook to {d.get('url')} was disabled: {d.get('reason')}", f"/webhooks/{d.get('webhook_id')}/"
    return event_type, ""


def setting_of(user) -> NotificationSetting:
    """``user``'s notification settings (defaults — nothing muted, e-mail on — when never saved; unsaved)."""
    return NotificationSetting.objects.filter(user=user).first() or NotificationSetting(user=user)


# ------------------------------------------------------------------ the event handler

def handle_event(spec: EventType, data: dict, context: dict) -> None:
    """The ``studio.events`` handler: in the caller's transaction, write a notification for every
    receiver (:func:`receivers`, not the actor, not those who muted the type) with what they may see
    (:func:`visible_data`), and an outbox row for every active webhook subscribed to the type (its
    body cut to what the webhook's owner may see); after commit, send the e-mails and hand the
    deliveries to the background runner."""
    event_id = f"evt_{uuid.uuid4().hex}"
    occurred = timezone.now()
    actor_id = getattr(context.get("actor"), "pk", None)
    people = [u for u in receivers(spec.name, data, context) if u.pk != actor_id]
    prefs = {s.user_id: s for s in NotificationSetting.objects.filter(user__in=[u.pk for u in people])}
    rows, mails = [], []
    for user in people:
        pref = prefs.get(user.pk)
        if pref is not None and spec.name in (pref.muted or []):
            continue
        seen = visible_data(user, spec.name, data, context)
        text, url = describe(spec.name, seen)
        rows.append(Notification(user=user, event_type=spec.name, event_id=event_id, text=text[:500], url=url, data=seen))
        if user.email and (pref is None or pref.email):
            mails.append((user.email, text[:200], url))
    Notification.objects.bulk_create(rows)
    hooks = [w for w in Webhook.objects.filter(active=True).select_related("created_by") if spec.name in (w.event_types or [])]
    ids = []
    for hook in hooks:
        body = event_body(event_id, spec, visible_data(hook.created_by, spec.name, data, context), occurred)
        ids.append(WebhookDelivery.objects.create(webhook=hook, message_id=f"msg_{uuid.uuid4().hex}", event_type=spec.name,
                                                  body=body, next_attempt_at=occurred).pk)
    if mails:
        transaction.on_commit(lambda: _send_mails(mails))
    if ids:
        transaction.on_commit(lambda: [start_delivery(i) for i in ids], robust=True)  # a failed hand-off: the sweep sends it


def event_body(event_id: str, spec: EventType, data: dict, occurred) -> str:
    """The JSON body of a delivery: ``{"id", "type", "version", "occurred_at", "data"}`` (compact, UTF-8)."""
    return json.dumps({"id": event_id, "type": spec.name, "version": spec.version,
                       "occurred_at": occurred.isoformat().replace("+00:00", "Z"), "data": data},
                      separators=(",", ":"), ensure_ascii=False, default=str)


def _send_mails(mails: list[tuple[str, str, str]]) -> None:
    for address, text, url in mails:
        try:
            send_mail(f"[studio] {text[:120]}", f"{text}\n\n{url}", settings.DEFAULT_FROM_EMAIL, [address])
        except Exception:  # noqa: BLE001 — a mail server's trouble must not fail the request
            logger.exception("notification e-mail to %s not sent", address)


# ------------------------------------------------------------------ notifications (a person's own)

def mark_read(user, ids: Iterable[int] | None = None) -> int:
    """Mark ``user``'s notifications ``ids`` (all unread ones when None) read; returns how many changed.
    Another person's ids are ignored (a notification is only its receiver's)."""
    qs = Notification.objects.filter(user=user, read_at__isnull=True)
    if ids is not None:
        qs = qs.filter(pk__in=list(ids))
    return qs.update(read_at=timezone.now())


def save_settings(user, *, muted: Iterable[str], email: bool) -> NotificationSetting:
    """Save ``user``'s muted event types (names of ``studio.events.EVENT_TYPES``; an unknown one
    raises :class:`InvalidInput` naming it) and e-mail choice."""
    muted = sorted(set(muted))
    unknown = [m for m in muted if m not in EVENT_TYPES]
    if unknown:
        raise InvalidInput(f"muted: unknown event type(s) {', '.join(unknown)}")
    row, _ = NotificationSetting.objects.update_or_create(user=user, defaults={"muted": muted, "email": bool(email)})
    return row


# ------------------------------------------------------------------ webhooks

def new_secret() -> str:
    """A Standard Webhooks secret: ``whsec_`` and the base64 of 24 random bytes."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()


def _secret_key(secret: str) -> bytes:
    raw = secret[len("whsec_"):] if secret.startswith("whsec_") else secret
    try:
        return base64.b64decode(raw, validate=True)
    except ValueError:
        return secret.encode()


def sign(secret: str, message_id: str, timestamp: int, body: str) -> str:
    """The ``webhook-signature`` header of the Standard Webhooks spec (standardwebhooks.com):
    ``v1,`` and the base64 HMAC-SHA256, keyed with the secret's bytes (base64 after ``whsec_``), of
    ``"{message_id}.{timestamp}.{body}"``."""
    mac = hmac.new(_secret_key(secret), f"{message_id}.{timestamp}.{body}".encode(), hashlib.sha256)
    return "v1," + base64.b64encode(mac.digest()).decode()


def _check_hook(url: str, event_types: Iterable[str]) -> list[str]:
    problem = url_problem(url, settings.STUDIO_WEBHOOK_ALLOWED_HOSTS)
    if problem:
        raise InvalidInput(problem)
    parts = urlsplit(url)
    _, problem = resolve_checked(parts.hostname, parts.port or (443 if parts.scheme == "https" else 80),
                                 settings.STUDIO_WEBHOOK_PRIVATE_HOSTS)
    if problem:
        raise InvalidInput(f"url: {problem}")
    types = sorted(set(event_types))
    unknown = [t for t in types if t not in EVENT_TYPES]
    if unknown or not types:
        raise InvalidInput(f"event_types: {'unknown ' + ', '.join(unknown) if unknown else 'choose at least one'}")
    return types


@transaction.atomic
def create_webhook(user, *, url: str, event_types: Iterable[str], secret: str = "") -> Webhook:
    """Register a webhook of ``user`` (``webhook.create``, maintainers). ``url`` must pass the egress
    rules (``kernel.egress``: allowed host, no private address unless that host is allowed one);
    ``secret`` blank: one is made (:func:`new_secret`). Raises ``PermissionDenied``,
    :class:`InvalidInput` naming the field."""
    require(user, Action.WEBHOOK_CREATE)
    types = _check_hook(url.strip(), event_types)
    if secret and len(secret) < 16:
        raise InvalidInput("secret: at least 16 characters (or leave it blank for one made here)")
    return Webhook.objects.create(created_by=user, url=url.strip(), event_types=types, secret=secret or new_secret())


@transaction.atomic
def update_webhook(user, hook: Webhook, *, url: str | None = None, event_types: Iterable[str] | None = None,
                   active: bool | None = None) -> Webhook:
    """Change a webhook (``webhook.manage``: its owner). A new URL or event list is checked as on
    creation (egress rules); switching it on or off alone is not (a host that no longer resolves can
    still be disabled). Re-activating one resets its failure count."""
    require(user, Action.WEBHOOK_MANAGE, hook)
    hook = Webhook.objects.select_for_update().get(pk=hook.pk)
    if url is not None or event_types is not None:
        hook.event_types = _check_hook((url if url is not None else hook.url).strip(),
                                       event_types if event_types is not None else hook.event_types)
        hook.url = (url if url is not None else hook.url).strip()
    if active is not None:
        hook.active = bool(active)
        if active:
            hook.consecutive_failures, hook.disabled_reason = 0, ""
    hook.save()
    return hook


@transaction.atomic
def delete_webhook(user, hook: Webhook) -> None:
    """Delete a webhook and its delivery log (``webhook.manage``)."""
    require(user, Action.WEBHOOK_MANAGE, hook)
    hook.delete()


@transaction.atomic
def ping(user, hook: Webhook) -> WebhookDelivery:
    """Queue a ``webhook.ping`` delivery to ``hook`` (``webhook.manage``), sent after commit."""
    require(user, Action.WEBHOOK_MANAGE, hook)
    spec = EVENT_TYPES["webhook.ping"]
    body = event_body(f"evt_{uuid.uuid4().hex}", spec, {"webhook_id": hook.pk, "actor": user.get_username()}, timezone.now())
    d = WebhookDelivery.objects.create(webhook=hook, message_id=f"msg_{uuid.uuid4().hex}", event_type=spec.name,
                                       body=body, next_attempt_at=timezone.now())
    transaction.on_commit(lambda: start_delivery(d.pk), robust=True)
    return d


@transaction.atomic
def redeliver(user, delivery: WebhookDelivery) -> WebhookDelivery:
    """Send ``delivery`` again (``webhook.manage`` on its webhook): a new outbox row with the same
    body and ``webhook-id`` (a receiver that saw it already can tell), sent after commit."""
    require(user, Action.WEBHOOK_MANAGE, delivery.webhook)
    d = WebhookDelivery.objects.create(webhook=delivery.webhook, message_id=delivery.message_id,
                                       event_type=delivery.event_type, body=delivery.body, next_attempt_at=timezone.now())
    transaction.on_commit(lambda: start_delivery(d.pk), robust=True)
    return d


# ------------------------------------------------------------------ sending (the background job)

def start_delivery(delivery_id: int):
    """Hand delivery ``delivery_id`` to the background runner (``evaluation.background.dispatch``)."""
    return dispatch(delivery_id, send_delivery, jobs.send_webhook, crashed, kind=KIND)


def crashed(delivery_id: int, exc: Exception) -> None:
    """A crashed attempt's job: back to pending (the sweep or the next run sends it again)."""
    WebhookDelivery.objects.filter(pk=delivery_id, status=WebhookDelivery.Status.SENDING).update(
        status=WebhookDelivery.Status.PENDING, worker="", last_error=f"worker crashed: {type(exc).__name__}"[:300])


def backoff_s(attempts: int) -> float:
    """Seconds before the next attempt after ``attempts`` (≥ 1) failed ones: ``STUDIO_WEBHOOK_BACKOFF_S``
    × 2^(attempts−1), at most ``STUDIO_WEBHOOK_BACKOFF_MAX_S`` (30 s, 1, 2, 4 … min, then every 4 h)."""
    return min(float(settings.STUDIO_WEBHOOK_BACKOFF_S) * 2 ** max(0, attempts - 1),
               float(settings.STUDIO_WEBHOOK_BACKOFF_MAX_S))


def should_retry(status: int | None) -> bool:
    """Whether an attempt that ended with HTTP ``status`` (None: no answer — refused, reset, timeout)
    is retried: no answer, 5xx, 408 and 429 are; 2xx succeeded; every other status (4xx, and 3xx:
    redirects are never followed) is final."""
    return status is None or status >= 500 or status in RETRY_STATUSES


def _excerpt(text: str, secret: str) -> str:
    text = text[:EXCERPT_CHARS * 2]
    for s in {secret, secret[len("whsec_"):] if secret.startswith("whsec_") else ""}:
        if s:
            text = text.replace(s, "[secret]")
    return text[:EXCERPT_CHARS]


def post(url: str, body: str, headers: dict[str, str], *, timeout: float) -> tuple[int | None, str, str]:
    """POST ``body`` to ``url`` under the egress rules: ``(status or None, response excerpt, error)``.
    The host is checked (``kernel.egress.url_problem``, ``resolve_checked``) and the connection made
    to the address that was checked (no second lookup: no DNS rebinding between check and call);
    ``http.client`` never follows a redirect."""
    problem = url_problem(url, settings.STUDIO_WEBHOOK_ALLOWED_HOSTS)
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    address = None
    if not problem:
        address, problem = resolve_checked(parts.hostname, port, settings.STUDIO_WEBHOOK_PRIVATE_HOSTS)
    if problem:
        raise EgressRefused(problem)
    cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = cls(parts.hostname, port, timeout=timeout)
    conn._create_connection = lambda addr, *a, **k: socket.create_connection((address, addr[1]), *a, **k)
    try:
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        conn.request("POST", path, body=body.encode(), headers=headers)
        resp = conn.getresponse()
        text = resp.read(EXCERPT_CHARS * 2).decode("utf-8", "replace")
        return resp.status, text, ""
    except (OSError, http.client.HTTPException) as exc:
        return None, "", f"{type(exc).__name__}: {exc}"[:300]
    finally:
        conn.close()


class EgressRefused(Exception):
    """The egress rules refuse the webhook's URL now (a setting or the host's addresses changed)."""


def send_delivery(delivery_id: int) -> WebhookDelivery | None:
    """The background job: claim delivery ``delivery_id`` if it is pending and due (status
    ``sending``, this worker's tag, a heartbeat while it runs), make one signed attempt, log it
    (:class:`WebhookAttempt`) and set the delivery succeeded, failed (a final status, an egress
    refusal, or retried for ``STUDIO_WEBHOOK_RETRY_FOR_S``) or pending again with its next attempt
    (:func:`backoff_s`). A webhook with ``STUDIO_WEBHOOK_DISABLE_AFTER`` failed attempts in a row is
    disabled and its owner notified (``webhook.disabled``). Returns the delivery, or None when it was
    not due or another worker holds it."""
    def claim() -> int:
        now = timezone.now()
        return WebhookDelivery.objects.filter(pk=delivery_id, status=WebhookDelivery.Status.PENDING,
                                              next_attempt_at__lte=now).update(
            status=WebhookDelivery.Status.SENDING, worker=worker_tag(), heartbeat_at=now)

    def beat():
        WebhookDelivery.objects.filter(pk=delivery_id, status=WebhookDelivery.Status.SENDING).update(heartbeat_at=timezone.now())

    with job_running(KIND, delivery_id, beat, claim=claim) as claimed:
        if not claimed:
            return None
        d = WebhookDelivery.objects.select_related("webhook").get(pk=delivery_id)
        hook = d.webhook
        if not hook.active:
            status, text, error, retry = None, "", f"the webhook is disabled ({hook.disabled_reason or 'by its owner'})", False
            ms = 0
        else:
            ts = int(time.time())
            headers = {"content-type": "application/json", "user-agent": USER_AGENT, "webhook-id": d.message_id,
                       "webhook-timestamp": str(ts), "webhook-signature": sign(hook.secret, d.message_id, ts, d.body)}
            start = time.monotonic()
            try:
                status, text, error = post(hook.url, d.body, headers, timeout=float(settings.STUDIO_WEBHOOK_TIMEOUT_S))
                retry = should_retry(status)
            except EgressRefused as exc:
                status, text, error, retry = None, "", f"refused by the egress rules: {exc}", False
            ms = int((time.monotonic() - start) * 1000)
    return _record_attempt(d, status, _excerpt(text, hook.secret), error, retry, ms)


@transaction.atomic
def _record_attempt(d: WebhookDelivery, status: int | None, excerpt: str, error: str, retry: bool, ms: int) -> WebhookDelivery:
    ok = status is not None and 200 <= status < 300
    now = timezone.now()
    give_up = now - d.created_at >= timedelta(seconds=float(settings.STUDIO_WEBHOOK_RETRY_FOR_S))
    WebhookAttempt.objects.create(delivery=d, status_code=status, duration_ms=ms, error=error[:300],
                                  response_excerpt=excerpt, retry=not ok and retry and not give_up)
    d.attempts += 1
    d.worker, d.heartbeat_at = "", None
    d.last_error = "" if ok else (error or f"HTTP {status}")[:300]
    if ok:
        d.status, d.finished_at = WebhookDelivery.Status.SUCCEEDED, now
    elif retry and not give_up:
        d.status, d.next_attempt_at = WebhookDelivery.Status.PENDING, now + timedelta(seconds=backoff_s(d.attempts))
    else:
        d.status, d.finished_at = WebhookDelivery.Status.FAILED, now
    d.save(update_fields=["attempts", "worker", "heartbeat_at", "last_error", "status", "next_attempt_at", "finished_at"])
    hook = Webhook.objects.select_for_update().get(pk=d.webhook_id)
    if ok:
        Webhook.objects.filter(pk=hook.pk).update(consecutive_failures=0)
    elif hook.active:
        hook.consecutive_failures = F("consecutive_failures") + 1
        hook.save(update_fields=["consecutive_failures"])
        hook.refresh_from_db()
        if hook.consecutive_failures >= int(settings.STUDIO_WEBHOOK_DISABLE_AFTER):
            _disable(hook, f"{hook.consecutive_failures} failed attempts in a row (last: {d.last_error})")
    return d


def _disable(hook: Webhook, reason: str) -> None:
    hook.active, hook.disabled_reason = False, reason[:300]
    hook.save(update_fields=["active", "disabled_reason"])
    emit("webhook.disabled", {"webhook_id": hook.pk, "url": hook.url, "reason": hook.disabled_reason},
         user=hook.created_by)


def sweep_deliveries(stale_after: float) -> list[dict]:
    """This app's sweeper (``studio.background.register_sweeper``): a ``sending`` delivery whose
    worker is lost (:func:`studio.background.worker_lost`) goes back to pending (it is sent again:
    at least once, the receiver de-duplicates by ``webhook-id``); then every pending delivery that
    is due is handed to the runner. Returns one row per re-queued delivery."""
    out = []
    for d in WebhookDelivery.objects.filter(status=WebhookDelivery.Status.SENDING):
        why = worker_lost(KIND, d.pk, d.worker, d.heartbeat_at or d.created_at, stale_after=stale_after)
        if not why:
            continue
        n = WebhookDelivery.objects.filter(pk=d.pk, status=WebhookDelivery.Status.SENDING, worker=d.worker).update(
            status=WebhookDelivery.Status.PENDING, worker="", heartbeat_at=None, last_error=f"worker lost: {why}"[:300])
        if n:
            out.append({"kind": KIND, "id": d.pk, "action": "requeued", "why": why, "removed": []})
    due = list(WebhookDelivery.objects.filter(status=WebhookDelivery.Status.PENDING, next_attempt_at__lte=timezone.now())
               .order_by("next_attempt_at").values_list("pk", flat=True)[:500])
    for pk in due:
        start_delivery(pk)
    pruned = prune(timezone.now())
    if any(pruned.values()):
        logger.info("notifications pruned: %s", pruned)
    return out


def prune(now) -> dict[str, int]:
    """Delete what the retention settings let go, as of ``now`` (an aware datetime): read
    notifications whose ``read_at`` is older than ``STUDIO_NOTIFICATION_RETENTION_DAYS`` days (an
    unread notification is never pruned, however old), and finished deliveries (succeeded or
    failed) whose ``finished_at`` is older than ``STUDIO_WEBHOOK_LOG_RETENTION_DAYS`` days, with
    their attempts. A setting of 0 keeps everything of its kind; pending and sending deliveries are
    never pruned. Called by the sweep (:func:`sweep_deliveries`). Returns
    ``{"notifications": n, "deliveries": m}``, the rows deleted of each kind."""
    out = {"notifications": 0, "deliveries": 0}
    days = settings.STUDIO_NOTIFICATION_RETENTION_DAYS
    if days > 0:
        out["notifications"] = Notification.objects.filter(
            read_at__isnull=False, read_at__lt=now - timedelta(days=days)).delete()[1].get(
            Notification._meta.label, 0)
    days = settings.STUDIO_WEBHOOK_LOG_RETENTION_DAYS
    if days > 0:
        finished = (WebhookDelivery.Status.SUCCEEDED, WebhookDelivery.Status.FAILED)
        out["deliveries"] = WebhookDelivery.objects.filter(
            status__in=finished, finished_at__lt=now - timedelta(days=days)).delete()[1].get(
            WebhookDelivery._meta.label, 0)
    return out


def send_due() -> int:
    """Send every pending delivery that is due, in this process (``manage.py send_webhooks``; the
    sweep does it through the runner). Returns how many attempts were made."""
    n = 0
    for pk in WebhookDelivery.objects.filter(status=WebhookDelivery.Status.PENDING, next_attempt_at__lte=timezone.now()
                                             ).order_by("next_attempt_at").values_list("pk", flat=True):
        if send_delivery(pk) is not None:
            n += 1
    return n


__all__ = ["handle_event", "receivers", "visible_data", "describe", "mark_read", "save_settings", "create_webhook",
           "update_webhook", "delete_webhook", "ping", "redeliver", "send_delivery", "sweep_deliveries", "send_due", "prune",
           "sign", "should_retry", "backoff_s"]
