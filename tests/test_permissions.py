"""The permission table: one test per row, plus refusals the table implies."""
from types import SimpleNamespace

import pytest

from studio.permissions import FOUR_EYES_ACTIONS, PERMISSIONS, RELATIONS, ROLES, can

# Which relation kinds reach an object the user created ("own") or someone else created ("foreign").
REACHES = {"own": {"any", "own"}, "foreign": {"any", "not_own"}}


def _expected(role: str, action: str, which: str) -> bool:
    """What the table says for a user with only ``role``: some row of (role, action) reaches it."""
    return any(r.relation in REACHES[which] for r in PERMISSIONS if r.role == role and r.action == action)


@pytest.mark.django_db
@pytest.mark.parametrize("rule", PERMISSIONS, ids=lambda r: f"{r.role}-{r.action}-{r.relation}")
def test_each_row_grants_exactly_its_relation(rule, make_user):
    user = make_user(f"u-{rule.role}", rule.role)
    other = make_user("someone-else", "author")
    own = SimpleNamespace(created_by_id=user.pk)
    foreign = SimpleNamespace(created_by_id=other.pk)
    assert rule.relation in RELATIONS
    # the row itself grants what its relation names ...
    if rule.relation in ("any", "own"):
        assert can(user, rule.action, own)
    if rule.relation in ("any", "not_own"):
        assert can(user, rule.action, foreign)
    # ... and the role reaches exactly what its rows for this action say, no more
    assert can(user, rule.action, own) is _expected(rule.role, rule.action, "own")
    assert can(user, rule.action, foreign) is _expected(rule.role, rule.action, "foreign")
    if rule.relation == "not_own":
        # a not_own row never answers an object-less check
        others = [r for r in PERMISSIONS if r.role == rule.role and r.action == rule.action and r.relation == "any"]
        assert can(user, rule.action) is bool(others)


@pytest.mark.django_db
@pytest.mark.parametrize("role", ROLES)
def test_actions_outside_the_table_are_refused(role, make_user):
    user = make_user(f"r-{role}", role)
    other = make_user("other-owner", "author")
    granted = {r.action for r in PERMISSIONS if r.role == role}
    for action in {r.action for r in PERMISSIONS} - granted:
        assert not can(user, action, SimpleNamespace(created_by_id=user.pk)), (role, action)
        assert not can(user, action, SimpleNamespace(created_by_id=other.pk)), (role, action)


def test_anonymous_is_refused_everything():
    anon = SimpleNamespace(is_authenticated=False)
    assert not any(can(anon, r.action) for r in PERMISSIONS)


def test_four_eyes_actions_are_the_not_own_only_ones():
    # task.approve: reviewer not_own + maintainer not_own; task.review: reviewer not_own only.
    # task.return is not one: maintainers may return any task (their own included).
    assert FOUR_EYES_ACTIONS == {"task.approve", "task.review"}


@pytest.mark.django_db
def test_nobody_approves_their_own_task_not_even_a_superuser(make_user):
    both = make_user("author-and-reviewer", "author", "reviewer", "maintainer")
    other = make_user("other", "author")
    assert not can(both, "task.approve", SimpleNamespace(created_by_id=both.pk))
    assert can(both, "task.approve", SimpleNamespace(created_by_id=other.pk))
    root = make_user("root", "author")
    root.is_superuser = True
    root.save()
    assert not can(root, "task.approve", SimpleNamespace(created_by_id=root.pk))
    assert can(root, "task.approve", SimpleNamespace(created_by_id=other.pk))
    assert can(root, "task.edit", SimpleNamespace(created_by_id=root.pk))  # only four-eyes actions are held back
