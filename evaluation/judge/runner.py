"""Run one judgement: call the backend, parse, re-ask once on a malformed answer.

A malformed answer is never turned into a default verdict: after the bounded re-ask the
outcome is ``status="failed"`` with every raw text kept.  The re-ask repeats at most
:data:`~evaluation.judge.fit.REASK_ANSWER_CHARS` characters of the unreadable answer (a whole
answer cut at the length limit would overflow the context; the prompt was fitted with room for
this, :mod:`evaluation.judge.fit`), and says so when the answer was cut at the length limit.  A
re-ask that gets no answer (request or transient error) ends the outcome ``failed`` with the
answers already received and the error, so no answer is lost.  Backend errors of the first call
(:class:`~evaluation.judge.backends.JudgeConfigError`, ``JudgeRequestError``,
``JudgeTransientError``) propagate to the caller, which decides whether to pause the
configuration or retry the job later.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .backends import JudgeBackend, JudgeRequestError, JudgeResponse, JudgeTransientError
from .fit import REASK_ANSWER_CHARS
from .options import STUCK_AFTER_S  # noqa: F401 — re-exported: its home is .options
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
    error: str | None = None  # parse error of the last answer when failed (or the re-ask's error)
    finish_reasons: list[str | None] = field(default_factory=list)  # one per answer ("length": cut at max_tokens)

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
            "finish_reasons": list(self.finish_reasons),
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
        else:
            try:
                if hasattr(backend, "judge_messages"):
                    resp = backend.judge_messages(messages)
                else:  # a duck-typed backend with judge() only: flatten the chat into one prompt
                    resp = JudgeBackend.judge_messages(backend, messages)  # type: ignore[arg-type]
            except (JudgeRequestError, JudgeTransientError) as exc:  # keep the answers already received
                outcome.error = f"{outcome.error}; the re-ask got no answer: {exc}"
                return outcome
        outcome.calls += 1
        outcome.finish_reasons.append(getattr(resp, "finish_reason", None))
        outcome.raw_texts.append(resp.text or "")
        outcome.tokens_in += resp.tokens_in or 0
        outcome.tokens_out += resp.tokens_out or 0
        outcome.latency_s += resp.latency_s or 0.0
        outcome.model = resp.model or outcome.model
        try:
            verdict = parse_verdict(resp.text or "", setting=setting, regime=regime, distractors_used=distractors_used)
        except VerdictParseError as exc:
            outcome.error = exc.reason
            if round_no < max(0, max_reasks):
                # the prompt and the latest answer only: a later re-ask replaces an earlier one, so
                # the chat never grows past the reserve the prompt was fitted with
                messages = messages[:1] + reask_messages(
                    resp.text or "", correction_for(setting).format(reason=exc.reason[:200]),
                    cut=getattr(resp, "finish_reason", None) == "length")
            continue
        if round_no > 0:
            verdict.notes.append(f"parsed after {round_no} re-ask(s)")
        outcome.status = "ok"
        outcome.verdict = verdict
        outcome.error = None
        return outcome
    return outcome


#: Said in the re-ask when the first answer stopped at the answer cap (``finish_reason`` "length").
LENGTH_NOTE = ("Your previous answer was cut off at the length limit before the JSON object was complete: "
               "keep every reason to one short sentence and the reasoning to two sentences.")


def reask_messages(answer: str, correction: str, *, cut: bool = False) -> list[dict[str, str]]:
    """The two messages a re-ask appends: the unreadable answer, clipped to its first
    :data:`~evaluation.judge.fit.REASK_ANSWER_CHARS` characters (with ``…[N more characters
    not repeated]``), then the correction, preceded by :data:`LENGTH_NOTE` when ``cut`` (the answer
    ended at the length limit). Their size is bounded whatever the answer's, which is what
    :data:`~evaluation.judge.fit.REASK_RESERVE_TOKENS` reserves in the context."""
    shown = answer[:REASK_ANSWER_CHARS]
    if len(answer) > REASK_ANSWER_CHARS:
        shown += f" …[{len(answer) - REASK_ANSWER_CHARS} more characters not repeated]"
    text = f"{LENGTH_NOTE} {correction}" if cut else correction
    return [{"role": "assistant", "content": shown or "(empty answer)"}, {"role": "user", "content": text}]
