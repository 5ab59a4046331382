"""Release-level QC over several tasks: near-duplicate questions (``release.duplicate_question``)
and the distribution report (by dimension, disaster type, modality configuration).
"""
from __future__ import annotations

import difflib
import re
import unicodedata
from collections import Counter

from kernel.inputs import modality_config

from .registry import Finding, declare, finding

__all__ = ["CHECKS", "release_findings", "release_report"]

#: the checks of this concern: id → (severity, meaning)
CHECKS: dict[str, tuple[str, str]] = declare("release", {
    "release.duplicate_question": ("warning", "two questions are the same or nearly the same"),
})


def _normalise_question(text: str) -> str:
    t = unicodedata.normalize("NFKC", str(text or "")).lower()
    t = re.sub(r"[^\w\s]", " ", t)
    return re.sub(r"\s+", " ", t).strip()


def release_findings(items: list[dict], threshold: float = 0.9) -> list[Finding]:
    """Duplicate or near-duplicate questions over a release. ``items``: ``{question_id,
    content}`` (or ``question``). Normalised text (NFKC, lower case, punctuation dropped);
    difflib ratio ≥ ``threshold`` → ``release.duplicate_question`` (warning)."""
    rows = []
    for it in items:
        q = it.get("question", (it.get("content") or {}).get("question", ""))
        rows.append((str(it.get("question_id", "")), _normalise_question(q)))
    rows.sort(key=lambda r: len(r[1]))
    out = []
    for i, (qa, ta) in enumerate(rows):
        if not ta:
            continue
        for qb, tb in rows[i + 1:]:
            if 2 * len(ta) < threshold * (len(ta) + len(tb)):
                break  # longer ones cannot reach the threshold
            if ta == tb:
                ratio = 1.0
            else:
                sm = difflib.SequenceMatcher(None, ta, tb, autojunk=False)
                if sm.real_quick_ratio() < threshold or sm.quick_ratio() < threshold:
                    continue
                ratio = sm.ratio()
                if ratio < threshold:
                    continue
            kind = "the same question" if ratio == 1.0 else f"nearly the same question (similarity {ratio:.2f})"
            out.append(finding("release.duplicate_question", f"{qa} and {qb} ask {kind}; drop one or make them differ.", qb))
    return out


def _modality_config(content: dict) -> str:
    return modality_config(content.get("input_data") or {}) or "none"


def release_report(items: list[dict]) -> dict:
    """Distribution of a release by dimension, disaster type and modality configuration.
    ``items``: ``{question_id, content, dimension?}``."""
    dims, disasters, mods = Counter(), Counter(), Counter()
    for it in items:
        c = it.get("content") or {}
        dim = it.get("dimension") or str(c.get("task_category_code") or "").lower() or "unknown"
        dims[str(dim).lower()] += 1
        disasters[str(c.get("disaster_type") or "unknown").lower()] += 1
        mods[_modality_config(c)] += 1
    return {"tasks": len(items), "by_dimension": dict(sorted(dims.items())),
            "by_disaster_type": dict(sorted(disasters.items())), "by_modality": dict(sorted(mods.items()))}
