"""Where the studio keeps the files every web process and worker must see: the local folder
``STUDIO_DATA_ROOT`` (the embedded default, Django's ``FileSystemStorage``) or an S3 bucket
(``STUDIO_STORAGE_URL=s3://BUCKET[/PREFIX]``: django-storages' ``S3Storage`` over boto3, configured by
django-storages' own ``AWS_S3_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
``AWS_S3_REGION_NAME``, ``AWS_S3_ADDRESSING_STYLE`` and ``AWS_S3_SIGNATURE_VERSION``; docs/deployment.md,
"Object storage").

**Key scheme.** A file's key is its path relative to ``STUDIO_DATA_ROOT`` written with ``/`` (built
by :func:`key`, whose parts may hold no ``/``, ``\\``, NUL, ``.`` or ``..``), so one name means the same
file in the folder and in the bucket (under ``PREFIX/`` when the URL names one). Release exports:
``exports/<version>/<job id>/job.json`` (the job's state), ``…/heartbeat`` (its worker's sign of life:
the object's last-modified time) and ``…/dora-<version>.zip`` (the result). Uploaded run zips:
``uploads/<random>.zip``. Unpacked run folders: ``runs/<random>/<run folder>/…``. Layers: ``events/<slug>/<file>`` (as ``Layer.path`` and ``tiles_path``).
Replay artifacts: ``artifacts/cas/<sha256[:2]>/<sha256>`` whatever ``STUDIO_ARTIFACT_ROOT`` is.

**What lives in the bucket today.** Release exports (``releases.services.release_export``): with
a bucket a worker writes the export in its own local scratch folder (``STUDIO_DATA_ROOT/exports/…``),
uploads the zip, keeps the job's state in the bucket and removes the scratch; the download is a
presigned GET URL (:func:`download_url`). Uploaded run zips (``evaluation.services.runs``): the
request streams the zip to its key (:func:`upload_fileobj`), the import job's worker downloads it to
its own scratch (:func:`download_file`; ``STUDIO_DATA_ROOT/uploads/scratch/<worker tag>/<job id>.zip``),
imports it, removes the scratch, and deletes the object once the job is done. Imported layers
(``annotation.services.imports``): ``events/<slug>/…`` (stored file, ``tiles/*.3857.tif``,
``original/*``, ``versions/<layer id>/v<n>/*``) and ``variants/<event>/*``; the import uploads the
files it moved into place as its transaction's last step (putting replaced objects back when it
fails) and removes its local copies once committed. The map reads them straight from the bucket
through GDAL (:func:`gdal_path` inside :func:`gdal_env`); readers that need a local path (the
replay's tools through ``replay.services.paths``, QC, the export) get one from
:func:`local_copy`, which makes ``STUDIO_DATA_ROOT`` this machine's cache of the bucket (filled on
demand, checked against the layer's SHA-256, written by an atomic rename). Replay artifacts
(``replay.services.paths.BucketArtifactStore``): content-addressed, ``artifacts/cas/<sha[:2]>/<sha>``,
uploaded once per distinct content; ``STUDIO_ARTIFACT_ROOT/cas/`` is this machine's cache of them,
filled by :func:`local_copy` with its ``path``. Unpacked run folders (``evaluation.run_folders``):
``runs/<random>/…``, uploaded by the import job once the run is scored; another machine's readers
fetch the polygon files they need into their own data root. Imported golds' folders and session work
folders are still local files under ``STUDIO_DATA_ROOT`` / ``STUDIO_ARTIFACT_ROOT`` (the issue's later
slices).

**Writes are whole.** An S3 PUT (or a completed multipart upload) publishes the object whole or not
at all, so a reader never sees half an object; a worker killed mid-upload leaves nothing under the key
(an incomplete multipart upload is invisible to GET and LIST).

boto3 and django-storages are imported only when a bucket is configured: the embedded default loads
neither.
"""
from __future__ import annotations

import functools
import re
from datetime import datetime
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.files.base import ContentFile, File
from django.core.files.storage import FileSystemStorage, Storage

#: ``s3://BUCKET[/PREFIX]``: an S3 bucket name (3–63 lower-case letters, digits, dots, hyphens) and
#: an optional key prefix
STORAGE_URL_RE = re.compile(r"s3://(?P<bucket>[a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(?:/(?P<prefix>[^\x00]*?))?/?")


def parse_storage_url(url: str) -> tuple[str, str] | None:
    """``(bucket, prefix)`` of ``STUDIO_STORAGE_URL`` (``s3://BUCKET[/PREFIX]``; prefix without
    leading or trailing ``/``, "" for none), or None for "" (the local folder). Raises
    ``ImproperlyConfigured`` for any other value."""
    url = (url or "").strip()
    if not url:
        return None
    m = STORAGE_URL_RE.fullmatch(url)
    if not m:
        raise ImproperlyConfigured(f"STUDIO_STORAGE_URL: {url!r} is not s3://BUCKET[/PREFIX] "
                                   "(unset it to keep files under STUDIO_DATA_ROOT)")
    return m["bucket"], (m["prefix"] or "").strip("/")


