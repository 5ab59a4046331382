"""Judge jobs: LLM-as-judge verdicts of run records, cached, with provenance, and the rule checker.

The pure core is :mod:`evaluation.judge` (prompts, backend, runner, parser, rules); this module
feeds it a record's inputs and stores what comes back:

* :func:`judge_record` — one judgement (holistic, or step-wise at a cut point for the next 1–3
  steps), cached by :func:`cache_key`; a hit makes no call;
* :func:`start_judge_job` / :func:`run_judge_job` — a batch as a :class:`~evaluation.models.JudgeJob`
  (:func:`dispatch_judge_job` hands it to its runner — the Celery task
  :func:`evaluation.jobs.judge_batch`, or a background thread on the embedded setup — so starting
  one never blocks a request), with bounded concurrency: a thread
  pool of ``config.max_concurrency`` makes the HTTP calls, the calling thread alone touches the
  database, and the job row carries the progress;
* :func:`check_record_with_rules` — the code checker's verdict (``source="code"``);
* :func:`try_judge_config` — one tiny request to test a configuration (latency, model, JSON mode).

Failure handling (judge.md, "Judge backends"):

* an answer that is still malformed after the runner's bounded re-ask is stored as
  ``Verdict(status="failed")`` with every raw text — never a default verdict;
* :class:`~evaluation.judge.backends.JudgeConfigError` (401/403/404, a missing key) pauses the
  :class:`~evaluation.models.JudgeConfig` with the error text (which never holds the key);
* transient errors (429/5xx/timeouts) are retried by the backend; when they outlast the retries the
  record is left without a verdict, the job ends ``failed`` and can be re-run (cached results are
  not called again).
"""
from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import random
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import CancelledError, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from evaluation.background import dispatch, job_runner
from evaluation.jobs import judge_batch
from evaluation.judge import (
    JudgeConfigError,
    JudgeRequestError,
    JudgeTransientError,
    OpenAICompatibleBackend,
    check_trajectory,
    judge_run,
    parse_verdict,
    prompt_fingerprint,
    render_holistic_prompt,
    render_stepwise_prompt,
    tool_specs_from_catalogue,
)
from evaluation.judge.backends import JSON_MODES, JudgeError, _redact
from evaluation.judge.fit import DEFAULT_CONTEXT_TOKENS, DEFAULT_MAX_TOKENS, PromptTooLong, fit_prompt
from evaluation.judge.prompts import DEFAULT_STEPWISE_BLIND_VERSION, DEFAULT_STEPWISE_GOLD_VERSION
from evaluation.judge.rules import normalize_tool_name, tool_sequence
from evaluation.judge.runner import STUCK_AFTER_S, JudgeOutcome
from evaluation.judge.verdict import E_CODES, protocol_setting
from evaluation.models import JudgeCall, JudgeConfig, JudgeJob, RunRecord, Verdict
from kernel.catalogue import catalogue_by_name
from kernel.egress import host_allowed
from kernel.errors import Conflict, InvalidInput
from replay.selectors import latest_successful_replay
from studio.background import job_running, worker_lost, worker_tag
from studio.events import emit
from studio.permissions import Action, require

logger = logging.getLogger(__name__)

#: Step-wise cut points as a share of the predicted trajectory's steps (judge.md, "What is judged").
CUTS: dict[str, float] = {"early": 0.25, "middle": 0.5, "late": 0.75}
HORIZONS: tuple[int, ...] = (1, 2, 3)
PROTOCOLS: tuple[str, ...] = ("holistic", "stepwise")
RULES_VERSION = "rules_v1"
RULES_NAME = "rule-checker"


class JudgePaused(Conflict):
    """The judge configuration is paused (its ``paused_reason`` says why); nothing was called (HTTP 409)."""


class JudgeInputError(InvalidInput):
    """A record cannot be judged under the requested protocol (the message says why)."""


# --------------------------------------------------------------------------------------------
# Settings (read at call time so tests can override them)
# --------------------------------------------------------------------------------------------


def egress_problem(base_url: str, api_key_env: str) -> str | None:
    """Why a judge configuration may not call out, or None: the endpoint's host must be one of
    ``settings.STUDIO_JUDGE_ALLOWED_HOSTS`` (an empty URL is the SDK's default, api.openai.com)
    and the key variable, when named, one of ``settings.STUDIO_JUDGE_KEY_VARIABLES``. The message
    names the field (``base_url: …`` / ``api_key_env: …``)."""
    from urllib.parse import urlparse

    hosts = [h.lower() for h in settings.STUDIO_JUDGE_ALLOWED_HOSTS]
    host = (urlparse(base_url).hostname or "").lower() if base_url else "api.openai.com"
    if not host_allowed(host, hosts):  # the allow-list rule webhooks share (kernel.egress)
        return (f"base_url: host {host or '(none)'!r} is not an allowed judge host "
                f"(STUDIO_JUDGE_ALLOWED_HOSTS: {', '.join(hosts) or 'none'})")
    variables = list(settings.STUDIO_JUDGE_KEY_VARIABLES)
    if api_key_env and api_key_env not in variables:
        return (f"api_key_env: {api_key_env} is not a declared judge key variable "
                f"(STUDIO_JUDGE_KEY_VARIABLES: {', '.join(variables) or 'none'})")
    return None


def backend_for(config: JudgeConfig) -> OpenAICompatibleBackend:
    """An OpenAI-compatible backend for ``config``; the key is read from ``config.api_key_env``.

    Retries, timeout and backoff come from the settings ``STUDIO_JUDGE_MAX_RETRIES`` (3),
    ``STUDIO_JUDGE_TIMEOUT_S`` (120) and ``STUDIO_JUDGE_BACKOFF_S`` (1.0, doubled per retry,
    capped at 30 s). Raises ``JudgeConfigError`` when the endpoint or the key variable is not
    allowed (:func:`egress_problem`, checked again here for configurations saved before a setting
    changed) or the named variable is unset or empty.
    """
    problem = egress_problem(config.base_url, config.api_key_env)
    if problem:
        raise JudgeConfigError(problem)
    unset = key_variable_unset(config.api_key_env)
    if unset:
        raise JudgeConfigError(unset)
    key = os.environ.get(config.api_key_env, "").strip() if config.api_key_env else None
    backoff = float(settings.STUDIO_JUDGE_BACKOFF_S)
    return OpenAICompatibleBackend(
        base_url=config.base_url or None, model=config.model, api_key=key, json_mode=config.json_mode,
        timeout=float(settings.STUDIO_JUDGE_TIMEOUT_S), max_retries=int(settings.STUDIO_JUDGE_MAX_RETRIES),
        temperature=config.temperature, backoff_base=backoff, backoff_max=max(backoff, min(30.0, backoff * 30)),
        max_tokens=int(config.max_tokens) if config.max_tokens else None,
    )


