from django.apps import AppConfig


class EvaluationConfig(AppConfig):
    name = "evaluation"
    verbose_name = "Agent runs, scoring and verdicts"

    def ready(self):
        """Plug evaluation into the layer below it (releases does not import evaluation, issue 19):
        each question of an exported release's sidecar carries its adjudication summary."""
        from evaluation.selectors import release_adjudication, release_adjudications
        from releases.services.export import register_sidecar_field

        register_sidecar_field("adjudication", release_adjudication, batch=release_adjudications)
