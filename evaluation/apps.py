from django.apps import AppConfig

from studio.background import register_sweeper


class EvaluationConfig(AppConfig):
    name = "evaluation"
    verbose_name = "Agent runs, scoring and verdicts"

    def ready(self):
        """Plug evaluation into the layer below it (releases does not import evaluation, issue 19):
        each question of an exported release's sidecar carries its adjudication summary. The sweep
        of background jobs (``studio.background``) ends this app's lost judge jobs and run imports."""
        from evaluation.selectors.adjudication import release_adjudication, release_adjudications
        from evaluation.services.judge import JOB_KIND, sweep_judge_jobs
        from evaluation.services.runs import KIND, sweep_run_imports
        from releases.services.export import register_sidecar_field

        register_sidecar_field("adjudication", release_adjudication, batch=release_adjudications)
        register_sweeper(JOB_KIND, sweep_judge_jobs)
        register_sweeper(KIND, sweep_run_imports)
