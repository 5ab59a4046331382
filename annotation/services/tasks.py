"""Service functions for tasks: the one place where a task is created or a revision saved.

Every save is a new immutable ``TaskRevision`` (who, when, message); a save against a stale
version raises :class:`StaleVersionError` (HTTP 409 in the API) and writes nothing. Restoring an
old revision writes it again as a new revision. Fast QC runs on every save; errors block
submission (``annotation.services.review``), not saving: work is never lost. Unsaved editor
state is autosaved per user as a ``TaskDraft`` (never a revision) and dropped by the next save.

Content is locked while a reviewer holds the task (submitted, in review, approved) and for good
once released: the author withdraws a submitted task (or the reviewer returns it) to edit again.
Status changes live in ``annotation.services.review`` only.
"""
from __future__ import annotations

import difflib
import json
from typing import Any

from django.db import IntegrityError, transaction

from annotation import qc
from annotation.models import Event, Task, TaskComment, TaskDraft, TaskRevision
from annotation.services.content import derived_manifest, layer_manifest_entry, revision_content

# DORA's task-file names per dimension and the content fields of a revision: kernel/
from kernel.catalogue import result_types  # noqa: E402
from kernel.content import (
    CONTENT_FIELDS,  # noqa: E402
    answer_renames,  # noqa: E402
)
from kernel.content import accept_proposals as kernel_accept_proposals  # noqa: E402
from kernel.content import answer_proposals as kernel_answer_proposals  # noqa: E402
from kernel.errors import Conflict, InvalidInput, Locked
from kernel.taskfile import from_storage, json_problem, source_text  # noqa: E402
from kernel.vocabulary import TASK_FILES  # noqa: E402
from studio.permissions import Action, require


class StaleVersionError(Conflict):
    """A save named a version that is no longer the head. ``current`` is the head revision."""

    def __init__(self, task: Task, expected: int):
        self.task = task
        self.expected = expected
        self.current = task.head
        super().__init__(f"task {task.question_id} is at version {task.version}, the save was based on {expected}",
                         field="expected_version")


class TaskLockedError(Locked):
    """The task's status does not allow content edits (it is with a reviewer, or released)."""


#: statuses in which the content may change (a new revision, a restore, an autosaved draft)
EDITABLE_STATUSES = (Task.Status.DRAFT, Task.Status.RETURNED)


def _require_editable(task: Task) -> None:
    require_unreleased(task, "a content edit")
    if task.status not in EDITABLE_STATUSES:
        raise TaskLockedError(f"status: task {task.question_id} is {task.status}; its content is locked "
                              "(withdraw it (author) or have the reviewer return it first)")


def require_unreleased(task: Task, what: str) -> None:
    """Refuse ``what`` (an edit, an import over the task, a gold replay, a gold acceptance) on a
    released task: a published release pinned its content and its gold, and they never change.

    The one lock every writer of a task's content or gold calls (``save_revision``, ``save_draft``,
    ``import_release_dir``, ``import_task_file`` through ``save_revision``, ``replay.services``'
    ``runs.create_run`` for GT mode and ``gold.accept_gold``). Raises :class:`TaskLockedError` with the
    message ``status: task <question id> is released; <what> is refused (…)``.
    """
    if task.status == Task.Status.RELEASED:
        raise TaskLockedError(f"status: task {task.question_id} is released; {what} is refused "
                              "(released tasks never change: copy it into a new task)")


class BrokenReferenceError(InvalidInput):
    """The content wires the gold trajectory wrong: a reference to a later or the same step, to a
    key the step's tool does not return, or a reference-like text that names no step (the editor
    writes ``<key> from trajectory[deleted].obs`` for a reference to a deleted step). ``findings``
    are the QC findings (checks in ``qc.BROKEN_REFERENCE_CHECKS``), each with its location
    (``trajectory[2].args.vector_path``, ``answer_spec[0].source``). Nothing is written."""

    def __init__(self, findings: list[qc.Finding]):
        self.findings = findings
        super().__init__("references: " + " ".join(f.message for f in findings))

    def context(self) -> dict:
        """The API body's ``qc``: the findings, each as a dict."""
        return {"qc": [f.as_dict() for f in self.findings]}


