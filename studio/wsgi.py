import os

from django.conf import settings
from django.core.signals import request_started
from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "studio.settings")
application = get_wsgi_application()

# A web process (gunicorn, runserver) sweeps background jobs whose worker died: at its first request
# and then every STUDIO_JOB_SWEEP_EVERY_S seconds of requests, on a thread of its own (studio/background.py).
from studio.background import maybe_sweep  # noqa: E402 — after the settings are configured

request_started.connect(maybe_sweep, dispatch_uid="studio.background.maybe_sweep")

# ... and is ready before its first request: views imported, templates compiled (studio/warmup.py).
if settings.STUDIO_WARM_UP:
    from studio.warmup import warm_up  # noqa: E402

    warm_up()
