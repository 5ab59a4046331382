"""Celery tasks of the notifications app (without a broker they run eagerly, in-process)."""
from __future__ import annotations

from celery import shared_task

from studio.background import run_guarded


@shared_task(acks_late=True, name="notifications.send_webhook")
def send_webhook(delivery_id: int) -> dict:
    """Make the due attempt of :class:`~notifications.models.WebhookDelivery` ``delivery_id``
    (:func:`notifications.services.send_delivery`; a crash puts it back to pending); returns its state."""
    from notifications.models import WebhookDelivery
    from notifications.services import KIND, crashed, send_delivery

    run_guarded(KIND, delivery_id, send_delivery, crashed, close=False)
    d = WebhookDelivery.objects.get(pk=delivery_id)
    return {"delivery": d.pk, "status": d.status, "attempts": d.attempts}
