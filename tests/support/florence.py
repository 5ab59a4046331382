"""The xBD hurricane-florence tile (../shared/realdata/xbd-hurricane-florence) imported as an
event: fixtures ``florence`` and ``florence_with_root``, and the tile's file names.

Hand-checked (the tile's SOURCE.md lists mask values {0, 3, 4}): ``np.unique`` on the mask gives
value 3 (major) on 26,492 px and 4 (destroyed) on 274 px.
"""
from __future__ import annotations

import pytest
from conftest import REALDATA
from django.contrib.auth import get_user_model

from annotation.services.imports import import_xbd_folder

FLORENCE = REALDATA / "xbd-hurricane-florence"
PRE = "hurricane-florence_00000018_pre_original.png"
POST = "hurricane-florence_00000018_post_original.png"
MASK = "hurricane-florence_00000018_mask.png"


@pytest.fixture
def florence(db):
    """The Florence tile imported (pre and post images, the damage mask): its ``Event``."""
    return import_xbd_folder(FLORENCE).event


@pytest.fixture
def florence_with_root(db, make_user):
    """The Florence event, with a superuser ``root`` (maintainer and author) made first: the
    management commands the replay-import tests run act as the studio's superuser."""
    make_user("root", "maintainer", "author")
    get_user_model().objects.filter(username="root").update(is_superuser=True)
    return import_xbd_folder(FLORENCE).event
