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
buttons. Callers name actions by their :class:`Action` constant (``require(user, Action.TASK_EDIT,
task)``); an action that no row grants raises :class:`UnknownAction` rather than denying everyone.

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


class Action:
    """The actions of the permission table, one named constant each (the value is the string the
    403 message and page show: ``ada may not task.release``). Pass these to :func:`require`,
    :func:`can` and :func:`roles_for`: a misspelt constant fails at import, and an action that is
    no row of :data:`PERMISSIONS` raises :class:`UnknownAction` instead of denying everyone."""

    TASK_CREATE = "task.create"
    TASK_EDIT = "task.edit"
    TASK_REPLAY = "task.replay"
    TASK_SUBMIT = "task.submit"
    TASK_WITHDRAW = "task.withdraw"
    TASK_REVIEW = "task.review"
    TASK_RETURN = "task.return"
    TASK_APPROVE = "task.approve"
    TASK_RELEASE = "task.release"
    RELEASE_PUBLISH = "release.publish"
    TASK_COMMENT = "task.comment"
    COMMENT_RESOLVE = "comment.resolve"
    DATA_IMPORT = "data.import"
    LAYER_EDIT_METADATA = "layer.edit_metadata"
    RUN_IMPORT = "run.import"
    RELEASE_EXPORT = "release.export"
    VERDICT_CREATE = "verdict.create"
    JUDGE_RUN = "judge.run"
    JUDGE_CONFIGURE = "judge.configure"
    QUEUE_MANAGE = "queue.manage"
    QUEUE_CLAIM = "queue.claim"
    VERDICT_ADJUDICATE = "verdict.adjudicate"
    VERDICT_VIEW_ALL = "verdict.view_all"
    AGREEMENT_VIEW = "agreement.view"
    WEBHOOK_CREATE = "webhook.create"
    WEBHOOK_MANAGE = "webhook.manage"
    EXPERIMENT_CONFIGURE = "experiment.configure"
    EXPERIMENT_RUN = "experiment.run"


PERMISSIONS: tuple[Rule, ...] = (
    Rule("author", Action.TASK_CREATE, "any"),
    Rule("author", Action.TASK_EDIT, "own"),
    Rule("author", Action.TASK_REPLAY, "own"),
    Rule("reviewer", Action.TASK_REPLAY, "any"),
    # review workflow (annotation.services.review): draft → submitted → in review → approved /
    # returned → released. Restoring an old revision is an edit (task.edit).
    Rule("author", Action.TASK_SUBMIT, "own"),
    Rule("author", Action.TASK_WITHDRAW, "own"),
    Rule("reviewer", Action.TASK_REVIEW, "not_own"),
    Rule("reviewer", Action.TASK_RETURN, "not_own"),
    Rule("reviewer", Action.TASK_APPROVE, "not_own"),
    Rule("maintainer", Action.TASK_SUBMIT, "any"),
    Rule("maintainer", Action.TASK_WITHDRAW, "any"),
    Rule("maintainer", Action.TASK_RETURN, "any"),
    Rule("maintainer", Action.TASK_APPROVE, "not_own"),
    Rule("maintainer", Action.TASK_RELEASE, "any"),
    # publishing a release turns its tasks released (task.release): the maintainer's decision
    Rule("maintainer", Action.RELEASE_PUBLISH, "any"),
    # comments pinned to a step / answer field / map location; resolving one closes its thread
    Rule("author", Action.TASK_COMMENT, "own"),
    Rule("reviewer", Action.TASK_COMMENT, "any"),
    Rule("maintainer", Action.TASK_COMMENT, "any"),
    Rule("author", Action.COMMENT_RESOLVE, "own"),
    Rule("reviewer", Action.COMMENT_RESOLVE, "any"),
    Rule("maintainer", Action.COMMENT_RESOLVE, "any"),
    Rule("maintainer", Action.TASK_CREATE, "any"),
    Rule("maintainer", Action.TASK_EDIT, "any"),
    Rule("maintainer", Action.TASK_REPLAY, "any"),
    Rule("maintainer", Action.DATA_IMPORT, "any"),
    # a layer's georeferencing (GSD, CRS) recorded by hand, with a reason (annotation.services.layers)
    Rule("maintainer", Action.LAYER_EDIT_METADATA, "any"),
    Rule("maintainer", Action.RUN_IMPORT, "any"),
    Rule("maintainer", Action.RELEASE_EXPORT, "any"),
    Rule("reviewer", Action.RELEASE_EXPORT, "any"),
    Rule("scorer", Action.VERDICT_CREATE, "any"),
    Rule("reviewer", Action.VERDICT_CREATE, "any"),
    Rule("maintainer", Action.VERDICT_CREATE, "any"),
    # judging, the human scoring queue, adjudication and agreement
    Rule("maintainer", Action.JUDGE_RUN, "any"),
    Rule("maintainer", Action.JUDGE_CONFIGURE, "any"),
    Rule("maintainer", Action.QUEUE_MANAGE, "any"),
    Rule("reviewer", Action.QUEUE_MANAGE, "any"),
    Rule("scorer", Action.QUEUE_CLAIM, "any"),
    Rule("reviewer", Action.QUEUE_CLAIM, "any"),
    Rule("maintainer", Action.QUEUE_CLAIM, "any"),
    Rule("reviewer", Action.VERDICT_ADJUDICATE, "any"),
    Rule("maintainer", Action.VERDICT_ADJUDICATE, "any"),
    Rule("reviewer", Action.VERDICT_VIEW_ALL, "any"),
    Rule("maintainer", Action.VERDICT_VIEW_ALL, "any"),
    Rule("reviewer", Action.AGREEMENT_VIEW, "any"),
    Rule("maintainer", Action.AGREEMENT_VIEW, "any"),
    # experiments: running agents on an endpoint spends money, so maintainers only (experiments.services)
    Rule("maintainer", Action.EXPERIMENT_CONFIGURE, "any"),
    Rule("maintainer", Action.EXPERIMENT_RUN, "any"),
    # webhooks (notifications): a maintainer registers one; only its owner changes, pings or
    # redelivers it (its secret and delivery log are the owner's). A person's own notifications
    # need no row: every query of them is filtered to the person.
    Rule("maintainer", Action.WEBHOOK_CREATE, "any"),
    Rule("maintainer", Action.WEBHOOK_MANAGE, "own"),
)


