"""Path confinement: stored paths, layer names, artifact names and importer inputs
cannot reach a file outside the data root / the source folder."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import needs_shared
from support.stored import store_file

from annotation.importers.errors import DataImportError


@pytest.fixture
def secret(tmp_path):
    """A file beside (outside) the data root: ``<tmp>/secret.geojson``; the root is ``<tmp>/data``."""
    p = tmp_path / "secret.geojson"
    p.write_text(json.dumps({"type": "FeatureCollection", "features": []}))
    return p


@pytest.mark.parametrize("rel", ["../../etc/passwd", "../secret.geojson", "/etc/passwd", "a/../../secret.geojson"])
def test_data_path_refuses_escapes(rel):
    from replay.services.paths import data_path

    with pytest.raises(ValueError, match="outside the data root"):
        data_path(rel)


def test_data_path_accepts_inside(settings):
    from replay.services.paths import data_path

    settings.STUDIO_STORAGE_URL = ""  # the local rule (with a bucket data_path first fetches the file)

    assert data_path("events/x/a.tif") == Path(settings.STUDIO_DATA_ROOT).resolve() / "events/x/a.tif"


@pytest.mark.django_db
def test_layer_resolver_refuses_escaping_names_and_rows(secret):
    from annotation.models import Event, Layer
    from kernel.tools.base import ToolInputError
    from replay.services.layers import LayerResolver

    event = Event.objects.create(slug="e", name="e")
    store_file("events/e/a.geojson", data=b'{"type": "FeatureCollection", "features": []}')
    Layer.objects.create(event=event, name="a", kind="vector", file_name="a.geojson", path="events/e/a.geojson")
    resolver = LayerResolver(event.pk)
    for name in ("../../etc/passwd", "../secret.geojson", str(secret)):
        with pytest.raises(ToolInputError):
            resolver(name)
    # a traversal string resolves only by its base name, to a stored layer inside the root
    assert resolver("../../a.geojson") == Path(str(resolver("a.geojson")))
    # a row whose stored path escapes the root makes the resolver refuse the event
    Layer.objects.create(event=event, name="x", kind="vector", file_name="x.geojson", path="../secret.geojson")
    with pytest.raises(ValueError, match="outside the data root"):
        LayerResolver(event.pk)


@pytest.fixture
def client_in(client, make_user):
    client.force_login(make_user("ann", "author"))
    return client


@pytest.mark.django_db
def test_layer_endpoints_never_serve_outside_the_root(settings, client_in, secret):
    from annotation.models import Event, Layer

    event = Event.objects.create(slug="e", name="e")
    vec = Layer.objects.create(event=event, name="x", kind="vector", file_name="x.geojson", path="../secret.geojson")
    meta = Layer.objects.create(event=event, name="m", kind="vector", file_name="m.geojson", path="m.geojson",
                                metadata={"geojson_path": "../../" + str(secret)})
    ras = Layer.objects.create(event=event, name="r", kind="raster", file_name="r.tif", path="../secret.geojson",
                               tiles_path="../secret.geojson", frame="geographic")
    pix = Layer.objects.create(event=event, name="p", kind="raster", file_name="p.tif", path="../secret.geojson",
                               frame="pixel")
    for url in (f"/layers/{vec.id}/geojson", f"/layers/{meta.id}/geojson", f"/tiles/{ras.id}/3/1/1.png",
                f"/layers/{pix.id}/image.png"):
        r = client_in.get(url)
        assert r.status_code in (400, 404), (url, r.status_code)
    # ids are integers: a traversal in the id slot does not even route
    for url in ("/layers/..%2f..%2fetc%2fpasswd/geojson", "/tiles/..%2fx/1/0/0.png", "/layers/%2e%2e/image.png"):
        assert client_in.get(url).status_code == 404


@pytest.mark.django_db
def test_replay_artifact_names_cannot_escape(settings, client_in, make_user):
    from annotation.models import Event, Task, TaskRevision
    from replay.models import ReplayRun

    event = Event.objects.create(slug="e", name="e")
    task = Task.objects.create(event=event, sample_id="s")
    rev = TaskRevision.objects.create(task=task, number=1)
    run = ReplayRun.objects.create(task=task, revision=rev, artifact_dir="runs/1")
    folder = Path(settings.STUDIO_ARTIFACT_ROOT) / "runs/1"
    folder.mkdir(parents=True)
    (folder / "ok.geojson").write_text('{"type": "FeatureCollection", "features": []}')
    (Path(settings.STUDIO_ARTIFACT_ROOT) / "runs" / "other.geojson").write_text("{}")  # outside the run's folder
    assert client_in.get(f"/replays/{run.pk}/artifacts/ok.geojson").status_code == 200
    for name in ("..%2fother.geojson", "..%2f..%2f..%2fsecret.geojson", "%2e%2e%2fother.geojson",
                 "..%5cother.geojson", "..%2f..%2f..%2f..%2fetc%2fpasswd", "..%2fother"):
        for suffix in ("", ".png", ".wgs84.geojson"):
            r = client_in.get(f"/replays/{run.pk}/artifacts/{name}{suffix}")
            assert r.status_code in (400, 404), (name, suffix, r.status_code)


def test_artifact_path_refuses_escapes(settings):
    from replay.models import ReplayRun
    from replay.services.paths import artifact_path

    run = ReplayRun(artifact_dir="runs/1")
    for name in ("../other.geojson", "../../x", "/etc/passwd"):
        with pytest.raises(ValueError, match="outside the run's folder"):
            artifact_path(run, name)


# ------------------------------------------------------------------------------- importers


def test_xbd_folder_refuses_a_tile_file_linked_from_outside(tmp_path):
    from annotation.importers.xbd import discover_tiles

    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "passwd.png").write_bytes(b"\x89PNG")
    folder = tmp_path / "xbd"
    folder.mkdir()
    (folder / "socal-fire_00000001_pre_disaster.png").symlink_to(outside / "passwd.png")
    with pytest.raises(DataImportError) as exc:
        discover_tiles(folder)
    assert exc.value.file == "socal-fire_00000001_pre_disaster.png" and exc.value.field == "path"
    assert "outside the source folder" in exc.value.problem


def test_xbd_folder_accepts_a_link_inside_it(tmp_path):
    from annotation.importers.xbd import discover_tiles

    folder = tmp_path / "xbd"
    (folder / "store").mkdir(parents=True)
    (folder / "store" / "a.png").write_bytes(b"\x89PNG")
    (folder / "socal-fire_00000001_pre_disaster.png").symlink_to(folder / "store" / "a.png")
    tiles, _ = discover_tiles(folder)
    assert list(tiles) == ["socal-fire_00000001"]


@pytest.mark.django_db
def test_shapefile_sidecar_linked_from_outside_is_refused(tmp_path, settings):
    from conftest import REALDATA

    from annotation.models import Layer
    from annotation.services.imports import import_vector_file

    src = needs_shared(REALDATA / "xview2-deploy-joplin")
    needs_shared(src / "intersect_polys.shp")
    folder = tmp_path / "shp"
    folder.mkdir()
    for ext in (".shp", ".shx", ".prj"):  # copies in a temporary folder
        (folder / f"intersect_polys{ext}").write_bytes((src / f"intersect_polys{ext}").read_bytes())
    outside = tmp_path / "outside.dbf"
    outside.write_bytes((src / "intersect_polys.dbf").read_bytes())
    (folder / "intersect_polys.dbf").symlink_to(outside)
    before = sorted(p.as_posix() for p in Path(settings.STUDIO_DATA_ROOT).rglob("*"))
    with pytest.raises(DataImportError) as exc:
        import_vector_file(folder / "intersect_polys.shp", event_slug="joplin")
    assert (exc.value.file, exc.value.field) == ("intersect_polys.dbf", "path")
    assert Layer.objects.count() == 0
    assert sorted(p.as_posix() for p in Path(settings.STUDIO_DATA_ROOT).rglob("*")) == before


@pytest.mark.django_db
def test_nul_characters_are_refused_before_they_reach_the_database(client, make_user):
    """PostgreSQL cannot store or compare text holding NUL: a URL with %00 and a JSON body with
    \\u0000 get a 400 on every database (found by schemathesis and hypothesis on PostgreSQL)."""
    client.force_login(make_user("nul", "maintainer", "author"))
    assert client.get("/api/releases/diff/?a=%00&b=1").status_code == 400
    assert client.get("/tasks/?event=a%00b").status_code == 400
    resp = client.post("/api/tasks/", '{"event": "x\\u0000", "dimension": "t1"}', content_type="application/json")
    assert resp.status_code == 400 and "NUL" in resp.json()["detail"]
