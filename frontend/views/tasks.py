"""Task pages: list, review queue, the map-native editor, the review page, revision history, and the
replay overlays the editor draws. Views read through selectors and write through the API (the
same service functions); they only shape data for the templates and ``studio/editor/`` (the task editor's modules).
"""
from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

import numpy as np
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST, require_safe

from annotation import tiles
from annotation.models import Event, Layer, Task, TaskRevision
from annotation.qc import EVAL_TYPES
from annotation.selectors_tasks import (
    QUEUE_TABS,
    last_return,
    queue_counts,
    task_audit,
    task_authors,
    task_comments,
    task_detail,
    task_page,
    task_revision,
    task_revisions,
    user_draft,
)
from annotation.selectors_variants import variant_row, variants_of
from annotation.services import review as review_services
from annotation.services.content import revision_content
from annotation.services.tasks import EDITABLE_STATUSES, answer_proposals, diff_revisions, refresh_derived, run_fast_qc
from annotation.services.variants import BASE_STATUSES
from annotation.variants import EXTRANEOUS_LEVELS, KINDS, STRATEGIES
from experiments.selectors import task_experiments
from frontend.views.events import map_config
from kernel.catalogue import catalogue_path
from kernel.errors import DomainError
from kernel.tools.base import gdal_scope
from kernel.tools.perception import TOOLS as PERCEPTION_TOOLS
from kernel.tools.perception import GTLabelError, remap_gt
from replay.api import tool_catalogue
from replay.models import ReplayRun
from replay.rendering import class_labels
from replay.services.paths import artifact_path
from studio.permissions import Action, can, require, user_roles

# DORA's category codes per dimension (dora-format.md: task_category_code is T1..T5).
CATEGORY_CODES = {"t1": "T1", "t2": "T2", "t3": "T3", "t4": "T4", "t5": "T5"}
DISASTER_TYPES = ["hurricane", "earthquake", "flood", "wildfire", "volcano", "tsunami", "tornado", "landslide",
                  "explosion", "urban heat"]  # domain.md: the ten disaster types
# Task categories seen in DORA's task files, per dimension (suggestions; any text is accepted).
TASK_CATEGORIES = {
    "t1": ["damage_assessment", "damage_counting", "flood_extent", "area_estimation"],
    "t2": ["spatial_relation", "proximity_analysis", "overlay_analysis", "accessibility"],
    "t3": ["route_planning", "resource_allocation", "evacuation_planning", "debris_clearance"],
    "t4": ["change_detection", "recovery_monitoring", "temporal_trend"],
    "t5": ["situation_report", "multi_modal_summary"],
}


def _truthy_param(request, name: str) -> str | None:
    value = (request.GET.get(name) or "").strip()
    return value or None


def _cursor(request) -> int | None:
    try:
        return int(request.GET.get("before") or 0) or None
    except ValueError:
        return None


# ---- lists ---------------------------------------------------------------------------------------
@require_safe
def task_list_page(request):
    """All tasks, newest first; filters event, dimension, status, author; keyset pages of 50."""
    status = _truthy_param(request, "status")
    page = task_page(event_slug=_truthy_param(request, "event"), dimension=_truthy_param(request, "dimension"),
                     author=_truthy_param(request, "author"), statuses=[status] if status else None,
                     before=_cursor(request))
    return render(request, "frontend/task_list.html", {
        "page": page, "tasks": page.rows, "events": Event.objects.order_by("slug").only("slug"),
        "dimensions": Task.Dimension.choices, "statuses": Task.Status.choices, "authors": task_authors(),
        "next_query": _next_query(request, page.next_before),
    })


def _next_query(request, before: int | None) -> str | None:
    if not before:
        return None
    q = request.GET.copy()
    q["before"] = str(before)
    return q.urlencode()


