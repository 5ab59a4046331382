"""REST API for events, layers, tasks, revisions, drafts, review transitions and comments.

Thin: input serializers validate, services act (``annotation.services.tasks`` for content,
``annotation.services.review`` for status and comments), selectors read. Errors: 400 with a
``detail`` naming the field; 403 for the permission table; 409 for a save against a stale version
(the body is the current task, head included, so the editor can show both versions); 423 when the
task's status locks its content.
"""
from __future__ import annotations

from django.shortcuts import get_object_or_404
from django.urls import path
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from annotation.models import Event, Layer, Task, TaskComment, TaskRevision
from annotation.selectors_tasks import (
    task_audit,
    task_comment_threads,
    task_detail,
    task_list,
    task_revision,
    task_revisions,
    user_draft,
)
from annotation.services import layers as layer_services
from annotation.services import qc as qc_services
from annotation.services import review as review_services
from annotation.services import tasks as task_services
from kernel.errors import InvalidInput, NotFound
from studio.api_fields import ID_BOUNDS, INT_BOUNDS
from studio.api_views import APIView
from studio.pagination import CursorPagination
from studio.permissions import Action, can


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
    pagination_class = CursorPagination
    cursor_key = "slug"

    @extend_schema(responses=EventOut(many=True))
    def get(self, request):
        return self.paginated(Event.objects.all(), EventOut)


class EventDetailView(APIView):
    @extend_schema(responses=EventDetailOut)
    def get(self, request, slug: str):
        event = get_object_or_404(Event.objects.prefetch_related("layers"), slug=slug)
        return Response(EventDetailOut(event).data)


class LayerDetailView(APIView):
    @extend_schema(responses=LayerOut)
    def get(self, request, pk: int):
        return Response(LayerOut(get_object_or_404(Layer, pk=pk)).data)


class GeoreferencingIn(serializers.Serializer):
    gsd_m = serializers.FloatField(required=False, allow_null=True, default=None,
                                   help_text="ground sample distance, m/px; absent: unchanged")
    crs = serializers.CharField(required=False, allow_blank=True, allow_null=True, default=None, max_length=2000,
                                help_text="EPSG code, WKT or PROJ text; \"\" clears it; absent: unchanged")
    reason = serializers.CharField(max_length=2000, help_text="where the value comes from")


class LayerAuditOut(serializers.Serializer):
    action = serializers.CharField()
    actor = serializers.CharField(source="actor.username", default=None)
    changes = serializers.JSONField()
    reason = serializers.CharField()
    stale_tasks = serializers.JSONField()
    created_at = serializers.DateTimeField()


