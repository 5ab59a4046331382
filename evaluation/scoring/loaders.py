"""Reading a benchmark tasks folder and a run folder, and merging run records into gold samples
the way the official evaluator does (``load_gold`` / ``load_predictions``)."""
from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, TypedDict

from kernel.taskfile import decode_json, loads, loads_fields
from kernel.vocabulary import TASK_STEMS as TASKS

from .parsing import parse_prediction, record_answer


def check_task_samples(samples, where: str) -> None:
    """Check the shape the scorer relies on: a list of sample objects whose ``sample_id`` (if any)
    is a string or an integer and whose ``tasks`` (if any) is a list of objects.

    Raises ``ValueError("<where>: sample <i>: <problem>")``. Values inside a task are not
    checked here: the operators score what they cannot read as 0, as the evaluator does.
    """
    if not isinstance(samples, list):
        raise ValueError(f"{where}: the file must hold a JSON list of samples, not {type(samples).__name__}")
    for i, sample in enumerate(samples):
        if not isinstance(sample, dict):
            raise ValueError(f"{where}: sample {i}: a sample must be an object, not {type(sample).__name__}")
        sid = sample.get("sample_id")
        if sid is not None and (isinstance(sid, bool) or not isinstance(sid, (str, int))):
            raise ValueError(f"{where}: sample {i}: field 'sample_id' must be a string, not {type(sid).__name__}")
        tasks = sample.get("tasks")
        if tasks is not None and not isinstance(tasks, list):
            raise ValueError(f"{where}: sample {i}: field 'tasks' must be a list, not {type(tasks).__name__}")
        for j, task in enumerate(tasks or []):
            if not isinstance(task, dict):
                raise ValueError(f"{where}: sample {i}: tasks[{j}] must be an object, not {type(task).__name__}")


class _ScoredTask(TypedDict, total=False):
    """The fields of a gold task that scoring reads (operators, trajectory metrics)."""

    final_answer: Any
    eval_spec: Any
    trajectory: Any


class _ScoredSample(TypedDict, total=False):
    """The fields of a gold sample that scoring reads: its id, its GSD (``input_data``) and its
    tasks, in the shapes ``check_task_samples`` accepts (a file of another shape is read in full,
    for its error)."""

    sample_id: str | int | None
    input_data: Any
    tasks: list[_ScoredTask] | None


#: what :func:`load_task_files` keeps with ``scored_fields_only`` (``kernel.taskfile.loads_fields``)
SCORED_FIELDS = list[_ScoredSample]


def load_task_files(tasks_dir: Path, *, scored_fields_only: bool = False) -> dict[str, list[dict]]:
    """``{"t1": [sample, ...], ...}`` for each ``<tasks_dir>/<task name>.json`` that exists.

    ``scored_fields_only``: each sample holds at least the fields scoring reads
    (:data:`SCORED_FIELDS`: ``sample_id``, ``input_data``, ``tasks`` with ``final_answer``,
    ``eval_spec``, ``trajectory``), with the values the full reading gives; the rest (questions,
    tool lists, class maps) is usually left out, never built (``kernel.taskfile.loads_fields``: about
    a seventh of the reading's time and a fifth of its memory at 100,000 tasks). For the scorer alone:
    the command line and ``evaluate_run_dir``, whose eval.json reads nothing else.

    Raises ``ValueError`` naming the file for unreadable JSON or a wrong shape (``check_task_samples``),
    the same with or without ``scored_fields_only``.
    """
    out = {}
    for dim, name in TASKS.items():
        path = Path(tasks_dir) / f"{name}.json"
        if path.exists():
            data = path.read_bytes()  # read by kernel.taskfile, the task-file reader (NaN tokens kept)
            samples, checked = loads_fields(data, SCORED_FIELDS) if scored_fields_only else (loads(data), False)
            if not checked:  # (msgspec checked SCORED_FIELDS' shapes, which are check_task_samples')
                check_task_samples(samples, str(path))
            out[dim] = samples
    return out


def read_jsonl(path: Path) -> list[dict]:
    """Records of a ``benchmark.jsonl``; blank lines skipped. A line that is not a JSON object is
    skipped with a warning (the official evaluator would stop with an exception)."""
    records = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = decode_json(line)  # json.loads' value or error, decoded by msgspec where it can
        except ValueError as exc:
            warnings.warn(f"{path}:{n}: not JSON ({exc}); line skipped", stacklevel=2)
            continue
        if not isinstance(record, dict):
            warnings.warn(f"{path}:{n}: not a JSON object; line skipped", stacklevel=2)
            continue
        records.append(record)
    return records


def load_run_records(run_dir: Path) -> dict[str, list[dict]]:
    """``{"t1": [record, ...], ...}`` for each ``<run_dir>/<task name>/benchmark.jsonl`` that exists
    (a dimension whose file is missing is absent). Records are the parsed JSON lines, in order;
    a missing ``question_id`` is set to ``""``."""
    out = {}
    for dim, name in TASKS.items():
        path = Path(run_dir) / name / "benchmark.jsonl"
        if path.exists():
            records = read_jsonl(path)
            for r in records:
                r.setdefault("question_id", "")
            out[dim] = records
    return out


