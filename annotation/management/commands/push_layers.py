"""manage.py push_layers [--json]

With a bucket (``STUDIO_STORAGE_URL``): copies the layer files of this machine's data root that the
bucket lacks to their keys (``annotation.services.imports.push_layers_to_bucket``): run it once on
the machine that holds the data root when turning the bucket on over layers imported before.
Idempotent. Exits 1 when a layer's file is neither in the bucket nor here.
"""
from __future__ import annotations

from studio.commands import PushToBucketCommand


class Command(PushToBucketCommand):
    help = "Upload the layer files the bucket lacks from this machine's data root (once, when turning the bucket on)."
    push = "annotation.services.imports:push_layers_to_bucket"
