"""The judge's aggregate report page: per setting x split x regime x judge configuration x agent,
the correctness rate (derived and the judge's own, labelled), mean grade, E1-E6 rates and the
robustness figures (tool-broken outcome shares, unsolvable refusal per type, distractor use),
with PNG plots."""
from __future__ import annotations

from django.http import Http404, HttpResponse, HttpResponseBadRequest
from django.shortcuts import render

from evaluation.judge.report import judge_report
from evaluation.judge.verdict import E_CODES, READINGS, TOOL_BROKEN_OUTCOMES, UNSOLVABLE_TYPES, normalize_reading
from evaluation.leaderboard import figure_png
from evaluation.selectors.judge_report import judge_report_rows
from studio.permissions import Action, require

PLOTS = ("correctness", "errors", "tool-broken", "unsolvable")


def _group_label(g: dict) -> str:
    parts = [g["setting"], g["regime"], g["judge"]]
    for key in ("tested_model", "protocol"):
        if g.get(key) and g[key] != g["setting"]:
            parts.append(g[key])
    return " · ".join(parts)


def _report(request) -> dict | HttpResponseBadRequest:
    """The report under ``?reading=studio|apb`` (default studio); a 400 response for another value."""
    try:
        reading = normalize_reading(request.GET.get("reading") or None)
    except ValueError as exc:
        return HttpResponseBadRequest(f"reading: {exc}", content_type="text/plain")
    return judge_report(judge_report_rows(reading=reading), reading=reading)


def judge_report_page(request):
    """The report as tables and plots (permission ``agreement.view``), under ``?reading=`` (studio by
    default, or apb: the stored raw answers re-read as the planning benchmark's code does, no judge call)."""
    require(request.user, Action.AGREEMENT_VIEW)
    report = _report(request)
    if isinstance(report, HttpResponseBadRequest):
        return report
    for g in report["groups"]:
        g["label"] = _group_label(g)
    return render(request, "frontend/judge_report.html", {
        "report": report, "labels": report["labels"], "readings": READINGS, "codes": E_CODES, "outcomes": list(TOOL_BROKEN_OUTCOMES.values()),
        "unsolvable_types": UNSOLVABLE_TYPES, "has_data": bool(report["groups"]),
        "has_tool_broken": any(g["tool_broken"] for g in report["groups"]),
        "has_unsolvable": any(g["unsolvable"] for g in report["groups"]),
    })


def judge_report_plot(request, name: str):
    """PNG plots (matplotlib, Agg): ``correctness`` (CR % derived and the judge's per group),
    ``errors`` (E1-E6 % per group), ``tool-broken`` (outcome shares, stacked), ``unsolvable``
    (refusal rate per type)."""
    require(request.user, Action.AGREEMENT_VIEW)
    if name not in PLOTS:
        raise Http404("no such plot")
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    report = _report(request)
    if isinstance(report, HttpResponseBadRequest):
        return report
    groups = report["groups"]
    if name == "tool-broken":
        groups = [g for g in groups if g["tool_broken"]]
    elif name == "unsolvable":
        groups = [g for g in groups if g["unsolvable"]]
    fig = Figure(figsize=(8, 3.6), dpi=100)
    ax = fig.add_subplot(1, 1, 1)
    xs = list(range(len(groups)))
    labels = [_group_label(g) for g in groups]

    def val(x):
        return 0.0 if x is None else float(x)

    if not groups:
        ax.text(0.5, 0.5, "no verdicts yet", ha="center", va="center")
        ax.set_axis_off()
    elif name == "correctness":
        w = 0.38
        ax.bar([x - w / 2 for x in xs], [val(g["cr_derived_pct"]) for g in groups], w, label="CR % derived")
        ax.bar([x + w / 2 for x in xs], [val(g["cr_judge_pct"]) for g in groups], w, label="CR % judge's is_correct")
        ax.set_ylim(0, 100)
        ax.set_title(f"Correctness rate per group ({report['reading']} reading)")
    elif name == "errors":
        w = 0.8 / len(E_CODES)
        for i, c in enumerate(E_CODES):
            ax.bar([x - 0.4 + w * (i + 0.5) for x in xs], [val(g["e_rates_pct"][c]) for g in groups], w, label=c)
        ax.set_ylim(0, 100)
        ax.set_title(f"E1–E6 incidence per group, % ({report['reading']} reading)")
    elif name == "tool-broken":
        bottom = [0.0] * len(groups)
        for o in TOOL_BROKEN_OUTCOMES.values():
            h = [val(g["tool_broken"]["shares_pct"][o]) for g in groups]
            ax.bar(xs, h, 0.6, bottom=bottom, label=o)
            bottom = [b + y for b, y in zip(bottom, h)]
        ax.set_ylim(0, 100)
        ax.set_title(f"Tool-broken outcome shares, % ({report['reading']} reading)")
    else:
        types = list(UNSOLVABLE_TYPES)
        w = 0.8 / len(types)
        for i, t in enumerate(types):
            ax.bar([x - 0.4 + w * (i + 0.5) for x in xs],
                   [val((g["unsolvable"].get(t) or {}).get("refusal_rate_pct")) for g in groups], w,
                   label=UNSOLVABLE_TYPES[t])
        ax.set_ylim(0, 100)
        ax.set_title(f"Unsolvable: refusal rate per type, % ({report['reading']} reading)")
    if groups:
        ax.set_xticks(xs, labels, rotation=15, ha="right", fontsize=7)
        ax.legend(fontsize=7)
        ax.grid(axis="y", alpha=0.3)
    resp = HttpResponse(figure_png(fig), content_type="image/png")
    resp["Cache-Control"] = "no-store"
    return resp
