"""Agent runs: import a run folder (or a zip of it) and score it, in the caller or as a background
job; score a run's predictions again on another gold set.

Scoring itself is ``evaluation.scoring`` (pure functions identical to the official evaluator);
this module feeds it the gold samples — from the studio's own tasks (their newest succeeded
replay) or from a task folder in the benchmark's layout — and stores the results.

Run folders uploaded as a zip are imported and scored in the background: the request stores the
zip and starts a :class:`~evaluation.models.RunImportJob`; the job (the app's one background
mechanism, :mod:`evaluation.background`) unpacks it, scores the run as the official evaluator does
(:func:`import_run_zip`) and queues a share of its records for human scoring
(:func:`evaluation.services.queue.queue_share_of_run`). The runs page follows the job; a failed
one shows its first error and can be re-run (the stored zip is kept until the job succeeds).

Where the zip is stored: without a bucket ``STUDIO_DATA_ROOT/uploads/<random>.zip`` (``job.archive``
its absolute path; the worker reads it there, so web and workers share that folder). With a bucket
(``STUDIO_STORAGE_URL``, :mod:`studio.storage`) the request uploads it to the key
``uploads/<random>.zip`` (``job.archive`` the key: relative, never absolute) and nothing of it stays
on the web process's disk; the worker, on any machine sharing the database and the bucket, downloads
it to its own scratch (``STUDIO_DATA_ROOT/uploads/scratch/<worker tag>/<job id>.zip``), imports it and
removes the scratch; the object is deleted when the job succeeds (kept for a re-run otherwise). The
unpacked run folder stays local (``runs/``) either way.

A job's worker (``studio.background``): the process that claims it writes its tag and a
heartbeat while it runs; a crash is written on a fresh connection; :func:`sweep_run_imports`
(registered with :func:`studio.background.register_sweeper`) fails a running job whose worker
died, removing the folder it was unpacking to, and re-sends a queued job that no worker took.
A failed job (so also a swept one) is re-run at once.
"""
from __future__ import annotations

import json
import logging
import math
import shutil
import uuid
from pathlib import Path

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from annotation.services.tasks import TASK_FILES
from evaluation.background import dispatch, job_runner
from evaluation.goldset import GoldSet, GoldSetError, folder_gold_set, release_gold_set, studio_gold_set
from evaluation.jobs import run_import
from evaluation.models import Agent, AgentRun, RunAggregate, RunImportJob, RunRecord
from evaluation.robustness import record_robustness
from evaluation.run_folders import local_run_folder, upload_run_folder
from evaluation.scoring import evaluate_samples, get_gsd, load_run_records, score_task
from evaluation.services.leaderboard import schedule_bootstrap, write_run_aggregate
from evaluation.services.queue import queue_share_of_run
from kernel.errors import Conflict, InvalidInput
from kernel.processes import process_gone
from kernel.taskfile import MAX_JSON_DEPTH, nesting_position
from releases.models import Release
from studio import storage
from studio.background import job_running, worker_lost, worker_tag, write_failure
from studio.events import emit
from studio.permissions import Action, require


class RunImportError(InvalidInput):
    """A run folder cannot be imported; the message names the file and the problem (HTTP 400)."""


