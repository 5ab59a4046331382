"""``manage.py mcp_serve``: an MCP server with every registry tool, bound to one task.

    python manage.py mcp_serve --task QUESTION_ID [--transport stdio|http] [--port N]
                               [--record DIR] [--agent NAME] [--run-dir DIR | --temp_dir DIR]
                               [--dotted-names] [--perception model|gt|classical]

* ``stdio`` (default): the MCP client starts this command as its server process; stdout carries
  the protocol only, diagnostics go to stderr.
* ``http``: Streamable HTTP on ``http://127.0.0.1:<port>/mcp`` (always 127.0.0.1; default port
  8765).
* ``--record DIR``: the session becomes an agent run: every tool call is written as a trajectory
  step to ``DIR/<task file stem>/benchmark.jsonl`` (see ``replay.sessions``), and the studio extra
  tool ``studio_submit_answer(answer)`` (not a benchmark tool) sets the record's answer. Import the
  folder with ``manage.py import_runs`` / ``evaluation.services.runs.import_run_dir``.
* ``--agent NAME``: the agent's name, kept in the record's ``studio_session``.
* ``--run-dir DIR`` (also spelled ``--temp_dir``, the benchmark servers' flag): one run across
  many server processes, for clients that start a fresh server per tool call (the benchmark's
  ``langchain_mcp_adapters`` client does): artifacts go to DIR (``DIR/<id>`` while
  ``DIR/.session`` names one, as the benchmark's ``SessionTempDir``), so a later process finds
  the outputs of earlier calls; with ``--record`` every process appends to the same run record
  (``replay.sessions.RunDirectory``).
* ``--dotted-names``: list the tools under the benchmark's dotted names (``seg.flood``), as the
  benchmark's servers do; its harness renames them to the underscore aliases itself.

* ``--perception MODE``: how the ``seg.*`` tools answer. ``model`` (default, the benchmark's
  protocol): the benchmark's networks from ``STUDIO_CHECKPOINT_DIR``; a tool whose checkpoint is
  missing (or no directory configured) answers the benchmark's ``status: "stub"`` observation, as
  the benchmark's server does without checkpoints. ``gt``: the task's ground-truth masks
  ("oracle perception": an easier task whose scores are never ranked with the benchmark's).
  ``classical``: training-free baselines where one exists. The mode is kept in the record's
  ``studio_session.perception_mode``.

A robustness variant (``annotation.models.TaskVariant``) is served with its own tool set
(``replay.variant_tools``: distractors, the broken tool and its alternative, removed tools absent).

Tool paths resolve to the task's event layers; artifacts go to
``STUDIO_ARTIFACT_ROOT/sessions/<session id>/`` (or the run dir).
"""
from __future__ import annotations

import gc
import sys
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from kernel.paths import OutsideRoot
from kernel.vocabulary import PERCEPTION_MODES, SERVING_PERCEPTION_MODE

HTTP_HOST = "127.0.0.1"


class Command(BaseCommand):
    help = "Serve every registry tool over MCP (stdio or Streamable HTTP on 127.0.0.1), bound to one task."
    #: a server per tool call (the benchmark's harness): no system checks, whose URL check alone
    #: imports every view of the site (``manage.py check`` runs them)
    requires_system_checks: list[str] = []

    def add_arguments(self, parser):
        parser.add_argument("--task", required=True, metavar="QUESTION_ID", help="question id of the task")
        parser.add_argument("--transport", choices=["stdio", "http"], default="stdio")
        parser.add_argument("--port", type=int, default=8765, help="HTTP port on 127.0.0.1 (http only)")
        parser.add_argument("--record", metavar="DIR", help="record the session as a run folder in DIR")
        parser.add_argument("--agent", default="", help="agent name kept with the recorded session")
        parser.add_argument("--run-dir", "--temp_dir", dest="run_dir", metavar="DIR", default=None,
                            help="one run across server processes: artifacts and session state in DIR")
        parser.add_argument("--dotted-names", action="store_true",
                            help="list tools under the benchmark's dotted names (seg.flood)")
        parser.add_argument("--perception", choices=list(PERCEPTION_MODES), default=SERVING_PERCEPTION_MODE,
                            help="seg.* tools: model (the benchmark's networks; stub answers "
                                 "without checkpoints), gt (oracle perception) or classical")

    def handle(self, *args, **opts):
        # Django's start (settings, the app registry, the models) lives as long as this process:
        # freeze it, so that the cyclic GC's passes during the rest of the start (the mcp SDK's
        # import above all, whose pydantic types allocate heavily) do not rescan it each time
        # (a server per tool call: 0.96 → 0.78 s CPU of a start, docs/benchmarks.md). The frozen
        # objects are never collected; they are the start's own.
        gc.freeze()
        # imported here, not at the top: ``manage.py mcp_serve --help`` loads this module without
        # starting Django (manage.py), and the server's start pays only for what it uses
        from annotation.models import Task
        from replay.mcp_server import build_server
        from replay.sessions import RunDirectory, SessionRecorder

        task = Task.objects.select_related("head", "event").filter(question_id=opts["task"]).first()
        if task is None:
            raise CommandError(f"--task: no task with question id '{opts['task']}'")
        if task.head is None:
            raise CommandError(f"--task: task '{opts['task']}' has no revision")
        if not (0 < opts["port"] < 65536):
            raise CommandError(f"--port: {opts['port']} is not a TCP port")
        perception = opts.get("perception") or SERVING_PERCEPTION_MODE
        run_dir, session_id, work_dir, started_at = None, None, None, None
        if opts.get("run_dir"):
            run_dir = RunDirectory(Path(opts["run_dir"]).resolve())
            state = run_dir.session(task.question_id)
            session_id, started_at = state["session_id"], state["started_at"]
            try:
                work_dir = run_dir.work_dir
            except OutsideRoot as exc:
                raise CommandError(f"--run-dir: .session: {exc}") from None
        recorder = None
        if opts.get("record"):
            recorder = SessionRecorder.for_task(Path(opts["record"]).resolve(), task, agent=opts.get("agent") or "",
                                                session_id=session_id, persistent=run_dir is not None,
                                                started_at=started_at, perception_mode=perception)
        server = build_server(task, recorder=recorder, session_id=session_id, work_dir=work_dir,
                              tool_names="dotted" if opts.get("dotted_names") else "alias",
                              perception_mode=perception)
        err = sys.stderr  # stdout belongs to the protocol in stdio mode
        if perception == "model" and not settings.STUDIO_CHECKPOINT_DIR:
            err.write("mcp_serve: STUDIO_CHECKPOINT_DIR is not set: every seg.* call answers the "
                      "benchmark's stub observation (status \"stub\"); --perception gt serves "
                      "the GT masks (oracle perception)\n")
        where = (f"http://{HTTP_HOST}:{opts['port']}/mcp" if opts["transport"] == "http" else "stdio")
        err.write(f"mcp_serve: {server.tool_count} tools for {task.question_id} on {where}; "
                  f"session {server.binding.session_id}, artifacts in {server.binding.work_dir}"
                  + f"; perception {perception}"
                  + (f"; recording to {recorder.jsonl_path}" if recorder else "") + "\n")
        err.flush()
        try:
            if opts["transport"] == "http":
                server.run("streamable-http", host=HTTP_HOST, port=opts["port"])
            else:
                server.run("stdio")
        except KeyboardInterrupt:
            pass
        finally:
            if recorder is not None:
                recorder.close()