def check_reference_integrity(content: dict) -> None:
    """Refuse content whose references are broken (see :class:`BrokenReferenceError`).

    Runs the fast QC (``annotation.qc.check_task``) and keeps the findings of
    ``qc.BROKEN_REFERENCE_CHECKS``; an unknown tool does not count (its result keys are unknown, so
    a reference to it is not checked), nor does a type mismatch (a QC error that blocks submission).
    """
    broken = [f for f in qc.check_task(content) if f.check in qc.BROKEN_REFERENCE_CHECKS]
    if broken:
        raise BrokenReferenceError(broken)


class TaskValidationError(InvalidInput):
    """The task cannot move on (submission) because QC found errors. ``findings`` lists them."""

    def __init__(self, findings: list[qc.Finding]):
        self.findings = findings
        super().__init__("; ".join(f.message for f in findings if f.severity == "error"), field="")

    def context(self) -> dict:
        """The API body's ``qc``: the findings, each as a dict."""
        return {"qc": [f.as_dict() for f in self.findings]}


def build_input_data(event: Event, layer_keys: dict[str, int], base: dict | None = None) -> dict:
    """Build ``input_data`` from ``{input_data key: layer id}``; every layer must belong to ``event``.

    A dotted key nests: ``temporal_images.t1`` → ``{"temporal_images": {"t1": entry}}`` (T4's
    phases, dora-format.md §(a)). ``base`` holds entries kept verbatim (e.g. an imported task's
    entries that name no layer); layer-built entries win on the same key. Raises ``ValueError``
    naming the key whose layer is not in the event, or a key that is empty.
    """
    layers = {l.pk: l for l in event.layers.filter(pk__in=[int(v) for v in layer_keys.values()])}
    out = json.loads(json.dumps(base or {}))
    for key, layer_id in layer_keys.items():
        layer = layers.get(int(layer_id))
        if layer is None:
            raise InvalidInput(f"input_data.{key}: layer {layer_id} is not a layer of event {event.slug}")
        parts = [p.strip() for p in str(key).split(".")]
        if not all(parts):
            raise InvalidInput(f"input_data.{key}: a key needs a name on each side of every dot")
        node = out
        for part in parts[:-1]:
            if not isinstance(node.get(part), dict):
                node[part] = {}
            node = node[part]
        node[parts[-1]] = layer_manifest_entry(layer)
    return out


#: the longest text the revision's columns hold (annotation.models.TaskRevision), by field
TEXT_LIMITS = {"task_category": 200, "task_category_code": 40, "disaster_type": 40, "message": 300}
JSON_FIELDS = ("input_data", "classes", "tools", "trajectory", "answer_spec")


def content_problem(content: dict, message: str = "") -> str | None:
    """Why ``content`` (fields of ``CONTENT_FIELDS``) and the revision ``message`` cannot be
    stored, as ``<field>: <problem>``, or None. Checks the question's length against
    ``settings.STUDIO_MAX_QUESTION_CHARS``, the text columns' lengths (:data:`TEXT_LIMITS`: an
    over-long value is refused with the field and the limit, never cut), a NUL character in the
    question or a text column (PostgreSQL cannot store it) and the JSON fields (:func:`json_problem`). Every writer of a revision calls it before writing."""
    from django.conf import settings

    limit = int(settings.STUDIO_MAX_QUESTION_CHARS)
    question = content.get("question")
    if isinstance(question, str) and len(question) > limit:
        return f"question: {len(question)} characters, more than the limit of {limit} (STUDIO_MAX_QUESTION_CHARS)"
    for name, n in TEXT_LIMITS.items():
        value = message if name == "message" else content.get(name)
        if isinstance(value, str) and len(value) > n:
            return f"{name}: {len(value)} characters, more than the {n} it may hold"
    for name in ("question", *TEXT_LIMITS):
        value = message if name == "message" else content.get(name)
        if isinstance(value, str) and "\x00" in value:
            return f"{name}: holds a NUL character (\\u0000), which cannot be stored"
    for name in JSON_FIELDS:
        if name in content:
            problem = json_problem(content[name], name)
            if problem:
                return problem
    return None


def _require_storable(content: dict, message: str = "") -> None:
    problem = content_problem(content, message)
    if problem:
        raise InvalidInput(problem)


def _next_sample_id(event: Event) -> str:
    n = event.tasks.count() + 1
    while True:
        candidate = f"{event.slug}_{n:04d}"
        if not Task.objects.filter(sample_id=candidate).exists():
            return candidate
        n += 1


def _content(data: dict) -> dict:
    return {k: data[k] for k in CONTENT_FIELDS if k in data}


class TaskExistsError(Conflict):
    """A task with that question id exists already (an explicit ``sample_id`` that collides):
    HTTP 409 in the API."""


