"""Importing a task file in the benchmark's layout as studio tasks (``manage.py import_tasks``).

Moved here from ``replay.services`` (issue 19): creating tasks and revisions is annotation's, and
it goes through the task services (``create_task``, ``save_revision``). The one import rule shared
with ``import_release`` is ``kernel.content``.
"""
from __future__ import annotations

import json
from pathlib import Path

from django.db import transaction

from annotation.models import Layer, Task
from annotation.qc import reference_accepts
from annotation.services.content import revision_content
from annotation.services.tasks import (
    BrokenReferenceError,
    check_reference_integrity,
    content_problem,
    create_task,
    save_revision,
)
from kernel.catalogue import result_types
from kernel.content import MAX_SAMPLE_ID, source_record, task_content
from kernel.content import accept_proposals as _accept_proposals
from kernel.content import answer_proposals as _answer_proposals
from kernel.engine import authored_steps
from kernel.errors import InvalidInput
from kernel.inputs import base_name, walk_data_paths
from kernel.taskfile import TaskFileError, read_task_file, source_text, to_storage
from kernel.vocabulary import dimension_of_code, dimension_of_file


def _jsonable(value):
    """Round-trip through JSON so that stored values compare as the API returns them."""
    return json.loads(json.dumps(value, default=str))


# ============================================================================================
# Importing a task file in the benchmark's layout
# ============================================================================================
class TaskImportError(InvalidInput):
    """A task file cannot be imported; the message names the file, sample, task and field (HTTP 400)."""


def _dimension_of(path: Path, task: dict) -> str | None:
    return dimension_of_file(path.name) or dimension_of_code(task.get("task_category_code"))


def file_task_content(sample: dict, task: dict) -> tuple[dict, list]:
    """``(content, authored steps with obs)`` of a file's task: the one rule both importers use
    (``kernel.content.task_content``; answer fields bound to the step observation that holds their
    value when exactly one does, through a key the reference check takes: ``qc.reference_accepts``)."""
    authored = authored_steps(task.get("trajectory"))
    return task_content(sample, task, authored, reference_accepts(authored)), authored


def answer_proposals(content: dict, authored: list) -> list[dict]:
    """Proposed sources for the blank answer fields of ``content`` over the authored steps (their
    obs when the file has them, else the catalogue's result keys): ``kernel.content.answer_proposals``."""
    return _answer_proposals(content, authored, result_types())


def file_proposals(content: dict, authored: list, *, accept: bool) -> tuple[dict, list[dict]]:
    """``(content, one row per blank answer field)`` of a file's task for both importers: the
    rows are :func:`answer_proposals` (what ``--json`` lists) each with ``bound``. With ``accept``
    (``--accept-proposals``) every blank field is bound to its proposed source by the editor's
    rule, ``kernel.content.accept_proposals``, only through a key the reference check takes
    (``qc.reference_accepts``), and the returned content holds the bound sources; a field not
    bound gets ``why_not`` (nothing proposed is reported, never guessed). Without it the content
    is returned as given and every row has ``bound`` false."""
    proposals = answer_proposals(content, authored)
    if not accept:
        return content, [{**p, "bound": False} for p in proposals]
    spec, rows = _accept_proposals(content.get("answer_spec") or [], proposals, accepts=reference_accepts(authored))
    return {**content, "answer_spec": spec}, rows


def proposal_lines(proposals: list[dict], accepting: bool) -> list[str]:
    """One line of text per blank answer field for the importers' output: ``<field>: bound to
    <source> (<tool>: <reason>)``, ``<field>: left blank: <why_not>``, or without ``accepting``
    ``<field>: proposed <source> …`` / ``<field>: no proposal``."""
    out = []
    for p in proposals:
        why = f" ({p.get('tool')}: {p.get('reason')})" if p.get("source") else ""
        if p.get("bound"):
            out.append(f"{p['field']}: bound to {p['source']}{why}")
        elif accepting:
            out.append(f"{p['field']}: left blank: {p.get('why_not') or 'not bound'}")
        else:
            out.append(f"{p['field']}: " + (f"proposed {p['source']}{why}" if p.get("source") else "no proposal"))
    return out