def _finite(value):
    """``value`` as a JSON column can store it: NaN and ±Infinity become None and NUL characters in
    strings and keys become U+FFFD. Python's json module — and so the official evaluator — reads
    all of them in run files (the run is scored from the original values); PostgreSQL refuses them."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, dict):
        return {_finite(k) if isinstance(k, str) else k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def _seconds(value) -> float | None:
    """A record's ``elapsed_time`` (seconds, as the benchmark's runner writes it) as a finite
    non-negative float, else None (missing, text, NaN, negative)."""
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) and f >= 0 else None


def _load_records(run_dir: Path) -> dict:
    """``load_run_records`` with its failures as :class:`RunImportError` naming the file: bytes
    that are not UTF-8, a line nested deeper than ``kernel.taskfile.MAX_JSON_DEPTH`` (found by
    ``kernel.taskfile.nesting_position`` before the reader parses it; no column could store it)."""
    for _dim, name in TASK_FILES.items():
        path = run_dir / name[:-5] / "benchmark.jsonl"
        if not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise RunImportError(f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason})") from None
        for n, line in enumerate(text.splitlines(), 1):
            if line.count("[") + line.count("{") <= MAX_JSON_DEPTH:  # too few brackets to nest too deeply
                continue
            where = nesting_position(line)  # kernel.taskfile's bound of JSON read from files
            if where is not None:
                raise RunImportError(f"{path}: line {n}, column {where[1]}: nested deeper than {MAX_JSON_DEPTH} "
                                     "levels of arrays and objects (the limit for JSON read from a file)")
    return load_run_records(run_dir)


#: the longest question and sample id a record row holds (evaluation.models.RunRecord)
QID_MAX, SAMPLE_MAX, NAME_MAX = 240, 200, 200


def _check_records(run_dir: Path, records_by_dim: dict) -> None:
    for dim, records in records_by_dim.items():
        seen: dict[str, int] = {}
        for i, rec in enumerate(records):
            where = f"{run_dir}/{TASK_FILES[dim][:-5]}/benchmark.jsonl: record {i}"
            qid = rec.get("question_id")
            if not isinstance(qid, str) or not qid or "\x00" in qid:
                raise RunImportError(
                    f"{where}: field 'question_id' must be a non-empty string like '<sample_id>_task0', not {qid!r}")
            if len(qid) > QID_MAX:
                raise RunImportError(f"{where}: field 'question_id': {len(qid)} characters, more than {QID_MAX}")
            sid = rec.get("sample_id")
            if sid is not None and len(str(sid)) > SAMPLE_MAX:
                raise RunImportError(f"{where}: field 'sample_id': {len(str(sid))} characters, more than {SAMPLE_MAX}")
            if qid in seen:
                raise RunImportError(f"{where}: field 'question_id': {qid} also in record {seen[qid]} "
                                     "(one record per question)")
            seen[qid] = i


#: The benchmark's planning protocols (a run folder ``<model>_<MODE>``): auto-planning and instruction-following.
PROTOCOLS = ("AP", "IF")


def protocol_from_dir_name(name: str) -> str:
    """``"AP"`` or ``"IF"`` from a run folder named ``<model>_<MODE>`` as the benchmark writes
    them (e.g. ``gpt-4o_AP``), case-insensitive; ``""`` when the name carries neither."""
    tail = name.rsplit("_", 1)[-1].upper() if "_" in name else ""
    return tail if tail in PROTOCOLS else ""


@transaction.atomic
def import_run_dir(user, run_dir: Path, agent_name: str, *, tasks_dir: Path | None = None,
                   mode: str = "dora", tau_r: float = 0.2, tau_a: float = 1.0, release=None,
                   protocol: str | None = None, scaffold: str = "", perception_mode: str | None = None) -> AgentRun:
    """Import and score a run folder (``<dim task name>/benchmark.jsonl`` per dimension).

    The run is pinned to one gold set (:mod:`evaluation.goldset`): ``tasks_dir`` (benchmark
    layout, with ``gold_polygons/``) when given; else ``release`` (a ``releases.Release``: its
    pinned revisions and gold replays); else the studio's current tasks with the records' question
    ids (their accepted gold), named and dated. The DORA score and the per-dimension table are the
    official evaluator's over the set's benchmark tasks only (a run on a release equals
    ``evaluate_runs`` on the release's exported ``tasks/``); a record of a robustness variant is
    scored against the variant's own gold, gets its rule outcome (``RunRecord.robustness``,
    :func:`evaluation.robustness.record_robustness`) and stays outside the set
    (``RunRecord.in_gold_set`` False). ``protocol``: AP or IF (default: read from the folder name,
    see :func:`protocol_from_dir_name`); ``scaffold``: the agent framework (ReAct, ReWOO, ...);
    ``perception_mode``: model, gt (oracle perception), classical or unknown (default: what the
    records' ``studio_session.perception_mode`` say when they all say one, see
    :func:`perception_mode_of_records`, else ``unknown``).
    Raises ``RunImportError`` naming the file and the problem for an unknown protocol, or when the
    folder has no record, a file is not UTF-8 or nests too deeply, a record has no string question
    id or one used twice, a name is too long for its column, a record names no known task, or a
    task has no succeeded replay (no gold).
    """
    _claim_sqlite_write_lock()  # before any read of this transaction (the permission check reads roles)
    require(user, Action.RUN_IMPORT)
    run_dir = Path(run_dir)
    for label, value in (("--agent", agent_name), ("run folder name", run_dir.name)):
        if not value or len(value) > NAME_MAX:
            raise RunImportError(f"{label}: {len(value or '')} characters; a name has 1 to {NAME_MAX}")
    protocol = protocol_from_dir_name(run_dir.name) if protocol is None else str(protocol).strip().upper()
    if protocol and protocol not in PROTOCOLS:
        raise RunImportError(f"protocol: {protocol!r} is not AP (auto-planning) or IF (instruction-following)")
    records_by_dim = _load_records(run_dir)
    n_records = sum(len(v) for v in records_by_dim.values())
    if n_records == 0:
        raise RunImportError(f"{run_dir}: no benchmark.jsonl with records under {', '.join(f[:-5] for f in TASK_FILES.values())}")
    _check_records(run_dir, records_by_dim)
    gold = resolve_gold_set(run_dir, records_by_dim, tasks_dir=tasks_dir, release=release)
    perception_mode = perception_mode or perception_mode_of_records(records_by_dim)
    if perception_mode not in dict(AgentRun.PERCEPTION_MODES):
        raise RunImportError(f"perception mode: {perception_mode!r} is not one of {', '.join(dict(AgentRun.PERCEPTION_MODES))}")
    agent, _ = Agent.objects.get_or_create(name=agent_name)
    run = AgentRun(
        agent=agent, name=run_dir.name, source_dir=str(run_dir), scoring_mode=mode, tau_r=tau_r, tau_a=tau_a,
        gold_dir=str(Path(tasks_dir).resolve()) if tasks_dir is not None else "", imported_by=user,
        protocol=protocol, scaffold=str(scaffold or "").strip()[:60], perception_mode=perception_mode,
    )
    run = _score_into(run, records_by_dim, gold, [run_dir])
    _announce_scored(user, run, n_records)
    return run


def perception_mode_of_records(records_by_dim: dict) -> str:
    """The perception mode a run folder's records name (``studio_session.perception_mode``, written
    by ``manage.py mcp_serve --record``) when every record names the same one; ``"unknown"`` when
    any record names none (the benchmark's own run folders) or they disagree."""
    modes = {((r.get("studio_session") or {}).get("perception_mode") if isinstance(r.get("studio_session"), dict)
              else None) for recs in records_by_dim.values() for r in recs}
    return modes.pop() if len(modes) == 1 and None not in modes else "unknown"


def _announce_scored(user, run: AgentRun, n_records: int) -> None:
    """Emit ``run.scored`` for ``run`` just scored by ``user`` (an import or a re-score)."""
    emit("run.scored", {"run_id": run.pk, "name": run.name, "agent": run.agent.name, "n_records": n_records,
                        "dora_score": run.dora_score, "actor": user.get_username()}, run=run, user=user, actor=user)


def resolve_gold_set(where, records_by_dim: dict, *, tasks_dir: Path | None = None, release=None) -> GoldSet:
    """The gold set a run's records are scored against (:mod:`evaluation.goldset`): the folder
    ``tasks_dir``, else ``release``, else the studio's current tasks the records name. ``where``
    names the run in messages. Raises ``RunImportError`` when the gold cannot be read or a record
    names a question the set does not hold (a release, the studio's tasks)."""
    qids = {r["question_id"] for rs in records_by_dim.values() for r in rs}
    try:
        if tasks_dir is not None:
            gold = folder_gold_set(Path(tasks_dir), qids)
        elif release is not None:
            gold = release_gold_set(release)
        else:
            gold = studio_gold_set(qids)
    except GoldSetError as exc:  # a task without a succeeded replay has no gold to score against
        raise RunImportError(f"{where}: gold: {exc}") from None
    unknown = sorted(qids - set(gold.task_by_qid)) if gold.missing else []
    if unknown:
        raise RunImportError(f"{where}: {gold.missing}: {', '.join(unknown[:10])}")
    return gold


def _score_into(run: AgentRun, records_by_dim: dict, gold: GoldSet, polygon_roots: list) -> AgentRun:
    """Score ``records_by_dim`` against ``gold`` and store ``run`` (unsaved) with its records and
    leaderboard sums. The run's score is the evaluator's over the set's benchmark samples (records
    of other questions are ignored by it, as ``evaluate_runs`` ignores them); the records of
    robustness variants are scored against the variants' samples apart. ``polygon_roots``: where
    predicted polygon files are looked for (the run folder); a release's or the studio's task's
    gold polygon files come from the set (``GoldSet.task_polygon_roots``, looked in first)."""
    mode, tau_r, tau_a = run.scoring_mode, run.tau_r, run.tau_a
    result = evaluate_samples(gold.samples, records_by_dim, gold.polygons, tau_r=tau_r, tau_a=tau_a, mode=mode,
                              polygon_roots=polygon_roots, task_polygon_roots=gold.task_polygon_roots)
    by_variant = (evaluate_samples(gold.variant_samples, records_by_dim, None, tau_r=tau_r, tau_a=tau_a, mode=mode,
                                   polygon_roots=polygon_roots, task_polygon_roots=gold.task_polygon_roots)
                  if gold.variant_samples else {})
    for field, value in gold.run_fields().items():
        setattr(run, field, value)
    run.dora_score, run.dimensions = result.get("dora_score"), result.get("dimensions", {})
    run.save()
    sample_index = {(d, s["sample_id"]): s for samples in (gold.samples, gold.variant_samples)
                    for d, ss in samples.items() for s in ss}
    scored_all = {}
    for doc in (by_variant, result):  # a benchmark task's entry wins (ids never overlap in practice)
        for dim, block in (doc.get("full") or {}).items():
            for t in block.get("tasks", []):
                scored_all[(dim, t["sample_id"], t["task_idx"])] = t
    task_by_qid = gold.task_by_qid
    rows = []
    for dim, records in records_by_dim.items():
        for rec in records:
            qid = rec["question_id"]
            sample_id, _, idx = qid.rpartition("_task")
            sample_id = rec.get("sample_id") or sample_id
            task_idx = int(idx) if idx.isdigit() else 0
            s = scored_all.get((dim, sample_id, task_idx), {})
            sample = sample_index.get((dim, sample_id))
            step_matches = []
            snapshot = {}
            if sample is not None and task_idx < len(sample["tasks"]):
                snapshot = gold_snapshot(sample["tasks"][task_idx], sample)
                detail = score_task(sample["tasks"][task_idx], sample, rec, gold.polygons, tau_r=tau_r, tau_a=tau_a,
                                    mode=mode, polygon_roots=(*gold.polygon_roots_of(dim, sample_id, task_idx),
                                                              *polygon_roots))
                step_matches = detail.get("step_matches", [])
            task = task_by_qid.get(qid)
            rows.append(RunRecord(
                run=run, task=task, question_id=qid, sample_id=_finite(str(sample_id)), task_index=task_idx,
                dimension=dim, predicted_answer=_finite(rec.get("predicted_answer")),
                trajectory=_finite(rec.get("trajectory") or []),
                error=_finite(str(rec.get("error") or "")), task_score=s.get("task_score"), field_scores=s.get("field_scores", {}),
                n_scored_fields=s.get("n_scored_fields", 0), t_any=s.get("t_any"), t_ord=s.get("t_ord"),
                t_em=s.get("t_em"), par_acc=s.get("par_acc"), eff=s.get("eff"), elapsed_s=_seconds(rec.get("elapsed_time")), step_matches=_finite(json.loads(json.dumps(step_matches, default=str))),
                gold=_finite(snapshot), robustness=_robustness(gold.variants, task, rec, s),
                in_gold_set=gold.holds(dim, sample_id, task_idx),
            ))
    RunRecord.objects.bulk_create(rows)
    answered = {(r.dimension, r.sample_id, r.task_index) for r in rows}
    run.unanswered = [
        {"question_id": f"{t['sample_id']}_task{t['task_idx']}", "dimension": dim,
         **{k: t.get(k) for k in ("task_score", "t_any", "t_ord", "t_em", "par_acc", "eff")}}
        for dim, block in sorted((result.get("full") or {}).items()) for t in block.get("tasks", [])
        if (dim, str(t["sample_id"]), t["task_idx"]) not in answered]
    if run.unanswered:
        AgentRun.objects.filter(pk=run.pk).update(unanswered=run.unanswered)
    write_run_aggregate(run.pk)  # the leaderboard's sums, in this transaction
    schedule_bootstrap()  # after the commit: the intervals of the new state, in the background
    return run


def run_records_as_files(run: AgentRun) -> dict[str, list[dict]]:
    """The stored predictions of ``run`` as ``load_run_records`` reads them from its folder:
    ``{dim: [{question_id, sample_id, predicted_answer, trajectory, error, elapsed_time}]}`` in
    question order (NaN, infinities and NUL characters as stored: see :func:`_finite`)."""
    out: dict[str, list[dict]] = {}
    for r in run.records.order_by("dimension", "id").values(
            "dimension", "question_id", "sample_id", "predicted_answer", "trajectory", "error", "elapsed_s"):
        out.setdefault(r["dimension"], []).append({
            "question_id": r["question_id"], "sample_id": r["sample_id"], "predicted_answer": r["predicted_answer"],
            "trajectory": r["trajectory"], "error": r["error"] or None, "elapsed_time": r["elapsed_s"]})
    return out


@transaction.atomic
def record_run_accounting(user, run: AgentRun, *, prompt_tokens: int, completion_tokens: int,
                          cost: float | None, seconds: float) -> AgentRun:
    """Store what a run the studio ran itself spent (an experiment's repeat, written by
    ``experiments.services.score_experiment`` when it scores the repeat): ``prompt_tokens`` and
    ``completion_tokens`` of every model answer its questions used (cache hits included), ``cost``
    of the requests sent in the configuration's price currency (None: no price set), ``seconds``
    the wall-clock seconds of its questions. The leaderboard shows them beside the run's scores
    (blank for an imported run, whose fields stay null). Raises ``InvalidInput`` for a negative or
    non-finite figure, ``PermissionDenied`` without ``run.import``."""
    require(user, Action.RUN_IMPORT)
    values = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "cost": cost, "seconds": seconds}
    for name, value in values.items():
        if value is None and name == "cost":
            continue
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value < 0:
            raise InvalidInput(f"{name}: {value!r} is not a finite number >= 0", field=name)
    AgentRun.objects.filter(pk=run.pk).update(**values)
    for name, value in values.items():
        setattr(run, name, value)
    return run


