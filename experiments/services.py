"""Experiments: configure, start, run, cancel, resume, account for and score agent runs made by the
studio as the benchmark's harness makes them (``docs/experiments.md``).

* :func:`save_config` — a new version of an agent configuration (the endpoint checked by the
  judge's egress rules, ``evaluation.services.judge.egress_problem``; the key variable's *name* only);
* :func:`start_experiment` — a gold set (a release, or studio tasks for a pilot) × a configuration
  × repeats: one :class:`~experiments.models.ExperimentQuestion` per question and repeat, handed
  to the background runner (:func:`dispatch_experiment`, the Celery queue ``<STUDIO_QUEUE_PREFIX>experiments``);
* :func:`run_experiment` — the job: each pending question through :func:`run_question` (the
  harness's ReAct loop over the studio's MCP server of the task), its record written to the run
  folder at once (a worker killed mid-question loses nothing that finished), up to the
  configuration's ``max_concurrency`` questions at once in worker processes of the job, then every repeat's
  folder imported and scored as an ``AgentRun`` against the experiment's gold set;
* :func:`cancel_experiment` / :func:`resume_experiment` — resume runs only the questions that
  errored or never finished; model answers already received come from the cache (:func:`model_call`);
* a budget (tokens and/or cost of the requests sent) stops the experiment cleanly (``stopped``;
  overshot by at most the requests already in flight when several questions run at once);
* :func:`judge_and_queue` — at the end, the scored runs' records get a judge job with the
  experiment's judge configuration (``evaluation.services.judge.start_judge_job``) and a share of
  each run's records (:func:`human_sample`) is queued for human scoring
  (``evaluation.services.queue.enqueue_records``).
"""
from __future__ import annotations

import asyncio
import contextlib
import ctypes
import fcntl
import gc
import hashlib
import json
import logging
import math
import multiprocessing
import os
import re
import shutil
import signal
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
from anyio.from_thread import BlockingPortal, start_blocking_portal
from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.models import F, Max
from django.utils import timezone

from annotation.models import Task
from evaluation.background import dispatch
from evaluation.goldset import GoldSetError, release_gold_set, studio_gold_set
from evaluation.models import JudgeConfig, RunRecord
from evaluation.services.judge import egress_problem, key_variable_unset, start_judge_job
from evaluation.services.queue import enqueue_records
from evaluation.services.runs import RunImportError, import_run_dir, record_run_accounting
from experiments import harness, selectors
from experiments.client import EndpointError, post_chat
from experiments.jobs import run as celery_run
from experiments.models import Experiment, ExperimentConfig, ExperimentQuestion, ModelCall
from kernel.errors import Conflict, DomainError, InvalidInput
from kernel.vocabulary import PERCEPTION_MODES, SERVING_PERCEPTION_MODE, TASK_STEMS
from releases.models import Release
from replay.mcp_server import build_server
from studio.background import job_running, worker_lost, worker_tag
from studio.events import emit
from studio.permissions import Action, require

logger = logging.getLogger(__name__)

KIND = "experiment"  # the job kind in studio.background
EXPERIMENTS_DIR = "experiments"  # under STUDIO_DATA_ROOT
#: the images folder the context's input paths are shown under (the harness shows absolute paths
#: under its data root; the studio's tools take any path ending in a layer's file name)
IMAGES_DIR = "/dora/images"
#: LangGraph's ToolNode answer to a call of a tool the agent was not given, and to a tool's error
#: (langgraph.prebuilt.tool_node: INVALID_TOOL_NAME_ERROR_TEMPLATE, TOOL_CALL_ERROR_TEMPLATE)
INVALID_TOOL = "Error: {name} is not a valid tool, try one of [{names}]."
#: the most questions a configuration may run at once (``ExperimentConfig.max_concurrency``)
MAX_CONCURRENCY = 16
TOOL_FAILED = "Error: {error}\n Please fix your mistakes."


class ExperimentStateError(Conflict):
    """409: the experiment's state refuses the step (resume a running one, cancel a finished one)."""



class BudgetReached(Exception):
    """The experiment's budget is spent: the question stops unfinished and the experiment ``stopped``."""


class Cancelled(Exception):
    """A cancel was asked for while the question ran."""


# ------------------------------------------------------------------ configurations


def _num(name: str, value, *, low: float | None = None, high: float | None = None, integer: bool = False,
         optional: bool = False):
    if value in (None, "") and optional:
        return None
    try:
        v = int(value) if integer else float(value)
    except (TypeError, ValueError):
        raise InvalidInput(f"{name}: a number, not {value!r}") from None
    if (low is not None and v < low) or (high is not None and v > high):
        raise InvalidInput(f"{name}: between {low} and {high}")
    return v


@transaction.atomic
def save_config(user, *, name: str, base_url: str, model: str, api_key_env: str = "", protocol: str = "AP",
                temperature: float = 0.1, top_p: float | None = None, max_tokens: int | None = None, seed: int = 0,
                max_steps: int = harness.RECURSION_LIMIT, question_timeout_s: float = harness.QUESTION_TIMEOUT_S,
                request_timeout_s: float = 1200.0, budget_tokens: int | None = None, budget_cost: float | None = None,
                price_prompt_per_m: float = 0.0, price_completion_per_m: float = 0.0,
                tool_results: str = "tool", perception_mode: str = SERVING_PERCEPTION_MODE,
                max_concurrency: int = 1) -> ExperimentConfig:
    """Save version ``n + 1`` of configuration ``name`` (1 for a new name); a saved version is never
    changed. ``api_key_env`` is the *name* of the variable holding the key (one of
    ``STUDIO_JUDGE_KEY_VARIABLES``); the endpoint's host must be an allowed judge host
    (``STUDIO_JUDGE_ALLOWED_HOSTS``). Defaults: the harness's (temperature 0.1, recursion limit
    50, 900 s a question, 1200 s a request). ``tool_results``: ``"tool"`` (a ``tool`` message per
    call, as the harness sends them) or ``"user"`` (a ``user`` message, for a server whose chat
    template drops tool messages: docs/experiments.md, "Measured"). ``perception_mode``: how the
    ``seg.*`` tools answer the agent (``kernel.vocabulary.PERCEPTION_MODES``; default the benchmark's
    ``model``, whose stub observation stands where no checkpoint is configured; ``gt`` is oracle
    perception, whose runs are never ranked with the benchmark's). ``max_concurrency``: questions
    in flight at once in the job (1 to :data:`MAX_CONCURRENCY`, default 1: one at a time; more
    only where the endpoint serves requests side by side, :func:`run_experiment`). Raises
    ``InvalidInput`` naming the field;
    ``PermissionDenied`` without ``experiment.configure``."""
    require(user, Action.EXPERIMENT_CONFIGURE)
    name, base_url, model, api_key_env = (str(v or "").strip() for v in (name, base_url, model, api_key_env))
    protocol = str(protocol or "").strip().upper()
    if not name or len(name) > 100:
        raise InvalidInput("name: 1 to 100 characters")
    if not model:
        raise InvalidInput("model: required")
    if not base_url.startswith(("http://", "https://")):
        raise InvalidInput("base_url: an http:// or https:// URL of an OpenAI-compatible endpoint")
    if protocol not in ("AP", "IF"):
        raise InvalidInput("protocol: AP (auto-planning) or IF (instruction-following)")
    if perception_mode not in PERCEPTION_MODES:
        raise InvalidInput(f"perception_mode: one of {', '.join(PERCEPTION_MODES)}", field="perception_mode")
    if tool_results not in ("tool", "user"):
        raise InvalidInput("tool_results: tool (OpenAI tool messages) or user (user messages)")
    if api_key_env and (not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,99}", api_key_env)
                        or api_key_env.lower().startswith(("sk-", "sk_"))):
        raise InvalidInput("api_key_env: the name of an environment variable (A-Z, 0-9, _), never the key")
    problem = egress_problem(base_url, api_key_env)
    if problem:
        raise InvalidInput(problem)
    fields = dict(
        temperature=_num("temperature", temperature, low=0, high=2),
        top_p=_num("top_p", top_p, low=0, high=1, optional=True),
        max_tokens=_num("max_tokens", max_tokens, low=1, high=1_000_000, integer=True, optional=True),
        seed=_num("seed", seed, low=-2**31, high=2**31 - 1, integer=True),
        max_steps=_num("max_steps", max_steps, low=2, high=1000, integer=True),
        question_timeout_s=_num("question_timeout_s", question_timeout_s, low=1, high=86400),
        request_timeout_s=_num("request_timeout_s", request_timeout_s, low=0.01, high=86400),
        budget_tokens=_num("budget_tokens", budget_tokens, low=1, integer=True, optional=True),
        budget_cost=_num("budget_cost", budget_cost, low=0, optional=True),
        price_prompt_per_m=_num("price_prompt_per_m", price_prompt_per_m, low=0),
        price_completion_per_m=_num("price_completion_per_m", price_completion_per_m, low=0),
        max_concurrency=_num("max_concurrency", 1 if max_concurrency in (None, "") else max_concurrency,
                             low=1, high=MAX_CONCURRENCY, integer=True),
    )
    newest = ExperimentConfig.objects.select_for_update().filter(name=name).aggregate(n=Max("version"))["n"] or 0
    return ExperimentConfig.objects.create(name=name, version=newest + 1, base_url=base_url, model=model,
                                           api_key_env=api_key_env, protocol=protocol, tool_results=tool_results,
                                           perception_mode=perception_mode, created_by=user, **fields)


