"""The evaluation app's domain errors: one base class, one subclass per HTTP status.

Services of ``evaluation`` raise these (or subclasses of them, such as
``evaluation.services.verdicts.VerdictLocked``); ``studio.errors.exception_handler`` answers them
(the statuses and the body: ``kernel.errors``).
"""
from __future__ import annotations

from kernel.errors import Conflict, DomainError, Forbidden, InvalidInput, Locked, NotFound


class EvaluationError(DomainError):
    """Base class of every refusal of the evaluation app (agent runs, scoring, verdicts, the queue, the judge)."""


class EvaluationInputError(EvaluationError, InvalidInput):
    """400: bad input to an evaluation service (a ``ValueError``); the message names the field."""


class EvaluationForbidden(EvaluationError, Forbidden):
    """403: an evaluation action this user may not take."""


class EvaluationNotFound(EvaluationError, NotFound):
    """404: the run, record, verdict or judge job named does not exist."""


class EvaluationConflict(EvaluationError, Conflict):
    """409: a stale version, an object that exists already, a state that refuses the step."""


class EvaluationLocked(EvaluationError, Locked):
    """423: the verdict or item is locked against the change."""


class NotBlind(EvaluationConflict):
    """409: the person was shown the record's other verdicts or its judge outcome, so they cannot
    score it blind and never become one of its raters (``evaluation.blind.seen_refusal`` says
    where and when)."""

    def context(self) -> dict:
        return {"blind": False}
