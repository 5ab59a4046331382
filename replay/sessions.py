"""Recording of live agent sessions (``manage.py mcp_serve --record DIR``) as benchmark run records.

A live session is one agent working on one task through the studio's MCP server. Every tool call
becomes a trajectory step in the benchmark's own form (dora-format.md §(c))::

    {"call": "<alias>(<comma-separated arg names>)", "args": <as sent>, "obs": <JSON result>}

with ``obs = {"error": "<message>"}`` for a call the tool refused. The recorder keeps one record
per task in ``<DIR>/<task file stem>/benchmark.jsonl`` (e.g. ``t1_perception_and_assessment``), with
the runner's fields (``question_id``, ``task_scoped_question_id``, ``task_category``,
``task_category_code``, ``sample_id``, ``worker_id``, ``question``, ``predicted_answer``, ``error``,
``trajectory``, ``elapsed_time``, ``timestamp``) plus a ``studio_session`` dict (session id, agent, and the perception mode the server ran in).
The record is rewritten after every call, so the folder is a valid run folder at any moment and
``evaluation.services.runs.import_run_dir`` scores it. Other records in the same file (other tasks,
other sessions) are kept; a record with the same ``question_id`` is replaced (the last session of a
task wins, as the benchmark's ``--resume`` would keep one record per question).

The answer is set by :meth:`SessionRecorder.finish` (the MCP server's studio-only
``studio_submit_answer`` tool calls it). :meth:`SessionRecorder.close` marks a session that ended
without an answer (``error`` set, ``predicted_answer`` null).

One run across many server processes (``mcp_serve --run-dir DIR``, the benchmark's
``--temp_dir``): the benchmark's client (``langchain_mcp_adapters``) starts a fresh server process
for every tool call, and the benchmark's servers share step outputs through the temp dir they are
given. :class:`RunDirectory` keeps what a run needs across processes in that directory: the
artifacts (in ``DIR``, or ``DIR/<question id>`` while ``DIR/.session`` names one, as the
benchmark's ``SessionTempDir``) and ``DIR/studio_session.json`` with one session id per question,
so every process of the run records into the same run record. A recorder made with
``persistent=True`` merges with the record on disk under the file lock at every write: the steps
of each process are appended to those already recorded, and an answer submitted by one process is
kept by the others.
"""
from __future__ import annotations

import contextlib
import json
import os
import secrets
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kernel.paths import confine
from kernel.tools.base import jsonable

__all__ = ["SessionRecorder", "RunDirectory", "call_text", "new_session_id", "task_file_stem",
           "NO_ANSWER_ERROR"]

NO_ANSWER_ERROR = "session ended without an answer (studio_submit_answer was not called)"

# dimension → task file stem and default category (dora-format.md §(a)): the pure kernel
from kernel.vocabulary import CATEGORY_BY_DIM as DEFAULT_CATEGORY  # noqa: E402
from kernel.vocabulary import TASK_STEMS as TASK_FILE_STEMS  # noqa: E402


def new_session_id() -> str:
    """``<UTC time>-<6 hex>``: sortable and unique enough for one studio."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S") + "-" + secrets.token_hex(3)


def task_file_stem(dimension: str) -> str:
    try:
        return TASK_FILE_STEMS[dimension]
    except KeyError:
        raise ValueError(f"dimension '{dimension}' is not one of {', '.join(TASK_FILE_STEMS)}") from None


def call_text(alias: str, args: Any) -> str:
    """The runner's call text: ``"seg_flood(pre_image_path, post_image_path)"``."""
    names = list(args) if isinstance(args, dict) else []
    return f"{alias}({', '.join(str(n) for n in names)})"


def _now_iso() -> str:
    return datetime.now().isoformat(timespec="seconds")