# ------------------------------------------------------------------ gold sets and questions


def gold_of(experiment: Experiment):
    """The experiment's gold set (``evaluation.goldset``): its release's, else its studio tasks'."""
    if experiment.release_id:
        return release_gold_set(experiment.release)
    return studio_gold_set(experiment.question_ids)


def questions_of(gold) -> list[tuple[str, dict]]:
    """``[(dimension, question)]`` of a gold set's benchmark tasks (robustness variants are not
    run: they are outside the DORA score), in the dimensions' order, as the harness builds them
    (:func:`experiments.harness.questions_from_samples`)."""
    out = []
    for dim in TASK_STEMS:
        out += [(dim, q) for q in harness.questions_from_samples(gold.samples.get(dim) or [], IMAGES_DIR)]
    return out


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.-]+", "-", text).strip("-")[:60] or "model"


def run_folder(experiment: Experiment, repeat: int) -> Path:
    """The run folder of one repeat: ``<experiment folder>/<model>-r<repeat>_<AP|IF>`` (the
    protocol read back from the name by the run import, ``protocol_from_dir_name``)."""
    return Path(experiment.folder) / f"{_slug(experiment.config.model)}-r{repeat}_{experiment.config.protocol}"


def _judge_config(judge_config: JudgeConfig | str | int | None) -> JudgeConfig | None:
    if judge_config in (None, ""):
        return None
    if isinstance(judge_config, JudgeConfig):
        found = judge_config
    else:
        text = str(judge_config).strip()
        found = JudgeConfig.objects.filter(name=text).first()
        if found is None and re.fullmatch(r"[0-9]{1,9}", text):
            found = JudgeConfig.objects.filter(pk=int(text)).first()
        if found is None:
            raise InvalidInput(f"judge_config: no judge configuration {text!r}")
    if found.paused:
        raise InvalidInput(f"judge_config: {found.name!r} is paused: {found.paused_reason}")
    return found


def start_experiment(user, config: ExperimentConfig, *, release: Release | str | None = None, question_ids=(),
                     repeats: int = 1, agent_name: str = "", judge_config: JudgeConfig | str | int | None = None,
                     human_share: float = 0.0) -> Experiment:
    """Create an experiment of ``config`` on a release (a ``Release`` or its version) or, for a
    pilot, on the studio tasks ``question_ids`` (each needs a succeeded replay: its gold), with
    ``repeats`` runs of every question, and hand it to the background runner after commit.
    ``judge_config`` (a ``JudgeConfig``, its name or id; optional): at the end the scored runs'
    records get a judge job with it; ``human_share`` (0 to 1, default 0): at the end that share of
    each run's records is queued for human scoring (:func:`judge_and_queue`).
    Raises ``InvalidInput`` (no gold set, an unknown release or question, a gold set
    without tasks, repeats outside 1–20, an unknown or paused judge configuration, a share outside
    0–1); ``PermissionDenied`` without ``experiment.run``, and without ``judge.run`` (a judge
    configuration) or ``queue.manage`` (a share above 0), which the end needs."""
    require(user, Action.EXPERIMENT_RUN)
    repeats = _num("repeats", repeats, low=1, high=20, integer=True)
    human_share = _num("human_share", human_share if human_share not in (None, "") else 0.0, low=0, high=1)
    judge = _judge_config(judge_config)
    if judge is not None:
        require(user, Action.JUDGE_RUN)
    if human_share > 0:
        require(user, Action.QUEUE_MANAGE)
    if isinstance(release, str):
        found = Release.objects.filter(version=release.strip()).first() if release.strip() else None
        if release.strip() and found is None:
            raise InvalidInput(f"release: no release {release!r}")
        release = found
    qids = sorted({str(q).strip() for q in question_ids or () if str(q).strip()})
    if (release is None) == (not qids):
        raise InvalidInput("release: give a release, or question_ids of studio tasks for a pilot (not both)")
    if qids:
        missing = sorted(set(qids) - set(Task.objects.filter(question_id__in=qids).values_list("question_id", flat=True)))
        if missing:
            raise InvalidInput(f"question_ids: no studio task {', '.join(missing[:10])}")
    probe = Experiment(config=config, release=release, question_ids=qids)
    try:
        questions = questions_of(gold_of(probe))
    except GoldSetError as exc:
        raise InvalidInput(f"gold: {exc}") from None
    if not questions:
        raise InvalidInput("gold: the gold set has no benchmark task to run")
    agent_name = (str(agent_name or "").strip() or f"{config.model} ({config.name} v{config.version})")[:200]
    with transaction.atomic():
        exp = Experiment.objects.create(config=config, release=release, question_ids=qids, repeats=repeats,
                                        agent_name=agent_name, created_by=user, total=len(questions) * repeats,
                                        judge_config=judge, human_share=human_share)
        exp.folder = str(Path(settings.STUDIO_DATA_ROOT) / EXPERIMENTS_DIR / str(exp.pk))
        exp.save(update_fields=["folder"])
        tasks = {q: t for q, t in Task.objects.filter(question_id__in=[q["question_id"] for _, q in questions])
                 .values_list("question_id", "pk")}
        ExperimentQuestion.objects.bulk_create([
            ExperimentQuestion(experiment=exp, repeat=r, dimension=dim, question_id=q["question_id"],
                               task_id=tasks.get(q["question_id"]))
            for r in range(1, repeats + 1) for dim, q in questions])
        transaction.on_commit(lambda: dispatch_experiment(exp.pk))
    return exp


# ------------------------------------------------------------------ the model call and its cache


