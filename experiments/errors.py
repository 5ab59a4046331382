"""The experiments app's domain errors (statuses and body: ``kernel.errors``, ``studio.errors``)."""
from __future__ import annotations

from kernel.errors import Conflict, DomainError, InvalidInput, NotFound


class ExperimentError(DomainError):
    """Base class of every refusal of the experiments app."""


class ExperimentInputError(ExperimentError, InvalidInput):
    """400: bad input (a ``ValueError``); the message names the field."""


class ExperimentNotFound(ExperimentError, NotFound):
    """404: the experiment or configuration named does not exist."""


class ExperimentStateError(ExperimentError, Conflict):
    """409: the experiment's state refuses the step (resume a running one, cancel a finished one)."""
