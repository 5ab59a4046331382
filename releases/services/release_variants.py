"""Robustness variants in a release (issue 21): written beside the benchmark's files, read back.

A release may pin variant tasks (``TaskVariant``) beside plain ones. The benchmark's loader reads
``tasks/t*.json`` and must load the plain tasks unchanged, so variants never enter those files:

    tasks/…, images/…                  the plain tasks, byte for byte what a release without the
                                       variants writes (same writer, same entries)
    variants/tasks/t*.json             the variant tasks in the same benchmark layout (one sample per
                                       variant, ``<base sample id>_<kind suffix>``; their gold replays)
    variants/images/<path>             every file their input_data names (an unreadable image too)
    studio_manifest.json               ``questions`` lists the variant questions too (file
                                       ``variants/tasks/…``); ``variants`` describes each one:

    "variants": {"<question id>": {
        "kind": "extraneous" | "broken" | "unsolvable", "params": {...}, "tools": {removed,
        distractors, broken} (TaskVariant.tools: the tool-set changes an agent is served),
        "base_question_id": str, "base_revision": int (the base task's revision the variant was
        made from, numbered as in the studio that authored it: see :func:`authored_number`),
        "gold": {"answer": "refusal" | "base plan", "final_answer": {...},
                 "check": ReplayRun.variant_check (where an unsolvable plan stops; the broken
                          step replayed with the alternative) or null}}}

The release digest (``Release.manifest_sha256``, ``content_sha256``) covers every file the folder
ships, ``variants/`` included (``export.folder_digest``); the legacy digest of releases published
before that (``export.content_digest``) covered ``variants/tasks/`` as well as ``tasks/``.

``import_release_dir`` reads ``variants/`` like ``tasks/`` (same checks, events, layers, import
replays; an unreadable image is not imported as a layer, ``is_unreadable_file``) and
:func:`link_imported_variants` makes the ``TaskVariant`` rows (and the unreadable layers of a
``visual_inaccessible`` variant, ``annotation.services.variants.unreadable_layers``): each linked to its
base task (in the release or already in the studio) at the revision :func:`authored_number`
matches, its import replay carrying the sidecar's ``gold.check``.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

from django.conf import settings

from annotation.models import Task, TaskRevision, TaskVariant
from annotation.services.variants import is_unreadable_file, unreadable_layers
from kernel.content import CONTENT_FIELDS
from kernel.taskfile import from_storage, same_value, source_from_text, to_storage
from releases.models import Release, ReleaseTask
from releases.services.export import (
    Entry,
    ExportError,
    LayoutWriter,
    SortedEntries,
    content_digest,
    copy_schemas,
    folder_files,
)

__all__ = ["VARIANTS_DIR", "is_unreadable_file", "split_entries", "write_layout", "release_files", "variants_section",
           "authored_number", "link_imported_variants", "VariantReleaseError"]

#: the folder of a release that holds its variant tasks, in the benchmark's layout
VARIANTS_DIR = "variants"


class VariantReleaseError(ValueError):
    """A variant of a release folder cannot be linked: ``question_id`` and the reason."""

    def __init__(self, question_id: str, problem: str):
        self.question_id, self.problem = question_id, problem
        super().__init__(f"variants.{question_id}: {problem}")


def split_entries(entries: list[Entry] | SortedEntries) -> tuple[list[Entry] | SortedEntries, list[Entry]]:
    """``(plain, variants)``: the entries of variant tasks apart (one query; for
    :class:`SortedEntries`, one per 2,000 entries, and ``plain`` a view of the same spool, in its
    order, so that only the variant entries are held)."""
    if isinstance(entries, SortedEntries):
        variants = []
        for chunk in entries.chunks(2000):
            ids = set(TaskVariant.objects.filter(task_id__in=[e.task_id for e in chunk]).values_list("task_id", flat=True))
            variants.extend(e for e in chunk if e.task_id in ids)
        return entries.without({e.task_id for e in variants}, len(variants)), variants
    ids = set(TaskVariant.objects.filter(task_id__in=[e.task_id for e in entries]).values_list("task_id", flat=True))
    return [e for e in entries if e.task_id not in ids], [e for e in entries if e.task_id in ids]


def write_layout(out: Path, entries: list[Entry] | SortedEntries, *, release_id: int | None = None, progress=None,
                 images: bool = True, sidecar: bool = True, question_sink=None):
    """Write ``entries`` into ``out``: the plain ones as ``LayoutWriter`` always did, the variant
    ones under ``out/variants/`` in the same layout. Returns ``(result, variant_entries)``: the
    plain writer's ``LayoutResult`` with the variants' files (``variants/…``), question metadata
    (``file`` under ``variants/``), events and missing images merged in and ``content_sha256``
    over both (``export.content_digest``). ``question_sink(question_id, meta)``: as
    ``LayoutWriter``'s (each question's metadata handed over as it is written instead of kept: the
    streamed manifest), a variant's ``file`` under ``variants/``. ``ExportError`` as ``LayoutWriter``."""
    plain, variants = split_entries(entries)
    result = LayoutWriter(out, images=images, sidecar=sidecar, release_id=release_id, progress=progress,
                          question_sink=question_sink).write(plain)
    if variants:
        sink = None if question_sink is None else (
            lambda q, m: question_sink(q, {**m, "file": f"{VARIANTS_DIR}/{m['file']}"}))
        extra = LayoutWriter(out / VARIANTS_DIR, images=images, sidecar=sidecar, release_id=release_id,
                             question_sink=sink).write(variants)
        result.files.update({f"{VARIANTS_DIR}/{k}": v for k, v in extra.files.items()})
        result.questions.update({q: {**m, "file": f"{VARIANTS_DIR}/{m['file']}"} for q, m in extra.questions.items()})
        for slug, info in extra.events.items():
            result.events.setdefault(slug, info)
        for path, m in extra.missing.items():
            mine = result.missing.setdefault(path, {**m, "question_ids": []})
            mine["question_ids"].extend(q for q in m["question_ids"] if q not in mine["question_ids"])
        result.content_sha256 = content_digest(result.files)
    return result, variants