def key_variable_unset(api_key_env: str) -> str | None:
    """What is wrong with a configuration's key variable as this process sees it: None when no
    variable is named (a local server without a key) or it holds a non-blank value; else the
    sentence ``the environment variable NAME (the judge's API key) is not set``. The judge's form
    warns with it on save; :func:`backend_for` refuses with it."""
    if api_key_env and not os.environ.get(api_key_env, "").strip():
        return f"the environment variable {api_key_env} (the judge's API key) is not set"
    return None


def _config_parameters(config: JudgeConfig) -> dict[str, Any]:
    """Provenance and cache parameters of a configuration (no secret): what decides the answer,
    the answer cap and the context size (which decides what is trimmed) included."""
    return {
        "model": config.model, "base_url": config.base_url, "json_mode": config.json_mode,
        "temperature": config.temperature, "max_reasks": int(settings.STUDIO_JUDGE_MAX_REASKS),
        "max_tokens": int(config.max_tokens or 0), "context_tokens": int(config.context_tokens or 0),
    }


@transaction.atomic
def pause_config(config: JudgeConfig, reason: str) -> JudgeConfig:
    """Pause ``config`` with ``reason`` shown to maintainers. The key's value, when it is in the
    environment, is redacted from the text (the backend never puts it there; this is a second guard)."""
    secret = os.environ.get(config.api_key_env) if config.api_key_env else None
    config.paused = True
    config.paused_reason = _redact(str(reason), secret)[:2000]
    config.save(update_fields=["paused", "paused_reason"])
    return config


@transaction.atomic
def save_judge_config(user, *, name: str, base_url: str, model: str, json_mode: str = "json_object",
                      api_key_env: str = "", temperature: float = 0.0, max_concurrency: int = 2,
                      cost_per_1k_in: float = 0.0, cost_per_1k_out: float = 0.0,
                      max_tokens: int = DEFAULT_MAX_TOKENS, context_tokens: int = DEFAULT_CONTEXT_TOKENS,
                      instance: JudgeConfig | None = None) -> JudgeConfig:
    """Create (or update ``instance``) a judge configuration; saving resumes a paused one.

    ``max_tokens`` caps each answer (sent as ``max_tokens``; 16–32768); ``context_tokens`` is the
    endpoint's context size (0: not checked; else at least ``max_tokens`` + 1024), to which prompts
    are trimmed (:func:`fitted_prompt`). Updating an instance so that what the judge is sent changes
    (model, endpoint, JSON mode, temperature, max tokens, context size) bumps its ``version``, which
    names its verdicts from then on (:func:`judge_display_name`).

    ``api_key_env`` is the *name* of an environment variable (letters, digits, underscores); a
    value that looks like a key is refused so a key is never stored; the endpoint's host and the
    variable must be allowed by the settings (:func:`egress_problem`). Raises ``ValueError``
    naming the field.
    """
    require(user, Action.JUDGE_CONFIGURE)
    name, model, base_url, api_key_env = name.strip(), model.strip(), base_url.strip(), api_key_env.strip()
    if not name:
        raise InvalidInput("name: required")
    if not model:
        raise InvalidInput("model: required")
    if base_url and not base_url.startswith(("http://", "https://")):
        raise InvalidInput("base_url: must start with http:// or https://")
    if json_mode not in JSON_MODES:
        raise InvalidInput(f"json_mode: one of {', '.join(JSON_MODES)}")
    if not (16 <= int(max_tokens) <= 32768):
        raise InvalidInput("max_tokens: between 16 and 32768")
    if int(context_tokens) and int(context_tokens) < int(max_tokens) + 1024:
        raise InvalidInput(f"context_tokens: 0 (not checked) or at least max_tokens + 1024 = {int(max_tokens) + 1024}")
    if api_key_env and not all(c.isalnum() or c == "_" for c in api_key_env):
        raise InvalidInput("api_key_env: the name of an environment variable (A-Z, 0-9, _), never the key itself")
    if api_key_env.lower().startswith(("sk-", "sk_", "pk-", "rk-")) or (len(api_key_env) > 40 and not api_key_env.isupper()):
        raise InvalidInput("api_key_env: this looks like a key; give the name of the variable that holds it")
    problem = egress_problem(base_url, api_key_env)
    if problem:
        raise InvalidInput(problem)
    if not (1 <= int(max_concurrency) <= 32):
        raise InvalidInput("max_concurrency: between 1 and 32")
    if not (0.0 <= float(temperature) <= 2.0):
        raise InvalidInput("temperature: between 0 and 2")
    if float(cost_per_1k_in) < 0 or float(cost_per_1k_out) < 0:
        raise InvalidInput("cost_per_1k_in / cost_per_1k_out: not negative")
    if JudgeConfig.objects.filter(name=name).exclude(pk=getattr(instance, "pk", None)).exists():
        raise InvalidInput(f"name: a judge configuration named {name!r} exists")
    cfg = instance or JudgeConfig()
    before = _config_parameters(cfg) if cfg.pk else None
    cfg.name, cfg.base_url, cfg.model, cfg.json_mode, cfg.api_key_env = name, base_url, model, json_mode, api_key_env
    cfg.temperature, cfg.max_concurrency = float(temperature), int(max_concurrency)
    cfg.max_tokens, cfg.context_tokens = int(max_tokens), int(context_tokens)
    if before is not None and _config_parameters(cfg) != before:
        cfg.version = (cfg.version or 1) + 1
    cfg.cost_per_1k_in, cfg.cost_per_1k_out = float(cost_per_1k_in), float(cost_per_1k_out)
    cfg.paused, cfg.paused_reason = False, ""
    cfg.save()
    return cfg


