"""How the official evaluator turns a run record's ``predicted_answer`` into an answer dict."""
from __future__ import annotations

import json
import re
from typing import Any

_ANSWER_TAG = re.compile(r"<Answer>\s*(.+?)\s*</Answer>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)\n?\s*```", re.DOTALL)


def parse_string_prediction(text: Any) -> Any:
    """The evaluator's string parser: returns a dict when one is found, else the text itself.

    Steps: the inner text of the first ``<Answer>…</Answer>`` (case-insensitive, non-empty); then
    the inside of the first code fence (`````json`` or bare); ``json.loads`` of the stripped text;
    else the first balanced ``{…}`` block that parses as a JSON object. Brace counting ignores
    string quoting and a stray ``}`` drives the depth negative, so text like ``"} {…}"`` yields no
    dict — kept as in the evaluator. Non-strings and blank strings are returned unchanged.
    """
    if not isinstance(text, str) or not text.strip():
        return text
    found = _ANSWER_TAG.search(text)
    if found:
        text = found.group(1)
    found = _FENCE.search(text)
    if found:
        text = found.group(1)
    text = text.strip()
    try:
        parsed = json.loads(text)
    except (ValueError, TypeError):
        parsed = None
    if isinstance(parsed, dict):
        return parsed
    depth, start = 0, None
    for i, ch in enumerate(text):
        if ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0 and start is not None:
                try:
                    parsed = json.loads(text[start:i + 1])
                except (ValueError, TypeError):
                    start = None
                    continue
                if isinstance(parsed, dict):
                    return parsed
    return text


def parse_prediction(value: Any) -> dict:
    """The answer dict the evaluator scores for a record's ``predicted_answer``.

    A dict is used as is; ``None`` gives ``{}`` (nothing answered); anything else is turned into
    text with ``str()`` (so a list becomes its Python repr) and parsed with
    :func:`parse_string_prediction`; when no dict comes out the answer is ``{"_raw": text}`` and
    every field then scores as missing.
    """
    if isinstance(value, dict):
        return value
    if value is None:
        return {}
    text = str(value)
    parsed = parse_string_prediction(text)
    return parsed if isinstance(parsed, dict) else {"_raw": text}


def record_answer(record: dict) -> Any:
    """``predicted_answer`` if the key exists (even when null), else ``final_answer``."""
    return record.get("predicted_answer", record.get("final_answer"))
