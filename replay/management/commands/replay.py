"""manage.py replay — replay tasks' gold trajectories.

    manage.py replay --task QUESTION_ID [--mode gt|model|classical] [--no-cache] [--json]
                     [--against TASK_FILE]
    manage.py replay --all [--event SLUG] [--changed-only] [--mode ...] [--no-cache]
    manage.py replay --resume-stuck [--timeout SECONDS]

``--task`` replays one task's head revision in this process and prints its filled trajectory and
``final_answer`` (``--json``: ``{question_id, run, status, error, replay_hash, gold_accepted,
tool_calls, cache_hits, final_answer, trajectory}``). ``--all`` dispatches one Celery task per
task (in-process without a broker; real workers with ``CELERY_BROKER_URL``) and shows a progress
bar of finished tasks; ``--changed-only`` skips tasks whose newest succeeded replay in that mode
had the same input fingerprint (revision, layer contents, tool versions). ``--resume-stuck``
re-queues runs without progress for ``--timeout`` seconds (default 900). Exit status 1 when a
replay failed. ``--all`` also diffs each replayed task imported from a task file against the
observations the file recorded (as ``--task`` does, below): its summary counts the blank ones
filled (``filled_observations``) and lists the tasks where a recorded one differs
(``recorded_changed``; exit status 2 when there is one and nothing failed).

``--task`` on a task imported from a benchmark-layout file that recorded observations (the file's
task is kept on the revision, ``TaskRevision.source``) also diffs the replay against them
(``replay.selectors.task_recorded_diff``; none when the plan was edited since the import);
``--against TASK_FILE`` diffs against another benchmark-layout file instead
(``replay.selectors.recorded_diff``). ``--json``: ``recorded_diff``. Each step is same / filled
(the file left the observation blank: ``{}``, ``null`` or no ``obs``, i.e. not recorded, and the
replay filled it) / changed / source (a perception step whose observation differs because the
studio replays with GT masks and the file's came from the benchmark's model) / added / removed;
exit status 2 when a non-perception step's recorded observation differs (``changed``, ``added``,
``removed``: ``kernel.golddiff.DIFFERS``), 0 when blank ones were only filled.
"""
from __future__ import annotations

import json
import sys
import time

from django.core.management.base import BaseCommand, CommandError

from kernel.errors import InvalidInput, Locked
from kernel.vocabulary import PERCEPTION_MODES


def progress_bar(done: int, total: int, label: str = "", width: int = 30) -> str:
    """``[#######.......]  12/515  label`` (one line, for a carriage-return display)."""
    filled = int(width * done / total) if total else width
    return f"[{'#' * filled}{'.' * (width - filled)}] {done:>{len(str(total))}}/{total}  {label}"[:120]