@transaction.atomic
def resume_config(user, config: JudgeConfig) -> JudgeConfig:
    """Clear the pause of ``config`` (after the key or endpoint was fixed)."""
    require(user, Action.JUDGE_CONFIGURE)
    config.paused, config.paused_reason = False, ""
    config.save(update_fields=["paused", "paused_reason"])
    return config


# --------------------------------------------------------------------------------------------
# Inputs of a record
# --------------------------------------------------------------------------------------------


def _catalogue() -> dict[str, dict]:
    """The benchmark's tool catalogue by dotted name ({} when no catalogue file is found)."""
    return catalogue_by_name()


def record_inputs(record: RunRecord) -> dict[str, Any]:
    """What a judge sees of a record: ``{query, gold_tools, gold, predicted, answer}``.

    Gold comes from the snapshot taken at import (``record.gold``); for records imported before
    it existed, from the record's studio task (head revision, newest succeeded replay), else from
    the step match table (gold calls and arguments, no observations; the query is then unknown).
    """
    gold = dict(record.gold or {})
    if not gold and record.task_id:
        rev = record.task.head
        replay = latest_successful_replay(record.task)
        gold = {"question": rev.question, "tools": rev.tools,
                "trajectory": (replay.filled_trajectory if replay else None) or rev.trajectory}
    if not gold.get("trajectory") and record.step_matches:
        gold.setdefault("trajectory", [
            {"call": m.get("gold_call"), "args": {a.get("name"): a.get("gold") for a in m.get("args") or []}}
            for m in record.step_matches if m.get("gold_call")
        ])
    return {
        "query": gold.get("question") or "",
        "gold_tools": gold.get("tools") or [],
        "gold": list(gold.get("trajectory") or []),
        "predicted": list(record.trajectory or []),
        "answer": record.predicted_answer,
    }


def _tool_names(steps: Iterable[Any]) -> list[str]:
    out: list[str] = []
    for s in steps or []:
        if isinstance(s, str):
            name = normalize_tool_name(s)
        elif isinstance(s, dict):
            name = normalize_tool_name(s.get("call") or s.get("name") or s.get("tool") or "")
        else:
            continue
        if name and name not in out:
            out.append(name)
    return out


def available_tools(inputs: dict[str, Any]) -> list[Any]:
    """Tools shown to the judge: catalogue entries of every tool the gold or the prediction names
    that the catalogue knows, plus gold tool names it does not know (bare). A predicted tool that
    is in neither therefore shows as missing, which is what E6 asks the judge to notice."""
    cat = _catalogue()
    names = _tool_names(inputs["gold_tools"]) + _tool_names(inputs["gold"])
    names += [n for n in tool_sequence(inputs["predicted"]) if n in cat]
    out, seen = [], set()
    for n in names:
        if n in seen:
            continue
        seen.add(n)
        out.append(cat.get(n, n))
    return out


def cut_index(n_steps: int, cut: str) -> int:
    """Index of the first predicted step after the cut: ``floor(share · n + 0.5)`` clamped to
    [1, n − 1] (judge.md: early 25 %, middle 50 %, late 75 %; at least 1, at most n − 1).

    Worked: n = 4 → early 1, middle 2, late 3; n = 3 → 1, 2, 2. Raises ``JudgeInputError`` for
    n < 2 (no cut leaves a step on both sides) or an unknown cut name.
    """
    if cut not in CUTS:
        raise JudgeInputError(f"cut: {cut!r} is not one of {', '.join(CUTS)}")
    if n_steps < 2:
        raise JudgeInputError(f"step-wise needs at least 2 predicted steps; this trajectory has {n_steps}")
    return min(n_steps - 1, max(1, math.floor(CUTS[cut] * n_steps + 0.5)))


def protocol_label(protocol: str, cut: str | None = None, n_next: int | None = None) -> str:
    """``holistic`` or ``stepwise-<cut>-<n>`` (what ``Verdict.protocol`` stores)."""
    return "holistic" if protocol == "holistic" else f"stepwise-{cut}-{n_next}"


@dataclass
class PreparedJudgement:
    """A rendered prompt ready to be sent, with its cache key and provenance."""

    record_id: int
    protocol: str  # label: holistic | stepwise-<cut>-<n>
    prompt: str
    version: str
    cache_key: str
    meta: dict[str, Any] = field(default_factory=dict)


def _sha(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, ensure_ascii=False, default=str).encode("utf-8")).hexdigest()


def cache_key(version: str, params: dict[str, Any], inputs: dict[str, Any]) -> str:
    """sha256 (hex) of ``{prompt fingerprint, prompt version, model parameters, inputs hash}``.

    The fingerprint changes with the template and the E1–E6 text it embeds; ``params`` holds the
    model, endpoint, JSON mode, temperature and re-ask bound; ``inputs`` every value rendered into
    the prompt (query, tools, gold, prediction, answer, protocol and cut).
    """
    return _sha({"fingerprint": prompt_fingerprint(version), "version": version, "params": params,
                 "inputs": _sha(inputs)})