def import_task_file(user, path: str | Path, event, *, accept_proposals: bool = False) -> list[dict]:
    """Create (or revise) the studio tasks of a task file in the benchmark's layout.

    The file is read by ``kernel.taskfile.read_task_file`` (the benchmark loader's own checks:
    a list of samples with ``sample_id`` and ``tasks``, tasks with ``question``,
    ``task_category``, ``task_category_code``); every value it accepts is kept. Every input-file
    string of a sample's ``input_data`` (the benchmark's suffix rule) must name a layer of
    ``event`` by file name; paths are kept as written (the replay matches layers by file name).
    The content is :func:`file_task_content`, the same rule ``import_release`` uses; the file's own
    sample and task are kept as the revision's ``source`` so that an export writes them back
    unchanged. Values are stored tagged (``kernel.taskfile.to_storage``: NaN never reaches a JSON
    column).

    Returns ``[{question_id, status: created|updated|unchanged, proposals}]``; ``proposals`` lists
    a proposed source for each answer field whose gold is blank (:func:`answer_proposals`), each
    with ``bound``. Without ``accept_proposals`` nothing is bound (``bound`` false: the author
    accepts them one by one in the editor); with it every blank field whose proposal names a source
    is bound to it in the imported revision (:func:`file_proposals`, the editor's rule;
    ``bound`` true), and a field with none keeps its blank source (``bound`` false, ``why_not``).
    The revision's ``source`` keeps what the file gave (blank), so an export of an unreplayed
    task writes the file back. Raises ``TaskImportError`` listing every problem (file, sample,
    task, field) before anything is written.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TaskImportError(f"{path}: cannot read: {exc}") from exc
    try:
        parsed = read_task_file(data, path.name)
    except TaskFileError as exc:
        raise TaskImportError(str(exc)) from exc
    except RecursionError:
        raise TaskImportError(f"{path}: not valid JSON: nested too deeply to read") from None
    layer_names = set(Layer.objects.filter(event=event).values_list("file_name", flat=True))
    errors: list[str] = []
    plans: list[tuple[str, str, int, dict, dict, list]] = []
    seen: dict[str, int] = {}
    for si, sample in enumerate(parsed.samples):
        sid = str(sample["sample_id"])
        where = f"{path.name}: sample '{sid}'"
        if len(sid) > MAX_SAMPLE_ID:
            errors.append(f"{path.name}: sample #{si}: sample_id: longer than {MAX_SAMPLE_ID} characters "
                          "(the studio's limit for question ids)")
            continue
        if "\x00" in sid:
            errors.append(f"{path.name}: sample #{si}: sample_id: holds a NUL character (\\u0000), which cannot be stored")
            continue
        if sid in seen:
            errors.append(f"{where}: sample_id: also used by sample {seen[sid]}: question ids would collide")
            continue
        seen[sid] = si
        for loc, value in walk_data_paths(sample.get("input_data"), "input_data"):
            name = base_name(value)
            if name not in layer_names:
                known = ", ".join(sorted(layer_names)[:8]) + (" …" if len(layer_names) > 8 else "")
                errors.append(f"{where}: {loc}: '{value}' names no layer of event '{event.slug}' "
                              f"(match by file name '{name}'; its layers: {known or 'none'})")
        for ti, task in enumerate(sample["tasks"]):
            dim = _dimension_of(path, task)
            if dim is None:
                errors.append(f"{where}, task {ti}: cannot tell the dimension (file name is not t1_…t5_… and "
                              f"task_category_code is {task.get('task_category_code')!r})")
                continue
            content, authored = file_task_content(sample, task)
            source = source_record(sample, task, content, file=path.name, sample_index=si, task_index=ti)
            content, proposals = file_proposals(content, authored, accept=accept_proposals)
            stored = to_storage(content)
            problem = content_problem(stored)
            if problem:
                errors.append(f"{where}, task {ti}: {problem}")
                continue
            try:  # create_task's and save_revision's check, made here for every task before anything is written
                check_reference_integrity(stored)
            except BrokenReferenceError as exc:
                errors.append(f"{where}, task {ti}: {exc}")
                continue
            plans.append((sid, dim, ti, stored, source_text(source), proposals))
    qids = [f"{sid}_task{ti}" for sid, _, ti, *_ in plans]
    for t in Task.objects.filter(question_id__in=qids).exclude(event=event).select_related("event"):
        errors.append(f"{path.name}: {t.question_id} already exists in event '{t.event.slug}'")
    if errors:
        raise TaskImportError("\n".join(errors))
    out = []
    with transaction.atomic():
        existing = {t.question_id: t for t in Task.objects.filter(question_id__in=qids).select_related("head")}
        for sid, dim, ti, content, source, proposals in plans:
            qid = f"{sid}_task{ti}"
            task = existing.get(qid)
            bound = sum(bool(p["bound"]) for p in proposals)
            message = f"imported from {path.name}" + (f"; accepted the proposed sources of {bound} blank answer "
                                                      f"field(s)" if bound else "")
            if task is None:
                create_task(user, event, dimension=dim, content=content, sample_id=sid, task_index=ti,
                            message=message, source=source)
                status = "created"
            elif (task.head and _jsonable(revision_content(task.head)) == _jsonable(content)
                  and task.head.source == source):
                status = "unchanged"
            else:
                save_revision(user, task, expected_version=task.version, content=content,
                              message="re-" + message, source=source)
                status = "updated"
            out.append({"question_id": qid, "status": status, "proposals": proposals})
    return out


