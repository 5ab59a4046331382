"""Throughput of the scoring core on SYNTHETIC runs.

    .venv/bin/python bench/scoring.py [--runs 10000] [--baseline-runs 200] [--seed 0] [--examples DIR]

Builds N synthetic agent runs (random perturbations of the gold answers and trajectories of the
visible example tasks in shared/scoring-examples/tasks: numbers scaled, strings re-cased or
aliased, lists shuffled or cut, points jittered, steps dropped, repeated or swapped, tool names
written as model aliases, answers sometimes as prose with embedded JSON). These runs are
synthetic: they measure speed only and say nothing about any real agent.

Measured: every run scored in memory with ``evaluate_samples`` (what the studio does).
Baseline (named in the output): the same kind of runs written as ``<task>/benchmark.jsonl``
folders and scored with ``evaluate_run_dir``, i.e. the file-based path of the official
``scripts/evaluate.py`` (file reading and JSON parsing included), on a smaller number of runs.
"""
from __future__ import annotations

import argparse
import copy
import json
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evaluation.scoring import evaluate_run_dir, evaluate_samples, load_task_files  # noqa: E402
from evaluation.scoring.loaders import TASKS  # noqa: E402


def _perturb_value(v, rng):
    if isinstance(v, bool):
        return v if rng.random() < 0.8 else (not v)
    if isinstance(v, (int, float)):
        return v * rng.choice([1, 1, 0.9, 1.1, 1.3, 0.5, 100, 0.01])
    if isinstance(v, str):
        return rng.choice([v, v.upper(), v.lower() + ".", f"phase {v}", "unknown"])
    if isinstance(v, list):
        out = list(v)
        if rng.random() < 0.5:
            rng.shuffle(out)
        if out and rng.random() < 0.3:
            out.pop()
        return [_perturb_value(x, rng) if isinstance(x, (int, float)) else x for x in out]
    if isinstance(v, dict):
        return {k: _perturb_value(x, rng) for k, x in v.items() if rng.random() < 0.9}
    return v


def _alias(call, rng):
    name = call.split("(")[0]
    if rng.random() < 0.7:
        return name.replace(".", "_", 1) + "(" + ", ".join(["arg"] * rng.randint(0, 2)) + ")"
    return name


def _perturb_trajectory(traj, rng):
    steps = [dict(s) for s in traj if isinstance(s, dict)]
    if steps and rng.random() < 0.3:
        steps.pop(rng.randrange(len(steps)))
    if steps and rng.random() < 0.3:
        steps.insert(rng.randrange(len(steps) + 1), dict(rng.choice(steps)))
    if len(steps) > 1 and rng.random() < 0.2:
        i = rng.randrange(len(steps) - 1)
        steps[i], steps[i + 1] = steps[i + 1], steps[i]
    out = []
    for s in steps:
        obs = s.get("obs")
        out.append({"call": _alias(str(s.get("call", "")), rng), "args": _perturb_value(s.get("args", {}), rng),
                    "obs": [{"type": "text", "text": json.dumps(obs)}] if obs is not None else None})
    return out


def synthetic_run(gold, rng):
    """One SYNTHETIC run: {dim: [record, ...]} for every gold task."""
    run = {}
    for dim, samples in gold.items():
        records = []
        for sample in samples:
            for i, task in enumerate(sample.get("tasks", [])):
                answer = _perturb_value(copy.deepcopy(task.get("final_answer", {})), rng)
                if rng.random() < 0.15:
                    answer = f"Here is my answer: <Answer>{json.dumps(answer)}</Answer>"
                records.append({"question_id": f"{sample['sample_id']}_task{i}", "predicted_answer": answer,
                                "trajectory": _perturb_trajectory(task.get("trajectory", []), rng),
                                "synthetic": True})
        run[dim] = records
    return run


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=10_000)
    ap.add_argument("--baseline-runs", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--examples", type=Path, default=ROOT.parent / "shared" / "scoring-examples")
    args = ap.parse_args()

    gold = load_task_files(args.examples / "tasks")
    n_tasks = sum(len(s.get("tasks", [])) for ss in gold.values() for s in ss)
    rng = random.Random(args.seed)
    t0 = time.perf_counter()
    runs = [synthetic_run(gold, rng) for _ in range(args.runs)]
    build_s = time.perf_counter() - t0

    t0 = time.perf_counter()
    total = 0.0
    for run in runs:
        total += evaluate_samples(gold, run, None)["dora_score"]
    score_s = time.perf_counter() - t0

    with tempfile.TemporaryDirectory() as tmp:
        dirs = []
        for k, run in enumerate(runs[: args.baseline_runs]):
            d = Path(tmp) / f"run{k}"
            for dim, records in run.items():
                (d / TASKS[dim]).mkdir(parents=True)
                (d / TASKS[dim] / "benchmark.jsonl").write_text("\n".join(json.dumps(r) for r in records) + "\n")
            dirs.append(d)
        t0 = time.perf_counter()
        for d in dirs:
            evaluate_run_dir(d, args.examples / "tasks")
        base_s = time.perf_counter() - t0

    print(f"SYNTHETIC runs (random perturbations of the {n_tasks} example tasks; seed {args.seed}); speed only")
    print(f"  built {args.runs} runs in {build_s:.2f} s")
    print(f"  evaluate_samples (in memory): {args.runs} runs in {score_s:.2f} s = {args.runs / score_s:,.0f} runs/s "
          f"({args.runs * n_tasks / score_s:,.0f} tasks/s); mean synthetic DORA score {total / args.runs:.4f}")
    if dirs:
        print(f"  baseline, evaluate_run_dir (benchmark.jsonl folders, like scripts/evaluate.py): "
              f"{len(dirs)} runs in {base_s:.2f} s = {len(dirs) / base_s:,.0f} runs/s")
        print(f"  in-memory vs baseline: x{(args.runs / score_s) / (len(dirs) / base_s):.1f}")


if __name__ == "__main__":
    main()
