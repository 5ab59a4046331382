"""Judge core: verdict record and parser, prompt templates, LLM backends, runner, rule checks.

Pure Python (no Django imports); the Django side stores what these functions return.
"""
from .backends import (
    JudgeBackend,
    JudgeConfigError,
    JudgeError,
    JudgeRequestError,
    JudgeResponse,
    JudgeTransientError,
    OpenAICompatibleBackend,
    StudioJudgeConfig,
)
from .prompts import (
    load_template,
    prompt_fingerprint,
    render_extraneous_prompt,
    render_holistic_prompt,
    render_prompt,
    render_stepwise_prompt,
    render_tool_broken_prompt,
    render_unsolvable_prompt,
)
from .rules import RuleFinding, RuleVerdict, check_trajectory, normalize_tool_name, tool_specs_from_catalogue
from .runner import JudgeOutcome, judge_run
from .verdict import (
    E_CODES,
    E_DEFINITIONS,
    FLAT_KEYS,
    GRADES,
    KNOWN_DIFFERENCES,
    READINGS,
    SETTINGS,
    TOOL_BROKEN_OUTCOMES,
    UNSOLVABLE_TYPES,
    VERDICT_JSON_SCHEMA,
    Verdict,
    VerdictParseError,
    distractor_calls,
    grade_from_flags,
    normalize_reading,
    parse_verdict,
    parse_verdict_apb,
    snap_grade,
)

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
