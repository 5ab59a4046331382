"""Pages of experiments: the list (start one, save a configuration version) and one experiment
(live progress per question by polling ``/api/experiments/<id>/``, cancel, resume, the
trajectories as they arrive, accounting per repeat and per task). Both show only the experiments
the person is not blind on (``experiments.selectors.visible_experiments``; 404 for the others)."""
from __future__ import annotations

from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from evaluation.selectors.judge import judge_configs
from experiments import selectors, services
from experiments.models import Experiment, ExperimentConfig
from kernel.errors import DomainError
from kernel.vocabulary import SERVING_PERCEPTION_MODE
from releases.models import Release
from studio.pagination import InvalidCursor, paginate
from studio.permissions import can

#: experiments a page of the list page (newest first)
EXPERIMENT_PAGE_SIZE = 50
#: questions (one row per question and repeat) a page of the experiment page
QUESTION_PAGE_SIZE = 50
#: tasks a page of the experiment page's per-task accounting
TASK_PAGE_SIZE = 50

_CONFIG_FIELDS = ("name", "base_url", "model", "api_key_env", "protocol", "temperature", "max_tokens", "max_steps",
                  "question_timeout_s", "budget_tokens", "budget_cost", "price_prompt_per_m", "price_completion_per_m", "tool_results", "perception_mode",
                  "max_concurrency")


def experiment_list(request):
    """The experiments the person is not blind on, newest first (:data:`EXPERIMENT_PAGE_SIZE` a
    page, ``?cursor=``), the start form and the configuration form (each for who may use it)."""
    try:
        experiments = paginate(request.GET, selectors.visible_experiments(request.user), key="-id",
                               page_size=EXPERIMENT_PAGE_SIZE)
    except InvalidCursor as exc:
        raise Http404(str(exc)) from None
    return render(request, "frontend/experiment_list.html", {
        "experiments": experiments, "configs": ExperimentConfig.objects.order_by("name", "-version"),
        "releases": Release.objects.order_by("-id"), "can_run": can(request.user, "experiment.run"),
        "judge_configs": judge_configs().filter(paused=False),
        "can_configure": can(request.user, "experiment.configure"),
        # said at the form, so that its example endpoint and key variable are not refused on save
        "allowed_hosts": ", ".join(settings.STUDIO_JUDGE_ALLOWED_HOSTS) or "none",
        "key_variables": ", ".join(settings.STUDIO_JUDGE_KEY_VARIABLES) or "none"})


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
                       ("price_prompt_per_m", 0.0), ("price_completion_per_m", 0.0), ("tool_results", "tool"),
                       ("perception_mode", SERVING_PERCEPTION_MODE), ("max_concurrency", 1)):
        values[k] = values[k] or default
    try:
        cfg = services.save_config(request.user, **values)
    except (DomainError, PermissionDenied) as exc:
        messages.error(request, str(exc))
    else:
        unset = services.key_variable_unset_for(cfg)
        if unset:
            messages.warning(request, f"saved configuration {cfg}, but {unset} in this server's environment: "
                                      f"its experiments fail until it is.")
        else:
            messages.success(request, f"saved configuration {cfg}")
    return redirect("experiments")


def _task_page(request, rows: list) -> tuple[list, int, int]:
    """Page ``?tasks=<n>`` (from 1) of the per-task accounting rows: ``(rows, n, pages)``; an
    unknown page number gives the nearest page."""
    pages = max(1, -(-len(rows) // TASK_PAGE_SIZE))
    try:
        n = min(max(1, int(request.GET.get("tasks") or 1)), pages)
    except ValueError:
        n = 1
    return rows[(n - 1) * TASK_PAGE_SIZE:n * TASK_PAGE_SIZE], n, pages


def experiment_detail(request, pk: int):
    """One experiment: progress, the questions (:data:`QUESTION_PAGE_SIZE` a page, ``?cursor=``,
    in the order they run), accounting per run (repeat) with the total, and per task over repeats
    (:data:`TASK_PAGE_SIZE` a page, ``?tasks=<n>``; :func:`experiments.selectors.accounting`)."""
    exp = get_object_or_404(selectors.visible_experiments(request.user), pk=pk)
    try:
        questions = paginate(request.GET, exp.questions.all(), key="id", page_size=QUESTION_PAGE_SIZE)
    except InvalidCursor as exc:
        raise Http404(str(exc)) from None
    acc = selectors.accounting(exp)
    tasks, task_page, task_pages = _task_page(request, acc["by_task"])
    keep = {k: v for k, v in request.GET.items() if k != "tasks"}
    return render(request, "frontend/experiment_detail.html", {
        "exp": exp, "questions": questions, "acc": acc, "tasks": tasks, "task_page": task_page,
        "task_pages": task_pages, "priced": selectors.has_price(exp.config),
        "task_prev": urlencode({**keep, "tasks": task_page - 1}) if task_page > 1 else "",
        "task_next": urlencode({**keep, "tasks": task_page + 1}) if task_page < task_pages else "",
        "can_run": can(request.user, "experiment.run"), "live": exp.status in ("queued", "running", "scoring"),
        "n_running": acc["running"]})


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
