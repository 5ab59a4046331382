"""The xBD hurricane-florence tile (../shared/realdata/xbd-hurricane-florence) imported as an
event: fixtures ``florence`` and ``florence_with_root``, the tile's file names, and ``DAMAGE_TASK``.

Hand-checked (the tile's SOURCE.md lists mask values {0, 3, 4}): ``np.unique`` on the mask gives
value 3 (major) on 26,492 px and 4 (destroyed) on 274 px.
"""
from __future__ import annotations

import pytest
from conftest import REALDATA, needs_shared
from django.contrib.auth import get_user_model

from annotation.services.imports import import_xbd_folder

FLORENCE = REALDATA / "xbd-hurricane-florence"
PRE = "hurricane-florence_00000018_pre_original.png"
POST = "hurricane-florence_00000018_post_original.png"
MASK = "hurricane-florence_00000018_mask.png"

#: A T1 task's content on the tile with a count and a polygon answer: the damage network's mask, the
#: damaged pixels counted (classes 2 and 3 of seg.building_damage) and vectorized. Its gold replay
#: answers 26,766 px (26,492 + 274 from the mask, above) and the polygons file ``ras.vectorize`` wrote.
DAMAGE_TASK = {
    "question": "How many pixels show partially damaged or destroyed buildings?",
    "trajectory": [
        {"call": "seg.building_damage", "args": {"pre_image_path": PRE, "post_image_path": POST}},
        {"call": "ras.count_pixels", "args": {"mask_path": "<mask_path> from trajectory[0].obs", "classes": [2, 3]}},
        {"call": "ras.vectorize", "args": {"mask_path": "<mask_path> from trajectory[0].obs", "classes": [2, 3]}},
    ],
    "answer_spec": [{"name": "damaged_pixels", "eval_type": "scalar_count", "source": "<total> from trajectory[1].obs"},
                    {"name": "damaged_area", "eval_type": "polygon_iou", "source": "<vector_path> from trajectory[2].obs"}],
}


@pytest.fixture
def florence(db):
    """The Florence tile imported (pre and post images, the damage mask): its ``Event``."""
    return import_xbd_folder(needs_shared(FLORENCE)).event


@pytest.fixture
def florence_with_root(db, make_user):
    """The Florence event, with a superuser ``root`` (maintainer and author) made first: the
    management commands the replay-import tests run act as the studio's superuser."""
    make_user("root", "maintainer", "author")
    get_user_model().objects.filter(username="root").update(is_superuser=True)
    return import_xbd_folder(needs_shared(FLORENCE)).event
