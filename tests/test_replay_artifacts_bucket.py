"""Replay artifacts with a bucket (``STUDIO_STORAGE_URL``; ``replay.services.paths``), against a real
SeaweedFS (``tests/support/seaweedfs.py``; no mock of S3): each artifact a replay stores is one object
under ``artifacts/cas/<sha[:2]>/<sha>``, uploaded once whatever the number of runs that wrote it; a
second "machine" (a child process with empty data and artifact roots, sharing only the database and
the bucket) reads a finished run's artifacts through the replay pages and scoring's folder, reuses the
run whole, and replays it to the same hashes.

What the checks compare: the bucket's keys against the names the runs' manifests give (one key per
distinct SHA-256) and each object's bytes against its name (their SHA-256); the overlay image of the
damage mask (``replay-artifact-png``: the PNG the map draws over the event) and the overlays document
(``replay-overlays``: bounds, legend and the vectorized polygons inline) as machine A and machine B
serve them (the same bytes: the same mask bytes read by the same renderer); the files
``releases.services.export.write_task_files`` writes for the task on A and on B (task file, gold
polygon, images: the same paths, the same SHA-256 each); QC's check ids on A and B; machine B's local
copies (their SHA-256 against the manifest's); the manifests and replay hashes of B's replays
against A's.
The answer is worked out by hand in tests/test_celery_worker.py: the Florence mask holds 26,492 px of
class 3 and 274 px of class 4, mapped to 2 and 3, so ``ras.count_pixels(classes=[2, 3])`` is 26,766.
"""
from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import pytest
from conftest import REPO, ChildDatabase, needs_shared
from django.urls import reverse
from support.children import child_env
from support.florence import DAMAGE_TASK as CONTENT
from support.florence import FLORENCE
from support.seaweedfs import machine_env

from annotation.services.imports import import_xbd_folder
from annotation.services.qc import qc_for_task
from annotation.services.tasks import create_task
from releases.services.export import write_task_files
from replay.services.paths import artifact_key
from replay.services.runs import create_run, execute_replay
from studio import storage


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _bucket_artifacts(seaweedfs, bucket: str) -> dict[str, str]:
    """``{key: SHA-256 of the object's bytes}`` under ``artifacts/``."""
    client = seaweedfs.client()
    return {k: _sha(client.get_object(Bucket=bucket, Key=k)["Body"].read())
            for k in seaweedfs.keys(bucket, "artifacts/")}


def _florence_task(make_user):
    user = make_user("author", "author")
    event = import_xbd_folder(needs_shared(FLORENCE)).event
    return user, create_task(user, event, dimension="t1", content=CONTENT)


@pytest.mark.django_db(transaction=True)
def test_each_artifact_is_one_object_named_by_its_content_however_many_runs_write_it(
        settings, bucket, seaweedfs, make_user, monkeypatch, tmp_path):
    """Two replays of the damage task without the step cache, the second with an empty local
    artifact root (so only the bucket knows the first run's outputs): both manifests are the same,
    the bucket holds one object per artifact, named by the SHA-256 of its bytes, each uploaded once
    (the second run's HEAD found them)."""
    _, task = _florence_task(make_user)
    uploads = []
    real = storage.upload_file

    def counted(name, path):
        uploads.append(name)
        real(name, path)

    monkeypatch.setattr(storage, "upload_file", counted)
    first = execute_replay(create_run(task).pk, use_cache=False)
    manifest = first.artifact_manifest
    assert len(manifest) == 2  # the mask and the polygons
    (vectors,) = [n for n in manifest if n.endswith(".geojson")]
    assert (first.status, first.final_answer) == ("succeeded", {"damaged_pixels": 26766, "damaged_area": vectors})
    expected = {artifact_key(sha): sha for sha in manifest.values()}
    assert _bucket_artifacts(seaweedfs, bucket) == expected
    assert sorted(uploads) == sorted(expected)

    settings.STUDIO_ARTIFACT_ROOT = tmp_path / "other-artifacts"
    second = execute_replay(create_run(task).pk, use_cache=False)
    assert second.status == "succeeded" and second.tool_calls == 3
    assert second.artifact_manifest == manifest and second.replay_hash == first.replay_hash
    assert _bucket_artifacts(seaweedfs, bucket) == expected  # still one object each
    assert sorted(uploads) == sorted(expected)  # nothing uploaded again


