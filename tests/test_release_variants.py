"""Robustness variants in a release: exported beside the benchmark's files, described
in the sidecar, imported back linked to their base tasks.

The base task is the approved Florence task of the variant tests (support.replay.approved_florence,
its benchmark-layout file support.replay.benchmark_task_file: a perception step on the tile's images, ras.grid_windows on its mask, two vis
steps), with one variant of each kind and unsolvable strategy, each replayed and approved through
review. What the release must hold follows from the layout rule of annotation/services/
release_variants.py: the plain tasks' files byte for byte those of a release without the variants,
the variants under variants/ in the same layout, each described in studio_manifest.json.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from support.replay import VARIANTS


def _bytes_of(folder: Path, prefix: str) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.relative_to(folder).as_posix().startswith(prefix)}


@pytest.fixture
def with_variants(approved_florence, people):
    """The base task replayed, and each variant made, replayed, submitted and approved."""
    from annotation.services import review
    from annotation.services.variants import create_variant
    from replay.services.runs import create_run, execute_replay, start_replay

    execute_replay(create_run(approved_florence).pk)  # the base's gold (an approved task of root's)
    made = {}
    for kind, params, _ in VARIANTS:
        variant, _ = create_variant(people["ada"], approved_florence, kind, **params)
        start_replay(people["ada"], variant.task)
        review.submit(people["ada"], variant.task)
        review.start_review(people["rey"], variant.task)
        review.approve(people["rey"], variant.task)
        made[variant.task.question_id] = variant
    return approved_florence, made


@pytest.mark.django_db
def test_release_with_variants_round_trips_and_leaves_the_benchmark_files_unchanged(
        with_variants, people, make_user, tmp_path, settings):
    from annotation.models import Event, Task, TaskVariant
    from releases.models import Release, ReleaseTask
    from releases.services import lifecycle, release_export, release_import
    from releases.services.release_variants import authored_number
    from replay.models import ReplayRun

    base, made = with_variants
    mia = make_user("mia", "maintainer", "author", "reviewer")
    plain_only = lifecycle.create_release(mia, "0.9.0", "the base alone", tasks=[base])
    full = lifecycle.create_release(mia, "1.0.0", "with variants")
    assert full.items.count() == 1 + len(VARIANTS)
    release_export.export_release(plain_only, tmp_path / "plain")
    release_export.export_release(full, tmp_path / "one")
    # the written sidecar (export_release returns it without its streamed ``questions``)
    manifest = json.loads((tmp_path / "one" / "studio_manifest.json").read_text())
    one = tmp_path / "one"

    # the benchmark's files are those of the release without the variants, byte for byte
    assert _bytes_of(one, "tasks/") == _bytes_of(tmp_path / "plain", "tasks/")
    assert _bytes_of(one, "images/") == _bytes_of(tmp_path / "plain", "images/")
    plain = json.loads((one / "tasks/t1_perception_and_assessment.json").read_text())
    assert [s["sample_id"] for s in plain] == ["flo_0003"]
    # the variants beside them, in the same layout, one sample each
    var = json.loads((one / "variants/tasks/t1_perception_and_assessment.json").read_text())
    assert sorted(s["sample_id"] + "_task0" for s in var) == sorted(made)
    by_qid = {s["sample_id"] + "_task0": s for s in var}
    visual = next(q for q, v in made.items() if v.params.get("strategy") == "visual_inaccessible")
    assert "hurricane-florence_00000018_post_original_unreadable.png" in \
        json.dumps(by_qid[visual]["input_data"])
    assert (one / "variants/images/hurricane-florence_00000018_post_original_unreadable.png").is_file()
    # every file listed with its checksum, and the digest covers the variants' task files too
    for rel, info in manifest["files"].items():
        assert hashlib.sha256((one / rel).read_bytes()).hexdigest() == info["sha256"], rel
    assert any(rel.startswith("variants/tasks/") for rel in manifest["files"])
    # the sidecar's QC of a variant is the studio's (its own checks; withheld inputs not errors)
    assert {q: manifest["questions"][q]["qc"]["errors"] for q in made} == {q: 0 for q in made}
    # the sidecar describes each variant: kind, parameters, base and its revision, tools, gold
    section = manifest["variants"]
    assert sorted(section) == sorted(made)
    for qid, v in made.items():
        d = section[qid]
        assert (d["kind"], d["params"], d["tools"]) == (v.kind, v.params, v.tools)
        assert (d["base_question_id"], d["base_revision"]) == ("flo_0003_task0", v.base_revision.number)
        assert manifest["questions"][qid]["file"] == "variants/tasks/t1_perception_and_assessment.json"
    removal = next(q for q, v in made.items() if v.params.get("strategy") == "tool_removal")
    assert section[removal]["gold"] == {"answer": "refusal", "final_answer": {"answer": "REJECT"},
                                        "check": {"kind": "unsolvable", "blocked": {
                                            "step": 3, "tool": "vis.pie_chart",
                                            "reason": "vis.pie_chart is removed from the variant's tool set"}}}
    broken = next(q for q, v in made.items() if v.kind == "broken")
    assert section[broken]["gold"]["answer"] == "base plan" and section[broken]["gold"]["check"]["same"] is True

    # into an empty studio (every task, event and release gone; a fresh data root), then out again
    originals = {q: (v.kind, v.params, v.tools, v.base_revision.number) for q, v in made.items()}
    ReleaseTask.objects.all().delete()
    TaskVariant.objects.all().delete()
    Release.objects.all().delete()
    Task.objects.all().delete()
    Event.objects.all().delete()
    settings.STUDIO_DATA_ROOT = tmp_path / "data2"
    settings.STUDIO_ARTIFACT_ROOT = tmp_path / "data2" / "artifacts"
    settings.STUDIO_DATA_ROOT.mkdir()
    report = release_import.import_release_dir(None, one)
    assert sorted(report.created) == sorted(["flo_0003_task0", *made])
    rows = TaskVariant.objects.select_related("task", "base_task", "base_revision")
    # the base revision: the imported one (number 1 here), known by its number in the authoring
    # studio (2: imported, then the answer source saved), which the sidecar names
    assert {r.task.question_id: (r.kind, r.params, r.tools, authored_number(r.base_revision)) for r in rows} == originals
    assert {(r.base_revision.number, originals[r.task.question_id][3]) for r in rows} == {(1, 2)}
    assert {r.base_task.question_id for r in rows} == {"flo_0003_task0"}
    assert all(r.base_revision_id == r.base_task.head_id for r in rows)
    # the import replay carries the gold check; the unreadable image is a layer again
    run = ReplayRun.objects.get(task__question_id=removal)
    assert run.variant_check["blocked"]["step"] == 3
    assert Event.objects.get(slug="hurricane-florence").layers.filter(
        file_name="hurricane-florence_00000018_post_original_unreadable.png", metadata__unreadable=True).exists()
    two = tmp_path / "two"
    again = release_export.export_release(Release.objects.get(version="1.0.0"), two)
    for prefix in ("tasks/", "images/", "variants/"):
        assert _bytes_of(two, prefix) == _bytes_of(one, prefix), prefix
    assert again["variants"] == section
    # a second import changes nothing
    assert len(release_import.import_release_dir(None, one).unchanged) == 1 + len(VARIANTS)
    assert TaskVariant.objects.count() == len(VARIANTS)


@pytest.mark.django_db
def test_published_digest_covers_the_variants_and_a_variant_without_its_base_is_refused(
        with_variants, make_user, tmp_path, settings):
    from annotation.models import Task, TaskVariant
    from releases.models import Release
    from releases.services import lifecycle, release_export, release_import

    base, made = with_variants
    mia = make_user("mia", "maintainer", "author", "reviewer")
    release = lifecycle.publish_release(mia, lifecycle.create_release(mia, "1.0.0", "with variants"))
    manifest = release_export.export_release(release, tmp_path / "one")
    assert manifest["release"]["content_sha256"] == release.manifest_sha256
    # a folder whose variants' base is neither in it nor in the studio: the sidecar field is named
    folder = tmp_path / "one"
    side = json.loads((folder / "studio_manifest.json").read_text())
    qid = sorted(made)[0]
    side["variants"][qid]["base_question_id"] = "nowhere_task0"
    (folder / "studio_manifest.json").write_text(json.dumps(side))
    settings.STUDIO_DATA_ROOT = tmp_path / "data2"
    settings.STUDIO_ARTIFACT_ROOT = tmp_path / "data2" / "artifacts"
    settings.STUDIO_DATA_ROOT.mkdir()
    before = (Task.objects.count(), TaskVariant.objects.count(), Release.objects.count())
    with pytest.raises(release_import.ReleaseImportError) as err:
        release_import.import_release_dir(None, folder, event_slug="elsewhere", release_version="2.0.0")
    assert err.value.field == f"variants.{qid}" and "'nowhere_task0' is neither in this release" in str(err.value)
    assert (Task.objects.count(), TaskVariant.objects.count(), Release.objects.count()) == before
