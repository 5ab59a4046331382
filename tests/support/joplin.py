"""The Joplin tornado T2 task on real data (../shared/realdata/xview2-deploy-joplin) and the people
of the review workflow: fixtures ``joplin``, ``people`` and ``approved_t2``, and the builders the
review, editor, variant and release tests share.

The task: keep the damage polygons with ``dmg`` = 4 (destroyed), buffer them by 20 m, intersect
the building footprints with the buffers; the hand check (geopandas, independent of the studio's
tools) gives ``intersecting_a_count`` = 60 (see ``tests/test_review_workflow.py``).
"""
from __future__ import annotations

import shutil

import pytest
from conftest import REALDATA, needs_shared
from django.test import override_settings

from annotation.models import Event, Task
from annotation.services import tasks as task_services
from annotation.services.imports import import_raster_file, import_vector_file
from support.db import module_transaction

JOPLIN = REALDATA / "xview2-deploy-joplin"

T2_TRAJECTORY = [
    {"call": "vec.filter_by_attribute",
     "args": {"vector_path": "damage.geojson", "attribute_name": "dmg", "allowed_values": ["4"]}},
    {"call": "vec.buffer", "args": {"vector_path": "<vector_path> from trajectory[0].obs", "meter": 20}},
    {"call": "vec.intersect",
     "args": {"vector_a_path": "bldg_polys.geojson", "vector_b_path": "<buffer_path> from trajectory[1].obs"}},
]
T2_ANSWER = [{"name": "intersecting_a_count", "eval_type": "scalar_count",
              "source": "<intersecting_a_count> from trajectory[2].obs", "answer_format": "an integer"}]
T2_QUESTION = "How many building footprints lie within 20 m of a destroyed-building polygon?"


def import_joplin(raster: bool = True):
    """The Joplin post chip (unless ``raster`` is false: the T2 task needs only the vectors), the
    damage polygons and the footprints; returns the event."""
    needs_shared(JOPLIN)
    if raster:
        import_raster_file(JOPLIN / "output_chips_post_0_post.tif", event_slug="joplin-tornado", phase="post",
                           modality="optical", disaster_type="tornado")
    import_vector_file(JOPLIN / "damage.shp", event_slug="joplin-tornado")
    return import_vector_file(JOPLIN / "bldg_polys.gpkg", event_slug="joplin-tornado").event


def t2_payload(event, **over) -> dict:
    """The body of ``POST /api/tasks/`` for the T2 task over ``event``'s Joplin layers; ``over``
    replaces fields."""
    layers = {l.file_name: l.pk for l in event.layers.all()}
    data = {
        "event": event.slug, "dimension": "t2", "question": T2_QUESTION,
        "task_category": "spatial_relation", "task_category_code": "T2", "disaster_type": "tornado",
        "input_layers": {"damage_data": layers["damage.geojson"], "building_data": layers["bldg_polys.geojson"]},
        "trajectory": T2_TRAJECTORY, "answer_spec": T2_ANSWER,
    }
    data.update(over)
    return data


@pytest.fixture
def joplin(db):
    """The Joplin event with its damage polygons and footprints (no raster)."""
    return import_joplin(raster=False)


@pytest.fixture(scope="module")
def joplin_import_once(django_db_setup, django_db_blocker, tmp_path_factory):
    """The Joplin vectors imported once for a test module, in a transaction rolled back at the
    module's end (:func:`support.db.module_transaction`), its files in a data root of their own.
    Yields (event id, data root). Not for modules with transactional tests."""
    needs_shared(JOPLIN)
    root = tmp_path_factory.mktemp("joplin") / "data"
    root.mkdir()
    with module_transaction(django_db_blocker):
        with django_db_blocker.unblock(), \
                override_settings(STUDIO_DATA_ROOT=root, STUDIO_ARTIFACT_ROOT=root / "artifacts"):
            event_id = import_joplin(raster=False).pk
        yield event_id, root


@pytest.fixture
def joplin_once(db, joplin_import_once, settings):
    """What ``joplin`` gives (the event of the Joplin vectors), from the module's one import
    (:func:`joplin_import_once`): its files copied into this test's data root, its rows shared
    (each test's own writes roll back)."""
    event_id, root = joplin_import_once
    shutil.copytree(root, settings.STUDIO_DATA_ROOT, dirs_exist_ok=True)
    return Event.objects.get(pk=event_id)


@pytest.fixture
def people(make_user):
    """The review workflow's people by name: authors ada and bob, reviewer rey, maintainer max,
    ann both author and reviewer."""
    return {
        "ada": make_user("ada", "author"),
        "bob": make_user("bob", "author"),
        "rey": make_user("rey", "reviewer"),
        "max": make_user("max", "maintainer"),
        # both roles: may review others' tasks, never their own
        "ann": make_user("ann", "author", "reviewer"),
    }


def post_json(client, url, data=None):
    """``client.post`` of ``data`` as a JSON body."""
    return client.post(url, data or {}, content_type="application/json")


def create_t2(client, joplin, **over) -> dict:
    """The T2 task created through the API by the client's user; returns the API's task."""
    resp = post_json(client, "/api/tasks/", t2_payload(joplin, **over))
    assert resp.status_code == 201, resp.content
    return resp.json()


@pytest.fixture
def approved_t2(joplin, people):
    """ada's T2 task over ``joplin``, set approved directly."""
    layers = {l.file_name: l.pk for l in joplin.layers.all()}
    content = {"question": T2_QUESTION, "task_category": "spatial_relation", "task_category_code": "T2",
               "disaster_type": "tornado", "trajectory": T2_TRAJECTORY, "answer_spec": T2_ANSWER,
               "input_data": task_services.build_input_data(joplin, {"damage_data": layers["damage.geojson"],
                                                                     "building_data": layers["bldg_polys.geojson"]})}
    task = task_services.create_task(people["ada"], joplin, dimension="t2", content=content)
    # setup shortcut: the review cycle (replay, submit, approve) is test_review_workflow's subject
    Task.objects.filter(pk=task.pk).update(status=Task.Status.APPROVED)
    task.refresh_from_db()
    return task