def rescore_run(user, run: AgentRun, *, release=None) -> AgentRun:
    """Score the predictions of ``run`` again against another gold set without re-running the
    agent: ``release`` (a ``releases.Release``), or the studio's current tasks when None. A new
    run is made (``rescored_from`` = ``run``, same agent, name, mode, thresholds, protocol and
    scaffold; predicted polygon files read from the original run folder when it is still there: with
    a bucket, this machine's copy of it, :func:`evaluation.run_folders.local_run_folder`);
    the old run and its scores stay, each named by its own set. Raises ``RunImportError`` when the
    run is a step-wise planner run, a record names a question the set does not hold, or the gold
    cannot be read; ``PermissionDenied`` without ``run.import``."""
    _claim_sqlite_write_lock()
    require(user, Action.RUN_IMPORT)
    if run.scoring_mode == "stepwise":
        raise RunImportError(f"run {run.pk}: a step-wise planner run has no DORA score to re-score")
    records_by_dim = run_records_as_files(run)
    if not records_by_dim:
        raise RunImportError(f"run {run.pk}: no records to re-score")
    gold = resolve_gold_set(f"run {run.pk}", records_by_dim, release=release)
    new = AgentRun(agent=run.agent, name=run.name, source_dir=run.source_dir, scoring_mode=run.scoring_mode,
                   tau_r=run.tau_r, tau_a=run.tau_a, imported_by=user, protocol=run.protocol, scaffold=run.scaffold,
                   perception_mode=run.perception_mode, rescored_from=run, prompt_tokens=run.prompt_tokens,
                   completion_tokens=run.completion_tokens, cost=run.cost, seconds=run.seconds)
    folder = local_run_folder(run.source_dir) if run.source_dir else None
    roots = [folder] if folder is not None and folder.is_dir() else []
    new = _score_into(new, records_by_dim, gold, roots)
    _announce_scored(user, new, sum(len(recs) for recs in records_by_dim.values()))
    return new