def uses_bucket() -> bool:
    """True when ``STUDIO_STORAGE_URL`` names a bucket (the files this module serves live there)."""
    return parse_storage_url(settings.STUDIO_STORAGE_URL) is not None


def key(*parts: str) -> str:
    """The key of a file from its path parts below the data root, e.g. ``key("exports", "1.0.0",
    job_id, "job.json") == "exports/1.0.0/<job id>/job.json"``. Raises ``ValueError`` for an empty
    part or one holding ``/``, ``\\`` or NUL, or being ``.`` or ``..`` (a key never climbs)."""
    for p in parts:
        if not isinstance(p, str) or not p or p in (".", "..") or any(c in p for c in "/\\\x00"):
            raise ValueError(f"storage key part {p!r}: must be a non-empty name without '/', '\\\\' or NUL")
    return "/".join(parts)


def _bucket_settings() -> tuple:
    """The settings an ``S3Storage`` is built from (its cache key: a changed setting builds anew)."""
    bucket, prefix = parse_storage_url(settings.STUDIO_STORAGE_URL)
    return (bucket, prefix, settings.AWS_S3_ENDPOINT_URL, settings.AWS_ACCESS_KEY_ID,
            settings.AWS_SECRET_ACCESS_KEY, settings.AWS_S3_REGION_NAME, settings.AWS_S3_ADDRESSING_STYLE,
            settings.AWS_S3_SIGNATURE_VERSION)


@functools.lru_cache(maxsize=4)
def _s3_storage(config: tuple) -> Storage:
    from storages.backends.s3 import S3Storage  # boto3 only where a bucket is configured

    bucket, prefix, endpoint, access_key, secret_key, region, addressing, signature = config
    return S3Storage(bucket_name=bucket, location=prefix, endpoint_url=endpoint, access_key=access_key,
                     secret_key=secret_key, region_name=region, addressing_style=addressing,
                     signature_version=signature, file_overwrite=True, querystring_auth=True,
                     default_acl=None, custom_domain=None)


def storage() -> Storage:
    """The studio's file storage: ``S3Storage`` of the configured bucket (one per configuration,
    kept), else a ``FileSystemStorage`` rooted at ``STUDIO_DATA_ROOT``."""
    if uses_bucket():
        return _s3_storage(_bucket_settings())
    return FileSystemStorage(location=settings.STUDIO_DATA_ROOT, allow_overwrite=True)


def read_bytes(name: str) -> bytes | None:
    """The bytes of the file at key ``name``, or None when there is none."""
    try:
        with storage().open(name, "rb") as fh:
            return fh.read()
    except FileNotFoundError:
        return None


def write_bytes(name: str, data: bytes) -> None:
    """Write ``data`` as the whole file at key ``name``, replacing what was there (in a bucket one
    PUT: readers see the old object or the new one, never a mix)."""
    storage().save(name, ContentFile(data))


def upload_file(name: str, path: Path) -> None:
    """Copy the local file ``path`` to key ``name`` (replacing it; boto3 switches to a multipart
    upload above 8 MiB, published whole when it completes)."""
    with open(path, "rb") as fh:
        upload_fileobj(name, fh)


#: keys known to hold their object, per bucket configuration (:func:`upload_file_once`); at most
#: ``_KNOWN_PRESENT_LIMIT`` per configuration, forgotten all at once past it
_KNOWN_PRESENT: dict[tuple, set[str]] = {}
_KNOWN_PRESENT_LIMIT = 200_000


def upload_file_once(name: str, path: Path) -> bool:
    """Copy the local file ``path`` to key ``name`` unless an object is there already, for keys
    whose content never changes (content-addressed: ``replay.services.paths.artifact_key``).
    Returns whether it uploaded.

    A key this process uploaded, or found present, is remembered for its bucket configuration,
    and is not asked about again: the first time is a ``HEAD`` and, when absent, a ``PUT``; each
    later time makes no request. Replays store outputs that are mostly already in the bucket
    (about 4 ``HEAD`` requests and 0.8 ``PUT`` a replay on bench/scale.py's set), and the ``HEAD``
    requests were 70 % of their request time (2026-12-06). The studio never deletes such an
    object; one removed by hand stays unknown to a running process until it restarts. Without
    a bucket, the file is written unless one is there (a local folder has no request to save)."""
    if not uses_bucket():
        if exists(name):
            return False
        upload_file(name, path)
        return True
    known = _KNOWN_PRESENT.setdefault(_bucket_settings(), set())
    if name in known:
        return False
    uploaded = False
    if not exists(name):
        upload_file(name, path)
        uploaded = True
    if len(known) >= _KNOWN_PRESENT_LIMIT:
        known.clear()
    known.add(name)
    return uploaded


