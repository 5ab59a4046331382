"""Single SQL statements for hot paths, built from a model's metadata.

The ORM's query compilation costs a replay more than the statements themselves (about a
millisecond per ``QuerySet.update`` / ``bulk_create`` against 0.1–0.3 ms for the SQL on SQLite;
measured with ``bench/replay.py``). These helpers write the same statements directly: column
names and value preparation come from the model's fields (``get_db_prep_save``), table and
column quoting and the ignore-conflicts form from the connection's backend operations, so they
run unchanged on SQLite and PostgreSQL. Nothing here knows a model; callers own the rules.
"""
from __future__ import annotations

from typing import Any, Iterable

from django.db import connections, router
from django.db.models import Model
from django.db.models.constants import OnConflict

__all__ = ["insert_rows", "update_by"]


def _connection(model: type[Model]):
    return connections[router.db_for_write(model)]


def insert_rows(model: type[Model], columns: list[str], rows: Iterable[Iterable[Any]], *,
                ignore_conflicts: bool = False) -> int:
    """``INSERT`` ``rows`` (each a sequence of Python values in the order of ``columns``, field
    names or attnames) into ``model``'s table, in as few statements as the backend's parameter
    limit allows; ``ignore_conflicts``: rows that break a unique constraint are skipped (as
    ``bulk_create(ignore_conflicts=True)``). Returns the number of rows sent. Fields' defaults
    are not applied: name every column without a database default."""
    rows = [list(r) for r in rows]
    if not rows:
        return 0
    conn = _connection(model)
    meta = model._meta
    q = conn.ops.quote_name
    fields = [meta.get_field(c) for c in columns]
    head = conn.ops.insert_statement(on_conflict=OnConflict.IGNORE if ignore_conflicts else None)
    suffix = conn.ops.on_conflict_suffix_sql(fields, OnConflict.IGNORE, None, None) if ignore_conflicts else ""
    one = "(" + ", ".join(["%s"] * len(fields)) + ")"
    batch = max(1, conn.ops.bulk_batch_size(fields, rows))
    with conn.cursor() as cur:
        for start in range(0, len(rows), batch):
            chunk = rows[start:start + batch]
            params = [f.get_db_prep_save(v, conn) for row in chunk for f, v in zip(fields, row)]
            sql = (f"{head} {q(meta.db_table)} ({', '.join(q(f.column) for f in fields)}) VALUES "
                   + ", ".join([one] * len(chunk)) + (f" {suffix}" if suffix else ""))
            cur.execute(sql, params)
    return len(rows)


def update_by(model: type[Model], key: dict[str, Any], values: dict[str, Any], *,
              raw_sets: list[tuple[str, list]] | None = None) -> None:
    """``UPDATE`` ``model``'s rows whose fields equal ``key`` (field names or attnames) with
    ``values`` (Python values); ``raw_sets``: extra ``"<quoted column> = <SQL>"`` assignments with
    their parameters (for a value copied inside the database)."""
    conn = _connection(model)
    meta = model._meta
    q = conn.ops.quote_name
    sets, params = [], []
    for name, value in values.items():
        f = meta.get_field(name)
        sets.append(f"{q(f.column)} = %s")
        params.append(f.get_db_prep_save(value, conn))
    for sql, p in raw_sets or []:
        sets.append(sql)
        params.extend(p)
    where, wparams = [], []
    for name, value in key.items():
        f = meta.get_field(name)
        where.append(f"{q(f.column)} = %s")
        wparams.append(f.get_db_prep_value(value, conn))
    with conn.cursor() as cur:
        cur.execute(f"UPDATE {q(meta.db_table)} SET {', '.join(sets)} WHERE {' AND '.join(where)}",
                    params + wparams)