def release_files(entries: list[Entry] | SortedEntries, *, release_id: int | None) -> dict[str, dict]:
    """``{relative path: {bytes, sha256}}`` of every file an export of ``entries`` ships but the
    sidecar: task files, gold polygons, images (at the layer versions ``release_id`` pins),
    schemas, variants; written to a temporary folder under the data root and checked to be all the
    folder holds. What ``publish_release`` records (``ReleaseFile``; the digest
    ``export.folder_digest`` of it). ``ExportError`` as ``write_layout``."""
    with tempfile.TemporaryDirectory(dir=Path(settings.STUDIO_DATA_ROOT)) as tmp:
        result, _ = write_layout(Path(tmp), entries, release_id=release_id, sidecar=False)
        files = dict(result.files)
        copy_schemas(Path(tmp), files)
        unlisted = sorted(set(folder_files(Path(tmp))) - set(files))
        if unlisted:  # the writer put a file in the folder without hashing it: never ship it unchecked
            raise ExportError(f"{unlisted[0]}: written without a checksum")
        return files


def authored_number(rev: TaskRevision) -> int:
    """The number of ``rev`` in the studio that authored it: for a revision imported from a
    release with a sidecar, and unchanged since (its content equal to the imported content), the
    sidecar's revision number kept in ``TaskRevision.source`` (``provenance.revision``); else its
    own ``number``. So a variant's ``base_revision`` survives an export → import → export."""
    try:
        record = source_from_text(rev.source)
    except ValueError:
        record = None
    if isinstance(record, dict):
        number = (record.get("provenance") or {}).get("revision")
        content = record.get("content")
        if isinstance(number, int) and isinstance(content, dict) and all(
                same_value(to_storage(content.get(k)), getattr(rev, k)) for k in CONTENT_FIELDS if k in content):
            return number
    return rev.number


def variants_section(release: Release, variant_entries: list[Entry]) -> dict:
    """The sidecar's ``variants`` (module docstring) for the variant entries of ``release``."""
    if not variant_entries:
        return {}
    ids = [e.task_id for e in variant_entries]
    rows = TaskVariant.objects.filter(task_id__in=ids).select_related("task", "base_task", "base_revision")
    gold = {r["task_id"]: r for r in ReleaseTask.objects.filter(release=release, task_id__in=ids)
            .values("task_id", "replay__final_answer", "replay__variant_check")}
    out = {}
    for v in sorted(rows, key=lambda v: v.task.question_id):
        g = gold.get(v.task_id) or {}
        out[v.task.question_id] = {
            "kind": v.kind, "params": v.params, "tools": v.tools,
            "base_question_id": v.base_task.question_id, "base_revision": authored_number(v.base_revision),
            "gold": {"answer": "refusal" if v.kind == TaskVariant.Kind.UNSOLVABLE else "base plan",
                     "final_answer": from_storage(g.get("replay__final_answer")),
                     "check": g.get("replay__variant_check")},
        }
    return out


def link_imported_variants(user, section: dict, imported: dict[str, tuple[Task, int, int]]) -> list[str]:
    """Make the ``TaskVariant`` row of each imported variant question (``section``: the sidecar's
    ``variants``; ``imported``: question id → (task, revision id, import replay id) of this
    import). The base task is found by question id (imported now or already in the studio), its
    revision by :func:`authored_number` (the base's head when no revision matches, which
    happens only for a base edited since); an import replay without a check gets ``gold.check``. A variant row
    that exists already is left as it is. Returns the question ids linked. Raises
    :class:`VariantReleaseError` for a variant whose base task is nowhere or that is no variant
    question of the folder."""
    linked = []
    for qid, info in sorted(section.items()):
        if qid not in imported:
            raise VariantReleaseError(qid, f"described in the sidecar but not a question of {VARIANTS_DIR}/tasks/")
        task, _rev_id, run_id = imported[qid]
        base = Task.objects.filter(question_id=info.get("base_question_id")).select_related("head").first()
        if base is None or base.head_id is None:
            raise VariantReleaseError(qid, f"its base task {info.get('base_question_id')!r} is neither in this "
                                           "release nor in the studio; import the release that holds it first")
        revs = list(TaskRevision.objects.filter(task=base).order_by("-number"))
        base_rev = next((r for r in revs if authored_number(r) == info.get("base_revision")), base.head)
        if info.get("kind") == TaskVariant.Kind.UNSOLVABLE and (info.get("params") or {}).get("strategy") == "visual_inaccessible":
            unreadable_layers(base, (info.get("params") or {}).get("replaced") or {})
        check = (info.get("gold") or {}).get("check")
        if check is not None:  # the import replay made now (a gold replay the studio ran keeps its own)
            task.replays.filter(pk=run_id, variant_check__isnull=True).update(variant_check=check)
        if TaskVariant.objects.filter(task=task).exists():
            continue
        TaskVariant.objects.create(task=task, base_task=base, base_revision=base_rev, kind=info.get("kind"),
                                   params=info.get("params") or {}, tools=info.get("tools") or {}, created_by=user)
        linked.append(qid)
    return linked
