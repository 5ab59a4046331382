"""Reads of the notifications app: a person's notifications, their unread count, webhooks and deliveries."""
from __future__ import annotations

from django.db.models import QuerySet

from kernel.errors import NotFound
from notifications.models import Notification, Webhook, WebhookDelivery
from studio.permissions import Action, can


def notifications_of(user, *, unread: bool = False) -> QuerySet:
    """``user``'s notifications, newest first (``unread``: only those not read)."""
    qs = Notification.objects.filter(user_id=user.pk)
    return qs.filter(read_at__isnull=True) if unread else qs


def unread_count(user) -> int:
    """How many of ``user``'s notifications are unread (one ``COUNT`` on the (user, read_at) index;
    0 for an anonymous user, without a query)."""
    if not getattr(user, "is_authenticated", False):
        return 0
    return Notification.objects.filter(user_id=user.pk, read_at__isnull=True).count()


def webhooks_of(user) -> QuerySet:
    """The webhooks ``user`` may see: their own (a superuser: all)."""
    qs = Webhook.objects.select_related("created_by")
    return qs if user.is_superuser else qs.filter(created_by_id=user.pk)


def webhook(user, pk: int) -> Webhook:
    """Webhook ``pk`` if ``user`` may manage it (``webhook.manage``), else :class:`NotFound`
    (another maintainer's webhook is not told apart from a missing one)."""
    hook = Webhook.objects.select_related("created_by").filter(pk=pk).first()
    if hook is None or not can(user, Action.WEBHOOK_MANAGE, hook):
        raise NotFound(f"webhook {pk}: not found")
    return hook


def deliveries(hook: Webhook) -> QuerySet:
    """``hook``'s deliveries, newest first, with their attempts prefetched."""
    return WebhookDelivery.objects.filter(webhook=hook).prefetch_related("attempt_log")


def delivery(user, pk: int) -> WebhookDelivery:
    """Delivery ``pk`` if ``user`` may manage its webhook, else :class:`NotFound`."""
    d = WebhookDelivery.objects.select_related("webhook").filter(pk=pk).first()
    if d is None or not can(user, Action.WEBHOOK_MANAGE, d.webhook):
        raise NotFound(f"delivery {pk}: not found")
    return d
