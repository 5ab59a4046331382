"""A web process's warm-up (studio/warmup.py): a process that loads ``studio.wsgi``, as gunicorn
does, has imported every view module and compiled every project template before its first request;
``STUDIO_WARM_UP=0`` leaves both to the first request. Checked in a child process: this test
process has long imported everything."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO

PROBE = """
import json, sys
import studio.wsgi
from django.template import engines
loader = engines["django"].engine.template_loaders[0]
print(json.dumps({"views": sorted(m for m in sys.modules if m.startswith("frontend.views.")),
                  "templates": sorted(loader.get_template_cache), "pandas": "pandas" in sys.modules}))
"""


def _probe(tmp_path: Path, warm: str) -> dict:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "studio.settings", "PYTHONPATH": str(REPO), "STUDIO_WARM_UP": warm,
           "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}", "STUDIO_VAR_DIR": str(tmp_path / "var"),
           "CELERY_BROKER_URL": ""}
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_web_process_imports_its_views_and_compiles_its_templates_before_its_first_request(tmp_path):
    project = sorted(str(p.relative_to(REPO / "frontend" / "templates")) for p in (REPO / "frontend" / "templates").rglob("*.html"))
    views = sorted(f"frontend.views.{p.stem}" for p in (REPO / "frontend" / "views").glob("*.py") if p.stem != "__init__")
    warm = _probe(tmp_path, "1")
    assert set(views) <= set(warm["views"])
    assert set(project) <= set(warm["templates"]) and warm["pandas"]
    cold = _probe(tmp_path, "0")
    assert cold["templates"] == [] and not cold["pandas"]
    assert not set(views) <= set(cold["views"])
