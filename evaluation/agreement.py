"""Agreement between human scorers, LLM judges and the rule checker (pure Python, no Django).

Input rows (one verdict each)::

    {"run_id": "r1", "source": "human"|"judge"|"code", "annotator": "ana",
     "is_correct": true, "grade": 0.8, "errors": {"E1": false, ..., "E6": false},
     # optional
     "final": true,                       # an adjudicated human verdict (see the reference rule)
     "dimension": ..., "protocol": ..., "tested_model": ...,   # run properties
     "judge_model": ..., "prompt_version": ...}                # rater properties

``grade`` and ``errors`` may be missing or null (that verdict then drops out of the grade or flag
statistics); ``errors`` may also be a list of codes (``["E4"]``).

**Raters.**  A rater is ``source:annotator``, extended by ``/judge_model`` (when given and not
already the annotator's name) and ``@prompt_version`` (when given), so one judge model under two
prompt versions counts as two raters.  One rater may give one verdict per run (a duplicate is an
error).

**The human reference** of a run (:func:`build_reference`):

* if any human verdict of the run carries ``"final": true`` (an adjudication), only those verdicts
  form the reference; otherwise all human verdicts of the run do. A final verdict is never a
  rater: it takes no part in ``vs_reference`` rows, rater pairs, the human ceiling or the
  leave-one-out references, and ``vs_adjudication`` compares every rater with it apart;
* correctness: strict majority of ``is_correct``;
* flags: per flag, strict majority of the verdicts that carry flags;
* ties (e.g. two humans who disagree): with ``tie_break="exclude"`` (default) the value is null
  and the run drops out of that statistic only (``reference.ties`` counts them); with
  ``tie_break="incorrect"`` a tie resolves to *incorrect* / *flag present* (the conservative side:
  a plan one of two humans found wrong is not counted correct);
* grade: the mean human grade (``grade_mean``, used for MAE and the bias table) and that mean
  snapped to the 0.2 grid (``level``; an exact midpoint goes to the lower grade, as
  :func:`evaluation.judge.verdict.snap_grade` does), used for exact / within-0.2 agreement and
  the weighted kappa.

Each human is also compared with a *leave-one-out* reference built from the other humans only,
so a human's row in ``vs_reference`` is directly comparable with a judge's.

**Pairs.**  Every pair of raters with at least one run in common; in a pair the first rater
(humans first, then judges, then code checkers, then by name) plays the reference for the
direction-dependent numbers (precision / recall).

"Incorrect" is the positive class for correctness precision / recall / F1; for flags the positive
class is "flag present".  Every rate is null (never 0) when its denominator is empty.
"""
from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from itertools import combinations
from typing import Any

from evaluation.judge.stepwise import protocol_horizon
from evaluation.judge.verdict import (
    DEFAULT_READING,
    E_CODES,
    GRADES,
    VerdictParseError,
    normalize_reading,
    parse_verdict,
    protocol_setting,
    snap_grade,
)

SOURCES: tuple[str, ...] = ("human", "judge", "code")
#: Keys that describe the agent run itself; every verdict row of a run must agree on them.
RUN_KEYS: tuple[str, ...] = ("dimension", "protocol", "tested_model")
#: Keys that describe the rater (a row without one belongs to every group of that key).
RATER_KEYS: tuple[str, ...] = ("judge_model", "prompt_version")
#: Breakdowns added to every report when some row carries one of the keys.
AUTO_BREAKDOWNS: tuple[tuple[str, ...], ...] = (("dimension",), ("protocol",), ("judge_model", "prompt_version"))
TIE_BREAKS: tuple[str, ...] = ("exclude", "incorrect")
POSITIVE = "incorrect"

_EPS = 1e-9
_CORE_KEYS = {"run_id", "source", "annotator", "is_correct", "grade", "errors", "final"}


# --------------------------------------------------------------------------------------------
# Statistics
# --------------------------------------------------------------------------------------------


def cohen_kappa(a: Sequence[Hashable], b: Sequence[Hashable]) -> float | None:
    """Cohen's kappa of two raters over the same items (nominal labels).

    kappa = (p_o - p_e) / (1 - p_e), with p_o the share of items on which the raters agree and
    p_e = sum_k p_a(k) * p_b(k) the agreement expected from each rater's own label frequencies
    (Cohen, J. 1960, "A coefficient of agreement for nominal scales", Educational and
    Psychological Measurement 20(1):37-46).

    Returns None for no items, or when p_e = 1 (both raters used one and the same label on every
    item, so kappa is 0/0).
    """
    if len(a) != len(b):
        raise ValueError(f"cohen_kappa: {len(a)} labels against {len(b)}")
    n = len(a)
    if n == 0:
        return None
    p_o = sum(1 for x, y in zip(a, b) if x == y) / n
    ca, cb = Counter(a), Counter(b)
    p_e = sum(ca[k] * cb.get(k, 0) for k in ca) / (n * n)
    if abs(1.0 - p_e) < _EPS:
        return None
    return (p_o - p_e) / (1.0 - p_e)


