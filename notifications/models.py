"""Notifications for people and webhooks for systems (``docs/notifications.md``).

``Notification``: one event as one person receives it (the text and link already cut to what they
may see). ``NotificationSetting``: a person's muted event types and e-mail choice. ``Webhook``: a
maintainer's endpoint (URL, event types, secret). ``WebhookDelivery``: the outbox — one row per
(webhook, event), written in the event's transaction and sent after commit by a background job;
``WebhookAttempt``: every try of a delivery (status, duration, response excerpt).
"""
from __future__ import annotations

from django.conf import settings
from django.db import models


class Notification(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notifications")
    event_type = models.CharField(max_length=64)
    event_id = models.CharField(max_length=40)  # the event's id (same for every receiver of one event)
    text = models.CharField(max_length=500)
    url = models.CharField(max_length=300, blank=True, default="")
    data = models.JSONField(default=dict)  # the payload as this receiver may see it
    created_at = models.DateTimeField(auto_now_add=True)
    read_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["user", "read_at"], name="notif_user_unread")]


class NotificationSetting(models.Model):
    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notification_setting")
    muted = models.JSONField(default=list)  # event type names this person does not want
    email = models.BooleanField(default=True)  # also by e-mail (when the person has an address)


class Webhook(models.Model):
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="webhooks")  # its owner
    url = models.URLField(max_length=500)
    event_types = models.JSONField(default=list)
    secret = models.CharField(max_length=200)  # "whsec_" + base64 of the key (Standard Webhooks)
    active = models.BooleanField(default=True)
    disabled_reason = models.CharField(max_length=300, blank=True, default="")
    consecutive_failures = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]


class WebhookDelivery(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending"
        SENDING = "sending"
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="deliveries")
    message_id = models.CharField(max_length=60)  # webhook-id: the same on every retry and redelivery
    event_type = models.CharField(max_length=64)
    body = models.TextField()  # the exact bytes signed and sent (UTF-8 JSON)
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField()
    worker = models.CharField(max_length=120, blank=True, default="")
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    last_error = models.CharField(max_length=300, blank=True, default="")

    class Meta:
        ordering = ["-id"]
        indexes = [models.Index(fields=["status", "next_attempt_at"], name="whdelivery_due")]


class WebhookAttempt(models.Model):
    delivery = models.ForeignKey(WebhookDelivery, on_delete=models.CASCADE, related_name="attempt_log")
    at = models.DateTimeField(auto_now_add=True)
    status_code = models.IntegerField(null=True)  # None: no HTTP answer (refused, timeout, egress)
    duration_ms = models.IntegerField(default=0)
    error = models.CharField(max_length=300, blank=True, default="")
    response_excerpt = models.CharField(max_length=500, blank=True, default="")
    retry = models.BooleanField(default=False)

    class Meta:
        ordering = ["id"]