def upload_fileobj(name: str, fh) -> None:
    """Copy the binary file object ``fh`` (an open file, a Django ``UploadedFile``, a ``BytesIO``)
    from its start to key ``name``, replacing it; as :func:`upload_file` (streamed: multipart above
    8 MiB, published whole when it completes)."""
    if hasattr(fh, "seek"):
        fh.seek(0)
    storage().save(name, File(fh, name=name.rpartition("/")[2]))


def download_file(name: str, path: Path) -> None:
    """Copy the file at key ``name`` to the local file ``path`` (made or replaced; its folder is
    made). In a bucket the object is streamed to ``path`` by boto3's transfer (ranged GETs above
    8 MiB), never held in memory. Raises ``FileNotFoundError`` when there is no such file (nothing
    is written then)."""
    import shutil

    st = storage()
    with st.open(name, "rb") as src:  # S3: a HEAD first, FileNotFoundError for a missing object
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as out:
            if hasattr(src, "obj"):  # django-storages' S3File: download straight into the file
                src.obj.download_fileobj(out, Config=st.transfer_config)
            else:
                shutil.copyfileobj(src, out, 1 << 20)


def exists(name: str) -> bool:
    """Whether there is a file at key ``name``."""
    return storage().exists(name)


def delete(name: str) -> None:
    """Remove the file at key ``name`` (nothing when there is none)."""
    storage().delete(name)


def list_dir(prefix: str) -> tuple[list[str], list[str]]:
    """``(folders, files)`` directly below key ``prefix`` (names, not keys; each sorted); empty
    lists when there is nothing."""
    try:
        dirs, files = storage().listdir(prefix)
    except FileNotFoundError:
        return [], []
    return sorted(dirs), sorted(files)


def modified_at(name: str) -> datetime | None:
    """When the file at key ``name`` was last written (an aware datetime; in a bucket the object's
    Last-Modified, whole seconds), or None when there is none."""
    st = storage()
    if not st.exists(name):
        return None
    try:
        return st.get_modified_time(name)
    except (FileNotFoundError, OSError):
        return None


def link_lifetime_s() -> int:
    """``STUDIO_STORAGE_LINK_TTL_S``: seconds a presigned download link stays valid (default 300)."""
    return int(settings.STUDIO_STORAGE_LINK_TTL_S)


def download_url(name: str, filename: str, expires_s: int | None = None) -> str:
    """A presigned GET URL of the object at key ``name`` that answers it as an attachment named
    ``filename`` (``Content-Disposition``), valid ``expires_s`` seconds (default
    :func:`link_lifetime_s`). Anyone holding the URL can fetch the object until it expires, so mint
    it per request, after the permission check. Raises ``ImproperlyConfigured`` without a bucket
    (a local file is streamed by the view instead)."""
    if not uses_bucket():
        raise ImproperlyConfigured("download_url needs a bucket (STUDIO_STORAGE_URL=s3://…)")
    safe = re.sub(r'[^A-Za-z0-9._-]', "_", filename)
    return storage().url(name, parameters={"ResponseContentDisposition": f'attachment; filename="{safe}"',
                                           "ResponseContentType": "application/zip" if safe.endswith(".zip")
                                           else "application/octet-stream"},
                         expire=link_lifetime_s() if expires_s is None else int(expires_s))


# ---------------------------------------------------------------- layers: local copies and GDAL reads


def _local_sha_ok(path: Path, sha256: str) -> bool:
    """Whether the local file ``path`` has SHA-256 ``sha256`` (remembered per path, size and
    modification time: a replay asks for each layer twice, a tile server for every tile)."""
    st = path.stat()
    return _file_sha(str(path), st.st_size, st.st_mtime_ns) == sha256