def _upload_limit_bytes() -> int:
    """Setting ``STUDIO_RUN_UPLOAD_MAX_MB`` (default 200): the most a run zip may unpack to."""
    return int(float(settings.STUDIO_RUN_UPLOAD_MAX_MB) * 1024 * 1024)


#: the deepest folder nesting, the longest name part (bytes, the file systems' NAME_MAX) and the
#: longest entry path a run zip may hold: a run folder is ``<run>/<dimension>/benchmark.jsonl``
#: plus polygon files, a few levels deep; deeper or longer entries cannot be unpacked (OSError
#: "File name too long", RecursionError in ``os.makedirs``) and are refused before unpacking
ZIP_MAX_DEPTH, ZIP_MAX_NAME_BYTES, ZIP_MAX_PATH_CHARS = 32, 255, 1024


def _entry_label(name: str) -> str:
    return repr(name if len(name) <= 120 else name[:60] + "…" + name[-40:])


def _zip_members(zf, filename: str) -> list:
    """The members of a run zip after the checks (at most ``STUDIO_RUN_UPLOAD_MAX_ENTRIES``
    entries; no absolute path, no ``..``, no link, no entry deeper than :data:`ZIP_MAX_DEPTH`
    folders, with a name part over :data:`ZIP_MAX_NAME_BYTES` bytes or a path over
    :data:`ZIP_MAX_PATH_CHARS` characters; at most ``STUDIO_RUN_UPLOAD_MAX_MB`` unpacked);
    ``RunImportError`` naming the file, the entry and the limit. Reads the zip's directory only."""
    import stat
    from pathlib import PurePosixPath

    entries = zf.infolist()
    cap = int(settings.STUDIO_RUN_UPLOAD_MAX_ENTRIES)
    if len(entries) > cap:
        raise RunImportError(f"{filename}: {len(entries)} entries, more than the {cap} a run zip may hold "
                             "(STUDIO_RUN_UPLOAD_MAX_ENTRIES)")
    members = [m for m in entries if not m.filename.startswith("__MACOSX/")]
    total = 0
    for m in members:
        p = PurePosixPath(m.filename)
        if m.filename.startswith(("/", "\\")) or ".." in p.parts or ":" in m.filename or "\\" in m.filename:
            raise RunImportError(f"{filename}: entry {_entry_label(m.filename)}: paths must stay inside the run folder")
        if len(m.filename) > ZIP_MAX_PATH_CHARS:
            raise RunImportError(f"{filename}: entry {_entry_label(m.filename)}: a path of {len(m.filename)} "
                                 f"characters, more than {ZIP_MAX_PATH_CHARS}")
        if len(p.parts) > ZIP_MAX_DEPTH:
            raise RunImportError(f"{filename}: entry {_entry_label(m.filename)}: {len(p.parts)} levels of folders, "
                                 f"more than {ZIP_MAX_DEPTH}")
        long_part = next((part for part in p.parts if len(part.encode("utf-8")) > ZIP_MAX_NAME_BYTES), None)
        if long_part is not None:
            raise RunImportError(f"{filename}: entry {_entry_label(m.filename)}: a name of "
                                 f"{len(long_part.encode('utf-8'))} bytes, more than {ZIP_MAX_NAME_BYTES}")
        if stat.S_ISLNK(m.external_attr >> 16):
            raise RunImportError(f"{filename}: entry {_entry_label(m.filename)}: links are not accepted")
        total += m.file_size
        if total > _upload_limit_bytes():
            raise RunImportError(f"{filename}: unpacks to more than {_upload_limit_bytes() // (1024 * 1024)} MB "
                                 f"(STUDIO_RUN_UPLOAD_MAX_MB)")
    return members