def prepare_judgement(config: JudgeConfig, record: RunRecord, protocol: str = "holistic", *, cut: str = "middle",
                      n_next: int = 1, blind: bool = False) -> PreparedJudgement:
    """Render the prompt of one judgement of ``record`` (no call, no write).

    A record that is a case of the benchmark's step-wise protocol (``record.gold["stepwise"]``, see
    :mod:`evaluation.services.stepwise`) is judged under that protocol whatever ``protocol`` says:
    the expert prefix, the expected steps and the planner's prediction (``stepwise_v2``, or
    ``stepwise_blind_v1`` when ``blind``); its label is ``stepwise-gold-<position>-<k>``.

    Holistic: the whole predicted trajectory and answer against the gold trajectory (or without
    it when ``blind``). Step-wise: the predicted trajectory is cut at :func:`cut_index`; the judge
    sees the steps before the cut with their observations, the agent's next ``n_next`` steps and
    the gold steps from the gold step matched to the first of them (``record.step_matches``; by
    position when unmatched). Raises ``JudgeInputError`` for a bad protocol, cut or horizon.
    """
    if protocol not in PROTOCOLS:
        raise JudgeInputError(f"protocol: {protocol!r} is not one of {', '.join(PROTOCOLS)}")
    inputs = record_inputs(record)
    tools = available_tools(inputs)
    params = _config_parameters(config)
    case = (record.gold or {}).get("stepwise")
    if case:  # a step-wise case of the benchmark's protocol is judged under its own protocol only
        predicted = record.trajectory if record.trajectory else record.predicted_answer

        def render(obs: int) -> tuple[str, str]:
            return render_stepwise_prompt(inputs["query"], tools, case["prefix"], case["expected"], predicted,
                                          version=DEFAULT_STEPWISE_BLIND_VERSION if blind else DEFAULT_STEPWISE_GOLD_VERSION,
                                          max_obs_chars=obs)
        label = case["protocol"]
        meta = {"position": case["position"], "n_next": case["horizon"], "cut_index": case["cut_index"], "blind": blind}
        key_inputs = {"query": inputs["query"], "tools": tools, "prefix": case["prefix"], "reference": case["expected"],
                      "predicted": predicted, "protocol": label, "blind": blind}
    elif protocol == "holistic":
        def render(obs: int) -> tuple[str, str]:
            return render_holistic_prompt(inputs["query"], tools, inputs["gold"], inputs["predicted"],
                                          inputs["answer"], blind=blind, max_obs_chars=obs)
        label = "holistic"
        meta: dict[str, Any] = {"blind": blind}
        key_inputs = {**inputs, "tools": tools, "protocol": label, "blind": blind}
    else:
        if n_next not in HORIZONS:
            raise JudgeInputError(f"n_next: {n_next!r} is not one of 1, 2, 3")
        pred = inputs["predicted"]
        k = cut_index(len(pred), cut)
        g = k
        for m in record.step_matches or []:
            if m.get("pred_raw_index", m.get("pred_index")) == k and m.get("gold_raw_index", m.get("gold_index")) is not None:
                g = int(m.get("gold_raw_index", m.get("gold_index")))
                break
        predicted_steps = pred[k:k + n_next]
        reference = inputs["gold"][g:g + n_next]
        def render(obs: int) -> tuple[str, str]:
            return render_stepwise_prompt(inputs["query"], tools, pred[:k], reference, predicted_steps, max_obs_chars=obs)
        label = protocol_label("stepwise", cut, n_next)
        meta = {"cut": cut, "cut_index": k, "gold_index": g, "n_next": n_next, "n_predicted": len(predicted_steps)}
        key_inputs = {"query": inputs["query"], "tools": tools, "prefix": pred[:k], "reference": reference,
                      "predicted": predicted_steps, "protocol": label}
    prompt, version, trimmed = fitted_prompt(config, render)
    if trimmed:
        meta["trimmed"] = trimmed
    return PreparedJudgement(record.pk, label, prompt, version, cache_key(version, params, key_inputs), meta)


# --------------------------------------------------------------------------------------------
# Calls and their records
# --------------------------------------------------------------------------------------------


#: The reading every stored judge verdict is made under (``Verdict.is_correct``, flags, grade): the
#: studio's, whose invariants the queue, adjudication and leaderboard rely on.  The apb reading is
#: computed from the stored raw answers on demand (``evaluation.selectors.judge_report``), so a
#: judge configuration or job needs no reading of its own and a change of reading never calls a judge.
STORED_READING = "studio"

#: Between the answers of a failed judgement in its ``Verdict.raw`` (every answer is kept, the
#: first one first; the apb reading re-reads the first, as the benchmark never re-asks).
RE_ASK_SEPARATOR = "\n\n----- re-ask -----\n\n"


def judge_display_name(config: JudgeConfig, version: str) -> str:
    """``Verdict.judge_name``: ``<configuration name> v<configuration version>@<prompt version>``,
    e.g. ``local-json v2@holistic_v2``: unique to the configuration (names are unique, the version
    changes with what it sends), so two configurations of one model (say two JSON modes) stay two
    judges in the report, its CSV and the agreement tables. The model is the configuration's."""
    return f"{config.name} v{config.version}@{version}"


def cached_verdict(prep: PreparedJudgement) -> Verdict | None:
    """The verdict of an earlier successful call with the same cache key, or None.

    The cache key holds the inputs, not the record: another record with the same inputs (the
    same agent run imported twice) gets its own copy of the verdict, parsed from the stored raw
    text, and so does a record whose verdict row was deleted; neither makes a call."""
    call = JudgeCall.objects.filter(cache_key=prep.cache_key, status="ok").select_related("verdict", "config").first()
    if call is None:
        return None
    if call.verdict is not None and call.verdict.record_id == prep.record_id:
        return call.verdict
    raw = (call.raw_texts or [""])[-1]
    copy = Verdict.objects.filter(record_id=prep.record_id, source=Verdict.Source.JUDGE, status="ok",
                                  judge_name=judge_display_name(call.config, prep.version),
                                  protocol=prep.protocol, prompt_version=prep.version, raw=raw).order_by("-id").first()
    if copy is not None:
        return copy
    setting, regime = protocol_setting(prep.protocol)
    outcome = JudgeOutcome(status="ok", verdict=parse_verdict(raw, setting=setting, regime=regime,
                                                              distractors_used=prep.meta.get("distractors_used")),
                           raw_texts=list(call.raw_texts))
    return _store(call.config, prep, outcome, count_call=False, repoint=call.verdict is None)


def setting_of(protocol: str) -> str:
    """The planning benchmark's setting a protocol label is judged in
    (:func:`evaluation.judge.verdict.protocol_setting`)."""
    return protocol_setting(protocol)[0]


def _call_backend(backend, prompt: str, protocol: str = "holistic", distractors_used=None) -> JudgeOutcome:
    """The HTTP part of a judgement (runs in pool threads; touches no database)."""
    setting, regime = protocol_setting(protocol)
    return judge_run(backend, prompt, max_reasks=int(settings.STUDIO_JUDGE_MAX_REASKS),
                     setting=setting, regime=regime, distractors_used=distractors_used)


