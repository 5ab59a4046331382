"""Run every benchmark in bench/ and print one table (``make bench``).

    .venv/bin/python bench/run_all.py [--only tiles,lists] [--quick] [--markdown FILE] [--timeout-scale 1.0]

Each ``bench/<name>.py`` (every ``*.py`` here but this file and ``_*.py`` helpers), and each extra
job of ``EXTRA`` (``replay_pg``: ``replay.py --postgres``, for PostgreSQL's warm/cold; ``tiles_bucket``
and ``export_bucket``: ``tiles.py --bucket`` and ``export.py --bucket``, the data root an S3 bucket), runs as a
subprocess with its own time limit (``TIMEOUTS``, seconds, times ``--timeout-scale``); its output is
kept. A benchmark reports its figures for the table by printing
lines ``BENCH<TAB>figure<TAB>value<TAB>target<TAB>verdict`` (verdict: ok, OVER, FAIL or info); for a
script that prints none, its last printed lines stand in as the figure. ``--quick`` runs every
benchmark that has a target at small sizes (``QUICK_ARGS``: a few thousand tasks or records, 40
replays, 30 tiles, 3 rounds of ``mcp_start``, 2 questions of ``experiments``; ``tools`` and ``perception``, which have none, are left out) so that a reviewer can run the whole
table quickly: its sizes are chosen for about three minutes on a quiet 2-CPU machine (183 s at load
average 1.0–1.5 on 2026-12-01; 26 minutes the same day with the machine loaded to 6–17). Its
figures are a smoke test of the same code, not the issue's sizes, and the table says so.
``--markdown FILE`` also writes the machine description and the table as Markdown (for
docs/benchmarks.md).

Benchmarks use scratch databases and data roots under /tmp (``STUDIO_BENCH_DIR``, default
/tmp/studio-bench), never var/. Their settings travel in the environment: ``STUDIO_BENCH_DORA``
(a checkout of the official DORA evaluator, outside the project) makes ``scoring.py`` measure
against it (docs/benchmarks.md, "Scoring against the official evaluator"). The jobs that start
Celery workers of their own (``BROKER_JOBS``: ``scale``, ``replay_pg``'s worker rows) get
``CELERY_BROKER_URL``, else the local Redis's database 15 when it answers (``broker``), so that
``make bench`` measures them with no variable set; with neither they print "skipped".
"""
from __future__ import annotations

import argparse
import os
import platform
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
#: seconds per benchmark (export at 100,000 tasks is the long one; see docs/benchmarks.md). The replay
#: took 10.5 min on each database at full size on 2026-12-03 with its floor rounds, and a VM of this
#: kind has run the tools twice as slowly
TIMEOUTS = {"scoring": 900, "tools": 900, "replay": 2400, "replay_pg": 2400, "tiles": 900, "lists": 2400,
            "export": 5400, "export_bucket": 5400, "tiles_bucket": 900, "serve": 600, "mcp_start": 900, "perception": 3600, "scale": 3600,
            "experiments": 4800}  # experiments: about 40 min, most of it the model filling 8 repeats
ORDER = ("scoring", "tiles", "tiles_bucket", "replay", "replay_pg", "scale", "lists", "export", "export_bucket", "serve", "mcp_start", "experiments", "tools",
         "perception")
#: jobs that run a script of bench/ with other arguments: name → (script, arguments)
EXTRA = {"replay_pg": ("replay", ["--postgres"]), "tiles_bucket": ("tiles", ["--bucket"]),
         "export_bucket": ("export", ["--bucket"])}
#: jobs that start Celery workers of their own, through a broker (without one they print "skipped")
BROKER_JOBS = {"scale", "replay_pg"}
#: the broker they get when ``CELERY_BROKER_URL`` is unset and a Redis answers there: a database of its own
LOCAL_BROKER = "redis://127.0.0.1:6379/15"
#: small sizes for ``--quick`` (each side still measured three times, interleaved, where it is timed)
QUICK_ARGS = {"scoring": ["--records", "10000", "--rounds", "3"], "tiles": ["--tiles", "30"],
              "tiles_bucket": ["--tiles", "30"], "export_bucket": ["--tasks", "1000,4000"],
              "replay": ["--tasks", "40", "--events", "4"], "replay_pg": ["--tasks", "40", "--events", "4", "--worker-rounds", "1"],
              "scale": ["--tasks", "120", "--events", "4"],
              "lists": ["--tasks", "2000", "--verdicts", "100", "--repeat", "3", "--import-records", "200"],
              "export": ["--tasks", "1000,4000"], "serve": ["--tasks", "2000", "--seconds", "2"],
              "mcp_start": ["--rounds", "3"],
              "experiments": ["--questions", "2", "--max-steps", "2", "--cached-rounds", "3", "--cached-repeats", "2"]}
#: left out of ``--quick`` (no target: information tables; perception's ViT-L windows take minutes on CPU)
QUICK_SKIP = {"tools", "perception"}


def machine() -> dict:
    """nproc, memory, CPU model, Python, SQLite and PostgreSQL versions, load average."""
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = "?"
    try:
        kib = int(next(l for l in Path("/proc/meminfo").read_text().splitlines() if l.startswith("MemTotal")).split()[1])
        mem = f"{kib / 2**20:.1f} GiB"
    except (OSError, StopIteration, ValueError):
        pass
    pg = "not reachable"
    try:
        import psycopg

        url = os.environ.get("STUDIO_BENCH_PG_URL", "postgres://postgres@127.0.0.1:5432")
        with psycopg.connect(url + "/postgres", connect_timeout=3) as conn:
            pg = conn.execute("show server_version").fetchone()[0]
    except Exception:
        pass
    return {"nproc": os.cpu_count(), "memory": mem, "cpu": cpu, "python": platform.python_version(),
            "sqlite": sqlite3.sqlite_version, "postgresql": pg, "os": platform.platform(),
            "load": " ".join(f"{x:.1f}" for x in os.getloadavg())}


