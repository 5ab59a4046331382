"""Keyset (cursor) pagination for list pages and API lists: one query per page at any depth.

Offset pagination (``LIMIT n OFFSET k``) reads and throws away ``k`` rows, so page 2,000 of a
100,000-row list is slow, and rows shift between pages while people add tasks. Keyset pagination
remembers the last row shown — its sort key and id — and asks for the rows after it:
``WHERE (key, id) > (last_key, last_id) ORDER BY key, id LIMIT n + 1``. With an index on
``(key, id)`` each page costs the same, and a page never repeats or skips a row that existed when the
first page was read. The id breaks ties, so any sort key (even one with duplicates, or a nullable
one) gives a total order.

API
---
``paginate(request_or_params, queryset, *, key="-id", page_size=50, max_page_size=200) -> Page``
    The page that the query parameters ``cursor`` and ``page_size`` of ``request.GET`` (or of a
    plain dict) ask for; the first page without ``cursor``. ``key`` is a field name or a lookup
    across relations (``"created_at"``, ``"-dora_score"``, ``"agent__name"``); a leading ``-`` sorts
    descending. The id (``pk``) is always the tie-breaker, in the same direction. Nulls sort last
    in both directions. Raises :class:`InvalidCursor` (a ``ValueError``; HTTP 400) for a
    cursor that was tampered with, made for another key, or is not a cursor at all.
``CursorPagination``
    The same for DRF views: every list endpoint of the API (``pagination_class``; see the class).
``KeysetPaginator(queryset, *, key="-id", page_size=50)`` with ``.page(cursor=None) -> Page``
    The same without a request.
``Page``
    ``items`` (the rows; iterating the page iterates them), ``next_cursor`` / ``prev_cursor``
    (opaque strings, or None at either end), ``has_next`` / ``has_prev``, ``page_size``, ``key``,
    ``next_query`` / ``prev_query`` (the request's query string with ``cursor`` replaced — other
    filters kept — for ``<a href="?{{ page.next_query }}">``), and ``as_dict(serializer)`` for JSON:
    ``{"results": [...], "next_cursor", "prev_cursor", "page_size"}``.

Cursors are signed (``django.core.signing``, salted with the key) base64 text: clients cannot read
or forge the position, only hand it back. A cursor names a position, not a page number, so there is
no total count and no "jump to page 40" — filter instead. Deleting the row a cursor points at does
no harm: the next page starts after where that row was.

Use (a view; the template links with ``?{{ page.next_query }}``)::

    from studio.pagination import InvalidCursor, paginate

    def task_list_page(request):
        try:
            page = paginate(request, task_list_queryset(...), key="-id", page_size=50)
        except InvalidCursor as exc:
            return HttpResponseBadRequest(str(exc))
        return render(request, "frontend/task_list.html", {"page": page})

Queries: one per page (``page_size + 1`` rows are read to know whether a next page exists; with
``select_related`` on the queryset no query per row). Index the sort key together with id for large
tables (``models.Index(fields=["status", "id"])``); ``-id`` needs nothing more than the primary key.

Source of the method: the "seek method" (Markus Winand, *SQL Performance Explained*, ch. 7,
"Paging Through Results"), as also used by DRF's ``CursorPagination``.
"""
from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from django.core import signing
from django.db.models import F, Q, QuerySet
from rest_framework.pagination import BasePagination
from rest_framework.response import Response

from kernel.errors import InvalidInput

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 200
_SALT = "studio.pagination"


class InvalidCursor(InvalidInput):
    """The ``cursor`` parameter is not a cursor this list issued; the message says why (a
    ``ValueError``; the API answers 400 through ``studio.errors``)."""


@dataclass
class Page:
    """One page of a keyset-paginated list (see the module docstring)."""

    items: list
    next_cursor: str | None
    prev_cursor: str | None
    page_size: int
    key: str
    params: dict = field(default_factory=dict)

    def __iter__(self):
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

    @property
    def has_next(self) -> bool:
        return self.next_cursor is not None

    @property
    def has_prev(self) -> bool:
        return self.prev_cursor is not None

    def _query(self, cursor: str | None) -> str:
        if cursor is None:
            return ""
        params = {k: v for k, v in self.params.items() if k != "cursor"}
        params["cursor"] = cursor
        return urlencode(params, doseq=True)

    @property
    def next_query(self) -> str:
        """The query string of the next page ("" on the last page)."""
        return self._query(self.next_cursor)

    @property
    def prev_query(self) -> str:
        """The query string of the previous page ("" on the first page)."""
        return self._query(self.prev_cursor)

    def as_dict(self, serialize: Callable[[Any], Any] = lambda x: x) -> dict:
        """``{"results": [serialize(item), ...], "next_cursor", "prev_cursor", "page_size"}``."""
        return {"results": [serialize(i) for i in self.items], "next_cursor": self.next_cursor,
                "prev_cursor": self.prev_cursor, "page_size": self.page_size}