def request_key(url: str, body: dict) -> str:
    """SHA-256 (hex) of the whole request: the endpoint URL and the JSON body, keys sorted, compact."""
    text = json.dumps({"url": url, "body": body}, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _usage(response: dict) -> tuple[int, int]:
    usage = response.get("usage") or {}
    return int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)


def _cost(config: ExperimentConfig, prompt: int, completion: int) -> float:
    return (prompt * config.price_prompt_per_m + completion * config.price_completion_per_m) / 1e6


def _budget_problem(exp: Experiment) -> str:
    cfg = exp.config
    if cfg.budget_tokens is not None and exp.prompt_tokens + exp.completion_tokens >= cfg.budget_tokens:
        return f"budget reached: {exp.prompt_tokens + exp.completion_tokens} tokens of {cfg.budget_tokens}"
    if cfg.budget_cost is not None and exp.cost >= cfg.budget_cost:
        return f"budget reached: cost {exp.cost:.6f} of {cfg.budget_cost:g}"
    return ""


def model_call(exp: Experiment, row: ExperimentQuestion, body: dict, api_key: str | None) -> tuple[dict, bool]:
    """The endpoint's answer to ``body``: from the cache (:class:`ModelCall`, by :func:`request_key`)
    at no cost, else sent (:func:`experiments.client.post_chat`; the budget checked first,
    :class:`BudgetReached`) and kept. Adds the tokens, cost and seconds to the question row and
    (requests sent only) to the experiment. Returns ``(response, cached)``."""
    url = exp.config.base_url.rstrip("/") + "/chat/completions"
    key = request_key(url, body)
    # the answer and its tokens only: the request (the whole conversation and the tools' schemas)
    # is the larger part of a row and is known here
    hit = ModelCall.objects.filter(key=key).values_list("response", "prompt_tokens", "completion_tokens").first()
    if hit is not None:
        response, p, c = hit
        ExperimentQuestion.objects.filter(pk=row.pk).update(
            model_calls=F("model_calls") + 1, cached_calls=F("cached_calls") + 1,
            prompt_tokens=F("prompt_tokens") + p, completion_tokens=F("completion_tokens") + c)
        return response, True
    exp.refresh_from_db(fields=["prompt_tokens", "completion_tokens", "cost"])
    problem = _budget_problem(exp)
    if problem:
        raise BudgetReached(problem)
    response, latency, attempts = post_chat(
        exp.config.base_url, body, api_key=api_key, read_timeout_s=exp.config.request_timeout_s,
        max_retries=int(settings.STUDIO_EXPERIMENT_MAX_RETRIES), backoff_s=float(settings.STUDIO_EXPERIMENT_BACKOFF_S))
    p, c = _usage(response)
    ModelCall.objects.get_or_create(key=key, defaults=dict(
        request={"url": url, "body": body}, response=response, prompt_tokens=p, completion_tokens=c,
        latency_s=latency, attempts=attempts))
    cost = _cost(exp.config, p, c)
    ExperimentQuestion.objects.filter(pk=row.pk).update(
        model_calls=F("model_calls") + 1, prompt_tokens=F("prompt_tokens") + p,
        completion_tokens=F("completion_tokens") + c, cost=F("cost") + cost)
    Experiment.objects.filter(pk=exp.pk).update(
        prompt_tokens=F("prompt_tokens") + p, completion_tokens=F("completion_tokens") + c, cost=F("cost") + cost,
        model_seconds=F("model_seconds") + latency)
    return response, False


# ------------------------------------------------------------------ one question


def chat_body(cfg: ExperimentConfig, messages: list[dict], tools: list[dict], repeat: int) -> dict:
    """The request body of one model call (the OpenAI chat format): model, messages, tools with
    ``tool_choice: "auto"`` (OpenAI's default when tools are given, sent because llama-cpp-python's
    function-calling format ignores the tools without it), temperature, the seed (configuration
    seed + repeat − 1, so repeats differ and each is reproducible), ``top_p`` and ``max_tokens`` when set."""
    body: dict[str, Any] = {"model": cfg.model, "messages": messages, "temperature": cfg.temperature,
                            "seed": cfg.seed + repeat - 1}
    if tools:
        body["tools"] = tools
        body["tool_choice"] = "auto"
    if cfg.top_p is not None:
        body["top_p"] = cfg.top_p
    if cfg.max_tokens:
        body["max_tokens"] = cfg.max_tokens
    return body


def _tool_text(result) -> tuple[str, bool]:
    texts = [getattr(c, "text", "") for c in (getattr(result, "content", None) or []) if getattr(c, "type", "") == "text"]
    return "\n".join(texts), bool(getattr(result, "is_error", False))


def _run_async(fn):
    """``fn()`` (an async callable) run to its end from synchronous code: ``anyio.run`` in this
    thread, or in a short-lived thread of its own where this thread already has a running event
    loop (an async caller, or Playwright's sync API left in the tests' main thread), which
    ``anyio.run`` refuses ("Cannot run the event loop while another loop is running")."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return anyio.run(fn)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="experiment-mcp") as pool:
        return pool.submit(anyio.run, fn).result()


def _call_tool(server, name: str, args: dict, portal: BlockingPortal | None = None) -> str:
    """The tool message's text of one call on the task's MCP server (``replay.mcp_server``, the
    ``mcp_serve`` code path): the tool's JSON text, or the ToolNode's error text for a refused call.
    ``portal``: the question's event loop (:func:`run_question`), else one started for the call."""
    async def call():
        return await server.call_tool(name, args)

    try:
        text, is_error = _tool_text(portal.call(call) if portal is not None else _run_async(call))
    except Exception as exc:  # noqa: BLE001 — the MCP layer's refusal (unknown tool, bad arguments)
        return TOOL_FAILED.format(error=f"ToolException({str(exc)!r})")
    return TOOL_FAILED.format(error=f"ToolException({text!r})") if is_error else text


def offered_tools(server, question: dict, protocol: str, portal: BlockingPortal | None = None) -> list[dict]:
    """The tools the model is given, in the OpenAI format, in the server's order (the benchmark's
    server order): all of them under AP; under IF only the gold tools (all when none matches).
    ``portal``: as :func:`_call_tool`'s."""
    async def listing():
        return await server.list_tools()

    tools = portal.call(listing) if portal is not None else _run_async(listing)
    if protocol == "IF":
        wanted = {harness.model_tool_name(n) for n in harness.required_tool_names(question)}
        tools = [t for t in tools if t.name in wanted] or tools
    return [{"type": "function", "function": {"name": t.name, "description": t.description or "",
                                              "parameters": t.input_schema}} for t in tools]


#: the user message carrying a tool's answer when the configuration says ``tool_results = "user"``
USER_TOOL_RESULT = "Result of the tool call {id} ({name}):\n{content}"


def tool_message(cfg: ExperimentConfig, call_id: str, name: str, content: str) -> dict:
    """The message that gives the model a tool's answer: ``{"role": "tool", "tool_call_id", "name",
    "content"}`` (OpenAI, the harness's), or a ``user`` message :data:`USER_TOOL_RESULT` when the
    configuration's ``tool_results`` is ``"user"``."""
    if cfg.tool_results == "user":
        return {"role": "user", "content": USER_TOOL_RESULT.format(id=call_id, name=name, content=content)}
    return {"role": "tool", "tool_call_id": call_id, "name": name, "content": content}


