"""Pages of experiments: the list (start one, save a configuration version) and one experiment
(live progress per question by polling ``/api/experiments/<id>/``, cancel, resume, the
trajectories as they arrive, accounting per repeat and per task). Both show only the experiments
the person is not blind on (``experiments.selectors.visible_experiments``; 404 for the others)."""
from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from evaluation.selectors.judge import judge_configs
from experiments import selectors, services
from experiments.models import Experiment, ExperimentConfig
from kernel.errors import DomainError
from releases.models import Release
from studio.permissions import can

_CONFIG_FIELDS = ("name", "base_url", "model", "api_key_env", "protocol", "temperature", "max_tokens", "max_steps",
                  "question_timeout_s", "budget_tokens", "budget_cost", "price_prompt_per_m", "price_completion_per_m", "tool_results")


def experiment_list(request):
    return render(request, "frontend/experiment_list.html", {
        "experiments": selectors.visible_experiments(request.user)[:200], "configs": ExperimentConfig.objects.order_by("name", "-version"),
        "releases": Release.objects.order_by("-id"), "can_run": can(request.user, "experiment.run"),
        "judge_configs": judge_configs().filter(paused=False),
        "can_configure": can(request.user, "experiment.configure")})


@require_POST
def experiment_start(request):
    config = get_object_or_404(ExperimentConfig, pk=request.POST.get("config") or 0)
    qids = [q.strip() for q in (request.POST.get("question_ids") or "").replace("\n", ",").split(",") if q.strip()]
    try:
        exp = services.start_experiment(request.user, config, release=request.POST.get("release") or None,
                                        question_ids=qids, repeats=request.POST.get("repeats") or 1,
                                        agent_name=request.POST.get("agent") or "",
                                        judge_config=request.POST.get("judge_config") or None,
                                        human_share=request.POST.get("human_share") or 0.0)
    except (DomainError, PermissionDenied) as exc:
        messages.error(request, str(exc))
        return redirect("experiments")
    return redirect("experiment", exp.pk)


@require_POST
def experiment_config_save(request):
    values = {k: request.POST.get(k, "") for k in _CONFIG_FIELDS}
    for k in ("max_tokens", "budget_tokens", "budget_cost"):
        values[k] = values[k] or None
    for k, default in (("temperature", 0.1), ("max_steps", 50), ("question_timeout_s", 900.0),
                       ("price_prompt_per_m", 0.0), ("price_completion_per_m", 0.0), ("tool_results", "tool")):
        values[k] = values[k] or default
    try:
        cfg = services.save_config(request.user, **values)
    except (DomainError, PermissionDenied) as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"saved configuration {cfg}")
    return redirect("experiments")


def experiment_detail(request, pk: int):
    exp = get_object_or_404(selectors.visible_experiments(request.user), pk=pk)
    return render(request, "frontend/experiment_detail.html", {
        "exp": exp, "questions": exp.questions.order_by("repeat", "id"), "acc": selectors.accounting(exp),
        "can_run": can(request.user, "experiment.run"), "live": exp.status in ("queued", "running", "scoring")})


@require_POST
def experiment_cancel(request, pk: int):
    try:
        services.cancel_experiment(request.user, get_object_or_404(Experiment, pk=pk))
    except (DomainError, PermissionDenied) as exc:
        messages.error(request, str(exc))
    return redirect("experiment", pk)


@require_POST
def experiment_resume(request, pk: int):
    try:
        services.resume_experiment(request.user, get_object_or_404(Experiment, pk=pk))
    except (DomainError, PermissionDenied) as exc:
        messages.error(request, str(exc))
    return redirect("experiment", pk)
