"""Export tasks in the benchmark's own task-file layout (dora-format.md §(a)).

``tasks/t1_perception_and_assessment.json`` … ``t5_…json``: each a JSON list of samples
``{sample_id, disaster_type, input_data, classes, tasks: [...]}``; each task
``{question, task_category, task_category_code, tools, trajectory: [{call, args, obs}],
final_answer, eval_spec, answer_format}``. The gold trajectory and answer come from the newest
succeeded replay of the task's head revision; a task without one is refused by name.
"""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from annotation.models import Task, TaskRevision
from annotation.services.tasks import TASK_FILES

CATEGORY_BY_DIM = {
    "t1": ("perception_and_assessment", "T1"),
    "t2": ("spatial_relation_analysis", "T2"),
    "t3": ("operational_planning", "T3"),
    "t4": ("multi_temporal_reasoning", "T4"),
    "t5": ("multi_modal_report_synthesis", "T5"),
}


class ExportError(Exception):
    """A task cannot be exported; the message names the question id and the reason."""


def dora_task(task: Task, rev: TaskRevision, filled_trajectory: list, final_answer: dict) -> dict:
    """One task entry of a sample, in the benchmark's field order."""
    default_cat, default_code = CATEGORY_BY_DIM[task.dimension]
    names = rev.tools or sorted({str(s.get("call", "")).split("(")[0].strip() for s in rev.trajectory})
    return {
        "task_category": rev.task_category or default_cat,
        "task_category_code": rev.task_category_code or default_code,
        "question": rev.question,
        "tools": names,
        "trajectory": filled_trajectory,
        "final_answer": final_answer,
        "eval_spec": {f["name"]: f["eval_type"] for f in rev.answer_spec},
        "answer_format": {f["name"]: f.get("answer_format") or f["eval_type"] for f in rev.answer_spec},
    }


def dora_samples(tasks) -> dict[str, list[dict]]:
    """Group tasks into samples per dimension: ``{"t1": [sample, ...], ...}``.

    Raises ``ExportError`` for a task whose head revision has no succeeded replay.
    """
    from replay.services import latest_successful_replay

    by_dim: dict[str, dict[str, dict]] = {d: {} for d in TASK_FILES}
    for task in sorted(tasks, key=lambda t: (t.sample_id, t.task_index)):
        rev = task.head
        run = latest_successful_replay(task)
        if run is None:
            raise ExportError(f"{task.question_id}: no succeeded replay of revision {rev.number}; replay it first")
        sample = by_dim[task.dimension].setdefault(
            task.sample_id,
            {"sample_id": task.sample_id, "disaster_type": rev.disaster_type or task.event.disaster_type,
             "input_data": rev.input_data, "classes": rev.classes or {}, "tasks": []},
        )
        sample["tasks"].append(dora_task(task, rev, run.filled_trajectory, run.final_answer))
    return {d: list(s.values()) for d, s in by_dim.items()}


def write_task_files(tasks, out_dir: Path) -> list[Path]:
    """Write ``out_dir/tasks/t*.json`` for the dimensions that have tasks; returns the paths.

    Each file is written to a temporary name in the same folder and renamed at the end, so a
    partial file is never visible under its final name.
    """
    samples = dora_samples(tasks)
    tasks_dir = Path(out_dir) / "tasks"
    tasks_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for dim, dim_samples in samples.items():
        if not dim_samples:
            continue
        target = tasks_dir / TASK_FILES[dim]
        fd, tmp = tempfile.mkstemp(dir=tasks_dir, prefix=".tmp-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(dim_samples, fh, indent=2, ensure_ascii=False)
            fh.write("\n")
        os.replace(tmp, target)
        written.append(target)
    return written
