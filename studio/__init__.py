"""The studio's Django project. ``celery_app`` is the Celery app (``studio.celery``), loaded with
the project so that every ``@shared_task`` binds to it; not in a tool server process
(``STUDIO_APP_SET=tool-server``, ``manage.py mcp_serve``), which enqueues nothing and whose start
is paid on every tool call."""
import os

if os.environ.get("STUDIO_APP_SET") != "tool-server":
    from .celery import app as celery_app

    __all__ = ["celery_app"]