@require_safe
def review_queue_page(request):
    """The reviewers' queue: tabs submitted (and in review), returned, approved; same filters; keyset."""
    tab = request.GET.get("tab") or "submitted"
    if tab not in QUEUE_TABS:
        raise Http404("no such queue")
    filters = {"event_slug": _truthy_param(request, "event"), "dimension": _truthy_param(request, "dimension"),
               "author": _truthy_param(request, "author")}
    page = task_page(statuses=QUEUE_TABS[tab], before=_cursor(request), **filters)
    base = request.GET.copy()
    base.pop("before", None)
    tabs = []
    counts = queue_counts(**filters)
    for name in QUEUE_TABS:
        base["tab"] = name
        tabs.append({"name": name, "count": counts[name], "query": base.urlencode(), "active": name == tab})
    return render(request, "frontend/task_queue.html", {
        "tab": tab, "tabs": tabs, "page": page, "tasks": page.rows,
        "events": Event.objects.order_by("slug").only("slug"), "dimensions": Task.Dimension.choices,
        "authors": task_authors(), "next_query": _next_query(request, page.next_before),
    })


# ---- the editor ------------------------------------------------------------------------------------
_catalogue_path = catalogue_path  # one search path for the catalogue: kernel.catalogue


_RETURN = re.compile(r"^\s*([A-Za-z_][\w]*)\s*:\s*(.+?)\s*$")


def _guess_type(key: str) -> str:
    """A result key's type from its name, where the catalogue says nothing (a hint, not a rule)."""
    if key.endswith("_path"):
        return "str (file)"
    if key.endswith(("_count", "_idx", "_index")) or key in ("count", "total"):
        return "int"
    if key.endswith(("_m", "_m2", "_km", "_px", "_px2", "_ratio", "_pct", "_area")) or key in ("ratio", "area", "value"):
        return "float"
    if key in ("classes", "counts", "stats", "statistics"):
        return "dict"
    if key.endswith("s") and key not in ("status",):
        return "list"
    return "any"


@lru_cache(maxsize=1)
def result_key_types() -> dict[str, dict[str, str]]:
    """``{tool: {result key: type}}`` from the benchmark catalogue's ``returns`` ("count:int"),
    completed by the registry's ``result_keys`` with a type guessed from the key's name.

    The catalogue is ``../shared/spec/dora-tools.json`` (or ``$STUDIO_TOOL_CATALOGUE``); without it
    every type is a guess.
    """
    out: dict[str, dict[str, str]] = {}
    path = _catalogue_path()
    if path is not None:
        try:
            for entry in json.loads(path.read_text(encoding="utf-8")):
                types = {}
                for text in entry.get("returns") or []:
                    m = _RETURN.match(str(text))
                    if m and m.group(1) not in types:
                        types[m.group(1)] = m.group(2)
                out[entry["name"]] = types
        except (OSError, ValueError, KeyError, TypeError):
            out = {}
    for tool in tool_catalogue():
        types = out.setdefault(tool["name"], {})
        for key in tool["result_keys"]:
            types.setdefault(key, _guess_type(key))
    return out


def _tools() -> list[dict]:
    types = result_key_types()
    tools = []
    for t in tool_catalogue():
        t = dict(t)
        t["results"] = [{"key": k, "type": types.get(t["name"], {}).get(k, _guess_type(k))}
                        for k in t["result_keys"] if k not in ("tool", "_meta")]
        tools.append(t)
    return tools


def _layer_rows(event: Event) -> list[dict]:
    rows = []
    for la in event.layers.all():
        rows.append({
            "id": la.id, "name": la.name, "kind": la.kind, "modality": la.modality, "phase": la.phase,
            "file_name": la.file_name, "frame": la.frame, "crs": la.crs, "gsd_m": la.gsd_m, "bands": la.bands,
            "width": la.width, "height": la.height, "feature_count": la.feature_count,
            "class_map": la.class_map, "annotates": la.annotates_id,
            "ground_truth": la.kind == Layer.Kind.MASK,  # a GT mask: the gold's source, not an agent input
        })
    return rows


