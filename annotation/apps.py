from django.apps import AppConfig


class AnnotationConfig(AppConfig):
    name = "annotation"
    verbose_name = "Events, layers and tasks"

    def ready(self):
        """Start-up: remove the staging folders a killed import left under the data root."""
        from annotation.services.staging import sweep_staging

        sweep_staging()