def _encode_value(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return {"dt": value.isoformat()}
    if isinstance(value, dt.date):
        return {"d": value.isoformat()}
    if isinstance(value, decimal.Decimal):
        return {"dec": str(value)}
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise TypeError(f"keyset pagination cannot order by a value of type {type(value).__name__}")


def _decode_value(value: Any) -> Any:
    if isinstance(value, dict):
        if "dt" in value:
            return dt.datetime.fromisoformat(value["dt"])
        if "d" in value:
            return dt.date.fromisoformat(value["d"])
        if "dec" in value:
            return decimal.Decimal(value["dec"])
        raise InvalidCursor("cursor: unknown value encoding")
    return value


def _value_of(obj: Any, path: str) -> Any:
    """``obj.a.b`` for the lookup ``a__b`` (None when a relation on the way is empty)."""
    for part in path.split("__"):
        if obj is None:
            return None
        obj = obj.get(part) if isinstance(obj, Mapping) else getattr(obj, part)
    return obj


class KeysetPaginator:
    """Pages of ``queryset`` ordered by ``key`` then id; see the module docstring.

    ``key``: a field or a lookup (``"-created_at"``, ``"agent__name"``, ``"id"``). ``page_size``:
    rows per page (1 … ``MAX_PAGE_SIZE``). Raises ``ValueError`` for a page size out of range.
    """

    def __init__(self, queryset: QuerySet, *, key: str = "-id", page_size: int = DEFAULT_PAGE_SIZE,
                 max_page_size: int = MAX_PAGE_SIZE):
        if not 1 <= int(page_size) <= max_page_size:
            raise ValueError(f"page_size: {page_size} is not between 1 and {max_page_size}")
        self.queryset = queryset
        self.key = key
        self.desc = key.startswith("-")
        self.field = key.lstrip("-")
        self.page_size = int(page_size)
        self.pk_attr = queryset.model._meta.pk.attname
        self.unique_key = self.field in ("pk", self.pk_attr)

    # --- cursors ---------------------------------------------------------------------------------
    def _cursor(self, obj: Any, direction: str) -> str:
        position = {"pk": _value_of(obj, self.pk_attr), "dir": direction}
        if not self.unique_key:
            position["v"] = _encode_value(_value_of(obj, self.field))
        return signing.dumps(position, salt=f"{_SALT}:{self.key}", compress=True)

    def _read(self, cursor: str) -> dict:
        try:
            position = signing.loads(cursor, salt=f"{_SALT}:{self.key}")
        except signing.BadSignature as exc:
            raise InvalidCursor(f"cursor: not a cursor of this list (ordered by {self.key}); start from the first page") from exc
        if not isinstance(position, dict) or position.get("dir") not in ("next", "prev") or "pk" not in position:
            raise InvalidCursor("cursor: malformed position")
        if not self.unique_key and "v" not in position:
            raise InvalidCursor("cursor: malformed position")
        return position

    # --- queries ---------------------------------------------------------------------------------
    def _ordering(self, reverse: bool) -> list:
        desc = self.desc != reverse
        if self.unique_key:
            return ["-pk" if desc else "pk"]
        nulls = {"nulls_first": True} if reverse else {"nulls_last": True}
        key = F(self.field).desc(**nulls) if desc else F(self.field).asc(**nulls)
        return [key, "-pk" if desc else "pk"]

    def _after(self, position: dict, reverse: bool) -> Q:
        """Rows strictly after ``position`` in the order (before it when ``reverse``)."""
        desc = self.desc != reverse
        op = "lt" if desc else "gt"
        pk = position["pk"]
        if self.unique_key:
            return Q(**{f"pk__{op}": pk})
        value = _decode_value(position["v"])
        f = self.field
        # nulls come last in the forward order, first in the reverse one
        if value is None:
            if reverse:  # before a null row: every non-null row, and nulls with a smaller position
                return Q(**{f"{f}__isnull": False}) | Q(**{f"{f}__isnull": True, f"pk__{op}": pk})
            return Q(**{f"{f}__isnull": True, f"pk__{op}": pk})
        q = Q(**{f"{f}__{op}": value}) | Q(**{f: value, f"pk__{op}": pk})
        if not reverse:
            q |= Q(**{f"{f}__isnull": True})
        return q

    def page(self, cursor: str | None = None, params: Mapping | None = None) -> Page:
        """The first page, or the page a cursor of this paginator points at (one query)."""
        position = self._read(cursor) if cursor else None
        reverse = bool(position and position["dir"] == "prev")
        qs = self.queryset.order_by(*self._ordering(reverse))
        if position is not None:
            qs = qs.filter(self._after(position, reverse))
        rows = list(qs[: self.page_size + 1])
        more = len(rows) > self.page_size
        rows = rows[: self.page_size]
        if reverse:
            rows.reverse()
            has_prev, has_next = more, True
        else:
            has_prev, has_next = position is not None, more
        next_cursor = self._cursor(rows[-1], "next") if rows and has_next else None
        prev_cursor = self._cursor(rows[0], "prev") if rows and has_prev else None
        if reverse and not rows:  # nothing before: the caller went back past the start
            next_cursor = None
        return Page(items=rows, next_cursor=next_cursor, prev_cursor=prev_cursor, page_size=self.page_size,
                    key=self.key, params=dict(params or {}))


def _params(request_or_params) -> dict:
    get = getattr(request_or_params, "GET", request_or_params)
    if hasattr(get, "lists"):
        return {k: (v if len(v) > 1 else v[0]) for k, v in get.lists()}
    return dict(get or {})


def paginate(request_or_params, queryset: QuerySet, *, key: str = "-id", page_size: int = DEFAULT_PAGE_SIZE,
             max_page_size: int = MAX_PAGE_SIZE) -> Page:
    """The page that ``?cursor=…&page_size=…`` asks for (see the module docstring).

    ``page_size`` from the request overrides the argument, within 1 … ``max_page_size``; a
    non-number raises :class:`InvalidCursor` too (so one ``except`` gives the 400).
    """
    params = _params(request_or_params)
    size = params.get("page_size") or page_size
    try:
        size = int(size)
    except (TypeError, ValueError) as exc:
        raise InvalidCursor(f"page_size: '{size}' is not a whole number") from exc
    if not 1 <= size <= max_page_size:
        raise InvalidCursor(f"page_size: {size} is not between 1 and {max_page_size}")
    paginator = KeysetPaginator(queryset, key=key, page_size=size, max_page_size=max_page_size)
    return paginator.page(params.get("cursor") or None, params=params)


class CursorPagination(BasePagination):
    """DRF pagination over :func:`paginate`: every list endpoint of the API pages with it.

    A view sets ``pagination_class = CursorPagination`` and ``cursor_key`` (the sort key, default
    ``"-id"``) and answers ``self.paginated(queryset, Serializer)`` (``studio.api_views.APIView``).
    The body (one shape for every list)::

        {"results": [...], "next_cursor": str|None, "prev_cursor": str|None, "page_size": int,
         "next": url|None, "previous": url|None}

    ``next``/``previous`` are the request's URL with ``cursor`` replaced (other filters kept).
    ``?page_size=`` 1 … :data:`MAX_PAGE_SIZE` (default :data:`DEFAULT_PAGE_SIZE`); a bad cursor or
    page size is a 400 (:class:`InvalidCursor`). One query per page. The OpenAPI schema documents
    the parameters and the body (drf-spectacular calls the two ``get_*schema*`` methods).
    """

    page_size = DEFAULT_PAGE_SIZE
    max_page_size = MAX_PAGE_SIZE
    key = "-id"

    def paginate_queryset(self, queryset, request, view=None) -> list:
        """The rows of the page ``request`` asks for (one query); remembers the page."""
        self.request = request
        key = getattr(view, "cursor_key", None) or self.key
        self.page = paginate(request.query_params, queryset, key=key, page_size=self.page_size,
                             max_page_size=self.max_page_size)
        return self.page.items

    def _url(self, query: str) -> str | None:
        if not query:
            return None
        return self.request.build_absolute_uri(self.request.path) + "?" + query

    def get_paginated_response(self, data) -> Response:
        """The one list body (see the class docstring) around the serialized rows ``data``."""
        page = self.page
        return Response({"results": data, "next_cursor": page.next_cursor, "prev_cursor": page.prev_cursor,
                         "page_size": page.page_size, "next": self._url(page.next_query),
                         "previous": self._url(page.prev_query)})

    def get_paginated_response_schema(self, schema: dict) -> dict:
        cursor = {"type": "string", "nullable": True, "description": "opaque; pass it back as ?cursor="}
        url = {"type": "string", "format": "uri", "nullable": True}
        return {"type": "object", "required": ["results", "next_cursor", "prev_cursor", "page_size"],
                "properties": {"results": schema, "next_cursor": cursor, "prev_cursor": cursor,
                               "page_size": {"type": "integer"}, "next": url, "previous": url}}

    def get_schema_operation_parameters(self, view) -> list[dict]:
        return [
            {"name": "cursor", "required": False, "in": "query", "schema": {"type": "string"},
             "description": "the next_cursor or prev_cursor of the previous page (first page without)"},
            {"name": "page_size", "required": False, "in": "query",
             "schema": {"type": "integer", "minimum": 1, "maximum": self.max_page_size, "default": self.page_size},
             "description": "rows per page"},
        ]


def iterate(queryset: QuerySet, *, key: str = "id", batch_size: int = 2000) -> Iterable:
    """Every row of ``queryset`` in ``key`` order, read ``batch_size`` rows a query (exports and
    batch jobs: bounded memory, no long-running cursor, no OFFSET)."""
    paginator = KeysetPaginator(queryset, key=key, page_size=batch_size, max_page_size=max(batch_size, MAX_PAGE_SIZE))
    page = paginator.page()
    while True:
        yield from page.items
        if not page.has_next:
            return
        page = paginator.page(page.next_cursor)


__all__ = ["CursorPagination", "InvalidCursor", "KeysetPaginator", "Page", "paginate", "iterate", "DEFAULT_PAGE_SIZE", "MAX_PAGE_SIZE"]
