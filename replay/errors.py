"""The replay app's domain errors: one base class, one subclass per HTTP status.

Services of ``replay`` raise these (or subclasses of them, such as
``replay.services.gold.ReplayStateError``); ``studio.errors.exception_handler`` answers them
(the statuses and the body: ``kernel.errors``).
"""
from __future__ import annotations

from kernel.errors import Conflict, DomainError, Forbidden, InvalidInput, Locked, NotFound


class ReplayError(DomainError):
    """Base class of every refusal of the replay app (replay runs, artifacts, gold acceptance)."""


class ReplayInputError(ReplayError, InvalidInput):
    """400: bad input to a replay service (a ``ValueError``); the message names the field."""


class ReplayForbidden(ReplayError, Forbidden):
    """403: a replay action this user may not take."""


class ReplayNotFound(ReplayError, NotFound):
    """404: the replay run or artifact named does not exist."""


class ReplayConflict(ReplayError, Conflict):
    """409: a stale version, an object that exists already, a state that refuses the step."""


class ReplayLocked(ReplayError, Locked):
    """423: the run or task is locked against the change."""
