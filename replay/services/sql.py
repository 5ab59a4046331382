"""The replay's own SQL: single statements for its hot paths (its run, step and step-cache rows),
built from a model's metadata. Moved here from ``studio/fastsql.py``: the replay is its one
caller, and the shared layer keeps no writer that reaches into ``Model._state`` or the
connection's ``atomic_blocks``.

The ORM's query compilation costs a replay more than the statements themselves (about a
millisecond per ``QuerySet.update`` / ``bulk_create`` against 0.1–0.3 ms for the SQL on SQLite;
measured with ``bench/replay.py``). These helpers write the same statements directly: column
names and value preparation come from the model's fields (``get_db_prep_save``), table and
column quoting and the ignore-conflicts form from the connection's backend operations, so they
run unchanged on SQLite and PostgreSQL. Nothing here knows a model; callers own the rules.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import connections, models, router
from django.db.models import Model
from django.db.models.constants import OnConflict

__all__ = ["insert_rows", "insert_rows_sql", "update_in_sql", "update_by", "update_rows", "copy_rows", "copy_rows_sql", "existing_values", "newest_row",
           "newest_row_sql", "insert_instance", "load_instances", "load_many", "Sub", "column_sql", "commit_without_flush_wait",
           "one_statement_writes"]


def _connection(model: type[Model]):
    return connections[router.db_for_write(model)]


_PREPARERS: dict = {}
#: field classes (exactly these, not subclasses) whose ``get_db_prep_save`` returns a value of the
#: listed type unchanged on every backend: ``to_python``/``float``/``bool`` of such a value is the
#: value itself, and these fields do not override ``get_db_prep_value``
_UNCHANGED = {models.CharField: str, models.TextField: str, models.BooleanField: bool, models.FloatField: float}


def _preparer(field, conn):
    """``value -> field.get_db_prep_save(value, conn)``, skipping the call for a value the field
    passes through unchanged (``_UNCHANGED``; integers too where the backend does not wrap them,
    i.e. not on PostgreSQL). Built once per field and connection."""
    key = (conn.alias, field)
    prep = _PREPARERS.get(key)
    if prep is None and type(field) is models.JSONField and field.encoder is None:
        # ``JSONField.get_db_prep_save`` of a plain dict or list is ``get_prep_value`` (the value
        # itself) handed to the backend's ``adapt_json_value``: called directly here
        slow, adapt = field.get_db_prep_save, conn.ops.adapt_json_value

        def prep(value, slow=slow, conn=conn, adapt=adapt):
            t = type(value)
            return adapt(value, None) if t is dict or t is list else slow(value, conn)
        _PREPARERS[key] = prep
    if prep is None:
        kind = _UNCHANGED.get(type(field))
        if kind is None and type(field) is models.IntegerField and conn.vendor != "postgresql":
            kind = int
        slow = field.get_db_prep_save
        if kind is None:
            def prep(value, slow=slow, conn=conn):
                return slow(value, conn)
        else:
            def prep(value, slow=slow, conn=conn, kind=kind):
                return value if type(value) is kind else slow(value, conn)
        _PREPARERS[key] = prep
    return prep


def insert_rows_sql(model: type[Model], columns: list[str], rows: Iterable[Iterable[Any]], *,
                    ignore_conflicts: bool = False) -> list[tuple[str, list]]:
    """The statements of :func:`insert_rows` with their parameters, not run: one per batch of
    the backend's parameter limit (a single one on PostgreSQL), none for no rows."""
    rows = [list(r) for r in rows]
    if not rows:
        return []
    conn = _connection(model)
    meta = model._meta
    q = conn.ops.quote_name
    fields = [meta.get_field(c) for c in columns]
    head = conn.ops.insert_statement(on_conflict=OnConflict.IGNORE if ignore_conflicts else None)
    suffix = conn.ops.on_conflict_suffix_sql(fields, OnConflict.IGNORE, None, None) if ignore_conflicts else ""
    one = "(" + ", ".join(["%s"] * len(fields)) + ")"
    batch = max(1, conn.ops.bulk_batch_size(fields, rows))
    preps = [_preparer(f, conn) for f in fields]
    out = []
    for start in range(0, len(rows), batch):
        chunk = rows[start:start + batch]
        params = [p(v) for row in chunk for p, v in zip(preps, row)]
        sql = (f"{head} {q(meta.db_table)} ({', '.join(q(f.column) for f in fields)}) VALUES "
               + ", ".join([one] * len(chunk)) + (f" {suffix}" if suffix else ""))
        out.append((sql, params))
    return out


