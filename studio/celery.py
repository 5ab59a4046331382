"""The studio's Celery app. Without CELERY_BROKER_URL, tasks run eagerly in-process."""
import os

from celery import Celery
from celery.signals import worker_ready

from studio.background import sweep_jobs

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "studio.settings")

app = Celery("studio")
app.config_from_object("django.conf:settings", namespace="CELERY")
if not app.conf.broker_url:
    app.conf.broker_url = "memory://localhost/"
app.autodiscover_tasks(related_name="jobs")


@worker_ready.connect
def _sweep_at_worker_start(**_kwargs) -> None:
    """A starting worker ends the jobs a dead worker left (``studio.background.sweep_jobs``)."""
    sweep_jobs()