#: machine B: runs QC on task ``task`` and exports it (each on an artifact root of its own), reads run ``run``'s folder for
#: scoring and its artifacts through the pages as ``user``, replays task ``other`` with the step cache
#: (on another empty artifact root), then replays ``task`` with the cache (the whole run reused) and
#: without it (every tool run there)
MACHINE_B = r"""
import hashlib, json, os, sys
sys.path.insert(0, {repo!r})
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "studio.settings")
import django
django.setup()
from pathlib import Path
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client
from django.test.utils import setup_test_environment
from django.urls import reverse
from annotation.models import Task
from annotation.services.qc import qc_for_task
from releases.services.export import write_task_files
from replay.models import ReplayRun
from replay.services.paths import artifact_folder
from replay.services.runs import create_run, execute_replay

setup_test_environment()
def tree(root):
    root = Path(root)
    return {{p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
             for p in sorted(root.rglob("*")) if p.is_file()}} if root.exists() else {{}}
run = ReplayRun.objects.get(pk={run})
cas = Path(settings.STUDIO_ARTIFACT_ROOT) / "cas"
out = {{"empty_before": tree(settings.STUDIO_ARTIFACT_ROOT) == {{}}}}
main_root = settings.STUDIO_ARTIFACT_ROOT
settings.STUDIO_ARTIFACT_ROOT = Path(main_root).parent / "qc-artifacts"  # QC first, on its own empty root
out["qc"] = sorted({{f.check for f in qc_for_task(Task.objects.get(pk={task}))}})
out["qc_cas"] = tree(Path(settings.STUDIO_ARTIFACT_ROOT) / "cas")
settings.STUDIO_ARTIFACT_ROOT = Path(main_root).parent / "export-artifacts"  # the export, on another
written, missing = write_task_files([Task.objects.get(pk={task})], Path(main_root).parent / "export")
out["export"] = [tree(Path(main_root).parent / "export"), missing,
                 tree(Path(settings.STUDIO_ARTIFACT_ROOT) / "cas")]
settings.STUDIO_ARTIFACT_ROOT = main_root
folder = artifact_folder(run, (".geojson", ".json"))
out["folder_vectors"] = tree(folder)
client = Client()
client.force_login(get_user_model().objects.get(username={user!r}))
png = client.get(reverse("replay-artifact-png", args=[run.pk, {mask!r}]))
out["png"] = [png.status_code, hashlib.sha256(png.content).hexdigest()]
out["overlays"] = client.get(reverse("replay-overlays", args=[run.pk])).json()
out["folder"] = tree(folder)
out["cas"] = tree(cas)
settings.STUDIO_ARTIFACT_ROOT = Path(main_root).parent / "step-cache-artifacts"  # another empty root
other = execute_replay(create_run(Task.objects.get(pk={other})).pk)
out["step_cache"] = [other.status, other.tool_calls, other.cache_hits, other.artifact_manifest,
                     tree(Path(settings.STUDIO_ARTIFACT_ROOT) / "cas")]
settings.STUDIO_ARTIFACT_ROOT = main_root
task = Task.objects.get(pk={task})
reused = execute_replay(create_run(task).pk)
out["reused"] = [reused.status, reused.tool_calls, reused.artifact_manifest, reused.replay_hash,
                 tree(Path(settings.STUDIO_ARTIFACT_ROOT) / reused.artifact_dir)]
fresh = execute_replay(create_run(task).pk, use_cache=False)
out["fresh"] = [fresh.status, fresh.tool_calls, fresh.artifact_manifest, fresh.replay_hash]
print(json.dumps(out))
"""