def class_remaps(layers) -> dict[str, list[dict]]:
    """``{tool: [{mask, rows: [[GT value, GT label, tool class, tool label]]}]}``: how each
    perception tool's GT replay reads each ground-truth mask of the event, worked out by the
    replay's own remapping (``kernel.tools.perception.remap_gt``, label names → the tool's classes)
    on the mask's class map. A mask whose labels a tool cannot read is left out for that tool.
    """
    masks = [la for la in layers if la.kind == "mask" and la.class_map]
    out: dict[str, list[dict]] = {}
    for name, tool in PERCEPTION_TOOLS.items():
        names = tool.result_classes or tool.file_classes or {}
        for la in masks:
            cmap = {int(k): str(v) for k, v in la.class_map.items()}
            try:
                _, mapping = remap_gt(np.array(sorted(cmap), dtype=np.int64), cmap, tool.scheme, tool=name,
                                      mask_name=la.file_name)
            except (GTLabelError, ValueError):
                continue
            rows = [[v, cmap[v], c, names.get(c, "background" if c == 0 else str(c))] for v, c in sorted(mapping.items())]
            out.setdefault(name, []).append({"mask": la.file_name, "rows": rows})
    return out


def map_config_with_remaps(layers, calls) -> dict:
    """``map_config(layers)`` with each GT mask's legend saying how the perception steps among
    ``calls`` (the trajectory's tool names) read it: a row's ``to`` is ``["seg.building_damage 2
    partially damaged", ...]`` (``class_remaps``, the replay's own ``remap_gt``), so the map's
    legend of an xBD mask (0–5) names the tool's classes (1–3) next to them."""
    layers = list(layers)
    cfg = map_config(layers)
    remaps = class_remaps(layers)
    used = [c for c in dict.fromkeys(calls) if c in remaps]
    if not used:
        return cfg
    for spec in cfg["layers"]:
        if spec.get("kind") != "mask" or not spec.get("legend"):
            continue
        for call in used:
            rows = next((r["rows"] for r in remaps[call] if r["mask"] == spec.get("file_name")), None)
            for value, _label, cls, cls_label in rows or []:
                for row in spec["legend"]:
                    if row["value"] == value:
                        row.setdefault("to", []).append(f"{call} {cls} {cls_label}")
    return cfg


def _calls(revision) -> list[str]:
    """The tool names of a revision's trajectory, in order."""
    return [st["call"] for st in (revision.trajectory or []) if isinstance(st, dict) and isinstance(st.get("call"), str)]


def _thread(c) -> dict:
    def one(x):
        return {"id": x.pk, "author": x.author.username if x.author_id else None, "body": x.body,
                "created_at": x.created_at.isoformat(), "revision_number": x.revision_number}
    return {**one(c), "step_index": c.step_index, "answer_field": c.answer_field, "location": c.location,
            "resolved": c.resolved, "replies": [one(r) for r in getattr(c, "thread_replies", [])]}


def _editor_context(request, event: Event, task: Task | None) -> dict:
    user = request.user
    config = {
        "event": {"slug": event.slug, "name": event.name, "disaster_type": event.disaster_type},
        "events": list(Event.objects.order_by("slug").values_list("slug", flat=True)),
        "layers": _layer_rows(event),
        "class_remaps": class_remaps(event.layers.all()),
        "tools": _tools(),
        "eval_types": list(EVAL_TYPES),
        "dimensions": [[c, label] for c, label in Task.Dimension.choices],
        "category_codes": CATEGORY_CODES,
        "task_categories": TASK_CATEGORIES,
        "disaster_types": DISASTER_TYPES,
        "user": {"name": user.get_username(), "roles": sorted(user_roles(user))},
        "task": None,
        "urls": {"tasks": reverse("task-list"), "queue": reverse("review-queue")},
    }
    if task is not None:
        head = task.head
        latest = ReplayRun.objects.filter(task=task, revision_id=task.head_id).order_by("-id").only("id").first()
        draft = user_draft(task, user)
        ret = last_return(task) if task.status == Task.Status.RETURNED else None
        config["task"] = {
            "id": task.pk, "question_id": task.question_id, "version": task.version, "status": task.status,
            "dimension": task.dimension, "created_by": task.created_by.username if task.created_by_id else None,
            "content": revision_content(head) if head else {},
            "can_edit": task.status in EDITABLE_STATUSES and can(user, Action.TASK_EDIT, task),
            "can_comment": can(user, Action.TASK_COMMENT, task),
            "actions": [{"name": t.name, "label": t.label, "needs_reason": t.needs_reason}
                        for t in review_services.available_transitions(user, task)],
            "latest_replay": latest.pk if latest else None,
            "draft": ({"base_version": draft.base_version, "content": draft.content,
                       "updated_at": draft.updated_at.isoformat()} if draft else None),
            "returned": ({"by": ret.actor.username if ret.actor_id else None, "reason": ret.reason,
                          "at": ret.created_at.isoformat()} if ret else None),
            "comments": [_thread(c) for c in task_comments(task)],
            "urls": {"detail": reverse("task-detail", args=[task.pk]), "history": reverse("task-history", args=[task.pk])},
        }
    proposals = answer_proposals(task.head) if task is not None and task.head_id else []
    can_accept = bool(task is not None and config["task"]["can_edit"])
    calls = _calls(task.head) if task is not None and task.head_id else []
    return {"event": event, "task": task, "config": config, "map_config": map_config_with_remaps(event.layers.all(), calls),
            "answer_proposals": proposals, "can_accept_proposals": can_accept}


