"""REST API for releases (included from ``studio/api_urls.py``). Thin: serializers validate,
services act, selectors read.

| method | path | what |
| --- | --- | --- |
| GET | /api/releases/ | list |
| POST | /api/releases/ | create a draft {version, changelog, task_ids?} |
| GET | /api/releases/<version>/ | detail with pinned tasks, benchmark tasks per dimension (`counts`; robustness variants apart: `variants`) and export jobs |
| PATCH | /api/releases/<version>/ | edit a draft {changelog?, task_ids?} (409 when published) |
| POST | /api/releases/<version>/publish/ | publish {acknowledge_open_comments?} (409 when already published, or with open review comments unless acknowledged: `open_comments` counts them, `open_comment_threads` lists them) |
| GET | /api/releases/<version>/stale/ | the pinned tasks' stale derived values (`derived.*` QC findings), each with its acknowledgement or null |
| POST | /api/releases/<version>/stale/acknowledge/ | a maintainer acknowledges a task's stale values {task: question id, reason} (publishing answers 409 `stale` until each is refreshed or acknowledged) |
| POST | /api/releases/<version>/exports/ | start an export job (202) |
| GET | /api/releases/<version>/exports/<job>/ | export job status and progress |
| GET | /api/releases/diff/?a=<version>&b=<version> | diff between two releases |
"""
from __future__ import annotations

from django.shortcuts import get_object_or_404
from django.urls import path, re_path
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response

from annotation.models import Task
from kernel.errors import InvalidInput, NotFound
from releases.models import Release
from releases.selectors import (
    export_job,
    export_jobs,
    release_counts,
    release_diff,
    release_items,
    release_list,
    release_variant_count,
)
from releases.services import lifecycle, release_export
from studio.api_fields import ID_BOUNDS
from studio.api_views import APIView
from studio.pagination import CursorPagination

VERSION = r"(?P<version>[0-9][0-9A-Za-z.+-]*)"


class ReleaseOut(serializers.Serializer):
    version = serializers.CharField()
    status = serializers.CharField()
    changelog = serializers.CharField()
    created_by = serializers.CharField(source="created_by.username", default=None)
    created_at = serializers.DateTimeField()
    published_at = serializers.DateTimeField(allow_null=True)
    content_sha256 = serializers.CharField(source="manifest_sha256")
    n_tasks = serializers.IntegerField(required=False)


class ReleaseItemOut(serializers.Serializer):
    question_id = serializers.CharField()
    task_id = serializers.IntegerField()
    dimension = serializers.CharField()
    status = serializers.CharField()
    revision = serializers.IntegerField()
    question = serializers.CharField()
    replay_id = serializers.IntegerField(allow_null=True)
    replay_hash = serializers.CharField()


class ExportJobOut(serializers.Serializer):
    id = serializers.CharField()
    release = serializers.CharField()
    status = serializers.CharField(help_text="queued, running, succeeded or failed")
    stage = serializers.CharField()
    done = serializers.IntegerField()
    total = serializers.IntegerField()
    error = serializers.CharField(allow_blank=True)
    zip = serializers.CharField(allow_blank=True)
    content_sha256 = serializers.CharField(allow_blank=True)
    requested_by = serializers.CharField(allow_null=True)
    created_at = serializers.CharField()
    started_at = serializers.CharField(allow_null=True)
    finished_at = serializers.CharField(allow_null=True)


class ReleaseDetailOut(ReleaseOut):
    counts = serializers.DictField(child=serializers.IntegerField(),
                                   help_text="benchmark tasks per dimension (robustness variants apart: variants)")
    variants = serializers.IntegerField(help_text="robustness variants pinned (exported under variants/)")
    items = ReleaseItemOut(many=True)
    exports = ExportJobOut(many=True)


class ReleaseCreateIn(serializers.Serializer):
    version = serializers.CharField(max_length=40, help_text="semantic version, e.g. 1.2.0")
    changelog = serializers.CharField(required=False, allow_blank=True, default="")
    task_ids = serializers.ListField(child=serializers.IntegerField(**ID_BOUNDS), required=False,
                                     help_text="tasks to pin (default: every approved or released task)")


class ReleaseUpdateIn(serializers.Serializer):
    changelog = serializers.CharField(required=False, allow_blank=True)
    task_ids = serializers.ListField(child=serializers.IntegerField(**ID_BOUNDS), required=False)


class DiffOut(serializers.Serializer):
    a = serializers.CharField()
    b = serializers.CharField()
    added = serializers.ListField(child=serializers.DictField())
    removed = serializers.ListField(child=serializers.DictField())
    changed = serializers.ListField(child=serializers.DictField())
    unchanged = serializers.IntegerField()


def _detail(release: Release) -> dict:
    data = dict(ReleaseOut(release).data)
    data.update(counts=release_counts(release), variants=release_variant_count(release), items=release_items(release),
                exports=ExportJobOut(export_jobs(release.version), many=True).data)
    return data


def _tasks(ids):
    if ids is None:
        return None
    tasks = list(Task.objects.filter(pk__in=ids).select_related("head"))
    missing = sorted(set(ids) - {t.pk for t in tasks})
    if missing:
        raise lifecycle.ReleaseError(f"task_ids: no task {', '.join(map(str, missing))}")
    return tasks


