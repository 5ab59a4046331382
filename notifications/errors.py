"""The notifications app's domain errors (answered by ``studio.errors.exception_handler``)."""
from __future__ import annotations

from kernel.errors import DomainError, InvalidInput, NotFound


class NotificationsError(DomainError):
    """Base class of every refusal of the notifications app."""


class WebhookInputError(NotificationsError, InvalidInput):
    """400: a bad webhook or settings field (a forbidden URL, an unknown event type); names the field."""


class WebhookNotFound(NotificationsError, NotFound):
    """404: no such webhook or delivery (or not yours)."""