@require_safe
def task_new_page(request):
    """The editor for a new task on ``?event=<slug>`` (default: the first event). Only for roles
    that create tasks (``task.create``); others get the 403 page naming the role."""
    require(request.user, Action.TASK_CREATE)
    slug = request.GET.get("event")
    event = get_object_or_404(Event, slug=slug) if slug else Event.objects.order_by("slug").first()
    if event is None:
        raise Http404("no event yet: import data first")
    return render(request, "frontend/task_edit.html", _editor_context(request, event, None))


@require_safe
def task_edit_page(request, pk: int):
    """The editor on a task's head revision (read-only when its status or the user's role locks it)."""
    try:
        task = task_detail(pk)
    except Task.DoesNotExist as exc:
        raise Http404("no such task") from exc
    return render(request, "frontend/task_edit.html", _editor_context(request, task.event, task))


# ---- review page and history --------------------------------------------------------------------------
def _qc(task: Task):
    try:
        return review_services.submission_findings(task)
    except Exception:  # QC must never break the page; the fast checks are the stable fallback
        return run_fast_qc(task.head)


@require_safe
def task_detail_page(request, pk: int):
    """The review page: content, QC, replay, comments, transitions, audit trail, revisions, and the
    experiments that ran the task (``experiments.selectors.task_experiments``: solved by N of M repeats)."""
    try:
        task = task_detail(pk)
    except Task.DoesNotExist as exc:
        raise Http404("no such task") from exc
    latest = ReplayRun.objects.filter(task=task).order_by("-id").only("id").first()
    threads = task_comments(task)
    findings = _qc(task)
    return render(request, "frontend/task_detail.html", {
        "task": task, "rev": task.head, "qc": findings, "revisions": task_revisions(task)[:20],
        "can_refresh_derived": task.status != Task.Status.RELEASED and can(request.user, Action.TASK_EDIT, task)
        and any(f.check.startswith("derived.manifest_") for f in findings),
        "latest_replay_id": latest.pk if latest else None,
        "layers": list(task.event.layers.values("id", "file_name", "kind", "frame", "width", "height", "bounds", "class_map")),
        "map_config": map_config_with_remaps(task.event.layers.all(), _calls(task.head)),
        "threads": threads, "open_threads": sum(1 for t in threads if not t.resolved),
        "audit": task_audit(task),
        "actions": [{"name": t.name, "label": t.label, "needs_reason": t.needs_reason}
                    for t in review_services.available_transitions(request.user, task)],
        "can_comment": can(request.user, Action.TASK_COMMENT, task),
        "can_resolve": can(request.user, Action.COMMENT_RESOLVE, task),
        "can_edit": task.status in EDITABLE_STATUSES and can(request.user, Action.TASK_EDIT, task),
        "returned": last_return(task) if task.status == Task.Status.RETURNED else None,
        "experiments": task_experiments(request.user, task),
        **_variant_context(request.user, task),
    })