def insert_rows(model: type[Model], columns: list[str], rows: Iterable[Iterable[Any]], *,
                ignore_conflicts: bool = False) -> int:
    """``INSERT`` ``rows`` (each a sequence of Python values in the order of ``columns``, field
    names or attnames) into ``model``'s table, in as few statements as the backend's parameter
    limit allows; ``ignore_conflicts``: rows that break a unique constraint are skipped (as
    ``bulk_create(ignore_conflicts=True)``). Returns the number of rows sent. Fields' defaults
    are not applied: name every column without a database default."""
    rows = [list(r) for r in rows]
    statements = insert_rows_sql(model, columns, rows, ignore_conflicts=ignore_conflicts)
    if statements:
        with _connection(model).cursor() as cur:
            for sql, params in statements:
                cur.execute(sql, params)
    return len(rows)


def update_in_sql(model: type[Model], field: str, keys: Iterable[Any], values: dict[str, Any], *,
                  increments: tuple[str, ...] = ()) -> tuple[str, list]:
    """``UPDATE`` of ``model``'s rows whose ``field`` is one of ``keys``: the fields of ``values``
    set to those Python values, each of ``increments`` (integer fields) raised by one in the
    database (``QuerySet.update(n=F("n") + 1)``). Returns ``(sql, params)``, not run."""
    conn = _connection(model)
    meta = model._meta
    q = conn.ops.quote_name
    sets, params = [], []
    for name in increments:
        col = q(meta.get_field(name).column)
        sets.append(f"{col} = {col} + 1")
    for name, value in values.items():
        f = meta.get_field(name)
        sets.append(f"{q(f.column)} = %s")
        params.append(f.get_db_prep_save(value, conn))
    f = meta.get_field(field)
    keys = [f.get_db_prep_value(k, conn) for k in keys]
    sql = (f"UPDATE {q(meta.db_table)} SET {', '.join(sets)} WHERE {q(f.column)} IN ({', '.join(['%s'] * len(keys))})")
    return sql, params + keys


class Sub:
    """A scalar subquery standing for a value in a ``where`` (``column = (sql)``): the database
    finds the value, so the statement needs no round trip before it to read it
    (:func:`column_sql` builds one)."""

    __slots__ = ("sql", "params")

    def __init__(self, sql: str, params: list):
        self.sql, self.params = sql, params


def column_sql(model: type[Model], field: str, where: dict[str, Any]) -> Sub:
    """``SELECT <field's column> FROM`` ``model``'s table ``WHERE`` the fields equal ``where`` (whose
    values may be :class:`Sub` in turn), as a :class:`Sub` (meant to match at most one row)."""
    conn = _connection(model)
    meta = model._meta
    cond, params = _where(conn, meta, where)
    return Sub(f"SELECT {conn.ops.quote_name(meta.get_field(field).column)} FROM {conn.ops.quote_name(meta.db_table)} "
               f"WHERE {' AND '.join(cond)}", params)


def _where(conn, meta, where: dict[str, Any], prefix: str = "") -> tuple[list[str], list]:
    q = conn.ops.quote_name
    sql, params = [], []
    for name, value in where.items():
        f = meta.get_field(name)
        if type(value) is Sub:
            sql.append(f"{prefix}{q(f.column)} = ({value.sql})")
            params.extend(value.params)
        else:
            sql.append(f"{prefix}{q(f.column)} = %s")
            params.append(f.get_db_prep_value(value, conn))
    return sql, params