class StopSignal:
    """What the questions in flight of one job share: the first stop (a budget reached, a cancel,
    a crash) that any of them met. Each question checks it before every model call
    (:meth:`check`), so one question's stop ends the others at their next call, cached or not.

    It lives in shared memory (``multiprocessing`` values made in the ``fork`` context), so the
    job's worker processes (:func:`_run_questions`) see one another's stop: the kind and its text
    are shared, ``crash`` (the exception object) stays in the process that met it.
    :meth:`watch_parent` makes :meth:`check` also stop a worker whose job process is gone."""

    _NONE, _BUDGET, _CANCEL, _CRASH = 0, 1, 2, 3
    _TEXT = 1024  # bytes of a stop's reason kept (UTF-8, cut at a character)

    def __init__(self) -> None:
        ctx = _fork_context()
        self._lock = ctx.Lock()
        self._kind = ctx.RawValue("i", self._NONE)
        self._who = ctx.RawValue("i", -1)  # the worker whose crash came first (-1: the job's own thread)
        self._text = ctx.RawArray("c", self._TEXT)
        self.crash: BaseException | None = None  # the first unexpected exception met in this process
        self._parent: int | None = None

    def _put(self, kind: int, text: str, who: int = -1) -> None:
        self._kind.value, self._who.value = kind, who
        self._text.value = text.encode("utf-8")[:self._TEXT - 1].decode("utf-8", "ignore").encode("utf-8")

    def set(self, exc: BudgetReached | Cancelled) -> None:
        with self._lock:
            if self._kind.value == self._NONE:
                self._put(self._BUDGET if isinstance(exc, BudgetReached) else self._CANCEL, str(exc))

    def set_crash(self, exc: BaseException, worker: int = -1) -> None:
        """Record a crash (over a stop met before it: a crash ends the job ``failed``); the first one
        only. ``worker``: the index of the worker process that met it (the job reads its exception)."""
        with self._lock:
            if self._kind.value != self._CRASH:
                self._put(self._CRASH, f"{type(exc).__name__}: {exc}", worker)
                self.crash = exc

    @property
    def stop(self) -> BudgetReached | Cancelled | None:
        """The first budget or cancel met by any question (None after a crash, or when none was met)."""
        kind, text = self._kind.value, self.reason
        return BudgetReached(text) if kind == self._BUDGET else Cancelled(text) if kind == self._CANCEL else None

    @property
    def reason(self) -> str:
        """The first stop's text (a crash: ``"<type>: <message>"``), "" when none was met."""
        return self._text.value.decode("utf-8", "ignore")

    @property
    def crashed_worker(self) -> int | None:
        """The worker process whose crash came first (-1: the job's own thread), or None: no crash."""
        return self._who.value if self._kind.value == self._CRASH else None

    def is_set(self) -> bool:
        return self._kind.value != self._NONE

    def watch_parent(self, pid: int) -> None:
        """Called in a worker process: :meth:`check` stops it (:class:`Cancelled`) once its parent
        is no longer ``pid`` (the job's process, gone)."""
        self._parent = pid

    def check(self) -> None:
        """Raise for a stop met by another question: its kind (:class:`BudgetReached` with its
        reason, :class:`Cancelled`), or :class:`Cancelled` after another question's crash or once
        the job's process is gone (:meth:`watch_parent`)."""
        kind = self._kind.value
        if kind == self._CRASH:
            raise Cancelled("another question of the job crashed")
        stop = self.stop
        if stop is not None:
            raise stop
        if self._parent is not None and os.getppid() != self._parent:
            raise Cancelled("the job's process is gone")


def _check_cancel(exp: Experiment, stop: StopSignal | None = None) -> None:
    if stop is not None:
        stop.check()
    if Experiment.objects.filter(pk=exp.pk, cancel_requested=True).exists():
        raise Cancelled()


def work_dir_of(exp: Experiment, repeat: int, question_id: str, worker: int = 0) -> Path:
    """The working folder of one question (the tools' outputs): the harness's layout
    ``<run folder>/workers/w<worker>/tmp/<question id>`` (``/`` in the id replaced by ``_``);
    ``worker`` is the index (from 0) of the job's worker that runs it."""
    return run_folder(exp, repeat) / "workers" / f"w{int(worker)}" / "tmp" / question_id.replace("/", "_")


def run_question(exp: Experiment, row: ExperimentQuestion, question: dict, task: Task, api_key: str | None, *,
                 worker: int = 0, stop: StopSignal | None = None) -> dict:
    """Answer one question as the harness does and return its ``benchmark.jsonl`` record.

    The loop is LangGraph's prebuilt ReAct agent's: the prompt as one user message; a model call
    with the offered tools; every tool call of its answer run on the task's MCP server (arguments
    sent as JSON text normalised first) and answered by a ``tool`` message; again until an
    answer without tool calls, or the recursion limit (the harness's "Sorry, need more steps"
    answer when the model still asks for tools), or the seconds per question (an error, as the
    harness's ``question_timeout``). The live trajectory is saved on the row after every call.
    The server's calls run on one event loop kept for the question (an ``anyio`` blocking portal:
    a thread of its own, whose worker thread the tool calls reuse) rather than a loop and a worker
    thread started per call.
    ``worker``: the index of the job's worker running it (its work folder, :func:`work_dir_of`);
    ``stop``: the job's :class:`StopSignal`, checked before every model call with the cancel.
    Raises :class:`BudgetReached` and :class:`Cancelled` (the question stays unfinished)."""
    cfg = exp.config
    work_dir = work_dir_of(exp, row.repeat, question["question_id"], worker)
    shutil.rmtree(work_dir, ignore_errors=True)
    server = build_server(task, work_dir=work_dir, perception_mode=cfg.perception_mode)
    with start_blocking_portal() as portal:
        return _answer(exp, row, question, cfg, server, portal, api_key, stop)


def _answer(exp: Experiment, row: ExperimentQuestion, question: dict, cfg: ExperimentConfig, server,
            portal: BlockingPortal, api_key: str | None, stop: StopSignal | None) -> dict:
    """:func:`run_question`'s loop, its server's calls made through ``portal``."""
    tools = offered_tools(server, question, cfg.protocol, portal)
    names = {t["function"]["name"] for t in tools}
    messages: list[dict] = [{"role": "user", "content": harness.build_prompt(question, cfg.protocol)}]
    trajectory: list[dict] = []
    ai_texts: list[str] = []
    started = time.monotonic()
    error = None
    calls = 0
    try:
        while True:
            _check_cancel(exp, stop)
            if time.monotonic() - started > cfg.question_timeout_s:
                raise TimeoutError(f"question_timeout after {cfg.question_timeout_s:g}s")
            response, _cached = model_call(exp, row, chat_body(cfg, messages, tools, row.repeat), api_key)
            calls += 1
            message = ((response.get("choices") or [{}])[0].get("message") or {})
            text = harness.message_text(message.get("content"))
            tool_calls = [tc for tc in message.get("tool_calls") or [] if isinstance(tc, dict)]
            if tool_calls and harness.steps_left(calls - 1, cfg.max_steps) < 2:
                ai_texts.append(harness.OUT_OF_STEPS)
                messages.append({"role": "assistant", "content": harness.OUT_OF_STEPS})
                break
            ai_texts.append(text)
            assistant = {"role": "assistant", "content": text}  # "" rather than null (docs/experiments.md)
            if tool_calls:
                assistant["tool_calls"] = [
                    {"id": tc.get("id") or f"call_{calls}_{i}", "type": "function",
                     "function": {"name": (tc.get("function") or {}).get("name") or "",
                                  "arguments": (tc.get("function") or {}).get("arguments") or "{}"}}
                    for i, tc in enumerate(tool_calls)]
            messages.append(assistant)
            if not tool_calls:
                break
            for tc in assistant["tool_calls"]:
                name, raw = tc["function"]["name"], tc["function"]["arguments"]
                try:
                    args = json.loads(raw) if isinstance(raw, str) else raw
                except ValueError:
                    args = None
                step = {"call": harness.call_text(name, args), "args": args if isinstance(args, dict) else {}, "obs": None}
                trajectory.append(step)
                if name not in names:
                    content = INVALID_TOOL.format(name=name, names=", ".join(sorted(names)))
                elif not isinstance(args, dict):
                    content = TOOL_FAILED.format(error=f"arguments of {name} are not a JSON object: {str(raw)[:200]!r}")
                else:
                    content = _call_tool(server, name, harness.normalize_arguments(args), portal)
                step["obs"] = harness.normalize_observation(content)
                messages.append(tool_message(cfg, tc["id"], name, content))
                ExperimentQuestion.objects.filter(pk=row.pk).update(steps=len(trajectory), trajectory=trajectory,
                                                                    seconds=time.monotonic() - started)
    except (BudgetReached, Cancelled):
        raise
    except (EndpointError, TimeoutError) as exc:
        error = str(exc)
    elapsed = time.monotonic() - started
    answer = f"Error: {error}" if error else harness.extract_answer(ai_texts)
    return harness.record_of(question, predicted_answer=answer, error=error, trajectory=trajectory,
                             elapsed_time=elapsed, timestamp=datetime.now().isoformat())


