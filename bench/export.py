"""Release export at scale: wall time and peak memory of exporting 100,000 tasks.

    .venv/bin/python bench/export.py [--tasks 100000] [--runs 2] [--fresh]

Uses the seeded scratch SQLite database of ``bench/lists.py`` (built there if missing: real xBD
scenes + ``seed_synthetic``; under /tmp/studio-bench, never var/). Then:

* with ``manage.py export_release`` present (``releases/services/releases.py``): a draft release
  ``0.0.<n>`` of every approved task is created in this process (``create_release``, timed), and
  ``manage.py export_release 0.0.<n> --out DIR`` runs as a child process;
* otherwise ``manage.py export_tasks --out DIR`` (the plain task files) runs as the child.

The child is started by a small wrapper process that waits for it and reads
``resource.getrusage(RUSAGE_CHILDREN).ru_maxrss``: the child's peak resident memory, in KiB on
Linux. Target: ≤ 500 MB. Prints ``BENCH`` lines for ``bench/run_all.py``.
"""
from __future__ import annotations

import argparse
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
TARGET_MB = 500.0
WRAPPER = """
import json, resource, subprocess, sys, time
t0 = time.perf_counter()
r = subprocess.run(sys.argv[1:], capture_output=True, text=True)
print(json.dumps({"rc": r.returncode, "seconds": time.perf_counter() - t0, "stdout": r.stdout[-2000:],
                  "stderr": r.stderr[-4000:], "maxrss_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--fresh", action="store_true")
    args = ap.parse_args()
    base = lists.SCRATCH / f"lists-{args.tasks}-{args.runs}"
    base.mkdir(parents=True, exist_ok=True)
    url, data_root = f"sqlite:///{base / 'db.sqlite3'}", base / "data"
    seed = lists.seeded(url, data_root, args.tasks, args.runs, fresh=args.fresh, marker=base / "seeded.json")
    env = lists._env(url, data_root)
    os.environ.update(env)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from annotation.models import Task
    from releases.models import Release

    n_tasks = Task.objects.filter(status="approved").count()
    out = base / "export-out"
    shutil.rmtree(out, ignore_errors=True)
    has_release = (ROOT / "annotation" / "management" / "commands" / "export_release.py").exists()
    create_s = None
    if has_release:
        from releases.services.releases import create_release
        from studio.accounts import upsert_user

        user = upsert_user("bench-maintainer", "bench-pw-123", ["maintainer"])
        version = f"0.0.{Release.objects.count() + 1}"
        t0 = time.perf_counter()
        create_release(user, version, "bench/export.py: every approved synthetic task")
        create_s = time.perf_counter() - t0
        cmd = [sys.executable, str(ROOT / "manage.py"), "export_release", version, "--out", str(out)]
        what = f"manage.py export_release {version}"
    else:
        cmd = [sys.executable, str(ROOT / "manage.py"), "export_tasks", "--out", str(out)]
        what = "manage.py export_tasks (no export_release yet)"
    r = subprocess.run([sys.executable, "-c", WRAPPER, *cmd], env=env, cwd=ROOT, capture_output=True, text=True)
    res = json.loads(r.stdout.strip().splitlines()[-1])
    if res["rc"]:
        raise SystemExit(f"{what} failed:\n{res['stdout']}\n{res['stderr']}")
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    rss_mb = res["maxrss_kib"] / 1024
    print(f"{what}: {n_tasks:,} approved tasks ({'seeded' if not seed.get('reused') else 'reused'} scratch database)")
    if create_s is not None:
        print(f"  create_release (draft, pins every task): {create_s:.1f} s")
    print(f"  export: {res['seconds']:.1f} s, peak RSS {rss_mb:,.0f} MB, {size / 2**20:,.0f} MiB written")
    print(f"BENCH\texport: {what.split(' (')[0]} ({n_tasks:,} tasks)\t{rss_mb:,.0f} MB peak RSS, "
          f"{res['seconds']:.0f} s\t≤ {TARGET_MB:.0f} MB\t{'ok' if rss_mb <= TARGET_MB else 'OVER'}")
    if create_s is not None:
        print(f"BENCH\trelease: create_release ({n_tasks:,} tasks)\t{create_s:.1f} s\t—\tinfo")
    shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