def update_by(model: type[Model], key: dict[str, Any], values: dict[str, Any], *,
              copy_fields: tuple[str, ...] = (), copy_from: dict[str, Any] | None = None,
              expressions: dict[str, tuple[str, list]] | None = None, returning: tuple[str, ...] = (),
              relax_commit: bool = False, with_statements: Iterable[tuple[str, list]] = ()) -> tuple | None:
    """``UPDATE`` ``model``'s rows whose fields equal ``key`` (field names or attnames) with
    ``values`` (Python values), and each of ``copy_fields`` with that field of the row matching
    ``copy_from``, copied inside the database (a subquery; the value is never read here).

    ``expressions``: field name -> ``(sql, params)``, a SQL expression (a scalar subquery, say) the
    field is set to, evaluated by the database in the same statement. ``returning``: field names
    whose new values (as the driver gives them: a boolean is 0/1 on SQLite) come back, from the
    first updated row, as a tuple (None when no row matched): ``UPDATE … RETURNING`` where the
    backend has it, else a ``SELECT`` by ``key`` right after (the same values inside the caller's
    transaction). ``relax_commit``: on PostgreSQL, the statement also lets its transaction commit
    without waiting for the WAL flush, as :func:`commit_without_flush_wait` does, and under the
    same rule (only a transaction this statement is the whole of, or the outermost ``atomic``
    block; no extra round trip: ``set_config`` in the ``RETURNING`` list, evaluated once per
    updated row). ``with_statements``: data-modifying statements (``(sql, params)``, e.g.
    :func:`copy_rows_sql`) run in the same statement as common table expressions, so that the
    whole write is one round trip and, in autocommit, one transaction: PostgreSQL only
    (:func:`one_statement_writes`; ``NotImplementedError`` elsewhere); they see the table as it
    was before the statement."""
    conn = _connection(model)
    meta = model._meta
    q = conn.ops.quote_name
    table = q(meta.db_table)
    sets, params = [], []
    head, head_params = "", []
    for i, (sql, sparams) in enumerate(with_statements):
        if not one_statement_writes(model):
            raise NotImplementedError(f"{conn.vendor} has no data-modifying WITH")
        head += ("WITH " if not head else ", ") + f"w{i} AS ({sql})"
        head_params.extend(sparams)
    for name, value in values.items():
        f = meta.get_field(name)
        sets.append(f"{q(f.column)} = %s")
        params.append(_preparer(f, conn)(value))
    for name, (sql, sparams) in (expressions or {}).items():
        sets.append(f"{q(meta.get_field(name).column)} = {sql}")
        params.extend(sparams)
    if copy_fields:
        src_where, src_params = _where(conn, meta, copy_from or {})
        for name in copy_fields:
            col = q(meta.get_field(name).column)
            sets.append(f"{col} = (SELECT {col} FROM {table} WHERE {' AND '.join(src_where)})")
            params.extend(src_params)
    where, wparams = _where(conn, meta, key)
    sql = f"{head + ' ' if head else ''}UPDATE {table} SET {', '.join(sets)} WHERE {' AND '.join(where)}"
    back = [q(meta.get_field(n).column) for n in returning]
    relax = _RELAX_SQL if relax_commit and _may_relax(conn) else ""
    inline = bool(back or relax) and conn.features.can_return_columns_from_insert
    if inline:
        sql += " RETURNING " + ", ".join(back + ([relax] if relax else []))
    with conn.cursor() as cur:
        cur.execute(sql, head_params + params + wparams)
        if not returning:
            return None
        if not inline:  # no RETURNING on this backend (SQLite < 3.35): read the row back
            cur.execute(f"SELECT {', '.join(back)} FROM {table} WHERE {' AND '.join(where)}", wparams)
        row = cur.fetchone()
    return None if row is None else tuple(row[:len(back)])