def _upload_relative(message: str, base: Path, target: Path, filename: str) -> str:
    """``message`` with the server's unpacking folder replaced by the upload's name: a path
    ``<data root>/runs/<random>/gpt-4o_AP/t1_…/benchmark.jsonl`` reads ``gpt-4o_AP.zip:
    gpt-4o_AP/t1_…/benchmark.jsonl`` (a job's error shows no absolute server path)."""
    for folder in {str(target.resolve()), str(target)} if target != base else ():
        message = message.replace(folder + "/", f"{filename}: ").replace(folder, filename)
    for folder in (str(base.resolve()), str(base)):
        message = message.replace(folder + "/", f"{filename}: ").replace(folder, filename)
    return message


def check_run_zip(upload, filename: str = "run.zip") -> None:
    """The checks :func:`import_run_zip` makes before it writes anything, on their own (they read
    the zip's directory only, so a page can refuse a bad upload at once): a zip archive, at most
    ``STUDIO_RUN_UPLOAD_MAX_ENTRIES`` entries, no absolute path, no ``..``, no link, no entry too
    deep or with too long a name (:func:`_zip_members`), at most ``STUDIO_RUN_UPLOAD_MAX_MB``
    unpacked. Raises
    ``RunImportError`` naming the file and the problem; rewinds ``upload``."""
    import zipfile

    try:
        with zipfile.ZipFile(upload) as zf:
            _zip_members(zf, filename)
    except (zipfile.BadZipFile, OSError) as exc:
        raise RunImportError(f"{filename}: not a zip archive ({exc})") from None
    finally:
        upload.seek(0)


def import_run_zip(user, upload, agent_name: str, *, filename: str = "run.zip", folder: Path | str | None = None,
                   **options) -> AgentRun:
    """Import a run folder uploaded as a zip (the folder itself zipped, or its contents).

    ``upload``: a binary file object. The archive is checked before anything is written
    (:func:`check_run_zip`'s checks), then unpacked under ``STUDIO_DATA_ROOT/runs/`` (it stays
    there: predicted polygon files are read from the run folder) and passed to
    :func:`import_run_dir` with ``options`` (tasks_dir, release, mode, protocol, scaffold…). The
    run folder's name is the zip's single top folder, else the file name without ``.zip`` (so
    ``gpt-4o_AP.zip`` reads protocol AP). Raises ``RunImportError`` naming the file and the
    problem, with paths relative to the upload (never the server's folder); a failed import
    leaves no folder. ``folder``: the folder to unpack into (default a new ``runs/<random>``; the
    background job names it first so that the sweep can remove it if the job's process dies).
    Runs in the caller: the runs page starts it as a background job
    (:func:`start_run_import`).
    """
    import zipfile
    from pathlib import PurePosixPath

    require(user, Action.RUN_IMPORT)
    if not str(agent_name or "").strip():
        raise RunImportError("agent: give the agent's name")
    try:
        zf = zipfile.ZipFile(upload)
    except (zipfile.BadZipFile, OSError) as exc:
        raise RunImportError(f"{filename}: not a zip archive ({exc})") from None
    with zf:
        members = _zip_members(zf, filename)
        tops = {PurePosixPath(m.filename).parts[0] for m in members if PurePosixPath(m.filename).parts}
        files_at_top = any(len(PurePosixPath(m.filename).parts) == 1 and not m.is_dir() for m in members)
        single = next(iter(tops)) if len(tops) == 1 and not files_at_top else None
        name = single or (Path(filename).stem or "run")
        base = Path(folder) if folder else Path(settings.STUDIO_DATA_ROOT) / "runs" / f"{uuid.uuid4().hex[:12]}"
        target = base if single else base / name
        try:
            target.mkdir(parents=True, exist_ok=True)
            for m in members:
                try:
                    zf.extract(m, target if not single else base)
                except OSError as exc:
                    raise RunImportError(f"{filename}: entry {_entry_label(m.filename)}: cannot be unpacked "
                                         f"({exc.strerror or type(exc).__name__})") from None
            run_dir = base / single if single else target
            try:
                return import_run_dir(user, run_dir, agent_name.strip(), **options)
            except RunImportError as exc:
                raise RunImportError(_upload_relative(str(exc), base, target, filename)) from None
        except BaseException:
            shutil.rmtree(base, ignore_errors=True)
            raise


def _robustness(variants: dict[int, dict], task, rec: dict, scored: dict) -> dict:
    """The rule outcome stored on a record of a variant task (``record_robustness``), {} otherwise."""
    variant = variants.get(task.pk) if task is not None else None
    if variant is None:
        return {}
    return _finite(record_robustness(variant, rec.get("trajectory"), rec.get("predicted_answer"),
                                     scored.get("field_scores")))


def _claim_sqlite_write_lock() -> None:
    """On SQLite, take the database's write lock now, at the start of the current transaction.

    SQLite refuses at once ("database is locked", whatever the busy timeout) to turn a transaction
    that has read into one that writes while another connection is writing — e.g. the leaderboard's
    background bootstrap storing its intervals during an import. A transaction that writes first
    waits for the other writer instead (busy timeout, studio/settings.py). A write statement that
    matches no row takes the lock; on other databases this does nothing."""
    if connection.vendor == "sqlite" and connection.in_atomic_block:
        with connection.cursor() as cursor:
            cursor.execute(f"UPDATE {RunAggregate._meta.db_table} SET n_records = n_records WHERE 0")


def gold_snapshot(task: dict, sample: dict | None = None) -> dict:
    """What judges and scorers need of a gold task (benchmark layout): ``{question, tools,
    trajectory, final_answer, eval_spec, gsd_m}``, JSON-safe (``gsd_m``: the sample's GSD in
    metres per pixel as the evaluator reads it, when ``sample`` is given and has one). Stored on
    the record at import so judging and the field-by-field view never depend on a task folder or
    a task that changed since."""
    keep = {k: task.get(k) for k in ("question", "tools", "trajectory", "final_answer", "eval_spec") if task.get(k) is not None}
    if sample is not None:
        gsd = get_gsd(sample)
        if gsd is not None:
            keep["gsd_m"] = gsd
    return json.loads(json.dumps(keep, default=str))