#: how often :func:`create_task` draws the next free sample id again after losing a race for one
CREATE_ATTEMPTS = 50


@transaction.atomic
def create_task(user, event: Event, *, dimension: str, content: dict, sample_id: str | None = None,
                task_index: int = 0, message: str = "created", source: dict | str | None = None) -> Task:
    """Create a task with its first revision. ``content`` holds the fields of ``CONTENT_FIELDS``;
    ``source`` the file's own sample and task for an imported one (``TaskRevision.source``).

    Content that cannot be stored (:func:`content_problem`) is a ``ValueError`` naming the field.
    Without ``sample_id`` the next free ``<event>_NNNN`` is drawn under a row lock of the event
    (one drawing creation at a time per event, so concurrent creations all succeed, however many:
    issue 31 saw 1–9 of 96 starve after 50 redraws on PostgreSQL); a task with an explicit id
    that takes the drawn one meanwhile meets the unique ``question_id`` and the draw is repeated,
    inside a savepoint (never an ``IntegrityError``). Raises ``PermissionDenied`` (role), ``ValueError`` (unknown dimension),
    :class:`TaskExistsError` (``sample_id`` given and its question id taken),
    ``BrokenReferenceError`` (a broken reference in the trajectory or the answer; nothing written).
    """
    require(user, Action.TASK_CREATE)
    if dimension not in TASK_FILES:
        raise InvalidInput(f"dimension: '{dimension}' is not one of {', '.join(TASK_FILES)}")
    _require_storable(_content(content), message)
    check_reference_integrity(_content(content))
    if not sample_id:
        # the allocation lock: creations that draw a sample id take the event's row in turn
        # (FOR NO KEY UPDATE: inserts of tasks with their own ids, which only share-lock the row
        # through the foreign key, go on), so the count below sees every earlier creation's task
        # and no two draw the same id. SQLite's BEGIN IMMEDIATE already serialises writers.
        Event.objects.select_for_update(no_key=True).only("pk").get(pk=event.pk)
    for _ in range(CREATE_ATTEMPTS):
        sid = sample_id or _next_sample_id(event)
        try:
            with transaction.atomic():
                task = Task.objects.create(
                    event=event, sample_id=sid, task_index=task_index,
                    question_id=f"{sid}_task{task_index}", dimension=dimension, created_by=user,
                )
        except IntegrityError:
            if not Task.objects.filter(question_id=f"{sid}_task{task_index}").exists():
                raise  # another constraint: not a race for the id
            if sample_id:
                raise TaskExistsError(f"sample_id: task {sid}_task{task_index} already exists") from None
            continue
        _write_revision(user, task, _content(content), message, source=source)
        return task
    raise TaskExistsError(f"sample_id: no free sample id in event {event.slug} after {CREATE_ATTEMPTS} attempts; "
                          "try again")


def _write_revision(user, task: Task, content: dict, message: str, source: dict | str | None = None) -> TaskRevision:
    number = task.version + 1
    text = source if isinstance(source, str) else source_text(source)
    rev = TaskRevision.objects.create(task=task, number=number, author=user, message=message, source=text,
                                      **content)
    task.version = number
    task.head = rev
    task.save(update_fields=["version", "head", "updated_at"])
    return rev


@transaction.atomic
def write_imported_revision(user, task: Task | None, *, event: Event, sample_id: str, task_index: int,
                            question_id: str, dimension: str, content: dict, message: str,
                            source: dict | str) -> tuple[Task, TaskRevision]:
    """The release import's writer of tasks and revisions: ``task`` (or, when None, a new task of
    ``event`` with these ids) gets ``content`` (stored form, :func:`content_problem` already
    checked by the caller) as its next revision, with the file's own sample and task as ``source``.

    Unlike :func:`save_revision` it takes any status but released (the import replaces what a
    release's review approved; ``annotation.services.review.approve_imported`` then records the
    status) and does not check references: a file the benchmark's loader accepts imports as it is
    (``docs/task-files.md``). Needs ``data.import`` (``user`` None: a system import). Raises
    ``PermissionDenied``, ``TaskLockedError`` (released). Returns ``(task, revision)``.
    """
    if user is not None:
        require(user, Action.DATA_IMPORT)
    if task is None:
        task = Task.objects.create(event=event, sample_id=sample_id, task_index=task_index, question_id=question_id,
                                   dimension=dimension, created_by=user)
    else:
        task = Task.objects.select_for_update(of=("self",)).get(pk=task.pk)
        require_unreleased(task, "an import with other content")
    return task, _write_revision(user, task, content, message, source=source)