@require_POST
def task_refresh_derived(request, pk: int):
    """The task page's "Refresh derived values" button: ``refresh_derived`` on the version the page
    showed (``expected_version``), then back to the page with what happened."""
    task = get_object_or_404(Task, pk=pk)
    try:
        rev = refresh_derived(request.user, task, expected_version=int(request.POST.get("expected_version") or -1))
    except (DomainError, PermissionDenied) as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"r{rev.number} saved: {rev.message}. Replay it for the gold.")
    return redirect("task-detail", pk=pk)


def _variant_context(user, task) -> dict:
    """The task page's variant block: the variant this task is (if it is one), the variants made
    from it, and the "Make a variant" form's choices when the user may make one (an approved or
    released task and the ``task.create`` permission, as ``create_variant`` demands)."""
    return {"variant_of": variant_row(task), "variants": list(variants_of(task)),
            "can_make_variant": task.status in BASE_STATUSES and can(user, Action.TASK_CREATE),
            "variant_kinds": KINDS, "variant_levels": EXTRANEOUS_LEVELS, "variant_strategies": STRATEGIES}


@require_safe
def task_history_page(request, pk: int):
    """Every revision (who, when, message); the diff between any two (``?a=&b=``); restore buttons."""
    try:
        task = task_detail(pk)
    except Task.DoesNotExist as exc:
        raise Http404("no such task") from exc
    revisions = list(task_revisions(task))
    try:
        b = int(request.GET.get("b") or task.version)
        a = int(request.GET.get("a") or max(b - 1, 1))
        ra, rb = task_revision(task, a), task_revision(task, b)
    except (ValueError, TaskRevision.DoesNotExist) as exc:
        raise Http404("no such revision") from exc
    return render(request, "frontend/task_history.html", {
        "task": task, "revisions": revisions, "a": a, "b": b, "ra": ra, "rb": rb, "diff": diff_revisions(ra, rb),
        "can_restore": task.status in EDITABLE_STATUSES and can(request.user, Action.TASK_EDIT, task),
    })


# ---- replay overlays for the editor's map ----------------------------------------------------------------
CHART_PREFIXES = ("vis.", "report.", "model.")


def _raster_overlay(run: ReplayRun, name: str, path: Path) -> dict:
    import rasterio
    from rasterio.warp import transform_bounds

    with gdal_scope():  # one GDAL environment for the open and the reprojection (kernel.tools.base)
        with rasterio.open(path) as src:
            width, height, crs, bounds, count, dtype = src.width, src.height, src.crs, src.bounds, src.count, src.dtypes[0]
            georef = crs is not None and not src.transform.is_identity
        spec = {"kind": "mask" if count == 1 and "int" in dtype else "raster",
                "image": reverse("replay-artifact-png", args=[run.pk, name]), "width": width, "height": height}
        if georef:
            w, s, e, n = transform_bounds(crs, "EPSG:4326", *bounds)
            spec.update(frame="geographic", bounds=[w, s, e, n])
        else:
            spec.update(frame="pixel", bounds=[0, 0, width, height])
    return spec


def _vector_overlay(run: ReplayRun, name: str, path: Path) -> dict:
    doc = json.loads(path.read_text(encoding="utf-8"))
    if isinstance(doc, dict) and doc.get("crs"):
        return {"kind": "vector", "frame": "geographic",
                "geojson": reverse("replay-artifact-wgs84", args=[run.pk, name])}
    return {"kind": "vector", "frame": "pixel", "data": doc}