# --------------------------------------------------------------------------------------------------
# The import as a background job
# --------------------------------------------------------------------------------------------------

UPLOAD_DIR = "uploads"  # under STUDIO_DATA_ROOT (with a bucket: the keys' first part)
SCRATCH_DIR = "scratch"  # under UPLOAD_DIR, with a bucket: <worker tag>/<job id>.zip, a worker's local copy
RUNS_DIR = "runs"  # under STUDIO_DATA_ROOT: where a job unpacks its zip (kept: records read it)
KIND = "run-import"  # the job kind in studio.background
logger = logging.getLogger(__name__)


class RunImportStateError(Conflict):
    """The import job cannot be run again in its state (not failed, or its zip is gone): HTTP 409."""


def _store(upload, filename: str) -> Path | str:
    """Copy the uploaded file to ``STUDIO_DATA_ROOT/uploads/<random>.zip`` (in chunks; its path), or
    with a bucket to the key ``uploads/<random>.zip`` (streamed, published whole; the key)."""
    if storage.uses_bucket():
        name = storage.key(UPLOAD_DIR, f"{uuid.uuid4().hex[:16]}.zip")
        storage.upload_fileobj(name, upload)
        return name
    folder = Path(settings.STUDIO_DATA_ROOT) / UPLOAD_DIR
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{uuid.uuid4().hex[:16]}.zip"
    with open(path, "wb") as out:
        chunks = upload.chunks() if hasattr(upload, "chunks") else iter(lambda: upload.read(1 << 20), b"")
        for chunk in chunks:
            out.write(chunk)
    return path


def start_run_import(user, upload, agent_name: str, *, filename: str = "run.zip", release: str = "",
                     protocol: str | None = None, scaffold: str = "", queue_share: float | None = None,
                     queue_n: int | None = None) -> RunImportJob:
    """Store an uploaded run zip and start its import in the background; returns the job at once.

    Checked here, before anything is stored (cheap, they read the zip's directory only): the
    ``run.import`` permission, the agent name, the release version (``release``: blank for the
    studio's tasks) and :func:`evaluation.services.runs.check_run_zip`. Everything else (records, gold,
    scores) is the job's, and a problem there ends the job failed with the message. ``protocol``
    None: read from the folder name; ``queue_share``/``queue_n`` None: the settings.
    Raises ``RunImportError`` naming the field or file."""
    require(user, Action.RUN_IMPORT)
    agent_name = str(agent_name or "").strip()
    if not agent_name:
        raise RunImportError("agent: give the agent's name")
    release = str(release or "").strip()
    if release and not Release.objects.filter(version=release).exists():
        raise RunImportError(f"release: no release {release!r}")
    check_run_zip(upload, filename)
    path = _store(upload, filename)
    with transaction.atomic():
        job = RunImportJob.objects.create(
            archive=str(path), filename=str(filename)[:255], agent_name=agent_name[:200], created_by=user,
            options={"release": release, "protocol": protocol, "scaffold": str(scaffold or ""),
                     "queue_share": queue_share, "queue_n": queue_n},
            stage="waiting for a worker")
        transaction.on_commit(lambda: dispatch_run_import(job.pk))
    return job


def lost_reason(job: RunImportJob, now=None) -> str:
    """Why ``job`` (queued or running) will never end by itself, in words (its worker died, or no
    heartbeat for ``STUDIO_JOB_STALE_AFTER_S``: :func:`studio.background.worker_lost`), or ""."""
    if job.status not in (RunImportJob.Status.QUEUED, RunImportJob.Status.RUNNING):
        return ""
    return worker_lost(KIND, job.pk, job.worker, job.heartbeat_at or job.started_at or job.created_at, now=now)


def start_rescore(user, run: AgentRun, release: str = "") -> RunImportJob:
    """Re-score the stored predictions of ``run`` against another gold set in the background
    (:func:`evaluation.services.runs.rescore_run`: a new run, the old one and its scores stay): release
    version ``release``, or the studio's current tasks when blank. The job is an import job
    without a zip (``options["rescore_of"]``), listed and followed like the uploads on the runs
    page. Raises ``RunImportError`` for an unknown release or a step-wise planner run;
    ``PermissionDenied`` without ``run.import``."""
    require(user, Action.RUN_IMPORT)
    release = str(release or "").strip()
    if release and not Release.objects.filter(version=release).exists():
        raise RunImportError(f"release: no release {release!r}")
    if run.scoring_mode == "stepwise":
        raise RunImportError(f"run {run.pk}: a step-wise planner run has no DORA score to re-score")
    with transaction.atomic():
        job = RunImportJob.objects.create(
            archive="", filename=f"re-score of run {run.pk}: {run.name}"[:255], agent_name=run.agent.name[:200],
            created_by=user, options={"release": release, "rescore_of": run.pk}, stage="waiting for a worker")
        transaction.on_commit(lambda: dispatch_run_import(job.pk))
    return job


def is_stale(job: RunImportJob, now=None) -> bool:
    """A job still queued or running whose worker is lost (:func:`lost_reason`)."""
    return bool(lost_reason(job, now))


def can_rerun(job: RunImportJob) -> bool:
    """Whether :func:`rerun_run_import` takes ``job``: failed, or lost (:func:`is_stale`)."""
    return job.status == RunImportJob.Status.FAILED or is_stale(job)


