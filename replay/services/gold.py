"""Writes of a task's gold answer: a person accepting a replay (``accept_gold``), the gold of a
task imported from a release (``record_imported_gold``), and review's submission check that a
succeeded replay exists (``require_succeeded_replay``).

A succeeded replay becomes the task's gold (``gold_accepted``) by itself only when nothing a person
approved would change: the task has no gold yet, or its gold was never accepted by a person
(``accepted_by`` empty), or the new replay has the gold's ``replay_hash``
(``replay.services.progress._finish_succeeded``). Otherwise it stays pending until a person calls
``accept_gold``; ``replay.selectors.replay_diff`` shows what changed. Only GT-mode replays take
part (model and classical runs are measurements, never gold). The task, its revisions and
``accept_gold`` commit as every other write does.
"""
from __future__ import annotations

from django.db import transaction

from annotation.models import AuditEvent, Task
from annotation.services.review import TransitionError
from annotation.services.tasks import require_unreleased
from kernel.engine import replay_hash
from kernel.errors import Conflict
from replay.models import ReplayRun
from replay.selectors import GOLD_MODE, current_gold, latest_successful_replay
from studio.permissions import Action, require

#: the ``ReplayRun.mode`` of a gold imported from a release's files (nothing executed)
IMPORT_MODE = "import"

#: the permission that accepting a changed gold answer needs (see the report: a dedicated
#: ``gold.accept`` row would be stricter)
ACCEPT_ACTION = Action.TASK_REPLAY



class ReplayStateError(Conflict):
    """A replay is not in a state that allows the operation; the message says why (HTTP 409)."""



def require_succeeded_replay(task: Task) -> None:
    """Review's submission check "a succeeded replay of the head revision exists" (registered by
    ``replay.apps.ReplayConfig.ready``): reviewers judge the filled gold answer, so it must exist.
    Raises ``annotation.services.review.TransitionError``."""
    if latest_successful_replay(task) is None:
        raise TransitionError(f"replay: revision r{task.version} of {task.question_id} has no succeeded replay; "
                              "replay it so that the reviewer sees the filled answer")



@transaction.atomic
def record_imported_gold(user, task: Task, revision, *, filled_trajectory: list, final_answer, eval_spec: dict,
                         answer_format: dict, artifact_dir: str, at, auto_accepted: bool = False,
                         artifact_manifest: dict[str, str] | None = None) -> ReplayRun:
    """The gold of a task imported from a release: a succeeded replay run of ``revision`` in mode
    ``import``, accepted, holding the file's trajectory with its observations (stored form), final
    answer, eval spec and answer format, and ``artifact_dir`` (relative to the artifact root: the
    file's own sample and task and its gold polygons) with ``artifact_manifest`` (``{name in that
    folder: SHA-256}``, the files already put in the content store, ``replay.services.paths``: with a
    bucket, every machine reads them as it reads a replay's artifacts). Nothing is executed; ``replay_hash`` is the
    engine's hash of trajectory and answer, so a later replay of the same content compares equal.
    ``at``: the import's time (started and finished). Accepted by ``user``, or with
    ``auto_accepted`` by nobody (accepted automatically), so that the next replay takes its place
    by itself (a file whose gold is blank: ``import_release --accept-proposals``)."""
    steps = len(filled_trajectory)
    return ReplayRun.objects.create(
        task=task, revision=revision, mode=IMPORT_MODE, status=ReplayRun.Status.SUCCEEDED,
        steps_total=steps, steps_done=steps, final_answer=final_answer, eval_spec=eval_spec,
        answer_format=answer_format, filled_trajectory=filled_trajectory,
        replay_hash=replay_hash(filled_trajectory, final_answer), gold_accepted=True,
        accepted_by=None if auto_accepted else user, requested_by=user, artifact_dir=artifact_dir,
        artifact_manifest=dict(artifact_manifest or {}), started_at=at, finished_at=at)



@transaction.atomic
def accept_gold(user, run: ReplayRun) -> ReplayRun:
    """A person accepts ``run``'s observations and answer as the task's gold.

    Raises ``PermissionDenied`` (role), ``ReplayStateError`` when the run did not succeed or an
    accepted gold newer than it exists. Writes an audit event ``gold.accept``.
    """
    locked = ReplayRun.objects.select_for_update().select_related("task", "revision").get(pk=run.pk)
    require(user, ACCEPT_ACTION, locked.task)
    require_unreleased(locked.task, "accepting a new gold")
    if locked.mode != GOLD_MODE:
        raise ReplayStateError(f"replay {locked.pk} ran with {locked.mode} perception; the gold comes from GT-mode replays")
    if locked.status != ReplayRun.Status.SUCCEEDED:
        raise ReplayStateError(f"replay {locked.pk} is {locked.status}; only a succeeded replay can become the gold")
    gold = current_gold(locked.task)
    if gold is not None and gold.pk > locked.pk:
        raise ReplayStateError(f"replay {locked.pk} is older than the current gold (replay {gold.pk})")
    locked.gold_accepted = True
    locked.accepted_by = user
    locked.save(update_fields=["gold_accepted", "accepted_by"])
    AuditEvent.objects.create(task=locked.task, actor=user, action="gold.accept",
                              revision_number=locked.revision.number,
                              reason=f"replay {locked.pk} ({locked.replay_hash[:12]}) accepted as gold")
    return locked