def update_rows(model: type[Model], key_fields: list[str], value_fields: list[str],
                rows: Iterable[tuple[list, list]]) -> None:
    """One ``UPDATE`` per row, sent in one ``executemany``: each row is ``(key values, values)``
    in the order of ``key_fields`` and ``value_fields`` (``bulk_update``'s single CASE statement
    is slower for a handful of rows)."""
    conn = _connection(model)
    meta = model._meta
    q = conn.ops.quote_name
    keys = [meta.get_field(n) for n in key_fields]
    fields = [meta.get_field(n) for n in value_fields]
    sql = (f"UPDATE {q(meta.db_table)} SET " + ", ".join(f"{q(f.column)} = %s" for f in fields)
           + " WHERE " + " AND ".join(f"{q(k.column)} = %s" for k in keys))
    preps = [_preparer(f, conn) for f in fields]
    params = [[p(v) for p, v in zip(preps, vals)]
              + [k.get_db_prep_value(v, conn) for k, v in zip(keys, key_vals)] for key_vals, vals in rows]
    if params:
        with conn.cursor() as cur:
            cur.executemany(sql, params)


def copy_rows_sql(model: type[Model], columns: list[str], *, where: dict[str, Any],
                  values: dict[str, Any]) -> tuple[str, list]:
    """The statement of :func:`copy_rows` and its parameters, not run (for
    ``update_by(with_statements=...)``)."""
    conn = _connection(model)
    meta = model._meta
    q = conn.ops.quote_name
    set_fields = [meta.get_field(n) for n in values]
    copied = [q(meta.get_field(n).column) for n in columns]
    cond, cparams = _where(conn, meta, where)
    sql = (f"INSERT INTO {q(meta.db_table)} ({', '.join([q(f.column) for f in set_fields] + copied)}) "
           f"SELECT {', '.join(['%s'] * len(set_fields) + copied)} FROM {q(meta.db_table)} "
           f"WHERE {' AND '.join(cond)}")
    return sql, [f.get_db_prep_save(v, conn) for f, v in zip(set_fields, values.values())] + cparams


def copy_rows(model: type[Model], columns: list[str], *, where: dict[str, Any], values: dict[str, Any]) -> None:
    """``INSERT … SELECT``: copy ``model``'s rows matching ``where`` inside the database, their
    ``columns`` as they are and the fields of ``values`` set to those Python values."""
    sql, params = copy_rows_sql(model, columns, where=where, values=values)
    with _connection(model).cursor() as cur:
        cur.execute(sql, params)


def existing_values(model: type[Model], column: str, values: Iterable[Any]) -> set:
    """The subset of ``values`` that ``column`` (a field name) of ``model``'s rows holds, as the
    driver returns them: one ``SELECT … WHERE column IN (…)`` per batch of the backend's
    parameter limit (an index on the column keeps it a lookup per value)."""
    values = list(values)
    if not values:
        return set()
    conn = _connection(model)
    meta = model._meta
    q = conn.ops.quote_name
    f = meta.get_field(column)
    col = q(f.column)
    batch = max(1, conn.ops.bulk_batch_size([f], values))
    found = set()
    with conn.cursor() as cur:
        for start in range(0, len(values), batch):
            chunk = [f.get_db_prep_value(v, conn) for v in values[start:start + batch]]
            cur.execute(f"SELECT {col} FROM {q(meta.db_table)} WHERE {col} IN ({', '.join(['%s'] * len(chunk))})", chunk)
            found.update(r[0] for r in cur.fetchall())
    return found


def newest_row_sql(model: type[Model], select: str, *, where: dict[str, Any], exclude_pk: Any = None,
                   select_params: list | None = None) -> tuple[str, list]:
    """``SELECT <select> FROM`` ``model``'s table ``WHERE`` the fields equal ``where`` (and the
    primary key is not ``exclude_pk``) ``ORDER BY`` the primary key descending ``LIMIT 1``, and its
    parameters (``select_params`` first): the row :func:`newest_row` reads, as text a caller can
    use as a scalar subquery. ``select``: SQL over the table's quoted columns."""
    conn = _connection(model)
    meta = model._meta
    q = conn.ops.quote_name
    cond, params = _where(conn, meta, where)
    pk = q(meta.pk.column)
    if exclude_pk is not None:
        cond.append(f"{pk} <> %s")
        params.append(exclude_pk)
    sql = f"SELECT {select} FROM {q(meta.db_table)} WHERE {' AND '.join(cond)} ORDER BY {pk} DESC LIMIT 1"
    return sql, list(select_params or []) + params