def _setting_fields(v, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """The setting-specific columns of a stored verdict from a parsed one (and the prepared
    judgement's ``unsolvable_type``)."""
    details = {"e2_subtype": v.e2_subtype, "n_steps": v.n_steps, "step_grades": list(v.step_grades),
               "error_counts": dict(v.error_counts), "distractors_used": v.distractors_used,
               "unsolvable_type": (meta or {}).get("unsolvable_type")}
    return dict(setting=v.setting, regime=v.regime, judge_is_correct=v.model_is_correct, outcome=v.outcome or "",
                details={k: x for k, x in details.items() if x not in (None, [], {})})


def _reasoning_with_flags(v) -> str:
    text = v.reasoning or ""
    for c in getattr(v, "contradictions", []) or []:
        text += f"\n[contradiction: {c}]"
    return text.strip()


@transaction.atomic
def _store(config: JudgeConfig, prep: PreparedJudgement, outcome: JudgeOutcome, *, record_id: int | None = None,
           count_call: bool = True, repoint: bool = False) -> Verdict:
    """Store a judge outcome: a Verdict (ok or failed) and its JudgeCall (tokens, latency, cost)."""
    rid = record_id or prep.record_id
    name = judge_display_name(config, prep.version)
    trimmed = dict(prep.meta.get("trimmed") or {})
    if outcome.ok and outcome.verdict is not None:
        v = outcome.verdict
        verdict = Verdict.objects.create(
            record_id=rid, source=Verdict.Source.JUDGE, judge_name=name, status="ok", is_correct=v.is_correct,
            grade=v.grade, errors={c: bool(v.errors.get(c)) for c in E_CODES},
            reasons={c: r for c, r in (v.reasons or {}).items() if r and v.errors.get(c)},
            reasoning=_reasoning_with_flags(v), prompt=prep.prompt, raw=(outcome.raw_texts or [""])[-1],
            protocol=prep.protocol, prompt_version=prep.version, **_setting_fields(v, prep.meta),
        )
        if trimmed:
            verdict.details = {**verdict.details, "trimmed": trimmed}
            verdict.save(update_fields=["details"])
    else:
        verdict = Verdict.objects.create(
            record_id=rid, source=Verdict.Source.JUDGE, judge_name=name, status="failed", is_correct=None, grade=None,
            errors={}, reasons={}, reasoning=f"unreadable judge answer after {outcome.calls} call(s): {outcome.error}",
            prompt=prep.prompt, raw=RE_ASK_SEPARATOR.join(outcome.raw_texts), protocol=prep.protocol,
            prompt_version=prep.version, setting=protocol_setting(prep.protocol)[0],
            regime=protocol_setting(prep.protocol)[1], details={"trimmed": trimmed} if trimmed else {},
        )
    if count_call:
        cost = (outcome.tokens_in / 1000.0) * config.cost_per_1k_in + (outcome.tokens_out / 1000.0) * config.cost_per_1k_out
        JudgeCall.objects.update_or_create(cache_key=prep.cache_key, defaults=dict(
            config=config, record_id=rid, protocol=prep.protocol, prompt_version=prep.version, prompt=prep.prompt,
            status="ok" if verdict.status == "ok" else "failed", raw_texts=list(outcome.raw_texts),
            error=outcome.error or "", tokens_in=outcome.tokens_in, tokens_out=outcome.tokens_out,
            latency_s=outcome.latency_s, cost_usd=round(cost, 8), verdict=verdict, trimmed=trimmed,
            config_version=config.version,
        ))
    elif repoint:
        JudgeCall.objects.filter(cache_key=prep.cache_key).update(verdict=verdict)
    return verdict


@transaction.atomic
def _store_error(config: JudgeConfig, prep: PreparedJudgement, message: str) -> None:
    """A call that got no answer (transient or request error): kept as a JudgeCall with status
    ``error`` (not cached: a re-run calls again); no verdict."""
    JudgeCall.objects.update_or_create(cache_key=prep.cache_key, defaults=dict(
        config=config, record_id=prep.record_id, protocol=prep.protocol, prompt_version=prep.version,
        prompt=prep.prompt, status="error", raw_texts=[], error=message[:2000], verdict=None,
        trimmed=dict(prep.meta.get("trimmed") or {}), config_version=config.version,
    ))


def judge_record(config: JudgeConfig, record: RunRecord, protocol: str = "holistic", *, cut: str = "middle",
                 n_next: int = 1, blind: bool = False, backend=None) -> Verdict:
    """Judge one record and store the verdict (``source="judge"``); return it.

    A cache hit (same prompt fingerprint and version, model parameters and inputs; see
    :func:`cache_key`) returns the earlier verdict and makes no call. ``backend`` overrides the
    one built from ``config`` (tests). Raises :class:`JudgePaused` for a paused configuration,
    ``JudgeConfigError`` after pausing it, ``JudgeTransientError`` / ``JudgeRequestError`` when no
    answer came (nothing but an ``error`` JudgeCall is stored), ``JudgeInputError`` for a record
    the protocol cannot cut. A malformed answer returns a ``status="failed"`` verdict.
    """
    config.refresh_from_db(fields=["paused", "paused_reason"])
    if config.paused:
        raise JudgePaused(f"judge configuration {config.name!r} is paused: {config.paused_reason}")
    prep = prepare_judgement(config, record, protocol, cut=cut, n_next=n_next, blind=blind)
    hit = cached_verdict(prep)
    if hit is not None:
        return hit
    try:
        backend = backend or backend_for(config)
        outcome = _call_backend(backend, prep.prompt, prep.protocol)
    except JudgeConfigError as exc:
        pause_config(config, str(exc))
        raise
    except (JudgeTransientError, JudgeRequestError) as exc:
        _store_error(config, prep, str(exc))
        raise
    return _store(config, prep, outcome)


# --------------------------------------------------------------------------------------------
# The rule checker
# --------------------------------------------------------------------------------------------


def check_record_with_rules(record: RunRecord) -> Verdict:
    """The code checker's verdict of ``record`` (``source="code"``, ``judge_name="rule-checker"``,
    ``prompt_version=RULES_VERSION``); one per record and version (an existing one is returned).

    Known tools: the benchmark catalogue (``dora-tools.json``, with required parameters) plus the
    gold plan's tools; without a catalogue the E6/E5 checks are skipped (a gold-only list would
    call every valid alternative a hallucination).
    """
    existing = record.verdicts.filter(source=Verdict.Source.CODE, prompt_version=RULES_VERSION).first()
    if existing is not None:
        return existing
    inputs = record_inputs(record)
    cat = _catalogue()
    tools = None
    if cat:
        tools = dict(tool_specs_from_catalogue(cat.values()))
        for n in _tool_names(inputs["gold_tools"]) + _tool_names(inputs["gold"]):
            tools.setdefault(n, frozenset())
    rv = check_trajectory(inputs["predicted"], inputs["gold"] or None, tools)
    reasons: dict[str, list[str]] = {}
    for f in rv.findings:
        where = f"step {f.step}" if f.step is not None else "trajectory"
        reasons.setdefault(f.code, []).append(f"{where}: {f.message}")
    return Verdict.objects.create(
        record=record, source=Verdict.Source.CODE, judge_name=RULES_NAME, status="ok", is_correct=rv.is_correct,
        grade=rv.grade, errors={c: bool(rv.errors.get(c)) for c in E_CODES},
        reasons={c: "; ".join(v)[:1000] for c, v in reasons.items()}, reasoning=rv.reasoning or "",
        raw=json.dumps([f.model_dump() for f in rv.findings], ensure_ascii=False), protocol="holistic",
        prompt_version=RULES_VERSION,
    )


# --------------------------------------------------------------------------------------------
# Batches
# --------------------------------------------------------------------------------------------


def select_records(*, run_id: int | None = None, release: str | None = None, agent: str | None = None,
                   dimension: str | None = None, sample: int | None = None, seed: int = 0):
    """Records to judge: those of run ``run_id``, or of runs on release version ``release``,
    optionally of agent ``agent`` and dimension ``dimension``; ``sample``: a seeded random sample
    of that many (the same seed gives the same records). Raises ``ValueError`` naming the
    option when nothing matches."""
    qs = RunRecord.objects.all()
    if run_id is not None:
        qs = qs.filter(run_id=run_id)
    if release:
        qs = qs.filter(run__release__version=release)
    if agent:
        qs = qs.filter(run__agent__name=agent)
    if dimension:
        qs = qs.filter(dimension=dimension.lower())
    ids = list(qs.order_by("id").values_list("id", flat=True))
    if not ids:
        what = ", ".join(f"{k}={v}" for k, v in (("run", run_id), ("release", release), ("agent", agent),
                                                    ("dimension", dimension)) if v)
        raise InvalidInput(f"no run record matches {what or 'the selection'}")
    if sample is not None and 0 < sample < len(ids):
        ids = sorted(random.Random(seed).sample(ids, sample))
    return ids


@transaction.atomic
def start_judge_job(user, config: JudgeConfig, record_ids: Sequence[int], *, protocol: str = "holistic",
                    cuts: Sequence[str] = ("early", "middle", "late"), horizons: Sequence[int] = (1,),
                    blind: bool = False, with_code: bool = True, enqueue: bool = True) -> JudgeJob:
    """Create a judge job over ``record_ids`` and (``enqueue``) hand it to Celery after commit.

    ``user`` None means the command line (trusted); otherwise ``judge.run`` is required. Planned
    judgements: one per record (holistic) or one per record × cut × horizon (step-wise). Raises
    ``ValueError`` naming the option for an unknown protocol, cut or horizon, or no record, and
    :class:`JudgePaused` for a paused configuration.
    """
    if user is not None:
        require(user, Action.JUDGE_RUN)
    if config.paused:
        raise JudgePaused(f"judge configuration {config.name!r} is paused: {config.paused_reason}")
    if protocol not in PROTOCOLS:
        raise InvalidInput(f"protocol: {protocol!r} is not one of {', '.join(PROTOCOLS)}")
    bad = [c for c in cuts if c not in CUTS]
    if protocol == "stepwise" and (bad or not cuts):
        raise InvalidInput(f"cut: {', '.join(bad) or '(none)'} — use early, middle, late")
    badh = [h for h in horizons if h not in HORIZONS]
    if protocol == "stepwise" and (badh or not horizons):
        raise InvalidInput(f"next: {badh or '(none)'} — use 1, 2, 3")
    ids = list(dict.fromkeys(int(i) for i in record_ids))
    if not ids:
        raise InvalidInput("records: none selected")
    per = 1 if protocol == "holistic" else len(cuts) * len(horizons)
    job = JudgeJob.objects.create(
        config=config, created_by=user if user is not None and user.is_authenticated else None, protocol=protocol,
        cuts=list(cuts) if protocol == "stepwise" else [], horizons=[int(h) for h in horizons] if protocol == "stepwise" else [],
        blind=blind, with_code=with_code, record_ids=ids, total=len(ids) * per,
    )
    if enqueue:
        transaction.on_commit(lambda: dispatch_judge_job(job.pk))
    return job


def judge_runner() -> str:
    """How a started judge job runs: :func:`evaluation.background.job_runner` (setting
    ``STUDIO_JUDGE_RUNNER``: celery, thread — the embedded default, so no request waits for the
    judge — or inline)."""
    return job_runner()


#: the judge job's kind in :mod:`studio.background`
JOB_KIND = "judge-job"


def record_crash(job_id: int, exc: Exception) -> None:
    """A crashed job ends failed with the crash as its first error."""
    JudgeJob.objects.filter(pk=job_id).update(
        status=JudgeJob.Status.FAILED, finished_at=timezone.now(),
        errors=[{"record": None, "protocol": None, "error": f"the job crashed: {type(exc).__name__}: {exc}",
                 "kind": "crash"}])


def dispatch_judge_job(job_id: int):
    """Hand job ``job_id`` to its runner (:func:`evaluation.background.dispatch`) and return at
    once, except inline. Returns the started thread (``"thread"``), the Celery result
    (``"celery"``) or the finished job (``"inline"``)."""
    return dispatch(job_id, run_judge_job, judge_batch, record_crash, kind=JOB_KIND)


#: The tiny request of :func:`try_judge_config`.
CONFIG_TEST_PROMPT = ('This is a connection test of a judge configuration. Reply with only this JSON object: '
                      '{"ok": true}')


def try_judge_config(user, config: JudgeConfig, *, backend=None) -> dict[str, Any]:
    """Send one tiny request with ``config`` and report ``{ok, latency_s, model, json_mode,
    json_ok, answer, error}``: whether the endpoint answered, in how many seconds, which model it
    says it is, and whether the answer parses as a JSON object (that JSON mode works). Needs
    ``judge.configure``; stores nothing (no verdict, no cache entry, no pause)."""
    require(user, Action.JUDGE_CONFIGURE)
    out: dict[str, Any] = {"ok": False, "latency_s": None, "model": None, "json_mode": config.json_mode,
                           "json_ok": None, "answer": "", "error": ""}
    started = time.monotonic()
    try:
        backend = backend or backend_for(config)
        resp = backend.judge(CONFIG_TEST_PROMPT)
    except JudgeError as exc:
        out["latency_s"] = round(time.monotonic() - started, 3)
        out["error"] = f"{type(exc).__name__}: {exc}"
        return out
    out.update(ok=True, latency_s=round(resp.latency_s, 3), model=resp.model, answer=(resp.text or "")[:300])
    try:
        out["json_ok"] = isinstance(json.loads(resp.text), dict)
    except (TypeError, ValueError):
        out["json_ok"] = False
    return out


def _plan(job: JudgeJob) -> list[tuple[int, str, str | None, int | None]]:
    if job.protocol == "holistic":
        return [(rid, "holistic", None, None) for rid in job.record_ids]
    return [(rid, "stepwise", c, int(h)) for rid in job.record_ids for c in job.cuts for h in job.horizons]


def run_judge_job(job_id: int, *, progress: Callable[[JudgeJob], None] | None = None, backend=None) -> JudgeJob:
    """Run a judge job to its end; the job row shows the progress after every judgement. Only a
    queued job is run (or a running one whose worker is lost); any other is returned unchanged.

    Prompts are rendered and the cache consulted first (hits count as done without a call); the
    remaining calls run in a pool of ``config.max_concurrency`` threads (HTTP only), and each
    answer is stored as it arrives. A configuration error pauses the config, cancels the calls
    not yet started and ends the job ``paused``; transient or request errors are listed in
    ``job.errors`` and end it ``failed`` (re-run it: what succeeded is cached). Records that a
    step-wise cut cannot split are listed as skipped. ``progress(job)`` is called after each step.
    """
    job = None

    def claim() -> bool:
        # taken in one statement (of two deliveries of a queued job one wins); a running job is taken
        # again only when its worker is lost (Celery delivers a killed worker's job again); an ended
        # one is returned as it is (a second delivery of a job that a sweep had sent again)
        nonlocal job
        now = timezone.now()
        taken = JudgeJob.objects.filter(pk=job_id, status=JudgeJob.Status.QUEUED).update(
            status=JudgeJob.Status.RUNNING, started_at=now, heartbeat_at=now, worker=worker_tag())
        job = JudgeJob.objects.select_related("config").get(pk=job_id)
        return bool(taken) or (job.status == JudgeJob.Status.RUNNING and bool(worker_lost(
            JOB_KIND, job.pk, job.worker, job.heartbeat_at or job.started_at)))

    with job_running(JOB_KIND, job_id, lambda: JudgeJob.objects.filter(
            pk=job_id, status=JudgeJob.Status.RUNNING).update(heartbeat_at=timezone.now()), claim=claim) as claimed:
        if not claimed:
            return job
        return _run_judge_job(job, progress=progress, backend=backend)


def _run_judge_job(job: JudgeJob, *, progress, backend) -> JudgeJob:
    """:func:`run_judge_job`'s body, once the job is this worker's."""
    config = job.config
    job.status, job.started_at, job.done, job.n_ok, job.n_failed, job.n_cached, job.errors = (
        JudgeJob.Status.RUNNING, timezone.now(), 0, 0, 0, 0, [])
    job.cost_usd, job.heartbeat_at, job.worker = 0.0, job.started_at, worker_tag()
    job.save()
    records = {r.pk: r for r in RunRecord.objects.filter(pk__in=job.record_ids).select_related("task__head")}

    def tick(n_done: int = 1) -> None:
        job.done += n_done
        job.heartbeat_at = timezone.now()
        job.save(update_fields=["done", "n_ok", "n_failed", "n_cached", "errors", "cost_usd", "status", "heartbeat_at"])
        if progress:
            progress(job)

    config.refresh_from_db()
    if config.paused:
        job.errors.append({"record": None, "protocol": None, "error": f"configuration paused: {config.paused_reason}"})
        job.status, job.finished_at = JudgeJob.Status.PAUSED, timezone.now()
        job.save()
        announce_end(job)
        return job

    to_call: list[PreparedJudgement] = []
    for rid, protocol, cut, h in _plan(job):
        rec = records.get(rid)
        if rec is None:
            job.errors.append({"record": rid, "protocol": protocol, "error": "record no longer exists", "kind": "skipped"})
            tick()
            continue
        try:
            prep = prepare_judgement(config, rec, protocol, cut=cut or "middle", n_next=h or 1, blind=job.blind)
        except JudgeInputError as exc:
            job.errors.append({"record": rid, "protocol": protocol_label(protocol, cut, h), "error": str(exc), "kind": "skipped"})
            tick()
            continue
        if cached_verdict(prep) is not None:
            job.n_cached += 1
            job.n_ok += 1
            tick()
            continue
        to_call.append(prep)

    paused = False
    if to_call:
        try:
            backend = backend or backend_for(config)
        except JudgeConfigError as exc:
            pause_config(config, str(exc))
            paused = True
            job.errors.append({"record": None, "protocol": None, "error": config.paused_reason, "kind": "config"})
        if not paused:
            workers = max(1, min(int(config.max_concurrency or 1), 32))
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"judge-{job.pk}") as pool:
                futures = {pool.submit(_call_backend, backend, p.prompt, p.protocol): p for p in to_call}
                for fut in as_completed(futures):
                    prep = futures[fut]
                    try:
                        outcome = fut.result()
                    except CancelledError:
                        continue
                    except JudgeConfigError as exc:
                        if not paused:
                            paused = True
                            pause_config(config, str(exc))
                            job.errors.append({"record": prep.record_id, "protocol": prep.protocol,
                                               "error": config.paused_reason, "kind": "config"})
                            for other in futures:
                                other.cancel()
                        continue
                    except (JudgeTransientError, JudgeRequestError) as exc:
                        _store_error(config, prep, str(exc))
                        job.errors.append({"record": prep.record_id, "protocol": prep.protocol, "error": str(exc),
                                           "kind": "transient" if isinstance(exc, JudgeTransientError) else "request"})
                        tick()
                        continue
                    verdict = _store(config, prep, outcome)
                    job.cost_usd += JudgeCall.objects.filter(cache_key=prep.cache_key).values_list("cost_usd", flat=True).first() or 0.0
                    if verdict.status == "ok":
                        job.n_ok += 1
                    else:
                        job.n_failed += 1
                    tick()
    if job.with_code:
        for rid in job.record_ids:
            if rid in records:
                check_record_with_rules(records[rid])
    hard = [e for e in job.errors if e.get("kind") in ("transient", "request")]
    job.status = JudgeJob.Status.PAUSED if paused else (JudgeJob.Status.FAILED if hard else JudgeJob.Status.DONE)
    job.finished_at = timezone.now()
    job.save()
    announce_end(job)
    return job


