"""Two Celery workers that share nothing but the services: each with its own empty data root,
artifact root and var folder (as on two machines), sharing only PostgreSQL, Redis and the bucket (a
real SeaweedFS, ``tests/support/seaweedfs.py``); this test process is the web server, on a third
empty data root. The same scenario runs first on one machine (eagerly, in this process, no bucket:
the embedded default) and then on the three "machines"; every result is compared byte for byte.

Limited to the broker configuration (CI's configuration 2, ``CELERY_BROKER_URL`` set): two worker
processes take jobs only from a broker that both can reach, and the embedded configuration has none
(its broker is ``memory://``, private to one process), so there the test is skipped with that reason
rather than run eagerly: run eagerly, both "workers" would be this process on one data root, which
is the single-machine path the test compares against.

The scenario, and on which machine each part runs (worker A, worker B, the web):
  * web: the layer import (Florence's xBD folder), the release import of the scoring examples
    (twelve tasks and their golds; that folder has no images), the tasks, the release;
  * A: the gold replay of the Florence damage task (its tools run: artifacts written there);
  * B: a replay of another task with the same steps (every step answered by the step cache with
    A's artifacts, fetched from the bucket), and a replay of the damage task without the cache;
  * web: the replay pages of A's run (the mask's overlay PNG, the overlays document) and the map's
    tiles and layer images;
  * A: the release export (its zip, in the bucket, fetched through the presigned download link);
  * B: two run zips' imports (agent_a's twelve records, scored against the studio's tasks; a run
    answering the damage task, its predicted polygon a file of the run);
  * web: that run's record page, which reads the predicted polygon from the run's folder (with a
    bucket this machine's copy, fetched from the keys B uploaded: ``evaluation.run_folders``); B's
    folders are moved out of reach first (on one host the absolute ``AgentRun.source_dir`` would
    reach them).

What the checks compare, single machine against two workers: the layer files (``{key: SHA-256}``:
the local data root's ``events/`` against the bucket's); the map's PNG bytes (centre tile and whole
image of every raster and mask layer, ``/tiles/…`` and ``/layers/<id>/image.png``); each replay's
status, tool calls, step-cache hits, artifact manifest (``{name: SHA-256}``) and replay hash; the
mask's overlay PNG bytes and the overlays document (JSON); the export's zip (file list and each
member's SHA-256; ``studio_manifest.json`` compared without its two clocks, ``generated_at`` and
``release.created_at``) and its ``content_sha256``; the runs' per-record scores (every ``RunRecord``
score column) and DORA scores; the record page's HTML (its form tokens apart; it shows the predicted
polygon and re-scores it from the files: IoU 1, the prediction being the gold's polygons, as stored at
import). Between the two paths, and before the first, the database is flushed (sequences reset), so
the same rows get the same ids. Which
worker ran each job is read from the workers' own logs (the task id's ``received`` line) and their
data roots.
"""
from __future__ import annotations

import hashlib
import io
import json
import re
import time
import urllib.request
import uuid
import zipfile
from pathlib import Path

import morecantile
import pytest
from conftest import SCORING_EXAMPLES
from conftest_celery import broker_url
from django.core.management import call_command
from support.florence import DAMAGE_TASK as DAMAGE
from support.florence import FLORENCE
from support.judging import run_zip
from support.seaweedfs import machine_env

from annotation import tiles
from annotation.models import Layer, Task
from annotation.services.imports import import_xbd_folder
from annotation.services.tasks import create_task
from evaluation.jobs import run_import
from evaluation.models import RunImportJob
from evaluation.services.runs import start_run_import
from releases.jobs import export_release_job
from releases.selectors import export_job
from releases.services import lifecycle, release_import
from releases.services.release_export import start_export
from replay.jobs import run_replay
from replay.models import ReplayRun
from replay.services.paths import artifact_path
from replay.services.runs import create_run, start_replay
from studio import storage

pytestmark = pytest.mark.skipif(
    not broker_url(), reason="two worker processes need a broker both reach (CELERY_BROKER_URL: CI's configuration "
                             "2); the embedded memory:// broker is private to one process")

WMQ = morecantile.tms.get("WebMercatorQuad")
#: the columns of a scored record compared between the two paths
SCORE_FIELDS = ("question_id", "dimension", "task_score", "field_scores", "n_scored_fields", "t_any", "t_ord",
                "t_em", "par_acc", "eff", "error")