class Command(BaseCommand):
    help = "Replay tasks' gold trajectories (one task, a whole set, or the runs stuck in 'running')."

    def add_arguments(self, parser):
        what = parser.add_mutually_exclusive_group(required=True)
        what.add_argument("--task", metavar="QUESTION_ID")
        what.add_argument("--all", action="store_true")
        what.add_argument("--resume-stuck", action="store_true")
        parser.add_argument("--event", default=None, help="with --all: only this event's tasks")
        parser.add_argument("--changed-only", action="store_true")
        parser.add_argument("--mode", choices=list(PERCEPTION_MODES), default="gt")
        parser.add_argument("--no-cache", action="store_true", help="call every tool (the cache is still filled)")
        parser.add_argument("--timeout", type=float, default=900.0)
        parser.add_argument("--json", action="store_true")
        parser.add_argument("--against", metavar="TASK_FILE", default=None,
                            help="with --task: diff the replay against the observations recorded in "
                                 "this benchmark-layout task file (perception steps marked by source); "
                                 "default: those of the file the task was imported from, if any")

    def handle(self, *args, **o):
        # the project's modules are imported in the methods: ``manage.py replay --help`` loads this
        # module before Django starts (manage.py)
        from replay.services.runs import resume_stuck_replays

        if o["resume_stuck"]:
            ids = resume_stuck_replays(o["timeout"])
            self.stdout.write(json.dumps({"requeued": ids}) if o["json"] else
                              f"re-queued {len(ids)} run(s): {', '.join(map(str, ids)) or '-'}")
            return
        if o["task"]:
            return self._one(o)
        return self._all(o)

    def _one(self, o):
        from replay.models import ReplayRun
        from replay.selectors import recorded_diff, recorded_trajectory, task_of_question, task_recorded_diff
        from replay.services.runs import create_run, execute_replay

        task = task_of_question(o["task"])
        if task is None:
            raise CommandError(f"--task: no task with question id '{o['task']}'")
        recorded = None
        if o["against"]:
            try:
                recorded = recorded_trajectory(task, o["against"])
            except InvalidInput as exc:  # the file is not a task file of it (TaskImportError)
                raise CommandError(f"--against: {exc}") from exc
        try:
            run = create_run(task, mode=o["mode"])
        except Locked as exc:  # a released task's gold is frozen (TaskLockedError)
            raise CommandError(f"--task: {exc}") from None
        run = execute_replay(run.pk, use_cache=not o["no_cache"])
        out = {"question_id": task.question_id, "run": run.pk, "status": run.status, "error": run.error or None,
               "replay_hash": run.replay_hash, "gold_accepted": run.gold_accepted, "tool_calls": run.tool_calls,
               "cache_hits": run.cache_hits, "final_answer": run.final_answer, "trajectory": run.filled_trajectory}
        if recorded is not None:
            diff = {**recorded_diff(run, recorded), "against": o["against"]}
        else:
            diff = task_recorded_diff(run) if run.status == ReplayRun.Status.SUCCEEDED else None
        if diff is not None:
            out["recorded_diff"] = diff
        if o["json"]:
            self.stdout.write(json.dumps(out, indent=2, ensure_ascii=False))
        else:
            self.stdout.write(f"{task.question_id}: replay {run.pk} {run.status} "
                              f"({run.tool_calls} tool calls, {run.cache_hits} from cache)")
            for i, step in enumerate(run.filled_trajectory or []):
                self.stdout.write(f"  [{i}] {step.get('call')}  obs={json.dumps(step.get('obs'), ensure_ascii=False)[:160]}")
            self.stdout.write(f"final_answer: {json.dumps(run.final_answer, ensure_ascii=False)}")
            if run.error:
                self.stdout.write(f"error: {run.error}")
            if not run.gold_accepted and run.status == ReplayRun.Status.SUCCEEDED:
                self.stdout.write("the answer differs from the accepted gold: accept it on the task page")
            if diff is not None:
                self.stdout.write(f"against the observations recorded in {diff['against']}:")
                for row in diff["steps"]:
                    self.stdout.write(f"  [{row['index']}] {row['call']}: {row['state']}"
                                      + (f" ({row['note']})" if row.get("note") else ""))
                    if row["state"] == "filled":  # nothing was recorded: the filled values are the trajectory above
                        continue
                    for ch in row["changes"][:5]:
                        self.stdout.write(f"      {ch['path']}: recorded {json.dumps(ch['before'])[:60]}"
                                          f" -> replayed {json.dumps(ch['after'])[:60]}")
                self.stdout.write("no gold diff for non-perception steps" if not diff["changed"]
                                  else "non-perception steps differ from the recorded observations")
                if diff.get("filled"):
                    self.stdout.write(f"{diff['filled']} blank observation(s) filled (not recorded in the file)")
        if run.status != ReplayRun.Status.SUCCEEDED:
            sys.exit(1)
        if diff is not None and diff["changed"]:
            sys.exit(2)

    def _all(self, o):
        from replay.jobs import run_replay
        from replay.models import ReplayRun
        from replay.selectors import layers_by_event, tasks_to_replay
        from replay.services.layers import LAYER_FIELDS, input_fingerprint
        from replay.services.runs import create_run, execute_replay

        tasks = tasks_to_replay(o["event"], o["mode"])
        todo = []
        if o["changed_only"]:
            # the newest succeeded run's fingerprint per (task, revision), and each event's layers:
            # one query each, not one per task
            runs = ReplayRun.objects.filter(mode=o["mode"], status=ReplayRun.Status.SUCCEEDED)
            if o["event"]:
                runs = runs.filter(task__event__slug=o["event"])
            last_fp = {(task_id, rev_id): fp for task_id, rev_id, fp in
                       runs.order_by("id").values_list("task_id", "revision_id", "input_fingerprint")}
            layers = layers_by_event({t.event_id for t in tasks}, LAYER_FIELDS)
        for t in tasks:
            if o["changed_only"]:
                last = last_fp.get((t.pk, t.head_id))
                if last is not None and last == input_fingerprint(t, t.head, o["mode"], layers.get(t.event_id, [])):
                    continue
            todo.append(t)
        t0 = time.perf_counter()
        runs = []
        total = len(todo)
        for t in todo:
            run = create_run(t, mode=o["mode"])
            runs.append(run.pk)
            if o["no_cache"]:
                execute_replay(run.pk, use_cache=False)
            else:
                run_replay.delay(run.pk)
            if not o["json"]:
                done = ReplayRun.objects.filter(pk__in=runs, status__in=["succeeded", "failed"]).count()
                self.stdout.write("\r" + progress_bar(done, total, t.question_id), ending="")
                self.stdout.flush()
        while True:
            done = ReplayRun.objects.filter(pk__in=runs, status__in=["succeeded", "failed"]).count()
            if not o["json"]:
                self.stdout.write("\r" + progress_bar(done, total, ""), ending="")
                self.stdout.flush()
            if done >= total:
                break
            time.sleep(0.5)
        rows = list(ReplayRun.objects.filter(pk__in=runs).values("task__question_id", "status", "error", "tool_calls",
                                                                   "cache_hits", "gold_accepted"))
        seconds = round(time.perf_counter() - t0, 2)  # the replays, not the diffs below
        recorded = self._recorded(runs)
        summary = {"tasks": len(tasks), "replayed": total, "skipped_unchanged": len(tasks) - total,
                   "succeeded": sum(r["status"] == "succeeded" for r in rows),
                   "failed": [{"question_id": r["task__question_id"], "error": r["error"]} for r in rows if r["status"] == "failed"],
                   "pending_acceptance": [r["task__question_id"] for r in rows if r["status"] == "succeeded" and not r["gold_accepted"]],
                   "tool_calls": sum(r["tool_calls"] for r in rows), "cache_hits": sum(r["cache_hits"] for r in rows),
                   "filled_observations": sum(d["filled"] for d in recorded.values()),
                   "recorded_changed": sorted(q for q, d in recorded.items() if d["changed"]),
                   "seconds": seconds}
        if o["json"]:
            self.stdout.write(json.dumps(summary, indent=2, ensure_ascii=False))
        else:
            self.stdout.write("")
            self.stdout.write(f"{summary['succeeded']}/{total} succeeded, {len(tasks) - total} unchanged skipped, "
                              f"{summary['tool_calls']} tool calls, {summary['cache_hits']} cache hits, {summary['seconds']} s")
            for f in summary["failed"]:
                self.stdout.write(f"  FAILED {f['question_id']}: {f['error']}")
            if summary["pending_acceptance"]:
                self.stdout.write(f"  waiting for acceptance: {', '.join(summary['pending_acceptance'])}")
            if summary["filled_observations"]:
                self.stdout.write(f"  {summary['filled_observations']} blank recorded observation(s) filled")
            for q in summary["recorded_changed"]:
                self.stdout.write(f"  {q}: non-perception steps differ from the recorded observations "
                                  f"(manage.py replay --task {q})")
        if summary["failed"]:
            sys.exit(1)
        if summary["recorded_changed"]:
            sys.exit(2)

    @staticmethod
    def _recorded(run_ids: list[int]) -> dict[str, dict]:
        """``{question_id: task_recorded_diff}`` of the succeeded runs among ``run_ids`` whose
        revision keeps a task file's recorded observations (``replay.selectors.task_recorded_diff``)."""
        from replay.models import ReplayRun
        from replay.selectors import task_recorded_diff

        out = {}
        for run in (ReplayRun.objects.filter(pk__in=run_ids, status=ReplayRun.Status.SUCCEEDED)
                    .select_related("task", "revision")):
            diff = task_recorded_diff(run)
            if diff is not None:
                out[run.task.question_id] = diff
        return out
