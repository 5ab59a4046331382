"""Beyond one machine, at scale: replays of a SYNTHETIC set ten times DORA's size on Celery workers
whose files live in an S3 bucket, 1 worker against 2, and what the bucket costs.

    CELERY_BROKER_URL=redis://127.0.0.1:6379/15 .venv/bin/python bench/scale.py [--tasks 5150] [--events 45]

At the default size it runs about 25 minutes on a 2-CPU machine (``run_all.py`` gives it an hour).

The task set is ``bench/replay.py``'s (its ``build``: the three xBD scenes of ../shared/realdata and
events derived from them, four templates of 4–9 authored steps, "[synthetic]" in every question), on
a scratch PostgreSQL database (two writing workers need a server database) and a scratch data root.
A real S3 server, SeaweedFS's ``weed mini`` (``tests/support/seaweedfs.py``), holds the bucket.

Three passes, each every task replayed once without the step cache (every tool runs), each on
workers started here on a queue of their own (``bench/replay.py``'s ``worker_pass``; the clock runs
from the first job sent to the last one done):

  local-1   one worker on this machine's data root, no bucket: the single-machine path
  bucket-1  one worker as a new machine: an empty data root and artifact root of its own, the
            studio's files in the bucket (``STUDIO_STORAGE_URL=s3://BUCKET/<pass>``); it fetches
            each event's layers on first use and uploads every artifact (content-addressed: one
            object per distinct output)
  bucket-2  the same with two worker processes (a fresh prefix, an empty data root: no object or
            cached file of bucket-1 helps it)

Before each bucket pass the layers are pushed to the pass's prefix (``push_layers_to_bucket``, not
timed: a deployment does it once). Printed: the three wall times, 2 workers / 1 worker on the bucket
(target ≥ 1.7×: this machine has 2 CPUs, so 2× is the ceiling), the bucket's share of the
one-worker time (1 − local-1 / bucket-1), the objects and bytes each pass wrote, and whether every
task's replay hash is the same on the three passes.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from _cpu_ceiling import bench_line, two_processes_over_one  # noqa: E402  (bench/_cpu_ceiling.py, beside this file)
from _scratch_studio import scratch_bucket, seaweedfs  # noqa: E402  (bench/_scratch_studio.py, beside this file)

TARGET = 1.7
#: the longest a pass may run: one worker on the bucket took 500 s for 5,150 replays (2026-12-06 17:12;
#: 1,750 s before the tools' GDAL scope)
PASS_LIMIT_S = 1800


def _module(name: str, path: Path):
    """A module loaded from ``path`` under ``name`` (``bench/replay.py`` is not importable as
    ``replay``: that name is the studio's app)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _objects(server, bucket: str, prefix: str) -> tuple[int, int]:
    """(objects, bytes) under ``prefix`` of ``bucket``."""
    pages = server.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    sizes = [o["Size"] for page in pages for o in page.get("Contents", ())]
    return len(sizes), sum(sizes)


def _hashes(n: int) -> dict[int, str]:
    """``{task id: replay hash}`` of the newest ``n`` replay runs (one pass's)."""
    from replay.models import ReplayRun

    rows = ReplayRun.objects.order_by("-id").values_list("task_id", "replay_hash", "status")[:n]
    return {task: h if status == "succeeded" else f"<{status}>" for task, h, status in rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", type=int, default=5150, help="tasks in the set (DORA: 515; default ten times)")
    ap.add_argument("--events", type=int, default=45, help="events they are spread over (DORA: 45)")
    ap.add_argument("--scratch", default=None)
    ap.add_argument("--keep", action="store_true", help="keep the scratch folder and database")
    args = ap.parse_args()
    if not os.environ.get("CELERY_BROKER_URL"):  # as replay.py --postgres's worker rows: nothing to measure
        print("BENCH\tscale: 2 workers / 1 worker, bucket as the data root\tskipped (CELERY_BROKER_URL not set: "
              "e.g. redis://127.0.0.1:6379/15)\t≥ 1.7×\tinfo")
        return
    replay_bench = _module("bench_replay", ROOT / "bench" / "replay.py")
    seaweed = seaweedfs()
    scratch = Path(args.scratch or tempfile.mkdtemp(prefix="scale-bench-")).resolve()
    scratch.mkdir(parents=True, exist_ok=True)
    pg_name = f"scale_bench_{os.getpid()}"
    env = replay_bench.setup_env(scratch, replay_bench.scratch_postgres(pg_name))
    from django.conf import settings

    from annotation.services.imports import push_layers_to_bucket

    bucket = "scale-bench"
    servers = contextlib.ExitStack()  # the S3 server: started here, stopped by its PID in the finally
    server, _ = servers.enter_context(scratch_bucket(scratch / "s3", bucket))
    out: dict = {"tasks": args.tasks, "events": args.events, "database": "postgres", "cpus": os.cpu_count()}
    try:
        t0 = time.perf_counter()
        _user, tasks, n_steps = replay_bench.build(args.tasks, args.events, scratch)
        out["authored_steps"] = n_steps
        out["build_s"] = round(time.perf_counter() - t0, 1)
        print(f"built {len(tasks)} tasks / {n_steps} authored steps over {args.events} events in {out['build_s']} s",
              flush=True)
        passes = {}
        for label, workers, in_bucket in (("local-1", 1, False), ("bucket-1", 1, True), ("bucket-2", 2, True)):
            pass_env = dict(env)
            if in_bucket:
                storage = {**seaweed.storage_env(server, bucket), "STUDIO_STORAGE_URL": f"s3://{bucket}/{label}"}
                for name, value in storage.items():  # this process pushes the layers to the pass's prefix
                    setattr(settings, name, value)
                t_push = time.perf_counter()
                pushed = push_layers_to_bucket()
                out[f"{label}_push_layers_s"] = round(time.perf_counter() - t_push, 1)
                if pushed["missing"]:
                    sys.exit(f"{label}: layer files missing here: {pushed['missing'][:5]}")
                for name in storage:  # and goes back to the local data root (its rows are the same)
                    setattr(settings, name, None if name.startswith("AWS_") else "")
                machine = scratch / f"machine-{label}"
                pass_env.update(storage, STUDIO_DATA_ROOT=str(machine / "data"),
                                STUDIO_ARTIFACT_ROOT=str(machine / "data" / "artifacts"),
                                STUDIO_VAR_DIR=str(machine / "var"))
            before = _objects(server, bucket, f"{label}/") if in_bucket else (0, 0)
            print(f"{label}: {len(tasks)} no-cache replays on {workers} worker(s)"
                  f"{' with the bucket as the data root' if in_bucket else ''} …", flush=True)
            seconds = replay_bench.worker_pass(pass_env, tasks, workers, scratch, limit_s=PASS_LIMIT_S)
            if seconds is None:
                sys.exit(f"{label}: the pass failed or ran past its limit (see {scratch}/worker{workers}.log)")
            passes[label] = _hashes(len(tasks))
            out[f"{label}_s"] = round(seconds, 1)
            if in_bucket:  # what the pass wrote: the artifacts (the layers were there before)
                after = _objects(server, bucket, f"{label}/")
                out[f"{label}_objects"], out[f"{label}_bytes"] = after[0] - before[0], after[1] - before[1]
            print(f"  {seconds:.1f} s", flush=True)
        out["speedup_2_over_1_bucket"] = round(out["bucket-1_s"] / out["bucket-2_s"], 3)
        out["cpu_ceiling_2_over_1"], out["cpu_ceiling_rounds"] = two_processes_over_one()  # beside the passes
        out["bucket_share_of_1_worker"] = round(1 - out["local-1_s"] / out["bucket-1_s"], 3)
        first = passes["local-1"]
        out["identical_hashes"] = f"{sum(first[t] == passes['bucket-1'].get(t) == passes['bucket-2'].get(t) for t in first)}/{len(first)}"
    finally:
        servers.close()
        if not args.keep:
            replay_bench.drop_postgres(pg_name)
            if not args.scratch:
                shutil.rmtree(scratch, ignore_errors=True)
    print(json.dumps(out, indent=2))
    n = f"{out['tasks']} tasks, {out['events']} events, postgres + redis + SeaweedFS"
    ok = out["speedup_2_over_1_bucket"] >= TARGET
    print(f"BENCH\tscale: 2 workers / 1 worker, bucket as the data root ({n})"
          f"\t{out['speedup_2_over_1_bucket']:.2f}× ({out['bucket-1_s']} s / {out['bucket-2_s']} s)"
          f"\t≥ {TARGET}×\t{'ok' if ok else 'OVER'}")
    print(bench_line("scale", out["cpu_ceiling_2_over_1"], out["cpu_ceiling_rounds"]))
    print(f"BENCH\tscale: the bucket's share of one worker's time (1 − local / bucket)"
          f"\t{100 * out['bucket_share_of_1_worker']:.1f} % ({out['local-1_s']} s local, {out['bucket-1_s']} s bucket)"
          f"\t—\tinfo")
    print(f"BENCH\tscale: objects one pass wrote to the bucket (its artifacts, one per distinct content)"
          f"\t{out['bucket-1_objects']} objects, {out['bucket-1_bytes'] / 2**20:.1f} MiB\t—\tinfo")
    print(f"BENCH\tscale: replay hashes equal on the three passes\t{out['identical_hashes']}\tall\t"
          f"{'ok' if out['identical_hashes'].split('/')[0] == out['identical_hashes'].split('/')[1] else 'OVER'}")


if __name__ == "__main__":
    main()