#: the event a judge job's end emits, by its status (a job still queued or running emits none)
_END_EVENTS = {JudgeJob.Status.DONE: "judge.finished", JudgeJob.Status.FAILED: "judge.failed",
               JudgeJob.Status.PAUSED: "judge.paused"}


def announce_end(job: JudgeJob) -> None:
    """Emit ``judge.finished`` (done), ``judge.failed`` (failed, also by the sweep) or
    ``judge.paused`` (its configuration paused: the payload's ``reason`` is the configuration's
    ``paused_reason``, the key's value already redacted by :func:`pause_config`) for ``job``; who
    started it hears of it (``docs/notifications.md``). Nothing for any other status."""
    event_type = _END_EVENTS.get(job.status)
    if event_type is None:
        return
    payload = {"job_id": job.pk, "status": job.status, "n_ok": job.n_ok, "n_failed": job.n_failed,
               "config": job.config.name, "actor": job.created_by.get_username() if job.created_by_id else None}
    if event_type == "judge.paused":
        payload["reason"] = job.config.paused_reason
    emit(event_type, payload, user=job.created_by)


def fail_stuck_judge_jobs(timeout_s: float | None = STUCK_AFTER_S) -> list[int]:
    """Mark ``failed`` the jobs left ``running`` whose worker is lost
    (:func:`studio.background.worker_lost`: its process on this host is gone, or no heartbeat for
    ``timeout_s`` seconds, default ``STUDIO_JOB_STALE_AFTER_S`` when None); returns their ids.
    Re-running the selection (``manage.py judge`` again, or :func:`rerun_job`) calls only what has
    no cached verdict. A Celery worker's loss needs no help: the task is acknowledged late and
    runs the same job again."""
    return [row["id"] for row in sweep_judge_jobs(timeout_s, queued=False)]