def fleiss_kappa(table: Sequence[Sequence[float]]) -> float | None:
    """Fleiss' kappa from a subjects x categories table of counts (n_ij raters put subject i in j).

    P_i = (sum_j n_ij^2 - n_i) / (n_i (n_i - 1)),  P_bar = mean_i P_i,
    p_j = sum_i n_ij / sum_i n_i,  P_e = sum_j p_j^2,  kappa = (P_bar - P_e) / (1 - P_e)
    (Fleiss, J. L. 1971, "Measuring nominal scale agreement among many raters", Psychological
    Bulletin 76(5):378-382).  Fleiss assumes the same number of ratings per subject; when the row
    totals differ, P_i uses each row's own n_i and p_j pools all ratings (with equal totals this
    is exactly Fleiss' formula).

    Returns None for an empty table or when P_e = 1 (every rating in one category).  Raises
    ``ValueError`` for a row with fewer than two ratings, a negative count, or ragged rows.
    """
    rows = [list(r) for r in table]
    if not rows:
        return None
    k = len(rows[0])
    p_sum = 0.0
    col = [0.0] * k
    total = 0.0
    for i, r in enumerate(rows):
        if len(r) != k:
            raise ValueError(f"fleiss_kappa: row {i} has {len(r)} categories, expected {k}")
        if any(x < 0 for x in r):
            raise ValueError(f"fleiss_kappa: row {i} has a negative count")
        n_i = sum(r)
        if n_i < 2:
            raise ValueError(f"fleiss_kappa: row {i} has {n_i} ratings; need at least 2")
        p_sum += (sum(x * x for x in r) - n_i) / (n_i * (n_i - 1))
        for j, x in enumerate(r):
            col[j] += x
        total += n_i
    p_bar = p_sum / len(rows)
    p_e = sum((c / total) ** 2 for c in col)
    if abs(1.0 - p_e) < _EPS:
        return None
    return (p_bar - p_e) / (1.0 - p_e)


def quadratic_weighted_kappa(a: Sequence[float], b: Sequence[float], levels: Sequence[float] = GRADES) -> float | None:
    """Cohen's weighted kappa with quadratic disagreement weights on an ordered scale.

    With k levels, w_ij = (i - j)^2 / (k - 1)^2, O the observed k x k proportions and E the outer
    product of the two raters' marginal proportions:
    kappa_w = 1 - sum_ij w_ij O_ij / sum_ij w_ij E_ij
    (Cohen, J. 1968, "Weighted kappa", Psychological Bulletin 70(4):213-220; quadratic weights as
    in Fleiss, J. L. & Cohen, J. 1973, Educational and Psychological Measurement 33:613-619).

    ``a`` and ``b`` hold values from ``levels`` (matched within 1e-6).  Returns None for no items
    or when the expected weighted disagreement is 0 (both raters used a single, identical level).
    """
    if len(a) != len(b):
        raise ValueError(f"quadratic_weighted_kappa: {len(a)} values against {len(b)}")
    k = len(levels)
    if k < 2:
        raise ValueError("quadratic_weighted_kappa needs at least two levels")
    n = len(a)
    if n == 0:
        return None

    def index(v: float) -> int:
        for i, lv in enumerate(levels):
            if abs(float(v) - float(lv)) < 1e-6:
                return i
        raise ValueError(f"quadratic_weighted_kappa: {v!r} is not one of the levels {list(levels)}")

    ia, ib = [index(x) for x in a], [index(x) for x in b]
    ra, cb = Counter(ia), Counter(ib)
    num = sum((i - j) ** 2 for i, j in zip(ia, ib)) / n
    den = sum((i - j) ** 2 * ra[i] * cb[j] for i in ra for j in cb) / (n * n)
    if den < _EPS:
        return None
    return 1.0 - num / den  # the (k-1)^2 normaliser cancels


