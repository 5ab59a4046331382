"""A release's lifecycle: create, edit (drafts only), delete, publish.

* A release pins tasks at given revisions and gold replays (``ReleaseTask``) and the version of
  every layer of their events (``ReleaseLayerPin``, ``releases.services.pins``). ``create_release``
  makes a draft of the approved (and already released) tasks at their head; ``publish_release``
  freezes it: every file an export ships (task files, gold polygons, images at the pinned layer
  versions, schemas, variants; not the sidecar) is produced once, each recorded with its SHA-256
  (``ReleaseFile``) and their digest (``export.folder_digest``) stored in
  ``Release.manifest_sha256``; its tasks become ``released``. A published release is never
  changed: the services raise :class:`ReleaseImmutableError`, and database triggers (migration
  0003) refuse UPDATE/DELETE of the rows themselves; a re-export that would ship a different file
  is refused (``releases.services.release_export.export_release``).
* Robustness variants a release pins are produced with it (``releases.services.release_variants``).

Permissions: ``release.export`` for creating and editing releases, ``release.publish``
(maintainers) for publishing one.
"""
from __future__ import annotations

import re
from pathlib import Path

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Count, Max, Min
from django.utils import timezone

from annotation.models import Layer, QcAcknowledgement, Task
from annotation.services import review
from annotation.services.qc import DERIVED_CONTENT_FIELDS, DERIVED_RUN_FIELDS, derived_findings
from annotation.services.review import release_for_release
from kernel.errors import Conflict, InvalidInput
from releases.models import Release, ReleaseFile, ReleaseTask
from releases.selectors import release_entries
from releases.services import release_variants
from releases.services.export import (
    GOLD_REPLAY_ORDER,
    ExportError,
    folder_digest,
)
from releases.services.pins import pin_layers
from replay.models import ReplayRun
from studio.events import emit
from studio.permissions import Action, require

SEMVER_RE = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$")



RELEASABLE = (Task.Status.APPROVED, Task.Status.RELEASED)



class ReleaseError(InvalidInput):
    """A release cannot be created, changed or published; the message names the field or task."""



class ReleaseOpenCommentsError(Conflict):
    """Publishing a release whose tasks have open review comments needs a confirmation
    (``acknowledge_open_comments=True``), which each such task's audit trail then records (HTTP
    409 with ``open_comments``, a count, and ``open_comment_threads``, the threads as
    ``review.open_comment_threads`` gives them)."""

    def __init__(self, release: Release, open_comments: list[dict]):
        self.open_comments = open_comments
        tasks = sorted({c["task"] for c in open_comments})
        super().__init__(f"release {release.version} not published: {len(open_comments)} review comment(s) are open "
                         f"on {', '.join(tasks)}; resolve them or confirm publishing with them open")

    def context(self) -> dict:
        return {"open_comments": len(self.open_comments), "open_comment_threads": self.open_comments}



class ReleaseExistsError(Conflict):
    """A release of that version exists already (HTTP 409), also when another request created it
    a moment ago."""



class ReleaseImmutableError(Conflict):
    """The release is published: it cannot be edited, re-published or deleted (HTTP 409)."""



class ReleaseStaleError(Conflict):
    """A pinned task holds a derived value that no longer equals its source (``derived.*`` QC
    findings: a manifest GSD/CRS its layer changed since, a gold replay whose inputs changed)
    and no maintainer acknowledged it (HTTP 409 with ``stale``: ``[{task, revision, check,
    field, message}]``). Refresh the task (then re-pin it: edit the release's tasks) or
    acknowledge it (:func:`acknowledge_stale`)."""

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
    require(user, Action.RELEASE_PUBLISH, release)
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
    require(user, Action.RELEASE_EXPORT)
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
    require(user, Action.RELEASE_EXPORT, release)
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
    require(user, Action.RELEASE_EXPORT, release)
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
    require(user, Action.RELEASE_PUBLISH, release)
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

