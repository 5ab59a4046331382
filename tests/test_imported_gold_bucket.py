"""Golds imported from a release's files with a bucket (``STUDIO_STORAGE_URL``), against a real
SeaweedFS (``tests/support/seaweedfs.py``; no mock of S3).

An imported gold is a replay run of mode ``import`` whose folder (``STUDIO_ARTIFACT_ROOT/imports/<key>``)
holds the file's own record (``source.json``) and its gold polygons. Those files enter the content store
as a replay's artifacts do (``ReplayRun.artifact_manifest``; with a bucket, uploaded to
``artifacts/cas/<sha[:2]>/<sha>``), so a machine that did not run the import — a worker exporting the
release, a web process scoring a polygon answer — reads them from the bucket. "Another machine" here is
this process with an empty ``STUDIO_ARTIFACT_ROOT``: the same database and bucket, nothing of the
importer's disk.
"""
from __future__ import annotations

import hashlib
import io
import json

import pytest
from django.core.management import call_command

from kernel.vocabulary import TASK_FILES
from releases.models import Release
from releases.services import release_export, release_import
from releases.services.export import dumps
from replay.models import ReplayRun
from replay.services.paths import artifact_key

#: a gold polygon with the grid the benchmark's evaluator reads (``dora_grid``): a 1 m square
GOLD = {"type": "FeatureCollection", "dora_grid": {"transform": [0.5, 0, 100, 0, -0.5, 200], "crs": "EPSG:32615"},
        "features": [{"type": "Feature", "properties": {}, "geometry": {
            "type": "Polygon", "coordinates": [[[0, 0], [1, 0], [1, 1], [0, 1], [0, 0]]]}}]}
POLYGON = "gold_polygons/flood_s1.geojson"


def _release_folder(path):
    """A one-task release in the benchmark's layout: a T1 polygon answer and its gold file."""
    (path / "tasks" / "gold_polygons").mkdir(parents=True)
    (path / "tasks" / POLYGON).write_text(json.dumps(GOLD))
    sample = {"tasks": [{"question": "Outline the flood.", "task_category": "perception_and_assessment",
                         "task_category_code": "T1", "final_answer": {"flood": POLYGON},
                         "eval_spec": {"flood": "polygon_iou"},
                         "trajectory": [{"call": "seg.flood", "args": {"post_image_path": "/x/post.tif"},
                                         "obs": {"mask_path": "m.png"}}]}],
              "sample_id": "s1", "input_data": {}}
    (path / "tasks" / TASK_FILES["t1"]).write_text(dumps([sample]))
    return path


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _tasks_bytes(folder) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted((folder / "tasks").rglob("*"))
            if p.is_file()}


@pytest.mark.django_db
def test_an_imported_golds_files_are_in_the_bucket_and_another_machine_exports_them(settings, bucket, seaweedfs,
                                                                                     tmp_path):
    src = _release_folder(tmp_path / "release")
    release_import.import_release_dir(None, src, release_version="2.0.0")
    (run,) = ReplayRun.objects.filter(mode="import")
    polygon_bytes = (src / "tasks" / POLYGON).read_bytes()
    # the manifest names the folder's two files by their content; each is one object of the bucket
    assert set(run.artifact_manifest) == {"source.json", POLYGON}
    assert run.artifact_manifest[POLYGON] == _sha(polygon_bytes)
    client = seaweedfs.client()
    for name, sha in run.artifact_manifest.items():
        body = client.get_object(Bucket=bucket, Key=artifact_key(sha))["Body"].read()
        assert _sha(body) == sha, name

    # another machine (no imports/ folder, no content store): the release's export is the files imported,
    # byte for byte, gold polygon included (before, the polygon was looked for on this disk only)
    settings.STUDIO_ARTIFACT_ROOT = tmp_path / "other-machine-artifacts"
    out = tmp_path / "out"
    release_export.export_release(Release.objects.get(version="2.0.0"), out)
    assert _tasks_bytes(out) == _tasks_bytes(src)


@pytest.mark.django_db
def test_push_artifacts_registers_and_uploads_golds_imported_before_the_bucket_once(settings, bucket, seaweedfs,
                                                                                   tmp_path):
    src = _release_folder(tmp_path / "release")
    settings.STUDIO_STORAGE_URL = ""
    release_import.import_release_dir(None, src, release_version="2.0.0")
    # as an import made before its folder entered the content store left it: no manifest
    ReplayRun.objects.filter(mode="import").update(artifact_manifest={})
    settings.STUDIO_STORAGE_URL = f"s3://{bucket}"
    source_bytes = next((settings.STUDIO_ARTIFACT_ROOT / "imports").rglob("source.json")).read_bytes()
    expected = sorted(artifact_key(_sha(b)) for b in ((src / "tasks" / POLYGON).read_bytes(), source_bytes))

    out = io.StringIO()
    call_command("push_artifacts", "--json", stdout=out)
    assert json.loads(out.getvalue()) == {"uploaded": expected, "present": 0, "missing": []}
    (run,) = ReplayRun.objects.filter(mode="import")
    assert sorted(artifact_key(s) for s in run.artifact_manifest.values()) == expected
    out = io.StringIO()
    call_command("push_artifacts", "--json", stdout=out)  # a second run: nothing to register or upload
    assert json.loads(out.getvalue()) == {"uploaded": [], "present": 2, "missing": []}

    settings.STUDIO_ARTIFACT_ROOT = tmp_path / "other-machine-artifacts"
    out = tmp_path / "out"
    release_export.export_release(Release.objects.get(version="2.0.0"), out)
    assert _tasks_bytes(out) == _tasks_bytes(src)