@transaction.atomic
def save_revision(user, task: Task, *, expected_version: int, content: dict, message: str = "",
                  source: dict | str | None = None) -> TaskRevision:
    """Save new content as the next revision, if ``expected_version`` is still the head.

    Fields absent from ``content`` are carried over from the head, and so is the head's
    ``source`` (the imported file's task, which an export starts from) unless ``source`` is given. The user's autosaved draft of
    the task is dropped (it is now saved). Raises ``StaleVersionError`` when someone saved in
    between (nothing is written), ``TaskLockedError`` when the status locks the content,
    ``ValueError`` naming the field for content that cannot be stored (:func:`content_problem`),
    ``PermissionDenied`` for the role, ``BrokenReferenceError`` when a reference of the merged
    content is broken (nothing is written; the editor's draft keeps the work). Comments pinned to
    an answer field the new content renames (:func:`kernel.content.answer_renames`) are pinned to
    its new name.
    """
    locked = Task.objects.select_for_update(of=("self",)).select_related("head").get(pk=task.pk)
    require(user, Action.TASK_EDIT, locked)
    _require_editable(locked)
    if locked.version != expected_version:
        raise StaleVersionError(locked, expected_version)
    head = locked.head
    merged = {k: getattr(head, k) for k in CONTENT_FIELDS} if head else {}
    merged.update(_content(content))
    _require_storable(merged, message)
    check_reference_integrity(merged)
    rev = _write_revision(user, locked, merged, message or "edited",
                          source=source if source is not None else (head.source if head else ""))
    TaskDraft.objects.filter(task=locked, user=user).delete()
    for old, new in answer_renames(head.answer_spec if head else [], merged.get("answer_spec")).items():
        TaskComment.objects.filter(task=locked, answer_field=old).update(answer_field=new)
    return rev


@transaction.atomic
def restore_revision(user, task: Task, number: int, *, expected_version: int) -> TaskRevision:
    """Write revision ``number``'s content again as a new head revision ("restored r<n>").

    Nothing is overwritten: the revisions in between stay. Raises ``TaskRevision.DoesNotExist``,
    ``StaleVersionError``, ``TaskLockedError``, ``PermissionDenied`` as :func:`save_revision`.
    """
    old = TaskRevision.objects.get(task_id=task.pk, number=number)
    return save_revision(user, task, expected_version=expected_version, content=revision_content(old),
                         message=f"restored r{number}")


# ---- drafts (autosave) -------------------------------------------------------------------------
@transaction.atomic
def save_draft(user, task: Task, *, base_version: int, content: dict) -> TaskDraft:
    """Store the user's unsaved editor state of ``task`` (one draft per user and task, replaced).

    ``content`` is the editor's payload as it stands (any JSON object, even invalid as a task: a
    draft is never checked as a task, only that a JSON column can hold it: no NaN or infinity such
    as ``1e309``, no NUL, no deeper nesting than ``kernel.taskfile.MAX_JSON_DEPTH``, else
    ``InvalidInput`` naming the place). Raises ``PermissionDenied`` or ``TaskLockedError``.
    """
    require(user, Action.TASK_EDIT, task)
    _require_editable(task)
    if not isinstance(content, dict):
        raise InvalidInput("content: a draft is a JSON object")
    problem = json_problem(content, "content")  # never checked as a task, but it must be storable
    if problem:
        raise InvalidInput(problem)
    draft, _ = TaskDraft.objects.update_or_create(task=task, user=user,
                                                  defaults={"base_version": base_version, "content": content})
    return draft


def discard_draft(user, task: Task) -> int:
    """Delete the user's draft of ``task``; returns how many were deleted (0 or 1)."""
    return TaskDraft.objects.filter(task=task, user=user).delete()[0]


# ---- diff between revisions --------------------------------------------------------------------
def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _dict_changes(a: dict, b: dict) -> list[dict]:
    """``[{key, change: added|removed|changed, old, new}]`` over the union of keys, sorted."""
    a, b = a or {}, b or {}
    out = []
    for key in sorted(set(a) | set(b)):
        if key not in a:
            out.append({"key": key, "change": "added", "old": None, "new": b[key]})
        elif key not in b:
            out.append({"key": key, "change": "removed", "old": a[key], "new": None})
        elif _canon(a[key]) != _canon(b[key]):
            out.append({"key": key, "change": "changed", "old": a[key], "new": b[key]})
    return out


