"""The experiments' REST API (``/api/experiments/``, ``/api/experiment-configs/``,
``/api/experiment-questions/<id>/``: one question with its live trajectory): thin views over
:mod:`experiments.services`; lists cursor-paginated (``studio.pagination``); every write checks
its permission row in the service (``experiment.configure``, ``experiment.run``: maintainers); reads
show only the experiments the person is not blind on (``selectors.visible_experiments``: a scorer
sees none, a person holding a queue slot of an experiment's record not that one; 404)."""
from __future__ import annotations

from django.shortcuts import get_object_or_404
from django.urls import path
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from experiments import selectors, services
from experiments.models import Experiment, ExperimentConfig, ExperimentQuestion
from kernel.vocabulary import PERCEPTION_MODES, SERVING_PERCEPTION_MODE
from studio.api_fields import ID_BOUNDS
from studio.api_views import APIView
from studio.pagination import CursorPagination


class ConfigOut(serializers.ModelSerializer):
    class Meta:
        model = ExperimentConfig
        fields = ["id", "name", "version", "base_url", "model", "api_key_env", "protocol", "temperature", "top_p",
                  "max_tokens", "seed", "tool_results", "perception_mode", "max_steps", "question_timeout_s", "request_timeout_s", "max_concurrency",
                  "budget_tokens", "budget_cost", "price_prompt_per_m", "price_completion_per_m", "created_at"]


class ConfigIn(serializers.Serializer):
    name = serializers.CharField(max_length=100)
    base_url = serializers.CharField(max_length=500)
    model = serializers.CharField(max_length=200)
    api_key_env = serializers.CharField(max_length=100, required=False, allow_blank=True, default="",
                                        help_text="the name of the variable holding the key (never the key)")
    protocol = serializers.ChoiceField(choices=["AP", "IF"], default="AP")
    temperature = serializers.FloatField(default=0.1, min_value=0, max_value=2)
    top_p = serializers.FloatField(required=False, allow_null=True, default=None, min_value=0, max_value=1)
    max_tokens = serializers.IntegerField(required=False, allow_null=True, default=None, min_value=1,
                                          max_value=1_000_000)
    seed = serializers.IntegerField(default=0, min_value=-(2**31), max_value=2**31 - 1)
    tool_results = serializers.ChoiceField(choices=["tool", "user"], default="tool")
    perception_mode = serializers.ChoiceField(
        choices=list(PERCEPTION_MODES), default=SERVING_PERCEPTION_MODE,
        help_text="how the seg.* tools answer: model (the benchmark's protocol), gt (oracle perception) or classical")
    max_steps = serializers.IntegerField(default=50, min_value=2, max_value=1000)
    question_timeout_s = serializers.FloatField(default=900.0, min_value=1, max_value=86400)
    request_timeout_s = serializers.FloatField(default=1200.0, min_value=0.01, max_value=86400)
    max_concurrency = serializers.IntegerField(
        default=1, min_value=1, max_value=services.MAX_CONCURRENCY,
        help_text="questions in flight at once (threads of the job); more than 1 only where the endpoint "
                  "serves requests side by side")
    budget_tokens = serializers.IntegerField(required=False, allow_null=True, default=None, min_value=1,
                                             max_value=2**62)
    budget_cost = serializers.FloatField(required=False, allow_null=True, default=None, min_value=0)
    price_prompt_per_m = serializers.FloatField(default=0.0, min_value=0)
    price_completion_per_m = serializers.FloatField(default=0.0, min_value=0)


class QuestionOut(serializers.ModelSerializer):
    class Meta:
        model = ExperimentQuestion
        fields = ["id", "repeat", "dimension", "question_id", "status", "attempts", "steps", "model_calls",
                  "cached_calls", "prompt_tokens", "completion_tokens", "cost", "seconds", "error"]


class QuestionDetailOut(QuestionOut):
    class Meta(QuestionOut.Meta):
        fields = QuestionOut.Meta.fields + ["trajectory", "record"]


class ExperimentOut(serializers.ModelSerializer):
    config = ConfigOut()
    release = serializers.SerializerMethodField()
    runs = serializers.SerializerMethodField()
    judge_config = serializers.SerializerMethodField()

    class Meta:
        model = Experiment
        fields = ["id", "config", "release", "question_ids", "repeats", "agent_name", "status", "stop_reason", "error",
                  "total", "done", "prompt_tokens", "completion_tokens", "cost", "model_seconds", "runs", "created_at",
                  "started_at", "finished_at", "judge_config", "human_share", "judge_job", "human_queued",
                  "followup_note"]

    def get_release(self, obj) -> str | None:
        return obj.release.version if obj.release_id else None

    def get_judge_config(self, obj) -> str | None:
        return obj.judge_config.name if obj.judge_config_id else None

    def get_runs(self, obj) -> list[int]:
        return sorted(r.pk for r in obj.runs.all())


