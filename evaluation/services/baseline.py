"""The paper's "Gold Trajectory" baseline: the gold plans replayed and scored as an agent run
(``manage.py gold_baseline``).

Moved here from ``replay.services`` (issue 19): it creates an agent run, which is evaluation's;
it drives replays through ``replay.services.runs`` below it.
"""
from __future__ import annotations

import json
import shutil
import time as _time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.utils import timezone

from annotation.models import Task
from evaluation.services.runs import import_run_dir
from kernel.taskfile import from_storage
from kernel.tools.spec import get_tool, model_alias
from kernel.vocabulary import CATEGORY_BY_DIM, TASK_FILES
from replay.models import ReplayRun, ReplayStep
from replay.selectors import latest_successful_replay
from replay.services.paths import artifact_path
from replay.services.runs import create_run, execute_replay
from studio.permissions import Action, require


# ============================================================================================
# The paper's "Gold Trajectory" baseline
# ============================================================================================
def _runner_call(name: str, args: Any) -> str:
    """The runner's call text: ``"<model alias>(<comma-separated arg names>)"``."""
    try:
        alias = get_tool(name).alias
    except Exception:
        alias = model_alias(str(name))
    return f"{alias}({', '.join(args) if isinstance(args, dict) else ''})"


def polygon_outputs(run: ReplayRun) -> dict[str, Path]:
    """``{answer value: the replay's artifact}`` of ``run``'s ``polygon_iou`` answers that name one
    of its artifacts: the files an agent's run folder holds beside its records (the evaluator
    resolves a predicted polygon path under the run folder)."""
    spec = [f for f in from_storage(run.revision.answer_spec or []) if isinstance(f, dict)]
    answer = run.final_answer if isinstance(run.final_answer, dict) else {}
    out = {}
    for f in spec:
        value = answer.get(f.get("name"))
        if f.get("eval_type") != "polygon_iou" or not isinstance(value, str) or not value.strip() or not run.artifact_dir:
            continue
        try:
            path = artifact_path(run, value)
        except ValueError:
            continue
        if path.is_file():
            out[value] = path
    return out


def baseline_record(task: Task, run: ReplayRun, elapsed_s: float) -> dict:
    """One ``benchmark.jsonl`` record (dora-format.md §c) of a replay run used as an agent run.

    The trajectory is what an agent executing the gold plan sends: per step the runner's call text,
    the resolved arguments and the obs; a loop is its wrapper followed by its nested calls.
    """
    rev = run.revision
    category = rev.task_category or CATEGORY_BY_DIM[task.dimension][0]
    code = rev.task_category_code or CATEGORY_BY_DIM[task.dimension][1]
    traj = []
    for st in run.steps.all().order_by("index"):
        if st.status == ReplayStep.Status.SKIPPED:
            break
        args = st.resolved_args or st.args or {}
        traj.append({"call": _runner_call(st.call, args), "args": args, "obs": st.obs})
        for e in st.expanded or []:
            traj.append({"call": _runner_call(e.get("call"), e.get("args")), "args": e.get("args") or {},
                         "obs": e.get("obs")})
    ok = run.status == ReplayRun.Status.SUCCEEDED
    return {
        "question_id": task.question_id, "task_scoped_question_id": f"{category}::{task.question_id}",
        "task_category": category, "task_category_code": code, "sample_id": task.sample_id, "worker_id": 0,
        "question": rev.question, "predicted_answer": run.final_answer if ok else f"Error: {run.error}",
        "error": None if ok else run.error, "trajectory": traj, "elapsed_time": round(elapsed_s, 3),
        "timestamp": (run.finished_at or timezone.now()).isoformat(),
    }


def gold_baseline(user, out_dir: str | Path, *, agent: str = "gold-model", event_slug: str | None = None,
                  mode: str = "model", score: bool = True):
    """Replay every task's gold trajectory with ``mode`` perception (default: the checkpoints in
    ``STUDIO_CHECKPOINT_DIR``), write the records in the benchmark's run layout under
    ``out_dir/<agent>_GT/`` (each ``polygon_iou`` answer's file beside them: :func:`polygon_outputs`,
    at the answer's path) and, with ``score``, import and score them like any agent run
    (``evaluation.services.runs.import_run_dir``), the run recording ``mode`` as its perception mode
    (``gt``: oracle perception, ranked apart). Returns ``(run_dir, AgentRun | None, summary)``;
    the summary names the mode (``perception_mode``).
    Tasks without an accepted gold are skipped (listed in the summary)."""
    require(user, Action.RUN_IMPORT)
    tasks = Task.objects.select_related("head", "event").order_by("sample_id", "task_index")
    if event_slug:
        tasks = tasks.filter(event__slug=event_slug)
    run_dir = Path(out_dir) / f"{agent}_GT"
    by_dim: dict[str, list[dict]] = {}
    skipped, failed = [], []
    files: dict[str, Path] = {}  # the predicted polygon files, copied into the run folder
    for task in tasks:
        if task.head_id is None or latest_successful_replay(task) is None:
            skipped.append(task.question_id)
            continue
        t0 = _time.perf_counter()
        run = execute_replay(create_run(task, mode=mode, user=user).pk)
        rec = baseline_record(task, run, _time.perf_counter() - t0)
        if rec["error"]:
            failed.append(task.question_id)
        else:
            files.update(polygon_outputs(run))
        by_dim.setdefault(task.dimension, []).append(rec)
    for dim, records in by_dim.items():
        d = run_dir / TASK_FILES[dim][:-5]
        (d / "trajectories").mkdir(parents=True, exist_ok=True)
        with open(d / "benchmark.jsonl", "w", encoding="utf-8") as fh:
            for rec in records:
                fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
                traj = {k: v for k, v in rec.items() if k != "predicted_answer"}
                traj["final_answer"] = rec["predicted_answer"]
                name = f"{rec['task_scoped_question_id'].replace('::', '__')}_trajectory.json".replace("/", "_")
                (d / "trajectories" / name).write_text(json.dumps(traj, ensure_ascii=False, indent=1), encoding="utf-8")
        n_ok = sum(1 for r in records if not r["error"])
        (d / "run_stats.json").write_text(json.dumps({
            "total": len(records), "success": n_ok, "failed": len(records) - n_ok,
            "avg_time": round(sum(r["elapsed_time"] for r in records) / len(records), 3),
            "timestamp": datetime.now(UTC).isoformat()}, indent=2), encoding="utf-8")
    for value, src in files.items():
        dst = run_dir / value
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)
    summary = {"run_dir": str(run_dir), "perception_mode": mode, "records": sum(len(v) for v in by_dim.values()),
               "failed": failed, "skipped_no_gold": skipped}
    agent_run = None
    if score and summary["records"]:
        agent_run = import_run_dir(user, run_dir, agent, perception_mode=mode)
        summary["dora_score"] = agent_run.dora_score
    return run_dir, agent_run, summary
