"""The permission table: role × action × relation to the object.

Roles are Django groups (``author``, ``reviewer``, ``scorer``, ``maintainer``). A row
``(role, action, relation)`` grants ``action`` to members of ``role`` when the user stands in
``relation`` to the object: ``any`` (every object, or no object) or ``own`` (objects the user
created). Anything not in the table is refused. Services call :func:`require`; views may call
:func:`can` to hide buttons. Superusers pass every check.
"""
from __future__ import annotations

from dataclasses import dataclass

from django.core.exceptions import PermissionDenied

ROLES = ("author", "reviewer", "scorer", "maintainer")


@dataclass(frozen=True)
class Rule:
    role: str
    action: str
    relation: str  # "any" or "own"


PERMISSIONS: tuple[Rule, ...] = (
    Rule("author", "task.create", "any"),
    Rule("author", "task.edit", "own"),
    Rule("author", "task.replay", "own"),
    Rule("reviewer", "task.replay", "any"),
    Rule("maintainer", "task.create", "any"),
    Rule("maintainer", "task.edit", "any"),
    Rule("maintainer", "task.replay", "any"),
    Rule("maintainer", "data.import", "any"),
    Rule("maintainer", "run.import", "any"),
    Rule("maintainer", "release.export", "any"),
    Rule("reviewer", "release.export", "any"),
    Rule("scorer", "verdict.create", "any"),
    Rule("reviewer", "verdict.create", "any"),
    Rule("maintainer", "verdict.create", "any"),
)


def user_roles(user) -> set[str]:
    """The studio roles of ``user`` (its group names that are roles), cached on the user object."""
    if not getattr(user, "is_authenticated", False):
        return set()
    cached = getattr(user, "_studio_roles", None)
    if cached is None:
        cached = set(user.groups.filter(name__in=ROLES).values_list("name", flat=True))
        user._studio_roles = cached
    return cached


def _owner_id(obj) -> int | None:
    for attr in ("created_by_id", "author_id", "annotator_id"):
        if hasattr(obj, attr):
            return getattr(obj, attr)
    return None


def can(user, action: str, obj=None) -> bool:
    """True when a row of :data:`PERMISSIONS` grants ``action`` on ``obj`` to ``user``."""
    if not getattr(user, "is_authenticated", False):
        return False
    if user.is_superuser:
        return True
    roles = user_roles(user)
    for rule in PERMISSIONS:
        if rule.action != action or rule.role not in roles:
            continue
        if rule.relation == "any":
            return True
        if rule.relation == "own" and obj is not None and _owner_id(obj) == user.pk:
            return True
    return False


def require(user, action: str, obj=None) -> None:
    """Raise ``PermissionDenied`` naming the action unless :func:`can` allows it."""
    if not can(user, action, obj):
        raise PermissionDenied(f"{getattr(user, 'username', 'anonymous')} may not {action}")
