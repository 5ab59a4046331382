"""The MCP tests' Florence task and helpers: a T1 task whose gold trajectory is
seg.building_damage → ras.count_pixels(classes [2, 3]), reading a tool result, running an async
client on a thread, and the environment of a ``manage.py mcp_serve`` child.

Hand-checked (:mod:`support.florence`): the damage tool maps the mask's value 3 (26,492 px) and 4
(274 px) to its classes 2 and 3, so ras.count_pixels on its mask counts {"2": 26492, "3": 274},
total 26,766.
"""
from __future__ import annotations

import json
import threading

import anyio
from conftest import REPO, ChildDatabase, needs_shared
from django.conf import settings

from annotation.models import Layer
from annotation.services.imports import import_xbd_folder
from annotation.services.tasks import build_input_data, create_task
from studio.accounts import upsert_user
from support.children import storage_env
from support.florence import FLORENCE, POST, PRE


def run_async(main) -> None:
    """Run an async test body on a fresh thread: Playwright's sync API (the session's shared
    browser) keeps an event loop running on the main thread, where ``anyio.run`` would refuse."""

    failure = []

    def target():
        try:
            anyio.run(main)
        except BaseException as exc:  # re-raised on the test's thread
            failure.append(exc)

    t = threading.Thread(target=target)
    t.start()
    t.join()
    if failure:
        raise failure[0]


#: ras.count_pixels of the damage tool's mask on Florence, by class (see the module docstring).
GT_COUNTS = {"2": 26492, "3": 274}


def make_task():
    """Import florence and create the T1 task (author + maintainer user); returns (user, task)."""
    user = upsert_user("ada", "pw-test-123", ["author", "maintainer"])
    event = import_xbd_folder(needs_shared(FLORENCE)).event
    layers = {l.file_name: l for l in Layer.objects.filter(event=event)}
    content = {
        "question": "How many pixels show partially damaged or destroyed buildings, per class and in total?",
        "task_category": "perception_and_assessment", "task_category_code": "T1",
        "disaster_type": "hurricane",
        "input_data": build_input_data(event, {"pre_image": layers[PRE].pk, "post_image": layers[POST].pk}),
        "trajectory": [
            {"call": "seg.building_damage", "args": {"pre_image_path": PRE, "post_image_path": POST}},
            {"call": "ras.count_pixels", "args": {"mask_path": "<mask_path> from trajectory[0].obs",
                                                  "classes": [2, 3]}},
        ],
        "answer_spec": [
            {"name": "damaged_pixels", "eval_type": "scalar_count", "source": "<total> from trajectory[1].obs"},
            {"name": "pixels_by_class", "eval_type": "scalar_dict", "source": "<counts> from trajectory[1].obs",
             "answer_format": "{class index: pixels}"},
        ],
    }
    task = create_task(user, event, dimension="t1", content=content, sample_id="florence_mcp01")
    return user, task


def obs_of(result) -> dict:
    """The JSON observation of an MCP tool result (exactly one text content)."""
    assert len(result.content) == 1 and result.content[0].type == "text"
    return json.loads(result.content[0].text)


def subprocess_env(tmp_path) -> dict:
    """Environment for a ``manage.py mcp_serve`` subprocess: the test's committed rows
    (``ChildDatabase``: a file copy on SQLite, the test database itself on PostgreSQL) and the
    test's data root and storage (a bucket or none, as the test has it)."""
    db = ChildDatabase(tmp_path, "mcp.sqlite3")
    return {
        "DATABASE_URL": db.url,
        "STUDIO_DATA_ROOT": str(settings.STUDIO_DATA_ROOT),
        "STUDIO_ARTIFACT_ROOT": str(settings.STUDIO_ARTIFACT_ROOT),
        "STUDIO_VAR_DIR": str(tmp_path / "var"),
        "DJANGO_SETTINGS_MODULE": "studio.settings",
        "PYTHONPATH": str(REPO),
        **storage_env(),
    }
