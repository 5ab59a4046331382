"""A web process's warm-up: what its first request would otherwise pay, done before it serves one.

Django imports the URL configuration (and with it every view module and what they import: DRF,
rasterio, rio-tiler, pyproj, the storage's boto3) at the first request it resolves, and compiles
each template at its first use. Measured by ``bench/lists.py`` ("first visit after a restart"):
the URL configuration's import alone was 1.1 s of a first request on this 2-CPU machine. A server
built on ``studio.wsgi`` (gunicorn) calls :func:`warm_up` when it loads the application, before
its first request; ``manage.py runserver`` already imports the URL configuration at start (its
system checks). Off with ``STUDIO_WARM_UP=0``.
"""
from __future__ import annotations

import importlib
import logging
import time
from pathlib import Path

from kernel.paths import is_inside

logger = logging.getLogger(__name__)


def _template_names(directory: Path) -> list[str]:
    """Template names (paths relative to ``directory``, ``/``-separated) of every ``.html`` under it."""
    return sorted(p.relative_to(directory).as_posix() for p in directory.rglob("*.html"))


#: libraries that pages import when they first need them (so that commands start fast), imported by
#: a web process at its start: pandas (the leaderboard's CSV and parquet), matplotlib (the plots)
LAZY_IMPORTS = ("pandas", "matplotlib.figure")


def warm_up(*, templates: bool = True) -> dict:
    """Import the URL configuration with every view module (the error pages' included) and
    :data:`LAZY_IMPORTS`, then (``templates``) load every
    project template through the template engine (Django's cached loader keeps them compiled).
    The project's templates are those under ``TEMPLATES[0]["DIRS"]`` and under the ``templates``
    folder of each installed app of this repository (Django's own and third parties' are left to
    their first use). A template that fails to load is logged and left for its page to report.
    Returns ``{"urls_s": seconds, "templates": count, "templates_s": seconds}``."""
    from django.apps import apps
    from django.conf import settings
    from django.template import TemplateDoesNotExist, TemplateSyntaxError
    from django.template.loader import get_template
    from django.urls import get_resolver

    t0 = time.perf_counter()
    resolver = get_resolver()
    resolver.url_patterns  # noqa: B018 — the import of the URL configuration, views and all
    for status in (400, 403, 404, 500):  # the error pages' views (handler403 & co., named by path)
        resolver.resolve_error_handler(status)
    for name in LAZY_IMPORTS:
        importlib.import_module(name)
    urls_s = time.perf_counter() - t0
    n = 0
    if templates:
        root = settings.BASE_DIR
        folders = [Path(d) for d in settings.TEMPLATES[0].get("DIRS", [])]
        folders += [Path(app.path) / "templates" for app in apps.get_app_configs()
                    if is_inside(app.path, root)]
        seen: set[str] = set()
        for folder in folders:
            if not folder.is_dir():
                continue
            for name in _template_names(folder):
                if name in seen:
                    continue
                seen.add(name)
                try:
                    get_template(name)
                    n += 1
                except (TemplateDoesNotExist, TemplateSyntaxError) as exc:
                    logger.warning("warm-up: template %s did not load: %s", name, exc)
    return {"urls_s": round(urls_s, 3), "templates": n, "templates_s": round(time.perf_counter() - t0 - urls_s, 3)}