def prf(pred: Sequence[Hashable], ref: Sequence[Hashable], positive: Hashable) -> dict[str, Any]:
    """Precision, recall and F1 of ``pred`` against ``ref`` for the class ``positive``.

    precision = TP / (TP + FP), recall = TP / (TP + FN), F1 = 2 TP / (2 TP + FP + FN) (the
    harmonic mean of precision and recall; van Rijsbergen, C. J. 1979, "Information Retrieval",
    ch. 7).  Each is None, not 0, when its denominator is empty: precision when ``pred`` never
    says ``positive``, recall when ``ref`` never does, F1 when neither does.  (So a predictor that
    never says positive against a reference that does gets precision None, recall 0, F1 0.)

    Returns ``{"tp", "fp", "fn", "tn", "support", "predicted", "precision", "recall", "f1"}``
    where support = TP + FN (reference positives) and predicted = TP + FP.
    """
    if len(pred) != len(ref):
        raise ValueError(f"prf: {len(pred)} predictions against {len(ref)} references")
    tp = fp = fn = tn = 0
    for p, r in zip(pred, ref):
        if p == positive and r == positive:
            tp += 1
        elif p == positive:
            fp += 1
        elif r == positive:
            fn += 1
        else:
            tn += 1
    return {
        "tp": tp, "fp": fp, "fn": fn, "tn": tn,
        "support": tp + fn, "predicted": tp + fp,
        "precision": tp / (tp + fp) if tp + fp else None,
        "recall": tp / (tp + fn) if tp + fn else None,
        "f1": 2 * tp / (2 * tp + fp + fn) if 2 * tp + fp + fn else None,
    }


def _mean(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


# --------------------------------------------------------------------------------------------
# Rows
# --------------------------------------------------------------------------------------------


class RowError(ValueError):
    """A verdict row that cannot be used; ``where`` is e.g. "line 3", ``field`` the bad key."""

    def __init__(self, field: str, message: str, where: str | None = None):
        self.field = field
        self.message = message
        self.where = where
        super().__init__(str(self))

    def __str__(self) -> str:
        head = f"{self.where}: " if self.where else ""
        return f"{head}field '{self.field}': {self.message}"


def _flag_value(v: Any, field: str, where: str | None) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, int) and v in (0, 1):
        return bool(v)
    raise RowError(field, f"expected true/false, got {v!r}", where)


def normalize_row(obj: Any, where: str | None = None) -> dict[str, Any]:
    """Check one verdict row and return it normalised.

    The result has ``run_id`` (str), ``source``, ``annotator``, ``rater`` (see the module
    docstring), ``is_correct`` (bool), ``grade`` (float or None), ``level`` (grade snapped to the
    0.2 grid, or None), ``errors`` ({E1..E6: bool} or None), ``final`` (bool) and ``extra`` (the
    other keys).  Raises :class:`RowError` naming the field.
    """
    if not isinstance(obj, Mapping):
        raise RowError("(row)", f"expected a JSON object, got {type(obj).__name__}", where)
    # run_id
    if "run_id" not in obj or obj["run_id"] is None:
        raise RowError("run_id", "missing", where)
    rid = obj["run_id"]
    if isinstance(rid, bool) or not isinstance(rid, (str, int)) or (isinstance(rid, str) and not rid.strip()):
        raise RowError("run_id", f"expected a non-empty string or an integer, got {rid!r}", where)
    run_id = str(rid).strip()
    # source
    source = obj.get("source")
    if not isinstance(source, str) or source.strip().lower() not in SOURCES:
        raise RowError("source", f"expected one of {', '.join(SOURCES)}, got {source!r}", where)
    source = source.strip().lower()
    # annotator
    annotator = obj.get("annotator")
    if isinstance(annotator, bool) or not isinstance(annotator, (str, int)) or not str(annotator).strip():
        raise RowError("annotator", f"expected a non-empty string, got {annotator!r}", where)
    annotator = str(annotator).strip()
    # is_correct
    if "is_correct" not in obj:
        raise RowError("is_correct", "missing", where)
    if not isinstance(obj["is_correct"], bool):
        raise RowError("is_correct", f"expected true/false, got {obj['is_correct']!r}", where)
    is_correct = obj["is_correct"]
    # grade
    g = obj.get("grade")
    if g is None:
        grade = level = None
    else:
        if isinstance(g, bool) or not isinstance(g, (int, float)) or math.isnan(float(g)):
            raise RowError("grade", f"expected a number in [0, 1] or null, got {g!r}", where)
        try:
            level = snap_grade(g)
        except ValueError as exc:
            raise RowError("grade", str(exc), where) from None
        grade = min(1.0, max(0.0, float(g)))
    # errors
    e = obj.get("errors")
    if e is None:
        errors = None
    elif isinstance(e, Mapping):
        errors = {c: False for c in E_CODES}
        for k, v in e.items():
            code = str(k).strip().upper()
            if code not in E_CODES:
                raise RowError(f"errors.{k}", f"unknown error code (expected {', '.join(E_CODES)})", where)
            errors[code] = _flag_value(v, f"errors.{k}", where)
    elif isinstance(e, (list, tuple)):
        errors = {c: False for c in E_CODES}
        for item in e:
            code = str(item).strip().upper()
            if code not in E_CODES:
                raise RowError("errors", f"unknown error code {item!r}", where)
            errors[code] = True
    else:
        raise RowError("errors", f"expected an object of E1..E6 flags, a list of codes, or null; got {e!r}", where)
    # final
    final = obj.get("final", False)
    if final is None:
        final = False
    if not isinstance(final, bool):
        raise RowError("final", f"expected true/false, got {final!r}", where)
    if final and source != "human":
        raise RowError("final", "only a human (adjudicated) verdict can be final", where)
    # extra keys (grouping)
    extra: dict[str, Any] = {}
    for k, v in obj.items():
        if k in _CORE_KEYS:
            continue
        if v is not None and not isinstance(v, (str, int, float, bool)):
            raise RowError(str(k), f"expected a string, number, boolean or null, got {type(v).__name__}", where)
        extra[str(k)] = v
    jm, pv = extra.get("judge_model"), extra.get("prompt_version")
    rater = f"{source}:{annotator}"
    if jm not in (None, "") and str(jm) != annotator:
        rater += f"/{jm}"
    if pv not in (None, ""):
        rater += f"@{pv}"
    return {
        "run_id": run_id, "source": source, "annotator": annotator, "rater": rater,
        "is_correct": is_correct, "grade": grade, "level": level, "errors": errors,
        "final": final, "extra": extra,
    }