def broker() -> str:
    """The broker for :data:`BROKER_JOBS`: ``CELERY_BROKER_URL`` when set, else :data:`LOCAL_BROKER`
    when a Redis there answers a PING within 2 s, else "" (those jobs then print "skipped")."""
    if os.environ.get("CELERY_BROKER_URL"):
        return os.environ["CELERY_BROKER_URL"]
    try:
        import redis

        redis.Redis.from_url(LOCAL_BROKER, socket_connect_timeout=2, socket_timeout=2).ping()
        return LOCAL_BROKER
    except Exception:
        return ""


def discover(only: set[str] | None, quick: bool = False) -> list[str]:
    names = [p.stem for p in HERE.glob("*.py") if p.stem != "run_all" and not p.stem.startswith("_")] + list(EXTRA)
    names = sorted(names, key=lambda n: (ORDER.index(n) if n in ORDER else len(ORDER), n))
    return [n for n in names if (n in only if only else not (quick and n in QUICK_SKIP))]


def run_one(name: str, quick: bool, scale: float, celery_broker: str = "") -> dict:
    script, extra = EXTRA.get(name, (name, []))
    env = {**os.environ, "CELERY_BROKER_URL": celery_broker} if name in BROKER_JOBS and celery_broker else None
    cmd = [sys.executable, str(HERE / f"{script}.py"), *extra, *(QUICK_ARGS.get(name, []) if quick else [])]
    limit = TIMEOUTS.get(name, 900) * scale
    t0 = time.perf_counter()
    try:
        r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=limit)
        out, rc = r.stdout + ("\n" + r.stderr if r.returncode else ""), r.returncode
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"").decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        rc = "timeout"
    seconds = time.perf_counter() - t0
    rows = []
    for line in out.splitlines():
        if line.startswith("BENCH\t"):
            parts = line.split("\t")[1:] + ["", "", "", ""]
            rows.append({"figure": parts[0], "value": parts[1], "target": parts[2], "verdict": parts[3]})
    if rc == "timeout":
        rows.append({"figure": f"{name}: stopped after {limit:.0f} s", "value": "—", "target": "", "verdict": "TIMEOUT"})
    elif rc:
        tail = " | ".join(l.strip() for l in out.strip().splitlines()[-3:])
        rows.append({"figure": f"{name}: exit status {rc}", "value": tail[:160], "target": "", "verdict": "FAIL"})
    elif not rows:
        lines = [l.strip() for l in out.strip().splitlines() if l.strip()][-6:]
        rows.append({"figure": name, "value": " | ".join(lines)[:400], "target": "(printed)", "verdict": "info"})
    return {"name": name, "seconds": seconds, "rows": rows, "output": out}


def table(results: list[dict], markdown: bool = False) -> str:
    head = ("benchmark", "figure", "value", "target", "verdict", "wall")
    lines = []
    data = [(r["name"], row["figure"], row["value"], row["target"], row["verdict"], f"{r['seconds']:.0f} s")
            for r in results for row in r["rows"]]
    if markdown:
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "---|" * len(head))
        lines += ["| " + " | ".join(c.replace("|", "/") for c in row) + " |" for row in data]
        return "\n".join(lines)
    widths = [min(60, max(len(h), *(len(row[i]) for row in data))) if data else len(h) for i, h in enumerate(head)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    lines.append(fmt.format(*head))
    lines.append(fmt.format(*("-" * w for w in widths)))
    for row in data:
        lines.append(fmt.format(*(c if len(c) <= 60 else c[:57] + "..." for c in row)))
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="", help="comma-separated benchmark names (default: all)")
    ap.add_argument("--quick", action="store_true", help="every target at small sizes (a smoke run)")
    ap.add_argument("--markdown", default=None, help="also write the machine and the table as Markdown here")
    ap.add_argument("--timeout-scale", type=float, default=1.0)
    ap.add_argument("--verbose", action="store_true", help="print each benchmark's whole output")
    args = ap.parse_args()
    m = machine()
    celery_broker = broker()
    desc = (f"{m['nproc']} CPUs ({m['cpu']}), {m['memory']} memory, Python {m['python']}, SQLite {m['sqlite']}, "
            f"PostgreSQL {m['postgresql']}, Celery broker {celery_broker or 'none'}; {m['os']}; "
            f"load average at start {m['load']}")
    if args.quick:
        desc += "; --quick: small sizes, a smoke run, not the issue's figures"
    print(f"machine: {desc}")
    t_start = time.perf_counter()
    results = []
    for name in discover(set(filter(None, args.only.split(","))) or None, args.quick):
        print(f"== {name} …", flush=True)
        res = run_one(name, args.quick, args.timeout_scale, celery_broker)
        results.append(res)
        if args.verbose:
            print(res["output"])
        else:
            for line in res["output"].splitlines():
                if line.strip() and not line.startswith("BENCH\t"):
                    print(f"   {line}")
        print(f"   ({res['seconds']:.0f} s)", flush=True)
    print()
    print(table(results))
    print(f"\n{sum(r['seconds'] for r in results):.0f} s in all (wall {time.perf_counter() - t_start:.0f} s)")
    if args.markdown:
        Path(args.markdown).write_text(f"Machine: {desc}\n\n{table(results, markdown=True)}\n", encoding="utf-8")
        print(f"\nwritten: {args.markdown}")
    if any(row["verdict"] in ("FAIL", "TIMEOUT") for r in results for row in r["rows"]):
        sys.exit(1)


if __name__ == "__main__":
    main()
