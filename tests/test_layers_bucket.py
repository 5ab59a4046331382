"""Imported layers with a bucket (``STUDIO_STORAGE_URL``, ``studio/storage.py``), against a real
SeaweedFS (``tests/support/seaweedfs.py``; no mock of S3): the import writes each layer file to its key
(``events/<slug>/…``) and keeps nothing of it on this machine's disk; the map's tiles read the COG
straight from the bucket through GDAL (``/vsis3/``); a worker's local cache (the data root) is filled
on demand, content-checked (``storage.local_copy``); a second "machine" (a child process with its own
empty data root, sharing only the database and the bucket) replays a task whose layers were imported
here. A new version replaces the object (a failed upload puts the old bytes back) and a pinned
superseded version keeps its file under ``versions/`` in the bucket.

What the checks compare: the keys in the bucket and the files the same import writes under a local
data root without a bucket (the same names and the same SHA-256 each); tiles, the whole-layer image
and a pixel value rendered from the bucket and from the local import (the same PNG bytes: the same
COG bytes read by the same reader); the replay's answer, worked out by hand in
tests/test_celery_worker.py: the Florence mask holds 26,492 px of class 3 and 274 px of class 4
(``np.unique``), which the damage tools map to 2 and 3, so ``ras.count_pixels(classes=[2, 3])`` is
26,766.
"""
from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import morecantile
import pytest
from conftest import REALDATA, REPO, ChildDatabase, needs_shared
from django.conf import settings as dj_settings
from support.children import child_env
from support.seaweedfs import machine_env

from annotation import tiles
from annotation.models import Event, Layer
from annotation.services.imports import import_raster_file, import_xbd_folder
from annotation.services.tasks import create_task
from replay.services.runs import create_run, execute_replay
from studio import storage

WMQ = morecantile.tms.get("WebMercatorQuad")
FLORENCE = REALDATA / "xbd-hurricane-florence"
SOCAL = REALDATA / "xbd-socal-fire"
JOPLIN_CHIP = Path(dj_settings.STUDIO_DEMO_DATA) / "xview2-deploy-joplin" / "output_chips_post_0_post.tif"
PRE = "hurricane-florence_00000018_pre_original.png"
POST = "hurricane-florence_00000018_post_original.png"
DAMAGE = [
    {"call": "seg.building_damage", "args": {"pre_image_path": PRE, "post_image_path": POST}},
    {"call": "ras.count_pixels", "args": {"mask_path": "<mask_path> from trajectory[0].obs", "classes": [2, 3]}},
]


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _local_tree(root: Path, folder: str = "events") -> dict[str, str]:
    """``{path below root: sha256}`` of the files under ``root/folder``."""
    base = root / folder
    return {p.relative_to(root).as_posix(): _sha(p.read_bytes()) for p in sorted(base.rglob("*")) if p.is_file()} \
        if base.exists() else {}


def _bucket_tree(seaweedfs, bucket: str) -> dict[str, str]:
    client = seaweedfs.client()
    return {k: _sha(client.get_object(Bucket=bucket, Key=k)["Body"].read()) for k in seaweedfs.keys(bucket, "events/")}


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


def _renders(layers) -> dict[str, list]:
    """What the map shows of each raster/mask: its centre tile, its whole image, the value at its
    centre (``pixel_values``), keyed by file name."""
    out = {}
    for la in layers:
        if la.kind not in ("raster", "mask"):
            continue
        entry = [_sha(tiles.render_image(la)),
                 tiles.pixel_values(la, la.width / 2, la.height / 2)["values"]]
        if tiles.has_tiles(la):
            z, x, y = _centre_tile(la)
            png = tiles.render_tile(la, z, x, y)
            assert png != tiles.transparent_tile()  # the centre tile shows pixels
            entry += [(z, x, y), _sha(png)]
        out[la.file_name] = entry
    return out


