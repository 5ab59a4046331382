from django.apps import AppConfig

from studio.background import register_sweeper


class ReplayConfig(AppConfig):
    name = "replay"
    verbose_name = "Tools and replay"

    def ready(self):
        """Plug replay into the layer below it (annotation does not import replay, issue 19): QC
        reads a task's replays through ``ReplaySource``, and submitting for review requires a
        succeeded replay of the head revision (a registered submission check); a new robustness
        variant's gold replay starts as it is made (a registered variant hook)."""
        from annotation.services.qc import ReplaySource, register_replay_source
        from annotation.services.review import register_submission_check
        from annotation.services.variants import register_variant_made_hook
        from replay.selectors import succeeded_runs_of_head
        from replay.services.gold import require_succeeded_replay
        from replay.services.layers import input_fingerprint
        from replay.services.paths import artifact_path
        from replay.services.runs import REPLAY_KIND, replay_new_variant, sweep_replays

        register_replay_source(ReplaySource(succeeded_runs=succeeded_runs_of_head, artifact_path=artifact_path,
                                            input_fingerprint=input_fingerprint))
        register_submission_check(require_succeeded_replay)
        register_variant_made_hook(replay_new_variant)
        register_sweeper(REPLAY_KIND, sweep_replays)  # the sweep of background jobs re-queues stuck replays


class ReplayToolServerConfig(ReplayConfig):
    """The replay app of a tool server process (``studio.settings.TOOL_SERVER_APPS``, ``manage.py
    mcp_serve``): its models, none of the hooks above. They serve QC, review, new variants and the
    sweep of replays, none of which a tool server runs, and loading them (the QC suite, the
    replay services and their Celery jobs) was a fifth of the server's start."""

    default = False

    def ready(self):
        """Nothing to register (see the class docstring)."""