# ------------------------------------------------------------------ the run folder


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}-{threading.get_ident()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


@contextlib.contextmanager
def _folder_lock(folder: Path, dimension: str) -> Iterator[None]:
    """Hold the write lock of ``dimension``'s folder in run folder ``folder`` against every other
    writer, thread or worker process (``fcntl.flock`` on ``workers/<stem>.lock``: each call opens
    the file afresh, and two open files exclude each other even in one process)."""
    lock = folder / "workers" / f"{TASK_STEMS[dimension]}.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a+b") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def write_folder(exp: Experiment, repeat: int, dimension: str) -> Path:
    """Write the finished records of ``repeat`` in ``dimension`` as the harness lays them out:
    ``<stem>/benchmark.jsonl`` (one line per question, question order), ``<stem>/run_stats.json``
    and ``<stem>/trajectories/<id>_trajectory.json``; every file replaced atomically. Returns the
    run folder. Two questions of the same repeat and dimension that end together (a job running
    several at once) write one after the other, each reading the records under the lock, so the
    last write holds every record saved before it."""
    folder = run_folder(exp, repeat)
    with _folder_lock(folder, dimension):
        _write_task_dir(exp, repeat, dimension, folder / TASK_STEMS[dimension])
    return folder


def _write_task_dir(exp: Experiment, repeat: int, dimension: str, task_dir: Path) -> None:
    records = list(ExperimentQuestion.objects.filter(experiment=exp, repeat=repeat, dimension=dimension,
                                                     record__isnull=False).order_by("id").values_list("record", flat=True))
    for rec in records:
        _atomic_write(task_dir / "trajectories" / harness.trajectory_file_name(rec),
                      json.dumps(harness.trajectory_document(rec), ensure_ascii=False, indent=2))
    _atomic_write(task_dir / "benchmark.jsonl", "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    _atomic_write(task_dir / "run_stats.json",
                  json.dumps(harness.run_stats(records, datetime.now().isoformat()), indent=2))


# ------------------------------------------------------------------ the job


def dispatch_experiment(exp_id: int):
    """Hand experiment ``exp_id`` to the background runner (``evaluation.background.dispatch``:
    the Celery task ``experiments.run`` on the queue ``<STUDIO_QUEUE_PREFIX>experiments``, a thread on the embedded setup)."""
    return dispatch(exp_id, run_experiment, celery_run, record_crash, kind=KIND)


def record_crash(exp_id: int, exc: Exception) -> None:
    """A crashed job ends ``failed`` with the crash as its error (resume runs what is left)."""
    Experiment.objects.filter(pk=exp_id).update(status=Experiment.Status.FAILED, finished_at=timezone.now(),
                                                error=f"the job crashed: {type(exc).__name__}: {exc}")


def _claim(exp_id: int) -> bool:
    now = timezone.now()
    return bool(Experiment.objects.filter(pk=exp_id, status=Experiment.Status.QUEUED).update(
        status=Experiment.Status.RUNNING, worker=worker_tag(), heartbeat_at=now, started_at=now, error=""))


def _beat(exp_id: int) -> None:
    Experiment.objects.filter(pk=exp_id, status__in=[Experiment.Status.RUNNING, Experiment.Status.SCORING]).update(
        heartbeat_at=timezone.now())


def _end(exp: Experiment, status: str, reason: str = "", error: str = "") -> None:
    Experiment.objects.filter(pk=exp.pk).update(status=status, stop_reason=reason, error=error,
                                                finished_at=timezone.now())
    exp.refresh_from_db()
    if status != Experiment.Status.DONE:  # stopped by the budget, cancelled or failed
        emit("experiment.stopped", _payload(exp, reason or error), experiment=exp, user=exp.created_by, actor=None)


def _payload(exp: Experiment, reason: str = "") -> dict:
    n_err = exp.questions.filter(status=ExperimentQuestion.Status.ERROR).count()
    return {"experiment_id": exp.pk, "status": exp.status, "agent": exp.agent_name, "n_questions": exp.total,
            "n_done": exp.done, "n_errors": n_err, "run_ids": sorted(exp.runs.values_list("pk", flat=True)),
            "reason": reason, "actor": getattr(exp.created_by, "username", None)}


def key_variable_unset_for(cfg: ExperimentConfig) -> str | None:
    """What is wrong with ``cfg``'s key variable as this process sees it: None when it names none
    (a local server without a key) or the variable holds a non-blank value; else the sentence
    ``the environment variable NAME (the model endpoint's API key) is not set``. The experiments
    page warns with it when a configuration is saved; starting a run refuses (:func:`_api_key`)."""
    if cfg.api_key_env and not os.environ.get(cfg.api_key_env, "").strip():
        return f"the environment variable {cfg.api_key_env} (the model endpoint's API key) is not set"
    return None


def _api_key(cfg: ExperimentConfig) -> str | None:
    unset = key_variable_unset(cfg.api_key_env)
    if unset:
        raise ExperimentStateError(unset)
    return os.environ.get(cfg.api_key_env, "").strip() if cfg.api_key_env else None