def diff_steps(old: list[dict], new: list[dict]) -> list[dict]:
    """Aligned step diff: ``[{op, old_index, new_index, old, new, args}]``.

    ``op`` is ``equal``, ``changed`` (same tool, other arguments; ``args`` lists the argument
    changes), ``added``, ``removed`` or ``replaced`` (another tool). Steps are aligned on their
    tool names with ``difflib.SequenceMatcher`` (longest matching blocks), so an inserted step
    shows as one ``added`` and the steps after it are still compared with their counterparts.
    """
    old, new = list(old or []), list(new or [])
    calls_a = [str(s.get("call", "")) if isinstance(s, dict) else "" for s in old]
    calls_b = [str(s.get("call", "")) if isinstance(s, dict) else "" for s in new]
    out: list[dict] = []

    def row(op, i, j):
        sa = old[i] if i is not None else None
        sb = new[j] if j is not None else None
        args = _dict_changes((sa or {}).get("args") or {}, (sb or {}).get("args") or {}) if sa and sb else []
        out.append({"op": op, "old_index": i, "new_index": j, "old": sa, "new": sb, "args": args})

    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=calls_a, b=calls_b, autojunk=False).get_opcodes():
        if tag == "equal":
            for k in range(i2 - i1):
                same = _canon(old[i1 + k]) == _canon(new[j1 + k])
                row("equal" if same else "changed", i1 + k, j1 + k)
        elif tag == "delete":
            for i in range(i1, i2):
                row("removed", i, None)
        elif tag == "insert":
            for j in range(j1, j2):
                row("added", None, j)
        else:  # replace: pair them up, the surplus is added/removed
            n = min(i2 - i1, j2 - j1)
            for k in range(n):
                row("replaced", i1 + k, j1 + k)
            for i in range(i1 + n, i2):
                row("removed", i, None)
            for j in range(j1 + n, j2):
                row("added", None, j)
    return out


def _answer_changes(spec_a: Any, spec_b: Any, answers_a: dict, answers_b: dict) -> list[dict]:
    """:func:`_dict_changes` of the answer fields by name, a rename (old, new) as one ``renamed`` row
    where the removal of the old name was."""
    renames = answer_renames(spec_a, spec_b)
    added = set(renames.values())
    out = []
    for row in _dict_changes(answers_a, answers_b):
        if row["change"] == "added" and row["key"] in added:
            continue
        if row["change"] == "removed" and row["key"] in renames:
            new = renames[row["key"]]
            row = {"key": f"{row['key']} → {new}", "change": "renamed", "old": row["old"], "new": answers_b[new]}
        out.append(row)
    return out


def diff_revisions(a: TaskRevision, b: TaskRevision) -> dict:
    """What changed from revision ``a`` to revision ``b`` (any two, either order).

    ``{"a": number, "b": number, "fields": [{key, change, old, new}] (question, category, code,
    disaster type), "input_data": [{key, ...}] (per input_data key), "classes": [...],
    "steps": diff_steps(...), "answer": [{key: field name, change, old, new}] (whole field
    entries: eval_type, source, answer_format; a field renamed in place,
    :func:`kernel.content.answer_renames`, is one row ``{key: "old → new", change: "renamed"}``, not a
    removal and an addition), "changed": bool}``.
    """
    scalar = ("question", "task_category", "task_category_code", "disaster_type")
    fields = _dict_changes({k: getattr(a, k) for k in scalar}, {k: getattr(b, k) for k in scalar})
    answers_a = {str(f.get("name")): f for f in (a.answer_spec or []) if isinstance(f, dict)}
    answers_b = {str(f.get("name")): f for f in (b.answer_spec or []) if isinstance(f, dict)}
    steps = diff_steps(a.trajectory, b.trajectory)
    result = {
        "a": a.number, "b": b.number, "fields": fields,
        "input_data": _dict_changes(a.input_data, b.input_data),
        "classes": _dict_changes(a.classes, b.classes),
        "steps": steps,
        "answer": _answer_changes(a.answer_spec, b.answer_spec, answers_a, answers_b),
    }
    result["changed"] = bool(fields or result["input_data"] or result["classes"] or result["answer"]
                             or any(s["op"] != "equal" for s in steps))
    return result


