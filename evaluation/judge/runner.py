"""Run one judgement: call the backend, parse, re-ask once on a malformed answer.

A malformed answer is never turned into a default verdict: after the bounded re-ask the
outcome is ``status="failed"`` with every raw text kept.  Backend errors
(:class:`~evaluation.judge.backends.JudgeConfigError`, ``JudgeRequestError``,
``JudgeTransientError``) propagate to the caller, which decides whether to pause the
configuration or retry the job later.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .backends import JudgeBackend, JudgeResponse
from .verdict import Verdict, VerdictParseError, normalize_setting, parse_verdict

CORRECTION_TEMPLATE = (
    "Your previous answer could not be read as a verdict ({reason}). Reply again with only one "
    "JSON object, with no markdown fences and no text before or after it, with exactly these "
    'keys: "errors" (E1..E6, each {{"present": true|false, "reason": "..."}}), "grade" (one of '
    '0.0, 0.2, 0.4, 0.6, 0.8, 1.0), "is_correct" (true only when no error is present) and '
    '"reasoning".'
)

#: The re-ask for the five-class tool-broken judge (tool_broken_v1 asks for this object).
TOOL_BROKEN_CORRECTION_TEMPLATE = (
    "Your previous answer could not be read as a classification ({reason}). Reply again with only one "
    "JSON object, with no markdown fences and no text before or after it, with exactly these keys: "
    '"category" (1 replacement, 2 alternative, 3 retry, 4 refusal, 5 other), "category_name", '
    '"is_correct" (true only for 1 and 2) and "reason".'
)
#: The re-ask for the unsolvable judge: the pass/fail must be explicit.
UNSOLVABLE_CORRECTION_TEMPLATE = (
    "Your previous answer could not be read as a verdict ({reason}). Reply again with only one JSON "
    "object, with no markdown fences and no text before or after it, with exactly these keys: "
    '"is_correct" (true for PASS: the agent refused, asked, or explained why the task cannot be done; '
    'false for FAIL), "grade" (one of 0.0, 0.2, 0.4, 0.6, 0.8, 1.0), "errors" (E1..E6, each '
    '{{"present": true|false, "reason": "..."}}) and "reasoning".'
)


def correction_for(setting: str) -> str:
    """The re-ask template for a setting (its answer format); ``{reason}`` is filled in."""
    setting = normalize_setting(setting)
    return {"tool-broken": TOOL_BROKEN_CORRECTION_TEMPLATE,
            "unsolvable": UNSOLVABLE_CORRECTION_TEMPLATE}.get(setting, CORRECTION_TEMPLATE)


@dataclass
class JudgeOutcome:
    status: str  # "ok" | "failed"
    verdict: Verdict | None
    raw_texts: list[str] = field(default_factory=list)
    tokens_in: int = 0
    tokens_out: int = 0
    latency_s: float = 0.0
    model: str | None = None
    calls: int = 0  # judge calls made (1, or 2 with the re-ask)
    error: str | None = None  # parse error of the last answer when failed

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def tokens(self) -> int:
        return self.tokens_in + self.tokens_out

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "verdict": self.verdict.to_dict() if self.verdict else None,
            "raw_texts": list(self.raw_texts),
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "latency_s": self.latency_s,
            "model": self.model,
            "calls": self.calls,
            "error": self.error,
        }


def judge_run(backend: JudgeBackend, prompt_text: str, *, max_reasks: int = 1, setting: str = "holistic",
              regime: str | None = None, distractors_used: list[str] | None = None) -> JudgeOutcome:
    """Judge one prompt.  ``max_reasks`` (default 1) bounds the correction round-trips;
    ``setting``, ``regime`` and ``distractors_used`` go to :func:`~evaluation.judge.verdict.parse_verdict`."""
    messages: list[dict[str, str]] = [{"role": "user", "content": prompt_text}]
    outcome = JudgeOutcome(status="failed", verdict=None)
    for round_no in range(max(0, max_reasks) + 1):
        if round_no == 0:
            resp: JudgeResponse = backend.judge(prompt_text)
        elif hasattr(backend, "judge_messages"):
            resp = backend.judge_messages(messages)
        else:  # a duck-typed backend with judge() only: flatten the chat into one prompt
            resp = JudgeBackend.judge_messages(backend, messages)  # type: ignore[arg-type]
        outcome.calls += 1
        outcome.raw_texts.append(resp.text or "")
        outcome.tokens_in += resp.tokens_in or 0
        outcome.tokens_out += resp.tokens_out or 0
        outcome.latency_s += resp.latency_s or 0.0
        outcome.model = resp.model or outcome.model
        try:
            verdict = parse_verdict(resp.text or "", setting=setting, regime=regime, distractors_used=distractors_used)
        except VerdictParseError as exc:
            outcome.error = exc.reason
            messages += [
                {"role": "assistant", "content": resp.text or ""},
                {"role": "user", "content": correction_for(setting).format(reason=exc.reason)},
            ]
            continue
        if round_no > 0:
            verdict.notes.append(f"parsed after {round_no} re-ask(s)")
        outcome.status = "ok"
        outcome.verdict = verdict
        outcome.error = None
        return outcome
    return outcome