@pytest.mark.django_db(transaction=True)
def test_an_import_with_a_bucket_writes_its_files_there_and_the_map_reads_them_from_it(
        settings, bucket, seaweedfs, tmp_path):
    """socal-fire (pixel-frame PNGs with a fit: tiles through a WarpedVRT) and a Joplin UTM chip (a
    geographic COG: tiles from the kept dataset): the bucket's keys are the local import's files with
    the same bytes; nothing of them stays on this disk; tiles, images and values equal the local ones."""
    root = Path(settings.STUDIO_DATA_ROOT)
    socal = import_xbd_folder(needs_shared(SOCAL))
    chip = import_raster_file(needs_shared(JOPLIN_CHIP), event_slug="joplin-2011", phase="post")
    in_bucket = _bucket_tree(seaweedfs, bucket)
    assert _local_tree(root) == {} and not (root / "tmp").exists()
    layers = list(socal.layers) + list(chip.layers)
    assert {la.path for la in layers} <= set(in_bucket)
    assert all(in_bucket[la.path] == la.sha256 for la in layers)
    remote = _renders(layers)
    assert _local_tree(root) == {}  # the map read the bucket, not a local copy

    settings.STUDIO_STORAGE_URL = ""  # the same imports on a local data root
    settings.STUDIO_DATA_ROOT = tmp_path / "local"
    settings.STUDIO_DATA_ROOT.mkdir()
    Event.objects.all().delete()
    socal_l = import_xbd_folder(needs_shared(SOCAL))
    chip_l = import_raster_file(needs_shared(JOPLIN_CHIP), event_slug="joplin-2011", phase="post")
    assert _local_tree(settings.STUDIO_DATA_ROOT) == in_bucket
    assert _renders(list(socal_l.layers) + list(chip_l.layers)) == remote
    assert sum(len(v) == 4 for v in remote.values()) >= 4  # tiles were compared, not only images


@pytest.mark.django_db(transaction=True)
def test_a_tile_whose_object_is_gone_is_a_404(settings, bucket, seaweedfs, client, make_user):
    """The tile and image endpoints answer 404 for a layer whose objects the bucket lost (before
    this process read them), as for a missing local file (``LayerFileError``)."""
    chip = import_raster_file(needs_shared(JOPLIN_CHIP), event_slug="joplin-2011", phase="post").layers[0]
    client.force_login(make_user("viewer", "author"))
    for key in (chip.path, chip.tiles_path):
        storage.delete(key)
    assert client.get(f"/tiles/{chip.id}/18/62261/101969.png").status_code == 404
    assert client.get(f"/layers/{chip.id}/image.png").status_code == 404


@pytest.mark.django_db(transaction=True)
def test_tiles_from_the_bucket_make_no_boto3_session_per_request(settings, bucket, seaweedfs, monkeypatch):
    """Once a configuration's first tile is served, later tiles, images and values from the bucket
    build no boto3 session: ``storage.gdal_env`` shares one ``AWSSession`` per configuration, and
    the PNG is encoded inside that environment (outside any, rasterio makes a session of the
    process's ``AWS_*`` variables, which a deployment's environment file sets). One per call cost
    10–25 ms of a 20 ms tile (bench/tiles.py --bucket: 3.3x TiTiler over HTTP, 0.9x without)."""
    import boto3.session

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", settings.AWS_ACCESS_KEY_ID)  # as the environment file sets them
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", settings.AWS_SECRET_ACCESS_KEY)
    chip = import_raster_file(needs_shared(JOPLIN_CHIP), event_slug="joplin-2011", phase="post").layers[0]
    z, x, y = _centre_tile(chip)
    first = tiles.render_tile(chip, z, x, y)  # opens the dataset; makes the configuration's session
    empty = tiles.transparent_tile()  # made once per process (outside any environment)
    made = []
    real_init = boto3.session.Session.__init__

    def counted(self, *args, **kwargs):
        made.append(1)
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(boto3.session.Session, "__init__", counted)
    assert tiles.render_tile(chip, z, x, y) == first
    assert tiles.render_tile(chip, z, x + 1, y) != empty
    tiles.render_image(chip)
    tiles.pixel_values(chip, chip.width / 2, chip.height / 2)
    assert made == []


@pytest.mark.django_db(transaction=True)
def test_the_cache_is_filled_on_demand_checked_and_replaced_whole(settings, bucket, seaweedfs):
    """``storage.local_copy``: a missing file is downloaded, a file whose content is not the row's
    is replaced, a wrong expected digest leaves nothing, a missing object says so."""
    root = Path(settings.STUDIO_DATA_ROOT)
    storage.write_bytes("events/e/a.tif", b"new bytes")
    p = storage.local_copy("events/e/a.tif", _sha(b"new bytes"))
    assert p == root / "events/e/a.tif" and p.read_bytes() == b"new bytes"
    p.write_bytes(b"stale")  # an older version in this machine's cache
    assert storage.local_copy("events/e/a.tif", _sha(b"new bytes")).read_bytes() == b"new bytes"
    p.unlink()
    with pytest.raises(ValueError):
        storage.local_copy("events/e/a.tif", _sha(b"something else"))
    assert sorted(x.name for x in (root / "events/e").iterdir()) == []  # no part file left
    with pytest.raises(FileNotFoundError):
        storage.local_copy("events/e/none.tif")
    with pytest.raises(ValueError):
        storage.local_copy("events/../secret")


