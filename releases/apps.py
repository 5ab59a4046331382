from django.apps import AppConfig


class ReleasesConfig(AppConfig):
    name = "releases"
    verbose_name = "Releases"

    def ready(self) -> None:
        # annotation (below releases) asks which layer versions releases pin: the import keeps
        # their files, a replay of a released task reads them (annotation.services.layer_versions)
        from annotation.services.layer_versions import register_pin_reader
        from releases.services.pins import task_layer_pins, version_is_pinned

        register_pin_reader(is_pinned=version_is_pinned, task_pins=task_layer_pins)
