"""A published release's files never change (integrity review, second round: "a published release's
data changes under it"; docs/security.md).

The attack as it was found: ``import_vector`` of a modified ``damage.shp`` into ``joplin-tornado``
reported ``[updated]`` for the layer a released task reads, and re-exporting the published release
succeeded with the same ``content_sha256`` while ``images/damage.geojson`` had shrunk. Here the same
steps: the Joplin T2 task of test_review_workflow (it reads ``damage.geojson`` and
``bldg_polys.geojson``) is replayed, released as 1.0.0, published and exported; a second task with
the same content stays current (a draft). Then ``damage.shp`` is re-imported with 300 of its 399
``dmg = 4`` polygons removed (``pyogrio``; the other 241 rows kept): a new layer version. Expected
(the model of annotation.services.layer_versions and releases.services.pins):

* the import says ``[new version]``; importing the same file again says ``[unchanged]``;
* re-exporting 1.0.0 gives the same bytes for every file and the same digest (the pinned version's
  file, kept under ``events/joplin-tornado/versions/``);
* the current task's replay is stale: a new input fingerprint, a new run, a gold diff to accept;
  the released task's replay inputs (its pinned versions) are what they were;
* a file of the export tampered with, added, or the manifest edited: ``import_release`` refuses
  naming it; the archived file of the pinned version tampered with: the re-export refuses naming
  ``images/damage.geojson`` and writes nothing.
"""
from __future__ import annotations

import hashlib
import io
import json
import shutil
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from support.joplin import JOPLIN
from support.stored import republish_file

from annotation.models import Layer, LayerVersion, Task
from releases.models import Release, ReleaseFile, ReleaseLayerPin

pytestmark = pytest.mark.django_db


