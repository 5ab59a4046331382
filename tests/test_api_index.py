"""``GET /api/`` lists the API from the URL configuration; ``/api/docs/`` needs no network."""
from __future__ import annotations

import re

import pytest
from django.urls import reverse


@pytest.fixture
def author_client(client, make_user):
    client.force_login(make_user("ann", "author"))
    return client


@pytest.mark.django_db
def test_api_index_lists_every_route_with_its_methods(author_client):
    r = author_client.get("/api/")
    assert r.status_code == 200
    body = r.json()
    assert body["schema"] == "/api/schema/" and body["docs"] == "/api/docs/"
    routes = {row["path"]: row for row in body["routes"]}
    # routes known from the URL configuration (studio/api_urls.py and the apps' api modules)
    assert reverse("api-index") == "/api/" and "/api/" in routes
    assert "GET" in routes["/api/"]["methods"]
    tasks = [p for p in routes if p.startswith("/api/tasks/")]
    assert "/api/tasks/" in routes and {"GET", "POST"} <= set(routes["/api/tasks/"]["methods"]), tasks
    assert all(p.startswith("/api/") for p in routes)
    assert len(routes) == len(body["routes"])  # each route once


@pytest.mark.django_db
def test_api_index_needs_a_login(client):
    assert client.get("/api/").status_code in (401, 403)


@pytest.mark.django_db
def test_swagger_ui_is_served_by_the_studio_not_a_cdn(author_client):
    # drf-spectacular's default page loads Swagger UI from a CDN, blank offline; with the sidecar
    # every script and stylesheet is a static file of the studio.
    r = author_client.get("/api/docs/")
    assert r.status_code == 200
    html = r.content.decode()
    assets = re.findall(r'(?:src|href)="([^"]+\.(?:js|css))"', html)
    assert assets, html[:500]
    assert all(a.startswith("/static/") for a in assets), assets
    from django.contrib.staticfiles import finders

    for a in assets:  # each is a file of an installed app (the test client serves no static files)
        assert finders.find(a.removeprefix("/static/")), a
