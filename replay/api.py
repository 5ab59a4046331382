"""REST API for the tool registry and replays."""
from __future__ import annotations

from django.shortcuts import get_object_or_404
from django.urls import path
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from annotation.models import Task
from kernel import golddiff
from kernel.errors import NotFound
from kernel.tools.registry import all_tools
from kernel.vocabulary import PERCEPTION_MODES
from replay.models import ReplayRun
from replay.selectors import replay_diff, task_replay_diff
from replay.services.gold import accept_gold
from replay.services.runs import start_replay
from studio.api_views import APIView


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
    cached = serializers.BooleanField()
    expanded = serializers.JSONField()


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
    gold_accepted = serializers.BooleanField()
    accepted_by = serializers.CharField(source="accepted_by.username", allow_null=True, default=None)
    tool_calls = serializers.IntegerField()
    cache_hits = serializers.IntegerField()
    filled_trajectory = serializers.JSONField()
    steps = ReplayStepOut(many=True)


class ReplayStartIn(serializers.Serializer):
    mode = serializers.ChoiceField(choices=list(PERCEPTION_MODES), default="gt")


class TaskReplayView(APIView):
    @extend_schema(request=ReplayStartIn, responses={202: ReplayOut})
    def post(self, request, pk: int):
        task = get_object_or_404(Task.objects.select_related("head"), pk=pk)
        data = ReplayStartIn(data=request.data)
        data.is_valid(raise_exception=True)
        run = start_replay(request.user, task, mode=data.validated_data["mode"])
        return Response(ReplayOut(_replay(run.pk)).data, status=202)


def _replay(pk: int) -> ReplayRun:
    return ReplayRun.objects.select_related("revision", "accepted_by").prefetch_related("steps").get(pk=pk)


class ReplayDetailView(APIView):
    @extend_schema(responses=ReplayOut)
    def get(self, request, pk: int):
        get_object_or_404(ReplayRun, pk=pk)
        return Response(ReplayOut(_replay(pk)).data)


class AnswerChangeOut(serializers.Serializer):
    field = serializers.CharField()
    before = serializers.JSONField()
    after = serializers.JSONField()
    changed = serializers.BooleanField()


class StepChangeOut(serializers.Serializer):
    index = serializers.IntegerField()
    call = serializers.CharField()
    state = serializers.ChoiceField(choices=list(golddiff.STATES), help_text=(
        "kernel.golddiff: filled = the gold before had no observation of this step (blank), the replay filled it"))
    changes = serializers.JSONField()


class ReplayDiffOut(serializers.Serializer):
    run = serializers.IntegerField()
    base = serializers.IntegerField(allow_null=True)
    pending = serializers.BooleanField()
    changed = serializers.BooleanField()
    gold_accepted = serializers.BooleanField()
    accepted_by = serializers.CharField(allow_null=True)
    answer = AnswerChangeOut(many=True)
    steps = StepChangeOut(many=True)
    recorded = serializers.JSONField(allow_null=True, required=False, help_text=(
        "the replay against the observations of the file the revision was imported from "
        "(replay.selectors.task_recorded_diff: {run, mode, against, steps: [{index, call, state: "
        "same|filled|changed|source|added|removed, changes, note?}], changed, filled}; filled: the file "
        "left the observation blank and the replay filled it, not a disagreement); null when it keeps none"))
    variant_check = serializers.JSONField(allow_null=True, required=False, help_text=(
        "a robustness variant's gold replay: {kind: unsolvable, blocked: {step, tool, reason}} or "
        "{kind: broken, step, tool, alternative, same, changes, error}; null otherwise"))


class ReplayDiffView(APIView):
    @extend_schema(responses=ReplayDiffOut)
    def get(self, request, pk: int):
        """The replay's observations and answer against the gold before it."""
        run = get_object_or_404(ReplayRun.objects.select_related("accepted_by"), pk=pk)
        return Response(ReplayDiffOut(replay_diff(run)).data)


class TaskReplayDiffView(APIView):
    @extend_schema(responses={200: ReplayDiffOut, 404: None})
    def get(self, request, pk: int):
        """The pending replay (or the newest succeeded one) of a task against its gold."""
        task = get_object_or_404(Task, pk=pk)
        diff = task_replay_diff(task)
        if diff is None:
            raise NotFound("the task has no succeeded replay")
        return Response(ReplayDiffOut(diff).data)


class ReplayAcceptView(APIView):
    @extend_schema(request=None, responses={200: ReplayOut, 409: None})
    def post(self, request, pk: int):
        """Accept the replay's answer as the task's gold (a person's decision)."""
        run = get_object_or_404(ReplayRun, pk=pk)
        accept_gold(request.user, run)
        return Response(ReplayOut(_replay(pk)).data)


urlpatterns = [
    path("tools/", ToolListView.as_view(), name="api-tools"),
    path("tasks/<int:pk>/replays/", TaskReplayView.as_view(), name="api-task-replays"),
    path("replays/<int:pk>/", ReplayDetailView.as_view(), name="api-replay"),
    path("replays/<int:pk>/diff/", ReplayDiffView.as_view(), name="api-replay-diff"),
    path("replays/<int:pk>/accept/", ReplayAcceptView.as_view(), name="api-replay-accept"),
    path("tasks/<int:pk>/replay-diff/", TaskReplayDiffView.as_view(), name="api-task-replay-diff"),
]
