"""Text, key and tool-name normalisation shared by the operators and the trajectory metrics.

Every rule here reproduces a behaviour of the official DORA evaluator
(``dora/evaluation.py`` of Junjue-Wang/DORA @ 2b24be70); the docstrings say which quirks are
kept on purpose. Pure Python.
"""
from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from typing import Any

_NON_WORD = re.compile(r"[^\w\s]")
_SPACES = re.compile(r"\s+")

_PHASE_T = re.compile(r"^phase[\s_]*(t\d+)$")
_PHASE_N = re.compile(r"^phase[\s_]*(\d+)$")
# exact_match needs a separator between the letter and the number ("t 3"); dict keys do not ("t3").
_T_SEP = re.compile(r"^t[\s_]+(\d+)$")
_P_SEP = re.compile(r"^p[\s_]+(\d+)$")
_T_OPT = re.compile(r"^t[\s_]*(\d+)$")
_P_OPT = re.compile(r"^p[\s_]*(\d+)$")
_RANK = re.compile(r"^rank[\s_]*(\d+)$")
_KEY_SEPS = re.compile(r"[\s\-_]+")


def normalize_string(value: Any) -> str:
    """NFKC, lower case, every non-word non-space character to a space, spaces collapsed.

    Non-strings go through ``str()`` first (``None`` becomes ``"none"``, ``3.5`` becomes
    ``"3 5"``): the evaluator does the same. Results are cached per text (a run repeats the same
    tool arguments and answer strings many times).
    """
    return _normalize_text(value if isinstance(value, str) else str(value))


@lru_cache(maxsize=1 << 16)
def _normalize_text(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).lower().strip()
    text = _NON_WORD.sub(" ", text)
    return _SPACES.sub(" ", text).strip()


def canonical_exact(value: Any) -> str:
    """Canonical form used by ``exact_match``.

    ``None`` → ``""``; bools → ``true``/``false``; integral floats and ints → integer text;
    anything else → :func:`normalize_string`, then ``yes/true`` → ``true``, ``no/false`` →
    ``false``, ``phase t2`` → ``t2``, ``phase 2`` → ``p2``, ``t 3`` → ``t3``, ``p 1`` → ``p1``,
    and an integral number text → its integer text. Because punctuation becomes a space before
    the number check, the *string* ``"5.0"`` canonicalises to ``"5 0"`` (not ``"5"``), exactly
    as in the official evaluator.
    """
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, int):
        return str(value)
    return _canonical_text(value if isinstance(value, str) else str(value))


@lru_cache(maxsize=1 << 16)
def _canonical_text(raw: str) -> str:
    # canonical_exact of a text (a non-string goes through str() first, as normalize_string does);
    # cached per text like _normalize_text: the answer depends on the text alone.
    text = _normalize_text(raw)
    if not text:
        return text
    if text in ("true", "yes"):
        return "true"
    if text in ("false", "no"):
        return "false"
    for pattern, prefix in ((_PHASE_T, ""), (_PHASE_N, "p"), (_T_SEP, "t"), (_P_SEP, "p")):
        found = pattern.match(text)
        if found:
            return prefix + found.group(1)
    try:
        number = float(text)
    except (ValueError, TypeError):
        return text
    if number.is_integer():
        return str(int(number))
    return text


def normalize_dict_key(key: Any) -> str:
    """Key normalisation of ``scalar_dict``.

    Lower case and trimmed; ``phase tN``/``phase_tN`` → ``tN``; ``phase N`` → ``pN``;
    ``t_N``/``tN`` → ``tN``; ``p_N`` → ``pN``; ``rank_N`` → ``N``; otherwise runs of spaces,
    hyphens and underscores become one ``_`` (trimmed), and a trailing plural ``s`` is cut from the
    last token when that token is longer than 3 characters and does not end in ``ss``.
    """
    if not isinstance(key, str):
        return str(key).lower().strip()
    text = key.lower().strip()
    for pattern, prefix in ((_PHASE_T, ""), (_PHASE_N, "p"), (_T_OPT, "t"), (_P_OPT, "p"), (_RANK, "")):
        found = pattern.match(text)
        if found:
            return prefix + found.group(1)
    text = _KEY_SEPS.sub("_", text).strip("_")
    tokens = text.split("_")
    last = tokens[-1]
    if len(last) > 3 and last.endswith("s") and not last.endswith("ss"):
        tokens[-1] = last[:-1]
    return "_".join(tokens)


def normalize_tool_name(name: Any) -> str:
    """``seg_flood(pre, post)`` → ``seg.flood``: cut at the first ``(``, trim, and when the name has
    no ``.`` but has ``_``, turn the first ``_`` into ``.``. Falsy → ``""``. Case is kept."""
    if not name:
        return ""
    return _tool_name(name if isinstance(name, str) else str(name))


@lru_cache(maxsize=4096)
def _tool_name(name: str) -> str:
    text = name.split("(")[0].strip()
    if "." not in text and "_" in text:
        head, tail = text.split("_", 1)
        return f"{head}.{tail}"
    return text
