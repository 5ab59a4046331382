"""Every page of the navigation, at the demo's size and over a synthetic benchmark at scale.

    .venv/bin/python bench/lists.py [--tasks 100000] [--runs 2] [--verdicts 2000] [--repeat 5]
                                    [--backends sqlite,postgres] [--datasets demo,synthetic]
                                    [--fresh] [--page-timeout 30]

The pages (:func:`page_paths`): every entry of the main navigation (``frontend.templatetags.
studio_nav.NAV``: events, tasks, review queue, runs, leaderboard, releases, scoring queue,
adjudication, agreement, judge report, judges, API docs) and the pages one click below them: an
event's map page (the first real event), a task's page (the first task), a run's page and a
record's page (the first run; its first record with verdicts), ``/leaderboard.csv``, the experiments
and the notifications pages. Two datasets: ``demo`` (``manage.py demo``: the real events, two
replayed tasks, one agent run) and ``synthetic`` (below).

Builds (once; reused while ``--tasks``/``--runs`` and the migrations are unchanged) a scratch
SQLite database under /tmp/studio-bench/ with the real xBD scenes of ../shared/realdata imported and
``manage.py seed_synthetic --tasks N --runs M --verdicts K`` on top (K records of each run with a
judge's and two people's verdicts: a scoring sample, for the agreement and judge-report pages); with PostgreSQL reachable on
127.0.0.1:5432 (or ``STUDIO_BENCH_PG_URL``) the same in a scratch database ``studio_bench_<pid>``
(the prefix from ``STUDIO_BENCH_PG_PREFIX``), dropped at the end; with ``STUDIO_BENCH_PG_DB=name`` that
database is kept and reused like the SQLite file (its marker under the scratch folder). Never touches
var/ or the studio's own database.

Measured per page, by a logged-in maintainer through Django's test ``Client`` in this process (no
network, no browser): the median of ``--repeat`` server times (request in, response body out) after
one warm-up request, and the SQL queries one request makes. Target: median ≤ 300 ms (issue 35; 250 ms
was issue 16's for the three list pages). A page that takes longer than ``--page-timeout`` seconds once
is measured once. A streamed download (the leaderboard's CSV) is read whole by the warm-up request
(its whole time is printed) and to its first piece by the timed ones, whose figure that is: a
27 MiB CSV read whole five times took minutes, and with the whole read against the timeout its
figure was the cold warm-up's. **The first visit after a restart**: each page again as the first request of a new
process that has loaded ``studio.wsgi`` as a server process does before it accepts a request (Django
set up, the views imported and the templates compiled by its warm-up, ``studio/warmup.py``; that
start is printed beside it), then the page: its first queries, caches and lazy imports; target ≤ 1 s.

The leaderboard after an import (issue 16, item 3): ``--import-records`` records of the first synthetic
run are imported again as a new run through ``import_run_dir`` (scored against the studio's gold, its
leaderboard sums written in the same transaction), then the first ``/leaderboard/`` request is timed
(target ≤ 300 ms) against the full from-records rebuild the page did before (``leaderboard.build`` over
``leaderboard_data()``, timed in the same process afterwards), and the time until the background
bootstrap intervals are stored is reported. The imported run is deleted again.

Prints ``BENCH`` lines for ``bench/run_all.py`` (``BENCH<TAB>figure<TAB>value<TAB>target<TAB>verdict``).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRATCH = Path(os.environ.get("STUDIO_BENCH_DIR", "/tmp/studio-bench"))
REALDATA = Path(os.environ.get("STUDIO_DEMO_DATA", ROOT.parent / "shared" / "realdata"))
XBD_FOLDERS = ("xbd-hurricane-florence", "xbd-guatemala-volcano", "xbd-socal-fire", "xbd-joplin-tornado-labels",
               "xbd-santa-rosa-labels")
#: the pages one click below the navigation that need no row (those that do: :func:`page_paths`)
EXTRA_PAGES = ("/leaderboard.csv", "/experiments/", "/notifications/")
#: records of each run with a judge's and two people's verdicts (``--verdicts``'s default; bench/export.py
#: and bench/serve.py seed with it too, so that they reuse one seeded database)
DEFAULT_VERDICTS = 2000
TARGET_MS = 300.0
FIRST_VISIT_MS = 1000.0
FIRST_AFTER_IMPORT_MS = 300.0


def _env(database_url: str, data_root: Path) -> dict:
    return dict(os.environ, DATABASE_URL=database_url, STUDIO_DATA_ROOT=str(data_root),
                STUDIO_ARTIFACT_ROOT=str(data_root / "artifacts"), STUDIO_DEBUG="0", CELERY_BROKER_URL="",
                DJANGO_SETTINGS_MODULE="studio.settings", PYTHONPATH=str(ROOT))


def _manage(env: dict, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "manage.py"), *args], cwd=ROOT, env=env, check=check,
                          capture_output=True, text=True)


def _migrations_stamp() -> str:
    """Names of all migration files: a seeded database is reused only while they are unchanged."""
    return ",".join(sorted(str(p.relative_to(ROOT)) for p in ROOT.glob("*/migrations/0*.py")))


def seeded(database_url: str, data_root: Path, tasks: int, runs: int, *, fresh: bool = False,
           marker: Path | None = None, verdicts: int = 0, demo: bool = False) -> dict:
    """Migrate, import the real xBD scenes, and seed ``tasks``/``runs`` synthetic rows with
    ``verdicts`` records a run judged (or, with ``demo``, load ``manage.py demo`` instead); reuses a
    database whose marker file says it already holds them. Returns timings and counts."""
    env = _env(database_url, data_root)
    stamp = ({"demo": True, "migrations": _migrations_stamp()} if demo else
             {"tasks": tasks, "runs": runs, "verdicts": verdicts, "migrations": _migrations_stamp()})
    if marker and marker.exists() and not fresh:
        if json.loads(marker.read_text()).get("stamp") == stamp:
            return {**json.loads(marker.read_text()), "reused": True}
    if database_url.startswith("sqlite:///"):  # a fresh file: faster than deleting 100,000 tasks
        Path(database_url[len("sqlite:///"):]).unlink(missing_ok=True)
        shutil.rmtree(data_root, ignore_errors=True)
    data_root.mkdir(parents=True, exist_ok=True)
    _manage(env, "migrate", "--no-input", "-v", "0")
    if demo:
        t0 = time.perf_counter()
        r = _manage(env, "demo", check=False)
        if r.returncode:
            raise SystemExit(f"manage.py demo failed:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
        info = {"stamp": stamp, "scenes": ["the demo"], "seed_s": round(time.perf_counter() - t0, 1)}
        if marker:
            marker.write_text(json.dumps(info))
        return {**info, "reused": False}
    imported = []
    for folder in XBD_FOLDERS:
        if (REALDATA / folder).is_dir():
            r = _manage(env, "import_xbd", str(REALDATA / folder), check=False)
            if r.returncode == 0:
                imported.append(folder)
    t0 = time.perf_counter()
    r = _manage(env, "seed_synthetic", "--tasks", str(tasks), "--runs", str(runs), "--verdicts", str(verdicts),
                "--replace", check=False)
    if r.returncode:
        raise SystemExit(f"seed_synthetic failed:\n{r.stdout}\n{r.stderr}")
    info = {"stamp": stamp, "scenes": imported, "seed_s": round(time.perf_counter() - t0, 1),
            "seed_output": r.stdout.strip().splitlines()[-3:]}
    if marker:
        marker.write_text(json.dumps(info))
    return {**info, "reused": False}


def page_paths() -> list[str]:
    """The pages measured (see the module docstring), in the navigation's order; a detail page is
    left out when its dataset has no row for it. Needs Django set up."""
    from annotation.models import Event, Task
    from evaluation.models import AgentRun, RunRecord
    from frontend.templatetags.studio_nav import NAV

    paths = [href for _label, href, _page, _prefixes in NAV]
    event = (Event.objects.exclude(slug__startswith="synthetic-").filter(layers__isnull=False).order_by("id").first()
             or Event.objects.order_by("id").first())
    if event is not None:
        paths.insert(paths.index("/") + 1, f"/events/{event.slug}/")
    task = Task.objects.order_by("id").values_list("id", flat=True).first()
    if task is not None:
        paths.insert(paths.index("/tasks/") + 1, f"/tasks/{task}/")
    run = AgentRun.objects.order_by("id").values_list("id", flat=True).first()
    if run is not None:
        record = (RunRecord.objects.filter(run_id=run, verdicts__isnull=False).order_by("id").values_list("id", flat=True).first()
                  or RunRecord.objects.filter(run_id=run).order_by("id").values_list("id", flat=True).first())
        at = paths.index("/runs/") + 1
        paths[at:at] = [f"/runs/{run}/"] + ([f"/records/{record}/"] if record is not None else [])
    at = paths.index("/leaderboard/") + 1
    paths[at:at] = [EXTRA_PAGES[0]]
    return paths + list(EXTRA_PAGES[1:])


def _bench_client():
    """A test ``Client`` logged in as the bench's maintainer (every role), keeping one database
    connection across requests (as ``CONN_MAX_AGE`` > 0 would) so that queries can be counted."""
    from django.core import signals
    from django.db import close_old_connections
    from django.test import Client
    from django.test.utils import setup_test_environment

    from studio.accounts import upsert_user
    from studio.permissions import ROLES

    setup_test_environment()  # the test Client's response hooks (templates, context)
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    user = upsert_user("bench-maintainer", "bench-pw-123", list(ROLES))
    client = Client()
    client.force_login(user)
    return client, user


def measure_first_visit(path: str) -> dict:
    """In a new process: load the application as a server process does before it accepts a request
    (``studio.wsgi``: Django set up, then its warm-up, ``studio/warmup.py``; timed as ``load_ms``),
    then the first request of ``path``."""
    t0 = time.perf_counter()
    import studio.wsgi  # noqa: F401 — what gunicorn imports when it loads the application

    load_ms = (time.perf_counter() - t0) * 1000
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client, _user = _bench_client()
    with CaptureQueriesContext(connection) as queries:
        resp, first_byte_ms, _all_ms = _get(client, path)
    return {"page": path, "status": resp.status_code, "first_ms": round(first_byte_ms, 1),
            "queries": len(queries), "load_ms": round(load_ms, 1)}


def _get(client, path: str, whole: bool = True):
    """GET ``path``: ``(response, ms to the first byte of the body, ms to its last byte)``; the
    response gets ``bytes``. A page's body is whole when the view returns; a streamed download
    (``StreamingHttpResponse``: the leaderboard's CSV) starts at its first piece, which is what its
    figure against the target reads (its whole time is printed beside it). With ``whole=False`` a
    streamed body is read to its first piece only: ``(None, ms to the first byte, None)``, the
    response dropped on return, which finalises the test client's closing wrapper around its
    generator (the view's generator closed, ``request_finished`` sent as for a whole read)."""
    t0 = time.perf_counter()
    resp = client.get(path)
    if not resp.streaming:
        ms = (time.perf_counter() - t0) * 1000
        resp.bytes = len(resp.content)
        return resp, ms, ms
    pieces = iter(resp.streaming_content)
    first = next(pieces, b"")
    first_ms = (time.perf_counter() - t0) * 1000
    if not whole:
        return None, first_ms, None
    resp.bytes = len(first) + sum(len(p) for p in pieces)
    return resp, first_ms, (time.perf_counter() - t0) * 1000


def measure_pages(repeat: int, page_timeout: float, import_records: int = 1000) -> list[dict]:
    """In a process configured for one database: time each page (see the module docstring)."""
    import django

    django.setup()
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from annotation.models import Task
    from evaluation.models import RunRecord

    client, user = _bench_client()
    out = []
    for path in page_paths():
        with CaptureQueriesContext(connection) as queries:
            resp, first, first_all = _get(client, path)
        n_queries = len(queries)  # now: the next request's reset_queries() empties the log
        if resp.status_code != 200:
            out.append({"page": path, "status": resp.status_code, "error": resp.content[:200].decode(errors="replace")})
            continue
        times, whole, size = [first], [first_all], resp.bytes
        if (first if resp.streaming else first_all) / 1000 < page_timeout:
            timed = [_get(client, path, whole=not resp.streaming)[1:] for _ in range(repeat)]
            times = [first_byte_ms for first_byte_ms, _all in timed]
            if not resp.streaming:
                whole = [all_ms for _first, all_ms in timed]
        out.append({"page": path, "status": 200, "median_ms": round(statistics.median(times), 1),
                    "whole_ms": round(statistics.median(whole), 1), "streamed": resp.streaming,
                    "first_ms": round(first, 1), "n": len(times), "queries": n_queries, "bytes": size})
    out.append({"tasks": Task.objects.count(), "records": RunRecord.objects.count()})
    if import_records:
        out.append(measure_leaderboard_after_import(client, user, import_records))
    return out


def measure_leaderboard_after_import(client, user, n_records: int) -> dict:
    """Import ``n_records`` records of the first synthetic run again as a new run, then time the first
    ``/leaderboard/`` request, the wait for the background bootstrap, a request with the intervals,
    and the former full rebuild from the records (see the module docstring)."""
    import tempfile

    from annotation.services.tasks import TASK_FILES
    from evaluation import leaderboard as lb
    from evaluation.models import AgentRun, LeaderboardBootstrap, RunRecord
    from evaluation.selectors.leaderboard import bootstrap_version, leaderboard_data, leaderboard_runs, records_state
    from evaluation.services.runs import import_run_dir

    source = AgentRun.objects.filter(agent__name__startswith="synthetic-").order_by("id").first()
    if source is None:
        return {"after_import": None, "error": "no synthetic run"}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "bench-reimport"
        files = {}
        for r in RunRecord.objects.filter(run=source).order_by("id")[:n_records]:
            fh = files.get(r.dimension)
            if fh is None:
                (folder / TASK_FILES[r.dimension][:-5]).mkdir(parents=True, exist_ok=True)
                fh = files[r.dimension] = open(folder / TASK_FILES[r.dimension][:-5] / "benchmark.jsonl", "w")
            fh.write(json.dumps({"question_id": r.question_id, "predicted_answer": r.predicted_answer,
                                 "trajectory": r.trajectory}) + "\n")
        for fh in files.values():
            fh.close()
        t0 = time.perf_counter()
        run = import_run_dir(user, folder, "bench-reimport")
        import_s = time.perf_counter() - t0
    try:
        t0 = time.perf_counter()
        resp = client.get("/leaderboard/")
        first_ms = (time.perf_counter() - t0) * 1000
        computing = "computing…" in resp.content.decode()
        version = bootstrap_version(leaderboard_runs(), records_state())
        t0 = time.perf_counter()
        while True:  # the bootstrap thread (embedded default) started at the import's commit
            row = LeaderboardBootstrap.objects.filter(version=version).first()
            if (row is not None and row.status != "queued") or time.perf_counter() - t0 > 600:
                break
            time.sleep(0.05)
        boot_wait_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        ready = client.get("/leaderboard/")
        ready_ms = (time.perf_counter() - t0) * 1000
        t0 = time.perf_counter()
        runs, rows = leaderboard_data()
        lb.build(runs, rows)
        rebuild_ms = (time.perf_counter() - t0) * 1000
        return {"after_import": {
            "records_imported": RunRecord.objects.filter(run=run).count(), "import_s": round(import_s, 2),
            "status": resp.status_code, "first_ms": round(first_ms, 1), "computing": computing,
            "bootstrap_status": row.status if row else None, "bootstrap_wait_s": round(boot_wait_s, 2),
            "ready_ms": round(ready_ms, 1), "ready_has_intervals": "computing…" not in ready.content.decode(),
            "rebuild_ms": round(rebuild_ms, 1), "records": len(rows)}}
    finally:
        AgentRun.objects.filter(pk=run.pk).delete()
        run.agent.delete()


def _pg_admin_url() -> str | None:
    url = os.environ.get("STUDIO_BENCH_PG_URL", "postgres://postgres@127.0.0.1:5432")
    try:
        import psycopg

        with psycopg.connect(url + "/postgres", connect_timeout=3, autocommit=True) as conn:
            conn.execute("select 1")
        return url
    except Exception:
        return None


def _pg_version(url: str) -> str:
    import psycopg

    with psycopg.connect(url + "/postgres", autocommit=True) as conn:
        return conn.execute("show server_version").fetchone()[0]


def run_backend(name: str, database_url: str, data_root: Path, args, marker: Path | None, *, demo: bool = False) -> dict:
    """Seed (or reuse) one database, measure its pages in one process, then each page's first visit
    in a process of its own. Returns ``{"backend", "dataset", "seed", "pages", "first_visits"}``."""
    seed = seeded(database_url, data_root, args.tasks, args.runs, fresh=args.fresh, marker=marker,
                  verdicts=args.verdicts, demo=demo)
    env = _env(database_url, data_root)
    r = subprocess.run([sys.executable, __file__, "--measure", "--repeat", str(args.repeat),
                        "--page-timeout", str(args.page_timeout),
                        "--import-records", str(0 if demo else args.import_records)], env=env, cwd=ROOT,
                       capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(f"measuring {name} failed:\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}")
    pages = json.loads(r.stdout.strip().splitlines()[-1])
    first_visits = []
    for p in pages:
        if "page" not in p:
            continue
        f = subprocess.run([sys.executable, __file__, "--first-visit", p["page"]], env=env, cwd=ROOT,
                           capture_output=True, text=True)
        if f.returncode:
            first_visits.append({"page": p["page"], "status": None, "error": f.stderr[-400:]})
        else:
            first_visits.append(json.loads(f.stdout.strip().splitlines()[-1]))
    return {"backend": name, "dataset": "demo" if demo else "synthetic", "seed": seed, "pages": pages,
            "first_visits": first_visits}


def report(res: dict, args) -> None:
    """Print one database's and dataset's figures and their ``BENCH`` rows."""
    seed, db = res["seed"], res["backend"].split()[0]
    counts = next((p for p in res["pages"] if "tasks" in p), {})
    n, n_records = counts.get("tasks", "?"), counts.get("records", "?")
    size = "the demo" if res["dataset"] == "demo" else f"{n:,} tasks"
    how = "reused" if seed.get("reused") else f"seeded in {seed['seed_s']} s"
    print(f"{res['backend']}, {size}: {n:,} tasks, {n_records:,} run records ({how}; scenes: {', '.join(seed['scenes'])})")
    for p in res["pages"]:
        if "page" not in p:
            continue
        if p["status"] != 200:
            print(f"  {p['page']:<22} HTTP {p['status']}: {p.get('error', '')}")
            print(f"BENCH\tpages {db} {p['page']} ({size})\tHTTP {p['status']}\t≤ {TARGET_MS:.0f} ms\tFAIL")
            continue
        verdict = "ok" if p["median_ms"] <= TARGET_MS else "OVER"
        streamed = (f" to its first byte (streamed; the whole {p['bytes'] / 2**20:,.1f} MiB in {p['whole_ms']:,.0f} ms)"
                    if p.get("streamed") else "")
        print(f"  {p['page']:<22} median {p['median_ms']:>9.1f} ms{streamed} over {p['n']} requests, {p['queries']} "
              f"queries, {p['bytes'] / 1024:,.0f} KiB")
        print(f"BENCH\tpages {db} {p['page']} ({size})\t{p['median_ms']:.0f} ms{streamed}, "
              f"{p['queries']} queries\t≤ {TARGET_MS:.0f} ms\t{verdict}")
    for f in res["first_visits"]:
        if f.get("status") != 200:
            print(f"  first visit {f['page']:<22} HTTP {f.get('status')}: {f.get('error', '')[-200:]}")
            print(f"BENCH\tfirst visit after a restart {db} {f['page']} ({size})\tHTTP {f.get('status')}\t"
                  f"≤ {FIRST_VISIT_MS:.0f} ms\tFAIL")
            continue
        verdict = "ok" if f["first_ms"] <= FIRST_VISIT_MS else "OVER"
        print(f"  first visit {f['page']:<22} {f['first_ms']:>9.1f} ms, {f['queries']} queries "
              f"(the process's start before it: {f['load_ms']:.0f} ms)")
        print(f"BENCH\tfirst visit after a restart {db} {f['page']} ({size})\t{f['first_ms']:.0f} ms\t"
              f"≤ {FIRST_VISIT_MS:.0f} ms\t{verdict}")
    after = next((p["after_import"] for p in res["pages"] if "after_import" in p), None)
    if after:
        a = after
        verdict = "ok" if a["status"] == 200 and a["first_ms"] <= FIRST_AFTER_IMPORT_MS else "OVER"
        print(f"  leaderboard after importing {a['records_imported']:,} records ({a['import_s']} s): first request "
              f"{a['first_ms']:.1f} ms ({'computing…' if a['computing'] else 'intervals shown'}), bootstrap "
              f"{a['bootstrap_status']} {a['bootstrap_wait_s']} s later, then {a['ready_ms']:.1f} ms with the "
              f"intervals; full rebuild from {a['records']:,} records {a['rebuild_ms'] / 1000:.2f} s")
        print(f"BENCH\tleaderboard {db} first request after an import ({a['records']:,} records)\t"
              f"{a['first_ms']:.0f} ms = {a['first_ms'] / a['rebuild_ms']:.4f}× the full rebuild ({a['rebuild_ms']:,.0f} ms)\t"
              f"≤ {FIRST_AFTER_IMPORT_MS:.0f} ms\t{verdict}")
        print(f"BENCH\tleaderboard {db} bootstrap in the background after the import\t"
              f"{a['bootstrap_wait_s']} s after the first request ({a['bootstrap_status']})\t—\tinfo")
    if not seed.get("reused") and res["dataset"] == "synthetic":
        print(f"BENCH\tseed_synthetic {db} ({args.tasks:,} tasks, {args.runs} runs, {args.verdicts:,} judged a run)\t"
              f"{seed['seed_s']} s\ta few minutes\t{'ok' if seed['seed_s'] <= 300 else 'OVER'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--verdicts", type=int, default=DEFAULT_VERDICTS,
                    help="records of each run with a judge's and two people's verdicts (default 2000)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--backends", default="sqlite,postgres")
    ap.add_argument("--datasets", default="demo,synthetic", help="demo, synthetic or both (default both)")
    ap.add_argument("--fresh", action="store_true", help="seed again even if a seeded scratch database exists")
    ap.add_argument("--page-timeout", type=float, default=30.0)
    ap.add_argument("--import-records", type=int, default=1000,
                    help="records of the imported run before the first-request-after-an-import figure (default 1000)")
    ap.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--first-visit", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.measure:
        print(json.dumps(measure_pages(args.repeat, args.page_timeout, args.import_records)))
        return
    if args.first_visit:
        print(json.dumps(measure_first_visit(args.first_visit)))
        return

    SCRATCH.mkdir(parents=True, exist_ok=True)
    datasets = [d for d in ("demo", "synthetic") if d in args.datasets.split(",")]
    results = []
    if "sqlite" in args.backends:
        for dataset in datasets:
            demo = dataset == "demo"
            base = SCRATCH / ("lists-demo" if demo else f"lists-{args.tasks}-{args.runs}")
            base.mkdir(parents=True, exist_ok=True)
            results.append(run_backend("SQLite", f"sqlite:///{base / 'db.sqlite3'}", base / "data", args,
                                       base / "seeded.json", demo=demo))
    pg = _pg_admin_url() if "postgres" in args.backends else None
    if "postgres" in args.backends and pg is None:
        print("PostgreSQL: not reachable, skipped")
    if pg:
        import psycopg

        for dataset in datasets:
            demo = dataset == "demo"
            keep = None if demo else os.environ.get("STUDIO_BENCH_PG_DB")
            db = keep or f"{os.environ.get('STUDIO_BENCH_PG_PREFIX', 'studio_bench_')}{os.getpid()}{'_demo' if demo else ''}"
            base = SCRATCH / (f"pg-{db}" if keep else f"pg-{os.getpid()}-{dataset}")
            with psycopg.connect(pg + "/postgres", autocommit=True) as conn:
                exists = conn.execute("select 1 from pg_database where datname = %s", [db]).fetchone()
                if args.fresh and exists and keep:
                    conn.execute(f'DROP DATABASE "{db}" WITH (FORCE)')
                    exists = None
                if not exists:
                    conn.execute(f'CREATE DATABASE "{db}"')
                    shutil.rmtree(base, ignore_errors=True)
            base.mkdir(parents=True, exist_ok=True)
            try:
                results.append(run_backend(f"PostgreSQL {_pg_version(pg)}", f"{pg}/{db}", base / "data", args,
                                           base / "seeded.json" if keep else None, demo=demo))
            finally:
                if not keep:
                    with psycopg.connect(pg + "/postgres", autocommit=True) as conn:
                        conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
                    shutil.rmtree(base, ignore_errors=True)

    for res in results:
        report(res, args)


if __name__ == "__main__":
    main()
