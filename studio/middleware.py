"""Request guards that apply to every page and endpoint."""
from __future__ import annotations

from urllib.parse import unquote

from django.http import HttpResponseBadRequest


class RejectNulMiddleware:
    """Answer 400 to a URL whose path or query string holds a NUL character (``%00``).

    No identifier, filter or cursor of the studio contains one, and PostgreSQL cannot compare text
    with it (``DataError``: the request would otherwise end in a 500 on PostgreSQL only).
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        query = request.META.get("QUERY_STRING", "")
        if "\x00" in request.path or "\x00" in unquote(query):
            return HttpResponseBadRequest("NUL character in the URL", content_type="text/plain; charset=utf-8")
        return self.get_response(request)