JOB_TIMEOUT_S = 300


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _wait(what: str, read, done, timeout: float = JOB_TIMEOUT_S, logs=()):
    """Poll ``read()`` until ``done(value)``; fail naming ``what`` (and the workers' log tails) after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = read()
        if done(value):
            return value
        if time.monotonic() > deadline:
            tails = "".join(f"\n--- {p}:\n" + "\n".join(p.read_text(errors="replace").splitlines()[-30:])
                            for p in logs if p.exists())
            pytest.fail(f"{what} not finished after {timeout:.0f} s: {value!r}{tails}")
        time.sleep(0.1)


def _centre_tile(layer) -> tuple[int, int, int]:
    """The max-zoom tile at the centre of the layer's lon/lat bounds (or its georeference's)."""
    z = tiles.tile_zoom_range(layer)[1]
    if layer.frame == "pixel":
        from affine import Affine

        lon, lat = Affine(*layer.metadata["georeference"]["transform"]) @ (layer.width / 2, layer.height / 2)
    else:
        w, s, e, n = layer.bounds
        lon, lat = (w + e) / 2, (s + n) / 2
    t = WMQ.tile(lon, lat, z)
    return t.z, t.x, t.y


def _map(client) -> dict[str, list]:
    """What the map serves of each raster and mask layer: ``{event/file: [image PNG's SHA-256,
    (z, x, y), centre tile PNG's SHA-256]}`` (the tile part only for a layer with tiles)."""
    out = {}
    for la in Layer.objects.filter(kind__in=("raster", "mask")).select_related("event").order_by("event__slug",
                                                                                                  "file_name"):
        r = client.get(f"/layers/{la.pk}/image.png")
        assert r.status_code == 200, (la.file_name, r.status_code)
        entry = [_sha(r.content)]
        if tiles.has_tiles(la):
            z, x, y = _centre_tile(la)
            t = client.get(f"/tiles/{la.pk}/{z}/{x}/{y}.png")
            assert t.status_code == 200 and t["Content-Type"] == "image/png"
            entry += [[z, x, y], _sha(t.content)]
        out[f"{la.event.slug}/{la.file_name}"] = entry
    return out


def _replay(run: ReplayRun) -> list:
    return [run.status, run.tool_calls, run.cache_hits, run.artifact_manifest, run.replay_hash, run.final_answer]


def _zip_members(data: bytes) -> dict[str, str]:
    """``{member: SHA-256}`` of a zip; ``studio_manifest.json``'s entry is its JSON without the two
    clocks it holds (``generated_at``, ``release.created_at``)."""
    out = {}
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        for name in zf.namelist():
            body = zf.read(name)
            if name.endswith("/studio_manifest.json"):
                doc = json.loads(body)
                doc.pop("generated_at")  # the export's clock
                doc["release"].pop("created_at")  # the release's: made once per path
                out[name] = doc
            else:
                out[name] = _sha(body)
    return out


class Machines:
    """Where the scenario's jobs go: ``on(name)`` routes the next dispatches to that worker's queue
    (eagerly in this process when no worker is named: the single-machine path)."""

    def __init__(self, monkeypatch):
        self.queue: str | None = None
        self.sent: dict[str, list[str]] = {}
        for task in (run_replay, export_release_job, run_import):
            monkeypatch.setattr(task, "delay", self._sender(task))

    def _sender(self, task):
        def delay(*args, **kwargs):
            if self.queue is None:
                return task.apply_async(args, kwargs)
            result = task.apply_async(args, kwargs, queue=self.queue)
            self.sent.setdefault(self.queue, []).append(result.id)
            return result
        return delay

    def on(self, queue: str | None) -> None:
        self.queue = queue

    def send(self, task, args: tuple, kwargs: dict | None = None):
        """``task.apply_async`` to the current queue (in-process when none), noted in ``sent``."""
        return self._sender(task)(*args, **(kwargs or {}))


def _scenario(machines: Machines, client, make_user, *, a: str | None, b: str | None, web_root: Path,
              logs=(), hide_worker_disk=None, bucket: tuple | None = None) -> dict:
    """Import, replay, export and score, with the jobs on worker ``a`` or ``b`` (None: in this
    process); returns what is compared (see the module docstring). ``hide_worker_disk()``: called
    before the web reads a run's record page (another machine's folders are out of its reach);
    ``bucket``: ``(SeaweedFS server, bucket name)`` when the studio keeps its files there."""
    out = {}
    maintainer = make_user("mia", "maintainer", "author", "reviewer", "scorer")
    client.force_login(maintainer)
    # web: the layer imports
    florence = import_xbd_folder(FLORENCE).event
    release_import.import_release_dir(None, SCORING_EXAMPLES, make_release=False)
    if bucket:
        assert storage.uses_bucket()
        out["layer_files"] = out_of_bucket(*bucket, "events/")
    else:
        base = web_root / "events"
        out["layer_files"] = {p.relative_to(web_root).as_posix(): _sha(p.read_bytes())
                              for p in sorted(base.rglob("*")) if p.is_file()}
    out["map"] = _map(client)

    # A: the damage task's gold replay, its tools run
    task = create_task(maintainer, florence, dimension="t1", content=DAMAGE)
    other = create_task(maintainer, florence, dimension="t1", content={
        **DAMAGE, "question": "How many damaged pixels?", "answer_spec": DAMAGE["answer_spec"][:1]})
    machines.on(a)
    first = start_replay(maintainer, task)
    first = _wait("the replay on A", lambda: ReplayRun.objects.get(pk=first.pk),
                  lambda r: r.status in ("succeeded", "failed"), logs=logs)
    # B: the same steps for another task (the step cache: A's artifacts), the damage task without the cache
    machines.on(b)
    cached = start_replay(maintainer, other)
    cached = _wait("the cached replay on B", lambda: ReplayRun.objects.get(pk=cached.pk),
                   lambda r: r.status in ("succeeded", "failed"), logs=logs)
    fresh = create_run(task, user=maintainer)
    machines.send(run_replay, (fresh.pk,), {"use_cache": False})
    fresh = _wait("the replay without cache on B", lambda: ReplayRun.objects.get(pk=fresh.pk),
                  lambda r: r.status in ("succeeded", "failed"), logs=logs)
    out["replays"] = [_replay(first), _replay(cached), _replay(fresh)]
    # web: the replay pages of A's run
    (mask,) = [n for n in first.artifact_manifest if not n.endswith(".geojson")]
    png = client.get(f"/replays/{first.pk}/artifacts/{mask}.png")
    assert png.status_code == 200 and png["Content-Type"] == "image/png"
    out["overlay_png"] = _sha(png.content)
    out["overlays"] = client.get(f"/replays/{first.pk}/overlays/").json()

    # A: the release export of the twelve imported tasks and the damage task
    Task.objects.filter(pk=task.pk).update(status=Task.Status.APPROVED)  # its review is not this test's subject
    release = lifecycle.create_release(maintainer, "1.0.0", "first",
                                       tasks=list(Task.objects.exclude(pk=other.pk).order_by("id")))
    machines.on(a)
    job = start_export(maintainer, release)
    job = _wait("the export on A", lambda: export_job("1.0.0", job["id"]),
                lambda j: j and j["status"] in ("succeeded", "failed"), logs=logs)
    assert job["status"] == "succeeded", job
    r = client.get(f"/releases/1.0.0/exports/{job['id']}/download/")
    if storage.uses_bucket():
        assert r.status_code == 302
        with urllib.request.urlopen(r["Location"], timeout=30) as got:
            data = got.read()
    else:
        assert r.status_code == 200
        data = b"".join(r.streaming_content)
    out["export"] = [_zip_members(data), job["content_sha256"], job["total"]]

    # B: a run zip's import, scored against the studio's tasks
    machines.on(b)
    imp = start_run_import(maintainer, run_zip("qwen_AP"), "qwen", filename="qwen_AP.zip", queue_share=0)
    imp = _wait("the run import on B", lambda: RunImportJob.objects.get(pk=imp.pk),
                lambda j: j.status in ("done", "failed"), logs=logs)
    assert imp.status == "done", imp.error
    out["run"] = _scores(imp.run)
    # B: a run answering the damage task, its polygon a file of the run (the gold's polygons);
    # then the web's record page, which reads that file from the run's folder
    (vectors,) = [n for n in first.artifact_manifest if n.endswith(".geojson")]
    imp = start_run_import(maintainer, _damage_run(task, artifact_path(first, vectors).read_bytes()), "florence",
                           filename="florence_AP.zip", queue_share=0)
    imp = _wait("the damage run's import on B", lambda: RunImportJob.objects.get(pk=imp.pk),
                lambda j: j.status in ("done", "failed"), logs=logs)
    assert imp.status == "done", imp.error
    out["damage_run"] = _scores(imp.run)
    if hide_worker_disk:
        hide_worker_disk()
    page = client.get(f"/records/{imp.run.records.get().pk}/")
    assert page.status_code == 200
    out["record_page"] = re.sub(r'(name="(?:csrfmiddlewaretoken|token)" value=")[^"]*', r"\1", page.content.decode())
    return out


def _scores(run) -> list:
    """Every scored record's score columns (``SCORE_FIELDS``, by question id) and the run's DORA score."""
    return [[tuple(json.dumps(v, sort_keys=True) if isinstance(v, dict) else v for v in row)
             for row in run.records.order_by("question_id").values_list(*SCORE_FIELDS)], run.dora_score]


def _damage_run(task, polygons: bytes) -> io.BytesIO:
    """A run zip answering the damage task: 26,766 pixels and ``damage_pred.geojson`` (``polygons``),
    a file of the run."""
    record = {"question_id": task.question_id, "task_category": "perception_and_assessment",
              "predicted_answer": {"damaged_pixels": 26766, "damaged_area": "damage_pred.geojson"},
              "trajectory": DAMAGE["trajectory"]}
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("florence_AP/t1_perception_and_assessment/benchmark.jsonl", json.dumps(record) + "\n")
        zf.writestr("florence_AP/damage_pred.geojson", polygons)
    buf.seek(0)
    buf.name = "florence_AP.zip"
    return buf


def out_of_bucket(server, name: str, prefix: str) -> dict[str, str]:
    """``{key: SHA-256}`` of the objects under ``prefix`` of bucket ``name`` on SeaweedFS ``server``."""
    client = server.client()
    return {k: _sha(client.get_object(Bucket=name, Key=k)["Body"].read()) for k in server.keys(name, prefix)}


def _tree(root: Path, sub: str = "") -> list[str]:
    base = root / sub
    return sorted(p.relative_to(root).as_posix() for p in base.rglob("*") if p.is_file()) if base.exists() else []


@pytest.mark.celery_worker
def test_two_workers_sharing_only_the_database_the_broker_and_the_bucket_give_the_single_machine_bytes(
        celery_worker, settings, seaweedfs, make_user, client, monkeypatch, tmp_path):
    settings.STUDIO_JUDGE_RUNNER = "celery"  # run imports as Celery jobs (eager on the single machine)
    machines = Machines(monkeypatch)

    # ── the single machine: this process, no bucket, every job in-process ──────────────────────
    single = tmp_path / "single"
    settings.STUDIO_STORAGE_URL = ""
    settings.STUDIO_DATA_ROOT, settings.STUDIO_ARTIFACT_ROOT = single, single / "artifacts"
    # sequences reset first too: the tests before this one left them advanced (a flush between
    # tests keeps them), and both paths must start from the same ids
    call_command("flush", interactive=False, verbosity=0)
    with celery_worker.eager():
        expected = _scenario(machines, client, make_user, a=None, b=None, web_root=single)
    # the damage task's tools ran once (3 calls), the other task's 3 steps came from the step cache;
    # 26,766 damaged pixels: worked out by hand in tests/test_celery_worker.py (the Florence mask's
    # 26,492 px of class 3 and 274 px of class 4)
    assert [r[:3] for r in expected["replays"]] == [["succeeded", 3, 0], ["succeeded", 0, 3], ["succeeded", 3, 0]]
    assert [r[5]["damaged_pixels"] for r in expected["replays"]] == [26766] * 3
    assert len(expected["run"][0]) == 12, expected["run"]
    # the damage run's pixel count is the gold's 26,766: an exact count scores 1; its polygon file is
    # the gold replay's own polygons: IoU 1, so 1 (the gold read from the replay's artifacts as the
    # export writes it, evaluation.goldset; tests/test_gold_polygon_scoring.py checks it against
    # the evaluator on the exported tasks)
    assert json.loads(expected["damage_run"][0][0][3]) == {"damaged_pixels": 1.0, "damaged_area": 1.0}
    call_command("flush", interactive=False, verbosity=0)  # the same rows (and ids) again below
    client.logout()

    # ── three machines: two workers and this web process, sharing the database, Redis, the bucket ─
    name = seaweedfs.new_bucket()
    web = tmp_path / "web"
    settings.STUDIO_DATA_ROOT, settings.STUDIO_ARTIFACT_ROOT = web, web / "artifacts"
    env_of = {}
    for m in ("a", "b"):
        root = tmp_path / f"machine-{m}"
        env_of[m] = {**machine_env({}, root, seaweedfs, name), "STUDIO_VAR_DIR": str(root / "var"),
                     "STUDIO_JUDGE_RUNNER": "celery"}
    machine_env_here = machine_env({}, web, seaweedfs, name)
    settings.STUDIO_STORAGE_URL = machine_env_here["STUDIO_STORAGE_URL"]
    settings.AWS_S3_ENDPOINT_URL = seaweedfs.endpoint
    settings.AWS_ACCESS_KEY_ID = machine_env_here["AWS_ACCESS_KEY_ID"]
    settings.AWS_SECRET_ACCESS_KEY = machine_env_here["AWS_SECRET_ACCESS_KEY"]
    settings.AWS_S3_REGION_NAME, settings.AWS_S3_ADDRESSING_STYLE = "us-east-1", "path"
    settings.AWS_S3_SIGNATURE_VERSION = "s3v4"
    run_tag = uuid.uuid4().hex[:8]
    queues = {m: f"two-machines-{m}-{run_tag}" for m in ("a", "b")}
    for m in ("a", "b"):
        celery_worker.start_own_worker(queues[m], concurrency=1, env=env_of[m], log_dir=tmp_path)
    logs = [tmp_path / f"{q}.log" for q in queues.values()]

    def hide_worker_disk():  # on one host the web could read B's folders by their absolute paths
        for m in ("a", "b"):
            root = tmp_path / f"machine-{m}"
            if (root / "runs").exists():
                (root / "runs").rename(root / "runs-out-of-reach")

    got = _scenario(machines, client, make_user, a=queues["a"], b=queues["b"], web_root=web, logs=logs,
                    hide_worker_disk=hide_worker_disk, bucket=(seaweedfs, name))

    # each worker ran its jobs (its log names the task ids it received) and no other's
    for m, other in (("a", "b"), ("b", "a")):
        log = (tmp_path / f"{queues[m]}.log").read_text(errors="replace")
        assert machines.sent.get(queues[m]), f"nothing was sent to worker {m}"
        for tid in machines.sent[queues[m]]:
            assert f"[{tid}] received" in log, (m, tid)
        for tid in machines.sent.get(queues[other], []):
            assert tid not in log, (m, tid)

    assert got["layer_files"] == expected["layer_files"]
    assert got["map"] == expected["map"] and len(got["map"]) >= 3
    assert got["replays"] == expected["replays"]
    assert got["overlay_png"] == expected["overlay_png"]
    assert got["overlays"] == expected["overlays"]
    assert got["export"] == expected["export"]
    assert got["run"] == expected["run"]
    assert got["damage_run"] == expected["damage_run"]
    # the page's answer map draws the predicted polygon, and its check re-scores the field from the
    # files: the prediction is the gold's polygons, so IoU 1, the score stored at import (1.0 for
    # damaged_area on both paths, compared above: on B the gold replay's polygons fetched from the
    # bucket, on the web too), so the page shows no recomputed value beside it
    assert '"role": "predicted"' in expected["record_page"] and "IoU 1.0000 vs gate 0.5" in expected["record_page"]
    assert "if scored now" not in expected["record_page"]
    assert got["record_page"] == expected["record_page"]
    assert (tmp_path / "machine-b" / "runs-out-of-reach").is_dir()  # B unpacked the runs; the web read its copy
    assert [p for p in _tree(web, "runs") if p.endswith("damage_pred.geojson")]
    # nothing of a layer was written on the web machine (the map read the bucket); the workers'
    # roots hold only their own caches: B fetched A's artifacts, A wrote them
    assert _tree(web, "events") == []
    # the web served A's artifacts from its own cache, filled from the bucket (it wrote none)
    assert {f"artifacts/cas/{sha[:2]}/{sha}" for sha in got["replays"][0][3].values()} <= set(_tree(web, "artifacts/cas"))
    manifest = got["replays"][0][3]
    cas = {f"artifacts/cas/{sha[:2]}/{sha}" for sha in manifest.values()}
    for m in ("a", "b"):
        assert cas <= set(_tree(tmp_path / f"machine-{m}", "artifacts/cas")), m
    # and the bucket's artifacts are those and the files of the golds the web imported from the release
    # (each gold's source.json and gold polygons, named in its import run's manifest): nothing else
    imported = {f"artifacts/cas/{sha[:2]}/{sha}" for manifest in ReplayRun.objects.filter(mode="import")
                .values_list("artifact_manifest", flat=True) for sha in manifest.values()}
    assert imported and not imported & cas
    assert set(out_of_bucket(seaweedfs, name, "artifacts/")) == cas | imported
