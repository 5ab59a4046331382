"""User and role services: the roles are Django groups named in ``studio.permissions.ROLES``."""
from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction

from studio.permissions import ROLES


def ensure_roles() -> dict[str, Group]:
    """Create the role groups that do not exist yet; returns them by name."""
    return {name: Group.objects.get_or_create(name=name)[0] for name in ROLES}


@transaction.atomic
def upsert_user(username: str, password: str, roles: list[str], *, is_superuser: bool = False):
    """Create or update a user with exactly ``roles``; raises ``ValueError`` for an unknown role."""
    unknown = set(roles) - set(ROLES)
    if unknown:
        raise ValueError(f"roles: unknown role(s) {', '.join(sorted(unknown))}; use {', '.join(ROLES)}")
    groups = ensure_roles()
    User = get_user_model()
    user, _ = User.objects.get_or_create(username=username)
    user.set_password(password)
    user.is_superuser = is_superuser
    user.is_staff = is_superuser
    user.save()
    user.groups.set([groups[r] for r in roles])
    return user
