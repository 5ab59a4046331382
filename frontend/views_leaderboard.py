"""Leaderboard pages: the official Table 4 numbers, the paper's breakdowns, labelled extras,
plots (PNG) and the per-record exports (CSV, Parquet)."""
from __future__ import annotations

from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from evaluation import leaderboard as lb
from evaluation.selectors_leaderboard import leaderboard_data, leaderboard_rows

N_BOOT = 1000
SEED = 0


def _build(n_boot: int = N_BOOT) -> dict:
    runs, rows = leaderboard_data()
    data = lb.build(runs, rows, n_boot=n_boot, seed=SEED)
    data["n_records"] = len(rows)
    data["n_no_task"] = sum(1 for r in rows if r["task_id"] is None)
    return data


@require_GET
def leaderboard_page(request):
    data = _build()
    return render(request, "frontend/leaderboard.html", {
        **data, "dimensions": lb.DIMENSIONS, "metric_labels": [lb.METRIC_LABELS[m] for m in lb.METRICS],
        "metrics": lb.METRICS, "plots": lb.PLOTS, "n_boot": N_BOOT, "seed": SEED,
        "length_buckets": lb.LENGTH_BUCKETS,
    })


@require_GET
def leaderboard_csv(request):
    resp = HttpResponse(lb.to_csv_bytes(leaderboard_rows()), content_type="text/csv; charset=utf-8")
    resp["Content-Disposition"] = 'attachment; filename="leaderboard_records.csv"'
    return resp


@require_GET
def leaderboard_parquet(request):
    try:
        body = lb.to_parquet_bytes(leaderboard_rows())
    except ImportError:
        return HttpResponse("Parquet export needs pyarrow, which is not installed.", status=501,
                            content_type="text/plain; charset=utf-8")
    resp = HttpResponse(body, content_type="application/vnd.apache.parquet")
    resp["Content-Disposition"] = 'attachment; filename="leaderboard_records.parquet"'
    return resp


@require_GET
def leaderboard_plot(request, name: str):
    if name not in lb.PLOTS:
        raise Http404(f"no plot {name!r}; plots: {', '.join(lb.PLOTS)}")
    runs, rows = leaderboard_data(extras=False)  # plots use official per-record scores only
    if name == "dimensions":
        png = lb.plot_dimensions(lb.official_table(runs, rows))
    elif name == "length":
        png = lb.plot_length(lb.length_breakdown(runs, rows))
    else:
        png = lb.plot_modality(lb.modality_breakdown(runs, rows))
    resp = HttpResponse(png, content_type="image/png")
    resp["Cache-Control"] = "no-store"
    return resp