def rerun_run_import(user, job: RunImportJob) -> RunImportJob:
    """Start a failed or lost (:func:`is_stale`) import job again (same stored zip and options):
    a lost one is swept first (failed, its folder removed), so a re-run after a dead worker is
    taken at once. Raises ``RunImportStateError`` (409) when the job is still alive or done, or
    its zip is gone."""
    require(user, Action.RUN_IMPORT)
    sweep_run_imports(only=job.pk)
    with transaction.atomic():
        job = RunImportJob.objects.select_for_update().get(pk=job.pk)
        if job.status != RunImportJob.Status.FAILED:
            raise RunImportStateError(f"import job {job.pk} is {job.status}: only a failed job (or one whose worker "
                                      "was lost) is re-run")
        if not (job.options or {}).get("rescore_of") and not _archive_exists(job.archive):
            raise RunImportStateError(f"import job {job.pk}: its stored zip is gone; upload the run again")
        RunImportJob.objects.filter(pk=job.pk).update(
            status=RunImportJob.Status.QUEUED, stage="waiting for a worker", error="", started_at=None,
            finished_at=None, heartbeat_at=timezone.now(), worker="", folder="")
        transaction.on_commit(lambda: dispatch_run_import(job.pk))
    job.refresh_from_db()
    return job


def record_crash(job_id: int, exc: Exception) -> None:
    """A crashed job ends failed with the crash as its first error."""
    RunImportJob.objects.filter(pk=job_id).update(
        status=RunImportJob.Status.FAILED, finished_at=timezone.now(), stage="crashed",
        error=f"the job crashed: {type(exc).__name__}: {exc}")


def dispatch_run_import(job_id: int):
    """Hand import job ``job_id`` to the background runner (:func:`evaluation.background.dispatch`)."""
    return dispatch(job_id, execute_run_import, run_import, record_crash, kind=KIND)


def in_bucket(archive: str) -> bool:
    """Whether a job's ``archive`` is a key of the bucket (``uploads/<random>.zip``, relative) rather
    than the absolute path of a local file (an upload made without a bucket)."""
    return bool(archive) and not Path(archive).is_absolute()


def _archive_exists(archive: str) -> bool:
    return storage.exists(archive) if in_bucket(archive) else Path(archive).is_file()


def _scratch_path(job_id: int) -> Path:
    """Where this process downloads job ``job_id``'s zip from the bucket:
    ``STUDIO_DATA_ROOT/uploads/scratch/<worker tag>/<job id>.zip``."""
    return Path(settings.STUDIO_DATA_ROOT) / UPLOAD_DIR / SCRATCH_DIR / worker_tag() / f"{job_id}.zip"


def _sweep_scratch() -> list[dict]:
    """Remove the scratch folders (``uploads/scratch/<worker tag>/``) of this host's worker processes
    that are gone (killed mid-import: the finished ones removed their copy); each machine's sweep
    cleans its own disk, the zip stays in the bucket for the re-run. Returns ``{kind, id, action:
    "scratch-removed", why, removed}`` per zip (``id`` the job's, from the file name)."""
    root = Path(settings.STUDIO_DATA_ROOT) / UPLOAD_DIR / SCRATCH_DIR
    out = []
    for folder in sorted(root.iterdir()) if root.is_dir() else []:
        if not folder.is_dir() or folder.is_symlink() or not process_gone(folder.name):
            continue
        why = f"its worker process ({folder.name.partition('.')[0]}) is gone"
        for f in sorted(folder.iterdir()):
            stem = f.name.removesuffix(".zip")
            out.append({"kind": KIND, "id": int(stem) if stem.isdigit() else f.name, "action": "scratch-removed",
                        "why": why, "removed": [str(f)]})
        shutil.rmtree(folder, ignore_errors=True)
    return out


def _remove_folder(folder: str) -> list[str]:
    """Remove a dead job's unpacked folder (only under ``STUDIO_DATA_ROOT/runs/``, and only when no
    imported run reads from it); returns the paths removed."""
    if not folder:
        return []
    path = Path(folder)
    root = (Path(settings.STUDIO_DATA_ROOT) / RUNS_DIR).resolve()
    try:
        inside = path.resolve().parent == root
    except OSError:
        return []
    if not inside or not path.exists() or AgentRun.objects.filter(source_dir__startswith=str(path)).exists():
        return []
    shutil.rmtree(path, ignore_errors=True)
    return [str(path)]


def sweep_run_imports(stale_after: float | None = None, *, only: int | None = None) -> list[dict]:
    """The sweeper of run imports (:func:`studio.background.register_sweeper`): a running job whose
    worker is lost (:func:`lost_reason`) ends ``failed`` ("the job's worker was lost: <why>; run it
    again") and its unpacked folder is removed; a queued job that no worker took is sent again
    (runners celery and thread; a second delivery finds it taken) or, inline, failed. ``only``:
    that job alone. This machine's scratch copies (bucket zips) of dead workers are removed too
    (:func:`_sweep_scratch`; not for ``only``). Returns ``{kind, id, action, why, removed}`` per job."""
    out = []
    rows = RunImportJob.objects.filter(status__in=[RunImportJob.Status.QUEUED, RunImportJob.Status.RUNNING])
    if only is not None:
        rows = rows.filter(pk=only)
    now = timezone.now()
    for job in list(rows.order_by("id")):
        why = worker_lost(KIND, job.pk, job.worker, job.heartbeat_at or job.started_at or job.created_at, now=now,
                          stale_after=stale_after)
        if not why:
            continue
        if job.status == RunImportJob.Status.QUEUED and job_runner() != "inline":
            n = RunImportJob.objects.filter(pk=job.pk, status=RunImportJob.Status.QUEUED).update(
                heartbeat_at=timezone.now(), stage=f"sent again ({why})")
            if n:
                dispatch_run_import(job.pk)
                out.append({"kind": KIND, "id": job.pk, "action": "requeued", "why": why, "removed": []})
            continue
        n = RunImportJob.objects.filter(pk=job.pk, status=job.status, worker=job.worker).update(
            status=RunImportJob.Status.FAILED, finished_at=timezone.now(), stage="lost",
            error=f"the job's worker was lost ({why}); run it again")
        if n:
            out.append({"kind": KIND, "id": job.pk, "action": "failed", "why": why,
                        "removed": _remove_folder(job.folder)})
    if only is None:
        out += _sweep_scratch()  # nothing without a bucket (no scratch folder), unless one was used before
    return out


def _stage(job_id: int, text: str, **fields) -> None:
    RunImportJob.objects.filter(pk=job_id).update(stage=text, **fields)


