"""The permission table: role × action × relation to the object.

Roles are Django groups (``author``, ``reviewer``, ``scorer``, ``maintainer``). A row
``(role, action, relation)`` grants ``action`` to members of ``role`` when the user stands in
``relation`` to the object: ``any`` (every object, or no object), ``own`` (objects the user
owns) or ``not_own`` (objects the user does not own; never an object-less check). Anything not
in the table is refused.

Owners (:func:`owner_ids`): the creator of the object (``created_by``, else ``author``, else
``annotator``) and, for a task, the author of its head revision, the revision under review. So a
maintainer who rewrites another author's task is an owner of it until someone else saves a new
revision: four eyes hold on the revision being approved, not only on the task's creator. Services call :func:`require`; views may call :func:`can` to hide
buttons.

Superusers pass every check except the four-eyes rule: an action that only ``not_own`` rows grant
(``task.approve``) is refused on the superuser's own objects too — nobody approves their own task.
"""
from __future__ import annotations

from dataclasses import dataclass

from django.core.exceptions import PermissionDenied

ROLES = ("author", "reviewer", "scorer", "maintainer")


@dataclass(frozen=True)
class Rule:
    role: str
    action: str
    relation: str  # "any", "own" or "not_own"


RELATIONS = ("any", "own", "not_own")


PERMISSIONS: tuple[Rule, ...] = (
    Rule("author", "task.create", "any"),
    Rule("author", "task.edit", "own"),
    Rule("author", "task.replay", "own"),
    Rule("reviewer", "task.replay", "any"),
    # review workflow (annotation.services.review): draft → submitted → in review → approved /
    # returned → released. Restoring an old revision is an edit (task.edit).
    Rule("author", "task.submit", "own"),
    Rule("author", "task.withdraw", "own"),
    Rule("reviewer", "task.review", "not_own"),
    Rule("reviewer", "task.return", "not_own"),
    Rule("reviewer", "task.approve", "not_own"),
    Rule("maintainer", "task.submit", "any"),
    Rule("maintainer", "task.withdraw", "any"),
    Rule("maintainer", "task.return", "any"),
    Rule("maintainer", "task.approve", "not_own"),
    Rule("maintainer", "task.release", "any"),
    # publishing a release turns its tasks released (task.release): the maintainer's decision
    Rule("maintainer", "release.publish", "any"),
    # comments pinned to a step / answer field / map location; resolving one closes its thread
    Rule("author", "task.comment", "own"),
    Rule("reviewer", "task.comment", "any"),
    Rule("maintainer", "task.comment", "any"),
    Rule("author", "comment.resolve", "own"),
    Rule("reviewer", "comment.resolve", "any"),
    Rule("maintainer", "comment.resolve", "any"),
    Rule("maintainer", "task.create", "any"),
    Rule("maintainer", "task.edit", "any"),
    Rule("maintainer", "task.replay", "any"),
    Rule("maintainer", "data.import", "any"),
    # a layer's georeferencing (GSD, CRS) recorded by hand, with a reason (annotation.services.layers)
    Rule("maintainer", "layer.edit_metadata", "any"),
    Rule("maintainer", "run.import", "any"),
    Rule("maintainer", "release.export", "any"),
    Rule("reviewer", "release.export", "any"),
    Rule("scorer", "verdict.create", "any"),
    Rule("reviewer", "verdict.create", "any"),
    Rule("maintainer", "verdict.create", "any"),
    # judging, the human scoring queue, adjudication and agreement
    Rule("maintainer", "judge.run", "any"),
    Rule("maintainer", "judge.configure", "any"),
    Rule("maintainer", "queue.manage", "any"),
    Rule("reviewer", "queue.manage", "any"),
    Rule("scorer", "queue.claim", "any"),
    Rule("reviewer", "queue.claim", "any"),
    Rule("maintainer", "queue.claim", "any"),
    Rule("reviewer", "verdict.adjudicate", "any"),
    Rule("maintainer", "verdict.adjudicate", "any"),
    Rule("reviewer", "verdict.view_all", "any"),
    Rule("maintainer", "verdict.view_all", "any"),
    Rule("reviewer", "agreement.view", "any"),
    Rule("maintainer", "agreement.view", "any"),
    # experiments: running agents on an endpoint spends money, so maintainers only (experiments.services)
    Rule("maintainer", "experiment.configure", "any"),
    Rule("maintainer", "experiment.run", "any"),
    # webhooks (notifications): a maintainer registers one; only its owner changes, pings or
    # redelivers it (its secret and delivery log are the owner's). A person's own notifications
    # need no row: every query of them is filtered to the person.
    Rule("maintainer", "webhook.create", "any"),
    Rule("maintainer", "webhook.manage", "own"),
)


