"""Read queries for releases: lists, details, the ids an export streams, export jobs, and the diff
between two releases (tasks added, removed, changed; per-field gold changes)."""
from __future__ import annotations

import json
from pathlib import Path

from django.conf import settings
from django.db.models import Count

from annotation.models import QcAcknowledgement, Task, TaskRevision
from kernel.golddiff import step_diff
from releases.models import Release, ReleaseTask
from releases.services.export import Entry, SortedEntries, canonical, import_source, sample_and_task
from studio import storage

#: the fields the diff compares, in display order (sample-level ones first)
DIFF_FIELDS = ("question", "input_data", "classes", "disaster_type", "task_category", "task_category_code",
               "tools", "trajectory", "final_answer", "eval_spec", "answer_format")
SAMPLE_FIELDS = {"input_data", "classes", "disaster_type"}


def release_list():
    """Releases, newest first, with ``n_tasks`` and the creator's username (one query)."""
    return (Release.objects.select_related("created_by").annotate(n_tasks=Count("items"))
            .order_by("-id"))


def get_release(version: str) -> Release:
    """The release ``version``; ``Release.DoesNotExist`` if none."""
    return Release.objects.select_related("created_by").get(version=version)


def release_items(release: Release) -> list[dict]:
    """Pinned tasks of a release: ``{question_id, task_id, dimension, status, revision, replay_id,
    replay_hash, question}``, ordered by dimension then question id (one query)."""
    rows = (ReleaseTask.objects.filter(release=release)
            .values("question_id", "task_id", "task__dimension", "task__status", "revision__number",
                    "revision__question", "replay_id", "replay__replay_hash")
            .order_by("task__dimension", "question_id"))
    return [{"question_id": r["question_id"], "task_id": r["task_id"], "dimension": r["task__dimension"],
             "status": r["task__status"], "revision": r["revision__number"], "question": r["revision__question"],
             "replay_id": r["replay_id"], "replay_hash": r["replay__replay_hash"] or ""} for r in rows]


def stale_acknowledgements(release: Release) -> list[dict]:
    """The maintainers' acknowledgements of stale derived values (``derived.*`` checks) on the
    revisions ``release`` pins: ``{question_id, revision, check, field, reason, user, at}``, in
    question-id order (what a published release went out with; two queries)."""
    pinned = {(t, n): q for t, n, q in ReleaseTask.objects.filter(release=release)
              .values_list("task_id", "revision__number", "question_id")}
    rows = (QcAcknowledgement.objects.filter(task_id__in={t for t, _ in pinned}, check_id__startswith="derived.")
            .select_related("user").order_by("task_id", "check_id", "location"))
    out = [{"question_id": pinned[(a.task_id, a.revision_number)], "revision": a.revision_number, "check": a.check_id,
            "field": a.location, "reason": a.reason, "user": a.user.username if a.user_id else None, "at": a.created_at}
           for a in rows if (a.task_id, a.revision_number) in pinned]
    return sorted(out, key=lambda r: r["question_id"])


def release_counts(release: Release) -> dict[str, int]:
    """``{dimension: number of benchmark tasks}`` of a release: its robustness variants apart
    (:func:`release_variant_count`), as the export writes them under ``variants/`` and its sidecar's
    ``counts.by_dimension`` counts them (one query)."""
    rows = (ReleaseTask.objects.filter(release=release, task__variant__isnull=True)
            .values("task__dimension").annotate(n=Count("id")))
    return {r["task__dimension"]: r["n"] for r in sorted(rows, key=lambda r: r["task__dimension"])}


def release_variant_count(release: Release) -> int:
    """How many robustness variants (tasks with a ``TaskVariant``) a release pins (one query)."""
    return ReleaseTask.objects.filter(release=release, task__variant__isnull=False).count()


def release_entries(release: Release, *, chunk: int = 5000, spool_dir: Path | None = None,
                    spool_prefix: str = "export-entries-") -> SortedEntries:
    """The light entries (ids only) an export of ``release`` streams, in export order (dimension,
    then imported sample order, sample id, task index: ``export.export_order``), spooled to disk
    (:class:`~releases.services.export.SortedEntries` in a folder ``spool_prefix``… of ``spool_dir``,
    the system's temporary folder if None; close it, or use it as a context manager).

    The ReleaseTask rows are read by keyset on their id, ``chunk`` at a time (one statement each,
    no cursor held open across the position queries), so a release of 100,000 tasks never holds
    more than a chunk of rows or entries at once (issue 16)."""

    def rows():
        last = 0
        while True:
            batch = list(ReleaseTask.objects.filter(release=release, pk__gt=last).order_by("pk").values_list(
                "pk", "task_id", "revision_id", "replay_id", "question_id", "task__dimension", "task__sample_id",
                "task__task_index")[:chunk])
            for r in batch:
                yield Entry(*r[1:])
            if len(batch) < chunk:
                return
            last = batch[-1][0]

    return SortedEntries(rows(), chunk=chunk, dir=spool_dir, prefix=spool_prefix)