def run_experiment(exp_id: int) -> Experiment:
    """Run experiment ``exp_id`` (queued) to its end: every pending question of every repeat
    (:func:`run_question`; its record saved and the folder rewritten at once), then the repeats'
    folders imported and scored (:func:`score_experiment`). Ends ``done``, ``cancelled``,
    ``stopped`` (the budget; the questions in flight stay pending) or ``failed`` (the endpoint or
    key refused before any question ran: the message says why). A job that is not queued (taken,
    ended) is returned unchanged. While it runs the row carries this worker's tag and a heartbeat.

    Up to the configuration's ``max_concurrency`` questions run at once, in that many workers of
    this job (:func:`_run_questions`: processes on PostgreSQL, threads on SQLite), in the order
    ``(repeat, id)`` they are taken; one question's
    stop (the budget, a cancel) or crash ends the others at their next model call (they go back to
    pending) and no further question starts. Inside a database transaction (an inline caller's:
    other connections would not see its rows) they run one at a time in the calling thread."""
    with job_running(KIND, exp_id, lambda: _beat(exp_id), claim=lambda: _claim(exp_id)) as claimed:
        if not claimed:
            return Experiment.objects.get(pk=exp_id)
        exp = Experiment.objects.select_related("config", "release", "created_by").get(pk=exp_id)
        problem = egress_problem(exp.config.base_url, exp.config.api_key_env)
        try:
            if problem:
                raise ExperimentStateError(problem)
            api_key = _api_key(exp.config)
            gold = gold_of(exp)
        except (ExperimentStateError, GoldSetError) as exc:
            _end(exp, Experiment.Status.FAILED, error=str(exc))
            return exp
        rows = list(ExperimentQuestion.objects.filter(experiment=exp).exclude(status=ExperimentQuestion.Status.DONE)
                    .order_by("repeat", "id"))
        stop = _run_questions(exp, rows, gold, api_key)
        if stop.crash is not None:
            raise stop.crash
        if isinstance(stop.stop, BudgetReached):
            _end(exp, Experiment.Status.STOPPED, reason=str(stop.stop))
            return exp
        if stop.stop is not None:
            _end(exp, Experiment.Status.CANCELLED, reason="cancelled")
            return exp
        Experiment.objects.filter(pk=exp.pk).update(status=Experiment.Status.SCORING)
        try:
            runs = score_experiment(exp)
        except RunImportError as exc:
            _end(exp, Experiment.Status.FAILED, error=f"scoring: {exc}")
            return exp
        judge_and_queue(exp, runs)
        _end(exp, Experiment.Status.DONE)
        emit("experiment.finished", _payload(exp), experiment=exp, user=exp.created_by, actor=None)
    return exp


def concurrency_of(config: ExperimentConfig, n_questions: int) -> int:
    """How many questions a job of ``config`` runs at once for ``n_questions`` left: the
    configuration's ``max_concurrency`` (1 to :data:`MAX_CONCURRENCY`), at most ``n_questions``;
    1 inside a database transaction (the caller's rows are not visible to other connections) and
    in a process where CUDA is initialised (model-mode perception ran here on a GPU: CUDA does not
    survive the fork of :func:`_run_questions`' worker processes)."""
    n = max(1, min(int(config.max_concurrency or 1), MAX_CONCURRENCY, n_questions))
    return 1 if connections[DEFAULT_DB_ALIAS].in_atomic_block or _cuda_initialised() else n


def _cuda_initialised() -> bool:
    """Whether this process has initialised CUDA through torch (never true without torch imported)."""
    torch = sys.modules.get("torch")
    return bool(torch is not None and torch.cuda.is_initialized())


def _fork_context():
    """The ``multiprocessing`` context whose shared memory (values, locks, pipes) the job's worker
    processes share with it across ``os.fork``. Forked, a worker starts in milliseconds with this
    process's settings, imports and warmed caches (a ``spawn``ed one would set Django up again,
    about a second, and see none of an inline caller's settings)."""
    return multiprocessing.get_context("fork")


def _run_questions(exp: Experiment, rows: list[ExperimentQuestion], gold, api_key: str | None) -> StopSignal:
    """Run ``rows`` (in order) with :func:`concurrency_of` questions at once; returns the job's
    :class:`StopSignal` (set when a question met the budget, a cancel or a crash; after a crash its
    ``crash`` is that exception, or a ``RuntimeError`` saying how a worker process died). One at a
    time: in this thread. Several: in that many workers ``experiment-<id>-w<i>``
    (:func:`_workers_are_processes`: worker processes forked from this one on a server database,
    threads on SQLite), each taking the next row in order until none is left or the signal is set,
    each with its own database connections (closed when it ends)."""
    stop = StopSignal()
    questions = {q["question_id"]: q for _, q in questions_of(gold)}
    n = concurrency_of(exp.config, len(rows))
    if n == 1:
        for row in rows:
            if stop.is_set():
                break
            _run_one(exp, row, questions, gold.task_by_qid, api_key, 0, stop)
        return stop
    run = _run_in_processes if _workers_are_processes() else _run_in_threads
    run(exp.pk, rows, questions, gold.task_by_qid, api_key, n, stop)
    return stop


def _workers_are_processes() -> bool:
    """Whether the job's workers are processes: with ``STUDIO_EXPERIMENT_WORKER_PROCESSES`` on (the
    default; ``0`` keeps threads everywhere) and on a server database, yes, so that
    their Python runs in parallel (threads of one process take turns on the GIL: two were 1.10×
    one, docs/benchmarks.md "Experiments"). On SQLite, threads: SQLite keeps its file locks' state
    per process, and a process forked while another thread of the job's process (its heartbeat, a
    request of the embedded web server) holds a connection to the same file inherits that state
    and gets "database is locked" at once (howtocorrupt.html, 2.6; measured: the bench's workers
    failed so within a few passes)."""
    return bool(settings.STUDIO_EXPERIMENT_WORKER_PROCESSES) and connections[DEFAULT_DB_ALIAS].vendor != "sqlite"


def _take_and_run(exp_id: int, rows: list[ExperimentQuestion], questions: dict, tasks: dict, api_key: str | None,
                  worker: int, stop: StopSignal, take_next) -> None:
    """One worker's loop: ``take_next()`` (the next row's index in ``rows``, or None) and run it
    (:func:`_run_one` on a copy of the experiment of its own) until none is left or ``stop`` is set."""
    mine = Experiment.objects.select_related("config", "release", "created_by").get(pk=exp_id)
    while not stop.is_set():
        index = take_next()
        if index is None or index >= len(rows):
            return
        _run_one(mine, rows[index], questions, tasks, api_key, worker, stop, own_task=True)


def _run_in_threads(exp_id: int, rows: list[ExperimentQuestion], questions: dict, tasks: dict, api_key: str | None,
                    n: int, stop: StopSignal) -> None:
    """:func:`_run_questions`' ``n`` workers as threads of this process (SQLite)."""
    counter = iter(range(len(rows)))
    take = threading.Lock()

    def take_next() -> int | None:
        with take:
            return next(counter, None)

    def work(worker: int) -> None:
        try:
            _take_and_run(exp_id, rows, questions, tasks, api_key, worker, stop, take_next)
        except BaseException as exc:  # noqa: BLE001 — re-raised by the job after the others stopped
            logger.exception("experiment %s: worker %d crashed", exp_id, worker)
            stop.set_crash(exc, worker)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=work, args=(i,), name=f"experiment-{exp_id}-w{i}", daemon=True)
               for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def _run_in_processes(exp_id: int, rows: list[ExperimentQuestion], questions: dict, tasks: dict,
                      api_key: str | None, n: int, stop: StopSignal) -> None:
    """:func:`_run_questions`' ``n`` workers as processes forked from this one (a server database).
    This thread's connections are closed before the fork; each worker dies with this thread
    (``PR_SET_PDEATHSIG`` on Linux; elsewhere it stops at its next check once this process is
    gone). A worker's crash is sent back over a pipe (its text when it does not pickle); a worker
    that dies without a word (``kill -9``, the out-of-memory killer) is a crash
    ``RuntimeError("the question worker experiment-<id>-w<i> died (signal 9)")``."""
    ctx = _fork_context()
    taken = ctx.RawValue("i", 0)
    take = ctx.Lock()

    def take_next() -> int:
        with take:
            index = taken.value
            taken.value = index + 1
            return index

    connections.close_all()  # a forked worker must not share this thread's connections
    job_pid = os.getpid()
    workers = []
    # os.fork, not multiprocessing.Process: a Celery prefork worker's pool process is daemonic, and
    # multiprocessing refuses children to a daemonic process ("daemonic processes are not allowed
    # to have children"). The objects the workers inherit are left out of their garbage
    # collections: a collection in a worker would otherwise touch every inherited object and copy
    # most of the job's memory (a full one: 90 ms in a worker forked from a process with the
    # studio's imports, 4 ms frozen).
    sys.stdout.flush()
    sys.stderr.flush()
    gc.freeze()
    try:
        for i in range(n):
            reader, writer = ctx.Pipe(duplex=False)
            pid = os.fork()
            if pid == 0:  # the worker: it never returns into the job's code
                code = 1
                try:
                    reader.close()
                    _question_worker(exp_id, rows, questions, tasks, api_key, i, stop, take_next, writer, job_pid)
                    code = 0
                finally:
                    sys.stdout.flush()
                    sys.stderr.flush()
                    os._exit(code)
            writer.close()
            workers.append((f"experiment-{exp_id}-w{i}", pid, reader))
    finally:
        gc.unfreeze()
    crashes: dict[int, BaseException] = {}
    for i, (name, pid, reader) in enumerate(workers):
        try:
            outcome = reader.recv()
        except EOFError:  # it died without a word: killed, or out of memory
            outcome = None
        exitcode = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        if isinstance(outcome, BaseException):
            crashes[i] = outcome
        elif exitcode != 0:
            how = f"signal {-exitcode}" if exitcode < 0 else f"exit status {exitcode}"
            died = RuntimeError(f"the question worker {name} died ({how})")
            stop.set_crash(died, i)
            crashes[i] = died
        reader.close()
    first = stop.crashed_worker
    if first is not None:
        stop.crash = crashes.get(first) or RuntimeError(stop.reason)


