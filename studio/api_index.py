"""``GET /api/``: the index of the REST API, read from the URL configuration itself.

Every route under ``/api/`` (``studio.api_urls``) is listed once with its path template, its
route name and the HTTP methods its view answers, so the index cannot drift from the routes. The
OpenAPI schema (``/api/schema/``) and its browsable docs (``/api/docs/``) carry the details.
"""
from __future__ import annotations

from django.urls import URLPattern, URLResolver, get_resolver
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

__all__ = ["api_routes", "ApiIndexView"]

_METHODS = ("get", "post", "put", "patch", "delete")


def _walk(patterns, prefix: str):
    for p in patterns:
        if isinstance(p, URLResolver):
            yield from _walk(p.url_patterns, prefix + str(p.pattern))
        elif isinstance(p, URLPattern):
            yield prefix + str(p.pattern), p


def _methods(callback) -> list[str]:
    view = getattr(callback, "view_class", None) or getattr(callback, "cls", None)
    if view is None:
        return []
    return [m.upper() for m in _METHODS if hasattr(view, m)]


def api_routes() -> list[dict]:
    """``[{path, name, methods}]`` of every route under ``/api/`` (paths as Django templates, e.g.
    ``/api/tasks/<int:pk>/``), sorted by path; the index itself included."""
    root = get_resolver()
    out, seen = [], set()
    for path, pattern in _walk(root.url_patterns, "/"):
        if not path.startswith("/api/") or path in seen:
            continue
        seen.add(path)
        out.append({"path": path, "name": pattern.name or "", "methods": _methods(pattern.callback)})
    return sorted(out, key=lambda r: r["path"])


class ApiIndexView(APIView):
    """The index of the API: every route with its methods, and where the schema and docs are."""

    permission_classes = [IsAuthenticated]

    @extend_schema(responses=inline_serializer("ApiIndex", {
        "schema": serializers.CharField(), "docs": serializers.CharField(),
        "routes": serializers.ListField(child=serializers.DictField()),
    }))
    def get(self, request):
        return Response({"schema": "/api/schema/", "docs": "/api/docs/", "routes": api_routes()})
