"""The one error type of the importers."""
from __future__ import annotations

from pathlib import Path


class DataImportError(Exception):
    """An input file cannot be imported.

    ``file`` is the offending file (its name), ``field`` the part of it (a JSON key, a band, a CLI
    option), ``problem`` what is wrong. ``str()`` reads ``"<file>: <field>: <problem>"``.
    """

    def __init__(self, file: str | Path | None, field: str, problem: str):
        self.file = Path(file).name if file else ""
        self.field = field
        self.problem = problem
        super().__init__(f"{self.file or '<input>'}: {field}: {problem}")
