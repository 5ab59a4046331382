"""Judge core: verdict record and parser, prompt templates, LLM backends, runner, rule checks.

Pure Python (no Django imports); the Django side stores what these functions return.

The names below are resolved when first used (``__getattr__``): ``from evaluation.judge import
parse_verdict`` imports ``verdict`` then, while an import of one submodule (``evaluation.judge.runner``
for ``manage.py judge --help``'s default) loads only what that submodule needs.
"""
from __future__ import annotations

import importlib

#: each name re-exported here and the submodule that defines it
_SOURCES: dict[str, str] = {
    **dict.fromkeys(("JudgeBackend", "JudgeConfigError", "JudgeError", "JudgeRequestError", "JudgeResponse", "JudgeTransientError", "OpenAICompatibleBackend", "StudioJudgeConfig"), "backends"),
    **dict.fromkeys(("load_template", "prompt_fingerprint", "render_extraneous_prompt", "render_holistic_prompt", "render_prompt", "render_stepwise_prompt", "render_tool_broken_prompt", "render_unsolvable_prompt"), "prompts"),
    **dict.fromkeys(("RuleFinding", "RuleVerdict", "check_trajectory", "normalize_tool_name", "tool_specs_from_catalogue"), "rules"),
    **dict.fromkeys(("JudgeOutcome", "judge_run"), "runner"),
    **dict.fromkeys(("E_CODES", "E_DEFINITIONS", "FLAT_KEYS", "GRADES", "KNOWN_DIFFERENCES", "READINGS", "SETTINGS", "TOOL_BROKEN_OUTCOMES", "UNSOLVABLE_TYPES", "VERDICT_JSON_SCHEMA", "Verdict", "VerdictParseError", "distractor_calls", "grade_from_flags", "normalize_reading", "parse_verdict", "parse_verdict_apb", "snap_grade"), "verdict"),
}


def __getattr__(name: str):
    module = _SOURCES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # resolved once
    return value


__all__ = [
    "E_CODES", "E_DEFINITIONS", "FLAT_KEYS", "GRADES", "VERDICT_JSON_SCHEMA",
    "Verdict", "VerdictParseError", "grade_from_flags", "parse_verdict", "snap_grade",
    "KNOWN_DIFFERENCES", "READINGS", "SETTINGS", "TOOL_BROKEN_OUTCOMES", "UNSOLVABLE_TYPES", "distractor_calls",
    "normalize_reading", "parse_verdict_apb",
    "load_template", "prompt_fingerprint", "render_holistic_prompt", "render_stepwise_prompt",
    "render_prompt", "render_extraneous_prompt", "render_tool_broken_prompt", "render_unsolvable_prompt",
    "JudgeBackend", "JudgeResponse", "JudgeError", "JudgeConfigError", "JudgeRequestError",
    "JudgeTransientError", "OpenAICompatibleBackend", "StudioJudgeConfig",
    "JudgeOutcome", "judge_run",
    "RuleFinding", "RuleVerdict", "check_trajectory", "normalize_tool_name", "tool_specs_from_catalogue",
]
