from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    name = "notifications"
    verbose_name = "Notifications and webhooks"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        """Hear every event (``studio.events``): the notifications and the webhook outbox are written
        in the event's transaction. The sweep of background jobs (``studio.background``) re-queues
        deliveries whose worker died and sends the ones whose retry is due."""
        from notifications.services import KIND, handle_event, sweep_deliveries
        from studio.background import register_sweeper
        from studio.events import register_handler

        register_handler(handle_event)
        register_sweeper(KIND, sweep_deliveries)