# ------------------------------------------------------------------ export jobs


def exports_dir(version: str) -> Path:
    """The local folder of release ``version``'s export jobs (``STUDIO_DATA_ROOT/exports/<version>``):
    the jobs themselves without a bucket, a worker's scratch with one."""
    return Path(settings.STUDIO_DATA_ROOT) / "exports" / version


def export_key(version: str, job_id: str, name: str) -> str:
    """The storage key of file ``name`` of export job ``job_id`` of release ``version``
    (``exports/<version>/<job id>/<name>``, :func:`studio.storage.key`)."""
    return storage.key("exports", version, job_id, name)


def export_job(version: str, job_id: str) -> dict | None:
    """The status dict of export job ``job_id`` of release ``version`` (see
    ``releases.services.release_export.start_export``), or None: its ``job.json`` in the bucket
    when ``STUDIO_STORAGE_URL`` names one (any web process on any machine reads the same), else
    in the local folder."""
    if not job_id.isalnum():
        return None
    if storage.uses_bucket():
        try:
            raw = storage.read_bytes(export_key(version, job_id, "job.json"))
        except ValueError:  # a version no key can hold
            return None
        try:
            return json.loads(raw) if raw is not None else None
        except ValueError:
            return None
    p = exports_dir(version) / job_id / "job.json"
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def export_job_ids(version: str) -> list[str]:
    """The ids of release ``version``'s export jobs that have a folder (in the bucket with one,
    else locally), sorted."""
    if storage.uses_bucket():
        try:
            return storage.list_dir(storage.key("exports", version))[0]
        except ValueError:
            return []
    d = exports_dir(version)
    return sorted(p.name for p in d.iterdir() if p.is_dir()) if d.is_dir() else []


def export_jobs(version: str) -> list[dict]:
    """Export jobs of a release, newest first."""
    jobs = [export_job(version, job_id) for job_id in export_job_ids(version)]
    return sorted((j for j in jobs if j), key=lambda j: j.get("created_at", ""), reverse=True)


def export_zip_link(version: str, job_id: str, job: dict) -> str | None:
    """A presigned GET URL (``studio.storage.download_url``, ``STUDIO_STORAGE_LINK_TTL_S`` seconds)
    of finished export job ``job``'s zip in the bucket, or None without a bucket (the zip is then a
    local file under :func:`exports_dir`) or when the zip is not in the bucket."""
    if not storage.uses_bucket() or not job.get("zip"):
        return None
    name = export_key(version, job_id, job["zip"])
    if not storage.storage().exists(name):
        return None
    return storage.download_url(name, job["zip"])


# ------------------------------------------------------------------ diff


def _view(item: ReleaseTask) -> dict:
    """The exported fields of a pinned task (sample-level ones included), by field name."""
    head, tdict = sample_and_task(item.task, item.revision, item.replay, import_source(item.revision))
    out = {k: v for k, v in head.items() if k in SAMPLE_FIELDS}
    out.update(tdict)
    return out


def _dict_changes(a, b) -> dict:
    """Per key of two dicts: ``{key: {"a": old, "b": new}}`` for keys whose values differ (absent = None)."""
    a = a if isinstance(a, dict) else {}
    b = b if isinstance(b, dict) else {}
    keys = list(dict.fromkeys([*a, *b]))
    return {k: {"a": a.get(k), "b": b.get(k)} for k in keys if canonical(a.get(k)) != canonical(b.get(k))}


def _step_changes(a: list, b: list) -> list[dict]:
    """The steps that differ, as ``kernel.golddiff.step_diff`` rows (``{index, call, state,
    changes}``; the gold-diff format of the replays), values compared as canonical JSON."""
    rows = step_diff(a, b, equal=lambda x, y: canonical(x) == canonical(y))
    return [r for r in rows if r["state"] != "same"]


