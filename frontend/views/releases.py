"""Release pages: list and create, detail (publish, export with progress, zip download), diff.

Thin: services (``releases.services.lifecycle``, ``release_export``) act, selectors (``releases.selectors``) read.
"""
from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import FileResponse, Http404, HttpResponseRedirect
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST, require_safe

from annotation.services import review as review_services
from evaluation.selectors.runs import release_runs
from kernel.errors import Conflict
from kernel.paths import OutsideRoot, confine
from releases.api import ReleaseCreateIn, ReleasePublishIn
from releases.models import Release
from releases.selectors import (
    export_job,
    export_jobs,
    export_zip_link,
    exports_dir,
    release_counts,
    release_diff,
    release_items,
    release_list,
    release_variant_count,
    stale_acknowledgements,
    tasks_for_release_form,
)
from releases.services import lifecycle
from releases.services.release_export import start_export
from studio import storage
from studio.permissions import Action, can


def release_list_page(request):
    """GET: the releases; POST: create a draft release of every approved task (the form is read by
    the API's input serializer, ``releases.api.ReleaseCreateIn``, and goes to the same
    service as ``POST /api/releases/``)."""
    if request.method == "POST":
        data = ReleaseCreateIn(data={"version": request.POST.get("version", ""),
                                     "changelog": request.POST.get("changelog", "")})
        if not data.is_valid():
            messages.error(request, "; ".join(f"{k}: {' '.join(map(str, v))}" for k, v in data.errors.items()))
            return redirect("release_list")
        try:
            release = lifecycle.create_release(request.user, data.validated_data["version"], data.validated_data["changelog"])
        except (lifecycle.ReleaseError, Conflict, PermissionDenied) as exc:
            messages.error(request, str(exc))
            return redirect("release_list")
        messages.success(request, f"Draft release {release.version} created with its tasks pinned.")
        return redirect("release_detail", version=release.version)
    releases = list(release_list())
    return render(request, "frontend/release_list.html", {
        "releases": releases, "can_release": can(request.user, Action.RELEASE_EXPORT),
        "n_releasable": tasks_for_release_form().count(), "versions": [r.version for r in releases],
    })


@require_safe
def release_detail_page(request, version: str):
    release = get_object_or_404(Release.objects.select_related("created_by"), version=version)
    counts = release_counts(release)  # benchmark tasks per dimension; the variants apart
    return render(request, "frontend/release_detail.html", {
        "release": release, "items": release_items(release), "counts": counts, "n_tasks": sum(counts.values()),
        "n_variants": release_variant_count(release),
        "jobs": export_jobs(release.version), "runs": release_runs(release),
        "can_release": can(request.user, Action.RELEASE_EXPORT, release),
        "can_publish": can(request.user, Action.RELEASE_PUBLISH, release),
        "open_comments": review_services.open_comments_of_release(release) if release.status == "draft" else {},
        # drafts: what publishing would refuse (and what was acknowledged); published: what went out acknowledged
        "stale": lifecycle.stale_items(release, acknowledged=None) if release.status == "draft" else [],
        "stale_acks": stale_acknowledgements(release),
        "others": [v for v in Release.objects.exclude(pk=release.pk).values_list("version", flat=True)],
    })


@require_POST
def release_publish(request, version: str):
    release = get_object_or_404(Release, version=version)
    # Publish freezes for good: it is confirmed (the form's dialog sends confirm=1), and open review
    # comments on its tasks are confirmed too, which each such task's audit trail records.
    if request.POST.get("confirm") != "1":
        messages.error(request, f"Release {version} not published: confirm it (Publish asks first).")
        return redirect("release_detail", version=version)
    data = ReleasePublishIn(data=request.POST)  # the API's input serializer: one parsing of the operation
    data.is_valid(raise_exception=False)
    acknowledge = bool(data.validated_data.get("acknowledge_open_comments")) if not data.errors else False
    try:
        lifecycle.publish_release(request.user, release, acknowledge_open_comments=acknowledge)
        messages.success(request, f"Release {version} published; it can no longer be changed.")
    except (lifecycle.ReleaseError, Conflict, PermissionDenied) as exc:
        messages.error(request, str(exc))
    return redirect("release_detail", version=version)


@require_POST
def release_acknowledge_stale(request, version: str):
    """A maintainer's acknowledgement (with a reason) of a pinned task's stale derived values."""
    release = get_object_or_404(Release, version=version)
    task = request.POST.get("task", "")
    try:
        lifecycle.acknowledge_stale(request.user, release, question_id=task, reason=request.POST.get("reason", ""))
        messages.success(request, f"Stale derived values of {task} acknowledged.")
    except (lifecycle.ReleaseError, Conflict, PermissionDenied) as exc:
        messages.error(request, str(exc))
    return redirect("release_detail", version=version)


@require_POST
def release_export(request, version: str):
    release = get_object_or_404(Release, version=version)
    try:
        job = start_export(request.user, release)
    except PermissionDenied as exc:
        messages.error(request, str(exc))
        return redirect("release_detail", version=version)
    if job["status"] == "failed":
        messages.error(request, f"Export failed: {job['error']}")
    else:
        messages.success(request, f"Export {job['id'][:8]} {job['status']}.")
    return redirect("release_detail", version=version)


@require_safe
def release_export_zip(request, version: str, job: str):
    """The zip of a finished export, to any signed-in user (as the release page): streamed from the
    local folder, or with a bucket (``STUDIO_STORAGE_URL``) a 302 to a presigned GET URL of it that
    lives ``STUDIO_STORAGE_LINK_TTL_S`` seconds, minted here after the sign-in check; 404 when the
    job did not finish or its zip is gone."""
    found = export_job(version, job)
    if found is None or found.get("status") != "succeeded" or not found.get("zip"):
        raise Http404("no finished export with this id")
    if storage.uses_bucket():
        link = export_zip_link(version, job, found)
        if link is None:
            raise Http404("the export's zip is gone")
        response = HttpResponseRedirect(link)
        response["Cache-Control"] = "no-store"  # a signed link is never reused from a cache
        return response
    try:
        path = confine(settings.STUDIO_DATA_ROOT, exports_dir(version) / job / found["zip"])
    except OutsideRoot:
        raise Http404("the export's zip is gone") from None
    if not path.is_file():
        raise Http404("the export's zip is gone")
    return FileResponse(open(path, "rb"), as_attachment=True, filename=path.name, content_type="application/zip")


@require_safe
def release_diff_page(request):
    a, b = request.GET.get("a", ""), request.GET.get("b", "")
    rels = {r.version: r for r in Release.objects.filter(version__in=[a, b])}
    diff, error = None, ""
    if a or b:
        if a not in rels or b not in rels:
            error = f"Pick two existing releases (got '{a}' and '{b}')."
        else:
            diff = release_diff(rels[a], rels[b])
    return render(request, "frontend/release_diff.html", {
        "diff": diff, "error": error, "a": a, "b": b,
        "versions": list(Release.objects.order_by("-id").values_list("version", flat=True)),
    })
