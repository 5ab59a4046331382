"""REST API for the tool registry and replays."""
from __future__ import annotations

from django.shortcuts import get_object_or_404
from django.urls import path
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.models import Task
from replay.models import ReplayRun
from replay.services import start_replay
from replay.tools.registry import all_tools


class ParamOut(serializers.Serializer):
    name = serializers.CharField()
    type = serializers.CharField()
    required = serializers.BooleanField()
    default = serializers.JSONField()
    note = serializers.CharField()


class ToolOut(serializers.Serializer):
    name = serializers.CharField()
    alias = serializers.CharField()
    server = serializers.CharField()
    module = serializers.CharField()
    version = serializers.IntegerField()
    description = serializers.CharField()
    params = ParamOut(many=True)
    result_keys = serializers.ListField(child=serializers.CharField())


def tool_catalogue() -> list[dict]:
    """The registry as plain data, sorted by module then name (what the editor's tool picker shows)."""
    return ToolOut(sorted(all_tools().values(), key=lambda t: (t.module, t.name)), many=True).data


class ToolListView(APIView):
    @extend_schema(responses=ToolOut(many=True))
    def get(self, request):
        return Response(tool_catalogue())


class ReplayStepOut(serializers.Serializer):
    index = serializers.IntegerField()
    call = serializers.CharField()
    status = serializers.CharField()
    duration_ms = serializers.FloatField(allow_null=True)
    args = serializers.JSONField()
    resolved_args = serializers.JSONField()
    obs = serializers.JSONField()
    artifacts = serializers.JSONField()
    error = serializers.CharField()


class ReplayOut(serializers.Serializer):
    id = serializers.IntegerField()
    task = serializers.IntegerField(source="task_id")
    revision = serializers.IntegerField(source="revision.number")
    mode = serializers.CharField()
    status = serializers.CharField()
    steps_total = serializers.IntegerField()
    steps_done = serializers.IntegerField()
    error = serializers.CharField()
    final_answer = serializers.JSONField()
    eval_spec = serializers.JSONField()
    replay_hash = serializers.CharField()
    steps = ReplayStepOut(many=True)


class ReplayStartIn(serializers.Serializer):
    mode = serializers.ChoiceField(choices=["gt", "model", "classical"], default="gt")


class TaskReplayView(APIView):
    @extend_schema(request=ReplayStartIn, responses={202: ReplayOut})
    def post(self, request, pk: int):
        task = get_object_or_404(Task.objects.select_related("head"), pk=pk)
        data = ReplayStartIn(data=request.data)
        data.is_valid(raise_exception=True)
        run = start_replay(request.user, task, mode=data.validated_data["mode"])
        return Response(ReplayOut(_replay(run.pk)).data, status=202)


def _replay(pk: int) -> ReplayRun:
    return ReplayRun.objects.select_related("revision").prefetch_related("steps").get(pk=pk)


class ReplayDetailView(APIView):
    @extend_schema(responses=ReplayOut)
    def get(self, request, pk: int):
        get_object_or_404(ReplayRun, pk=pk)
        return Response(ReplayOut(_replay(pk)).data)


urlpatterns = [
    path("tools/", ToolListView.as_view(), name="api-tools"),
    path("tasks/<int:pk>/replays/", TaskReplayView.as_view(), name="api-task-replays"),
    path("replays/<int:pk>/", ReplayDetailView.as_view(), name="api-replay"),
]