class LayerGeoreferencingView(APIView):
    """A maintainer records a layer's GSD and/or CRS with a reason (an audit event; the replays of
    the tasks that read the layer become stale). 400 names the field; 403 for other roles. GET:
    the layer's audit events, newest first, a page at a time."""

    pagination_class = CursorPagination

    @extend_schema(responses=LayerAuditOut(many=True))
    def get(self, request, pk: int):
        layer = get_object_or_404(Layer, pk=pk)
        return self.paginated(layer.audit_events.select_related("actor"), LayerAuditOut)

    @extend_schema(request=GeoreferencingIn, responses={200: LayerAuditOut})
    def post(self, request, pk: int):
        layer = get_object_or_404(Layer, pk=pk)
        data = GeoreferencingIn(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        event = layer_services.set_layer_georeferencing(request.user, layer, gsd_m=v.get("gsd_m"), crs=v.get("crs"),
                                                        reason=v["reason"])
        return Response(LayerAuditOut(event).data)


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
    input_layers = serializers.DictField(child=serializers.IntegerField(**ID_BOUNDS), required=False,
                                         help_text="{input_data key: layer id}; fills input_data from the layers")
    input_data = serializers.DictField(required=False)
    classes = serializers.DictField(required=False, default=dict)
    trajectory = StepIn(many=True)
    answer_spec = AnswerFieldIn(many=True)


class TaskCreateIn(TaskContentIn):
    event = serializers.SlugField()
    dimension = serializers.ChoiceField(choices=[c for c, _ in Task.Dimension.choices])


class TaskUpdateIn(TaskContentIn):
    expected_version = serializers.IntegerField(**INT_BOUNDS, help_text="the version the edit was based on (409 if stale)")
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
    created_by = serializers.CharField(source="created_by.username", default=None)


class TaskOut(TaskListOut):
    sample_id = serializers.CharField()
    head = RevisionOut()
    qc = serializers.SerializerMethodField()
    actions = serializers.SerializerMethodField(help_text="transitions the requesting user may apply now")
    can_edit = serializers.SerializerMethodField()
    answer_proposals = serializers.SerializerMethodField(
        help_text="a proposed source for each blank answer field: [{field, eval_type, source, step, tool, key, type, reason}]")

    def get_answer_proposals(self, task) -> list[dict]:
        return task_services.answer_proposals(task.head)

    def get_qc(self, task) -> list[dict]:
        # the submit gate's suite, as on the task page and in manage.py qc (one QC everywhere)
        return [f.as_dict() for f in review_services.submission_findings(task)]

    def _user(self):
        request = self.context.get("request")
        return getattr(request, "user", None)

    def get_actions(self, task) -> list[str]:
        user = self._user()
        return [t.name for t in review_services.available_transitions(user, task)] if user else []

    def get_can_edit(self, task) -> bool:
        user = self._user()
        return bool(user) and task.status in task_services.EDITABLE_STATUSES and can(user, Action.TASK_EDIT, task)


class RevisionListOut(serializers.Serializer):
    number = serializers.IntegerField()
    author = serializers.CharField(source="author.username", default=None)
    message = serializers.CharField()
    created_at = serializers.DateTimeField()


class DraftIn(serializers.Serializer):
    base_version = serializers.IntegerField(**INT_BOUNDS)
    content = serializers.DictField(help_text="the editor's payload as it stands (not validated)")


class DraftOut(serializers.Serializer):
    base_version = serializers.IntegerField()
    content = serializers.JSONField()
    updated_at = serializers.DateTimeField()


class RestoreIn(serializers.Serializer):
    expected_version = serializers.IntegerField(**INT_BOUNDS)


class AcceptProposalIn(serializers.Serializer):
    field = serializers.CharField(max_length=200)
    expected_version = serializers.IntegerField(**INT_BOUNDS)


class TransitionIn(serializers.Serializer):
    action = serializers.ChoiceField(choices=list(review_services.TRANSITIONS))
    reason = serializers.CharField(required=False, allow_blank=True, default="")
    acknowledge_open_comments = serializers.BooleanField(
        required=False, default=False, help_text="approve although review comments are open (recorded)")


class AuditOut(serializers.Serializer):
    action = serializers.CharField()
    actor = serializers.CharField(source="actor.username", default=None)
    from_status = serializers.CharField()
    to_status = serializers.CharField()
    revision_number = serializers.IntegerField(allow_null=True)
    reason = serializers.CharField()
    created_at = serializers.DateTimeField()


class CommentIn(serializers.Serializer):
    body = serializers.CharField()
    step_index = serializers.IntegerField(required=False, allow_null=True, default=None, **INT_BOUNDS)
    answer_field = serializers.CharField(required=False, allow_blank=True, default="")
    location = serializers.JSONField(required=False, allow_null=True, default=None,
                                     help_text='{"frame": "pixel"|"geographic", "x", "y"} or a GeoJSON geometry')
    parent = serializers.IntegerField(required=False, allow_null=True, default=None, **ID_BOUNDS)


class CommentOut(serializers.Serializer):
    id = serializers.IntegerField()
    parent = serializers.IntegerField(source="parent_id", allow_null=True)
    author = serializers.CharField(source="author.username", default=None)
    body = serializers.CharField()
    step_index = serializers.IntegerField(allow_null=True)
    answer_field = serializers.CharField()
    location = serializers.JSONField()
    revision_number = serializers.IntegerField(allow_null=True)
    resolved = serializers.BooleanField()
    resolved_by = serializers.CharField(source="resolved_by.username", default=None)
    created_at = serializers.DateTimeField()


class ThreadOut(CommentOut):
    replies = CommentOut(many=True, source="thread_replies")


class ResolveIn(serializers.Serializer):
    resolved = serializers.BooleanField(default=True)


class QcContentIn(TaskContentIn):
    """Content as the editor holds it, possibly unfinished (no query yet, a step without a tool):
    QC reports what is missing, so only the shapes are checked here."""
    question = serializers.CharField(required=False, allow_blank=True, default="")
    trajectory = serializers.ListField(child=serializers.DictField(), required=False, default=list)
    answer_spec = serializers.ListField(child=serializers.DictField(), required=False, default=list)


class QcIn(serializers.Serializer):
    task = serializers.IntegerField(required=False, allow_null=True, default=None, **ID_BOUNDS,
                                    help_text="a task: without content, its head revision is checked")
    event = serializers.SlugField(required=False, help_text="the event of new content (default: the task's)")
    content = serializers.DictField(required=False, allow_null=True, default=None,
                                    help_text="unsaved editor content (the fields of a task save)")


class FindingOut(serializers.Serializer):
    check = serializers.CharField()
    severity = serializers.CharField()
    message = serializers.CharField()
    location = serializers.CharField()


class QcOut(serializers.Serializer):
    task = serializers.IntegerField(allow_null=True)
    version = serializers.IntegerField(allow_null=True, help_text="the revision checked; null for unsaved content")
    findings = FindingOut(many=True)


class QcView(APIView):
    """The QC suite on a task's head revision or on unsaved editor content (the editor's live QC).

    ``{"task": id}``: the head revision, with the same function as the task page, the submit gate
    and ``manage.py qc`` (``annotation.services.qc.qc_for_task``). ``{"event"|"task", "content"}``:
    unsaved content, checked by ``qc_for_content``. 400 names the field of bad input.
    """

    @extend_schema(request=QcIn, responses=QcOut)
    def post(self, request):
        data = QcIn(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        task = _task_or_404(v["task"]) if v.get("task") else None
        if v.get("content") is None:
            if task is None:
                raise InvalidInput("task: give a task (its head revision is checked) or content")
            findings = review_services.submission_findings(task)
            return Response({"task": task.pk, "version": task.version, "findings": [f.as_dict() for f in findings]})
        if task is not None:
            event = task.event
        elif v.get("event"):
            event = get_object_or_404(Event, slug=v["event"])
        else:
            raise InvalidInput("event: new content needs its event")
        body = QcContentIn(data=v["content"])
        if not body.is_valid():
            return Response({"content": body.errors}, status=400)
        content = _content(body.validated_data, event)
        if task is not None:  # absent fields come from the head (qc_for_content), not the serializer's defaults
            given = set(v["content"]) | ({"input_data"} if "input_layers" in v["content"] else set())
            content = {k: val for k, val in content.items() if k in given}
        findings = qc_services.qc_for_content(event, content, task=task)
        return Response({"task": task.pk if task else None, "version": None, "findings": [f.as_dict() for f in findings]})


def _content(data: dict, event: Event) -> dict:
    content = {k: v for k, v in data.items() if k in task_services.CONTENT_FIELDS}
    if data.get("input_layers"):
        content["input_data"] = task_services.build_input_data(event, data["input_layers"], base=data.get("input_data"))
    return content


def _task_out(request, pk: int) -> dict:
    return TaskOut(task_detail(pk), context={"request": request}).data


def _task_or_404(pk: int) -> Task:
    return get_object_or_404(Task.objects.select_related("event", "head", "created_by"), pk=pk)


def _revision_or_404(task: Task, number: int) -> TaskRevision:
    """Revision ``number`` of ``task``; ``NotFound`` (404) naming the range otherwise."""
    try:
        return task_revision(task, number)
    except TaskRevision.DoesNotExist:
        raise NotFound(f"revision: task {task.pk} has revisions r1..r{task.version}, not r{number}") from None


class DiffQuery(serializers.Serializer):
    """``?a=&b=``: revision numbers (default: the head and the one before)."""

    a = serializers.IntegerField(required=False, **INT_BOUNDS)
    b = serializers.IntegerField(required=False, **INT_BOUNDS)


class CurrentTaskOnConflict:
    """A 409 for a stale version carries the current task (head included) beside ``detail``, so
    the editor can show both versions (``studio.errors.exception_handler`` calls this)."""

    def error_context(self, exc) -> dict:
        if isinstance(exc, task_services.StaleVersionError):
            return _task_out(self.request, exc.task.pk)
        return {}


class TaskListView(APIView):
    """GET: every task, newest first, a page at a time (``?event=<slug>&dimension=<t1..t8>``
    filter); POST: a new task."""

    pagination_class = CursorPagination

    @extend_schema(parameters=[OpenApiParameter("event", str), OpenApiParameter("dimension", str)],
                   responses=TaskListOut(many=True))
    def get(self, request):
        qs = task_list(event_slug=request.query_params.get("event"), dimension=request.query_params.get("dimension"),
                       limit=None)
        return self.paginated(qs, TaskListOut)

    @extend_schema(request=TaskCreateIn, responses={201: TaskOut})
    def post(self, request):
        data = TaskCreateIn(data=request.data)
        data.is_valid(raise_exception=True)
        event = get_object_or_404(Event, slug=data.validated_data["event"])
        content = _content(data.validated_data, event)
        task = task_services.create_task(request.user, event, dimension=data.validated_data["dimension"], content=content)
        return Response(_task_out(request, task.pk), status=201)


class TaskDetailView(CurrentTaskOnConflict, APIView):
    @extend_schema(responses=TaskOut)
    def get(self, request, pk: int):
        return Response(_task_out(request, pk))  # Task.DoesNotExist: a 404 (studio.errors)

    @extend_schema(request=TaskUpdateIn, responses={200: TaskOut, 409: TaskOut})
    def put(self, request, pk: int):
        task = get_object_or_404(Task.objects.select_related("event"), pk=pk)
        data = TaskUpdateIn(data=request.data)
        data.is_valid(raise_exception=True)
        content = _content(data.validated_data, task.event)
        task_services.save_revision(request.user, task, expected_version=data.validated_data["expected_version"],
                                    content=content, message=data.validated_data["message"])
        return Response(_task_out(request, pk))


class TaskSubmitView(APIView):
    @extend_schema(request=None, responses=TaskOut)
    def post(self, request, pk: int):
        return _apply_transition(request, pk, "submit", "")


def _apply_transition(request, pk: int, action: str, reason: str, acknowledge: bool = False) -> Response:
    task = _task_or_404(pk)
    review_services.transition(request.user, task, action, reason=reason, acknowledge_open_comments=acknowledge)
    return Response(_task_out(request, pk))


class TaskTransitionView(APIView):
    """Apply a review transition: submit, withdraw, start_review, return (reason), approve, release."""

    @extend_schema(request=TransitionIn, responses=TaskOut)
    def post(self, request, pk: int):
        data = TransitionIn(data=request.data)
        data.is_valid(raise_exception=True)
        return _apply_transition(request, pk, data.validated_data["action"], data.validated_data["reason"],
                                 data.validated_data["acknowledge_open_comments"])


class TaskAuditView(APIView):
    """The task's audit trail, oldest first, a page at a time."""

    pagination_class = CursorPagination
    cursor_key = "id"

    @extend_schema(responses=AuditOut(many=True))
    def get(self, request, pk: int):
        return self.paginated(task_audit(_task_or_404(pk)), AuditOut)


class RevisionListView(APIView):
    """The task's revisions, newest first, a page at a time."""

    pagination_class = CursorPagination
    cursor_key = "-number"

    @extend_schema(responses=RevisionListOut(many=True))
    def get(self, request, pk: int):
        return self.paginated(task_revisions(_task_or_404(pk)), RevisionListOut)


class RevisionDetailView(APIView):
    @extend_schema(responses=RevisionOut)
    def get(self, request, pk: int, number: int):
        return Response(RevisionOut(_revision_or_404(_task_or_404(pk), number)).data)


class RevisionRestoreView(CurrentTaskOnConflict, APIView):
    """Write an old revision again as the new head (the revisions in between stay)."""

    @extend_schema(request=RestoreIn, responses={200: TaskOut, 409: TaskOut})
    def post(self, request, pk: int, number: int):
        task = _task_or_404(pk)
        data = RestoreIn(data=request.data)
        data.is_valid(raise_exception=True)
        _revision_or_404(task, number)
        task_services.restore_revision(request.user, task, number, expected_version=data.validated_data["expected_version"])
        return Response(_task_out(request, pk))


class AcceptProposalView(CurrentTaskOnConflict, APIView):
    """Bind a blank answer field to its proposed source (the proposal is worked out again on the server)."""

    @extend_schema(request=AcceptProposalIn, responses={200: TaskOut, 400: dict, 409: TaskOut})
    def post(self, request, pk: int):
        task = _task_or_404(pk)
        data = AcceptProposalIn(data=request.data)
        data.is_valid(raise_exception=True)
        task_services.accept_answer_proposal(request.user, task, field=data.validated_data["field"],
                                             expected_version=data.validated_data["expected_version"])
        return Response(_task_out(request, pk))


class RefreshDerivedView(CurrentTaskOnConflict, APIView):
    """Write the head again with its stale derived values (the manifest's GSD/CRS) taken from the
    layers now (``annotation.services.tasks.refresh_derived``); 400 when nothing is stale, 409
    for a stale ``expected_version``, 423 for a released task."""

    @extend_schema(request=RestoreIn, responses={200: TaskOut, 400: dict, 409: TaskOut})
    def post(self, request, pk: int):
        task = _task_or_404(pk)
        data = RestoreIn(data=request.data)
        data.is_valid(raise_exception=True)
        task_services.refresh_derived(request.user, task, expected_version=data.validated_data["expected_version"])
        return Response(_task_out(request, pk))


class RevisionDiffView(APIView):
    """``?a=<number>&b=<number>``: what changed from revision a to revision b (query, steps, answer)."""

    @extend_schema(responses=dict)
    def get(self, request, pk: int):
        task = _task_or_404(pk)
        q = DiffQuery(data=request.query_params)
        q.is_valid(raise_exception=True)
        a = q.validated_data.get("a", max(task.version - 1, 1))
        b = q.validated_data.get("b", task.version)
        return Response(task_services.diff_revisions(_revision_or_404(task, a), _revision_or_404(task, b)))


class DraftView(APIView):
    """The requesting user's autosaved editor state of a task (never a revision)."""

    @extend_schema(responses={200: DraftOut, 204: None})
    def get(self, request, pk: int):
        draft = user_draft(_task_or_404(pk), request.user)
        return Response(DraftOut(draft).data) if draft else Response(status=204)

    @extend_schema(request=DraftIn, responses=DraftOut)
    def put(self, request, pk: int):
        task = _task_or_404(pk)
        data = DraftIn(data=request.data)
        data.is_valid(raise_exception=True)
        draft = task_services.save_draft(request.user, task, base_version=data.validated_data["base_version"],
                                         content=data.validated_data["content"])
        return Response(DraftOut(draft).data)

    @extend_schema(responses={204: None})
    def delete(self, request, pk: int):
        task_services.discard_draft(request.user, _task_or_404(pk))
        return Response(status=204)


class CommentListView(APIView):
    """GET: the task's comment threads (first comment and its replies), oldest first, a page of
    threads at a time; POST: a comment or a reply."""

    pagination_class = CursorPagination
    cursor_key = "id"

    @extend_schema(responses=ThreadOut(many=True))
    def get(self, request, pk: int):
        return self.paginated(task_comment_threads(_task_or_404(pk)), ThreadOut)

    @extend_schema(request=CommentIn, responses={201: CommentOut})
    def post(self, request, pk: int):
        task = _task_or_404(pk)
        data = CommentIn(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        parent = None
        if v.get("parent"):
            parent = TaskComment.objects.filter(pk=v["parent"], task=task).first()
            if parent is None:
                raise InvalidInput(f"parent: comment {v['parent']} is not a comment of this task")
        comment = review_services.add_comment(request.user, task, v["body"], step_index=v.get("step_index"),
                                              answer_field=v.get("answer_field", ""), location=v.get("location"),
                                              parent=parent)
        return Response(CommentOut(comment).data, status=201)


class CommentResolveView(APIView):
    @extend_schema(request=ResolveIn, responses=CommentOut)
    def post(self, request, pk: int):
        comment = get_object_or_404(TaskComment.objects.select_related("task", "parent"), pk=pk)
        data = ResolveIn(data=request.data)
        data.is_valid(raise_exception=True)
        root = review_services.resolve_comment(request.user, comment, resolved=data.validated_data["resolved"])
        return Response(CommentOut(root).data)


urlpatterns = [
    path("events/", EventListView.as_view(), name="api-events"),
    path("events/<slug:slug>/", EventDetailView.as_view(), name="api-event"),
    path("layers/<int:pk>/", LayerDetailView.as_view(), name="api-layer"),
    path("layers/<int:pk>/georeferencing/", LayerGeoreferencingView.as_view(), name="api-layer-georeferencing"),
    path("qc/", QcView.as_view(), name="api-qc"),
    path("tasks/", TaskListView.as_view(), name="api-tasks"),
    path("tasks/<int:pk>/", TaskDetailView.as_view(), name="api-task"),
    path("tasks/<int:pk>/submit/", TaskSubmitView.as_view(), name="api-task-submit"),
    path("tasks/<int:pk>/transitions/", TaskTransitionView.as_view(), name="api-task-transitions"),
    path("tasks/<int:pk>/audit/", TaskAuditView.as_view(), name="api-task-audit"),
    path("tasks/<int:pk>/revisions/", RevisionListView.as_view(), name="api-task-revisions"),
    path("tasks/<int:pk>/revisions/<int:number>/", RevisionDetailView.as_view(), name="api-task-revision"),
    path("tasks/<int:pk>/revisions/<int:number>/restore/", RevisionRestoreView.as_view(), name="api-task-restore"),
    path("tasks/<int:pk>/diff/", RevisionDiffView.as_view(), name="api-task-diff"),
    path("tasks/<int:pk>/answer-proposals/accept/", AcceptProposalView.as_view(), name="api-task-accept-proposal"),
    path("tasks/<int:pk>/refresh-derived/", RefreshDerivedView.as_view(), name="api-task-refresh-derived"),
    path("tasks/<int:pk>/draft/", DraftView.as_view(), name="api-task-draft"),
    path("tasks/<int:pk>/comments/", CommentListView.as_view(), name="api-task-comments"),
    path("comments/<int:pk>/resolve/", CommentResolveView.as_view(), name="api-comment-resolve"),
]