def mask_legend(step, layers, remaps: dict[str, list[dict]]) -> tuple[list[dict], str] | None:
    """The map legend of a step's mask output and a note on it, or None when the step names no
    classes (``replay.rendering.class_labels``).

    Rows ``{"value", "label", "colour", "from"}``: each class of the tool, its colour (the one
    palette, ``annotation.tiles.label_colours``; what ``artifact_png`` draws) and, for a GT replay,
    the ground-truth classes it is remapped from (``["3 major-damage", ...]``, from
    ``class_remaps``, the replay's own ``remap_gt``; the observation's ``_meta.class_remap`` when
    the mask's class map is not the event's). ``layers``: the event's layers; ``remaps``:
    ``class_remaps(layers)``.
    """
    labels = class_labels(step.obs)
    if labels is None:
        return None
    meta = (step.obs or {}).get("_meta") or {}
    gt_name = meta.get("gt_mask")
    gt = next((la for la in layers if la.kind == Layer.Kind.MASK and gt_name
               and gt_name in (la.file_name, Path(la.path or "").name)), None)
    rows = next((r["rows"] for r in remaps.get(step.call, []) if gt is not None and r["mask"] == gt.file_name), None)
    if rows is None and isinstance(meta.get("class_remap"), dict):
        gt_labels = {str(k): v for k, v in ((gt.class_map if gt is not None else None) or {}).items()}
        rows = [[int(v), gt_labels.get(str(v), ""), int(c), ""] for v, c in meta["class_remap"].items()]
    sources: dict[int, list[str]] = {}
    for value, label, cls, _ in rows or []:
        sources.setdefault(int(cls), []).append(f"{value} {label}".strip())
    colours = tiles.label_colours(labels)
    legend = [{"value": c, "label": labels[c], "colour": colours[c], "from": sources.get(c)} for c in sorted(labels)]
    if 0 in sources and 0 not in labels:
        legend.insert(0, {"value": 0, "label": "background", "colour": None, "from": sources[0]})
    mask_name = gt.file_name if gt is not None else gt_name
    note = (f"{step.call} reads {mask_name} through a class remap (ground-truth class → the tool's)"
            if sources else f"{step.call}'s classes")
    return legend, note


@require_safe
def replay_overlays(request, pk: int):
    """``{"overlays": [spec]}``: each step artifact of a replay as a ``StudioMap`` layer spec
    (masks/rasters as images over their lon/lat or pixel bounds, a mask with its legend and class
    remap (``mask_legend``), vectors as GeoJSON in EPSG:4326 or pixels), and charts/report pages (vis.*, report.*, model.*) as ``kind: "image"`` for the step card.
    """

    run = get_object_or_404(ReplayRun, pk=pk)
    layers = list(run.task.event.layers.all()) if run.task_id else []
    remaps = class_remaps(layers)
    out = []
    for step in run.steps.order_by("index"):
        for art in step.artifacts or []:
            name = art.get("name") or ""
            try:
                path = artifact_path(run, name)
            except ValueError:
                continue
            if not path.is_file():
                continue
            base = {"id": f"replay-{run.pk}-{step.index}-{art.get('key')}", "step": step.index, "key": art.get("key"),
                    "name": f"step {step.index} · {art.get('key')}", "file_name": name,
                    "color": tiles.OVERLAY_COLOURS[step.index % len(tiles.OVERLAY_COLOURS)]}
            suffix = path.suffix.lower()
            try:
                if step.call.startswith(CHART_PREFIXES) and suffix in (".png", ".jpg", ".jpeg"):
                    out.append({**base, "kind": "image", "url": reverse("replay-artifact-png", args=[run.pk, name])})
                elif suffix in (".tif", ".tiff", ".png"):
                    spec = {**base, **_raster_overlay(run, name, path)}
                    legend = mask_legend(step, layers, remaps) if spec["kind"] == "mask" else None
                    if legend:  # the tool's classes and, for a GT replay, the remap behind them
                        spec["legend"], spec["legendNote"] = legend
                    out.append(spec)
                elif suffix in (".geojson", ".json"):
                    out.append({**base, **_vector_overlay(run, name, path)})
            except Exception as exc:  # one unreadable artifact must not hide the others
                out.append({**base, "kind": "error", "error": f"{name}: {exc}"})
    return JsonResponse({"run": run.pk, "overlays": out})


@require_safe
def replay_artifact_wgs84(request, pk: int, name: str):
    """A georeferenced vector artifact reprojected to EPSG:4326 (what Leaflet draws)."""
    import geopandas as gpd

    run = get_object_or_404(ReplayRun, pk=pk)
    try:
        path = artifact_path(run, name)
    except ValueError as exc:
        raise Http404("no such artifact") from exc
    if not path.is_file() or path.suffix.lower() not in (".geojson", ".json"):
        raise Http404("no such artifact")
    gdf = gpd.read_file(path)
    if gdf.crs is not None:
        gdf = gdf.to_crs("EPSG:4326")
    return HttpResponse(gdf.to_json(drop_id=True), content_type="application/geo+json")
