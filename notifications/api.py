"""REST API of notifications and webhooks (included from ``studio/api_urls.py``). Thin: serializers
validate, services act, selectors read.

| method | path | what |
| --- | --- | --- |
| GET | /api/event-types/ | every event type with its payload version and keys (`studio.events.EVENT_TYPES`) |
| GET | /api/notifications/ | your notifications, newest first (`?unread=1`: only unread); cursor-paginated |
| POST | /api/notifications/read/ | mark read `{ids: [..]}` or all `{all: true}`; answers `{marked}` |
| GET, PUT | /api/notifications/settings/ | your settings `{muted: [event types], email: bool}` |
| GET, POST | /api/webhooks/ | your webhooks; register one `{url, event_types, secret?}` (maintainers; the secret is shown once, on creation) |
| GET, PATCH, DELETE | /api/webhooks/<id>/ | one webhook; change `{url?, event_types?, active?}`; delete |
| POST | /api/webhooks/<id>/ping/ | queue a `webhook.ping` delivery (202) |
| GET | /api/webhooks/<id>/deliveries/ | its deliveries with every attempt, newest first; cursor-paginated |
| POST | /api/webhook-deliveries/<id>/redeliver/ | send a delivery again (same body and `webhook-id`; 202) |
"""
from __future__ import annotations

from django.urls import path
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response

from notifications import selectors as sel
from notifications import services as svc
from studio.api_views import APIView
from studio.events import EVENT_TYPES
from studio.pagination import CursorPagination


class EventTypeOut(serializers.Serializer):
    name = serializers.CharField()
    version = serializers.IntegerField()
    keys = serializers.ListField(child=serializers.CharField())
    what = serializers.CharField()


class NotificationOut(serializers.Serializer):
    id = serializers.IntegerField()
    event_type = serializers.CharField()
    event_id = serializers.CharField()
    text = serializers.CharField()
    url = serializers.CharField()
    data = serializers.JSONField()
    created_at = serializers.DateTimeField()
    read_at = serializers.DateTimeField(allow_null=True)


class MarkReadIn(serializers.Serializer):
    ids = serializers.ListField(child=serializers.IntegerField(min_value=1), required=False, max_length=1000)
    all = serializers.BooleanField(required=False, default=False)


class SettingsIO(serializers.Serializer):
    muted = serializers.ListField(child=serializers.CharField(max_length=64), max_length=100)
    email = serializers.BooleanField()


class WebhookIn(serializers.Serializer):
    url = serializers.CharField(max_length=500)
    event_types = serializers.ListField(child=serializers.CharField(max_length=64), max_length=100)
    secret = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")


class WebhookPatchIn(serializers.Serializer):
    url = serializers.CharField(max_length=500, required=False)
    event_types = serializers.ListField(child=serializers.CharField(max_length=64), max_length=100, required=False)
    active = serializers.BooleanField(required=False)


class WebhookOut(serializers.Serializer):
    id = serializers.IntegerField()
    url = serializers.CharField()
    event_types = serializers.ListField(child=serializers.CharField())
    active = serializers.BooleanField()
    disabled_reason = serializers.CharField()
    consecutive_failures = serializers.IntegerField()
    owner = serializers.CharField(source="created_by.username")
    created_at = serializers.DateTimeField()


class AttemptOut(serializers.Serializer):
    at = serializers.DateTimeField()
    status_code = serializers.IntegerField(allow_null=True)
    duration_ms = serializers.IntegerField()
    error = serializers.CharField()
    response_excerpt = serializers.CharField()
    retry = serializers.BooleanField()


class DeliveryOut(serializers.Serializer):
    id = serializers.IntegerField()
    message_id = serializers.CharField()
    event_type = serializers.CharField()
    status = serializers.CharField()
    attempts = serializers.IntegerField()
    next_attempt_at = serializers.DateTimeField()
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    last_error = serializers.CharField()
    body = serializers.CharField()
    attempt_log = AttemptOut(many=True)


#: the event list as the schema documents it (one line per type: name, payload version, keys)
EVENTS_DOC = "Every event type (``studio.events.EVENT_TYPES``); a delivery's body is " \
    "``{id, type, version, occurred_at, data}`` with ``data`` holding the type's keys:\n\n" + "\n".join(
        f"- ``{e.name}`` v{e.version}: {', '.join(e.keys)} ({e.what})" for e in EVENT_TYPES.values())


class EventTypesView(APIView):
    @extend_schema(responses=EventTypeOut(many=True), description=EVENTS_DOC)
    def get(self, request):
        return Response(EventTypeOut([{"name": e.name, "version": e.version, "keys": list(e.keys), "what": e.what}
                                      for e in EVENT_TYPES.values()], many=True).data)


