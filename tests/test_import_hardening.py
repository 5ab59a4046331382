"""Imports under hostile files and killed processes (docs/security.md):
symbolic links refused in import_release, a raster's declared size limited before any pixel is
read, staging folders removed on every exit path and swept at start-up after a SIGKILL."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import rasterio
from conftest import REALDATA, REPO, SCORING_EXAMPLES, ChildDatabase, needs_shared
from django.conf import settings
from rasterio.transform import from_origin
from support.children import child_env

from annotation.models import Event, Layer, Task
from annotation.services import imports
from annotation.services.imports import DataImportError
from kernel.processes import host_tag
from releases.services import release_import


def _tmp_entries() -> list[str]:
    tmp = Path(settings.STUDIO_DATA_ROOT) / "tmp"
    return sorted(p.name for p in tmp.iterdir()) if tmp.exists() else []


@pytest.mark.django_db
@pytest.mark.parametrize("where", ["tasks/t1_perception_and_assessment.json", "images/escape.tif", "tasks/gold_polygons"])
def test_import_release_refuses_symbolic_links(tmp_path, where):
    """A link anywhere in the folder — a task file, an image, a folder — pointing outside it: the
    import names the link and reads nothing (the issue: it followed links out of its folder)."""
    d = tmp_path / "bench"
    shutil.copytree(needs_shared(SCORING_EXAMPLES / "tasks"), d / "tasks")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.json").write_text("[]")
    link = d / where
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.exists():
        link.unlink() if link.is_file() else shutil.rmtree(link)
    link.symlink_to(outside / "secret.json" if "." in link.name else outside)
    with pytest.raises(release_import.ReleaseImportError) as exc:
        release_import.import_release_dir(None, d)
    assert (exc.value.file, exc.value.field) == (where, "path")
    assert "a symbolic link" in exc.value.problem
    assert Task.objects.count() == 0 and Event.objects.count() == 0


def _sparse_tif(path: Path, width: int, height: int) -> Path:
    """A GeoTIFF that declares width × height but writes one tiny block (sparse: a few KB)."""
    with rasterio.open(path, "w", driver="GTiff", width=width, height=height, count=1, dtype="uint8",
                       crs="EPSG:32615", transform=from_origin(500000, 3300000, 0.5, 0.5), tiled=True,
                       blockxsize=256, blockysize=256, compress="deflate", sparse_ok=True) as dst:
        dst.write(np.ones((1, 16, 16), dtype="uint8"), window=rasterio.windows.Window(0, 0, 16, 16))
    return path


@pytest.mark.django_db
def test_declared_raster_size_is_limited_before_reading(tmp_path, settings):
    """The issue's 40000 × 40000 sparse GeoTIFF (it imported for 96 s): refused at once by its header,
    1.6e9 pixels against the default limit of 1e8."""
    f = _sparse_tif(tmp_path / "huge.tif", 40000, 40000)
    assert f.stat().st_size < 200_000
    assert settings.STUDIO_MAX_RASTER_PIXELS == 100_000_000
    t0 = time.perf_counter()
    with pytest.raises(DataImportError) as exc:
        imports.import_raster_file(f, event_slug="huge")
    assert time.perf_counter() - t0 < 5
    assert exc.value.field == "size" and "declares 40000 × 40000 = 1,600,000,000 pixels" in str(exc.value)
    assert Event.objects.count() == 0 and Layer.objects.count() == 0 and _tmp_entries() == []
    settings.STUDIO_MAX_RASTER_PIXELS = 255  # 16 × 16 = 256 pixels: one over
    with pytest.raises(DataImportError, match="declares 16 × 16 = 256 pixels"):
        imports.import_raster_file(_sparse_tif(tmp_path / "small.tif", 16, 16), event_slug="small")


@pytest.mark.django_db
def test_staging_is_removed_when_an_import_fails(tmp_path):
    """A library error while building (not a raster): DataImportError, and tmp/ is empty again."""
    bad = tmp_path / "bad.tif"
    bad.write_bytes(b"II*\x00 not really a tiff")
    with pytest.raises(DataImportError):
        imports.import_raster_file(bad, event_slug="bad")
    assert _tmp_entries() == []


def test_sweep_removes_folders_of_dead_processes_only(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(dead.stdout)  # that process has exited
    here = host_tag()  # kernel.processes: the tag staging names and job rows carry
    (tmp / f"import-{dead_pid}.{here}-aaaa").mkdir()
    (tmp / f"snapshot-{dead_pid}.{here}-bbbb").mkdir()
    (tmp / f"import-{os.getpid()}.{here}-cccc").mkdir()  # this process: a live import
    (tmp / f"import-{dead_pid}.0000beef-dddd").mkdir()  # another host's process: its pid means nothing here
    (tmp / "unrelated").mkdir()
    old = tmp / "import-legacyname"
    old.mkdir()
    os.utime(old, (time.time() - 2 * 24 * 3600,) * 2)  # no pid in the name, two days old
    removed = imports.sweep_staging(tmp_path)
    assert sorted(removed) == sorted([f"import-{dead_pid}.{here}-aaaa", f"snapshot-{dead_pid}.{here}-bbbb",
                                      "import-legacyname"])
    assert sorted(p.name for p in tmp.iterdir()) == sorted([f"import-{os.getpid()}.{here}-cccc",
                                                           f"import-{dead_pid}.0000beef-dddd", "unrelated"])


KILL_DURING_BUILD = r'''
import os, signal, sys
import django
django.setup()
from annotation.importers import raster as raster_imp
from annotation.services import imports

def killed(*a, **k):  # the import's staging folder exists now: die as a SIGKILL would leave it
    os.kill(os.getpid(), signal.SIGKILL)

raster_imp.store_raster = killed
imports.import_raster_file(sys.argv[1], event_slug="killed")
'''


@pytest.mark.django_db(transaction=True)
def test_a_killed_import_leaves_staging_that_start_up_sweeps(tmp_path):
    """The reproduction: an import SIGKILLed part-way leaves var/data/tmp/import-*; the next
    process's start-up (django.setup → AnnotationConfig.ready) removes it."""
    db = ChildDatabase(tmp_path)
    env = child_env(db, tmp_path)
    env.pop("STUDIO_TEST_DB_NAME", None)
    src = needs_shared(REALDATA / "rasterio-testdata" / "float_nan.tif")
    r = subprocess.run([sys.executable, "-c", KILL_DURING_BUILD, str(src)], cwd=REPO, env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == -signal.SIGKILL, r.stderr[-2000:]
    left = _tmp_entries()
    assert len(left) == 1 and left[0].startswith("import-"), left
    r = subprocess.run([sys.executable, "-c", "import django; django.setup()"], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert _tmp_entries() == []
    assert db.rows("SELECT COUNT(*) FROM annotation_event") == [(0,)]