def newest_row(model: type[Model], columns: tuple[str, ...], *, where: dict[str, Any],
               exclude_pk: Any = None) -> tuple | None:
    """The values of ``columns`` (field names; JSON fields decoded, others as the driver gives them)
    of the row matching ``where``
    with the largest primary key (other than ``exclude_pk``), or None."""
    conn = _connection(model)
    q = conn.ops.quote_name
    fields = [model._meta.get_field(c) for c in columns]
    sql, params = newest_row_sql(model, ", ".join(q(f.column) for f in fields), where=where, exclude_pk=exclude_pk)
    with conn.cursor() as cur:
        cur.execute(sql, params)
        row = cur.fetchone()
    if row is None:
        return None
    return tuple(f.from_db_value(v, None, conn) if hasattr(f, "from_db_value") else v for f, v in zip(fields, row))


def insert_instance(obj: Model, *, relax_commit: bool = False) -> Model:
    """``INSERT`` one new model instance, as ``obj.save()`` on a new object does without signals:
    every local concrete field (but an unset auto primary key), ``pre_save`` applied (so
    ``auto_now_add`` fields get their time) and prepared by the field. Sets ``obj``'s primary key
    (``RETURNING`` where the backend has it, else the backend's last insert id) and its state
    (saved, database alias). Returns ``obj``. For models without ``pre_save``/``post_save``
    receivers only: none are sent. ``relax_commit``: as in :func:`update_by` (PostgreSQL; the
    ``RETURNING`` list also holds ``set_config``; only with an auto primary key, which ``RETURNING``
    brings back)."""
    model = type(obj)
    conn = _connection(model)
    meta = model._meta
    pk_set = obj.pk is not None
    plan = _INSERT_PLANS.get((conn.alias, model, pk_set))
    if plan is None:
        q = conn.ops.quote_name
        fields = [f for f in meta.local_concrete_fields
                  if (pk_set or f is not meta.auto_field) and not getattr(f, "generated", False)]
        sql = (f"INSERT INTO {q(meta.db_table)} ({', '.join(q(f.column) for f in fields)}) VALUES ("
               + ", ".join(["%s"] * len(fields)) + ")")
        returning = None
        if not pk_set and conn.features.can_return_columns_from_insert:
            r_sql, _r_params = conn.ops.return_insert_columns([meta.pk])
            sql += " " + r_sql
            returning = True
        plan = _INSERT_PLANS[(conn.alias, model, pk_set)] = (fields, sql, returning)
    fields, sql, returning = plan
    if relax_commit and returning and _may_relax(conn):
        sql += ", " + _RELAX_SQL
    params = [_preparer(f, conn)(f.pre_save(obj, True)) for f in fields]
    with conn.cursor() as cur:
        cur.execute(sql, params)
        if not pk_set:
            pk = cur.fetchone()[0] if returning else conn.ops.last_insert_id(cur, meta.db_table, meta.pk.column)
            setattr(obj, meta.pk.attname, pk)
    obj._state.adding = False
    obj._state.db = conn.alias
    return obj


_INSERT_PLANS: dict = {}
_SELECT_PLANS: dict = {}