def release_diff(a: Release, b: Release) -> dict:
    """Tasks added (in ``b`` only), removed (in ``a`` only) and changed between two releases.

    Returns ``{"a", "b", "added": [{question_id, dimension, question}], "removed": [...],
    "changed": [{question_id, dimension, revision_a, revision_b, fields: [..], gold: {...}}],
    "unchanged": n}``. ``gold`` holds per-field changes: ``question`` {a, b}; ``final_answer`` /
    ``eval_spec`` / ``answer_format`` {answer field: {a, b}}; ``trajectory`` the steps that differ as
``kernel.golddiff`` rows [{index, call, state, changes: [{path, before, after}]}];
    other fields {a, b}. Items pinned to the same revision and replay are unchanged without loading.
    """
    def items(rel):
        return {i.question_id: i for i in ReleaseTask.objects.filter(release=rel).select_related(
            "task", "task__event").only("question_id", "revision_id", "replay_id", "task__dimension",
                                         "task__sample_id", "task__event__disaster_type", "task_id")}

    ia, ib = items(a), items(b)

    def brief(item) -> dict:
        q = TaskRevision.objects.filter(pk=item.revision_id).values_list("question", flat=True).first()
        return {"question_id": item.question_id, "dimension": item.task.dimension, "question": q or ""}

    added = [brief(ib[q]) for q in sorted(set(ib) - set(ia))]
    removed = [brief(ia[q]) for q in sorted(set(ia) - set(ib))]
    changed, unchanged = [], 0
    for qid in sorted(set(ia) & set(ib)):
        x, y = ia[qid], ib[qid]
        if x.revision_id == y.revision_id and x.replay_id == y.replay_id:
            unchanged += 1
            continue
        full = {i.pk: i for i in ReleaseTask.objects.filter(pk__in=[x.pk, y.pk]).select_related(
            "task", "task__event", "revision", "replay")}
        va, vb = _view(full[x.pk]), _view(full[y.pk])
        fields = [f for f in dict.fromkeys([*DIFF_FIELDS, *va, *vb]) if canonical(va.get(f)) != canonical(vb.get(f))]
        if not fields:
            unchanged += 1
            continue
        gold: dict = {}
        for f in fields:
            if f in ("final_answer", "eval_spec", "answer_format"):
                gold[f] = _dict_changes(va.get(f), vb.get(f))
            elif f == "trajectory":
                gold[f] = _step_changes(va.get(f), vb.get(f))
            else:
                gold[f] = {"a": va.get(f), "b": vb.get(f)}
        changed.append({"question_id": qid, "dimension": x.task.dimension,
                        "revision_a": full[x.pk].revision.number, "revision_b": full[y.pk].revision.number,
                        "fields": fields, "gold": gold})
    return {"a": a.version, "b": b.version, "added": added, "removed": removed, "changed": changed,
            "unchanged": unchanged}


def format_diff(diff: dict) -> str:
    """The diff as text (what ``manage.py release_diff`` prints)."""
    lines = [f"release {diff['a']} → {diff['b']}: {len(diff['added'])} added, {len(diff['removed'])} removed, "
             f"{len(diff['changed'])} changed, {diff['unchanged']} unchanged"]
    for it in diff["added"]:
        lines.append(f"+ {it['question_id']} [{it['dimension']}] {it['question']}")
    for it in diff["removed"]:
        lines.append(f"- {it['question_id']} [{it['dimension']}] {it['question']}")
    for it in diff["changed"]:
        lines.append(f"~ {it['question_id']} [{it['dimension']}] r{it['revision_a']} → r{it['revision_b']}: "
                     f"{', '.join(it['fields'])}")
        for f, ch in it["gold"].items():
            if f == "trajectory":
                for s in ch:
                    paths = ", ".join(c["path"] for c in s["changes"][:5]) + (" …" if len(s["changes"]) > 5 else "")
                    lines.append(f"    trajectory[{s['index']}] {s['call']}: {s['state']}" + (f" ({paths})" if paths else ""))
            elif f in ("final_answer", "eval_spec", "answer_format"):
                for name, v in ch.items():
                    lines.append(f"    {f}.{name}: {json.dumps(v['a'], ensure_ascii=False)} → "
                                 f"{json.dumps(v['b'], ensure_ascii=False)}")
            else:
                a, b = (json.dumps(ch[k], ensure_ascii=False) for k in ("a", "b"))
                lines.append(f"    {f}: {a[:200]} → {b[:200]}")
    return "\n".join(lines)


def tasks_for_release_form(limit: int = 500):
    """Approved and released tasks that a new release would hold by default (for the create form)."""
    return (Task.objects.filter(status__in=[Task.Status.APPROVED, Task.Status.RELEASED])
            .values("id", "question_id", "dimension", "status").order_by("dimension", "question_id")[:limit])
