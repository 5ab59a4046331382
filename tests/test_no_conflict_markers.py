"""No committed text file holds a merge's conflict markers (a README table row was once shipped
with ``<<<<<<< HEAD`` in it). Reads every file git tracks, skipping binaries."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARKER = re.compile(rb"^(<{7} |={7}$|>{7} )", re.M)


def test_no_tracked_text_file_holds_conflict_markers():
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout.split(b"\0")
    bad = []
    for name in filter(None, files):
        path = ROOT / name.decode()
        if not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            continue  # binary
        for m in MARKER.finditer(data):
            line = data.count(b"\n", 0, m.start()) + 1
            bad.append(f"{name.decode()}:{line}")
    assert not bad, "conflict markers in: " + ", ".join(bad)
