"""Service functions for robustness variants: the one place where a variant task is made.

A variant (``annotation.variants``: extraneous, broken, unsolvable) is a task of its own, created
through ``tasks.create_task`` from the content of an approved (or released) base task's head
revision, with a ``TaskVariant`` row naming its base task, base revision, kind, parameters and tool
set. Making the same variant twice (same base revision, kind and parameters) returns the first.
The variant starts as a draft and goes through QC and review like any task.
"""
from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

from django.conf import settings
from django.db import transaction

from annotation import variants as spec_maker
from annotation.models import Layer, Task, TaskVariant
from annotation.services.tasks import CONTENT_FIELDS, create_task
from kernel.tools.spec import all_tools
from studio import storage
from studio.permissions import Action, require

__all__ = ["tool_catalogue", "create_variant", "unreadable_layers", "is_unreadable_file", "VariantError", "UNREADABLE_BYTES"]

VariantError = spec_maker.VariantError

#: statuses a base task must have: variants are made from reviewed gold only
BASE_STATUSES = (Task.Status.APPROVED, Task.Status.RELEASED)
#: the bytes of an unreadable image (``visual_inaccessible``): no image format starts so
UNREADABLE_BYTES = b"STUDIO-UNREADABLE-IMAGE\x00" * 8


def tool_catalogue() -> dict[str, dict]:
    """``{dotted name: {description, params: [{name, type, required}], server}}`` of the registry."""

    return {name: {"description": spec.description, "server": spec.server,
                   "params": [{"name": p.name, "type": p.type, "required": p.required} for p in spec.params]}
            for name, spec in all_tools().items()}


def _sample_suffix(kind: str, params: dict) -> str:
    if kind == "extraneous":
        return f"ext{params['n']}s{params['seed']}"
    if kind == "broken":
        return f"brk{params['step']}"
    return "uns" + "".join(w[0] for w in params["strategy"].split("_"))


def is_unreadable_file(path: Path) -> bool:
    """True for a file holding exactly ``UNREADABLE_BYTES`` (a ``visual_inaccessible`` image)."""
    try:
        return path.stat().st_size == len(UNREADABLE_BYTES) and path.read_bytes() == UNREADABLE_BYTES
    except OSError:
        return False


def unreadable_layers(base: Task, replaced: dict[str, str]) -> None:
    """One layer per replaced image (``{original file name: unreadable file name}``) in the base
    task's event: the same frame, phase and modality, an unreadable file stored under
    ``STUDIO_DATA_ROOT/variants/<event>/``. Idempotent (an existing layer of that name stays)."""
    root = Path(settings.STUDIO_DATA_ROOT)
    folder = root / "variants" / base.event.slug
    folder.mkdir(parents=True, exist_ok=True)
    for original, new in replaced.items():
        source = base.event.layers.filter(file_name=original).first()
        path = folder / new
        path.write_bytes(UNREADABLE_BYTES)
        if storage.uses_bucket():  # where every machine reads layers (this folder is a cache then)
            storage.write_bytes(path.relative_to(root).as_posix(), UNREADABLE_BYTES)
        Layer.objects.get_or_create(
            event=base.event, file_name=new,
            defaults=dict(name=f"{source.name if source else original} (unreadable)", kind=Layer.Kind.RASTER,
                          modality=source.modality if source else "", phase=source.phase if source else "",
                          frame=source.frame if source else Layer.Frame.PIXEL,
                          path=str(path.relative_to(root)), sha256=hashlib.sha256(UNREADABLE_BYTES).hexdigest(),
                          metadata={"unreadable": True, "replaces": original}))


#: ``hook(user, variant)`` run once a new variant is committed; apps above annotation register
#: theirs from ``AppConfig.ready`` (replay starts the variant's gold replay, so that its page
#: follows a replay from the start instead of "No succeeded replay yet")
_VARIANT_MADE_HOOKS: list[Callable] = []


def register_variant_made_hook(hook: Callable) -> None:
    """Add ``hook(user, variant: TaskVariant)`` to what runs after a new variant is committed
    (once: a second registration of the same function is ignored, as ``ready()`` may run twice)."""
    if hook not in _VARIANT_MADE_HOOKS:
        _VARIANT_MADE_HOOKS.append(hook)


def _variant_made(user, variant: TaskVariant) -> None:
    for hook in _VARIANT_MADE_HOOKS:
        hook(user, variant)


@transaction.atomic
def create_variant(user, base: Task, kind: str, **params) -> tuple[TaskVariant, bool]:
    """Make one variant of ``base`` (see ``annotation.variants.make_variant`` for ``params``).

    Returns ``(variant, created)``; an identical earlier variant is returned with ``created``
    False. Raises ``VariantError`` when the base task is not approved or released or the
    parameters do not fit its gold plan, ``PermissionDenied`` without the role to create tasks.
    The permission is checked first: a refused request writes nothing (no row, and no unreadable
    image under ``STUDIO_DATA_ROOT/variants/``).
    """
    require(user, Action.TASK_CREATE)
    base = Task.objects.select_related("head", "event").get(pk=base.pk)
    if base.status not in BASE_STATUSES or base.head is None:
        raise VariantError(f"task {base.question_id} is {base.status}: variants are made from approved or released tasks")
    head = base.head
    content = {k: getattr(head, k) for k in CONTENT_FIELDS}
    spec = spec_maker.make_variant(content, kind, tool_catalogue(), **params)
    info = spec["variant"]
    existing = TaskVariant.objects.filter(base_revision=head, kind=kind, params=info["params"]).first()
    if existing is not None:
        return existing, False
    if kind == "unsolvable" and info["params"].get("strategy") == "visual_inaccessible":
        unreadable_layers(base, info["params"]["replaced"])
    sample_id = f"{base.sample_id}_{_sample_suffix(kind, info['params'])}"
    k = 2
    while Task.objects.filter(question_id=f"{sample_id}_task{base.task_index}").exists():
        sample_id, k = f"{base.sample_id}_{_sample_suffix(kind, info['params'])}-{k}", k + 1
    task = create_task(user, base.event, dimension=base.dimension, content=spec["content"], sample_id=sample_id,
                       task_index=base.task_index, message=f"{kind} variant of {base.question_id} (revision {head.number})")
    variant = TaskVariant.objects.create(task=task, base_task=base, base_revision=head, kind=kind,
                                         params=info["params"], tools=info["tools"], created_by=user)
    transaction.on_commit(lambda: _variant_made(user, variant))
    return variant, True