class NotificationListView(APIView):
    pagination_class = CursorPagination

    @extend_schema(responses=NotificationOut(many=True))
    def get(self, request):
        qs = sel.notifications_of(request.user, unread=request.query_params.get("unread") in ("1", "true"))
        return self.paginated(qs, NotificationOut)


class MarkedOut(serializers.Serializer):
    marked = serializers.IntegerField()


class MarkReadView(APIView):
    @extend_schema(request=MarkReadIn, responses=MarkedOut)
    def post(self, request):
        data = MarkReadIn(data=request.data)
        data.is_valid(raise_exception=True)
        ids = None if data.validated_data["all"] else data.validated_data.get("ids", [])
        return Response({"marked": svc.mark_read(request.user, ids)})


class SettingsView(APIView):
    @extend_schema(responses=SettingsIO)
    def get(self, request):
        row = svc.setting_of(request.user)
        return Response(SettingsIO({"muted": row.muted, "email": row.email}).data)

    @extend_schema(request=SettingsIO, responses=SettingsIO)
    def put(self, request):
        data = SettingsIO(data=request.data)
        data.is_valid(raise_exception=True)
        row = svc.save_settings(request.user, **data.validated_data)
        return Response(SettingsIO({"muted": row.muted, "email": row.email}).data)


class WebhookListView(APIView):
    pagination_class = CursorPagination

    @extend_schema(responses=WebhookOut(many=True))
    def get(self, request):
        return self.paginated(sel.webhooks_of(request.user), WebhookOut)

    @extend_schema(request=WebhookIn, responses={201: WebhookOut})
    def post(self, request):
        data = WebhookIn(data=request.data)
        data.is_valid(raise_exception=True)
        hook = svc.create_webhook(request.user, **data.validated_data)
        return Response({**WebhookOut(hook).data, "secret": hook.secret}, status=status.HTTP_201_CREATED)


class WebhookDetailView(APIView):
    @extend_schema(responses=WebhookOut)
    def get(self, request, pk: int):
        return Response(WebhookOut(sel.webhook(request.user, pk)).data)

    @extend_schema(request=WebhookPatchIn, responses=WebhookOut)
    def patch(self, request, pk: int):
        data = WebhookPatchIn(data=request.data)
        data.is_valid(raise_exception=True)
        hook = svc.update_webhook(request.user, sel.webhook(request.user, pk), **data.validated_data)
        return Response(WebhookOut(hook).data)

    @extend_schema(responses={204: None})
    def delete(self, request, pk: int):
        svc.delete_webhook(request.user, sel.webhook(request.user, pk))
        return Response(status=status.HTTP_204_NO_CONTENT)


class WebhookPingView(APIView):
    @extend_schema(request=None, responses={202: DeliveryOut})
    def post(self, request, pk: int):
        d = svc.ping(request.user, sel.webhook(request.user, pk))
        return Response(DeliveryOut(sel.deliveries(d.webhook).get(pk=d.pk)).data, status=status.HTTP_202_ACCEPTED)


class DeliveryListView(APIView):
    pagination_class = CursorPagination

    @extend_schema(responses=DeliveryOut(many=True))
    def get(self, request, pk: int):
        return self.paginated(sel.deliveries(sel.webhook(request.user, pk)), DeliveryOut)


class RedeliverView(APIView):
    @extend_schema(request=None, responses={202: DeliveryOut})
    def post(self, request, pk: int):
        d = svc.redeliver(request.user, sel.delivery(request.user, pk))
        return Response(DeliveryOut(sel.deliveries(d.webhook).get(pk=d.pk)).data, status=status.HTTP_202_ACCEPTED)


urlpatterns = [
    path("event-types/", EventTypesView.as_view(), name="api-event-types"),
    path("notifications/", NotificationListView.as_view(), name="api-notifications"),
    path("notifications/read/", MarkReadView.as_view(), name="api-notifications-read"),
    path("notifications/settings/", SettingsView.as_view(), name="api-notification-settings"),
    path("webhooks/", WebhookListView.as_view(), name="api-webhooks"),
    path("webhooks/<int:pk>/", WebhookDetailView.as_view(), name="api-webhook"),
    path("webhooks/<int:pk>/ping/", WebhookPingView.as_view(), name="api-webhook-ping"),
    path("webhooks/<int:pk>/deliveries/", DeliveryListView.as_view(), name="api-webhook-deliveries"),
    path("webhook-deliveries/<int:pk>/redeliver/", RedeliverView.as_view(), name="api-webhook-redeliver"),
]
