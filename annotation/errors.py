"""The annotation app's domain errors: one base class, one subclass per HTTP status.

Services of ``annotation`` raise these (or subclasses of them, such as
``annotation.services.tasks.TaskLockedError``); ``studio.errors.exception_handler`` answers them
(the statuses and the body: ``kernel.errors``).
"""
from __future__ import annotations

from kernel.errors import Conflict, DomainError, Forbidden, InvalidInput, Locked, NotFound


class AnnotationError(DomainError):
    """Base class of every refusal of the annotation app (events, layers, tasks, review, releases)."""


class AnnotationInputError(AnnotationError, InvalidInput):
    """400: bad input to an annotation service (a ``ValueError``); the message names the field."""


class AnnotationForbidden(AnnotationError, Forbidden):
    """403: an annotation action this user may not take."""


class AnnotationNotFound(AnnotationError, NotFound):
    """404: the event, layer, task, revision or release named does not exist."""


class AnnotationConflict(AnnotationError, Conflict):
    """409: a stale version, an object that exists already, a state that refuses the step."""


class AnnotationLocked(AnnotationError, Locked):
    """423: the task's status locks its content."""
