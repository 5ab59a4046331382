"""REST API for agent runs, their records and verdicts."""
from __future__ import annotations

from django.shortcuts import get_object_or_404
from django.urls import path
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from evaluation import selectors
from evaluation.models import RunRecord
from evaluation.services import ERROR_CODES, submit_human_verdict


class RunOut(serializers.Serializer):
    id = serializers.IntegerField()
    agent = serializers.CharField(source="agent.name")
    name = serializers.CharField()
    scoring_mode = serializers.CharField()
    dora_score = serializers.FloatField(allow_null=True)
    dimensions = serializers.JSONField()
    created_at = serializers.DateTimeField()


class RecordListOut(serializers.Serializer):
    id = serializers.IntegerField()
    question_id = serializers.CharField()
    dimension = serializers.CharField()
    task_score = serializers.FloatField(allow_null=True)
    t_any = serializers.FloatField(allow_null=True)
    t_ord = serializers.FloatField(allow_null=True)
    t_em = serializers.FloatField(allow_null=True)
    par_acc = serializers.FloatField(allow_null=True)
    eff = serializers.FloatField(allow_null=True)


class RunDetailOut(RunOut):
    records = RecordListOut(many=True)


class VerdictOut(serializers.Serializer):
    id = serializers.IntegerField()
    source = serializers.CharField()
    annotator = serializers.CharField(source="annotator.username", default=None)
    judge_name = serializers.CharField()
    status = serializers.CharField()
    is_correct = serializers.BooleanField(allow_null=True)
    grade = serializers.FloatField(allow_null=True)
    errors = serializers.JSONField()
    reasons = serializers.JSONField()
    reasoning = serializers.CharField()
    created_at = serializers.DateTimeField()


class RecordOut(RecordListOut):
    run = serializers.IntegerField(source="run_id")
    sample_id = serializers.CharField()
    predicted_answer = serializers.JSONField()
    trajectory = serializers.JSONField()
    field_scores = serializers.JSONField()
    step_matches = serializers.JSONField()
    verdicts = VerdictOut(many=True)


class VerdictIn(serializers.Serializer):
    errors = serializers.DictField(child=serializers.BooleanField(), help_text="{E1..E6: bool}")
    reasons = serializers.DictField(child=serializers.CharField(allow_blank=True), required=False, default=dict)
    grade = serializers.FloatField(min_value=0, max_value=1)
    reasoning = serializers.CharField(required=False, allow_blank=True, default="")
    is_correct = serializers.BooleanField(required=False, allow_null=True, default=None)
    override_reason = serializers.CharField(required=False, allow_blank=True, default="")

    def validate_errors(self, value):
        unknown = set(value) - set(ERROR_CODES)
        if unknown:
            raise serializers.ValidationError(f"unknown flag(s): {', '.join(sorted(unknown))}")
        return value


class RunListView(APIView):
    @extend_schema(responses=RunOut(many=True))
    def get(self, request):
        return Response(RunOut(selectors.run_list(), many=True).data)


class RunDetailView(APIView):
    @extend_schema(responses=RunDetailOut)
    def get(self, request, pk: int):
        run = get_object_or_404(selectors.run_list(), pk=pk)
        data = RunOut(run).data
        data["records"] = RecordListOut(selectors.run_records(run), many=True).data
        return Response(data)


class RecordDetailView(APIView):
    @extend_schema(responses=RecordOut)
    def get(self, request, pk: int):
        return Response(RecordOut(get_object_or_404(selectors.record_detail_qs(), pk=pk)).data)


class RecordVerdictView(APIView):
    @extend_schema(request=VerdictIn, responses={201: VerdictOut})
    def post(self, request, pk: int):
        record = get_object_or_404(RunRecord, pk=pk)
        data = VerdictIn(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            verdict = submit_human_verdict(request.user, record, **data.validated_data)
        except ValueError as exc:
            return Response({"detail": str(exc)}, status=400)
        return Response(VerdictOut(verdict).data, status=201)


urlpatterns = [
    path("runs/", RunListView.as_view(), name="api-runs"),
    path("runs/<int:pk>/", RunDetailView.as_view(), name="api-run"),
    path("records/<int:pk>/", RecordDetailView.as_view(), name="api-record"),
    path("records/<int:pk>/verdicts/", RecordVerdictView.as_view(), name="api-record-verdicts"),
]
