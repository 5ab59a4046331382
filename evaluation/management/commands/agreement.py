"""``manage.py agreement``: judge / checker / human agreement from a JSON-lines file of verdicts.

    python manage.py agreement --verdicts FILE.jsonl [--group-by dimension,protocol] [--tie-break exclude|incorrect]
        [--reading studio|apb] [--json]

One verdict per line (see :mod:`evaluation.agreement` for the fields and the human-reference
rule).  ``--reading apb`` re-reads each judge row from its ``raw`` answer as the planning
benchmark's code does (:func:`evaluation.agreement.read_rows`; no judge call); the output names
the reading.  ``--json`` prints the whole report; otherwise readable tables.  Touches no database.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from evaluation.agreement import E_CODES, TIE_BREAKS, RowError, agreement_report, load_jsonl
from evaluation.judge.verdict import DEFAULT_READING, READINGS


def _rounded(obj: Any, digits: int = 6) -> Any:
    if isinstance(obj, float):
        return None if math.isnan(obj) else round(obj, digits)
    if isinstance(obj, dict):
        return {k: _rounded(v, digits) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_rounded(v, digits) for v in obj]
    return obj


def _f(x: Any, digits: int = 3, signed: bool = False) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:+.{digits}f}" if signed else f"{x:.{digits}f}"
    return str(x)


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(headers, widths)))]
    lines.append("  ".join("-" * w for w in widths))
    for r in rows:
        lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))))
    return lines


def _vs_reference_lines(entries: list[dict[str, Any]]) -> list[str]:
    head = ["rater", "n", "agree", "kappa", "P(inc)", "R(inc)", "F1(inc)", "MAE", "exact", "<=0.2", "qwk", "set="]
    rows = []
    for e in entries:
        c, g = e["correctness"], e["grade"]
        rows.append([e["rater"], str(c["n"]), _f(c["agreement"]), _f(c["kappa"]), _f(c["precision"]),
                     _f(c["recall"]), _f(c["f1"]), _f(g["mae"]), _f(g["exact"]), _f(g["within_0_2"]),
                     _f(g["qwk"]), _f(e["error_set"]["exact_match"])])
    flag_head = ["rater"] + [f"{c} F1 (sup)" for c in E_CODES]
    flag_rows = [[e["rater"]] + [f"{_f(e['flags'][c]['f1'])} ({e['flags'][c]['support']})" for c in E_CODES]
                 for e in entries]
    return _table(head, rows) + [""] + _table(flag_head, flag_rows)


def render_text(report: dict[str, Any]) -> str:
    out: list[str] = []
    src = {}
    for r in report["raters"]:
        src[r["source"]] = src.get(r["source"], 0) + 1
    out.append(f"reading: {report.get('reading', 'studio')}"
               + (f" ({report['reading_dropped']} judge verdicts not counted by it)" if report.get("reading_dropped") else ""))
    out.append(f"{report['n_rows']} verdicts on {report['n_runs']} runs; raters: "
               + ", ".join(f"{n} {s}" for s, n in src.items()))
    ref = report["reference"]
    ties = ", ".join(f"{k} {v}" for k, v in ref["ties"].items() if v) or "none"
    out.append(f"Human reference on {ref['n_runs']} runs ({ref['n_adjudicated']} adjudicated); ties: {ties}")
    out.append(f"  rule: {ref['rule']}")
    out.append("")
    out.append("Against the human reference (humans: against the other humans; 'inc' = incorrect is positive)")
    out += _vs_reference_lines(report["vs_reference"])
    hc = report["human_ceiling"]
    out.append("")
    out.append("Human-human ceiling")
    if hc["pairwise"]:
        out += _table(["pair", "n", "agree", "kappa", "grade qwk"],
                      [[f"{p['a']} ~ {p['b']}", str(p["n"]), _f(p["agreement"]), _f(p["kappa"]), _f(p["grade_qwk"])]
                       for p in hc["pairwise"]])
        out.append(f"mean pairwise agreement {_f(hc['mean_pairwise_agreement'])}, "
                   f"mean pairwise kappa {_f(hc['mean_pairwise_kappa'])}")
    else:
        out.append("  (no run scored by two humans)")
    fl = hc["fleiss"]
    if fl["n_runs"]:
        out.append(f"Fleiss kappa over {fl['n_runs']} runs with {fl['raters_per_run'][0]}-{fl['raters_per_run'][1]} "
                   f"humans: correctness {_f(fl['correctness_kappa'])}, grade {_f(fl['grade_kappa'])}")
    if report["bias"]:
        out.append("")
        out.append("Judge bias per tested model (judge minus human, same runs)")
        out += _table(["rater", "tested model", "n", "human CR", "judge CR", "bias", "human grade", "judge grade", "bias"],
                      [[b["rater"], str(b["tested_model"]), str(b["n"]), _f(b["human_cr"]), _f(b["judge_cr"]),
                        _f(b["cr_bias"], signed=True), _f(b["human_grade"]), _f(b["judge_grade"]),
                        _f(b["grade_bias"], signed=True)] for b in report["bias"]])
    for name, groups in report.get("breakdowns", {}).items():
        for g in groups:
            label = ", ".join(f"{k}={v}" for k, v in g["key"].items())
            out.append("")
            out.append(f"By {name}: {label} ({g['n_runs']} runs)")
            out += _vs_reference_lines([e for e in g["vs_reference"] if e["source"] != "human"] or g["vs_reference"])
    for g in report.get("groups", []):
        label = ", ".join(f"{k}={v}" for k, v in g["key"].items())
        out.append("")
        out.append(f"Group {label} ({g['n_runs']} runs)")
        out += _vs_reference_lines(g["vs_reference"])
    return "\n".join(out) + "\n"


class Command(BaseCommand):
    help = "Agreement of LLM judges and rule checks with human scorers, from a JSON-lines file of verdicts."
    requires_system_checks = []
    requires_migrations_checks = False

    def add_arguments(self, parser):
        parser.add_argument("--verdicts", type=Path, required=True, help="JSON-lines file, one verdict per line")
        parser.add_argument("--group-by", default="", help="comma-separated keys, e.g. dimension,protocol")
        parser.add_argument("--tie-break", choices=TIE_BREAKS, default="exclude",
                            help="a human tie: drop the run from that statistic (default) or count it incorrect")
        parser.add_argument("--reading", choices=READINGS, default=DEFAULT_READING,
                            help="how judge answers are read: studio (default: the rows' verdicts as given) or apb "
                                 "(each judge row re-read from its raw answer as the planning benchmark's code "
                                 "reads it; no judge call)")
        parser.add_argument("--json", action="store_true", help="print the report as JSON")

    def handle(self, *args, **opts):
        path: Path = opts["verdicts"]
        if not path.is_file():
            raise CommandError(f"verdicts file not found: {path}")
        try:
            with path.open(encoding="utf-8") as fh:
                rows = load_jsonl(fh)
        except RowError as exc:
            raise CommandError(f"{path}: {exc}") from None
        except UnicodeDecodeError as exc:
            raise CommandError(f"{path}: not UTF-8 text ({exc.reason})") from None
        if not rows:
            raise CommandError(f"{path}: no verdicts")
        group_by = [k.strip() for k in (opts["group_by"] or "").split(",") if k.strip()]
        try:
            report = agreement_report(rows, group_by=group_by, tie_break=opts["tie_break"], reading=opts["reading"])
        except (RowError, ValueError) as exc:
            raise CommandError(str(exc)) from None
        if opts["json"]:
            self.stdout.write(json.dumps(_rounded(report), indent=2, ensure_ascii=False, default=str))
        else:
            self.stdout.write(render_text(report), ending="")
