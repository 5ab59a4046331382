"""Services for agent runs and verdicts: import and score a run folder, record verdicts.

Scoring itself is ``evaluation.scoring`` (pure functions identical to the official evaluator);
this module feeds it the gold samples — from the studio's own tasks (their newest succeeded
replay) or from a task folder in the benchmark's layout — and stores the results.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from annotation.services.tasks import TASK_FILES
from evaluation import leaderboard as lb
from evaluation.blind import seen_refusal
from evaluation.errors import EvaluationConflict, EvaluationInputError, NotBlind
from evaluation.models import Adjudication, Agent, AgentRun, RunAggregate, RunRecord, Verdict, VerdictRevision
from evaluation.robustness import record_robustness
from evaluation.goldset import GoldSet, GoldSetError, folder_gold_set, release_gold_set, studio_gold_set
from evaluation.scoring import evaluate_samples, get_gsd, load_run_records, score_task
from evaluation.selectors_leaderboard import (aggregated_runs, default_gold_set, gold_set_key, gold_sets, leaderboard_rows,
                                              newest_revision_id, stale_aggregates)
from evaluation.services_leaderboard import schedule_bootstrap
from studio.permissions import require
from studio.events import emit
from kernel.taskfile import MAX_JSON_DEPTH, nesting_position
from kernel.taxonomy import E_CODES, plan_is_correct

ERROR_CODES = E_CODES
GRADES = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)


class RunImportError(EvaluationInputError):
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
    for dim, name in TASK_FILES.items():
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
    require(user, "run.import")
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
    robustness variants are scored against the variants' samples apart."""
    mode, tau_r, tau_a = run.scoring_mode, run.tau_r, run.tau_a
    result = evaluate_samples(gold.samples, records_by_dim, gold.polygons, tau_r=tau_r, tau_a=tau_a, mode=mode,
                              polygon_roots=polygon_roots)
    by_variant = (evaluate_samples(gold.variant_samples, records_by_dim, None, tau_r=tau_r, tau_a=tau_a, mode=mode,
                                   polygon_roots=polygon_roots) if gold.variant_samples else {})
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
                                    mode=mode, polygon_roots=polygon_roots)
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
def rescore_run(user, run: AgentRun, *, release=None) -> AgentRun:
    """Score the predictions of ``run`` again against another gold set without re-running the
    agent: ``release`` (a ``releases.Release``), or the studio's current tasks when None. A new
    run is made (``rescored_from`` = ``run``, same agent, name, mode, thresholds, protocol and
    scaffold; predicted polygon files read from the original run folder when it is still there);
    the old run and its scores stay, each named by its own set. Raises ``RunImportError`` when the
    run is a step-wise planner run, a record names a question the set does not hold, or the gold
    cannot be read; ``PermissionDenied`` without ``run.import``."""
    _claim_sqlite_write_lock()
    require(user, "run.import")
    if run.scoring_mode == "stepwise":
        raise RunImportError(f"run {run.pk}: a step-wise planner run has no DORA score to re-score")
    records_by_dim = run_records_as_files(run)
    if not records_by_dim:
        raise RunImportError(f"run {run.pk}: no records to re-score")
    gold = resolve_gold_set(f"run {run.pk}", records_by_dim, release=release)
    new = AgentRun(agent=run.agent, name=run.name, source_dir=run.source_dir, scoring_mode=run.scoring_mode,
                   tau_r=run.tau_r, tau_a=run.tau_a, imported_by=user, protocol=run.protocol, scaffold=run.scaffold,
                   perception_mode=run.perception_mode, rescored_from=run)
    roots = [Path(run.source_dir)] if run.source_dir and Path(run.source_dir).is_dir() else []
    new = _score_into(new, records_by_dim, gold, roots)
    _announce_scored(user, new, sum(len(recs) for recs in records_by_dim.values()))
    return new