def _tree(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _export(out: Path) -> dict:
    call_command("export_release", "1.0.0", "--out", str(out), stdout=io.StringIO(), stderr=io.StringIO())
    return json.loads((out / "studio_manifest.json").read_text())


def _modified_damage(folder: Path) -> Path:
    """``damage.shp`` with 300 of its 399 ``dmg = 4`` polygons removed (640 → 340 rows)."""
    import pyogrio

    df = pyogrio.read_dataframe(JOPLIN / "damage.shp")
    destroyed = df.index[df["dmg"] == 4]
    df = df.drop(destroyed[:300])
    folder.mkdir(parents=True, exist_ok=True)
    pyogrio.write_dataframe(df, folder / "damage.shp")
    return folder / "damage.shp"


def _import(path: Path) -> str:
    out = io.StringIO()
    call_command("import_vector", str(path), "--event", "joplin-tornado", stdout=out)
    return out.getvalue()


@pytest.fixture
def published(approved_t2, people, tmp_path, settings):
    from annotation.services.tasks import create_task
    from releases.services.lifecycle import create_release, publish_release
    from replay.services.gold import accept_gold
    from replay.services.runs import start_replay

    mx = people["max"]
    gold = start_replay(mx, approved_t2)
    assert gold.status == "succeeded", gold.error
    current = create_task(people["ada"], approved_t2.event, dimension="t2",
                          content={k: getattr(approved_t2.head, k) for k in (
                              "question", "task_category", "task_category_code", "disaster_type", "input_data",
                              "trajectory", "answer_spec")})
    first = accept_gold(mx, start_replay(mx, current))  # a person's gold: a changed replay waits for one
    assert first.status == "succeeded", first.error
    release = publish_release(mx, create_release(mx, "1.0.0", tasks=Task.objects.filter(pk=approved_t2.pk)))
    out1 = tmp_path / "export1"
    manifest1 = _export(out1)
    return {"release": release, "gold": gold, "current": current, "first": first, "out1": out1,
            "manifest1": manifest1, "max": mx, "data": Path(settings.STUDIO_DATA_ROOT)}


def test_a_reimport_makes_a_new_version_and_the_published_release_ships_the_same_bytes(published, tmp_path):
    release, out1, manifest1, data = published["release"], published["out1"], published["manifest1"], published["data"]
    damage = Layer.objects.get(event__slug="joplin-tornado", file_name="damage.geojson")
    pin = ReleaseLayerPin.objects.get(release=release, layer=damage)
    assert pin.version.number == 1
    shipped = (out1 / "images/damage.geojson").read_bytes()
    assert shipped == (data / damage.path).read_bytes()
    # publishing recorded every file but the sidecar, and the digest is over all of them
    recorded = dict(ReleaseFile.objects.filter(release=release).values_list("path", "sha256"))
    tree1 = _tree(out1)
    assert recorded == {p: s for p, s in tree1.items() if p != "studio_manifest.json"}
    assert {"images/damage.geojson", "images/bldg_polys.geojson"} <= set(recorded)
    assert manifest1["release"]["content_sha256"] == Release.objects.get(pk=release.pk).manifest_sha256

    said = _import(_modified_damage(tmp_path / "modified"))
    assert "[new version]" in said and "damage.geojson" in said, said
    damage.refresh_from_db()
    assert damage.feature_count == 340  # 640 rows less the 300 removed
    versions = list(LayerVersion.objects.filter(layer=damage).order_by("number"))
    assert [v.number for v in versions] == [1, 2] and versions[0].sha256 != versions[1].sha256
    # the current layer file is the new content; version 1's file was kept, byte for byte
    assert (data / damage.path).read_bytes() != shipped
    kept = data / versions[0].snapshot["path"]
    assert kept.read_bytes() == shipped and "/versions/" in versions[0].snapshot["path"]
    # the same content again: a no-op that says so
    again = _import(_modified_damage(tmp_path / "modified-again"))
    assert "[unchanged]" in again and LayerVersion.objects.filter(layer=damage).count() == 2, again

    out2 = tmp_path / "export2"
    manifest2 = _export(out2)
    tree2 = _tree(out2)
    tree2.pop("studio_manifest.json"), tree1.pop("studio_manifest.json")
    assert tree2 == tree1
    assert (out2 / "images/damage.geojson").read_bytes() == shipped
    assert manifest2["release"]["content_sha256"] == manifest1["release"]["content_sha256"]


def test_a_new_version_makes_the_current_task_replay_stale_and_leaves_the_released_one(published, tmp_path):
    from annotation.services.layer_versions import pinned_layer, task_pins
    from replay.models import ReplayRun
    from replay.selectors import replay_diff
    from replay.services.layers import input_fingerprint
    from replay.services.runs import start_replay

    current, first, gold = published["current"], published["first"], published["gold"]
    released = Task.objects.get(pk=gold.task_id)
    assert released.status == Task.Status.RELEASED
    _import(_modified_damage(tmp_path / "modified"))

    second = start_replay(published["max"], current)
    assert second.status == "succeeded", second.error
    assert second.input_fingerprint != first.input_fingerprint  # not the cached run: the layer changed
    assert second.final_answer != first.final_answer  # fewer destroyed polygons, fewer buildings near them
    diff = replay_diff(second, first)
    assert diff["changed"] and diff["pending"]  # a gold diff a person accepts
    assert [r["field"] for r in diff["answer"] if r["changed"]] == ["intersecting_a_count"]
    # the released task reads its pinned versions: the same inputs as its release's gold replay
    layers = list(Layer.objects.filter(event_id=released.event_id))
    pins = task_pins(released.pk)
    assert input_fingerprint(released, released.head, "gt", [pinned_layer(l, pins) for l in layers]) == \
        gold.input_fingerprint
    assert input_fingerprint(released, released.head, "gt", layers) != gold.input_fingerprint
    assert ReplayRun.objects.get(pk=gold.pk).final_answer == gold.final_answer


def test_import_release_refuses_a_tampered_export_naming_the_file(published, tmp_path, make_user):
    out1 = published["out1"]
    make_user("imp", "maintainer", "author", "reviewer")

    def refused(folder: Path) -> str:
        with pytest.raises(CommandError) as exc:
            call_command("import_release", str(folder), "--as-user", "imp", "--event", "elsewhere",
                         stdout=io.StringIO())
        return str(exc.value)

    changed = tmp_path / "changed"
    shutil.copytree(out1, changed)
    with open(changed / "images/damage.geojson", "ab") as fh:
        fh.write(b" ")
    assert "images/damage.geojson" in refused(changed) and "sha256 differs" in refused(changed)

    added = tmp_path / "added"
    shutil.copytree(out1, added)
    (added / "images/extra.geojson").write_text("{}")
    message = refused(added)
    assert "images/extra.geojson" in message and "not listed in studio_manifest.json" in message

    edited = tmp_path / "edited"  # the file changed and its checksum in the manifest too
    shutil.copytree(out1, edited)
    (edited / "images/damage.geojson").write_text('{"type": "FeatureCollection", "features": []}')
    manifest = json.loads((edited / "studio_manifest.json").read_text())
    manifest["files"]["images/damage.geojson"]["sha256"] = hashlib.sha256(
        (edited / "images/damage.geojson").read_bytes()).hexdigest()
    (edited / "studio_manifest.json").write_text(json.dumps(manifest))
    message = refused(edited)
    assert "studio_manifest.json" in message and "release.content_sha256" in message


def test_a_re_export_that_would_ship_another_file_is_refused_naming_it(published, tmp_path):
    from releases.services.export import ExportError
    from releases.services.release_export import export_release

    data = published["data"]
    _import(_modified_damage(tmp_path / "modified"))
    damage = Layer.objects.get(event__slug="joplin-tornado", file_name="damage.geojson")
    kept = data / LayerVersion.objects.get(layer=damage, number=1).snapshot["path"]
    kept.write_bytes(kept.read_bytes()[:-10])  # the pinned version's file changed behind the studio
    republish_file(LayerVersion.objects.get(layer=damage, number=1).snapshot["path"])  # there, with a bucket
    out = tmp_path / "export-refused"
    with pytest.raises(ExportError, match=r"images/damage\.geojson differs from what was published"):
        export_release(published["release"], out)
    assert not out.exists()
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".export-refused")]


