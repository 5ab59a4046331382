"""The base class of the studio's API views: DRF's ``APIView`` with a JSON parser that refuses,
with a 400, a body nested too deeply to handle.

DRF's ``JSONParser`` turns only ``ValueError`` into a 400; ``[[[[…`` nested some thousand levels
deep makes ``json.load`` raise ``RecursionError`` (a 500), and a few hundred levels parse but crash
later when the value is stored or rendered. No request of the studio needs more than a dozen levels
(a GeoJSON polygon in an answer field is the deepest: content → answer_spec → source → coordinates
→ ring → position).
"""
from __future__ import annotations

from rest_framework import views
from rest_framework.exceptions import ParseError
from rest_framework.parsers import FormParser, JSONParser, MultiPartParser

from kernel.taskfile import MAX_JSON_DEPTH as KERNEL_MAX_JSON_DEPTH
from kernel.taskfile import json_problem

#: the deepest nesting of arrays and objects a JSON body may have: the one limit of
#: ``kernel.taskfile`` (``MAX_JSON_DEPTH``), which also bounds JSON read from files
MAX_JSON_DEPTH = KERNEL_MAX_JSON_DEPTH


def has_nul(value) -> bool:
    """True when a string (or a key) anywhere in a parsed JSON value holds a NUL character, which
    PostgreSQL text and JSON columns cannot store. Counted without recursion."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            if "\x00" in v:
                return True
        elif isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return False


def json_depth(value, limit: int = MAX_JSON_DEPTH) -> int:
    """Nesting depth of a parsed JSON value (a scalar is 0, ``[]`` 1, ``[[1]]`` 2), counted without
    recursion; stops counting past ``limit + 1``."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, (list, dict)):
            d += 1
            deepest = max(deepest, d)
            if deepest > limit:
                return deepest
            stack.extend((c, d) for c in (v.values() if isinstance(v, dict) else v))
    return deepest


class BoundedJSONParser(JSONParser):
    """``JSONParser`` that answers 400 (``ParseError``) for a body nested deeper than
    :data:`MAX_JSON_DEPTH` levels instead of failing later with ``RecursionError``, for a NUL
    character in a string, and for a number no JSON column stores (``1e309`` overflows to
    infinity), naming where (``kernel.taskfile.json_problem``: ``body.content.x: inf …``)."""

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError(f"JSON parse error - nested deeper than {MAX_JSON_DEPTH} levels") from None
        if json_depth(data) > MAX_JSON_DEPTH:
            raise ParseError(f"JSON parse error - nested deeper than {MAX_JSON_DEPTH} levels")
        if has_nul(data):
            raise ParseError("JSON parse error - a string holds a NUL character (\\u0000), which cannot be stored")
        problem = json_problem(data, "body")  # what is left: a number too large for a float (1e309 reads as inf)
        if problem:
            raise ParseError(f"JSON parse error - {problem}")
        return data


def _refuse_nul_in_form(data) -> None:
    """A form's keys and values go to the same columns as JSON's: the same NUL guard (a form body
    is flat, so the depth guard has nothing to count)."""
    for key, values in data.lists():
        if "\x00" in key or any(isinstance(v, str) and "\x00" in v for v in values):
            raise ParseError("form parse error - a field holds a NUL character (\\u0000), which cannot be stored")


class BoundedFormParser(FormParser):
    """``FormParser`` with :class:`BoundedJSONParser`'s NUL guard (issue 15: form-encoded bodies
    went around it)."""

    def parse(self, stream, media_type=None, parser_context=None):
        data = super().parse(stream, media_type, parser_context)
        _refuse_nul_in_form(data)
        return data


class BoundedMultiPartParser(MultiPartParser):
    """``MultiPartParser`` with the same NUL guard on its fields (files are not text)."""

    def parse(self, stream, media_type=None, parser_context=None):
        result = super().parse(stream, media_type, parser_context)
        _refuse_nul_in_form(result.data)
        return result


class APIView(views.APIView):
    """DRF's ``APIView`` with :class:`BoundedJSONParser`, :class:`BoundedFormParser` and
    :class:`BoundedMultiPartParser` in place of DRF's default parsers."""

    parser_classes = [BoundedJSONParser, BoundedFormParser, BoundedMultiPartParser]
    #: a list endpoint sets ``studio.pagination.CursorPagination`` (and ``cursor_key``)
    pagination_class = None
    #: the sort key of the list (``studio.pagination.paginate``'s ``key``)
    cursor_key = "-id"

    def paginated(self, queryset, serializer_class, **serializer_kwargs):
        """The page of ``queryset`` the request asks for, serialized with ``serializer_class``
        (``many=True``), in the one list body of ``studio.pagination.CursorPagination``.
        Raises ``studio.pagination.InvalidCursor`` (400) for a bad cursor or page size."""
        paginator = self.pagination_class()
        rows = paginator.paginate_queryset(queryset, self.request, view=self)
        return paginator.get_paginated_response(serializer_class(rows, many=True, **serializer_kwargs).data)

    def handle_exception(self, exc):
        """A body over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` (``STUDIO_MAX_UPLOAD_BYTES``): Django's
        ``RequestDataTooBig``, raised when DRF reads the body, becomes a 400 whose ``detail``
        names the limit (Django alone answers a bare HTML "Bad Request")."""
        from django.conf import settings
        from django.core.exceptions import RequestDataTooBig

        if isinstance(exc, RequestDataTooBig):
            exc = ParseError(f"request body: more than the limit of {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes "
                             "(STUDIO_MAX_UPLOAD_BYTES)")
        return super().handle_exception(exc)