@pytest.mark.django_db(transaction=True)
def test_another_machine_reads_reuses_and_reproduces_a_runs_artifacts_from_the_bucket(
        settings, bucket, seaweedfs, make_user, client, tmp_path):
    """Machine A replays the damage task; machine B (empty data and artifact roots) fetches only the
    polygons for scoring's folder, serves the mask's overlay PNG and the overlays document with
    A's bytes, runs QC with the same findings (its polygon check reads the gold polygons), writes
    the task's export (task file, gold polygon, images) with A's bytes, fills
    its local store with the artifacts checked against their names, answers every step of another
    task with the same steps from the step cache (A's entries), reuses the run whole (no tool runs)
    and replays it without the cache to the same manifest and replay hash; the bucket still holds
    one object per artifact."""
    user, task = _florence_task(make_user)
    # the same steps asked for the pixel count only: another input fingerprint (no whole-run reuse),
    # the same step cache keys
    other = create_task(user, task.event, dimension="t1", content={
        **CONTENT, "question": "How many damaged pixels?", "answer_spec": CONTENT["answer_spec"][:1]})
    run = execute_replay(create_run(task).pk, use_cache=False)
    assert run.status == "succeeded"
    manifest = run.artifact_manifest
    (mask,) = [n for n in manifest if not n.endswith(".geojson")]
    (vectors,) = [n for n in manifest if n.endswith(".geojson")]
    client.force_login(user)
    png = client.get(reverse("replay-artifact-png", args=[run.pk, mask]))
    assert png.status_code == 200 and png["Content-Type"] == "image/png"
    overlays = client.get(reverse("replay-overlays", args=[run.pk])).json()
    qc_here = sorted({f.check for f in qc_for_task(task)})
    assert "sanity.polygon" not in qc_here  # QC read the gold polygons (a finding when it cannot)
    assert {o["file_name"]: o["kind"] for o in overlays["overlays"]} == {mask: "mask", vectors: "vector"}
    exported_here = tmp_path / "export-a"
    assert write_task_files([task], exported_here)[1] == []
    export_here = {p.relative_to(exported_here).as_posix(): _sha(p.read_bytes())
                   for p in sorted(exported_here.rglob("*")) if p.is_file()}
    assert f"tasks/gold_polygons/{vectors}" in export_here  # the polygons, as the export writes them

    db = ChildDatabase(tmp_path)
    root_b = tmp_path / "machine-b"
    env = machine_env(child_env(db, tmp_path), root_b, seaweedfs, bucket)
    script = tmp_path / "machine_b.py"
    script.write_text(MACHINE_B.format(repo=str(REPO), run=run.pk, task=task.pk, other=other.pk, user=user.username,
                                        mask=mask))
    out = subprocess.run([sys.executable, str(script)], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    b = json.loads(out.stdout.strip().splitlines()[-1])

    assert b["empty_before"]
    assert b["folder_vectors"] == {vectors: manifest[vectors]}  # scoring's folder: the polygons only
    assert b["png"] == [200, _sha(png.content)]
    assert b["overlays"] == overlays
    # QC (on an artifact root of its own) read the polygons on B too, through the registered replay
    # source, and fetched nothing else
    assert b["qc"] == qc_here and b["qc_cas"] == {f"{manifest[vectors][:2]}/{manifest[vectors]}": manifest[vectors]}
    # the export's task files, gold polygon and images (on an artifact root of its own): A's bytes
    export_b, missing_b, export_cas = b["export"]
    assert (export_b, missing_b) == (export_here, [])
    assert export_cas == {f"{manifest[vectors][:2]}/{manifest[vectors]}": manifest[vectors]}
    assert b["folder"] == manifest  # each artifact the pages read, with its manifest hash
    assert b["cas"] == {f"{sha[:2]}/{sha}": sha for sha in manifest.values()}
    # the other task's steps all answered by the step cache from A's run, their artifacts fetched
    status, tool_calls, cache_hits, step_manifest, step_cas = b["step_cache"]
    assert (status, tool_calls, cache_hits, step_manifest) == ("succeeded", 0, 3, manifest)
    assert step_cas == b["cas"]
    status, tool_calls, reused_manifest, reused_hash, reused_folder = b["reused"]
    assert (status, tool_calls, reused_manifest, reused_hash) == ("succeeded", 0, manifest, run.replay_hash)
    assert reused_folder == manifest
    status, tool_calls, fresh_manifest, fresh_hash = b["fresh"]
    assert (status, tool_calls, fresh_manifest, fresh_hash) == ("succeeded", 3, manifest, run.replay_hash)
    assert _bucket_artifacts(seaweedfs, bucket) == {artifact_key(sha): sha for sha in manifest.values()}


@pytest.mark.django_db(transaction=True)
def test_push_artifacts_uploads_what_was_replayed_before_the_bucket_once(settings, bucket, seaweedfs, make_user,
                                                                           tmp_path):
    """A replay on a local data root, then the bucket turned on: ``push_artifacts`` uploads each
    artifact the runs and the step cache name (the keys are the manifest's hashes, each object's
    bytes hashing to its name), a second run uploads nothing, an artifact whose local file is gone
    or altered is reported missing (exit 1), and a machine with an empty artifact root reads the
    run's mask back with its manifest hash."""
    import io

    from django.core.management import call_command

    from replay.services.paths import artifact_path

    settings.STUDIO_STORAGE_URL = ""
    _, task = _florence_task(make_user)
    run = execute_replay(create_run(task).pk)
    manifest = run.artifact_manifest
    settings.STUDIO_STORAGE_URL = f"s3://{bucket}"
    out = io.StringIO()
    call_command("push_artifacts", "--json", stdout=out)
    expected = {artifact_key(sha): sha for sha in manifest.values()}
    assert json.loads(out.getvalue()) == {"uploaded": sorted(expected), "present": 0, "missing": []}
    assert _bucket_artifacts(seaweedfs, bucket) == expected
    out = io.StringIO()
    call_command("push_artifacts", "--json", stdout=out)
    assert json.loads(out.getvalue()) == {"uploaded": [], "present": len(expected), "missing": []}

    local_root = settings.STUDIO_ARTIFACT_ROOT
    settings.STUDIO_ARTIFACT_ROOT = tmp_path / "empty-artifacts"
    (mask,) = [n for n in manifest if not n.endswith(".geojson")]
    assert _sha(artifact_path(run, mask).read_bytes()) == manifest[mask]

    # an artifact the bucket lost, whose local file was altered since: reported, not uploaded
    settings.STUDIO_ARTIFACT_ROOT = local_root
    sha = manifest[mask]
    storage.delete(artifact_key(sha))
    altered = local_root / "cas" / sha[:2] / sha
    altered.unlink()  # a hard link of the run's folder: replace, not write through
    altered.write_bytes(b"not the mask")
    out = io.StringIO()
    with pytest.raises(SystemExit) as exited:
        call_command("push_artifacts", "--json", stdout=out)
    assert exited.value.code == 1
    assert json.loads(out.getvalue()) == {"uploaded": [], "present": len(expected) - 1, "missing": [artifact_key(sha)]}


def test_a_content_addressed_key_is_asked_about_once_per_process(bucket, seaweedfs, tmp_path):
    """``storage.upload_file_once``, counted on the requests boto3 sends to the real server: a new
    key is one HEAD (404) and one PUT; the same key again is no request at all; a key another
    machine put first is one HEAD and no PUT, then nothing; the objects hold the files' bytes."""
    first, second = tmp_path / "a.bin", tmp_path / "b.bin"
    first.write_bytes(b"mask bytes")
    second.write_bytes(b"polygons")
    key_a, key_b = artifact_key(_sha(b"mask bytes")), artifact_key(_sha(b"polygons"))
    seaweedfs.client().put_object(Bucket=bucket, Key=key_b, Body=b"polygons")  # another machine's

    sent = []
    client = storage.storage().connection.meta.client

    def record(request, **kwargs):
        sent.append((request.method, request.url.rsplit("/", 1)[-1][:8]))

    client.meta.events.register("before-send", record)
    try:
        assert storage.upload_file_once(key_a, first) is True
        assert sent == [("HEAD", key_a[-64:][:8]), ("PUT", key_a[-64:][:8])]
        sent.clear()
        assert storage.upload_file_once(key_a, first) is False
        assert sent == []
        assert storage.upload_file_once(key_b, second) is False
        assert sent == [("HEAD", key_b[-64:][:8])]
        sent.clear()
        assert storage.upload_file_once(key_b, second) is False
        assert sent == []
    finally:
        client.meta.events.unregister("before-send", record)
    assert _bucket_artifacts(seaweedfs, bucket) == {key_a: _sha(b"mask bytes"), key_b: _sha(b"polygons")}


def test_without_a_bucket_a_content_addressed_file_is_written_once(settings, tmp_path):
    """The embedded default (no ``STUDIO_STORAGE_URL``): ``upload_file_once`` writes the file under
    the data root when none is there, and leaves an existing one as it is."""
    settings.STUDIO_STORAGE_URL = ""
    settings.STUDIO_DATA_ROOT = tmp_path / "data"
    source = tmp_path / "mask.bin"
    source.write_bytes(b"mask bytes")
    key = artifact_key(_sha(b"mask bytes"))
    assert storage.upload_file_once(key, source) is True
    assert (tmp_path / "data" / key).read_bytes() == b"mask bytes"
    source.write_bytes(b"other bytes")  # a key's content never changes: the first file stays
    assert storage.upload_file_once(key, source) is False
    assert (tmp_path / "data" / key).read_bytes() == b"mask bytes"