def test_a_pinned_version_keeps_its_file_when_the_layer_was_edited_in_place_since(published, tmp_path):
    """A maintainer's edit of the row after the release (georeferencing: ``gsd_m``) makes the next
    pin or import see a version 2 on the same files; the re-import must still keep version 1's
    file (the release pins 1, not 2), and the re-export stays byte for byte."""
    from annotation.services.layer_versions import ensure_version

    out1 = published["out1"]
    damage = Layer.objects.get(event__slug="joplin-tornado", file_name="damage.geojson")
    Layer.objects.filter(pk=damage.pk).update(gsd_m=0.3)
    damage.refresh_from_db()
    assert ensure_version(damage).number == 2  # same files, other fields
    assert "[new version]" in _import(_modified_damage(tmp_path / "modified"))
    assert [v.number for v in LayerVersion.objects.filter(layer=damage).order_by("number")] == [1, 2, 3]
    v1, v2 = LayerVersion.objects.get(layer=damage, number=1), LayerVersion.objects.get(layer=damage, number=2)
    assert "/versions/" in v1.snapshot["path"] and v2.files == []  # v2 pinned by nothing: no files kept
    out2 = tmp_path / "export2"
    _export(out2)
    before, after = _tree(out1), _tree(out2)
    before.pop("studio_manifest.json"), after.pop("studio_manifest.json")
    assert after == before


def test_the_database_refuses_to_change_a_published_release_s_pins_and_files(published):
    """As the triggers of annotation_release (migration annotation 0003): the rows that say what a
    published release reads (its layer pins) and ships (its files) are refused UPDATE and DELETE,
    and a new row, by the database itself (releases 0002), on both databases."""
    from django.db import IntegrityError, transaction

    release = published["release"]
    row = ReleaseFile.objects.filter(release=release, path="images/damage.geojson").first()
    pin = ReleaseLayerPin.objects.filter(release=release).first()
    for change in (lambda: ReleaseFile.objects.filter(pk=row.pk).update(sha256="0" * 64),
                   lambda: ReleaseFile.objects.filter(pk=row.pk).delete(),
                   lambda: ReleaseFile.objects.create(release=release, path="images/new.png", sha256="0" * 64, bytes=1),
                   lambda: ReleaseLayerPin.objects.filter(pk=pin.pk).delete(),
                   lambda: ReleaseLayerPin.objects.filter(pk=pin.pk).update(version=LayerVersion.objects.create(
                       layer=pin.layer, number=99, sha256="0" * 64))):
        with pytest.raises(IntegrityError, match="release is published"), transaction.atomic():
            change()
    assert ReleaseFile.objects.get(pk=row.pk).sha256 == hashlib.sha256(
        (published["out1"] / "images/damage.geojson").read_bytes()).hexdigest()


@pytest.mark.skipif(connection.vendor != "postgresql",
                    reason="SQLite serialises writers (BEGIN IMMEDIATE): the race is PostgreSQL's")
@pytest.mark.django_db(transaction=True)
def test_two_releases_created_at_once_pin_one_version_per_layer(approved_t2, people):
    """Two drafts created at the same moment from two threads (their own connections), over
    layers that have no version row yet (made before versions existed): both make version 1 of
    the same layers; one wins each INSERT, the other takes its row (``ensure_version``'s
    savepoint). Both releases are created and pin the same versions; one row per layer."""
    import threading

    from django.db import connections

    from releases.services.lifecycle import create_release
    from replay.services.runs import start_replay

    assert start_replay(people["max"], approved_t2).status == "succeeded"
    LayerVersion.objects.all().delete()  # as a database migrated from before layer versions
    n_layers = Layer.objects.filter(event=approved_t2.event).count()
    barrier, errors = threading.Barrier(2), []

    def create(version: str) -> None:
        try:
            barrier.wait(timeout=30)
            create_release(people["max"], version, tasks=Task.objects.filter(pk=approved_t2.pk))
        except Exception as exc:  # collected: the assertion below names it
            errors.append(repr(exc))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=create, args=(v,)) for v in ("2.0.0", "2.1.0")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    assert LayerVersion.objects.filter(layer__event=approved_t2.event).count() == n_layers
    pins = {v: set(ReleaseLayerPin.objects.filter(release__version=v).values_list("version_id", flat=True))
            for v in ("2.0.0", "2.1.0")}
    assert pins["2.0.0"] == pins["2.1.0"] and len(pins["2.0.0"]) == n_layers