#: actions granted by ``not_own`` rows only: the owner never gets them, not even as a superuser
FOUR_EYES_ACTIONS = frozenset(
    a for a in {r.action for r in PERMISSIONS} if all(r.relation == "not_own" for r in PERMISSIONS if r.action == a)
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


def owner_ids(obj) -> frozenset[int]:
    """The user ids that own ``obj`` for the ``own``/``not_own`` relations: its creator (the first
    of ``created_by_id``, ``author_id``, ``annotator_id`` it has) and, when it has a head revision
    (a task), that revision's ``author_id``. Empty for ``None`` or an object without these."""
    ids = set()
    for attr in ("created_by_id", "author_id", "annotator_id"):
        if hasattr(obj, attr):
            ids.add(getattr(obj, attr))
            break
    if getattr(obj, "head_id", None) is not None:
        head = obj.head
        if getattr(head, "author_id", None) is not None:
            ids.add(head.author_id)
    return frozenset(i for i in ids if i is not None)


def can(user, action: str, obj=None) -> bool:
    """True when a row of :data:`PERMISSIONS` grants ``action`` on ``obj`` to ``user``."""
    if not getattr(user, "is_authenticated", False):
        return False
    owns = obj is not None and user.pk in owner_ids(obj)
    if user.is_superuser:
        return not (owns and action in FOUR_EYES_ACTIONS)
    roles = user_roles(user)
    for rule in PERMISSIONS:
        if rule.action != action or rule.role not in roles:
            continue
        if rule.relation == "any":
            return True
        if rule.relation == "own" and owns:
            return True
        if rule.relation == "not_own" and obj is not None and not owns:
            return True
    return False


def roles_for(action: str) -> list[str]:
    """The roles that some row of :data:`PERMISSIONS` grants ``action`` (in ``ROLES`` order)."""
    return [r for r in ROLES if any(p.role == r and p.action == action for p in PERMISSIONS)]


def require(user, action: str, obj=None) -> None:
    """Raise ``PermissionDenied`` naming the action unless :func:`can` allows it. The exception
    carries ``action`` and ``roles`` (:func:`roles_for`) for the 403 page."""
    if not can(user, action, obj):
        exc = PermissionDenied(f"{getattr(user, 'username', 'anonymous')} may not {action}")
        exc.action, exc.roles = action, roles_for(action)
        raise exc


#: pages offered in the navigation only to users who may act on them: page → the actions, any of
#: which makes the page useful (the views check their own actions again)
PAGE_ACTIONS: dict[str, tuple[str, ...]] = {
    "review": ("task.review", "task.return"),
    "scoring": ("queue.claim", "queue.manage"),
    "adjudication": ("verdict.adjudicate",),
    "agreement": ("agreement.view",),
    "judges": ("judge.configure", "judge.run"),
    "task-new": ("task.create",),
    "webhooks": ("webhook.create",),
    "experiments": ("experiment.run",),
}


def can_use_page(user, page: str) -> bool:
    """Whether ``page`` (a key of :data:`PAGE_ACTIONS`; other pages are open to every user) is of use to ``user``."""
    if not getattr(user, "is_authenticated", False):
        return False
    actions = PAGE_ACTIONS.get(page)
    if actions is None or user.is_superuser:
        return True
    # any row of the user's roles, whatever its relation: a reviewer reviews others' tasks (not_own)
    roles = user_roles(user)
    return any(r.action in actions and r.role in roles for r in PERMISSIONS)
