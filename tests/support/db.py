"""Data made once for a test module: a transaction left open for the module's tests."""
from __future__ import annotations

from contextlib import contextmanager

from django.db import transaction


@contextmanager
def module_transaction(django_db_blocker):
    """Open a transaction that stays open while the block runs and is rolled back when it ends.

    Rows a module-scoped fixture writes inside it (with ``django_db_blocker.unblock()``) are seen
    by the module's tests; each test's own transaction (pytest-django's ``db``) nests in it as a
    savepoint, so a test's writes still roll back alone. A transactional test
    (``django_db(transaction=True)``) would flush the tables inside it: not for those modules.
    """
    with django_db_blocker.unblock():
        outer = transaction.atomic()
        outer.__enter__()
    try:
        yield
    finally:
        with django_db_blocker.unblock():
            transaction.set_rollback(True)
            outer.__exit__(None, None, None)
