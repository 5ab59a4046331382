from django.apps import AppConfig
from django.conf import settings

from studio.background import register_sweeper


class ReleasesConfig(AppConfig):
    name = "releases"
    verbose_name = "Releases"

    def ready(self) -> None:
        """The sweep of background jobs (``studio.background``) ends this app's lost exports; annotation
        (below releases) asks which layer versions releases pin: the import keeps their files, a replay
        of a released task reads them (``annotation.services.layer_versions``). A malformed ``STUDIO_STORAGE_URL`` is refused here, at
        start (``ImproperlyConfigured``), not at the first export."""
        from annotation.services.layer_versions import register_pin_reader
        from releases.services.pins import task_layer_pins, version_is_pinned
        from releases.services.release_export import EXPORT_KIND, sweep_export_jobs
        from studio.storage import parse_storage_url

        parse_storage_url(settings.STUDIO_STORAGE_URL)  # a malformed STUDIO_STORAGE_URL fails at start
        register_sweeper(EXPORT_KIND, sweep_export_jobs)
        register_pin_reader(is_pinned=version_is_pinned, task_pins=task_layer_pins)


class ReleasesToolServerConfig(ReleasesConfig):
    """The releases app of a tool server process (``studio.settings.TOOL_SERVER_APPS``, ``manage.py
    mcp_serve``): only the pin reader, which a released task's layers are read through
    (``replay.services.layers.task_layers``); not the export sweeper (the export services and their
    Celery job), which a tool server never runs."""

    default = False

    def ready(self) -> None:
        """Register the pin reader (``annotation.services.layer_versions``) only."""
        from annotation.services.layer_versions import register_pin_reader
        from releases.services.pins import task_layer_pins, version_is_pinned

        register_pin_reader(is_pinned=version_is_pinned, task_pins=task_layer_pins)
