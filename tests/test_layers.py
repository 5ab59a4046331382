"""The package import graph follows the workflow: kernel < annotation < replay < releases
< evaluation < notifications < frontend, with no upward import and no function-local project import outside
``AppConfig.ready`` (where Django requires them: models are not loaded when ``apps.py`` is).

The walk is this test's own (``ast``, the same rules as ``../shared/tools/check_layers.py``): every
``import``/``from … import`` of a project package in a ``.py`` file outside tests, bench and
migrations. ``studio`` (settings, URLs, permissions, API base, the error handler) may be imported by every
layer and imports none of them but the kernel (pure, below everything: the domain errors); ``replay/tools/`` is the old import path of ``kernel.tools`` kept for scripts
outside the tree, and may import kernel only.

Inside and across packages, between modules (files), the same walk measures what
``../shared/tools/check_modules.py`` does: no import loop, whether written at module level or
hidden by imports inside functions, and no function-local project import outside an
``AppConfig.ready`` method, a Celery ``jobs.py`` module and the command entry points (``manage.py``,
``management/commands/``), where a lazy import keeps start-up fast.
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


def _entry_point(rel: str) -> bool:
    """A command entry point (``manage.py``, ``*/management/commands/*.py``) or a Celery ``jobs.py``:
    the places where a function-local project import is allowed (a lazy import keeps a command's
    start and ``--help`` fast; a job imports its service when it runs)."""
    return rel == "manage.py" or "/management/commands/" in rel or rel.endswith("/jobs.py")


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
        if local and not (rel.endswith("/apps.py") and func == "ready") and not _entry_point(rel):
            bad.append(f"{where}: function-local import in {func}()")
    return bad


def test_the_tree_keeps_its_layers():
    assert violations(ROOT) == []


#: ``../shared/tools/check_layers.py``'s bound on function-local imports of another project package
#: (allowed places included: ``AppConfig.ready``, commands, ``jobs.py``); it exits 1 above it
MAX_CROSS_PACKAGE_LOCAL = 15


def test_function_local_imports_of_other_packages_stay_within_the_checkers_bound():
    """A command reaches another package through its own package's selectors and services where it
    can (``replay.selectors.task_of_question`` for ``manage.py replay``), so the count of lazy
    cross-package imports stays within what ``check_layers.py`` accepts."""
    packages = {p.name for p in ROOT.iterdir() if p.is_dir() and (p / "__init__.py").exists() and p.name not in SKIP}
    local = [f"{rel}:{line} -> {dst} in {func}()" for rel, line, _src, dst, is_local, func
             in project_imports(ROOT, packages) if is_local]
    assert len(local) <= MAX_CROSS_PACKAGE_LOCAL, "\n".join(local)


# --------------------------------------------------------------------------------------------
# Between modules: loops and function-local imports (the rules of check_modules.py)
# --------------------------------------------------------------------------------------------
MODULE_SKIP = SKIP | {"__pycache__"}
#: the kernel and the pure cores that must already keep the module rules (the rest of the tree is
#: being brought to them by the redesign branches)
PURE_CORES = ("kernel/", "evaluation/scoring/", "evaluation/judge/", "annotation/importers/")


def project_modules(root: Path) -> dict[str, Path]:
    """Dotted module name → file for every ``.py`` under ``root`` outside tests, bench, migrations
    and hidden or virtual-environment folders (a package is its ``__init__``)."""
    mods = {}
    for f in sorted(root.rglob("*.py")):
        rel = f.relative_to(root)
        if any(p in MODULE_SKIP or p.startswith(".") for p in rel.parts):
            continue
        parts = list(rel.with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts:
            mods[".".join(parts)] = f
    return mods


def module_imports(root: Path):
    """``(module, imported module, file, line, function or None)`` for every import of another
    project module. ``from . import x`` imports the package (its ``__init__``) and ``x``; a name
    resolves to its longest known module prefix. ``function`` is the outermost function the import
    sits in, ``None`` at module level; imports in an ``AppConfig.ready`` method, a ``jobs.py`` module
    or a command entry point are left out when inside a function (they are allowed there)."""
    mods = project_modules(root)

    def resolve(name: str) -> str | None:
        while name:
            if name in mods:
                return name
            name = name.rpartition(".")[0]
        return None

    out = []
    for mod, f in mods.items():
        rel = f.relative_to(root).as_posix()
        tree = ast.parse(f.read_text(encoding="utf-8"))
        pkg = mod if f.name == "__init__.py" else mod.rpartition(".")[0]
        entry = f.name in ("jobs.py", "manage.py") or "management/commands/" in rel
        ready = {id(n) for cls in ast.walk(tree) if isinstance(cls, ast.ClassDef) for fn in cls.body
                 if isinstance(fn, ast.FunctionDef) and fn.name == "ready" for n in ast.walk(fn)}
        owner = {}
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for n in ast.walk(fn):
                    if n is not fn:
                        owner.setdefault(id(n), fn.name)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = pkg.split(".") if pkg else []
                    up = up[: len(up) - (node.level - 1)] if node.level > 1 else up
                    base = ".".join(up + ([node.module] if node.module else []))
                targets = [f"{base}.{a.name}" for a in node.names] + [base]
            else:
                continue
            func = owner.get(id(node))
            if func is not None and (entry or id(node) in ready):
                continue
            for t in sorted({resolve(t) for t in targets if t} - {None, mod}):
                out.append((mod, t, rel, node.lineno, func))
    return out


def _loops(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected sets of more than one module (Tarjan, iterative), each sorted."""
    index, low, on, stack, found = {}, {}, set(), [], []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return sorted(found, key=lambda c: (len(c), c))


def module_violations(root: Path) -> list[str]:
    """Every import loop between modules (module level, or hidden: closed by a function-local import)
    with the imports that tie it, then every function-local project import that is not allowed;
    empty when none."""
    imports = module_imports(root)
    top, every = {}, {}
    for mod, dst, _rel, _line, func in imports:
        every.setdefault(mod, set()).add(dst)
        if func is None:
            top.setdefault(mod, set()).add(dst)
    bad = []
    plain = _loops(top)
    for kind, comps in (("import loop", plain), ("hidden import loop", [c for c in _loops(every) if c not in plain])):
        for comp in comps:
            ties = [f"{rel}:{line}{f' (in {func}())' if func else ''} -> {dst}"
                    for mod, dst, rel, line, func in imports
                    if mod in comp and dst in comp and (func is None or kind.startswith("hidden"))]
            bad.append(f"{kind} ({', '.join(comp)}): " + "; ".join(ties))
    bad += [f"{rel}:{line} -> {dst}: function-local import in {func}()"
            for mod, dst, rel, line, func in imports if func is not None]
    return bad


def test_no_module_loops_and_no_function_local_imports():
    assert module_violations(ROOT) == []


def test_the_kernel_and_pure_cores_have_no_module_loops_or_function_local_imports():
    """Already true for the kernel, ``evaluation/scoring/``, ``evaluation/judge/`` and
    ``annotation/importers/``: a loop counts when one of its imports is written in there."""
    mine = [v for v in module_violations(ROOT) if any(v.startswith(p) or f" {p}" in v for p in PURE_CORES)]
    assert mine == []


@pytest.mark.parametrize("files, expected", [
    ({"kernel/__init__.py": "from .a import x\n", "kernel/a.py": "from . import b\nx = 1\n", "kernel/b.py": ""},
     ["import loop (kernel, kernel.a): kernel/__init__.py:1 -> kernel.a; kernel/a.py:1 -> kernel"]),
    ({"kernel/__init__.py": "from .reg import get\n", "kernel/reg.py": "def get():\n    from . import tool\n",
      "kernel/tool.py": "from .reg import get\n"},
     ["hidden import loop (kernel, kernel.reg, kernel.tool): kernel/__init__.py:1 -> kernel.reg; "
      "kernel/reg.py:2 (in get()) -> kernel; kernel/reg.py:2 (in get()) -> kernel.tool; kernel/tool.py:1 -> kernel.reg",
      "kernel/reg.py:2 -> kernel: function-local import in get()",
      "kernel/reg.py:2 -> kernel.tool: function-local import in get()"]),
    ({"evaluation/s.py": "import math\ndef f():\n    import json\n    from evaluation.t import y\n",
      "evaluation/t.py": "y = 1\n"},
     ["evaluation/s.py:4 -> evaluation.t: function-local import in f()"]),
])
def test_the_module_check_reports_each_offender(tmp_path, files, expected):
    """A loop written at module level (``from . import a`` is an import of the package too), a loop
    closed by a function-local import, and a function-local project import (a standard-library
    import inside a function is no offence), each in a tree of empty packages."""
    assert module_violations(_tree(tmp_path, files)) == expected


def test_the_module_check_allows_ready_jobs_and_commands(tmp_path):
    root = _tree(tmp_path, {
        "replay/apps.py": "class C:\n    def ready(self):\n        from replay import services\n",
        "replay/services.py": "def start():\n    return 1\n",
        "replay/jobs.py": "def run():\n    from replay.services import start\n",
        "replay/management/commands/go.py": "def handle():\n    from replay.services import start\n",
        "manage.py": "def main():\n    from replay.services import start\n",
    })
    assert module_violations(root) == []


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
    from evaluation.selectors.adjudication import release_adjudication
    from releases.services.export import SIDECAR_FIELDS
    from replay.selectors import succeeded_runs_of_head
    from replay.services.gold import require_succeeded_replay
    from replay.services.layers import input_fingerprint
    from replay.services.paths import artifact_path
    from replay.services.runs import replay_new_variant

    assert require_succeeded_replay in review.submission_checks()
    assert qc._REPLAY_SOURCE == [qc.ReplaySource(succeeded_runs=succeeded_runs_of_head, artifact_path=artifact_path,
                                                 input_fingerprint=input_fingerprint)]
    assert variants._VARIANT_MADE_HOOKS == [replay_new_variant]
    assert SIDECAR_FIELDS["adjudication"] is release_adjudication


def test_the_old_tool_path_is_the_same_modules():
    """``replay.tools.<name>`` (imported by ``../shared/tools/check_tool_examples.py``) is the very
    module ``kernel.tools.<name>``: one registry and one ``ToolError`` class, not a second copy."""
    import replay.tools.base
    import replay.tools.registry

    import kernel.tools.base
    import kernel.tools.registry

    assert replay.tools.registry is kernel.tools.registry and replay.tools.base is kernel.tools.base
    assert replay.tools.registry.REGISTRY is kernel.tools.registry.REGISTRY