class ExperimentIn(serializers.Serializer):
    config = serializers.IntegerField(**ID_BOUNDS, help_text="the configuration version's id")
    release = serializers.CharField(required=False, allow_blank=True, default="")
    question_ids = serializers.ListField(child=serializers.CharField(max_length=240), required=False, default=list,
                                         max_length=1000)
    repeats = serializers.IntegerField(default=1, min_value=1, max_value=20)
    agent = serializers.CharField(required=False, allow_blank=True, default="", max_length=200)
    judge_config = serializers.CharField(required=False, allow_blank=True, default="", max_length=100,
                                         help_text="a judge configuration's name: the runs get a judge job at the end")
    human_share = serializers.FloatField(default=0.0, min_value=0, max_value=1,
                                         help_text="share of each run's records queued for human scoring at the end")


class ConfigListView(APIView):
    pagination_class = CursorPagination

    @extend_schema(responses=ConfigOut(many=True))
    def get(self, request):
        return self.paginated(ExperimentConfig.objects.order_by("-id"), ConfigOut)

    @extend_schema(request=ConfigIn, responses={201: ConfigOut})
    def post(self, request):
        data = ConfigIn(data=request.data)
        data.is_valid(raise_exception=True)
        return Response(ConfigOut(services.save_config(request.user, **data.validated_data)).data, status=201)


class ExperimentListView(APIView):
    pagination_class = CursorPagination

    @extend_schema(responses=ExperimentOut(many=True))
    def get(self, request):
        return self.paginated(selectors.visible_experiments(request.user), ExperimentOut)

    @extend_schema(request=ExperimentIn, responses={201: ExperimentOut})
    def post(self, request):
        data = ExperimentIn(data=request.data)
        data.is_valid(raise_exception=True)
        d = data.validated_data
        config = get_object_or_404(ExperimentConfig, pk=d["config"])
        exp = services.start_experiment(request.user, config, release=d["release"] or None,
                                        question_ids=d["question_ids"], repeats=d["repeats"], agent_name=d["agent"],
                                        judge_config=d["judge_config"] or None, human_share=d["human_share"])
        return Response(ExperimentOut(selectors.experiment(exp.pk)).data, status=201)


class ExperimentDetailView(APIView):
    @extend_schema(responses=ExperimentOut)
    def get(self, request, pk: int):
        exp = get_object_or_404(selectors.visible_experiments(request.user), pk=pk)
        body = ExperimentOut(exp).data
        body["questions"] = QuestionOut(exp.questions.order_by("repeat", "id"), many=True).data
        body["accounting"] = selectors.accounting(exp)
        return Response(body)


class ExperimentQuestionView(APIView):
    @extend_schema(responses=QuestionDetailOut)
    def get(self, request, pk: int):
        visible = selectors.visible_experiments(request.user).values("pk")
        return Response(QuestionDetailOut(get_object_or_404(ExperimentQuestion, pk=pk, experiment__in=visible)).data)


class ExperimentCancelView(APIView):
    @extend_schema(request=None, responses=ExperimentOut)
    def post(self, request, pk: int):
        exp = services.cancel_experiment(request.user, get_object_or_404(Experiment, pk=pk))
        return Response(ExperimentOut(selectors.experiment(exp.pk)).data)


class ResumeIn(serializers.Serializer):
    config = serializers.IntegerField(required=False, allow_null=True, default=None, **ID_BOUNDS,
                                      help_text="go on with this version of the same configuration (a raised budget)")


class ExperimentResumeView(APIView):
    @extend_schema(request=ResumeIn, responses=ExperimentOut)
    def post(self, request, pk: int):
        data = ResumeIn(data=request.data)
        data.is_valid(raise_exception=True)
        cfg = data.validated_data["config"]
        config = get_object_or_404(ExperimentConfig, pk=cfg) if cfg else None
        exp = services.resume_experiment(request.user, get_object_or_404(Experiment, pk=pk), config)
        return Response(ExperimentOut(selectors.experiment(exp.pk)).data)


urlpatterns = [
    path("experiment-configs/", ConfigListView.as_view(), name="api-experiment-configs"),
    path("experiments/", ExperimentListView.as_view(), name="api-experiments"),
    path("experiments/<int:pk>/", ExperimentDetailView.as_view(), name="api-experiment"),
    path("experiment-questions/<int:pk>/", ExperimentQuestionView.as_view(), name="api-experiment-question"),
    path("experiments/<int:pk>/cancel/", ExperimentCancelView.as_view(), name="api-experiment-cancel"),
    path("experiments/<int:pk>/resume/", ExperimentResumeView.as_view(), name="api-experiment-resume"),
]