class ReleaseListView(APIView):
    pagination_class = CursorPagination

    @extend_schema(responses=ReleaseOut(many=True))
    def get(self, request):
        return self.paginated(release_list(), ReleaseOut)

    @extend_schema(request=ReleaseCreateIn, responses={201: ReleaseDetailOut})
    def post(self, request):
        data = ReleaseCreateIn(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        release = lifecycle.create_release(request.user, v["version"], v["changelog"], tasks=_tasks(v.get("task_ids")))
        return Response(_detail(release), status=status.HTTP_201_CREATED)


class ReleaseDetailView(APIView):
    @extend_schema(responses=ReleaseDetailOut)
    def get(self, request, version: str, **kw):
        return Response(_detail(get_object_or_404(Release.objects.select_related("created_by"), version=version)))

    @extend_schema(request=ReleaseUpdateIn, responses={200: ReleaseDetailOut, 409: None})
    def patch(self, request, version: str, **kw):
        release = get_object_or_404(Release, version=version)
        data = ReleaseUpdateIn(data=request.data)
        data.is_valid(raise_exception=True)
        release = lifecycle.update_release(request.user, release, changelog=data.validated_data.get("changelog"),
                                     tasks=_tasks(data.validated_data.get("task_ids")))
        return Response(_detail(release))


class ReleasePublishIn(serializers.Serializer):
    acknowledge_open_comments = serializers.BooleanField(
        default=False, help_text="publish although review comments on its tasks are open (each task's audit trail records it)")


class ReleasePublishView(APIView):
    """Publish; with open review comments on its tasks, 409 ``{"detail", "open_comments": n,
    "open_comment_threads": [thread]}`` (as an approve answers) unless ``acknowledge_open_comments``
    is true (the page's confirmation, recorded the same way)."""

    @extend_schema(request=ReleasePublishIn, responses={200: ReleaseDetailOut, 409: None})
    def post(self, request, version: str, **kw):
        release = get_object_or_404(Release, version=version)
        data = ReleasePublishIn(data=request.data)
        data.is_valid(raise_exception=True)
        release = lifecycle.publish_release(request.user, release,
                                      acknowledge_open_comments=data.validated_data["acknowledge_open_comments"])
        return Response(_detail(release))


class StaleAcknowledgeIn(serializers.Serializer):
    task = serializers.CharField(max_length=240, help_text="the pinned task's question id")
    reason = serializers.CharField(max_length=2000, help_text="why the stale value may go out as it is")


class ReleaseStaleView(APIView):
    """The stale derived values of the release's pinned tasks (``releases.services.lifecycle.stale_items``)."""

    @extend_schema(responses=dict)
    def get(self, request, version: str, **kw):
        release = get_object_or_404(Release, version=version)
        return Response({"version": release.version, "stale": lifecycle.stale_items(release, acknowledged=None)})


class ReleaseStaleAcknowledgeView(APIView):
    """A maintainer's acknowledgement of a pinned task's stale derived values (who, when, why)."""

    @extend_schema(request=StaleAcknowledgeIn, responses=dict)
    def post(self, request, version: str, **kw):
        release = get_object_or_404(Release, version=version)
        data = StaleAcknowledgeIn(data=request.data)
        data.is_valid(raise_exception=True)
        lifecycle.acknowledge_stale(request.user, release, question_id=data.validated_data["task"],
                              reason=data.validated_data["reason"])
        return Response({"version": release.version, "stale": lifecycle.stale_items(release, acknowledged=None)})


class ReleaseExportView(APIView):
    @extend_schema(request=None, responses={202: ExportJobOut})
    def post(self, request, version: str, **kw):
        release = get_object_or_404(Release, version=version)
        job = release_export.start_export(request.user, release)
        return Response(ExportJobOut(job).data, status=status.HTTP_202_ACCEPTED)


class ReleaseExportJobView(APIView):
    @extend_schema(responses=ExportJobOut)
    def get(self, request, version: str, job: str, **kw):
        found = export_job(version, job)
        if found is None:
            raise NotFound(f"job: no export job {job} of release {version}")
        return Response(ExportJobOut(found).data)


class ReleaseDiffView(APIView):
    @extend_schema(parameters=[OpenApiParameter("a", str, required=True), OpenApiParameter("b", str, required=True)],
                   responses=DiffOut)
    def get(self, request):
        a, b = request.query_params.get("a", ""), request.query_params.get("b", "")
        rels = {r.version: r for r in Release.objects.filter(version__in=[a, b])}
        for name, v in (("a", a), ("b", b)):
            if v not in rels:
                raise InvalidInput(f"{name}: no release '{v}'")
        return Response(DiffOut(release_diff(rels[a], rels[b])).data)


urlpatterns = [
    path("releases/", ReleaseListView.as_view(), name="api-releases"),
    path("releases/diff/", ReleaseDiffView.as_view(), name="api-release-diff"),
    re_path(rf"^releases/{VERSION}/$", ReleaseDetailView.as_view(), name="api-release"),
    re_path(rf"^releases/{VERSION}/publish/$", ReleasePublishView.as_view(), name="api-release-publish"),
    re_path(rf"^releases/{VERSION}/stale/$", ReleaseStaleView.as_view(), name="api-release-stale"),
    re_path(rf"^releases/{VERSION}/stale/acknowledge/$", ReleaseStaleAcknowledgeView.as_view(),
            name="api-release-stale-acknowledge"),
    re_path(rf"^releases/{VERSION}/exports/$", ReleaseExportView.as_view(), name="api-release-exports"),
    re_path(rf"^releases/{VERSION}/exports/(?P<job>[0-9a-f]{{32}})/$", ReleaseExportJobView.as_view(),
            name="api-release-export-job"),
]