def split_question_id(question_id: Any, sample_id: Any = "") -> tuple[Any, int]:
    """``(sample id, task index)`` from ``<sample_id>_task<i>``: split on the *last* ``_task``;
    an index that ``int()`` rejects reads as 0; the record's own ``sample_id`` wins when truthy."""
    qid = question_id if isinstance(question_id, str) else ("" if question_id is None else str(question_id))
    parts = qid.rsplit("_task", 1)
    if len(parts) == 2:
        try:
            index = int(parts[1])
        except ValueError:
            index = 0
        return (sample_id or parts[0]), index
    return (sample_id or qid), 0


#: the answer and trajectory of a task no record answers, shared by every skeleton (and the
#: defaults of ``aggregate.evaluate_dimension``): the scorer never changes the values it scores,
#: and a record's answer or trajectory replaces them
_NO_ANSWER: dict = {}
_NO_STEPS: list = []


def empty_predictions(gold_samples: list[dict]) -> tuple[list[dict], dict[Any, list[dict]], int]:
    """Prediction skeletons mirroring the gold samples (same sample ids and task count, empty
    answers and trajectories), the lookup ``{sample_id: [task, ...]}`` and the number of
    ``(sample_id, task index)`` pairs it answers.

    The lookup answers ``(sid, i)`` with ``lookup[sid][i]``: the task of the *last* sample with
    that id that has an ``i``-th task, as a dict keyed by ``(sid, i)`` filled sample by sample
    answers it (the evaluator's); a later sample with fewer tasks replaces only its first ones."""
    preds: list[dict] = []
    lookup: dict[Any, list[dict]] = {}
    n_pairs = 0
    for sample in gold_samples:
        pred: dict = {"tasks": []}
        sid: Any = ""
        tasks = None
        if isinstance(sample, dict):
            if "sample_id" in sample:
                sid = pred["sample_id"] = sample["sample_id"]
            tasks = sample.get("tasks")
        if tasks:
            skeletons = pred["tasks"] = [{"final_answer": _NO_ANSWER, "trajectory": _NO_STEPS} for _ in range(len(tasks))]
            earlier = lookup.get(sid)
            if earlier is None:
                lookup[sid] = skeletons
                n_pairs += len(skeletons)
            else:  # a repeated sample id: its first tasks replace the earlier ones
                n_pairs += max(0, len(skeletons) - len(earlier))
                lookup[sid] = skeletons + earlier[len(skeletons):]
        preds.append(pred)
    return preds, lookup, n_pairs


def apply_record(target: dict, record: dict) -> None:
    """Merge one run record into a prediction task: the answer (see
    :func:`evaluation.scoring.parsing.parse_prediction`; ``None`` leaves the previous answer) and a
    non-empty trajectory. Later records with the same question id therefore overwrite earlier ones
    only where they carry something."""
    answer = record_answer(record)
    if answer is not None:
        target["final_answer"] = parse_prediction(answer)
    if record.get("trajectory"):
        target["trajectory"] = record["trajectory"]


def merge_predictions(gold_data: dict[str, list[dict]], records_by_dim: dict[str, list[dict]],
                      log: list | None = None, run_dir: Path | None = None) -> dict[str, list[dict]]:
    """Per dimension present in both: prediction samples built from the records. ``log`` collects
    the evaluator's progress lines (``run_dir`` only names the missing files in them)."""
    pred_data = {}
    for dim, name in TASKS.items():
        if dim not in gold_data:
            continue
        if dim not in records_by_dim:
            if log is not None:
                where = Path(run_dir) / name / "benchmark.jsonl" if run_dir is not None else f"{name}/benchmark.jsonl"
                log.append(f"  WARNING: {where} not found, skipping {dim}")
            continue
        preds, lookup, n_pairs = empty_predictions(gold_data[dim])
        matched = 0
        find = lookup.get
        for record in records_by_dim[dim] or []:
            if not isinstance(record, dict):
                continue
            # split_question_id and apply_record, written out: this runs once per record
            qid = record.get("question_id", "")
            sid = record.get("sample_id", "")
            if type(qid) is str:
                head, cut, tail = qid.rpartition("_task")  # qid.rsplit("_task", 1)
                if cut:
                    try:
                        ti = int(tail)
                    except ValueError:
                        ti = 0
                    sid = sid or head
                else:
                    ti, sid = 0, sid or qid
            else:
                sid, ti = split_question_id(qid, sid)
            try:
                tasks = find(sid)
            except TypeError:  # an unhashable sample_id in the record
                continue
            if tasks is None or not 0 <= ti < len(tasks):
                continue
            target = tasks[ti]
            answer = record.get("predicted_answer", record.get("final_answer"))  # record_answer
            if answer is not None:
                target["final_answer"] = answer if isinstance(answer, dict) else parse_prediction(answer)
            trajectory = record.get("trajectory")
            if trajectory:
                target["trajectory"] = trajectory
            matched += 1
        pred_data[dim] = preds
        if log is not None:
            log.append(f"  Loaded {dim}: {matched} predictions matched to {n_pairs} tasks")
    return pred_data
