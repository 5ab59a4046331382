"""Judging a record in one of the planning benchmark's robustness settings (tool-extraneous,
tool-broken, unsolvable), fed by a case that a robustness variant provides.

The variants themselves are another issue; this is the judging end: render the setting's prompt
(:func:`evaluation.judge.prompts.render_prompt`), call the judge through the same cache, pause and
storage path as :func:`evaluation.services.judge.judge_record`, read the answer in the setting
(:func:`evaluation.judge.verdict.parse_verdict`), and store the verdict with its setting, regime,
the judge's own is_correct, the tool-broken outcome, the unsolvability type and the distractor
calls (the rule-based count, as the benchmark's ``used_redundant_tools``).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from evaluation.judge import JudgeConfigError, JudgeRequestError, JudgeTransientError
from evaluation.judge.prompts import PromptTemplateError, render_prompt
from evaluation.judge.verdict import (
    distractor_calls,
    normalize_setting,
    setting_protocol,
)
from evaluation.models import JudgeConfig, RunRecord, Verdict
from evaluation.services.judge import (
    JudgeInputError,
    JudgePaused,
    PreparedJudgement,
    _call_backend,
    _config_parameters,
    _store,
    _store_error,
    available_tools,
    backend_for,
    cache_key,
    cached_verdict,
    fitted_prompt,
    pause_config,
    record_inputs,
)

ROBUSTNESS_SETTINGS = ("tool-extraneous", "tool-broken", "unsolvable")


def prepare_setting_judgement(config: JudgeConfig, record: RunRecord, setting: str, case: Mapping[str, Any], *,
                              regime: str | None = None) -> PreparedJudgement:
    """Render the judgement of ``record`` in a robustness ``setting`` from ``case`` (no call, no write).

    ``case`` holds the setting's inputs (see :func:`evaluation.judge.prompts.render_prompt`):
    ``distractors`` for tool-extraneous, ``prefix_trajectory`` / ``failing_step_index`` /
    ``replacement_tool`` / ``predicted_steps`` for tool-broken, ``unsolvable_type`` for
    unsolvable.  ``query``, ``tools``, ``gold_trajectory``, ``predicted_trajectory`` and
    ``predicted_answer`` default to the record's.  Raises ``JudgeInputError`` naming the missing
    or bad input.
    """
    try:
        setting = normalize_setting(setting)
    except ValueError as exc:
        raise JudgeInputError(f"setting: {exc}") from None
    if setting not in ROBUSTNESS_SETTINGS:
        raise JudgeInputError(f"setting: {setting} is judged by judge_record, not as a robustness case")
    inputs = record_inputs(record)
    full = {"query": inputs["query"], "tools": available_tools(inputs), "gold_trajectory": inputs["gold"],
            "predicted_trajectory": inputs["predicted"], "predicted_answer": inputs["answer"], **dict(case)}
    try:
        label = setting_protocol(setting, regime)
        prompt, version, trimmed = fitted_prompt(
            config, lambda obs: render_prompt(setting, full, regime=regime, max_obs_chars=obs))
    except (PromptTemplateError, ValueError) as exc:
        raise JudgeInputError(str(exc)) from None
    meta: dict[str, Any] = {"setting": setting}
    if trimmed:
        meta["trimmed"] = trimmed
    if setting == "tool-extraneous":
        predicted = full.get("predicted_steps") if label.endswith("-s") else full.get("predicted_trajectory")
        meta["distractors_used"] = distractor_calls(predicted, [d if isinstance(d, str) else d.get("name")
                                                               for d in full["distractors"]])
    if setting == "unsolvable":
        meta["unsolvable_type"] = full["unsolvable_type"]
    key_inputs = {**{k: v for k, v in full.items()}, "protocol": label}
    return PreparedJudgement(record.pk, label, prompt, version,
                             cache_key(version, _config_parameters(config), key_inputs), meta)


def judge_setting_case(config: JudgeConfig, record: RunRecord, setting: str, case: Mapping[str, Any], *,
                       regime: str | None = None, backend=None) -> Verdict:
    """Judge ``record`` in a robustness ``setting`` and store the verdict; return it.

    Same contract as :func:`evaluation.services.judge.judge_record` (cache hits make no call, a
    paused configuration raises ``JudgePaused``, a configuration error pauses it, no answer
    stores an ``error`` call, a malformed answer after the re-ask a ``failed`` verdict).
    """
    config.refresh_from_db(fields=["paused", "paused_reason"])
    if config.paused:
        raise JudgePaused(f"judge configuration {config.name!r} is paused: {config.paused_reason}")
    prep = prepare_setting_judgement(config, record, setting, case, regime=regime)
    hit = cached_verdict(prep)
    if hit is not None:
        return hit
    try:
        backend = backend or backend_for(config)
        outcome = _call_backend(backend, prep.prompt, prep.protocol, prep.meta.get("distractors_used"))
    except JudgeConfigError as exc:
        pause_config(config, str(exc))
        raise
    except (JudgeTransientError, JudgeRequestError) as exc:
        _store_error(config, prep, str(exc))
        raise
    return _store(config, prep, outcome)
