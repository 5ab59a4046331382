"""Login throttling with django-axes (docs/security.md): failed logins for a
username from one address are counted; at STUDIO_LOGIN_FAILURE_LIMIT (5) the pair is locked out
(HTTP 429) even with the right password, on the login page and for HTTP Basic on the API."""
from __future__ import annotations

import base64

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def _login(client: Client, username: str, password: str):
    return client.post("/accounts/login/", {"username": username, "password": password})


def test_five_failures_lock_the_username_out(make_user, settings):
    assert settings.AXES_FAILURE_LIMIT == 5  # the default the docs state
    make_user("ana", "scorer", password="right-pass-1")
    make_user("bo", "scorer", password="bo-pass-1")
    c = Client()
    codes = [_login(c, "ana", f"wrong-{i}").status_code for i in range(5)]
    # 1–4: the login page again (200, "Please enter a correct username"); the 5th reaches the limit: 429
    assert codes == [200, 200, 200, 200, 429]
    assert _login(c, "ana", "right-pass-1").status_code == 429  # locked, right password or not
    assert not c.session.get("_auth_user_id")
    # another username from the same address is not locked
    assert _login(Client(), "bo", "bo-pass-1").status_code == 302


def test_basic_auth_on_the_api_is_throttled_too(make_user):
    make_user("ana", "scorer", password="right-pass-1")
    c = Client()

    def basic(password):
        token = base64.b64encode(f"ana:{password}".encode()).decode()
        return c.get("/api/events/", HTTP_AUTHORIZATION=f"Basic {token}").status_code

    assert basic("right-pass-1") == 200
    codes = [basic(f"wrong-{i}") for i in range(5)]
    assert codes == [403] * 5  # DRF answers a failed Basic login 403 (session auth is its first scheme)
    assert basic("right-pass-1") == 403  # locked out: the password that gave 200 above no longer works


def test_a_success_resets_the_count(make_user):
    make_user("ana", "scorer", password="right-pass-1")
    c = Client()
    assert [_login(c, "ana", "x").status_code for _ in range(4)] == [200] * 4
    assert _login(c, "ana", "right-pass-1").status_code == 302  # 4 < 5: still allowed, and the count resets
    c.logout()
    assert [_login(c, "ana", "x").status_code for _ in range(4)] == [200] * 4  # four more before a lockout