def check_consistency(rows: Sequence[Mapping[str, Any]], wheres: Sequence[str | None] | None = None) -> None:
    """Raise :class:`RowError` for a second verdict by one rater on one run, or a run whose rows
    disagree on a run property (dimension, protocol, tested_model)."""
    seen: dict[tuple[str, str], str | None] = {}
    run_vals: dict[tuple[str, str], tuple[Any, str | None]] = {}
    for i, r in enumerate(rows):
        where = wheres[i] if wheres else None
        key = (r["run_id"], r["rater"])
        if key in seen:
            first = f" (first at {seen[key]})" if seen[key] else ""
            raise RowError("annotator", f"second verdict by {r['rater']} on run {r['run_id']!r}{first}", where)
        seen[key] = where
        for k in RUN_KEYS:
            v = r["extra"].get(k)
            if v is None:
                continue
            prev = run_vals.get((r["run_id"], k))
            if prev is None:
                run_vals[(r["run_id"], k)] = (v, where)
            elif prev[0] != v:
                at = f" at {prev[1]}" if prev[1] else ""
                raise RowError(k, f"run {r['run_id']!r} has {k}={v!r} here but {prev[0]!r}{at}", where)


def load_jsonl(lines: Iterable[str]) -> list[dict[str, Any]]:
    """Parse JSON-lines verdicts (blank lines skipped) into normalised rows.

    Raises :class:`RowError` whose message starts with "line N" and names the field.
    """
    rows: list[dict[str, Any]] = []
    wheres: list[str] = []
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"line {lineno}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise RowError("(json)", f"not valid JSON ({exc.msg} at column {exc.colno})", where) from None
        rows.append(normalize_row(obj, where))
        wheres.append(where)
    check_consistency(rows, wheres)
    return rows


