"""The studio's page scripts are ES modules served as they are, with no build step: every relative
``import`` resolves to a file of ``frontend/static`` (what ``runserver --insecure`` and the test
server serve), every template loads them with ``type="module"``, and a manifest storage
(``collectstatic`` with hashed names) rewrites each import to the hashed file it collected.

Expected values: the import lists are read from the scripts themselves; Django's
``ManifestStaticFilesStorage`` rewrites ``import … from "./x.js";`` only with
``support_js_module_import_aggregation = True`` (Django 4.2+, "ManifestStaticFilesStorage" in the
staticfiles reference), so a project that turns the manifest storage on must turn that on too.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from django.conf import settings
from django.contrib.staticfiles.storage import ManifestStaticFilesStorage
from django.core.files.storage import FileSystemStorage
from django.utils.module_loading import import_string

ROOT = Path(__file__).resolve().parents[1]
STATIC = ROOT / "frontend" / "static"
SCRIPTS = sorted((STATIC / "studio").rglob("*.js"))
IMPORT = re.compile(r"""^(?:import|export)\b[^;]*?\bfrom\s*["']([^"']+)["']\s*;|^import\s*["']([^"']+)["']\s*;""", re.M | re.S)


def _imports(text: str) -> list[str]:
    return [a or b for a, b in IMPORT.findall(text)]


class ModuleManifestStorage(ManifestStaticFilesStorage):
    support_js_module_import_aggregation = True


def test_every_relative_import_of_a_page_script_is_a_file_beside_it():
    seen = 0
    for path in SCRIPTS:
        for spec in _imports(path.read_text(encoding="utf-8")):
            assert spec.startswith("./") or spec.startswith("../"), (path.name, spec)  # no bare npm names
            target = (path.parent / spec).resolve()
            assert target.is_file() and target.is_relative_to(STATIC / "studio"), (path.name, spec)
            seen += 1
    assert seen >= 20  # the editor's main.js alone imports 11 modules


def test_only_api_js_reads_the_csrf_cookie():
    """One place for the CSRF token (it was read in five scripts, two of them without decoding it)."""
    readers = [p.relative_to(STATIC).as_posix() for p in SCRIPTS if "document.cookie" in p.read_text(encoding="utf-8")]
    assert readers == ["studio/api.js"]


def test_templates_load_the_studio_scripts_as_modules():
    tags = []
    for tpl in (ROOT / "frontend" / "templates").rglob("*.html"):
        for tag in re.findall(r"<script\b[^>]*\{% static 'studio/[^']+\.js' %\}[^>]*>", tpl.read_text(encoding="utf-8")):
            tags.append((tpl.name, tag))
    assert len(tags) >= 15
    assert [t for t in tags if 'type="module"' not in t[1]] == []
    # what pages preload (modulepreload: fetched while the page is parsed, run when imported) exists
    preloads = [m for tpl in (ROOT / "frontend" / "templates").rglob("*.html")
                for m in re.findall(r"<link rel=\"modulepreload\" href=\"\{% static '([^']+)' %\}\">", tpl.read_text(encoding="utf-8"))]
    assert len(preloads) >= 11 and all((STATIC / m).is_file() for m in preloads), preloads


def test_a_manifest_storage_must_rewrite_module_imports():
    backend = import_string(settings.STORAGES["staticfiles"]["BACKEND"])
    if issubclass(backend, ManifestStaticFilesStorage):
        assert backend.support_js_module_import_aggregation


def test_hashed_scripts_import_the_hashed_files_collectstatic_wrote(tmp_path):
    """What ``collectstatic`` does with a manifest storage, on the studio's scripts: copy, then
    post-process (hash and rewrite); every import of a hashed script names a hashed file written."""
    source = FileSystemStorage(location=STATIC)
    storage = ModuleManifestStorage(location=tmp_path, base_url="/static/")
    paths = {}
    for path in SCRIPTS:
        rel = path.relative_to(STATIC).as_posix()
        with source.open(rel) as f:
            storage.save(rel, f)
        paths[rel] = (source, rel)
    for _name, _hashed, processed in storage.post_process(paths):
        assert not isinstance(processed, Exception), processed
    manifest = json.loads((tmp_path / "staticfiles.json").read_text())["paths"]
    assert set(manifest) == set(paths)
    hashed_names = set(manifest.values())
    main = tmp_path / manifest["studio/editor/main.js"]
    main_imports = _imports(main.read_text(encoding="utf-8"))
    assert len(main_imports) == 11 and all(re.search(r"\.[0-9a-f]{12}\.js$", s) for s in main_imports), main_imports
    for rel, hashed in manifest.items():
        for spec in _imports((tmp_path / hashed).read_text(encoding="utf-8")):
            target = ((tmp_path / hashed).parent / spec).resolve().relative_to(tmp_path.resolve()).as_posix()
            assert target in hashed_names, (rel, spec)