def _upload_limit_bytes() -> int:
    """Setting ``STUDIO_RUN_UPLOAD_MAX_MB`` (default 200): the most a run zip may unpack to."""
    from django.conf import settings

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

    from django.conf import settings

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
    (:func:`evaluation.services_run_import.start_run_import`).
    """
    import shutil
    import uuid
    import zipfile
    from pathlib import PurePosixPath

    from django.conf import settings

    require(user, "run.import")
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


def write_run_aggregate(run_id: int) -> RunAggregate | None:
    """Store the leaderboard sums of run ``run_id`` (:func:`evaluation.leaderboard.run_aggregate`
    over the run's rows as :func:`~evaluation.selectors_leaderboard.leaderboard_rows` reads them,
    extras included), stamped with the newest task revision id read *before* the rows (a head
    that changes meanwhile makes the sums stale, never wrongly current). Replaces earlier sums.
    Inside the caller's transaction when there is one (an import: the sums commit with the run).
    Also stored: the number of records and the newest record id (the leaderboard's bootstrap state,
    :func:`~evaluation.selectors_leaderboard.records_state`). Cost: reading and scoring the extras
    of the run's records once (about the time the page took per run before the sums existed)."""
    newest = newest_revision_id()
    rows = leaderboard_rows(run_ids=[run_id])
    sums = lb.run_aggregate(rows)
    return _store_aggregate(run_id, newest, sums, max((r["record_id"] for r in rows), default=0))


def _store_aggregate(run_id: int, newest: int, sums: dict, newest_record: int) -> RunAggregate:
    # single-statement writes (an UPDATE, else an INSERT): outside an import they run in autocommit,
    # so a page that rebuilds sums beside an import never holds a read lock it must upgrade (SQLite
    # refuses such an upgrade at once, busy timeout or not)
    fields = {"gold_revision": newest, "n_records": sums["n_records"], "n_no_task": sums["n_no_task"],
              "newest_record": newest_record, "sums": sums}
    if not RunAggregate.objects.filter(run_id=run_id).update(**fields):
        try:
            with transaction.atomic():
                return RunAggregate.objects.create(run_id=run_id, **fields)
        except IntegrityError:  # a concurrent writer stored them first (ours are as new), or the run is gone
            RunAggregate.objects.filter(run_id=run_id).update(**fields)
    return RunAggregate.objects.filter(run_id=run_id).first()


def refresh_run_aggregates(run_ids, state: dict) -> set:
    """Make the stored sums of ``run_ids`` current (``state`` as
    :func:`~evaluation.selectors_leaderboard.aggregated_runs` returns it): rebuild the stale ones
    (:func:`~evaluation.selectors_leaderboard.stale_aggregates`: no sums yet, a task deleted, or a
    newer head revision of a task the run has a record on) and move the stamp of the others up.
    Returns the ids of the rebuilt runs (usually none: an import writes its sums itself). A run
    deleted meanwhile is skipped."""
    stale, behind, newest = stale_aggregates(run_ids, state)
    for run_id in sorted(stale):
        write_run_aggregate(run_id)  # a run deleted meanwhile stores nothing
    if behind:
        RunAggregate.objects.filter(run_id__in=behind, gold_revision__lt=newest).update(gold_revision=newest)
    return stale



def leaderboard_of_set(asked: str | None = None) -> tuple[list[dict], dict]:
    """``(runs, tables)``: the leaderboard of one gold set without its bootstrap, built from the
    runs' stored sums (made current first: :func:`refresh_run_aggregates`), never from the records.
    ``asked``: the set's ranking key (``evaluation.goldset.ranking_key``; the page's and the API's
    ``?set=``); None or unknown: the default set (``selectors_leaderboard.default_gold_set``: the
    newest published release with runs, else the set of the newest run). ``runs``: every run (the
    bootstrap's state is over all of them); ``tables`` (``evaluation.leaderboard.build_from_aggregates``)
    holds only the set's runs, with ``sets`` (every set, for a selector) and ``gold_set`` (the set
    shown: ``{key, label, n_runs, newest_run, published}``, or None without runs). The one place the
    page, its exports and ``GET /api/leaderboard/`` read a set's table from."""
    runs, sums, state = aggregated_runs()
    if refresh_run_aggregates([r["run_id"] for r in runs], state):
        runs, sums, state = aggregated_runs()
    sets = gold_sets(runs)
    keys = {e["key"] for e in sets}
    key = asked if asked in keys else default_gold_set(sets)
    shown = [r for r in runs if gold_set_key(r) == key]
    data = lb.build_from_aggregates(shown, {r["run_id"]: sums[r["run_id"]] for r in shown if r["run_id"] in sums})
    data["sets"] = sets
    data["gold_set"] = next((e for e in sets if e["key"] == key), None)
    return runs, data


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


