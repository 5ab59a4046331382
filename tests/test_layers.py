"""The package import graph follows the workflow (issue 19): kernel < annotation < replay < releases
< evaluation < notifications < frontend, with no upward import and no function-local project import outside
``AppConfig.ready`` (where Django requires them: models are not loaded when ``apps.py`` is).

The walk is this test's own (``ast``, the same rules as ``../shared/tools/check_layers.py``): every
``import``/``from … import`` of a project package in a ``.py`` file outside tests, bench and
migrations. ``studio`` (settings, URLs, permissions, API base, the error handler) may be imported by every
layer and imports none of them but the kernel (pure, below everything: the domain errors); ``replay/tools/`` is the old import path of ``kernel.tools`` kept for scripts
outside the tree, and may import kernel only.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ORDER = ("kernel", "annotation", "replay", "releases", "evaluation", "experiments", "notifications", "frontend")
RANK = {name: i for i, name in enumerate(ORDER)}
SKIP = {"tests", "bench", "migrations", ".venv", "node_modules", "var", "staticfiles"}


def project_imports(root: Path, packages: set[str]):
    """``(file, line, importing package, imported package, inside a function, function name)`` for
    every import of a project package by a module of another package under ``root``."""
    out = []
    for f in sorted(root.rglob("*.py")):
        rel = f.relative_to(root)
        if rel.parts[0] not in packages or any(p in SKIP for p in rel.parts):
            continue
        tree = ast.parse(f.read_text(encoding="utf-8"))
        owner = {}
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for n in ast.walk(fn):
                    if n is not fn:
                        owner.setdefault(id(n), fn.name)  # the outermost function (ast.walk goes outside in)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top in packages and top != rel.parts[0]:
                    out.append((str(rel), node.lineno, rel.parts[0], top, id(node) in owner, owner.get(id(node))))
    return out


def violations(root: Path) -> list[str]:
    """What breaks the layer rules under ``root`` (empty when none)."""
    packages = {p.name for p in root.iterdir() if p.is_dir() and (p / "__init__.py").exists() and p.name not in SKIP}
    bad = []
    for rel, line, src, dst, local, func in project_imports(root, packages):
        where = f"{rel}:{line} ({src} -> {dst})"
        if src == "studio":
            if dst != "kernel":
                bad.append(f"{where}: studio imports no layer")
        elif rel.startswith("replay/tools/"):
            if dst != "kernel":
                bad.append(f"{where}: the replay.tools alias imports kernel only")
        elif dst != "studio" and (src not in RANK or dst not in RANK):
            bad.append(f"{where}: package outside the layer order {ORDER}")
        elif dst != "studio" and RANK[dst] > RANK[src]:
            bad.append(f"{where}: upward import")
        if local and not (rel.endswith("/apps.py") and func == "ready"):
            bad.append(f"{where}: function-local import in {func}()")
    return bad


def test_the_tree_keeps_its_layers():
    assert violations(ROOT) == []


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name in ("kernel", "annotation", "replay", "releases", "evaluation", "frontend", "studio"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("")
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    return tmp_path


@pytest.mark.parametrize("files, expected", [
    ({"annotation/qc.py": "from replay.models import ReplayRun\n"}, "annotation/qc.py:1 (annotation -> replay): upward import"),
    ({"releases/x.py": "import evaluation.models\n"}, "releases/x.py:1 (releases -> evaluation): upward import"),
    ({"replay/s.py": "def f():\n    from annotation.models import Task\n"},
     "replay/s.py:2 (replay -> annotation): function-local import in f()"),
    ({"studio/p.py": "from annotation.models import Task\n"}, "studio/p.py:1 (studio -> annotation): studio imports no layer"),
])
def test_the_check_fails_on_a_broken_rule(tmp_path, files, expected):
    """Each rule, broken once in a tree of empty packages, is reported (so the test above can fail)."""
    assert violations(_tree(tmp_path, files)) == [expected]


def test_downward_and_ready_imports_pass(tmp_path):
    root = _tree(tmp_path, {
        "frontend/v.py": "from evaluation.models import AgentRun\nfrom kernel.steps import step_call\n",
        "replay/apps.py": "class C:\n    def ready(self):\n        from annotation.services.review import x\n",
        "annotation/m.py": "from studio.permissions import require\n",
    })
    assert violations(root) == []


def test_replay_plugs_into_review_and_qc_by_registration(db):
    """Review's "a succeeded replay exists" gate and QC's replays come from the replay app's
    ``ready()``, not from imports of replay inside annotation."""
    from annotation.services import qc, review, variants
    from replay.services import (artifact_path, input_fingerprint, replay_new_variant, require_succeeded_replay,
                                 succeeded_runs_of_head)
    from releases.services.export import SIDECAR_FIELDS
    from evaluation.selectors import release_adjudication

    assert require_succeeded_replay in review.submission_checks()
    assert qc._REPLAY_SOURCE == [qc.ReplaySource(succeeded_runs=succeeded_runs_of_head, artifact_path=artifact_path,
                                                 input_fingerprint=input_fingerprint)]
    assert variants._VARIANT_MADE_HOOKS == [replay_new_variant]
    assert SIDECAR_FIELDS["adjudication"] is release_adjudication


def test_the_old_tool_path_is_the_same_modules():
    """``replay.tools.<name>`` (imported by ``../shared/tools/check_tool_examples.py``) is the very
    module ``kernel.tools.<name>``: one registry and one ``ToolError`` class, not a second copy."""
    import kernel.tools.base
    import kernel.tools.registry
    import replay.tools.base
    import replay.tools.registry

    assert replay.tools.registry is kernel.tools.registry and replay.tools.base is kernel.tools.base
    assert replay.tools.registry.REGISTRY is kernel.tools.registry.REGISTRY
