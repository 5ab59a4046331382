"""Which process owns something: a tag ``<pid>.<host tag>`` written beside a staging folder or
into a background job's row, and whether that process is gone.

The host tag is the first 8 hex digits of the SHA-256 of the host name, so one host never judges
the process ids of another on a shared data root or database: :func:`process_gone` answers True
only for a process of this host that no longer exists (``os.kill(pid, 0)`` fails with
``ProcessLookupError``); a process of another host, or a tag it cannot read, is never "gone" here
(the caller then decides by age, e.g. a heartbeat).
"""
from __future__ import annotations

import hashlib
import os
import socket


def host_tag() -> str:
    """8 hex digits of SHA-256(host name): this host, without writing its name anywhere."""
    return hashlib.sha256(socket.gethostname().encode("utf-8")).hexdigest()[:8]


def process_tag(pid: int | None = None) -> str:
    """``<pid>.<host tag>`` of process ``pid`` (default: this process) on this host."""
    return f"{os.getpid() if pid is None else int(pid)}.{host_tag()}"


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this host (one owned by another user counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def process_gone(tag: str) -> bool:
    """True iff ``tag`` (:func:`process_tag`) names a process of this host, not this one, that
    no longer exists. Empty, unreadable or other hosts' tags: False."""
    pid_text, _, host = str(tag or "").partition(".")
    if not pid_text.isdigit() or host != host_tag():
        return False
    pid = int(pid_text)
    return pid != os.getpid() and not pid_alive(pid)
