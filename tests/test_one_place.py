"""One place each (issue 19, item 5): path confinement (``kernel.paths``), and every former copy
now goes through it.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from kernel.paths import OutsideRoot, confine, is_inside

ROOT = Path(__file__).resolve().parents[1]


# --- path confinement ---------------------------------------------------------------------------

def test_confine_accepts_names_under_the_root_and_refuses_escapes(tmp_path):
    root = tmp_path / "root"
    (root / "ev").mkdir(parents=True)
    (root / "ev" / "a.tif").write_bytes(b"x")
    assert confine(root, "ev/a.tif") == (root / "ev" / "a.tif").resolve()
    assert confine(root, "ev/../ev/a.tif") == (root / "ev" / "a.tif").resolve()
    assert confine(root, str(root / "ev" / "a.tif")) == (root / "ev" / "a.tif").resolve()  # absolute, inside
    for bad in ("../secret", "ev/../../secret", "/etc/passwd"):
        with pytest.raises(OutsideRoot) as info:
            confine(root, bad)
        assert info.value.field == "path" and isinstance(info.value, ValueError)
    # a prefix is not a parent: /x/root-other is not under /x/root
    with pytest.raises(OutsideRoot):
        confine(root, str(tmp_path / "root-other" / "f"))


def test_confine_follows_links_unless_told_not_to(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (tmp_path / "secret").write_text("s")
    (root / "link").symlink_to(tmp_path / "secret")
    with pytest.raises(OutsideRoot):
        confine(root, "link")  # the link points outside: refused before a file is opened
    # the text-only variant (no file-system access) normalises but does not follow the link
    assert confine(root, "link", follow_links=False) == Path(os.path.normpath(root / "link"))
    with pytest.raises(OutsideRoot):
        confine(root, "a/../../x", follow_links=False)
    assert is_inside(root / "a" / "b", root) and not is_inside(tmp_path / "database", tmp_path / "data")


def test_the_former_copies_of_confinement_call_kernel_paths():
    """``resolve()`` + ``is_relative_to`` on a root lived in about nine places; what is left in the
    apps is the kernel's (and the importers' wrapper around it, which names the source folder)."""
    hits = []
    for app in ("annotation", "replay", "evaluation", "frontend", "studio"):
        for path in (ROOT / app).rglob("*.py"):
            for i, line in enumerate(path.read_text().splitlines(), 1):
                if re.search(r"\.is_relative_to\(", line):
                    hits.append(f"{path.relative_to(ROOT)}:{i}")
    assert hits == []


@pytest.mark.django_db
def test_the_services_refuse_paths_outside_the_data_root(settings):
    from replay.services import data_path, stored_path

    assert data_path("ev/a.tif") == (Path(settings.STUDIO_DATA_ROOT) / "ev" / "a.tif").resolve()
    for fn in (data_path, stored_path):
        with pytest.raises(OutsideRoot, match="lies outside the data root"):
            fn("../../etc/passwd")
