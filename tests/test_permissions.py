"""The permission table: one test per row, plus refusals the table implies, plus the actions
named in code (each an ``Action`` constant that is a row of the table)."""
import ast
from pathlib import Path
from types import SimpleNamespace

import pytest

from annotation.services.review import TRANSITIONS
from studio.permissions import (
    ACTIONS,
    FOUR_EYES_ACTIONS,
    PAGE_ACTIONS,
    PERMISSIONS,
    RELATIONS,
    ROLES,
    Action,
    UnknownAction,
    can,
    require,
    roles_for,
)

ROOT = Path(__file__).resolve().parent.parent
#: the packages whose code asks the table (tests/ and bench/ excluded: tests pass strings on purpose)
APP_DIRS = ("kernel", "annotation", "replay", "releases", "evaluation", "notifications", "frontend", "studio")
#: the functions whose action argument is checked, and that argument's position
ACTION_ARG = {"require": 1, "can": 1, "roles_for": 0}
#: call sites whose action is a variable, each with the values it can take (checked below)
DYNAMIC_SITES = {
    ("annotation/services/review.py", "spec.permission"): {t.permission for t in TRANSITIONS.values()},
    ("annotation/services/review.py", "t.permission"): {t.permission for t in TRANSITIONS.values()},
    ("frontend/views/errors.py", "action"): set(),  # the action a PermissionDenied from require carried
    ("studio/permissions.py", "action"): set(),  # require → can / roles_for, passing its own argument on
}

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


def test_every_action_constant_is_a_row_of_the_table_and_back():
    constants = {v for k, v in vars(Action).items() if k.isupper()}
    assert constants == ACTIONS == {r.action for r in PERMISSIONS}
    assert Action.TASK_EDIT == "task.edit" and Action.LAYER_EDIT_METADATA == "layer.edit_metadata"  # the 403 text
    assert all(a in ACTIONS for actions in PAGE_ACTIONS.values() for a in actions)


@pytest.mark.django_db
def test_an_action_outside_the_table_is_a_programming_error_not_a_silent_deny(make_user):
    user = make_user("m-typo", "maintainer")
    for ask in (lambda: can(user, "task.edti"), lambda: require(user, "task.edti"), lambda: roles_for("task.edti"),
                lambda: can(SimpleNamespace(is_authenticated=False), "task.edti")):
        with pytest.raises(UnknownAction, match=r"'task\.edti' is not an action of the permission table"):
            ask()
    assert not issubclass(UnknownAction, ValueError)  # no view's ``except ValueError`` hides it


def _resolve(node: ast.expr, module_names: dict[str, ast.expr]):
    """The action string of an argument: a literal, ``Action.X``, or a module-level name bound to one
    of these; None when it is a variable."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "Action":
        assert hasattr(Action, node.attr), f"Action.{node.attr} does not exist"
        return getattr(Action, node.attr)
    if isinstance(node, ast.Name) and node.id in module_names:
        return _resolve(module_names[node.id], {})
    return None


def _action_arguments():
    """(file, source text of the argument, resolved action or None) of every ``require``/``can``/
    ``roles_for`` call in the apps' code."""
    for app in APP_DIRS:
        for path in sorted((ROOT / app).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            tree = ast.parse(path.read_text(), filename=str(path))
            names = {t.id: node.value for node in tree.body if isinstance(node, ast.Assign)
                     for t in node.targets if isinstance(t, ast.Name)}
            for call in ast.walk(tree):
                if not isinstance(call, ast.Call):
                    continue
                func = call.func.id if isinstance(call.func, ast.Name) else None
                if func not in ACTION_ARG:
                    continue
                keyword = [k.value for k in call.keywords if k.arg == "action"]
                args = call.args[ACTION_ARG[func]:ACTION_ARG[func] + 1] or keyword
                assert args, f"{path.relative_to(ROOT)}:{call.lineno}: {func}() without an action"
                yield str(path.relative_to(ROOT)), ast.unparse(args[0]), _resolve(args[0], names), call.lineno


def test_every_action_named_in_code_is_a_row_of_the_table():
    """An AST scan of every ``require``/``can``/``roles_for`` call in the apps: its action argument
    (``Action.X`` resolved, a literal, or a module constant) is a row's action; a variable must be
    one of the known dynamic sites, whose possible values are rows too."""
    calls = list(_action_arguments())
    assert len(calls) > 80  # the scan reaches the services and views (96 literal call sites when written)
    for file, source, action, line in calls:
        if action is None:
            assert (file, source) in DYNAMIC_SITES, f"{file}:{line}: action {source} cannot be checked"
        else:
            assert action in ACTIONS, f"{file}:{line}: {source} = {action!r} is not a row of the table"
    for values in DYNAMIC_SITES.values():
        assert values <= ACTIONS
    transitions = {"task.submit", "task.withdraw", "task.review", "task.return", "task.approve", "task.release"}
    assert {t.permission for t in TRANSITIONS.values()} == transitions
