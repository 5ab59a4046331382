"""The studio's demo (``manage.py demo``): the real demo data, users, two example tasks (replayed)
and an example agent run.

Idempotent: running it again changes nothing that exists. Reads the real data from
STUDIO_DEMO_DATA (default ../shared/realdata). When that folder is missing (a fresh clone without
../shared) it says so and builds a SYNTHETIC event instead (``evaluation.demo_synthetic``: a
generated pre/post GeoTIFF pair, an xBD-class damage mask and building footprints, imported through
the same importers), with its own two replayed tasks (``fixtures/demo_tasks_synthetic.json``) and
example run (``fixtures/SYNTHETIC_demo_run``), so that the whole workflow can be walked.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from django.conf import settings
from django.db import transaction

from annotation.importers.common import DAMAGE_CLASS_MAP
from annotation.models import Event, Task
from annotation.services import imports
from annotation.services.tasks import build_input_data, create_task
from evaluation import demo_synthetic
from evaluation.models import AgentRun
from evaluation.services.runs import import_run_dir
from replay.models import ReplayRun
from replay.services.runs import start_replay
from studio.accounts import upsert_user

FIXTURES = Path(settings.BASE_DIR) / "fixtures"

# username, password, roles. Printed by the command; development only.
DEMO_USERS = [
    ("maxine", "demo-maxine", ["maintainer", "author", "reviewer", "scorer"]),
    ("ada", "demo-ada", ["author"]),
    ("rey", "demo-rey", ["reviewer"]),
    ("sam", "demo-sam", ["scorer"]),
]


def _quiet(text: str) -> None:
    """Say nothing (the default ``step`` and ``warn`` of :func:`load_demo`)."""


def load_demo(*, skip_osm: bool = False, step: Callable[[str], None] = _quiet,
              warn: Callable[[str], None] = _quiet) -> dict:
    """Load the demo (see the module docstring): the :data:`DEMO_USERS` (``maxine`` made superuser
    and staff), the real events of ``settings.STUDIO_DEMO_DATA`` (without the OSM extract when
    ``skip_osm``) or, when that folder is missing, the SYNTHETIC event, its two replayed tasks and
    its example agent run. Idempotent. ``step(text)`` hears each step done, ``warn(text)`` the
    missing-data notice (a paragraph). Returns what the studio then holds, for the links:
    ``{"events": [slug, ...] by slug, "tasks": [(question_id, id), ...] of the demo's tasks,
    "runs": [(agent name, run id), ...] of every run by id}``."""
    users = {name: upsert_user(name, pw, roles) for name, pw, roles in DEMO_USERS}
    users["maxine"].is_superuser = users["maxine"].is_staff = True
    users["maxine"].save(update_fields=["is_superuser", "is_staff"])
    root = Path(settings.STUDIO_DEMO_DATA)
    if root.is_dir():
        _import(root, skip_osm, step)
        tasks = _tasks(users["ada"], users["maxine"], FIXTURES / "demo_tasks.json", _placeholders, step)
        _run(users["maxine"], FIXTURES / "demo_run", "demo-agent", step)
    else:
        warn(f"\n!! Demo data folder missing: {root}\n"
             "!! Building a SYNTHETIC demo event instead (generated imagery, mask and footprints; not real data).\n"
             "!! For the real samples set STUDIO_DEMO_DATA to the folder that holds xbd-hurricane-florence/,\n"
             "!! xbd-socal-fire/, xview2-deploy-joplin/, osm-helsinki/ ... (../shared/realdata; each folder's\n"
             "!! SOURCE.md says where it comes from) and run again.\n")
        _import_synthetic(step)
        tasks = _tasks(users["ada"], users["maxine"], FIXTURES / "demo_tasks_synthetic.json",
                       lambda event: dict(SYNTHETIC_NAMES), step)
        _run(users["maxine"], FIXTURES / "SYNTHETIC_demo_run", SYNTHETIC_AGENT, step)
    return {"events": list(Event.objects.order_by("slug").values_list("slug", flat=True)),
            "tasks": [(t.question_id, t.pk) for t in tasks],
            "runs": [(r.agent.name, r.pk) for r in AgentRun.objects.select_related("agent").order_by("id")]}


def _import(root: Path, skip_osm: bool, step: Callable[[str], None]) -> None:
    step("importing xBD hurricane-florence (imagery + class mask)")
    imports.import_xbd_folder(root / "xbd-hurricane-florence")
    step("importing xBD socal-fire (imagery + labels, georeferenced by the affine fit)")
    imports.import_xbd_folder(root / "xbd-socal-fire")
    step("importing xBD santa-rosa labels (no imagery)")
    imports.import_xbd_folder(root / "xbd-santa-rosa-labels")
    step("importing Joplin tornado chips and vectors (xView2 deploy samples)")
    joplin = root / "xview2-deploy-joplin"
    imports.import_raster_file(joplin / "output_chips_pre_0_pre.tif", event_slug="joplin-tornado", phase="pre",
                               modality="optical", disaster_type="tornado")
    imports.import_raster_file(joplin / "output_chips_post_0_post.tif", event_slug="joplin-tornado", phase="post",
                               modality="optical", disaster_type="tornado")
    imports.import_vector_file(joplin / "damage.shp", event_slug="joplin-tornado")
    imports.import_vector_file(joplin / "bldg_polys.gpkg", event_slug="joplin-tornado")
    if not skip_osm:
        step("importing OSM roads and POIs of Helsinki")
        imports.import_osm_file(root / "osm-helsinki" / "test.osm.pbf", event_slug="helsinki-osm")


def _import_synthetic(step: Callable[[str], None]) -> None:
    """Generate the SYNTHETIC files under the data root and import them like any other data."""
    folder = Path(settings.STUDIO_DATA_ROOT) / "demo-sources" / "SYNTHETIC"
    step(f"generating the SYNTHETIC event's files in {folder}")
    paths = demo_synthetic.write_synthetic_event(folder)
    slug, dtype = demo_synthetic.EVENT_SLUG, "hurricane"
    step("importing SYNTHETIC pre/post imagery, damage mask (xBD classes) and building footprints")
    # the first import names the event (an importer names a new event after its `name`);
    # the second, unchanged, only renames that layer
    imports.import_raster_file(paths["pre"], event_slug=slug, phase="pre", modality="optical",
                               disaster_type=dtype, name=demo_synthetic.EVENT_NAME)
    imports.import_raster_file(paths["pre"], event_slug=slug, phase="pre", modality="optical",
                               disaster_type=dtype, name="SYNTHETIC pre-disaster image")
    imports.import_raster_file(paths["post"], event_slug=slug, phase="post", modality="optical",
                               disaster_type=dtype, name="SYNTHETIC post-disaster image")
    imports.import_raster_file(paths["mask"], event_slug=slug, kind="mask", class_map=DAMAGE_CLASS_MAP,
                               annotates=demo_synthetic.FILES["post"], disaster_type=dtype,
                               name="SYNTHETIC damage mask (xBD classes)")
    imports.import_vector_file(paths["buildings"], event_slug=slug, modality="buildings", disaster_type=dtype,
                               name="SYNTHETIC building footprints")


def _tasks(author, maintainer, spec_path: Path, placeholders, step: Callable[[str], None]) -> list[Task]:
    spec = json.loads(spec_path.read_text())
    tasks = []
    for t in spec["tasks"]:
        event = Event.objects.get(slug=t["event"])
        names = placeholders(event)
        fill = lambda v: _fill(v, names)  # noqa: E731, B023 (used within this iteration)
        qid = f"{t['sample_id']}_task0"
        task = Task.objects.filter(question_id=qid).first()
        if task is None:
            with transaction.atomic():
                layer_ids = {k: event.layers.get(file_name=fill(v)).pk for k, v in t["input"].items()}
                content = {
                    "question": t["question"], "task_category": t["task_category"],
                    "task_category_code": t["task_category_code"], "disaster_type": event.disaster_type,
                    "input_data": build_input_data(event, layer_ids),
                    "trajectory": fill(t["trajectory"]), "answer_spec": t["answer"],
                }
                task = create_task(author, event, dimension=t["dimension"], content=content, sample_id=t["sample_id"])
            step(f"created task {qid}")
        if not ReplayRun.objects.filter(task=task, revision=task.head, status="succeeded").exists():
            run = start_replay(maintainer, task)
            run.refresh_from_db()
            step(f"replayed {qid}: {run.status} {json.dumps(run.final_answer) if run.final_answer else run.error}")
        tasks.append(task)
    return tasks


def _run(maintainer, run_dir: Path, agent: str, step: Callable[[str], None]) -> None:
    if AgentRun.objects.filter(agent__name=agent).exists():
        return
    run = import_run_dir(maintainer, run_dir, agent)
    step(f"imported example agent run: DORA score {run.dora_score}")


#: the layer names the synthetic tasks' {key} placeholders stand for (importers keep a raster's
#: file name and name a GeoJSON layer ``<stem>.geojson``)
SYNTHETIC_NAMES = dict(demo_synthetic.FILES)
SYNTHETIC_AGENT = "SYNTHETIC-demo-agent"


def _placeholders(event: Event) -> dict[str, str]:
    """Layer file names of an event by role: pre/post imagery, damage polygons, building footprints."""
    names = {}
    for layer in event.layers.order_by("id"):
        fn = layer.file_name
        if layer.kind == "raster" and layer.phase in ("pre", "post"):
            names.setdefault(layer.phase, fn)
        elif layer.kind == "vector" and fn.startswith("damage"):
            names.setdefault("damage", fn)
        elif layer.kind == "vector" and fn.startswith("bldg_polys"):
            names.setdefault("buildings", fn)
    return names


def _fill(value, names: dict[str, str]):
    if isinstance(value, str):
        for key, fn in names.items():
            value = value.replace("{" + key + "}", fn)
        return value
    if isinstance(value, list):
        return [_fill(v, names) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, names) for k, v in value.items()}
    return value
