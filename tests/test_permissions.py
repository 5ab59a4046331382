"""The permission table: one test per row, plus refusals the table implies."""
from types import SimpleNamespace

import pytest

from studio.permissions import PERMISSIONS, ROLES, can


@pytest.mark.django_db
@pytest.mark.parametrize("rule", PERMISSIONS, ids=lambda r: f"{r.role}-{r.action}-{r.relation}")
def test_each_row_grants_exactly_its_relation(rule, make_user):
    user = make_user(f"u-{rule.role}", rule.role)
    other = make_user("someone-else", "author")
    own = SimpleNamespace(created_by_id=user.pk)
    foreign = SimpleNamespace(created_by_id=other.pk)
    assert can(user, rule.action, own)
    if rule.relation == "any":
        assert can(user, rule.action, foreign)
    else:
        # an "own" row alone does not reach other people's objects
        others = [r for r in PERMISSIONS if r.role == rule.role and r.action == rule.action and r.relation == "any"]
        assert can(user, rule.action, foreign) is bool(others)


@pytest.mark.django_db
@pytest.mark.parametrize("role", ROLES)
def test_actions_outside_the_table_are_refused(role, make_user):
    user = make_user(f"r-{role}", role)
    granted = {r.action for r in PERMISSIONS if r.role == role}
    for action in {r.action for r in PERMISSIONS} - granted:
        assert not can(user, action, SimpleNamespace(created_by_id=user.pk)), (role, action)


def test_anonymous_is_refused_everything():
    anon = SimpleNamespace(is_authenticated=False)
    assert not any(can(anon, r.action) for r in PERMISSIONS)
