"""Domain errors: the refusals a person can act on, each with the HTTP status the API answers.

Pure (no Django) so that the pure cores (``annotation.variants``, ``kernel.taskfile``) can raise
them too. The classes and their statuses:

=====================  ======  =====================  ==========================================
class                  status  ``code``               when
=====================  ======  =====================  ==========================================
:class:`InvalidInput`  400     ``invalid``            the request names something wrong (a field)
:class:`Forbidden`     403     ``permission_denied``  the action is not allowed to this user
:class:`NotFound`      404     ``not_found``          the object named does not exist
:class:`Conflict`      409     ``conflict``           a stale version, a race, an existing object
:class:`Locked`        423     ``locked``             the object's status locks it
=====================  ======  =====================  ==========================================

One class per concept, single inheritance: a service raises one of these, or a subclass of
exactly one of them defined next to the rule that refuses (``annotation.services.tasks.TaskLockedError``
is a :class:`Locked`, ``releases.services.lifecycle.ReleaseExistsError`` a :class:`Conflict`), so
``status_code`` and ``code`` always come from one concept and a caller catches the concept it means
(``except Conflict``). There are no per-app base classes. The one exception to single inheritance:
:class:`InvalidInput` is also a ``ValueError`` so that callers written against ``ValueError`` keep
working (a 409 or 423 is not one). ``tests/test_api_errors.py`` checks every subclass in the project
against this. ``studio.errors.exception_handler`` turns them into responses.
"""
from __future__ import annotations

import re

#: ``name: message`` — a field name (a dotted path, indexes allowed) before the first ": "
_FIELD_PREFIX = re.compile(r"^([A-Za-z_][\w.\[\]]*): ")


class DomainError(Exception):
    """A refusal a person can act on; ``str(exc)`` is the message shown to them.

    ``field``: the input field it concerns (default: the message's ``name:`` prefix, if any; ``""``
    for none).
    Subclasses set ``status_code`` and ``code``; they may override :meth:`context`.
    """

    status_code = 400
    code = "invalid"

    def __init__(self, message: str = "", *, field: str | None = None):
        super().__init__(message)
        self._field = field

    @property
    def field(self) -> str | None:
        """The field named by the error, or None."""
        if self._field is not None:
            return self._field
        match = _FIELD_PREFIX.match(str(self))
        return match.group(1) if match else None

    def context(self) -> dict:
        """Extra keys of the response body (none by default)."""
        return {}

    def as_body(self) -> dict:
        """The response body: ``{"detail", "code", "field"?}`` plus :meth:`context`."""
        body = dict(self.context())
        body.update(detail=str(self), code=self.code)
        if self.field:
            body["field"] = self.field
        return body


class InvalidInput(DomainError, ValueError):
    """400: the request's input is wrong; the message names the field."""

    status_code = 400
    code = "invalid"


class Forbidden(DomainError):
    """403: the action is not allowed to this user (most refusals come from
    ``studio.permissions.require``, a Django ``PermissionDenied``, mapped the same way)."""

    status_code = 403
    code = "permission_denied"


class NotFound(DomainError):
    """404: the object the request names does not exist."""

    status_code = 404
    code = "not_found"


class Conflict(DomainError):
    """409: the request conflicts with the current state (a stale version, an existing object, a
    state that does not allow the step)."""

    status_code = 409
    code = "conflict"


class Locked(DomainError):
    """423: the object's status locks it against this change."""

    status_code = 423
    code = "locked"

    def context(self) -> dict:
        return {"locked": True}



__all__ = ["DomainError", "InvalidInput", "Forbidden", "NotFound", "Conflict", "Locked"]
