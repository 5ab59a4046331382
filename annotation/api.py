"""REST API for events, layers and tasks. Thin: input serializers validate, services act."""
from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404
from django.urls import path
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.models import Event, Layer, Task
from annotation.selectors_tasks import task_detail, task_list
from annotation.services import tasks as task_services


class LayerOut(serializers.ModelSerializer):
    class Meta:
        model = Layer
        fields = [
            "id", "name", "kind", "modality", "phase", "file_name", "frame", "crs", "gsd_m", "width", "height",
            "band_count", "bands", "dtype", "bounds", "feature_count", "class_map", "class_counts", "annotates",
        ]


class EventOut(serializers.ModelSerializer):
    class Meta:
        model = Event
        fields = ["id", "slug", "name", "disaster_type", "source", "created_at"]


class EventDetailOut(EventOut):
    layers = LayerOut(many=True, read_only=True)

    class Meta(EventOut.Meta):
        fields = EventOut.Meta.fields + ["layers"]


class EventListView(APIView):
    @extend_schema(responses=EventOut(many=True))
    def get(self, request):
        return Response(EventOut(Event.objects.order_by("slug"), many=True).data)


class EventDetailView(APIView):
    @extend_schema(responses=EventDetailOut)
    def get(self, request, slug: str):
        event = get_object_or_404(Event.objects.prefetch_related("layers"), slug=slug)
        return Response(EventDetailOut(event).data)


class LayerDetailView(APIView):
    @extend_schema(responses=LayerOut)
    def get(self, request, pk: int):
        return Response(LayerOut(get_object_or_404(Layer, pk=pk)).data)


class AnswerFieldIn(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    eval_type = serializers.CharField(max_length=40)
    source = serializers.JSONField()
    answer_format = serializers.CharField(required=False, allow_blank=True, default="")


class StepIn(serializers.Serializer):
    call = serializers.CharField(max_length=200)
    args = serializers.DictField(required=False, default=dict)


class TaskContentIn(serializers.Serializer):
    question = serializers.CharField()
    task_category = serializers.CharField(required=False, allow_blank=True, default="")
    task_category_code = serializers.CharField(required=False, allow_blank=True, default="")
    disaster_type = serializers.CharField(required=False, allow_blank=True, default="")
    input_layers = serializers.DictField(child=serializers.IntegerField(), required=False,
                                         help_text="{input_data key: layer id}; fills input_data from the layers")
    input_data = serializers.DictField(required=False)
    classes = serializers.DictField(required=False, default=dict)
    trajectory = StepIn(many=True)
    answer_spec = AnswerFieldIn(many=True)


class TaskCreateIn(TaskContentIn):
    event = serializers.SlugField()
    dimension = serializers.ChoiceField(choices=[c for c, _ in Task.Dimension.choices])


class TaskUpdateIn(TaskContentIn):
    expected_version = serializers.IntegerField(help_text="the version the edit was based on (409 if stale)")
    message = serializers.CharField(required=False, allow_blank=True, default="")


class RevisionOut(serializers.Serializer):
    number = serializers.IntegerField()
    question = serializers.CharField()
    task_category = serializers.CharField()
    task_category_code = serializers.CharField()
    disaster_type = serializers.CharField()
    input_data = serializers.JSONField()
    classes = serializers.JSONField()
    trajectory = serializers.JSONField()
    answer_spec = serializers.JSONField()
    author = serializers.CharField(source="author.username", default=None)
    created_at = serializers.DateTimeField()


class TaskListOut(serializers.Serializer):
    id = serializers.IntegerField()
    question_id = serializers.CharField()
    event = serializers.CharField(source="event.slug")
    dimension = serializers.CharField()
    status = serializers.CharField()
    version = serializers.IntegerField()
    question = serializers.CharField(source="head.question", default="")


class TaskOut(TaskListOut):
    sample_id = serializers.CharField()
    head = RevisionOut()
    qc = serializers.SerializerMethodField()

    def get_qc(self, task) -> list[dict]:
        return [f.as_dict() for f in task_services.run_fast_qc(task.head)]


def _content(data: dict, event: Event) -> dict:
    content = {k: v for k, v in data.items() if k in task_services.CONTENT_FIELDS}
    if data.get("input_layers"):
        content["input_data"] = task_services.build_input_data(event, data["input_layers"])
    return content


class TaskListView(APIView):
    @extend_schema(responses=TaskListOut(many=True))
    def get(self, request):
        qs = task_list(event_slug=request.query_params.get("event"), dimension=request.query_params.get("dimension"))
        return Response(TaskListOut(qs, many=True).data)

    @extend_schema(request=TaskCreateIn, responses={201: TaskOut})
    def post(self, request):
        data = TaskCreateIn(data=request.data)
        data.is_valid(raise_exception=True)
        event = get_object_or_404(Event, slug=data.validated_data["event"])
        try:
            content = _content(data.validated_data, event)
        except ValueError as exc:
            return Response({"detail": str(exc)}, status=400)
        task = task_services.create_task(request.user, event, dimension=data.validated_data["dimension"], content=content)
        return Response(TaskOut(task_detail(task.pk)).data, status=201)


class TaskDetailView(APIView):
    @extend_schema(responses=TaskOut)
    def get(self, request, pk: int):
        try:
            return Response(TaskOut(task_detail(pk)).data)
        except Task.DoesNotExist:
            return Response({"detail": "not found"}, status=404)

    @extend_schema(request=TaskUpdateIn, responses={200: TaskOut, 409: TaskOut})
    def put(self, request, pk: int):
        task = get_object_or_404(Task.objects.select_related("event"), pk=pk)
        data = TaskUpdateIn(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            content = _content(data.validated_data, task.event)
            task_services.save_revision(request.user, task, expected_version=data.validated_data["expected_version"],
                                        content=content, message=data.validated_data["message"])
        except task_services.StaleVersionError as exc:
            body = TaskOut(task_detail(pk)).data
            body["detail"] = str(exc)
            return Response(body, status=status.HTTP_409_CONFLICT)
        except ValueError as exc:
            return Response({"detail": str(exc)}, status=400)
        return Response(TaskOut(task_detail(pk)).data)


class TaskSubmitView(APIView):
    @extend_schema(request=None, responses=TaskOut)
    def post(self, request, pk: int):
        task = get_object_or_404(Task, pk=pk)
        try:
            task_services.submit_task(request.user, task)
        except task_services.TaskValidationError as exc:
            return Response({"detail": str(exc), "qc": [f.as_dict() for f in exc.findings]}, status=400)
        except ValueError as exc:
            return Response({"detail": str(exc)}, status=400)
        return Response(TaskOut(task_detail(pk)).data)


urlpatterns = [
    path("events/", EventListView.as_view(), name="api-events"),
    path("events/<slug:slug>/", EventDetailView.as_view(), name="api-event"),
    path("layers/<int:pk>/", LayerDetailView.as_view(), name="api-layer"),
    path("tasks/", TaskListView.as_view(), name="api-tasks"),
    path("tasks/<int:pk>/", TaskDetailView.as_view(), name="api-task"),
    path("tasks/<int:pk>/submit/", TaskSubmitView.as_view(), name="api-task-submit"),
]
