"""Path confinement: the one place that decides whether a stored or requested path lies under a
root (the data root, a run's artifact folder, a source folder, a tool's work dir).

A name from a database row, a task file or a request is joined to its root and must stay inside
it: ``..`` components, an absolute name and (unless told otherwise) a symbolic link pointing out of
the root are refused. Pure (no Django): the replay tools and QC use it as well as the services.

API
---
``confine(root, name, *, follow_links=True) -> Path``
    The absolute path of ``name`` under ``root``; raises :class:`OutsideRoot` when it is not
    inside. ``follow_links=True`` resolves symbolic links (of ``root`` too) first, so a link that
    points outside is refused — use it before a file is opened. ``follow_links=False`` only
    normalises the text (``os.path.normpath``: no file-system access, for building many paths
    fast; the links are checked when the file is handed to a reader). An absolute ``name`` is
    accepted when it lies inside ``root``.
``is_inside(path, root) -> bool``
    Whether ``path`` (taken as it is: resolve it first if links matter) equals ``root`` or lies
    under it.

Source of the rule: the file-serving checks of Django's ``django.views.static.serve`` /
``safe_join`` (normalise, then require the root as a prefix), with symlinks resolved as
``pathlib.Path.resolve`` does.
"""
from __future__ import annotations

import functools
import os
from pathlib import Path

from kernel.errors import InvalidInput


class OutsideRoot(InvalidInput):
    """A path that lies outside its root (a 400 in the API). ``name`` and ``root`` say which."""

    def __init__(self, name: str, root: str | os.PathLike, what: str = "the data root"):
        self.name, self.root = str(name), Path(root)
        super().__init__(f"path '{name}' lies outside {what}", field="path")


@functools.lru_cache(maxsize=32)
def _real(root: str) -> Path:
    return Path(root).resolve()


def is_inside(path: str | os.PathLike, root: str | os.PathLike) -> bool:
    """True when ``path`` is ``root`` or lies under it (both taken as given, compared by parts)."""
    return Path(path).is_relative_to(Path(root))


def confine(root: str | os.PathLike, name: str | os.PathLike, *, follow_links: bool = True,
            what: str = "the data root") -> Path:
    """``root / name`` when it lies inside ``root``, else :class:`OutsideRoot` (see the module
    docstring). ``what`` names the root in the error message ("the run's folder")."""
    if follow_links:
        base = _real(os.fspath(root))
        path = (base / name).resolve()
        if not path.is_relative_to(base):
            raise OutsideRoot(os.fspath(name), base, what)
        return path
    base = os.path.normpath(os.path.abspath(os.fspath(root)))
    joined = os.path.normpath(os.path.join(base, os.fspath(name)))
    if joined != base and not joined.startswith(base.rstrip(os.sep) + os.sep):
        raise OutsideRoot(os.fspath(name), base, what)
    return Path(joined)


__all__ = ["OutsideRoot", "confine", "is_inside"]