def answer_proposals(rev: TaskRevision | None) -> list[dict]:
    """Proposed sources for the answer fields of ``rev`` whose source is blank (a null or missing
    gold): ``[{field, eval_type, source, step, tool, key, type, reason}]`` from the trajectory's
    result keys whose type fits the field's eval type and whose name fits its name best
    (``kernel.content.propose_source``; result types from the catalogue's ``returns``). Never
    applied by itself: :func:`accept_answer_proposal` binds one when a person accepts it."""
    if rev is None:
        return []
    content = {k: from_storage(getattr(rev, k)) for k in CONTENT_FIELDS}
    return kernel_answer_proposals(content, content["trajectory"], result_types())


@transaction.atomic
def accept_answer_proposal(user, task: Task, *, field: str, expected_version: int) -> TaskRevision:
    """Bind the blank answer field ``field`` of the head revision to its current proposal (worked
    out again here, never taken from the client) by saving the next revision. The binding rule is
    ``kernel.content.accept_proposals`` (the one ``import_tasks --accept-proposals`` uses).

    Raises ``ValueError`` naming the field (not a field, not blank, nothing proposed), and what
    :func:`save_revision` raises (``StaleVersionError``, ``TaskLockedError``, ``PermissionDenied``).
    """
    head = Task.objects.select_related("head").get(pk=task.pk).head
    blank = head is not None and any(isinstance(f, dict) and f.get("name") == field and f.get("source") is None
                                     for f in head.answer_spec or [])
    if not blank:
        names = [f.get("name") for f in (head.answer_spec if head else []) or [] if isinstance(f, dict)]
        raise InvalidInput(f"answer_spec.{field}: " + ("its source is not blank" if field in names else "no such answer field"))
    spec, rows = kernel_accept_proposals(head.answer_spec, answer_proposals(head), fields=[field])
    row = rows[0]
    if not row["bound"]:
        raise InvalidInput(f"answer_spec.{field}: {row['why_not']}")
    return save_revision(user, task, expected_version=expected_version, content={"answer_spec": spec},
                         message=f"accepted proposed source of {field}: {row['source']}")


def _set_at(input_data: dict, location: str, field: str, value: Any) -> None:
    """Set ``field`` of the entry at ``location`` (``input_data.a.b``, as ``kernel.inputs``
    names entries) in place."""
    node = input_data
    for part in location.split(".")[1:]:
        node = node[part]
    node[field] = value


@transaction.atomic
def refresh_derived(user, task: Task, *, expected_version: int) -> TaskRevision:
    """Save the head's content again with its stale derived manifest values (GSD, CRS: those
    ``qc.stale_manifest_values`` reports against :func:`derived_manifest`) replaced by their
    layers' current ones, as the next revision; everything else, the ``source`` included, is
    carried over. The message lists each change (``input_data.post_image.pixel_size_m: null →
    0.5``). The gold replay of the old revision is not the new one's: replay it (the normal flow).

    Unlike an edit it is allowed in every status but released (derived values are not authored
    content: a reviewer's approval stays, and a release pins the new revision once it is
    replayed). Needs ``task.edit``. Raises ``PermissionDenied``, ``TaskLockedError`` (released),
    ``StaleVersionError`` (someone saved in between), ``InvalidInput`` (nothing is
    stale); nothing is written then.
    """
    locked = Task.objects.select_for_update(of=("self",)).select_related("head", "event").get(pk=task.pk)
    require(user, Action.TASK_EDIT, locked)
    require_unreleased(locked, "a refresh of derived values")
    if locked.version != expected_version:
        raise StaleVersionError(locked, expected_version)
    head = locked.head
    if head is None:
        raise InvalidInput("input_data: the task has no revision to refresh")
    stale = qc.stale_manifest_values(head.input_data, derived_manifest(head.input_data, locked.event.layers.all()))
    if not stale:
        raise InvalidInput("input_data: no derived value is stale; nothing to refresh")
    content = revision_content(head)
    content["input_data"] = json.loads(json.dumps(head.input_data))
    for s in stale:
        _set_at(content["input_data"], s["location"], s["field"], s["current"])
    message = ("refreshed derived values: " + "; ".join(
        f"{s['location']}.{s['field']}: {json.dumps(s['stored'])} → {json.dumps(s['current'])}" for s in stale))[:300]
    _require_storable(content, message)
    return _write_revision(user, locked, content, message, source=head.source)


def run_fast_qc(rev: TaskRevision) -> list[qc.Finding]:
    """The fast QC checks of a revision."""
    return qc.check_task(revision_content(rev))