#: every action some row grants: what :func:`require`, :func:`can` and :func:`roles_for` accept
ACTIONS = frozenset(r.action for r in PERMISSIONS)


class UnknownAction(LookupError):
    """A programming error: an action that no row of :data:`PERMISSIONS` grants (a misspelling
    would otherwise deny everyone silently). Not a ``ValueError``, so no view's ``except
    ValueError`` turns it into a message; it reaches the error page as a 500."""


def _known(action: str) -> str:
    """``action`` itself if it is a row's action, else :class:`UnknownAction` naming it."""
    if action not in ACTIONS:
        raise UnknownAction(f"{action!r} is not an action of the permission table (studio.permissions.PERMISSIONS); "
                            f"use a constant of studio.permissions.Action")
    return action


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
    """True when a row of :data:`PERMISSIONS` grants ``action`` (an :class:`Action` constant) on
    ``obj`` to ``user``. Raises :class:`UnknownAction` for an action no row grants."""
    _known(action)
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
    """The roles that some row of :data:`PERMISSIONS` grants ``action`` (in ``ROLES`` order);
    :class:`UnknownAction` for an action no row grants."""
    _known(action)
    return [r for r in ROLES if any(p.role == r and p.action == action for p in PERMISSIONS)]


def require(user, action: str, obj=None) -> None:
    """Raise ``PermissionDenied`` naming the action unless :func:`can` allows it. The exception
    carries ``action`` and ``roles`` (:func:`roles_for`) for the 403 page. ``action``: an
    :class:`Action` constant; :class:`UnknownAction` (a programming error) for one no row grants."""
    if not can(user, action, obj):
        exc = PermissionDenied(f"{getattr(user, 'username', 'anonymous')} may not {action}")
        exc.action, exc.roles = action, roles_for(action)
        raise exc


#: pages offered in the navigation only to users who may act on them: page → the actions, any of
#: which makes the page useful (the views check their own actions again)
PAGE_ACTIONS: dict[str, tuple[str, ...]] = {
    "review": (Action.TASK_REVIEW, Action.TASK_RETURN),
    "scoring": (Action.QUEUE_CLAIM, Action.QUEUE_MANAGE),
    "adjudication": (Action.VERDICT_ADJUDICATE,),
    "agreement": (Action.AGREEMENT_VIEW,),
    "judges": (Action.JUDGE_CONFIGURE, Action.JUDGE_RUN),
    "task-new": (Action.TASK_CREATE,),
    "webhooks": (Action.WEBHOOK_CREATE,),
    "experiments": (Action.EXPERIMENT_RUN,),
}
for _actions in PAGE_ACTIONS.values():  # a misspelt page action fails at import, not by hiding the page
    for _action in _actions:
        _known(_action)


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
