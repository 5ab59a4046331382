"""The tests hash their users' passwords at one PBKDF2 iteration (``conftest._fast_password_hashing``);
a ``manage.py`` or gunicorn child on the real settings must still accept those passwords."""
from __future__ import annotations

import pytest
from django.contrib.auth.hashers import PBKDF2PasswordHasher


@pytest.mark.django_db
def test_a_test_users_hash_is_one_iteration_and_verifies_with_djangos_own_hasher(make_user):
    user = make_user("hana", "scorer", password="hana-pass-1")
    algorithm, iterations, _salt, _digest = user.password.split("$")
    assert (algorithm, iterations) == ("pbkdf2_sha256", "1")
    real = PBKDF2PasswordHasher()  # what a child process on studio.settings uses
    assert real.iterations > 1 and real.verify("hana-pass-1", user.password)
    assert not real.verify("wrong", user.password)
