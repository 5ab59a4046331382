"""Notification and webhook pages. Include from ``frontend/urls.py``."""
from django.urls import path

from frontend.views import notifications as v

urlpatterns = [
    path("notifications/", v.notification_list_page, name="notifications"),
    path("notifications/read/", v.notification_read, name="notifications-read-all"),
    path("notifications/<int:pk>/read/", v.notification_read, name="notification-read"),
    path("notifications/settings/", v.notification_settings, name="notification-settings"),
    path("webhooks/", v.webhook_list_page, name="webhooks"),
    path("webhooks/<int:pk>/", v.webhook_detail_page, name="webhook-detail"),
    path("webhooks/<int:pk>/<str:action>/", v.webhook_action, name="webhook-action"),
    path("webhook-deliveries/<int:pk>/redeliver/", v.delivery_redeliver, name="delivery-redeliver"),
]