def _question_worker(exp_id: int, rows: list[ExperimentQuestion], questions: dict, tasks: dict, api_key: str | None,
                     worker: int, stop: StopSignal, take_next, conn, job_pid: int) -> None:
    """The body of one worker process of :func:`_run_in_processes`: :func:`_take_and_run`, then
    ``None`` sent on ``conn``, or the exception that crashed it (its text, when it does not pickle)."""
    _die_with_parent()
    stop.watch_parent(job_pid)
    _drop_inherited_connections()
    torch = sys.modules.get("torch")
    if torch is not None:  # imported by the job's process before the fork (model-mode perception there):
        torch.set_num_threads(1)  # its OpenMP thread pool is not the fork's, and a parallel op would hang
    outcome: BaseException | None = None
    try:
        _take_and_run(exp_id, rows, questions, tasks, api_key, worker, stop, take_next)
    except BaseException as exc:  # noqa: BLE001 — sent to the job, which re-raises the first crash
        logger.exception("experiment %s: question worker %d crashed", exp_id, worker)
        stop.set_crash(exc, worker)
        outcome = exc
    finally:
        connections.close_all()
    try:
        conn.send(outcome)
    except Exception:  # noqa: BLE001 — an exception that does not pickle goes as its text
        conn.send(RuntimeError(f"{type(outcome).__name__}: {outcome}"))
    conn.close()


#: connections a worker process inherited from its job: kept referenced and never used or closed
#: (closing one would end the job's own session on the server), gone with the worker's ``os._exit``
_INHERITED: list = []


def _drop_inherited_connections() -> None:
    """In a worker process: set aside every database connection this thread inherited open from
    the job, so that its first query opens one of its own instead of writing into the job's socket."""
    for conn in connections.all(initialized_only=True):
        if conn.connection is not None:
            _INHERITED.append(conn.connection)
            conn.connection = None
        conn.in_atomic_block, conn.savepoint_ids, conn.needs_rollback = False, [], False
        conn.closed_in_transaction, conn.run_on_commit = False, []


