"""The API's one error contract: the DRF exception handler (``REST_FRAMEWORK["EXCEPTION_HANDLER"]``).

Services raise domain errors (``kernel.errors``: :class:`InvalidInput` 400, :class:`Forbidden` 403,
:class:`NotFound` 404, :class:`Conflict` 409, :class:`Locked` 423, or a subclass of exactly one
of them); API views do not catch them.
:func:`exception_handler` turns each into one response whose body is the shape the API has always
used, with a stable ``code`` added::

    {"detail": "<message for a person>", "code": "conflict", "field": "expected_version", ...}

``field`` is present when the error names one (given, or the ``name:`` prefix of the message, the
studio's convention: ``"gsd_m: 0 m/px is out of range"``). An error's ``context()`` adds keys
(``qc`` findings, ``open_comments``, ``locked``); a view's ``error_context(exc)`` method adds keys
the view knows (the current task on a 409). Django's ``PermissionDenied`` (what
``studio.permissions.require`` raises) gives the same 403 body with its message; a model's
``DoesNotExist`` a 404 ``{"detail": "not found"}``. Anything else is DRF's (validation errors keep
``{field: [messages]}``) or a 500: the text of an unexpected exception (a bare ``ValueError`` from
inside a library) is never echoed to the client.
"""
from __future__ import annotations

from django.core.exceptions import ObjectDoesNotExist
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler
from rest_framework.views import set_rollback

from kernel.errors import DomainError, Forbidden, NotFound


def exception_handler(exc, context):
    """DRF's ``EXCEPTION_HANDLER``: a domain error, ``PermissionDenied`` or ``DoesNotExist`` → the
    body of the module docstring; anything else → DRF's own handler (None for an exception DRF does
    not know, which Django answers as a 500 without its text)."""
    if isinstance(exc, (DomainError, DjangoPermissionDenied, ObjectDoesNotExist)):
        set_rollback()  # as DRF's own handler does: an atomic request must not commit half a write
    if isinstance(exc, DomainError):
        body = {}
        hook = getattr(context.get("view"), "error_context", None)
        if hook is not None:
            body.update(hook(exc) or {})
        body.update(exc.as_body())
        return Response(body, status=exc.status_code)
    if isinstance(exc, DjangoPermissionDenied):
        message = str(exc) or "You do not have permission to perform this action."
        return Response({"detail": message, "code": Forbidden.code}, status=403)
    if isinstance(exc, ObjectDoesNotExist):
        return Response({"detail": "not found", "code": NotFound.code}, status=404)
    return drf_exception_handler(exc, context)


__all__ = ["exception_handler"]