def _select_plan(conn, model, fields, related, where_names, order_by):
    """``where_names``: ``(field name, Sub's SQL or None)`` pairs."""
    key = (conn.alias, model, fields, related, where_names, order_by)
    plan = _SELECT_PLANS.get(key)
    if plan is not None:
        return plan
    q = conn.ops.quote_name
    meta = model._meta
    wanted = {meta.get_field(f) for f in fields} | {meta.pk}
    # in the model's field order: ``Model.from_db`` fills deferred fields in by that order
    own = [f for f in meta.concrete_fields if not fields or f in wanted]
    parts = [(None, model, own)]
    joins = []
    for i, name in enumerate(related, 1):
        fk = meta.get_field(name)
        if not (fk.many_to_one and fk.concrete):
            raise ValueError(f"{model.__name__}.{name} is not a foreign key")
        rmodel = fk.related_model
        joins.append(f"{'LEFT OUTER JOIN' if fk.null else 'INNER JOIN'} {q(rmodel._meta.db_table)} t{i} "
                     f"ON t{i}.{q(fk.target_field.column)} = t0.{q(fk.column)}")
        parts.append((fk, rmodel, list(rmodel._meta.concrete_fields)))
    cols, convs, slices, start = [], [], [], 0
    for i, (fk, m, flds) in enumerate(parts):
        for f in flds:
            cols.append(f"t{i}.{q(f.column)}")
            col = f.get_col(f"t{i}")
            # the ORM's own conversion: the backend's converters, then the field's (SQLCompiler.get_converters)
            found = conn.ops.get_db_converters(col) + col.get_db_converters(conn)
            if found:
                convs.append((len(cols) - 1, found, col))
        slices.append((fk, m, [f.attname for f in flds], start, start + len(flds), flds.index(m._meta.pk)))
        start += len(flds)
    where = [f"t0.{q(meta.get_field(n).column)} = " + (f"({sub})" if sub is not None else "%s") for n, sub in where_names]
    order = []
    for name in order_by:
        desc = name.startswith("-")
        order.append(f"t0.{q(meta.get_field(name.lstrip('-')).column)}{' DESC' if desc else ' ASC'}")
    sql = (f"SELECT {', '.join(cols)} FROM {q(meta.db_table)} t0 {' '.join(joins)}"
           + (f" WHERE {' AND '.join(where)}" if where else "")
           + (f" ORDER BY {', '.join(order)}" if order else ""))
    plan = _SELECT_PLANS[key] = (sql, convs, slices, [meta.get_field(n) for n, _sub in where_names])
    return plan


def load_instances(model: type[Model], *, where: dict[str, Any], fields: tuple[str, ...] = (),
                   related: tuple[str, ...] = (), order_by: tuple[str, ...] = ()) -> list[Model]:
    """Model instances of the rows matching ``where`` (field = value, ANDed), in one ``SELECT``
    built once per shape and connection: what ``model.objects.select_related(*related)
    .only(*fields).filter(**where).order_by(*order_by)`` returns (``fields`` empty: every
    concrete field; the primary key is always loaded; others deferred as ``only`` defers them),
    converted by the same backend and field converters as the ORM's. ``related``: forward
    foreign keys of ``model`` whose rows come along (every concrete field; cached on the instance
    as ``select_related`` caches them; a null key gives None). ``order_by``: field names, ``-``
    for descending. A ``where`` value may be a :class:`Sub` (the database finds it)."""
    conn = _connection(model)
    sql, params, convs, slices = _load_query(conn, model, where, fields, related, order_by)
    with conn.cursor() as cur:
        cur.execute(sql, params)
        return _instances(conn, cur.fetchall(), convs, slices)


def load_many(*queries: dict) -> list[list[Model]]:
    """:func:`load_instances` of each of ``queries`` (its keyword arguments, with ``model``), in
    one round trip on PostgreSQL (the statements joined by ``;``: the client-side binding cursor
    sends them as one simple query and reads their results in turn), one after the other
    elsewhere (SQLite's cursor runs one statement a call). A ``where`` value may be a
    :class:`Sub`, so that a later query can use what an earlier one would have read. All on one
    database."""
    built = []
    for qd in queries:
        qd = dict(qd)
        model = qd.pop("model")
        conn = _connection(model)
        built.append((conn, _load_query(conn, model, qd.pop("where"), tuple(qd.pop("fields", ())),
                                        tuple(qd.pop("related", ())), tuple(qd.pop("order_by", ())))))
        if qd or conn is not built[0][0]:
            raise ValueError("load_many: unknown arguments or several databases")
    if not built:
        return []
    conn = built[0][0]
    out = []
    with conn.cursor() as cur:
        if conn.vendor == "postgresql" and len(built) > 1:
            cur.execute("; ".join(b[1][0] for b in built), [p for b in built for p in b[1][1]])
            for i, (_c, (_sql, _params, convs, slices)) in enumerate(built):
                if i:
                    cur.nextset()
                out.append(_instances(conn, cur.fetchall(), convs, slices))
            return out
        for _c, (sql, params, convs, slices) in built:
            cur.execute(sql, params)
            out.append(_instances(conn, cur.fetchall(), convs, slices))
    return out