def derive_correctness(errors: dict) -> bool:
    """Plan correctness is true exactly when no E1–E6 flag is set (judge.md, 'The verdict')."""
    return plan_is_correct(errors)


class VerdictLocked(EvaluationConflict):
    """A person's verdict that can no longer change: marked final (others' verdicts are visible to
    its author), or the record was adjudicated. The message says which and since when."""


def _check_fields(errors: dict, grade: float, is_correct: bool | None, override_reason: str) -> tuple[dict, bool]:
    unknown = set(errors) - set(ERROR_CODES)
    if unknown:
        raise EvaluationInputError(f"errors: unknown flag(s) {', '.join(sorted(unknown))}; use E1–E6")
    if not any(abs(float(grade) - g) < 1e-9 for g in GRADES):
        raise EvaluationInputError(f"grade: {grade} is not one of 0, 0.2, 0.4, 0.6, 0.8, 1.0")
    flags = {code: bool(errors.get(code, False)) for code in ERROR_CODES}
    derived = derive_correctness(flags)
    if is_correct is not None and is_correct != derived and not override_reason.strip():
        raise EvaluationInputError("is_correct: overriding the correctness the flags imply needs a reason")
    return flags, derived


def _by_token(idempotency_key: str, record: RunRecord, user) -> Verdict | None:
    """The verdict a form token already produced (its first save or a later revision), or None.
    Raises ``ValueError`` when the token belongs to another record or person."""
    existing = Verdict.objects.filter(idempotency_key=idempotency_key).first()
    if existing is None:
        rev = VerdictRevision.objects.filter(idempotency_key=idempotency_key).select_related("verdict").first()
        existing = rev.verdict if rev is not None else None
    if existing is not None and (existing.record_id != record.pk or existing.annotator_id != user.pk):
        raise EvaluationInputError("idempotency_key: this form token was already used for another verdict")
    return existing


def _require_blind(user, record: RunRecord) -> None:
    """Refuse a person verdict from someone who was shown the record's other verdicts or its judge
    outcome (``evaluation.blind.seen_refusal``): they never become one of its raters."""
    refusal = seen_refusal(user, record)
    if refusal:
        raise NotBlind(refusal)


