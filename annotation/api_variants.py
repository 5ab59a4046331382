"""REST API for robustness variants (issue 21; included from ``studio/api_urls.py``).

| method | path | what |
| --- | --- | --- |
| GET | /api/tasks/<id>/variants/ | the variants made from a task |
| POST | /api/tasks/<id>/variants/ | make one {kind, n?, seed?, step?, error?, alternative?, strategy?, constraint?} |

Thin: :class:`VariantIn` validates (the same serializer validates ``manage.py make_variants``'s
options), ``annotation.services.variants.create_variant`` acts. 201 with the variant made, 200
with the identical one made before; 400 with a ``detail`` naming the field for parameters that do
not fit the task (a step outside its gold plan, a base task not approved); 403 without the role to
create tasks (``task.create`` in ``studio/permissions.py``).
"""
from __future__ import annotations

from django.shortcuts import get_object_or_404
from django.urls import path
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from annotation.models import Task
from annotation.selectors_variants import variants_of
from annotation.services.variants import create_variant
from annotation.variants import EXTRANEOUS_LEVELS, KINDS, STRATEGIES
from studio.api_fields import INT_BOUNDS
from studio.api_views import APIView
from studio.pagination import CursorPagination

#: steps are 0-based positions in a gold plan: a plan of more than this many steps is no task
MAX_STEP = 10_000


class VariantIn(serializers.Serializer):
    """The parameters of a variant (``annotation.variants.make_variant``); which ones a kind reads:
    extraneous ``n`` (n_e) and ``seed``; broken ``step`` (required), ``error``, ``alternative``;
    unsolvable ``strategy``, ``step`` (tool_removal) and ``constraint`` (contradictory_constraints)."""

    kind = serializers.ChoiceField(choices=KINDS)
    n = serializers.ChoiceField(choices=EXTRANEOUS_LEVELS, default=4, help_text="n_e, the number of distractors")
    seed = serializers.IntegerField(default=0, min_value=0, max_value=INT_BOUNDS["max_value"])
    step = serializers.IntegerField(required=False, allow_null=True, default=None, min_value=0, max_value=MAX_STEP,
                                    help_text="0-based gold step (broken; unsolvable tool_removal)")
    error = serializers.CharField(required=False, allow_blank=True, default="", max_length=2000, trim_whitespace=True)
    alternative = serializers.RegexField(r"^[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)?$", required=False,
                                         allow_blank=True, default="", max_length=120,
                                         help_text="the alternative tool's dotted name (broken)")
    strategy = serializers.ChoiceField(choices=STRATEGIES, default="tool_removal")
    constraint = serializers.CharField(required=False, allow_blank=True, default="", max_length=2000)

    def validate(self, attrs):
        if attrs["kind"] == "broken" and attrs.get("step") is None:
            raise serializers.ValidationError({"step": "a broken variant needs the step whose tool fails"})
        return attrs


class VariantOut(serializers.Serializer):
    id = serializers.IntegerField(source="task_id")
    question_id = serializers.CharField(source="task.question_id")
    kind = serializers.CharField()
    params = serializers.JSONField()
    tools = serializers.JSONField()
    base_task = serializers.IntegerField(source="base_task_id")
    base_question_id = serializers.CharField(source="base_task.question_id")
    base_revision = serializers.IntegerField(source="base_revision.number")
    status = serializers.CharField(source="task.status")
    created = serializers.BooleanField(required=False)


def variant_params(validated: dict) -> dict:
    """The keyword arguments of ``create_variant`` from :class:`VariantIn`'s validated data."""
    return {k: validated[k] for k in ("n", "seed", "step", "error", "alternative", "strategy", "constraint")}


class TaskVariantsView(APIView):
    pagination_class = CursorPagination
    cursor_key = "id"

    @extend_schema(responses=VariantOut(many=True))
    def get(self, request, pk: int):
        task = get_object_or_404(Task, pk=pk)
        return self.paginated(variants_of(task), VariantOut)

    @extend_schema(request=VariantIn, responses={201: VariantOut, 200: VariantOut})
    def post(self, request, pk: int):
        base = get_object_or_404(Task, pk=pk)
        data = VariantIn(data=request.data)
        data.is_valid(raise_exception=True)
        variant, created = create_variant(request.user, base, data.validated_data["kind"],
                                          **variant_params(data.validated_data))
        body = VariantOut(variant).data
        body["created"] = created
        return Response(body, status=201 if created else 200)


urlpatterns = [
    path("tasks/<int:pk>/variants/", TaskVariantsView.as_view(), name="api-task-variants"),
]
