"""``manage.py judge_report``: the judge's aggregate report per setting x split x regime x judge.

    python manage.py judge_report [--verdicts FILE.jsonl] [--reading studio|apb] [--by tested_model,...] [--json]

Without ``--verdicts`` it reads the studio's stored judge and rule-checker verdicts; with it, one
verdict row per line (fields in :mod:`evaluation.judge.report`) and no database.  ``--reading apb``
re-reads the stored raw answers as the planning benchmark's code does (no judge call; with
``--verdicts`` the rows must have been read that way, their ``reading`` says so; a row that
names no reading is the studio's stored one, so ``--reading apb`` refuses it: re-read it first).  The output
names the reading.  ``--json`` prints
the whole report; otherwise one table of the headline figures and the robustness breakdowns.
"""
from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from evaluation.judge.options import DEFAULT_EXTRA_KEYS, DEFAULT_READING, READINGS
from kernel.taxonomy import E_CODES


def _f(x, digits: int = 2) -> str:
    return "-" if x is None else (f"{x:.{digits}f}" if isinstance(x, float) else str(x))


class Command(BaseCommand):
    help = "Aggregate judge verdicts per setting, split, regime and judge configuration (CR %, grade, E rates, robustness)."

    def add_arguments(self, parser):
        parser.add_argument("--verdicts", help="JSON-lines file of verdict rows instead of the database")
        parser.add_argument("--by", default=",".join(DEFAULT_EXTRA_KEYS),
                            help="extra grouping keys after setting, split, regime, judge (comma-separated; '' for none)")
        parser.add_argument("--reading", choices=READINGS, default=DEFAULT_READING,
                            help="how the judge's answers are read: studio (default) or apb (the planning "
                                 "benchmark's own parse results; re-reads the stored answers, no judge call)")
        parser.add_argument("--json", action="store_true", help="print the report as JSON")

    def handle(self, *args, **opts):
        # imported here: ``manage.py judge_report --help`` loads this module before Django starts (manage.py)
        from evaluation.judge.report import ReportRowError, judge_report
        from evaluation.selectors.judge_report import judge_report_rows
        from evaluation.services.judge import STORED_READING

        if opts["verdicts"]:
            path = Path(opts["verdicts"])
            if not path.is_file():
                raise CommandError(f"--verdicts: no file {path}")
            rows = []
            for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise CommandError(f"{path}: line {i}: not JSON ({exc.msg})") from None
                if isinstance(row, dict) and not row.get("reading"):
                    # a row that names no reading is a verdict as the studio stores it: never
                    # reported under another reading's label (judge_report refuses the mix)
                    row["reading"] = STORED_READING
                rows.append(row)
        else:
            rows = judge_report_rows(reading=opts["reading"])
        extra = tuple(k.strip() for k in (opts["by"] or "").split(",") if k.strip())
        try:
            report = judge_report(rows, extra_keys=extra, reading=opts["reading"])
        except ReportRowError as exc:
            raise CommandError(f"{opts['verdicts'] or 'database'}: {exc}") from None
        if opts["json"]:
            self.stdout.write(json.dumps(report, indent=2, ensure_ascii=False))
            return
        keys = report["group_keys"]
        self.stdout.write(f"reading: {report['reading']}")
        head = keys + ["n", "failed", "CR% derived", "CR% judge", "grade"] + [f"{c}%" for c in E_CODES] + ["robustness"]
        lines = []
        for g in report["groups"]:
            extra_txt = []
            if g["tool_broken"]:
                extra_txt.append(" ".join(f"{k[:4]}={_f(v, 1)}" for k, v in g["tool_broken"]["shares_pct"].items()))
            if g["unsolvable"]:
                extra_txt.append(" ".join(f"{k}={_f(v['refusal_rate_pct'], 1)}" for k, v in g["unsolvable"].items()))
            if g["distractors"]:
                extra_txt.append(f"distractor use {_f(g['distractors']['use_rate_pct'], 1)}% ExtUse={g['distractors']['ext_use']}")
            lines.append([str(g.get(k) or "") for k in keys] + [str(g["n"]), str(g["failed"]), _f(g["cr_derived_pct"]),
                         _f(g["cr_judge_pct"]), _f(g["mean_grade"], 4)] + [_f(g["e_rates_pct"][c]) for c in E_CODES]
                         + ["; ".join(extra_txt)])
        widths = [max(len(h), *(len(r[i]) for r in lines)) if lines else len(h) for i, h in enumerate(head)]
        self.stdout.write("  ".join(h.ljust(w) for h, w in zip(head, widths)))
        for r in lines:
            self.stdout.write("  ".join(c.ljust(w) for c, w in zip(r, widths)))
        if not lines:
            self.stdout.write("(no verdicts)")
