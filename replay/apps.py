from django.apps import AppConfig

from studio.background import register_sweeper


class ReplayConfig(AppConfig):
    name = "replay"
    verbose_name = "Tools and replay"

    def ready(self):
        """Plug replay into the layer below it (annotation does not import replay, issue 19): QC
        reads a task's replays through ``ReplaySource``, and submitting for review requires a
        succeeded replay of the head revision (a registered submission check)."""
        from annotation.services.qc import ReplaySource, register_replay_source
        from annotation.services.review import register_submission_check
        from replay.services import (REPLAY_KIND, artifact_path, require_succeeded_replay, succeeded_runs_of_head,
                                     sweep_replays)

        register_replay_source(ReplaySource(succeeded_runs=succeeded_runs_of_head, artifact_path=artifact_path))
        register_submission_check(require_succeeded_replay)
        register_sweeper(REPLAY_KIND, sweep_replays)  # the sweep of background jobs re-queues stuck replays