def sweep_judge_jobs(stale_after: float | None = None, *, queued: bool = True) -> list[dict]:
    """The sweeper of judge jobs (:func:`studio.background.register_sweeper`): a running job whose
    worker is lost ends ``failed`` with a ``worker_lost`` error; a queued one that no worker took
    (no heartbeat since it was queued) is sent again (celery, thread) or, inline, failed
    (``queued`` False: leave queued jobs alone). Returns ``{kind, id, action, why, removed}``."""
    now = timezone.now()
    states = [JudgeJob.Status.RUNNING] + ([JudgeJob.Status.QUEUED] if queued else [])
    out = []
    for job in JudgeJob.objects.filter(status__in=states).order_by("id"):
        why = worker_lost(JOB_KIND, job.pk, job.worker, job.heartbeat_at or job.started_at or job.created_at,
                          now=now, stale_after=stale_after)
        if not why:
            continue
        if job.status == JudgeJob.Status.QUEUED and job_runner() != "inline":
            if JudgeJob.objects.filter(pk=job.pk, status=JudgeJob.Status.QUEUED).update(heartbeat_at=timezone.now()):
                dispatch_judge_job(job.pk)
                out.append({"kind": JOB_KIND, "id": job.pk, "action": "requeued", "why": why, "removed": []})
            continue
        with transaction.atomic():
            locked = JudgeJob.objects.select_for_update().get(pk=job.pk)
            if locked.status != job.status or locked.worker != job.worker:
                continue
            locked.errors = list(locked.errors or []) + [{
                "record": None, "protocol": None, "kind": "worker_lost",
                "error": f"the job's worker was lost ({why}); run the job again"}]
            locked.status, locked.finished_at = JudgeJob.Status.FAILED, timezone.now()
            locked.save(update_fields=["errors", "status", "finished_at"])
            announce_end(locked)
        out.append({"kind": JOB_KIND, "id": job.pk, "action": "failed", "why": why, "removed": []})
    return out


