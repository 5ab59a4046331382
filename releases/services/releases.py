"""Release services: create, edit (drafts only), publish, export (a background job) and import.

* A release pins tasks at given revisions and gold replays (``ReleaseTask``) and the version of
  every layer of their events (``ReleaseLayerPin``, ``releases.services.pins``). ``create_release``
  makes a draft of the approved (and already released) tasks at their head; ``publish_release``
  freezes it: every file an export ships (task files, gold polygons, images at the pinned layer
  versions, schemas, variants; not the sidecar) is produced once, each recorded with its SHA-256
  (``ReleaseFile``) and their digest (``export.folder_digest``) stored in
  ``Release.manifest_sha256``; its tasks become ``released``. A published release is never
  changed: the services raise :class:`ReleaseImmutableError`, and database triggers (migration
  0003) refuse UPDATE/DELETE of the rows themselves; a re-export that would ship a different file
  is refused (:func:`export_release`).
* ``start_export`` records a job (``STUDIO_DATA_ROOT/exports/<version>/<job id>/job.json``) and
  dispatches ``releases.jobs.export_release_job`` (in-process without a broker); the job writes
  the release folder with :func:`export_release` and a zip beside it.
* ``import_release_dir`` reads a benchmark folder in the same layout (with or without the sidecar)
  into events, layers, tasks, revisions and gold replays; idempotent and all-or-nothing.
* Robustness variants a release pins are written under ``variants/`` beside the benchmark's
  files and read back linked to their base tasks (``releases.services.release_variants``).

Permissions: ``release.export`` for creating, editing and exporting releases, ``release.publish``
(maintainers) for publishing one;
``data.import`` for an import by a user (the command line may import without one).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import uuid
import zipfile
from dataclasses import dataclass, field
from datetime import datetime
from datetime import timezone as dt_timezone
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Count, Max, Min
from django.utils import timezone
from django.utils.text import slugify

from annotation.errors import AnnotationConflict, AnnotationInputError
from annotation.models import Event, Layer, QcAcknowledgement, Task

from releases.models import Release, ReleaseFile, ReleaseTask
from releases.services.pins import pin_layers
from releases.selectors import exports_dir, release_entries
from releases.services.export import (
    GOLD_REPLAY_ORDER, IMPORT_ARTIFACTS, MANIFEST_NAME, SOURCE_FILE, TASK_FILES, ExportError,
    _validator, canonical, content_digest, folder_digest, folder_files, copy_schemas, data_paths, dumps, find_layer, gold_replay, import_source, json_path,
    layer_file_name, safe_relative, sample_and_task, schema_problems, sha256_file, staging_dir_for,
)
from kernel.content import MAX_SAMPLE_ID, source_record
from kernel.golddiff import is_blank_obs
from kernel.inputs import entry_of, phase_of_key
from kernel.taskfile import (JSON_INDENT, JSONNestingError, TaskFileError, bounded_loads, read_task_file, sample_label,
                             source_text, to_storage)
from annotation.services import review
from annotation.services.qc import DERIVED_CONTENT_FIELDS, DERIVED_RUN_FIELDS, derived_findings
from releases.services import release_variants
from annotation.services.imports import staging_name as imports_staging_name
from annotation.services.review import approve_imported, release_for_release
from annotation.services.task_import import file_proposals, file_task_content
from annotation.services.tasks import TaskLockedError, content_problem, require_unreleased, write_imported_revision
from studio.background import job_running, worker_lost, worker_tag
from studio.events import emit
from studio.permissions import require
from annotation.importers.errors import DataImportError
from annotation.services import imports
from replay.models import ReplayRun
from replay.services.gold import record_imported_gold

SEMVER_RE = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$")
RELEASABLE = (Task.Status.APPROVED, Task.Status.RELEASED)


class ReleaseError(AnnotationInputError):
    """A release cannot be created, changed or published; the message names the field or task."""


class ReleaseOpenCommentsError(ReleaseError, AnnotationConflict):
    """Publishing a release whose tasks have open review comments needs a confirmation
    (``acknowledge_open_comments=True``), which each such task's audit trail then records (HTTP
    409 with ``open_comments``, a count, and ``open_comment_threads``, the threads as
    ``review.open_comment_threads`` gives them)."""

    status_code, code = AnnotationConflict.status_code, AnnotationConflict.code

    def __init__(self, release: Release, open_comments: list[dict]):
        self.open_comments = open_comments
        tasks = sorted({c["task"] for c in open_comments})
        super().__init__(f"release {release.version} not published: {len(open_comments)} review comment(s) are open "
                         f"on {', '.join(tasks)}; resolve them or confirm publishing with them open")

    def context(self) -> dict:
        return {"open_comments": len(self.open_comments), "open_comment_threads": self.open_comments}


class ReleaseExistsError(ReleaseError, AnnotationConflict):
    """A release of that version exists already (HTTP 409), also when another request created it
    a moment ago."""

    status_code, code = AnnotationConflict.status_code, AnnotationConflict.code


class ReleaseImmutableError(ReleaseError, AnnotationConflict):
    """The release is published: it cannot be edited, re-published or deleted (HTTP 409)."""

    status_code, code = AnnotationConflict.status_code, AnnotationConflict.code


class ReleaseStaleError(ReleaseError, AnnotationConflict):
    """A pinned task holds a derived value that no longer equals its source (``derived.*`` QC
    findings: a manifest GSD/CRS its layer changed since, a gold replay whose inputs changed)
    and no maintainer acknowledged it (HTTP 409 with ``stale``: ``[{task, revision, check,
    field, message}]``). Refresh the task (then re-pin it: edit the release's tasks) or
    acknowledge it (:func:`acknowledge_stale`)."""

    status_code, code = AnnotationConflict.status_code, AnnotationConflict.code

    def __init__(self, release: Release, stale: list[dict]):
        self.stale = stale
        named = "; ".join(f"{s['task']} r{s['revision']} {s['field']}" for s in stale[:10])
        more = f" and {len(stale) - 10} more" if len(stale) > 10 else ""
        super().__init__(f"release {release.version} not published: {len(stale)} stale derived value(s): {named}{more}; "
                         "refresh the task and re-pin it, or have a maintainer acknowledge it with a reason")

    def context(self) -> dict:
        return {"stale": self.stale}


def stale_items(release: Release, *, acknowledged: bool | None = False) -> list[dict]:
    """The ``derived.*`` QC findings of the revisions and gold replays ``release`` pins
    (``annotation.services.qc.derived_findings``, the task QC's own check), each as ``{task
    (question id), task_id, revision (number), check, severity, field (the finding's location),
    message, acknowledgement: {user, reason, at} | None}``, in question-id order.
    ``acknowledged``: False → only those without a maintainer's acknowledgement (what blocks
    publishing), True → only acknowledged ones, None → all."""
    items = (ReleaseTask.objects.filter(release=release).select_related("task", "revision", "replay")
             .only("question_id", "task_id", "revision_id", "replay_id", "task__event_id", "revision__number",
                   *(f"revision__{f}" for f in DERIVED_CONTENT_FIELDS),
                   *(f"replay__{f}" for f in DERIVED_RUN_FIELDS))
             .order_by("question_id"))
    acks = {(a.task_id, a.revision_number, a.check_id, a.location): a for a in QcAcknowledgement.objects
            .filter(task_id__in=ReleaseTask.objects.filter(release=release).values("task_id"),
                    check_id__startswith="derived.").select_related("user")}
    layers: dict[int, list] = {}
    out = []
    for it in items.iterator(chunk_size=PIN_BATCH):  # the revisions' JSON a batch at a time
        if it.task.event_id not in layers:
            layers[it.task.event_id] = list(Layer.objects.filter(event_id=it.task.event_id))
        for f in derived_findings(it.task, it.revision, it.replay, layers=layers[it.task.event_id]):
            ack = acks.get((it.task_id, it.revision.number, f.check, f.location))
            if acknowledged is not None and bool(ack) != acknowledged:
                continue
            out.append({"task": it.question_id, "task_id": it.task_id, "revision": it.revision.number,
                        "check": f.check, "severity": f.severity, "field": f.location, "message": f.message,
                        "acknowledgement": {"user": ack.user.username if ack.user_id else None, "reason": ack.reason,
                                            "at": ack.created_at.isoformat()} if ack else None})
    return out


@transaction.atomic
def acknowledge_stale(user, release: Release, *, question_id: str, reason: str) -> list[QcAcknowledgement]:
    """A maintainer's acknowledgement that the task ``question_id`` goes out in ``release`` with
    its stale derived values as they are: one ``QcAcknowledgement`` (who, when, why) per current
    ``derived.*`` finding of the pinned revision (:func:`stale_items`); publishing then lets them
    through, and the release page lists them. A later change of the source makes a new finding
    text but the same check and field: still acknowledged; a new pinned revision is not.

    Needs ``release.publish`` (maintainers). Raises ``PermissionDenied``,
    :class:`ReleaseImmutableError` (published), :class:`ReleaseError` naming the field (no reason,
    the task is not pinned, nothing of it is stale)."""
    require(user, "release.publish", release)
    locked = Release.objects.select_for_update().get(pk=release.pk)
    _refuse_published(locked, "acknowledge a stale value")
    reason = str(reason or "").strip()
    if not reason:
        raise ReleaseError("reason: say why the stale value may go out as it is")
    if not ReleaseTask.objects.filter(release=locked, question_id=question_id).exists():
        raise ReleaseError(f"task: {question_id} is not pinned in release {locked.version}")
    stale = [s for s in stale_items(locked, acknowledged=None) if s["task"] == question_id]
    if not stale:
        raise ReleaseError(f"task: {question_id} has no stale derived value in release {locked.version}")
    out = []
    for s in stale:
        ack, _ = QcAcknowledgement.objects.update_or_create(
            task_id=s["task_id"], revision_number=s["revision"], check_id=s["check"], location=s["field"][:300],
            defaults={"reason": reason, "user": user})
        out.append(ack)
    return out


def _refuse_published(release: Release, what: str) -> None:
    if release.status == Release.Status.PUBLISHED:
        raise ReleaseImmutableError(
            f"release {release.version} is published and cannot be changed ({what}); create a new version instead")


#: tasks pinned per batch by ``_pin_into``: one gold-replay query and one INSERT per batch
PIN_BATCH = 2000
_PIN_FIELDS = ("pk", "status", "question_id", "dimension", "sample_id", "task_index", "head_id")


def _task_rows(tasks):
    """``(pk, status, question_id, dimension, sample_id, task_index, head_id)`` of each task, in
    ``tasks``' order: a queryset is read as values from the cursor (``iterator``: never all its
    rows at once, and no revision JSON), an iterable of ``Task`` objects attribute by attribute."""
    if hasattr(tasks, "values_list"):
        yield from tasks.values_list(*_PIN_FIELDS).iterator(chunk_size=PIN_BATCH)
        return
    for t in tasks:
        yield (t.pk, t.status, t.question_id, t.dimension, t.sample_id, t.task_index, t.head_id)


def _gold_replays(pairs: list[tuple[int, int]]) -> dict[tuple[int, int], int]:
    """``{(task id, revision id): replay id}`` of the gold replay of each pair, as
    ``export.gold_replay`` picks it (``GOLD_REPLAY_ORDER``: the first of each pair's succeeded
    replays in that order), in one query for the batch; pairs without a succeeded replay are absent."""
    wanted = set(pairs)
    best: dict[tuple[int, int], int] = {}
    rows = ReplayRun.objects.filter(task_id__in={t for t, _ in pairs}, status=ReplayRun.Status.SUCCEEDED) \
        .order_by("task_id", "revision_id", *GOLD_REPLAY_ORDER)
    for run_id, task_id, rev_id in rows.values_list("id", "task_id", "revision_id"):
        key = (task_id, rev_id)
        if key in wanted:
            best.setdefault(key, run_id)
    return best


def _pin_into(release: Release, tasks, *, empty: str) -> int:
    """Pin each task of ``tasks`` (a queryset or an iterable of ``Task``) in ``release`` at its head
    revision and gold replay; returns the number of ``ReleaseTask`` rows written (in ``tasks``'
    order). Memory is bounded by the batch (``PIN_BATCH`` tasks: their ids, one query for their gold
    replays, one ``bulk_create``), not by the number of tasks (issue 16: 1.5 GB at 100,000 tasks
    when every task was loaded with its head revision). Runs inside the caller's transaction: the
    ReleaseError it raises (a task not approved or without a succeeded replay of its head, in
    ``tasks``' order; then a sample whose tasks are not 0..n-1; ``empty`` when there is no task)
    rolls back the rows it wrote."""
    n = 0
    batch: list[tuple] = []

    def flush() -> None:
        nonlocal n
        runs = _gold_replays([(r[0], r[6]) for r in batch if r[6]])
        items = []
        for pk, status, question_id, _dim, _sid, _idx, head_id in batch:
            if status not in RELEASABLE:
                raise ReleaseError(f"tasks: {question_id} is {status}; only approved tasks can be released")
            run_id = runs.get((pk, head_id)) if head_id else None
            if run_id is None:
                raise ReleaseError(f"tasks: {question_id} has no succeeded replay of its head revision; replay it first")
            items.append(ReleaseTask(release=release, task_id=pk, revision_id=head_id, replay_id=run_id,
                                     question_id=question_id))
        ReleaseTask.objects.bulk_create(items)
        n += len(items)
        batch.clear()

    for row in _task_rows(tasks):
        batch.append(row)
        if len(batch) >= PIN_BATCH:
            flush()
    if batch:
        flush()
    if not n:
        raise ReleaseError(empty)
    _check_positional(release)
    pin_layers(release)  # the layer versions its tasks read (releases.services.pins)
    return n


def _check_positional(release: Release) -> None:
    """ReleaseError naming the first sample (in pinning order) whose pinned tasks are not exactly
    0..n-1: question ids are positional (``<sample_id>_task<i>``). One aggregate query."""
    groups = (ReleaseTask.objects.filter(release=release).order_by()
              .values("task__dimension", "task__sample_id")
              .annotate(n=Count("id"), distinct=Count("task__task_index", distinct=True), lo=Min("task__task_index"),
                        hi=Max("task__task_index"), first=Min("id")))
    for g in sorted(groups, key=lambda g: g["first"]):
        if g["lo"] == 0 and g["hi"] == g["n"] - 1 and g["distinct"] == g["n"]:
            continue
        dim, sample_id = g["task__dimension"], g["task__sample_id"]
        idxs = sorted(ReleaseTask.objects.filter(release=release, task__dimension=dim, task__sample_id=sample_id)
                      .values_list("task__task_index", flat=True))
        raise ReleaseError(
            f"tasks: sample {sample_id} ({dim}) would hold tasks {idxs}: question ids are positional "
            f"(<sample_id>_task<i>), so tasks 0..{max(idxs)} must all be approved and released together")


@transaction.atomic
def create_release(user, version: str, changelog: str = "", tasks=None) -> Release:
    """Create a draft release ``version`` (semantic version, unique) pinning ``tasks`` (default:
    every approved or released task, newest first) at their head revision and gold replay, in
    batches (``_pin_into``: memory does not grow with the number of tasks).

    Raises ``PermissionDenied`` (needs ``release.export``), :class:`ReleaseExistsError` (the version
    exists, also when a concurrent request just created it) and :class:`ReleaseError` naming the
    field (``version``) or the task that cannot be released; one transaction: an error leaves no
    release and no pinned row.
    """
    require(user, "release.export")
    version = (version or "").strip()
    if not SEMVER_RE.match(version):
        raise ReleaseError(f"version: '{version}' is not a semantic version (MAJOR.MINOR.PATCH, e.g. 1.2.0)")
    if Release.objects.filter(version=version).exists():
        raise ReleaseExistsError(f"version: release {version} already exists")
    if tasks is None:
        tasks = Task.objects.filter(status__in=RELEASABLE)
    try:  # the check above races with a concurrent creation of the same version: the constraint decides
        with transaction.atomic():
            release = Release.objects.create(version=version, changelog=changelog or "", created_by=user)
    except IntegrityError:
        raise ReleaseExistsError(f"version: release {version} already exists") from None
    _pin_into(release, tasks, empty="tasks: no approved task to release")
    return release


@transaction.atomic
def update_release(user, release: Release, *, changelog: str | None = None, tasks=None) -> Release:
    """Change a draft's changelog and/or its tasks (re-pinned at their heads, as ``create_release``).

    Raises :class:`ReleaseImmutableError` for a published release, :class:`ReleaseError` naming a
    task that cannot be released (nothing changed then: one transaction).
    """
    require(user, "release.export", release)
    locked = Release.objects.select_for_update().get(pk=release.pk)
    _refuse_published(locked, "update")
    if changelog is not None:
        locked.changelog = changelog
        locked.save(update_fields=["changelog"])
    if tasks is not None:
        ReleaseTask.objects.filter(release=locked).delete()
        _pin_into(locked, tasks, empty="tasks: a release needs at least one task")
    return locked


@transaction.atomic
def delete_release(user, release: Release) -> None:
    """Delete a draft release; :class:`ReleaseImmutableError` for a published one."""
    require(user, "release.export", release)
    locked = Release.objects.select_for_update().get(pk=release.pk)
    _refuse_published(locked, "delete")
    ReleaseTask.objects.filter(release=locked).delete()
    locked.delete()


def _publish(user, release: Release) -> Release:
    locked = Release.objects.select_for_update().get(pk=release.pk)
    _refuse_published(locked, "publish again")
    with release_entries(locked, spool_dir=Path(settings.STUDIO_DATA_ROOT)) as entries:
        if not entries:
            raise ReleaseError(f"release {locked.version} has no task")
        try:
            files = release_variants.release_files(entries, release_id=locked.pk)
        except ExportError as exc:
            raise ReleaseError(f"release {locked.version} cannot be published: {exc}") from exc
    digest = folder_digest(files)
    ReleaseFile.objects.bulk_create([ReleaseFile(release=locked, path=p, sha256=i["sha256"], bytes=i["bytes"])
                                     for p, i in sorted(files.items())], batch_size=2000)
    items = list(ReleaseTask.objects.filter(release=locked).select_related("task", "revision"))
    for it in items:  # through the review transition and its permission (task.release)
        if it.task.head_id == it.revision_id:
            release_for_release(user, it.task, note=f"release {locked.version}")
    locked.status = Release.Status.PUBLISHED
    locked.published_at = timezone.now()
    locked.manifest_sha256 = digest
    locked.save(update_fields=["status", "published_at", "manifest_sha256"])
    return locked


@transaction.atomic
def publish_release(user, release: Release, *, acknowledge_open_comments: bool = False) -> Release:
    """Publish a draft: every file an export would ship (but the sidecar) is produced once
    (validated against the schemas), recorded with its SHA-256 (``ReleaseFile``) and their digest
    stored (``manifest_sha256``); pinned tasks still at that revision become ``released``.

    Publishing releases tasks, so it needs ``release.publish`` (maintainers only, as
    ``task.release``); a reviewer may prepare drafts (``release.export``) but not publish them.
    Open review comments on its tasks need ``acknowledge_open_comments`` (issue 23: the page asks,
    and so does the API); the confirmation is an audit event ``publish_with_open_comments`` on each
    such task, written in the same transaction.

    A pinned revision or gold replay with a stale derived value (:func:`stale_items`) refuses
    publishing until it is refreshed and re-pinned, or acknowledged (:func:`acknowledge_stale`).

    Raises ``PermissionDenied`` (needs ``release.publish``), :class:`ReleaseStaleError` (a stale
    derived value, not acknowledged), :class:`ReleaseOpenCommentsError` (open comments, not
    acknowledged), :class:`ReleaseImmutableError` if it is already published,
    :class:`ReleaseError` if a task cannot be exported.
    """
    require(user, "release.publish", release)
    stale = stale_items(release)
    if stale:
        raise ReleaseStaleError(release, [{k: s[k] for k in ("task", "revision", "check", "field", "message")}
                                          for s in stale])
    open_comments = review.open_comment_threads(release=release)
    if open_comments and not acknowledge_open_comments:
        raise ReleaseOpenCommentsError(release, open_comments)
    published = _publish(user, release)
    if open_comments:
        counts: dict[str, int] = {}
        for c in open_comments:
            counts[c["task"]] = counts.get(c["task"], 0) + 1
        review.record_publish_with_open_comments(user, published, counts)
    emit("release.published", {"version": published.version, "manifest_sha256": published.manifest_sha256,
                                "n_tasks": ReleaseTask.objects.filter(release=published).count(),
                                "actor": user.get_username(), "download_path": f"/releases/{published.version}/"},
         release=published, actor=user)
    return published


# ------------------------------------------------------------------ export


def release_info(release: Release) -> dict:
    return {"version": release.version, "status": release.status, "changelog": release.changelog,
            "created_by": release.created_by.username if release.created_by_id else None,
            "created_at": release.created_at.isoformat() if release.created_at else None,
            "published_at": release.published_at.isoformat() if release.published_at else None,
            "content_sha256": release.manifest_sha256 or ""}


def export_release(release: Release, out, *, force: bool = False, progress=None) -> dict:
    """Write ``release`` in the benchmark's layout into folder ``out``; returns the sidecar manifest
    without its ``questions`` (those are in the written ``studio_manifest.json`` only).

    The folder is written under a temporary name beside ``out`` and renamed at the end; every task
    file (sample by sample), gold polygon and the manifest is validated against its schema first.
    The manifest is streamed (issue 16: 944 MB peak at 100,000 tasks when it was built in memory):
    each question's metadata is validated against the manifest schema's ``questions`` entry and
    spooled to a file in the staging folder as its sample is written; the manifest is then written
    as the text ``dumps`` gives for the whole document (indent 1, same key order), with the spool
    copied in at the ``questions`` member. Raises ``ExportError`` when ``out`` exists and is not
    empty (unless ``force``), when a task cannot be written, or when a published release would
    ship any file differently from what publishing recorded (``ReleaseFile``: the message names
    the first such file; nothing is written). The sidecar's ``content_sha256`` is
    ``export.folder_digest`` of every file but the sidecar (``format_version`` 2); a release
    published before the digest covered the folder keeps its tasks-only digest (``format_version`` 1).
    """
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())) and not force:
        raise ExportError(f"{out}: exists and is not empty; choose another folder or replace it (--force)")
    release = Release.objects.select_related("created_by").get(pk=release.pk)
    # spooled to disk in export order, beside the staging folder (as the questions' spool); closed below
    entries = release_entries(release, spool_dir=out.parent, spool_prefix=f".{out.name}.entries-")
    if not entries:
        entries.close()
        raise ExportError(f"release {release.version} has no task")
    staging = staging_dir_for(out)
    spool_path = staging.parent / f"{staging.name}.questions"
    try:
        with open(spool_path, "w", encoding="utf-8") as spool:
            n_questions = 0

            def keep(question_id: str, meta: dict) -> None:
                nonlocal n_questions
                problems = schema_problems("manifest", meta, ref="#/properties/questions/additionalProperties",
                                           root=json_path(["questions", question_id]))
                if problems:
                    raise ExportError(f"{MANIFEST_NAME}: {problems[0][0]}: {problems[0][1]}")
                # the member as it stands inside the manifest's "questions" object (two levels deep)
                lines = dumps({question_id: meta}).split("\n")[1:-1]
                spool.write(("" if n_questions == 0 else ",\n") + "\n".join(" " * JSON_INDENT + line for line in lines))
                n_questions += 1

            result, variant_entries = release_variants.write_layout(staging, entries, release_id=release.pk,
                                                                    progress=progress, question_sink=keep)
        info = release_info(release)
        schemas = copy_schemas(staging, result.files)
        unlisted = sorted(set(folder_files(staging)) - set(result.files))
        if unlisted:  # every file shipped is checksummed (and so covered by the digest)
            raise ExportError(f"{unlisted[0]}: written without a checksum")
        published = {p: (sha, n) for p, sha, n in ReleaseFile.objects.filter(release=release)
                     .values_list("path", "sha256", "bytes")}
        if published:  # published with the whole-folder digest: exactly the same files, or nothing
            _check_published_files(release, published, result.files)
            format_version, digest = 2, folder_digest(result.files)
        elif release.manifest_sha256:  # published before the digest covered the folder: tasks only
            format_version, digest = 1, content_digest(result.files)
        else:  # a draft
            format_version, digest = 2, folder_digest(result.files)
        if release.manifest_sha256 and digest != release.manifest_sha256:
            raise ExportError(f"release {release.version}: the files differ from what was published "
                              f"(digest {digest[:12]} ≠ {release.manifest_sha256[:12]}); nothing was written")
        info["content_sha256"] = digest
        manifest = {
            "format": "benchmark-studio-release", "format_version": format_version, "release": info,
            "generated_at": timezone.now().isoformat(), "events": result.events,
            "questions": {}, "files": dict(sorted(result.files.items())),
            "images_missing": sorted(result.missing.values(), key=lambda m: m["path"]),
            "counts": result.counts, "schemas": schemas,
        }
        if variant_entries:  # robustness variants beside the benchmark's files (release_variants)
            manifest["variants"] = release_variants.variants_section(release, variant_entries)
        problems = schema_problems("manifest", manifest)  # its questions were checked one by one
        if problems:
            raise ExportError(f"{MANIFEST_NAME}: {problems[0][0]}: {problems[0][1]}")
        marker = "\x00questions\x00"
        head, tail = dumps({**manifest, "questions": marker}).split(json.dumps(marker), 1)
        with open(staging / MANIFEST_NAME, "w", encoding="utf-8") as fh, \
                open(spool_path, encoding="utf-8") as spool:
            fh.write(head)
            if n_questions:
                fh.write("{\n")
                shutil.copyfileobj(spool, fh, 1 << 20)
                fh.write("\n" + " " * JSON_INDENT + "}")
            else:
                fh.write("{}")
            fh.write(tail)
        del manifest["questions"]
        if out.exists():
            old = out.with_name(f".{out.name}.old-{uuid.uuid4().hex[:10]}")
            os.rename(out, old)
            os.rename(staging, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.rename(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    finally:
        spool_path.unlink(missing_ok=True)
        entries.close()
    return manifest


def _check_published_files(release: Release, published: dict[str, tuple[str, int]], files: dict[str, dict]) -> None:
    """``ExportError`` naming the first file (by path) that a re-export of a published release
    would ship differently from what publishing recorded: changed bytes, missing, or new."""
    for path in sorted(set(published) | set(files)):
        was, now = published.get(path), files.get(path)
        if was is None:
            problem = "would be shipped but was not in the published release"
        elif now is None:
            problem = "was published but would not be shipped"
        elif now["sha256"] != was[0]:
            problem = (f"differs from what was published ({now['bytes']:,} bytes, sha256 {now['sha256'][:12]}… ≠ "
                       f"{was[1]:,} bytes, {was[0][:12]}…)")
        else:
            continue
        raise ExportError(f"release {release.version}: {path} {problem}: a published release's files never "
                          "change, so the export is refused and nothing was written (a layer, replay or source "
                          "behind it changed outside its pins)")


def zip_folder(folder: Path, zip_path: Path) -> Path:
    """Zip ``folder`` (entries under ``<folder name>/``) to ``zip_path`` via a temporary name."""
    tmp = zip_path.with_name(zip_path.name + ".tmp")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for p in sorted(folder.rglob("*")):
            if p.is_file():
                zf.write(p, f"{folder.name}/{p.relative_to(folder).as_posix()}")
    os.replace(tmp, zip_path)
    return zip_path


def _job_path(version: str, job_id: str) -> Path:
    return exports_dir(version) / job_id / "job.json"


def _save_job(job: dict) -> dict:
    """Write an export job's state (``job.json``) through a temporary name in the job folder."""
    p = _job_path(job["release"], job["id"])
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(f".job-{uuid.uuid4().hex[:8]}.json")  # a sweep of the folder spares only job.json
    tmp.write_text(json.dumps(job, indent=1), encoding="utf-8")
    os.replace(tmp, p)
    return job


#: the export job's kind in :mod:`studio.background`
EXPORT_KIND = "release-export"
#: the files of an export job's folder that are not its output: its state and its heartbeat
JOB_FILE, HEARTBEAT_FILE = "job.json", "heartbeat"


def start_export(user, release: Release) -> dict:
    """Record an export job of ``release`` and dispatch it (runs in-process without a broker).

    Returns the job dict ``{id, release, status (queued|running|succeeded|failed), stage, done,
    total, error, folder, zip, content_sha256, requested_by, created_at, started_at, finished_at,
    worker, heartbeat_at}`` as it stands after dispatch (finished, in-process).
    """
    require(user, "release.export", release)
    job = _save_job({"id": uuid.uuid4().hex, "release": release.version, "status": "queued", "stage": "",
                     "done": 0, "total": 0, "error": "", "folder": "", "zip": "", "content_sha256": "",
                     "requested_by": getattr(user, "username", None), "created_at": timezone.now().isoformat(),
                     "started_at": None, "finished_at": None, "worker": "", "heartbeat_at": None})
    _send_export(release.version, job["id"])
    from releases.selectors import export_job

    return export_job(release.version, job["id"]) or job


def _send_export(version: str, job_id: str) -> None:
    """Hand export job ``job_id`` to Celery (``releases.jobs.export_release_job``; in-process,
    to its end, without a broker)."""
    from releases.jobs import export_release_job

    export_release_job.delay(version, job_id)


def _clear_job_folder(base: Path) -> list[str]:
    """Remove everything in an export job's folder but its ``job.json`` (the staging folder and
    spool files, a half-written zip, a half-finished output of a dead worker); returns the names."""
    removed = []
    for p in sorted(base.iterdir()) if base.is_dir() else []:
        if p.name == JOB_FILE:
            continue
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
        removed.append(p.name)
    return removed


def _touch(path: Path) -> None:
    path.touch()


def run_export_job(version: str, job_id: str) -> dict:
    """The body of the export job: write the folder and the zip, recording progress in job.json.
    A failure is recorded in the job (``status: failed``, ``error``), not raised. While it runs
    the job carries this process's tag (``worker``) and a heartbeat (the mtime of the job folder's
    ``heartbeat`` file, :func:`studio.background.job_running`); what a dead earlier delivery left
    in the job folder is removed first."""
    from releases.selectors import export_job

    job = export_job(version, job_id)
    if job is None:
        raise ValueError(f"no export job {job_id} of release {version}")
    if job.get("status") in ("succeeded", "failed"):
        return job
    base = exports_dir(version) / job_id
    _clear_job_folder(base)
    job.update(status="running", started_at=timezone.now().isoformat(), stage="tasks", worker=worker_tag(),
               heartbeat_at=timezone.now().isoformat(), error="")
    _save_job(job)
    folder = base / f"dora-{version}"

    def progress(stage: str, done: int, total: int) -> None:
        job.update(stage=stage, done=done, total=total, heartbeat_at=timezone.now().isoformat())
        _save_job(job)

    with job_running(EXPORT_KIND, job_id, lambda: _touch(base / HEARTBEAT_FILE)):
        try:
            release = Release.objects.get(version=version)
            manifest = export_release(release, folder, force=True, progress=progress)
            progress("zip", job["done"], job["total"])
            zip_folder(folder, base / f"dora-{version}.zip")
            job.update(status="succeeded", stage="done", folder=str(folder.relative_to(settings.STUDIO_DATA_ROOT)),
                       zip=f"dora-{version}.zip", content_sha256=manifest["release"]["content_sha256"])
        except Exception as exc:  # recorded for the UI; the job never stays "running"
            job.update(status="failed", error=str(exc))
        job["finished_at"] = timezone.now().isoformat()
        return _save_job(job)


def _last_beat(job: dict, base: Path):
    """The newest sign of life of an export job: its heartbeat file's mtime, its last progress, its
    start or its creation (an aware datetime), or None."""
    times = []
    for key in ("heartbeat_at", "started_at", "created_at"):
        try:
            times.append(datetime.fromisoformat(job[key]))
        except (KeyError, TypeError, ValueError):
            pass
    try:
        times.append(datetime.fromtimestamp((base / HEARTBEAT_FILE).stat().st_mtime, tz=dt_timezone.utc))
    except OSError:
        pass
    return max(times) if times else None


def sweep_export_jobs(stale_after: float | None = None) -> list[dict]:
    """The sweeper of export jobs (:func:`studio.background.register_sweeper`): an export left
    ``queued`` or ``running`` whose worker is lost (:func:`studio.background.worker_lost`) ends
    ``failed`` ("the export's worker was lost …; export again") and its folder keeps only
    ``job.json``: the staging folder, the spool files and a partial zip are removed. (With a
    broker a queued export that no worker took is sent again instead.) Returns
    ``{kind, id, action, why, removed}`` per job."""
    root = Path(settings.STUDIO_DATA_ROOT) / "exports"
    out = []
    for jf in sorted(root.glob(f"*/*/{JOB_FILE}")) if root.is_dir() else []:
        try:
            job = json.loads(jf.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(job, dict) or job.get("status") not in ("queued", "running") or not job.get("id"):
            continue
        base = jf.parent
        why = worker_lost(EXPORT_KIND, job["id"], job.get("worker") or "", _last_beat(job, base),
                          stale_after=stale_after)
        if not why:
            continue
        if job["status"] == "queued" and not settings.CELERY_TASK_ALWAYS_EAGER:
            job["heartbeat_at"] = timezone.now().isoformat()
            _save_job(job)
            _send_export(job["release"], job["id"])
            out.append({"kind": EXPORT_KIND, "id": job["id"], "action": "requeued", "why": why, "removed": []})
            continue
        removed = _clear_job_folder(base)
        job.update(status="failed", error=f"the export's worker was lost ({why}); export again",
                   finished_at=timezone.now().isoformat())
        _save_job(job)
        out.append({"kind": EXPORT_KIND, "id": job["id"], "action": "failed", "why": why, "removed": removed})
    return out


# ------------------------------------------------------------------ import


class ReleaseImportError(Exception):
    """A file of a release folder cannot be imported. ``file``, ``sample``, ``field``, ``problem``
    say where and what; the message is ``<file>: sample <id>: <field>: <problem>``."""

    def __init__(self, file, problem: str, *, sample: str | None = None, field: str | None = None):
        self.file, self.problem, self.sample, self.field = str(file), problem, sample, field
        parts = [self.file]
        if sample is not None:
            parts.append(f"sample {sample}")
        if field:
            parts.append(field)
        super().__init__(": ".join(parts + [problem]))


@dataclass
class _Planned:
    dim: str
    file: str  # tasks/<name>
    sample_index: int
    task_index: int
    sample: dict
    task: dict
    question_id: str
    event: str = ""


@dataclass
class ImportReport:
    """What an import did: question ids by outcome, events created, layers by status, images
    not found, the release (version and whether it was created)."""

    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    events_created: list[str] = field(default_factory=list)
    layers: dict[str, str] = field(default_factory=dict)  # "<event>/<path>" → linked | created
    images_missing: list[dict] = field(default_factory=list)
    release: str | None = None
    release_created: bool = False
    #: question id → one row per blank answer field (``task_import.file_proposals``), written tasks only
    proposals: dict[str, list[dict]] = field(default_factory=dict)

    def summary(self) -> dict:
        return {"created": self.created, "updated": self.updated, "unchanged": self.unchanged,
                "events_created": self.events_created, "layers": self.layers,
                "images_missing": self.images_missing, "release": self.release,
                "release_created": self.release_created, "proposals": self.proposals}


@dataclass
class _Parsed:
    root: Path
    tasks_dir: Path
    sidecar: dict | None
    planned: list[_Planned]
    images: dict[tuple[str, str], Path]  # (event slug, path) → file
    missing: dict[str, dict]
    polygons: dict[str, Path]  # value as in final_answer → file


def _first_schema_problem(name: str, instance: Any):
    errors = sorted(_validator(name, None).iter_errors(instance), key=lambda e: list(map(str, e.absolute_path)))
    if not errors:
        return None
    err = errors[0]
    parts = list(err.absolute_path)
    if err.validator == "required" and "'" in err.message:
        parts.append(err.message.split("'")[1])
    return parts, err.message


def _load_json(path: Path, rel: str):
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ReleaseImportError(rel, f"cannot be read ({exc})")
    try:
        return bounded_loads(text)
    except JSONNestingError as exc:
        raise ReleaseImportError(rel, exc.problem, field=f"line {exc.line}, column {exc.column}") from None
    except json.JSONDecodeError as exc:
        raise ReleaseImportError(rel, f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})")


def _read_task_file(path: Path, rel: str) -> list:
    """The samples of a task file, checked as the benchmark's loader checks them
    (``kernel.taskfile.read_task_file``); ``ReleaseImportError`` naming file, sample, task, field."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ReleaseImportError(rel, f"cannot be read ({exc})")
    try:
        return read_task_file(data, rel).samples
    except TaskFileError as exc:
        field = exc.field if exc.task is None else f"tasks[{exc.task}]" + (f".{exc.field}" if exc.field else "")
        raise ReleaseImportError(rel, exc.problem, sample=exc.sample, field=field) from exc


def _polygon_answers(task: dict) -> list[tuple[str, str]]:
    """``(field, value)`` of the task's polygon_iou answers whose value is a string (a gold file)."""
    spec, answer = task.get("eval_spec"), task.get("final_answer")
    if not isinstance(spec, dict) or not isinstance(answer, dict):
        return []
    return [(n, answer[n]) for n, t in spec.items() if t == "polygon_iou" and isinstance(answer.get(n), str)]


def refuse_symlinks(root: Path) -> None:
    """Raise :class:`ReleaseImportError` (field ``path``) for the first symbolic link anywhere
    under ``root``: an import reads only what the folder holds, never what a link points to
    (``/etc/passwd``, another user's data). The folder itself may be a link the operator named."""
    for dirpath, dirnames, filenames in os.walk(root):
        for name in sorted(dirnames + filenames):
            p = Path(dirpath) / name
            if p.is_symlink():
                raise ReleaseImportError(p.relative_to(root).as_posix(), "a symbolic link; release folders are "
                                         "read without following links (copy the file into the folder)", field="path")


def read_release_dir(path, *, event_slug: str | None = None) -> _Parsed:
    """Read and check a release folder without writing anything (the first phase of an import).

    Accepts ``DIR/tasks/t*.json`` (a release) or ``DIR/t*.json`` (a bare tasks folder). Task files
    are read as the benchmark's loader reads them (``kernel.taskfile``): every value it accepts is
    kept (NaN, list ``args``, extra keys). Raises :class:`ReleaseImportError` naming the file, the
    sample and the field of the first problem: what the loader refuses (invalid JSON, not a list,
    no ``sample_id``, no ``tasks``, a task without ``question``/``task_category``/
    ``task_category_code``), a symbolic link in the folder (:func:`refuse_symlinks`), a sample without tasks, a
    duplicate sample id, a sidecar checksum
    mismatch, an unreadable gold polygon.
    """
    root = Path(path)
    if not root.is_dir():
        raise ReleaseImportError(root, "not a directory")
    refuse_symlinks(root)
    tasks_dir = root / "tasks" if (root / "tasks").is_dir() else root
    base = root if tasks_dir != root else root.parent
    found = [(dim, tasks_dir / name, root / "images") for dim, name in TASK_FILES.items() if (tasks_dir / name).is_file()]
    if not found:
        raise ReleaseImportError(tasks_dir, f"no task file ({', '.join(TASK_FILES.values())})")
    # robustness variants beside the benchmark's files (release_variants), read the same way
    variants_dir = root / release_variants.VARIANTS_DIR
    if tasks_dir != root and (variants_dir / "tasks").is_dir():
        found += [(dim, variants_dir / "tasks" / name, variants_dir / "images") for dim, name in TASK_FILES.items()
                  if (variants_dir / "tasks" / name).is_file()]
    rel_of = lambda p: p.relative_to(base).as_posix()  # noqa: E731

    sidecar = None
    if (root / MANIFEST_NAME).is_file():
        sidecar = _load_json(root / MANIFEST_NAME, MANIFEST_NAME)
        prob = _first_schema_problem("manifest", sidecar)
        if prob:
            raise ReleaseImportError(MANIFEST_NAME, prob[1], field=json_path(prob[0]))
        for rel, info in sidecar["files"].items():
            p = root / rel
            if safe_relative(rel) is None:
                raise ReleaseImportError(MANIFEST_NAME, "path outside the release folder", field=f"files.{rel}")
            if not p.is_file():
                raise ReleaseImportError(rel, "listed in studio_manifest.json but missing")
            if sha256_file(p) != info["sha256"]:
                raise ReleaseImportError(rel, f"sha256 differs from studio_manifest.json ({info['sha256'][:12]}…): "
                                              "the file changed after the export")
        if sidecar.get("format_version", 1) >= 2:  # the digest covers the whole folder (folder_digest)
            for rel in folder_files(root):
                if rel != MANIFEST_NAME and rel not in sidecar["files"]:
                    raise ReleaseImportError(rel, "not listed in studio_manifest.json: a file added after the export")
            if folder_digest(sidecar["files"]) != sidecar["release"]["content_sha256"]:
                raise ReleaseImportError(MANIFEST_NAME, "the digest of the listed files is not the release's "
                                                        "content_sha256: the manifest was edited after the export",
                                         field="release.content_sha256")
    questions = (sidecar or {}).get("questions") or {}
    default_event = event_slug or slugify(root.resolve().name) or "imported"

    planned: list[_Planned] = []
    seen: dict[str, str] = {}
    images: dict[tuple[str, str], Path] = {}
    missing: dict[str, dict] = {}
    polygons: dict[str, Path] = {}
    for dim, fpath, images_dir in found:
        rel = rel_of(fpath)
        file_tasks_dir = fpath.parent
        samples = _read_task_file(fpath, rel)
        for si, sample in enumerate(samples):
            if not sample["tasks"]:
                raise ReleaseImportError(rel, "the sample has no task: the studio keeps tasks, so it could not write "
                                              "this sample back", sample=sample_label(sample, si), field="tasks")
            sid = str(sample["sample_id"])
            if len(sid) > MAX_SAMPLE_ID:
                raise ReleaseImportError(rel, f"longer than {MAX_SAMPLE_ID} characters (the studio's limit for question ids)",
                                         sample=sid[:40] + "…", field="sample_id")
            if "\x00" in sid:
                raise ReleaseImportError(rel, "holds a NUL character (\\u0000), which cannot be stored",
                                         sample=f"#{si}", field="sample_id")
            if sid in seen:
                raise ReleaseImportError(rel, f"sample id also used in {seen[sid]}: question ids would collide",
                                         sample=sid, field="sample_id")
            seen[sid] = rel
            for ti, task in enumerate(sample["tasks"]):
                qid = f"{sid}_task{ti}"
                ev = event_slug or (questions.get(qid) or {}).get("event") or default_event
                if slugify(ev) != ev:
                    raise ReleaseImportError(MANIFEST_NAME, f"event '{ev}' is not a slug", field=f"questions.{qid}.event")
                planned.append(_Planned(dim, rel, si, ti, sample, task, qid, ev))
                for name, value in _polygon_answers(task):
                    if not value.strip():
                        continue
                    vrel = safe_relative(value)
                    cand = [file_tasks_dir / vrel.as_posix()] if vrel else []
                    cand.append(file_tasks_dir / "gold_polygons" / Path(value.replace("\\", "/")).name)
                    gp = next((c for c in cand if c.is_file()), None)
                    if gp is None:
                        missing.setdefault(value, {"path": value, "question_ids": [], "reason": "gold polygon not found"})["question_ids"].append(qid)
                        continue
                    doc = _load_json(gp, rel_of(gp))
                    gprob = _first_schema_problem("gold_polygon", doc)
                    if gprob:
                        raise ReleaseImportError(rel_of(gp), gprob[1], field=json_path(gprob[0]))
                    polygons[value] = gp
            ev0 = planned[-1].event
            for p in data_paths(sample.get("input_data") or {}):
                prel = safe_relative(p)
                f = images_dir / prel.as_posix() if prel else None
                if f is not None and f.is_file():
                    images[(ev0, p)] = f
                else:
                    m = missing.setdefault(p, {"path": p, "question_ids": [],
                                               "reason": "absolute path or outside images/" if prel is None
                                               else "not found under images/"})
                    m["question_ids"].extend(f"{sid}_task{ti}" for ti in range(len(sample["tasks"])))
    return _Parsed(root, tasks_dir, sidecar, planned, images, missing, polygons)


class _DataRootSnapshot:
    """Hard-link snapshot of folders under the data root, to undo file changes of a failed import."""

    def __init__(self, dirs: list[Path]):
        self.dirs = [Path(d) for d in dict.fromkeys(dirs)]
        tmp_root = Path(settings.STUDIO_DATA_ROOT) / "tmp"
        tmp_root.mkdir(parents=True, exist_ok=True)
        self.backup = tmp_root / imports_staging_name("snapshot-")
        self.existed: dict[Path, set[str]] = {}

    def take(self) -> None:
        for i, d in enumerate(self.dirs):
            if not d.is_dir():
                continue
            files = set()
            for p in d.rglob("*"):
                if p.is_file() and not p.is_symlink():
                    rel = p.relative_to(d).as_posix()
                    dst = self.backup / str(i) / rel
                    dst.parent.mkdir(parents=True, exist_ok=True)
                    try:
                        os.link(p, dst)
                    except OSError:
                        shutil.copy2(p, dst)
                    files.add(rel)
            self.existed[d] = files

    def restore(self) -> None:
        for i, d in enumerate(self.dirs):
            if d not in self.existed:
                shutil.rmtree(d, ignore_errors=True)
                continue
            keep = self.existed[d]
            if d.is_dir():
                for p in sorted(d.rglob("*"), reverse=True):
                    rel = p.relative_to(d).as_posix()
                    if p.is_file() and rel not in keep:
                        p.unlink()
                    elif p.is_dir() and not any(p.iterdir()):
                        p.rmdir()
            for rel in keep:
                src, dst = self.backup / str(i) / rel, d / rel
                dst.parent.mkdir(parents=True, exist_ok=True)
                os.replace(src, dst)

    def discard(self) -> None:
        shutil.rmtree(self.backup, ignore_errors=True)
        try:
            self.backup.parent.rmdir()
        except OSError:
            pass


def _layer_shas(layer: Layer) -> set[str]:
    return {*((layer.metadata or {}).get("source_sha256") or {}).values(), layer.sha256} - {""}


def _comparable(sample: dict, task: dict) -> str:
    """Canonical text of a (sample without tasks, task) pair; polygon answers compared by base name
    (an export moves them to gold_polygons/)."""
    head = {k: v for k, v in sample.items() if k != "tasks"}
    t = dict(task)
    spec, answer = t.get("eval_spec"), t.get("final_answer")
    if isinstance(spec, dict) and isinstance(answer, dict):
        answer = dict(answer)
        for name, typ in spec.items():
            if typ == "polygon_iou" and isinstance(answer.get(name), str):
                answer[name] = Path(answer[name].replace("\\", "/")).name
        t["final_answer"] = answer
    return canonical({"sample": head, "task": t})


def _blank_gold(task: dict) -> bool:
    """Whether a file's task leaves its gold blank: an answer ``null`` or missing from
    ``final_answer``, or a step's observation blank (``kernel.golddiff.is_blank_obs``)."""
    final = task.get("final_answer") if isinstance(task.get("final_answer"), dict) else {}
    spec = task.get("eval_spec") if isinstance(task.get("eval_spec"), dict) else {}
    traj = task.get("trajectory") if isinstance(task.get("trajectory"), list) else []
    return (any(final.get(name) is None for name in spec)
            or any(isinstance(st, dict) and is_blank_obs(st.get("obs")) for st in traj))


def import_release_dir(user, path, *, event_slug: str | None = None, release_version: str | None = None,
                       make_release: bool = True, publish: bool = True, accept_proposals: bool = False) -> ImportReport:
    """Import a benchmark folder in the release layout (see :func:`read_release_dir`).

    * Events: the sidecar's event per question, else ``event_slug``, else the folder's name.
    * Layers: each input_data path found under ``images/`` is linked to the event's layer of that
      file when its sha256 matches, else imported (``import_raster_file`` / ``import_vector_file``);
      a path not found is recorded (``images_missing``), not fatal. A different file under an
      existing layer's name is an error.
    * Tasks: a question whose task already exports exactly this sample and task is ``unchanged``;
      otherwise a new revision (``updated``) or task (``created``) is written with the symbolic
      trajectory (call + args), plus an import replay (succeeded, gold accepted) holding the file's
      trajectory with obs, final answer, eval spec and answer format, and ``source.json``.
      Imported tasks are ``approved``.
    * Variants: ``variants/tasks/`` is read like ``tasks/``; each question the sidecar's
      ``variants`` describes gets its ``TaskVariant`` row, linked to its base task
      (``release_variants.link_imported_variants``; a base found nowhere is an error at
      ``variants.<question id>``).
    * Blank answers: each written task's blank answer fields get proposed sources
      (``report.proposals``, each with ``bound``); ``accept_proposals`` binds them as
      ``import_tasks --accept-proposals`` does (``task_import.file_proposals``), and a
      task whose file leaves its gold blank (an answer null, an observation ``{}``/``null``/
      missing) gets its import replay recorded as accepted automatically (``accepted_by`` empty),
      so that the next ``manage.py replay`` of it becomes the gold by itself (use ``--no-release``:
      a released task's gold is frozen).
    * Release: ``release_version``, or the sidecar's release version when ``make_release``, is
      created with the imported tasks and published (``publish``; the sidecar's status when it
      names one); an existing release of that version must hold exactly these revisions.

    All or nothing: the database rows and the files under the data root are restored on any
    error. Raises :class:`ReleaseImportError` (file, sample, field) and ``PermissionDenied``.
    """

    if user is not None:
        require(user, "data.import")
    parsed = read_release_dir(path, event_slug=event_slug)
    report = ImportReport(images_missing=sorted(parsed.missing.values(), key=lambda m: m["path"]))
    sidecar = parsed.sidecar or {}
    side_release = sidecar.get("release") or {}
    version = release_version or (side_release.get("version") if make_release else None)
    if version and not SEMVER_RE.match(version):
        raise ReleaseImportError("--release-version", f"'{version}' is not a semantic version")

    # read-only checks of the images against existing layers (before anything is written)
    for (slug, p), f in parsed.images.items():
        ev = Event.objects.filter(slug=slug).first()
        layer = find_layer({l.file_name: l for l in ev.layers.all()}, p) if ev else None
        if layer is not None and sha256_file(f) not in _layer_shas(layer):
            raise ReleaseImportError(f"images/{p}", f"differs from layer {layer.file_name} of event {slug} already "
                                                    "in the studio; import into another event (--event)")

    data_root = Path(settings.STUDIO_DATA_ROOT)
    art_root = Path(settings.STUDIO_ARTIFACT_ROOT)
    slugs = sorted({pl.event for pl in parsed.planned})
    snapshot = _DataRootSnapshot([data_root / "events" / s for s in slugs] + [art_root / IMPORT_ARTIFACTS])
    snapshot.take()
    try:
        with transaction.atomic():
            events = {}
            side_events = sidecar.get("events") or {}
            for slug in slugs:
                info = side_events.get(slug) or {}
                types = {str(pl.sample.get("disaster_type") or "") for pl in parsed.planned if pl.event == slug}
                ev, created = Event.objects.get_or_create(slug=slug, defaults={
                    "name": info.get("name") or slug, "source": (info.get("source") or str(parsed.root.resolve()))[:500],
                    "disaster_type": (info.get("disaster_type") or (types.pop() if len(types) == 1 else ""))[:40]})
                events[slug] = ev
                if created:
                    report.events_created.append(slug)
            for (slug, p), f in sorted(parsed.images.items()):
                layers = {l.file_name: l for l in events[slug].layers.all()}
                if find_layer(layers, p) is not None:
                    report.layers[f"{slug}/{p}"] = "linked"
                    continue
                if release_variants.is_unreadable_file(f):  # made again with its variant (release_variants)
                    report.layers[f"{slug}/{p}"] = "unreadable"
                    continue
                sample = next(pl.sample for pl in parsed.planned if pl.event == slug and p in data_paths(pl.sample.get("input_data") or {}))
                key, entry = entry_of(sample.get("input_data") or {}, p)
                try:
                    if p.lower().endswith((".geojson", ".json", ".shp")):
                        imports.import_vector_file(f, event_slug=slug)
                    else:
                        imports.import_raster_file(f, event_slug=slug, file_name=layer_file_name(p),
                                                   modality=entry.get("modality") or None, phase=phase_of_key(key))
                except DataImportError as exc:
                    raise ReleaseImportError(f"images/{p}", str(exc)) from exc
                report.layers[f"{slug}/{p}"] = "created"

            now = timezone.now()
            pinned: list[tuple[Task, int, int]] = []
            for pl in parsed.planned:
                task = Task.objects.select_related("event", "head").filter(question_id=pl.question_id).first()
                if task is not None and task.head_id:
                    run = gold_replay(task.pk, task.head_id)
                    if run is not None:
                        head, tdict = sample_and_task(task, task.head, run, import_source(task.head))
                        if _comparable(head, tdict) == _comparable(pl.sample, pl.task):
                            report.unchanged.append(pl.question_id)
                            pinned.append((task, task.head_id, run.pk))
                            continue
                if task is not None:
                    try:
                        require_unreleased(task, "an import with other content")
                    except TaskLockedError as exc:
                        raise ReleaseImportError(pl.file, str(exc), sample=pl.sample["sample_id"],
                                                 field=f"tasks[{pl.task_index}]") from None
                old_status = task.status if task else ""
                (report.created if task is None else report.updated).append(pl.question_id)
                trajectory = pl.task.get("trajectory") if isinstance(pl.task.get("trajectory"), list) else []
                content, authored = file_task_content(pl.sample, pl.task)
                bound_content, proposals = file_proposals(content, authored, accept=accept_proposals)
                blank_gold = accept_proposals and _blank_gold(pl.task)
                if proposals:
                    report.proposals[pl.question_id] = proposals
                provenance = {k: v for k, v in ((sidecar.get("questions") or {}).get(pl.question_id) or {}).items()
                              if k in ("authors", "reviewers", "revision", "replay_hash", "task_id")} or None
                record = source_record(pl.sample, pl.task, content, file=pl.file, sample_index=pl.sample_index,
                                       task_index=pl.task_index, release=side_release.get("version"),
                                       source_dir=str(parsed.root.resolve()), provenance=provenance)
                problem = content_problem(to_storage(bound_content))
                if problem:
                    raise ReleaseImportError(pl.file, problem, sample=pl.sample["sample_id"])
                bound = sum(bool(p["bound"]) for p in proposals)
                task, rev = write_imported_revision(
                    user, task, event=events[pl.event], sample_id=str(pl.sample["sample_id"]),
                    task_index=pl.task_index, question_id=pl.question_id, dimension=pl.dim,
                    content=to_storage(bound_content), source=source_text(record),
                    message=f"imported from {pl.file}" + (f"; accepted the proposed sources of {bound} blank "
                                                          f"answer field(s)" if bound else ""))
                approve_imported(user, task, from_status=old_status,
                                 reason=f"imported from {parsed.root}/{pl.file} (sample {pl.sample_index}, "
                                        f"task {pl.task_index})")
                source = {k: v for k, v in record.items() if k != "content"}
                key = hashlib.sha256(canonical(source).encode("utf-8")).hexdigest()[:32]
                adir = f"{IMPORT_ARTIFACTS}/{key}"
                (art_root / adir).mkdir(parents=True, exist_ok=True)
                (art_root / adir / SOURCE_FILE).write_text(dumps(source), encoding="utf-8")
                for name, value in _polygon_answers(pl.task):
                    if value in parsed.polygons:
                        vrel = safe_relative(value)
                        dst = art_root / adir / (vrel.as_posix() if vrel else f"gold_polygons/{Path(value).name}")
                        dst.parent.mkdir(parents=True, exist_ok=True)
                        shutil.copyfile(parsed.polygons[value], dst)
                final = to_storage(pl.task.get("final_answer"))
                stored_trajectory = to_storage(trajectory)
                run = record_imported_gold(
                    user, task, rev, filled_trajectory=stored_trajectory, final_answer=final,
                    eval_spec=to_storage(pl.task.get("eval_spec") or {}),
                    answer_format=to_storage(pl.task.get("answer_format") or {}), artifact_dir=adir, at=now,
                    auto_accepted=blank_gold)
                pinned.append((task, rev.pk, run.pk))

            variant_questions = {pl.question_id: pin for pl, pin in zip(parsed.planned, pinned)
                                 if pl.file.startswith(f"{release_variants.VARIANTS_DIR}/")}
            try:
                release_variants.link_imported_variants(user, sidecar.get("variants") or {}, variant_questions)
            except release_variants.VariantReleaseError as exc:
                raise ReleaseImportError(MANIFEST_NAME, exc.problem, field=f"variants.{exc.question_id}") from exc
            if version:
                _import_release(user, version, side_release, pinned, report, publish)
    except BaseException:
        snapshot.restore()
        raise
    finally:
        snapshot.discard()
    return report


def _import_release(user, version: str, side_release: dict, pinned, report: ImportReport, publish: bool) -> None:
    want = {(t.pk, rev_id) for t, rev_id, _ in pinned}
    existing = Release.objects.filter(version=version).first()
    report.release = version
    if existing is not None:
        have = set(ReleaseTask.objects.filter(release=existing).values_list("task_id", "revision_id"))
        if have != want:
            raise ReleaseImportError(MANIFEST_NAME, f"release {version} already exists in the studio with other "
                                                    "task revisions; import with another --release-version",
                                     field="release.version")
        return
    release = Release.objects.create(version=version, changelog=side_release.get("changelog") or "",
                                     created_by=user)
    ReleaseTask.objects.bulk_create([
        ReleaseTask(release=release, task=t, revision_id=rev_id, replay_id=run_id, question_id=t.question_id)
        for t, rev_id, run_id in pinned])
    pin_layers(release)
    report.release_created = True
    if publish and side_release.get("status", "published") == "published":
        try:
            _publish(user, release)
        except ReleaseError as exc:
            raise ReleaseImportError(MANIFEST_NAME, str(exc), field="release") from exc