@transaction.atomic
def submit_human_verdict(user, record: RunRecord, *, errors: dict, grade: float, reasons: dict | None = None,
                         reasoning: str = "", is_correct: bool | None = None, override_reason: str = "",
                         idempotency_key: str | None = None, is_final: bool = False, seal: bool = True) -> Verdict:
    """Record or revise a person's verdict of ``record``; return it (``revision == 1``: just created).

    One verdict per person per record (a partial unique constraint): a second save by the same
    person revises it — the row holds the newest state, every state is kept as a
    :class:`~evaluation.models.VerdictRevision`. ``seal`` marks it final for its author: only
    then are the record's other verdicts shown to them (:func:`evaluation.blind.sees_verdicts`),
    and from then on it cannot change. Correctness follows the flags unless overridden with a reason.

    ``idempotency_key`` (the hidden token of the submitted form): a second submission with the same
    key returns the verdict and changes nothing (a double click, a resent request).
    ``is_final``: the adjudicated verdict (only :func:`evaluation.services_adjudication.adjudicate`
    passes it, having checked the reviewer): always a new row, never a revision.

    Raises ``ValueError`` naming the field for a grade off the 0–1 step-0.2 scale, an unknown flag,
    an override without a reason, or a key already used for another record or person;
    :class:`VerdictLocked` when the person's verdict is final or the record was adjudicated,
    :class:`~evaluation.errors.NotBlind` (409) when the person was shown the record's other verdicts
    or its judge outcome (blind scoring: they never become one of its raters), and
    ``PermissionDenied`` when the person adjudicated this record (they cannot also score it).
    """
    require(user, "verdict.create")
    if idempotency_key:
        idempotency_key = str(idempotency_key)[:80]
        existing = _by_token(idempotency_key, record, user)
        if existing is not None:
            return existing
    flags, derived = _check_fields(errors, grade, is_correct, override_reason)
    final = derived if is_correct is None else is_correct
    text = reasoning
    if is_correct is not None and is_correct != derived:
        text = f"{reasoning}\n[correctness overridden: {override_reason.strip()}]".strip()
    state = dict(is_correct=final, grade=float(grade), errors=flags, reasoning=text,
                 reasons={k: str(v).strip() for k, v in (reasons or {}).items() if k in ERROR_CODES and str(v or "").strip()})
    stepwise = (record.gold or {}).get("stepwise")  # a case of the benchmark's step-wise protocol
    kind = dict(protocol=(stepwise or {}).get("protocol") or "holistic",
                setting="step-wise" if stepwise else "holistic", regime="step-wise" if stepwise else "holistic")
    now = timezone.now()
    if is_final:
        return Verdict.objects.create(record=record, source=Verdict.Source.HUMAN, annotator=user, **kind,
                                      is_final=True, idempotency_key=idempotency_key or None, sealed_at=now, **state)
    if Adjudication.objects.filter(record=record, reviewer=user).exists():
        raise PermissionDenied("you adjudicated this record, so you cannot also score it")
    adjudicated = Adjudication.objects.filter(record=record).order_by("id").first()
    mine = (Verdict.objects.select_for_update()
            .filter(record=record, annotator=user, source=Verdict.Source.HUMAN, is_final=False).first())
    if mine is not None:
        if mine.sealed_at is not None:
            raise VerdictLocked(f"your verdict of {record.question_id} is final since {mine.sealed_at:%Y-%m-%d %H:%M} UTC "
                                f"(the other verdicts became visible to you then), so it cannot change")
        if adjudicated is not None:
            raise VerdictLocked(f"{record.question_id} was adjudicated on {adjudicated.created_at:%Y-%m-%d %H:%M} UTC; "
                                f"its verdicts no longer change")
        _require_blind(user, record)
        for k, v in state.items():
            setattr(mine, k, v)
        mine.revision += 1
        mine.updated_at = now
        mine.sealed_at = now if seal else None
        mine.save(update_fields=[*state, "revision", "updated_at", "sealed_at"])
        VerdictRevision.objects.create(verdict=mine, number=mine.revision, sealed=seal,
                                       idempotency_key=idempotency_key or None, **state)
        return mine
    if adjudicated is not None:
        raise VerdictLocked(f"{record.question_id} was adjudicated on {adjudicated.created_at:%Y-%m-%d %H:%M} UTC; "
                            f"it takes no new verdicts")
    _require_blind(user, record)
    try:
        with transaction.atomic():  # a savepoint: a concurrent twin may win the unique key or constraint
            verdict = Verdict.objects.create(record=record, source=Verdict.Source.HUMAN, annotator=user,
                                             **kind, idempotency_key=idempotency_key or None,
                                             sealed_at=now if seal else None, **state)
    except IntegrityError:
        existing = _by_token(idempotency_key, record, user) if idempotency_key else None
        if existing is not None:
            return existing
        raise VerdictLocked("another save of your verdict of this record happened at the same moment; reload it") from None
    VerdictRevision.objects.create(verdict=verdict, number=1, sealed=seal, **state)
    return verdict