class SessionRecorder:
    """Records one session on one task into a run folder.

    ``meta`` holds the task's identity: ``question_id``, ``sample_id``, ``dimension``
    (``t1``…``t5``), ``question``, and optionally ``task_category``, ``task_category_code``.
    Use :meth:`for_task` to build it from a studio ``Task``. Thread-safe; the file update is a
    locked read-modify-write with an atomic rename, so two sessions (two processes) writing
    records of different tasks to one run folder do not lose each other's records.
    """

    def __init__(self, run_dir: str | os.PathLike, meta: dict, *, session_id: str | None = None,
                 agent: str | None = None, worker_id: int = 0, persistent: bool = False,
                 started_at: float | None = None, perception_mode: str | None = None):
        for key in ("question_id", "dimension"):
            if not meta.get(key):
                raise ValueError(f"session meta needs '{key}'")
        self.run_dir = Path(run_dir)
        self.meta = dict(meta)
        self.stem = task_file_stem(self.meta["dimension"])
        cat, code = DEFAULT_CATEGORY[self.meta["dimension"]]
        self.meta["task_category"] = self.meta.get("task_category") or cat
        self.meta["task_category_code"] = self.meta.get("task_category_code") or code
        self.session_id = session_id or new_session_id()
        self.agent = agent or ""
        self.perception_mode = perception_mode or None  # model | gt | classical (None: unknown)
        self.worker_id = worker_id
        self.trajectory: list[dict] = []
        self.predicted_answer: Any = None
        self.error: str | None = None
        self.finished = False
        self.persistent = persistent
        self._started_at = started_at if started_at is not None else time.time()
        self._new_steps: list[dict] = []  # persistent: steps of this process not yet on disk
        self._answer_set = False  # persistent: this process submitted an answer
        self._closed = False  # persistent: this process ended without an answer
        self._lock = threading.RLock()
        self.write()

    @classmethod
    def for_task(cls, run_dir, task, **kw) -> SessionRecorder:
        """A recorder for a studio ``annotation.models.Task`` (its head revision)."""
        rev = task.head
        meta = {
            "question_id": task.question_id, "sample_id": task.sample_id, "dimension": task.dimension,
            "question": rev.question if rev else "",
            "task_category": rev.task_category if rev else "",
            "task_category_code": rev.task_category_code if rev else "",
        }
        return cls(run_dir, meta, **kw)

    # -- paths --------------------------------------------------------------------------------
    @property
    def jsonl_path(self) -> Path:
        return self.run_dir / self.stem / "benchmark.jsonl"

    # -- recording ----------------------------------------------------------------------------
    def record_call(self, alias: str, args: Any, obs: Any = None, *, error: str | None = None) -> dict:
        """Append one step (``obs`` the JSON result, or ``{"error": error}``) and rewrite the record."""
        step = {
            "call": call_text(alias, args),
            "args": jsonable(args if isinstance(args, dict) else {}),
            "obs": {"error": str(error)} if error is not None else jsonable(obs),
        }
        with self._lock:
            self.trajectory.append(step)
            self._new_steps.append(step)
        self.write()
        return step

    def finish(self, predicted_answer: Any) -> dict:
        """Set the final answer (a dict of answer fields, or the raw text) and write the record.
        May be called again: the last answer wins."""
        with self._lock:
            self.predicted_answer = jsonable(predicted_answer)
            self.error = None
            self.finished = True
            self._answer_set = True
        return self.write()

    def close(self) -> dict:
        """End of the session: without an answer the record gets ``error`` = :data:`NO_ANSWER_ERROR`."""
        with self._lock:
            if not self.finished:
                self.error = NO_ANSWER_ERROR
            self._closed = True
        return self.write()

    def record(self) -> dict:
        """The current run record (runner field order)."""
        m = self.meta
        with self._lock:
            return {
                "question_id": m["question_id"],
                "task_scoped_question_id": f"{m['task_category']}::{m['question_id']}",
                "task_category": m["task_category"],
                "task_category_code": m["task_category_code"],
                "sample_id": m.get("sample_id") or "",
                "worker_id": self.worker_id,
                "question": m.get("question") or "",
                "predicted_answer": self.predicted_answer,
                "error": self.error,
                "trajectory": [dict(s) for s in self.trajectory],
                "elapsed_time": round(time.time() - self._started_at, 3),
                "timestamp": _now_iso(),
                "studio_session": {"session_id": self.session_id, "agent": self.agent,
                                   "finished": self.finished,
                                   **({"perception_mode": self.perception_mode}
                                      if self.perception_mode else {})},
            }

    def write(self) -> dict:
        """Write (or replace) this task's record in ``benchmark.jsonl``; returns the record."""
        path = self.jsonl_path
        path.parent.mkdir(parents=True, exist_ok=True)
        with self._lock, _file_lock(path.with_name(".benchmark.jsonl.lock")):
            lines = []
            mine = None
            if path.exists():
                for line in path.read_text(encoding="utf-8").splitlines():
                    if not line.strip():
                        continue
                    try:
                        other = json.loads(line)
                    except ValueError:
                        lines.append(line)  # not ours to judge: keep it as it was
                        continue
                    if isinstance(other, dict) and other.get("question_id") == self.meta["question_id"]:
                        mine = other
                        continue
                    lines.append(line)
            if self.persistent:
                self._merge(mine)
            rec = self.record()
            lines.append(json.dumps(rec, ensure_ascii=False))
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".jsonl")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as fh:
                    fh.write("\n".join(lines) + "\n")
                os.replace(tmp, path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
        return rec

    def _merge(self, on_disk: dict | None) -> None:
        """Persistent mode, under the file lock: the record on disk of the same session is the
        base; this process's new steps are appended to its trajectory, its answer wins only when
        this process set one, and an answer on disk clears this process's no-answer mark."""
        same = (isinstance(on_disk, dict)
                and (on_disk.get("studio_session") or {}).get("session_id") == self.session_id)
        if same:
            base = [s for s in on_disk.get("trajectory") or [] if isinstance(s, dict)]
            self.trajectory = base + list(self._new_steps)
            if not self._answer_set and (on_disk.get("studio_session") or {}).get("finished"):
                self.predicted_answer = on_disk.get("predicted_answer")
                self.finished = True
            if self.finished:
                self.error = None
            elif self._closed:
                self.error = NO_ANSWER_ERROR
            else:
                self.error = on_disk.get("error")
        self._new_steps = []


class RunDirectory:
    """One run's directory shared by every server process of the run (``mcp_serve --run-dir``).

    ``work_dir``: where tool artifacts go and where later processes find them: the directory
    itself, or ``<dir>/<id>`` while ``<dir>/.session`` holds an id (the benchmark's
    ``SessionTempDir``, whose runner writes the question id there). ``session(question_id)``:
    ``{session_id, started_at}`` of that question's session, created by the first process and
    read by the later ones (``studio_session.json``, written under a file lock).
    """

    STATE_FILE = "studio_session.json"

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)

    @property
    def work_dir(self) -> Path:
        """The run's folder, or ``<dir>/<id>`` while ``<dir>/.session`` names one. The name is
        confined to the run's folder with symbolic links resolved (``kernel.paths.confine``): a
        ``.session`` naming a link that points elsewhere raises ``kernel.paths.OutsideRoot``
        (no tool reads or writes outside ``--temp_dir``)."""
        marker = self.path / ".session"
        if marker.is_file():
            name = marker.read_text(encoding="utf-8").strip()
            if name and "/" not in name and name not in (".", ".."):
                return confine(self.path, name, what=f"the run's folder {self.path}")
        return self.path

    def session(self, question_id: str) -> dict:
        """The session of ``question_id`` in this run: ``{"session_id", "started_at"}``."""
        state_path = self.path / self.STATE_FILE
        with _file_lock(self.path / ".studio_session.lock"):
            try:
                state = json.loads(state_path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                state = {}
            sessions = state.setdefault("sessions", {})
            entry = sessions.get(question_id)
            if not isinstance(entry, dict) or not entry.get("session_id"):
                entry = {"session_id": new_session_id(), "started_at": time.time()}
                sessions[question_id] = entry
                tmp = state_path.with_suffix(".tmp")
                tmp.write_text(json.dumps(state, indent=1), encoding="utf-8")
                os.replace(tmp, state_path)
        return entry


@contextlib.contextmanager
def _file_lock(path: Path):
    """An exclusive advisory lock (POSIX ``flock``; a no-op where that is unavailable)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    with open(path, "a+") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
