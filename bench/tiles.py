"""The tile endpoint against bare rio-tiler, on the same 200 tiles of a real web-mercator COG.

    .venv/bin/python bench/tiles.py [--tiles 200] [--rounds 3] [--bucket]

Imports ``xview2-deploy-joplin/output_chips_post_0_post.tif`` (a 1024² RGB chip, EPSG:32615,
0.6 m, Joplin after the 2011 tornado) with ``annotation.services.imports.import_raster_file`` into
a scratch SQLite database and data root under /tmp/studio-bench/tiles (never var/); the import
writes the layer's web-mercator COG (``layer.tiles_path``). The tiles: every XYZ tile of zooms
16–20 that intersects the raster's bounds, in (z, x, y) order, the first ``--tiles`` of them.

* endpoint: ``GET /tiles/<layer>/<z>/<x>/<y>.png`` through Django's test ``Client`` by a logged-in
  user (the whole request: URL routing, middleware, session, the layer row, ``render_tile``);
* baseline: ``Reader(cog).tile(x, y, z).render(img_format="PNG")`` of rio-tiler on the same COG,
  the file opened per tile (as a server handling one request would).

Each side renders every tile once to warm up; then ``--rounds`` passes time each tile on both sides
in turn (endpoint, bare, next tile), so that a change of machine load hits both; per tile the
fastest round counts, summed over the tiles. Figures: the first render through the endpoint (the
tile cache emptied just before) / baseline, target ≤ 1.3×; the same tile served a second time (from
the server's tile cache) / its first render, target ≤ 0.2×; a revalidation with the tile's ETag
(304, no body) / its first render.

Over HTTP, against TiTiler (issue 16: a cold tile ≤ 1.0× TiTiler on the same COG): when a Python with
``titiler.application`` and ``uvicorn`` is found (``STUDIO_BENCH_TITILER_PYTHON``, default
``$STUDIO_BENCH_DIR-titiler/bin/python``, i.e. /tmp/studio-bench-titiler: a scratch venv that ``make
bench-titiler`` makes from bench/requirements-titiler.txt, never the studio's; pinned there:
titiler.application/titiler.core 2.4.0, uvicorn 0.54.0, fastapi 0.165.0, starlette 1.10.0 and the studio's own rio-tiler 9.4.12 / rasterio 1.4.4 / numpy 2.4.6, so both
encode the same PNG bytes), the studio runs under gunicorn as documented (docs/deployment.md: gthread,
``--threads 4``, keep-alive, ``STUDIO_DB_CONN_MAX_AGE=600``) with the tile cache off
(``STUDIO_TILE_CACHE_BYTES=0``, so every request renders) and TiTiler under uvicorn
(``/cog/tiles/WebMercatorQuad/{z}/{x}/{y}.png?url=<the same COG>``): **one process each** (gunicorn
``--workers 1``, uvicorn ``--workers 1``; TiTiler runs its sync endpoints on anyio's thread pool),
each on a kept-alive HTTP/1.1 connection. Each tile is fetched from both in turn, ``--rounds``
times after one warm-up pass, and per tile the fastest round counts (wall time at the client). The
server CPU figure is the CPU time the serving process spent (all its threads,
``/proc/<pid>/task/*/schedstat``) over the timed rounds, per tile: it does not count time lost to
other programs on a loaded machine. The warm-up pass (each tile's first request to each server) is
printed too. Without that Python the row says so (info).

``--bucket``: the same figures, rows labelled "(bucket)", with the studio's data root an S3 bucket
(docs/deployment.md, "Object storage"): a SeaweedFS ``weed mini`` started in the scratch folder
(``bench/_scratch_studio.py``'s ``scratch_bucket``, the tests' server) and stopped by its PID; the
import uploads the layer's files to it and keeps none on disk, so every side reads the COG from the
bucket through GDAL's ``/vsis3/``: the endpoint (``studio.storage.gdal_path`` inside ``gdal_env``),
bare rio-tiler (the same path, inside ``gdal_env``, opened per tile) and TiTiler
(``url=s3://<bucket>/<key>``, with ``AWS_S3_ENDPOINT`` ``host:port``, the credentials and region, and
``studio.storage.gdal_options()``: ``AWS_HTTPS=NO``, ``AWS_VIRTUAL_HOSTING=FALSE``,
``GDAL_DISABLE_READDIR_ON_OPEN=EMPTY_DIR``, in its environment). The warm-up pass over HTTP (each
tile's first fetch: the server's GDAL caches hold nothing of it yet) is a row of its own (info).
Prints ``BENCH`` lines for ``bench/run_all.py``.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
SCRATCH = Path(os.environ.get("STUDIO_BENCH_DIR", "/tmp/studio-bench")) / "tiles"
REALDATA = Path(os.environ.get("STUDIO_DEMO_DATA", ROOT.parent / "shared" / "realdata"))
CHIP = REALDATA / "xview2-deploy-joplin" / "output_chips_post_0_post.tif"
TARGET = 1.3
#: issue 16: a cold tile over HTTP costs at most this multiple of TiTiler's on the same COG
TITILER_TARGET = 1.0
#: made by ``make bench-titiler`` (bench/requirements-titiler.txt) beside the scratch folder, which is emptied per run
TITILER_PY = Path(os.environ.get("STUDIO_BENCH_TITILER_PYTHON",
                                 os.environ.get("STUDIO_BENCH_DIR", "/tmp/studio-bench") + "-titiler/bin/python"))
#: issue 16: a tile served a second time costs at most this share of its first render
SECOND_TARGET = 0.2
#: the bucket of ``--bucket`` (on a server of its own, in the scratch folder)
BUCKET = "tiles-bench"


def setup_scratch() -> None:
    os.environ.update(DATABASE_URL=f"sqlite:///{SCRATCH / 'db.sqlite3'}", STUDIO_DATA_ROOT=str(SCRATCH / "data"),
                      STUDIO_ARTIFACT_ROOT=str(SCRATCH / "data" / "artifacts"), STUDIO_DEBUG="0", CELERY_BROKER_URL="",
                      DJANGO_SETTINGS_MODULE="studio.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def tiles_for(bounds: list[float], n: int) -> list[tuple[int, int, int]]:
    import morecantile

    tms = morecantile.tms.get("WebMercatorQuad")
    out = []
    for z in range(16, 21):
        out += [(t.z, t.x, t.y) for t in tms.tiles(*bounds, zooms=[z])]
    return sorted(out)[:n]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tiles", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bucket", action="store_true",
                    help="the data root an S3 bucket (a SeaweedFS started here): every side reads it through /vsis3/")
    args = ap.parse_args()
    global SCRATCH
    if args.bucket:
        SCRATCH = SCRATCH.with_name("tiles-bucket")
    shutil.rmtree(SCRATCH, ignore_errors=True)
    SCRATCH.mkdir(parents=True)
    with contextlib.ExitStack() as stack:
        if args.bucket:  # before Django starts: the settings read STUDIO_STORAGE_URL and AWS_* from here
            sys.path.insert(0, str(ROOT / "bench"))
            from _scratch_studio import scratch_bucket

            _server, storage_env = stack.enter_context(scratch_bucket(SCRATCH / "s3", BUCKET))
            os.environ.update(storage_env)
        measure(args.tiles, args.rounds, args.bucket)
    shutil.rmtree(SCRATCH, ignore_errors=True)


def measure(n_tiles: int, rounds: int, bucket: bool) -> None:
    """Import the chip, time the endpoint against bare rio-tiler in process, then over HTTP against
    TiTiler (the module's text); ``bucket``: the data root is the bucket ``storage_env`` names."""
    setup_scratch()
    from django.conf import settings
    from django.test import Client
    from rio_tiler.io import Reader

    from annotation.services.imports import import_raster_file
    from studio import storage
    from studio.accounts import upsert_user

    label = "tiles (bucket)" if bucket else "tiles"
    layer = import_raster_file(CHIP, event_slug="bench-joplin", phase="post").layers[0]
    key = layer.tiles_path or layer.path
    if bucket:
        cog = storage.gdal_path(key)  # /vsis3/<bucket>/<key>: what the endpoint opens
        local = Path(settings.STUDIO_DATA_ROOT) / key
        assert not local.exists(), f"the import left {local} on disk: the bench would not read the bucket"
        assert storage.exists(key), f"{key} is not in the bucket"
    else:
        cog = str(Path(settings.STUDIO_DATA_ROOT) / key)
    tiles = tiles_for(layer.bounds, n_tiles)
    client = Client()
    client.force_login(upsert_user("bench", "bench-pw-123", ["author"]))

    from annotation import tiles as tile_module

    cache = tile_module.tile_cache()

    def endpoint(z, x, y, headers=None) -> bytes:
        resp = client.get(f"/tiles/{layer.pk}/{z}/{x}/{y}.png", headers=headers or {})
        assert resp.status_code in (200, 304), (resp.status_code, z, x, y)
        return resp

    def cold(z, x, y):  # the first render of a tile: the cache emptied just before
        cache.clear()
        return endpoint(z, x, y).content

    def warm(z, x, y):  # the same tile served a second time, from the cache
        return endpoint(z, x, y).content

    etags = {}

    def revalidate(z, x, y):  # the browser asks again with its ETag: 304, no body
        resp = endpoint(z, x, y, {"If-None-Match": etags[(z, x, y)]})
        assert resp.status_code == 304
        return b""

    bare_env = storage.gdal_env if bucket else contextlib.nullcontext  # the bucket's GDAL settings

    def bare(z, x, y) -> bytes:
        with bare_env(), Reader(cog) as src:
            return src.tile(x, y, z).render(img_format="PNG")

    sides = (("cold", cold), ("warm", warm), ("304", revalidate), ("bare", bare))
    sizes = {}
    for t in tiles:  # warm-up: every side once (the file's metadata and the readers' caches)
        etags[t] = endpoint(*t)["ETag"]
    for name, fn in sides:
        sizes[name] = sum(len(fn(*t)) for t in tiles)
    # interleaved (each tile: every side in turn, warm right after cold), so that a change of machine
    # load hits all sides; per tile the fastest of the rounds, summed
    fastest = {name: [float("inf")] * len(tiles) for name, _ in sides}
    for _ in range(rounds):
        for i, t in enumerate(tiles):
            for name, fn in sides:
                t0 = time.perf_counter()
                fn(*t)
                fastest[name][i] = min(fastest[name][i], time.perf_counter() - t0)
    best = {name: sum(v) for name, v in fastest.items()}
    ratio = best["cold"] / best["bare"]
    second = best["warm"] / best["cold"]
    zooms = sorted({t[0] for t in tiles})
    print(f"{len(tiles)} tiles (zooms {zooms[0]}–{zooms[-1]}) of {CHIP.name} → web-mercator COG {cog}")
    for name, _ in sides:
        print(f"  {name:<5} sum of per-tile bests of {rounds}: {best[name]:.3f} s = {1000 * best[name] / len(tiles):.2f} ms/tile "
              f"({sizes[name] / 1024:,.0f} KiB of PNG)")
    print(f"  ratio first render (endpoint) / bare rio-tiler: {ratio:.2f}× (target ≤ {TARGET}×)")
    print(f"  ratio second serve / first render: {second:.3f}× (target ≤ {SECOND_TARGET}×); "
          f"304 revalidation / first render: {best['304'] / best['cold']:.3f}×")
    print(f"BENCH\t{label}: first render, endpoint vs bare rio-tiler ({len(tiles)} tiles)\t{ratio:.2f}× "
          f"({1000 * best['cold'] / len(tiles):.1f} vs {1000 * best['bare'] / len(tiles):.1f} ms/tile)\t"
          f"≤ {TARGET}×\t{'ok' if ratio <= TARGET else 'OVER'}")
    print(f"BENCH\t{label}: served a second time vs first render\t{second:.3f}× "
          f"({1000 * best['warm'] / len(tiles):.2f} vs {1000 * best['cold'] / len(tiles):.1f} ms/tile)\t"
          f"≤ {SECOND_TARGET}×\t{'ok' if second <= SECOND_TARGET else 'OVER'}")
    print(f"BENCH\t{label}: 304 revalidation vs first render\t{best['304'] / best['cold']:.3f}×\t≤ {SECOND_TARGET}×\t"
          f"{'ok' if best['304'] / best['cold'] <= SECOND_TARGET else 'OVER'}")
    if bucket:  # TiTiler reads the same object through GDAL's S3 driver, configured as gdal_env is
        bucket_name, prefix = storage.parse_storage_url(settings.STUDIO_STORAGE_URL)
        url = f"s3://{bucket_name}/{prefix + '/' if prefix else ''}{key}"
        titiler_env = {"AWS_ACCESS_KEY_ID": settings.AWS_ACCESS_KEY_ID,
                       "AWS_SECRET_ACCESS_KEY": settings.AWS_SECRET_ACCESS_KEY,
                       "AWS_REGION": settings.AWS_S3_REGION_NAME or "us-east-1",
                       "AWS_DEFAULT_REGION": settings.AWS_S3_REGION_NAME or "us-east-1",
                       "AWS_S3_ENDPOINT": urlsplit(settings.AWS_S3_ENDPOINT_URL).netloc, **storage.gdal_options()}
    else:
        url, titiler_env = cog, {}
    http_vs_titiler(layer, url, tiles, rounds, label=label, titiler_env=titiler_env, first_row=bucket)


def _wait_http(port: int, path: str, headers: dict, proc) -> None:
    import http.client

    for _ in range(240):
        if proc.poll() is not None:
            raise SystemExit(f"server on port {port} exited with status {proc.returncode}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            conn.request("GET", path, headers=headers)
            if conn.getresponse().status == 200:
                conn.close()
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"server on port {port} did not answer {path}")


def http_vs_titiler(layer, cog: str, tiles, rounds: int, *, label: str = "tiles", titiler_env: dict | None = None,
                    first_row: bool = False) -> None:
    """Cold tiles over HTTP: the studio under gunicorn vs TiTiler under uvicorn (module docstring).
    ``cog``: what TiTiler is given as ``url`` (a local path, or ``s3://…`` read with ``titiler_env``
    added to its environment); ``first_row``: the warm-up pass (each tile's first fetch) as a row."""
    import http.client
    import subprocess
    from urllib.parse import quote

    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
    from django.contrib.sessions.backends.db import SessionStore

    from studio.accounts import upsert_user

    if not TITILER_PY.exists():
        print(f"BENCH\t{label}: cold tile over HTTP vs TiTiler\tnot measured (no TiTiler Python at {TITILER_PY})\t"
              f"≤ {TITILER_TARGET}×\tinfo")
        return
    user = upsert_user("bench", "bench-pw-123", ["author"])
    sess = SessionStore()
    sess[SESSION_KEY], sess[BACKEND_SESSION_KEY] = str(user.pk), "django.contrib.auth.backends.ModelBackend"
    sess[HASH_SESSION_KEY] = user.get_session_auth_hash()
    sess.save()
    port_s, port_t = 18600 + os.getpid() % 100, 18700 + os.getpid() % 100
    # the documented deployment (docs/deployment.md), in one process; only the tile cache is off
    env = {**os.environ, "STUDIO_TILE_CACHE_BYTES": "0", "STUDIO_ALLOWED_HOSTS": "127.0.0.1,localhost",
           "STUDIO_DB_CONN_MAX_AGE": "600"}
    gunicorn = str(Path(sys.executable).with_name("gunicorn"))
    procs = [
        subprocess.Popen([gunicorn, "studio.wsgi:application", "--bind", f"127.0.0.1:{port_s}", "--workers", "1",
                          "--worker-class", "gthread", "--threads", "4", "--keep-alive", "5",
                          "--no-control-socket", "--timeout", "120"], cwd=ROOT, env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
        subprocess.Popen([str(TITILER_PY), "-m", "uvicorn", "titiler.application.main:app", "--host", "127.0.0.1",
                          "--port", str(port_t), "--workers", "1", "--log-level", "warning"],
                         cwd="/tmp", env={**os.environ, **(titiler_env or {})},
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
    ]
    cookie = {"Cookie": f"sessionid={sess.session_key}"}
    studio_path = lambda z, x, y: f"/tiles/{layer.pk}/{z}/{x}/{y}.png"  # noqa: E731
    titiler_path = lambda z, x, y: f"/cog/tiles/WebMercatorQuad/{z}/{x}/{y}.png?url={quote(cog)}"  # noqa: E731
    try:
        _wait_http(port_s, studio_path(*tiles[0]), cookie, procs[0])
        _wait_http(port_t, titiler_path(*tiles[0]), {}, procs[1])
        conns = {"studio": http.client.HTTPConnection("127.0.0.1", port_s, timeout=60),
                 "titiler": http.client.HTTPConnection("127.0.0.1", port_t, timeout=60)}
        paths = {"studio": studio_path, "titiler": titiler_path}
        heads = {"studio": cookie, "titiler": {}}
        sizes = {"studio": 0, "titiler": 0}
        statuses = {"studio": set(), "titiler": set()}

        def get(side, t) -> float:
            t0 = time.perf_counter()
            conns[side].request("GET", paths[side](*t), headers=heads[side])
            resp = conns[side].getresponse()
            body = resp.read()
            dt = time.perf_counter() - t0
            statuses[side].add(resp.status)
            sizes[side] = len(body)
            return dt

        first = {side: 0.0 for side in conns}
        for t in tiles:  # warm-up: each server's readers and the file's metadata; each tile's first fetch
            for side in conns:
                first[side] += get(side, t)
        pids = {side: _serving_pid(p) for side, p in zip(conns, procs)}
        cpu = {side: -_cpu_seconds(pids[side]) for side in conns}
        fastest = {side: [float("inf")] * len(tiles) for side in conns}
        total = {side: 0 for side in conns}
        for _ in range(rounds):
            for i, t in enumerate(tiles):
                for side in conns:
                    fastest[side][i] = min(fastest[side][i], get(side, t))
                    total[side] += sizes[side]
        for side in conns:
            cpu[side] += _cpu_seconds(pids[side])
        for c in conns.values():
            c.close()
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(timeout=30)
    best = {side: sum(v) for side, v in fastest.items()}
    ratio = best["studio"] / best["titiler"]
    print(f"  over HTTP, cold (studio: gunicorn, tile cache off; TiTiler: uvicorn), sum of per-tile bests of {rounds}: "
          f"studio {1000 * best['studio'] / len(tiles):.2f} ms/tile, TiTiler {1000 * best['titiler'] / len(tiles):.2f} "
          f"ms/tile; HTTP statuses {sorted(statuses['studio'])} / {sorted(statuses['titiler'])}; "
          f"{total['studio'] / 1024 / rounds:,.0f} / {total['titiler'] / 1024 / rounds:,.0f} KiB of PNG a round")
    bad = statuses["studio"] != {200} or statuses["titiler"] != {200}
    n = len(tiles)
    print(f"  first fetch of each tile (the warm-up pass, one sample): studio {1000 * first['studio'] / n:.2f} ms/tile, "
          f"TiTiler {1000 * first['titiler'] / n:.2f} ms/tile ({first['studio'] / first['titiler']:.2f}×)")
    if first_row:
        first_ratio = first["studio"] / first["titiler"]
        print(f"BENCH\t{label}: first fetch of each tile over HTTP (warm-up pass, one sample), studio vs TiTiler "
              f"({n} tiles)\t{first_ratio:.2f}× ({1000 * first['studio'] / n:.1f} vs {1000 * first['titiler'] / n:.1f} "
              f"ms/tile)\t—\tinfo")
    print(f"BENCH\t{label}: cold tile over HTTP, studio (gunicorn) vs TiTiler (uvicorn) ({n} tiles)\t{ratio:.2f}× "
          f"({1000 * best['studio'] / n:.1f} vs {1000 * best['titiler'] / n:.1f} ms/tile)\t"
          f"≤ {TITILER_TARGET}×\t{'FAIL' if bad else ('ok' if ratio <= TITILER_TARGET else 'OVER')}")
    cpu_ratio = cpu["studio"] / cpu["titiler"]
    per = rounds * n
    print(f"BENCH\t{label}: server CPU per cold tile, studio vs TiTiler ({n} tiles × {rounds})\t{cpu_ratio:.2f}× "
          f"({1000 * cpu['studio'] / per:.1f} vs {1000 * cpu['titiler'] / per:.1f} ms/tile)\t"
          f"≤ {TITILER_TARGET}×\t{'FAIL' if bad else ('ok' if cpu_ratio <= TITILER_TARGET else 'OVER')}")


def _serving_pid(proc) -> int:
    """The process that serves requests: gunicorn's one worker (the arbiter's child), else ``proc``."""
    for _ in range(100):
        try:
            children = open(f"/proc/{proc.pid}/task/{proc.pid}/children").read().split()
        except OSError:
            return proc.pid
        if children or "gunicorn" not in " ".join(proc.args):
            return int(children[0]) if children else proc.pid
        time.sleep(0.1)
    return proc.pid


def _cpu_seconds(pid: int) -> float:
    """CPU time (s) spent so far by all threads of ``pid`` (``/proc/<pid>/task/*/schedstat``, ns)."""
    total = 0
    for stat in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        try:
            total += int(stat.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # a thread that ended between the listing and the read
    return total / 1e9


if __name__ == "__main__":
    main()
