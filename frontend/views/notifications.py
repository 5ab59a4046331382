"""Notification and webhook pages: your notifications (paginated, mark read, settings), your webhooks
(register, deliveries with every attempt, ping, redeliver).

Thin: services (``notifications.services``) act, selectors (``notifications.selectors``) read; the
forms go to the same services as the API (``notifications/api.py``).
"""
from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST, require_safe

from kernel.errors import DomainError, NotFound
from notifications import selectors as sel
from notifications import services as svc
from studio.events import EVENT_TYPES
from studio.pagination import InvalidCursor, paginate
from studio.permissions import Action, can

PAGE_SIZE = 25
#: the event types a person can be notified of (a ping goes to webhooks only)
PERSONAL_TYPES = tuple(t for t in EVENT_TYPES if t != "webhook.ping")


@require_safe
def notification_list_page(request):
    """GET: your notifications, newest first, 25 a page (``?cursor=``), with your settings."""
    try:
        page = paginate(request.GET, sel.notifications_of(request.user), page_size=PAGE_SIZE)
    except InvalidCursor as exc:
        raise Http404(str(exc)) from None
    pref = svc.setting_of(request.user)
    types = [{"name": e.name, "what": e.what, "muted": e.name in (pref.muted or [])} for e in EVENT_TYPES.values()
             if e.name in PERSONAL_TYPES]
    return render(request, "frontend/notifications.html", {"page": page, "types": types, "email": pref.email})


@require_POST
def notification_read(request, pk: int | None = None):
    """POST: mark one notification read (``pk``) or all of them; then open its page (``?open=1``)
    or come back to the list."""
    if pk is None:
        svc.mark_read(request.user)
        return redirect("notifications")
    svc.mark_read(request.user, [pk])
    n = sel.notifications_of(request.user).filter(pk=pk).first()
    if n is not None and request.POST.get("open") and n.url.startswith("/"):
        return redirect(n.url)
    return redirect("notifications")


@require_POST
def notification_settings(request):
    """POST: save which event types you hear of (unchecked: muted) and whether by e-mail too."""
    wanted = set(request.POST.getlist("types"))
    try:
        svc.save_settings(request.user, muted=[t for t in PERSONAL_TYPES if t not in wanted],
                          email=request.POST.get("email") == "on")
        messages.success(request, "Notification settings saved.")
    except DomainError as exc:
        messages.error(request, str(exc))
    return redirect("notifications")


def webhook_list_page(request):
    """GET: your webhooks; POST: register one (URL, event types, secret or blank for one made here;
    the secret is shown once)."""
    if request.method == "POST":
        try:
            hook = svc.create_webhook(request.user, url=request.POST.get("url", ""),
                                      event_types=request.POST.getlist("event_types"),
                                      secret=request.POST.get("secret", "").strip())
        except (DomainError, PermissionDenied) as exc:
            messages.error(request, str(exc))
            return redirect("webhooks")
        messages.success(request, f"Webhook registered. Its secret (shown once): {hook.secret}")
        return redirect("webhook-detail", pk=hook.pk)
    return render(request, "frontend/webhooks.html", {
        "hooks": list(sel.webhooks_of(request.user)), "types": list(EVENT_TYPES.values()),
        "can_create": can(request.user, Action.WEBHOOK_CREATE)})


@require_safe
def webhook_detail_page(request, pk: int):
    """GET: a webhook of yours with its latest 50 deliveries and every attempt of each."""
    try:
        hook = sel.webhook(request.user, pk)
    except NotFound as exc:
        raise Http404(str(exc)) from None
    return render(request, "frontend/webhook_detail.html", {
        "hook": hook, "deliveries": list(sel.deliveries(hook)[:50]), "types": list(EVENT_TYPES.values())})


@require_POST
def webhook_action(request, pk: int, action: str):
    """POST: ``ping``, ``enable``, ``disable`` or ``delete`` webhook ``pk``."""
    try:
        hook = sel.webhook(request.user, pk)
        if action == "ping":
            svc.ping(request.user, hook)
            messages.success(request, "Ping queued.")
        elif action in ("enable", "disable"):
            svc.update_webhook(request.user, hook, active=action == "enable")
        elif action == "delete":
            svc.delete_webhook(request.user, hook)
            return redirect("webhooks")
        else:
            raise Http404(action)
    except NotFound as exc:
        raise Http404(str(exc)) from None
    except DomainError as exc:
        messages.error(request, str(exc))
    return redirect("webhook-detail", pk=pk)


@require_POST
def delivery_redeliver(request, pk: int):
    """POST: send delivery ``pk`` again (same body and ``webhook-id``)."""
    try:
        d = sel.delivery(request.user, pk)
    except NotFound as exc:
        raise Http404(str(exc)) from None
    svc.redeliver(request.user, d)
    messages.success(request, "Redelivery queued.")
    return redirect("webhook-detail", pk=d.webhook_id)
