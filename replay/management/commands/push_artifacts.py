"""manage.py push_artifacts [--json]

With a bucket (``STUDIO_STORAGE_URL``): copies the replay artifacts of this machine's content store
that the bucket lacks to their keys (``replay.services.artifacts.push_artifacts_to_bucket``): run it
once on the machine that holds ``STUDIO_ARTIFACT_ROOT`` when turning the bucket on over replays made
before. Idempotent. Exits 1 when an artifact a run or a step cache entry names is neither in the
bucket nor here (replay its task again to make it anew).
"""
from __future__ import annotations

from studio.commands import PushToBucketCommand


class Command(PushToBucketCommand):
    help = "Upload the replay artifacts the bucket lacks from this machine's artifact store (once, when turning the bucket on)."
    push = "replay.services.artifacts:push_artifacts_to_bucket"