@pytest.mark.django_db(transaction=True)
def test_a_new_version_replaces_the_object_and_a_failed_upload_puts_the_old_one_back(
        settings, bucket, seaweedfs, monkeypatch):
    """A re-import of ``chip.tif`` from another file is a new version: its object is replaced.
    When the second upload of such an import fails, the import fails and the bucket, the rows and
    this disk are as before it (the replaced object's old bytes put back, new objects deleted)."""
    root = Path(settings.STUDIO_DATA_ROOT)
    joplin = needs_shared(JOPLIN_CHIP).parent
    first = import_raster_file(joplin / "output_chips_pre_0_pre.tif", event_slug="j", file_name="chip.tif").layers[0]
    before, rows = _bucket_tree(seaweedfs, bucket), list(Layer.objects.values_list("path", "sha256"))
    assert before[first.path] == first.sha256

    real, calls = storage.upload_file, []

    def second_fails(name, path):
        calls.append(name)
        if len(calls) == 2:
            raise OSError("the bucket went away")
        real(name, path)

    monkeypatch.setattr(storage, "upload_file", second_fails)
    with pytest.raises(OSError):
        import_raster_file(needs_shared(JOPLIN_CHIP), event_slug="j", file_name="chip.tif")
    # the stored file was replaced before the failure, and its old bytes put back after it
    assert len(calls) == 3 and calls[0] == calls[2] == first.path
    assert _bucket_tree(seaweedfs, bucket) == before
    assert list(Layer.objects.values_list("path", "sha256")) == rows
    assert not (root / "tmp").exists()

    monkeypatch.setattr(storage, "upload_file", real)
    result = import_raster_file(needs_shared(JOPLIN_CHIP), event_slug="j", file_name="chip.tif")
    new = result.layers[0]
    assert result.status == {"chip.tif": "new version"} and new.path == first.path and new.sha256 != first.sha256
    assert _bucket_tree(seaweedfs, bucket)[new.path] == new.sha256
    # a cache holding the old version (this machine's after the first import) is refreshed
    stale = root / new.path
    stale.parent.mkdir(parents=True, exist_ok=True)
    storage.download_file(new.path, stale)
    stale.write_bytes(b"old")
    assert _sha(storage.local_copy(new.path, new.sha256).read_bytes()) == new.sha256


@pytest.mark.django_db(transaction=True)
def test_a_pinned_version_superseded_by_a_re_import_keeps_its_file_in_the_bucket(settings, bucket, seaweedfs,
                                                                                 monkeypatch):
    """Version 1 of ``chip.tif`` pinned (the releases' pin reader answering yes for it, as
    ``ReleasesConfig.ready`` registers one), a re-import from another file archives its files to
    ``events/j/versions/<layer>/v1/`` in the bucket with their bytes; the pinned version reads them
    back through the cache; nothing stays on this disk."""
    from annotation.models import LayerVersion
    from annotation.services import layer_versions

    root = Path(settings.STUDIO_DATA_ROOT)
    first = import_raster_file(needs_shared(JOPLIN_CHIP).parent / "output_chips_pre_0_pre.tif", event_slug="j",
                               file_name="chip.tif").layers[0]
    v1 = LayerVersion.objects.get(layer=first, number=1)
    monkeypatch.setitem(layer_versions._pin_reader, "is_pinned", lambda pk: pk == v1.pk)
    assert import_raster_file(needs_shared(JOPLIN_CHIP), event_slug="j", file_name="chip.tif").status == {"chip.tif": "new version"}
    v1.refresh_from_db()
    archived = v1.snapshot["path"]
    assert archived == f"events/j/versions/{first.pk}/v1/chip.tif" and v1.snapshot["sha256"] == first.sha256
    in_bucket = _bucket_tree(seaweedfs, bucket)
    assert in_bucket[archived] == first.sha256
    assert {k for k in in_bucket if "/versions/" in k} == set(v1.files)
    assert _local_tree(root) == {}
    pinned = layer_versions.as_layer(Layer.objects.get(pk=first.pk), v1)
    assert _sha(storage.local_copy(pinned.path, pinned.sha256).read_bytes()) == first.sha256


@pytest.mark.django_db(transaction=True)
def test_push_layers_uploads_what_was_imported_before_the_bucket_once(settings, bucket, seaweedfs, tmp_path):
    """Florence imported on a local data root, then the bucket turned on: ``push_layers`` uploads its
    files (the keys are the local files with the same bytes), a second run uploads nothing, and a
    machine with an empty data root reads each layer's stored file back with the row's SHA-256."""
    import io

    from django.core.management import call_command

    root = Path(settings.STUDIO_DATA_ROOT)
    settings.STUDIO_STORAGE_URL = ""
    event = import_xbd_folder(needs_shared(FLORENCE)).event
    local = _local_tree(root)
    settings.STUDIO_STORAGE_URL = f"s3://{bucket}"
    out = io.StringIO()
    call_command("push_layers", "--json", stdout=out)
    report = json.loads(out.getvalue())
    assert (sorted(report["uploaded"]), report["present"], report["missing"]) == (sorted(local), 0, [])
    assert _bucket_tree(seaweedfs, bucket) == local
    out = io.StringIO()
    call_command("push_layers", "--json", stdout=out)
    assert json.loads(out.getvalue()) == {"uploaded": [], "present": len(local), "missing": []}
    settings.STUDIO_DATA_ROOT = tmp_path / "empty"
    for la in event.layers.all():
        assert _sha(storage.local_copy(la.path, la.sha256).read_bytes()) == la.sha256


