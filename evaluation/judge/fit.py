"""Fitting a judge prompt into the endpoint's context (pure Python).

A configuration says how many tokens its endpoint holds (``context_tokens``) and caps the answer
(``max_tokens``). A prompt is sent only when it fits with room for the answer and for one re-ask
(:data:`REASK_RESERVE_TOKENS`); otherwise it is rendered again with shorter observations (what the
judge can most do without: tool outputs such as GeoJSON, the plan and the answer stay whole), and
what was cut is recorded with the call (:func:`fit_prompt`'s ``trimmed``).

Tokens are bounded, not counted, so that preparing a judgement makes no call:
:func:`estimate_tokens` is the text's UTF-8 length in bytes (``CHARS_PER_TOKEN = 1``). That is an
upper bound for the byte-level BPE tokenizers of the judge's usual models (GPT-2 style: SmolLM2,
Llama 3, Qwen, OpenAI's; SentencePiece with byte fallback too): each token stands for at least one
byte, special tokens aside (:data:`MESSAGE_OVERHEAD_TOKENS`). It is far above the typical count —
measured with SmolLM2-135M's tokenizer (llama-cpp-python's ``/extras/tokenize``), the holistic and
step-wise prompts of the scoring examples take 3.5–4.1 bytes a token — but text made of numbers
does not: SmolLM2 splits digits one by one, and a GeoJSON coordinate list took 1.14 bytes a token,
a list of integers 1.0. A bound of 2 bytes would have under-counted such observations; this one
over-trims a prose prompt instead (the plan and the answer are never cut, only observations).
``tests/test_judge_llm_server.py`` checks the bound against the real tokenizer.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

#: bytes of UTF-8 text per token, a lower bound for byte-level BPE tokenizers (module docstring)
CHARS_PER_TOKEN = 1.0
#: tokens a chat template adds around each message (role markers; 4–8 in the templates we know)
MESSAGE_OVERHEAD_TOKENS = 16
#: the first answer's characters that a re-ask repeats (the rest is cut; a whole answer cut at the
#: length limit would overflow the context)
REASK_ANSWER_CHARS = 600
#: room kept for the one re-ask: the clipped first answer, the correction (at most 800 characters)
#: and two more messages' overhead, in estimated tokens (the longest re-ask is 1421 characters)
REASK_RESERVE_TOKENS = math.ceil((REASK_ANSWER_CHARS + 1000) / CHARS_PER_TOKEN) + 2 * MESSAGE_OVERHEAD_TOKENS
#: observation lengths tried in turn (characters per observation; the renderers' default is 1500)
OBS_STEPS: tuple[int, ...] = (1500, 600, 250, 100, 40, 1)


#: A new configuration's answer cap (tokens): a verdict with six short reasons and a paragraph of
#: reasoning is 150–400 tokens; the cap stops a model that never closes its JSON from running to
#: its context limit (SmolLM2-135M did: 173–188 s a call).
DEFAULT_MAX_TOKENS = 1024
#: A new configuration's context size (tokens): 32768, the smallest window of the hosted and served
#: judge models in use (Qwen2.5 32k; OpenAI's and Llama 3.1's 128k). With the byte bound and the
#: default cap it admits a 30,096-byte prompt, so the 6.5–8.1 kB prompts of the scoring examples
#: go whole. Set the endpoint's own (a local server's ``--n_ctx``: llama-cpp-python's starts with
#: 2048; SmolLM2 was trained on 8192), or 0 not to check.
DEFAULT_CONTEXT_TOKENS = 32768


class PromptTooLong(ValueError):
    """The prompt does not fit even with every observation cut (the message gives the numbers)."""


def estimate_tokens(text: str) -> int:
    """An upper estimate of ``text``'s tokens: ``ceil(len(UTF-8 bytes) / CHARS_PER_TOKEN)``."""
    return math.ceil(len((text or "").encode("utf-8")) / CHARS_PER_TOKEN)


def prompt_budget(context_tokens: int, max_tokens: int) -> int | None:
    """Estimated tokens a first prompt may take: the context less the answer cap, the re-ask
    reserve and one message's overhead; None when ``context_tokens`` is 0 (not checked)."""
    if not context_tokens:
        return None
    return int(context_tokens) - int(max_tokens or 0) - REASK_RESERVE_TOKENS - MESSAGE_OVERHEAD_TOKENS


def fit_prompt(render: Callable[[int], str], context_tokens: int, max_tokens: int) -> tuple[str, dict[str, Any]]:
    """The prompt ``render(max_obs_chars)`` with the longest observations that fit; returns
    ``(prompt, trimmed)``.

    ``render`` renders the prompt with each observation clipped to ``max_obs_chars`` characters;
    the lengths of :data:`OBS_STEPS` are tried in turn. ``trimmed`` is ``{}`` when the default
    rendering fits (or ``context_tokens`` is 0), else ``{"max_obs_chars", "chars_removed",
    "estimated_tokens", "estimated_tokens_before", "budget_tokens", "context_tokens",
    "max_tokens"}``. Raises :class:`PromptTooLong` when even the shortest observations leave the
    prompt over :func:`prompt_budget` (or the budget is not positive: ``max_tokens`` leaves no room).
    """
    full = render(OBS_STEPS[0])
    budget = prompt_budget(context_tokens, max_tokens)
    if budget is None:
        return full, {}
    before = estimate_tokens(full)
    if before <= budget:
        return full, {}
    facts = {"context_tokens": int(context_tokens), "max_tokens": int(max_tokens or 0), "budget_tokens": budget,
             "estimated_tokens_before": before}
    if budget > 0:
        for obs in OBS_STEPS[1:]:
            text = render(obs)
            n = estimate_tokens(text)
            if n <= budget:
                return text, {**facts, "max_obs_chars": obs, "chars_removed": len(full) - len(text),
                              "estimated_tokens": n}
    raise PromptTooLong(
        f"the prompt may need {before} tokens (bounded at {CHARS_PER_TOKEN:g} byte(s) a token) and does not fit "
        f"the context of {context_tokens} tokens with max_tokens {max_tokens} and a re-ask's {REASK_RESERVE_TOKENS}, "
        f"even with observations cut to {OBS_STEPS[-1]} character(s): raise the configuration's context size "
        f"or lower its max tokens")