def _prepare(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    out, wheres = [], []
    for i, r in enumerate(rows, start=1):
        if isinstance(r, Mapping) and "rater" in r and "level" in r and "extra" in r:
            out.append(dict(r))  # already normalised (load_jsonl)
        else:
            out.append(normalize_row(r, f"row {i}"))
        wheres.append(f"row {i}")
    check_consistency(out, wheres)
    # run properties apply to every row of the run (a human row need not repeat them)
    run_props: dict[str, dict[str, Any]] = defaultdict(dict)
    for r in out:
        for k in RUN_KEYS:
            if r["extra"].get(k) is not None:
                run_props[r["run_id"]][k] = r["extra"][k]
    for r in out:
        r["extra"] = {**r["extra"], **run_props.get(r["run_id"], {})}
    return out


# --------------------------------------------------------------------------------------------
# Reference and comparison
# --------------------------------------------------------------------------------------------


def _majority(votes: Sequence[bool], tie_break: str) -> bool | None:
    yes = sum(1 for v in votes if v)
    if 2 * yes > len(votes):
        return True
    if 2 * yes < len(votes):
        return False
    return None if tie_break == "exclude" else True


def build_reference(human_rows: Sequence[Mapping[str, Any]], tie_break: str = "exclude") -> dict[str, Any] | None:
    """The human reference of one run from its human verdict rows (rule: module docstring).

    Returns ``{"is_correct", "grade", "level", "errors", "n_humans", "adjudicated", "ties"}``
    (``grade`` is the mean, ``level`` the mean snapped to the grid), or None without rows.
    """
    if tie_break not in TIE_BREAKS:
        raise ValueError(f"tie_break must be one of {TIE_BREAKS}")
    rows = list(human_rows)
    if not rows:
        return None
    finals = [r for r in rows if r.get("final")]
    if finals:
        rows = finals
    ties: list[str] = []
    # correctness: majority of "incorrect" votes; a tie follows tie_break
    inc = _majority([not r["is_correct"] for r in rows], tie_break)
    if inc is None:
        ties.append("is_correct")
    is_correct = None if inc is None else not inc
    grades = [r["grade"] for r in rows if r["grade"] is not None]
    grade = _mean(grades)
    level = snap_grade(grade) if grade is not None else None
    flagged = [r["errors"] for r in rows if r["errors"] is not None]
    errors: dict[str, bool | None] | None = None
    if flagged:
        errors = {}
        for c in E_CODES:
            errors[c] = _majority([e[c] for e in flagged], tie_break)
            if errors[c] is None:
                ties.append(c)
    return {
        "is_correct": is_correct, "grade": grade, "level": level, "errors": errors,
        "n_humans": len(rows), "adjudicated": bool(finals), "ties": ties,
    }


def _label(ok: bool) -> str:
    return "correct" if ok else "incorrect"


def compare(pred: Mapping[str, Mapping[str, Any]], ref: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """All agreement numbers of ``pred`` against ``ref`` (both run_id -> verdict-like records with
    ``is_correct``, ``grade``, ``level``, ``errors``; a None field drops that run from that block)."""
    runs = sorted(set(pred) & set(ref))
    out: dict[str, Any] = {"n": len(runs)}
    # correctness
    pc = [(pred[r]["is_correct"], ref[r]["is_correct"]) for r in runs
          if pred[r]["is_correct"] is not None and ref[r]["is_correct"] is not None]
    p_lab = [_label(p) for p, _ in pc]
    r_lab = [_label(q) for _, q in pc]
    stats = prf(p_lab, r_lab, POSITIVE)
    out["correctness"] = {
        "n": len(pc),
        "agreement": _mean([1.0 if p == q else 0.0 for p, q in pc]),
        "kappa": cohen_kappa(p_lab, r_lab),
        "positive": POSITIVE,
        **{k: stats[k] for k in ("precision", "recall", "f1", "support", "predicted", "tp", "fp", "fn", "tn")},
    }
    # grade
    pg = [(pred[r], ref[r]) for r in runs if pred[r]["grade"] is not None and ref[r]["grade"] is not None]
    out["grade"] = {
        "n": len(pg),
        "mae": _mean([abs(p["grade"] - q["grade"]) for p, q in pg]),
        "exact": _mean([1.0 if abs(p["level"] - q["level"]) < 1e-6 else 0.0 for p, q in pg]),
        "within_0_2": _mean([1.0 if abs(p["level"] - q["level"]) <= 0.2 + 1e-6 else 0.0 for p, q in pg]),
        "qwk": quadratic_weighted_kappa([p["level"] for p, _ in pg], [q["level"] for _, q in pg], GRADES),
    }
    # flags
    both = [(pred[r]["errors"], ref[r]["errors"]) for r in runs
            if pred[r]["errors"] is not None and ref[r]["errors"] is not None]
    flags: dict[str, Any] = {}
    for c in E_CODES:
        pairs = [(p[c], q[c]) for p, q in both if p.get(c) is not None and q.get(c) is not None]
        s = prf([p for p, _ in pairs], [q for _, q in pairs], True)
        flags[c] = {
            "n": len(pairs),
            "agreement": _mean([1.0 if p == q else 0.0 for p, q in pairs]),
            "kappa": cohen_kappa([p for p, _ in pairs], [q for _, q in pairs]),
            **{k: s[k] for k in ("precision", "recall", "f1", "support", "predicted")},
        }
    out["flags"] = flags
    full = [(p, q) for p, q in both if all(q.get(c) is not None for c in E_CODES)
            and all(p.get(c) is not None for c in E_CODES)]
    out["error_set"] = {
        "n": len(full),
        "exact_match": _mean([1.0 if all(p[c] == q[c] for c in E_CODES) else 0.0 for p, q in full]),
    }
    return out


# --------------------------------------------------------------------------------------------
# The report
# --------------------------------------------------------------------------------------------


def _rater_sort_key(info: Mapping[str, Any]) -> tuple[int, str]:
    return (SOURCES.index(info["source"]), info["rater"])


def _core_report(rows: list[dict[str, Any]], tie_break: str, *, full: bool = True) -> dict[str, Any]:
    by_rater: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    info: dict[str, dict[str, Any]] = {}
    humans_by_run: dict[str, list[dict[str, Any]]] = defaultdict(list)
    finals_by_run: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        if r.get("final"):
            # an adjudication settles the reference; it is not one more rater (issue 18)
            finals_by_run[r["run_id"]].append(r)
            continue
        by_rater[r["rater"]][r["run_id"]] = r
        info.setdefault(r["rater"], {
            "rater": r["rater"], "source": r["source"], "annotator": r["annotator"],
            "judge_model": r["extra"].get("judge_model"), "prompt_version": r["extra"].get("prompt_version"),
        })
        if r["source"] == "human":
            humans_by_run[r["run_id"]].append(r)
    raters = sorted(info.values(), key=_rater_sort_key)
    for rinfo in raters:
        rinfo["n_runs"] = len(by_rater[rinfo["rater"]])

    reference = {run: build_reference(finals_by_run.get(run, []) + humans_by_run.get(run, []), tie_break)
                 for run in set(humans_by_run) | set(finals_by_run)}
    tie_counts = Counter(t for ref in reference.values() for t in ref["ties"])
    report: dict[str, Any] = {
        "n_rows": len(rows),
        "n_runs": len({r["run_id"] for r in rows}),
        "raters": raters,
        "reference": {
            "rule": (
                "per run: adjudicated (final) human verdicts if any, else all human verdicts; "
                "strict majority for correctness and for each flag; mean grade snapped to the 0.2 grid "
                f"(midpoints down); ties: {'dropped from that statistic' if tie_break == 'exclude' else 'resolved to incorrect / flag present'}"
            ),
            "tie_break": tie_break,
            "n_runs": len(reference),
            "n_adjudicated": sum(1 for ref in reference.values() if ref["adjudicated"]),
            "humans_per_run": dict(sorted(Counter(ref["n_humans"] for ref in reference.values()).items())),
            "ties": {k: tie_counts.get(k, 0) for k in ("is_correct", *E_CODES)},
        },
    }

    # each rater against the human reference (humans: against the other humans)
    vs_ref = []
    for rinfo in raters:
        name = rinfo["rater"]
        if rinfo["source"] == "human":
            ref = {}
            for run in by_rater[name]:
                others = [h for h in humans_by_run.get(run, []) if h["rater"] != name]
                built = build_reference(others, tie_break)
                if built is not None:
                    ref[run] = built
            against = "other humans (leave-one-out)"
        else:
            ref, against = reference, "human reference"
        vs_ref.append({"rater": name, "source": rinfo["source"], "against": against, **compare(by_rater[name], ref)})
    report["vs_reference"] = vs_ref
    # every rater against the adjudicated verdicts alone (runs with an adjudication)
    adjudicated = {run: build_reference(fs, tie_break) for run, fs in finals_by_run.items()}
    report["vs_adjudication"] = [
        {"rater": rinfo["rater"], "source": rinfo["source"], "against": "adjudicated final verdicts",
         **compare(by_rater[rinfo["rater"]], adjudicated)}
        for rinfo in raters if set(by_rater[rinfo["rater"]]) & set(adjudicated)]
    report["n_adjudications"] = sum(len(fs) for fs in finals_by_run.values())
    if not full:
        return report

    # every pair of raters with a run in common
    pairs = []
    for a, b in combinations(raters, 2):
        common = set(by_rater[a["rater"]]) & set(by_rater[b["rater"]])
        if not common:
            continue
        m = compare(by_rater[b["rater"]], by_rater[a["rater"]])
        pairs.append({"a": a["rater"], "b": b["rater"], "sources": f"{a['source']}-{b['source']}", **m})
    report["pairs"] = pairs

    # human-human ceiling
    hh = [p for p in pairs if p["sources"] == "human-human"]
    kappas = [p["correctness"]["kappa"] for p in hh if p["correctness"]["kappa"] is not None]
    agreements = [p["correctness"]["agreement"] for p in hh if p["correctness"]["agreement"] is not None]
    many = {run: hs for run, hs in humans_by_run.items() if len(hs) >= 3}
    fleiss_corr = fleiss_kappa([[sum(1 for h in hs if not h["is_correct"]), sum(1 for h in hs if h["is_correct"])]
                                for hs in many.values()]) if many else None
    grade_tables = []
    for hs in many.values():
        lv = [h["level"] for h in hs if h["level"] is not None]
        if len(lv) >= 2:
            grade_tables.append([sum(1 for x in lv if abs(x - g) < 1e-6) for g in GRADES])
    counts = [len(hs) for hs in many.values()]
    report["human_ceiling"] = {
        "pairwise": [{"a": p["a"], "b": p["b"], "n": p["correctness"]["n"],
                      "agreement": p["correctness"]["agreement"], "kappa": p["correctness"]["kappa"],
                      "grade_qwk": p["grade"]["qwk"]} for p in hh],
        "mean_pairwise_agreement": _mean(agreements),
        # the mean of pairwise Cohen kappas is Light's (1971) kappa
        "mean_pairwise_kappa": _mean(kappas),
        "fleiss": {
            "n_runs": len(many),
            "raters_per_run": [min(counts), max(counts)] if counts else None,
            "correctness_kappa": fleiss_corr,
            "grade_kappa": fleiss_kappa(grade_tables) if grade_tables else None,
        },
    }

    # judge bias per tested model (the paper's Table 9): rater CR - human CR on the same runs
    bias = []
    for rinfo in raters:
        if rinfo["source"] == "human":
            continue
        per_model: dict[Any, list[str]] = defaultdict(list)
        for run, row in by_rater[rinfo["rater"]].items():
            tm = row["extra"].get("tested_model")
            if tm is not None and run in reference:
                per_model[tm].append(run)
        for tm in sorted(per_model, key=str):
            runs = per_model[tm]
            mine = by_rater[rinfo["rater"]]
            cr_runs = [r for r in runs if reference[r]["is_correct"] is not None]
            g_runs = [r for r in runs if reference[r]["grade"] is not None and mine[r]["grade"] is not None]
            h_cr = _mean([1.0 if reference[r]["is_correct"] else 0.0 for r in cr_runs])
            j_cr = _mean([1.0 if mine[r]["is_correct"] else 0.0 for r in cr_runs])
            h_g = _mean([reference[r]["grade"] for r in g_runs])
            j_g = _mean([mine[r]["grade"] for r in g_runs])
            bias.append({
                "rater": rinfo["rater"], "tested_model": tm,
                "n": len(cr_runs), "human_cr": h_cr, "judge_cr": j_cr,
                "cr_bias": None if h_cr is None else j_cr - h_cr,
                "n_grade": len(g_runs), "human_grade": h_g, "judge_grade": j_g,
                "grade_bias": None if h_g is None else j_g - h_g,
            })
    report["bias"] = bias
    return report


def _partition(rows: list[dict[str, Any]], keys: Sequence[str]) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """Split rows by the values of ``keys``.  Run keys split runs (a run without the key forms the
    null group); for any other key a row without it belongs to every group of that key (so the
    human rows serve as the reference in each judge_model group)."""
    wild = {k for k in keys if k not in RUN_KEYS and any(r["extra"].get(k) is not None for r in rows)}

    def values(r: Mapping[str, Any]) -> tuple[Any, ...]:
        return tuple(r["extra"].get(k) for k in keys)

    combos = sorted({values(r) for r in rows if all(r["extra"].get(k) is not None for k in wild)},
                    key=lambda t: tuple("" if v is None else str(v) for v in t))
    out = []
    for combo in combos:
        members = [r for r in rows
                   if all(r["extra"].get(k) == v or (k in wild and r["extra"].get(k) is None)
                          for k, v in zip(keys, combo))]
        out.append((dict(zip(keys, combo)), members))
    return out


def read_rows(rows: Iterable[Mapping[str, Any]], reading: str = DEFAULT_READING) -> tuple[list[dict], int]:
    """The rows with their judge verdicts read under ``reading``; returns ``(rows, dropped)``.

    ``studio``: the rows as given (a judge row's verdict is the studio's reading; a ``raw`` key is
    dropped).  ``apb``: each judge row is re-read from its ``raw`` answer by
    :func:`evaluation.judge.verdict.parse_verdict_apb` (``setting`` and ``regime`` from the row or
    its ``protocol``; the step-wise horizon from the protocol label), with no judge call.  A judge
    row the benchmark's code drops, or for which it counts no correctness, leaves the report
    (``dropped`` counts them); a grade outside [0, 1] (the benchmark keeps grades as given) drops
    out of the grade statistics only.  People's and checkers' rows are unchanged.  Raises
    :class:`RowError` for a judge row without ``raw`` in the apb reading, ``ValueError`` for an
    unknown reading.
    """
    reading = normalize_reading(reading)
    out: list[dict] = []
    dropped = 0
    for i, row in enumerate(rows, start=1):
        if isinstance(row, Mapping) and "rater" in row and "level" in row and "extra" in row:
            # a row normalised by load_jsonl: back to its plain form (normalize_row runs again)
            row = {**{k: row[k] for k in _CORE_KEYS if k in row}, **row["extra"]}
        if not isinstance(row, Mapping) or row.get("source") != "judge" or reading == "studio":
            out.append({k: v for k, v in row.items() if k != "raw"} if isinstance(row, Mapping) else row)
            continue
        raw = row.get("raw")
        if not isinstance(raw, str):
            raise RowError("raw", "the apb reading re-reads a judge row's raw answer, and this row has none", f"row {i}")
        protocol = row.get("protocol")
        try:
            setting = row.get("setting") or protocol_setting(protocol)[0]
            regime = row.get("regime") or (protocol_setting(protocol)[1] if protocol else None)
            v = parse_verdict(raw, setting=setting, regime=regime, reading="apb", horizon=protocol_horizon(protocol))
        except (VerdictParseError, ValueError):
            v = None
        if v is None or v.is_correct is None:
            dropped += 1
            continue
        grade = v.grade if v.grade is not None and math.isfinite(v.grade) and 0 <= v.grade <= 1 else None
        read = {k: x for k, x in row.items() if k not in ("raw", "setting", "regime")}
        read.update(is_correct=v.is_correct, grade=grade, errors=None if v.outcome else dict(v.errors))
        out.append(read)
    return out, dropped


def agreement_report(rows: list[dict], *, group_by: Sequence[str] = (), tie_break: str = "exclude",
                     reading: str = DEFAULT_READING) -> dict[str, Any]:
    """Agreement of judges and code checkers with the human reference, of every rater pair, the
    human-human ceiling, judge bias per tested model, and breakdowns.

    ``rows``: verdict rows as in the module docstring (raw dicts, or rows from
    :func:`load_jsonl`).  ``group_by``: keys to split by; each group gets a full sub-report under
    ``groups``.  ``tie_break``: "exclude" (default) or "incorrect" (see the reference rule).

    Top-level keys: ``n_rows``, ``n_runs``, ``raters``, ``reference``, ``vs_reference``,
    ``vs_adjudication`` (each rater against the adjudicated final verdicts only, on the runs that
    have one), ``n_adjudications``, ``pairs``, ``human_ceiling``, ``bias``, ``breakdowns`` (``vs_reference`` per dimension, per
    protocol and per judge_model+prompt_version, present when some row carries the key) and
    ``groups`` (only with ``group_by``), ``reading`` (how the judges' answers were read,
    ``studio`` or ``apb``: :func:`read_rows`) and ``reading_dropped`` (judge rows that reading
    does not count).  Raises :class:`RowError` for a bad row.
    """
    if tie_break not in TIE_BREAKS:
        raise ValueError(f"tie_break must be one of {', '.join(TIE_BREAKS)}, got {tie_break!r}")
    reading = normalize_reading(reading)
    rows, dropped = read_rows(rows, reading)
    keys = [k.strip() for k in group_by if k and k.strip()]
    for k in keys:
        if k in _CORE_KEYS:
            raise ValueError(f"cannot group by the verdict field {k!r}")
    prepared = _prepare(rows)
    report = _core_report(prepared, tie_break)
    breakdowns: dict[str, Any] = {}
    for spec in AUTO_BREAKDOWNS:
        if not any(r["extra"].get(k) is not None for r in prepared for k in spec):
            continue
        name = "+".join(spec)
        breakdowns[name] = [
            {"key": key, "n_runs": sub["n_runs"], "vs_reference": sub["vs_reference"]}
            for key, members in _partition(prepared, spec)
            for sub in [_core_report(members, tie_break, full=False)]
        ]
    report["breakdowns"] = breakdowns
    if keys:
        report["group_by"] = keys
        report["groups"] = [{"key": key, **_core_report(members, tie_break)}
                            for key, members in _partition(prepared, keys)]
    report["reading"] = reading
    report["reading_dropped"] = dropped
    return report