def rerun_job(user, job: JudgeJob, *, enqueue: bool = True) -> JudgeJob:
    """A new job with the same selection and protocol (cached judgements are not called again)."""
    return start_judge_job(user, job.config, job.record_ids, protocol=job.protocol, cuts=job.cuts or ("middle",),
                           horizons=job.horizons or (1,), blind=job.blind, with_code=job.with_code, enqueue=enqueue)


# --------------------------------------------------------------------------------------------
# Fitting prompts into the endpoint's context
# --------------------------------------------------------------------------------------------

def fitted_prompt(config: JudgeConfig, render: Callable[[int], tuple[str, str]]) -> tuple[str, str, dict[str, Any]]:
    """``(prompt, prompt version, trimmed)``: ``render(max_obs_chars) -> (prompt, version)`` fitted
    into ``config``'s context with room for its ``max_tokens`` answer and a re-ask
    (:func:`evaluation.judge.fit.fit_prompt`; ``trimmed`` says what was cut, ``{}`` when nothing).
    Raises :class:`JudgeInputError` when the prompt cannot fit (the message gives the numbers)."""
    versions: list[str] = []

    def text(obs: int) -> str:
        prompt, version = render(obs)
        versions.append(version)
        return prompt

    try:
        prompt, trimmed = fit_prompt(text, int(config.context_tokens or 0), int(config.max_tokens or 0))
    except PromptTooLong as exc:
        raise JudgeInputError(f"context: {exc}") from None
    return prompt, versions[-1], trimmed