@functools.lru_cache(maxsize=4096)
def _file_sha(path: str, size: int, mtime_ns: int) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def local_copy(name: str, sha256: str = "", path: Path | None = None) -> Path:
    """A local file with the content of key ``name``, for readers that need a path (the kernel's
    tools, QC, the export). ``path``: where the copy goes (default ``STUDIO_DATA_ROOT/<name>``; the
    replay's content store passes its own file, ``STUDIO_ARTIFACT_ROOT/cas/…``). Without a bucket:
    that path itself, untouched (it may not exist; the caller checks, as before). With a bucket the
    data root is this machine's cache of the bucket: the path is returned when it is there and,
    given ``sha256`` (hex), has that content; else the object is downloaded to a part file beside it
    (``.<file>.part-<pid>-<random>``), its SHA-256 checked against ``sha256``, and renamed onto the
    path (atomic: a reader sees the old file or the whole new one; two workers filling the same file
    both rename whole copies). Raises ``FileNotFoundError`` when the bucket has no such object and
    ``ValueError`` when its content is not ``sha256`` (the part file is removed: a row and an object
    that disagree, e.g. a re-import elsewhere not committed yet)."""
    import os
    import uuid

    path = Path(settings.STUDIO_DATA_ROOT) / name if path is None else Path(path)
    if not uses_bucket():
        return path
    key(*name.split("/"))  # a key never climbs out of the data root
    try:
        if path.is_file() and (not sha256 or _local_sha_ok(path, sha256)):
            return path
    except OSError:
        pass
    part = path.with_name(f".{path.name}.part-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        download_file(name, part)
        got = _file_sha(str(part), *_stat_key(part))
        if sha256 and got != sha256:
            raise ValueError(f"{name}: the bucket's object has SHA-256 {got}, not the expected {sha256}")
        os.replace(part, path)
    finally:
        part.unlink(missing_ok=True)
    return path


def _stat_key(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_size, st.st_mtime_ns


def gdal_path(name: str) -> str:
    """What GDAL (rasterio, rio-tiler) opens for key ``name``: ``/vsis3/BUCKET/[PREFIX/]name`` with a
    bucket (read inside :func:`gdal_env`), else the local file ``STUDIO_DATA_ROOT/<name>``."""
    parsed = parse_storage_url(settings.STUDIO_STORAGE_URL)
    if parsed is None:
        return str(Path(settings.STUDIO_DATA_ROOT) / name)
    key(*name.split("/"))
    bucket, prefix = parsed
    return f"/vsis3/{bucket}/{prefix + '/' if prefix else ''}{name}"


def gdal_options() -> dict:
    """GDAL's configuration (besides the credentials, which :func:`gdal_env` passes in a rasterio
    ``AWSSession``) for reading the bucket through ``/vsis3/``: ``AWS_HTTPS`` (NO for an ``http://``
    endpoint such as SeaweedFS's), ``AWS_VIRTUAL_HOSTING`` (FALSE: path addressing, as a custom
    endpoint or ``AWS_S3_ADDRESSING_STYLE=path`` wants) and no directory listing on open. Empty
    without a bucket."""
    from urllib.parse import urlsplit

    if not uses_bucket():
        return {}
    opts = {"GDAL_DISABLE_READDIR_ON_OPEN": "EMPTY_DIR"}
    if settings.AWS_S3_ENDPOINT_URL:
        opts["AWS_HTTPS"] = "NO" if urlsplit(settings.AWS_S3_ENDPOINT_URL).scheme == "http" else "YES"
        opts["AWS_VIRTUAL_HOSTING"] = "FALSE"
    elif settings.AWS_S3_ADDRESSING_STYLE == "path":
        opts["AWS_VIRTUAL_HOSTING"] = "FALSE"
    return opts


def gdal_env():
    """A ``rasterio.Env`` to open and read :func:`gdal_path` datasets in: GDAL signs its own ranged
    GETs with django-storages' credentials through ``rasterio.session.AWSSession`` (endpoint
    ``host:port`` of ``AWS_S3_ENDPOINT_URL``, region ``AWS_S3_REGION_NAME``; without keys, boto3's
    credential chain) and :func:`gdal_options`. A plain ``rasterio.Env()`` without a bucket.

    The session is made once per configuration (:func:`_gdal_session`) and shared: building one
    builds a boto3 ``Session`` (about 10–25 ms of CPU, bench/tiles.py --bucket), which a tile paid
    when each ``gdal_env()`` made its own."""
    import rasterio

    if not uses_bucket():
        return rasterio.Env()
    return rasterio.Env(session=_gdal_session(settings.AWS_ACCESS_KEY_ID, settings.AWS_SECRET_ACCESS_KEY,
                                              settings.AWS_S3_REGION_NAME or "us-east-1",
                                              settings.AWS_S3_ENDPOINT_URL or ""), **gdal_options())


@functools.lru_cache(maxsize=4)
def _gdal_session(access_key: str | None, secret_key: str | None, region: str, endpoint_url: str):
    """The ``rasterio.session.AWSSession`` of one configuration (its cache key: a changed setting
    makes another). Shared by every thread: it only hands out credentials, and boto3's refreshable
    credentials (an instance role's, when no keys are set) renew themselves when asked near expiry."""
    from urllib.parse import urlsplit

    from rasterio.session import AWSSession

    return AWSSession(aws_access_key_id=access_key, aws_secret_access_key=secret_key, region_name=region,
                      endpoint_url=urlsplit(endpoint_url).netloc if endpoint_url else None)