@pytest.mark.django_db(transaction=True)
def test_an_unreadable_variant_image_is_written_to_the_bucket_too(settings, bucket, seaweedfs, make_user):
    """A ``visual_inaccessible`` variant's replacement image (``unreadable_layers``) is a layer like
    the imported ones: its object is at its key with the row's SHA-256."""
    from annotation.services.variants import UNREADABLE_BYTES, unreadable_layers

    user = make_user("author", "author")
    event = import_xbd_folder(needs_shared(FLORENCE)).event
    task = create_task(user, event, dimension="t1", content={
        "question": "How many pixels show partially damaged or destroyed buildings?", "trajectory": DAMAGE,
        "answer_spec": [{"name": "damaged_pixels", "eval_type": "scalar_count", "source": "<total> from trajectory[1].obs"}],
    })
    unreadable_layers(task, {POST: "unreadable_post.png"})
    layer = event.layers.get(file_name="unreadable_post.png")
    assert layer.path == "variants/hurricane-florence/unreadable_post.png"
    assert storage.read_bytes(layer.path) == UNREADABLE_BYTES and _sha(UNREADABLE_BYTES) == layer.sha256


#: machine B: replays task ``task`` (no step cache) with its own empty data root
REPLAY_ON_B = r"""
import json, os, sys
sys.path.insert(0, {repo!r})
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "studio.settings")
import django
django.setup()
from replay.services.runs import create_run, execute_replay
from annotation.models import Task
run = execute_replay(create_run(Task.objects.get(pk={task})).pk, use_cache=False)
print(json.dumps([run.status, run.final_answer, run.replay_hash, run.error, run.input_fingerprint]))
"""


@pytest.mark.django_db(transaction=True)
def test_a_task_imported_here_replays_on_another_machine_from_the_bucket(
        settings, bucket, seaweedfs, make_user, tmp_path):
    """Florence imported here (files only in the bucket); machine B, a child with an empty data root,
    replays the damage count: 26,766 as here, the same replay hash and input fingerprint (a
    bucket's replay fingerprints the rows' checked SHA-256, the bytes' own digest, as a local one
    does the files'), and its cache holds the two images it read with the rows' SHA-256."""
    user = make_user("author", "author")
    event = import_xbd_folder(needs_shared(FLORENCE)).event
    task = create_task(user, event, dimension="t1", content={
        "question": "How many pixels show partially damaged or destroyed buildings?",
        "trajectory": DAMAGE,
        "answer_spec": [{"name": "damaged_pixels", "eval_type": "scalar_count", "source": "<total> from trajectory[1].obs"}],
    })
    assert _local_tree(Path(settings.STUDIO_DATA_ROOT)) == {}
    here = execute_replay(create_run(task).pk, use_cache=False)
    assert here.status == "succeeded" and here.final_answer == {"damaged_pixels": 26766}

    db = ChildDatabase(tmp_path)
    root_b = tmp_path / "machine-b"
    env = machine_env(child_env(db, tmp_path), root_b, seaweedfs, bucket)
    script = tmp_path / "replay_b.py"
    script.write_text(REPLAY_ON_B.format(repo=str(REPO), task=task.pk))
    out = subprocess.run([sys.executable, str(script)], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    status, answer, replay_hash, error, fingerprint = json.loads(out.stdout.strip().splitlines()[-1])
    assert (status, answer, error) == ("succeeded", {"damaged_pixels": 26766}, "")
    assert replay_hash == here.replay_hash and fingerprint == here.input_fingerprint
    # the rows' digests are the bytes' own: without the bucket, over every layer's file fetched
    # here (the replay fetched the three rasters it read, not the bounding boxes), the same fingerprint
    from replay.services.layers import input_fingerprint
    for la in event.layers.all():
        storage.local_copy(la.path, la.sha256)
    settings.STUDIO_STORAGE_URL = ""
    assert input_fingerprint(task, task.head, here.mode) == here.input_fingerprint
    layers = {la.file_name: la for la in event.layers.all()}
    cached = _local_tree(root_b)
    for name in (PRE, POST):
        assert cached[layers[name].path] == layers[name].sha256