def _claim(job_id: int, folder: Path) -> bool:
    """Take job ``job_id`` for this process (one statement: of two deliveries one wins): running,
    this worker's tag, the first heartbeat, the folder it will unpack to. A queued job is taken;
    so is a running one whose worker is lost (Celery delivers a killed worker's job again), after
    its folder is removed."""
    now = timezone.now()
    fields = dict(status=RunImportJob.Status.RUNNING, stage="unpacking the zip and scoring the run", started_at=now,
                  heartbeat_at=now, worker=worker_tag(), folder=str(folder), attempts=F("attempts") + 1)
    if RunImportJob.objects.filter(pk=job_id, status=RunImportJob.Status.QUEUED).update(**fields):
        return True
    job = RunImportJob.objects.filter(pk=job_id, status=RunImportJob.Status.RUNNING).first()
    if job is None or not lost_reason(job):
        return False
    if not RunImportJob.objects.filter(pk=job_id, status=RunImportJob.Status.RUNNING, worker=job.worker).update(**fields):
        return False
    _remove_folder(job.folder)
    return True


def _beat(job_id: int) -> None:
    RunImportJob.objects.filter(pk=job_id, status=RunImportJob.Status.RUNNING).update(heartbeat_at=timezone.now())


def _fail(job_id: int, write) -> None:
    """Write a failure (``write()``) on a fresh connection (:func:`studio.background.write_failure`)."""
    write_failure(write, what=f"{KIND} {job_id}: its failure")


def execute_run_import(job_id: int) -> RunImportJob:
    """Run import job ``job_id`` to its end: unpack and score the zip, queue the share (a re-score
    job, ``options["rescore_of"]``: score that run's stored predictions against the job's gold set,
    :func:`evaluation.services.runs.rescore_run`, nothing queued), and end ``done`` (``job.run``,
    ``job.queued``; the stored zip is removed) or ``failed`` (``job.error``: the import's message, or
    ``the job crashed: <type>: <message>`` for any other error). A job that is not queued (taken by
    another delivery, or ended) is returned as it is. While it runs the job carries this process's
    tag and a heartbeat (:func:`studio.background.job_running`). A zip in the bucket
    (:func:`in_bucket`) is downloaded to this process's scratch first and the scratch removed at the
    end, whatever the end; a missing object fails the job (``<filename>: the stored zip is gone``)."""
    folder = Path(settings.STUDIO_DATA_ROOT) / RUNS_DIR / uuid.uuid4().hex[:12]
    with job_running(KIND, job_id, lambda: _beat(job_id), claim=lambda: _claim(job_id, folder)) as claimed:
        if not claimed:
            return RunImportJob.objects.get(pk=job_id)  # already taken by another worker, or ended
        job = RunImportJob.objects.select_related("created_by").get(pk=job_id)
        opts = job.options or {}
        release = Release.objects.filter(version=opts["release"]).first() if opts.get("release") else None
        try:
            if opts.get("release") and release is None:
                raise RunImportError(f"release: no release {opts['release']!r} (deleted since the upload?)")
            if opts.get("rescore_of"):  # a re-score of stored predictions: no zip, nothing queued
                source = AgentRun.objects.filter(pk=opts["rescore_of"]).select_related("agent").first()
                if source is None:
                    raise RunImportError(f"run {opts['rescore_of']}: deleted since the re-score was asked for")
                run, queued = rescore_run(job.created_by, source, release=release), {}
            else:
                archive = _local_archive(job)  # with a bucket: downloaded before the transaction
                with transaction.atomic():
                    with open(archive, "rb") as fh:
                        run = import_run_zip(job.created_by, fh, job.agent_name, filename=job.filename,
                                             release=release, folder=folder, protocol=opts.get("protocol") or None,
                                             scaffold=opts.get("scaffold") or "")
                    try:  # with a bucket: the unpacked folder for readers on other machines
                        upload_run_folder(folder)
                    except BaseException:
                        shutil.rmtree(folder, ignore_errors=True)
                        raise
                    queued = queue_share_of_run(job.created_by, run, opts.get("queue_share"), opts.get("queue_n"))
        except (RunImportError, ValueError, FileNotFoundError) as exc:
            _fail(job_id, lambda message=str(exc): _stage(job_id, "failed", status=RunImportJob.Status.FAILED,
                                                          finished_at=timezone.now(), error=message))
            return RunImportJob.objects.get(pk=job_id)
        except Exception as exc:  # noqa: BLE001 — any crash ends the job visibly, on every runner
            logger.exception("run import job %s crashed", job_id)
            _fail(job_id, lambda crash=exc: record_crash(job_id, crash))
            return RunImportJob.objects.get(pk=job_id)
        finally:
            if in_bucket(job.archive):
                _remove_scratch(job_id)
        _stage(job_id, f"done: {run.records.count()} records scored", status=RunImportJob.Status.DONE,
               finished_at=timezone.now(), run=run, queued=queued, error="")
    if in_bucket(job.archive):
        try:
            storage.delete(job.archive)
        except Exception:  # noqa: BLE001 — the job is done; an object left behind is only garbage
            logger.warning("run import job %s: its zip %s was not deleted from the bucket", job_id, job.archive,
                           exc_info=True)
    elif job.archive:
        Path(job.archive).unlink(missing_ok=True)
    return RunImportJob.objects.get(pk=job_id)


def _local_archive(job: RunImportJob) -> Path:
    """The local file of ``job``'s zip: its path (no bucket), or a copy of the bucket's object in this
    process's scratch (:func:`_scratch_path`). Raises ``RunImportError`` when the object is gone."""
    if not in_bucket(job.archive):
        return Path(job.archive)
    path = _scratch_path(job.pk)
    try:
        storage.download_file(job.archive, path)
    except FileNotFoundError:
        path.unlink(missing_ok=True)
        raise RunImportError(f"{job.filename}: the stored zip is gone from the bucket ({job.archive}); "
                             "upload the run again") from None
    return path


def _remove_scratch(job_id: int) -> None:
    """Remove this process's scratch copy of job ``job_id``'s zip, and its folder once empty."""
    path = _scratch_path(job_id)
    path.unlink(missing_ok=True)
    try:
        path.parent.rmdir()
    except OSError:
        pass  # another job of this process has its copy there, or there is no folder
