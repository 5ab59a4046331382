"""manage.py qc [--all | --task ID | --task-file FILE] [--json] [--data-root DIR]

Runs the full QC suite and prints every finding; exits 1 when any finding is an error.

* ``--task ID``: one task (question id or primary key), its head revision with its newest replay.
* ``--all``: every task, plus the release-level checks (near-duplicate questions) and the
  distribution report (by dimension, disaster type, modality).
* ``--task-file FILE``: a benchmark task file (a list of samples with tasks); needs no database.
  ``--data-root`` is the benchmark's data root (``images/`` under it); default: the folder above
  ``tasks/`` when the file lies in one.
"""
from __future__ import annotations

import json
import sys

from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = "Run QC on tasks (database) or on a benchmark task file; exit 1 if any error is found."
    requires_system_checks: list = []

    def add_arguments(self, parser):
        group = parser.add_mutually_exclusive_group(required=True)
        group.add_argument("--all", action="store_true", help="every task, plus release-level checks")
        group.add_argument("--task", help="a task's question id or primary key")
        group.add_argument("--task-file", help="a benchmark task file (no database needed)")
        parser.add_argument("--data-root", default=None, help="benchmark data root for --task-file")
        parser.add_argument("--json", action="store_true", help="print one JSON document")

    def handle(self, *args, **opts):
        if opts["task_file"]:
            from annotation.services.qc import qc_for_task_file

            try:
                result = qc_for_task_file(opts["task_file"], opts["data_root"])
            except (OSError, ValueError) as exc:
                raise CommandError(f"{opts['task_file']}: {exc}") from exc
            report = {
                "file": result["file"],
                "findings": [f.as_dict() for f in result["findings"]],
                "tasks": [{"question_id": t["question_id"], "findings": [f.as_dict() for f in t["findings"]]}
                          for t in result["tasks"]],
                "release": {"findings": [f.as_dict() for f in result["release"]["findings"]],
                            "report": result["release"]["report"]},
            }
        else:
            report = self._database(opts)
        every = report.get("findings", []) + [f for t in report["tasks"] for f in t["findings"]]
        every += report.get("release", {}).get("findings", [])
        errors = sum(1 for f in every if f["severity"] == "error")
        report["summary"] = {"tasks": len(report["tasks"]), "errors": errors, "warnings": len(every) - errors}
        if opts["json"]:
            self.stdout.write(json.dumps(report, indent=2, ensure_ascii=False))
        else:
            self._print(report)
        if errors:
            sys.exit(1)

    def _database(self, opts) -> dict:
        from annotation.models import Task
        from annotation.services.qc import qc_for_task, release_qc

        qs = Task.objects.select_related("event", "head").order_by("sample_id", "task_index")
        if opts["task"]:
            key = opts["task"]
            task = qs.filter(question_id=key).first() or (qs.filter(pk=int(key)).first() if key.isdigit() else None)
            if task is None:
                raise CommandError(f"no task '{key}' (give a question id or a primary key)")
            tasks = [task]
        else:
            tasks = list(qs)
        out = {"tasks": [], "findings": []}
        for task in tasks:
            if task.head_id is None:
                continue
            out["tasks"].append({"question_id": task.question_id,
                                 "findings": [f.as_dict() for f in qc_for_task(task)]})
        if opts["all"]:
            findings, dist = release_qc(tasks)
            out["release"] = {"findings": [f.as_dict() for f in findings], "report": dist}
        return out

    def _print(self, report: dict) -> None:
        w = self.stdout.write
        line = lambda f, indent="": w(f"{indent}{f['severity'].upper():8} {f['check']:28} {f['message']} [{f['location']}]")  # noqa: E731
        for f in report.get("findings", []):
            line(f)
        for t in report["tasks"]:
            w(f"{t['question_id']}: {len(t['findings'])} finding(s)")
            for f in t["findings"]:
                line(f, "  ")
        rel = report.get("release")
        if rel:
            for f in rel["findings"]:
                line(f)
            w("distribution: " + json.dumps(rel["report"], ensure_ascii=False))
        s = report["summary"]
        w(f"{s['tasks']} task(s), {s['errors']} error(s), {s['warnings']} warning(s)")
