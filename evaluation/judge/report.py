"""The judge's aggregate report, as the planning benchmark reports its settings (pure Python).

Per group of setting x split x regime x judge configuration (and, by default, the tested agent):

* ``n`` verdicts read (failed judgements are counted apart, in ``failed``, never as wrong);
* the correctness rate in %, twice and labelled: ``cr_derived_pct`` (the studio's correctness,
  derived by the setting's rule, see :func:`evaluation.judge.verdict.is_correct_rule`) and
  ``cr_judge_pct`` (the judge's own ``is_correct``, what the benchmark's ``runner.score`` averages;
  over the ``n_judge_is_correct`` verdicts that gave one);
* ``mean_grade`` (the paper's "Score" / "Avg Grade");
* ``e_rates_pct``: each E code's incidence in % of the verdicts that judged flags (a five-class
  tool-broken answer judges none), as the benchmark's ``calculate_statistics`` counts them;
* ``tool_broken``: the outcome shares in % (Replace / Alter / Retry / Refusal / Other, paper Table 1);
* ``unsolvable``: the refusal rate in % per unsolvability type (paper Table 1, four types): the
  share of that type's verdicts that pass (the agent refused, asked, or explained);
* ``distractors``: the share in % of tool-extraneous verdicts whose prediction called at least one
  distractor, and ``ext_use``, the number of distractor calls (the paper's "ExtUse", Tables 16-17).

Every report names the **reading** that produced its figures (``report["reading"]``, and each
group's ``reading``): ``studio`` (the default) or ``apb``, the planning benchmark's own parse
results (:func:`evaluation.judge.verdict.parse_verdict_apb`).  In an ``apb`` report a row's
``is_correct`` may be null (the benchmark counts no correctness for it: both CR figures leave it
out) and its grade is the value the benchmark averages (not snapped to the 0.2 scale).

A rate whose denominator is empty is ``None``, never 0.  Percentages are rounded to 2 decimals,
grades to 4.

Input rows (one verdict each; :func:`normalize_row` says what is required)::

    {"setting": "holistic", "regime": "holistic", "judge": "gpt-4o@holistic_v2",
     "status": "ok", "is_correct": false, "judge_is_correct": true, "grade": 0.8,
     "errors": {"E5": true, ...} | null, "outcome": null | "retry", "unsolvable_type": null,
     "distractors_used": null | ["gen.crop_yield"], "split": optional, "tested_model": optional}
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kernel.taxonomy import E2_SUBTYPE_NAMES

from .options import DEFAULT_EXTRA_KEYS
from .verdict import (
    DEFAULT_READING,
    DEFAULT_REGIME,
    E2_SUBTYPES,
    E_CODES,
    TOOL_BROKEN_CORRECT,
    TOOL_BROKEN_OUTCOMES,
    UNSOLVABLE_TYPES,
    normalize_outcome,
    normalize_reading,
    normalize_regime,
    normalize_setting,
)

GROUP_KEYS: tuple[str, ...] = ("setting", "split", "regime", "judge")
LABELS: dict[str, str] = {
    "cr_derived_pct": "CR % (studio: derived by the setting's rule)",
    "cr_judge_pct": "CR % (judge's own is_correct, as the benchmark's runner.score)",
    "mean_grade": "mean plan grade",
    "e_rates_pct": "E1-E6 incidence, % of verdicts that judged flags",
    "tool_broken": "tool-broken outcome shares, %",
    "unsolvable": "unsolvable refusal rate per type, %",
    "distractors": "share of predictions calling a distractor, %, and ExtUse (distractor calls)",
}
#: The labels that read differently in an apb report (the benchmark's own parse results).
APB_LABELS: dict[str, str] = {
    "cr_derived_pct": "CR % (apb: the correctness the benchmark's code counts for the answer)",
    "cr_judge_pct": "CR % (apb: the same; the runner's bool(is_correct), the legacy evaluators' 'no flag set')",
    "mean_grade": "mean plan grade (apb: as the benchmark averages it, unsnapped)",
    "e_rates_pct": "E1-E6 incidence (apb: the flags the benchmark's code reads), % of verdicts that judged flags",
}


def labels_for(reading: str) -> dict[str, str]:
    """The figure labels of a report in ``reading`` (``studio`` or ``apb``)."""
    return {**LABELS, **APB_LABELS} if normalize_reading(reading) == "apb" else dict(LABELS)


class ReportRowError(ValueError):
    """A verdict row the report cannot use; the message names the row and the field."""


def benchmark_split(setting: str, regime: str) -> str:
    """The benchmark's split name for a setting in a regime (evaluation/apb_eval/io.py SPLITS):
    ``holistic_planning``, ``step_wise_tool_broken``, ...; settings the benchmark has in one regime
    only (tool-broken step-wise, unsolvable holistic) still get a name for the other."""
    prefix = "holistic" if regime == "holistic" else "step_wise"
    rest = {"holistic": "planning", "step-wise": "planning"}.get(setting, setting.replace("-", "_"))
    return f"{prefix}_{rest}"


def _pct(num: int, den: int) -> float | None:
    return None if den == 0 else round(100.0 * num / den, 2)


def normalize_row(row: Mapping[str, Any], index: int | None = None, reading: str = DEFAULT_READING) -> dict[str, Any]:
    """Check and normalise one verdict row; raise :class:`ReportRowError` naming the field.

    ``reading``: the report's; a row's own ``reading`` (default the report's) must equal it, so
    that no report mixes the two.  Required: ``setting`` and, for ``status`` ``ok`` (the
    default), ``is_correct`` (null allowed in the ``apb`` reading: not counted).  ``regime``
    defaults to the setting's (:data:`~evaluation.judge.verdict.DEFAULT_REGIME`, holistic for
    tool-extraneous); ``split`` to :func:`benchmark_split`; ``judge`` to ``"?"``.
    """
    where = f"row {index}" if index is not None else "row"
    if not isinstance(row, Mapping):
        raise ReportRowError(f"{where}: not an object")
    try:
        setting = normalize_setting(row.get("setting"))
    except ValueError as exc:
        raise ReportRowError(f"{where}: setting: {exc}") from None
    try:
        regime = normalize_regime(row.get("regime") or DEFAULT_REGIME[setting] or "holistic")
    except ValueError as exc:
        raise ReportRowError(f"{where}: regime: {exc}") from None
    row_reading = row.get("reading") or reading
    if row_reading != reading:
        raise ReportRowError(f"{where}: read under the {row_reading!r} reading, not the report's {reading!r} "
                             "(re-read its raw answer; one report, one reading)")
    apb = reading == "apb"
    status = str(row.get("status") or "ok")
    if status not in ("ok", "failed"):
        raise ReportRowError(f"{where}: status {status!r} is not ok or failed")
    out: dict[str, Any] = {
        "setting": setting, "regime": regime, "status": status,
        "split": str(row.get("split") or benchmark_split(setting, regime)),
        "judge": str(row.get("judge") or "?"),
    }
    for k, v in row.items():
        if k not in out and k not in ("is_correct", "judge_is_correct", "grade", "errors", "outcome",
                                      "unsolvable_type", "distractors_used"):
            out[k] = v
    if status == "failed":
        return out
    ic = row.get("is_correct")
    if not isinstance(ic, bool) and not (apb and ic is None):
        raise ReportRowError(f"{where}: is_correct must be true or false{' or null' if apb else ''}, got {ic!r}")
    out["is_correct"] = ic
    jic = row.get("judge_is_correct")
    if jic is not None and not isinstance(jic, bool):
        raise ReportRowError(f"{where}: judge_is_correct must be true, false or null, got {jic!r}")
    out["judge_is_correct"] = jic
    grade = row.get("grade")
    if grade is not None and (isinstance(grade, bool) or not isinstance(grade, (int, float))
                              or not (apb or 0 <= grade <= 1)):
        raise ReportRowError(f"{where}: grade must be a number{'' if apb else ' in [0, 1]'} or null, got {grade!r}")
    out["grade"] = None if grade is None else float(grade)
    errors = row.get("errors")
    if errors is not None:
        if isinstance(errors, (list, tuple)):
            errors = {c: c in errors for c in E_CODES}
        if not isinstance(errors, Mapping) or any(k not in E_CODES for k in errors):
            raise ReportRowError(f"{where}: errors must map E1..E6 to booleans (or list codes), got {errors!r}")
        errors = {c: bool(errors.get(c)) for c in E_CODES}
    out["errors"] = errors
    outcome = row.get("outcome")
    if outcome is not None:
        try:
            outcome = normalize_outcome(outcome)
        except ValueError as exc:
            raise ReportRowError(f"{where}: {exc}") from None
        if ic is not None and ic != (outcome in TOOL_BROKEN_CORRECT):
            raise ReportRowError(f"{where}: outcome {outcome} contradicts is_correct={str(ic).lower()}")
    out["outcome"] = outcome
    utype = row.get("unsolvable_type")
    if utype is not None and utype not in UNSOLVABLE_TYPES:
        raise ReportRowError(f"{where}: unsolvable_type {utype!r} is not one of {', '.join(UNSOLVABLE_TYPES)}")
    out["unsolvable_type"] = utype
    used = row.get("distractors_used")
    if used is not None and not isinstance(used, (list, tuple)):
        raise ReportRowError(f"{where}: distractors_used must be a list of tool names or null, got {used!r}")
    out["distractors_used"] = None if used is None else [str(x) for x in used]
    return out


def _group_stats(rows: Sequence[dict[str, Any]], regime: str) -> dict[str, Any]:
    ok = [r for r in rows if r["status"] == "ok"]
    n = len(ok)
    counted = [r for r in ok if r["is_correct"] is not None]  # all of them in the studio reading
    judged = [r for r in ok if r["judge_is_correct"] is not None]
    graded = [r["grade"] for r in ok if r["grade"] is not None]
    flagged = [r for r in ok if r["errors"] is not None]
    out: dict[str, Any] = {
        "n": n,
        "failed": len(rows) - n,
        "cr_derived_pct": _pct(sum(r["is_correct"] for r in counted), len(counted)),
        "n_counted": len(counted),
        "cr_judge_pct": _pct(sum(r["judge_is_correct"] for r in judged), len(judged)),
        "n_judge_is_correct": len(judged),
        "mean_grade": round(sum(graded) / len(graded), 4) if graded else None,
        "n_flagged": len(flagged),
        "e_rates_pct": {c: _pct(sum(r["errors"][c] for r in flagged), len(flagged)) for c in E_CODES},
        "e2_label": f"{E2_SUBTYPES[regime]} {E2_SUBTYPE_NAMES[E2_SUBTYPES[regime]]}",
        "tool_broken": None,
        "unsolvable": None,
        "distractors": None,
    }
    classed = [r for r in ok if r["outcome"] is not None]
    if classed:
        out["tool_broken"] = {
            "n": len(classed),
            "shares_pct": {name: _pct(sum(r["outcome"] == name for r in classed), len(classed))
                           for name in TOOL_BROKEN_OUTCOMES.values()},
        }
    typed = [r for r in ok if r["setting"] == "unsolvable"]
    if typed:
        per: dict[str, Any] = {}
        for t, label in list(UNSOLVABLE_TYPES.items()) + [(None, "type not given")]:
            of_type = [r for r in typed if r["unsolvable_type"] == t and r["is_correct"] is not None]
            if t is None and not of_type:
                continue
            per[t or "unknown"] = {"label": label, "n": len(of_type),
                                   "refusal_rate_pct": _pct(sum(r["is_correct"] for r in of_type), len(of_type))}
        out["unsolvable"] = per
    with_calls = [r for r in ok if r["distractors_used"] is not None]
    if with_calls:
        out["distractors"] = {
            "n": len(with_calls),
            "use_rate_pct": _pct(sum(1 for r in with_calls if r["distractors_used"]), len(with_calls)),
            "ext_use": sum(len(r["distractors_used"]) for r in with_calls),
        }
    return out


def judge_report(rows: Iterable[Mapping[str, Any]], *, extra_keys: Sequence[str] = DEFAULT_EXTRA_KEYS,
                 reading: str = DEFAULT_READING) -> dict[str, Any]:
    """Aggregate verdict rows per setting x split x regime x judge (x ``extra_keys``).

    ``reading``: the reading the rows were read under (``studio`` or ``apb``; every row's own
    ``reading``, where it has one, must be the same).  Returns ``{"reading": str, "groups":
    [...], "labels": {...}, "group_keys": [...], "n_rows": int}``; each group holds its keys, its
    ``reading`` and the figures described in the module docstring, groups sorted by their keys.
    Raises :class:`ReportRowError` for a bad row (nothing is reported then), ``ValueError`` for
    an unknown reading.
    """
    reading = normalize_reading(reading)
    norm = [normalize_row(r, i, reading) for i, r in enumerate(rows)]
    keys = list(GROUP_KEYS) + [k for k in extra_keys if k not in GROUP_KEYS and any(k in r for r in norm)]
    buckets: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for r in norm:
        buckets[tuple(str(r.get(k)) if r.get(k) is not None else "" for k in keys)].append(r)
    groups = []
    setting_order = {"holistic": 0, "step-wise": 1, "tool-extraneous": 2, "tool-broken": 3, "unsolvable": 4}
    for key in sorted(buckets, key=lambda k: (setting_order[k[0]],) + k[1:]):
        members = buckets[key]
        g = dict(zip(keys, key))
        g.update(_group_stats(members, members[0]["regime"]))
        g["reading"] = reading
        groups.append(g)
    return {"reading": reading, "groups": groups, "labels": labels_for(reading), "group_keys": keys,
            "n_rows": len(norm)}
