"""Files a test puts where the studio keeps them, as an import would have: under ``STUDIO_DATA_ROOT``,
and with a bucket (``STUDIO_STORAGE_URL``; CI's configuration 2 runs the whole suite so) at their key
too, the path below the data root. Fixtures that build layer rows by hand store their files through
:func:`store_file`, so that a tile, a replay or an export reads them from the bucket as it reads an
imported layer's."""
from __future__ import annotations

import shutil
from pathlib import Path

from django.conf import settings

from kernel.hashing import file_sha256
from studio import storage


def store_file(relative: str, *, data: bytes | None = None, copy_from: str | Path | None = None) -> Path:
    """Write ``data`` (or a copy of the file ``copy_from``) at ``relative`` below ``STUDIO_DATA_ROOT``
    and, with a bucket, upload it to the key ``relative``. Returns the local path."""
    if (data is None) == (copy_from is None):
        raise TypeError("store_file: give data or copy_from, not both")
    path = Path(settings.STUDIO_DATA_ROOT) / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.part")  # a new file: never write through a hard link
    if data is not None:
        tmp.write_bytes(data)
    else:
        shutil.copyfile(copy_from, tmp)
    tmp.replace(path)
    if storage.uses_bucket():
        storage.upload_file(Path(relative).as_posix(), path)
    return path


def republish_file(relative: str) -> str:
    """After a test changed the stored file at ``relative`` in place (a file edited under the
    studio): with a bucket, the changed file uploaded to its key as well. Returns its SHA-256, which a
    layer row must carry for a bucket reader to accept the file (``storage.local_copy``)."""
    path = Path(settings.STUDIO_DATA_ROOT) / relative
    if storage.uses_bucket():
        storage.upload_file(Path(relative).as_posix(), path)
    return file_sha256(path)


def remove_file(relative: str) -> None:
    """Remove the stored file at ``relative`` from wherever the studio keeps it: the local data root
    and, with a bucket, its key (a file lost from the storage, not only from one machine's cache)."""
    (Path(settings.STUDIO_DATA_ROOT) / relative).unlink()
    if storage.uses_bucket():
        storage.delete(Path(relative).as_posix())


def read_stored(relative: str) -> bytes:
    """The bytes of the file the studio keeps at ``relative`` below the data root: from the bucket
    (its key) when there is one, else the local file. ``FileNotFoundError`` when there is none."""
    if storage.uses_bucket():
        data = storage.read_bytes(Path(relative).as_posix())
        if data is None:
            raise FileNotFoundError(relative)
        return data
    return (Path(settings.STUDIO_DATA_ROOT) / relative).read_bytes()


def downloaded(response) -> bytes:
    """The bytes a browser gets from a download view's ``response`` (Django's test client): the
    streamed file, or with a bucket the object behind the presigned URL it redirects to (302),
    fetched from the S3 server as a browser would."""
    import urllib.request

    if response.status_code == 302:
        with urllib.request.urlopen(response["Location"], timeout=60) as got:
            return got.read()
    assert response.status_code == 200, response.status_code
    return b"".join(response.streaming_content) if response.streaming else response.content
