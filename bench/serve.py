"""gunicorn worker classes and counts, side by side: requests/s of the task and run lists.

    .venv/bin/python bench/serve.py [--tasks 10000] [--seconds 4] [--rounds 3] [--clients 4]

Uses the seeded scratch SQLite database of ``bench/lists.py`` for ``--tasks`` tasks (built there if
missing; under /tmp/studio-bench, never var/). Starts one gunicorn per configuration, each on its
own port with ``--no-control-socket`` (gunicorn ≥ 23 otherwise creates ``~/.gunicorn/gunicorn.ctl``):

* ``sync ×2`` (the baseline: 2 processes, one request each at a time, the connection closed after
  every response), ``sync ×5`` (2·nproc+1, the former docs/deployment.md), ``gthread ×2 ×1``,
  ``×2 ×2`` and ``×2 ×4`` (2 processes of 1, 2 or 4 threads, keep-alive connections);

then, for ``--rounds`` rounds, drives each configuration in turn for ``--seconds`` with
``--clients`` client threads that each keep one HTTP/1.1 connection open (reconnecting when the
server closes it) and request ``/tasks/``, a filtered ``/tasks/`` and ``/runs/`` in turn as a
logged-in user (after a warm-up of the same length with twice the clients). The
configurations take turns, so a change of machine load hits them alike; per configuration the
median of its rounds' requests/s counts, as a ratio to ``sync ×2``. Prints ``BENCH`` lines
(info: no target; docs/deployment.md documents the best).
"""
from __future__ import annotations

import argparse
import http.client
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import lists  # noqa: E402  (the seeded scratch database)

ROOT = lists.ROOT
CONFIGS = {
    "sync ×2": ["--workers", "2", "--worker-class", "sync"],
    "sync ×5": ["--workers", "5", "--worker-class", "sync"],
    "gthread ×2 ×1": ["--workers", "2", "--worker-class", "gthread", "--threads", "1", "--keep-alive", "5"],
    "gthread ×2 ×2": ["--workers", "2", "--worker-class", "gthread", "--threads", "2", "--keep-alive", "5"],
    "gthread ×2 ×4": ["--workers", "2", "--worker-class", "gthread", "--threads", "4", "--keep-alive", "5"],
}
SESSION = """
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from django.contrib.sessions.backends.db import SessionStore
from studio.accounts import upsert_user
u = upsert_user("bench-reader", "bench-pw-123", ["author"])
s = SessionStore()
s[SESSION_KEY], s[BACKEND_SESSION_KEY], s[HASH_SESSION_KEY] = str(u.pk), "django.contrib.auth.backends.ModelBackend", u.get_session_auth_hash()
s.save()
print(s.session_key)
"""


def drive(port: int, paths: list[str], cookie: str, seconds: float, clients: int) -> float:
    """Requests/s that ``clients`` threads with persistent connections get in ``seconds``."""
    done = [0] * clients
    stop = time.perf_counter() + seconds

    def client(k: int) -> None:
        conn, i = None, k
        while time.perf_counter() < stop:
            if conn is None:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            try:
                conn.request("GET", paths[i % len(paths)], headers={"Cookie": f"sessionid={cookie}"})
                resp = conn.getresponse()
                resp.read()
                if resp.status != 200:
                    raise SystemExit(f"{paths[i % len(paths)]}: HTTP {resp.status}")
                if resp.getheader("Connection", "").lower() == "close":
                    conn.close()
                    conn = None
            except (http.client.HTTPException, OSError):
                conn.close()
                conn = None
                continue
            done[k] += 1
            i += 1
        if conn is not None:
            conn.close()

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(done) / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--clients", type=int, default=4)
    args = ap.parse_args()
    base = lists.SCRATCH / f"lists-{args.tasks}-{args.runs}"
    base.mkdir(parents=True, exist_ok=True)
    url, data_root = f"sqlite:///{base / 'db.sqlite3'}", base / "data"
    lists.seeded(url, data_root, args.tasks, args.runs, marker=base / "seeded.json", verdicts=lists.DEFAULT_VERDICTS)
    env = {**os.environ, **lists._env(url, data_root), "STUDIO_ALLOWED_HOSTS": "127.0.0.1,localhost"}
    r = subprocess.run([sys.executable, "manage.py", "shell", "-c", SESSION], cwd=ROOT, env=env, capture_output=True,
                       text=True, check=True)
    cookie = r.stdout.split()[-1]
    paths = ["/tasks/", "/tasks/?q=synthetic", "/runs/"]
    gunicorn = str(Path(sys.executable).with_name("gunicorn"))
    procs, ports = {}, {}
    try:
        for k, (name, opts) in enumerate(CONFIGS.items()):
            ports[name] = 18700 + k + (os.getpid() % 50) * 4
            procs[name] = subprocess.Popen(
                [gunicorn, "studio.wsgi:application", "--bind", f"127.0.0.1:{ports[name]}", "--no-control-socket",
                 "--timeout", "120", *opts], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for name in CONFIGS:  # up and warm: answering, then every worker process has served requests
            for _ in range(120):
                try:
                    drive(ports[name], paths, cookie, 0.5, 1)
                    break
                except (SystemExit, OSError):
                    time.sleep(0.5)
            drive(ports[name], paths, cookie, args.seconds, args.clients * 2)
        rates = {name: [] for name in CONFIGS}
        for _ in range(args.rounds):
            for name in CONFIGS:
                rates[name].append(drive(ports[name], paths, cookie, args.seconds, args.clients))
    finally:
        for p in procs.values():
            p.terminate()
        for p in procs.values():
            p.wait(timeout=30)
    med = {name: statistics.median(v) for name, v in rates.items()}
    base_name = next(iter(CONFIGS))
    print(f"{args.clients} clients, {' and '.join(paths)} alternately, {args.rounds} rounds of {args.seconds:.0f} s "
          f"per configuration, interleaved")
    for name, v in rates.items():
        print(f"  {name:<14} requests/s per round: {', '.join(f'{x:.1f}' for x in v)}; median {med[name]:.1f}")
    for name in CONFIGS:
        print(f"BENCH\tserve: gunicorn {name} vs sync ×2 ({args.tasks:,} tasks, list pages)\t"
              f"{med[name] / med[base_name]:.2f}× ({med[name]:.1f} vs {med[base_name]:.1f} req/s)\t—\tinfo")
    shutil.rmtree(base / "serve", ignore_errors=True)


if __name__ == "__main__":
    main()
