"""Release export at scale: peak memory and wall time of exporting N tasks, at two sizes.

    .venv/bin/python bench/export.py [--tasks 10000,100000] [--runs 2] [--fresh] [--bucket]

For each size N (the last is the one the target is about): the seeded scratch SQLite database of
``bench/lists.py`` for N tasks (built there if missing: real xBD scenes + ``seed_synthetic``; under
/tmp/studio-bench, never var/), then, in a process of its own for that database:

* a draft release ``0.0.<n>`` of every approved task is created (``create_release``, timed) in a
  child process of its own (this script with ``--create``), so that its peak memory is that step's;
* ``manage.py export_release 0.0.<n> --out DIR`` runs as a child the same way.

Each child runs under a small wrapper process that waits for it and reads
``resource.getrusage(RUSAGE_CHILDREN).ru_maxrss``: the child's peak resident memory, in KiB on Linux.

Figures: the export's peak RSS at the largest size, target ≤ 300 MB (issue 16; it was 944 MB at
100,000 tasks when the manifest was built in memory), and the peak at the largest size over the peak
at the smallest, target ≤ 1.15 (memory independent of the task count; the rest is the interpreter,
Django, rasterio and the per-release entries); ``create_release``'s peak RSS at the largest size,
same ≤ 300 MB target (about 1.5 GB at 100,000 tasks when it loaded every task with its head
revision). Memory is not slowed by the machine's load, so these are not ratios against a timed
baseline. Prints ``BENCH`` lines for ``bench/run_all.py``.

``--bucket``: the same with the studio's data root an S3 bucket (docs/deployment.md, "Object
storage"), rows labelled "(bucket)": a SeaweedFS ``weed mini`` started in the scratch folder
(``bench/_scratch_studio.py``'s ``scratch_bucket``, the tests' server, stopped by its PID) for the
whole run, a prefix of its bucket per size. Each size's database is seeded as above, on a local data
root of its own (``export-bucket-<N>-<runs>``, not the lists' folder: its bucket objects are this run's
only), its layer files and artifacts are pushed to the prefix (``manage.py push_layers``,
``push_artifacts``: what a deployment does once; not measured), and the release is exported as a
worker with the bucket exports it: the export job (``releases.services.release_export.start_export``,
in-process without a broker: ``export_release``, the zip, its upload to
``exports/<version>/<job>/dora-<version>.zip`` and the job's state and heartbeat objects) in a child
whose data root is an empty folder (another machine: the layers the export's images need are fetched
from the bucket into it). Figures: that child's peak RSS at the largest size (≤ 300 MB) and the
ratio of the two sizes' (≤ 1.15).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import lists  # noqa: E402  (the seeded scratch database)

ROOT = lists.ROOT
TARGET_MB = 300.0
#: peak RSS at the largest size / at the smallest: "independent of the task count"
GROWTH_TARGET = 1.15
WRAPPER = """
import json, resource, subprocess, sys, time
t0 = time.perf_counter()
r = subprocess.run(sys.argv[1:], capture_output=True, text=True)
print(json.dumps({"rc": r.returncode, "seconds": time.perf_counter() - t0, "stdout": r.stdout[-2000:],
                  "stderr": r.stderr[-4000:], "maxrss_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))
"""


#: ``--bucket``: the bucket (one prefix per size) and the variable that hands its settings to ``--one``
BUCKET, BUCKET_ENV_VAR = "export-bench", "STUDIO_BENCH_EXPORT_BUCKET"


def one(tasks: int, runs: int, fresh: bool) -> dict:
    """Seed (or reuse) the database for ``tasks``, create a release of it, export it in a child.
    With ``STUDIO_BENCH_EXPORT_BUCKET`` (``--bucket``: the bucket's ``storage_env`` as JSON) the
    data root is the bucket: see :func:`one_bucket`."""
    storage_env = json.loads(os.environ.pop(BUCKET_ENV_VAR, "") or "{}")
    base = lists.SCRATCH / (f"export-bucket-{tasks}-{runs}" if storage_env else f"lists-{tasks}-{runs}")
    base.mkdir(parents=True, exist_ok=True)
    url, data_root = f"sqlite:///{base / 'db.sqlite3'}", base / "data"
    seed = lists.seeded(url, data_root, tasks, runs, fresh=fresh, marker=base / "seeded.json",
                        verdicts=lists.DEFAULT_VERDICTS)
    env = lists._env(url, data_root)
    if storage_env:
        return one_bucket(tasks, base, env, storage_env, seed)
    out = base / "export-out"
    shutil.rmtree(out, ignore_errors=True)
    n_tasks, user, version, created, create_s = _create_release(env, env)
    cmd = [sys.executable, str(ROOT / "manage.py"), "export_release", version, "--out", str(out)]
    res = _wrapped(cmd, env, "export_release")
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    shutil.rmtree(out, ignore_errors=True)
    return {"tasks": n_tasks, "reused": bool(seed.get("reused")), "create_s": create_s, "export_s": res["seconds"],
            "rss_mb": res["maxrss_kib"] / 1024, "create_rss_mb": created["maxrss_kib"] / 1024,
            "written_mib": size / 2**20}


def _create_release(env: dict, child_env: dict) -> tuple[int, object, str, dict, float]:
    """In this process (Django set up on ``env``'s database): the approved tasks' count, the bench's
    maintainer and the next release version; then ``create_release`` in a child on ``child_env``.
    Returns ``(n_tasks, user, version, the child's measures, its seconds)``."""
    os.environ.update(env)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.db import connection

    from annotation.models import Task
    from releases.models import Release
    from studio.accounts import upsert_user

    n_tasks = Task.objects.filter(status="approved").count()
    user = upsert_user("bench-maintainer", "bench-pw-123", ["maintainer"])
    version = f"0.0.{Release.objects.count() + 1}"
    connection.close()  # the children write to the database
    created = _wrapped([sys.executable, str(Path(__file__).resolve()), "--create", version, "--user", user.username],
                       child_env, "create_release")
    return n_tasks, user, version, created, json.loads(created["stdout"].strip().splitlines()[-1])["seconds"]


def one_bucket(tasks: int, base: Path, env: dict, storage_env: dict, seed: dict) -> dict:
    """``one`` with the bucket as the data root: push this size's files to its prefix, create the
    release, and run the export job in a child with an empty data root of its own (the module's text)."""
    storage_env = {**storage_env, "STUDIO_STORAGE_URL": f"{storage_env['STUDIO_STORAGE_URL']}/n{tasks}"}
    local = {**env, **storage_env}  # the seeding machine: its data root holds the files to push
    for command in ("push_layers", "push_artifacts"):
        r = lists._manage(local, command, check=False)
        if r.returncode:
            raise SystemExit(f"{command} failed:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    machine = base / "machine"  # the exporting worker: another machine, nothing on its disk
    shutil.rmtree(machine, ignore_errors=True)
    worker = {**local, "STUDIO_DATA_ROOT": str(machine / "data"), "STUDIO_ARTIFACT_ROOT": str(machine / "data" / "artifacts"),
              "STUDIO_VAR_DIR": str(machine / "var")}
    n_tasks, user, version, created, create_s = _create_release(env, worker)
    res = _wrapped([sys.executable, str(Path(__file__).resolve()), "--export-job", version, "--user", user.username],
                   worker, "the export job")
    job = json.loads(res["stdout"].strip().splitlines()[-1])
    left = sorted(p.relative_to(machine).as_posix() for p in machine.rglob("*") if p.is_file())
    shutil.rmtree(machine, ignore_errors=True)
    return {"tasks": n_tasks, "reused": bool(seed.get("reused")), "create_s": create_s, "export_s": res["seconds"],
            "job_s": job["seconds"], "rss_mb": res["maxrss_kib"] / 1024, "create_rss_mb": created["maxrss_kib"] / 1024,
            "written_mib": job["zip_bytes"] / 2**20, "fetched": len([p for p in left if p.startswith("data/events/")]),
            "left_files": len(left)}


def export_job_child(version: str, username: str) -> None:
    """``--export-job``: run release ``version``'s export job as ``username`` in this process (no
    broker: ``start_export`` runs it to its end here); the database and bucket are the environment's.
    Prints the job's seconds and its zip's size in the bucket; exits 1 when the job failed."""
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.contrib.auth import get_user_model

    from releases.models import Release
    from releases.selectors import export_key
    from releases.services.release_export import start_export
    from studio import storage

    assert storage.uses_bucket()
    user = get_user_model().objects.get(username=username)
    t0 = time.perf_counter()
    job = start_export(user, Release.objects.get(version=version))
    seconds = time.perf_counter() - t0
    if job["status"] != "succeeded":
        raise SystemExit(f"export job {job['id']}: {job['status']}: {job.get('error')}")
    size = storage.storage().size(export_key(version, job["id"], job["zip"]))
    print(json.dumps({"seconds": seconds, "zip_bytes": size}))


def _wrapped(cmd: list[str], env: dict, what: str) -> dict:
    """Run ``cmd`` as the child of ``WRAPPER``: its rc, seconds, output tails and peak RSS (KiB)."""
    r = subprocess.run([sys.executable, "-c", WRAPPER, *cmd], env=env, cwd=ROOT, capture_output=True, text=True)
    res = json.loads(r.stdout.strip().splitlines()[-1])
    if res["rc"]:
        raise SystemExit(f"{what} failed:\n{res['stdout']}\n{res['stderr']}")
    return res


def create_child(version: str, username: str) -> None:
    """``--create``: create draft ``version`` of every approved task as ``username`` (the database
    is the environment's); prints the seconds ``create_release`` took (Django set up before)."""
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.contrib.auth import get_user_model

    from releases.services.lifecycle import create_release

    user = get_user_model().objects.get(username=username)
    t0 = time.perf_counter()
    create_release(user, version, "bench/export.py: every approved synthetic task")
    print(json.dumps({"seconds": time.perf_counter() - t0}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", default="10000,100000", help="comma-separated sizes; the last is the target's")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--fresh", action="store_true")
    ap.add_argument("--bucket", action="store_true",
                    help="the data root an S3 bucket (a SeaweedFS started here): the export job on an empty machine")
    ap.add_argument("--export-job", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--create", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--user", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.create is not None:  # a grandchild: create_release alone, for its own peak RSS
        create_child(args.create, args.user)
        return
    if args.export_job is not None:  # a grandchild: the export job alone (--bucket), for its own peak RSS
        export_job_child(args.export_job, args.user)
        return
    if args.one is not None:  # a child: one database per process (Django is set up once)
        print(json.dumps(one(args.one, args.runs, args.fresh)))
        return
    with contextlib.ExitStack() as stack:
        env = None
        if args.bucket:  # one server for the run; each size's --one child gets its settings in a variable
            from _scratch_studio import scratch_bucket

            folder = lists.SCRATCH / "export-bucket-s3"
            shutil.rmtree(folder, ignore_errors=True)
            stack.callback(shutil.rmtree, folder, True)  # last: after the server's stop
            _server, storage_env = stack.enter_context(scratch_bucket(folder, BUCKET))
            env = {**os.environ, BUCKET_ENV_VAR: json.dumps(storage_env)}
        results = sizes(args, env)
    label = "export (bucket)" if args.bucket else "export"
    what = "the export job (export_release, zip, upload)" if args.bucket else "export_release"
    big, small = results[-1], results[0]
    print(f"BENCH\t{label}: {what} peak RSS ({big['tasks']:,} tasks)\t{big['rss_mb']:,.0f} MB "
          f"({big['export_s']:.0f} s)\t≤ {TARGET_MB:.0f} MB\t{'ok' if big['rss_mb'] <= TARGET_MB else 'OVER'}")
    if len(results) > 1:
        growth = big["rss_mb"] / small["rss_mb"]
        print(f"BENCH\t{label}: peak RSS at {big['tasks']:,} / at {small['tasks']:,} tasks\t{growth:.2f} "
              f"({big['rss_mb']:,.0f} / {small['rss_mb']:,.0f} MB)\t≤ {GROWTH_TARGET}\t"
              f"{'ok' if growth <= GROWTH_TARGET else 'OVER'}")
    if args.bucket:  # create_release reads no file: the local run's rows say it
        return
    print(f"BENCH\trelease: create_release peak RSS ({big['tasks']:,} tasks)\t{big['create_rss_mb']:,.0f} MB "
          f"({big['create_s']:.1f} s)\t≤ {TARGET_MB:.0f} MB\t{'ok' if big['create_rss_mb'] <= TARGET_MB else 'OVER'}")
    print(f"BENCH\trelease: create_release ({big['tasks']:,} tasks)\t{big['create_s']:.1f} s\t—\tinfo")


def sizes(args, env: dict | None) -> list[dict]:
    """Each size of ``--tasks`` in a ``--one`` child of its own (``env``: its environment); the
    children's results, printed as they come."""
    results = []
    for n in (int(x) for x in args.tasks.split(",")):
        cmd = [sys.executable, __file__, "--one", str(n), "--runs", str(args.runs), *(["--fresh"] if args.fresh else [])]
        r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
        if r.returncode:
            raise SystemExit(f"export at {n:,} tasks failed:\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}")
        res = json.loads(r.stdout.strip().splitlines()[-1])
        results.append(res)
        bucket = (f" (the job {res['job_s']:.1f} s; {res['fetched']} layer files fetched from the bucket, "
                  f"{res['left_files']} files left on the worker's disk)" if "job_s" in res else "")
        print(f"export_release of {res['tasks']:,} tasks ({'reused' if res['reused'] else 'seeded'} scratch database): "
              f"create_release {res['create_s']:.1f} s (peak RSS {res['create_rss_mb']:,.0f} MB), export {res['export_s']:.1f} s, "
              f"peak RSS {res['rss_mb']:,.0f} MB, {res['written_mib']:,.0f} MiB written{bucket}", flush=True)
    return results


if __name__ == "__main__":
    main()