def _die_with_parent() -> None:
    """Linux: have the kernel kill this process when the thread that forked it ends (a worker
    killed with ``kill -9`` takes its question processes with it, as it took its threads)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG (linux/prctl.h)
    except (OSError, AttributeError):  # not Linux: StopSignal.watch_parent's check stands alone
        pass


def _run_one(exp: Experiment, row: ExperimentQuestion, questions: dict, tasks: dict, api_key: str | None,
             worker: int, stop: StopSignal, own_task: bool = False) -> None:
    """Run one question row: marked running (attempts + 1, its counters reset), answered
    (:func:`run_question`), its record saved and its repeat's folder rewritten (:func:`write_folder`).
    ``questions``: the gold set's questions by id; ``tasks``: its studio tasks by question id.
    A stop (budget, cancel) sets ``stop`` and puts the row back to pending; a question no longer in
    the gold set ends ``error``. ``own_task``: load the task afresh (a thread of its own must not
    share the gold set's model instance with the others)."""
    question, task = questions.get(row.question_id), tasks.get(row.question_id)
    if question is None or task is None:
        ExperimentQuestion.objects.filter(pk=row.pk).update(
            status=ExperimentQuestion.Status.ERROR, error="the question is no longer in the gold set")
        return
    if own_task:
        task = Task.objects.select_related("event", "head").get(pk=task.pk)
    ExperimentQuestion.objects.filter(pk=row.pk).update(
        status=ExperimentQuestion.Status.RUNNING, attempts=F("attempts") + 1, started_at=timezone.now(),
        steps=0, trajectory=[], error="", model_calls=0, cached_calls=0, prompt_tokens=0,
        completion_tokens=0, cost=0.0, seconds=0.0)
    try:
        record = run_question(exp, row, question, task, api_key, worker=worker, stop=stop)
    except (BudgetReached, Cancelled) as exc:
        ExperimentQuestion.objects.filter(pk=row.pk).update(status=ExperimentQuestion.Status.PENDING)
        stop.set(exc)
        return
    status = ExperimentQuestion.Status.ERROR if record["error"] else ExperimentQuestion.Status.DONE
    ExperimentQuestion.objects.filter(pk=row.pk).update(
        status=status, record=record, error=record["error"] or "", trajectory=record["trajectory"],
        steps=len(record["trajectory"]), seconds=record["elapsed_time"], finished_at=timezone.now())
    Experiment.objects.filter(pk=exp.pk).update(done=F("done") + 1)
    write_folder(exp, row.repeat, row.dimension)


def score_experiment(exp: Experiment) -> list:
    """Import every repeat's run folder as an ``AgentRun`` scored against the experiment's gold set
    (``evaluation.services.import_run_dir``: the release, else the studio's tasks; protocol from
    the configuration, scaffold ReAct; ``run.scored`` emitted by the import), store its accounting on
    it (``evaluation.services.runs.record_run_accounting``: the sums of the repeat's questions,
    :func:`experiments.selectors.repeat_sums`, which the leaderboard shows) and link it."""
    runs = []
    for repeat in range(1, exp.repeats + 1):
        folder = run_folder(exp, repeat)
        if not folder.is_dir():
            continue
        run = import_run_dir(exp.created_by, folder, exp.agent_name, release=exp.release,
                             protocol=exp.config.protocol, scaffold="ReAct",
                             perception_mode=exp.config.perception_mode)
        spent = selectors.repeat_sums(exp, repeat)
        record_run_accounting(exp.created_by, run, prompt_tokens=spent["prompt_tokens"],
                              completion_tokens=spent["completion_tokens"], cost=spent["cost"], seconds=spent["seconds"])
        exp.runs.add(run)
        runs.append(run)
    return runs


# ------------------------------------------------------------------ judged and human-scored like every run


def human_sample(records, share: float) -> list[int]:
    """The records of one run queued for human scoring: ``records`` are ``(record id, question
    id)`` pairs; each is ranked by the SHA-256 (hex) of its question id's UTF-8 bytes, and the
    ``ceil(share × n)`` lowest (at least one when ``share`` > 0; ties by record id) are chosen.
    Returns their ids, ascending. Reproducible without any stored seed: every repeat, resume and
    experiment on the same gold set picks the same questions, so human scores of different
    repeats and agents are of the same questions. Raises ``InvalidInput`` for a share outside 0–1."""
    share = _num("human_share", share, low=0, high=1)
    rows = list(records)
    if share == 0 or not rows:
        return []
    k = min(len(rows), max(1, math.ceil(share * len(rows) - 1e-9)))
    ranked = sorted(rows, key=lambda r: (hashlib.sha256(str(r[1]).encode("utf-8")).hexdigest(), r[0]))
    return sorted(rid for rid, _ in ranked[:k])


def judge_and_queue(exp: Experiment, runs) -> dict:
    """The end of a scored experiment: with a judge configuration, one judge job (holistic, the
    rule checker too) over every record of ``runs`` (``evaluation.services.judge.start_judge_job``,
    queued like any judge job; as ``exp.created_by``, who needs ``judge.run``); with
    ``human_share`` > 0, each run's :func:`human_sample` queued for the setting's number of human
    verdicts (``evaluation.services.queue.enqueue_records``, ``queue.manage``). Human scorers stay
    blind to the judge's verdicts (``evaluation.blind``). A refusal (a configuration paused since
    the start, a permission withdrawn) does not fail the experiment: it is written on
    ``followup_note``. Saves ``judge_job``, ``human_queued`` (``{records, slots}``) and the note;
    returns ``{judge_job, human_queued, note}``."""
    rows = list(RunRecord.objects.filter(run__in=[r.pk for r in runs]).order_by("run_id", "id")
                .values_list("id", "run_id", "question_id"))
    user, notes, job_id, queued = exp.created_by, [], None, {}
    if exp.judge_config_id and rows:
        if user is None:
            notes.append("judge: the experiment's user is gone; start a judge job by hand")
        else:
            try:
                job_id = start_judge_job(user, exp.judge_config, [rid for rid, _, _ in rows]).pk
            except (DomainError, PermissionDenied) as exc:
                notes.append(f"judge: {exc}")
    if exp.human_share > 0 and rows:
        chosen = []
        for run in runs:
            chosen += human_sample([(rid, qid) for rid, run_id, qid in rows if run_id == run.pk], exp.human_share)
        try:
            if user is None:
                raise PermissionDenied("the experiment's user is gone")
            queued = {"records": len(chosen), "slots": enqueue_records(user, chosen)}
        except (DomainError, PermissionDenied) as exc:
            notes.append(f"human scoring: {exc}")
    note = "; ".join(notes)
    Experiment.objects.filter(pk=exp.pk).update(judge_job_id=job_id, human_queued=queued, followup_note=note)
    exp.judge_job_id, exp.human_queued, exp.followup_note = job_id, queued, note
    return {"judge_job": job_id, "human_queued": queued, "note": note}


# ------------------------------------------------------------------ cancel, resume, sweep


def lost_reason(exp: Experiment) -> str:
    """Why a running experiment will not end by itself (``studio.background.worker_lost``), or ""."""
    if exp.status != Experiment.Status.RUNNING:
        return ""
    return worker_lost(KIND, exp.pk, exp.worker, exp.heartbeat_at or exp.started_at or exp.created_at)


def cancel_experiment(user, exp: Experiment) -> Experiment:
    """Cancel ``exp``: a queued one at once; a running one at its next model call (the questions
    in flight go back to pending, resume runs them). Raises ``ExperimentStateError`` when it has ended."""
    require(user, Action.EXPERIMENT_RUN)
    with transaction.atomic():
        exp = Experiment.objects.select_for_update().get(pk=exp.pk)
        if exp.status == Experiment.Status.QUEUED:
            exp.status, exp.stop_reason, exp.finished_at = Experiment.Status.CANCELLED, "cancelled", timezone.now()
            exp.save(update_fields=["status", "stop_reason", "finished_at"])
        elif exp.status == Experiment.Status.RUNNING:
            exp.cancel_requested = True
            exp.save(update_fields=["cancel_requested"])
        else:
            raise ExperimentStateError(f"experiment {exp.pk} is {exp.status}: only a queued or running one is cancelled")
    return exp


def resume_experiment(user, exp: Experiment, config: ExperimentConfig | None = None) -> Experiment:
    """Run ``exp`` again (failed, cancelled, stopped, done with errors, or running with its worker
    lost): questions that errored or never finished go back to pending, those done are kept, and
    the job is handed to the runner. Answers the endpoint already gave come from the cache.
    ``config``: continue with another version of the same configuration (e.g. a raised budget;
    requests that did not change are still answered by the cache). Raises ``ExperimentStateError``
    when it is queued, alive, or done without errors; ``InvalidInput`` for a ``config`` of
    another name."""
    require(user, Action.EXPERIMENT_RUN)
    if config is not None and config.name != exp.config.name:
        raise InvalidInput(f"config: {config} is not a version of {exp.config.name!r}")
    sweep_experiments(only=exp.pk)
    with transaction.atomic():
        exp = Experiment.objects.select_for_update().get(pk=exp.pk)
        redo = exp.questions.exclude(status=ExperimentQuestion.Status.DONE)
        if exp.status in (Experiment.Status.QUEUED, Experiment.Status.RUNNING, Experiment.Status.SCORING):
            raise ExperimentStateError(f"experiment {exp.pk} is {exp.status}")
        if exp.status == Experiment.Status.DONE and not redo.exists():
            raise ExperimentStateError(f"experiment {exp.pk} is done without errors: nothing to resume")
        n_redo = redo.filter(status=ExperimentQuestion.Status.ERROR).count()  # counted as finished (done)
        redo.update(status=ExperimentQuestion.Status.PENDING)
        Experiment.objects.filter(pk=exp.pk).update(
            status=Experiment.Status.QUEUED, cancel_requested=False, stop_reason="", error="", finished_at=None,
            done=F("done") - n_redo, config=config or exp.config, judge_job=None, human_queued={}, followup_note="")
        exp.runs.clear()
        transaction.on_commit(lambda: dispatch_experiment(exp.pk))
    exp.refresh_from_db()
    return exp


def sweep_experiments(stale_after: float | None = None, *, only: int | None = None) -> list[dict]:
    """The sweeper of experiments (``studio.background.register_sweeper``): a running experiment
    whose worker is lost ends ``failed`` ("the worker was lost …; resume it"); its question in
    flight stays ``running`` until resume sets it pending. Returns ``{kind, id, action, why, removed}``."""
    out = []
    rows = Experiment.objects.filter(status__in=[Experiment.Status.RUNNING, Experiment.Status.SCORING])
    if only is not None:
        rows = rows.filter(pk=only)
    for exp in rows:
        why = worker_lost(KIND, exp.pk, exp.worker, exp.heartbeat_at or exp.started_at or exp.created_at,
                          stale_after=stale_after)
        if not why:
            continue
        n = Experiment.objects.filter(pk=exp.pk, status=exp.status, worker=exp.worker).update(
            status=Experiment.Status.FAILED, finished_at=timezone.now(), error=f"the worker was lost ({why}); resume it")
        if n:
            out.append({"kind": KIND, "id": exp.pk, "action": "failed", "why": why, "removed": []})
    return out

