from django.apps import AppConfig

from studio.background import register_sweeper


class ExperimentsConfig(AppConfig):
    name = "experiments"
    verbose_name = "Experiments: agents run by the studio"

    def ready(self):
        """The sweep of background jobs (``studio.background``) ends experiments whose worker died."""
        from experiments.services import KIND, sweep_experiments

        register_sweeper(KIND, sweep_experiments)
