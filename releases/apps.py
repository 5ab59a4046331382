from django.apps import AppConfig

from studio.background import register_sweeper


class ReleasesConfig(AppConfig):
    name = "releases"
    verbose_name = "Releases"

    def ready(self):
        """The sweep of background jobs (``studio.background``) ends this app's lost exports."""
        from releases.services.releases import EXPORT_KIND, sweep_export_jobs

        register_sweeper(EXPORT_KIND, sweep_export_jobs)