def _load_query(conn, model, where, fields, related, order_by):
    sql, convs, slices, where_fields = _select_plan(
        conn, model, tuple(fields), tuple(related),
        tuple((n, v.sql if type(v) is Sub else None) for n, v in where.items()), tuple(order_by))
    params = []
    for f, v in zip(where_fields, where.values()):
        if type(v) is Sub:
            params.extend(v.params)
        else:
            params.append(f.get_db_prep_value(v, conn))
    return sql, params, convs, slices


def _instances(conn, rows, convs, slices) -> list[Model]:
    out = []
    for row in rows:
        row = list(row)
        for pos, found, col in convs:
            value = row[pos]
            for converter in found:
                value = converter(value, col, conn)
            row[pos] = value
        obj = None
        for fk, m, attnames, a, b, pk_at in slices:
            values = row[a:b]
            if fk is None:
                obj = m.from_db(conn.alias, attnames, values)
            else:  # a null foreign key (LEFT JOIN without a match) caches None, as select_related does
                fk.set_cached_value(obj, None if values[pk_at] is None else m.from_db(conn.alias, attnames, values))
        out.append(obj)
    return out


def commit_without_flush_wait(model: type[Model]) -> None:
    """Inside a transaction (``transaction.atomic``) on ``model``'s database: let its COMMIT return
    before the server has flushed its WAL to disk (PostgreSQL's ``SET LOCAL synchronous_commit =
    off``, this transaction only); a no-op on other backends. On this machine a synchronous commit
    costs about 4 ms (the WAL's fdatasync) against 0.2 ms without the wait (measured with 200
    single-row INSERTs each way). What it trades: after a crash of the database server (not of
    the client) the last transactions so committed, up to three ``wal_writer_delay`` (0.6 s by
    default), may be lost as a whole; the database stays consistent. Use it only for writes that
    can be redone from what stays (see ``replay.services.runs``: a replay's results). Only the
    outermost ``atomic`` block decides: called inside a caller's transaction it changes nothing
    (the caller's commit keeps its guarantee). ``RuntimeError`` outside a transaction."""
    conn = _connection(model)
    if not conn.in_atomic_block:
        raise RuntimeError("commit_without_flush_wait() needs a transaction")
    if conn.vendor == "postgresql" and len(conn.atomic_blocks) == 1:
        with conn.cursor() as cur:
            cur.execute("SET LOCAL synchronous_commit = off")


#: PostgreSQL's ``SET LOCAL synchronous_commit = off`` as an expression (``is_local``: this
#: transaction only), for a ``RETURNING`` list
_RELAX_SQL = "set_config('synchronous_commit', 'off', true)"


def _may_relax(conn) -> bool:
    """A PostgreSQL connection whose next statement may relax its transaction's commit: the
    statement is a transaction of its own (autocommit, outside ``atomic``), or it runs in the
    outermost ``atomic`` block (the rule of :func:`commit_without_flush_wait`)."""
    if conn.vendor != "postgresql":
        return False
    if conn.in_atomic_block:
        return len(conn.atomic_blocks) == 1
    return conn.get_autocommit()


def one_statement_writes(model: type[Model]) -> bool:
    """Whether ``model``'s database runs data-modifying statements inside another statement
    (``WITH w AS (INSERT …) UPDATE …``; ``update_by(with_statements=...)``): PostgreSQL yes,
    SQLite no."""
    return _connection(model).vendor == "postgresql"
